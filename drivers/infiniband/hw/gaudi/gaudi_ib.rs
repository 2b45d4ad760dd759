// SPDX-License-Identifier: GPL-2.0

//! RDMA driver for the NIC of Habana Labs Gaudi2 accelerators.
//!
//! All NIC ports of a device are exposed through one InfiniBand device;
//! see Documentation/infiniband/gaudi/ for the design and the device model.

use kernel::{
    device::{
        Bound,
        Core, //
    },
    devres::Devres,
    io::poll::read_poll_timeout,
    irq::{
        IrqReturn,
        ThreadedHandler,
        ThreadedIrqReturn, //
    },
    net::ethernet,
    pci,
    prelude::*,
    rdma::{
        self,
        Event, //
    },
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        Arc,
        SetOnce, //
    },
    time::Delta,
};

mod chip;
mod dv;
mod eth;
mod hbm;
mod ib;
mod ids;
mod mmu;
mod mr;
mod nic;
mod queue;
mod rc;
mod shared;

use shared::{
    Bar,
    Shared, //
};

// The name of the driver, its IRQs and its BAR regions.
const DRV_NAME: &CStr = c"gaudi_ib";

/// MSI-X vectors the driver asks for; vector 0 carries the chip services' interrupts (the
/// fatal error, the test), vectors 1 to 7 the ports' event queues ([`nic::eq_vector`]). A
/// function without MSI-X gets one MSI vector, which then carries everything.
const NUM_VECTORS: u32 = 8;

/// The ports' network devices, each unregistered when the PCI device is unbound or the last
/// interrupt handler dropped.
type Netdevs = SetOnce<KVec<Devres<ethernet::Registration<eth::EthDriver>>>>;

/// How often the driver checks that the device is still there: a device that fell off the bus
/// (surprise removal) raises no interrupt, and its registers read all ones.
const PRESENCE_PERIOD: Delta = Delta::from_secs(1);

/// Messages about faults that user space or a peer can cause by the thousand (a QP error, a
/// translation fault of a user's WQE) are logged at most `FLOOD_BURST` times per
/// `FLOOD_INTERVAL`; the device's counters say how many there were.
const FLOOD_INTERVAL: Delta = Delta::from_secs(60);
const FLOOD_BURST: u32 = 10;

/// What one scan of a port's event queue found for the RC QPs (`crate::rc`).
#[derive(Default)]
struct RcWork {
    /// CQ 1 has new entries.
    completions: bool,
    /// QP errors: QPN and syndrome.
    errors: [(u32, u32); 32],
    n_errors: usize,
    /// QP errors beyond `errors`.
    lost_errors: u32,
    /// Link changes, in order.
    links: [bool; 8],
    n_links: usize,
    /// Link changes beyond `links`: the port's state is read from the chip.
    lost_links: bool,
    /// Events the NIC wrote over before the driver took them (an EQ overrun).
    overrun: u32,
}

/// Handler of one interrupt vector (MSI-X, or the one MSI vector).
///
/// Interrupts merge, so the handler never counts interrupts as events: it reads the cause
/// register and handles every cause it finds. The ports' event queues are taken by the
/// handler's thread, as reporting their events may sleep; so is a fatal error.
struct VectorHandler {
    shared: Arc<Shared>,
    vector: usize,
    /// Interrupts seen on this vector (the probe's interrupt test counts on it).
    irqs: Atomic<u32>,
    /// The chip's fatal cause was seen and not yet acted on (vector 0 only).
    fatal_due: Atomic<bool>,
    /// Vectors the function has: with one, it carries every port's event queue.
    vectors: usize,
    /// Where events go, once the InfiniBand device exists (shared by the vectors).
    ib: Arc<SetOnce<rdma::DeviceHandle<ib::GaudiRdma>>>,
    /// The ports' network devices.
    eth: Arc<Netdevs>,
}

