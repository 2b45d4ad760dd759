// SPDX-License-Identifier: GPL-2.0
//! What the NIC writes for software: event queue entries and CQEs, each
//! with its producer index written back to memory, and the doorbell FIFOs
//! software writes for the NIC.

use super::formats::{Cqe, Eqe};
use super::layout::Layout;
use super::regs::*;
use super::{Memory, Regs};

/// Doorbell FIFOs per port, and entries per FIFO.
pub const FIFOS: usize = 32;
pub const FIFO_ENTRIES: usize = 64;
/// The kernel's secured FIFO.
pub const FIFO_SECURED: usize = 30;
// A bit per FIFO in `PortQueues::nonempty`.
const _: () = assert!(FIFOS <= 32);
/// CQs per port.
pub const CQS: usize = 16;
/// The EQ's interrupt (QPC interrupt 9).
pub const EQ_INTERRUPT: u32 = 1 << 9;
const INTERRUPT9_MSI_EN: u32 = 1 << 19;
const EQ_CFG_ENABLE: u32 = 1 << 0;
const EQ_CFG_OVERRUN_EN: u32 = 1 << 1;
const EQ_CFG_WRITE_PI_EN: u32 = 1 << 3;
const EQ_CFG_INTERRUPT_PER_EQE: u32 = 1 << 4;
const CQ_CFG_ENABLE: u32 = 1 << 0;
const CQ_CFG_OVERRUN_EN: u32 = 1 << 1;
const CQ_CFG_WRITE_PI_EN: u32 = 1 << 3;
const CQ_CFG_EVENT_PER_CQE: u32 = 1 << 4;
const INDEX_MASK: u32 = 0xff_ffff;

/// One doorbell: the new producer index of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Doorbell {
    pub fifo: usize,
    pub pi: u32,
    pub qpn: u32,
}

/// What the queues counted (stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Events lost: the EQ disabled, full without overrun, or unreachable.
    pub eq_dropped: u32,
    /// CQEs lost: the CQ disabled, full without overrun, or unreachable.
    pub cqe_dropped: u32,
    /// Doorbells lost to a full FIFO.
    pub db_overruns: u32,
    /// Events written over an entry software had not consumed (the EQ full,
    /// with overrun).
    pub eq_overwritten: u32,
}

/// A port's doorbell FIFOs, its EQ's and CQs' running state.
pub struct PortQueues {
    fifos: Vec<std::collections::VecDeque<Doorbell>>,
    /// Entries each FIFO has taken out (its consumer index, mod 64).
    fifo_ci: [u32; FIFOS],
    /// FIRST32 written, waiting for SECOND32, per FIFO.
    first32: [Option<u32>; FIFOS],
    /// The FIFOs holding doorbells, a bit each.
    nonempty: u32,
    /// Armed CQs: the index the producer index must pass.
    armed: [Option<u32>; CQS],
    pub counts: QueueCounts,
}

impl Default for PortQueues {
    fn default() -> Self {
        Self {
            fifos: (0..FIFOS).map(|_| Default::default()).collect(),
            fifo_ci: [0; FIFOS],
            first32: [None; FIFOS],
            nonempty: 0,
            armed: [None; CQS],
            counts: QueueCounts::default(),
        }
    }
}

/// What an EQE carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ty: u64,
    pub data1: u32,
    pub data2: u32,
}

impl PortQueues {
    /// FIRST32 of FIFO `fifo` written.
    pub fn first32(&mut self, fifo: usize, v: u32) {
        self.first32[fifo] = Some(v);
    }

    /// SECOND32 of FIFO `fifo` written: the entry {FIRST32, `qpn`} is
    /// pushed. Returns false if the FIFO was full (the entry is lost).
    pub fn second32(&mut self, fifo: usize, qpn: u32) -> bool {
        let pi = self.first32[fifo].take().unwrap_or(0);
        let q = &mut self.fifos[fifo];
        if q.len() >= FIFO_ENTRIES {
            self.counts.db_overruns += 1;
            return false;
        }
        q.push_back(Doorbell { fifo, pi, qpn });
        self.nonempty |= 1 << fifo;
        true
    }

    /// Whether any FIFO holds a doorbell.
    pub fn has_doorbells(&self) -> bool {
        self.nonempty != 0
    }

