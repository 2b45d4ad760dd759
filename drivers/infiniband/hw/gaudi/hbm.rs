// SPDX-License-Identifier: GPL-2.0

//! Device memory (HBM): blocks that user space allocates and exports as dma-bufs.
//!
//! The device's memory is BAR 4, of `DEVMEM_SIZE` bytes. A context allocates blocks of it
//! (`GAUDI_IB_OBJECT_HBM`) and exports a block as a dma-buf, which other devices import for
//! peer-to-peer DMA and which this device registers as a memory region (remote WRITEs then
//! land in HBM). A block stays allocated for as long as its object or any dma-buf of it lives:
//! each holds a reference. Once the device is unbound, exported blocks can no longer be
//! mapped by importers. See Documentation/infiniband/gaudi/uapi.rst ("Device memory").

use kernel::{
    device,
    dma_buf::{
        BarRange,
        DmaBuf, //
    },
    fs::file::{
        flags::O_CLOEXEC,
        FileDescriptorReservation, //
    },
    prelude::*,
    rdma::uverbs::{
        self,
        AttrDef,
        Call,
        Method,
        MethodDef,
        Object,
        ObjectDef,
        Presence,
        RemoveReason, //
    },
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_mutex,
        Arc,
        Mutex, //
    },
    uapi,
};

use crate::ib::GaudiIbDriver;

/// Blocks are multiples of 4 KiB (the CPU's and the device MMU's smallest page).
const BLOCK_ALIGN: u64 = 1 << 12;
/// Blocks of at least 2 MiB are aligned to 2 MiB, so that the device MMU maps them in 2 MiB
/// pages.
const LARGE_ALIGN: u64 = 1 << 21;

/// The device's memory and its allocated blocks.
#[pin_data]
pub(crate) struct Hbm {
    dev: ARef<device::Device>,
    /// CPU physical address of BAR 4.
    bar: u64,
    /// Bytes of device memory, from the start of BAR 4.
    size: u64,
    /// The device is unbound: exported blocks cannot be mapped any more.
    gone: Atomic<bool>,
    /// Allocated blocks as (offset, length), by offset.
    #[pin]
    used: Mutex<KVec<(u64, u64)>>,
}

impl Hbm {
    /// `size` bytes of device memory at CPU physical address `bar`, of device `dev`.
    pub(crate) fn new(dev: &device::Device, bar: u64, size: u64) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                dev: dev.into(),
                bar,
                size,
                gone: Atomic::new(false),
                used <- new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// Bytes of device memory.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of device memory not allocated.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.size - self.used.lock().iter().map(|b| b.1).sum::<u64>()
    }

    /// The device is going away: exported blocks may not be mapped from now on.
    pub(crate) fn revoke(&self) {
        self.gone.store(true, Relaxed);
    }

    /// The offset in device memory of the `len` bytes at bus address `addr`, if they lie
    /// inside it.
    pub(crate) fn offset_of(&self, addr: u64, len: u64) -> Option<u64> {
        let off = addr.checked_sub(self.bar)?;
        (off.checked_add(len)? <= self.size).then_some(off)
    }

    /// Whether any of the `len` bytes at bus address `addr` lie in device memory.
    pub(crate) fn overlaps(&self, addr: u64, len: u64) -> bool {
        addr < self.bar + self.size && self.bar < addr.saturating_add(len)
    }

    /// Allocate `len` bytes (first fit).
    fn alloc(self: &Arc<Self>, len: u64) -> Result<Block> {
        if len == 0 || len % BLOCK_ALIGN != 0 || len > self.size {
            return Err(EINVAL);
        }
        let align = if len >= LARGE_ALIGN {
            LARGE_ALIGN
        } else {
            BLOCK_ALIGN
        };
        let mut used = self.used.lock();
        // The first gap after an allocated block (or at 0) that holds the block, aligned.
        let mut start = 0u64;
        for &(off, l) in used.iter() {
            if start + len <= off {
                break;
            }
            start = (off + l).next_multiple_of(align);
        }
        if start.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(ENOSPC);
        }
        used.push((start, len), GFP_KERNEL)?;
        used.sort_unstable_by_key(|&(off, _)| off);
        Ok(Block {
            hbm: self.clone(),
            offset: start,
            len,
        })
    }

    fn free(&self, offset: u64) {
        let mut used = self.used.lock();
        used.retain(|b| b.0 != offset);
    }
}

