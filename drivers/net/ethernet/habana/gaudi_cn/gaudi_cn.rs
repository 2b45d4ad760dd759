// SPDX-License-Identifier: GPL-2.0

//! NIC core of Habana Labs Gaudi2 accelerators.
//!
//! The NIC is a block of the accelerator: whoever owns the chip (habanalabs on a host, the
//! driver of the emulated function under test) gives it to the core through the auxiliary
//! device `cn` ([`kernel::net::gaudi::chip`]). The core programs what the ports share (event
//! queues, the CQ region, the QP context tables and gateway, the kernel's doorbell FIFOs,
//! encapsulations), registers each port's network device, and adds the auxiliary device `ib`
//! for the RDMA driver, which reaches the NIC through [`Cn`]. See
//! Documentation/infiniband/gaudi/design.rst, "Layering".

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::Devres,
    net::{
        ethernet::{
            self,
            NetDev, //
        },
        gaudi::{
            chip::{
                Chip,
                ChipDevice,
                ChipEvents,
                DevMem, //
            },
            cn::{
                Cn,
                CnDevice,
                CnRdmaEvents, //
            },
            gaudi2::{
                Cqe,
                Field, //
            },
        },
    },
    prelude::*,
    rdma::mmap::QueueMem,
    sync::{
        aref::ARef,
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

mod device;
mod eth;
mod nic;

use device::{
    Nic,
    Writer, //
};

/// The ports' network devices, each unregistered when the core is unbound or the last
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

/// The NIC core of a chip: its NIC, the ports' network devices, where the chip's owner sends
/// the chip's events (the ports' event queues, taken from the owner's interrupt thread as
/// reporting their events may sleep, and the fatal error), and what the RDMA driver reaches
/// through [`Cn`].
struct NicCore {
    nic: Arc<Nic>,
    /// Vectors the chip's interrupts come on: with one, it carries every port's event queue.
    vectors: usize,
    /// The ports' network devices.
    eth: Netdevs,
    /// Device memory for users: all but the NIC's context tables at its end.
    users: DevMem,
}

impl ChipEvents for NicCore {
    fn port_events(&self, vector: usize) {
        if !self.nic.is_fatal() {
            self.take_port_events(vector);
        }
    }

    fn fatal(&self, removed: bool) {
        if removed {
            self.nic.removed.store(true, Relaxed);
            self.fatal("device removed (its registers read all ones)");
        } else {
            self.fatal("device fatal error");
        }
    }
}

impl NicCore {
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
        for (port, q) in self.nic.queues.iter().enumerate() {
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
                    let Some(regs) = self.nic.chip.try_access() else {
                        return;
                    };
                    work.overrun = q.eq_overrun();
                    q.take_events(&*regs, |e| napi |= self.port_event(port, e, &mut work))
                };
                if work.overrun != 0 {
                    // What the lost events said is read back from the state they reported:
                    // the CQs are looked at and the link state read.
                    kernel::ratelimited!(dev_warn!(
                        self.nic.dev,
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
                            self.nic.dev,
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
            let up = self.nic.chip().is_ok_and(|c| c.link_up(port));
            let was = self
                .with_netdev(port as u32, |n| n.carrier_ok())
                .unwrap_or(up);
            if up != was {
                self.link_changed(port, up);
            }
        }
        if work.completions {
            self.nic.rdma.call(|r| r.completions(port));
        }
        if work.overrun != 0 {
            self.nic.rdma.call(|r| r.recheck_errors(port));
        }
        for &(qpn, syndrome) in &work.errors[..work.n_errors] {
            let ours = self
                .nic
                .rdma
                .call(|r| r.qp_error(port, qpn, syndrome))
                .unwrap_or(false);
            // Each kind with a budget of its own: a process flooding errors of its QP sets
            // does not hide those of the standard verbs' QPs, nor the reverse.
            if ours {
                kernel::ratelimited!(
                    FLOOD_INTERVAL,
                    FLOOD_BURST,
                    dev_info!(
                        self.nic.dev,
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
                        self.nic.dev,
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
                self.nic.dev,
                "port {}: {} QP errors in one scan not handled\n",
                port + 1,
                work.lost_errors
            ));
        }
    }

    /// An entry of port `port`'s event queue; returns whether the port's NAPI poll has work.
    /// What concerns the RC QPs is noted in `work`.
    fn port_event(&self, port: usize, e: &nic::Eqe, work: &mut RcWork) -> bool {
        let dev = &self.nic.dev;
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
    /// RDMA driver's port follow.
    fn link_changed(&self, port: usize, up: bool) {
        dev_info!(
            self.nic.dev,
            "port {} link {}\n",
            port + 1,
            if up { "up" } else { "down" }
        );
        self.with_netdev(port as u32, |n| {
            if up {
                n.carrier_on()
            } else {
                n.carrier_off()
            }
        });
        self.nic.rdma.call(|r| r.link_changed(port, up));
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

    /// The device stopped (a fatal error, or it is gone): tell every consumer; the RDMA
    /// driver removes its InfiniBand device, which disassociates the user contexts. The core
    /// stays bound; rebinding it resets the device.
    fn fatal(&self, why: &str) {
        if self.nic.fatal.xchg(true, Full) {
            return;
        }
        let what = if self.nic.rdma.is_set() {
            ": removing the InfiniBand device"
        } else {
            ""
        };
        if self.nic.removed.load(Relaxed) {
            dev_err!(self.nic.dev, "{}{}\n", why, what);
        } else {
            dev_err!(
                self.nic.dev,
                "{}{}; unbind and bind the PCI device to recover\n",
                why,
                what
            );
        }
        // The ports' interfaces stay, without carrier, until the core is unbound.
        for port in 0..self.nic.ports {
            self.with_netdev(port, |n| n.carrier_off());
        }
        self.nic.rdma.call(|r| r.fatal());
    }
}

impl NicCore {
    /// `EINVAL` unless QP `qpn` of `port` is one the RDMA driver may use: a port the core
    /// drives, a context its tables hold, not the Ethernet port's QP.
    fn rdma_qp(&self, port: usize, qpn: u32) -> Result {
        if port >= self.nic.ports as usize || qpn == eth::QPN || u64::from(qpn) >= nic::TABLE_QPS {
            return Err(EINVAL);
        }
        Ok(())
    }
}

impl Cn for NicCore {
    fn device(&self) -> &Device {
        &self.nic.dev
    }

    fn chip(&self) -> Result<Arc<dyn Chip>> {
        self.nic.chip()
    }

    fn ports(&self) -> u32 {
        self.nic.ports
    }

    fn is_fatal(&self) -> bool {
        self.nic.is_fatal()
    }

    fn devmem(&self) -> DevMem {
        self.users
    }

    fn clear_devmem(&self, offset: u64, len: u64) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.users.size {
            return Err(EINVAL);
        }
        self.nic.clear_devmem(offset, len)
    }

    fn netdev(&self, port: usize) -> Option<ARef<NetDev>> {
        let reg = SetOnce::as_ref(&self.eth)?.get(port)?.try_access()?;
        Some(reg.device().net_dev().into())
    }

    fn qpc_write(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) -> Result {
        self.rdma_qp(port, qpn)?;
        let regs = self.nic.chip()?;
        self.nic
            .gateway_write(&*regs, Writer::Rdma, port, qpn, requester, data, mask)
    }

    fn qpc_read(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        fields: &[Field],
        out: &mut [u64],
    ) -> Result {
        self.rdma_qp(port, qpn)?;
        self.nic.gateway_read(port, qpn, requester, fields, out)
    }

    fn encap_get(&self, port: usize, ip: u32) -> Result<usize> {
        self.nic.encap_get(port, ip)
    }

    fn encap_put(&self, port: usize, index: usize) {
        self.nic.encap_put(port, index)
    }

    fn ring_secured(&self, port: usize, qpn: u32, pi: u32) -> Result {
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        self.nic.ring_secured(&**regs, port, qpn, pi)
    }

    fn rc_enable(&self, port: usize, wq_va: u64, log_lines: u32) -> Result {
        if self.nic.nic_tables == 0 {
            return Err(ENODEV);
        }
        let regs = self.nic.chip()?;
        self.nic.queues(port)?.rc_enable(&*regs, wq_va, log_lines)
    }

    fn rc_reserve(&self, port: usize, n: u32) -> bool {
        self.nic.queues(port).is_ok_and(|q| q.rc_reserve(n))
    }

    fn rc_release(&self, port: usize, n: u32) {
        if let Ok(q) = self.nic.queues(port) {
            q.rc_release(n);
        }
    }

    fn rc_take(&self, port: usize, out: &mut [Cqe]) -> Result<usize> {
        let q = self.nic.queues(port)?;
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        q.rc_take(&**regs, out)
    }

    fn user_block(&self, port: usize, asid: u32, log_cq: u32) -> Result<(usize, QueueMem)> {
        let q = self.nic.queues(port)?;
        let regs = self.nic.chip()?;
        q.user_block(&*regs, asid, log_cq)
    }

    fn user_block_stop(&self, port: usize, block: usize) {
        if let (Ok(q), Some(regs)) = (self.nic.queues(port), self.nic.chip.try_access()) {
            q.user_block_stop(&**regs, block);
        }
    }

    fn user_block_put(&self, port: usize, block: usize) {
        if let Ok(q) = self.nic.queues(port) {
            q.user_block_put(block);
        }
    }

    fn umr_page(&self, port: usize, block: usize) -> Option<usize> {
        if port >= self.nic.ports as usize {
            return None;
        }
        nic::umr_page(port, block)
    }

    fn set_rdma_events(&self, events: Option<Arc<dyn CnRdmaEvents>>) {
        let cleared = events.is_none();
        self.nic.rdma.set_to(events);
        if cleared {
            self.nic.rdma_reset();
        }
    }
}

/// Stops the chip's events reaching the core when dropped; returns once none is being
/// handled.
struct Receiving(Arc<dyn Chip>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.set_events(None);
    }
}

/// A Gaudi2 NIC the core is bound to.
struct GaudiCn<'bound> {
    // Dropped first: the RDMA driver is unbound from its auxiliary device before the events
    // stop reaching it.
    _ib: auxiliary::Registration<'bound, CovariantForLt!(CnDevice)>,
    // Then the chip's events stop; the network devices go with the receiver.
    _events: Receiving,
}

impl GaudiCn<'_> {
    /// The chip's enabled ports, which must be ports 0 to n - 1 (n from 1 to [`nic::PORTS`]).
    fn ports(dev: &Device<Bound>, chip: &dyn Chip) -> Result<u32> {
        let mask = chip.port_mask();
        let ports = mask.count_ones();
        if mask == 0 || ports as usize > nic::PORTS || mask != (1u32 << ports) - 1 {
            dev_err!(
                dev,
                "enabled ports {:#x}: the driver takes ports 1 to n of at most {}\n",
                mask,
                nic::PORTS
            );
            return Err(EIO);
        }
        Ok(ports)
    }

    /// The device's memory, as the chip's owner gives it. Its last [`nic::NIC_HBM`] bytes hold
    /// the NIC's context tables; returns the rest, for users, and where the tables are for the
    /// NIC (0 without device memory).
    fn devmem(dev: &Device<Bound>, chip: &dyn Chip) -> (DevMem, u64) {
        let mem = chip.devmem();
        if mem.size == 0 {
            return (DevMem { size: 0, ..mem }, 0);
        }
        if mem.size < 2 * nic::NIC_HBM {
            dev_err!(
                dev,
                "device memory of {:#x} bytes cannot hold the NIC's context tables: not used\n",
                mem.size
            );
            return (DevMem { size: 0, ..mem }, 0);
        }
        let users = mem.size - nic::NIC_HBM;
        dev_info!(
            dev,
            "{} MiB of device memory, {} KiB of it for the NIC's context tables\n",
            mem.size >> 20,
            nic::NIC_HBM >> 10
        );
        (
            DevMem {
                start: mem.start,
                size: users,
            },
            nic::DRAM_PHYS_BASE + users,
        )
    }
}

struct GaudiCnDriver;

kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiCnDriver as auxiliary::Driver>::IdInfo,
    [(auxiliary::DeviceId::new(c"gaudi_pci", c"cn"), ())]
);

