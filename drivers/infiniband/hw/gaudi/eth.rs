// SPDX-License-Identifier: GPL-2.0

//! The ports as Ethernet interfaces: each port's transmit and receive rings (device model 1.3,
//! "Ethernet rings") behind a Linux network device.
//!
//! Frames are copied: a transmitted frame into the buffer of its descriptor, a received one out
//! of its buffer into a new socket buffer. The rings and buffers are coherent memory of the
//! kernel, addressed by bus address, so nothing a user maps or registers can reach them.
//! Interrupts come as `ETH` events on the event queue, armed by the NAPI poll when it is done.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_project,
        register::Array,
        Io, //
    },
    net::ethernet::{
        self,
        LinkSettings,
        Poll,
        RxMode,
        SkBuff,
        Stats64,
        Transmit, //
    },
    new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            dma_mb,
            Read, //
        },
        Arc,
        SetOnce,
        SpinLockIrq, //
    },
};

use crate::{
    hw::{
        EthDesc,
        ETH_DESC_DONE,
        ETH_DESC_ERROR, //
    },
    regs,
    shared::{
        Bar,
        Shared, //
    },
};

/// log2 of the descriptors of each ring.
const LOG_RING: u32 = 5;
const RING: u16 = 1 << LOG_RING;
/// Descriptors of each ring, as `ethtool -g` reports them.
pub(crate) const RING_LEN: u32 = RING as u32;
/// The shortest frame on the wire (without FCS): the device pads shorter ones with zeros.
const ETH_ZLEN: usize = 60;
/// Bytes of each buffer: the largest frame a ring carries.
const BUF: usize = 9216;
/// The largest MTU: a frame of it, with its Ethernet header and a VLAN tag, fits a buffer.
pub(crate) const MAX_MTU: u32 = 9000;

/// The Ethernet device driver of the ports.
pub(crate) struct EthDriver;

/// Counters of a port's interface.
struct Counters {
    rx_packets: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    rx_errors: Atomic<u64>,
    tx_packets: Atomic<u64>,
    tx_bytes: Atomic<u64>,
    tx_errors: Atomic<u64>,
    tx_dropped: Atomic<u64>,
}

impl Counters {
    fn new() -> Self {
        Self {
            rx_packets: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rx_errors: Atomic::new(0),
            tx_packets: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_errors: Atomic::new(0),
            tx_dropped: Atomic::new(0),
        }
    }
}

/// 32-bit words of a descriptor.
const DESC_WORDS: usize = size_of::<EthDesc>() / 4;

/// Read descriptor `slot` of a ring.
fn desc_read(ring: &Coherent<[u32]>, slot: usize) -> Result<EthDesc> {
    let w = slot * DESC_WORDS;
    Ok(io_project!(ring, [try: w..w + DESC_WORDS])
        .try_cast::<EthDesc>()?
        .copy_read())
}

/// Write descriptor `slot` of a ring.
fn desc_write(ring: &Coherent<[u32]>, slot: usize, d: EthDesc) -> Result {
    let w = slot * DESC_WORDS;
    io_project!(ring, [try: w..w + DESC_WORDS])
        .try_cast::<EthDesc>()?
        .copy_write(d);
    Ok(())
}

/// The transmit side's indexes.
struct Tx {
    /// Descriptors handed to the device (16-bit, free running as the device's indexes).
    pi: u16,
    /// Descriptors the driver found finished.
    clean: u16,
}

/// A port's rings and their buffers, allocated when the interface is first brought up.
struct Rings {
    tx_descs: Coherent<[u32]>,
    tx_bufs: Coherent<[u8]>,
    rx_descs: Coherent<[u32]>,
    rx_bufs: Coherent<[u8]>,
}

impl Rings {
    fn new(dev: &Device<Bound>) -> Result<Self> {
        let n = usize::from(RING);
        Ok(Self {
            tx_descs: Coherent::zeroed_slice(dev, n * DESC_WORDS, GFP_KERNEL)?,
            tx_bufs: Coherent::zeroed_slice(dev, n * BUF, GFP_KERNEL)?,
            rx_descs: Coherent::zeroed_slice(dev, n * DESC_WORDS, GFP_KERNEL)?,
            rx_bufs: Coherent::zeroed_slice(dev, n * BUF, GFP_KERNEL)?,
        })
    }

    /// Receive descriptor `slot` with its buffer posted.
    fn rx_posted(&self, slot: usize) -> EthDesc {
        EthDesc {
            addr: self.rx_bufs.dma_address() + (slot * BUF) as u64,
            len: BUF as u16,
            ..Default::default()
        }
    }
}

