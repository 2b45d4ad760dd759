// SPDX-License-Identifier: GPL-2.0

//! Ethernet driver of the NIC ports of Habana Labs Gaudi2 accelerators.
//!
//! The driver binds the NIC core's auxiliary device `en` and registers a network device for
//! each port, over the port's raw path (device model 2.0, "Ethernet"), which the core programs
//! on the driver's queues ([`CnEth`]). A frame is sent as a LINEAR WQE of QP 0, copied into
//! the WQE's buffer; the NIC reports each sent WQE as an event the core passes on. It writes
//! each frame it receives for the port into the next element of the port's receive ring, with
//! an entry on CQ 0 naming the element and the length; the NAPI poll copies it out into a new
//! socket buffer and arms CQ 0 when it is done. The send queue, the buffers and the ring are
//! coherent memory of the kernel, reached by bus address with the MMU bypassed, so nothing a
//! user maps or registers can reach them. The core tells the RDMA driver of each network
//! device, which it attaches to its port. See Documentation/infiniband/gaudi/design.rst,
//! "Layering".

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::Devres,
    dma::Coherent,
    io::{
        io_project,
        io_write,
        Io, //
    },
    net::{
        ethernet::{
            self,
            LinkSettings,
            NetDev,
            Poll,
            RxMode,
            SkBuff,
            Stats64,
            Transmit, //
        },
        gaudi::{
            cn::{
                CnEth,
                CnEthDevice,
                CnEthEvents,
                RAW_LOG_ELEM,
                RAW_LOG_RING,
                RAW_MAX_FRAME,
                RAW_QPN, //
            },
            gaudi2::{
                self,
                cqe,
                wqe,
                SqWqe, //
            },
        },
    },
    new_spinlock_irq,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        SetOnce,
        SpinLockIrq, //
    },
    types::CovariantForLt,
};

const RING: u16 = 1 << RAW_LOG_RING;
/// Entries of the send queue and of the receive ring, as `ethtool -g` reports them (one WQE
/// stays unused: see [`TX_MAX`]).
const RING_LEN: u32 = RING as u32;
/// WQEs that may be outstanding: a doorbell whose producer index equals the execution index
/// means an empty queue, so one WQE stays unused.
const TX_MAX: u16 = RING - 1;
/// The shortest frame on the wire (without FCS): the driver pads shorter ones with zeros.
const ETH_ZLEN: usize = 60;
/// The largest frame the raw path sends or takes.
const MAX_FRAME: usize = RAW_MAX_FRAME;
/// Bytes of each transmit buffer.
const BUF: usize = 9216;
/// Bytes of each receive ring element.
const ELEM: usize = 1 << RAW_LOG_ELEM;
/// The largest MTU: a frame of it, with its Ethernet header and a VLAN tag, fits a buffer.
const MAX_MTU: u32 = 9000;
/// 32-bit words of a send WQE.
const WQE_WORDS: usize = size_of::<SqWqe>() / 4;

