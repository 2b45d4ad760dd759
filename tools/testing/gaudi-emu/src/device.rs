// SPDX-License-Identifier: GPL-2.0
//! The device behind BAR0: registers, command interface, MMU, event queue,
//! completion queues and the RoCEv2 RC engine of every port.
//!
//! The device does not own sockets or threads: frames to send are queued
//! per port ([`Device::take_tx`]), received frames are handed in
//! ([`Device::receive`]), and time advances through [`Device::step`].

use crate::irq::Vectors;
use crate::mem::{Mem, Target};
use crate::mmu::{Fault, Mmu, Use};
use crate::qp::{Cq, Cqe, Pending, Qp, QpCtx, RecvWrite, Wqe};
use crate::regs::*;
use crate::roce::{aeth, op, psn_lt, Endpoint, Gid, Packet, Reth, PSN_MASK};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const EINVAL: u32 = 22;
const ENOENT: u32 = 2;
const EEXIST: u32 = 17;
const EBUSY: u32 = 16;
const EOPNOTSUPP: u32 = 95;
const EIO: u32 = 5;

/// Packets a QP may have unacknowledged.
const WINDOW: u32 = 256;
/// Request an ACK at least every this many packets.
const ACKREQ_EVERY: u32 = 32;

/// Options the device is built with (command line of the emulator).
#[derive(Clone, Debug)]
pub struct Options {
    /// Value of the ID register; a wrong one lets tests check that the
    /// driver refuses the device.
    pub id: u32,
    pub ports: usize,
    pub devmem: usize,
    pub max_qps: u32,
    pub max_cqs: u32,
    pub max_cqe: u32,
    pub max_sqe: u32,
    /// Distinguishes emulator instances in default MACs and addresses.
    pub instance: u8,
    /// Per-port address overrides.
    pub addrs: HashMap<usize, Endpoint>,
    /// A reset never finishes: lets tests check the driver's timeout.
    pub reset_hangs: bool,
    /// How long STATUS.READY reads 0 after a reset (0: it never does).
    pub reset_delay: Duration,
    /// Keep translations per message and audit their uses (see
    /// [`crate::mmu`]); counted in [`Device::stale_translations`]. Also:
    /// commands and MMU_INVALIDATE finish late, and the command protocol
    /// is audited ([`Device::audits`]).
    pub strict: bool,
    /// Strict mode: how long a command, and an MMU_INVALIDATE that no
    /// register read waits for, take.
    pub cmd_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            id: ID_MAGIC,
            ports: 24,
            devmem: 256 << 20,
            max_qps: 1024,
            max_cqs: 1024,
            max_cqe: 8192,
            max_sqe: 8192,
            instance: 0,
            addrs: HashMap::new(),
            reset_hangs: false,
            reset_delay: Duration::ZERO,
            strict: false,
            cmd_delay: Duration::from_micros(500),
        }
    }
}

pub const MAX_MTU_LOG: u8 = 13;
pub const MAX_MSG_LEN: u32 = 1 << 31;
pub const FW_VERSION_STR: &str = "gaudi-emu 1.3";
pub const MSIX_VECTORS: u32 = 8;
/// (1.3) Entries of each port's GID table.
pub const GID_TABLE_LEN: usize = 16;

/// Per-port packet counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub tx: u32,
    pub rx: u32,
    pub rx_drops: u32,
    pub retransmits: u32,
    /// NAKs sent, RNR NAKs not included.
    pub naks_sent: u32,
    pub rnr_naks_sent: u32,
    pub icrc_errors: u32,
    /// Frames the fault injector dropped or corrupted.
    pub injected: u32,
    /// Of the frames sent (`tx`), those to the port's own MAC, which it
    /// received itself instead of sending them on the link.
    pub looped: u32,
    /// The link (the emulator's side of the cable, counted by the engine):
    /// frames handed to it, frames it refused (the host's send failed),
    /// frames taken from it, and frames the host dropped before the port
    /// could take them (its socket buffer was full).
    pub link_sent: u32,
    pub link_send_errors: u32,
    pub link_received: u32,
    pub link_lost: u32,
}

/// Driver errors the device notices: the doorbell rules (every mode) and,
/// in strict mode, the command protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Audits {
    /// Strict: CMD written while a command was outstanding (written, its
    /// CMD_STATUS not read yet).
    pub cmd_overlap: u32,
    /// Strict: CMD_DATA read or written while a command was outstanding.
    pub cmd_data_busy: u32,
    /// SQ producer indexes refused (moved backwards, or more than the ring
    /// ahead of the oldest uncompleted WQE): the QP went to ERR.
    pub bad_doorbells: u32,
    /// CQ consumer indexes ignored (moved backwards, or past the producer).
    pub cq_ci_ignored: u32,
}

/// Strict mode: a command under way.
#[derive(Clone, Copy, Debug)]
struct Running {
    cmd: u32,
    /// The time of the CMD write, which the command executes at.
    now: Instant,
    /// When it finishes (wall clock).
    due: Instant,
}

/// What the control interface asks a port to do to frames it sends.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inject {
    pub drop: u32,
    pub corrupt: u32,
    pub delay: Duration,
    /// Answer the next first packets of incoming WRITEs with this NAK
    /// syndrome (control interface `nak`), this many times.
    pub nak: Option<(u8, u32)>,
    /// Complete the next WQEs fetched on this port with this status, as if
    /// the device had failed them (control interface `fail-wqe`).
    pub fail_wqe: Option<(u8, u32)>,
    /// Of the next frames, hold every other one back by 5 ms, so that the
    /// frame after it arrives first (control interface `reorder`).
    pub reorder: u32,
}

pub struct Port {
    /// The station address (PORT_MAC, writable from 1.3) and the factory
    /// IPv4 address (PORT_IPV4).
    pub ep: Endpoint,
    /// The MAC a reset restores.
    factory_mac: [u8; 6],
    /// (1.3) The GID table: RoCEv2 frames to these addresses are the
    /// RDMA engine's.
    pub gids: [Option<Gid>; GID_TABLE_LEN],
    /// (1.3) The Ethernet rings.
    pub eth: eth::Rings,
    pub link_up: bool,
    pub counters: Counters,
    pub inject: Inject,
    pub qps: HashMap<u32, Qp>,
    pub cqs: HashMap<u32, Cq>,
    tx: Vec<(Instant, Vec<u8>)>,
    ip_id: u16,
}

pub struct Device {
    opts: Options,
    scratch: u32,
    cause: u32,
    test_irqs: u32,
    /// False only when a reset hangs (`Options::reset_hangs`).
    ready: bool,
    /// A reset finishes at this time (`Options::reset_delay`).
    busy_until: Option<Instant>,
    /// Interrupts not raised: bus mastering off, or the vector not enabled.
    irq_no_master: u32,
    fatal: bool,
    /// The device vanished ([`Device::vanish`]): it answers nothing.
    gone: bool,
    dma_test_addr: u64,
    dma_test_len: u32,
    dma_test_status: u32,
    mem: Mem,
    pub mmu: Mmu,
    eq_base: u64,
    eq_log_size: u32,
    eq_enabled: bool,
    eq_pi: u32,
    eq_ci: u32,
    eq_overflows: u32,
    /// Counts the event queue's enablings (and resets).
    eq_generation: u32,
    cmd_data: [u8; CMD_DATA_LEN],
    cmd_status: u32,
    /// Strict mode: the command under way, if any.
    running: Option<Running>,
    /// Strict mode: a command was written and its CMD_STATUS not read yet.
    cmd_outstanding: bool,
    /// Strict mode: an MMU_INVALIDATE under way finishes at this time, or
    /// at the next register read.
    invalidation_due: Option<Instant>,
    audits: Audits,
    /// Test hooks of the control interface (`fuzz-*`).
    fuzz: fuzz::State,
    pub ports: Vec<Port>,
    vectors: Arc<Vectors>,
    /// Model 2.0: the NIC blocks at their configuration-space offsets.
    pub nic: crate::nic::Nic,
    /// Model 2.0: the emulated function's device MMU (a chip service).
    pub chip: crate::chip::ChipMmu,
}

fn default_ep(instance: u8, port: usize) -> Endpoint {
    Endpoint {
        mac: [0x02, 0x1d, 0xa3, instance, 0, port as u8],
        ip: Gid::v4([10, instance, port as u8, 1]),
    }
}

/// The GID table after a reset: entry 0 is the factory IPv4 address.
fn reset_gids(ep: &Endpoint) -> [Option<Gid>; GID_TABLE_LEN] {
    let mut g = [None; GID_TABLE_LEN];
    g[0] = Some(ep.ip);
    g
}

impl Port {
    /// Whether `ip` is a valid entry of the GID table.
    fn has_gid(&self, ip: &Gid) -> bool {
        self.gids.iter().flatten().any(|g| g == ip)
    }
}

impl Device {
    pub fn new(opts: Options, vectors: Arc<Vectors>) -> std::io::Result<Self> {
        let ports = (0..opts.ports)
            .map(|p| {
                opts.addrs
                    .get(&p)
                    .copied()
                    .unwrap_or_else(|| default_ep(opts.instance, p))
            })
            .map(|ep| Port {
                ep,
                factory_mac: ep.mac,
                gids: reset_gids(&ep),
                eth: eth::Rings::default(),
                link_up: true,
                counters: Counters::default(),
                inject: Inject::default(),
                qps: HashMap::new(),
                cqs: HashMap::new(),
                tx: Vec::new(),
                ip_id: 0,
            })
            .collect();
        let strict = opts.strict;
        let cmd_delay = opts.cmd_delay;
        Ok(Self {
            mem: Mem::new(opts.devmem)?,
            opts,
            scratch: 0,
            cause: 0,
            test_irqs: 0,
            ready: true,
            busy_until: None,
            irq_no_master: 0,
            fatal: false,
            gone: false,
            dma_test_addr: 0,
            dma_test_len: 0,
            dma_test_status: DMA_TEST_IDLE,
            mmu: Mmu::new(strict),
            eq_base: 0,
            eq_log_size: 0,
            eq_enabled: false,
            eq_pi: 0,
            eq_ci: 0,
            eq_overflows: 0,
            eq_generation: 0,
            cmd_data: [0; CMD_DATA_LEN],
            cmd_status: 0,
            running: None,
            cmd_outstanding: false,
            invalidation_due: None,
            audits: Audits::default(),
            fuzz: fuzz::State::default(),
            ports,
            vectors,
            nic: crate::nic::Nic::new(if strict { cmd_delay } else { Duration::ZERO }),
            chip: crate::chip::ChipMmu::new(strict),
        })
    }