    /// Take every doorbell waiting, FIFO by FIFO in order; each FIFO's
    /// consumer index is written back where its CI_UPD_ADDR says.
    pub fn drain(&mut self, port: usize, regs: &Regs, mem: &mut dyn Memory) -> Vec<Doorbell> {
        let mut out = Vec::new();
        let mut fifos = std::mem::take(&mut self.nonempty);
        while fifos != 0 {
            let f = fifos.trailing_zeros() as usize;
            fifos &= fifos - 1;
            let n = self.fifos[f].len();
            if n == 0 {
                continue;
            }
            out.extend(self.fifos[f].drain(..));
            self.fifo_ci[f] = (self.fifo_ci[f] + n as u32) % FIFO_ENTRIES as u32;
            let hi = regs.get(
                QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32,
                port,
                f as u32,
            );
            let lo = regs.get(
                QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7,
                port,
                f as u32,
            );
            let addr = (u64::from(hi) << 32) | (u64::from(lo) << 7);
            if addr != 0 && !mem.write_phys(addr, &self.fifo_ci[f].to_le_bytes()) {
                log::warn!(
                    "port {port}: doorbell FIFO {f}: CI write-back to {addr:#x} unreachable"
                );
            }
        }
        out
    }

    /// Post an event on the port's EQ. Returns whether its interrupt is to
    /// be raised.
    pub fn post_event(
        &mut self,
        port: usize,
        ev: Event,
        regs: &mut Regs,
        mem: &mut dyn Memory,
    ) -> bool {
        let cfg = regs.get(QPC0_EVENT_QUE_CFG, port, 0);
        if cfg & EQ_CFG_ENABLE == 0 {
            self.counts.eq_dropped += 1;
            log::debug!("port {port}: event {ev:?} dropped: EQ disabled");
            return false;
        }
        let log_size = regs.get(QPC0_EVENT_QUE_LOG_SIZE, port, 0) & 0x1f;
        let size = 1u32 << log_size.min(24);
        let pi = regs.get(QPC0_EVENT_QUE_PRODUCER_INDEX, port, 0) & INDEX_MASK;
        let ci = regs.get(QPC0_EVENT_QUE_CONSUMER_INDEX, port, 0) & INDEX_MASK;
        let full = pi.wrapping_sub(ci) & INDEX_MASK >= size;
        if full && cfg & EQ_CFG_OVERRUN_EN == 0 {
            self.counts.eq_dropped += 1;
            log::info!("port {port}: event {ev:?} dropped: EQ full");
            return false;
        }
        let base = (u64::from(regs.get(QPC0_EVENT_QUE_BASE_ADDR_63_32, port, 0)) << 32)
            | (u64::from(regs.get(QPC0_EVENT_QUE_BASE_ADDR_31_7, port, 0) & 0x1ff_ffff) << 7);
        let mut w = [0u64; 2];
        Eqe::field("TYPE").set(&mut w, ev.ty);
        Eqe::field("VALID").set(&mut w, 1);
        Eqe::field("DATA1").set(&mut w, ev.data1.into());
        Eqe::field("DATA2").set(&mut w, ev.data2.into());
        let at = base + u64::from(pi % size) * Eqe::SIZE as u64;
        if !mem.write_entry(at, &super::layout::bytes(&w)) {
            self.counts.eq_dropped += 1;
            log::warn!("port {port}: EQ entry at {at:#x} unreachable");
            return false;
        }
        if full {
            self.counts.eq_overwritten += 1;
        }
        let pi = (pi + 1) & INDEX_MASK;
        regs.set(QPC0_EVENT_QUE_PRODUCER_INDEX, port, 0, pi);
        regs.set(QPC0_EVENT_QUE_WRITE_INDEX, port, 0, pi);
        if cfg & EQ_CFG_WRITE_PI_EN != 0 {
            let a = (u64::from(regs.get(QPC0_EVENT_QUE_PI_ADDR_63_32, port, 0)) << 32)
                | (u64::from(regs.get(QPC0_EVENT_QUE_PI_ADDR_31_7, port, 0) & 0x1ff_ffff) << 7);
            if !mem.write_phys(a, &pi.to_le_bytes()) {
                log::warn!("port {port}: EQ PI write-back to {a:#x} unreachable");
            }
        }
        // One interrupt until software clears the cause (INTERRUPT_CLR).
        let cause = regs.get(QPC0_INTERRUPT_CAUSE, port, 0);
        if cfg & EQ_CFG_INTERRUPT_PER_EQE == 0 || cause & EQ_INTERRUPT != 0 {
            return false;
        }
        regs.set(QPC0_INTERRUPT_CAUSE, port, 0, cause | EQ_INTERRUPT);
        let enabled = regs.get(QPC0_INTERRUPT_EN, port, 0) & INTERRUPT9_MSI_EN != 0;
        let masked = regs.get(QPC0_INTERRUPT_MASK, port, 0) & EQ_INTERRUPT != 0;
        enabled && !masked
    }

