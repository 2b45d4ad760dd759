// SPDX-License-Identifier: GPL-2.0

//! RDMA driver for the NIC of Habana Labs Gaudi2 accelerators.
//!
//! The NIC is a block of the accelerator: whoever owns the chip (habanalabs on a host, the
//! driver of the emulated function under test) gives it to this driver through an auxiliary
//! device ([`kernel::net::gaudi::chip`]). All NIC ports of a device are exposed through one
//! InfiniBand device; see Documentation/infiniband/gaudi/ for the design and the device model.

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::Devres,
    net::{
        ethernet,
        gaudi::chip::{
            Chip,
            ChipDevice,
            ChipEvents, //
        },
    },
    prelude::*,
    rdma::{
        self,
        Event, //
    },
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
        SetOnce, //
    },
    time::Delta,
    types::CovariantForLt,
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

use shared::Shared;

/// The ports' network devices, each unregistered when the driver is unbound or the last
/// reference to the chip's event receiver dropped.
type Netdevs = SetOnce<KVec<Devres<ethernet::Registration<eth::EthDriver>>>>;

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

/// Where the chip's owner sends the chip's events: the ports' event queues (taken from the
/// owner's interrupt thread, as reporting their events may sleep) and the fatal error.
struct Events {
    shared: Arc<Shared>,
    /// Vectors the chip's interrupts come on: with one, it carries every port's event queue.
    vectors: usize,
    /// Where events go, once the InfiniBand device exists.
    ib: SetOnce<rdma::DeviceHandle<ib::GaudiRdma>>,
    /// The ports' network devices.
    eth: Netdevs,
}

impl ChipEvents for Events {
    fn port_events(&self, vector: usize) {
        if !self.shared.is_fatal() {
            self.take_port_events(vector);
        }
    }

    fn fatal(&self, removed: bool) {
        if removed {
            self.shared.removed.store(true, Relaxed);
            self.fatal("device removed (its registers read all ones)");
        } else {
            self.fatal("device fatal error");
        }
    }
}

impl Events {
    /// Whether vector `vector` carries port `port`'s event queue.
    fn owns(&self, vector: usize, port: usize) -> bool {
        if self.vectors == 1 {
            vector == 0
        } else {
            nic::eq_vector(port) == vector
        }
    }

