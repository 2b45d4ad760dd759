// SPDX-License-Identifier: GPL-2.0

//! Device VAs of the device MMU's address spaces.
//!
//! The chip's owner keeps the page tables of each ASID ([`kernel::net::gaudi::chip::Chip`]);
//! the driver places every memory region and ring at a linear range of device VA
//! ([`VaSpace`]) and has the owner enter its pages there.

use kernel::{
    device::Device,
    maple_tree::{
        AllocErrorKind,
        InsertErrorKind,
        MapleTreeAlloc, //
    },
    net::gaudi::chip::MmuFlags,
    prelude::*,
};

/// Device VAs of an ASID of the emulated function (four levels) are 48 bits wide.
pub(crate) const ASID_VA_BITS: u32 = 48;

/// Page sizes the device MMU takes, as shifts: 4 KiB, 2 MiB, 1 GiB.
pub(crate) const PAGE_SHIFTS: [u32; 3] = [12, 21, 30];

/// What pages are and what the device may do with them.
pub(crate) type Flags = MmuFlags;

/// A range of device VA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VaRange {
    pub(crate) start: u64,
    pub(crate) len: u64,
}

/// The device VAs memory regions and rings get: the ranges in use, in a maple tree (each
/// entry holds its length). Callers serialise [`VaSpace::alloc`] and [`VaSpace::free`] (the
/// MMU lock): an aligned allocation is two steps.
#[pin_data]
pub(crate) struct VaSpace {
    #[pin]
    used: MapleTreeAlloc<KBox<u64>>,
    start: u64,
    end: u64,
}

/// Every range is a multiple of the smallest page and starts on one.
const SMALL_PAGE: u64 = 1 << PAGE_SHIFTS[0];

impl VaSpace {
    /// A space of `[start, end)` (both multiples of 4 KiB).
    pub(crate) fn new(start: u64, end: u64) -> impl PinInit<Self> {
        pin_init!(Self {
            used <- MapleTreeAlloc::new(),
            start,
            end,
        })
    }

    /// Take `len` bytes (a multiple of 4 KiB) aligned to `align` (a power of two, at least
    /// 4 KiB): the lowest such range free. `ENOSPC` if there is none.
    pub(crate) fn alloc(&self, len: u64, align: u64) -> Result<VaRange> {
        if len == 0 || len % SMALL_PAGE != 0 || !align.is_power_of_two() || align < SMALL_PAGE {
            return Err(EINVAL);
        }
        // The tree places a range at the lowest free VA where it fits, with no alignment: take
        // that place if it is aligned, else search again from the next aligned VA. Each round
        // starts higher, so this ends, with the lowest aligned range free.
        let size = usize::try_from(len)?;
        let end = usize::try_from(self.end)?;
        let mut from = usize::try_from(self.start)?;
        let start = loop {
            let at = self
                .used
                .alloc_range(size, KBox::new(len, GFP_KERNEL)?, from..end, GFP_KERNEL)
                .map_err(|e| match e.cause {
                    AllocErrorKind::Busy => ENOSPC,
                    cause => cause.into(),
                })?;
            if at as u64 % align == 0 {
                break at as u64;
            }
            drop(self.used.erase(at));
            from = usize::try_from((at as u64).next_multiple_of(align))?;
            if from >= end {
                return Err(ENOSPC);
            }
        };
        Ok(VaRange { start, len })
    }

    /// Take `[start, start + len)` (both multiples of 4 KiB), below or above the space
    /// [`VaSpace::alloc`] hands out: ranges there are placed by the caller. `EINVAL` if it
    /// reaches into the space or overlaps a range taken before.
    pub(crate) fn take(&self, start: u64, len: u64) -> Result<VaRange> {
        let end = start.checked_add(len).ok_or(EINVAL)?;
        if len == 0
            || start % SMALL_PAGE != 0
            || len % SMALL_PAGE != 0
            || (end > self.start && start < self.end)
        {
            return Err(EINVAL);
        }
        let range = usize::try_from(start)?..usize::try_from(end)?;
        self.used
            .insert_range(range, KBox::new(len, GFP_KERNEL)?, GFP_KERNEL)
            .map_err(|e| match e.cause {
                InsertErrorKind::AllocError(_) => ENOMEM,
                _ => EINVAL,
            })?;
        Ok(VaRange { start, len })
    }

    /// Give back a range from [`VaSpace::alloc`] or [`VaSpace::take`]; `EINVAL` if it is not
    /// one.
    pub(crate) fn free(&self, r: VaRange) -> Result {
        let start = usize::try_from(r.start)?;
        match self.used.erase(start) {
            Some(len) if *len == r.len => Ok(()),
            Some(len) => {
                // Not the range handed out there: put it back as it was.
                let back = start..start + usize::try_from(*len)?;
                self.used.insert_range(back, len, GFP_KERNEL)?;
                Err(EINVAL)
            }
            None => Err(EINVAL),
        }
    }
}

/// Where a range of device VA goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Place {
    /// The lowest free range of the space, aligned to its pages.
    Anywhere,
    /// At this VA, below the space ([`VaSpace::take`]).
    At(u64),
}

/// A range of device VA taken out of a domain whose reuse waits: for the work the device
/// may still execute in the domain from before it left (see `chip::AddressSpace`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub(crate) range: VaRange,
    /// The work epoch the range left in.
    pub(crate) epoch: u64,
}

/// The device VAs of an address space: those in use and those whose reuse waits.
pub(crate) struct Domain {
    pub(crate) space: Pin<KBox<VaSpace>>,
    pub(crate) held: KVec<Held>,
}

impl Domain {
    /// Take `len` bytes of device VA placed by `place`, aligned to `align` where the space
    /// places them.
    pub(crate) fn take(&mut self, place: Place, len: u64, align: u64) -> Result<VaRange> {
        match place {
            Place::Anywhere => self.space.alloc(len, align),
            Place::At(start) => self.space.take(start, len),
        }
    }

    /// Make `range` free for the next allocation.
    pub(crate) fn give_back(&mut self, dev: &Device, range: VaRange) {
        if let Err(e) = self.space.free(range) {
            dev_warn!(
                dev,
                "device VAs {:#x}+{:#x} not reusable: {:?}\n",
                range.start,
                range.len,
                e
            );
        }
    }

    /// Give back the held ranges that left in epoch `drained` or before.
    pub(crate) fn reclaim(&mut self, dev: &Device, drained: u64) {
        let mut i = 0;
        while i < self.held.len() {
            let h = self.held[i];
            if h.epoch <= drained {
                let last = self.held.len() - 1;
                self.held.swap(i, last);
                self.held.pop();
                self.give_back(dev, h.range);
            } else {
                i += 1;
            }
        }
    }
}
