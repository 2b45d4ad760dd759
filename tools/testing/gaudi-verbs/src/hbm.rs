// SPDX-License-Identifier: GPL-2.0

//! Device memory (HBM) of gaudi_ib: blocks allocated and exported as
//! dma-bufs (`GAUDI_IB_OBJECT_HBM`), and memory regions of dma-bufs
//! (`UVERBS_METHOD_REG_DMABUF_MR`), so that remote WRITEs land in HBM.

use crate::uapi::*;
use crate::{ioctl, Attr, Context, Mr, Pd};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A block of device memory.
#[derive(Debug)]
pub struct Hbm {
    pub handle: u32,
    /// Offset in the device's memory (BAR 4).
    pub offset: u64,
    pub length: u64,
}

impl Context {
    /// `GAUDI_IB_METHOD_QUERY_DEVICE`: the programming model and the
    /// device memory.
    pub fn query_device_info(&self) -> io::Result<gaudi_ib_device_info> {
        let mut info = gaudi_ib_device_info::default();
        ioctl(
            self.file(),
            GAUDI_IB_OBJECT_DEVICE,
            GAUDI_IB_METHOD_QUERY_DEVICE,
            [Attr::output(GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &mut info)],
        )?;
        Ok(info)
    }

    /// `GAUDI_IB_METHOD_HBM_ALLOC`: `length` bytes of device memory.
    pub fn hbm_alloc(&self, length: u64) -> io::Result<Hbm> {
        let req = gaudi_ib_hbm_alloc {
            length,
            ..Default::default()
        };
        let mut resp = gaudi_ib_hbm_alloc_resp::default();
        let attrs = ioctl(
            self.file(),
            GAUDI_IB_OBJECT_HBM,
            GAUDI_IB_METHOD_HBM_ALLOC,
            [
                Attr::handle(GAUDI_IB_ATTR_HBM_ALLOC_HANDLE, 0),
                Attr::input(GAUDI_IB_ATTR_HBM_ALLOC_REQ, &req),
                Attr::output(GAUDI_IB_ATTR_HBM_ALLOC_RESP, &mut resp),
            ],
        )?;
        Ok(Hbm {
            handle: attrs[0].data() as u32,
            offset: resp.offset,
            length: resp.length,
        })
    }

    /// `GAUDI_IB_METHOD_HBM_EXPORT`: the block as a dma-buf; `flags` of `enum
    /// gaudi_ib_hbm_export_flags`.
    pub fn hbm_export(&self, hbm: &Hbm, flags: u32) -> io::Result<OwnedFd> {
        let req = gaudi_ib_hbm_export {
            flags,
            ..Default::default()
        };
        let mut resp = gaudi_ib_hbm_export_resp::default();
        ioctl(
            self.file(),
            GAUDI_IB_OBJECT_HBM,
            GAUDI_IB_METHOD_HBM_EXPORT,
            [
                Attr::handle(GAUDI_IB_ATTR_HBM_EXPORT_HANDLE, hbm.handle),
                Attr::input(GAUDI_IB_ATTR_HBM_EXPORT_REQ, &req),
                Attr::output(GAUDI_IB_ATTR_HBM_EXPORT_RESP, &mut resp),
            ],
        )?;
        // SAFETY: the kernel installed a new descriptor for this process.
        Ok(unsafe { OwnedFd::from_raw_fd(resp.fd as i32) })
    }

    /// `GAUDI_IB_METHOD_HBM_DESTROY`. Dma-bufs of the block keep it
    /// allocated until they are released.
    pub fn hbm_destroy(&self, hbm: Hbm) -> io::Result<()> {
        ioctl(
            self.file(),
            GAUDI_IB_OBJECT_HBM,
            GAUDI_IB_METHOD_HBM_DESTROY,
            [Attr::handle(GAUDI_IB_ATTR_HBM_DESTROY_HANDLE, hbm.handle)],
        )
        .map(|_| ())
    }

    /// Register `len` bytes at `offset` of dma-buf `fd` as a memory region
    /// of `pd` whose first byte has address `iova`
    /// (`UVERBS_METHOD_REG_DMABUF_MR`, as `ibv_reg_dmabuf_mr()`). The
    /// region's device VA comes from [`Context::query_mr`].
    pub fn reg_dmabuf_mr(
        &self,
        pd: &Pd,
        fd: &impl AsRawFd,
        offset: u64,
        len: u64,
        iova: u64,
        access: u32,
    ) -> io::Result<Mr> {
        let mut lkey = 0u32;
        let mut rkey = 0u32;
        let fd = fd.as_raw_fd() as u32;
        let attrs = ioctl(
            self.file(),
            UVERBS_OBJECT_MR,
            UVERBS_METHOD_REG_DMABUF_MR,
            [
                Attr::handle(UVERBS_ATTR_REG_DMABUF_MR_HANDLE, 0),
                Attr::handle(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd.handle),
                Attr::value(UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset),
                Attr::value(UVERBS_ATTR_REG_DMABUF_MR_LENGTH, len),
                Attr::value(UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova),
                Attr::input(UVERBS_ATTR_REG_DMABUF_MR_FD, &fd),
                Attr::value(UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access.into()),
                Attr::output(UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &mut lkey),
                Attr::output(UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &mut rkey),
            ],
        )?;
        let mut mr = Mr {
            handle: attrs[0].data() as u32,
            lkey,
            rkey,
            resp: gaudi_ib_reg_mr_resp::default(),
        };
        // The method has no driver reply: the device VA comes from QUERY_MR.
        let info = self.query_mr(&mr)?;
        mr.resp.page_shift = info.page_shift;
        mr.resp.mmu_va = info.mmu_va;
        Ok(mr)
    }
}
