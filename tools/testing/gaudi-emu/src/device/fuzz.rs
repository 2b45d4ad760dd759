// SPDX-License-Identifier: GPL-2.0
//! Test hooks that make the device misbehave toward the driver (the
//! control interface's `fuzz-*` commands): malformed CQEs and event queue
//! entries written as the device writes entries, bogus values read from
//! registers, and garbage frames arriving on a link. None of it is device
//! behaviour of the model; it lets a guest test check that the driver
//! drops what no device may produce, and survives it.
//!
//! Everything is drawn from a seeded generator, so a seed names one
//! injection. The injection keeps off real state where it can: CQEs name
//! QPs that do not exist, or QPs of the port in ways no device may (a WQE
//! that is not outstanding, an opcode or status the model lacks, a WRITE
//! the QP cannot have received), never an outstanding WQE; event queue
//! entries name ports, QPs and CQs that exist nowhere, and never carry a
//! device fatal error. Frames of `fuzz-wire` aimed at existing QPs are
//! answered as a peer's would be, and may move those QPs to ERR.

use super::*;
use crate::roce::{aeth, op, Packet, Reth};
use std::sync::Mutex;

/// xorshift64*, seeded through splitmix64 (so that 0 and small seeds give
/// unrelated sequences).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A number below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 != 0
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        b.iter_mut().for_each(|x| *x = self.next_u64() as u8);
    }
}

/// Counts per kind of what was injected, in a fixed order.
#[derive(Clone, Debug)]
pub struct Tally {
    names: &'static [&'static str],
    counts: Vec<u32>,
}

impl Tally {
    pub(crate) fn new(names: &'static [&'static str]) -> Self {
        Self {
            names,
            counts: vec![0; names.len()],
        }
    }

    pub(crate) fn add(&mut self, kind: usize) {
        self.counts[kind] += 1;
    }

    pub fn get(&self, name: &str) -> u32 {
        self.names
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.counts[i])
    }

    pub fn total(&self) -> u32 {
        self.counts.iter().sum()
    }
}

impl std::fmt::Display for Tally {
    /// "kind count kind count ...", every kind, zeros included.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sep = "";
        for (n, c) in self.names.iter().zip(&self.counts) {
            write!(f, "{sep}{n} {c}")?;
            sep = " ";
        }
        Ok(())
    }
}

// ---- Model 2.0's port queues ----------------------------------------------

/// What `fuzz-nic` injects on a port's queues, each something no NIC
/// produces for a driver that set the port up as the model says: an EQE
/// of a type the model lacks; RAW_TX_COMP of a WQE index beyond any send
/// WQ (bit 31 set); COMP of a CQ number no port has (16 and up); QP_ERR of
/// a QPN beyond hbl_cn's (8192 and up); DB_FIFO_OVERRUN of a FIFO no port
/// has (32 and up); a CQE on CQ 0 (the raw receive ring) naming an element
/// other than its producer index's, a length outside 14 to 9018 bytes, or
/// a QP other than 0; a CQE on CQ 1 (the RDMA requesters' CQ, injected only
/// where the driver set it up) of a QP beyond hbl_cn's, a responder's (the
/// driver's QPs complete no receives), or of a QP below 8192 with a random
/// tag (no request outstanding while the caller fuzzes).
pub const NIC_KINDS: [&str; 7] = [
    "eqe_unknown",
    "eqe_tx_comp",
    "eqe_comp",
    "eqe_qp_err",
    "eqe_fifo",
    "cqe_bad",
    "cqe_rc_bad",
];

impl Device {
    /// `fuzz-nic PORT N SEED`: inject `n` entries of [`NIC_KINDS`] on
    /// model 2.0's queues of `port`, as the NIC writes entries (producer
    /// indexes, write-backs, interrupts). Reply: "fuzz-nic port P injected
    /// I not_injected S" and the count of each kind; an entry the queue
    /// had no room for is not injected.
    pub fn fuzz_nic(&mut self, port: usize, n: u32, seed: u64) -> Result<String, String> {
        use crate::nic::formats::*;
        use crate::nic::Event;
        if port >= self.ports.len() {
            return Err(format!("no port {port}"));
        }
        let mut rng = Rng::new(seed);
        let mut t = Tally::new(&NIC_KINDS);
        let mut skipped = 0;
        for _ in 0..n {
            let kind = rng.below(NIC_KINDS.len() as u64) as usize;
            let (nic, mut bus) = self.nic_bus();
            let ev = |ty, data1, data2| Event { ty, data1, data2 };
            let took = match kind {
                0 => nic.inject_event(
                    port,
                    ev(8 + rng.below(8), rng.next_u32(), rng.next_u32()),
                    &mut bus,
                ),
                1 => nic.inject_event(
                    port,
                    ev(EQE_RAW_TX_COMP, 0, rng.next_u32() | 1 << 31),
                    &mut bus,
                ),
                2 => nic.inject_event(
                    port,
                    ev(EQE_COMP, 16 + rng.below(0xfff0) as u32, rng.next_u32()),
                    &mut bus,
                ),
                3 => nic.inject_event(
                    port,
                    ev(
                        EQE_QP_ERR,
                        8192 + rng.below((1 << 24) - 8192) as u32,
                        u32::from(rng.next_u32() as u8),
                    ),
                    &mut bus,
                ),
                4 => nic.inject_event(
                    port,
                    ev(EQE_DB_FIFO_OVERRUN, 32 + rng.below(0xffe0) as u32, 0),
                    &mut bus,
                ),
                6 => {
                    let (qpn, requester) = match rng.below(3) {
                        0 => (8192 + rng.below((1 << 24) - 8192) as u32, true),
                        1 => (1 + rng.below(8191) as u32, false),
                        _ => (1 + rng.below(8191) as u32, true),
                    };
                    let w = crate::nic::queues::cqe(
                        qpn,
                        requester,
                        rng.next_u32() & 0xff,
                        rng.next_u32(),
                    );
                    nic.inject_cqe(port, 1, w, &mut bus)
                }
                _ => {
                    let (pi, elems) = nic.raw_ring(port);
                    let mut elem = pi % elems;
                    let mut len = 64 + rng.below(1400) as u32;
                    let mut qpn = 0;
                    match rng.below(3) {
                        0 if elems > 1 => {
                            elem = (pi + 1 + rng.below(u64::from(elems - 1)) as u32) % elems
                        }
                        1 => {
                            len = if rng.coin() {
                                rng.below(14) as u32
                            } else {
                                9019 + rng.below(1 << 20) as u32
                            }
                        }
                        _ => qpn = 1 + rng.below((1 << 24) - 1) as u32,
                    }
                    let mut w = crate::nic::queues::cqe(qpn, false, elem, 0);
                    <Cqe as crate::nic::layout::Layout>::field("RAW_PKT_SIZE")
                        .set(&mut w, len.into());
                    nic.inject_cqe(port, 0, w, &mut bus)
                }
            };
            if took {
                t.add(kind);
            } else {
                skipped += 1;
            }
        }
        self.nic_irqs();
        Ok(format!(
            "fuzz-nic port {port} injected {} not_injected {skipped} {t}",
            t.total()
        ))
    }
}

