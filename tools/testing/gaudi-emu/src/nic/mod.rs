// SPDX-License-Identifier: GPL-2.0
//! The Gaudi2 NIC as the silicon is (device model 2.0,
//! Documentation/infiniband/gaudi/device-model.rst): its registers at their
//! configuration-space offsets for all 24 ports, and the blocks behind
//! them, in BAR0 beside the chip services ([`crate::chip`]).
//!
//! Implemented so far: the register decode of every port (registers keep
//! what software writes), and the QPC gateway over the context tables in
//! HBM.

pub mod formats;
pub mod gateway;
pub mod layout;
pub mod queues;
pub mod rdma;
pub mod regs;

use crate::mem::{Mem, Target};
use gateway::{Done, Gateway, GW_WORDS};
pub use queues::Event;
use queues::{PortQueues, FIFO_SECURED};
use regs::{Decoded, Decoder, NIC_REGISTERS};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Where HBM starts in the chip's physical address space (hl_gaudi2.h
/// `DRAM_PHYS_BASE`): a physical address at or above it is HBM, below it a
/// host bus address.
pub const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;

/// What a physical address of the NIC reaches.
pub fn phys(addr: u64) -> Target {
    match addr.checked_sub(DRAM_PHYS_BASE) {
        Some(off) => Target::Dev(off),
        None => Target::Host(addr),
    }
}

/// The largest frame the raw path sends (model-defined: a 9000-byte MTU
/// and its Ethernet header).
pub const RAW_MAX_FRAME: u32 = 9018;

/// QPs each port's context tables hold (model-defined: hbl_cn sizes its
/// tables for NIC_MAX_QP_NUM, which the sources show but no register
/// carries): packets, doorbells and gateway operations for a higher QPN
/// are served by no context.
pub const TABLE_QPS: u32 = 1024;

/// What the NIC reaches: physical addresses (MMU bypassed), and device
/// VAs of an ASID through the device MMU, which is the chip's.
pub trait Memory {
    fn read_phys(&mut self, addr: u64, buf: &mut [u8]) -> bool;
    fn write_phys(&mut self, addr: u64, buf: &[u8]) -> bool;
    /// Write a queue entry whose first word holds the bit its consumer clears: that word
    /// last, stored once (`crate::mem::write_entry`).
    fn write_entry(&mut self, addr: u64, buf: &[u8]) -> bool {
        self.write_phys(addr, buf)
    }
    /// Read at device VA `va` of `asid`; false on a fault.
    fn read_va(&mut self, _asid: u32, _va: u64, _buf: &mut [u8]) -> bool {
        false
    }
    /// Write at device VA `va` of `asid`; false on a fault.
    fn write_va(&mut self, _asid: u32, _va: u64, _buf: &[u8]) -> bool {
        false
    }
}

impl Memory for Mem {
    fn read_phys(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.read(phys(addr), buf)
    }
    fn write_phys(&mut self, addr: u64, buf: &[u8]) -> bool {
        self.write(phys(addr), buf)
    }
    fn write_entry(&mut self, addr: u64, buf: &[u8]) -> bool {
        Mem::write_entry(self, phys(addr), buf)
    }
}

/// The memories and the device MMU of the emulated function.
pub struct Bus<'a> {
    pub mem: &'a mut Mem,
    pub mmu: &'a mut crate::chip::ChipMmu,
}

impl Memory for Bus<'_> {
    fn read_phys(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.mem.read_phys(addr, buf)
    }
    fn write_phys(&mut self, addr: u64, buf: &[u8]) -> bool {
        self.mem.write_phys(addr, buf)
    }
    fn write_entry(&mut self, addr: u64, buf: &[u8]) -> bool {
        Memory::write_entry(self.mem, addr, buf)
    }
    fn read_va(&mut self, asid: u32, va: u64, buf: &mut [u8]) -> bool {
        self.mmu.read(self.mem, asid, va, buf).is_ok()
    }
    fn write_va(&mut self, asid: u32, va: u64, buf: &[u8]) -> bool {
        self.mmu.write(self.mem, asid, va, buf).is_ok()
    }
}

/// A data access: physical with `bypass`, else at a device VA of `asid`.
pub fn read_data(mem: &mut dyn Memory, bypass: bool, asid: u32, addr: u64, buf: &mut [u8]) -> bool {
    if bypass {
        mem.read_phys(addr, buf)
    } else {
        mem.read_va(asid, addr, buf)
    }
}