/// A port's Ethernet: its rings, buffers and counters.
#[pin_data]
pub(crate) struct Port {
    shared: Arc<Shared>,
    /// Port index (from 0).
    index: usize,
    #[pin]
    /// Taken from `start_xmit`, the poll and `open`: with interrupts off, so that process and
    /// softirq context may both take it.
    tx: SpinLockIrq<Tx>,
    /// The next receive descriptor the device fills (only the NAPI poll changes it).
    rx_ci: Atomic<u32>,
    /// `ETH_CTRL` bits of the receive mode.
    mode: Atomic<u32>,
    /// Set at the first `open`, kept until the interface goes.
    rings: SetOnce<Rings>,
    counters: Counters,
}

impl Port {
    /// Port index `index` of the device; its rings come at the first `open`.
    pub(crate) fn new(shared: Arc<Shared>, index: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            shared,
            index,
            tx <- new_spinlock_irq!(Tx { pi: 0, clean: 0 }),
            rx_ci: Atomic::new(0),
            mode: Atomic::new(0),
            rings: SetOnce::new(),
            counters: Counters::new(),
        }? Error)
    }

    fn rings(&self) -> Result<&Rings> {
        self.rings.as_ref().ok_or(ENODEV)
    }

    fn ctrl(&self, enable: bool) -> regs::ETH_CTRL {
        let mode = self.mode.load(Relaxed);
        regs::ETH_CTRL::zeroed()
            .with_enable(enable)
            .with_promisc(mode & 1 != 0)
            .with_allmulti(mode & 2 != 0)
    }

    /// Program and enable the rings, with every receive buffer posted, and arm the event.
    fn start(&self, bar: &Bar<'_>) -> Result {
        let i = self.index;
        let r = self.rings()?;
        let mut tx = self.tx.lock();
        tx.pi = 0;
        tx.clean = 0;
        drop(tx);
        self.rx_ci.store(0, Relaxed);
        for slot in 0..usize::from(RING) {
            desc_write(&r.tx_descs, slot, EthDesc::default())?;
            desc_write(&r.rx_descs, slot, r.rx_posted(slot))?;
        }
        let (tx, rx) = (r.tx_descs.dma_address(), r.rx_descs.dma_address());
        bar.try_write(
            at(regs::ETH_TX_BASE_LO::try_at(i))?,
            regs::ETH_TX_BASE_LO::from_raw(tx as u32),
        )?;
        bar.try_write(
            at(regs::ETH_TX_BASE_HI::try_at(i))?,
            regs::ETH_TX_BASE_HI::from_raw((tx >> 32) as u32),
        )?;
        bar.try_write(
            at(regs::ETH_RX_BASE_LO::try_at(i))?,
            regs::ETH_RX_BASE_LO::from_raw(rx as u32),
        )?;
        bar.try_write(
            at(regs::ETH_RX_BASE_HI::try_at(i))?,
            regs::ETH_RX_BASE_HI::from_raw((rx >> 32) as u32),
        )?;
        let sizes = regs::ETH_LOG_SIZE::zeroed()
            .try_with_tx(LOG_RING)?
            .try_with_rx(LOG_RING)?;
        bar.try_write(at(regs::ETH_LOG_SIZE::try_at(i))?, sizes)?;
        // Enabling zeroes the device's indexes.
        bar.try_write(at(regs::ETH_CTRL::try_at(i))?, self.ctrl(true))?;
        bar.try_write(
            at(regs::ETH_RX_PI::try_at(i))?,
            regs::ETH_RX_PI::from_raw(u32::from(RING)),
        )?;
        bar.try_write(at(regs::ETH_ARM::try_at(i))?, regs::ETH_ARM::zeroed())
    }

    /// Take back the transmit descriptors the device finished; returns whether any was.
    fn clean_tx(&self, r: &Rings, tx: &mut Tx) -> Result<bool> {
        let start = tx.clean;
        while tx.clean != tx.pi {
            let slot = usize::from(tx.clean % RING);
            let flags = desc_read(&r.tx_descs, slot)?.flags;
            if flags & ETH_DESC_DONE == 0 {
                break;
            }
            if flags & ETH_DESC_ERROR != 0 {
                self.counters.tx_errors.add(1, Relaxed);
            }
            tx.clean = tx.clean.wrapping_add(1);
        }
        Ok(tx.clean != start)
    }

    /// Hand the filled receive descriptors to the stack, at most `budget`; returns how many.
    fn receive(&self, r: &Rings, napi: &Poll<'_>, budget: u32) -> Result<u32> {
        let mut ci = self.rx_ci.load(Relaxed) as u16;
        let mut work = 0;
        while work < budget {
            let slot = usize::from(ci % RING);
            let d = desc_read(&r.rx_descs, slot)?;
            if d.flags & ETH_DESC_DONE == 0 {
                break;
            }
            // Read the buffer only after seeing the descriptor finished.
            dma_mb(Read);
            let len = usize::from(d.len);
            if d.flags & ETH_DESC_ERROR != 0 || len > BUF {
                self.counters.rx_errors.add(1, Relaxed);
            } else {
                let off = slot * BUF;
                let filled = napi.receive(len, |buf| {
                    io_project!(&r.rx_bufs, [try: off..off + len]).copy_to_slice(buf);
                    Ok(())
                });
                match filled {
                    Ok(()) => {
                        self.counters.rx_packets.add(1, Relaxed);
                        self.counters.rx_bytes.add(len as u64, Relaxed);
                    }
                    Err(_) => self.counters.rx_errors.add(1, Relaxed),
                }
            }
            desc_write(&r.rx_descs, slot, r.rx_posted(slot))?;
            ci = ci.wrapping_add(1);
            work += 1;
        }
        if work > 0 {
            self.rx_ci.store(u32::from(ci), Relaxed);
            let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
            let pi = regs::ETH_RX_PI::from_raw(u32::from(ci.wrapping_add(RING)));
            bar.try_write(at(regs::ETH_RX_PI::try_at(self.index))?, pi)?;
        }
        Ok(work)
    }

    /// Copy `skb` into the next transmit buffer and hand it to the device.
    fn transmit(&self, dev: &ethernet::Device<EthDriver>, skb: SkBuff) -> Transmit {
        let len = skb.len();
        // Frames are linear: the interface does not advertise scatter-gather.
        let (Ok(r), Some(frame)) = (self.rings(), skb.linear_data()) else {
            self.counters.tx_dropped.add(1, Relaxed);
            return Transmit::Ok;
        };
        if !(ethernet::ETH_HLEN..=BUF).contains(&len) {
            self.counters.tx_dropped.add(1, Relaxed);
            return Transmit::Ok;
        }
        let mut tx = self.tx.lock();
        if tx.pi.wrapping_sub(tx.clean) >= RING {
            let _ = self.clean_tx(r, &mut tx);
            if tx.pi.wrapping_sub(tx.clean) >= RING {
                dev.stop_queue();
                return Transmit::Busy(skb);
            }
        }
        let slot = usize::from(tx.pi % RING);
        let off = slot * BUF;
        let pi = tx.pi.wrapping_add(1);
        let sent = (|| -> Result {
            io_project!(&r.tx_bufs, [try: off..off + len]).copy_from_slice(frame);
            desc_write(
                &r.tx_descs,
                slot,
                EthDesc {
                    addr: r.tx_bufs.dma_address() + off as u64,
                    len: len as u16,
                    ..Default::default()
                },
            )?;
            let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
            let loc = at(regs::ETH_TX_PI::try_at(self.index))?;
            bar.try_write(loc, regs::ETH_TX_PI::from_raw(u32::from(pi)))
        })();
        match sent {
            Ok(()) => {
                tx.pi = pi;
                self.counters.tx_packets.add(1, Relaxed);
                // The device pads short frames: count what goes on the wire, as the
                // receiver does.
                self.counters
                    .tx_bytes
                    .add(len.max(ETH_ZLEN) as u64, Relaxed);
                if tx.pi.wrapping_sub(tx.clean) >= RING {
                    dev.stop_queue();
                }
                drop(tx);
                skb.consume();
            }
            Err(_) => {
                self.counters.tx_dropped.add(1, Relaxed);
            }
        }
        Transmit::Ok
    }

    /// The device's counters of the port's rings: frames dropped for want of a buffer, by
    /// the receive filter, and descriptors in error.
    fn ring_counters(&self) -> Result<[u32; 3]> {
        let i = self.index;
        let bar = self.shared.bar.try_access().ok_or(ENODEV)?;
        Ok([
            bar.try_read(at(regs::ETH_RX_NOBUF::try_at(i))?)?.into_raw(),
            bar.try_read(at(regs::ETH_RX_FILTERED::try_at(i))?)?
                .into_raw(),
            bar.try_read(at(regs::ETH_ERRORS::try_at(i))?)?.into_raw(),
        ])
    }

    /// Whether the port's link is up.
    pub(crate) fn link_up(&self) -> bool {
        self.shared
            .bar
            .try_access()
            .and_then(|bar| bar.try_read(regs::PORT_STATE::try_at(self.index)?).ok())
            .is_some_and(|s| s.up())
    }
}

