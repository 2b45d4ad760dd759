// SPDX-License-Identifier: GPL-2.0

//! The NIC core's interface: what the core of a Gaudi2 NIC gives its Ethernet and RDMA
//! drivers.
//!
//! The NIC core binds the chip's `cn` auxiliary device ([`super::chip`]), programs what the
//! ports share (event queues, the CQ region, the QPC gateway, the kernel's doorbell FIFOs,
//! encapsulations, the send WQ arrays) and adds two auxiliary devices: `en`, whose registration
//! data is a [`CnEthDevice`] (the core behind [`CnEth`]), and `ib`, whose registration data is
//! a [`CnDevice`] (the core behind [`Cn`]). The Ethernet driver binds the first, registers a
//! network device for each port over the port's raw path and receives the raw path's and the
//! link's events through the [`CnEthEvents`] it sets; the RDMA driver binds the second and
//! receives what the ports' event queues say of its QPs, and which network device each port
//! has, through the [`CnRdmaEvents`] it sets. Nothing either is given outlives its binding:
//! the core's auxiliary devices go before the core is unbound.

use crate::{
    device::Device,
    dma::Coherent,
    net::{
        ethernet::NetDev,
        gaudi::{
            chip::{
                Chip,
                DevMem, //
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
        Arc, //
    },
};

/// The NIC core, as its RDMA driver reaches it.
///
/// Ports are indexes from 0 to [`Cn::ports`] - 1; a method given another returns `EINVAL` (or
/// does nothing). QP 0 of each port is the core's (Ethernet's): the context methods refuse it,
/// and QP numbers beyond the context tables ([`super::gaudi2::TABLE_QPS`]), with `EINVAL`.
/// The driver calls no method after its receiver is cleared ([`Cn::set_rdma_events`]): the
/// core takes back then what is left, and a later call would hold something again. Once the device stopped (a fatal error, or it is gone), the methods that
/// would reach it return `ENODEV`: it holds no context any more, and what tears a QP down is
/// done. Every method may sleep unless it says otherwise.
pub trait Cn: Send + Sync {
    /// The function the NIC is part of: it logs and does the DMA.
    fn device(&self) -> &Device;

    /// The chip, for its device MMU and port facts; `ENODEV` once the core is unbound from it.
    fn chip(&self) -> Result<Arc<dyn Chip>>;

    /// The ports the core drives.
    fn ports(&self) -> u32;

    /// The device reported a fatal error or is gone: it executes nothing until reset.
    fn is_fatal(&self) -> bool;

    /// Device memory for users (the core keeps the rest, for the NIC's context tables).
    fn devmem(&self) -> DevMem;

    /// Zero `len` bytes of device memory at `offset` (both multiples of 4 KiB): `EIO` once
    /// the device has failed, `ENODEV` once it is gone.
    fn clear_devmem(&self, offset: u64, len: u64) -> Result;

    /// Replace the bits of QP `qpn`'s requester (or responder) context on `port` that `mask`
    /// selects with those of `data`, through the port's gateway.
    fn qpc_write(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) -> Result;

    /// Read `fields` of QP `qpn`'s context on `port` into `out` (its other words are left as
    /// they are).
    fn qpc_read(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        fields: &[Field],
        out: &mut [u64],
    ) -> Result;

    /// An encapsulation of `port` sending from `ip` (big-endian as a number), programmed if it
    /// is new: its index. `ENOSPC` if the port has as many addresses in use already.
    fn encap_get(&self, port: usize, ip: u32) -> Result<usize>;

    /// A QP of `port` stopped using encapsulation `index`.
    fn encap_put(&self, port: usize, index: usize);

    /// Ring `port`'s kernel doorbell FIFO for QP `qpn`, whose producer index is now `pi`.
    /// `EAGAIN` if the FIFO is full. Does not sleep.
    fn ring_secured(&self, port: usize, qpn: u32, pi: u32) -> Result;

    /// Program what the kernel's RC QPs of `port` use: send WQ array 1 at device VA `wq_va` in
    /// each QP's ASID with slots of `2^log_lines` 128-byte lines, the port's retry limits, and
    /// CQ 1, emptied and armed.
    fn rc_enable(&self, port: usize, wq_va: u64, log_lines: u32) -> Result;

    /// Count `n` more send WQ entries of RC QPs of `port` against CQ 1; false if it cannot
    /// hold them. Does not sleep.
    fn rc_reserve(&self, port: usize, n: u32) -> bool;

    /// Give back `n` entries counted by [`Cn::rc_reserve`]. Does not sleep.
    fn rc_release(&self, port: usize, n: u32);

    /// Take up to `out.len()` of CQ 1's new entries of `port`, arming it again when fewer were
    /// there. Called only from [`CnRdmaEvents::completions`] of the port.
    fn rc_take(&self, port: usize, out: &mut [Cqe]) -> Result<usize>;

    /// Take a free UMR block of `port` for the QPs of ASID `asid`, with its CQ of `2^log_cq`
    /// entries enabled and zeroed: the block and the memory of the CQ's entries. `ENOSPC` if
    /// every block is taken.
    fn user_block(&self, port: usize, asid: u32, log_cq: u32) -> Result<(usize, QueueMem)>;

    /// Stop the CQ of UMR block `block` of `port` (the NIC writes no more of its entries).
    fn user_block_stop(&self, port: usize, block: usize);

    /// UMR block `block` of `port` is free again: nothing maps its page or its CQ any more.
    fn user_block_put(&self, port: usize, block: usize);

    /// The offset in BAR 0 of the function of UMR block `block` of `port`, the page its owner
    /// maps.
    fn umr_page(&self, port: usize, block: usize) -> Option<usize>;

    /// Send what the ports' event queues say of the RDMA driver's QPs to `events` from now on.
    /// With `None`, to nobody; it returns once no call to the previous receiver runs any more
    /// and the core holds no reference to it, and the core takes back what the RDMA driver
    /// still held on the NIC (valid QP contexts, UMR blocks, encapsulations, CQ 1
    /// reservations), so that the next RDMA driver starts from nothing. Called at the RDMA
    /// driver's probe and unbind, never from a receiver's call.
    fn set_rdma_events(&self, events: Option<Arc<dyn CnRdmaEvents>>);
}

/// Where the NIC core sends the events of the RDMA driver: implemented by the RDMA driver.
///
/// Called in process context (the chip's interrupt threads; [`CnRdmaEvents::fatal`] from a
/// work item of the core, [`CnRdmaEvents::netdev_changed`] from the Ethernet or the RDMA
/// driver's probe or unbind); each may sleep. For one port, calls come in the order the port's
/// event queue had the events.
pub trait CnRdmaEvents: Send + Sync {
    /// CQ 1 of `port` has new entries.
    fn completions(&self, port: usize);

    /// QP `qpn` of `port` is in error with `syndrome`; returns whether it is a QP of the
    /// standard verbs (the core's log says which kind it was).
    fn qp_error(&self, port: usize, qpn: u32, syndrome: u32) -> bool;

    /// Events of `port` were lost (its event queue overran): look at the QPs' state again.
    fn recheck_errors(&self, port: usize);

    /// Port `port` has network device `netdev` from now on (`None`: none). Attach it to the
    /// port: the RDMA core derives the port's state and GIDs from it. With `None` the RDMA
    /// driver drops every reference it holds to the port's previous device before it returns:
    /// the device is unregistered next, which waits for them. Called when the Ethernet driver
    /// binds or unbinds, and for every port that has a device when the receiver is set.
    fn netdev_changed(&self, port: usize, netdev: Option<&NetDev>);

    /// The device stopped (a fatal error, or it is gone). Called once.
    fn fatal(&self);
}

/// The registration data of the core's `ib` auxiliary device: the core.
pub struct CnDevice {
    cn: Arc<dyn Cn>,
}

impl CnDevice {
    /// The registration data giving `cn`.
    pub fn new(cn: Arc<dyn Cn>) -> Self {
        Self { cn }
    }

    /// The core.
    pub fn cn(&self) -> &Arc<dyn Cn> {
        &self.cn
    }
}

/// log2 of the WQEs of QP 0's send queue of each port, and of the elements of its receive ring:
/// the raw path's geometry, which the core programs.
pub const RAW_LOG_RING: u32 = 5;

/// log2 of the bytes of each element of a port's receive ring.
pub const RAW_LOG_ELEM: u32 = 14;

/// The largest frame the raw path sends or takes (without FCS): one of the largest MTU, with
/// its Ethernet header and a VLAN tag (device model 2.0, "What the model decides").
pub const RAW_MAX_FRAME: usize = 9018;

/// Each port's Ethernet QP, the core's: the RDMA driver's QPs are the others.
pub const RAW_QPN: u32 = 0;

/// The NIC core, as its Ethernet driver reaches it: each port's raw path (QP 0, send WQ array
/// 0, the kernel's doorbell FIFO, the receive ring with its completions on CQ 0, the MAC
/// filter).
///
/// Ports are indexes from 0 to [`CnEth::ports`] - 1; a method given another returns `EINVAL`.
/// The queues are the Ethernet driver's coherent memory of [`CnEth::device`]: a send queue of
/// `2^RAW_LOG_RING` [`super::gaudi2::SqWqe`] and a ring of as many elements of
/// `2^RAW_LOG_ELEM` bytes, which the NIC reaches by bus address with the MMU bypassed. The
/// driver keeps them while the port's raw path is open (from [`CnEth::raw_open`] to
/// [`CnEth::raw_close`]). Once the device stopped the methods that would reach it return
/// `ENODEV` (or `EIO`). Every method may sleep unless it says otherwise.
pub trait CnEth: Send + Sync {
    /// The function the NIC is part of: it logs and does the DMA.
    fn device(&self) -> &Device;

    /// The ports the core drives.
    fn ports(&self) -> u32;

    /// Port `port`'s MAC address, as the chip's owner gives it.
    fn mac(&self, port: usize) -> Result<[u8; 6]>;

    /// Whether port `port`'s link is up.
    fn link_up(&self, port: usize) -> bool;

    /// The device reported a fatal error or is gone: it executes nothing until reset.
    fn is_fatal(&self) -> bool;

    /// Open port `port`'s raw path on `wq` and `ring`: QP 0's contexts, its send queue from
    /// WQE 0, the receive ring and CQ 0 from element 0, the MAC filter (`mac`, or every
    /// address with `promisc`); CQ 0 is armed. `EINVAL` if a queue is shorter than the
    /// geometry, `EBUSY` if the path is open already.
    fn raw_open(
        &self,
        port: usize,
        wq: &Coherent<[u32]>,
        ring: &Coherent<[u8]>,
        mac: &[u8; 6],
        promisc: bool,
    ) -> Result;

    /// Close port `port`'s raw path: no frame is received or sent any more, and the NIC has
    /// taken every doorbell. The queues are the driver's again (also after an error).
    fn raw_close(&self, port: usize) -> Result;

    /// Set port `port`'s MAC filter while its raw path is open. Does not sleep.
    fn raw_filter(&self, port: usize, mac: &[u8; 6], promisc: bool) -> Result;

    /// Ring port `port`'s kernel doorbell FIFO for QP 0, whose producer index is now `pi`
    /// (the WQEs before it are written). `EAGAIN` if the FIFO is full. Does not sleep.
    fn raw_send(&self, port: usize, pi: u32) -> Result;

    /// Take CQ 0's entry `ci` of port `port` (free running), if the NIC wrote it (it is then
    /// cleared for the ring's next pass). Does not sleep.
    fn raw_completion(&self, port: usize, ci: u32) -> Result<Option<Cqe>>;

    /// Whether the NIC wrote CQ 0's entry `ci` of port `port` (which stays). Does not sleep.
    fn raw_pending(&self, port: usize, ci: u32) -> bool;

    /// The entries of port `port`'s CQ 0 before `ci` are taken: the NIC may write them again.
    /// Does not sleep.
    fn raw_consumed(&self, port: usize, ci: u32) -> Result;

    /// Arm port `port`'s CQ 0 at `ci`: an event comes for its next entry. Does not sleep.
    fn raw_arm(&self, port: usize, ci: u32) -> Result;

    /// Send the events of the ports' raw paths and links to `events` from now on; with
    /// `None`, to nobody. Setting it attaches each port's network device to the RDMA driver
    /// ([`CnEthEvents::netdev`]); clearing it detaches them first, and returns once no call to
    /// the previous receiver runs any more and the core holds no reference to it. Called at
    /// the Ethernet driver's probe and unbind, never from a receiver's call.
    fn set_eth_events(&self, events: Option<Arc<dyn CnEthEvents>>);
}

/// Where the NIC core sends the events of the ports' raw paths and links: implemented by the
/// Ethernet driver.
///
/// Called in process context (the chip's interrupt threads; [`CnEthEvents::fatal`] from a work
/// item of the core); each may sleep. For one port, calls come in the order the port's event
/// queue had the events.
pub trait CnEthEvents: Send + Sync {
    /// The NIC sent port `port`'s WQE at ring position `index` (and those before it).
    fn transmitted(&self, port: usize, index: u32);

    /// Port `port`'s CQ 0 has new entries (or may have: events were lost).
    fn received(&self, port: usize);

    /// The link of `port` went up or down.
    fn link_changed(&self, port: usize, up: bool);

    /// Port `port`'s network device, while it is registered.
    fn netdev(&self, port: usize) -> Option<ARef<NetDev>>;

    /// The device stopped (a fatal error, or it is gone). Called once.
    fn fatal(&self);
}

/// The registration data of the core's `en` auxiliary device: the core.
pub struct CnEthDevice {
    cn: Arc<dyn CnEth>,
}

impl CnEthDevice {
    /// The registration data giving `cn`.
    pub fn new(cn: Arc<dyn CnEth>) -> Self {
        Self { cn }
    }

    /// The core.
    pub fn cn(&self) -> &Arc<dyn CnEth> {
        &self.cn
    }
}