// ---- Registers -------------------------------------------------------------

/// Register classes `fuzz-regs` can make read bogus values: what a driver
/// reads at run time, and the addresses it reads once (opt-in, as a
/// bogus MAC or IPv4 address may stick in the driver).
pub const REG_CLASSES: [&str; 8] = [
    "status",
    "irq_cause",
    "cmd_status",
    "cmd_data",
    "eq",
    "mmu_fault",
    "port",
    "port_addr",
];
const RC_STATUS: usize = 0;
const RC_IRQ_CAUSE: usize = 1;
const RC_CMD_STATUS: usize = 2;
const RC_CMD_DATA: usize = 3;
const RC_EQ: usize = 4;
const RC_MMU_FAULT: usize = 5;
const RC_PORT: usize = 6;
const RC_PORT_ADDR: usize = 7;
/// The classes fuzzed unless named: all but `port_addr`.
pub const REG_DEFAULT: u32 = (1 << RC_PORT_ADDR) - 1;

/// Parse "all", "default" or a comma-separated list of classes.
pub fn reg_classes(s: &str) -> Result<u32, String> {
    match s {
        "all" => return Ok((1 << REG_CLASSES.len()) - 1),
        "default" => return Ok(REG_DEFAULT),
        _ => {}
    }
    s.split(',').try_fold(0u32, |m, c| {
        REG_CLASSES
            .iter()
            .position(|n| *n == c)
            .map(|i| m | 1 << i)
            .ok_or_else(|| format!("unknown register class {c}"))
    })
}

/// The register fuzzer's state.
#[derive(Clone, Debug)]
pub struct State {
    /// Bogus reads left to serve.
    left: u32,
    classes: u32,
    rng: Rng,
    /// Bogus reads served per class since power-on.
    served: Tally,
}

impl Default for State {
    fn default() -> Self {
        Self {
            left: 0,
            classes: 0,
            rng: Rng::new(0),
            served: Tally::new(&REG_CLASSES),
        }
    }
}

impl Device {
    /// The class of register `off` for `fuzz-regs`, if it has one.
    fn reg_class(&self, off: u64) -> Option<usize> {
        let ports = PORT_BASE..PORT_BASE + PORT_STRIDE * self.ports.len() as u64;
        if ports.contains(&off) {
            return match (off - PORT_BASE) % PORT_STRIDE {
                PORT_MAC_LO | PORT_MAC_HI | PORT_IPV4 => Some(RC_PORT_ADDR),
                PORT_STATE..=PORT_RNR_NAKS_SENT => Some(RC_PORT),
                _ => None,
            };
        }
        if (CMD_DATA..CMD_DATA + CMD_DATA_LEN as u64).contains(&off) {
            return Some(RC_CMD_DATA);
        }
        Some(match off {
            STATUS => RC_STATUS,
            IRQ_CAUSE => RC_IRQ_CAUSE,
            CMD_STATUS => RC_CMD_STATUS,
            EQ_PI | EQ_CI | EQ_OVERFLOWS => RC_EQ,
            MMU_FAULT_COUNT | MMU_FAULT_VA_LO | MMU_FAULT_VA_HI => RC_MMU_FAULT,
            _ => return None,
        })
    }

    /// `fuzz-regs`: the next `n` reads of registers of `classes` return
    /// bogus values drawn from `seed`.
    pub fn fuzz_regs(&mut self, n: u32, seed: u64, classes: u32) {
        self.fuzz.left = n;
        self.fuzz.classes = classes;
        self.fuzz.rng = Rng::new(seed);
    }

