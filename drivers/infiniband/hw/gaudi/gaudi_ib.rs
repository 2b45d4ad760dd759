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
    dma,
    io::{
        poll::read_poll_timeout,
        Io, //
    },
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
mod cmd;
mod dv;
mod eq;
mod eth;
mod hbm;
mod hw;
mod ib;
mod ids;
mod mmu;
mod mr;
mod nic;
mod queue;
mod rc;
mod regs;
mod shared;

use eq::EventQueue;
use shared::{
    Bar,
    Shared,
    RESET_TIMEOUT, //
};

// The name of the driver, its IRQs and its BAR regions.
const DRV_NAME: &CStr = c"gaudi_ib";

/// MSI-X vectors the driver asks for; vector 0 carries model 1.5's event queue, vectors 1 to
/// 7 the ports' event queues ([`nic::eq_vector`]). A function without MSI-X gets one MSI
/// vector, which then carries everything.
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
}

/// Handler of one interrupt vector (MSI-X, or the one MSI vector).
///
/// Interrupts merge, so the handler never counts interrupts as events: it reads the cause
/// register and handles every cause it finds. Vector 0 carries the event queue, whose entries
/// the handler's thread takes, as reporting them may sleep.
struct VectorHandler {
    shared: Arc<Shared>,
    vector: usize,
    /// Interrupts seen on this vector (the probe's interrupt test counts on it).
    irqs: Atomic<u32>,
    /// The event queue's cause was seen and its entries not yet taken (vector 0 only). The
    /// thread also runs for the ports' queues, and model 1.5's queue is read only when it
    /// interrupted: once the queue is disabled (unbind, reset), the events the device then
    /// drops are no overflow to report.
    eq_due: Atomic<bool>,
    /// Vectors the function has: with one, it carries every port's event queue.
    vectors: usize,
    /// Where events go, once the InfiniBand device exists (shared by the vectors: vector 0
    /// carries model 1.5's events, the others the ports' queues).
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
        let pending = bar.read(regs::IRQ_CAUSE);
        let cause = regs::IRQ_CAUSE::zeroed()
            .with_test(pending.test())
            .with_event_queue(self.vector == 0 && pending.event_queue());
        // A vector that carries ports' event queues always runs its thread: the thread clears
        // the NIC's interrupt cause, which an entry taken by an earlier scan may have left set.
        let ports = (0..self.shared.nic.len()).any(|p| self.owns(p));
        if cause.into_raw() != 0 {
            bar.write_reg(cause);
        }
        if cause.event_queue() {
            self.eq_due.store(true, Release);
        }
        if cause.event_queue() || ports {
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
            if self.eq_due.xchg(false, Acquire) {
                self.take_events();
            }
            self.take_port_events();
        }
        IrqReturn::Handled
    }
}