/// The network device driver of the ports.
struct EthDriver;

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
struct Port {
    cn: Arc<dyn CnEth>,
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
    /// Port index `index` of the NIC; its rings come at the first `open`.
    fn new(cn: Arc<dyn CnEth>, index: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            cn,
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

    /// Open the raw path on the rings, from their first entries.
    fn start(&self, mac: &[u8; 6]) -> Result {
        let r = self.rings()?;
        let mut tx = self.tx.lock();
        tx.pi = 0;
        tx.clean = 0;
        drop(tx);
        self.rx_ci.store(0, Relaxed);
        for w in 0..usize::from(RING) * WQE_WORDS {
            io_write!(&r.wq, [try: w], 0);
        }
        self.cn.raw_open(
            self.index,
            &r.wq,
            &r.rx_ring,
            mac,
            self.promisc.load(Relaxed),
        )
    }

    /// Whether CQ 0 holds a frame the poll has not taken.
    fn rx_pending(&self) -> bool {
        self.cn.raw_pending(self.index, self.rx_ci.load(Relaxed))
    }

    /// The NIC reported the WQE at ring position `index` sent: take it back, and those before
    /// it. An index that names no outstanding WQE (a device's error) is counted, logged and
    /// ignored. Returns whether the queue has room.
    fn tx_completed(&self, index: u32) -> bool {
        let ring = u32::from(RING);
        let mut tx = self.tx.lock();
        let outstanding = u32::from(tx.pi.wrapping_sub(tx.clean));
        let k = (index % ring + ring - u32::from(tx.clean % RING)) % ring;
        if index >= ring || k >= outstanding {
            drop(tx);
            self.counters.tx_bad_completion.add(1, Relaxed);
            kernel::ratelimited!(dev_warn!(
                self.cn.device(),
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
        let mut ci = self.rx_ci.load(Relaxed);
        let mut work = 0;
        while work < budget {
            let Some(c) = self.cn.raw_completion(self.index, ci)? else {
                break;
            };
            let elem = cqe::WQE_INDEX.get(&c.0) as usize;
            let len = cqe::RAW_PKT_SIZE.get(&c.0) as usize;
            // The NIC writes the element of its producer index, the CQE's own index.
            if elem != (ci % u32::from(RING)) as usize
                || !(ethernet::ETH_HLEN..=MAX_FRAME).contains(&len)
                || cqe::QPN.get(&c.0) != u64::from(RAW_QPN)
            {
                self.counters.rx_bad_cqe.add(1, Relaxed);
                self.counters.rx_errors.add(1, Relaxed);
                kernel::ratelimited!(dev_warn!(
                    self.cn.device(),
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
            self.cn.raw_consumed(self.index, ci)?;
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
            wqe::OPCODE.set(&mut w, gaudi2::WQE_OPCODE_LINEAR);
            wqe::WQE_INDEX.set(&mut w, slot.into());
            wqe::SE.set(&mut w, 1);
            wqe::SIZE.set(&mut w, wire as u64);
            wqe::LOCAL_ADDRESS.set(&mut w, r.tx_bufs.dma_address() + off as u64);
            let at = usize::from(slot) * WQE_WORDS;
            for (i, v) in w.iter().enumerate() {
                io_write!(&r.wq, [try: at + 2 * i], *v as u32);
                io_write!(&r.wq, [try: at + 2 * i + 1], (*v >> 32) as u32);
            }
            self.cn.raw_send(self.index, u32::from(pi % RING))
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
    fn link_up(&self) -> bool {
        self.cn.link_up(self.index)
    }
}

#[vtable]
impl ethernet::Driver for EthDriver {
    type Data = Port;

    fn open(dev: &ethernet::Device<Self>) -> Result {
        let p = dev.data();
        if p.cn.is_fatal() {
            return Err(EIO);
        }
        if p.rings.as_ref().is_none() {
            // Only `open` populates it, under RTNL: there is no race to lose.
            p.rings.populate(Rings::new(dev.parent())?);
        }
        // On an error the core leaves nothing of the raw path enabled.
        if let Err(e) = p.start(&dev.mac()) {
            dev_err!(
                p.cn.device(),
                "port {}: raw path not set up: {:?}\n",
                p.index + 1,
                e
            );
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
        if p.cn.is_fatal() {
            return;
        }
        if let Err(e) = p.cn.raw_close(p.index) {
            dev_warn!(
                p.cn.device(),
                "port {}: raw path not stopped: {:?}\n",
                p.index + 1,
                e
            );
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
            if p.cn.raw_arm(p.index, ci).is_ok() && p.rx_pending() {
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
        if dev.is_running() {
            p.cn.raw_filter(p.index, mac, p.promisc.load(Relaxed))?;
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
        let _ = p.cn.raw_filter(p.index, &dev.mac(), mode.promisc);
    }

    fn link_settings(_dev: &ethernet::Device<Self>) -> LinkSettings {
        LinkSettings {
            speed_mbps: gaudi2::PORT_SPEED_MBPS,
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

/// The ports' network devices, where the core sends the raw paths' and the links' events.
struct Ports {
    netdevs: KVec<Devres<ethernet::Registration<EthDriver>>>,
}

impl Ports {
    /// Run `f` on port index `port`'s network device while it is registered.
    fn with<R>(&self, port: usize, f: impl FnOnce(&ethernet::Device<EthDriver>) -> R) -> Option<R> {
        let reg = self.netdevs.get(port)?.try_access()?;
        Some(f(reg.device()))
    }
}

impl CnEthEvents for Ports {
    fn transmitted(&self, port: usize, index: u32) {
        self.with(port, |n| {
            // The poll wakes the queue.
            if n.data().tx_completed(index) {
                n.schedule_napi();
            }
        });
    }

    fn received(&self, port: usize) {
        self.with(port, |n| n.schedule_napi());
    }

    fn link_changed(&self, port: usize, up: bool) {
        self.with(port, |n| if up { n.carrier_on() } else { n.carrier_off() });
    }

    fn netdev(&self, port: usize) -> Option<ARef<NetDev>> {
        self.with(port, |n| n.net_dev().into())
    }

    fn fatal(&self) {
        for port in 0..self.netdevs.len() {
            self.with(port, |n| n.carrier_off());
        }
    }
}

/// Stops the core's events reaching the driver when dropped (detaching the network devices
/// from the RDMA driver's ports); returns once none is being handled.
struct Receiving(Arc<dyn CnEth>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.set_eth_events(None);
    }
}

/// The ports of a NIC the driver is bound to.
struct GaudiEn {
    // Dropped first: the core sends no more events, and no port is attached to the network
    // devices any more...
    _events: Receiving,
    // ...which are then unregistered (this is the last reference).
    _ports: Arc<Ports>,
}

struct GaudiEnDriver;

kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiEnDriver as auxiliary::Driver>::IdInfo,
    [(auxiliary::DeviceId::new(c"gaudi_cn", c"en"), ())]
);

impl auxiliary::Driver for GaudiEnDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiEn;

    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &AUX_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let cn = adev
            .registration_data::<CovariantForLt!(CnEthDevice)>()?
            .cn()
            .clone();
        // The function: it logs, and does the DMA.
        let dev = adev.parent();
        if cn.is_fatal() {
            dev_err!(
                dev,
                "the device stopped before probe: rebind the NIC core\n"
            );
            return Err(EIO);
        }
        let n = cn.ports() as usize;
        let mut netdevs = KVec::with_capacity(n, GFP_KERNEL)?;
        for index in 0..n {
            let opts = ethernet::Options {
                mac: cn.mac(index)?,
                max_mtu: MAX_MTU,
                dev_port: index as u16,
                tx_ring: RING_LEN,
                rx_ring: RING_LEN,
            };
            let reg =
                ethernet::Registration::new_auxiliary(adev, &opts, Port::new(cn.clone(), index))
                    .inspect_err(|e| {
                        dev_err!(
                            dev,
                            "cannot register the network device of port {}: {:?}\n",
                            index + 1,
                            e
                        )
                    })?;
            netdevs.push(reg, GFP_KERNEL)?;
        }
        let ports = Arc::new(Ports { netdevs }, GFP_KERNEL)?;
        // From here on the core's events reach the driver, and the RDMA driver's ports are
        // attached to the network devices, until `events` is dropped.
        cn.set_eth_events(Some(ports.clone()));
        let events = Receiving(cn.clone());
        if cn.is_fatal() {
            dev_err!(dev, "device fatal error during probe\n");
            return Err(EIO);
        }
        dev_info!(dev, "{} network devices\n", n);
        Ok(GaudiEn {
            _events: events,
            _ports: ports,
        })
    }
}

kernel::module_auxiliary_driver! {
    type: GaudiEnDriver,
    name: "gaudi_en",
    description: "Habana Labs Gaudi2 NIC Ethernet driver",
    license: "GPL v2",
}
