// SPDX-License-Identifier: GPL-2.0

//! The NIC core's interface: what the core of a Gaudi2 NIC gives its RDMA driver.
//!
//! The NIC core binds the chip's `cn` auxiliary device ([`super::chip`]), programs what the
//! ports share (event queues, the CQ region, the QPC gateway, the kernel's doorbell FIFOs,
//! encapsulations, the send WQ arrays) and adds an auxiliary device named `ib` whose
//! registration data is a [`CnDevice`]: the core behind [`Cn`]. The RDMA driver binds it,
//! reaches the NIC only through [`Cn`], and receives what the ports' event queues say of its
//! QPs through the [`CnRdmaEvents`] it sets. Nothing it is given outlives its binding: the
//! core's auxiliary device goes before the core is unbound.

use crate::{
    device::Device,
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

    /// Port `port`'s network device, while it is registered. Its unregistration waits for the
    /// reference: the caller drops it before its unbind returns (the RDMA core keeps one of
    /// its own for each port it attaches).
    fn netdev(&self, port: usize) -> Option<ARef<NetDev>>;

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
/// Called in process context (the chip's interrupt threads); each may sleep. For one port,
/// calls come in the order the port's event queue had the events.
pub trait CnRdmaEvents: Send + Sync {
    /// CQ 1 of `port` has new entries.
    fn completions(&self, port: usize);

    /// QP `qpn` of `port` is in error with `syndrome`; returns whether it is a QP of the
    /// standard verbs (the core's log says which kind it was).
    fn qp_error(&self, port: usize, qpn: u32, syndrome: u32) -> bool;

    /// Events of `port` were lost (its event queue overran): look at the QPs' state again.
    fn recheck_errors(&self, port: usize);

    /// The link of `port` went up or down.
    fn link_changed(&self, port: usize, up: bool);

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
