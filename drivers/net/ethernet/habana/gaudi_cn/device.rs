// SPDX-License-Identifier: GPL-2.0

//! The NIC as the core's probe, the interrupt threads, the Ethernet driver and the RDMA driver
//! share it: the chip, the ports' queues, QPC gateway, kernel doorbells and encapsulations.

use kernel::{
    device,
    devres::Devres,
    io::Io,
    net::gaudi::{
        chip::Chip,
        cn::{
            CnEthEvents,
            CnRdmaEvents, //
        },
        Receiver, //
    },
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        Mutex,
        SpinLockIrq, //
    },
    workqueue::{
        OwnedQueue,
        Work,
        WorkItem, //
    },
};

use crate::nic;

/// The chip, while the driver is bound to it.
pub(crate) type ChipRef = Arc<dyn Chip>;

/// The NIC of a chip the core is bound to.
#[pin_data(PinnedDrop)]
pub(crate) struct Nic {
    /// The chip's registers and services; revoked at unbind.
    pub(crate) chip: Devres<ChipRef>,
    pub(crate) dev: ARef<device::Device>,
    pub(crate) ports: u32,
    /// The device reported a fatal error: it executes nothing until reset.
    pub(crate) fatal: Atomic<bool>,
    /// The device is gone (its registers read all ones): set by the presence check.
    pub(crate) removed: Atomic<bool>,
    /// Each port's event queue and CQ region (device model 2.0).
    pub(crate) queues: KVec<nic::PortQueues>,
    /// Physical address (for the NIC) of the ports' context tables in device memory; 0 if the
    /// device has none.
    pub(crate) nic_tables: u64,
    /// Serialises the ports' QPC gateway operations, with what is known of their registers.
    #[pin]
    pub(crate) gateway: Mutex<nic::Gateways>,
    /// Serialises the doorbells of the ports' kernel FIFOs: a doorbell is two register
    /// writes, and Ethernet and the RC queue pairs ring the same FIFO.
    #[pin]
    pub(crate) secured_db: SpinLockIrq<()>,
    /// Each port's encapsulations: the source IPv4 address (big-endian as a number) and the
    /// QPs using it, 0 for a free one.
    #[pin]
    pub(crate) encaps: Mutex<KVec<[(u32, u32); ENCAPS]>>,
    /// Where the events of the RDMA driver's QPs go, while it is bound.
    #[pin]
    pub(crate) rdma: Receiver<dyn CnRdmaEvents>,
    /// Where the events of the raw paths and links go, while the Ethernet driver is bound.
    #[pin]
    pub(crate) eth: Receiver<dyn CnEthEvents>,
    /// Serialises the setting of the two receivers, so that the RDMA driver is told of each
    /// port's network device exactly as the Ethernet driver comes and goes.
    #[pin]
    pub(crate) attach: Mutex<()>,
    /// What the core knows of each port's raw path and link. Taken in any context.
    #[pin]
    pub(crate) ports_state: SpinLockIrq<PortsState>,
    /// Tells the Ethernet and RDMA drivers that the device stopped, from the core's queue:
    /// not from the chip's interrupt thread, as the RDMA driver's unregistration waits for its
    /// users.
    #[pin]
    pub(crate) fatal_work: Work<Nic>,
    /// The core's queue, while the core is bound (see `FatalQueue`).
    #[pin]
    pub(crate) fatal_queue: SpinLockIrq<Option<Arc<OwnedQueue>>>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Nic { self.fatal_work }
}

impl WorkItem for Nic {
    type Pointer = Arc<Nic>;

    fn run(this: Arc<Nic>) {
        // The RDMA driver reports the fatal error and unregisters its InfiniBand device
        // first: its users hear of it, not of the ports going down, which the RDMA core would
        // report when the carriers go. The interfaces stay, without carrier, until the core is
        // unbound.
        this.rdma.call(|r| r.fatal());
        this.eth.call(|e| e.fatal());
    }
}

/// What the core knows of the ports' raw paths and links (bit n: port n).
pub(crate) struct PortsState {
    /// The raw path is open.
    pub(crate) raw_open: u32,
    /// The raw filter passes every address.
    pub(crate) raw_promisc: u32,
    /// The link was last seen up.
    pub(crate) links: u32,
}

