// SPDX-License-Identifier: GPL-2.0
//! The chip services of the emulated function (device model 2.0,
//! "Chip services"): on a real host habanalabs provides them to the NIC
//! driver (register access, the device MMU, DMA memory, firmware messages,
//! interrupts, reset, HBM); on the emulated function they are the
//! emulator's and model-defined. This is the device MMU: one page table per
//! ASID, four levels ([`crate::mmu`]: 4 KiB, 2 MiB and 1 GiB pages),
//! translating device VAs below 2^48. A region's device VA can then be its iova, which
//! is what a peer names in a WRITE (remote addressing, uapi.rst); on a real
//! host habanalabs maps host memory from 0xFFF0000000000000 (gaudi2P.h
//! `VA_HOST_SPACE_PAGE_START`) instead.

use crate::mem::Mem;
use crate::mmu::{Fault, Mmu};
use std::collections::HashMap;

/// Device VAs an ASID translates are below 2^VA_BITS.
pub const VA_BITS: u32 = 48;
/// ASIDs the NIC's contexts and FIFOs can name (10-bit fields).
pub const ASIDS: u32 = 1024;
/// Where the services' registers are in BAR0 (below the chip's
/// configuration space).
pub const SVC_BASE: u64 = 0x10_0000;
/// Page-table root of ASID n: low and high words, 8 bytes apart per ASID.
pub const SVC_MMU_ROOT_LO: u64 = SVC_BASE;
pub const SVC_MMU_ROOT_HI: u64 = SVC_BASE + 4;
/// Write an ASID: its cached translations are forgotten.
pub const SVC_MMU_INVALIDATE: u64 = SVC_BASE + 8 * ASIDS as u64;
/// Translation faults since power-on (read-only), and the last fault's
/// ASID and VA.
pub const SVC_MMU_FAULTS: u64 = SVC_MMU_INVALIDATE + 4;
pub const SVC_MMU_FAULT_ASID: u64 = SVC_MMU_INVALIDATE + 8;
pub const SVC_MMU_FAULT_VA_LO: u64 = SVC_MMU_INVALIDATE + 12;
pub const SVC_MMU_FAULT_VA_HI: u64 = SVC_MMU_INVALIDATE + 16;
/// Identity of the emulated function's services: [`SVC_ID_MAGIC`].
pub const SVC_ID: u64 = SVC_BASE + 0x3000;
pub const SVC_ID_MAGIC: u32 = u32::from_be_bytes(*b"G2EF");
/// The device model's version: major 31:16, minor 15:0 ([`SVC_VERSION_2_0`]).
pub const SVC_VERSION: u64 = SVC_BASE + 0x3004;
pub const SVC_VERSION_2_0: u32 = 0x0002_0000;
/// The ports the firmware enables: bit p for port p.
pub const SVC_PORT_MASK: u64 = SVC_BASE + 0x3008;
/// Write [`SVC_RESET_MAGIC`]: the chip resets (every block, the MMU).
pub const SVC_RESET: u64 = SVC_BASE + 0x300c;
pub const SVC_RESET_MAGIC: u32 = u32::from_be_bytes(*b"RSET");
/// Link state: bit p set while port p's link is up.
pub const SVC_LINK: u64 = SVC_BASE + 0x3010;
/// Chip status: [`SVC_STATUS_READY`] once a reset has finished,
/// [`SVC_STATUS_FATAL`] once the chip stopped on a fatal error.
pub const SVC_STATUS: u64 = SVC_BASE + 0x3014;
pub const SVC_STATUS_READY: u32 = 1 << 0;
pub const SVC_STATUS_FATAL: u32 = 1 << 1;
/// Interrupt causes of the services' vector (0), write 1 to clear:
/// [`SVC_CAUSE_TEST`], [`SVC_CAUSE_FATAL`].
pub const SVC_IRQ_CAUSE: u64 = SVC_BASE + 0x3018;
pub const SVC_CAUSE_TEST: u32 = 1 << 0;
pub const SVC_CAUSE_FATAL: u32 = 1 << 1;
/// Write a vector number: that MSI-X vector is raised, with the test cause.
pub const SVC_IRQ_TEST: u64 = SVC_BASE + 0x301c;
/// HBM size in bytes (low and high words).
pub const SVC_HBM_SIZE_LO: u64 = SVC_BASE + 0x3020;
pub const SVC_HBM_SIZE_HI: u64 = SVC_BASE + 0x3024;
/// HBM scrub: offset and length (multiples of 4 KiB, low and high words);
/// writing [`SVC_SCRUB_START`] to the control zeroes the range, which then
/// reads [`SVC_SCRUB_DONE`] or [`SVC_SCRUB_REFUSED`].
pub const SVC_SCRUB_ADDR_LO: u64 = SVC_BASE + 0x3028;
pub const SVC_SCRUB_ADDR_HI: u64 = SVC_BASE + 0x302c;
pub const SVC_SCRUB_LEN_LO: u64 = SVC_BASE + 0x3030;
pub const SVC_SCRUB_LEN_HI: u64 = SVC_BASE + 0x3034;
pub const SVC_SCRUB_CTRL: u64 = SVC_BASE + 0x3038;
pub const SVC_SCRUB_START: u32 = 1;
pub const SVC_SCRUB_DONE: u32 = 1;
pub const SVC_SCRUB_REFUSED: u32 = 2;
/// Port p's MAC address as the firmware gives it: bytes 2 to 5 big-endian
/// in LO (8 bytes apart per port), bytes 0 and 1 in HI bits 15:0.
pub const SVC_MAC_LO: u64 = SVC_BASE + 0x3100;
pub const SVC_MAC_HI: u64 = SVC_BASE + 0x3104;
pub const SVC_END: u64 = SVC_MAC_LO + 8 * crate::nic::regs::PORTS as u64;

