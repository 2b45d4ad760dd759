// SPDX-License-Identifier: GPL-2.0

//! NIC core of Habana Labs Gaudi2 accelerators.
//!
//! The NIC is a block of the accelerator: whoever owns the chip (habanalabs on a host, the
//! driver of the emulated function under test) gives it to the core through the auxiliary
//! device `cn` ([`kernel::net::gaudi::chip`]). The core programs what the ports share (event
//! queues, the CQ region, the QP context tables and gateway, the kernel's doorbell FIFOs,
//! encapsulations) and each port's raw path, and adds two auxiliary devices: `en` for the
//! Ethernet driver, which reaches the NIC through [`CnEth`] and registers the ports' network
//! devices, and `ib` for the RDMA driver, which reaches it through [`Cn`] and is told of each
//! port's network device. See Documentation/infiniband/gaudi/design.rst, "Layering".

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::Devres,
    dma::Coherent,
    net::gaudi::{
        chip::{
            Chip,
            ChipDevice,
            ChipEvents,
            DevMem, //
        },
        cn::{
            Cn,
            CnDevice,
            CnEth,
            CnEthDevice,
            CnEthEvents,
            CnRdmaEvents,
            RAW_QPN, //
        },
        gaudi2::{
            Cqe,
            Field, //
        },
    },
    prelude::*,
    rdma::mmap::QueueMem,
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc, //
    },
    time::Delta,
    types::CovariantForLt,
    workqueue::OwnedQueue,
};

mod device;
mod nic;
mod raw;

use device::{
    Nic,
    Writer, //
};

/// Messages about faults that user space or a peer can cause by the thousand (a QP error, a
/// translation fault of a user's WQE) are logged at most `FLOOD_BURST` times per
/// `FLOOD_INTERVAL`; the device's counters say how many there were.
const FLOOD_INTERVAL: Delta = Delta::from_secs(60);
const FLOOD_BURST: u32 = 10;

/// What one scan of a port's event queue found for the Ethernet and RDMA drivers, who are told
/// after the scan (outside the registers' RCU section: telling them sleeps).
#[derive(Default)]
struct PortWork {
    /// CQ 0 has new entries: the raw path received frames.
    received: bool,
    /// Ring positions of the raw path's WQEs the NIC reported sent, in order.
    sent: [u32; 16],
    n_sent: usize,
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

/// The NIC core of a chip: its NIC, where the chip's owner sends the chip's events (the ports'
/// event queues, taken from the owner's interrupt thread as reporting their events may sleep,
/// and the fatal error), and what the Ethernet driver reaches through [`CnEth`] and the RDMA
/// driver through [`Cn`].
struct NicCore {
    nic: Arc<Nic>,
    /// Vectors the chip's interrupts come on: with one, it carries every port's event queue.
    vectors: usize,
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
                // The BAR guard is an RCU read-side section: rescheduling, and telling the
                // drivers what the scan found, happen outside it.
                let mut work = PortWork::default();
                let more = {
                    let Some(regs) = self.nic.chip.try_access() else {
                        return;
                    };
                    work.overrun = q.eq_overrun();
                    q.take_events(&*regs, |e| self.port_event(port, e, &mut work))
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
                    work.received = true;
                    work.completions = true;
                    work.lost_links = true;
                }
                self.port_work(port, &work);
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

