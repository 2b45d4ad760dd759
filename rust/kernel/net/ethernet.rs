// SPDX-License-Identifier: GPL-2.0

//! Ethernet network devices.
//!
//! C headers: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h),
//! [`include/linux/etherdevice.h`](srctree/include/linux/etherdevice.h),
//! [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h).
//!
//! A driver implements [`Driver`] for a type of its own and registers one `struct net_device`
//! per Ethernet port with [`Registration::new`] (or [`Registration::new_auxiliary`]), which
//! ties the device to the bound device the registration was made for: it is unregistered when
//! that device is unbound (or the returned [`Devres`] dropped).
//! Each device has one transmit queue, one NAPI context and the driver's data
//! ([`Driver::Data`]).
//!
//! What the abstraction guarantees:
//!
//! - the callbacks get a [`Device`] whose data lives at least as long as the call; none runs
//!   once unregistration has returned, so the data is dropped after the last of them;
//! - NAPI is enabled before [`Driver::open`] and disabled after [`Driver::stop`], so
//!   [`Driver::poll`] runs only while the device is up, and never after [`Driver::stop`]
//!   returned;
//! - a socket buffer is an owned [`SkBuff`]: one that a driver drops is freed (and counted as
//!   dropped), one it is finished with it consumes ([`SkBuff::consume`]); one given back with
//!   [`Transmit::Busy`] goes back to the stack untouched;
//! - `ethtool` gets the driver name, bus address and firmware version, link settings, ring
//!   sizes and the driver's statistics from [`Driver`] and [`Options`].
//!
//! What is left to drivers: the device's rings and DMA (the data of an [`SkBuff`] is copied
//! out, and received frames are copied into new buffers, so no socket buffer is ever mapped
//! for DMA), interrupts (a driver's handler calls [`Device::schedule_napi`]), carrier
//! ([`Device::carrier_on`]) and flow control of the transmit queue ([`Device::stop_queue`],
//! [`Device::wake_queue`]).

use crate::{
    auxiliary, bindings,
    device::{self, Bound},
    devres::Devres,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    ffi::c_char,
    prelude::*,
    sync::aref::AlwaysRefCounted,
    types::Opaque,
};
use core::{
    ffi::{c_int, c_void},
    marker::PhantomData,
    ptr::NonNull,
};

/// The length of an Ethernet (MAC) address.
pub const ETH_ALEN: usize = bindings::ETH_ALEN as usize;
/// The length of an Ethernet header.
pub const ETH_HLEN: usize = bindings::ETH_HLEN as usize;

/// What [`Driver::start_xmit`] did with a frame.
pub enum Transmit {
    /// The driver took the frame (sent it, queued it, or dropped it).
    Ok,
    /// The driver has no room: the frame goes back to the stack, which hands it over again
    /// later. The driver stopped the queue ([`Device::stop_queue`]) and wakes it when there is
    /// room again.
    Busy(SkBuff),
}

/// Interface statistics, as `ip -s link` shows them (`struct rtnl_link_stats64`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats64 {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received frames that were bad.
    pub rx_errors: u64,
    /// Frames that could not be sent.
    pub tx_errors: u64,
    /// Received frames dropped for want of room.
    pub rx_dropped: u64,
    /// Frames to send dropped.
    pub tx_dropped: u64,
    /// Multicast frames received.
    pub multicast: u64,
}

/// Which frames the device should receive beyond those to its own address and broadcast.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxMode {
    /// Every frame.
    pub promisc: bool,
    /// Every multicast frame (set when the device is asked for any multicast address: the
    /// abstraction does not hand out multicast lists).
    pub allmulti: bool,
}

/// Link settings for `ethtool`.
#[derive(Clone, Copy, Debug)]
pub struct LinkSettings {
    /// Speed in Mb/s.
    pub speed_mbps: u32,
}

/// How a device is set up by [`Registration::new`].
pub struct Options {
    /// The device's MAC address.
    pub mac: [u8; ETH_ALEN],
    /// The largest MTU the device takes.
    pub max_mtu: u32,
    /// The port of the parent device this interface is (`dev_port` in sysfs), from 0.
    pub dev_port: u16,
    /// Descriptors of the transmit and receive rings, as `ethtool -g` reports them.
    pub tx_ring: u32,
    /// See `tx_ring`.
    pub rx_ring: u32,
}