/// The services' registers by name (an array by its first element), for
/// the test that compares them with device-model.rst and the driver.
pub const SVC_REGISTERS: &[(&str, u64)] = &[
    ("SVC_MMU_ROOT_LO", SVC_MMU_ROOT_LO),
    ("SVC_MMU_ROOT_HI", SVC_MMU_ROOT_HI),
    ("SVC_MMU_INVALIDATE", SVC_MMU_INVALIDATE),
    ("SVC_MMU_FAULTS", SVC_MMU_FAULTS),
    ("SVC_MMU_FAULT_ASID", SVC_MMU_FAULT_ASID),
    ("SVC_MMU_FAULT_VA_LO", SVC_MMU_FAULT_VA_LO),
    ("SVC_MMU_FAULT_VA_HI", SVC_MMU_FAULT_VA_HI),
    ("SVC_ID", SVC_ID),
    ("SVC_VERSION", SVC_VERSION),
    ("SVC_PORT_MASK", SVC_PORT_MASK),
    ("SVC_RESET", SVC_RESET),
    ("SVC_LINK", SVC_LINK),
    ("SVC_STATUS", SVC_STATUS),
    ("SVC_IRQ_CAUSE", SVC_IRQ_CAUSE),
    ("SVC_IRQ_TEST", SVC_IRQ_TEST),
    ("SVC_HBM_SIZE_LO", SVC_HBM_SIZE_LO),
    ("SVC_HBM_SIZE_HI", SVC_HBM_SIZE_HI),
    ("SVC_SCRUB_ADDR_LO", SVC_SCRUB_ADDR_LO),
    ("SVC_SCRUB_ADDR_HI", SVC_SCRUB_ADDR_HI),
    ("SVC_SCRUB_LEN_LO", SVC_SCRUB_LEN_LO),
    ("SVC_SCRUB_LEN_HI", SVC_SCRUB_LEN_HI),
    ("SVC_SCRUB_CTRL", SVC_SCRUB_CTRL),
    ("SVC_MAC_LO", SVC_MAC_LO),
    ("SVC_MAC_HI", SVC_MAC_HI),
];

/// The device MMU of the emulated function.
#[derive(Default)]
pub struct ChipMmu {
    roots: HashMap<u32, u64>,
    mmus: HashMap<u32, Mmu>,
    strict: bool,
    pub faults: u32,
    pub last_fault: (u32, u64),
    /// Stale uses (strict mode) of the tables before the last reset.
    stale_before: u32,
}