impl ThreadedHandler for VectorHandler {
    fn handle(&self) -> ThreadedIrqReturn {
        self.irqs.add(1, Relaxed);
        let Some(bar) = self.shared.bar.try_access() else {
            return ThreadedIrqReturn::None;
        };
        // Vector 0 takes both causes, the others only test interrupts.
        let cause = chip::take_irq_causes(&bar, self.vector == 0);
        // A vector that carries ports' event queues always runs its thread: the thread clears
        // the NIC's interrupt cause, which an entry taken by an earlier scan may have left set.
        let ports = (0..self.shared.nic.len()).any(|p| self.owns(p));
        if cause.fatal() {
            self.fatal_due.store(true, Release);
        }
        if cause.fatal() || ports {
            ThreadedIrqReturn::WakeThread
        } else if cause.into_raw() != 0 {
            ThreadedIrqReturn::Handled
        } else {
            ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> IrqReturn {
        if self.shared.removed.load(Relaxed) {
            // Nothing the device wrote can be trusted any more.
            self.fatal("device removed (its registers read all ones)");
        } else {
            if self.fatal_due.xchg(false, Acquire) {
                self.fatal("device fatal error");
                return IrqReturn::Handled;
            }
            self.take_port_events();
        }
        IrqReturn::Handled
    }
}

impl pci::PolledHandler for VectorHandler {
    /// The presence check, every [`PRESENCE_PERIOD`] on vector 0: the registers of a device
    /// that is gone read all ones. Runs the handler's thread once when it finds
    /// the device gone.
    fn poll(&self) -> bool {
        if self.shared.removed.load(Relaxed) {
            return false;
        }
        let Some(bar) = self.shared.bar.try_access() else {
            return false;
        };
        if chip::present(&bar) {
            return false;
        }
        !self.shared.removed.xchg(true, Full)
    }
}

impl VectorHandler {
    /// Whether this vector carries port `port`'s event queue.
    fn owns(&self, port: usize) -> bool {
        if self.vectors == 1 {
            self.vector == 0
        } else {
            nic::eq_vector(port) == self.vector
        }
    }

    /// Take the new entries of the event queues of this vector's ports and act on them.
    fn take_port_events(&self) {
        for (port, q) in self.shared.nic.iter().enumerate() {
            // A vector that carries several queues (one MSI vector carries them all) looks at
            // the written-back producer index first, which costs no register access.
            if !self.owns(port) || !q.eq_pending() {
                continue;
            }
            loop {
                // The BAR guard is an RCU read-side section: rescheduling happens outside it.
                // The poll is scheduled once per scan, outside the BAR's RCU section.
                let mut napi = false;
                let mut work = RcWork::default();
                let more = {
                    let Some(bar) = self.shared.bar.try_access() else {
                        return;
                    };
                    work.overrun = q.eq_overrun();
                    q.take_events(&bar, |e| napi |= self.port_event(port, e, &mut work))
                };
                if work.overrun != 0 {
                    // What the lost events said is read back from the state they reported:
                    // the CQs are looked at and the link state read.
                    kernel::ratelimited!(dev_warn!(
                        self.shared.dev,
                        "port {}: event queue overrun: {} events lost\n",
                        port + 1,
                        work.overrun
                    ));
                    napi = true;
                    work.completions = true;
                    work.lost_links = true;
                }
                if napi {
                    self.with_netdev(port as u32, |n| n.schedule_napi());
                }
                self.rc_work(port, &work);
                match more {
                    Ok(true) => kernel::task::cond_resched(),
                    Ok(false) => break,
                    Err(e) => {
                        kernel::ratelimited!(dev_err!(
                            self.shared.dev,
                            "port {}: event queue read failed: {:?}\n",
                            port + 1,
                            e
                        ));
                        break;
                    }
                }
            }
        }
    }

    /// Act on what port `port`'s event queue said of its link and its RC QPs (outside the
    /// BAR's RCU section: this sleeps).
    fn rc_work(&self, port: usize, work: &RcWork) {
        for &up in &work.links[..work.n_links] {
            self.link_changed(port, up);
        }
        if work.lost_links {
            let up = self
                .shared
                .bar
                .try_access()
                .is_some_and(|bar| chip::link_up(&bar, port));
            let was = self
                .with_netdev(port as u32, |n| n.carrier_ok())
                .unwrap_or(up);
            if up != was {
                self.link_changed(port, up);
            }
        }
        if work.completions {
            self.with_ib(|ib| rc::port_completions(ib, &self.shared, port));
        }
        if work.overrun != 0 {
            self.with_ib(|ib| rc::recheck_errors(ib, &self.shared, port));
        }
        for &(qpn, syndrome) in &work.errors[..work.n_errors] {
            let ours = self
                .with_ib(|ib| rc::qp_error(ib, port, qpn, syndrome))
                .unwrap_or(false);
            // Each kind with a budget of its own: a process flooding errors of its QP sets
            // does not hide those of the standard verbs' QPs, nor the reverse.
            if ours {
                kernel::ratelimited!(
                    FLOOD_INTERVAL,
                    FLOOD_BURST,
                    dev_info!(
                        self.shared.dev,
                        "QP {} (port {}): error, syndrome {:#x}\n",
                        qpn,
                        port + 1,
                        syndrome
                    )
                );
            } else {
                kernel::ratelimited!(
                    FLOOD_INTERVAL,
                    FLOOD_BURST,
                    dev_info!(
                        self.shared.dev,
                        "QP {} (port {}) of a QP set: error, syndrome {:#x}\n",
                        qpn,
                        port + 1,
                        syndrome
                    )
                );
            }
        }
        if work.lost_errors != 0 {
            kernel::ratelimited!(dev_warn!(
                self.shared.dev,
                "port {}: {} QP errors in one scan not handled\n",
                port + 1,
                work.lost_errors
            ));
        }
    }

    /// An entry of port `port`'s event queue; returns whether the port's NAPI poll has work.
    /// What concerns the RC QPs is noted in `work`.
    fn port_event(&self, port: usize, e: &nic::Eqe, work: &mut RcWork) -> bool {
        let dev = &self.shared.dev;
        let (ty, data1, data2) = (
            nic::eqe::TYPE.get(&e.0),
            nic::eqe::DATA1.get(&e.0) as u32,
            nic::eqe::DATA2.get(&e.0) as u32,
        );
        match ty {
            nic::EQE_RAW_TX_COMP => {
                return self
                    .with_netdev(port as u32, |n| n.data().tx_completed(data2))
                    .unwrap_or(false);
            }
            // The CQ number is bits 15:0.
            nic::EQE_COMP if data1 & 0xffff == nic::CQ_ETH as u32 => return true,
            nic::EQE_COMP if data1 & 0xffff == nic::CQ_RC as u32 => work.completions = true,
            nic::EQE_QP_ERR if data1 & 0xff_ffff != 0 => {
                if work.n_errors < work.errors.len() {
                    work.errors[work.n_errors] = (data1 & 0xff_ffff, data2);
                    work.n_errors += 1;
                } else {
                    work.lost_errors += 1;
                }
            }
            nic::EQE_COMP => kernel::ratelimited!(dev_warn!(
                dev,
                "port {}: completion event of CQ {}, which is not in use: ignored\n",
                port + 1,
                data1 & 0xffff
            )),
            // Congestion control is not used.
            nic::EQE_CONG | nic::EQE_CONG_ERR => {
                dev_dbg!(dev, "port {}: congestion event {}\n", port + 1, ty)
            }
            // Bit 0 of the status: the link is up.
            nic::EQE_LINK_STATUS => {
                if work.n_links < work.links.len() {
                    work.links[work.n_links] = data2 & 1 != 0;
                    work.n_links += 1;
                } else {
                    work.lost_links = true;
                }
            }
            nic::EQE_QP_ERR | nic::EQE_COMP_ERR | nic::EQE_DB_FIFO_OVERRUN => {
                kernel::ratelimited!(
                    FLOOD_INTERVAL,
                    FLOOD_BURST,
                    dev_warn!(
                        dev,
                        "port {}: event {} ({:#x}, {:#x})\n",
                        port + 1,
                        ty,
                        data1,
                        data2
                    )
                )
            }
            _ => kernel::ratelimited!(dev_warn!(
                dev,
                "port {}: unknown event type {} ({:#x}, {:#x}): ignored\n",
                port + 1,
                ty,
                data1,
                data2
            )),
        }
        false
    }

    /// Port index `port`'s link went up or down: the network device's carrier and the
    /// InfiniBand port follow.
    fn link_changed(&self, port: usize, up: bool) {
        dev_info!(
            self.shared.dev,
            "port {} link {}\n",
            port + 1,
            if up { "up" } else { "down" }
        );
        let port = port as u32;
        self.with_netdev(port, |n| if up { n.carrier_on() } else { n.carrier_off() });
        let event = if up {
            Event::PortActive(port + 1)
        } else {
            Event::PortErr(port + 1)
        };
        if let Some(ib) = SetOnce::as_ref(&self.ib) {
            // ENODEV: the device is being removed; nobody is left to tell.
            let _ = ib.dispatch_event(event);
        }
    }

    /// Run `f` on the network device of port index `port` if it exists and is registered.
    fn with_netdev<R>(
        &self,
        port: u32,
        f: impl FnOnce(&ethernet::Device<eth::EthDriver>) -> R,
    ) -> Option<R> {
        let reg = SetOnce::as_ref(&self.eth)?
            .get(port as usize)?
            .try_access()?;
        Some(f(reg.device()))
    }

    /// Run `f` on the InfiniBand device if it exists and is registered.
    fn with_ib<R>(&self, f: impl FnOnce(&rdma::Device<ib::GaudiRdma>) -> R) -> Option<R> {
        SetOnce::as_ref(&self.ib)?.with_device(f)
    }

    /// The device stopped (a fatal error, or it is gone): tell every consumer, then remove the
    /// InfiniBand device, which disassociates the user contexts. The PCI function stays bound;
    /// rebinding it resets the device and registers a new InfiniBand device.
    fn fatal(&self, why: &str) {
        if self.shared.fatal.xchg(true, Full) {
            return;
        }
        if self.shared.removed.load(Relaxed) {
            dev_err!(self.shared.dev, "{}: removing the InfiniBand device\n", why);
        } else {
            dev_err!(
                self.shared.dev,
                "{}: removing the InfiniBand device; unbind and bind the PCI device to recover\n",
                why
            );
        }
        // The ports' interfaces stay, without carrier, until the PCI device is unbound.
        for port in 0..self.shared.ports {
            self.with_netdev(port, |n| n.carrier_off());
        }
        if let Some(ib) = SetOnce::as_ref(&self.ib) {
            let _ = ib.dispatch_event(Event::DeviceFatal);
            ib.unregister();
        }
    }
}

/// A bound Gaudi2 NIC.
struct GaudiIb<'bound> {
    // Dropped first: the InfiniBand device goes before its interrupts.
    _ib: Devres<rdma::Registration<ib::GaudiRdma>>,
    // Interrupts are freed while the BAR is still mapped.
    irqs: pci::ThreadedIrqHandlers<'bound, VectorHandler>,
    /// The device's memory, revoked from importers at unbind.
    hbm: Arc<hbm::Hbm>,
    pdev: &'bound pci::Device<Bound>,
}

impl GaudiIb<'_> {
    /// The chip's enabled ports, which must be ports 0 to n - 1 (n from 1 to [`nic::PORTS`]),
    /// and the device's limits.
    fn caps(pdev: &pci::Device<Bound>, bar: &Bar<'_>, model: u32) -> Result<ib::Caps> {
        let mask = chip::port_mask(bar);
        let ports = mask.count_ones();
        if mask == 0 || ports as usize > nic::PORTS || mask != (1u32 << ports) - 1 {
            dev_err!(
                pdev,
                "enabled ports {:#x}: the driver takes ports 1 to n of at most {}\n",
                mask,
                nic::PORTS
            );
            return Err(EIO);
        }
        let caps = ib::Caps::new(ports, model);
        dev_info!(
            pdev,
            "{} ports, {} QPs and {} CQs per port\n",
            caps.ports,
            caps.max_qps,
            caps.max_cqs
        );
        Ok(caps)
    }

