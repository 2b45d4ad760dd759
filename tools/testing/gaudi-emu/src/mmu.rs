// SPDX-License-Identifier: GPL-2.0
//! The device MMU: one translation domain, a 3-level page table in host
//! memory built by the driver, 4 KiB / 2 MiB / 1 GiB pages, and a
//! translation cache that only MMU_INVALIDATE empties. The emulated
//! function's device MMU ([`crate::chip`]) walks the same tables with a
//! fourth level above them ([`Mmu::with_four_levels`]).
//!
//! Strict mode (`--strict`) models a device that also keeps the
//! translation of a whole message ([`Cached`]) until an event of the
//! invalidation contract, and audits every use of a cached translation
//! against the page table as it is now: a use whose entry is gone or
//! changed is a stale translation (the driver changed the table without
//! invalidating, or the device kept a translation past an invalidation).
//! In strict mode MMU_INVALIDATE also takes time (the device says when,
//! see [`Mmu::begin_invalidation`]): a stale use meanwhile of an entry
//! that was gone when the invalidation was written is counted apart as
//! well, as the driver invalidated but did not wait for it.

use crate::mem::{Mem, Target};
use crate::regs::{PTE_ADDR_MASK, PTE_DEVMEM, PTE_LEAF, PTE_RING, PTE_VALID, PTE_WRITE};
use std::collections::{HashMap, HashSet};

/// Device VAs of a 3-level table are 39 bits wide.
pub const VA_BITS: u32 = 39;
/// Levels of a table that [`Mmu::new`] walks.
const LEVELS: u32 = 3;
const PAGE_SHIFT: u32 = 12;

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No valid entry maps the address (or translation is off).
    Unmapped(u64),
    /// A write to a page mapped read-only.
    ReadOnly(u64),
    /// A data access (WQE source, incoming WRITE) to a queue page, or a
    /// queue access (WQE fetch, CQE write) to a data page.
    Kind(u64),
    /// The page table or the target page was outside reachable memory
    /// (the access was refused and audited).
    Unreachable(u64),
}

