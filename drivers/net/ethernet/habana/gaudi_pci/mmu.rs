// SPDX-License-Identifier: GPL-2.0

//! The emulated function's device MMU (device-model.rst, "Chip services"): one translation
//! domain per ASID, device VAs of 48 bits, four levels of 4 KiB tables of 512 entries in host
//! memory, leaves of 4 KiB, 2 MiB and 1 GiB. The owner keeps the tables, as habanalabs does on
//! a host; the NIC driver takes an ASID and enters and removes pages
//! ([`kernel::net::gaudi::chip::Chip::mmu_map`]).

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    id_pool::IdPool,
    io::{
        io_read,
        io_write,
        register,
        register::Array,
        Io, //
    },
    net::gaudi::chip::MmuFlags,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

use crate::Bar;

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

/// Make the device forget ASID `asid`'s cached translations; returns once it has (a following
/// register read returns).
pub(crate) fn invalidate(bar: &Bar<'_>, asid: u32) {
    bar.write_reg(SVC_MMU_INVALIDATE::from_raw(asid));
    let _ = bar.read(SVC_MMU_FAULTS);
}

/// Point ASID `asid` at the tables whose root is at bus address `root` (0: the ASID translates
/// nothing), and make the device forget what it cached of the ASID.
pub(crate) fn set_root(bar: &Bar<'_>, asid: u32, root: u64) -> Result {
    let at = asid as usize;
    bar.try_write(
        SVC_MMU_ROOT_HI::try_at(at).ok_or(EINVAL)?,
        SVC_MMU_ROOT_HI::from_raw((root >> 32) as u32),
    )?;
    bar.try_write(
        SVC_MMU_ROOT_LO::try_at(at).ok_or(EINVAL)?,
        SVC_MMU_ROOT_LO::from_raw(root as u32),
    )?;
    invalidate(bar, asid);
    Ok(())
}

