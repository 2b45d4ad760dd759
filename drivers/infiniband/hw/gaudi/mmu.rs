// SPDX-License-Identifier: GPL-2.0

//! The device MMU: one translation domain for the whole device.
//!
//! Documentation/infiniband/gaudi/device-model-1.rst ("Device MMU") is the reference: device VAs
//! of 39 bits, three levels of 4 KiB tables of 512 entries in host memory, leaves of 4 KiB,
//! 2 MiB (level 1) and 1 GiB (level 0). The driver owns the tables; every memory region gets a
//! linear range of device VA ([`VaSpace`]) and its pages are entered here.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_read,
        io_write, //
    },
    maple_tree::{
        AllocErrorKind,
        MapleTreeAlloc, //
    },
    prelude::*,
};

use crate::hw::Pte;

/// Entries per table.
const ENTRIES: usize = 512;

/// Device VAs are 39 bits wide.
pub(crate) const VA_BITS: u32 = 39;

/// Device VAs of memory regions: above a first GiB left unmapped (so that small bogus addresses
/// fault), up to the end of the VA space.
pub(crate) const MR_VA_START: u64 = 1 << 30;
pub(crate) const MR_VA_END: u64 = 1 << VA_BITS;

/// Page sizes the tables can hold, as shifts: 4 KiB, 2 MiB, 1 GiB.
pub(crate) const PAGE_SHIFTS: [u32; 3] = [12, 21, 30];

/// What pages are and what the device may do with them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flags {
    /// The address is an offset in device memory, not a bus address.
    pub(crate) devmem: bool,
    /// The device may write the page (CQEs, incoming WRITEs).
    pub(crate) writable: bool,
    /// The page holds a queue: the device fetches WQEs from it or writes CQEs to it, and
    /// nothing else. Work requests and incoming WRITEs can never name it.
    pub(crate) ring: bool,
}

/// One page of the device's translation domain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Page {
    /// Bus address, or offset in device memory with `flags.devmem`.
    pub(crate) addr: u64,
    pub(crate) flags: Flags,
}

/// One table and the tables below it.
pub(crate) struct Table {
    mem: Coherent<[u64]>,
    /// Tables of the next level, by index (empty at level 2).
    next: KVec<Option<KBox<Table>>>,
    /// Valid entries.
    used: u32,
}

impl Table {
    fn new(dev: &Device<Bound>, level: u32) -> Result<Self> {
        let mut next = KVec::new();
        if level < 2 {
            next = KVec::with_capacity(ENTRIES, GFP_KERNEL)?;
            for _ in 0..ENTRIES {
                next.push(None, GFP_KERNEL)?;
            }
        }
        Ok(Self {
            mem: Coherent::zeroed_slice(dev, ENTRIES, GFP_KERNEL)?,
            next,
            used: 0,
        })
    }

    fn set(&self, index: usize, pte: Pte) -> Result {
        io_write!(&self.mem, [try: index], pte.into_raw());
        Ok(())
    }

    fn get(&self, index: usize) -> Result<Pte> {
        Ok(Pte::from_raw(io_read!(&self.mem, [try: index])))
    }
}

/// The page tables of the device's translation domain.
pub(crate) struct PageTables {
    root: Table,
}

/// The index of `va` in a table of `level`.
fn index(va: u64, level: u32) -> usize {
    ((va >> (30 - 9 * level)) & (ENTRIES as u64 - 1)) as usize
}

/// The level whose leaves are pages of `shift`.
fn leaf_level(shift: u32) -> Result<u32> {
    match shift {
        30 => Ok(0),
        21 => Ok(1),
        12 => Ok(2),
        _ => Err(EINVAL),
    }
}

impl PageTables {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        Ok(Self {
            root: Table::new(dev, 0)?,
        })
    }

    /// Bus address of the level-0 table, for `MMU_ROOT`.
    pub(crate) fn root(&self) -> u64 {
        self.root.mem.dma_address()
    }

    /// Enter one page of `1 << shift` bytes at `va`. Both `va` and the page's address must be
    /// aligned to the page size and `va` inside the device's VA space; the slot must be free.
    pub(crate) fn map(&mut self, dev: &Device<Bound>, va: u64, shift: u32, page: Page) -> Result {
        let level = leaf_level(shift)?;
        let size = 1u64 << shift;
        if va >> VA_BITS != 0 || va & (size - 1) != 0 || page.addr & (size - 1) != 0 {
            return Err(EINVAL);
        }
        if page.addr & !Pte::ADDRESS_MASK != 0 {
            return Err(ERANGE);
        }
        let mut table = &mut self.root;
        for l in 0..level {
            let i = index(va, l);
            if table.next[i].is_none() {
                if table.get(i)?.valid() {
                    // A larger page is entered here.
                    return Err(EEXIST);
                }
                let t = KBox::new(Table::new(dev, l + 1)?, GFP_KERNEL)?;
                table.set(i, Pte::to(t.mem.dma_address()))?;
                table.next[i] = Some(t);
                table.used += 1;
            }
            table = table.next[i].as_deref_mut().ok_or(EINVAL)?;
        }
        let i = index(va, level);
        if table.get(i)?.valid() {
            return Err(EEXIST);
        }
        let pte = Pte::to(page.addr)
            .with_write(page.flags.writable)
            .with_devmem(page.flags.devmem)
            .with_ring(page.flags.ring)
            .with_leaf(level < 2);
        table.set(i, pte)?;
        table.used += 1;
        Ok(())
    }

    /// Remove the page of `1 << shift` bytes at `va`, if one is entered. Tables left empty
    /// leave the tree and go to `freed`: the caller drops them, as it reuses what the page
    /// mapped, only after the device has forgotten its translations (which may include the
    /// path through those tables).
    pub(crate) fn unmap(&mut self, va: u64, shift: u32, freed: &mut KVec<KBox<Table>>) -> Result {
        unmap_in(&mut self.root, va, 0, leaf_level(shift)?, freed)?;
        Ok(())
    }
}

/// Remove the entry of `va` at `leaf` below `table` (at `level`); returns whether `table` is
/// left empty.
fn unmap_in(
    table: &mut Table,
    va: u64,
    level: u32,
    leaf: u32,
    freed: &mut KVec<KBox<Table>>,
) -> Result<bool> {
    let i = index(va, level);
    if level == leaf {
        if table.next.get(i).is_some_and(Option::is_some) {
            // A table, not a page of this size: nothing to remove.
            return Ok(false);
        }
        if table.get(i)?.valid() {
            table.set(i, Pte::zeroed())?;
            table.used -= 1;
        }
    } else {
        let Some(next) = table.next[i].as_deref_mut() else {
            return Ok(table.used == 0);
        };
        if unmap_in(next, va, level + 1, leaf, freed)? {
            // Reserve first: the table must not be dropped before the invalidation.
            freed.reserve(1, GFP_KERNEL)?;
            table.set(i, Pte::zeroed())?;
            table.used -= 1;
            if let Some(t) = table.next[i].take() {
                freed.push_within_capacity(t).map_err(|_| ENOMEM)?;
            }
        }
    }
    Ok(table.used == 0)
}

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

    /// Give back a range from [`VaSpace::alloc`]; `EINVAL` if it is not one.
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
