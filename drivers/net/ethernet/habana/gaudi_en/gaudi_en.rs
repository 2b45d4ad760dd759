// SPDX-License-Identifier: GPL-2.0

//! The ports as Ethernet interfaces: each port's raw path (device model 2.0, "Ethernet") behind
//! a Linux network device.
//!
//! A port sends a frame as a LINEAR WQE of QP 0 in send WQ array 0, rung on the kernel's
//! doorbell FIFO; the NIC reports each sent WQE in a `RAW_TX_COMP` event. It writes each frame
//! it receives for the port (its MAC, broadcast and multicast; anything in promiscuous mode)
//! into the next element of the port's receive ring, with a CQE on CQ 0 naming the element and
//! the length. Frames are copied: a transmitted one into its WQE's buffer, a received one out
//! of its element into a new socket buffer. The WQ, the buffers and the ring are coherent
//! memory of the kernel, reached by bus address with the MMU bypassed, so nothing a user maps
//! or registers can reach them. Interrupts come as events on the port's event queue; the NAPI
//! poll arms CQ 0 when it is done.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_project,
        io_write,
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
        Arc,
        SetOnce,
        SpinLockIrq, //
    },
};

use kernel::net::gaudi::chip::Chip;

use crate::{
    device::{
        Nic,
        Writer, //
    },
    nic::{
        self,
        cqe,
        req,
        wqe,
        MacroLoc,
        PortArrayLoc,
        PortLoc,
        SqWqe, //
    },
};

/// log2 of the WQEs of QP 0's send queue and of the elements of the receive ring.
const LOG_RING: u32 = 5;
const RING: u16 = 1 << LOG_RING;
/// Entries of the send queue and of the receive ring, as `ethtool -g` reports them (one WQE
/// stays unused: see [`TX_MAX`]).
pub(crate) const RING_LEN: u32 = RING as u32;
/// WQEs that may be outstanding: a doorbell whose producer index equals the execution index
/// means an empty queue, so one WQE stays unused.
const TX_MAX: u16 = RING - 1;
/// The shortest frame on the wire (without FCS): the driver pads shorter ones with zeros.
const ETH_ZLEN: usize = 60;
/// The largest frame the raw path sends or takes: the largest MTU's, with its Ethernet header
/// and a VLAN tag (device model 2.0, "What the model decides").
const MAX_FRAME: usize = 9018;
/// Bytes of each transmit buffer.
const BUF: usize = 9216;
/// log2 of the bytes of each receive ring element (a power of two that holds [`BUF`]).
const LOG_ELEM: u32 = 14;
const ELEM: usize = 1 << LOG_ELEM;
/// The largest MTU: a frame of it, with its Ethernet header and a VLAN tag, fits a buffer.
pub(crate) const MAX_MTU: u32 = 9000;
/// 32-bit words of a send WQE.
const WQE_WORDS: usize = size_of::<SqWqe>() / 4;
/// log2 of the 128-byte lines of QP 0's slot in send WQ array 0.
const LOG_WQ_LINES: u32 = LOG_RING + 5 - 7;
/// The Ethernet QP: the RDMA driver's QPs are the others.
pub(crate) const QPN: u32 = 0;

/// The Ethernet device driver of the ports.
pub(crate) struct EthDriver;

/// Counters of a port's interface.
struct Counters {
    rx_packets: Atomic<u64>,
    rx_bytes: Atomic<u64>,
    rx_errors: Atomic<u64>,
    rx_dropped: Atomic<u64>,
    tx_packets: Atomic<u64>,
    tx_bytes: Atomic<u64>,
    tx_errors: Atomic<u64>,
    tx_dropped: Atomic<u64>,
    /// CQEs of CQ 0 naming an element or a length the ring does not have.
    rx_bad_cqe: Atomic<u64>,
    /// Times the transmit queue filled and was stopped.
    tx_queue_full: Atomic<u64>,
    /// Transmit completions naming a WQE that was not outstanding.
    tx_bad_completion: Atomic<u64>,
}