/// An Ethernet device driver.
#[vtable]
pub trait Driver: Sized + 'static {
    /// The driver's data of one device.
    type Data: Send + Sync;

    /// Bring the device up (`ndo_open`). NAPI is enabled when this is called.
    fn open(dev: &Device<Self>) -> Result;

    /// Take the device down (`ndo_stop`): after this returns, the driver raises no interrupt
    /// for it and its rings are idle. NAPI is disabled after this returns.
    fn stop(dev: &Device<Self>);

    /// Send `skb` (`ndo_start_xmit`), in atomic context.
    fn start_xmit(dev: &Device<Self>, skb: SkBuff) -> Transmit;

    /// NAPI poll: receive at most `budget` frames through `napi` and clean the transmit ring.
    /// Returns the frames received; when that is below `budget`, the driver calls
    /// [`Poll::complete_done`] and, if it returns true, re-enables its interrupt. Runs in
    /// softirq context.
    fn poll(dev: &Device<Self>, napi: &Poll<'_>, budget: u32) -> u32;

    /// The interface statistics.
    fn get_stats64(_dev: &Device<Self>, _stats: &mut Stats64) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Program a new MAC address (already checked to be a valid unicast address) into the
    /// device; the abstraction records it in the `net_device` on success.
    fn set_mac_address(_dev: &Device<Self>, _mac: &[u8; ETH_ALEN]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Apply a receive mode, in atomic context.
    fn set_rx_mode(_dev: &Device<Self>, _mode: RxMode) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The link settings, for `ethtool`.
    fn link_settings(_dev: &Device<Self>) -> LinkSettings {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The firmware version, for `ethtool -i` (cut to 31 bytes).
    fn firmware_version(_dev: &Device<Self>, _out: &mut [u8; 32]) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Names of the driver's statistics, for `ethtool -S` (each cut to 31 bytes).
    const STATS: &'static [&'static CStr] = &[];

    /// The values of [`Driver::STATS`], in their order; `out` has one slot per name.
    fn ethtool_stats(_dev: &Device<Self>, _out: &mut [u64]) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A network device of any driver (`struct net_device`), as other subsystems refer to it: a
/// `&NetDev` from [`Device::net_dev`] exists only while the device is registered, or in a
/// callback of its driver that runs during its unregistration; an `ARef<NetDev>` keeps the
/// structure (not its registration) alive, and its unregistration waits until every such
/// reference is dropped, so none may be kept past the driver's own unbind.
///
/// # Invariants
///
/// The `struct net_device` was registered and is live (allocated, though it may have been
/// unregistered since) for as long as a reference to it is live.
#[repr(transparent)]
pub struct NetDev(Opaque<bindings::net_device>);

// SAFETY: `dev_hold` and `dev_put` count references to a `struct net_device`, which is freed
// only once every one is gone; both may be called from any context.
unsafe impl AlwaysRefCounted for NetDev {
    fn inc_ref(&self) {
        // SAFETY: The type invariants say the device is live.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up a reference it holds, so the device is live until then.
        unsafe { bindings::dev_put(obj.as_ref().as_raw()) };
    }
}

// SAFETY: `NetDev` gives only its address, to functions of other subsystems that are
// thread-safe.
unsafe impl Send for NetDev {}
// SAFETY: As above.
unsafe impl Sync for NetDev {}

impl NetDev {
    /// The raw `struct net_device`.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Whether the device is up.
    pub fn is_running(&self) -> bool {
        // SAFETY: The device is live (type invariants).
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Whether the stack thinks the link is up.
    pub fn carrier_ok(&self) -> bool {
        // SAFETY: The device is live (type invariants).
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }
}

/// An Ethernet device of driver `T`: the `struct net_device` with its NAPI context and the
/// driver's data.
///
/// # Invariants
///
/// `ndev` points to a `struct net_device` allocated by [`Registration::new`] whose private
/// area holds a pointer to this `Device`, and `napi` was added to it with [`poll_callback`].
/// `bound` is the device the registration was made for, bound (and so alive) while the
/// `struct net_device` is registered; `ndev`'s `dev.parent` is `bound` or, for an auxiliary
/// device, its parent, bound while `bound` is.
#[pin_data]
pub struct Device<T: Driver> {
    ndev: NonNull<bindings::net_device>,
    /// The device the registration was made for, bound while this device exists.
    bound: NonNull<bindings::device>,
    /// Descriptors of the transmit and receive rings (for `ethtool -g`).
    rings: (u32, u32),
    #[pin]
    napi: Opaque<bindings::napi_struct>,
    #[pin]
    data: T::Data,
}

// SAFETY: The functions of the networking core that `Device` calls may be called from any
// thread, and the data is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: `&Device` only calls thread-safe functions of the networking core and gives `&Data`,
// which is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    fn new(
        ndev: NonNull<bindings::net_device>,
        bound: &device::Device<Bound>,
        rings: (u32, u32),
        data: impl PinInit<T::Data, Error>,
    ) -> impl PinInit<Self, Error> {
        // `device::Device` is a transparent wrapper of `struct device`.
        let bound = NonNull::from(bound).cast::<bindings::device>();
        try_pin_init!(Self {
            ndev,
            bound,
            rings,
            napi: Opaque::zeroed(),
            data <- data,
        }? Error)
    }

    /// The `Device` of a `struct net_device` registered by [`Registration::new`].
    ///
    /// # Safety
    ///
    /// `ndev` is such a device, and the returned reference is not used after its
    /// [`Registration`] has been dropped (a callback of the device during the callback).
    unsafe fn from_raw<'a>(ndev: *mut bindings::net_device) -> &'a Self {
        // SAFETY: The private area holds a pointer to the `Device` (type invariants), which
        // lives until the registration is dropped.
        unsafe { &**bindings::netdev_priv(ndev).cast::<*const Self>() }
    }

    /// The raw `struct net_device`.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.ndev.as_ptr()
    }

    /// The driver's data.
    pub fn data(&self) -> &T::Data {
        &self.data
    }

    /// The device as other subsystems refer to it (to attach it to an RDMA port, say).
    pub fn net_dev(&self) -> &NetDev {
        // SAFETY: `ndev` is the live `struct net_device` of this device (type invariants), and
        // `NetDev` is a transparent wrapper of it. A `&Device` reaches driver code only from a
        // `Registration` (registered until dropped) or in a callback of the device (registered
        // or being unregistered), so the invariants of `NetDev` hold while the reference lives.
        unsafe { &*self.as_raw().cast::<NetDev>() }
    }

    /// The parent device: the one the registration was made for, or the function of the
    /// auxiliary device it was made for. It is bound while this device exists (the
    /// registration is unregistered at the latest when the device it was made for is unbound,
    /// and an auxiliary device's parent is bound while it is), so callbacks may allocate DMA
    /// memory for it.
    pub fn parent(&self) -> &device::Device<Bound> {
        // SAFETY: `dev.parent` was set to a bound parent before registration and is not
        // changed; a `&Device<T>` exists only while the registration, a `Devres` of the device
        // it was made for (the parent, or an auxiliary device of it) revoked before that
        // device's unbind completes, lives, so the parent is bound.
        unsafe {
            device::Device::<device::Normal>::from_raw((*self.as_raw()).dev.parent).as_bound()
        }
    }

    /// The interface name (`eth0`, say).
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array of the live device (type invariants).
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// The current MAC address.
    pub fn mac(&self) -> [u8; ETH_ALEN] {
        let mut mac = [0u8; ETH_ALEN];
        // SAFETY: An Ethernet device's `dev_addr` points to `ETH_ALEN` bytes.
        unsafe {
            core::ptr::copy_nonoverlapping((*self.as_raw()).dev_addr, mac.as_mut_ptr(), ETH_ALEN)
        };
        mac
    }

    /// The current MTU.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is live; a racy read of the MTU is what C drivers do (`READ_ONCE`).
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    /// Whether the device is up.
    pub fn is_running(&self) -> bool {
        // SAFETY: The device is live.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Tell the stack the link is up.
    pub fn carrier_on(&self) {
        // SAFETY: The device is live; the function may be called in any context.
        unsafe { bindings::netif_carrier_on(self.as_raw()) }
    }

    /// Tell the stack the link is down.
    pub fn carrier_off(&self) {
        // SAFETY: As for `carrier_on`.
        unsafe { bindings::netif_carrier_off(self.as_raw()) }
    }

    /// Whether the stack thinks the link is up.
    pub fn carrier_ok(&self) -> bool {
        // SAFETY: The device is live.
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }

    /// Let the stack hand over frames.
    pub fn start_queue(&self) {
        // SAFETY: The device is live and has a transmit queue.
        unsafe { bindings::netif_start_queue(self.as_raw()) }
    }

    /// Stop the stack from handing over frames.
    pub fn stop_queue(&self) {
        // SAFETY: As for `start_queue`.
        unsafe { bindings::netif_stop_queue(self.as_raw()) }
    }

    /// Let the stack hand over frames again, and have it do so now.
    pub fn wake_queue(&self) {
        // SAFETY: As for `start_queue`.
        unsafe { bindings::netif_wake_queue(self.as_raw()) }
    }

    /// Whether the transmit queue is stopped.
    pub fn queue_stopped(&self) -> bool {
        // SAFETY: As for `start_queue`.
        unsafe { bindings::netif_queue_stopped(self.as_raw()) }
    }

    /// Schedule the device's NAPI poll (from a threaded interrupt handler or another context
    /// that may enable bottom halves: the poll may run before this returns). Does nothing
    /// while the device is down.
    pub fn schedule_napi(&self) {
        // SAFETY: The NAPI context was added to the live device (type invariants). Bottom
        // halves are disabled around the scheduling so that the raised softirq runs when they
        // are enabled again.
        unsafe {
            bindings::local_bh_disable();
            bindings::napi_schedule(self.napi.get());
            bindings::local_bh_enable();
        }
    }
}

/// A NAPI poll under way (see [`Driver::poll`]).
pub struct Poll<'a> {
    napi: *mut bindings::napi_struct,
    ndev: *mut bindings::net_device,
    _p: PhantomData<&'a ()>,
}