    /// The device's memory: the chip's HBM size at the start of BAR 4, if the BAR holds it
    /// (otherwise the device has none that can be used). Its last [`nic::NIC_HBM`] bytes hold
    /// the NIC's context tables; returns the rest, for users, and where the tables are for the
    /// NIC (0 without device memory).
    fn devmem(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result<(Arc<hbm::Hbm>, u64)> {
        let size = chip::hbm_size(bar);
        let bar_len = pdev.resource_len(4)?;
        let usable = if size > bar_len || size % (1 << 12) != 0 || size < 2 * nic::NIC_HBM {
            dev_err!(
                pdev,
                "device memory of {:#x} bytes does not fit BAR 4 ({:#x} bytes): not used\n",
                size,
                bar_len
            );
            0
        } else {
            size
        };
        if usable == 0 {
            return Ok((hbm::Hbm::new(pdev.as_ref(), pdev.resource_start(4)?, 0)?, 0));
        }
        let users = usable - nic::NIC_HBM;
        dev_info!(
            pdev,
            "{} MiB of device memory, {} KiB of it for the NIC's context tables\n",
            usable >> 20,
            nic::NIC_HBM >> 10
        );
        Ok((
            hbm::Hbm::new(pdev.as_ref(), pdev.resource_start(4)?, users)?,
            nic::DRAM_PHYS_BASE + users,
        ))
    }

    /// Raise a test interrupt on every vector and wait until its handler
    /// has seen it.
    fn test_interrupts(
        pdev: &pci::Device<Bound>,
        shared: &Shared,
        irqs: &pci::ThreadedIrqHandlers<'_, VectorHandler>,
        kind: &str,
    ) -> Result {
        for vector in 0..irqs.len() {
            let handler = irqs.handler(vector).ok_or(EINVAL)?;
            let before = handler.irqs.load(Relaxed);
            chip::test_irq(shared.bar.access(pdev.as_ref())?, vector as u32);
            let seen = read_poll_timeout(
                || Ok(handler.irqs.load(Relaxed)),
                |n| *n != before,
                Delta::from_millis(1),
                Delta::from_secs(2),
            )
            .inspect_err(|_| {
                dev_err!(
                    pdev,
                    "{} test interrupt on vector {} not received\n",
                    kind,
                    vector
                )
            })?;
            dev_info!(
                pdev,
                "{} test interrupt received on vector {} (irq {}), count {}\n",
                kind,
                vector,
                irqs.irq(vector)?,
                seen
            );
        }
        Ok(())
    }
}

struct GaudiIbDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <GaudiIbDriver as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(pci::Vendor::HABANALABS, 0x1020), ())]
);