pub fn write_data(mem: &mut dyn Memory, bypass: bool, asid: u32, addr: u64, buf: &[u8]) -> bool {
    if bypass {
        mem.write_phys(addr, buf)
    } else {
        mem.write_va(asid, addr, buf)
    }
}

/// The registers' values, by configuration-space offset.
#[derive(Default)]
pub struct Regs(HashMap<u64, u32>);

impl Regs {
    fn cfg(reg: u64, port: usize, index: u32) -> u64 {
        let r = NIC_REGISTERS
            .iter()
            .find(|r| r.offset == reg)
            .expect("a model register");
        regs::port_cfg(reg, port) + u64::from(index) * r.stride
    }

    /// Element `index` of per-port register `reg` (port-0 offset) of `port`.
    pub fn get(&self, reg: u64, port: usize, index: u32) -> u32 {
        self.0
            .get(&Self::cfg(reg, port, index))
            .copied()
            .unwrap_or(0)
    }

    pub fn set(&mut self, reg: u64, port: usize, index: u32, v: u32) {
        self.0.insert(Self::cfg(reg, port, index), v);
    }

    /// Element `index` of macro-shared register `reg` of `port`'s macro.
    pub fn get_macro(&self, reg: u64, port: usize, index: u32) -> u32 {
        let r = NIC_REGISTERS
            .iter()
            .find(|r| r.offset == reg)
            .expect("a model register");
        let cfg = regs::macro_cfg(reg, port) + u64::from(index) * r.stride;
        self.0.get(&cfg).copied().unwrap_or(0)
    }
}

/// What the NIC has counted of software's misuse and of what it lost
/// (stats of the control socket; a driver must keep the misuse at 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicAudits {
    /// Gateway registers written, or the gateway started, while GW_BUSY.
    pub gw_write_while_busy: u32,
    /// GW_DATA read while GW_BUSY.
    pub gw_read_while_busy: u32,
    /// Gateway operations whose context was unreachable.
    pub gw_unreachable: u32,
    /// Accesses to offsets of the NIC's part of BAR0 where the model has
    /// no register.
    pub unknown_register: u32,
    /// CQ consumer indexes written through a UMR slot for another CQ.
    pub cq_ci_refused: u32,
    /// Frames the raw path did not take: no room on CQ 0, or larger than
    /// a ring element.
    pub raw_rx_dropped: u32,
    /// Events, CQEs and doorbells lost.
    pub eq_dropped: u32,
    pub cqe_dropped: u32,
    pub db_overruns: u32,
    /// Events written over entries software had not consumed.
    pub eq_overwritten: u32,
}

/// The MSI-X vector of port `port`'s event queue on the emulated function
/// (model-defined: the chip's monitors route each port's EQ interrupt to
/// a vector of its own; the emulated function has 8).
pub fn eq_vector(port: usize) -> usize {
    1 + port % 7
}

pub struct Nic {
    decoder: Decoder,
    regs: Regs,
    gateways: Vec<Gateway>,
    queues: Vec<PortQueues>,
    /// Requester and responder engine state, by (port, QPN).
    reqs: BTreeMap<(usize, u32), rdma::Req>,
    ress: HashMap<(usize, u32), rdma::Res>,
    /// Frames to send, per port.
    tx: Vec<Vec<Vec<u8>>>,
    /// Vectors to raise.
    irqs: Vec<usize>,
    /// How long a gateway operation takes (0: at once).
    gw_delay: Duration,
    /// Ports that take no doorbell from their FIFOs (test hook).
    held: [bool; regs::PORTS],
    /// A requester's state changed outside [`Nic::step`]'s pass over the
    /// requesters (an acknowledgement, a context written with
    /// DOORBELL_FORCE): the next step may have packets to send.
    kick: bool,
    unknown: u32,
    unreachable: u32,
    cq_ci_refused: u32,
    raw_rx_dropped: u32,
    /// Gateway operations finished, for tests and stats.
    pub gw_ops: u64,
    /// Packets the RDMA engine sent again, per port.
    pub retransmits: [u32; regs::PORTS],
    /// NAKs the responders sent, per port.
    pub naks: [u32; regs::PORTS],
}