    /// Bogus reads left to serve, and those served per class.
    pub fn fuzz_regs_state(&self) -> (u32, &Tally) {
        (self.fuzz.left, &self.fuzz.served)
    }

    /// The value a read of `off` returns: `v`, or a bogus one.
    pub(super) fn fuzz_read(&mut self, off: u64, v: u32) -> u32 {
        if self.fuzz.left == 0 {
            return v;
        }
        let Some(class) = self.reg_class(off) else {
            return v;
        };
        if self.fuzz.classes & 1 << class == 0 {
            return v;
        }
        self.fuzz.left -= 1;
        self.fuzz.served.add(class);
        let eq_size = 1u32 << self.eq_log_size.min(16);
        let r = &mut self.fuzz.rng;
        let x = r.next_u32();
        let ones = u32::MAX;
        let bogus = match class {
            RC_STATUS => r.pick(&[0, ones, STATUS_FATAL, STATUS_READY | STATUS_FATAL, x]),
            // Causes the model does not define, none, or everything.
            RC_IRQ_CAUSE => r.pick(&[ones, 0, x | !(CAUSE_TEST | CAUSE_EQ)]),
            // Never 0 (success), never an errno of the model.
            RC_CMD_STATUS => r.pick(&[ones, 0x8000_0000, 4096, 1000 + x % 100_000, x | 0x100]),
            RC_CMD_DATA => r.pick(&[ones, x, v ^ (1 << (x % 32))]),
            RC_EQ => match off {
                // Past the ring, or backwards.
                EQ_PI => r.pick(&[
                    v.wrapping_add(eq_size + x % eq_size),
                    ones,
                    v.wrapping_sub(1 + x % 4),
                ]),
                EQ_OVERFLOWS => r.pick(&[ones, v.wrapping_add(1 + x % 1_000_000), x]),
                _ => x,
            },
            _ => r.pick(&[ones, 0, x]),
        };
        let bogus = if bogus == v { !v } else { bogus };
        log::debug!("fuzz: register {off:#x} reads {bogus:#x} instead of {v:#x}");
        bogus
    }

    // ---- Shared --------------------------------------------------------

    /// Whether the device may write host memory now (what the fuzzers
    /// write, the device writes).
    fn fuzz_dma_allowed(&self) -> Result<(), String> {
        if self.fatal {
            return Err("device fatal".into());
        }
        if !self.is_ready() {
            return Err("device resetting".into());
        }
        if !self.mem.bus_master {
            return Err("bus mastering off".into());
        }
        Ok(())
    }

    /// A number that names no QP (`qp`) or no CQ on any port: half the time
    /// one below the capability, as a plausible number would be.
    fn absent(&self, rng: &mut Rng, qp: bool) -> u32 {
        let max = if qp {
            self.opts.max_qps
        } else {
            self.opts.max_cqs
        };
        let mut n = if rng.coin() {
            rng.below(u64::from(max)) as u32
        } else {
            rng.next_u32()
        };
        // MMU_FAULT's 0xffffffff means a CQ ring: not an object.
        while n == u32::MAX
            || self.ports.iter().any(|p| {
                if qp {
                    p.qps.contains_key(&n)
                } else {
                    p.cqs.contains_key(&n)
                }
            })
        {
            n = n.wrapping_add(1);
        }
        n
    }

    // ---- CQEs ----------------------------------------------------------

    /// `fuzz-cqe`: write `n` malformed CQEs into CQ `cqn` of `port`, with
    /// the owner bit the consumer takes (stale ones excepted), and notify
    /// an armed CQ as for any CQE. At most half the ring is filled; stale
    /// entries go into free slots ahead of the producer.
    pub fn fuzz_cqe(&mut self, port: usize, cqn: u32, n: u32, seed: u64) -> Result<String, String> {
        self.fuzz_dma_allowed()?;
        let cq = self.ports[port]
            .cqs
            .get(&cqn)
            .ok_or_else(|| format!("no CQ {cqn} on port {port}"))?;
        if cq.broken {
            return Err(format!("CQ {port}/{cqn} stopped (overflow or fault)"));
        }
        let mut rng = Rng::new(seed);
        let mut t = Tally::new(&CQE_KINDS);
        let mut stale = 0u32;
        let mut visible = 0u32;
        let mut skipped = 0u32;
        let mut mine: Vec<u32> = Vec::new();
        let mut others: Vec<u32> = Vec::new();
        for (qpn, q) in &self.ports[port].qps {
            if q.ctx.cqn == cqn {
                mine.push(*qpn);
            } else {
                others.push(*qpn);
            }
        }
        mine.sort_unstable();
        others.sort_unstable();
        for _ in 0..n {
            let kind = rng.below(CQE_KINDS.len() as u64) as usize;
            if kind == CK_STALE_OWNER {
                stale += 1;
                continue;
            }
            let cq = &self.ports[port].cqs[&cqn];
            let size = 1u32 << cq.log_size;
            if cq.pi.wrapping_sub(cq.ci) >= (size / 2).max(1) {
                skipped += 1;
                continue;
            }
            let pi = cq.pi;
            let (kind, mut e) = self.bad_cqe(port, kind, &mine, &others, &mut rng);
            e[31] = (e[31] & !1) | u8::from((pi >> cq.log_size) & 1 == 0);
            if !self.cq_ring_write(port, cqn, pi, &e) {
                return Err(format!(
                    "CQ {port}/{cqn}: ring write fault after {visible} entries"
                ));
            }
            let cq = self.ports[port].cqs.get_mut(&cqn).unwrap();
            cq.pi = cq.pi.wrapping_add(1);
            t.add(kind);
            visible += 1;
        }
        // Stale entries: in the slots the consumer has freed ahead of the
        // producer, with the owner bit they had (the previous pass's).
        for i in 0..stale {
            let cq = &self.ports[port].cqs[&cqn];
            let size = 1u32 << cq.log_size;
            if cq.pi.wrapping_sub(cq.ci).wrapping_add(i) >= size {
                skipped += 1;
                continue;
            }
            let at = cq.pi.wrapping_add(i);
            let mut e = [0u8; CQE_SIZE];
            rng.fill(&mut e);
            e[31] = (e[31] & !1) | u8::from((at >> cq.log_size) & 1 != 0);
            if !self.cq_ring_write(port, cqn, at, &e) {
                return Err(format!("CQ {port}/{cqn}: ring write fault"));
            }
            t.add(CK_STALE_OWNER);
        }
        let cq = self.ports[port].cqs.get_mut(&cqn).unwrap();
        if visible > 0 && cq.armed {
            cq.armed = false;
            self.post_event(EV_COMPLETION, port, cqn, 0);
        }
        Ok(format!(
            "fuzz-cqe port {port} cq {cqn} injected {} visible {visible} not_injected {skipped} {t}",
            t.total()
        ))
    }