impl PortsState {
    /// Set or clear bit `port` of `bits`; returns whether it was set.
    pub(crate) fn set(bits: &mut u32, port: usize, on: bool) -> bool {
        let bit = 1u32 << port;
        let was = *bits & bit != 0;
        if on {
            *bits |= bit;
        } else {
            *bits &= !bit;
        }
        was
    }
}

/// Who writes a QP context: the RDMA driver's contexts are noted, so that the core can take
/// back what it leaves (see [`Nic::rdma_reset`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// The core itself, for the ports' raw paths (QP 0).
    Core,
    /// The RDMA driver.
    Rdma,
}

/// Encapsulations (source addresses) of a port.
pub(crate) const ENCAPS: usize = 8;

impl Nic {
    /// Replace the bits of QP `qpn`'s context on `port` that `mask` selects with those of
    /// `data`, through the port's gateway, for `writer`. Sleeps: `regs` must not be an
    /// RCU-guarded access. `ENODEV` once the device stopped (a fatal error): it holds no
    /// context any more, and what tears a QP down is done.
    #[expect(clippy::too_many_arguments)]
    pub(crate) fn gateway_write(
        &self,
        regs: &dyn Chip,
        writer: Writer,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) -> Result {
        if self.nic_tables == 0 || self.fatal.load(Relaxed) {
            return Err(ENODEV);
        }
        let mut gw = self.gateway.lock();
        if writer == Writer::Rdma {
            gw.note_rdma(false, port, qpn, requester, data, mask);
        }
        nic::gateway_write(regs, &mut gw, port, qpn, requester, data, mask)?;
        if writer == Writer::Rdma {
            gw.note_rdma(true, port, qpn, requester, data, mask);
        }
        Ok(())
    }

    /// The RDMA driver is gone: take back what it held on the NIC. Its teardown gives each
    /// back as it goes (draining a context before it writes zeros over it); what is left (a
    /// context a failed teardown left valid, a UMR block whose mapping outlived its unbind)
    /// would otherwise reach the next RDMA driver's address spaces. Contexts get zeros, then
    /// the UMR blocks' CQs stop; the first gateway operation that fails ends the writes (the
    /// next probe of the core resets the chip), the bookkeeping is done for every port.
    pub(crate) fn rdma_reset(&self) {
        let chip = self.chip().ok();
        // After a fatal error the device executes nothing until the core's next probe resets
        // it; without the chip the core is being unbound.
        let fatal = self.is_fatal();
        let mut regs = chip.as_deref().filter(|_| !fatal);
        for (port, q) in self.queues.iter().enumerate() {
            q.rc_reset();
            let left = self.gateway.lock().take_rdma(port);
            let mut zeroed = 0;
            for &(qpn, requester) in left.as_deref().unwrap_or_default() {
                let Some(r) = regs else {
                    break;
                };
                let words = if requester {
                    nic::REQ_QPC_WORDS
                } else {
                    nic::RES_QPC_WORDS
                };
                let zero = [0u64; nic::REQ_QPC_WORDS];
                let all = [u64::MAX; nic::REQ_QPC_WORDS];
                match self.gateway_write(
                    r,
                    Writer::Core,
                    port,
                    qpn,
                    requester,
                    &zero[..words],
                    &all[..words],
                ) {
                    Ok(()) => zeroed += 1,
                    Err(_) => regs = None,
                }
            }
            let blocks = q.user_blocks_reclaim(regs);
            let n = left.as_ref().map_or(0, |l| l.len());
            // After a fatal error no teardown could write a context: nothing to report.
            if !fatal && (n != 0 || blocks != 0 || left.is_err()) {
                dev_warn!(
                    self.dev,
                    "port {}: the RDMA driver left {} QP contexts ({} zeroed) and {} UMR blocks\n",
                    port + 1,
                    n,
                    zeroed,
                    blocks
                );
            }
        }
        for t in self.encaps.lock().iter_mut() {
            for e in t.iter_mut() {
                e.1 = 0;
            }
        }
    }

    /// Read `fields` of QP `qpn`'s context on `port` through the port's gateway into `out`
    /// (its other words are left as they are). Sleeps. `ENODEV` once the device stopped.
    pub(crate) fn gateway_read(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        fields: &[nic::Field],
        out: &mut [u64],
    ) -> Result {
        if self.nic_tables == 0 || self.fatal.load(Relaxed) {
            return Err(ENODEV);
        }
        let regs = &self.chip()?;
        nic::gateway_read(
            regs,
            &mut self.gateway.lock(),
            port,
            qpn,
            requester,
            fields,
            out,
        )
    }

