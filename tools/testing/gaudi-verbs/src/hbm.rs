// SPDX-License-Identifier: GPL-2.0

//! Device memory (HBM) of gaudi_ib: blocks allocated and exported as
//! dma-bufs (`GAUDI_IB_OBJECT_HBM`), and memory regions of dma-bufs
//! (`UVERBS_METHOD_REG_DMABUF_MR`), so that remote WRITEs land in HBM.

use crate::dv::GAUDI_IB_OBJECT_DEVICE;
use crate::{ioctl, Attr, Context, Mr, Pd, RegMrResp, NS_DRIVER};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// gaudi_user_ioctl_cmds.h
pub const GAUDI_IB_OBJECT_HBM: u16 = NS_DRIVER + 2;
pub const METHOD_HBM_ALLOC: u16 = NS_DRIVER;
pub const METHOD_HBM_DESTROY: u16 = NS_DRIVER + 1;
pub const METHOD_HBM_EXPORT: u16 = NS_DRIVER + 2;
pub const ATTR_HBM_ALLOC_HANDLE: u16 = NS_DRIVER;
pub const ATTR_HBM_ALLOC_REQ: u16 = NS_DRIVER + 1;
pub const ATTR_HBM_ALLOC_RESP: u16 = NS_DRIVER + 2;
pub const ATTR_HBM_DESTROY_HANDLE: u16 = NS_DRIVER;
pub const ATTR_HBM_EXPORT_HANDLE: u16 = NS_DRIVER;
pub const ATTR_HBM_EXPORT_REQ: u16 = NS_DRIVER + 1;
pub const ATTR_HBM_EXPORT_RESP: u16 = NS_DRIVER + 2;
/// `GAUDI_IB_HBM_EXPORT_CLOEXEC`.
pub const HBM_EXPORT_CLOEXEC: u32 = 1;

// ib_user_ioctl_cmds.h
const UVERBS_OBJECT_MR: u16 = 7;
const UVERBS_METHOD_REG_DMABUF_MR: u16 = 4;
const ATTR_REG_DMABUF_MR_HANDLE: u16 = 0;
const ATTR_REG_DMABUF_MR_PD_HANDLE: u16 = 1;
const ATTR_REG_DMABUF_MR_OFFSET: u16 = 2;
const ATTR_REG_DMABUF_MR_LENGTH: u16 = 3;
const ATTR_REG_DMABUF_MR_IOVA: u16 = 4;
const ATTR_REG_DMABUF_MR_FD: u16 = 5;
const ATTR_REG_DMABUF_MR_ACCESS_FLAGS: u16 = 6;
const ATTR_REG_DMABUF_MR_RESP_LKEY: u16 = 7;
const ATTR_REG_DMABUF_MR_RESP_RKEY: u16 = 8;

/// `struct gaudi_ib_hbm_alloc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HbmAlloc {
    pub comp_mask: u32,
    pub reserved: u32,
    pub length: u64,
}

/// `struct gaudi_ib_hbm_alloc_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HbmAllocResp {
    pub comp_mask: u32,
    pub reserved: u32,
    pub offset: u64,
    pub length: u64,
}

/// `struct gaudi_ib_hbm_export`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HbmExport {
    pub comp_mask: u32,
    pub flags: u32,
}

/// `struct gaudi_ib_hbm_export_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HbmExportResp {
    pub comp_mask: u32,
    pub fd: u32,
}

/// The device object's QUERY_DEVICE (gaudi_user_ioctl_cmds.h).
pub const METHOD_QUERY_DEVICE: u16 = NS_DRIVER + 2;
pub const ATTR_QUERY_DEVICE_RESP: u16 = NS_DRIVER;

/// `struct gaudi_ib_device_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceInfo {
    pub comp_mask: u32,
    pub model_version: u32,
    pub devmem_size: u64,
    pub devmem_free: u64,
}

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
    pub fn query_device_info(&self) -> io::Result<DeviceInfo> {
        let mut info = DeviceInfo::default();
        ioctl(
            self.file(),
            GAUDI_IB_OBJECT_DEVICE,
            METHOD_QUERY_DEVICE,
            [Attr::output(ATTR_QUERY_DEVICE_RESP, &mut info)],
        )?;
        Ok(info)
    }

    /// `GAUDI_IB_METHOD_HBM_ALLOC`: `length` bytes of device memory.
    pub fn hbm_alloc(&self, length: u64) -> io::Result<Hbm> {
        let req = HbmAlloc {
            length,
            ..Default::default()
        };
        let mut resp = HbmAllocResp::default();
        let attrs = ioctl(
            self.file(),
            GAUDI_IB_OBJECT_HBM,
            METHOD_HBM_ALLOC,
            [
                Attr::handle(ATTR_HBM_ALLOC_HANDLE, 0),
                Attr::input(ATTR_HBM_ALLOC_REQ, &req),
                Attr::output(ATTR_HBM_ALLOC_RESP, &mut resp),
            ],
        )?;
        Ok(Hbm {
            handle: attrs[0].data as u32,
            offset: resp.offset,
            length: resp.length,
        })
    }

    /// `GAUDI_IB_METHOD_HBM_EXPORT`: the block as a dma-buf.
    pub fn hbm_export(&self, hbm: &Hbm, flags: u32) -> io::Result<OwnedFd> {
        let req = HbmExport {
            flags,
            ..Default::default()
        };
        let mut resp = HbmExportResp::default();
        ioctl(
            self.file(),
            GAUDI_IB_OBJECT_HBM,
            METHOD_HBM_EXPORT,
            [
                Attr::handle(ATTR_HBM_EXPORT_HANDLE, hbm.handle),
                Attr::input(ATTR_HBM_EXPORT_REQ, &req),
                Attr::output(ATTR_HBM_EXPORT_RESP, &mut resp),
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
            METHOD_HBM_DESTROY,
            [Attr::handle(ATTR_HBM_DESTROY_HANDLE, hbm.handle)],
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
                Attr::handle(ATTR_REG_DMABUF_MR_HANDLE, 0),
                Attr::handle(ATTR_REG_DMABUF_MR_PD_HANDLE, pd.handle),
                Attr::value(ATTR_REG_DMABUF_MR_OFFSET, offset),
                Attr::value(ATTR_REG_DMABUF_MR_LENGTH, len),
                Attr::value(ATTR_REG_DMABUF_MR_IOVA, iova),
                Attr::input(ATTR_REG_DMABUF_MR_FD, &fd),
                Attr::value(ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access.into()),
                Attr::output(ATTR_REG_DMABUF_MR_RESP_LKEY, &mut lkey),
                Attr::output(ATTR_REG_DMABUF_MR_RESP_RKEY, &mut rkey),
            ],
        )?;
        let mut mr = Mr {
            handle: attrs[0].data as u32,
            lkey,
            rkey,
            resp: RegMrResp::default(),
        };
        // The method has no driver reply: the device VA comes from QUERY_MR.
        let info = self.query_mr(&mr)?;
        mr.resp.page_shift = info.page_shift;
        mr.resp.mmu_va = info.mmu_va;
        Ok(mr)
    }
}