kernel::bitfield! {
    /// A device page-table entry (device-model.rst, "Chip services": the emulated function's
    /// table format).
    struct Pte(u64) {
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
    fn to(addr: u64) -> Self {
        Self::from_raw(addr & Self::ADDRESS_MASK).with_valid(true)
    }
}

/// Entries per table.
const ENTRIES: usize = 512;

/// ASIDs the NIC's contexts can name (10-bit fields).
const ASIDS: usize = 1024;

/// The kernel's ASID (habanalabs `HL_KERNEL_ASID_ID`): never handed out.
const KERNEL_ASID: usize = 0;

/// Pages entered in or removed from a translation domain between two scheduling points: a
/// region of hundreds of GiB is millions of pages.
const RESCHED_PAGES: u64 = 4096;

/// One table and the tables below it.
struct Table {
    mem: Coherent<[u64]>,
    /// Tables of the next level, by index (empty at level 3).
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

/// The four levels of tables of one ASID.
struct PageTables {
    root: Table,
}

/// Levels below the root.
const LAST: u32 = 3;

/// Width of the device VAs the tables translate.
const VA_BITS: u32 = 12 + 9 * (LAST + 1);

/// The index of `va` in a table of `level`.
fn index(va: u64, level: u32) -> usize {
    ((va >> (12 + 9 * (LAST - level))) & (ENTRIES as u64 - 1)) as usize
}

/// The level whose leaves are pages of `shift`.
fn leaf_level(shift: u32) -> Result<u32> {
    match shift {
        30 | 21 | 12 => Ok(LAST - (shift - 12) / 9),
        _ => Err(EINVAL),
    }
}

impl PageTables {
    fn new(dev: &Device<Bound>) -> Result<Self> {
        Ok(Self {
            root: Table::new(dev, false)?,
        })
    }

    /// Bus address of the level-0 table, for `SVC_MMU_ROOT`.
    fn root(&self) -> u64 {
        self.root.mem.dma_address()
    }

    /// Enter one page of `1 << shift` bytes at `va`. Both `va` and the page's address must be
    /// aligned to the page size and `va` inside the device's VA space; the slot must be free.
    fn map(&mut self, dev: &Device<Bound>, va: u64, shift: u32, addr: u64, f: MmuFlags) -> Result {
        let level = leaf_level(shift)?;
        let size = 1u64 << shift;
        if va >> VA_BITS != 0 || va & (size - 1) != 0 || addr & (size - 1) != 0 {
            return Err(EINVAL);
        }
        if addr & !Pte::ADDRESS_MASK != 0 {
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
                let t = KBox::new(Table::new(dev, l + 1 == LAST)?, GFP_KERNEL)?;
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
        let pte = Pte::to(addr)
            .with_write(f.writable)
            .with_devmem(f.devmem)
            .with_leaf(level < LAST);
        table.set(i, pte)?;
        table.used += 1;
        Ok(())
    }

    /// Remove the page of `1 << shift` bytes at `va`, if one is entered. Tables left empty
    /// leave the tree and go to `freed`: the caller drops them only after the device has
    /// forgotten its translations (which may include the path through those tables).
    fn unmap(&mut self, va: u64, shift: u32, freed: &mut KVec<KBox<Table>>) -> Result {
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

/// An ASID handed out, with its tables.
type Space = Arc<Mutex<PageTables>>;

/// The ASIDs and their tables.
struct Spaces {
    pool: IdPool,
    /// Where the search for a free ASID starts: the one after the last taken, so that an ASID
    /// given back is the last to be taken again.
    next: usize,
    /// The tables of each ASID handed out, by ASID.
    tables: KVec<Option<Space>>,
}

/// The device MMU.
#[pin_data]
pub(crate) struct Mmu {
    #[pin]
    spaces: Mutex<Spaces>,
}

impl Spaces {
    fn new() -> Result<Self> {
        let mut pool = IdPool::with_capacity(ASIDS, GFP_KERNEL)?;
        // The kernel's is never handed out.
        pool.find_unused_id(KERNEL_ASID).ok_or(EINVAL)?.acquire();
        let mut tables = KVec::with_capacity(ASIDS, GFP_KERNEL)?;
        for _ in 0..ASIDS {
            tables.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            pool,
            next: KERNEL_ASID + 1,
            tables,
        })
    }
}

impl Mmu {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            spaces <- kernel::new_mutex!(Spaces::new()?),
        }? Error)
    }

    /// The tables of ASID `asid`, `EINVAL` if it is not handed out.
    fn space(&self, asid: u32) -> Result<Space> {
        self.spaces
            .lock()
            .tables
            .get(asid as usize)
            .and_then(Option::clone)
            .ok_or(EINVAL)
    }

    /// Take an ASID with empty tables; `set_root` points the device's ASID at its root.
    pub(crate) fn take(
        &self,
        dev: &Device<Bound>,
        set_root: &dyn Fn(u32, u64) -> Result,
    ) -> Result<u32> {
        let tables = Arc::pin_init(kernel::new_mutex!(PageTables::new(dev)?), GFP_KERNEL)?;
        let root = tables.lock().root();
        let mut s = self.spaces.lock();
        let next = s.next;
        let asid = match s.pool.find_unused_id(next) {
            Some(id) if id.as_usize() < ASIDS => id.acquire(),
            _ => s
                .pool
                .find_unused_id(KERNEL_ASID + 1)
                .filter(|id| id.as_usize() < ASIDS)
                .ok_or(ENOSPC)?
                .acquire(),
        };
        s.next = (asid + 1) % ASIDS;
        s.tables[asid] = Some(tables);
        if let Err(e) = set_root(asid as u32, root) {
            s.tables[asid] = None;
            s.pool.release_id(asid);
            return Err(e);
        }
        Ok(asid as u32)
    }

    /// Give back ASID `asid`: `set_root` makes it translate nothing before its tables go and
    /// before it is handed out again.
    pub(crate) fn give_back(&self, set_root: &dyn Fn(u32, u64) -> Result, asid: u32) {
        let tables = {
            let mut s = self.spaces.lock();
            let Some(t) = s.tables.get_mut(asid as usize).and_then(Option::take) else {
                return;
            };
            // A device that is gone translates nothing.
            let _ = set_root(asid, 0);
            s.pool.release_id(asid as usize);
            t
        };
        drop(tables);
    }

    /// Enter `count` pages of `1 << shift` bytes at `va` of `asid`, all or none; `invalidate`
    /// makes the device forget the ASID's translations (after a failure, before the tables
    /// that left go).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn map(
        &self,
        dev: &Device<Bound>,
        invalidate: &dyn Fn(u32),
        asid: u32,
        va: u64,
        pages: &mut dyn Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: MmuFlags,
    ) -> Result {
        let space = self.space(asid)?;
        let mut t = space.lock();
        let mut mapped = 0u64;
        let mut res = Ok(());
        for addr in pages.take(usize::try_from(count)?) {
            res = count_va(va, mapped, shift).and_then(|at| t.map(dev, at, shift, addr, flags));
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
        if res.is_err() {
            let mut freed = KVec::new();
            remove(&mut t, va, mapped, shift, &mut freed);
            drop(t);
            invalidate(asid);
            drop(freed);
        }
        res
    }

    /// Remove `count` pages of `1 << shift` bytes at `va` of `asid`; `invalidate` makes the
    /// device forget the ASID's translations, before the tables that left go. Returns the
    /// pages that could not be removed.
    pub(crate) fn unmap(
        &self,
        invalidate: &dyn Fn(u32),
        asid: u32,
        va: u64,
        count: u64,
        shift: u32,
    ) -> u64 {
        let Ok(space) = self.space(asid) else {
            return 0;
        };
        let mut freed = KVec::new();
        let failed = remove(&mut space.lock(), va, count, shift, &mut freed);
        invalidate(asid);
        // Only now may the tables that left the tree be freed, and the VAs be handed out
        // again: a new region at them must not meet translations cached for this one.
        drop(freed);
        failed
    }
}

/// Remove `count` pages of `1 << shift` bytes at `va` from `t`, the tables that leave to
/// `freed`. Returns the pages that could not be removed (no memory for the list of tables to
/// free): they stay entered, and their tables are not freed, so the device reaches nothing
/// else through them.
fn remove(
    t: &mut PageTables,
    va: u64,
    count: u64,
    shift: u32,
    freed: &mut KVec<KBox<Table>>,
) -> u64 {
    let mut failed = 0;
    for i in 0..count {
        if i % RESCHED_PAGES == RESCHED_PAGES - 1 {
            kernel::task::cond_resched();
        }
        if count_va(va, i, shift)
            .and_then(|at| t.unmap(at, shift, freed))
            .is_err()
        {
            failed += 1;
        }
    }
    failed
}

/// The VA of page `i` of pages of `1 << shift` bytes from `va`.
fn count_va(va: u64, i: u64, shift: u32) -> Result<u64> {
    i.checked_shl(shift)
        .and_then(|o| va.checked_add(o))
        .ok_or(EINVAL)
}