    /// An encapsulation of `port` sending from `ip` (big-endian as a number), programmed if it
    /// is new: its index. `ENOSPC` if the port has as many addresses in use already.
    pub(crate) fn encap_get(&self, port: usize, ip: u32) -> Result<usize> {
        let mut e = self.encaps.lock();
        let t = e.get_mut(port).ok_or(EINVAL)?;
        if let Some(i) = t.iter().position(|&(a, n)| n != 0 && a == ip) {
            t[i].1 += 1;
            return Ok(i);
        }
        let i = t.iter().position(|&(_, n)| n == 0).ok_or(ENOSPC)?;
        let regs = self.chip.try_access().ok_or(ENODEV)?;
        regs.try_write(
            nic::PortArrayLoc::<nic::TXE0_SOURCE_IP_PORT0_0>::of(port, i).ok_or(EINVAL)?,
            nic::TXE0_SOURCE_IP_PORT0_0::from_raw(ip),
        )?;
        t[i] = (ip, 1);
        Ok(i)
    }

    /// A QP of `port` stopped using encapsulation `i`.
    pub(crate) fn encap_put(&self, port: usize, i: usize) {
        let mut e = self.encaps.lock();
        if let Some(t) = e.get_mut(port).and_then(|t| t.get_mut(i)) {
            t.1 = t.1.saturating_sub(1);
        }
    }

    /// Ring `port`'s kernel doorbell FIFO for QP `qpn`, whose producer index is now `pi`.
    /// `EAGAIN` if the FIFO is full (the NIC has not taken the doorbells before).
    pub(crate) fn ring_secured(&self, regs: &dyn Chip, port: usize, qpn: u32, pi: u32) -> Result {
        let q = self.queues.get(port).ok_or(ENODEV)?;
        let _g = self.secured_db.lock();
        if !q.fifo_room() {
            return Err(EAGAIN);
        }
        q.ring_secured(regs, qpn, pi)
    }

    /// The chip, `ENODEV` once the driver is unbound from it. (A reference, not the guard of
    /// the registration, so that the caller may sleep.)
    pub(crate) fn chip(&self) -> Result<ChipRef> {
        self.chip.try_access().map(|c| (*c).clone()).ok_or(ENODEV)
    }

    /// Port `port`'s queues, `EINVAL` for a port the core does not drive.
    pub(crate) fn queues(&self, port: usize) -> Result<&nic::PortQueues> {
        self.queues.get(port).ok_or(EINVAL)
    }

    pub(crate) fn is_fatal(&self) -> bool {
        self.fatal.load(Relaxed)
    }

    /// Have the drivers told, from the core's queue, that the device stopped.
    pub(crate) fn queue_fatal(self: &Arc<Self>) {
        let queue = self.fatal_queue.lock().clone();
        if let Some(q) = queue {
            // Already queued: it has not run yet, and will.
            let _ = q.enqueue(self.clone());
        }
    }

    /// Zero `len` bytes of device memory at `offset` (both multiples of 4 KiB), through the
    /// chip's scrub service: `EIO` once the device has failed, `ENODEV` once it is gone.
    pub(crate) fn clear_devmem(&self, offset: u64, len: u64) -> Result {
        if self.is_fatal() {
            return Err(EIO);
        }
        self.chip()?.scrub(offset, len)
    }
}

#[pinned_drop]
impl PinnedDrop for Nic {
    fn drop(self: Pin<&mut Self>) {
        // The fields, the event queue's memory among them, are dropped after this: stop the
        // device first. The last reference goes at unbind at the latest (from the driver data,
        // the network devices' data or the chip's event receiver, all dropped while the chip is
        // still ours; the RDMA driver's is revoked when the core's auxiliary device goes).
        // The register guard is an RCU read-side section: the chip is taken out of it, as
        // stopping it sleeps.
        let Some(chip) = self.chip.try_access().map(|c| (*c).clone()) else {
            return;
        };
        for q in &self.queues {
            q.disable(&chip);
        }
        // The device has stopped (no event write, no page walk) once this returns; until then
        // the memory it may reach must stay.
        // The owner logs a reset that fails.
        let _ = chip.reset();
    }
}
