// SPDX-License-Identifier: GPL-2.0

//! The device MMU: one translation domain for the whole device.
//!
//! Documentation/infiniband/gaudi/device-model.rst ("Device MMU") is the reference: device VAs
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

/// The device VAs memory regions get: first fit over a sorted list of free ranges.
pub(crate) struct VaSpace {
    free: KVec<VaRange>,
}

impl VaSpace {
    /// A space of `[start, end)`.
    pub(crate) fn new(start: u64, end: u64) -> Result<Self> {
        let mut free = KVec::new();
        free.push(
            VaRange {
                start,
                len: end - start,
            },
            GFP_KERNEL,
        )?;
        Ok(Self { free })
    }

    fn insert(&mut self, at: usize, r: VaRange) -> Result {
        self.free.reserve(1, GFP_KERNEL)?;
        self.free.insert_within_capacity(at, r).map_err(|_| ENOMEM)
    }

    fn remove(&mut self, at: usize) -> Result<VaRange> {
        self.free.remove(at).map_err(|_| EINVAL)
    }

    /// Take `len` bytes aligned to `align` (a power of two).
    pub(crate) fn alloc(&mut self, len: u64, align: u64) -> Result<VaRange> {
        if len == 0 || !align.is_power_of_two() {
            return Err(EINVAL);
        }
        for i in 0..self.free.len() {
            let f = self.free[i];
            let Some(start) = f.start.checked_next_multiple_of(align) else {
                continue;
            };
            let Some(end) = start.checked_add(len) else {
                continue;
            };
            if end > f.start + f.len {
                continue;
            }
            // Reserve first, so that a failure leaves the list as it was.
            self.free.reserve(2, GFP_KERNEL)?;
            self.remove(i)?;
            let after = VaRange {
                start: end,
                len: f.start + f.len - end,
            };
            if after.len != 0 {
                self.insert(i, after)?;
            }
            if start != f.start {
                self.insert(
                    i,
                    VaRange {
                        start: f.start,
                        len: start - f.start,
                    },
                )?;
            }
            return Ok(VaRange { start, len });
        }
        Err(ENOSPC)
    }

    /// Give back a range from [`VaSpace::alloc`], merging it with its free neighbours.
    pub(crate) fn free(&mut self, r: VaRange) -> Result {
        let at = self.free.partition_point(|f| f.start < r.start);
        self.insert(at, r)?;
        let end = |f: &VaRange| f.start + f.len;
        if at + 1 < self.free.len() && end(&self.free[at]) == self.free[at + 1].start {
            let next = self.remove(at + 1)?;
            self.free[at].len += next.len;
        }
        if at > 0 && end(&self.free[at - 1]) == self.free[at].start {
            let this = self.remove(at)?;
            self.free[at - 1].len += this.len;
        }
        Ok(())
    }

    /// Free ranges, for tests: the space is whole again when this is 1.
    #[allow(dead_code)]
    pub(crate) fn fragments(&self) -> usize {
        self.free.len()
    }
}
