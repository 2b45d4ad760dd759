// SPDX-License-Identifier: GPL-2.0
//! The QPC gateway of one port: the only way software reads and writes
//! QP contexts. Software waits for GW_BUSY to read 0, writes the 32 mask
//! words and the context words, names the QP and the side in GW_CTRL and
//! writes GW_BUSY = 1; the NIC then replaces exactly the bits whose mask
//! bit is 1 in the context in device memory (a masked read-modify-write)
//! and clears GW_BUSY. All mask bits 0 is a read: the NIC copies the
//! context into GW_DATA.
//!
//! The contexts live in HBM: the requester one of QP n at
//! REQ_BASE_ADDRESS + n x 128, the responder one at RES_BASE_ADDRESS +
//! n x 32 (physical addresses, [`super::phys`]). The emulator keeps no
//! context cache, so the cache-invalidate registers have nothing to do (a
//! model decision, device-model.rst).

use super::formats::{ReqQpc, ResQpc};
use super::layout::Layout;
use super::Memory;
use std::time::{Duration, Instant};

/// GW_DATA and GW_MASK words.
pub const GW_WORDS: usize = 32;
/// GW_CTRL fields.
pub const GW_CTRL_QPN_MASK: u32 = 0x00ff_ffff;
pub const GW_CTRL_REQUESTER: u32 = 1 << 24;
pub const GW_CTRL_DOORBELL_MASK: u32 = 1 << 25;
pub const GW_CTRL_DOORBELL_FORCE: u32 = 1 << 26;

/// What a finished gateway operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    Read {
        qpn: u32,
        requester: bool,
    },
    Write {
        qpn: u32,
        requester: bool,
        doorbell_force: bool,
    },
    /// The context's address was outside memory: nothing was read or
    /// written (GW_DATA reads all ones after a failed read).
    Unreachable {
        qpn: u32,
        requester: bool,
    },
}

/// Misuse of the gateway by software, counted by the emulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Misuse {
    /// GW_MASK, GW_DATA or GW_CTRL written, or GW_BUSY set, while busy:
    /// the write was dropped.
    pub write_while_busy: u32,
    /// GW_DATA read while busy (the words are those of before).
    pub read_while_busy: u32,
}

#[derive(Default)]
pub struct Gateway {
    pub mask: [u32; GW_WORDS],
    pub data: [u32; GW_WORDS],
    pub ctrl: u32,
    /// An operation under way and when it finishes.
    due: Option<Instant>,
    pub misuse: Misuse,
}

impl Gateway {
    pub fn busy(&self) -> bool {
        self.due.is_some()
    }

    /// When the operation under way finishes.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Software writes GW_MASK, GW_DATA or GW_CTRL: `word` of the array, or
    /// GW_CTRL for `None`. False if dropped because the gateway is busy.
    pub fn write_mask(&mut self, word: usize, v: u32) -> bool {
        self.guard() && {
            self.mask[word] = v;
            true
        }
    }

    pub fn write_data(&mut self, word: usize, v: u32) -> bool {
        self.guard() && {
            self.data[word] = v;
            true
        }
    }

    pub fn write_ctrl(&mut self, v: u32) -> bool {
        self.guard() && {
            self.ctrl = v;
            true
        }
    }

    pub fn read_data(&mut self, word: usize) -> u32 {
        if self.busy() {
            self.misuse.read_while_busy += 1;
        }
        self.data[word]
    }

    fn guard(&mut self) -> bool {
        if self.busy() {
            self.misuse.write_while_busy += 1;
            return false;
        }
        true
    }

    /// Software writes GW_BUSY: 1 starts the operation GW_CTRL and GW_MASK
    /// describe; it finishes after `delay` (at once for zero). Writing 0 or
    /// writing while busy does nothing (the latter is counted).
    pub fn start(&mut self, v: u32, now: Instant, delay: Duration) -> bool {
        if v & 1 == 0 {
            return false;
        }
        if !self.guard() {
            return false;
        }
        self.due = Some(now + delay);
        true
    }

    /// Finish the operation under way if it is due at `now`.
    pub fn settle(
        &mut self,
        now: Instant,
        mem: &mut dyn Memory,
        req_base: u64,
        res_base: u64,
    ) -> Option<Done> {
        let due = self.due?;
        if now < due {
            return None;
        }
        self.due = None;
        Some(self.execute(mem, req_base, res_base))
    }