/// The location of a per-port register, `EINVAL` for a port beyond the map.
fn at<L>(loc: Option<L>) -> Result<L> {
    loc.ok_or(EINVAL)
}

#[vtable]
impl ethernet::Driver for EthDriver {
    type Data = Port;

    fn open(dev: &ethernet::Device<Self>) -> Result {
        let p = dev.data();
        if p.shared.is_fatal() {
            return Err(EIO);
        }
        if p.rings.as_ref().is_none() {
            // Only `open` populates it, under RTNL: there is no race to lose.
            p.rings.populate(Rings::new(dev.parent())?);
        }
        p.start(&*p.shared.bar.try_access().ok_or(ENODEV)?)?;
        if p.link_up() {
            dev.carrier_on();
        } else {
            dev.carrier_off();
        }
        dev.start_queue();
        Ok(())
    }

    fn stop(dev: &ethernet::Device<Self>) {
        let p = dev.data();
        dev.stop_queue();
        if let Some(bar) = p.shared.bar.try_access() {
            // The device stops both rings at once: no frame or event of them follows.
            if let Some(loc) = regs::ETH_CTRL::try_at(p.index) {
                let _ = bar.try_write(loc, regs::ETH_CTRL::zeroed());
            }
        }
    }

    fn start_xmit(dev: &ethernet::Device<Self>, skb: SkBuff) -> Transmit {
        dev.data().transmit(dev, skb)
    }