    /// Guest memory as QEMU maps it for the device.
    pub fn memory(&mut self) -> &mut crate::dma::GuestMemory {
        &mut self.mem.guest
    }

    pub fn devmem(&self) -> &crate::mem::DevMem {
        &self.mem.dev
    }

    /// The PCI command register's bus-master bit changed.
    pub fn set_bus_master(&mut self, on: bool) {
        self.mem.bus_master = on;
    }

    pub fn audit(&self) -> u32 {
        self.mem.audit
    }

    /// Events dropped: event queue full or disabled (EQ_OVERFLOWS).
    pub fn eq_dropped(&self) -> u32 {
        self.eq_overflows
    }

    /// Host memory accesses refused because bus mastering was off.
    pub fn dma_no_master(&self) -> u32 {
        self.mem.no_master
    }

    /// Interrupts suppressed: bus mastering off or MSI-X (the vector)
    /// not enabled.
    pub fn irq_no_master(&self) -> u32 {
        self.irq_no_master
    }

    /// Strict mode: uses of a cached translation that the page table no
    /// longer backed.
    pub fn stale_translations(&self) -> u32 {
        self.mmu.stale
    }

    /// Strict mode: uses of a cached translation whose entry was gone when
    /// an MMU_INVALIDATE still under way (written, no register read since)
    /// was written: the driver did not wait for the invalidation.
    pub fn unwaited_invalidations(&self) -> u32 {
        self.mmu.unwaited
    }

    /// Driver errors the device noticed (doorbells, command protocol).
    pub fn audits(&self) -> Audits {
        self.audits
    }

    /// Strict mode: when the command under way finishes, if one is. A
    /// read of CMD_STATUS returns only then; the vfio-user server waits
    /// for it without holding the device.
    pub fn command_due(&self) -> Option<Instant> {
        self.running.map(|r| r.due)
    }

    /// Strict mode: finish what is due by now (a command, an invalidation).
    fn settle(&mut self) {
        let t = Instant::now();
        if self.running.is_some_and(|r| t >= r.due) {
            self.finish_command();
        }
        if self.invalidation_due.is_some_and(|d| t >= d) {
            self.finish_invalidation();
        }
    }

    /// Strict mode: execute the command under way; its results and status
    /// become visible now.
    fn finish_command(&mut self) {
        if let Some(r) = self.running.take() {
            self.cmd_status = self.command(r.cmd, r.now);
        }
    }

    /// Strict mode: the MMU_INVALIDATE under way takes effect.
    fn finish_invalidation(&mut self) {
        if self.invalidation_due.take().is_some() {
            self.mmu.invalidate();
        }
    }

    /// Strict mode: a CMD write. The command runs for `cmd_delay`, or
    /// until CMD_STATUS is read; a CMD write while one is outstanding is
    /// counted and, if the device is still executing, lost.
    fn start_command(&mut self, cmd: u32, now: Instant) {
        if self.cmd_outstanding {
            self.audits.cmd_overlap = self.audits.cmd_overlap.wrapping_add(1);
            let busy = self.running.is_some();
            log::warn!(
                "command {cmd:#x} written before CMD_STATUS of the last one was read{}",
                if busy { ": device busy, ignored" } else { "" }
            );
            if busy {
                return;
            }
        }
        self.cmd_outstanding = true;
        if !self.is_ready() {
            log::warn!("command {cmd:#x} while resetting: EBUSY");
            self.cmd_status = EBUSY;
            return;
        }
        self.running = Some(Running {
            cmd,
            now,
            due: Instant::now() + self.opts.cmd_delay,
        });
    }

    /// Strict mode: CMD_DATA is the running command's until its CMD_STATUS
    /// is read.
    fn audit_cmd_data(&mut self, off: u64, write: bool) {
        if self.cmd_outstanding {
            self.audits.cmd_data_busy = self.audits.cmd_data_busy.wrapping_add(1);
            log::warn!(
                "CMD_DATA {} at {off:#x} before CMD_STATUS was read",
                if write { "written" } else { "read" }
            );
        }
    }

    /// STATUS.READY: the last reset has finished. Until then the device
    /// does no DMA, raises no interrupt and ignores doorbells, commands
    /// and frames.
    pub fn is_ready(&self) -> bool {
        self.ready && self.busy_until.is_none_or(|t| Instant::now() >= t)
    }

    /// A read of the emulated function's services (model 2.0, [`crate::chip`]).
    fn svc_read(&self, off: u64) -> u32 {
        use crate::chip::*;
        let mac = |p: usize| self.ports.get(p).map_or([0; 6], |p| p.factory_mac);
        match off {
            SVC_ID => SVC_ID_MAGIC,
            SVC_VERSION => SVC_VERSION_2_0,
            SVC_PORT_MASK => ((1u64 << self.ports.len()) - 1) as u32,
            SVC_LINK => self
                .ports
                .iter()
                .enumerate()
                .fold(0, |m, (i, p)| m | (u32::from(p.link_up) << i)),
            o if (SVC_MAC_LO..SVC_END).contains(&o) => {
                let m = mac(((o - SVC_MAC_LO) / 8) as usize);
                if o % 8 == 0 {
                    u32::from_be_bytes([m[2], m[3], m[4], m[5]])
                } else {
                    u32::from(m[0]) << 8 | u32::from(m[1])
                }
            }
            o => self.chip.read32(o),
        }
    }

    /// Raise the interrupts model 2.0's NIC asked for.
    fn nic_irqs(&mut self) {
        for v in self.nic.take_irqs() {
            self.raise(v);
        }
    }

    /// Model 2.0's NIC and what it reaches (the memories, the device MMU),
    /// borrowed apart.
    /// Test hook: an entry of type `ty` on port `port`'s model 2.0 event
    /// queue, as the NIC writes one. Returns whether it was written.
    pub fn nic_event(&mut self, port: usize, ty: u64, data1: u32, data2: u32) -> bool {
        if port >= self.ports.len() || ty > 15 {
            return false;
        }
        let (nic, mut bus) = self.nic_bus();
        nic.inject_event(port, crate::nic::Event { ty, data1, data2 }, &mut bus)
    }

    fn nic_bus(&mut self) -> (&mut crate::nic::Nic, crate::nic::Bus<'_>) {
        (
            &mut self.nic,
            crate::nic::Bus {
                mem: &mut self.mem,
                mmu: &mut self.chip,
            },
        )
    }