impl Poll<'_> {
    /// Hand a received Ethernet frame of `len` bytes (from the Ethernet header on, without
    /// FCS) to the stack: `fill` writes it into the new buffer. `ENOMEM` if no buffer could be
    /// allocated, `EINVAL` for a frame shorter than an Ethernet header; if `fill` fails, the
    /// buffer is freed and its error returned.
    pub fn receive(&self, len: usize, fill: impl FnOnce(&mut [u8]) -> Result) -> Result {
        if len < ETH_HLEN {
            return Err(EINVAL);
        }
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The NAPI context is polled (the poll holds it), so buffers may be allocated
        // from it.
        let skb = unsafe { bindings::napi_alloc_skb(self.napi, len32) };
        if skb.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `skb` is a fresh buffer of at least `len` bytes of tail room; `skb_put()`
        // returns where those bytes start, which nothing else accesses until the buffer goes
        // to the stack.
        let data = unsafe {
            core::slice::from_raw_parts_mut(bindings::skb_put(skb, len32).cast::<u8>(), len)
        };
        if let Err(e) = fill(data) {
            // SAFETY: The buffer is ours and not used again.
            unsafe { bindings::dev_kfree_skb_any(skb) };
            return Err(e);
        }
        // SAFETY: The buffer holds the frame; `skb_set_eth_protocol()` reads its header, sets
        // the protocol and pulls the header; the buffer then goes to the stack, which owns it.
        unsafe {
            bindings::skb_set_eth_protocol(skb, self.ndev);
            bindings::napi_gro_receive(self.napi, skb);
        }
        Ok(())
    }

    /// End the poll with `work` frames received (below the budget): returns whether the
    /// driver should re-enable its interrupt (false when NAPI will poll again anyway).
    pub fn complete_done(&self, work: u32) -> bool {
        // SAFETY: The NAPI context is being polled by this call.
        unsafe { bindings::napi_complete_done(self.napi, work.min(i32::MAX as u32) as c_int) }
    }
}