    /// A CQE of `kind` for a CQ of `port` whose QPs are `mine` (the port's
    /// others are `others`); a kind whose QP does not exist becomes
    /// `unknown_qpn`. The owner bit is left to the caller.
    fn bad_cqe(
        &self,
        port: usize,
        kind: usize,
        mine: &[u32],
        others: &[u32],
        rng: &mut Rng,
    ) -> (usize, [u8; CQE_SIZE]) {
        let mut e = [0u8; CQE_SIZE];
        rng.fill(&mut e);
        if kind == CK_GARBAGE {
            return (kind, e);
        }
        let qps = &self.ports[port].qps;
        let own = |rng: &mut Rng, want: &dyn Fn(&Qp) -> bool| {
            let c: Vec<u32> = mine.iter().copied().filter(|n| want(&qps[n])).collect();
            (!c.is_empty()).then(|| rng.pick(&c))
        };
        let any = |_: &Qp| true;
        let qp = match kind {
            CK_BAD_INDEX | CK_BAD_OPCODE | CK_BAD_STATUS => own(rng, &any),
            CK_LONG_BYTE_COUNT => {
                own(rng, &|q: &Qp| q.ctx.flags & QPF_REMOTE_WRITE != 0).or_else(|| own(rng, &any))
            }
            CK_IMM_NOT_ALLOWED => own(rng, &|q: &Qp| q.ctx.flags & QPF_REMOTE_WRITE == 0),
            CK_FOREIGN_CQ => (!others.is_empty()).then(|| rng.pick(others)),
            _ => None,
        };
        let (kind, qpn) = match qp {
            Some(q) => (kind, q),
            None => {
                // A plausible number that no QP of the port has.
                let mut n = if rng.coin() {
                    rng.below(u64::from(self.opts.max_qps)) as u32
                } else {
                    rng.next_u32()
                };
                while qps.contains_key(&n) {
                    n = n.wrapping_add(1);
                }
                (CK_UNKNOWN_QPN, n)
            }
        };
        let mut cqe = Cqe {
            qpn,
            wqe_index: rng.next_u32() as u16,
            opcode: rng.pick(&[CQE_SEND, CQE_RECV_WRITE_IMM]),
            status: rng.below(u64::from(ST_RNR_RETRY_EXC_ERR) + 1) as u8,
            byte_len: rng.below(1 << 16) as u32,
            imm: rng.next_u32(),
        };
        match kind {
            CK_BAD_INDEX => {
                // A send completion of a WQE that is not outstanding.
                let q = &qps[&qpn];
                let head = q.pending.front().map_or(q.sq_fetch, |p| p.index);
                let outstanding = u64::from(q.sq_pi.wrapping_sub(head));
                cqe.opcode = CQE_SEND;
                cqe.wqe_index = q
                    .sq_pi
                    .wrapping_add(rng.below(0x1_0000 - outstanding) as u16);
            }
            CK_BAD_OPCODE => {
                let any = 3 + rng.below(253) as u8;
                cqe.opcode = rng.pick(&[0, 3, 4, 0x10, 0x80, 0xff, any]);
            }
            CK_BAD_STATUS => {
                cqe.status = ST_RNR_RETRY_EXC_ERR + 1 + rng.below(246) as u8;
            }
            CK_LONG_BYTE_COUNT => {
                // An incoming WRITE longer than the QP's region could take,
                // or than any message.
                let ctx = &qps[&qpn].ctx;
                let most = if ctx.has_region() {
                    ctx.region.len
                } else {
                    u64::from(MAX_MSG_LEN)
                };
                cqe.opcode = CQE_RECV_WRITE_IMM;
                cqe.status = ST_SUCCESS;
                cqe.byte_len = u32::try_from(most + 1 + rng.below(1 << 20)).unwrap_or(u32::MAX);
            }
            CK_IMM_NOT_ALLOWED => {
                // A QP that takes no WRITE cannot have received one.
                cqe.opcode = CQE_RECV_WRITE_IMM;
                cqe.status = ST_SUCCESS;
                cqe.byte_len = rng.below(4097) as u32;
            }
            _ => {}
        }
        let mut b = cqe.encode(false);
        // Reserved bytes and the owner byte's other bits stay random.
        b[16..].copy_from_slice(&e[16..]);
        (kind, b)
    }

