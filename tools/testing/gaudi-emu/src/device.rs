// SPDX-License-Identifier: GPL-2.0
//! The device behind BAR0: the chip services of the emulated function
//! ([`crate::chip`]), the NIC at its configuration-space offsets
//! ([`crate::nic`]), and the links of its ports.
//!
//! The device does not own sockets or threads: frames to send are queued
//! per port ([`Device::take_tx`]), received frames are handed in
//! ([`Device::receive`]), and time advances through [`Device::step`].

use crate::irq::Vectors;
use crate::mem::Mem;
use crate::roce::{Endpoint, Gid, Packet};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ports a device can have (`--ports`).
pub const MAX_PORTS: usize = 32;
/// MSI-X vectors of the function.
pub const MSIX_VECTORS: u32 = 8;

/// Options the device is built with (command line of the emulator).
#[derive(Clone, Debug)]
pub struct Options {
    /// Value of the SVC_ID register; a wrong one lets tests check that the
    /// driver refuses the device.
    pub id: u32,
    pub ports: usize,
    pub devmem: usize,
    /// Distinguishes emulator instances in default MACs and addresses.
    pub instance: u8,
    /// Per-port address overrides.
    pub addrs: HashMap<usize, Endpoint>,
    /// A reset never finishes: lets tests check the driver's timeout.
    pub reset_hangs: bool,
    /// How long SVC_STATUS.READY reads 0 after a reset (0: it never does).
    pub reset_delay: Duration,
    /// Audit every use of a cached translation of the device MMU against
    /// the page table (see [`crate::mmu`]), counted in
    /// [`Device::stale_translations`]; the NIC's gateway operations take
    /// `cmd_delay`.
    pub strict: bool,
    /// Strict mode: how long a gateway operation of the NIC takes.
    pub cmd_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            id: crate::chip::SVC_ID_MAGIC,
            ports: 24,
            devmem: 256 << 20,
            instance: 0,
            addrs: HashMap::new(),
            reset_hangs: false,
            reset_delay: Duration::ZERO,
            strict: false,
            cmd_delay: Duration::from_micros(500),
        }
    }
}

/// Per-port packet counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub tx: u32,
    pub rx: u32,
    pub rx_drops: u32,
    pub icrc_errors: u32,
    /// Frames the fault injector dropped, corrupted or held back.
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

/// What the control interface asks a port to do to the RoCE frames it
/// sends.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inject {
    pub drop: u32,
    pub corrupt: u32,
    pub delay: Duration,
    /// Of the next frames, hold every other one back by 5 ms, so that the
    /// frame after it arrives first (control interface `reorder`).
    pub reorder: u32,
}

pub struct Port {
    /// The factory addresses: the MAC the SVC_MAC registers give, and an
    /// IPv4 address the port answers ARP for.
    pub ep: Endpoint,
    pub link_up: bool,
    pub counters: Counters,
    pub inject: Inject,
    /// Frames to send, each with the time it is due.
    tx: Vec<(Instant, Vec<u8>)>,
}

pub struct Device {
    opts: Options,
    /// False only when a reset hangs (`Options::reset_hangs`).
    ready: bool,
    /// A reset finishes at this time (`Options::reset_delay`).
    busy_until: Option<Instant>,
    fatal: bool,
    /// The device vanished ([`Device::vanish`]): it answers nothing.
    gone: bool,
    /// The services' interrupt causes (`SVC_IRQ_CAUSE`).
    svc_cause: u32,
    /// The HBM scrub's offset, length and status.
    scrub: (u64, u64, u32),
    /// Test interrupts raised (`SVC_IRQ_TEST`).
    test_irqs: u32,
    /// Interrupts not raised: bus mastering off, or the vector not enabled.
    irq_no_master: u32,
    mem: Mem,
    /// The NIC blocks at their configuration-space offsets.
    pub nic: crate::nic::Nic,
    /// The emulated function's device MMU (a chip service).
    pub chip: crate::chip::ChipMmu,
    pub ports: Vec<Port>,
    vectors: Arc<Vectors>,
}

fn default_ep(instance: u8, port: usize) -> Endpoint {
    Endpoint {
        mac: [0x02, 0x1d, 0xa3, instance, 0, port as u8],
        ip: Gid::v4([10, instance, port as u8, 1]),
    }
}