/// A socket buffer owned by the driver.
///
/// # Invariants
///
/// `0` points to a `struct sk_buff` that nothing else frees.
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: A socket buffer may be freed from any thread (`dev_kfree_skb_any`).
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Bytes in the buffer (its frame, from the Ethernet header on).
    pub fn len(&self) -> usize {
        // SAFETY: The buffer is ours (type invariants).
        unsafe { (*self.0.as_ptr()).len as usize }
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame, if it is all in the buffer's linear part (always so for a device that does
    /// not advertise scatter-gather: the stack linearises frames before handing them over).
    pub fn linear_data(&self) -> Option<&[u8]> {
        let skb = self.0.as_ptr();
        // SAFETY: The buffer is ours (type invariants); when `data_len` is 0, all `len` bytes
        // are at `data`, and they stay there while `self` is borrowed.
        unsafe {
            if (*skb).data_len != 0 {
                return None;
            }
            Some(core::slice::from_raw_parts(
                (*skb).data,
                (*skb).len as usize,
            ))
        }
    }

    /// Copy the frame into the start of `out`, which must hold [`SkBuff::len`] bytes
    /// (`EINVAL` otherwise).
    pub fn copy_to(&self, out: &mut [u8]) -> Result {
        let len = self.len();
        if out.len() < len {
            return Err(EINVAL);
        }
        // SAFETY: `skb_copy_bits()` copies `len` bytes, which the buffer has, from the linear
        // part and the fragments, into `out`, which has room for them.
        to_result(unsafe {
            bindings::skb_copy_bits(
                self.0.as_ptr(),
                0,
                out.as_mut_ptr().cast::<c_void>(),
                len as c_int,
            )
        })
    }

    /// Free the buffer as consumed (sent), not dropped.
    pub fn consume(self) {
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        // SAFETY: The buffer was ours and is not used again.
        unsafe { bindings::dev_consume_skb_any(skb) };
    }

    /// Give up ownership without freeing.
    fn into_raw(self) -> *mut bindings::sk_buff {
        let skb = self.0.as_ptr();
        core::mem::forget(self);
        skb
    }
}