    // ---- Event queue ---------------------------------------------------

    /// Write event queue entry `e` at index `at` (owner bit included).
    fn eq_write(&mut self, at: u32, e: &[u8; EQE_SIZE]) -> bool {
        let size = 1u32 << self.eq_log_size;
        let addr = self.eq_base + u64::from(at & (size - 1)) * EQE_SIZE as u64;
        if !self.mem.write(Target::Host(addr), e) {
            self.eq_enabled = false;
            return false;
        }
        true
    }

    fn eq_owner(&self, at: u32) -> u8 {
        u8::from((at >> self.eq_log_size) & 1 == 0)
    }

    fn eq_signal(&mut self) {
        self.cause |= CAUSE_EQ;
        self.raise(0);
    }

    /// Whether `k` more entries keep the event queue at most half full.
    fn eq_room(&self, k: u32) -> bool {
        let size = 1u32 << self.eq_log_size;
        self.eq_pi.wrapping_sub(self.eq_ci).wrapping_add(k) <= size / 2
    }

    /// An event queue entry of `kind` (owner bit left to the caller).
    fn bad_eqe(&self, kind: usize, rng: &mut Rng) -> [u8; EQE_SIZE] {
        let mut e = [0u8; EQE_SIZE];
        rng.fill(&mut e);
        let nports = self.ports.len() as u64;
        let objects = [
            EV_PORT_UP,
            EV_PORT_DOWN,
            EV_QP_ERROR,
            EV_CQ_OVERFLOW,
            EV_MMU_FAULT,
            EV_COMPLETION,
        ];
        let (ty, port) = match kind {
            EK_BAD_PORT => (rng.pick(&objects), nports + rng.below(256 - nports)),
            EK_UNKNOWN_TYPE => {
                let ty = if rng.below(8) == 0 {
                    0
                } else {
                    EV_COMPLETION + 1 + rng.below(u64::from(255 - EV_COMPLETION)) as u8
                };
                (ty, rng.below(256))
            }
            _ => (rng.pick(&objects[2..]), rng.below(nports)),
        };
        e[0] = ty;
        e[1] = port as u8;
        let d0 = match ty {
            EV_QP_ERROR | EV_MMU_FAULT => Some(self.absent(rng, true)),
            EV_CQ_OVERFLOW | EV_COMPLETION => Some(self.absent(rng, false)),
            _ => None,
        };
        if let Some(d0) = d0 {
            e[4..8].copy_from_slice(&d0.to_le_bytes());
        }
        e
    }

    /// One round of `fuzz-eqe`: entries until `f` has none left to write
    /// or draws a skipped entry, which is written one slot ahead of the
    /// producer, signalled, and returned: the slot it skipped is filled
    /// later ([`Device::fuzz_eqe_fill`]), after the consumer had time to
    /// find the hole.
    fn fuzz_eqe_round(&mut self, f: &mut EqFuzz) -> Option<Hole> {
        let mut wrote = false;
        while f.left > 0 {
            if !self.eq_enabled || self.fuzz_dma_allowed().is_err() {
                f.skipped += f.left;
                f.left = 0;
                break;
            }
            f.left -= 1;
            let kind = f.rng.below(EQE_KINDS.len() as u64) as usize;
            let room = self.eq_room(if kind == EK_SKIPPED { 2 } else { 1 });
            if kind == EK_STALE_OWNER {
                f.stale += 1;
            } else if !room {
                f.skipped += 1;
            } else if kind == EK_SKIPPED {
                let at = self.eq_pi.wrapping_add(1);
                let mut e = self.bad_eqe(EK_UNKNOWN_TYPE, &mut f.rng);
                e[15] = (e[15] & !1) | self.eq_owner(at);
                if self.eq_write(at, &e) {
                    self.eq_signal();
                    return Some(Hole {
                        at: self.eq_pi,
                        generation: self.eq_generation,
                    });
                }
            } else {
                let at = self.eq_pi;
                let mut e = self.bad_eqe(kind, &mut f.rng);
                e[15] = (e[15] & !1) | self.eq_owner(at);
                if self.eq_write(at, &e) {
                    self.eq_pi = at.wrapping_add(1);
                    f.tally.add(kind);
                    f.visible += 1;
                    wrote = true;
                }
            }
        }
        if wrote {
            self.eq_signal();
        }
        None
    }

    /// Fill the slot a skipped entry left, unless the queue changed or
    /// real events took it (then the entry stays in sequence behind them).
    fn fuzz_eqe_fill(&mut self, f: &mut EqFuzz, hole: Hole) {
        let same = self.eq_enabled && self.eq_generation == hole.generation;
        if same && self.eq_pi == hole.at {
            let mut e = self.bad_eqe(EK_UNKNOWN_TYPE, &mut f.rng);
            e[15] = (e[15] & !1) | self.eq_owner(hole.at);
            if self.eq_write(hole.at, &e) {
                self.eq_pi = hole.at.wrapping_add(2);
                self.eq_signal();
                f.tally.add(EK_SKIPPED);
                f.visible += 2;
                return;
            }
        } else if same && self.eq_pi == hole.at.wrapping_add(1) {
            // A real event filled the hole: the consumer may have taken the
            // early entry after it, so it is not overwritten.
            self.eq_pi = hole.at.wrapping_add(2);
            f.tally.add(EK_SKIPPED);
            f.visible += 1;
            return;
        }
        // The queue changed, or real events overwrote the early entry.
        f.skipped += 1;
    }