/// An allocated block of device memory; returned to the allocator when dropped.
pub(crate) struct Block {
    hbm: Arc<Hbm>,
    offset: u64,
    len: u64,
}

impl Drop for Block {
    fn drop(&mut self) {
        self.hbm.free(self.offset);
    }
}

impl BarRange for Block {
    fn provider(&self) -> &device::Device {
        &self.hbm.dev
    }

    fn phys_range(&self) -> Result<(u64, usize)> {
        if self.hbm.gone.load(Relaxed) {
            return Err(ENODEV);
        }
        Ok((
            self.hbm.bar + self.offset,
            usize::try_from(self.len).map_err(|_| EINVAL)?,
        ))
    }
}

/// A block of device memory of a context (`GAUDI_IB_OBJECT_HBM`).
pub(crate) struct HbmObject {
    block: Arc<Block>,
}

impl Object for HbmObject {
    type Driver = GaudiIbDriver;

    fn destroy(&self, _handle: &uverbs::Handle<'_, GaudiIbDriver>, _why: RemoveReason) -> Result {
        // Dma-bufs of the block keep it allocated until they are released.
        Ok(())
    }
}

pub(crate) const OBJECT_HBM: u16 = uverbs::id(uapi::gaudi_ib_objects_GAUDI_IB_OBJECT_HBM);
const METHOD_HBM_ALLOC: u16 = uverbs::id(uapi::gaudi_ib_hbm_methods_GAUDI_IB_METHOD_HBM_ALLOC);
const METHOD_HBM_DESTROY: u16 = uverbs::id(uapi::gaudi_ib_hbm_methods_GAUDI_IB_METHOD_HBM_DESTROY);
const METHOD_HBM_EXPORT: u16 = uverbs::id(uapi::gaudi_ib_hbm_methods_GAUDI_IB_METHOD_HBM_EXPORT);
const ATTR_ALLOC_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_alloc_attrs_GAUDI_IB_ATTR_HBM_ALLOC_HANDLE);
const ATTR_ALLOC_REQ: u16 = uverbs::id(uapi::gaudi_ib_hbm_alloc_attrs_GAUDI_IB_ATTR_HBM_ALLOC_REQ);
const ATTR_ALLOC_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_alloc_attrs_GAUDI_IB_ATTR_HBM_ALLOC_RESP);
const ATTR_DESTROY_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_destroy_attrs_GAUDI_IB_ATTR_HBM_DESTROY_HANDLE);
const ATTR_EXPORT_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_export_attrs_GAUDI_IB_ATTR_HBM_EXPORT_HANDLE);
const ATTR_EXPORT_REQ: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_export_attrs_GAUDI_IB_ATTR_HBM_EXPORT_REQ);
const ATTR_EXPORT_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_hbm_export_attrs_GAUDI_IB_ATTR_HBM_EXPORT_RESP);

const EXPORT_CLOEXEC: u32 = uapi::gaudi_ib_hbm_export_flags_GAUDI_IB_HBM_EXPORT_CLOEXEC;

/// `GAUDI_IB_METHOD_HBM_ALLOC`.
struct Alloc;