    fn execute(&mut self, mem: &mut dyn Memory, req_base: u64, res_base: u64) -> Done {
        let qpn = self.ctrl & GW_CTRL_QPN_MASK;
        let requester = self.ctrl & GW_CTRL_REQUESTER != 0;
        let (size, base) = if requester {
            (ReqQpc::SIZE, req_base)
        } else {
            (ResQpc::SIZE, res_base)
        };
        let nwords = size / 4;
        let addr = base + u64::from(qpn) * size as u64;
        let mut ctx = vec![0u8; size];
        if qpn >= super::TABLE_QPS || !mem.read_phys(addr, &mut ctx) {
            self.data = [u32::MAX; GW_WORDS];
            return Done::Unreachable { qpn, requester };
        }
        let mask = &self.mask[..nwords];
        if mask.iter().all(|&m| m == 0) {
            for (i, c) in ctx.chunks_exact(4).enumerate() {
                self.data[i] = u32::from_le_bytes(c.try_into().unwrap());
            }
            return Done::Read { qpn, requester };
        }
        for (i, c) in ctx.chunks_exact_mut(4).enumerate() {
            let old = u32::from_le_bytes((&*c).try_into().unwrap());
            let new = (old & !mask[i]) | (self.data[i] & mask[i]);
            c.copy_from_slice(&new.to_le_bytes());
        }
        if !mem.write_phys(addr, &ctx) {
            return Done::Unreachable { qpn, requester };
        }
        Done::Write {
            qpn,
            requester,
            doorbell_force: self.ctrl & GW_CTRL_DOORBELL_FORCE != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    struct Mem(RefCell<Vec<u8>>);

    impl Memory for Mem {
        fn read_phys(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            let m = self.0.borrow();
            let a = addr as usize;
            m.get(a..a + buf.len())
                .map(|s| buf.copy_from_slice(s))
                .is_some()
        }
        fn write_phys(&mut self, addr: u64, buf: &[u8]) -> bool {
            let mut m = self.0.borrow_mut();
            let a = addr as usize;
            m.get_mut(a..a + buf.len())
                .map(|s| s.copy_from_slice(buf))
                .is_some()
        }
    }

    fn run(g: &mut Gateway, mem: &mut Mem) -> Done {
        let now = Instant::now();
        assert!(g.start(1, now, Duration::ZERO));
        g.settle(now, mem, 0x1000, 0x100).unwrap()
    }

    #[test]
    fn masked_write_changes_only_masked_bits() {
        let mut mem = Mem(RefCell::new(vec![0xa5; 0x4000]));
        let mut g = Gateway::default();
        g.mask[3] = 0x0000_ff00;
        g.data[3] = 0x1234_5678;
        g.data[4] = 0xffff_ffff; // not masked: ignored
        g.ctrl = 7 | GW_CTRL_REQUESTER;
        assert_eq!(
            run(&mut g, &mut mem),
            Done::Write {
                qpn: 7,
                requester: true,
                doorbell_force: false
            }
        );
        let m = mem.0.borrow();
        let ctx = &m[0x1000 + 7 * 128..0x1000 + 8 * 128];
        for (i, w) in ctx.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes(w.try_into().unwrap());
            assert_eq!(
                v,
                if i == 3 { 0xa5a5_56a5 } else { 0xa5a5_a5a5 },
                "word {i}"
            );
        }
        // Neighbouring contexts untouched.
        assert!(m[0x1000 + 6 * 128..0x1000 + 7 * 128]
            .iter()
            .all(|&x| x == 0xa5));
        assert!(m[0x1000 + 8 * 128..0x1000 + 9 * 128]
            .iter()
            .all(|&x| x == 0xa5));
    }

    #[test]
    fn read_copies_the_context_and_busy_drops_writes() {
        let mut mem = Mem(RefCell::new((0..=255u8).cycle().take(0x2000).collect()));
        // The responder context of QP 2: 0x100 + 64.
        let mut g = Gateway {
            ctrl: 2,
            ..Default::default()
        };
        assert_eq!(
            run(&mut g, &mut mem),
            Done::Read {
                qpn: 2,
                requester: false
            }
        );
        assert_eq!(g.data[0], u32::from_le_bytes([0x40, 0x41, 0x42, 0x43]));
        assert_eq!(g.data[7], u32::from_le_bytes([0x5c, 0x5d, 0x5e, 0x5f]));
        let now = Instant::now();
        assert!(g.start(1, now, Duration::from_secs(60)));
        assert!(!g.write_mask(0, 1));
        assert!(!g.write_ctrl(5));
        assert!(!g.start(1, now, Duration::ZERO));
        assert_eq!(g.misuse.write_while_busy, 3);
        assert_eq!(g.settle(now, &mut mem, 0x1000, 0x100), None);
        assert!(g.busy());
        assert_eq!(
            g.settle(now + Duration::from_secs(60), &mut mem, 0x1000, 0x100),
            Some(Done::Read {
                qpn: 2,
                requester: false
            })
        );
        assert_eq!(g.ctrl, 2);
    }

    #[test]
    fn unreachable_context_is_refused() {
        let mut mem = Mem(RefCell::new(vec![0; 0x1000]));
        let mut g = Gateway::default();
        g.mask[0] = 1;
        g.ctrl = 100 | GW_CTRL_REQUESTER;
        assert_eq!(
            run(&mut g, &mut mem),
            Done::Unreachable {
                qpn: 100,
                requester: true
            }
        );
        assert!(mem.0.borrow().iter().all(|&x| x == 0));
    }
}