    /// The stale entries of `fuzz-eqe`, ahead of the producer in slots the
    /// consumer has freed, with the owner bit they had.
    fn fuzz_eqe_finish(&mut self, f: &mut EqFuzz) {
        let size = 1u32 << self.eq_log_size;
        let mut wrote = false;
        for i in 0..std::mem::take(&mut f.stale) {
            let used = self.eq_pi.wrapping_sub(self.eq_ci).wrapping_add(i);
            if !self.eq_enabled || self.fuzz_dma_allowed().is_err() || used >= size {
                f.skipped += 1;
                continue;
            }
            let at = self.eq_pi.wrapping_add(i);
            let mut e = self.bad_eqe(EK_UNKNOWN_TYPE, &mut f.rng);
            e[15] = (e[15] & !1) | (self.eq_owner(at) ^ 1);
            if self.eq_write(at, &e) {
                f.tally.add(EK_STALE_OWNER);
                wrote = true;
            }
        }
        // An interrupt that finds nothing new.
        if wrote {
            self.eq_signal();
        }
    }

    // ---- Wire ----------------------------------------------------------

    /// `fuzz-wire`: `n` garbage frames arrive on `port`'s link. Returns the
    /// counts per kind and how the port's counters (and the MMU fault
    /// count) moved.
    pub fn fuzz_wire(&mut self, port: usize, n: u32, seed: u64) -> Result<Vec<String>, String> {
        if self.fatal {
            return Err("device fatal".into());
        }
        if !self.is_ready() {
            return Err("device resetting".into());
        }
        if !self.ports[port].link_up {
            return Err(format!("port {port} link down"));
        }
        let mut rng = Rng::new(seed);
        let mut t = Tally::new(&WIRE_KINDS);
        let eth = |d: &Self| {
            let e = &d.ports[port].eth;
            e.rx_frames
                .wrapping_add(e.rx_nobuf)
                .wrapping_add(e.rx_filtered)
                .wrapping_add(e.errors)
        };
        let before = (self.ports[port].counters, self.mmu.faults, eth(self));
        let now = Instant::now();
        for _ in 0..n {
            let kind = rng.below(WIRE_KINDS.len() as u64) as usize;
            let (kind, frame) = self.bad_frame(port, kind, &mut rng);
            t.add(kind);
            self.receive(port, &frame, now);
        }
        let (b, c) = (before.0, self.ports[port].counters);
        Ok(vec![
            format!("fuzz-wire port {port} injected {} {t}", t.total()),
            format!(
                "fuzz-wire port {port} moved rx {} rx_drops {} icrc_errors {} naks {} mmu_faults {} eth {}",
                c.rx.wrapping_sub(b.rx),
                c.rx_drops.wrapping_sub(b.rx_drops),
                c.icrc_errors.wrapping_sub(b.icrc_errors),
                c.naks_sent.wrapping_sub(b.naks_sent),
                self.mmu.faults.wrapping_sub(before.1),
                eth(self).wrapping_sub(before.2),
            ),
        ])
    }

