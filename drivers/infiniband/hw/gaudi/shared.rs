// SPDX-License-Identifier: GPL-2.0

//! The device as probe, the interrupt handlers and the verbs share it: its BAR, the NIC's port
//! queues, QPC gateway, kernel doorbells and encapsulations.

use kernel::{
    device::{
        self,
        Bound, //
    },
    io::{
        poll::read_poll_timeout,
        Io, //
    },
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Mutex,
        SpinLockIrq, //
    },
    time::Delta,
};

use crate::{
    chip::{
        self,
        RESET_TIMEOUT, //
    },
    nic, //
};

/// Size of BAR0: SRAM and the chip's configuration space (from 64 MiB); the emulated function
/// has its chip services at 1 MiB.
pub(crate) const BAR0_SIZE: usize = 0x1000_0000;

pub(crate) type Bar0 = pci::DevresBar<BAR0_SIZE>;
pub(crate) type Bar<'a> = pci::Bar<'a, BAR0_SIZE>;

/// State shared between process context, the interrupt handlers and the InfiniBand device.
#[pin_data(PinnedDrop)]
pub(crate) struct Shared {
    pub(crate) bar: Bar0,
    pub(crate) dev: ARef<device::Device>,
    pub(crate) ports: u32,
    /// The device reported a fatal error: it executes nothing until reset.
    pub(crate) fatal: Atomic<bool>,
    /// The device is gone (its registers read all ones): set by the presence check.
    pub(crate) removed: Atomic<bool>,
    /// Each port's event queue and CQ region (device model 2.0).
    pub(crate) nic: KVec<nic::PortQueues>,
    /// Physical address (for the NIC) of the ports' context tables in device memory; 0 if the
    /// device has none.
    pub(crate) nic_tables: u64,
    /// Serialises the ports' QPC gateway operations, with what is known of their registers.
    #[pin]
    pub(crate) gateway: Mutex<nic::Gateways>,
    /// The ASIDs protection domains hold.
    #[pin]
    pub(crate) asids: Mutex<chip::Asids>,
    /// Serialises the doorbells of the ports' kernel FIFOs: a doorbell is two register
    /// writes, and Ethernet and the RC queue pairs ring the same FIFO.
    #[pin]
    pub(crate) secured_db: SpinLockIrq<()>,
    /// Each port's encapsulations: the source IPv4 address (big-endian as a number) and the
    /// QPs using it, 0 for a free one.
    #[pin]
    pub(crate) encaps: Mutex<KVec<[(u32, u32); ENCAPS]>>,
}

/// Encapsulations (source addresses) of a port.
pub(crate) const ENCAPS: usize = 8;

impl Shared {
    /// Replace the bits of QP `qpn`'s context on `port` that `mask` selects with those of
    /// `data`, through the port's gateway. Sleeps: `bar` must not be an RCU-guarded access.
    /// `ENODEV` once the device stopped (a fatal error): it holds no context any more, and
    /// what tears a QP down is done.
    pub(crate) fn gateway_write(
        &self,
        bar: &Bar<'_>,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) -> Result {
        if self.nic_tables == 0 || self.fatal.load(Relaxed) {
            return Err(ENODEV);
        }
        nic::gateway_write(
            bar,
            &mut self.gateway.lock(),
            port,
            qpn,
            requester,
            data,
            mask,
        )
    }

    /// Read `fields` of QP `qpn`'s context on `port` through the port's gateway into `out`
    /// (its other words are left as they are). Sleeps. `ENODEV` once the device stopped.
    pub(crate) fn gateway_read(
        &self,
        dev: &device::Device<Bound>,
        port: usize,
        qpn: u32,
        requester: bool,
        fields: &[nic::Field],
        out: &mut [u64],
    ) -> Result {
        if self.nic_tables == 0 || self.fatal.load(Relaxed) {
            return Err(ENODEV);
        }
        let bar = self.bar.access(dev)?;
        nic::gateway_read(
            bar,
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
        let bar = self.bar.try_access().ok_or(ENODEV)?;
        bar.try_write(
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
    pub(crate) fn ring_secured(&self, bar: &Bar<'_>, port: usize, qpn: u32, pi: u32) -> Result {
        let q = self.nic.get(port).ok_or(ENODEV)?;
        let _g = self.secured_db.lock();
        if !q.fifo_room() {
            return Err(EAGAIN);
        }
        q.ring_secured(bar, qpn, pi)
    }

    pub(crate) fn is_fatal(&self) -> bool {
        self.fatal.load(Relaxed)
    }

    /// Zero `len` bytes of device memory at `offset` (both multiples of 4 KiB), through the
    /// chip's scrub service: `EIO` once the device has failed, `ENODEV` once it is gone.
    pub(crate) fn clear_devmem(
        &self,
        dev: &device::Device<Bound>,
        offset: u64,
        len: u64,
    ) -> Result {
        if self.is_fatal() {
            return Err(EIO);
        }
        chip::scrub(self.bar.access(dev)?, offset, len)
    }
}

#[pinned_drop]
impl PinnedDrop for Shared {
    fn drop(self: Pin<&mut Self>) {
        // The fields, the event queue's memory among them, are dropped after this: stop the
        // device first. The last reference goes at unbind at the latest (from the driver data,
        // the InfiniBand device's data or the interrupt handlers, all dropped while the BAR is
        // still mapped and bus mastering on).
        {
            let Some(bar) = self.bar.try_access() else {
                return;
            };
            for q in &self.nic {
                q.disable(&bar);
            }
            chip::start_reset(&bar);
        }
        // The device has stopped (no event write, no page walk) only once the reset has
        // finished; until then the memory it may reach must stay. The BAR guard is an RCU
        // read-side section: take it for each read only, and sleep outside it.
        if read_poll_timeout(
            || {
                self.bar
                    .try_access()
                    .map(|bar| chip::status(&bar))
                    .ok_or(ENODEV)
            },
            |s| s.ready(),
            Delta::from_millis(1),
            RESET_TIMEOUT,
        )
        .is_err()
        {
            dev_err!(
                self.dev,
                "device not ready {} ms after the reset at teardown\n",
                RESET_TIMEOUT.as_millis()
            );
        }
    }
}