impl Nic {
    /// A NIC whose gateway operations take `gw_delay`.
    pub fn new(gw_delay: Duration) -> Self {
        Self {
            decoder: Decoder::default(),
            regs: Regs::default(),
            gateways: (0..regs::PORTS).map(|_| Gateway::default()).collect(),
            queues: (0..regs::PORTS).map(|_| PortQueues::default()).collect(),
            reqs: BTreeMap::new(),
            ress: HashMap::new(),
            tx: vec![Vec::new(); regs::PORTS],
            irqs: Vec::new(),
            gw_delay,
            held: [false; regs::PORTS],
            kick: false,
            unknown: 0,
            unreachable: 0,
            cq_ci_refused: 0,
            raw_rx_dropped: 0,
            gw_ops: 0,
            retransmits: [0; regs::PORTS],
            naks: [0; regs::PORTS],
        }
    }

    pub fn audits(&self) -> NicAudits {
        let mut a = NicAudits {
            gw_unreachable: self.unreachable,
            unknown_register: self.unknown,
            cq_ci_refused: self.cq_ci_refused,
            raw_rx_dropped: self.raw_rx_dropped,
            ..Default::default()
        };
        for g in &self.gateways {
            a.gw_write_while_busy += g.misuse.write_while_busy;
            a.gw_read_while_busy += g.misuse.read_while_busy;
        }
        for q in &self.queues {
            a.eq_dropped += q.counts.eq_dropped;
            a.cqe_dropped += q.counts.cqe_dropped;
            a.db_overruns += q.counts.db_overruns;
            a.eq_overwritten += q.counts.eq_overwritten;
        }
        a
    }

    /// A register's value as the NIC holds it (configuration-space offset).
    pub fn peek(&self, cfg: u64) -> u32 {
        self.regs.0.get(&cfg).copied().unwrap_or(0)
    }

    /// Back to power-on state (a chip reset).
    pub fn reset(&mut self) {
        let (gw_delay, unknown, unreachable, refused, ops) = (
            self.gw_delay,
            self.unknown,
            self.unreachable,
            self.cq_ci_refused,
            self.gw_ops,
        );
        *self = Self::new(gw_delay);
        (
            self.unknown,
            self.unreachable,
            self.cq_ci_refused,
            self.gw_ops,
        ) = (unknown, unreachable, refused, ops);
    }

    /// Test hook: `port` takes no doorbell from its FIFOs while `on`.
    pub fn hold(&mut self, port: usize, on: bool) {
        self.held[port] = on;
    }

