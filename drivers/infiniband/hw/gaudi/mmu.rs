// SPDX-License-Identifier: GPL-2.0

//! Page tables of the device MMU.
//!
//! The emulated function's device MMU has one translation domain per ASID (device-model.rst,
//! "Chip services"): device VAs of 48 bits, four levels of 4 KiB tables of 512 entries in host
//! memory, leaves of 4 KiB, 2 MiB and 1 GiB. The driver owns the tables; every memory region
//! gets a linear range of device VA ([`VaSpace`]) and its pages are entered here.

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
        InsertErrorKind,
        MapleTreeAlloc, //
    },
    prelude::*,
    sync::Mutex,
};

kernel::bitfield! {
    /// A device page-table entry (device-model.rst, "Chip services": the emulated function's
    /// table format).
    pub(crate) struct Pte(u64) {
        /// Next table (bus address) or the page, bits 51:12 of the address.
        51:12 address;
        /// The address is an offset into device memory (BAR 4).
        3:3 devmem => bool;
        /// At level 0 or 1: the entry maps a 1 GiB or 2 MiB page.
        2:2 leaf => bool;
        /// The device may write the page.
        1:1 write => bool;
        /// The entry maps something; the page is readable.
        0:0 valid => bool;
    }
}

impl Pte {
    /// An entry pointing to `addr` (bits 51:12 only are kept: the caller checked alignment
    /// and range).
    pub(crate) fn to(addr: u64) -> Self {
        Self::from_raw(addr & Self::ADDRESS_MASK).with_valid(true)
    }
}

/// Entries per table.
const ENTRIES: usize = 512;

/// Pages entered in or removed from a translation domain between two scheduling points: a
/// region of hundreds of GiB is millions of pages.
const RESCHED_PAGES: u64 = 4096;

/// Device VAs of an ASID of the emulated function (four levels) are 48 bits wide.
pub(crate) const ASID_VA_BITS: u32 = 48;

/// Page sizes the tables can hold, as shifts: 4 KiB, 2 MiB, 1 GiB.
pub(crate) const PAGE_SHIFTS: [u32; 3] = [12, 21, 30];