    /// Act on what port `port`'s event queue said of its raw path, its link and its RC QPs
    /// (outside the BAR's RCU section: this sleeps).
    fn port_work(&self, port: usize, work: &PortWork) {
        if work.n_sent != 0 || work.received {
            self.nic.eth.call(|e| {
                for &index in &work.sent[..work.n_sent] {
                    e.transmitted(port, index);
                }
                if work.received {
                    e.received(port);
                }
            });
        }
        for &up in &work.links[..work.n_links] {
            self.link_changed(port, up);
        }
        if work.lost_links {
            let up = self.nic.chip().is_ok_and(|c| c.link_up(port));
            let was = self.nic.ports_state.lock().links & (1 << port) != 0;
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

    /// An entry of port `port`'s event queue: what concerns the drivers is noted in `work`.
    fn port_event(&self, port: usize, e: &nic::Eqe, work: &mut PortWork) {
        let dev = &self.nic.dev;
        let (ty, data1, data2) = (
            nic::eqe::TYPE.get(&e.0),
            nic::eqe::DATA1.get(&e.0) as u32,
            nic::eqe::DATA2.get(&e.0) as u32,
        );
        match ty {
            nic::EQE_RAW_TX_COMP => {
                // A completion takes back the WQEs before it too: beyond the room, the last
                // one stands for those it replaces.
                if work.n_sent == work.sent.len() {
                    work.n_sent -= 1;
                }
                work.sent[work.n_sent] = data2;
                work.n_sent += 1;
            }
            // The CQ number is bits 15:0.
            nic::EQE_COMP if data1 & 0xffff == nic::CQ_ETH as u32 => work.received = true,
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
    }

    /// Port index `port`'s link went up or down: the Ethernet driver sets the network
    /// device's carrier, from which the RDMA core derives the port's state.
    fn link_changed(&self, port: usize, up: bool) {
        dev_info!(
            self.nic.dev,
            "port {} link {}\n",
            port + 1,
            if up { "up" } else { "down" }
        );
        device::PortsState::set(&mut self.nic.ports_state.lock().links, port, up);
        self.nic.eth.call(|e| e.link_changed(port, up));
    }

    /// The device stopped (a fatal error, or it is gone): tell every consumer, from the core's
    /// queue; the RDMA driver removes its InfiniBand device, which disassociates the user
    /// contexts. The core stays bound; rebinding it resets the device.
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
        self.nic.queue_fatal();
    }
}

impl NicCore {
    /// `EINVAL` unless QP `qpn` of `port` is one the RDMA driver may use: a port the core
    /// drives, a context its tables hold, not the Ethernet port's QP.
    fn rdma_qp(&self, port: usize, qpn: u32) -> Result {
        if port >= self.nic.ports as usize || qpn == RAW_QPN || u64::from(qpn) >= nic::TABLE_QPS {
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
        let _attach = self.nic.attach.lock();
        let Some(events) = events else {
            self.nic.rdma.set_to(None);
            self.nic.rdma_reset();
            return;
        };
        self.nic.rdma.set_to(Some(events.clone()));
        // The ports the Ethernet driver registered before.
        for port in 0..self.nic.ports as usize {
            if let Some(n) = self.nic.eth.call(|e| e.netdev(port)).flatten() {
                events.netdev_changed(port, Some(&n));
            }
        }
    }
}

impl CnEth for NicCore {
    fn device(&self) -> &Device {
        &self.nic.dev
    }

    fn ports(&self) -> u32 {
        self.nic.ports
    }

    fn mac(&self, port: usize) -> Result<[u8; 6]> {
        self.nic.queues(port)?;
        self.nic.chip()?.mac(port)
    }

    fn link_up(&self, port: usize) -> bool {
        port < self.nic.ports as usize && self.nic.chip().is_ok_and(|c| c.link_up(port))
    }

    fn is_fatal(&self) -> bool {
        self.nic.is_fatal()
    }

    fn raw_open(
        &self,
        port: usize,
        wq: &Coherent<[u32]>,
        ring: &Coherent<[u8]>,
        mac: &[u8; 6],
        promisc: bool,
    ) -> Result {
        if self.nic.is_fatal() {
            return Err(EIO);
        }
        // Not an RCU-guarded access: the gateway sleeps.
        let regs = self.nic.chip()?;
        self.nic.raw_open(&*regs, port, wq, ring, mac, promisc)
    }

    fn raw_close(&self, port: usize) -> Result {
        let regs = self.nic.chip()?;
        self.nic.raw_close(&*regs, port)
    }

    fn raw_filter(&self, port: usize, mac: &[u8; 6], promisc: bool) -> Result {
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        self.nic.raw_filter(&**regs, port, mac, promisc)
    }

    fn raw_send(&self, port: usize, pi: u32) -> Result {
        if !self.nic.raw_is_open(port) {
            return Err(EINVAL);
        }
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        self.nic.ring_secured(&**regs, port, RAW_QPN, pi)
    }

    fn raw_completion(&self, port: usize, ci: u32) -> Result<Option<Cqe>> {
        self.nic
            .queues(port)?
            .cq_take(nic::CQ_ETH, kernel::net::gaudi::cn::RAW_LOG_RING, ci)
    }

    fn raw_pending(&self, port: usize, ci: u32) -> bool {
        self.nic.queues(port).is_ok_and(|q| {
            q.cq_ready(nic::CQ_ETH, kernel::net::gaudi::cn::RAW_LOG_RING, ci)
                .unwrap_or(false)
        })
    }

    fn raw_consumed(&self, port: usize, ci: u32) -> Result {
        let q = self.nic.queues(port)?;
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        q.cq_consumed(&**regs, nic::CQ_ETH, ci)
    }

    fn raw_arm(&self, port: usize, ci: u32) -> Result {
        let q = self.nic.queues(port)?;
        let regs = self.nic.chip.try_access().ok_or(ENODEV)?;
        q.cq_arm(&**regs, nic::CQ_ETH, ci)
    }

    fn set_eth_events(&self, events: Option<Arc<dyn CnEthEvents>>) {
        let _attach = self.nic.attach.lock();
        let Some(events) = events else {
            // The RDMA core drops its references to the network devices before they are
            // unregistered.
            for port in 0..self.nic.ports as usize {
                self.nic.rdma.call(|r| r.netdev_changed(port, None));
            }
            self.nic.eth.set_to(None);
            return;
        };
        self.nic.eth.set_to(Some(events.clone()));
        for port in 0..self.nic.ports as usize {
            if let Some(n) = events.netdev(port) {
                self.nic.rdma.call(|r| r.netdev_changed(port, Some(&n)));
            }
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

/// The core's queue, on which the drivers are told of a fatal error: dropping it returns once
/// they have been, and nothing is queued on it any more.
struct FatalQueue(Arc<Nic>);

impl FatalQueue {
    fn new(nic: Arc<Nic>) -> Result<Self> {
        let queue = Arc::new(OwnedQueue::new_ordered(c"gaudi_cn")?, GFP_KERNEL)?;
        *nic.fatal_queue.lock() = Some(queue);
        Ok(Self(nic))
    }
}

impl Drop for FatalQueue {
    fn drop(&mut self) {
        // The last reference: dropped here (out of the lock), which runs what is queued.
        let queue = self.0.fatal_queue.lock().take();
        drop(queue);
    }
}

/// A Gaudi2 NIC the core is bound to.
struct GaudiCn<'bound> {
    // Dropped first: the RDMA driver is unbound from its auxiliary device (dropping its
    // references to the network devices), then the Ethernet driver, before the events stop
    // reaching them.
    _ib: auxiliary::Registration<'bound, CovariantForLt!(CnDevice)>,
    _en: auxiliary::Registration<'bound, CovariantForLt!(CnEthDevice)>,
    // Then the chip's events stop, and the drivers have been told of a fatal error if there
    // was one.
    _events: Receiving,
    _fatal: FatalQueue,
    // Last: habanalabs' chip is not reached any more.
    _chip: ChipRevoker,
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

/// Whose `cn` auxiliary device the core binds: the chip's owner.
#[derive(Clone, Copy)]
enum Owner {
    /// The emulated function's driver (`gaudi_pci`): the chip is the device's registration
    /// data.
    Emulated,
    /// habanalabs, on a Gaudi2 host: the chip is its operations.
    #[cfg(CONFIG_GAUDI_CN_HABANALABS)]
    Habanalabs,
}

#[cfg(not(CONFIG_GAUDI_CN_HABANALABS))]
kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiCnDriver as auxiliary::Driver>::IdInfo,
    [(
        auxiliary::DeviceId::new(c"gaudi_pci", c"cn"),
        Owner::Emulated
    )]
);

#[cfg(CONFIG_GAUDI_CN_HABANALABS)]
kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiCnDriver as auxiliary::Driver>::IdInfo,
    [
        (
            auxiliary::DeviceId::new(c"gaudi_pci", c"cn"),
            Owner::Emulated
        ),
        (
            auxiliary::DeviceId::new(c"habanalabs", c"cn"),
            Owner::Habanalabs
        ),
    ]
);

/// What revokes the chip of habanalabs at unbind (the emulated function's needs nothing).
#[cfg(CONFIG_GAUDI_CN_HABANALABS)]
type ChipRevoker = Option<Devres<kernel::net::gaudi::habanalabs::Revoker>>;
#[cfg(not(CONFIG_GAUDI_CN_HABANALABS))]
type ChipRevoker = Option<core::convert::Infallible>;

impl GaudiCn<'_> {
    /// The chip of `adev`, whose owner is `owner`.
    fn chip(adev: &auxiliary::Device<Bound>, owner: Owner) -> Result<(Arc<dyn Chip>, ChipRevoker)> {
        match owner {
            Owner::Emulated => Ok((
                adev.registration_data::<CovariantForLt!(ChipDevice)>()?
                    .chip()
                    .clone(),
                None,
            )),
            #[cfg(CONFIG_GAUDI_CN_HABANALABS)]
            Owner::Habanalabs => {
                let (chip, revoker) = kernel::net::gaudi::habanalabs::HabanalabsChip::bind(adev)?;
                Ok((chip, Some(revoker)))
            }
        }
    }
}

impl auxiliary::Driver for GaudiCnDriver {
    type IdInfo = Owner;
    type Data<'bound> = GaudiCn<'bound>;

    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &AUX_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let (chip, revoker) = GaudiCn::chip(adev, *info)?;
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
        let links = (0..n)
            .filter(|&p| chip.link_up(p))
            .fold(0u32, |m, p| m | 1 << p);
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
                eth <- kernel::net::gaudi::Receiver::new(),
                attach <- kernel::new_mutex!(()),
                ports_state <- kernel::new_spinlock_irq!(device::PortsState {
                    raw_open: 0,
                    raw_promisc: 0,
                    links,
                }),
                fatal_work <- kernel::new_work!("gaudi_cn::Nic::fatal_work"),
                fatal_queue <- kernel::new_spinlock_irq!(None),
            }),
            GFP_KERNEL,
        )?;
        // Dropped after the chip's events stop, on every path out of here.
        let fatal = FatalQueue::new(nic.clone())?;