impl pci::PolledHandler for VectorHandler {
    /// The presence check, every [`PRESENCE_PERIOD`] on vector 0: the identification register
    /// of a device that is gone reads all ones. Runs the handler's thread once when it finds
    /// the device gone.
    fn poll(&self) -> bool {
        if self.shared.removed.load(Relaxed) {
            return false;
        }
        let Some(bar) = self.shared.bar.try_access() else {
            return false;
        };
        if bar.read(regs::ID).into_raw() != u32::MAX {
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
                    q.take_events(&bar, |e| napi |= self.port_event(port, e, &mut work))
                };
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

    /// Act on what port `port`'s event queue said of its RC QPs (outside the BAR's RCU
    /// section: this sleeps).
    fn rc_work(&self, port: usize, work: &RcWork) {
        if work.completions {
            self.with_ib(|ib| rc::port_completions(ib, &self.shared, port));
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
            // Model 1.5's event says it too, and the network device and the InfiniBand port
            // follow that one for now.
            nic::EQE_LINK_STATUS => {
                dev_dbg!(dev, "port {}: link status {:#x}\n", port + 1, data2)
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

    /// Take the new entries of the event queue and act on them.
    fn take_events(&self) {
        let mut batch = [hw::Eqe::default(); eq::BATCH];
        let mut taken = 0;
        while taken < EventQueue::max_per_run() {
            // The BAR guard is an RCU read-side section: act on the entries after dropping it.
            let (n, lost) = {
                let Some(bar) = self.shared.bar.try_access() else {
                    return;
                };
                match self.shared.eq.poll(&bar, &mut batch) {
                    Ok(n) => (n, self.shared.eq.new_overflows(&bar)),
                    Err(e) => {
                        dev_err!(self.shared.dev, "event queue read failed: {:?}\n", e);
                        return;
                    }
                }
            };
            if lost != 0 {
                kernel::ratelimited!(dev_warn!(
                    self.shared.dev,
                    "event queue full: {} events lost\n",
                    lost
                ));
            }
            for e in &batch[..n] {
                self.event(e);
            }
            taken += n;
            if n < batch.len() {
                break;
            }
        }
    }

    fn event(&self, e: &hw::Eqe) {
        let dev = &self.shared.dev;
        match e.kind {
            eq::PORT_UP | eq::PORT_DOWN => {
                let port = u32::from(e.port);
                if port >= self.shared.ports {
                    kernel::ratelimited!(dev_warn!(
                        dev,
                        "event {} for port index {}, the device has {} ports: ignored\n",
                        e.kind,
                        port,
                        self.shared.ports
                    ));
                    return;
                }
                let up = e.kind == eq::PORT_UP;
                dev_info!(
                    dev,
                    "port {} link {}\n",
                    port + 1,
                    if up { "up" } else { "down" }
                );
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
            eq::DEVICE_FATAL => self.fatal("device fatal error"),
            eq::ETH => {
                if self
                    .with_netdev(u32::from(e.port), |n| n.schedule_napi())
                    .is_none()
                {
                    dev_dbg!(
                        dev,
                        "Ethernet event for port index {} without a netdev\n",
                        e.port
                    );
                }
            }
            // Events of model 1.5's queues: the driver has none (its QPs and CQs are the
            // NIC's, `crate::rc`), so only a failing device sends them.
            eq::COMPLETION | eq::QP_ERROR | eq::CQ_OVERFLOW | eq::MMU_FAULT => dev_dbg!(
                dev,
                "model 1.5 event {} (port index {}, {:#x}, {:#x}) for no queue of the driver: ignored\n",
                e.kind,
                e.port,
                e.data0,
                e.data1
            ),
            _ => kernel::ratelimited!(dev_warn!(
                dev,
                "unknown event type {} (port {}, {:#x}, {:#x}): ignored\n",
                e.kind,
                e.port,
                e.data0,
                e.data1
            )),
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
    /// Check that this is a device and a programming model we know.
    fn identify(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result {
        let id = bar.read(regs::ID).into_raw();
        if id != regs::ID_MAGIC {
            dev_err!(
                pdev,
                "unknown identification {:#010x} (expected {:#010x}), refusing device\n",
                id,
                regs::ID_MAGIC
            );
            return Err(ENODEV);
        }
        let version = bar.read(regs::VERSION);
        let (major, minor) = (version.major().get(), version.minor().get());
        if major != regs::MODEL_MAJOR || minor < regs::MODEL_MINOR_MIN {
            dev_err!(
                pdev,
                "unsupported programming model {}.{} (driver implements {}.{} and later {}.x)\n",
                major,
                minor,
                regs::MODEL_MAJOR,
                regs::MODEL_MINOR_MIN,
                regs::MODEL_MAJOR
            );
            return Err(ENODEV);
        }
        dev_info!(
            pdev,
            "identified Gaudi2 NIC, programming model {}.{}\n",
            major,
            minor
        );
        // A register that holds what was written proves BAR0 writes land.
        const PATTERN: u32 = 0xa5c3_5a3c;
        bar.write_reg(regs::SCRATCH::from_raw(PATTERN));
        let back = bar.read(regs::SCRATCH).into_raw();
        if back != PATTERN {
            dev_err!(
                pdev,
                "scratch register reads {:#010x} after writing {:#010x}\n",
                back,
                PATTERN
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// Reset the device and wait until it is ready.
    fn reset(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result {
        bar.write_reg(regs::RESET::from_raw(regs::RESET_MAGIC));
        let status = read_poll_timeout(
            || Ok(bar.read(regs::STATUS)),
            |s| s.ready(),
            Delta::from_millis(1),
            RESET_TIMEOUT,
        )
        .inspect_err(|_| {
            dev_err!(
                pdev,
                "device not ready {} ms after reset (STATUS {:#010x}), refusing device\n",
                RESET_TIMEOUT.as_millis(),
                bar.read(regs::STATUS).into_raw()
            )
        })?;
        if status.fatal() {
            dev_err!(
                pdev,
                "device reports a fatal error after reset (STATUS {:#010x})\n",
                status.into_raw()
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// Read and check the capabilities of the device.
    fn read_caps(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result<ib::Caps> {
        let caps = ib::Caps {
            ports: bar.read(regs::NUM_PORTS).into_raw(),
            max_qps: bar.read(regs::MAX_QPS).into_raw(),
            max_cqs: bar.read(regs::MAX_CQS).into_raw(),
            max_cqe: bar.read(regs::MAX_CQE).into_raw(),
            max_sqe: bar.read(regs::MAX_SQE).into_raw(),
            max_mtu: bar.read(regs::MAX_MTU).into_raw(),
            page_sizes: bar.read(regs::MMU_PAGE_SIZES).into_raw(),
            max_msg: bar.read(regs::MAX_MSG).into_raw(),
            max_gids: bar.read(regs::MAX_GIDS).into_raw(),
            // Checked by `identify`.
            model: bar.read(regs::VERSION).into_raw(),
        };
        let bad = if caps.ports == 0 || caps.ports > regs::MAX_PORTS {
            Some("NUM_PORTS")
        } else if caps.max_qps == 0
            || caps.max_cqs == 0
            || caps.max_qps > regs::MAX_INDEXES
            || caps.max_cqs > regs::MAX_INDEXES
        {
            Some("MAX_QPS/MAX_CQS")
        } else if !caps.max_cqe.is_power_of_two()
            || !caps.max_sqe.is_power_of_two()
            || caps.max_cqe > regs::MAX_CQE_LIMIT
            || caps.max_sqe > regs::MAX_SQE_LIMIT
        {
            Some("MAX_CQE/MAX_SQE")
        } else if caps.max_mtu < 256 || caps.page_sizes & (1 << 12) == 0 || caps.max_msg == 0 {
            Some("MAX_MTU/MMU_PAGE_SIZES/MAX_MSG")
        } else if caps.max_gids == 0 || caps.max_gids > regs::MAX_GIDS_LIMIT {
            Some("MAX_GIDS")
        } else {
            None
        };
        if let Some(what) = bad {
            dev_err!(
                pdev,
                "device reports invalid capabilities ({}): {:?}\n",
                what,
                caps
            );
            return Err(EIO);
        }
        dev_info!(
            pdev,
            "{} ports, {} QPs and {} CQs per port\n",
            caps.ports,
            caps.max_qps,
            caps.max_cqs
        );
        Ok(caps)
    }

    /// The device's memory: `DEVMEM_SIZE` bytes at the start of BAR 4, if the BAR holds them
    /// (otherwise the device has none that can be used). Its last [`nic::NIC_HBM`] bytes hold
    /// the NIC's context tables; returns the rest, for users, and where the tables are for the
    /// NIC (0 without device memory).
    fn devmem(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result<(Arc<hbm::Hbm>, u64)> {
        let size = u64::from(bar.read(regs::DEVMEM_SIZE_LO).into_raw())
            | (u64::from(bar.read(regs::DEVMEM_SIZE_HI).into_raw()) << 32);
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

    /// Have the device invert a buffer in host memory, proving that its
    /// DMA reaches what the DMA API hands out.
    fn test_dma(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result {
        const LEN: usize = 64;
        let mut pattern = [0u8; LEN];
        for (i, b) in pattern.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        let buf: dma::Coherent<[u8]> =
            dma::CoherentBox::from_slice(pdev.as_ref(), &pattern, GFP_KERNEL)?.into();
        let addr = buf.dma_address();
        bar.write_reg(regs::DMA_TEST_ADDR_LO::from_raw(addr as u32));
        bar.write_reg(regs::DMA_TEST_ADDR_HI::from_raw((addr >> 32) as u32));
        bar.write_reg(regs::DMA_TEST_LEN::from_raw(LEN as u32));
        bar.write_reg(regs::DMA_TEST_CTRL::from_raw(regs::DMA_TEST_START));
        // The buffer may be freed only once the device is done with it (or has given up).
        let status = read_poll_timeout(
            || Ok(bar.read(regs::DMA_TEST_CTRL).into_raw()),
            |s| *s != regs::DMA_TEST_IDLE,
            Delta::from_millis(1),
            RESET_TIMEOUT,
        )
        .unwrap_or(regs::DMA_TEST_IDLE);
        if status == regs::DMA_TEST_IDLE {
            // Still running: keep the buffer rather than free memory the device writes.
            dev_err!(pdev, "DMA self-test did not finish\n");
            core::mem::forget(buf);
            return Err(EIO);
        }
        if status != regs::DMA_TEST_DONE {
            dev_err!(pdev, "DMA self-test failed, status {}\n", status);
            return Err(EIO);
        }
        let mut back = [0u8; LEN];
        (&buf).copy_to_slice(&mut back);
        for (i, (got, want)) in back.iter().zip(pattern.iter()).enumerate() {
            if *got != !want {
                dev_err!(
                    pdev,
                    "DMA self-test: byte {} is {:#04x}, expected {:#04x}\n",
                    i,
                    got,
                    !want
                );
                return Err(EIO);
            }
        }
        dev_info!(pdev, "DMA self-test passed ({} bytes)\n", LEN);
        Ok(())
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
            shared
                .bar
                .access(pdev.as_ref())?
                .write_reg(regs::IRQ_TEST::from_raw(vector as u32));
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

        let bar = pdev.iomap_region_sized::<{ regs::BAR0_SIZE }>(0, DRV_NAME)?;
        dev_info!(pdev, "BAR0 mapped\n");
        GaudiIb::identify(pdev, &bar)?;
        GaudiIb::reset(pdev, &bar)?;
        let caps = GaudiIb::read_caps(pdev, &bar)?;
        let (hbm, nic_tables) = GaudiIb::devmem(pdev, &bar)?;
        GaudiIb::test_dma(pdev, &bar)?;
        let ports = (caps.ports as usize).min(nic::PORTS);
        let mut queues = KVec::with_capacity(ports, GFP_KERNEL)?;
        for port in 0..ports {
            queues.push(nic::PortQueues::new(pdev.as_ref(), port)?, GFP_KERNEL)?;
        }
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                eq: EventQueue::new(pdev.as_ref())?,
                bar: bar.into_devres()?,
                dev: pdev.as_ref().into(),
                ports: caps.ports,
                fatal: Atomic::new(false),
                removed: Atomic::new(false),
                cmd <- cmd::Commands::new(),
                nic: queues,
                nic_tables,
                gateway <- kernel::new_mutex!(()),
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
            shared.clear_devmem(0, hbm.size() + nic::NIC_HBM)?;
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
                eq_due: Atomic::new(false),
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
        shared.eq.enable(shared.bar.access(pdev.as_ref())?);
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
                mac: ib::port_mac(shared.bar.access(pdev.as_ref())?, index)?,
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
        let node_guid = ib::eui64(ib::port_mac(shared.bar.access(pdev.as_ref())?, 0)?);
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