    /// A frame of `kind` for `port`; a kind that needs a QP in RTR or RTS
    /// becomes `bad_qpn` when the port has none.
    fn bad_frame(&self, port: usize, kind: usize, rng: &mut Rng) -> (usize, Vec<u8>) {
        let p = &self.ports[port];
        let mut live: Vec<u32> = p
            .qps
            .iter()
            .filter(|(_, q)| q.ctx.state == QPS_RTR || q.ctx.state == QPS_RTS)
            .map(|(n, _)| *n)
            .collect();
        live.sort_unstable();
        let target = (!live.is_empty()).then(|| rng.pick(&live));
        let kind = match (kind, target) {
            (WK_PSN | WK_WILD_RETH, None) => WK_BAD_QPN,
            _ => kind,
        };
        // A QPN the port does not have (24 bits, as on the wire).
        let mut absent = rng.next_u32() & PSN_MASK;
        while p.qps.contains_key(&absent) {
            absent = (absent + 1) & PSN_MASK;
        }
        let q = target.map(|n| &p.qps[&n]);
        let mut payload = vec![0u8; rng.below(65) as usize];
        rng.fill(&mut payload);
        let mut pkt = Packet {
            src: q.map_or_else(
                || Endpoint {
                    mac: [0x02, 0xf0, 0x22, 0, 0, rng.next_u32() as u8],
                    ip: crate::roce::Gid::v4(rng.next_u32().to_be_bytes()),
                },
                |q| q.ctx.dest,
            ),
            dst: p.ep,
            sport: rng.next_u32() as u16 | 0xc000,
            opcode: op::WRITE_ONLY,
            dqpn: match (kind, target) {
                (WK_BAD_QPN, _) | (_, None) => absent,
                (_, Some(n)) => n,
            },
            psn: rng.next_u32() & PSN_MASK,
            reth: Some(Reth {
                va: rng.next_u64(),
                rkey: rng.next_u32(),
                len: payload.len() as u32,
            }),
            payload: &[],
            ..Default::default()
        };
        let mut f = match kind {
            WK_BAD_OPCODE => {
                pkt.opcode = op::WRITE_MIDDLE;
                pkt.reth = None;
                pkt.payload = &payload;
                let mut f = pkt.encode(1);
                // Requests of operations the device does not implement, and
                // opcodes of other transports.
                f[crate::roce::BTH_OFF] =
                    rng.pick(&[0x00, 0x04, 0x0c, 0x10, 0x12, 0x13, 0x64, 0x81, 0xff, 0x0d]);
                crate::roce::reseal(&mut f);
                f
            }
            WK_BAD_PAD => {
                // No payload, yet a pad count: the headers run past the frame.
                pkt.opcode = rng.pick(&[op::WRITE_MIDDLE, op::WRITE_LAST, op::WRITE_ONLY]);
                if pkt.opcode != op::WRITE_ONLY {
                    pkt.reth = None;
                }
                let mut f = pkt.encode(1);
                let b = crate::roce::BTH_OFF + 1;
                f[b] = (f[b] & !0x30) | (1 + rng.below(3) as u8) << 4;
                crate::roce::reseal(&mut f);
                f
            }
            WK_PSN => {
                let q = q.unwrap();
                if rng.coin() {
                    // A request the responder has seen, or one far ahead.
                    pkt.psn = if rng.coin() {
                        q.epsn.wrapping_sub(1 + rng.below(1000) as u32) & PSN_MASK
                    } else {
                        q.epsn.wrapping_add(1 + rng.below(1 << 22) as u32) & PSN_MASK
                    };
                    pkt.reth.as_mut().unwrap().rkey = q.ctx.local_rkey;
                    pkt.payload = &payload;
                } else {
                    // An acknowledgement of a PSN the requester has not
                    // sent, or has had acknowledged.
                    pkt.opcode = op::ACK;
                    pkt.reth = None;
                    pkt.psn = if rng.coin() {
                        q.next_psn.wrapping_add(rng.below(1 << 22) as u32) & PSN_MASK
                    } else {
                        q.una_psn.wrapping_sub(1 + rng.below(1000) as u32) & PSN_MASK
                    };
                    let timer = rng.next_u32() as u8 & aeth::TIMER_MASK;
                    let syndrome = rng.pick(&[
                        aeth::ACK,
                        aeth::NAK_PSN_SEQ,
                        aeth::NAK_INVALID_REQ,
                        aeth::NAK_REMOTE_ACCESS,
                        aeth::NAK_REMOTE_OP,
                        aeth::RNR_NAK | timer,
                    ]);
                    pkt.aeth = Some((syndrome, rng.next_u32() & PSN_MASK));
                }
                pkt.encode(1)
            }
            WK_GARBAGE => {
                // Well-formed headers, anything after them.
                pkt.opcode = rng.pick(&[
                    op::WRITE_FIRST,
                    op::WRITE_MIDDLE,
                    op::WRITE_LAST,
                    op::WRITE_LAST_IMM,
                    op::WRITE_ONLY,
                    op::WRITE_ONLY_IMM,
                    op::ACK,
                ]);
                if let (Some(q), true) = (q, rng.below(4) == 0) {
                    pkt.psn = q.epsn;
                }
                pkt.imm = Some(rng.next_u32());
                pkt.aeth = Some((rng.next_u32() as u8, rng.next_u32() & PSN_MASK));
                payload.resize(rng.below(9000) as usize, 0);
                rng.fill(&mut payload);
                pkt.payload = &payload;
                pkt.encode(1)
            }
            WK_WILD_RETH => {
                let q = q.unwrap();
                let r = q.ctx.region;
                pkt.opcode = rng.pick(&[op::WRITE_FIRST, op::WRITE_ONLY, op::WRITE_ONLY_IMM]);
                pkt.imm = Some(rng.next_u32());
                pkt.psn = q.epsn;
                let x = rng.next_u64();
                let mut reth = Reth {
                    va: rng.pick(&[
                        x,
                        x & ((1 << crate::mmu::VA_BITS) - 1),
                        r.iova.wrapping_add(r.len).wrapping_sub(x % 16),
                        r.iova.wrapping_sub(1 + x % 4096),
                        u64::MAX - x % 4096,
                    ]),
                    rkey: if rng.coin() {
                        q.ctx.local_rkey
                    } else {
                        rng.next_u32() | 1
                    },
                    len: rng.pick(&[
                        x as u32,
                        0x8000_0000 | x as u32,
                        (r.len as u32).wrapping_add(1 + (x % 4096) as u32),
                        4096 + (x % 65536) as u32,
                    ]),
                };
                // The right key never names a range inside the region.
                let inside = q.ctx.grant(reth.rkey).is_some_and(|g| {
                    g.region.is_some() && QpCtx::target(&g, reth.va, reth.len.into()).is_some()
                });
                if inside {
                    reth.va = r.iova.wrapping_add(r.len);
                    reth.len = reth.len.max(1);
                }
                // Nor does the payload fit the RETH: nothing is stored.
                if payload.len() as u64 == u64::from(reth.len) {
                    payload.push(0);
                }
                pkt.reth = Some(reth);
                pkt.payload = &payload;
                pkt.encode(1)
            }
            _ => {
                pkt.payload = &payload;
                pkt.encode(1)
            }
        };
        match kind {
            WK_TRUNCATED => {
                let n = rng.below(f.len() as u64) as usize;
                f.truncate(n);
            }
            WK_NOT_FOR_PORT => {
                // Another station's MAC, or another address.
                let i = if rng.coin() {
                    rng.below(6) as usize
                } else {
                    crate::roce::ETH_HLEN + 16 + rng.below(4) as usize
                };
                f[i] ^= 1 << rng.below(8);
                crate::roce::reseal(&mut f);
            }
            WK_BAD_ICRC => {
                // Any bit the ICRC covers (resv8a is not), the ICRC's own
                // included.
                let from = crate::roce::BTH_OFF;
                let mut i = from + rng.below((f.len() - from) as u64) as usize;
                if i == from + 4 {
                    i += 1;
                }
                f[i] ^= 1 << rng.below(8);
            }
            _ => {}
        }
        (kind, f)
    }
}