    /// ARM_CQ_INDEX written for the CQ in ARM_CQ_NUM.
    pub fn arm(&mut self, cq: usize, index: u32) {
        if let Some(a) = self.armed.get_mut(cq) {
            *a = Some(index);
        }
    }

    /// Write a CQE on CQ `cq`; returns the events it causes (a completion
    /// event if armed and passed, or on every CQE; an error event if the
    /// CQ is full without overrun).
    pub fn post_cqe(
        &mut self,
        port: usize,
        cq: usize,
        w: [u64; 2],
        regs: &mut Regs,
        mem: &mut dyn Memory,
    ) -> Vec<Event> {
        let n = cq as u32;
        let cfg = regs.get(RXE0_CQ_CFG_0, port, n);
        if cq >= CQS || cfg & CQ_CFG_ENABLE == 0 {
            self.counts.cqe_dropped += 1;
            log::info!("port {port}: CQE for CQ {cq} dropped: not enabled");
            return Vec::new();
        }
        let size = 1u32 << (regs.get(RXE0_CQ_LOG_SIZE_0, port, n) & 0x1f).min(24);
        let pi = regs.get(RXE0_CQ_PRODUCER_INDEX_0, port, n);
        let ci = regs.get(RXE0_CQ_CONSUMER_INDEX_0, port, n);
        if pi.wrapping_sub(ci) >= size && cfg & CQ_CFG_OVERRUN_EN == 0 {
            self.counts.cqe_dropped += 1;
            return vec![Event {
                ty: super::formats::EQE_COMP_ERR,
                data1: n,
                data2: pi,
            }];
        }
        let base = (u64::from(regs.get(RXE0_CQ_BASE_ADDR_63_32, port, 0)) << 32)
            | u64::from(regs.get(RXE0_CQ_BASE_ADDR_31_7, port, 0) & !0x7f);
        let slot = 1u64 << (regs.get(RXE0_CQ_LOG_MAX_SIZE, port, 0) & 0x1f);
        let at =
            base + u64::from(n) * slot * Cqe::SIZE as u64 + u64::from(pi % size) * Cqe::SIZE as u64;
        if !mem.write_entry(at, &super::layout::bytes(&w)) {
            self.counts.cqe_dropped += 1;
            log::warn!("port {port}: CQE of CQ {cq} at {at:#x} unreachable");
            return Vec::new();
        }
        let pi = pi.wrapping_add(1);
        regs.set(RXE0_CQ_PRODUCER_INDEX_0, port, n, pi);
        regs.set(RXE0_CQ_WRITE_INDEX_0, port, n, pi);
        if cfg & CQ_CFG_WRITE_PI_EN != 0 {
            let a = (u64::from(regs.get(RXE0_CQ_PI_ADDR_HI_0, port, n)) << 32)
                | u64::from(regs.get(RXE0_CQ_PI_ADDR_LO_0, port, n) & !0x7f);
            if !mem.write_phys(a, &pi.to_le_bytes()) {
                log::warn!("port {port}: CQ {cq} PI write-back to {a:#x} unreachable");
            }
        }
        let passed = self.armed[cq].is_some_and(|idx| (pi.wrapping_sub(idx) as i32) > 0);
        if passed || cfg & CQ_CFG_EVENT_PER_CQE != 0 {
            self.armed[cq] = None;
            return vec![Event {
                ty: super::formats::EQE_COMP,
                data1: n,
                data2: pi,
            }];
        }
        Vec::new()
    }
}

/// A CQE.
pub fn cqe(qpn: u32, requester: bool, index: u32, tag: u32) -> [u64; 2] {
    let mut w = [0u64; 2];
    Cqe::field("QPN").set(&mut w, qpn.into());
    Cqe::field("IS_REQ").set(&mut w, requester.into());
    Cqe::field("VALID").set(&mut w, 1);
    Cqe::field("WQE_INDEX").set(&mut w, index.into());
    Cqe::field("TAG").set(&mut w, tag.into());
    w
}