impl Counters {
    fn new() -> Self {
        Self {
            rx_packets: Atomic::new(0),
            rx_bytes: Atomic::new(0),
            rx_errors: Atomic::new(0),
            rx_dropped: Atomic::new(0),
            tx_packets: Atomic::new(0),
            tx_bytes: Atomic::new(0),
            tx_errors: Atomic::new(0),
            tx_dropped: Atomic::new(0),
            rx_bad_cqe: Atomic::new(0),
            tx_queue_full: Atomic::new(0),
            tx_bad_completion: Atomic::new(0),
        }
    }
}

/// The transmit side's indexes.
struct Tx {
    /// WQEs handed to the device (free running; the ring position is its low bits).
    pi: u16,
    /// WQEs the device reported sent.
    clean: u16,
}

/// A port's send queue, buffers and receive ring, allocated when the interface is first
/// brought up.
struct Rings {
    wq: Coherent<[u32]>,
    tx_bufs: Coherent<[u8]>,
    rx_ring: Coherent<[u8]>,
}

impl Rings {
    fn new(dev: &Device<Bound>) -> Result<Self> {
        let n = usize::from(RING);
        Ok(Self {
            wq: Coherent::zeroed_slice(dev, n * WQE_WORDS, GFP_KERNEL)?,
            tx_bufs: Coherent::zeroed_slice(dev, n * BUF, GFP_KERNEL)?,
            rx_ring: Coherent::zeroed_slice(dev, n * ELEM, GFP_KERNEL)?,
        })
    }
}

/// A port's Ethernet: its rings, buffers and counters.
#[pin_data]
pub(crate) struct Port {
    nic: Arc<Nic>,
    /// Port index (from 0).
    index: usize,
    #[pin]
    /// Taken from `start_xmit`, the poll and `open`: with interrupts off, so that process and
    /// softirq context may both take it.
    tx: SpinLockIrq<Tx>,
    /// CQ 0's consumer index: the NAPI poll moves it, `open` sets it to 0 while the poll
    /// is disabled.
    rx_ci: Atomic<u32>,
    /// Promiscuous mode asked for.
    promisc: Atomic<bool>,
    /// Set at the first `open`, kept until the interface goes.
    rings: SetOnce<Rings>,
    counters: Counters,
}