    /// The vectors to raise since the last call.
    pub fn take_irqs(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.irqs)
    }

    /// Frames `port` sends.
    pub fn take_tx(&mut self, port: usize) -> Vec<Vec<u8>> {
        self.tx
            .get_mut(port)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Finish the port's gateway operation if one is under way and due.
    fn settle(&mut self, port: usize, now: Instant, mem: &mut dyn Memory) {
        if !self.gateways[port].busy() {
            return;
        }
        let req = rdma::base(
            &self.regs,
            regs::QPC0_REQ_BASE_ADDRESS_63_32,
            regs::QPC0_REQ_BASE_ADDRESS_31_7,
            port,
        );
        let res = rdma::base(
            &self.regs,
            regs::QPC0_RES_BASE_ADDRESS_63_32,
            regs::QPC0_RES_BASE_ADDRESS_31_7,
            port,
        );
        match self.gateways[port].settle(now, mem, req, res) {
            None => {}
            Some(Done::Unreachable { qpn, requester }) => {
                self.unreachable += 1;
                log::warn!(
                    "port {port}: QPC gateway: {} context of QP {qpn} unreachable (table at {:#x}): nothing done",
                    if requester { "requester" } else { "responder" },
                    if requester { req } else { res }
                );
                self.gw_ops += 1;
            }
            Some(Done::Write {
                qpn,
                requester,
                doorbell_force,
            }) => {
                self.gw_ops += 1;
                if requester {
                    // A context written anew starts with no engine state; a
                    // write with DOORBELL_FORCE kicks the QP.
                    if doorbell_force {
                        self.reqs.entry((port, qpn)).or_default();
                        self.kick = true;
                    } else {
                        self.reqs.remove(&(port, qpn));
                    }
                } else {
                    self.ress.remove(&(port, qpn));
                }
            }
            Some(Done::Read { .. }) => self.gw_ops += 1,
        }
    }

    fn lookup(&mut self, cfg: u64, what: &str) -> Option<Decoded> {
        let d = self.decoder.decode(cfg);
        if d.is_none() {
            self.unknown += 1;
            log::warn!(
                "NIC: {what} of configuration offset {cfg:#x}, where the model has no register"
            );
        }
        d
    }

    /// A 32-bit read of configuration-space offset `cfg` in the NIC's part.
    pub fn read32(&mut self, cfg: u64, now: Instant, mem: &mut dyn Memory) -> u32 {
        let Some(d) = self.lookup(cfg, "read") else {
            return 0;
        };
        self.settle(d.port, now, mem);
        match NIC_REGISTERS[d.reg].offset {
            regs::QPC0_GW_BUSY => u32::from(self.gateways[d.port].busy()),
            regs::QPC0_GW_DATA_0 => self.gateways[d.port].read_data(d.index as usize),
            regs::QPC0_GW_MASK_0 => self.gateways[d.port].mask[d.index as usize],
            regs::QPC0_GW_CTRL => self.gateways[d.port].ctrl,
            _ => self.regs.0.get(&cfg).copied().unwrap_or(0),
        }
    }

    /// A 32-bit write of configuration-space offset `cfg` in the NIC's part.
    pub fn write32(&mut self, cfg: u64, val: u32, now: Instant, mem: &mut dyn Memory) {
        let Some(d) = self.lookup(cfg, "write") else {
            return;
        };
        self.settle(d.port, now, mem);
        let (port, i) = (d.port, d.index);
        let g = &mut self.gateways[port];
        let q = &mut self.queues[port];
        let accepted = match NIC_REGISTERS[d.reg].offset {
            regs::QPC0_GW_BUSY => g.start(val, now, self.gw_delay) || val & 1 == 0,
            regs::QPC0_GW_DATA_0 => g.write_data(i as usize, val),
            regs::QPC0_GW_MASK_0 => g.write_mask(i as usize, val),
            regs::QPC0_GW_CTRL => g.write_ctrl(val),
            // Doorbells: user FIFOs 2b and 2b + 1 in UMR block b, the
            // secured FIFO in the QPC block.
            regs::UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32 => {
                return q.first32(2 * i as usize, val)
            }
            regs::UMR0_0_UNSECURE_DOORBELL1_UNSECURE_DB_FIRST32 => {
                return q.first32(2 * i as usize + 1, val)
            }
            regs::QPC0_SECURED_DB_FIRST32 => return q.first32(FIFO_SECURED, val),
            r @ (regs::UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_SECOND32
            | regs::UMR0_0_UNSECURE_DOORBELL1_UNSECURE_DB_SECOND32
            | regs::QPC0_SECURED_DB_SECOND32) => {
                let fifo = match r {
                    regs::QPC0_SECURED_DB_SECOND32 => FIFO_SECURED,
                    regs::UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_SECOND32 => 2 * i as usize,
                    _ => 2 * i as usize + 1,
                };
                if !q.second32(fifo, val & 0xff_ffff) {
                    log::info!("port {port}: doorbell FIFO {fifo} overrun");
                    self.event(
                        port,
                        Event {
                            ty: formats::EQE_DB_FIFO_OVERRUN,
                            data1: fifo as u32,
                            data2: 0,
                        },
                        mem,
                    );
                }
                return;
            }
            // Consumer indexes: a UMR slot updates its own CQ only.
            r @ (regs::UMR0_0_COMPLETION_QUEUE_CI_0_CQ_CONSUMER_INDEX
            | regs::UMR0_0_COMPLETION_QUEUE_CI_1_CQ_CONSUMER_INDEX) => {
                let (num_reg, cq) = if r == regs::UMR0_0_COMPLETION_QUEUE_CI_0_CQ_CONSUMER_INDEX {
                    (regs::UMR0_0_COMPLETION_QUEUE_CI_0_CQ_NUMBER, 2 * i + 2)
                } else {
                    (regs::UMR0_0_COMPLETION_QUEUE_CI_1_CQ_NUMBER, 2 * i + 3)
                };
                if self.regs.get(num_reg, port, i) == cq && cq < queues::CQS as u32 {
                    self.regs.set(regs::RXE0_CQ_CONSUMER_INDEX_0, port, cq, val);
                } else {
                    self.cq_ci_refused += 1;
                    log::info!("port {port}: UMR CQ slot of CQ {cq} names another CQ: ignored");
                }
                self.regs.0.insert(cfg, val);
                return;
            }
            regs::QPC0_SECURED_CQ_CONSUMER_INDEX => {
                let cq = self.regs.get(regs::QPC0_SECURED_CQ_NUMBER, port, 0) & 0xffff;
                if cq < queues::CQS as u32 {
                    self.regs.set(regs::RXE0_CQ_CONSUMER_INDEX_0, port, cq, val);
                }
                self.regs.0.insert(cfg, val);
                return;
            }
            regs::QPC0_ARM_CQ_INDEX => {
                let cq = self.regs.get(regs::QPC0_ARM_CQ_NUM, port, 0) & 0xffff;
                q.arm(cq as usize, val);
                self.regs.0.insert(cfg, val);
                return;
            }
            regs::QPC0_INTERRUPT_CLR => {
                let cause = self.regs.get(regs::QPC0_INTERRUPT_CAUSE, port, 0);
                self.regs
                    .set(regs::QPC0_INTERRUPT_CAUSE, port, 0, cause & !val);
                return;
            }
            _ => {
                self.regs.0.insert(cfg, val);
                true
            }
        };
        if !accepted {
            log::warn!("port {port}: QPC gateway register {cfg:#x} written while GW_BUSY: dropped");
        }
        // An operation with no delay is done before the next access.
        self.settle(port, now, mem);
    }

    /// Test hook (the control interface's `fuzz-nic`): post `ev` on the
    /// port's EQ as the NIC posts its events. Returns whether the EQ took
    /// it.
    /// Test hook: `n` completion events of the kernel's RC CQ on `port`'s
    /// EQ at once (their interrupts after the last): more than the EQ holds
    /// overrun it. Returns how many were written over an unconsumed entry.
    pub fn eq_flood(&mut self, port: usize, n: u32, mem: &mut dyn Memory) -> u32 {
        let before = self.queues[port].counts.eq_overwritten;
        for _ in 0..n {
            let ev = Event {
                ty: formats::EQE_COMP,
                data1: 1,
                data2: 0,
            };
            self.event(port, ev, mem);
        }
        self.irqs.dedup();
        self.queues[port].counts.eq_overwritten - before
    }

    pub fn inject_event(&mut self, port: usize, ev: Event, mem: &mut dyn Memory) -> bool {
        let before = self.queues[port].counts.eq_dropped;
        self.event(port, ev, mem);
        self.queues[port].counts.eq_dropped == before
    }

    /// Test hook: write `w` on the port's CQ `cq` as the NIC writes a CQE,
    /// with the event it causes, if the CQ has room for two more entries
    /// (an injection never fills it). Returns whether it was written.
    pub fn inject_cqe(
        &mut self,
        port: usize,
        cq: usize,
        w: [u64; 2],
        mem: &mut dyn Memory,
    ) -> bool {
        let n = cq as u32;
        let size = 1u32 << (self.regs.get(regs::RXE0_CQ_LOG_SIZE_0, port, n) & 0x1f).min(24);
        let pi = self.regs.get(regs::RXE0_CQ_PRODUCER_INDEX_0, port, n);
        let ci = self.regs.get(regs::RXE0_CQ_CONSUMER_INDEX_0, port, n);
        if pi.wrapping_sub(ci).saturating_add(2) > size {
            return false;
        }
        let before = self.queues[port].counts.cqe_dropped;
        for ev in self.queues[port].post_cqe(port, cq, w, &mut self.regs, mem) {
            self.event(port, ev, mem);
        }
        self.queues[port].counts.cqe_dropped == before
    }

    /// The raw receive ring of `port`: the producer index of CQ 0 and the
    /// ring's elements.
    pub fn raw_ring(&self, port: usize) -> (u32, u32) {
        let misc = self.regs.get(regs::RXE0_RAW_MISC_P0_0, port, 0);
        (
            self.regs.get(regs::RXE0_CQ_PRODUCER_INDEX_0, port, 0),
            1 << ((misc >> 15) & 0x1f),
        )
    }

    /// The port's link went up or down: a LINK_STATUS event (status bit 0:
    /// up).
    pub fn link_changed(&mut self, port: usize, up: bool, mem: &mut dyn Memory) {
        if port < regs::PORTS {
            self.event(
                port,
                Event {
                    ty: formats::EQE_LINK_STATUS,
                    data1: 0,
                    data2: u32::from(up),
                },
                mem,
            );
        }
    }

    fn event(&mut self, port: usize, ev: Event, mem: &mut dyn Memory) {
        if self.queues[port].post_event(port, ev, &mut self.regs, mem) {
            self.irqs.push(eq_vector(port));
        }
    }

    fn deliver(&mut self, port: usize, out: rdma::Out, mem: &mut dyn Memory) {
        if let Some(r) = self.retransmits.get_mut(port) {
            *r += out.resent;
        }
        if let Some(r) = self.naks.get_mut(port) {
            *r += out.naks;
        }
        for (cq, w) in out.cqes {
            for ev in self.queues[port].post_cqe(port, cq, w, &mut self.regs, mem) {
                self.event(port, ev, mem);
            }
        }
        for ev in out.events {
            self.event(port, ev, mem);
        }
        // Frames to the port's own MAC come straight back (two QPs of one
        // port); the rest goes on the link.
        let me = rdma::source(&self.regs, port, None).mac;
        for f in out.frames {
            if f.get(..6) == Some(&me[..]) && me != [0; 6] {
                self.receive(port, &f, Instant::now(), mem);
            } else {
                self.tx[port].push(f);
            }
        }
    }

    /// Whether any of the first `ports` ports has frames to send
    /// ([`Nic::take_tx`]).
    pub fn has_tx(&self, ports: usize) -> bool {
        self.tx.iter().take(ports).any(|t| !t.is_empty())
    }

    /// When [`Nic::step`] next has something to do, with nothing arriving
    /// meanwhile (no frame, no register access): `now` if it has work
    /// already (doorbells in the FIFOs of a port not held, a requester
    /// kicked), else the earliest of the gateway operations' ends and the
    /// requesters' retransmission timeouts; `None` if nothing is pending.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let doorbells = (0..regs::PORTS).any(|p| !self.held[p] && self.queues[p].has_doorbells());
        if self.kick || doorbells {
            return Some(now);
        }
        let gateways = self.gateways.iter().filter_map(Gateway::due);
        let timers = self.reqs.values().filter_map(rdma::Req::deadline);
        gateways.chain(timers).min()
    }

    /// Doorbells, sending, timers.
    pub fn step(&mut self, now: Instant, mem: &mut dyn Memory) {
        for port in 0..regs::PORTS {
            self.settle(port, now, mem);
            if self.held[port] || !self.queues[port].has_doorbells() {
                continue;
            }
            let dbs = self.queues[port].drain(port, &self.regs, mem);
            for db in dbs {
                log::debug!("port {port}: doorbell {db:?}");
                let mut out = rdma::Out::default();
                if rdma::doorbell(&self.regs, mem, &mut out, port, db.fifo, db.pi, db.qpn) {
                    self.reqs.entry((port, db.qpn)).or_default();
                }
                self.deliver(port, out, mem);
            }
        }
        // Every requester is pumped below: what changes one from here on
        // (an acknowledgement looped back by another) asks for the next step.
        self.kick = false;
        let keys: Vec<(usize, u32)> = self.reqs.keys().copied().collect();
        for (port, qpn) in keys {
            let mut out = rdma::Out::default();
            let st = self.reqs.get_mut(&(port, qpn)).unwrap();
            rdma::timers(&self.regs, mem, st, &mut out, port, qpn, now);
            if !rdma::pump(&self.regs, mem, st, &mut out, port, qpn, now) {
                // Idle, in error or gone: the next doorbell brings it back.
                self.reqs.remove(&(port, qpn));
            }
            self.deliver(port, out, mem);
        }
    }

    /// A frame arrived on `port` that is not RDMA: with the raw path set
    /// up (CQ 0 enabled), a frame to the port's raw MAC filter, broadcast or
    /// multicast is written into the next element of the receive ring (the
    /// element of CQ 0's producer index) and completed on CQ 0 with its
    /// element index and length; returns whether the raw path took it.
    pub fn receive_raw(&mut self, port: usize, frame: &[u8], mem: &mut dyn Memory) -> bool {
        use regs::*;
        let r = &self.regs;
        if r.get(RXE0_CQ_CFG_0, port, 0) & 1 == 0 || frame.len() < 14 {
            return false;
        }
        let i = if port & 1 == 0 { 0 } else { 2 };
        let m = |reg: u64| r.get_macro(reg, port, i);
        let mac = rdma::mac_of(
            m(RXB_CORE_TS_RAW0_MAC_47_32_0),
            m(RXB_CORE_TS_RAW0_MAC_31_0_0),
        );
        let mask = rdma::mac_of(
            m(RXB_CORE_TS_RAW0_MAC_47_32_MASK_0),
            m(RXB_CORE_TS_RAW0_MAC_31_0_MASK_0),
        );
        let group = frame[0] & 1 != 0;
        if !group && (0..6).any(|k| (frame[k] ^ mac[k]) & !mask[k] != 0) {
            return false;
        }
        let misc = r.get(RXE0_RAW_MISC_P0_0, port, 0);
        let (elem_log, count_log) = (misc & 0xf, (misc >> 15) & 0x1f);
        let base = (u64::from(r.get(RXE0_RAW_BASE_HI_P0_0, port, 0)) << 32)
            | u64::from(r.get(RXE0_RAW_BASE_LO_P0_0, port, 0));
        let pi = r.get(RXE0_CQ_PRODUCER_INDEX_0, port, 0);
        let ci = r.get(RXE0_CQ_CONSUMER_INDEX_0, port, 0);
        let size = 1u32 << (r.get(RXE0_CQ_LOG_SIZE_0, port, 0) & 0x1f).min(24);
        if frame.len() > 1 << elem_log || pi.wrapping_sub(ci) >= size {
            self.raw_rx_dropped += 1;
            log::debug!("port {port}: raw frame of {} bytes dropped", frame.len());
            return true;
        }
        let elem = pi % (1 << count_log);
        if !mem.write_phys(base + (u64::from(elem) << elem_log), frame) {
            log::warn!("port {port}: raw receive ring element {elem} unreachable");
            return true;
        }
        let mut w = queues::cqe(
            r.get(RXE0_RAW_QPN_P0_0, port, 0) & 0xff_ffff,
            false,
            elem,
            0,
        );
        <formats::Cqe as layout::Layout>::field("RAW_PKT_SIZE").set(&mut w, frame.len() as u64);
        for ev in self.queues[port].post_cqe(port, 0, w, &mut self.regs, mem) {
            self.event(port, ev, mem);
        }
        true
    }

    /// A frame arrived on `port`: RoCE v2 to the port's RDMA MAC filter
    /// for one of its valid contexts is the NIC's (returns true); anything
    /// else is not.
    pub fn receive(
        &mut self,
        port: usize,
        frame: &[u8],
        now: Instant,
        mem: &mut dyn Memory,
    ) -> bool {
        let (mac, mask) = rdma::rc_filter(&self.regs, port);
        if mac == [0; 6] || frame.len() < 6 || (0..6).any(|i| (frame[i] ^ mac[i]) & !mask[i] != 0) {
            return false;
        }
        let Ok(pkt) = crate::roce::Packet::decode(frame) else {
            return false;
        };
        if pkt.dst.ip.to_v4().is_none() {
            return false;
        }
        log::debug!(
            "port {port}: RoCE opcode {:#x} for QP {} PSN {}",
            pkt.opcode,
            pkt.dqpn,
            pkt.psn
        );
        let mut out = rdma::Out::default();
        let key = (port, pkt.dqpn);
        if pkt.opcode == crate::roce::op::ACK {
            let Some(st) = self.reqs.get_mut(&key) else {
                return false;
            };
            rdma::ack(&self.regs, mem, st, &mut out, port, &pkt, now);
            self.kick = true;
            self.deliver(port, out, mem);
            return true;
        }
        let st = self.ress.entry(key).or_default();
        let ours = rdma::write(&self.regs, mem, st, &mut out, port, &pkt);
        if !ours {
            self.ress.remove(&key);
        }
        self.deliver(port, out, mem);
        ours
    }
}

// The gateway's word count covers the larger context.
const _: () = assert!(GW_WORDS * 4 == <formats::ReqQpc as layout::Layout>::SIZE);