impl Drop for SkBuff {
    /// Free the buffer as dropped.
    fn drop(&mut self) {
        // SAFETY: The buffer is ours and is not used again; this may run in any context.
        unsafe { bindings::dev_kfree_skb_any(self.0.as_ptr()) };
    }
}

/// A registered Ethernet device.
///
/// Created by [`Registration::new`] or [`Registration::new_auxiliary`] inside a [`Devres`] of
/// the device the registration was made for: the network device is unregistered, the driver's
/// data dropped and the `struct net_device` freed when that device is unbound (or when the
/// [`Devres`] is dropped, if that comes first).
///
/// # Invariants
///
/// `dev` is a pinned [`Device<T>`] of a `struct net_device` registered by this registration.
pub struct Registration<T: Driver> {
    dev: Pin<KBox<Device<T>>>,
}

impl<T: Driver> Registration<T> {
    const NETDEV_OPS: bindings::net_device_ops = bindings::net_device_ops {
        ndo_open: Some(open_callback::<T>),
        ndo_stop: Some(stop_callback::<T>),
        ndo_start_xmit: Some(start_xmit_callback::<T>),
        ndo_get_stats64: if T::HAS_GET_STATS64 {
            Some(get_stats64_callback::<T>)
        } else {
            None
        },
        ndo_set_mac_address: if T::HAS_SET_MAC_ADDRESS {
            Some(set_mac_address_callback::<T>)
        } else {
            None
        },
        ndo_set_rx_mode: if T::HAS_SET_RX_MODE {
            Some(set_rx_mode_callback::<T>)
        } else {
            None
        },
        ndo_validate_addr: Some(bindings::eth_validate_addr),
        // SAFETY: All-zero is a valid `net_device_ops` (no operation).
        ..unsafe { core::mem::zeroed() }
    };

    const ETHTOOL_OPS: bindings::ethtool_ops = bindings::ethtool_ops {
        get_drvinfo: Some(get_drvinfo_callback::<T>),
        get_link: Some(bindings::ethtool_op_get_link),
        get_link_ksettings: if T::HAS_LINK_SETTINGS {
            Some(get_link_ksettings_callback::<T>)
        } else {
            None
        },
        get_ringparam: Some(get_ringparam_callback::<T>),
        get_sset_count: Some(get_sset_count_callback::<T>),
        get_strings: Some(get_strings_callback::<T>),
        get_ethtool_stats: Some(get_ethtool_stats_callback::<T>),
        // SAFETY: All-zero is a valid `ethtool_ops` (no operation).
        ..unsafe { core::mem::zeroed() }
    };