pub const CQE_KINDS: [&str; 9] = [
    "unknown_qpn",
    "bad_index",
    "foreign_cq",
    "bad_opcode",
    "bad_status",
    "long_byte_count",
    "imm_not_allowed",
    "garbage",
    "stale_owner",
];
const CK_UNKNOWN_QPN: usize = 0;
const CK_BAD_INDEX: usize = 1;
const CK_FOREIGN_CQ: usize = 2;
const CK_BAD_OPCODE: usize = 3;
const CK_BAD_STATUS: usize = 4;
const CK_LONG_BYTE_COUNT: usize = 5;
const CK_IMM_NOT_ALLOWED: usize = 6;
const CK_GARBAGE: usize = 7;
const CK_STALE_OWNER: usize = 8;

pub const EQE_KINDS: [&str; 5] = [
    "bad_port",
    "unknown_type",
    "unknown_object",
    "stale_owner",
    "skipped",
];
const EK_BAD_PORT: usize = 0;
const EK_UNKNOWN_TYPE: usize = 1;
const EK_STALE_OWNER: usize = 3;
const EK_SKIPPED: usize = 4;

pub const WIRE_KINDS: [&str; 9] = [
    "truncated",
    "bad_opcode",
    "bad_qpn",
    "not_for_port",
    "bad_icrc",
    "bad_pad",
    "psn",
    "garbage",
    "wild_reth",
];
const WK_TRUNCATED: usize = 0;
const WK_BAD_OPCODE: usize = 1;
const WK_BAD_QPN: usize = 2;
const WK_NOT_FOR_PORT: usize = 3;
const WK_BAD_ICRC: usize = 4;
const WK_BAD_PAD: usize = 5;
const WK_PSN: usize = 6;
const WK_GARBAGE: usize = 7;
const WK_WILD_RETH: usize = 8;

/// Where a skipped event queue entry left its hole.
#[derive(Clone, Copy, Debug)]
struct Hole {
    at: u32,
    generation: u32,
}

/// A `fuzz-eqe` under way.
struct EqFuzz {
    rng: Rng,
    left: u32,
    stale: u32,
    visible: u32,
    skipped: u32,
    tally: Tally,
}

/// How long a skipped entry's hole stays open: time for the driver's
/// interrupt thread to look, and find nothing to take.
pub const HOLE_TIME: Duration = Duration::from_millis(20);

/// `fuzz-eqe`: write `n` malformed event queue entries (bad port, unknown
/// type, unknown object, stale owner bit, an entry written and signalled
/// before the one it follows), never a device fatal error, keeping the
/// queue at most half full. The device is released while a hole is open.
pub fn fuzz_eqe(device: &Mutex<Device>, n: u32, seed: u64) -> Result<String, String> {
    {
        let d = device.lock().unwrap();
        d.fuzz_dma_allowed()?;
        if !d.eq_enabled {
            return Err("event queue disabled".into());
        }
    }
    let mut f = EqFuzz {
        rng: Rng::new(seed),
        left: n,
        stale: 0,
        visible: 0,
        skipped: 0,
        tally: Tally::new(&EQE_KINDS),
    };
    loop {
        let hole = device.lock().unwrap().fuzz_eqe_round(&mut f);
        let Some(hole) = hole else { break };
        std::thread::sleep(HOLE_TIME);
        device.lock().unwrap().fuzz_eqe_fill(&mut f, hole);
    }
    device.lock().unwrap().fuzz_eqe_finish(&mut f);
    Ok(format!(
        "fuzz-eqe injected {} visible {} not_injected {} {}",
        f.tally.total(),
        f.visible,
        f.skipped,
        f.tally
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic_and_seeds_differ() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::new(0);
        let mut y = Rng::new(1);
        assert_ne!(x.next_u64(), y.next_u64());
        assert!((0..1000).all(|_| x.below(7) < 7));
        assert_eq!(x.below(0), 0);
    }

    #[test]
    fn register_classes_parse() {
        assert_eq!(reg_classes("default").unwrap(), REG_DEFAULT);
        assert_eq!(reg_classes("all").unwrap(), 0xff);
        assert_eq!(
            reg_classes("cmd_status,port_addr").unwrap(),
            1 << RC_CMD_STATUS | 1 << RC_PORT_ADDR
        );
        assert!(reg_classes("cmd_status,nope").is_err());
    }
}