    fn poll(dev: &ethernet::Device<Self>, napi: &Poll<'_>, budget: u32) -> u32 {
        let p = dev.data();
        let cleaned = {
            let mut tx = p.tx.lock();
            let r = p
                .rings()
                .and_then(|r| p.clean_tx(r, &mut tx))
                .unwrap_or(false);
            (r, tx.clean)
        };
        if cleaned.0 && dev.queue_stopped() {
            dev.wake_queue();
        }
        let work = match p.rings().and_then(|r| p.receive(r, napi, budget)) {
            Ok(work) => work,
            Err(_) => {
                // The device is gone or its rings are unreadable: stop polling, and do not
                // arm it again.
                napi.complete_done(0);
                return 0;
            }
        };
        if work < budget && napi.complete_done(work) {
            // Armed with what was seen: if the device moved on meanwhile, the event is
            // posted at once.
            let arm = regs::ETH_ARM::from_raw(
                u32::from(cleaned.1) << 16 | (p.rx_ci.load(Relaxed) & 0xffff),
            );
            if let (Some(bar), Some(loc)) =
                (p.shared.bar.try_access(), regs::ETH_ARM::try_at(p.index))
            {
                let _ = bar.try_write(loc, arm);
            }
        }
        work
    }

    fn get_stats64(dev: &ethernet::Device<Self>, stats: &mut Stats64) {
        let c = &dev.data().counters;
        stats.rx_packets = c.rx_packets.load(Relaxed);
        stats.rx_bytes = c.rx_bytes.load(Relaxed);
        stats.rx_errors = c.rx_errors.load(Relaxed);
        stats.tx_packets = c.tx_packets.load(Relaxed);
        stats.tx_bytes = c.tx_bytes.load(Relaxed);
        stats.tx_errors = c.tx_errors.load(Relaxed);
        stats.tx_dropped = c.tx_dropped.load(Relaxed);
        if let Ok([nobuf, _, _]) = dev.data().ring_counters() {
            stats.rx_dropped = u64::from(nobuf);
        }
    }

    fn set_mac_address(dev: &ethernet::Device<Self>, mac: &[u8; 6]) -> Result {
        let p = dev.data();
        let bar = p.shared.bar.try_access().ok_or(ENODEV)?;
        let lo = u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]);
        let hi = u32::from(u16::from_le_bytes([mac[4], mac[5]]));
        bar.try_write(
            at(regs::PORT_MAC_LO::try_at(p.index))?,
            regs::PORT_MAC_LO::from_raw(lo),
        )?;
        bar.try_write(
            at(regs::PORT_MAC_HI::try_at(p.index))?,
            regs::PORT_MAC_HI::from_raw(hi),
        )
    }

    fn set_rx_mode(dev: &ethernet::Device<Self>, mode: RxMode) {
        let p = dev.data();
        p.mode.store(
            u32::from(mode.promisc) | u32::from(mode.allmulti) << 1,
            Relaxed,
        );
        if !dev.is_running() {
            return;
        }
        if let (Some(bar), Some(loc)) = (p.shared.bar.try_access(), regs::ETH_CTRL::try_at(p.index))
        {
            let _ = bar.try_write(loc, p.ctrl(true));
        }
    }

    fn link_settings(dev: &ethernet::Device<Self>) -> LinkSettings {
        let p = dev.data();
        let speed = p
            .shared
            .bar
            .try_access()
            .and_then(|bar| bar.try_read(regs::PORT_SPEED::try_at(p.index)?).ok())
            .map_or(0, |s| s.into_raw());
        LinkSettings { speed_mbps: speed }
    }

    const STATS: &'static [&'static CStr] = &[c"rx_no_buffer", c"rx_filtered", c"ring_errors"];

    fn ethtool_stats(dev: &ethernet::Device<Self>, out: &mut [u64]) {
        if let Ok(c) = dev.data().ring_counters() {
            for (o, v) in out.iter_mut().zip(c) {
                *o = u64::from(v);
            }
        }
    }
}