impl pci::Driver for GaudiIbDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiIb<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    // The device reaches 52 bits of bus address (page table entries, rings, the event queue):
    // with the default 32, memory or a peer's BAR above 4 GiB would be bounced or refused.
    const DMA_MASK: Option<kernel::dma::DmaMask> = Some(kernel::dma::DmaMask::new::<52>());

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev_info!(
            pdev,
            "probe {:04x}:{:04x}\n",
            pdev.vendor_id().as_raw(),
            pdev.device_id()
        );
        pdev.enable_device_managed()?;
        pdev.set_master();

        let bar = pdev.iomap_region_sized::<{ shared::BAR0_SIZE }>(0, DRV_NAME)?;
        dev_info!(pdev, "BAR0 mapped\n");
        let (major, minor) = chip::identify(pdev.as_ref(), &bar)?;
        dev_info!(
            pdev,
            "identified Gaudi2 NIC, device model {}.{}\n",
            major,
            minor
        );
        chip::reset(pdev.as_ref(), &bar)?;
        let caps = GaudiIb::caps(pdev, &bar, major << 16 | minor)?;
        let (hbm, nic_tables) = GaudiIb::devmem(pdev, &bar)?;
        let ports = (caps.ports as usize).min(nic::PORTS);
        let mut queues = KVec::with_capacity(ports, GFP_KERNEL)?;
        for port in 0..ports {
            queues.push(nic::PortQueues::new(pdev.as_ref(), port)?, GFP_KERNEL)?;
        }
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                bar: bar.into_devres()?,
                dev: pdev.as_ref().into(),
                ports: caps.ports,
                fatal: Atomic::new(false),
                removed: Atomic::new(false),
                nic: queues,
                nic_tables,
                gateway <- kernel::new_mutex!(nic::Gateways::new()),
                asids <- kernel::new_mutex!(chip::Asids::new()?),
                secured_db <- kernel::new_spinlock_irq!(()),
                encaps <- kernel::new_mutex!({
                    let n = caps.ports as usize;
                    let mut t = KVec::with_capacity(n, GFP_KERNEL)?;
                    t.resize(n, [(0, 0); shared::ENCAPS], GFP_KERNEL)?;
                    t
                }),
            }),
            GFP_KERNEL,
        )?;

        if hbm.size() != 0 {
            // Device memory keeps its contents across resets and drivers: the context tables
            // start with no valid context.
            shared.clear_devmem(pdev.as_ref(), 0, hbm.size() + nic::NIC_HBM)?;
        }

        let netdevs = Arc::new(SetOnce::new(), GFP_KERNEL)?;
        let ib_handle = Arc::new(SetOnce::new(), GFP_KERNEL)?;
        let vectors = core::cell::Cell::new(NUM_VECTORS as usize);
        let mut handler = |vector| -> Result<VectorHandler> {
            Ok(VectorHandler {
                shared: shared.clone(),
                vector,
                vectors: vectors.get(),
                irqs: Atomic::new(0),
                fatal_due: Atomic::new(false),
                ib: ib_handle.clone(),
                eth: netdevs.clone(),
            })
        };
        let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
        let msi = pci::IrqTypes::default().with(pci::IrqType::Msi);
        let (kind, mut irqs) =
            match pdev.request_threaded_irq_handlers(NUM_VECTORS, msix, DRV_NAME, &mut handler) {
                Ok(irqs) => ("MSI-X", irqs),
                Err(e) => {
                    dev_info!(
                        pdev,
                        "cannot set up {} MSI-X vectors ({:?}), trying one MSI vector\n",
                        NUM_VECTORS,
                        e
                    );
                    vectors.set(1);
                    let irqs = pdev
                        .request_threaded_irq_handlers(1, msi, DRV_NAME, &mut handler)
                        .inspect_err(|e| {
                            dev_err!(pdev, "cannot set up an MSI vector: {:?}\n", e)
                        })?;
                    ("MSI", irqs)
                }
            };
        dev_info!(pdev, "{} enabled, vectors: {}\n", kind, irqs.len());

        GaudiIb::test_interrupts(pdev, &shared, &irqs, kind)?;
        irqs.start_poll(0, PRESENCE_PERIOD)?;
        if nic_tables != 0 {
            let bar = shared.bar.access(pdev.as_ref())?;
            for (port, q) in shared.nic.iter().enumerate() {
                q.enable(bar, nic_tables + port as u64 * nic::PORT_TABLES)?;
                q.rc_enable(bar, rc::wq_array_va(port), rc::LOG_SLOT_LINES)?;
            }
        }

        // The network devices are registered before the InfiniBand device, whose ports refer
        // to them, so that they are unregistered after it.
        let mut registrations = KVec::with_capacity(caps.ports as usize, GFP_KERNEL)?;
        for index in 0..caps.ports as usize {
            let opts = ethernet::Options {
                mac: chip::mac(shared.bar.access(pdev.as_ref())?, index)?,
                max_mtu: eth::MAX_MTU,
                dev_port: index as u16,
                tx_ring: eth::RING_LEN,
                rx_ring: eth::RING_LEN,
            };
            let data = eth::Port::new(shared.clone(), index);
            let reg = ethernet::Registration::new(pdev.as_ref(), &opts, data).inspect_err(|e| {
                dev_err!(
                    pdev,
                    "cannot register the network device of port {}: {:?}\n",
                    index + 1,
                    e
                )
            })?;
            registrations.push(reg, GFP_KERNEL)?;
        }
        // Each InfiniBand port is attached to its network device: the core derives the port's
        // GIDs from the device's addresses and resolves address vectors through it.
        let handler = irqs.handler(0).ok_or(EINVAL)?;
        handler.eth.populate(registrations);
        let netdevs = SetOnce::as_ref(&handler.eth).ok_or(EINVAL)?;
        let mut regs = KVec::with_capacity(netdevs.len(), GFP_KERNEL)?;
        for reg in netdevs {
            regs.push(reg.access(pdev.as_ref())?, GFP_KERNEL)?;
        }
        let mut ndevs = KVec::with_capacity(regs.len(), GFP_KERNEL)?;
        for reg in &regs {
            ndevs.push(reg.device().net_dev(), GFP_KERNEL)?;
        }
        // The node GUID (and system image GUID) is the EUI-64 of the first port's MAC address.
        let node_guid = ib::eui64(chip::mac(shared.bar.access(pdev.as_ref())?, 0)?);
        let ib = rdma::Registration::new(
            pdev.as_ref(),
            &<LocalModule as kernel::ModuleMetadata>::THIS_MODULE,
            rdma::Options {
                ports: caps.ports,
                comp_vectors: 1,
                node_type: rdma::NodeType::Ca,
                netdevs: &ndevs,
                node_guid,
            },
            ib::IbDev::new(
                shared.clone(),
                caps,
                pdev.device_id().into(),
                node_guid,
                hbm.clone(),
            ),
        )
        .inspect_err(|e| dev_err!(pdev, "cannot register the InfiniBand device: {:?}\n", e))?;
        drop(ndevs);
        drop(regs);
        {
            let reg = ib.access(pdev.as_ref())?;
            let dev = reg.device();
            irqs.handler(0).ok_or(EINVAL)?.ib.populate(dev.handle());
            dev_info!(
                pdev,
                "registered {} with {} ports\n",
                dev.name(),
                dev.port_count()
            );
        }
        if shared.is_fatal() {
            dev_err!(pdev, "device fatal error during probe\n");
            return Err(EIO);
        }
        dev_info!(pdev, "probe complete\n");

        Ok(GaudiIb {
            _ib: ib,
            irqs,
            hbm,
            pdev,
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.irqs.synchronize();
        // Importers of exported device memory cannot map it any more.
        this.hbm.revoke();
        dev_info!(pdev, "unbind\n");
    }
}

impl Drop for GaudiIb<'_> {
    fn drop(&mut self) {
        dev_info!(self.pdev, "released\n");
    }
}

kernel::module_pci_driver! {
    type: GaudiIbDriver,
    name: "gaudi_ib",
    description: "Habana Labs Gaudi2 NIC RDMA driver",
    license: "GPL v2",
    // Device memory is exported as dma-bufs.
    imports_ns: ["DMA_BUF"],
    params: {
        max_mrs: u64 {
            default: 65536,
            description: "Memory regions a user context may hold",
        },
        max_mr_ptes: u64 {
            default: 16777216,
            description: "Device page-table entries of the regions of a user context",
        },
        max_qp_sets: u64 {
            default: 256,
            description: "QP sets a user context may hold",
        },
        max_queue_mib: u64 {
            default: 256,
            description: "MiB of QP set queues a user context may hold",
        },
        first_pd_id: u64 {
            default: 1,
            description: "Identity of the first protection domain (tests start it near the end)",
        },
    },
}