    /// Raise MSI-X `vector`, as a PCI function can: only with bus
    /// mastering on (MSI-X messages are memory writes) and the vector
    /// enabled. Returns whether it was raised.
    fn raise(&mut self, vector: usize) -> bool {
        if self.gone {
            return false;
        }
        if self.mem.bus_master && self.vectors.raise(vector) {
            return true;
        }
        self.irq_no_master = self.irq_no_master.wrapping_add(1);
        log::warn!(
            "interrupt on vector {vector} suppressed: {}",
            if self.mem.bus_master {
                "vector not enabled"
            } else {
                "bus master disabled"
            }
        );
        false
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    // ---- Registers -----------------------------------------------------

    /// A 32-bit register read. Unknown offsets read as 0. In strict mode
    /// the read returns after an MMU_INVALIDATE under way has finished, and
    /// a read of CMD_STATUS after the command under way has.
    pub fn read32(&mut self, off: u64) -> u32 {
        if self.gone {
            return u32::MAX;
        }
        if (crate::chip::SVC_BASE..crate::chip::SVC_END).contains(&off) {
            return self.svc_read(off);
        }
        if let Some(cfg) = crate::nic::regs::nic_cfg(off) {
            let (nic, mut bus) = self.nic_bus();
            let v = nic.read32(cfg, Instant::now(), &mut bus);
            self.nic_irqs();
            return v;
        }
        self.finish_invalidation();
        self.settle();
        let v = self.register(off);
        self.fuzz_read(off, v)
    }

    fn register(&mut self, off: u64) -> u32 {
        if (PORT_BASE..PORT_BASE + PORT_STRIDE * self.ports.len() as u64).contains(&off) {
            let p = ((off - PORT_BASE) / PORT_STRIDE) as usize;
            return self.port_read(p, (off - PORT_BASE) % PORT_STRIDE);
        }
        if (ETH_BASE..ETH_BASE + ETH_STRIDE * self.ports.len() as u64).contains(&off) {
            let p = ((off - ETH_BASE) / ETH_STRIDE) as usize;
            return self.eth_read(p, (off - ETH_BASE) % ETH_STRIDE);
        }
        if (CMD_DATA..CMD_DATA + CMD_DATA_LEN as u64).contains(&off) {
            if self.opts.strict {
                self.audit_cmd_data(off, false);
            }
            let o = (off - CMD_DATA) as usize;
            return u32::from_le_bytes(self.cmd_data[o..o + 4].try_into().unwrap());
        }
        if (FW_VERSION..FW_VERSION + FW_VERSION_LEN as u64).contains(&off) {
            let mut b = [0u8; FW_VERSION_LEN];
            b[..FW_VERSION_STR.len()].copy_from_slice(FW_VERSION_STR.as_bytes());
            let o = (off - FW_VERSION) as usize;
            return u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        }
        match off {
            ID => self.opts.id,
            VERSION => MODEL_VERSION,
            SCRATCH => self.scratch,
            STATUS => {
                (u32::from(self.is_ready()) * STATUS_READY) | (u32::from(self.fatal) * STATUS_FATAL)
            }
            IRQ_CAUSE => self.cause,
            IRQ_TEST_COUNT => self.test_irqs,
            DMA_TEST_ADDR_LO => self.dma_test_addr as u32,
            DMA_TEST_ADDR_HI => (self.dma_test_addr >> 32) as u32,
            DMA_TEST_LEN => self.dma_test_len,
            DMA_TEST_CTRL => self.dma_test_status,
            DMA_FAULT_COUNT => self.mem.audit,
            NUM_PORTS => self.ports.len() as u32,
            MAX_QPS => self.opts.max_qps,
            MAX_CQS => self.opts.max_cqs,
            MAX_CQE => self.opts.max_cqe,
            MAX_SQE => self.opts.max_sqe,
            MAX_MTU => 1 << MAX_MTU_LOG,
            MMU_PAGE_SIZES => (1 << 12) | (1 << 21) | (1 << 30),
            MAX_MSG => MAX_MSG_LEN,
            DEVMEM_SIZE_LO => self.mem.dev.size() as u32,
            DEVMEM_SIZE_HI => (self.mem.dev.size() as u64 >> 32) as u32,
            NUM_VECTORS => MSIX_VECTORS,
            MAX_GIDS => GID_TABLE_LEN as u32,
            ETH_MAX_FRAME => eth::MAX_FRAME as u32,
            MMU_ROOT_LO => self.mmu.root as u32,
            MMU_ROOT_HI => (self.mmu.root >> 32) as u32,
            MMU_CTRL => u32::from(self.mmu.enabled) * MMU_CTRL_ENABLE,
            MMU_FAULT_COUNT => self.mmu.faults,
            MMU_FAULT_VA_LO => self.mmu.last_fault_va as u32,
            MMU_FAULT_VA_HI => (self.mmu.last_fault_va >> 32) as u32,
            EQ_BASE_LO => self.eq_base as u32,
            EQ_BASE_HI => (self.eq_base >> 32) as u32,
            EQ_LOG_SIZE => self.eq_log_size,
            EQ_CTRL => u32::from(self.eq_enabled) * EQ_CTRL_ENABLE,
            EQ_CI => self.eq_ci,
            EQ_PI => self.eq_pi,
            EQ_OVERFLOWS => self.eq_overflows,
            CMD_STATUS => {
                if let Some(r) = self.running {
                    // In-process callers wait here; the server has waited
                    // already (see `command_due`).
                    std::thread::sleep(r.due.saturating_duration_since(Instant::now()));
                    self.finish_command();
                }
                self.cmd_outstanding = false;
                if self.is_ready() {
                    self.cmd_status
                } else {
                    EBUSY
                }
            }
            _ => 0,
        }
    }

    fn port_read(&self, p: usize, reg: u64) -> u32 {
        let port = &self.ports[p];
        let c = &port.counters;
        match reg {
            PORT_MAC_LO => u32::from_le_bytes(port.ep.mac[0..4].try_into().unwrap()),
            PORT_MAC_HI => u32::from(u16::from_le_bytes([port.ep.mac[4], port.ep.mac[5]])),
            PORT_IPV4 => u32::from_be_bytes(port.ep.ip.to_v4().unwrap_or_default()),
            PORT_STATE => u32::from(port.link_up) * PORT_STATE_UP,
            PORT_SPEED => 100_000,
            PORT_TX_PKTS => c.tx,
            PORT_RX_PKTS => c.rx,
            PORT_RX_DROPS => c.rx_drops,
            PORT_RETRANSMITS => c.retransmits,
            PORT_NAKS_SENT => c.naks_sent,
            PORT_ICRC_ERRORS => c.icrc_errors,
            PORT_RNR_NAKS_SENT => c.rnr_naks_sent,
            _ => 0,
        }
    }

    /// A 32-bit register write. Writes to read-only or unknown offsets
    /// are ignored, as hardware would.
    pub fn write32(&mut self, off: u64, val: u32, now: Instant) {
        if self.gone {
            return;
        }
        if (crate::chip::SVC_BASE..crate::chip::SVC_END).contains(&off) {
            if off == crate::chip::SVC_RESET {
                if val == crate::chip::SVC_RESET_MAGIC {
                    self.reset();
                }
                return;
            }
            return self.chip.write32(off, val);
        }
        if let Some(cfg) = crate::nic::regs::nic_cfg(off) {
            let (nic, mut bus) = self.nic_bus();
            nic.write32(cfg, val, now, &mut bus);
            self.nic_irqs();
            return;
        }
        self.settle();
        if (DB_BASE..DB_BASE + DB_STRIDE * self.ports.len() as u64).contains(&off) {
            if !self.is_ready() {
                log::warn!("doorbell write {off:#x} = {val:#x} while resetting: ignored");
                return;
            }
            let p = ((off - DB_BASE) / DB_STRIDE) as usize;
            self.doorbell(p, (off - DB_BASE) % DB_STRIDE, val);
            return;
        }
        if (PORT_BASE..PORT_BASE + PORT_STRIDE * self.ports.len() as u64).contains(&off) {
            let p = ((off - PORT_BASE) / PORT_STRIDE) as usize;
            let mac = &mut self.ports[p].ep.mac;
            match (off - PORT_BASE) % PORT_STRIDE {
                PORT_MAC_LO => mac[0..4].copy_from_slice(&val.to_le_bytes()),
                PORT_MAC_HI => mac[4..6].copy_from_slice(&val.to_le_bytes()[..2]),
                r => log::debug!("port {p}: write to read-only register {r:#x}"),
            }
            return;
        }
        if (ETH_BASE..ETH_BASE + ETH_STRIDE * self.ports.len() as u64).contains(&off) {
            let p = ((off - ETH_BASE) / ETH_STRIDE) as usize;
            self.eth_write(p, (off - ETH_BASE) % ETH_STRIDE, val);
            return;
        }
        if (CMD_DATA..CMD_DATA + CMD_DATA_LEN as u64).contains(&off) {
            if self.opts.strict {
                self.audit_cmd_data(off, true);
            }
            let o = (off - CMD_DATA) as usize;
            self.cmd_data[o..o + 4].copy_from_slice(&val.to_le_bytes());
            return;
        }
        match off {
            SCRATCH => self.scratch = val,
            IRQ_CAUSE => self.cause &= !val,
            IRQ_TEST if !self.is_ready() => log::warn!("test interrupt while resetting: ignored"),
            IRQ_TEST => {
                self.cause |= CAUSE_TEST;
                if self.raise(val as usize) {
                    self.test_irqs = self.test_irqs.wrapping_add(1);
                }
            }
            RESET if val == RESET_MAGIC => self.reset(),
            DMA_TEST_ADDR_LO => set_lo(&mut self.dma_test_addr, val),
            DMA_TEST_ADDR_HI => set_hi(&mut self.dma_test_addr, val),
            DMA_TEST_LEN => self.dma_test_len = val,
            DMA_TEST_CTRL if val == DMA_TEST_START && !self.is_ready() => {
                log::warn!("DMA test while resetting: ignored");
            }
            DMA_TEST_CTRL if val == DMA_TEST_START => self.dma_test_status = self.dma_test(),
            MMU_ROOT_LO => set_lo(&mut self.mmu.root, val & !0xfff),
            MMU_ROOT_HI => set_hi(&mut self.mmu.root, val),
            MMU_CTRL => {
                self.mmu.enabled = val & MMU_CTRL_ENABLE != 0;
                self.mmu.invalidate();
            }
            // Strict mode: cached translations stay usable until the
            // invalidation finishes (a register read, or `cmd_delay`).
            MMU_INVALIDATE if val & 1 != 0 && self.opts.strict => {
                self.mmu.begin_invalidation(&self.mem);
                let due = Instant::now() + self.opts.cmd_delay;
                self.invalidation_due.get_or_insert(due);
            }
            MMU_INVALIDATE if val & 1 != 0 => self.mmu.invalidate(),
            EQ_BASE_LO => set_lo(&mut self.eq_base, val & !0xf),
            EQ_BASE_HI => set_hi(&mut self.eq_base, val),
            EQ_LOG_SIZE => self.eq_log_size = val,
            EQ_CTRL => self.eq_ctrl(val),
            EQ_CI => self.eq_ci = val,
            CMD if self.opts.strict => self.start_command(val, now),
            CMD if !self.is_ready() => {
                log::warn!("command {val:#x} while resetting: EBUSY");
                self.cmd_status = EBUSY;
            }
            CMD => self.cmd_status = self.command(val, now),
            _ => log::debug!("write to unknown or read-only register {off:#x} = {val:#x}"),
        }
    }

    /// Reset to power-on state (the DMA audit and fault counters excepted).
    pub fn reset(&mut self) {
        self.nic.reset();
        self.chip.reset();
        self.scratch = 0;
        self.cause = 0;
        self.fatal = false;
        self.dma_test_addr = 0;
        self.dma_test_len = 0;
        self.dma_test_status = DMA_TEST_IDLE;
        let faults = self.mmu.faults;
        self.mmu.reset();
        self.mmu.faults = faults;
        self.eq_enabled = false;
        self.eq_base = 0;
        self.eq_log_size = 0;
        self.eq_pi = 0;
        self.eq_ci = 0;
        self.eq_generation = self.eq_generation.wrapping_add(1);
        self.cmd_data = [0; CMD_DATA_LEN];
        self.cmd_status = 0;
        self.running = None;
        self.cmd_outstanding = false;
        self.invalidation_due = None;
        for p in &mut self.ports {
            p.qps.clear();
            p.cqs.clear();
            p.tx.clear();
            p.link_up = true;
            p.ep.mac = p.factory_mac;
            p.gids = reset_gids(&p.ep);
            p.eth = eth::Rings::default();
        }
        self.ready = !self.opts.reset_hangs;
        self.busy_until =
            (!self.opts.reset_delay.is_zero()).then(|| Instant::now() + self.opts.reset_delay);
    }

    /// Test hook: the value the ID register reads from now on.
    pub fn set_id(&mut self, id: u32) {
        self.opts.id = id;
    }

    /// Test hook: whether resets from now on never finish.
    pub fn set_reset_hangs(&mut self, hangs: bool) {
        self.opts.reset_hangs = hangs;
    }

    fn dma_test(&mut self) -> u32 {
        let len = self.dma_test_len;
        if len == 0 || len > DMA_TEST_MAX_LEN {
            log::warn!("DMA test length {len} out of range");
            return DMA_TEST_FAULT;
        }
        let mut buf = vec![0u8; len as usize];
        if !self.mem.read(Target::Host(self.dma_test_addr), &mut buf) {
            return DMA_TEST_FAULT;
        }
        buf.iter_mut().for_each(|b| *b = !*b);
        if !self.mem.write(Target::Host(self.dma_test_addr), &buf) {
            return DMA_TEST_FAULT;
        }
        DMA_TEST_DONE
    }

    // ---- Event queue ---------------------------------------------------

    fn eq_ctrl(&mut self, val: u32) {
        let enable = val & EQ_CTRL_ENABLE != 0;
        if enable && !(4..=12).contains(&self.eq_log_size) {
            log::warn!("EQ enable with log size {} refused", self.eq_log_size);
            return;
        }
        if enable && !self.eq_enabled {
            self.eq_pi = 0;
            self.eq_ci = 0;
            self.eq_generation = self.eq_generation.wrapping_add(1);
        }
        self.eq_enabled = enable;
    }

    /// Post an event and raise vector 0.
    pub fn post_event(&mut self, ty: u8, port: usize, d0: u32, d1: u32) {
        log::debug!("event {ty} port {port} {d0:#x} {d1:#x}");
        if self.gone {
            return;
        }
        if !self.eq_enabled || !self.is_ready() {
            self.eq_overflows = self.eq_overflows.wrapping_add(1);
            return;
        }
        let size = 1u32 << self.eq_log_size;
        if self.eq_pi.wrapping_sub(self.eq_ci) >= size {
            self.eq_overflows = self.eq_overflows.wrapping_add(1);
            log::debug!("event queue full, event {ty} dropped");
            return;
        }
        let mut e = [0u8; EQE_SIZE];
        e[0] = ty;
        e[1] = port as u8;
        e[4..8].copy_from_slice(&d0.to_le_bytes());
        e[8..12].copy_from_slice(&d1.to_le_bytes());
        e[15] = u8::from((self.eq_pi >> self.eq_log_size) & 1 == 0);
        let at = self.eq_base + u64::from(self.eq_pi & (size - 1)) * EQE_SIZE as u64;
        if !self.mem.write(Target::Host(at), &e) {
            self.eq_enabled = false;
            return;
        }
        self.eq_pi = self.eq_pi.wrapping_add(1);
        self.cause |= CAUSE_EQ;
        self.raise(0);
    }

    /// `n` COMPLETION events for a CQ that does not exist, posted at once
    /// (control interface): more than the event queue holds overflow it.
    /// Returns (posted, dropped).
    pub fn eq_flood(&mut self, n: u32) -> (u32, u32) {
        let before = self.eq_overflows;
        for _ in 0..n {
            self.post_event(crate::regs::EV_COMPLETION, 0, 0xff_ffff, 0);
        }
        let dropped = self.eq_overflows.wrapping_sub(before);
        (n - dropped, dropped)
    }

    /// Test hook: the device vanishes, as a PCIe device that fell off the
    /// bus: from now on every register and configuration read returns all
    /// ones, writes are dropped, and it does nothing (no DMA, no interrupt,
    /// no frame, no event).
    pub fn vanish(&mut self) {
        self.gone = true;
        self.fatal = true;
    }

    /// Whether the device vanished ([`Device::vanish`]).
    pub fn is_gone(&self) -> bool {
        self.gone
    }

    /// Stop everything and report it (control interface, or an internal
    /// inconsistency).
    pub fn fatal(&mut self) {
        if !self.fatal {
            self.fatal = true;
            self.post_event(EV_DEVICE_FATAL, 0, 0, 0);
        }
    }

    /// Read through the device MMU, as a DMA of the device would (tests).
    pub fn mmu_read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), crate::mmu::Fault> {
        self.mmu
            .read_for(&mut self.mem, va, buf, crate::mmu::Use::Debug)
    }