    /// Take the new entries of the event queues of vector `vector`'s ports and act on them.
    fn take_port_events(&self, vector: usize) {
        for (port, q) in self.shared.nic.iter().enumerate() {
            // A vector that carries several queues (one MSI vector carries them all) looks at
            // the written-back producer index first, which costs no register access.
            if !self.owns(vector, port) || !q.eq_pending() {
                continue;
            }
            loop {
                // The BAR guard is an RCU read-side section: rescheduling happens outside it.
                // The poll is scheduled once per scan, outside the BAR's RCU section.
                let mut napi = false;
                let mut work = RcWork::default();
                let more = {
                    let Some(regs) = self.shared.chip.try_access() else {
                        return;
                    };
                    work.overrun = q.eq_overrun();
                    q.take_events(&*regs, |e| napi |= self.port_event(port, e, &mut work))
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
            let up = self.shared.chip().is_ok_and(|c| c.link_up(port));
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
    /// InfiniBand device, which disassociates the user contexts. The function stays bound;
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

/// Stops the chip's events reaching the driver when dropped; returns once none is being
/// handled.
struct Receiving(Arc<dyn Chip>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.set_events(None);
    }
}

/// A Gaudi2 NIC the driver is bound to.
struct GaudiIb {
    // Dropped first: the InfiniBand device goes before the events stop reaching it.
    _ib: Devres<rdma::Registration<ib::GaudiRdma>>,
    // Then the chip's events stop; the network devices go with the receiver.
    _events: Receiving,
    /// The device's memory, revoked from importers at unbind.
    hbm: Arc<hbm::Hbm>,
}

impl GaudiIb {
    /// The chip's enabled ports, which must be ports 0 to n - 1 (n from 1 to [`nic::PORTS`]),
    /// and the device's limits.
    fn caps(pdev: &Device<Bound>, chip: &dyn Chip) -> Result<ib::Caps> {
        let mask = chip.port_mask();
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
        let caps = ib::Caps::new(ports, chip.model());
        dev_info!(
            pdev,
            "{} ports, {} QPs and {} CQs per port\n",
            caps.ports,
            caps.max_qps,
            caps.max_cqs
        );
        Ok(caps)
    }

    /// The device's memory, as the chip's owner gives it. Its last [`nic::NIC_HBM`] bytes hold
    /// the NIC's context tables; returns the rest, for users, and where the tables are for the
    /// NIC (0 without device memory).
    fn devmem(pdev: &Device<Bound>, chip: &dyn Chip) -> Result<(Arc<hbm::Hbm>, u64)> {
        let mem = chip.devmem();
        let usable = if mem.size != 0 && mem.size < 2 * nic::NIC_HBM {
            dev_err!(
                pdev,
                "device memory of {:#x} bytes cannot hold the NIC's context tables: not used\n",
                mem.size
            );
            0
        } else {
            mem.size
        };
        if usable == 0 {
            return Ok((hbm::Hbm::new(pdev, mem.start, 0)?, 0));
        }
        let users = usable - nic::NIC_HBM;
        dev_info!(
            pdev,
            "{} MiB of device memory, {} KiB of it for the NIC's context tables\n",
            usable >> 20,
            nic::NIC_HBM >> 10
        );
        Ok((
            hbm::Hbm::new(pdev, mem.start, users)?,
            nic::DRAM_PHYS_BASE + users,
        ))
    }
}

struct GaudiIbDriver;

kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiIbDriver as auxiliary::Driver>::IdInfo,
    [(auxiliary::DeviceId::new(c"gaudi_pci", c"cn"), ())]
);

impl auxiliary::Driver for GaudiIbDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiIb;

    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &AUX_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let chip = adev
            .registration_data::<CovariantForLt!(ChipDevice)>()?
            .chip()
            .clone();
        // The function: it logs, and does the DMA.
        let dev = adev.parent();
        // The chip starts from a reset: no context, queue or translation of an earlier
        // driver, and no fatal error (logged by the owner if it stays).
        chip.reset()?;
        let caps = GaudiIb::caps(dev, &*chip)?;
        let (hbm, nic_tables) = GaudiIb::devmem(dev, &*chip)?;
        let ports = (caps.ports as usize).min(nic::PORTS);
        let mut queues = KVec::with_capacity(ports, GFP_KERNEL)?;
        for port in 0..ports {
            queues.push(nic::PortQueues::new(dev, port)?, GFP_KERNEL)?;
        }
        let registered = Devres::new(adev.as_ref(), chip.clone())?;
        let shared = Arc::pin_init(
            try_pin_init!(Shared {
                chip: registered,
                dev: dev.into(),
                ports: caps.ports,
                fatal: Atomic::new(false),
                removed: Atomic::new(false),
                nic: queues,
                nic_tables,
                gateway <- kernel::new_mutex!(nic::Gateways::new()),
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
        if nic_tables != 0 {
            let regs = &*chip;
            for (port, q) in shared.nic.iter().enumerate() {
                q.enable(regs, nic_tables + port as u64 * nic::PORT_TABLES)?;
                q.rc_enable(regs, rc::wq_array_va(port), rc::LOG_SLOT_LINES)?;
            }
        }

        // The network devices are registered before the InfiniBand device, whose ports refer
        // to them, so that they are unregistered after it.
        let mut registrations = KVec::with_capacity(caps.ports as usize, GFP_KERNEL)?;
        for index in 0..caps.ports as usize {
            let opts = ethernet::Options {
                mac: chip.mac(index)?,
                max_mtu: eth::MAX_MTU,
                dev_port: index as u16,
                tx_ring: eth::RING_LEN,
                rx_ring: eth::RING_LEN,
            };
            let data = eth::Port::new(shared.clone(), index);
            let reg =
                ethernet::Registration::new_auxiliary(adev, &opts, data).inspect_err(|e| {
                    dev_err!(
                        dev,
                        "cannot register the network device of port {}: {:?}\n",
                        index + 1,
                        e
                    )
                })?;
            registrations.push(reg, GFP_KERNEL)?;
        }
        let events = Arc::new(
            Events {
                shared: shared.clone(),
                vectors: chip.vectors(),
                ib: SetOnce::new(),
                eth: SetOnce::new(),
            },
            GFP_KERNEL,
        )?;
        events.eth.populate(registrations);
        // From here on the chip's events reach the driver, until `receiving` is dropped.
        chip.set_events(Some(events.clone()));
        let receiving = Receiving(chip.clone());

        // Each InfiniBand port is attached to its network device: the core derives the port's
        // GIDs from the device's addresses and resolves address vectors through it.
        let netdevs = SetOnce::as_ref(&events.eth).ok_or(EINVAL)?;
        let mut regs = KVec::with_capacity(netdevs.len(), GFP_KERNEL)?;
        for reg in netdevs {
            regs.push(reg.access(adev.as_ref())?, GFP_KERNEL)?;
        }
        let mut ndevs = KVec::with_capacity(regs.len(), GFP_KERNEL)?;
        for reg in &regs {
            ndevs.push(reg.device().net_dev(), GFP_KERNEL)?;
        }
        // The node GUID (and system image GUID) is the EUI-64 of the first port's MAC address.
        let node_guid = ib::eui64(chip.mac(0)?);
        let ib = rdma::Registration::new_auxiliary(
            adev,
            &<LocalModule as kernel::ModuleMetadata>::THIS_MODULE,
            rdma::Options {
                ports: caps.ports,
                comp_vectors: 1,
                node_type: rdma::NodeType::Ca,
                netdevs: &ndevs,
                node_guid,
            },
            // The part is the Gaudi2 (PCI device 1da3:1020).
            ib::IbDev::new(shared.clone(), caps, 0x1020, node_guid, hbm.clone()),
        )
        .inspect_err(|e| dev_err!(dev, "cannot register the InfiniBand device: {:?}\n", e))?;
        drop(ndevs);
        drop(regs);
        {
            let reg = ib.access(adev.as_ref())?;
            let ibdev = reg.device();
            events.ib.populate(ibdev.handle());
            dev_info!(
                dev,
                "registered {} with {} ports\n",
                ibdev.name(),
                ibdev.port_count()
            );
        }
        if shared.is_fatal() {
            dev_err!(dev, "device fatal error during probe\n");
            return Err(EIO);
        }
        dev_info!(dev, "probe complete\n");

        Ok(GaudiIb {
            _ib: ib,
            _events: receiving,
            hbm,
        })
    }

    fn unbind<'bound>(_adev: &'bound auxiliary::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Importers of exported device memory cannot map it any more.
        this.hbm.revoke();
    }
}

kernel::module_auxiliary_driver! {
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