impl Fault {
    pub fn va(self) -> u64 {
        match self {
            Fault::Unmapped(v) | Fault::ReadOnly(v) | Fault::Kind(v) | Fault::Unreachable(v) => v,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Target of the 4 KiB page.
    page: Target,
    writable: bool,
    ring: bool,
}

/// What an access is for: pages with `RING` serve queue accesses only,
/// other pages data accesses only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Reading a WQE's source, executing an incoming WRITE.
    Data,
    /// Fetching a WQE, writing a CQE.
    Ring,
    /// The control interface (tests): any page.
    Debug,
}

/// The translation of a message's range, kept for its packets (strict
/// mode). It belongs to the epoch it was made in: an invalidation (or a
/// command that removed a context or region) starts a new epoch, and the
/// next use translates again.
#[derive(Clone, Debug)]
pub struct Cached {
    /// VA of the first page of `pages` (page aligned).
    start: u64,
    /// End of the range the message covers.
    end: u64,
    write: bool,
    epoch: u64,
    pages: Vec<Entry>,
}

#[derive(Default)]
pub struct Mmu {
    pub root: u64,
    pub enabled: bool,
    cache: HashMap<u64, Entry>,
    pub faults: u32,
    pub last_fault_va: u64,
    /// Audit every use of a cached translation (strict mode).
    pub strict: bool,
    /// Uses of a cached translation that the page table no longer backs.
    pub stale: u32,
    /// Strict mode: an MMU_INVALIDATE was written and has not finished;
    /// cached translations are still used.
    pub invalidating: bool,
    /// The pages whose cached entry the page table no longer backed when
    /// the MMU_INVALIDATE under way was written.
    doomed: HashSet<u64>,
    /// Those of `stale` that used a `doomed` page while `invalidating`:
    /// the driver invalidated, and did not wait before the device went on.
    pub unwaited: u32,
    /// Advanced by every event after which no cached translation may be
    /// used (see [`Cached`]).
    epoch: u64,
    /// The page table has a fourth level above the three (VAs of 48
    /// bits); that level holds no leaves.
    four_levels: bool,
}

impl Mmu {
    /// A disabled MMU; `strict` audits uses of cached translations.
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            ..Self::default()
        }
    }

    /// A disabled MMU whose tables have four levels: 48-bit VAs, the top
    /// level holding only tables.
    pub fn with_four_levels(strict: bool) -> Self {
        Self {
            four_levels: true,
            ..Self::new(strict)
        }
    }

    fn levels(&self) -> u32 {
        LEVELS + u32::from(self.four_levels)
    }

    /// MMU_INVALIDATE: forget every cached translation.
    pub fn invalidate(&mut self) {
        self.cache.clear();
        self.invalidating = false;
        self.doomed.clear();
        self.forget_messages();
    }

    /// Strict mode: an MMU_INVALIDATE was written; cached translations
    /// stay in use until [`Mmu::invalidate`]. Notes which of them the page
    /// table no longer backs, whose uses meanwhile are `unwaited`.
    pub fn begin_invalidation(&mut self, mem: &Mem) {
        self.invalidating = true;
        let doomed: Vec<u64> = self
            .cache
            .iter()
            .filter(|(vpn, e)| self.walk(*vpn << PAGE_SHIFT, &mut |t, b| mem.peek(t, b)) != Ok(**e))
            .map(|(vpn, _)| *vpn)
            .collect();
        self.doomed.extend(doomed);
    }

    /// A command removed a context or region: translations kept for
    /// messages are made again at their next use (the per-page cache is
    /// MMU_INVALIDATE's business).
    pub fn forget_messages(&mut self) {
        self.epoch += 1;
    }

    /// Power-on state; the mode and the stale-use counts stay.
    pub fn reset(&mut self) {
        *self = Mmu {
            strict: self.strict,
            stale: self.stale,
            unwaited: self.unwaited,
            epoch: self.epoch + 1,
            four_levels: self.four_levels,
            ..Mmu::default()
        };
    }

    fn walk(
        &self,
        va: u64,
        read: &mut dyn FnMut(Target, &mut [u8]) -> bool,
    ) -> Result<Entry, Fault> {
        let last = self.levels() - 1;
        if !self.enabled || va >> (PAGE_SHIFT + 9 * self.levels()) != 0 {
            return Err(Fault::Unmapped(va));
        }
        let mut table = self.root;
        for level in 0..=last {
            let shift = PAGE_SHIFT + 9 * (last - level);
            let idx = (va >> shift) & 0x1ff;
            let mut raw = [0u8; 8];
            if !read(Target::Host(table + idx * 8), &mut raw) {
                return Err(Fault::Unreachable(va));
            }
            let pte = u64::from_le_bytes(raw);
            if pte & PTE_VALID == 0 {
                return Err(Fault::Unmapped(va));
            }
            let addr = pte & PTE_ADDR_MASK;
            if level == last || pte & PTE_LEAF != 0 {
                if shift > 30 {
                    // No leaves of 512 GiB.
                    return Err(Fault::Unmapped(va));
                }
                let page_size = 1u64 << shift;
                if addr & (page_size - 1) != 0 {
                    // A misaligned leaf is malformed: treat as unmapped.
                    return Err(Fault::Unmapped(va));
                }
                let in_page = va & (page_size - 1) & !((1 << PAGE_SHIFT) - 1);
                let base = addr + in_page;
                let page = if pte & PTE_DEVMEM != 0 {
                    Target::Dev(base)
                } else {
                    Target::Host(base)
                };
                return Ok(Entry {
                    page,
                    writable: pte & PTE_WRITE != 0,
                    ring: pte & PTE_RING != 0,
                });
            }
            table = addr;
        }
        unreachable!()
    }

    /// The page table's translation of `va` as it is now, looked up without
    /// the cache and without counting a fault (the control interface):
    /// where the byte is and whether the page is writable.
    pub fn probe(&self, mem: &Mem, va: u64) -> Result<(Target, bool), Fault> {
        let e = self.walk(va, &mut |t, b| mem.peek(t, b))?;
        Ok((e.page.add(va & ((1 << PAGE_SHIFT) - 1)), e.writable))
    }

    /// Strict mode: check a cached entry for the page of `va` against the
    /// page table as it is now; count and report a use it no longer backs.
    fn audit_use(&mut self, mem: &Mem, va: u64, e: &Entry) {
        let now = self.walk(va, &mut |t, b| mem.peek(t, b));
        if now.as_ref() != Ok(e) {
            self.stale = self.stale.wrapping_add(1);
            let unwaited = self.invalidating && self.doomed.contains(&(va >> PAGE_SHIFT));
            if unwaited {
                self.unwaited = self.unwaited.wrapping_add(1);
            }
            let page = va & !((1 << PAGE_SHIFT) - 1);
            log::warn!(
                "stale translation: device VA {page:#x} used as {:x?} ({}), the page table now says {now:x?}{}",
                e.page,
                if e.writable { "rw" } else { "ro" },
                if unwaited {
                    "; MMU_INVALIDATE written, not waited for"
                } else {
                    ""
                }
            );
        }
    }

    fn entry(&mut self, mem: &mut Mem, va: u64, write: bool, u: Use) -> Result<Entry, Fault> {
        let vpn = va >> PAGE_SHIFT;
        let e = match self.cache.get(&vpn) {
            Some(e) => {
                let e = *e;
                if self.strict && u != Use::Debug {
                    self.audit_use(mem, va, &e);
                }
                e
            }
            None => {
                let e = self.walk(va, &mut |t, b| mem.read(t, b))?;
                self.cache.insert(vpn, e);
                e
            }
        };
        if write && !e.writable {
            return Err(Fault::ReadOnly(va));
        }
        match (u, e.ring) {
            (Use::Data, true) | (Use::Ring, false) => return Err(Fault::Kind(va)),
            _ => {}
        }
        Ok(e)
    }

    fn lookup(&mut self, mem: &mut Mem, va: u64, write: bool, u: Use) -> Result<Target, Fault> {
        let e = self.entry(mem, va, write, u)?;
        Ok(e.page.add(va & ((1 << PAGE_SHIFT) - 1)))
    }

    fn count_fault<T>(&mut self, r: Result<T, Fault>) -> Result<T, Fault> {
        if let Err(f) = &r {
            self.faults = self.faults.wrapping_add(1);
            self.last_fault_va = f.va();
        }
        r
    }

    /// Translate the data range `[va, va + len)` of a message and keep the
    /// translation for it (strict mode). Nothing is kept when a page faults.
    pub fn cache(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<Cached, Fault> {
        let r = self.cache_inner(mem, va, len as u64, write);
        self.count_fault(r)
    }

    fn cache_inner(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Cached, Fault> {
        let end = va.checked_add(len).ok_or(Fault::Unmapped(va))?;
        let start = va & !((1 << PAGE_SHIFT) - 1);
        let mut pages = Vec::new();
        let mut page = start;
        while page < end {
            // The first page faults at `va` itself, as `translate` reports it.
            pages.push(self.entry(mem, page.max(va), write, Use::Data)?);
            page += 1 << PAGE_SHIFT;
        }
        Ok(Cached {
            start,
            end,
            write,
            epoch: self.epoch,
            pages,
        })
    }

    /// The pieces of `[va, va + len)` through the message translation `c`,
    /// made again first if an invalidation came since (or the range is not
    /// covered). Each page used is audited against the page table.
    fn through(
        &mut self,
        mem: &mut Mem,
        c: &mut Cached,
        va: u64,
        len: usize,
    ) -> Result<Vec<(Target, usize)>, Fault> {
        let end = va.checked_add(len as u64).ok_or(Fault::Unmapped(va))?;
        // A translation just made was checked as it was made (a hit of
        // the per-page cache is audited there).
        let fresh = c.epoch != self.epoch || va < c.start || end > c.end;
        if fresh {
            let keep_to = c.end.max(end);
            *c = self.cache(mem, va, (keep_to - va) as usize, c.write)?;
        }
        let mut out: Vec<(Target, usize)> = Vec::new();
        let mut cur = va;
        while cur < end {
            let i = ((cur - c.start) >> PAGE_SHIFT) as usize;
            let e = c.pages[i];
            if !fresh {
                self.audit_use(mem, cur, &e);
            }
            let page_end = (cur | ((1 << PAGE_SHIFT) - 1)) + 1;
            let n = (page_end.min(end) - cur) as usize;
            let t = e.page.add(cur & ((1 << PAGE_SHIFT) - 1));
            match out.last_mut() {
                Some((last, l)) if last.add(*l as u64) == t => *l += n,
                _ => out.push((t, n)),
            }
            cur += n as u64;
        }
        Ok(out)
    }

    /// Read `buf.len()` bytes at `va` through the message translation `c`.
    pub fn read_cached(
        &mut self,
        mem: &mut Mem,
        c: &mut Cached,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        let segs = self.through(mem, c, va, buf.len())?;
        let mut off = 0;
        for (t, n) in segs {
            if !mem.read(t, &mut buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
            off += n;
        }
        Ok(())
    }

    /// Write `buf` at `va` through the message translation `c`.
    pub fn write_cached(
        &mut self,
        mem: &mut Mem,
        c: &mut Cached,
        va: u64,
        buf: &[u8],
    ) -> Result<(), Fault> {
        let segs = self.through(mem, c, va, buf.len())?;
        let mut off = 0;
        for (t, n) in segs {
            if !mem.write(t, &buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
            off += n;
        }
        Ok(())
    }

    /// Translate `[va, va + len)` for a data access into physically
    /// contiguous pieces. Nothing is accessed when any page faults.
    pub fn translate(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<Vec<(Target, usize)>, Fault> {
        self.translate_for(mem, va, len, write, Use::Data)
    }

    /// Translate `[va, va + len)` for an access of kind `u`.
    pub fn translate_for(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: usize,
        write: bool,
        u: Use,
    ) -> Result<Vec<(Target, usize)>, Fault> {
        let r = self.translate_inner(mem, va, len, write, u);
        self.count_fault(r)
    }

    fn translate_inner(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: usize,
        write: bool,
        u: Use,
    ) -> Result<Vec<(Target, usize)>, Fault> {
        let mut out: Vec<(Target, usize)> = Vec::new();
        if va.checked_add(len as u64).is_none() {
            return Err(Fault::Unmapped(va));
        }
        let mut cur = va;
        let end = va + len as u64;
        while cur < end {
            let t = self.lookup(mem, cur, write, u)?;
            let page_end = (cur | ((1 << PAGE_SHIFT) - 1)) + 1;
            let n = (page_end.min(end) - cur) as usize;
            match out.last_mut() {
                Some((last, l)) if last.add(*l as u64) == t => *l += n,
                _ => out.push((t, n)),
            }
            cur += n as u64;
        }
        Ok(out)
    }

    /// Read `buf.len()` bytes of data at device VA `va`.
    pub fn read(&mut self, mem: &mut Mem, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.read_for(mem, va, buf, Use::Data)
    }

    /// Read `buf.len()` bytes at device VA `va` for an access of kind `u`.
    pub fn read_for(
        &mut self,
        mem: &mut Mem,
        va: u64,
        buf: &mut [u8],
        u: Use,
    ) -> Result<(), Fault> {
        let segs = self.translate_for(mem, va, buf.len(), false, u)?;
        let mut off = 0;
        for (t, n) in segs {
            if !mem.read(t, &mut buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
            off += n;
        }
        Ok(())
    }

    /// Write data `buf` at device VA `va`.
    pub fn write(&mut self, mem: &mut Mem, va: u64, buf: &[u8]) -> Result<(), Fault> {
        self.write_for(mem, va, buf, Use::Data)
    }

    /// Write `buf` at device VA `va` for an access of kind `u`.
    pub fn write_for(&mut self, mem: &mut Mem, va: u64, buf: &[u8], u: Use) -> Result<(), Fault> {
        let segs = self.translate_for(mem, va, buf.len(), true, u)?;
        let mut off = 0;
        for (t, n) in segs {
            if !mem.write(t, &buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
            off += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAM: u64 = 0x10_0000;
    const RAM_SIZE: u64 = 0x40_0000;

    fn mem() -> Mem {
        let mut m = Mem::new(0x20_0000).unwrap();
        let f = crate::mem::memfd(c"ram", RAM_SIZE as usize).unwrap();
        m.guest.map(RAM, RAM_SIZE, Some(f), 0).unwrap();
        m.bus_master = true;
        m
    }

    fn put(m: &mut Mem, addr: u64, v: u64) {
        assert!(m.write(Target::Host(addr), &v.to_le_bytes()));
    }

    /// Tables at RAM, RAM+4K, RAM+8K; map VA 0x4000_0000.. (L0 index 1).
    fn tables(m: &mut Mem) -> Mmu {
        put(m, RAM + 8, (RAM + 0x1000) | PTE_VALID);
        put(m, RAM + 0x1000, (RAM + 0x2000) | PTE_VALID);
        // 4 KiB pages 0 (rw) and 1 (ro), physically apart.
        put(m, RAM + 0x2000, (RAM + 0x10_0000) | PTE_VALID | PTE_WRITE);
        put(m, RAM + 0x2008, (RAM + 0x20_0000) | PTE_VALID);
        // A 2 MiB device-memory page at VA 0x4020_0000.
        put(
            m,
            RAM + 0x1008,
            PTE_VALID | PTE_WRITE | PTE_LEAF | PTE_DEVMEM,
        );
        Mmu {
            root: RAM,
            enabled: true,
            ..Default::default()
        }
    }

    #[test]
    fn translates_across_non_contiguous_pages() {
        let mut m = mem();
        let mut u = tables(&mut m);
        let segs = u.translate(&mut m, 0x4000_0ff0, 0x20, false).unwrap();
        assert_eq!(
            segs,
            vec![
                (Target::Host(RAM + 0x10_0ff0), 0x10),
                (Target::Host(RAM + 0x20_0000), 0x10)
            ]
        );
    }

    #[test]
    fn write_to_read_only_page_faults_without_access() {
        let mut m = mem();
        let mut u = tables(&mut m);
        assert_eq!(
            u.write(&mut m, 0x4000_0ffc, &[1; 8]),
            Err(Fault::ReadOnly(0x4000_1000))
        );
        let mut b = [0u8; 4];
        m.read(Target::Host(RAM + 0x10_0ffc), &mut b);
        assert_eq!(b, [0; 4], "nothing written before the fault");
        assert_eq!(u.faults, 1);
        assert_eq!(u.last_fault_va, 0x4000_1000);
    }

    #[test]
    fn unmapped_and_out_of_range_addresses_fault() {
        let mut m = mem();
        let mut u = tables(&mut m);
        assert_eq!(
            u.translate(&mut m, 0x4000_2000, 1, false),
            Err(Fault::Unmapped(0x4000_2000))
        );
        assert_eq!(u.translate(&mut m, 0, 1, false), Err(Fault::Unmapped(0)));
        assert_eq!(
            u.translate(&mut m, 1 << 39, 1, false),
            Err(Fault::Unmapped(1 << 39))
        );
        assert_eq!(
            u.translate(&mut m, u64::MAX, 2, false),
            Err(Fault::Unmapped(u64::MAX))
        );
        assert_eq!(m.audit, 0);
    }

    #[test]
    fn ring_pages_serve_queue_accesses_only() {
        let mut m = mem();
        let mut u = tables(&mut m);
        // Page 2: a queue page.
        put(
            &mut m,
            RAM + 0x2010,
            (RAM + 0x30_0000) | PTE_VALID | PTE_WRITE | PTE_RING,
        );
        let mut b = [0u8; 8];
        assert_eq!(
            u.read(&mut m, 0x4000_2000, &mut b),
            Err(Fault::Kind(0x4000_2000)),
            "a WQE source on a queue page"
        );
        assert_eq!(
            u.write(&mut m, 0x4000_2ff8, &[1; 8]),
            Err(Fault::Kind(0x4000_2ff8)),
            "an incoming WRITE to a queue page"
        );
        assert_eq!(
            u.translate(&mut m, 0x4000_1ff8, 16, false),
            Err(Fault::Kind(0x4000_2000)),
            "a source running into a queue page"
        );
        assert!(u.write_for(&mut m, 0x4000_2000, &[7; 8], Use::Ring).is_ok());
        assert!(u.read_for(&mut m, 0x4000_2000, &mut b, Use::Ring).is_ok());
        assert_eq!(b, [7; 8]);
        assert_eq!(
            u.read_for(&mut m, 0x4000_0000, &mut b, Use::Ring),
            Err(Fault::Kind(0x4000_0000)),
            "a WQE fetch from a data page"
        );
        assert!(u.read_for(&mut m, 0x4000_2000, &mut b, Use::Debug).is_ok());
        assert_eq!(u.faults, 4);
        assert_eq!(m.audit, 0);
    }

    #[test]
    fn huge_device_memory_page() {
        let mut m = mem();
        let mut u = tables(&mut m);
        u.write(&mut m, 0x4020_1234, b"hbm").unwrap();
        let mut b = [0u8; 3];
        assert!(m.dev.read(0x1234, &mut b));
        assert_eq!(&b, b"hbm");
    }

    #[test]
    fn cached_translation_survives_until_invalidate() {
        let mut m = mem();
        let mut u = tables(&mut m);
        u.translate(&mut m, 0x4000_0000, 1, false).unwrap();
        put(&mut m, RAM + 0x2000, 0);
        assert!(u.translate(&mut m, 0x4000_0000, 1, false).is_ok());
        u.invalidate();
        assert!(u.translate(&mut m, 0x4000_0000, 1, false).is_err());
    }

    #[test]
    fn strict_mode_audits_uses_of_cached_entries() {
        for strict in [false, true] {
            let mut m = mem();
            let mut u = tables(&mut m);
            u.strict = strict;
            u.translate(&mut m, 0x4000_0000, 1, false).unwrap();
            u.translate(&mut m, 0x4000_0000, 1, false).unwrap();
            assert_eq!(u.stale, 0, "the entry is still there");
            // Changed (another page) without invalidation.
            put(
                &mut m,
                RAM + 0x2000,
                (RAM + 0x30_0000) | PTE_VALID | PTE_WRITE,
            );
            assert_eq!(
                u.translate(&mut m, 0x4000_0000, 1, false).unwrap(),
                vec![(Target::Host(RAM + 0x10_0000), 1)],
                "the cache answers"
            );
            assert_eq!(u.stale, u32::from(strict));
            // Removed.
            put(&mut m, RAM + 0x2000, 0);
            u.translate(&mut m, 0x4000_0000, 1, false).unwrap();
            assert_eq!(u.stale, 2 * u32::from(strict));
            // Not a device access: no audit.
            u.read_for(&mut m, 0x4000_0000, &mut [0u8; 1], Use::Debug)
                .unwrap();
            assert_eq!(u.stale, 2 * u32::from(strict));
            u.invalidate();
            assert!(u.translate(&mut m, 0x4000_0000, 1, false).is_err());
            assert_eq!(u.stale, 2 * u32::from(strict));
            assert_eq!(m.audit, 0, "the audit's own reads are not DMA");
        }
    }

    #[test]
    fn message_translations_last_until_an_invalidation() {
        let mut m = mem();
        let mut u = tables(&mut m);
        u.strict = true;
        let mut c = u.cache(&mut m, 0x4000_0ff0, 0x20, true).unwrap_err();
        assert_eq!(c, Fault::ReadOnly(0x4000_1000), "page 1 is read-only");
        put(
            &mut m,
            RAM + 0x2008,
            (RAM + 0x20_0000) | PTE_VALID | PTE_WRITE,
        );
        u.invalidate();
        let mut msg = u.cache(&mut m, 0x4000_0ff0, 0x20, true).unwrap();
        u.write_cached(&mut m, &mut msg, 0x4000_0ff0, &[1; 0x10])
            .unwrap();
        // Page 1 goes without an invalidation: the message still uses it,
        // and the use is counted.
        put(&mut m, RAM + 0x2008, 0);
        u.write_cached(&mut m, &mut msg, 0x4000_1000, &[2; 0x10])
            .unwrap();
        assert_eq!(u.stale, 1);
        let mut b = [0u8; 0x10];
        assert!(m.read(Target::Host(RAM + 0x20_0000), &mut b));
        assert_eq!(b, [2; 0x10]);
        // A command that removed a context: the message translates again,
        // through the per-page cache (whose use is counted again).
        u.forget_messages();
        u.write_cached(&mut m, &mut msg, 0x4000_1000, &[3; 0x10])
            .unwrap();
        assert_eq!(u.stale, 2);
        // After MMU_INVALIDATE the message translates again and faults.
        u.invalidate();
        c = u
            .write_cached(&mut m, &mut msg, 0x4000_1000, &[4; 0x10])
            .unwrap_err();
        assert_eq!(c, Fault::Unmapped(0x4000_1000));
        assert_eq!(u.stale, 2);
        assert!(m.read(Target::Host(RAM + 0x20_0000), &mut b));
        assert_eq!(b, [3; 0x10], "nothing written by the faulting use");
        // Reading back through a message translation.
        let mut r = u.cache(&mut m, 0x4000_0ff0, 0x10, false).unwrap();
        let mut b = [0u8; 0x10];
        u.read_cached(&mut m, &mut r, 0x4000_0ff0, &mut b).unwrap();
        assert_eq!(b, [1; 0x10]);
    }

    #[test]
    fn page_table_outside_memory_is_audited() {
        let mut m = mem();
        let mut u = tables(&mut m);
        put(&mut m, RAM + 0x2010, 0x7000_0000 | PTE_VALID);
        // The leaf points outside guest memory: translation succeeds, the
        // access is refused and audited.
        assert!(u.read(&mut m, 0x4000_2000, &mut [0u8; 4]).is_err());
        assert_eq!(m.audit, 1);
        u.root = 0x7000_0000;
        u.invalidate();
        assert_eq!(
            u.translate(&mut m, 0x4000_0000, 1, false),
            Err(Fault::Unreachable(0x4000_0000))
        );
        assert_eq!(m.audit, 2);
    }
}
