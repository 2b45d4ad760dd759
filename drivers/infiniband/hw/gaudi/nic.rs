// SPDX-License-Identifier: GPL-2.0

//! The NIC, as the RDMA driver reaches it: through the NIC core, held in a revocable
//! registration of the driver's auxiliary device, so that nothing of the driver reaches the
//! core after its unbind.

use kernel::{
    device,
    devres::Devres,
    net::gaudi::{
        chip::{
            Chip,
            DevMem, //
        },
        cn::Cn,
    },
    prelude::*,
    rdma::mmap::QueueMem,
    sync::{
        aref::ARef,
        Arc, //
    },
};

use kernel::net::gaudi::gaudi2;

/// The NIC core, while the driver is bound to it, with what the driver keeps of it.
pub(crate) struct Nic {
    /// The core's operations; revoked at unbind.
    cn: Devres<Arc<dyn Cn>>,
    /// The function: it logs and does the DMA.
    pub(crate) dev: ARef<device::Device>,
    /// The ports the core drives.
    pub(crate) ports: u32,
}

impl Nic {
    /// The core `cn`, held until `adev` is unbound.
    pub(crate) fn new(adev: &device::Device<device::Bound>, cn: Arc<dyn Cn>) -> Result<Self> {
        let dev = cn.device().into();
        let ports = cn.ports();
        Ok(Self {
            cn: Devres::new(adev, cn)?,
            dev,
            ports,
        })
    }

    /// The core, `ENODEV` once the driver is unbound from it. (A reference, not the guard of
    /// the registration, so that the caller may sleep.)
    pub(crate) fn cn(&self) -> Result<Arc<dyn Cn>> {
        self.cn.try_access().map(|c| (*c).clone()).ok_or(ENODEV)
    }

    /// The chip, `ENODEV` once the driver is unbound from the core.
    pub(crate) fn chip(&self) -> Result<Arc<dyn Chip>> {
        self.cn()?.chip()
    }

    /// The device stopped, or the driver is unbound from the core.
    pub(crate) fn is_fatal(&self) -> bool {
        self.cn.try_access().is_none_or(|c| c.is_fatal())
    }

    /// Device memory for users.
    pub(crate) fn devmem(&self) -> DevMem {
        self.cn.try_access().map(|c| c.devmem()).unwrap_or_default()
    }

    /// Replace the bits of QP `qpn`'s context on `port` that `mask` selects with those of
    /// `data`. Sleeps. `ENODEV` once the device stopped: it holds no context any more, and
    /// what tears a QP down is done.
    pub(crate) fn gateway_write(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) -> Result {
        self.cn()?.qpc_write(port, qpn, requester, data, mask)
    }

    /// Read `fields` of QP `qpn`'s context on `port` into `out` (its other words are left as
    /// they are). Sleeps. `ENODEV` once the device stopped.
    pub(crate) fn gateway_read(
        &self,
        port: usize,
        qpn: u32,
        requester: bool,
        fields: &[gaudi2::Field],
        out: &mut [u64],
    ) -> Result {
        self.cn()?.qpc_read(port, qpn, requester, fields, out)
    }

    /// An encapsulation of `port` sending from `ip` (big-endian as a number): its index.
    pub(crate) fn encap_get(&self, port: usize, ip: u32) -> Result<usize> {
        self.cn()?.encap_get(port, ip)
    }

    /// A QP of `port` stopped using encapsulation `i`.
    pub(crate) fn encap_put(&self, port: usize, i: usize) {
        if let Ok(cn) = self.cn() {
            cn.encap_put(port, i);
        }
    }

    /// Ring `port`'s kernel doorbell FIFO for QP `qpn`, whose producer index is now `pi`.
    /// `EAGAIN` if the FIFO is full. Does not sleep.
    pub(crate) fn ring_secured(&self, port: usize, qpn: u32, pi: u32) -> Result {
        self.cn
            .try_access()
            .ok_or(ENODEV)?
            .ring_secured(port, qpn, pi)
    }

    /// Count `n` more send WQ entries of RC QPs of `port` against its CQ 1.
    pub(crate) fn rc_reserve(&self, port: usize, n: u32) -> bool {
        self.cn.try_access().is_some_and(|c| c.rc_reserve(port, n))
    }

    /// Give back `n` entries counted by [`Self::rc_reserve`].
    pub(crate) fn rc_release(&self, port: usize, n: u32) {
        if let Some(c) = self.cn.try_access() {
            c.rc_release(port, n);
        }
    }

    /// Take up to `out.len()` of the new entries of CQ 1 of `port`.
    pub(crate) fn rc_take(&self, port: usize, out: &mut [gaudi2::Cqe]) -> Result<usize> {
        self.cn()?.rc_take(port, out)
    }

    /// A free UMR block of `port` for ASID `asid`, with a CQ of `2^log_cq` entries.
    pub(crate) fn user_block(
        &self,
        port: usize,
        asid: u32,
        log_cq: u32,
    ) -> Result<(usize, QueueMem)> {
        self.cn()?.user_block(port, asid, log_cq)
    }

    /// Stop the CQ of UMR block `block` of `port`.
    pub(crate) fn user_block_stop(&self, port: usize, block: usize) {
        if let Ok(cn) = self.cn() {
            cn.user_block_stop(port, block);
        }
    }

    /// UMR block `block` of `port` is free again.
    pub(crate) fn user_block_put(&self, port: usize, block: usize) {
        if let Ok(cn) = self.cn() {
            cn.user_block_put(port, block);
        }
    }

    /// The offset in BAR 0 of UMR block `block` of `port`.
    pub(crate) fn umr_page(&self, port: usize, block: usize) -> Option<usize> {
        self.cn.try_access()?.umr_page(port, block)
    }

    /// Zero `len` bytes of device memory at `offset`.
    pub(crate) fn clear_devmem(&self, offset: u64, len: u64) -> Result {
        self.cn()?.clear_devmem(offset, len)
    }
}