impl Device {
    pub fn new(opts: Options, vectors: Arc<Vectors>) -> std::io::Result<Self> {
        let ports = (0..opts.ports)
            .map(|p| Port {
                ep: opts
                    .addrs
                    .get(&p)
                    .copied()
                    .unwrap_or_else(|| default_ep(opts.instance, p)),
                link_up: true,
                counters: Counters::default(),
                inject: Inject::default(),
                tx: Vec::new(),
            })
            .collect();
        let strict = opts.strict;
        let gw_delay = if strict {
            opts.cmd_delay
        } else {
            Duration::ZERO
        };
        Ok(Self {
            mem: Mem::new(opts.devmem)?,
            opts,
            ready: true,
            busy_until: None,
            fatal: false,
            gone: false,
            svc_cause: 0,
            scrub: (0, 0, 0),
            test_irqs: 0,
            irq_no_master: 0,
            nic: crate::nic::Nic::new(gw_delay),
            chip: crate::chip::ChipMmu::new(strict),
            ports,
            vectors,
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

    /// Accesses outside the memory the device may reach.
    pub fn audit(&self) -> u32 {
        self.mem.audit
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

    /// Test interrupts raised through SVC_IRQ_TEST.
    pub fn test_irqs(&self) -> u32 {
        self.test_irqs
    }

    /// Strict mode: uses of a cached translation of the device MMU that
    /// the page table no longer backed.
    pub fn stale_translations(&self) -> u32 {
        self.chip.stale()
    }

    /// SVC_STATUS.READY: the last reset has finished. Until then the device
    /// does no DMA, raises no test interrupt and ignores frames.
    pub fn is_ready(&self) -> bool {
        self.ready && self.busy_until.is_none_or(|t| Instant::now() >= t)
    }

    /// A read of the emulated function's services ([`crate::chip`]).
    fn svc_read(&self, off: u64) -> u32 {
        use crate::chip::*;
        let mac = |p: usize| self.ports.get(p).map_or([0; 6], |p| p.ep.mac);
        match off {
            SVC_ID => self.opts.id,
            SVC_STATUS => {
                (u32::from(self.is_ready()) * SVC_STATUS_READY)
                    | (u32::from(self.fatal) * SVC_STATUS_FATAL)
            }
            SVC_IRQ_CAUSE => self.svc_cause,
            SVC_HBM_SIZE_LO => self.mem.dev.size() as u32,
            SVC_HBM_SIZE_HI => (self.mem.dev.size() as u64 >> 32) as u32,
            SVC_SCRUB_ADDR_LO => self.scrub.0 as u32,
            SVC_SCRUB_ADDR_HI => (self.scrub.0 >> 32) as u32,
            SVC_SCRUB_LEN_LO => self.scrub.1 as u32,
            SVC_SCRUB_LEN_HI => (self.scrub.1 >> 32) as u32,
            SVC_SCRUB_CTRL => self.scrub.2,
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

    /// A write to the emulated function's services other than the reset.
    fn svc_write(&mut self, off: u64, val: u32) {
        use crate::chip::*;
        match off {
            SVC_IRQ_CAUSE => self.svc_cause &= !val,
            SVC_IRQ_TEST if !self.is_ready() => {
                log::warn!("test interrupt while resetting: ignored")
            }
            SVC_IRQ_TEST => {
                self.svc_cause |= SVC_CAUSE_TEST;
                if self.raise(val as usize) {
                    self.test_irqs = self.test_irqs.wrapping_add(1);
                }
            }
            SVC_SCRUB_ADDR_LO => set_lo(&mut self.scrub.0, val),
            SVC_SCRUB_ADDR_HI => set_hi(&mut self.scrub.0, val),
            SVC_SCRUB_LEN_LO => set_lo(&mut self.scrub.1, val),
            SVC_SCRUB_LEN_HI => set_hi(&mut self.scrub.1, val),
            SVC_SCRUB_CTRL if val == SVC_SCRUB_START => self.scrub.2 = self.scrub(),
            o if (SVC_MMU_ROOT_LO..=SVC_MMU_INVALIDATE).contains(&o) => self.chip.write32(o, val),
            o => log::debug!("write to read-only service register {o:#x} = {val:#x}"),
        }
    }

    /// The HBM scrub: zero the range the scrub registers name.
    fn scrub(&mut self) -> u32 {
        use crate::chip::*;
        let (off, len, _) = self.scrub;
        let size = self.mem.dev.size() as u64;
        let aligned = off % 4096 == 0 && len % 4096 == 0;
        if self.fatal
            || !self.is_ready()
            || !aligned
            || len == 0
            || off.checked_add(len).is_none_or(|end| end > size)
            || !self.mem.dev.fill(off, len, 0)
        {
            log::info!("HBM scrub {off:#x}+{len:#x} refused (HBM {size:#x})");
            return SVC_SCRUB_REFUSED;
        }
        SVC_SCRUB_DONE
    }

    /// Raise the interrupts the NIC asked for.
    fn nic_irqs(&mut self) {
        for v in self.nic.take_irqs() {
            self.raise(v);
        }
    }

    /// Test hook: an entry of type `ty` on port `port`'s event queue, as
    /// the NIC writes one. Returns whether it was written.
    pub fn nic_event(&mut self, port: usize, ty: u64, data1: u32, data2: u32) -> bool {
        if port >= self.ports.len() || ty > 15 {
            return false;
        }
        let (nic, mut bus) = self.nic_bus();
        nic.inject_event(port, crate::nic::Event { ty, data1, data2 }, &mut bus)
    }

    /// The NIC and what it reaches (the memories, the device MMU),
    /// borrowed apart.
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

    /// A 32-bit register read. Offsets that are neither the services' nor
    /// the NIC's read as 0.
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
        0
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
            return self.svc_write(off, val);
        }
        if let Some(cfg) = crate::nic::regs::nic_cfg(off) {
            let (nic, mut bus) = self.nic_bus();
            nic.write32(cfg, val, now, &mut bus);
            self.nic_irqs();
            return;
        }
        log::debug!("write to unknown register {off:#x} = {val:#x}");
    }

    /// Reset to power-on state (the DMA audit and fault counters excepted).
    pub fn reset(&mut self) {
        self.nic.reset();
        self.chip.reset();
        self.svc_cause = 0;
        self.scrub = (0, 0, 0);
        self.fatal = false;
        for p in &mut self.ports {
            p.tx.clear();
            p.link_up = true;
        }
        self.ready = !self.opts.reset_hangs;
        self.busy_until =
            (!self.opts.reset_delay.is_zero()).then(|| Instant::now() + self.opts.reset_delay);
    }

    /// Test hook: the value the SVC_ID register reads from now on.
    pub fn set_id(&mut self, id: u32) {
        self.opts.id = id;
    }

    /// Test hook: whether resets from now on never finish.
    pub fn set_reset_hangs(&mut self, hangs: bool) {
        self.opts.reset_hangs = hangs;
    }

    /// `n` completion events of the kernel's RC CQ on port 0's EQ at once
    /// (control interface): more than the EQ holds overrun it. Returns
    /// (posted, written over unconsumed entries).
    pub fn eq_flood(&mut self, n: u32) -> (u32, u32) {
        if self.gone || self.ports.is_empty() {
            return (0, 0);
        }
        let (nic, mut bus) = self.nic_bus();
        let over = nic.eq_flood(0, n, &mut bus);
        self.nic_irqs();
        (n, over)
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

    /// Stop everything and report it (control interface): SVC_STATUS.FATAL
    /// and the fatal cause on vector 0.
    pub fn fatal(&mut self) {
        if !self.fatal {
            self.fatal = true;
            self.svc_cause |= crate::chip::SVC_CAUSE_FATAL;
            self.raise(0);
        }
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

    /// Read at device VA `va` as `asid`'s tables map it now (the control
    /// interface); a fault is counted as the device MMU's.
    pub fn view_read(
        &mut self,
        asid: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), crate::mmu::Fault> {
        let r = self.chip.peek(&self.mem, asid, va, buf);
        if r.is_err() {
            self.chip.faults = self.chip.faults.wrapping_add(1);
        }
        r
    }

    /// Write at device VA `va` as [`Device::view_read`] reads (tests).
    pub fn view_write(&mut self, asid: u32, va: u64, buf: &[u8]) -> Result<(), crate::mmu::Fault> {
        let r = self.chip.poke(&self.mem, asid, va, buf);
        if r.is_err() {
            self.chip.faults = self.chip.faults.wrapping_add(1);
        }
        r
    }

    /// Take port `port`'s link up or down; the NIC reports a change.
    /// Returns false if there is no such port.
    pub fn set_link(&mut self, port: usize, up: bool) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        if p.link_up != up {
            p.link_up = up;
            let (nic, mut bus) = self.nic_bus();
            nic.link_changed(port, up, &mut bus);
            self.nic_irqs();
        }
        true
    }

    // ---- Transmit ------------------------------------------------------

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

    /// Frames due for sending on `port`.
    ///
    /// The NIC's RoCE frames go through the link's state and the faults
    /// injected there; its Ethernet frames go as they are. A frame to the
    /// port's own MAC address does not go on the wire: the port receives
    /// it itself (internal loopback), and what it answers comes with the
    /// next call.
    pub fn take_tx(&mut self, port: usize, now: Instant) -> Vec<Vec<u8>> {
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

    // ---- Receive -------------------------------------------------------

    /// A frame arrived on `port`'s link: the NIC's RDMA engine takes what
    /// is its own, then its raw path. RoCE v2 to the port's factory
    /// address that the engine did not take (a bad ICRC, no valid context)
    /// is counted and dropped; an ARP request for that address is
    /// answered; the rest is dropped.
    pub fn receive(&mut self, port: usize, frame: &[u8], now: Instant) {
        if self.fatal || port >= self.ports.len() || !self.ports[port].link_up {
            return;
        }
        if !self.is_ready() {
            self.ports[port].counters.rx_drops += 1;
            return;
        }
        let (nic, mut bus) = self.nic_bus();
        if nic.receive(port, frame, now, &mut bus) {
            self.ports[port].counters.rx += 1;
            self.nic_irqs();
            return;
        }
        let ep = self.ports[port].ep;
        let to_port = frame.get(..6) == Some(&ep.mac[..])
            && crate::roce::roce_destination(frame) == Some(ep.ip);
        if to_port {
            let c = &mut self.ports[port].counters;
            match Packet::decode(frame) {
                Ok(_) => c.rx += 1,
                Err(e) => {
                    if e == crate::roce::ParseError::Icrc {
                        c.icrc_errors += 1;
                    }
                    log::debug!("port {port}: frame dropped: {e:?}");
                }
            }
            c.rx_drops += 1;
            return;
        }
        let (nic, mut bus) = self.nic_bus();
        if nic.receive_raw(port, frame, &mut bus) {
            self.ports[port].counters.rx += 1;
            self.nic_irqs();
            return;
        }
        let p = &mut self.ports[port];
        if let Some(reply) = crate::roce::arp_reply(frame, &p.ep) {
            p.counters.tx = p.counters.tx.wrapping_add(1);
            p.tx.push((now, reply));
            return;
        }
        p.counters.rx_drops += 1;
    }

    /// Advance time: the NIC's doorbells, sending and timers.
    pub fn step(&mut self, now: Instant) {
        if self.fatal || !self.is_ready() {
            return;
        }
        let (nic, mut bus) = self.nic_bus();
        nic.step(now, &mut bus);
        self.nic_irqs();
    }

    /// When [`Device::step`] and [`Device::take_tx`] next have something to
    /// do if nothing arrives meanwhile (a frame, a register write, a reset
    /// or a control command, each of which wakes the engine): `now` or
    /// earlier if they have work already, else the earliest of the frames
    /// held back on the ports (`delay`, `reorder`), the end of a reset's
    /// delay and the NIC's timers ([`crate::nic::Nic::next_deadline`]);
    /// `None` if nothing is pending. (A register read that finishes a
    /// gateway operation does so at or after the operation's end, which is
    /// one of the NIC's deadlines.)
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let held = self.ports.iter().flat_map(|p| p.tx.iter().map(|(t, _)| *t));
        // The NIC's frames are taken whatever the device's state.
        let frames = self.nic.has_tx(self.ports.len()).then_some(now);
        // As step() does nothing while stopped or resetting.
        let nic = if self.fatal || !self.ready {
            None
        } else {
            match self.busy_until {
                Some(t) if t > now => Some(t),
                _ => self.nic.next_deadline(now),
            }
        };
        held.chain(frames).chain(nic).min()
    }
}

fn set_lo(r: &mut u64, v: u32) {
    *r = (*r & !0xffff_ffff) | u64::from(v);
}

fn set_hi(r: &mut u64, v: u32) {
    *r = (*r & 0xffff_ffff) | (u64::from(v) << 32);
}

pub mod fuzz;

/// Whether `f` is a RoCE v2 frame: IPv4, UDP to port 4791.
fn is_roce_v2(f: &[u8]) -> bool {
    f.len() >= 38
        && f[12..14] == [0x08, 0x00]
        && f[23] == 17
        && u16::from_be_bytes([f[14 + 20 + 2], f[14 + 20 + 3]]) == crate::roce::ROCE_PORT
}