    /// Allocate an Ethernet device with `data`, and register it as a child of `parent`. Its
    /// name is the next free `ethN`. It stays registered until `parent` is unbound or the
    /// returned [`Devres`] is dropped.
    pub fn new(
        parent: &device::Device<Bound>,
        opts: &Options,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Devres<Self>> {
        Self::register(parent, parent, opts, data)
    }

    /// Allocate an Ethernet device with `data` for the auxiliary device `adev`, and register it
    /// as a child of `adev`'s parent (the function whose port it is, as `/sys/class/net/*/device`
    /// shows). It stays registered until `adev` is unbound or the returned [`Devres`] is
    /// dropped.
    pub fn new_auxiliary(
        adev: &auxiliary::Device<Bound>,
        opts: &Options,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Devres<Self>> {
        Self::register(adev.as_ref(), adev.parent(), opts, data)
    }

    /// Register for `bound`, as a child of `parent`, which stays bound while `bound` is.
    fn register(
        bound: &device::Device<Bound>,
        parent: &device::Device<Bound>,
        opts: &Options,
        data: impl PinInit<T::Data, Error>,
    ) -> Result<Devres<Self>> {
        // SAFETY: Allocates a device with room for one pointer in its private area, one
        // transmit and one receive queue.
        let ndev = unsafe {
            bindings::alloc_etherdev_mqs(core::mem::size_of::<*const Device<T>>() as c_int, 1, 1)
        };
        let ndev = NonNull::new(ndev).ok_or(ENOMEM)?;
        let dev = KBox::pin_init(
            Device::new(ndev, bound, (opts.tx_ring, opts.rx_ring), data),
            GFP_KERNEL,
        );
        let dev = match dev {
            Ok(dev) => dev,
            Err(e) => {
                // SAFETY: The device was allocated above and never registered.
                unsafe { bindings::free_netdev(ndev.as_ptr()) };
                return Err(e);
            }
        };
        let raw = ndev.as_ptr();
        // SAFETY: The device is allocated and not registered, so its fields are ours to set.
        // The private area has room for the pointer to `dev`, which is pinned and outlives the
        // registration. The operations are `'static` constants. `parent` is bound.
        unsafe {
            *bindings::netdev_priv(raw).cast::<*const Device<T>>() = &*dev;
            (*raw).netdev_ops = &Self::NETDEV_OPS;
            (*raw).ethtool_ops = &Self::ETHTOOL_OPS;
            (*raw).dev.parent = parent.as_raw();
            (*raw).max_mtu = opts.max_mtu;
            (*raw).dev_port = opts.dev_port;
            bindings::eth_hw_addr_set(raw, opts.mac.as_ptr());
            bindings::netif_napi_add(raw, dev.napi.get(), Some(poll_callback::<T>));
        }
        // SAFETY: The device is fully set up.
        if let Err(e) = to_result(unsafe { bindings::register_netdev(raw) }) {
            // SAFETY: Registration failed: nothing else refers to the device; freeing it
            // deletes its NAPI context, after which `dev` may go.
            unsafe { bindings::free_netdev(raw) };
            drop(dev);
            return Err(e);
        }
        // INVARIANT: The device is registered and owned by the registration.
        Devres::new::<core::convert::Infallible>(bound, Self { dev })
    }

    /// The device.
    pub fn device(&self) -> &Device<T> {
        &self.dev
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let raw = self.dev.as_raw();
        // SAFETY: The device is ours (type invariants). `unregister_netdev()` closes it (so
        // `Driver::stop` runs and NAPI is disabled) and returns once no callback runs and no
        // reference to it is left; `free_netdev()` deletes the NAPI context. Only then is the
        // `Device` (with the driver's data) dropped, with the registration.
        unsafe {
            bindings::unregister_netdev(raw);
            bindings::free_netdev(raw);
        }
    }
}

// ---- Callbacks ----------------------------------------------------------

/// `ndo_open`.
///
/// # Safety
///
/// Called by the networking core for a device registered by [`Registration::new`].
unsafe extern "C" fn open_callback<T: Driver>(ndev: *mut bindings::net_device) -> c_int {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    from_result(|| {
        // SAFETY: The NAPI context was added to the device and is disabled while it is down.
        unsafe { bindings::napi_enable(dev.napi.get()) };
        T::open(dev).inspect_err(|_| {
            // SAFETY: Enabled just above.
            unsafe { bindings::napi_disable(dev.napi.get()) };
        })?;
        Ok(0)
    })
}

/// `ndo_stop`.
///
/// # Safety
///
/// As for [`open_callback`], for a device that is up.
unsafe extern "C" fn stop_callback<T: Driver>(ndev: *mut bindings::net_device) -> c_int {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    T::stop(dev);
    // SAFETY: The device was up, so its NAPI context is enabled; this waits for a poll under
    // way to finish.
    unsafe { bindings::napi_disable(dev.napi.get()) };
    0
}

/// `ndo_start_xmit`.
///
/// # Safety
///
/// As for [`open_callback`]; `skb` is a buffer the core hands over.
unsafe extern "C" fn start_xmit_callback<T: Driver>(
    skb: *mut bindings::sk_buff,
    ndev: *mut bindings::net_device,
) -> bindings::netdev_tx_t {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    let Some(skb) = NonNull::new(skb) else {
        return bindings::netdev_tx_NETDEV_TX_OK;
    };
    // INVARIANT: With `NETDEV_TX_OK` the buffer is the driver's, to free; with
    // `NETDEV_TX_BUSY` it goes back to the core untouched (`into_raw`).
    match T::start_xmit(dev, SkBuff(skb)) {
        Transmit::Ok => bindings::netdev_tx_NETDEV_TX_OK,
        Transmit::Busy(skb) => {
            let _ = skb.into_raw();
            bindings::netdev_tx_NETDEV_TX_BUSY
        }
    }
}

/// The NAPI poll.
///
/// # Safety
///
/// Called by the networking core for the NAPI context of a [`Device<T>`].
unsafe extern "C" fn poll_callback<T: Driver>(
    napi: *mut bindings::napi_struct,
    budget: c_int,
) -> c_int {
    let offset = core::mem::offset_of!(Device<T>, napi);
    // SAFETY: `napi` is the `napi` field of a `Device<T>` (type invariants of `Device`), which
    // lives while its device is registered; the core polls only enabled contexts, and NAPI is
    // disabled before unregistration returns.
    let dev = unsafe { &*napi.cast::<u8>().sub(offset).cast::<Device<T>>() };
    let poll = Poll {
        napi,
        ndev: dev.as_raw(),
        _p: PhantomData,
    };
    let budget = u32::try_from(budget).unwrap_or(0);
    T::poll(dev, &poll, budget).min(budget) as c_int
}

/// `ndo_get_stats64`.
///
/// # Safety
///
/// As for [`open_callback`]; `storage` is valid for writes.
unsafe extern "C" fn get_stats64_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    storage: *mut bindings::rtnl_link_stats64,
) {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    let mut s = Stats64::default();
    T::get_stats64(dev, &mut s);
    // SAFETY: `storage` is valid for writes (the core zeroed it).
    let out = unsafe { &mut *storage };
    out.rx_packets = s.rx_packets;
    out.tx_packets = s.tx_packets;
    out.rx_bytes = s.rx_bytes;
    out.tx_bytes = s.tx_bytes;
    out.rx_errors = s.rx_errors;
    out.tx_errors = s.tx_errors;
    out.rx_dropped = s.rx_dropped;
    out.tx_dropped = s.tx_dropped;
    out.multicast = s.multicast;
}

/// `ndo_set_mac_address`.
///
/// # Safety
///
/// As for [`open_callback`]; `addr` points to a `struct sockaddr`.
unsafe extern "C" fn set_mac_address_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    addr: *mut c_void,
) -> c_int {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    from_result(|| {
        let mut mac = [0u8; ETH_ALEN];
        // SAFETY: `addr` is a `struct sockaddr`, whose data holds at least `ETH_ALEN` bytes.
        unsafe {
            let sa = &*addr.cast::<bindings::sockaddr>();
            core::ptr::copy_nonoverlapping(
                sa.sa_data.as_ptr().cast::<u8>(),
                mac.as_mut_ptr(),
                ETH_ALEN,
            );
        }
        // SAFETY: `mac` holds `ETH_ALEN` bytes.
        if !unsafe { bindings::is_valid_ether_addr(mac.as_ptr()) } {
            return Err(EADDRNOTAVAIL);
        }
        T::set_mac_address(dev, &mac)?;
        // SAFETY: The core holds RTNL (and the device's lock) around this operation, as
        // `eth_hw_addr_set()` needs.
        unsafe { bindings::eth_hw_addr_set(ndev, mac.as_ptr()) };
        Ok(0)
    })
}