impl ChipMmu {
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            ..Default::default()
        }
    }

    pub fn reset(&mut self) {
        let (strict, faults, last, stale) =
            (self.strict, self.faults, self.last_fault, self.stale());
        *self = Self::new(strict);
        (self.faults, self.last_fault, self.stale_before) = (faults, last, stale);
    }

    /// Strict mode: uses of a cached translation that the page table no
    /// longer backed, every ASID's, since power-on.
    pub fn stale(&self) -> u32 {
        self.mmus
            .values()
            .fold(self.stale_before, |n, m| n.wrapping_add(m.stale))
    }

    /// A register read of the services' block (`off` from BAR0).
    pub fn read32(&self, off: u64) -> u32 {
        match off {
            SVC_MMU_FAULTS => self.faults,
            SVC_MMU_FAULT_ASID => self.last_fault.0,
            SVC_MMU_FAULT_VA_LO => self.last_fault.1 as u32,
            SVC_MMU_FAULT_VA_HI => (self.last_fault.1 >> 32) as u32,
            o if (SVC_MMU_ROOT_LO..SVC_MMU_INVALIDATE).contains(&o) => {
                let root = self
                    .roots
                    .get(&(((o - SVC_BASE) / 8) as u32))
                    .copied()
                    .unwrap_or(0);
                if o % 8 == 0 {
                    root as u32
                } else {
                    (root >> 32) as u32
                }
            }
            _ => 0,
        }
    }

    /// A register write of the services' block.
    pub fn write32(&mut self, off: u64, v: u32) {
        match off {
            SVC_MMU_INVALIDATE => {
                if let Some(m) = self.mmus.get_mut(&v) {
                    m.invalidate();
                }
            }
            o if (SVC_MMU_ROOT_LO..SVC_MMU_INVALIDATE).contains(&o) => {
                let asid = ((o - SVC_BASE) / 8) as u32;
                let r = self.roots.entry(asid).or_default();
                *r = if o % 8 == 0 {
                    (*r & !0xffff_ffff) | u64::from(v & !0xfff)
                } else {
                    (*r & 0xffff_ffff) | (u64::from(v) << 32)
                };
                // A root takes effect at once for walks not cached (0:
                // the ASID translates nothing, cached entries included);
                // what was cached from the old tables lasts until the
                // ASID's invalidation, which the driver issues after
                // every root write.
                let root = *r;
                let m = self
                    .mmus
                    .entry(asid)
                    .or_insert_with(|| Mmu::new(self.strict));
                m.root = root;
                m.enabled = root != 0;
            }
            _ => log::debug!("chip services: write {v:#x} at {off:#x} ignored"),
        }
    }

    fn mmu(&mut self, asid: u32, va: u64) -> Result<(&mut Mmu, u64), Fault> {
        match self.mmus.get_mut(&asid) {
            Some(m) if m.enabled && va >> VA_BITS == 0 => Ok((m, va)),
            _ => Err(Fault::Unmapped(va)),
        }
    }

    fn fault<T>(&mut self, asid: u32, va: u64, r: Result<T, Fault>) -> Result<T, Fault> {
        if r.is_err() {
            self.faults = self.faults.wrapping_add(1);
            self.last_fault = (asid, va);
            log::info!(
                "device MMU: ASID {asid} VA {va:#x}: {r:?}",
                r = r.as_ref().err()
            );
        }
        r
    }

    /// The ASIDs whose tables map `va` now, each with whether the page is
    /// writable, in order (the control interface).
    pub fn mapping(&self, mem: &Mem, va: u64) -> Vec<(u32, bool)> {
        let mut out: Vec<(u32, bool)> = self
            .mmus
            .iter()
            .filter(|(_, m)| m.enabled)
            .filter_map(|(&a, m)| m.probe(mem, va).ok().map(|(_, w)| (a, w)))
            .collect();
        out.sort_unstable();
        out
    }

    /// Read `buf.len()` bytes at `va` of `asid` as its tables map them now,
    /// without the cache or a fault counted (the control interface).
    pub fn peek(&self, mem: &Mem, asid: u32, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let m = self
            .mmus
            .get(&asid)
            .filter(|m| m.enabled)
            .ok_or(Fault::Unmapped(va))?;
        // Page by page (4 KiB, the smallest): each is contiguous.
        let mut off = 0usize;
        while off < buf.len() {
            let at = va.checked_add(off as u64).ok_or(Fault::Unmapped(va))?;
            let n = ((4096 - (at & 4095)) as usize).min(buf.len() - off);
            let (t, _) = m.probe(mem, at)?;
            if !mem.peek(t, &mut buf[off..off + n]) {
                return Err(Fault::Unreachable(at));
            }
            off += n;
        }
        Ok(())
    }

    /// Write `buf` at `va` of `asid` as its tables map it now, writable
    /// pages only, without a fault counted (the control interface's tests:
    /// what an incoming WRITE would do). Nothing is written when a page
    /// faults.
    pub fn poke(&self, mem: &Mem, asid: u32, va: u64, buf: &[u8]) -> Result<(), Fault> {
        let m = self
            .mmus
            .get(&asid)
            .filter(|m| m.enabled)
            .ok_or(Fault::Unmapped(va))?;
        let mut pieces = Vec::new();
        let mut off = 0usize;
        while off < buf.len() {
            let at = va.checked_add(off as u64).ok_or(Fault::Unmapped(va))?;
            let n = ((4096 - (at & 4095)) as usize).min(buf.len() - off);
            let (t, writable) = m.probe(mem, at)?;
            if !writable {
                return Err(Fault::ReadOnly(at));
            }
            pieces.push((t, off, n));
            off += n;
        }
        for (t, off, n) in pieces {
            if !mem.poke(t, &buf[off..off + n]) {
                return Err(Fault::Unreachable(va + off as u64));
            }
        }
        Ok(())
    }

    /// Read at device VA `va` of `asid`.
    pub fn read(&mut self, mem: &mut Mem, asid: u32, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let r = self
            .mmu(asid, va)
            .and_then(|(m, off)| m.read(mem, off, buf));
        self.fault(asid, va, r)
    }

    /// Write at device VA `va` of `asid`.
    pub fn write(&mut self, mem: &mut Mem, asid: u32, va: u64, buf: &[u8]) -> Result<(), Fault> {
        let r = self
            .mmu(asid, va)
            .and_then(|(m, off)| m.write(mem, off, buf));
        self.fault(asid, va, r)
    }
}
