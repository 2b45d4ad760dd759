// SPDX-License-Identifier: GPL-2.0
//! A page-table walker of the device MMU ([`crate::chip`]): one
//! translation domain, a 4-level page table in host memory built by the
//! driver, 4 KiB / 2 MiB / 1 GiB pages (the top level holds only tables),
//! and a translation cache that only an invalidation empties.
//!
//! Strict mode (`--strict`) audits every use of a cached translation
//! against the page table as it is now: a use whose entry is gone or
//! changed is a stale translation (the driver changed the table without
//! invalidating).

use crate::mem::{Mem, Target};
use std::collections::HashMap;

/// Page-table entry bits.
pub const PTE_VALID: u64 = 1 << 0;
pub const PTE_WRITE: u64 = 1 << 1;
/// A leaf above the last level: a 2 MiB or 1 GiB page.
pub const PTE_LEAF: u64 = 1 << 2;
/// The page is device memory (an offset in HBM), not host memory.
pub const PTE_DEVMEM: u64 = 1 << 3;
pub const PTE_ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

/// Device VAs are 48 bits wide.
pub const VA_BITS: u32 = 48;
/// Levels of the page table.
const LEVELS: u32 = 4;
const PAGE_SHIFT: u32 = 12;

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No valid entry maps the address (or translation is off).
    Unmapped(u64),
    /// A write to a page mapped read-only.
    ReadOnly(u64),
    /// The page table or the target page was outside reachable memory
    /// (the access was refused and audited).
    Unreachable(u64),
}

impl Fault {
    pub fn va(self) -> u64 {
        match self {
            Fault::Unmapped(v) | Fault::ReadOnly(v) | Fault::Unreachable(v) => v,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    /// Target of the 4 KiB page.
    page: Target,
    writable: bool,
}

#[derive(Default)]
pub struct Mmu {
    pub root: u64,
    pub enabled: bool,
    cache: HashMap<u64, Entry>,
    /// Audit every use of a cached translation (strict mode).
    pub strict: bool,
    /// Uses of a cached translation that the page table no longer backs.
    pub stale: u32,
}

impl Mmu {
    /// A disabled MMU; `strict` audits uses of cached translations.
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            ..Self::default()
        }
    }

    /// Forget every cached translation.
    pub fn invalidate(&mut self) {
        self.cache.clear();
    }

    fn walk(
        &self,
        va: u64,
        read: &mut dyn FnMut(Target, &mut [u8]) -> bool,
    ) -> Result<Entry, Fault> {
        let last = LEVELS - 1;
        if !self.enabled || va >> VA_BITS != 0 {
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
                });
            }
            table = addr;
        }
        unreachable!()
    }

    /// The page table's translation of `va` as it is now, looked up without
    /// the cache (the control interface): where the byte is and whether
    /// the page is writable.
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
            let page = va & !((1 << PAGE_SHIFT) - 1);
            log::warn!(
                "stale translation: device VA {page:#x} used as {:x?} ({}), the page table now says {now:x?}",
                e.page,
                if e.writable { "rw" } else { "ro" },
            );
        }
    }

    fn lookup(&mut self, mem: &mut Mem, va: u64, write: bool) -> Result<Target, Fault> {
        let vpn = va >> PAGE_SHIFT;
        let e = match self.cache.get(&vpn) {
            Some(e) => {
                let e = *e;
                if self.strict {
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
        Ok(e.page.add(va & ((1 << PAGE_SHIFT) - 1)))
    }

    /// Translate `[va, va + len)` into physically contiguous pieces.
    /// Nothing is accessed when any page faults.
    pub fn translate(
        &mut self,
        mem: &mut Mem,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<Vec<(Target, usize)>, Fault> {
        let mut out: Vec<(Target, usize)> = Vec::new();
        if va.checked_add(len as u64).is_none() {
            return Err(Fault::Unmapped(va));
        }
        let mut cur = va;
        let end = va + len as u64;
        while cur < end {
            let t = self.lookup(mem, cur, write)?;
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

    /// Read `buf.len()` bytes at device VA `va`.
    pub fn read(&mut self, mem: &mut Mem, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let segs = self.translate(mem, va, buf.len(), false)?;
        let mut off = 0;
        for (t, n) in segs {
            if !mem.read(t, &mut buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
            off += n;
        }
        Ok(())
    }

    /// Write `buf` at device VA `va`.
    pub fn write(&mut self, mem: &mut Mem, va: u64, buf: &[u8]) -> Result<(), Fault> {
        let segs = self.translate(mem, va, buf.len(), true)?;
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

    /// Tables at RAM+12K (the top level), RAM, RAM+4K, RAM+8K; map VA
    /// 0x4000_0000.. (index 1 of the second level).
    fn tables(m: &mut Mem) -> Mmu {
        put(m, RAM + 0x3000, RAM | PTE_VALID);
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
            root: RAM + 0x3000,
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
            u.translate(&mut m, 1 << 48, 1, false),
            Err(Fault::Unmapped(1 << 48))
        );
        assert_eq!(
            u.translate(&mut m, u64::MAX, 2, false),
            Err(Fault::Unmapped(u64::MAX))
        );
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
            // The control interface's look bypasses the cache: no audit.
            assert!(u.probe(&m, 0x4000_0000).is_err());
            assert_eq!(u.stale, 2 * u32::from(strict));
            u.invalidate();
            assert!(u.translate(&mut m, 0x4000_0000, 1, false).is_err());
            assert_eq!(u.stale, 2 * u32::from(strict));
            assert_eq!(m.audit, 0, "the audit's own reads are not DMA");
        }
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