/// `ndo_set_rx_mode`.
///
/// # Safety
///
/// As for [`open_callback`]; the core holds the device's address lists' lock.
unsafe extern "C" fn set_rx_mode_callback<T: Driver>(ndev: *mut bindings::net_device) {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    // SAFETY: The flags and the multicast list are stable under the lock the core holds.
    let (flags, mc) = unsafe { ((*ndev).flags, (*ndev).mc.count) };
    T::set_rx_mode(
        dev,
        RxMode {
            promisc: flags & bindings::net_device_flags_IFF_PROMISC != 0,
            allmulti: flags & bindings::net_device_flags_IFF_ALLMULTI != 0 || mc != 0,
        },
    );
}

/// Copy `s` into the C string buffer `out`, cut to fit with its NUL.
fn copy_cstr(out: &mut [c_char], s: &[u8]) {
    let n = s.len().min(out.len().saturating_sub(1));
    for (o, &b) in out.iter_mut().zip(&s[..n]) {
        *o = b as c_char;
    }
    if let Some(o) = out.get_mut(n) {
        *o = 0;
    }
}

/// `get_drvinfo` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`]; `info` is valid for writes.
unsafe extern "C" fn get_drvinfo_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    info: *mut bindings::ethtool_drvinfo,
) {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    // SAFETY: `info` is valid for writes; the bound device the registration was made for and
    // the parent (the same, or the function of an auxiliary device) are live while the device
    // is registered, the first with its driver, the second with its name.
    unsafe {
        let info = &mut *info;
        let parent = (*ndev).dev.parent;
        // The driver is the one of the device the registration was made for; the bus address
        // the one of the function.
        let driver = (*dev.bound.as_ptr()).driver;
        if !driver.is_null() {
            // The module's name (an auxiliary driver's name is "module.driver").
            let name = if (*driver).mod_name.is_null() {
                (*driver).name
            } else {
                (*driver).mod_name
            };
            copy_cstr(&mut info.driver, CStr::from_char_ptr(name).to_bytes());
        }
        copy_cstr(
            &mut info.bus_info,
            CStr::from_char_ptr(bindings::dev_name(parent)).to_bytes(),
        );
        if T::HAS_FIRMWARE_VERSION {
            let mut fw = [0u8; 32];
            T::firmware_version(dev, &mut fw);
            let len = fw.iter().position(|&b| b == 0).unwrap_or(fw.len());
            copy_cstr(&mut info.fw_version, &fw[..len]);
        }
    }
}