    /// The ASIDs that map device VA `va` now, with the page's write right
    /// (the control interface).
    pub fn asid_mapping(&self, va: u64) -> Vec<(u32, bool)> {
        self.chip.mapping(&self.mem, va)
    }

    /// Read at device VA `va` of `asid` as its tables map it now (the
    /// control interface).
    pub fn asid_peek(&self, asid: u32, va: u64, buf: &mut [u8]) -> Result<(), crate::mmu::Fault> {
        self.chip.peek(&self.mem, asid, va, buf)
    }

    /// Read at `va` through the NIC's own MMU, or (`asid`) as that ASID's
    /// tables map it now (the control interface); a fault is counted.
    pub fn view_read(
        &mut self,
        asid: Option<u32>,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), crate::mmu::Fault> {
        match asid {
            Some(a) => {
                let r = self.chip.peek(&self.mem, a, va, buf);
                // Counted as the NIC's own MMU counts a debug read's fault.
                if r.is_err() {
                    self.chip.faults = self.chip.faults.wrapping_add(1);
                }
                r
            }
            None => self.mmu_read(va, buf),
        }
    }

    /// Write at `va` as [`Device::view_read`] reads (tests).
    pub fn view_write(
        &mut self,
        asid: Option<u32>,
        va: u64,
        buf: &[u8],
    ) -> Result<(), crate::mmu::Fault> {
        match asid {
            Some(a) => {
                let r = self.chip.poke(&self.mem, a, va, buf);
                if r.is_err() {
                    self.chip.faults = self.chip.faults.wrapping_add(1);
                }
                r
            }
            None => self.mmu_write(va, buf),
        }
    }

    /// Write through the device MMU, as an incoming WRITE would (tests).
    pub fn mmu_write(&mut self, va: u64, buf: &[u8]) -> Result<(), crate::mmu::Fault> {
        self.mmu
            .write_for(&mut self.mem, va, buf, crate::mmu::Use::Debug)
    }

