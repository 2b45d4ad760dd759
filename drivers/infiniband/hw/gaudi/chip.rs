// SPDX-License-Identifier: GPL-2.0

//! The chip services, as the emulated function provides them: on a real host habanalabs gives
//! them to the NIC driver (Documentation/infiniband/gaudi/device-model.rst, "Chip services").
//! So far the device MMU: one translation domain per ASID.
//!
//! Every protection domain gets an ASID of its own ([`AddressSpace`]). The NIC translates the
//! data accesses of a QP in its context's ASID, so no QP reaches a page its ASID does not map,
//! whatever address or key it names. A region a peer may write is entered at its iova, the
//! address the peer puts in its WRITEs (the responder translates it unchanged); any other
//! region at device VAs from [`LOCAL_VA_START`], where no iova of such a region lies.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    id_pool::IdPool,
    io::{
        register,
        register::Array,
        Io, //
    },
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

use crate::{
    mmu::{
        Domain,
        Flags,
        PageTables,
        Place,
        VaRange,
        VaSpace, //
    },
    shared::Shared,
};

register! {
    /// ASID n's page-table root, bits 31:12; 0: the ASID translates nothing.
    pub(crate) SVC_MMU_ROOT_LO(u32)[1024, stride = 8] @ 0x100000 {}
    /// Bits 63:32 of ASID n's page-table root.
    pub(crate) SVC_MMU_ROOT_HI(u32)[1024, stride = 8] @ 0x100004 {}
    /// Write an ASID: the device forgets its cached translations.
    pub(crate) SVC_MMU_INVALIDATE(u32) @ 0x102000 {}
    /// Translation faults since power-on.
    pub(crate) SVC_MMU_FAULTS(u32) @ 0x102004 {}
}

/// ASIDs the NIC's contexts can name (10-bit fields).
const ASIDS: usize = 1024;

/// The kernel's ASID (habanalabs `HL_KERNEL_ASID_ID`): never a protection domain's.
const KERNEL_ASID: usize = 0;

/// Device VAs of regions no peer writes: from 2^47 to the end of an ASID's VAs. Below are the
/// iovas of regions peers write (user-space addresses, or addresses a user chose).
pub(crate) const LOCAL_VA_START: u64 = 1 << 47;

/// The ASIDs protection domains hold.
pub(crate) struct Asids {
    pool: IdPool,
    /// Where the search for a free ASID starts: the one after the last taken, so that an ASID
    /// given back is the last to be taken again.
    next: usize,
}

impl Asids {
    pub(crate) fn new() -> Result<Self> {
        let mut pool = IdPool::with_capacity(ASIDS, GFP_KERNEL)?;
        // The kernel's is never handed out.
        pool.find_unused_id(KERNEL_ASID).ok_or(EINVAL)?.acquire();
        Ok(Self { pool, next: 1 })
    }

    fn take(&mut self) -> Result<u32> {
        let id = match self.pool.find_unused_id(self.next) {
            Some(id) if id.as_usize() < ASIDS => id.acquire(),
            _ => self
                .pool
                .find_unused_id(KERNEL_ASID + 1)
                .filter(|id| id.as_usize() < ASIDS)
                .ok_or(ENOSPC)?
                .acquire(),
        };
        self.next = (id + 1) % ASIDS;
        Ok(id as u32)
    }

    fn give_back(&mut self, asid: u32) {
        self.pool.release_id(asid as usize);
    }
}

/// One ASID and its translation domain: the device VAs of one protection domain.
#[pin_data(PinnedDrop)]
pub(crate) struct AddressSpace {
    shared: Arc<Shared>,
    asid: u32,
    #[pin]
    domain: Mutex<Domain>,
}

impl AddressSpace {
    /// Take an ASID and give it empty page tables.
    pub(crate) fn new(shared: &Arc<Shared>, dev: &Device<Bound>) -> Result<Arc<Self>> {
        let tables = PageTables::with_four_levels(dev)?;
        let root = tables.root();
        let space = KBox::pin_init(
            VaSpace::new(LOCAL_VA_START, crate::rc::WQ_ARRAY_VA),
            GFP_KERNEL,
        )?;
        let asid = shared.asids.lock().take()?;
        let this = Arc::pin_init(
            try_pin_init!(Self {
                shared: shared.clone(),
                asid,
                domain <- kernel::new_mutex!(Domain { tables, space }),
            }),
            GFP_KERNEL,
        )
        .inspect_err(|_| shared.asids.lock().give_back(asid))?;
        // From here on the drop gives the ASID back.
        this.set_root(root)?;
        Ok(this)
    }

    fn set_root(&self, root: u64) -> Result {
        let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
        let at = self.asid as usize;
        bar.try_write(
            SVC_MMU_ROOT_HI::try_at(at).ok_or(EINVAL)?,
            SVC_MMU_ROOT_HI::from_raw((root >> 32) as u32),
        )?;
        bar.try_write(
            SVC_MMU_ROOT_LO::try_at(at).ok_or(EINVAL)?,
            SVC_MMU_ROOT_LO::from_raw(root as u32),
        )?;
        drop(bar);
        self.invalidate();
        Ok(())
    }

    /// Make the device forget the ASID's cached translations; returns once it has (a following
    /// register read returns).
    fn invalidate(&self) {
        if let Some(bar) = self.shared.bar.try_access() {
            bar.write_reg(SVC_MMU_INVALIDATE::from_raw(self.asid));
            let _ = bar.read(SVC_MMU_FAULTS);
        }
    }

    /// The ASID.
    pub(crate) fn asid(&self) -> u32 {
        self.asid
    }

    /// Enter `count` pages of `1 << shift` bytes, at the addresses `pages` yields, at `place`.
    pub(crate) fn map(
        self: &Arc<Self>,
        dev: &Device<Bound>,
        place: Place,
        pages: impl Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: Flags,
    ) -> Result<Mapping> {
        let range = Domain::map(
            &self.domain,
            dev,
            place,
            pages,
            count,
            shift,
            flags,
            &|| self.invalidate(),
        )?;
        Ok(Mapping {
            space: self.clone(),
            range,
            shift,
        })
    }
}

/// Pages entered in an address space; they leave it when this is dropped, and it returns once
/// the device has forgotten their translations.
pub(crate) struct Mapping {
    space: Arc<AddressSpace>,
    range: VaRange,
    shift: u32,
}

impl Mapping {
    /// The device VA of the first page.
    pub(crate) fn va(&self) -> u64 {
        self.range.start
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let s = &self.space;
        Domain::unmap(
            &s.domain,
            &s.shared.dev,
            self.range,
            self.shift,
            self.range.len >> self.shift,
            &|| s.invalidate(),
        );
    }
}

#[pinned_drop]
impl PinnedDrop for AddressSpace {
    fn drop(self: Pin<&mut Self>) {
        // The ASID translates nothing more before its tables go (with the fields, after this)
        // and before another protection domain gets it.
        if let Some(bar) = self.shared.bar.try_access() {
            let at = self.asid as usize;
            if let (Some(lo), Some(hi)) = (SVC_MMU_ROOT_LO::try_at(at), SVC_MMU_ROOT_HI::try_at(at))
            {
                let _ = bar.try_write(lo, SVC_MMU_ROOT_LO::from_raw(0));
                let _ = bar.try_write(hi, SVC_MMU_ROOT_HI::from_raw(0));
            }
        }
        self.invalidate();
        self.shared.asids.lock().give_back(self.asid);
    }
}