impl auxiliary::Driver for GaudiCnDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiCn<'bound>;

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
        let ports = GaudiCn::ports(dev, &*chip)?;
        let (users, nic_tables) = GaudiCn::devmem(dev, &*chip);
        let n = ports as usize;
        let mut queues = KVec::with_capacity(n, GFP_KERNEL)?;
        for port in 0..n {
            queues.push(nic::PortQueues::new(dev, port)?, GFP_KERNEL)?;
        }
        let registered = Devres::new(adev.as_ref(), chip.clone())?;
        let nic = Arc::pin_init(
            try_pin_init!(Nic {
                chip: registered,
                dev: dev.into(),
                ports,
                fatal: Atomic::new(false),
                removed: Atomic::new(false),
                queues,
                nic_tables,
                gateway <- kernel::new_mutex!(nic::Gateways::new(n)?),
                secured_db <- kernel::new_spinlock_irq!(()),
                encaps <- kernel::new_mutex!({
                    let mut t = KVec::with_capacity(n, GFP_KERNEL)?;
                    t.resize(n, [(0, 0); device::ENCAPS], GFP_KERNEL)?;
                    t
                }),
                rdma <- kernel::net::gaudi::Receiver::new(),
            }),
            GFP_KERNEL,
        )?;

        if nic_tables != 0 {
            // Device memory keeps its contents across resets and drivers: the context tables
            // start with no valid context.
            nic.clear_devmem(0, users.size + nic::NIC_HBM)?;
            let regs = &*chip;
            for (port, q) in nic.queues.iter().enumerate() {
                q.enable(regs, nic_tables + port as u64 * nic::PORT_TABLES)?;
            }
        }

        let mut registrations = KVec::with_capacity(n, GFP_KERNEL)?;
        for index in 0..n {
            let opts = ethernet::Options {
                mac: chip.mac(index)?,
                max_mtu: eth::MAX_MTU,
                dev_port: index as u16,
                tx_ring: eth::RING_LEN,
                rx_ring: eth::RING_LEN,
            };
            let data = eth::Port::new(nic.clone(), index);
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
        let core = Arc::new(
            NicCore {
                nic: nic.clone(),
                vectors: chip.vectors(),
                eth: SetOnce::new(),
                users,
            },
            GFP_KERNEL,
        )?;
        core.eth.populate(registrations);
        // From here on the chip's events reach the core, until `receiving` is dropped.
        chip.set_events(Some(core.clone()));
        let receiving = Receiving(chip.clone());
        if nic.is_fatal() {
            dev_err!(dev, "device fatal error during probe\n");
            return Err(EIO);
        }

        // The RDMA driver's device, a child of the function as the core's own is.
        let ib = auxiliary::Registration::new(
            dev,
            c"ib",
            adev.id(),
            <LocalModule as kernel::ModuleMetadata>::NAME,
            CnDevice::new(core),
        )
        .inspect_err(|e| dev_err!(dev, "cannot add the RDMA auxiliary device: {:?}\n", e))?;
        dev_info!(
            dev,
            "{} ports; NIC core ready (gaudi_cn.ib.{})\n",
            ports,
            adev.id()
        );

        Ok(GaudiCn {
            _ib: ib,
            _events: receiving,
        })
    }
}

kernel::module_auxiliary_driver! {
    type: GaudiCnDriver,
    name: "gaudi_cn",
    description: "Habana Labs Gaudi2 NIC core",
    license: "GPL v2",
}