/// What pages are and what the device may do with them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flags {
    /// The address is an offset in device memory, not a bus address.
    pub(crate) devmem: bool,
    /// The device may write the page (CQEs, incoming WRITEs).
    pub(crate) writable: bool,
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
    /// A table; `last` holds only pages.
    fn new(dev: &Device<Bound>, last: bool) -> Result<Self> {
        let mut next = KVec::new();
        if !last {
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

/// The page tables of a translation domain.
pub(crate) struct PageTables {
    root: Table,
    /// Levels below the root: 2 (three levels) or 3 (four).
    last: u32,
}

/// The index of `va` in a table of `level`, of tables whose last level is `last`.
fn index(va: u64, level: u32, last: u32) -> usize {
    ((va >> (12 + 9 * (last - level))) & (ENTRIES as u64 - 1)) as usize
}

/// The level whose leaves are pages of `shift`, of tables whose last level is `last`.
fn leaf_level(shift: u32, last: u32) -> Result<u32> {
    match shift {
        30 | 21 | 12 => Ok(last - (shift - 12) / 9),
        _ => Err(EINVAL),
    }
}

impl PageTables {
    /// An ASID's tables on the emulated function: four levels, device VAs of [`ASID_VA_BITS`].
    pub(crate) fn with_four_levels(dev: &Device<Bound>) -> Result<Self> {
        Ok(Self {
            root: Table::new(dev, false)?,
            last: 3,
        })
    }

    /// Width of the device VAs the tables translate.
    fn va_bits(&self) -> u32 {
        12 + 9 * (self.last + 1)
    }

    /// Bus address of the level-0 table, for `MMU_ROOT`.
    pub(crate) fn root(&self) -> u64 {
        self.root.mem.dma_address()
    }

    /// Enter one page of `1 << shift` bytes at `va`. Both `va` and the page's address must be
    /// aligned to the page size and `va` inside the device's VA space; the slot must be free.
    pub(crate) fn map(&mut self, dev: &Device<Bound>, va: u64, shift: u32, page: Page) -> Result {
        let (last, level) = (self.last, leaf_level(shift, self.last)?);
        let size = 1u64 << shift;
        if va >> self.va_bits() != 0 || va & (size - 1) != 0 || page.addr & (size - 1) != 0 {
            return Err(EINVAL);
        }
        if page.addr & !Pte::ADDRESS_MASK != 0 {
            return Err(ERANGE);
        }
        let mut table = &mut self.root;
        for l in 0..level {
            let i = index(va, l, last);
            if table.next[i].is_none() {
                if table.get(i)?.valid() {
                    // A larger page is entered here.
                    return Err(EEXIST);
                }
                let t = KBox::new(Table::new(dev, l + 1 == last)?, GFP_KERNEL)?;
                table.set(i, Pte::to(t.mem.dma_address()))?;
                table.next[i] = Some(t);
                table.used += 1;
            }
            table = table.next[i].as_deref_mut().ok_or(EINVAL)?;
        }
        let i = index(va, level, last);
        if table.get(i)?.valid() {
            return Err(EEXIST);
        }
        let pte = Pte::to(page.addr)
            .with_write(page.flags.writable)
            .with_devmem(page.flags.devmem)
            .with_leaf(level < last);
        table.set(i, pte)?;
        table.used += 1;
        Ok(())
    }

    /// Remove the page of `1 << shift` bytes at `va`, if one is entered. Tables left empty
    /// leave the tree and go to `freed`: the caller drops them, as it reuses what the page
    /// mapped, only after the device has forgotten its translations (which may include the
    /// path through those tables).
    pub(crate) fn unmap(&mut self, va: u64, shift: u32, freed: &mut KVec<KBox<Table>>) -> Result {
        let last = self.last;
        unmap_in(&mut self.root, va, 0, leaf_level(shift, last)?, last, freed)?;
        Ok(())
    }
}

/// Remove the entry of `va` at `leaf` below `table` (at `level` of tables whose last level is
/// `last`); returns whether `table` is left empty.
fn unmap_in(
    table: &mut Table,
    va: u64,
    level: u32,
    leaf: u32,
    last: u32,
    freed: &mut KVec<KBox<Table>>,
) -> Result<bool> {
    let i = index(va, level, last);
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
        if unmap_in(next, va, level + 1, leaf, last, freed)? {
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

/// A translation domain: its page tables, the device VAs in use and those whose reuse waits.
pub(crate) struct Domain {
    pub(crate) tables: PageTables,
    pub(crate) space: Pin<KBox<VaSpace>>,
    pub(crate) held: KVec<Held>,
}

impl Domain {
    /// Enter `count` pages of `1 << shift` bytes, at the addresses `pages` yields, in a range of
    /// device VA placed by `place`, and return the range. On failure nothing stays entered;
    /// `invalidate` makes the device forget the domain's cached translations and waits.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map(
        this: &Mutex<Self>,
        dev: &Device<Bound>,
        place: Place,
        pages: impl Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: Flags,
        invalidate: &dyn Fn(),
    ) -> Result<VaRange> {
        let len = count.checked_shl(shift).ok_or(EINVAL)?;
        let mut m = this.lock();
        let range = match place {
            Place::Anywhere => m.space.alloc(len, 1 << shift)?,
            Place::At(start) => m.space.take(start, len)?,
        };
        let mut mapped = 0u64;
        let mut res = Ok(());
        for addr in pages.take(count as usize) {
            let page = Page { addr, flags };
            res = m
                .tables
                .map(dev, range.start + (mapped << shift), shift, page);
            if res.is_err() {
                break;
            }
            mapped += 1;
            if mapped % RESCHED_PAGES == 0 {
                kernel::task::cond_resched();
            }
        }
        if res.is_ok() && mapped != count {
            res = Err(EINVAL);
        }
        drop(m);
        match res {
            Ok(()) => Ok(range),
            Err(e) => {
                // The range was never handed out: no work names it.
                Self::unmap(this, dev, range, shift, mapped, invalidate, &|m, r| {
                    m.give_back(dev, r)
                });
                Err(e)
            }
        }
    }

    /// Take the first `pages` pages of `1 << shift` bytes of `range` out of the domain and hand
    /// the range to `release` (with the domain locked), once `invalidate` has made the device
    /// forget their translations.
    pub(crate) fn unmap(
        this: &Mutex<Self>,
        dev: &Device,
        range: VaRange,
        shift: u32,
        pages: u64,
        invalidate: &dyn Fn(),
        release: &dyn Fn(&mut Domain, VaRange),
    ) {
        let mut freed = KVec::new();
        let mut m = this.lock();
        for i in 0..pages {
            if i % RESCHED_PAGES == RESCHED_PAGES - 1 {
                kernel::task::cond_resched();
            }
            if let Err(e) = m
                .tables
                .unmap(range.start + (i << shift), shift, &mut freed)
            {
                dev_warn!(
                    dev,
                    "device VA {:#x}: unmap failed: {:?}\n",
                    range.start + (i << shift),
                    e
                );
            }
        }
        drop(m);
        invalidate();
        // Only now may the tables that left the tree be freed, and the VAs be handed out
        // again: a new region at them must not meet translations cached for this one.
        drop(freed);
        release(&mut this.lock(), range);
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