/// `get_link_ksettings` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`]; `ks` is valid for writes.
unsafe extern "C" fn get_link_ksettings_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    ks: *mut bindings::ethtool_link_ksettings,
) -> c_int {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    let l = T::link_settings(dev);
    // SAFETY: `ks` is valid for writes (the core zeroed it).
    let base = unsafe { &mut (*ks).base };
    base.speed = l.speed_mbps;
    base.duplex = bindings::DUPLEX_FULL as u8;
    base.port = bindings::PORT_DA as u8;
    base.autoneg = bindings::AUTONEG_DISABLE as u8;
    0
}

/// `get_ringparam` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`]; `ring` is valid for writes.
unsafe extern "C" fn get_ringparam_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    ring: *mut bindings::ethtool_ringparam,
    _kernel_ring: *mut bindings::kernel_ethtool_ringparam,
    _extack: *mut bindings::netlink_ext_ack,
) {
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    // SAFETY: `ring` is valid for writes.
    let ring = unsafe { &mut *ring };
    (ring.tx_max_pending, ring.rx_max_pending) = dev.rings;
    (ring.tx_pending, ring.rx_pending) = dev.rings;
}

/// `get_sset_count` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`].
unsafe extern "C" fn get_sset_count_callback<T: Driver>(
    _ndev: *mut bindings::net_device,
    sset: c_int,
) -> c_int {
    if sset == bindings::ethtool_stringset_ETH_SS_STATS as c_int {
        T::STATS.len() as c_int
    } else {
        EOPNOTSUPP.to_errno()
    }
}

/// `get_strings` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`]; for the statistics, `data` has room for [`Driver::STATS`]
/// strings of `ETH_GSTRING_LEN` bytes (the count `get_sset_count` gave).
unsafe extern "C" fn get_strings_callback<T: Driver>(
    _ndev: *mut bindings::net_device,
    sset: u32,
    data: *mut u8,
) {
    if sset != bindings::ethtool_stringset_ETH_SS_STATS {
        return;
    }
    const LEN: usize = bindings::ETH_GSTRING_LEN as usize;
    for (i, name) in T::STATS.iter().enumerate() {
        // SAFETY: `data` has `LEN` bytes for each statistic.
        let out =
            unsafe { core::slice::from_raw_parts_mut(data.add(i * LEN).cast::<c_char>(), LEN) };
        copy_cstr(out, name.to_bytes());
    }
}

/// `get_ethtool_stats` of `ethtool`.
///
/// # Safety
///
/// As for [`open_callback`]; `data` has room for one value per [`Driver::STATS`].
unsafe extern "C" fn get_ethtool_stats_callback<T: Driver>(
    ndev: *mut bindings::net_device,
    _stats: *mut bindings::ethtool_stats,
    data: *mut u64,
) {
    if T::STATS.is_empty() || !T::HAS_ETHTOOL_STATS {
        return;
    }
    // SAFETY: The device is registered while the core calls its operations.
    let dev = unsafe { Device::<T>::from_raw(ndev) };
    // SAFETY: `data` has one slot per statistic.
    let out = unsafe { core::slice::from_raw_parts_mut(data, T::STATS.len()) };
    out.fill(0);
    T::ethtool_stats(dev, out);
}