impl Port {
    /// Port index `index` of the device; its rings come at the first `open`.
    pub(crate) fn new(nic: Arc<Nic>, index: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nic,
            index,
            tx <- new_spinlock_irq!(Tx { pi: 0, clean: 0 }),
            rx_ci: Atomic::new(0),
            promisc: Atomic::new(false),
            rings: SetOnce::new(),
            counters: Counters::new(),
        }? Error)
    }

    fn rings(&self) -> Result<&Rings> {
        self.rings.as_ref().ok_or(ENODEV)
    }

    fn queues(&self) -> Result<&nic::PortQueues> {
        self.nic.queues.get(self.index).ok_or(ENODEV)
    }

    /// Program the raw path: QP 0's contexts through the gateway, its send queue, the receive
    /// ring and CQ 0, the MAC filter; then arm CQ 0.
    fn start(&self, regs: &dyn Chip, mac: &[u8; 6]) -> Result {
        let p = self.index;
        let r = self.rings()?;
        let q = self.queues()?;
        // Doorbells of an earlier opening the NIC has not taken yet would run against the
        // new queue: wait for the kernel's FIFO to empty.
        q.fifo_drained()?;
        let mut tx = self.tx.lock();
        tx.pi = 0;
        tx.clean = 0;
        drop(tx);
        self.rx_ci.store(0, Relaxed);
        for w in 0..usize::from(RING) * WQE_WORDS {
            io_write!(&r.wq, [try: w], 0);
        }
        // Send WQ array 0 holds QP 0's slot only; its WQEs are fetched by bus address.
        let wq = r.wq.dma_address();
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_SQ_BASE_ADDRESS_63_32_0>::of(p, 0))?,
            nic::TXE0_SQ_BASE_ADDRESS_63_32_0::from_raw((wq >> 32) as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_SQ_BASE_ADDRESS_31_0_0>::of(p, 0))?,
            nic::TXE0_SQ_BASE_ADDRESS_31_0_0::from_raw(wq as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_LOG_MAX_WQ_SIZE_0>::of(p, 0))?,
            nic::TXE0_LOG_MAX_WQ_SIZE_0::zeroed().try_with_r(LOG_WQ_LINES)?,
        )?;
        regs.try_update(at(PortLoc::<nic::TXE0_WQE_USER_CFG>::of(p))?, |c| {
            let bypass = c.mmu_bypass().get() | 1;
            c.try_with_mmu_bypass(bypass).unwrap_or(c)
        })?;
        // QP 0's requester context, whole: a raw, secured QP whose data accesses are physical.
        let mut c = [0u64; nic::REQ_QPC_WORDS];
        req::TRANSPORT_SERVICE.set(&mut c, nic::TRANSPORT_RAW);
        req::LAST_IDX.set(&mut c, u64::from(RING) - 1);
        req::WQ_TYPE.set(&mut c, nic::WQ_TYPE_WRITE);
        req::TRUST_LEVEL.set(&mut c, nic::TRUST_SECURED);
        req::WQ_BASE_ADDR.set(&mut c, 0);
        req::DATA_MMU_BYPASS.set(&mut c, 1);
        req::WQ_BACK_PRESSURE.set(&mut c, 1);
        req::VALID.set(&mut c, 1);
        self.nic.gateway_write(
            regs,
            Writer::Core,
            p,
            QPN,
            true,
            &c,
            &[u64::MAX; nic::REQ_QPC_WORDS],
        )?;
        // And its responder context: raw, secured, physical, with a key nobody holds (a
        // raw context takes no RDMA; should the NIC disagree, no WRITE carries its key).
        let mut c = [0u64; nic::RES_QPC_WORDS];
        nic::res::TRANSPORT_SERVICE.set(&mut c, nic::TRANSPORT_RAW);
        nic::res::LKEY.set(&mut c, u64::from(kernel::random::get_random_u32() | 1));
        nic::res::TRUST_LEVEL.set(&mut c, nic::TRUST_SECURED);
        nic::res::DATA_MMU_BYPASS.set(&mut c, 1);
        nic::res::VALID.set(&mut c, 1);
        self.nic.gateway_write(
            regs,
            Writer::Core,
            p,
            QPN,
            false,
            &c,
            &[u64::MAX; nic::RES_QPC_WORDS],
        )?;
        // The receive ring: element n at the base + n x ELEM.
        let ring = r.rx_ring.dma_address();
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_QPN_P0_0>::of(p))?,
            nic::RXE0_RAW_QPN_P0_0::zeroed().try_with_raw_qpn(QPN)?,
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_BASE_LO_P0_0>::of(p))?,
            nic::RXE0_RAW_BASE_LO_P0_0::from_raw(ring as u32),
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_BASE_HI_P0_0>::of(p))?,
            nic::RXE0_RAW_BASE_HI_P0_0::from_raw((ring >> 32) as u32),
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_MISC_P0_0>::of(p))?,
            nic::RXE0_RAW_MISC_P0_0::zeroed()
                .try_with_log_raw_entry_size(LOG_ELEM)?
                .try_with_log_buffer_size_mask(LOG_RING)?,
        )?;
        // CQ 0 from index 0, as many entries as the ring has elements: the NIC then never
        // writes an element whose completion the driver has not taken.
        regs.try_write(
            at(PortArrayLoc::<nic::RXE0_CQ_PRODUCER_INDEX_0>::of(
                p,
                nic::CQ_ETH,
            ))?,
            nic::RXE0_CQ_PRODUCER_INDEX_0::zeroed(),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::RXE0_CQ_WRITE_INDEX_0>::of(
                p,
                nic::CQ_ETH,
            ))?,
            nic::RXE0_CQ_WRITE_INDEX_0::zeroed(),
        )?;
        q.cq_consumed(regs, nic::CQ_ETH, 0)?;
        q.cq_enable(regs, nic::CQ_ETH, LOG_RING)?;
        self.set_filter(regs, mac)?;
        q.cq_arm(regs, nic::CQ_ETH, 0)
    }

    /// Whether CQ 0 holds a frame the poll has not taken.
    fn rx_pending(&self) -> bool {
        let ci = self.rx_ci.load(Relaxed);
        self.queues()
            .and_then(|q| q.cq_ready(nic::CQ_ETH, LOG_RING, ci))
            .unwrap_or(false)
    }

    /// Stop the raw path: no frame is received, no WQE executed, and the NIC has taken every
    /// doorbell (an earlier opening's would otherwise run against the next).
    fn halt(&self, regs: &dyn Chip) -> Result {
        let q = self.queues()?;
        q.cq_disable(regs, nic::CQ_ETH);
        let mut c = [0u64; nic::REQ_QPC_WORDS];
        let mut mask = [0u64; nic::REQ_QPC_WORDS];
        req::VALID.select(&mut mask);
        req::VALID.set(&mut c, 0);
        self.nic
            .gateway_write(regs, Writer::Core, self.index, QPN, true, &c, &mask)?;
        q.fifo_drained()
    }

    /// The raw MAC filter: `mac`, or every address in promiscuous mode (group addresses pass
    /// it always).
    fn set_filter(&self, regs: &dyn Chip, mac: &[u8; 6]) -> Result {
        let p = self.index;
        // Filter 0 is the macro's even port's, 2 its odd one's.
        let i = if p & 1 == 0 { 0 } else { 2 };
        let hi = u32::from(mac[0]) << 8 | u32::from(mac[1]);
        let lo = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        let (mask_hi, mask_lo) = if self.promisc.load(Relaxed) {
            (0xffff, u32::MAX)
        } else {
            (0, 0)
        };
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_31_0_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_31_0_MASK_0::from_raw(mask_lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_47_32_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_47_32_MASK_0::from_raw(mask_hi),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_31_0_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_31_0_0::from_raw(lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_47_32_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_47_32_0::from_raw(hi),
        )?;
        // RoCE to this MAC goes to the RDMA engine (always an exact match), which sends from
        // it.
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_31_0_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_31_0_MASK_0::zeroed(),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_47_32_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_47_32_MASK_0::zeroed(),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_31_0_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_31_0_0::from_raw(lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_47_32_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_47_32_0::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<nic::TXE0_PORT0_MAC_CFG_31_0>::of(p))?,
            nic::TXE0_PORT0_MAC_CFG_31_0::from_raw(lo),
        )?;
        regs.try_write(
            at(PortLoc::<nic::TXE0_PORT0_MAC_CFG_47_32>::of(p))?,
            nic::TXE0_PORT0_MAC_CFG_47_32::zeroed().try_with_r(hi)?,
        )
    }

    /// The event queue reported the WQE at ring position `index` sent: take it back, and
    /// those before it. An index that names no outstanding WQE (a device's error) is counted,
    /// logged and ignored. Returns whether the queue has room.
    pub(crate) fn tx_completed(&self, index: u32) -> bool {
        let ring = u32::from(RING);
        let mut tx = self.tx.lock();
        let outstanding = u32::from(tx.pi.wrapping_sub(tx.clean));
        let k = (index % ring + ring - u32::from(tx.clean % RING)) % ring;
        if index >= ring || k >= outstanding {
            drop(tx);
            self.counters.tx_bad_completion.add(1, Relaxed);
            kernel::ratelimited!(dev_warn!(
                self.nic.dev,
                "port {}: transmit completion of WQE {} that is not outstanding: ignored\n",
                self.index + 1,
                index
            ));
            return false;
        }
        tx.clean = tx.clean.wrapping_add(k as u16 + 1);
        tx.pi.wrapping_sub(tx.clean) < TX_MAX
    }

    /// Hand the frames of CQ 0 to the stack, at most `budget`; returns how many.
    fn receive(&self, r: &Rings, napi: &Poll<'_>, budget: u32) -> Result<u32> {
        let q = self.queues()?;
        let mut ci = self.rx_ci.load(Relaxed);
        let mut work = 0;
        while work < budget {
            let Some(c) = q.cq_take(nic::CQ_ETH, LOG_RING, ci)? else {
                break;
            };
            let elem = cqe::WQE_INDEX.get(&c.0) as usize;
            let len = cqe::RAW_PKT_SIZE.get(&c.0) as usize;
            // The NIC writes the element of its producer index, the CQE's own index.
            if elem != (ci % u32::from(RING)) as usize
                || !(ethernet::ETH_HLEN..=MAX_FRAME).contains(&len)
                || cqe::QPN.get(&c.0) != u64::from(QPN)
            {
                self.counters.rx_bad_cqe.add(1, Relaxed);
                self.counters.rx_errors.add(1, Relaxed);
                kernel::ratelimited!(dev_warn!(
                    self.nic.dev,
                    "port {}: CQE of element {} and {} bytes ignored\n",
                    self.index + 1,
                    elem,
                    len
                ));
            } else {
                let off = elem * ELEM;
                let filled = napi.receive(len, |buf| {
                    io_project!(&r.rx_ring, [try: off..off + len]).copy_to_slice(buf);
                    Ok(())
                });
                match filled {
                    Ok(()) => {
                        self.counters.rx_packets.add(1, Relaxed);
                        self.counters.rx_bytes.add(len as u64, Relaxed);
                    }
                    Err(_) => self.counters.rx_dropped.add(1, Relaxed),
                }
            }
            ci = ci.wrapping_add(1);
            work += 1;
        }
        if work > 0 {
            self.rx_ci.store(ci, Relaxed);
            let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
            q.cq_consumed(&*regs, nic::CQ_ETH, ci)?;
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
        if !(ethernet::ETH_HLEN..=MAX_FRAME).contains(&len) {
            self.counters.tx_dropped.add(1, Relaxed);
            return Transmit::Ok;
        }
        let mut tx = self.tx.lock();
        if tx.pi.wrapping_sub(tx.clean) >= TX_MAX {
            self.counters.tx_queue_full.add(1, Relaxed);
            dev.stop_queue();
            return Transmit::Busy(skb);
        }
        let slot = tx.pi % RING;
        let off = usize::from(slot) * BUF;
        let pi = tx.pi.wrapping_add(1);
        // The raw path sends what the WQE names: short frames are padded here.
        let wire = len.max(ETH_ZLEN);
        let sent = (|| -> Result {
            io_project!(&r.tx_bufs, [try: off..off + len]).copy_from_slice(frame);
            if wire > len {
                io_project!(&r.tx_bufs, [try: off + len..off + wire])
                    .copy_from_slice(&[0u8; ETH_ZLEN][..wire - len]);
            }
            let mut w = [0u64; 4];
            wqe::OPCODE.set(&mut w, nic::WQE_OPCODE_LINEAR);
            wqe::WQE_INDEX.set(&mut w, slot.into());
            wqe::SE.set(&mut w, 1);
            wqe::SIZE.set(&mut w, wire as u64);
            wqe::LOCAL_ADDRESS.set(&mut w, r.tx_bufs.dma_address() + off as u64);
            let at = usize::from(slot) * WQE_WORDS;
            for (i, v) in w.iter().enumerate() {
                io_write!(&r.wq, [try: at + 2 * i], *v as u32);
                io_write!(&r.wq, [try: at + 2 * i + 1], (*v >> 32) as u32);
            }
            let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
            self.nic
                .ring_secured(&*regs, self.index, QPN, u32::from(pi % RING))
        })();
        match sent {
            Ok(()) => {
                tx.pi = pi;
                self.counters.tx_packets.add(1, Relaxed);
                // Short frames are counted padded, as the wire carries them and the
                // receiver counts them.
                self.counters.tx_bytes.add(wire as u64, Relaxed);
                if tx.pi.wrapping_sub(tx.clean) >= TX_MAX {
                    self.counters.tx_queue_full.add(1, Relaxed);
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

    /// Whether the port's link is up.
    pub(crate) fn link_up(&self) -> bool {
        self.nic.chip().is_ok_and(|c| c.link_up(self.index))
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
        if p.nic.is_fatal() {
            return Err(EIO);
        }
        if p.rings.as_ref().is_none() {
            // Only `open` populates it, under RTNL: there is no race to lose.
            p.rings.populate(Rings::new(dev.parent())?);
        }
        // Not an RCU-guarded access: the gateway sleeps.
        let regs = &p.nic.chip()?;
        if let Err(e) = p.start(regs, &dev.mac()) {
            dev_err!(
                p.nic.dev,
                "port {}: raw path not set up: {:?}\n",
                p.index + 1,
                e
            );
            // Nothing of it may stay enabled: the rings outlive no interface.
            let _ = p.halt(regs);
            return Err(e);
        }
        // A frame may have come between CQ 0's enabling and its arming.
        if p.rx_pending() {
            dev.schedule_napi();
        }
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
        // A device that failed or is gone executes nothing: there is nothing to stop, and its
        // gateway and FIFO would not answer.
        if p.nic.is_fatal() || p.nic.removed.load(Relaxed) {
            return;
        }
        if let Ok(regs) = p.nic.chip() {
            if let Err(e) = p.halt(&regs) {
                dev_warn!(
                    p.nic.dev,
                    "port {}: raw path not stopped: {:?}\n",
                    p.index + 1,
                    e
                );
            }
        }
    }

    fn start_xmit(dev: &ethernet::Device<Self>, skb: SkBuff) -> Transmit {
        dev.data().transmit(dev, skb)
    }

    fn poll(dev: &ethernet::Device<Self>, napi: &Poll<'_>, budget: u32) -> u32 {
        let p = dev.data();
        let room = {
            let tx = p.tx.lock();
            tx.pi.wrapping_sub(tx.clean) < TX_MAX
        };
        if room && dev.queue_stopped() {
            dev.wake_queue();
        }
        let work = match p.rings().and_then(|r| p.receive(r, napi, budget)) {
            Ok(work) => work,
            Err(_) => {
                // The device is gone or its queues are unreadable: stop polling, and do not
                // arm it again.
                napi.complete_done(0);
                return 0;
            }
        };
        if work < budget && napi.complete_done(work) {
            // Armed at what was taken: a CQE written meanwhile may not raise the event (the
            // NIC compares at its next CQE), so look once more.
            let ci = p.rx_ci.load(Relaxed);
            let armed = p.queues().and_then(|q| {
                let regs = p.nic.chip.try_access().ok_or(ENODEV)?;
                q.cq_arm(&*regs, nic::CQ_ETH, ci)
            });
            if armed.is_ok() && p.rx_pending() {
                dev.schedule_napi();
            }
        }
        work
    }

    fn get_stats64(dev: &ethernet::Device<Self>, stats: &mut Stats64) {
        let c = &dev.data().counters;
        stats.rx_packets = c.rx_packets.load(Relaxed);
        stats.rx_bytes = c.rx_bytes.load(Relaxed);
        stats.rx_errors = c.rx_errors.load(Relaxed);
        stats.rx_dropped = c.rx_dropped.load(Relaxed);
        stats.tx_packets = c.tx_packets.load(Relaxed);
        stats.tx_bytes = c.tx_bytes.load(Relaxed);
        stats.tx_errors = c.tx_errors.load(Relaxed);
        stats.tx_dropped = c.tx_dropped.load(Relaxed);
    }

    fn set_mac_address(dev: &ethernet::Device<Self>, mac: &[u8; 6]) -> Result {
        let p = dev.data();
        let regs = p.nic.chip.try_access().ok_or(ENODEV)?;
        if dev.is_running() {
            p.set_filter(&*regs, mac)?;
        }
        Ok(())
    }

    fn set_rx_mode(dev: &ethernet::Device<Self>, mode: RxMode) {
        let p = dev.data();
        // Group frames always pass the raw filter: `allmulti` needs nothing.
        p.promisc.store(mode.promisc, Relaxed);
        if !dev.is_running() {
            return;
        }
        if let Some(regs) = p.nic.chip.try_access() {
            let _ = p.set_filter(&*regs, &dev.mac());
        }
    }

    fn link_settings(_dev: &ethernet::Device<Self>) -> LinkSettings {
        LinkSettings {
            speed_mbps: nic::PORT_SPEED_MBPS,
        }
    }

    const STATS: &'static [&'static CStr] =
        &[c"rx_bad_cqe", c"tx_queue_full", c"tx_bad_completion"];

    fn ethtool_stats(dev: &ethernet::Device<Self>, out: &mut [u64]) {
        let c = &dev.data().counters;
        for (o, v) in out.iter_mut().zip([
            c.rx_bad_cqe.load(Relaxed),
            c.tx_queue_full.load(Relaxed),
            c.tx_bad_completion.load(Relaxed),
        ]) {
            *o = v;
        }
    }
}