        if nic_tables != 0 {
            // Device memory keeps its contents across resets and drivers: the context tables
            // start with no valid context.
            nic.clear_devmem(0, users.size + nic::NIC_HBM)?;
            let regs = &*chip;
            for (port, q) in nic.queues.iter().enumerate() {
                q.enable(regs, nic_tables + port as u64 * nic::PORT_TABLES)?;
            }
        }

        let core = Arc::new(
            NicCore {
                nic: nic.clone(),
                vectors: chip.vectors(),
                users,
            },
            GFP_KERNEL,
        )?;
        // From here on the chip's events reach the core, until `receiving` is dropped.
        chip.set_events(Some(core.clone()));
        let receiving = Receiving(chip.clone());
        if nic.is_fatal() {
            dev_err!(dev, "device fatal error during probe\n");
            return Err(EIO);
        }

        // The Ethernet and RDMA drivers' devices, children of the function as the core's own
        // is.
        let en = auxiliary::Registration::new(
            dev,
            c"en",
            adev.id(),
            <LocalModule as kernel::ModuleMetadata>::NAME,
            CnEthDevice::new(core.clone()),
        )
        .inspect_err(|e| dev_err!(dev, "cannot add the Ethernet auxiliary device: {:?}\n", e))?;
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
            "{} ports; NIC core ready (gaudi_cn.en.{}, gaudi_cn.ib.{})\n",
            ports,
            adev.id(),
            adev.id()
        );

        Ok(GaudiCn {
            _ib: ib,
            _en: en,
            _events: receiving,
            _fatal: fatal,
            _chip: revoker,
        })
    }
}

kernel::module_auxiliary_driver! {
    type: GaudiCnDriver,
    name: "gaudi_cn",
    description: "Habana Labs Gaudi2 NIC core",
    license: "GPL v2",
}