impl Method for Alloc {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_HBM_ALLOC;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_ALLOC_HANDLE,
            OBJECT_HBM,
            uverbs::Access::New,
            Presence::Mandatory,
        ),
        &AttrDef::ptr_in::<uapi::gaudi_ib_hbm_alloc>(ATTR_ALLOC_REQ, Presence::Mandatory),
        &AttrDef::ptr_out::<uapi::gaudi_ib_hbm_alloc_resp>(ATTR_ALLOC_RESP, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let ctx = call.ucontext()?;
        let dev = ctx.device();
        let hbm = dev.data().hbm();
        let req: uapi::gaudi_ib_hbm_alloc = call.read(ATTR_ALLOC_REQ)?;
        if req.comp_mask != 0 || req.reserved != 0 {
            return Err(EINVAL);
        }
        if hbm.size() == 0 {
            return Err(EOPNOTSUPP);
        }
        dev.data().claim(dev, ctx.data())?;
        let block = hbm.alloc(req.length).inspect_err(|e| {
            if *e == ENOSPC {
                kernel::ibdev_dbg!(
                    dev,
                    "no room for {:#x} bytes of device memory\n",
                    req.length
                );
            }
        })?;
        // Whatever an earlier owner left there is not the new owner's to read.
        dev.data().nic().clear_devmem(block.offset, block.len)?;
        let resp = uapi::gaudi_ib_hbm_alloc_resp {
            offset: block.offset,
            length: block.len,
            ..Default::default()
        };
        let obj = HbmObject {
            block: Arc::new(block, GFP_KERNEL)?,
        };
        // On failure the core destroys the object and the block goes back.
        call.new_object(ATTR_ALLOC_HANDLE, obj)?;
        call.write(ATTR_ALLOC_RESP, &resp)
    }
}

/// `GAUDI_IB_METHOD_HBM_EXPORT`.
struct Export;

impl Method for Export {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_HBM_EXPORT;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_EXPORT_HANDLE,
            OBJECT_HBM,
            uverbs::Access::Read,
            Presence::Mandatory,
        ),
        &AttrDef::ptr_in::<uapi::gaudi_ib_hbm_export>(ATTR_EXPORT_REQ, Presence::Mandatory),
        &AttrDef::ptr_out::<uapi::gaudi_ib_hbm_export_resp>(ATTR_EXPORT_RESP, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let obj: &HbmObject = call.object(ATTR_EXPORT_HANDLE)?;
        let req: uapi::gaudi_ib_hbm_export = call.read(ATTR_EXPORT_REQ)?;
        if req.comp_mask != 0 || req.flags & !EXPORT_CLOEXEC != 0 {
            return Err(EINVAL);
        }
        let len = usize::try_from(obj.block.len).map_err(|_| EINVAL)?;
        let buf = DmaBuf::export(
            &<crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE,
            c"gaudi_hbm",
            obj.block.clone(),
            len,
        )?;
        let flags = if req.flags & EXPORT_CLOEXEC != 0 {
            O_CLOEXEC
        } else {
            0
        };
        // The descriptor is installed only once the reply is written; until then dropping the
        // reservation and the dma-buf undoes everything.
        let fd = FileDescriptorReservation::get_unused_fd_flags(flags)?;
        call.write(
            ATTR_EXPORT_RESP,
            &uapi::gaudi_ib_hbm_export_resp {
                fd: fd.reserved_fd(),
                ..Default::default()
            },
        )?;
        fd.fd_install(buf.into_file());
        Ok(())
    }
}

static ALLOC: MethodDef<GaudiIbDriver> = MethodDef::new::<Alloc>();
static DESTROY_HANDLE: [&AttrDef; 1] = [&AttrDef::idr(
    ATTR_DESTROY_HANDLE,
    OBJECT_HBM,
    uverbs::Access::Destroy,
    Presence::Mandatory,
)];
static DESTROY: MethodDef<GaudiIbDriver> = MethodDef::destroy(METHOD_HBM_DESTROY, &DESTROY_HANDLE);
static EXPORT: MethodDef<GaudiIbDriver> = MethodDef::new::<Export>();
pub(crate) static HBM_OBJECT: ObjectDef<GaudiIbDriver> =
    ObjectDef::with_handles(OBJECT_HBM, &[&ALLOC, &DESTROY, &EXPORT]);