    pub fn set_link(&mut self, port: usize, up: bool) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        if p.link_up != up {
            p.link_up = up;
            self.post_event(if up { EV_PORT_UP } else { EV_PORT_DOWN }, port, 0, 0);
            let (nic, mut bus) = self.nic_bus();
            nic.link_changed(port, up, &mut bus);
            self.nic_irqs();
        }
        true
    }

    // ---- Commands ------------------------------------------------------

    fn command(&mut self, cmd: u32, now: Instant) -> u32 {
        let opcode = CMD_OPCODE.get(cmd);
        let port = CMD_PORT.get(cmd) as usize;
        let index = CMD_INDEX.get(cmd);
        if self.fatal {
            return EIO;
        }
        // The device-wide commands ignore port and index.
        let device_wide = matches!(opcode, CMD_RKEY_REVOKE | CMD_DEVMEM_FILL);
        if port >= self.ports.len() && !device_wide {
            log::warn!("command {opcode:#x}: no port {port}");
            return EINVAL;
        }
        let r = match opcode {
            CMD_CQ_CREATE => self.cq_create(port, index),
            CMD_CQ_DESTROY => self.cq_destroy(port, index),
            CMD_QP_WRITE => self.qp_write(port, index, now),
            CMD_QP_READ => self.qp_read(port, index),
            CMD_QP_DESTROY => match self.ports[port].qps.remove(&index) {
                Some(_) => 0,
                None => ENOENT,
            },
            CMD_RKEY_REVOKE => self.rkey_revoke(),
            CMD_DEVMEM_FILL => self.devmem_fill(),
            CMD_GID_SET => self.gid_set(port, index),
            CMD_QP_KEYS => self.qp_keys(port, index),
            _ => EINVAL,
        };
        // Invalidation contract: once a command that removed a context, a
        // ring or a region has completed, no message goes on with a
        // translation made before it.
        if r == 0
            && matches!(
                opcode,
                CMD_CQ_DESTROY | CMD_QP_WRITE | CMD_QP_DESTROY | CMD_RKEY_REVOKE | CMD_QP_KEYS
            )
        {
            self.mmu.forget_messages();
        }
        if r != 0 {
            log::info!("command {opcode:#x} port {port} index {index}: error {r}");
        }
        r
    }

    fn data_u32(&self, o: usize) -> u32 {
        u32::from_le_bytes(self.cmd_data[o..o + 4].try_into().unwrap())
    }

    fn data_u64(&self, o: usize) -> u64 {
        u64::from_le_bytes(self.cmd_data[o..o + 8].try_into().unwrap())
    }

    /// RKEY_REVOKE: every context on every port holding the key as its
    /// local rkey stops accepting WRITEs, including the rest of a message
    /// it is receiving (checked at each packet, see `responder`).
    fn rkey_revoke(&mut self) -> u32 {
        let key = self.data_u32(0);
        if key == 0 {
            return EINVAL;
        }
        let mut changed = 0u32;
        for (p, port) in self.ports.iter_mut().enumerate() {
            for (qpn, q) in port.qps.iter_mut() {
                if q.ctx.local_rkey == key {
                    q.ctx.revoke();
                    changed += 1;
                    log::debug!("QP {p}/{qpn}: rkey {key:#x} revoked");
                }
            }
        }
        self.cmd_data[4..8].copy_from_slice(&changed.to_le_bytes());
        0
    }

    /// DEVMEM_FILL: whole 4 KiB pages of device memory get a pattern.
    fn devmem_fill(&mut self) -> u32 {
        let off = self.data_u64(0);
        let len = self.data_u64(8);
        let pattern = self.data_u32(16);
        let size = self.mem.dev.size() as u64;
        let aligned = off % DEVMEM_FILL_ALIGN == 0 && len % DEVMEM_FILL_ALIGN == 0;
        if !aligned || len == 0 || off.checked_add(len).is_none_or(|end| end > size) {
            log::info!("DEVMEM_FILL {off:#x}+{len:#x} refused (device memory {size:#x})");
            return EINVAL;
        }
        if !self.mem.dev.fill(off, len, pattern) {
            return EINVAL;
        }
        0
    }

    /// QP_KEYS (1.4): new keys for a QP, its state and PSNs unchanged; a WRITE it is
    /// receiving goes on only if its grant is unchanged (checked at each packet).
    fn qp_keys(&mut self, port: usize, qpn: u32) -> u32 {
        let flags = self.data_u32(0);
        if flags & !(QP_KEYS_REMOTE | QP_KEYS_LOCAL) != 0 || self.data_u32(12) != 0 {
            return EINVAL;
        }
        let region = crate::qp::Region {
            iova: self.data_u64(16),
            len: self.data_u64(24),
            va: self.data_u64(32),
        };
        let (remote, local) = (self.data_u32(4), self.data_u32(8));
        let Some(q) = self.ports[port].qps.get_mut(&qpn) else {
            return ENOENT;
        };
        q.ctx.set_keys(flags, remote, local, region);
        log::debug!(
            "QP {port}/{qpn}: keys {flags:#x}: remote {remote:#x} local {local:#x} {region:x?}"
        );
        0
    }

    fn gid_set(&mut self, port: usize, index: u32) -> u32 {
        let Some(entry) = self.ports[port].gids.get_mut(index as usize) else {
            return EINVAL;
        };
        let gid = Gid(self.cmd_data[..16].try_into().unwrap());
        *entry = (u32::from_le_bytes(self.cmd_data[16..20].try_into().unwrap()) & GID_VALID != 0)
            .then_some(gid);
        log::debug!("port {port}: GID {index} = {entry:x?}");
        0
    }

    fn cq_create(&mut self, port: usize, cqn: u32) -> u32 {
        let va = u64::from_le_bytes(self.cmd_data[0..8].try_into().unwrap());
        let log_size = self.data_u32(8);
        let vector = self.data_u32(12);
        if cqn >= self.opts.max_cqs
            || log_size == 0
            || 1u64 << log_size.min(63) > u64::from(self.opts.max_cqe)
            || vector >= MSIX_VECTORS
            || va % CQE_SIZE as u64 != 0
        {
            return EINVAL;
        }
        let p = &mut self.ports[port];
        if p.cqs.contains_key(&cqn) {
            return EEXIST;
        }
        p.cqs.insert(
            cqn,
            Cq {
                va,
                log_size,
                vector,
                pi: 0,
                ci: 0,
                armed: false,
                broken: false,
                fault_next: false,
            },
        );
        0
    }

    fn cq_destroy(&mut self, port: usize, cqn: u32) -> u32 {
        let p = &mut self.ports[port];
        if !p.cqs.contains_key(&cqn) {
            return ENOENT;
        }
        if p.qps
            .values()
            .any(|q| q.ctx.cqn == cqn || q.ctx.responder_cqn() == cqn)
        {
            return EBUSY;
        }
        p.cqs.remove(&cqn);
        0
    }

    fn qp_read(&mut self, port: usize, qpn: u32) -> u32 {
        let Some(q) = self.ports[port].qps.get(&qpn) else {
            return ENOENT;
        };
        let mut ctx = q.ctx;
        ctx.sq_psn = q.next_psn;
        ctx.rq_psn = q.epsn;
        self.cmd_data = [0; CMD_DATA_LEN];
        self.cmd_data[..QpCtx::LEN].copy_from_slice(&ctx.encode());
        0
    }

    fn qp_write(&mut self, port: usize, qpn: u32, now: Instant) -> u32 {
        let new = QpCtx::decode(&self.cmd_data[..QpCtx::LEN]);
        if qpn >= self.opts.max_qps {
            return EINVAL;
        }
        if new.has_region() && (new.local_rkey == 0 || !new.region.is_valid()) {
            log::info!(
                "QP {port}/{qpn}: region {:x?} with rkey {:#x} refused",
                new.region,
                new.local_rkey
            );
            return EINVAL;
        }
        let cur = self.ports[port].qps.get(&qpn).map(|q| q.ctx.state);
        let allowed = match (cur, new.state) {
            (None, QPS_RESET | QPS_INIT) => true,
            (None, _) => false,
            (Some(_), QPS_RESET | QPS_ERR) => true,
            (Some(QPS_RESET), QPS_INIT) => true,
            (Some(QPS_INIT), QPS_INIT | QPS_RTR) => true,
            (Some(QPS_RTR), QPS_RTS) => true,
            (Some(QPS_RTS), QPS_RTS) => true,
            _ => false,
        };
        if !allowed {
            log::info!(
                "QP {port}/{qpn}: transition {cur:?} -> {} refused",
                new.state
            );
            return EINVAL;
        }
        if new.state == QPS_ERR {
            self.qp_error(port, qpn, ST_WR_FLUSH_ERR, None);
            return 0;
        }
        if new.state >= QPS_INIT {
            if !self.ports[port].cqs.contains_key(&new.cqn)
                || !self.ports[port].cqs.contains_key(&new.responder_cqn())
            {
                return EINVAL;
            }
            if new.sq_log_size == 0
                || 1u64 << new.sq_log_size.min(63) > u64::from(self.opts.max_sqe)
                || new.sq_base % WQE_SIZE as u64 != 0
            {
                return EINVAL;
            }
        }
        if new.state >= QPS_RTR {
            if !(8..=MAX_MTU_LOG).contains(&new.log_mtu)
                || new.dest_qpn > PSN_MASK
                || new.rq_psn > PSN_MASK
                || new.dest.mac == [0; 6]
            {
                return EINVAL;
            }
            let gids = &self.ports[port].gids;
            if new.has_grh() {
                let src = gids.get(usize::from(new.sgid_index)).copied().flatten();
                if src.is_none_or(|s| s.to_v4().is_some() != new.dest.ip.to_v4().is_some()) {
                    log::info!("QP {port}/{qpn}: source GID {} refused", new.sgid_index);
                    return EINVAL;
                }
            } else {
                if new.dest.ip == Gid::v4([0; 4]) {
                    return EOPNOTSUPP;
                }
                if gids[0].is_none_or(|g| g.to_v4().is_none()) {
                    return EINVAL;
                }
            }
            if new.min_rnr_timer > aeth::TIMER_MASK {
                return EINVAL;
            }
        }
        if new.state == QPS_RTS
            && (new.retry_cnt > 7
                || new.timeout > 31
                || new.sq_psn > PSN_MASK
                || new.rnr_retry > RNR_RETRY_FOREVER)
        {
            return EINVAL;
        }
        let ports = &mut self.ports[port];
        // (1.3) The source address as the GID table has it now.
        let sgid = if new.has_grh() {
            usize::from(new.sgid_index)
        } else {
            0
        };
        let src_gid = ports.gids.get(sgid).copied().flatten();
        match ports.qps.get_mut(&qpn) {
            Some(q) if new.state != QPS_RESET => {
                let was = q.ctx.state;
                q.ctx = new;
                if new.state >= QPS_RTR {
                    q.src_gid = src_gid.unwrap_or_default();
                }
                if was < QPS_RTR && new.state >= QPS_RTR {
                    q.epsn = new.rq_psn;
                }
                if was < QPS_RTS && new.state == QPS_RTS {
                    q.next_psn = new.sq_psn;
                    q.una_psn = new.sq_psn;
                    q.retries_left = new.retry_cnt;
                    q.last_progress = now;
                    q.rnr_naks = 0;
                    q.rnr_until = None;
                }
            }
            _ => {
                ports.qps.insert(qpn, Qp::new(new, now));
            }
        }
        0
    }

    // ---- Doorbells -----------------------------------------------------

    fn doorbell(&mut self, port: usize, reg: u64, val: u32) {
        if self.fatal {
            return;
        }
        // QPN and PI, or CQN and CI: the same bits.
        let index = DB_QPN.get(val);
        let v = DB_PI.get(val) as u16;
        match reg {
            DB_SQ => {
                let Some(q) = self.ports[port].qps.get_mut(&index) else {
                    log::info!("SQ doorbell for unknown QP {port}/{index}");
                    return;
                };
                if q.ctx.state == QPS_RESET || q.ctx.state == QPS_ERR {
                    return;
                }
                // The producer index moves forward (modulo 2^16), by at
                // most the ring size, and stays within the ring size of the
                // oldest uncompleted WQE.
                let head = q.pending.front().map_or(q.sq_fetch, |p| p.index);
                let last = q.sq_pi;
                if v.wrapping_sub(last) > q.sq_size() || v.wrapping_sub(head) > q.sq_size() {
                    log::info!(
                        "QP {port}/{index}: SQ doorbell {v} refused (last {last}, head {head}, ring {})",
                        q.sq_size()
                    );
                    self.audits.bad_doorbells = self.audits.bad_doorbells.wrapping_add(1);
                    self.qp_error(port, index, ST_LOC_QP_OP_ERR, None);
                    return;
                }
                // The engine thread fetches and sends (the BAR write wakes
                // it): the doorbell write itself returns at once, as a
                // posted write does on hardware.
                q.sq_pi = v;
            }
            DB_CQ | DB_CQ_ARM => {
                let Some(cq) = self.ports[port].cqs.get_mut(&index) else {
                    log::info!("CQ doorbell for unknown CQ {port}/{index}");
                    return;
                };
                // The consumer index may only move forward, up to the producer.
                let moved = v.wrapping_sub(cq.ci as u16);
                if u32::from(moved) > cq.pi.wrapping_sub(cq.ci) {
                    log::info!(
                        "CQ {port}/{index}: consumer index {v} outside [{}, {}]",
                        cq.ci,
                        cq.pi
                    );
                    self.audits.cq_ci_ignored = self.audits.cq_ci_ignored.wrapping_add(1);
                    return;
                }
                cq.ci = cq.ci.wrapping_add(u32::from(moved));
                if reg == DB_CQ_ARM {
                    if cq.pi != cq.ci {
                        self.post_event(EV_COMPLETION, port, index, 0);
                    } else {
                        cq.armed = true;
                    }
                }
            }
            _ => {}
        }
    }

    // ---- Completions ---------------------------------------------------

    fn push_cqe(&mut self, port: usize, cqn: u32, cqe: Cqe) {
        let Some(cq) = self.ports[port].cqs.get_mut(&cqn) else {
            return;
        };
        if cq.broken {
            return;
        }
        if cq.is_full() {
            cq.broken = true;
            log::info!("CQ {port}/{cqn} overflow");
            self.post_event(EV_CQ_OVERFLOW, port, cqn, 0);
            return;
        }
        let owner = (cq.pi >> cq.log_size) & 1 == 0;
        let pi = cq.pi;
        if !self.cq_ring_write(port, cqn, pi, &cqe.encode(owner)) {
            return;
        }
        let cq = self.ports[port].cqs.get_mut(&cqn).unwrap();
        cq.pi = cq.pi.wrapping_add(1);
        if cq.armed {
            cq.armed = false;
            self.post_event(EV_COMPLETION, port, cqn, 0);
        }
    }

    /// Write CQE `bytes` (owner bit included) at index `at` of CQ `cqn`
    /// (which exists). A translation fault stops the CQ and is reported.
    fn cq_ring_write(&mut self, port: usize, cqn: u32, at: u32, bytes: &[u8; CQE_SIZE]) -> bool {
        let cq = self.ports[port].cqs.get_mut(&cqn).unwrap();
        let va = cq.va + u64::from(at & ((1 << cq.log_size) - 1)) * CQE_SIZE as u64;
        let written = if std::mem::take(&mut cq.fault_next) {
            Err(Fault::Unmapped(va))
        } else {
            self.mmu.write_for(&mut self.mem, va, bytes, Use::Ring)
        };
        if let Err(f) = written {
            let cq = self.ports[port].cqs.get_mut(&cqn).unwrap();
            cq.broken = true;
            log::info!("CQ {port}/{cqn}: ring write fault {f:?}");
            self.post_event(EV_MMU_FAULT, port, u32::MAX, f.va() as u32);
            return false;
        }
        true
    }

    /// Move a QP to the error state: complete `failed` (if any) with
    /// `status`, flush every other outstanding WQE, report QP_ERROR.
    pub fn qp_error(&mut self, port: usize, qpn: u32, status: u8, failed: Option<u16>) {
        let Some(q) = self.ports[port].qps.get_mut(&qpn) else {
            return;
        };
        if q.ctx.state == QPS_ERR {
            return;
        }
        q.ctx.state = QPS_ERR;
        let cqn = q.ctx.cqn;
        let st = |i: u16| {
            if Some(i) == failed {
                status
            } else {
                ST_WR_FLUSH_ERR
            }
        };
        // Fetched WQEs (oldest first, ending just before `sq_fetch`), then
        // the ones posted but not fetched yet.
        let mut cqes: Vec<(u16, u8, u32)> = q
            .pending
            .drain(..)
            .map(|p| (p.index, st(p.index), p.wqe.len))
            .collect();
        let mut idx = q.sq_fetch;
        while idx != q.sq_pi {
            cqes.push((idx, st(idx), 0));
            idx = idx.wrapping_add(1);
        }
        q.sq_fetch = q.sq_pi;
        q.send_pos = 0;
        q.send_off = 0;
        q.recv = None;
        for (i, st, len) in cqes {
            self.push_cqe(
                port,
                cqn,
                Cqe {
                    qpn,
                    wqe_index: i,
                    opcode: CQE_SEND,
                    status: st,
                    byte_len: len,
                    imm: 0,
                },
            );
        }
        self.post_event(EV_QP_ERROR, port, qpn, u32::from(status));
    }

    // ---- Transmit ------------------------------------------------------

    fn queue_frame(&mut self, port: usize, pkt: &Packet<'_>, now: Instant) {
        let p = &mut self.ports[port];
        p.ip_id = p.ip_id.wrapping_add(1);
        let f = pkt.encode(p.ip_id);
        self.queue_roce(port, f, now);
    }

    /// Queue RoCE frame `f` on `port`'s link, through the link's state and
    /// the faults injected there.
    fn queue_roce(&mut self, port: usize, mut f: Vec<u8>, now: Instant) {
        let p = &mut self.ports[port];
        if !p.link_up {
            return;
        }
        p.counters.tx = p.counters.tx.wrapping_add(1);
        if p.inject.drop > 0 {
            p.inject.drop -= 1;
            p.counters.injected += 1;
            return;
        }
        if p.inject.corrupt > 0 {
            p.inject.corrupt -= 1;
            p.counters.injected += 1;
            let i = f.len() - 5;
            f[i] ^= 0x5a;
        }
        let mut at = now + p.inject.delay;
        if p.inject.reorder > 0 {
            p.inject.reorder -= 1;
            if p.inject.reorder % 2 == 1 {
                p.counters.injected += 1;
                at += Duration::from_millis(5);
            }
        }
        p.tx.push((at, f));
    }

    /// Where QP `qpn` sends from: the port's station address and the
    /// source address QP_WRITE took from the GID table.
    fn source(&self, port: usize, qpn: u32) -> Endpoint {
        let p = &self.ports[port];
        Endpoint {
            mac: p.ep.mac,
            ip: p.qps[&qpn].src_gid,
        }
    }

    /// Frames due for sending on `port`.
    ///
    /// A frame to the port's own MAC address does not go on the wire: the
    /// port receives it itself (internal loopback, as two QPs of one port
    /// reach each other), and what it answers comes with the next call.
    pub fn take_tx(&mut self, port: usize, now: Instant) -> Vec<Vec<u8>> {
        // Model 2.0's RoCE frames go through the link's state and faults as
        // model 1.5's do; its Ethernet frames go as they are.
        for f in self.nic.take_tx(port) {
            if is_roce_v2(&f) {
                self.queue_roce(port, f, now);
            } else {
                self.ports[port].tx.push((now, f));
            }
        }
        let p = &mut self.ports[port];
        let due: Vec<Vec<u8>> = if p.tx.iter().all(|(t, _)| *t <= now) {
            p.tx.drain(..).map(|(_, f)| f).collect()
        } else {
            let (due, later): (Vec<_>, Vec<_>) = p.tx.drain(..).partition(|(t, _)| *t <= now);
            p.tx = later;
            due.into_iter().map(|(_, f)| f).collect()
        };
        let mac = p.ep.mac;
        let (local, wire): (Vec<_>, Vec<_>) =
            due.into_iter().partition(|f| f.get(..6) == Some(&mac[..]));
        p.counters.looped = p.counters.looped.wrapping_add(local.len() as u32);
        for f in local {
            self.receive(port, &f, now);
        }
        wire
    }

    /// Fetch WQEs and send packets of QP `qpn` while the window allows.
    fn pump(&mut self, port: usize, qpn: u32, now: Instant) {
        loop {
            let Some(q) = self.ports[port].qps.get_mut(&qpn) else {
                return;
            };
            if q.ctx.state != QPS_RTS {
                return;
            }
            // After an RNR NAK the requester keeps quiet for the timer.
            if let Some(t) = q.rnr_until {
                if now < t {
                    return;
                }
                q.rnr_until = None;
            }
            if q.next_psn.wrapping_sub(q.una_psn) & PSN_MASK >= WINDOW {
                return;
            }
            if q.send_pos == q.pending.len() {
                // Fetch the next WQE.
                if q.sq_fetch == q.sq_pi {
                    return;
                }
                let index = q.sq_fetch;
                let va = q.ctx.sq_base + u64::from(index & (q.sq_size() - 1)) * WQE_SIZE as u64;
                let mut raw = [0u8; WQE_SIZE];
                if let Err(f) = self.mmu.read_for(&mut self.mem, va, &mut raw, Use::Ring) {
                    self.local_fault(port, qpn, index, f);
                    return;
                }
                let wqe = Wqe::decode(&raw);
                let q = self.ports[port].qps.get_mut(&qpn).unwrap();
                q.sq_fetch = q.sq_fetch.wrapping_add(1);
                let mtu = q.ctx.mtu();
                q.pending.push_back(Pending {
                    index,
                    wqe,
                    first_psn: q.next_psn,
                    npkts: Qp::npkts(wqe.len, mtu),
                    src: None,
                });
                if wqe.opcode != WQE_RDMA_WRITE && wqe.opcode != WQE_RDMA_WRITE_IMM {
                    log::info!(
                        "QP {port}/{qpn}: WQE {index} opcode {:#x} not supported",
                        wqe.opcode
                    );
                    self.qp_error(port, qpn, ST_LOC_QP_OP_ERR, Some(index));
                    return;
                }
                if wqe.len > MAX_MSG_LEN {
                    self.qp_error(port, qpn, ST_LOC_LEN_ERR, Some(index));
                    return;
                }
                if let Some((status, n)) = self.ports[port].inject.fail_wqe {
                    self.ports[port].inject.fail_wqe = (n > 1).then_some((status, n - 1));
                    self.qp_error(port, qpn, status, Some(index));
                    return;
                }
                // Nothing is sent for a WQE whose source is not all mapped.
                // Strict mode keeps this translation for the WQE's packets.
                let (va, len) = (wqe.local_va, wqe.len as usize);
                let src = if self.opts.strict {
                    self.mmu.cache(&mut self.mem, va, len, false).map(Some)
                } else {
                    self.mmu
                        .translate(&mut self.mem, va, len, false)
                        .map(|_| None)
                };
                match src {
                    Ok(src) => {
                        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
                        q.pending.back_mut().unwrap().src = src;
                    }
                    Err(f) => {
                        self.local_fault(port, qpn, index, f);
                        return;
                    }
                }
                continue;
            }
            if !self.send_next_packet(port, qpn, now) {
                return;
            }
        }
    }

    fn local_fault(&mut self, port: usize, qpn: u32, index: u16, f: Fault) {
        log::info!("QP {port}/{qpn}: local access fault {f:?} (WQE {index})");
        self.post_event(EV_MMU_FAULT, port, qpn, f.va() as u32);
        self.qp_error(port, qpn, ST_LOC_PROT_ERR, Some(index));
    }

    /// Send one packet of the WQE at `send_pos`. Returns false when the QP
    /// cannot make progress.
    fn send_next_packet(&mut self, port: usize, qpn: u32, now: Instant) -> bool {
        let src = self.source(port, qpn);
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        let pos = q.send_pos;
        let p = &mut q.pending[pos];
        let mut cached = p.src.take();
        let p = Pending { src: None, ..*p };
        let mtu = q.ctx.mtu();
        let off = q.send_off;
        let n = (u64::from(p.wqe.len) - off).min(mtu) as usize;
        let first = off == 0;
        let last = off + n as u64 >= u64::from(p.wqe.len);
        let imm = p.wqe.opcode == WQE_RDMA_WRITE_IMM;
        let opcode = match (first, last, imm) {
            (true, true, false) => op::WRITE_ONLY,
            (true, true, true) => op::WRITE_ONLY_IMM,
            (true, false, _) => op::WRITE_FIRST,
            (false, false, _) => op::WRITE_MIDDLE,
            (false, true, false) => op::WRITE_LAST,
            (false, true, true) => op::WRITE_LAST_IMM,
        };
        let psn = q.next_psn;
        let seq = psn.wrapping_sub(p.first_psn) & PSN_MASK;
        let ctx = q.ctx;
        let mut payload = vec![0u8; n];
        let va = p.wqe.local_va + off;
        let read = match cached.as_mut() {
            Some(c) => self.mmu.read_cached(&mut self.mem, c, va, &mut payload),
            None => self.mmu.read(&mut self.mem, va, &mut payload),
        };
        self.ports[port].qps.get_mut(&qpn).unwrap().pending[pos].src = cached;
        if let Err(f) = read {
            self.local_fault(port, qpn, p.index, f);
            return false;
        }
        let pkt = Packet {
            src,
            dst: ctx.dest,
            tclass: ctx.tclass,
            flow_label: ctx.flow_label,
            hop_limit: ctx.hop_limit,
            sport: ctx.udp_sport | 0xc000,
            opcode,
            solicited: false,
            dqpn: ctx.dest_qpn,
            ackreq: last || (seq + 1) % ACKREQ_EVERY == 0,
            psn,
            reth: first.then_some(Reth {
                va: p.wqe.remote_va,
                rkey: ctx.remote_rkey,
                len: p.wqe.len,
            }),
            imm: (last && imm).then_some(p.wqe.imm),
            aeth: None,
            payload: &payload,
        };
        self.queue_frame(port, &pkt, now);
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        if q.next_psn == q.una_psn {
            q.last_progress = now;
        }
        q.next_psn = (psn + 1) & PSN_MASK;
        if last {
            q.send_pos += 1;
            q.send_off = 0;
        } else {
            q.send_off = off + n as u64;
        }
        true
    }

    fn send_ack(&mut self, port: usize, qpn: u32, psn: u32, syndrome: u8, now: Instant) {
        let src = self.source(port, qpn);
        let q = &self.ports[port].qps[&qpn];
        let pkt = Packet {
            src,
            dst: q.ctx.dest,
            tclass: q.ctx.tclass,
            flow_label: q.ctx.flow_label,
            hop_limit: q.ctx.hop_limit,
            sport: q.ctx.udp_sport | 0xc000,
            opcode: op::ACK,
            dqpn: q.ctx.dest_qpn,
            psn,
            aeth: Some((syndrome, q.msn)),
            ..Default::default()
        };
        let c = &mut self.ports[port].counters;
        if aeth::is_rnr_nak(syndrome) {
            c.rnr_naks_sent += 1;
        } else if syndrome != aeth::ACK {
            c.naks_sent += 1;
        }
        self.queue_frame(port, &pkt, now);
    }

    /// Go back to the oldest unacknowledged PSN.
    fn rewind(&mut self, port: usize, qpn: u32) {
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        let una = q.una_psn;
        let Some(pos) = q.pending.iter().position(|p| {
            !psn_lt(una, p.first_psn) && psn_lt(una, (p.first_psn + p.npkts) & PSN_MASK)
        }) else {
            return;
        };
        let first_psn = q.pending[pos].first_psn;
        let sent_before = q.next_psn;
        q.send_pos = pos;
        q.send_off = u64::from(una.wrapping_sub(first_psn) & PSN_MASK) * q.ctx.mtu();
        q.next_psn = una;
        let resent = sent_before.wrapping_sub(una) & PSN_MASK;
        self.ports[port].counters.retransmits += resent;
    }

    // ---- Receive -------------------------------------------------------

    /// A frame arrived on `port`'s link.
    pub fn receive(&mut self, port: usize, frame: &[u8], now: Instant) {
        self.settle();
        if self.fatal || port >= self.ports.len() || !self.ports[port].link_up {
            return;
        }
        if !self.is_ready() {
            self.ports[port].counters.rx_drops += 1;
            return;
        }
        // Model 2.0's RDMA engine first; then, while both models serve one
        // device, RoCE for model 1.5's QPs (to the port's 1.5 MAC and one of
        // its GIDs) before 2.0's raw path, which would take it as Ethernet.
        let (nic, mut bus) = self.nic_bus();
        if nic.receive(port, frame, now, &mut bus) {
            self.ports[port].counters.rx += 1;
            self.nic_irqs();
            return;
        }
        let p = &self.ports[port];
        let rdma_15 = frame.len() >= 6
            && frame[..6] == p.ep.mac
            && crate::roce::roce_destination(frame).is_some_and(|ip| p.has_gid(&ip));
        if !rdma_15 {
            let (nic, mut bus) = self.nic_bus();
            if nic.receive_raw(port, frame, &mut bus) {
                self.ports[port].counters.rx += 1;
                self.nic_irqs();
                return;
            }
        }
        let eth = self.eth_enabled(port);
        if !eth {
            if let Some(reply) = crate::roce::arp_reply(frame, &self.ports[port].ep) {
                let p = &mut self.ports[port];
                p.counters.tx = p.counters.tx.wrapping_add(1);
                p.tx.push((now, reply));
                return;
            }
        }
        // (1.3) RoCEv2 to the port's MAC and one of its GIDs is the RDMA
        // engine's; the rest is the receive ring's (with the rings off, it
        // is dropped).
        if !rdma_15 {
            if eth {
                self.eth_receive(port, frame);
            } else {
                self.ports[port].counters.rx_drops += 1;
            }
            return;
        }
        let pkt = match Packet::decode(frame) {
            Ok(p) => p,
            Err(e) => {
                let c = &mut self.ports[port].counters;
                c.rx_drops += 1;
                if e == crate::roce::ParseError::Icrc {
                    c.icrc_errors += 1;
                }
                log::debug!("port {port}: frame dropped: {e:?}");
                return;
            }
        };
        let p = &mut self.ports[port];
        p.counters.rx += 1;
        let qpn = pkt.dqpn;
        let Some(q) = p.qps.get(&qpn) else {
            p.counters.rx_drops += 1;
            return;
        };
        if q.ctx.state != QPS_RTR && q.ctx.state != QPS_RTS {
            p.counters.rx_drops += 1;
            return;
        }
        if pkt.opcode == op::ACK {
            self.requester_ack(port, qpn, &pkt, now);
        } else {
            self.responder(port, qpn, &pkt, now);
        }
    }

    fn requester_ack(&mut self, port: usize, qpn: u32, pkt: &Packet<'_>, now: Instant) {
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        if q.ctx.state != QPS_RTS {
            return;
        }
        let (syndrome, _msn) = pkt.aeth.unwrap_or((aeth::ACK, 0));
        let psn = pkt.psn;
        // A NAK names a PSN sent and not acknowledged yet: any other is
        // stale or bogus and does nothing (RNR NAKs are checked below).
        let sent = !psn_lt(psn, q.una_psn) && psn_lt(psn, q.next_psn);
        if aeth::is_nak(syndrome) && !aeth::is_rnr_nak(syndrome) && !sent {
            log::debug!("QP {port}/{qpn}: NAK {syndrome:#x} for PSN {psn} ignored");
            return;
        }
        // An ACK for PSN p acknowledges every PSN up to p, a NAK (RNR NAKs
        // included) every PSN before p. Only una < new una <= next moves
        // anything: stale and bogus acknowledgements do nothing.
        let acked_to = if aeth::is_nak(syndrome) {
            psn.wrapping_sub(1) & PSN_MASK
        } else {
            psn
        };
        let new_una = (acked_to + 1) & PSN_MASK;
        if psn_lt(q.una_psn, new_una) && !psn_lt(q.next_psn, new_una) {
            q.una_psn = new_una;
            q.retries_left = q.ctx.retry_cnt;
            q.last_progress = now;
            q.rnr_naks = 0;
        }
        // Retire the WQEs that are wholly acknowledged.
        let mut done = Vec::new();
        while let Some(p) = q.pending.front() {
            let end = (p.first_psn + p.npkts) & PSN_MASK;
            if q.send_pos == 0 || psn_lt(q.una_psn, end) {
                break;
            }
            done.push((p.index, p.wqe));
            q.pending.pop_front();
            q.send_pos -= 1;
        }
        let cqn = q.ctx.cqn;
        for (index, wqe) in done {
            if wqe.flags & WQE_SIGNALED != 0 {
                self.push_cqe(
                    port,
                    cqn,
                    Cqe {
                        qpn,
                        wqe_index: index,
                        opcode: CQE_SEND,
                        status: ST_SUCCESS,
                        byte_len: wqe.len,
                        imm: 0,
                    },
                );
            }
        }
        match syndrome {
            s if aeth::is_rnr_nak(s) => self.rnr_nak(port, qpn, psn, s, now),
            aeth::NAK_PSN_SEQ => self.rewind(port, qpn),
            aeth::NAK_REMOTE_ACCESS | aeth::NAK_INVALID_REQ | aeth::NAK_REMOTE_OP => {
                let q = &self.ports[port].qps[&qpn];
                let failed = q.pending.front().map(|p| p.index);
                let st = match syndrome {
                    aeth::NAK_REMOTE_ACCESS => ST_REM_ACCESS_ERR,
                    aeth::NAK_INVALID_REQ => ST_REM_INV_REQ_ERR,
                    _ => ST_REM_OP_ERR,
                };
                self.qp_error(port, qpn, st, failed);
                return;
            }
            _ => {}
        }
        self.pump(port, qpn, now);
    }

    /// An RNR NAK for `psn`: the responder had no room for the CQE of a
    /// WRITE with immediate. Wait the NAK's timer, then go back to `psn`;
    /// RNR NAKs in a row beyond the QP's RNR retry count fail the oldest
    /// WQE.
    fn rnr_nak(&mut self, port: usize, qpn: u32, psn: u32, syndrome: u8, now: Instant) {
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        // Only a NAK of the oldest outstanding packet means anything (the
        // acknowledgement above has moved una to it).
        if psn != q.una_psn || q.una_psn == q.next_psn {
            return;
        }
        q.rnr_naks = q.rnr_naks.saturating_add(1);
        if q.ctx.rnr_retry != RNR_RETRY_FOREVER && q.rnr_naks > q.ctx.rnr_retry {
            let failed = q.pending.front().map(|p| p.index);
            log::info!("QP {port}/{qpn}: RNR retries exhausted");
            self.qp_error(port, qpn, ST_RNR_RETRY_EXC_ERR, failed);
            return;
        }
        // An RNR NAK is a response: the ACK timeout counts again from the resend.
        let resend = now + aeth::rnr_timer(syndrome);
        q.rnr_until = Some(resend);
        q.last_progress = resend;
        self.rewind(port, qpn);
    }

    fn responder(&mut self, port: usize, qpn: u32, pkt: &Packet<'_>, now: Instant) {
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        let psn = pkt.psn;
        if psn != q.epsn {
            if psn_lt(psn, q.epsn) {
                // Duplicate: acknowledge what we have.
                let ack = q.epsn.wrapping_sub(1) & PSN_MASK;
                self.send_ack(port, qpn, ack, aeth::ACK, now);
            } else if !q.nak_sent {
                q.nak_sent = true;
                let e = q.epsn;
                self.send_ack(port, qpn, e, aeth::NAK_PSN_SEQ, now);
            }
            return;
        }
        q.nak_sent = false;
        let mtu = q.ctx.mtu();
        let first = matches!(
            pkt.opcode,
            op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM
        );
        let last = !matches!(pkt.opcode, op::WRITE_FIRST | op::WRITE_MIDDLE);
        let mut w = if first {
            if let Some((syndrome, n)) = self.ports[port].inject.nak {
                self.ports[port].inject.nak = (n > 1).then_some((syndrome, n - 1));
                return self.responder_error(port, qpn, psn, syndrome, None, now);
            }
            let q = self.ports[port].qps.get_mut(&qpn).unwrap();
            if q.recv.is_some() {
                return self.responder_error(port, qpn, psn, aeth::NAK_INVALID_REQ, None, now);
            }
            let r = pkt.reth.unwrap_or_default();
            let len = u64::from(r.len);
            let Some(grant) = q.ctx.grant(r.rkey) else {
                log::info!("QP {port}/{qpn}: WRITE with rkey {:#x} refused", r.rkey);
                return self.responder_error(port, qpn, psn, aeth::NAK_REMOTE_ACCESS, None, now);
            };
            let Some(va) = QpCtx::target(&grant, r.va, len) else {
                log::info!(
                    "QP {port}/{qpn}: WRITE {:#x}+{len:#x} outside region {:x?}",
                    r.va,
                    q.ctx.region
                );
                return self.responder_error(port, qpn, psn, aeth::NAK_REMOTE_ACCESS, None, now);
            };
            // The whole target is translated before the first byte is
            // stored; strict mode keeps the translation for the message.
            let dst = if self.opts.strict {
                self.mmu
                    .cache(&mut self.mem, va, len as usize, true)
                    .map(Some)
            } else {
                self.mmu
                    .translate(&mut self.mem, va, len as usize, true)
                    .map(|_| None)
            };
            let dst = match dst {
                Ok(dst) => dst,
                Err(f) => {
                    log::info!("QP {port}/{qpn}: WRITE target {f:?}");
                    return self.responder_error(
                        port,
                        qpn,
                        psn,
                        aeth::NAK_REMOTE_ACCESS,
                        Some(f),
                        now,
                    );
                }
            };
            RecvWrite {
                va,
                remaining: len,
                total: r.len,
                grant,
                dst,
            }
        } else {
            let Some(w) = q.recv.take() else {
                return self.responder_error(port, qpn, psn, aeth::NAK_INVALID_REQ, None, now);
            };
            // The rest of a message is refused once the context no longer
            // grants what admitted its first packet (RKEY_REVOKE, QP_WRITE).
            if q.ctx.grant(w.grant.rkey) != Some(w.grant) {
                log::info!(
                    "QP {port}/{qpn}: rest of a WRITE refused, rkey {:#x} revoked or its region changed",
                    w.grant.rkey
                );
                return self.responder_error(port, qpn, psn, aeth::NAK_REMOTE_ACCESS, None, now);
            }
            w
        };
        let n = pkt.payload.len() as u64;
        let size_ok = if last {
            n == w.remaining
        } else {
            n == mtu && n < w.remaining
        };
        if !size_ok {
            return self.responder_error(port, qpn, psn, aeth::NAK_INVALID_REQ, None, now);
        }
        // Receiver not ready: no room for the CQE of a WRITE with
        // immediate. Nothing of the packet is stored and the expected PSN
        // stays: the requester sends it again after the timer.
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        let cqn = q.ctx.responder_cqn();
        if last && pkt.imm.is_some() && self.ports[port].cqs.get(&cqn).is_some_and(Cq::is_full) {
            let q = self.ports[port].qps.get_mut(&qpn).unwrap();
            let timer = q.ctx.min_rnr_timer & aeth::TIMER_MASK;
            q.recv = (!first).then_some(w);
            // Like any NAK: later packets are dropped, not NAKed, until
            // the expected one comes again.
            q.nak_sent = true;
            log::debug!("QP {port}/{qpn}: CQ {cqn} full, RNR NAK for PSN {psn}");
            return self.send_ack(port, qpn, psn, aeth::RNR_NAK | timer, now);
        }
        let stored = match w.dst.as_mut() {
            Some(c) => self.mmu.write_cached(&mut self.mem, c, w.va, pkt.payload),
            None => self.mmu.write(&mut self.mem, w.va, pkt.payload),
        };
        if let Err(f) = stored {
            return self.responder_error(port, qpn, psn, aeth::NAK_REMOTE_ACCESS, Some(f), now);
        }
        w.va += n;
        w.remaining -= n;
        let total = w.total;
        let q = self.ports[port].qps.get_mut(&qpn).unwrap();
        q.epsn = (psn + 1) & PSN_MASK;
        q.recv = (!last).then_some(w);
        if last {
            q.msn = (q.msn + 1) & PSN_MASK;
            if let Some(imm) = pkt.imm {
                self.push_cqe(
                    port,
                    cqn,
                    Cqe {
                        qpn,
                        wqe_index: 0,
                        opcode: CQE_RECV_WRITE_IMM,
                        status: ST_SUCCESS,
                        byte_len: total,
                        imm,
                    },
                );
            }
        }
        if pkt.ackreq || last {
            self.send_ack(port, qpn, psn, aeth::ACK, now);
        }
    }

    fn responder_error(
        &mut self,
        port: usize,
        qpn: u32,
        psn: u32,
        syndrome: u8,
        fault: Option<Fault>,
        now: Instant,
    ) {
        self.send_ack(port, qpn, psn, syndrome, now);
        if let Some(f) = fault {
            self.post_event(EV_MMU_FAULT, port, qpn, f.va() as u32);
        }
        let st = match syndrome {
            aeth::NAK_REMOTE_ACCESS => ST_REM_ACCESS_ERR,
            aeth::NAK_REMOTE_OP => ST_REM_OP_ERR,
            _ => ST_REM_INV_REQ_ERR,
        };
        self.qp_error(port, qpn, st, None);
    }

    // ---- Time ----------------------------------------------------------

    /// Advance time: retransmit timed-out QPs, keep windows full.
    pub fn step(&mut self, now: Instant) {
        self.settle();
        if self.fatal || !self.is_ready() {
            return;
        }
        let (nic, mut bus) = self.nic_bus();
        nic.step(now, &mut bus);
        self.nic_irqs();
        for port in 0..self.ports.len() {
            self.eth_transmit(port, now);
            let qpns: Vec<u32> = self.ports[port]
                .qps
                .iter()
                .filter(|(_, q)| q.ctx.state == QPS_RTS)
                .map(|(n, _)| *n)
                .collect();
            for qpn in qpns {
                let q = self.ports[port].qps.get_mut(&qpn).unwrap();
                let outstanding = q.una_psn != q.next_psn;
                if outstanding && q.ctx.timeout != 0 {
                    let t = Duration::from_nanos(4096u64 << q.ctx.timeout.min(31));
                    if now.duration_since(q.last_progress) >= t {
                        if q.retries_left == 0 {
                            let failed = q.pending.front().map(|p| p.index);
                            log::info!("QP {port}/{qpn}: retries exhausted");
                            self.qp_error(port, qpn, ST_RETRY_EXC_ERR, failed);
                            continue;
                        }
                        q.retries_left -= 1;
                        q.last_progress = now;
                        self.rewind(port, qpn);
                    }
                }
                self.pump(port, qpn, now);
            }
        }
    }

    /// Inject a QP error (control interface).
    /// The next CQE written to the CQ of QP `qpn` of `port` faults as if
    /// its ring page were unmapped.
    pub fn inject_cq_fault(&mut self, port: usize, qpn: u32) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        let Some(cqn) = p.qps.get(&qpn).map(|q| q.ctx.cqn) else {
            return false;
        };
        match p.cqs.get_mut(&cqn) {
            Some(cq) => {
                cq.fault_next = true;
                true
            }
            None => false,
        }
    }

    pub fn inject_qp_error(&mut self, port: usize, qpn: u32) -> bool {
        if port < self.ports.len() && self.ports[port].qps.contains_key(&qpn) {
            self.qp_error(port, qpn, ST_LOC_QP_OP_ERR, None);
            true
        } else {
            false
        }
    }
}

fn set_lo(r: &mut u64, v: u32) {
    *r = (*r & !0xffff_ffff) | u64::from(v);
}

fn set_hi(r: &mut u64, v: u32) {
    *r = (*r & 0xffff_ffff) | (u64::from(v) << 32);
}

pub mod eth;
pub mod fuzz;

#[cfg(test)]
mod tests;

/// Whether `f` is a RoCE v2 frame: IPv4, UDP to port 4791.
fn is_roce_v2(f: &[u8]) -> bool {
    f.len() >= 38
        && f[12..14] == [0x08, 0x00]
        && f[23] == 17
        && u16::from_be_bytes([f[14 + 20 + 2], f[14 + 20 + 3]]) == crate::roce::ROCE_PORT
}
