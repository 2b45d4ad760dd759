// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: allocation, verbs operations and registration.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver implements [`Driver`] for a type of its own and registers one [`Device`] per piece
//! of hardware with [`Registration::new`]. The device carries the driver's private data
//! ([`Driver::Data`]), allocated with the `struct ib_device` in one allocation and initialised in
//! place. The registration is device-managed: it is undone when the parent device is unbound, and
//! nothing of the RDMA device outlives that.
//!
//! # Examples
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::{self, DeviceAttr, Gid, PortAttr, PortImmutable, PortProtocol, User, Udata};
//!
//! struct MyDriver;
//!
//! #[vtable]
//! impl rdma::Driver for MyDriver {
//!     type Data = ();
//!     type Ucontext = ();
//!     type Pd = ();
//!     type Cq = ();
//!     type Qp = ();
//!     type Mr = ();
//!     type MmapEntry = ();
//!     const NAME: &'static CStr = c"mydev_%d";
//!     const DRIVER_ID: u32 = kernel::bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN;
//!
//!     fn query_device(_dev: &rdma::Device<Self>) -> Result<DeviceAttr> {
//!         Ok(DeviceAttr { max_pd: 1, ..DeviceAttr::default() })
//!     }
//!
//!     fn query_port(_dev: &rdma::Device<Self>, _port: u32) -> Result<PortAttr> {
//!         Ok(PortAttr::default())
//!     }
//!
//!     fn get_port_immutable(_dev: &rdma::Device<Self>, _port: u32) -> Result<PortImmutable> {
//!         Ok(PortImmutable {
//!             pkey_tbl_len: 1,
//!             gid_tbl_len: 1,
//!             protocol: PortProtocol::Unspecified,
//!             max_mad_size: 0,
//!         })
//!     }
//!
//!     fn alloc_ucontext(
//!         _dev: &rdma::Device<Self>,
//!         _udata: &mut Udata<'_>,
//!     ) -> impl PinInit<(), Error> {
//!         Ok(())
//!     }
//!
//!     fn alloc_pd(
//!         _dev: &rdma::Device<Self>,
//!         _user: Option<&mut User<'_, Self>>,
//!     ) -> impl PinInit<(), Error> {
//!         Ok(())
//!     }
//! }
//! ```

use crate::{
    bindings,
    device::{self, Bound},
    devres::Devres,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    rdma::{
        cq::WcSink,
        mmap::{MmapEntry, QueueMem, ResMsg, Vma},
        qp::{CqInit, QpAttr, QpAttrMask, QpInit, QpQuery},
        types::{DeviceAttr, Event, Gid, LinkLayer, PortAttr, PortImmutable},
        udata::{Udata, User},
        umem::Access,
        uverbs::UapiDef,
        wr::SendWrs,
    },
    sync::{new_spinlock_irq, Mutex, SpinLockIrq},
    types::Opaque,
    ThisModule,
};
use core::{marker::PhantomData, ptr::NonNull};

/// The operations and types of an RDMA driver.
///
/// Every method is called by the RDMA core for a [`Device`] registered through a
/// [`Registration`] of this driver, in process context, and may sleep.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// The driver's data of a device.
    type Data: Send + Sync;
    /// The driver's data of a user context ([`Ucontext`]).
    type Ucontext: Send + Sync;
    /// The driver's data of a protection domain ([`Pd`]).
    type Pd: Send + Sync;
    /// The driver's data of a completion queue ([`Cq`]).
    type Cq: Send + Sync;
    /// The driver's data of a queue pair ([`Qp`]).
    type Qp: Send + Sync;
    /// The driver's data of a memory region ([`Mr`]).
    type Mr: Send + Sync;
    /// The driver's data of an mmap entry ([`MmapEntry`]).
    type MmapEntry: Send + Sync;

    /// The device name pattern, for example `c"gaudi_%d"`.
    const NAME: &'static CStr;
    /// The driver's `enum rdma_driver_id`, which binds its uverbs namespace to its devices.
    const DRIVER_ID: u32;
    /// The ABI version of the driver's udata structures.
    const UVERBS_ABI_VERSION: u32 = 0;
    /// The driver's uverbs ioctl namespace (see [`crate::rdma::uverbs`]), terminated by
    /// [`UapiDef::END`].
    const UAPI: Option<&'static [UapiDef<Self>]> = None;

    /// Report the attributes of the device.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;

    /// Report the attributes of port `port` (numbered from 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Report what never changes about port `port`.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// The link layer of port `port`; the core derives it from the protocol without this.
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Entry `index` of the GID table of `port`, for devices whose GIDs are not managed by the
    /// core from a netdev.
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: u32) -> Result<Gid> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Entry `index` of the partition key table of `port`.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Create the driver's part of a new user context.
    ///
    /// `udata` carries the driver's request from user space and takes its response.
    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::Ucontext, Error>;

    /// Called before a user context is freed; its data is dropped afterwards.
    fn dealloc_ucontext(_ctx: &Ucontext<Self>) {}

    /// The device is going away while user space still holds the context: stop every access
    /// of user space to the device (the core zaps the context's mappings).
    fn disassociate_ucontext(_ctx: &Ucontext<Self>) {}

    /// Create the driver's part of a new protection domain, for user space (`user` is given)
    /// or for a kernel consumer.
    fn alloc_pd(
        dev: &Device<Self>,
        user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Pd, Error>;

    /// Called before a protection domain is freed; its data is dropped afterwards. An error
    /// keeps the protection domain.
    fn dealloc_pd(_pd: &Pd<Self>) -> Result {
        Ok(())
    }

    /// Create the driver's part of a completion queue; the driver reports the entries it
    /// granted with [`CqInit::grant_cqe`].
    fn create_cq(
        _dev: &Device<Self>,
        _init: &mut CqInit,
        _user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Cq, Error> {
        Err::<Self::Cq, Error>(EOPNOTSUPP)
    }

    /// Called before a completion queue is freed; its data is dropped afterwards. An error
    /// keeps the completion queue.
    fn destroy_cq(_cq: &Cq<Self>) -> Result {
        Ok(())
    }

    /// Take completions of `cq` into `out` until it is full or the queue is empty. Kernel
    /// consumers poll from any context: this must not sleep.
    fn poll_cq(_cq: &Cq<Self>, _out: &mut WcSink<'_, Self>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Arm `cq` for one completion event (`solicited`: only for solicited completions). With
    /// `report_missed`, return whether completions are pending already (the caller polls
    /// again). Must not sleep.
    fn req_notify_cq(_cq: &Cq<Self>, _solicited: bool, _report_missed: bool) -> Result<bool> {
        Err(EOPNOTSUPP)
    }

    /// Create the driver's part of a queue pair in `pd`; the driver must set its number with
    /// [`QpInit::set_qp_num`] and reports the queue sizes it granted.
    fn create_qp(
        _pd: &Pd<Self>,
        _init: &mut QpInit<'_>,
        _user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Qp, Error> {
        Err::<Self::Qp, Error>(EOPNOTSUPP)
    }

    /// Change the attributes of a queue pair (state transitions).
    fn modify_qp(_qp: &Qp<Self>, _attr: &QpAttr<'_>, _udata: Option<&mut Udata<'_>>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Report the attributes of a queue pair.
    fn query_qp(_qp: &Qp<Self>, _mask: QpAttrMask) -> Result<QpQuery> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called before a queue pair is freed; its data is dropped afterwards. An error keeps the
    /// queue pair.
    fn destroy_qp(_qp: &Qp<Self>) -> Result {
        Ok(())
    }

    /// Post the send work requests of `wrs` to `qp`, in order. On an error, the request taken
    /// last from `wrs` is reported as the failed one (see [`SendWrs`]). Kernel posters may hold
    /// spinlocks: this must not sleep.
    fn post_send(_qp: &Qp<Self>, _wrs: &mut SendWrs<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Post receive work requests to `qp`; on an error the first request is reported as the
    /// failed one. Drivers of devices without receive queues keep the default, `EOPNOTSUPP`.
    /// Must not sleep.
    fn post_recv(_qp: &Qp<Self>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Register user memory as a memory region of `pd`; the driver sets its keys in `keys`.
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _req: &UserMr,
        _user: &mut User<'_, Self>,
        _keys: &mut MrKeys,
    ) -> impl PinInit<Self::Mr, Error> {
        Err::<Self::Mr, Error>(EOPNOTSUPP)
    }

    /// Register a range of a dma-buf as a memory region of `pd` (for example device memory of
    /// a peer, see [`UmemDmabuf`](crate::rdma::umem::UmemDmabuf)); the driver sets its keys.
    fn reg_user_mr_dmabuf(
        _pd: &Pd<Self>,
        _req: &DmabufMr,
        _user: &mut User<'_, Self>,
        _keys: &mut MrKeys,
    ) -> impl PinInit<Self::Mr, Error> {
        Err::<Self::Mr, Error>(EOPNOTSUPP)
    }

    /// Called before a memory region is freed; its data is dropped afterwards. An error keeps
    /// the memory region.
    fn dereg_mr(_mr: &Mr<Self>) -> Result {
        Ok(())
    }

    /// Map `entry` into `vma` (an `mmap()` of the device file by the context owning it).
    fn mmap(_ctx: &Ucontext<Self>, _entry: &MmapEntry<Self>, _vma: &mut Vma<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called when an mmap entry is freed (removed and unmapped); its data is dropped
    /// afterwards.
    fn mmap_free(_entry: &MmapEntry<Self>) {}

    /// Add driver attributes of a queue pair to `rdma res` output.
    fn fill_res_qp_entry(_qp: &Qp<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Add driver attributes of a completion queue to `rdma res` output.
    fn fill_res_cq_entry(_cq: &Cq<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Add driver attributes of a memory region to `rdma res` output.
    fn fill_res_mr_entry(_mr: &Mr<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A request to register user memory (`reg_user_mr`).
#[derive(Clone, Copy, Debug)]
pub struct UserMr {
    /// User virtual address of the memory.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for `start` (the IOVA).
    pub iova: u64,
    /// Access rights.
    pub access: Access,
}

/// A request to register a range of a dma-buf (`reg_user_mr_dmabuf`).
#[derive(Clone, Copy, Debug)]
pub struct DmabufMr {
    /// Offset of the range in the dma-buf.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for the first byte.
    pub iova: u64,
    /// The file descriptor of the dma-buf, in the calling process.
    pub fd: i32,
    /// Access rights.
    pub access: Access,
}

/// The keys of a new memory region.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrKeys {
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}

/// An RDMA device of driver `T`: a `struct ib_device` with the driver's data.
///
/// # Invariants
///
/// - `ib` is a `struct ib_device` allocated by `_ib_alloc_device()` with the size of `Self`, its
///   operations are those of [`Registration<T>`], and `data` is initialised.
/// - A `&Device<T>` exists only between [`Registration::new`] and the drop of the
///   [`Registration`]: while the device is registered, being registered, or unregistered early
///   by [`DeviceHandle::unregister`] (its memory and data stay until the registration goes).
#[repr(C)]
#[pin_data]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// Live queue pairs by number (see [`Device::with_qp`]).
    #[pin]
    qps: ObjectTable,
    /// Live completion queues by the number their driver gave them (see [`Device::with_cq`]).
    #[pin]
    cqs: ObjectTable,
    #[pin]
    data: T::Data,
}

/// Core objects of one type of a device, by number: addresses of `Qp<T>` or `Cq<T>`.
///
/// An entry is inserted once its object is created, and removed, under the lock, before the
/// driver's destroy runs and the core frees the object; lookups use an entry under the lock.
/// The lock disables interrupts: lookups come from interrupt threads and from completion
/// polling, which kernel consumers do in any context.
type ObjectTable = SpinLockIrq<RBTree<u32, usize>>;

// SAFETY: The C parts of `struct ib_device` are synchronised by the RDMA core; the Rust part is
// `T::Data`, which is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}

// SAFETY: Shared references only read immutable fields of `struct ib_device` and hand out
// `&T::Data`, which is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    /// The device of a raw `struct ib_device`.
    ///
    /// # Safety
    ///
    /// `ib` must point to the `ib` field of a [`Device<T>`] (the operations of the device are
    /// those of driver `T`), and the device must stay registered for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of a `#[repr(C)]` `Device<T>`, which is valid for `'a`
        // by the safety requirements.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The raw `struct ib_device`.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The driver's data.
    pub fn data(&self) -> &T::Data {
        &self.data
    }

    /// The parent device (the PCI function, for a PCI driver), bound while `self` exists.
    pub fn parent(&self) -> &device::Device<Bound> {
        // SAFETY: `Registration::new` set `dev.parent` to a bound device and hands the
        // registration out as a `Devres` of that device, dropped at the latest while it is being
        // unbound; a `&Device<T>` does not outlive the registration (type invariants).
        unsafe { device::Device::from_raw((*self.as_raw()).__bindgen_anon_1.dev.parent) }
    }

    /// The number of physical ports.
    pub fn port_count(&self) -> u32 {
        // SAFETY: `phys_port_cnt` is written before registration and never changes afterwards.
        unsafe { (*self.as_raw()).phys_port_cnt }
    }

    /// The name of the device, for example `gaudi_0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: `ib_device::name` is a NUL-terminated array, assigned at registration; a
        // registered device is renamed only under the core's rename lock, in place.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// Report an asynchronous event to the device's consumers, user space included.
    ///
    /// Port events name a port between 1 and [`Device::port_count`]; other ports are refused
    /// with `EINVAL`. May sleep.
    pub fn dispatch_event(&self, event: Event) -> Result {
        // SAFETY: `as_raw` is a live device (type invariants).
        unsafe { dispatch(self.as_raw(), event) }
    }

    /// A handle for contexts that cannot hold a `&Device<T>`, such as interrupt threads
    /// created before the device.
    pub fn handle(&self) -> DeviceHandle<T> {
        // SAFETY: `as_raw` is a live device whose `struct device` was initialised by
        // `_ib_alloc_device()`; the reference is dropped by `DeviceHandle::drop`.
        unsafe { bindings::get_device(&raw mut (*self.as_raw()).__bindgen_anon_1.dev) };
        // INVARIANT: A reference to the `struct device` was just taken.
        DeviceHandle {
            ib: NonNull::from(&self.ib).cast(),
            _p: PhantomData,
        }
    }

    /// Run `f` on the queue pair numbered `qpn`, if it exists. `f` runs under a spinlock with
    /// interrupts off (it must not sleep), during which the queue pair is not destroyed.
    pub fn with_qp<R>(&self, qpn: u32, f: impl FnOnce(&Qp<T>) -> R) -> Option<R> {
        let qps = self.qps.lock();
        let raw = *qps.get(&qpn)?;
        // SAFETY: Entries of `qps` are live queue pairs of this device with initialised data:
        // inserted after creation, removed under this lock before destruction (see
        // `ObjectTable`); the lock is held during `f`.
        Some(f(unsafe { Qp::<T>::from_raw(raw as *mut bindings::ib_qp) }))
    }

    /// Run `f` on the completion queue the driver numbered `id` (see [`CqInit::set_id`]), if
    /// it exists. As [`Device::with_qp`], `f` must not sleep.
    pub fn with_cq<R>(&self, id: u32, f: impl FnOnce(&Cq<T>) -> R) -> Option<R> {
        let cqs = self.cqs.lock();
        let raw = *cqs.get(&id)?;
        // SAFETY: As for `with_qp`: the entry is a live completion queue of this device while
        // the lock is held.
        Some(f(unsafe { Cq::<T>::from_raw(raw as *mut bindings::ib_cq) }))
    }

    /// Enter `raw` in `table` under `key`, with a node allocated beforehand. `EEXIST` if the
    /// key is taken.
    fn table_insert(
        table: &ObjectTable,
        node: RBTreeNodeReservation<u32, usize>,
        key: u32,
        raw: usize,
    ) -> Result {
        let mut t = table.lock();
        if t.get(&key).is_some() {
            return Err(EEXIST);
        }
        t.insert(node.into_node(key, raw));
        Ok(())
    }
}

/// Report `event` on `ib`.
///
/// # Safety
///
/// `ib` must point to a `struct ib_device` that is not released during the call.
unsafe fn dispatch(ib: *mut bindings::ib_device, event: Event) -> Result {
    let (kind, port) = event.raw();
    // SAFETY: `phys_port_cnt` is written before registration and never changes afterwards.
    if port == 0 || port > unsafe { (*ib).phys_port_cnt } {
        return Err(EINVAL);
    }
    crate::task::might_sleep();
    let mut raw: bindings::ib_event = pin_init::zeroed();
    raw.device = ib;
    raw.event = kind;
    raw.element.port_num = port;
    // SAFETY: `raw` is a valid event of a live device, as `ib_dispatch_event()` requires (on a
    // device that is not registered it reaches no handler); the core copies what it keeps.
    unsafe { bindings::ib_dispatch_event(&raw) };
    Ok(())
}

/// A counted reference to an RDMA device, independent of the driver's [`Registration`].
///
/// It keeps the memory of the `struct ib_device` (not the driver's data) and can report events
/// and unregister the device early, from contexts that may sleep. Once the device is
/// unregistered (by [`DeviceHandle::unregister`] or the drop of its [`Registration`]) the
/// handle does nothing more.
///
/// # Invariants
///
/// `ib` points to a `struct ib_device` allocated by [`Registration::new`], of which the handle
/// holds a reference to the `struct device`.
pub struct DeviceHandle<T: Driver> {
    ib: NonNull<bindings::ib_device>,
    _p: PhantomData<T>,
}

// SAFETY: The handle only calls functions of the RDMA core that may be called from any thread,
// and hands out `&Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Send for DeviceHandle<T> {}
// SAFETY: The same: `&DeviceHandle` only calls thread-safe functions of the RDMA core.
unsafe impl<T: Driver> Sync for DeviceHandle<T> {}

impl<T: Driver> DeviceHandle<T> {
    /// Run `f` on the device if it is still registered, `None` if it is not. The device stays
    /// registered during `f`, which therefore must not unregister it (that would wait for `f`).
    pub fn with_device<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let ib = self.ib.as_ptr();
        // SAFETY: The device's memory is live (type invariants). A successful
        // `ib_device_try_get()` holds off unregistration until the matching put.
        if !unsafe { bindings::ib_device_try_get(ib) } {
            return None;
        }
        // SAFETY: The handle was made from a `Device<T>`, registered (and so with live data,
        // which `Registration::drop` drops only after unregistration) until the put below.
        let r = f(unsafe { Device::<T>::from_raw(ib) });
        // SAFETY: Balances the successful `ib_device_try_get()` above.
        unsafe { bindings::ib_device_put(ib) };
        Some(r)
    }

    /// Report an asynchronous event, as [`Device::dispatch_event`], if the device is still
    /// registered: `ENODEV` when it is not. May sleep.
    pub fn dispatch_event(&self, event: Event) -> Result {
        let ib = self.ib.as_ptr();
        // SAFETY: The device's memory is live (type invariants). A successful
        // `ib_device_try_get()` holds off unregistration until the matching put.
        if !unsafe { bindings::ib_device_try_get(ib) } {
            return Err(ENODEV);
        }
        // SAFETY: The device is live and registered until the put below.
        let ret = unsafe { dispatch(ib, event) };
        // SAFETY: Balances the successful `ib_device_try_get()` above.
        unsafe { bindings::ib_device_put(ib) };
        ret
    }

    /// Unregister the device now, as after a fatal error: every client is removed, user
    /// contexts are disassociated (their processes get `IB_EVENT_DEVICE_FATAL` and `EIO`
    /// from then on), and the device disappears from the system. Its data stays until the
    /// [`Registration`] is dropped, which then only releases it. Returns at once if the device
    /// is already unregistered.
    ///
    /// May sleep, and waits for the verbs callbacks of the device in progress: it must not be
    /// called from one of them.
    pub fn unregister(&self) {
        crate::task::might_sleep();
        // SAFETY: The device's memory is live (type invariants), so are its unregistration
        // locks, which serialise this with the unregistration by `Registration::drop`:
        // whichever comes second finds the device unregistered and returns.
        unsafe { bindings::ib_unregister_device(self.ib.as_ptr()) };
    }
}

impl<T: Driver> Drop for DeviceHandle<T> {
    fn drop(&mut self) {
        // SAFETY: Balances the reference taken by `Device::handle` (type invariants).
        unsafe { bindings::put_device(&raw mut (*self.ib.as_ptr()).__bindgen_anon_1.dev) };
    }
}

impl<T: Driver> AsRef<Device<T>> for Device<T> {
    fn as_ref(&self) -> &Device<T> {
        self
    }
}

/// Where the RDMA core's objects keep the driver's data.
///
/// The core allocates each object with the size the driver declares (`size_ib_*` of
/// `struct ib_device_ops`), with the core object at offset 0, and hands it to the driver to
/// initialise. These wrappers are those allocations.
macro_rules! core_object {
    (@data_ptr $raw:ident, $data:ident) => {
        /// A pointer to the driver's data of a raw core object.
        ///
        /// # Safety
        ///
        /// `raw` must be the core object of a `Self` allocation.
        pub(crate) unsafe fn data_ptr(raw: *mut bindings::$raw) -> *mut T::$data {
            // SAFETY: `raw` is the start of a `Self` allocation by the safety requirements.
            unsafe { &raw mut (*raw.cast::<Self>()).data }
        }
    };
    ($(#[$meta:meta])* $name:ident, $raw:ident, $data:ident $(, $core_allocated:ident)?) => {
        $(#[$meta])*
        ///
        /// # Invariants
        ///
        /// The object was allocated by the RDMA core for a device of driver `T` (with the size
        /// of `Self`), the core object is initialised by the core and `data` by the driver.
        #[repr(C)]
        #[pin_data]
        pub struct $name<T: Driver> {
            ib: Opaque<bindings::$raw>,
            #[pin]
            data: T::$data,
        }

        impl<T: Driver> $name<T> {
            /// The object for a raw core object.
            ///
            /// # Safety
            ///
            /// `raw` must be the core object of a live `Self` whose data is initialised, valid
            /// for `'a`.
            pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::$raw) -> &'a Self {
                // SAFETY: The core object is the first field of `#[repr(C)] Self`, valid for
                // `'a` by the safety requirements.
                unsafe { &*raw.cast::<Self>() }
            }

            $(core_object!(@$core_allocated $raw, $data);)?

            /// The raw core object.
            pub fn as_raw(&self) -> *mut bindings::$raw {
                self.ib.get()
            }

            /// The device the object belongs to.
            pub fn device(&self) -> &Device<T> {
                // SAFETY: By the type invariants the core set `device` to the registered device
                // of driver `T` that the object belongs to, which outlives its objects.
                unsafe { Device::from_raw((*self.as_raw()).device) }
            }

            /// The driver's data.
            pub fn data(&self) -> &T::$data {
                &self.data
            }
        }

        // SAFETY: The core object is synchronised by the RDMA core; the driver's data is `Send`.
        unsafe impl<T: Driver> Send for $name<T> {}
        // SAFETY: Shared references only read what the core does not change during the object's
        // life and hand out `&T::$data`, which is `Sync`.
        unsafe impl<T: Driver> Sync for $name<T> {}
    };
}

/// A user context (`struct ib_ucontext`): what one process opened on a device.
///
/// # Invariants
///
/// The object was allocated by the RDMA core for a device of driver `T` (with the size of
/// `Self`); the core object is initialised by the core, `mmap` and `data` by the glue. `mmap`
/// holds the entries inserted by [`Ucontext::mmap_insert`] and not yet removed, each with its
/// insertion reference.
#[repr(C)]
#[pin_data]
pub struct Ucontext<T: Driver> {
    ib: Opaque<bindings::ib_ucontext>,
    #[pin]
    mmap: Mutex<KVec<usize>>,
    #[pin]
    data: T::Ucontext,
}

// SAFETY: The core object is synchronised by the RDMA core, `mmap` by its lock; the driver's
// data is `Send`.
unsafe impl<T: Driver> Send for Ucontext<T> {}
// SAFETY: Shared references only read what the core does not change during the object's life,
// lock `mmap`, and hand out `&T::Ucontext`, which is `Sync`.
unsafe impl<T: Driver> Sync for Ucontext<T> {}

impl<T: Driver> Ucontext<T> {
    /// The context of a raw core object.
    ///
    /// # Safety
    ///
    /// `raw` must be the core object of a live `Self` whose data is initialised, valid for
    /// `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::ib_ucontext) -> &'a Self {
        // SAFETY: The core object is the first field of `#[repr(C)] Self`, valid for `'a`.
        unsafe { &*raw.cast::<Self>() }
    }

    /// The raw core object.
    pub fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.ib.get()
    }

    /// The device the context belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: The core set `device` to the registered device of driver `T`, which outlives
        // its contexts.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The driver's data.
    pub fn data(&self) -> &T::Ucontext {
        &self.data
    }

    /// Offer `length` bytes (a multiple of `PAGE_SIZE`), described by `data`, to `mmap()` by
    /// this context; returns the offset user space passes to `mmap()`. The entry stays until
    /// [`Ucontext::mmap_remove`] or the end of the context, and its data until no VMA maps it.
    pub fn mmap_insert(
        &self,
        length: usize,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        self.mmap_insert_entry(length, None, data)
    }

    /// Offer queue memory `mem`, described by `data`, to `mmap()` by this context
    /// ([`Vma::map_coherent`]); `EINVAL` if it was allocated for another device. Returns the
    /// offset user space passes to `mmap()`. The entry holds `mem` until no VMA maps it any
    /// more.
    pub fn mmap_insert_coherent(
        &self,
        mem: &QueueMem,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        if !mem.is_for(self) {
            return Err(EINVAL);
        }
        self.mmap_insert_entry(mem.size(), Some(mem.clone()), data)
    }

    fn mmap_insert_entry(
        &self,
        length: usize,
        mem: Option<QueueMem>,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        let mut entries = self.mmap.lock();
        entries.reserve(1, GFP_KERNEL)?;
        let entry = MmapEntry::<T>::insert(self, length, mem, data)?;
        // SAFETY: `entry` was just inserted; its offset never changes.
        let offset = unsafe { MmapEntry::<T>::from_raw(entry) }.offset();
        if entries.push_within_capacity(entry as usize).is_err() {
            // Not reached: room was reserved above. Do not leak the entry.
            // SAFETY: We own the insertion reference of the new entry.
            unsafe { bindings::rdma_user_mmap_entry_remove(entry) };
            return Err(ENOMEM);
        }
        Ok(offset)
    }

    /// Remove the entry at `offset` (from [`Ucontext::mmap_insert`]): no new mapping can be
    /// made of it; existing ones stay until unmapped. `ENOENT` if there is none.
    pub fn mmap_remove(&self, offset: u64) -> Result {
        let entry = {
            let mut entries = self.mmap.lock();
            let listed = |e: &usize| {
                let raw = *e as *mut bindings::rdma_user_mmap_entry;
                // SAFETY: Listed entries are alive (type invariants).
                unsafe { MmapEntry::<T>::from_raw(raw) }.offset()
            };
            let i = entries
                .iter()
                .position(|e| listed(e) == offset)
                .ok_or(ENOENT)?;
            entries.remove(i)?
        };
        // SAFETY: The entry was listed, so we own its insertion reference, given up here.
        unsafe {
            bindings::rdma_user_mmap_entry_remove(entry as *mut bindings::rdma_user_mmap_entry)
        };
        Ok(())
    }

    /// Remove every entry still listed (the context is going away).
    fn mmap_remove_all(&self) {
        let entries = core::mem::take(&mut *self.mmap.lock());
        for e in entries.iter() {
            // SAFETY: Each listed entry comes with its insertion reference, given up here.
            unsafe {
                bindings::rdma_user_mmap_entry_remove(*e as *mut bindings::rdma_user_mmap_entry)
            };
        }
    }
}

core_object!(
    /// A protection domain (`struct ib_pd`).
    Pd,
    ib_pd,
    Pd,
    data_ptr
);

core_object!(
    /// A completion queue (`struct ib_cq`).
    Cq,
    ib_cq,
    Cq,
    data_ptr
);

core_object!(
    /// A queue pair (`struct ib_qp`).
    Qp,
    ib_qp,
    Qp,
    data_ptr
);

core_object!(
    /// A memory region (`struct ib_mr`), allocated by the driver glue.
    Mr,
    ib_mr,
    Mr
);

impl<T: Driver> Qp<T> {
    /// The queue pair number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: `qp_num` is set at creation and never changes.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The protection domain of the queue pair.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: The core set `pd` to a live PD of this device, which it keeps while the QP
        // exists.
        unsafe { Pd::from_raw((*self.as_raw()).pd) }
    }

    /// Report an asynchronous event of the queue pair (`IB_EVENT_QP_FATAL`, ...) to its owner.
    pub fn dispatch_event(&self, event: QpEvent) {
        // SAFETY: `as_raw` is a live QP; the core calls its event handler if one is set.
        unsafe {
            let qp = self.as_raw();
            if let Some(handler) = (*qp).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*qp).device;
                ev.event = event as u32;
                ev.element.qp = qp;
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// Asynchronous events of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpEvent {
    /// The queue pair went to the error state.
    Fatal = bindings::ib_event_type_IB_EVENT_QP_FATAL,
    /// A request violated the access rules (remote access error).
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
    /// The first packet arrived on a queue pair in RTR.
    CommEst = bindings::ib_event_type_IB_EVENT_COMM_EST,
}

impl<T: Driver> Cq<T> {
    /// Number of entries.
    pub fn cqe(&self) -> u32 {
        // SAFETY: `cqe` is set at creation (by the glue, from the driver) and only changed by
        // resize, which the glue does not offer.
        unsafe { (*self.as_raw()).cqe as u32 }
    }

    /// Report to the owner that the completion queue failed (`IB_EVENT_CQ_ERR`), as after an
    /// overflow: completions were lost.
    pub fn dispatch_error(&self) {
        // SAFETY: `as_raw` is a live CQ; the core set its event handler and context, if any.
        unsafe {
            let cq = self.as_raw();
            if let Some(handler) = (*cq).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*cq).device;
                ev.event = bindings::ib_event_type_IB_EVENT_CQ_ERR;
                ev.element.cq = cq;
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }

    /// Signal the consumer that completions arrived (the completion event channel for user
    /// space), as an interrupt handler does after an armed CQ got an entry.
    pub fn notify_completion(&self) {
        // SAFETY: `as_raw` is a live CQ; its handler and context are set by the core.
        unsafe {
            let cq = self.as_raw();
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }
}

impl<T: Driver> Mr<T> {
    /// The keys of the memory region.
    pub fn keys(&self) -> MrKeys {
        // SAFETY: The keys are set at registration and never change.
        unsafe {
            MrKeys {
                lkey: (*self.as_raw()).lkey,
                rkey: (*self.as_raw()).rkey,
            }
        }
    }

    /// The protection domain of the memory region.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: The core sets `pd` after registration to a live PD of this device, which it
        // keeps while the MR exists; the driver sees the MR only after that.
        unsafe { Pd::from_raw((*self.as_raw()).pd) }
    }
}

impl<T: Driver> Pd<T> {
    /// The user context the protection domain belongs to, `None` for a kernel consumer's.
    pub fn ucontext(&self) -> Option<&Ucontext<T>> {
        // SAFETY: `uobject` is set by the core before the driver sees the object, and for user
        // objects `uobject->context` is the live context of driver `T` owning it.
        unsafe {
            let uobject = (*self.as_raw()).uobject;
            if uobject.is_null() {
                return None;
            }
            let ctx = (*uobject).context;
            (!ctx.is_null()).then(|| Ucontext::from_raw(ctx))
        }
    }
}

/// A registered RDMA device.
///
/// Created by [`Registration::new`], which hands it out inside a [`Devres`]: the device is
/// unregistered, its data dropped and the `struct ib_device` released when the parent device is
/// unbound (or when the [`Devres`] is dropped, if that comes first).
///
/// # Invariants
///
/// `dev` points to a [`Device<T>`] owned by this registration, registered by it (and unregistered
/// by its drop, or earlier by [`DeviceHandle::unregister`]).
pub struct Registration<T: Driver> {
    dev: NonNull<Device<T>>,
    _p: PhantomData<T>,
}

// SAFETY: The registration only owns the device, which is `Send`.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: Shared references only give `&Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for Registration<T> {}

/// How a device is registered.
pub struct Options {
    /// Physical ports, numbered from 1.
    pub ports: u32,
    /// Completion vectors.
    pub comp_vectors: u32,
    /// Node type (`enum rdma_node_type`).
    pub node_type: NodeType,
    /// The ports are RoCE ports without a netdev: the core reads their GID table through
    /// [`Driver::query_gid`] (`ib_device::roce_gids_from_driver`) instead of deriving it from
    /// a netdev's addresses.
    pub roce_gids_from_driver: bool,
    /// Node GUID (an EUI-64, for example derived from a MAC address), 0 for none.
    pub node_guid: u64,
}

/// The kind of RDMA node (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NodeType {
    /// An InfiniBand or RoCE channel adapter.
    Ca = bindings::RDMA_NODE_IB_CA as u8,
    /// A verbs device of no standard kind (as efa).
    Unspecified = bindings::RDMA_NODE_UNSPECIFIED as u8,
}

impl<T: Driver> Registration<T> {
    const OPS: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        query_device: Some(callbacks::query_device::<T>),
        query_port: Some(callbacks::query_port::<T>),
        get_port_immutable: Some(callbacks::get_port_immutable::<T>),
        get_link_layer: if T::HAS_GET_LINK_LAYER {
            Some(callbacks::get_link_layer::<T>)
        } else {
            None
        },
        query_gid: if T::HAS_QUERY_GID {
            Some(callbacks::query_gid::<T>)
        } else {
            None
        },
        query_pkey: if T::HAS_QUERY_PKEY {
            Some(callbacks::query_pkey::<T>)
        } else {
            None
        },
        alloc_ucontext: Some(callbacks::alloc_ucontext::<T>),
        dealloc_ucontext: Some(callbacks::dealloc_ucontext::<T>),
        // Always set: user contexts are then disassociated when the device goes away, instead
        // of unbind waiting until every process has closed the device.
        disassociate_ucontext: Some(callbacks::disassociate_ucontext::<T>),
        alloc_pd: Some(callbacks::alloc_pd::<T>),
        dealloc_pd: Some(callbacks::dealloc_pd::<T>),
        create_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::create_cq::<T>)
        } else {
            None
        },
        destroy_cq: Some(callbacks::destroy_cq::<T>),
        // Kernel consumers call these without checking: set with completion queues.
        poll_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::poll_cq::<T>)
        } else {
            None
        },
        req_notify_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::req_notify_cq::<T>)
        } else {
            None
        },
        create_qp: if T::HAS_CREATE_QP {
            Some(callbacks::create_qp::<T>)
        } else {
            None
        },
        modify_qp: if T::HAS_MODIFY_QP {
            Some(callbacks::modify_qp::<T>)
        } else {
            None
        },
        query_qp: if T::HAS_QUERY_QP {
            Some(callbacks::query_qp::<T>)
        } else {
            None
        },
        destroy_qp: Some(callbacks::destroy_qp::<T>),
        // Kernel posters call these without checking: set with queue pairs.
        post_send: if T::HAS_CREATE_QP {
            Some(callbacks::post_send::<T>)
        } else {
            None
        },
        post_recv: if T::HAS_CREATE_QP {
            Some(callbacks::post_recv::<T>)
        } else {
            None
        },
        reg_user_mr: if T::HAS_REG_USER_MR {
            Some(callbacks::reg_user_mr::<T>)
        } else {
            None
        },
        reg_user_mr_dmabuf: if T::HAS_REG_USER_MR_DMABUF {
            Some(callbacks::reg_user_mr_dmabuf::<T>)
        } else {
            None
        },
        dereg_mr: Some(callbacks::dereg_mr::<T>),
        mmap: if T::HAS_MMAP {
            Some(callbacks::mmap::<T>)
        } else {
            None
        },
        mmap_free: Some(callbacks::mmap_free::<T>),
        fill_res_qp_entry: if T::HAS_FILL_RES_QP_ENTRY {
            Some(callbacks::fill_res_qp_entry::<T>)
        } else {
            None
        },
        fill_res_cq_entry: if T::HAS_FILL_RES_CQ_ENTRY {
            Some(callbacks::fill_res_cq_entry::<T>)
        } else {
            None
        },
        fill_res_mr_entry: if T::HAS_FILL_RES_MR_ENTRY {
            Some(callbacks::fill_res_mr_entry::<T>)
        } else {
            None
        },
        size_ib_ucontext: core::mem::size_of::<Ucontext<T>>(),
        size_ib_pd: core::mem::size_of::<Pd<T>>(),
        size_ib_cq: core::mem::size_of::<Cq<T>>(),
        size_ib_qp: core::mem::size_of::<Qp<T>>(),
        ..pin_init::zeroed()
    };

    /// Allocate an RDMA device with the driver's data `data`, and register it as a child of
    /// `parent`, which is also the device doing its DMA.
    ///
    /// The device is named after [`Driver::NAME`]. It stays registered until `parent` is
    /// unbound or the returned [`Devres`] is dropped.
    pub fn new<E>(
        parent: &device::Device<Bound>,
        module: &'static ThisModule,
        opts: Options,
        data: impl PinInit<T::Data, E>,
    ) -> Result<Devres<Self>>
    where
        Error: From<E>,
    {
        const {
            assert!(core::mem::align_of::<Device<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Ucontext<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Pd<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Cq<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Qp<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
        }
        if opts.ports == 0 || opts.ports > u32::from(u8::MAX) {
            return Err(EINVAL);
        }
        if let Some(defs) = T::UAPI {
            UapiDef::check_terminated(defs)?;
        }

        // SAFETY: `init_net` is the initial network namespace, which lives forever.
        let ib = unsafe {
            bindings::_ib_alloc_device(
                core::mem::size_of::<Device<T>>(),
                &raw mut bindings::init_net,
            )
        };
        let ib = NonNull::new(ib).ok_or(ENOMEM)?;
        let dev = ib.cast::<Device<T>>();

        // SAFETY: `_ib_alloc_device()` allocated `size_of::<Device<T>>()` bytes, suitably
        // aligned (checked above), with the `struct ib_device` at offset 0; the tables and
        // `data` are not initialised yet and are pinned in that allocation.
        let res = unsafe {
            let d = dev.as_ptr();
            // The tables' initialisers cannot fail.
            let _ = new_spinlock_irq!(RBTree::new(), "rdma::Device::qps").__init(&raw mut (*d).qps);
            let _ = new_spinlock_irq!(RBTree::new(), "rdma::Device::cqs").__init(&raw mut (*d).cqs);
            data.__init(&raw mut (*d).data)
        };
        if let Err(e) = res {
            // SAFETY: The device was allocated above, never registered, and has no data.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            return Err(e.into());
        }

        // SAFETY: The device is allocated and not registered yet, so its fields are ours to
        // set; the operations are a `'static` constant, and the uAPI definitions are `'static`.
        unsafe {
            let raw = ib.as_ptr();
            bindings::ib_set_device_ops(raw, &Self::OPS);
            (*raw).ops.owner = module.as_ptr();
            (*raw).phys_port_cnt = opts.ports;
            (*raw).num_comp_vectors = opts.comp_vectors.max(1).min(i32::MAX as u32) as i32;
            (*raw).node_type = opts.node_type as u8;
            (*raw).set_roce_gids_from_driver(opts.roce_gids_from_driver.into());
            (*raw).node_guid = opts.node_guid.to_be();
            if T::HAS_CREATE_CQ {
                // Likewise polling and arming completion queues: these reach
                // `Driver::poll_cq` and `Driver::req_notify_cq`.
                (*raw).uverbs_cmd_mask |= (1u64
                    << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ)
                    | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
            }
            if T::HAS_CREATE_QP {
                // The posting commands of user verbs are off unless a driver asks for them
                // (most providers post from user space): these reach `Driver::post_send` and
                // `Driver::post_recv`, which answer with the request that failed.
                (*raw).uverbs_cmd_mask |= (1u64
                    << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
                    | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV);
            }
            (*raw).__bindgen_anon_1.dev.parent = parent.as_raw();
            if let Some(defs) = T::UAPI {
                (*raw).driver_def = defs.as_ptr().cast();
            }
        }

        // SAFETY: The device is fully set up; `parent` is bound, so it is a valid DMA device;
        // `NAME` is NUL-terminated.
        let ret = unsafe {
            bindings::ib_register_device(ib.as_ptr(), T::NAME.as_char_ptr(), parent.as_raw())
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: Registration failed, so nothing else refers to the device or its data.
            unsafe {
                core::ptr::drop_in_place(&raw mut (*dev.as_ptr()).data);
                bindings::ib_dealloc_device(ib.as_ptr());
            }
            return Err(e);
        }

        // INVARIANT: The device is registered and owned by the registration.
        Devres::new::<core::convert::Infallible>(
            parent,
            Self {
                dev,
                _p: PhantomData,
            },
        )
    }

    /// The device (registered unless a [`DeviceHandle`] unregistered it).
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariants the device and its data live as long as `self`.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let ib = self.device().as_raw();
        // SAFETY: The device is ours (type invariants). `ib_unregister_device()` (which returns
        // at once if a `DeviceHandle` unregistered the device already) returns after every
        // client is gone: user contexts are disassociated and freed, so no callback
        // runs and no object of the device remains. The data is then dropped, and the device
        // released; the core frees its memory when the last reference to it goes.
        unsafe {
            bindings::ib_unregister_device(ib);
            core::ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).data);
            bindings::ib_dealloc_device(ib);
        }
    }
}

/// The C callbacks of [`Registration::OPS`].
///
/// Each is installed only in the operations of devices of driver `T`, so the core objects they
/// receive belong to a [`Device<T>`].
mod callbacks {
    use super::*;

    /// # Safety
    ///
    /// `ib` must be a device registered by [`Registration<T>`].
    unsafe fn dev<'a, T: Driver>(ib: *mut bindings::ib_device) -> &'a Device<T> {
        // SAFETY: The core calls the operations of a device only while it is registered.
        unsafe { Device::from_raw(ib) }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn query_device<T: Driver>(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib` is a device of driver `T`; `attr` is valid for writes.
            let (dev, attr) = unsafe { (dev::<T>(ib), &mut *attr) };
            T::query_device(dev)?.write_to(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn query_port<T: Driver>(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib` is a device of driver `T`; `attr` is valid for writes.
            let (dev, attr) = unsafe { (dev::<T>(ib), &mut *attr) };
            T::query_port(dev, port)?.write_to(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn get_port_immutable<T: Driver>(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib` is a device of driver `T`; `out` is valid for writes.
            let (dev, out) = unsafe { (dev::<T>(ib), &mut *out) };
            T::get_port_immutable(dev, port)?.write_to(out);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn get_link_layer<T: Driver>(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: `ib` is a device of driver `T`.
        T::get_link_layer(unsafe { dev::<T>(ib) }, port) as bindings::rdma_link_layer
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn query_gid<T: Driver>(
        ib: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            let index = u32::try_from(index).map_err(|_| EINVAL)?;
            // SAFETY: `ib` is a device of driver `T`.
            let value = T::query_gid(unsafe { dev::<T>(ib) }, port, index)?;
            // SAFETY: `gid` is valid for writes of a `union ib_gid`, whose `raw` member is the
            // 16 bytes of the GID.
            unsafe { (*gid).raw = value.0 };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn query_pkey<T: Driver>(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib` is a device of driver `T`.
            let value = T::query_pkey(unsafe { dev::<T>(ib) }, port, index)?;
            // SAFETY: `pkey` is valid for writes.
            unsafe { *pkey = value };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn alloc_ucontext<T: Driver>(
        ctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core allocated `ctx` with `size_ib_ucontext` of driver `T` and set its
            // device; `udata` is the driver data of the call, valid for its duration.
            let (dev, mut udata) = unsafe { (dev::<T>((*ctx).device), Udata::from_raw(udata)?) };
            let uc = ctx.cast::<Ucontext<T>>();
            // SAFETY: `mmap` of the new context is uninitialised and pinned in the core's
            // allocation.
            unsafe { crate::new_mutex!(KVec::new()).__init(&raw mut (*uc).mmap)? };
            let init = T::alloc_ucontext(dev, &mut udata);
            // SAFETY: `data` of the new context is uninitialised and pinned in the core's
            // allocation; on error the core frees the allocation without calling dealloc, so
            // `mmap` (an empty list) is dropped here.
            if let Err(e) = unsafe { init.__init(&raw mut (*uc).data) } {
                // SAFETY: `mmap` was initialised above and is not used after this.
                unsafe { core::ptr::drop_in_place(&raw mut (*uc).mmap) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn dealloc_ucontext<T: Driver>(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: `ctx` is a live context of driver `T` whose data was initialised by
        // `alloc_ucontext`; the core frees it after this returns, and nothing uses it after.
        unsafe {
            let uc = Ucontext::<T>::from_raw(ctx);
            T::dealloc_ucontext(uc);
            // Entries must go while the context exists: freeing one erases it from the
            // context's table.
            uc.mmap_remove_all();
            let uc = ctx.cast::<Ucontext<T>>();
            core::ptr::drop_in_place(&raw mut (*uc).data);
            core::ptr::drop_in_place(&raw mut (*uc).mmap);
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn disassociate_ucontext<T: Driver>(
        ctx: *mut bindings::ib_ucontext,
    ) {
        // SAFETY: `ctx` is a live context of driver `T`.
        T::disassociate_ucontext(unsafe { Ucontext::<T>::from_raw(ctx) });
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn alloc_pd<T: Driver>(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core allocated `pd` with `size_ib_pd` of driver `T` and set its device;
            // a non-null `udata` is the driver data of a user call, valid for its duration.
            let dev = unsafe { dev::<T>((*pd).device) };
            // SAFETY: As above.
            let mut user = unsafe { User::<T>::from_udata(udata)? };
            let init = T::alloc_pd(dev, user.as_mut());
            // SAFETY: `data` of the new PD is uninitialised and pinned in the core's allocation;
            // on error the core frees it without calling dealloc.
            unsafe { init.__init(Pd::<T>::data_ptr(pd))? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn dealloc_pd<T: Driver>(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `pd` is a live PD of driver `T` with initialised data.
            T::dealloc_pd(unsafe { Pd::<T>::from_raw(pd) })?;
            // SAFETY: The core frees the PD after a successful return and nothing uses the data.
            unsafe { core::ptr::drop_in_place(Pd::<T>::data_ptr(pd)) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn create_cq<T: Driver>(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core allocated `cq` with `size_ib_cq` of driver `T` and set its
            // device; `attr` is valid; a non-null `attrs` is the bundle of a user call.
            let (dev, mut init) = unsafe { (dev::<T>((*cq).device), CqInit::from_raw(&*attr)) };
            let udata = if attrs.is_null() {
                core::ptr::null_mut()
            } else {
                // SAFETY: `attrs` is a valid bundle.
                unsafe { bindings::rdma_uverbs_attr_bundle_udata(attrs) }
            };
            // SAFETY: A non-null `udata` is the driver data of a user call on this device.
            let mut user = unsafe { User::<T>::from_udata(udata)? };
            let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
            let pinit = T::create_cq(dev, &mut init, user.as_mut());
            // SAFETY: `data` of the new CQ is uninitialised and pinned in the core's allocation;
            // on error the core frees it without calling destroy.
            unsafe { pinit.__init(Cq::<T>::data_ptr(cq))? };
            if let Some(id) = init.id() {
                if let Err(e) = Device::<T>::table_insert(&dev.cqs, node, id, cq as usize) {
                    // SAFETY: The CQ is live with initialised data, and nobody else knows it.
                    let _ = T::destroy_cq(unsafe { Cq::<T>::from_raw(cq) });
                    // SAFETY: The data was initialised above; the core frees the CQ on error.
                    unsafe { core::ptr::drop_in_place(Cq::<T>::data_ptr(cq)) };
                    return Err(e);
                }
            }
            let cqe = init.granted().unwrap_or(init.cqe);
            // SAFETY: The CQ is not visible to anyone else yet.
            unsafe { (*cq).cqe = cqe.min(i32::MAX as u32) as c_int };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn destroy_cq<T: Driver>(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `cq` is a live CQ of driver `T` with initialised data.
            let c = unsafe { Cq::<T>::from_raw(cq) };
            // Out of the table first: no completion event finds it from now on. CQs are few
            // and destroyed rarely; the table is keyed by the driver's number.
            let removed = {
                let mut t = c.device().cqs.lock();
                let key = t.iter().find(|(_, v)| **v == cq as usize).map(|(k, _)| *k);
                key.and_then(|k| t.remove_node(&k))
            };
            if let Err(e) = T::destroy_cq(c) {
                if let Some(node) = removed {
                    c.device().cqs.lock().insert(node);
                }
                return Err(e);
            }
            // SAFETY: The core frees the CQ after a successful return.
            unsafe { core::ptr::drop_in_place(Cq::<T>::data_ptr(cq)) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn poll_cq<T: Driver>(
        cq: *mut bindings::ib_cq,
        num_entries: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        // SAFETY: The caller's array holds `num_entries` entries.
        let mut out = unsafe { WcSink::new(wc, num_entries.max(0) as usize) };
        // SAFETY: `cq` is a live CQ of driver `T` with initialised data.
        match T::poll_cq(unsafe { Cq::<T>::from_raw(cq) }, &mut out) {
            Err(e) if out.is_empty() => e.to_errno(),
            // What was taken from the queue is reported; the error comes back next time.
            _ => out.len() as c_int,
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn req_notify_cq<T: Driver>(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        let solicited = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
        let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        // SAFETY: `cq` is a live CQ of driver `T` with initialised data.
        match T::req_notify_cq(unsafe { Cq::<T>::from_raw(cq) }, solicited, report) {
            Ok(missed) => c_int::from(missed && report),
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn post_send<T: Driver>(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: `wr` is the poster's list, valid for the call.
        let mut wrs = unsafe { SendWrs::new(wr) };
        // SAFETY: `qp` is a live QP of driver `T` with initialised data.
        match T::post_send(unsafe { Qp::<T>::from_raw(qp) }, &mut wrs) {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: A non-null `bad_wr` is the poster's slot for the failed request.
                    unsafe { *bad_wr = wrs.failed() };
                }
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn post_recv<T: Driver>(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: `qp` is a live QP of driver `T` with initialised data.
        match T::post_recv(unsafe { Qp::<T>::from_raw(qp) }) {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: A non-null `bad_wr` is the poster's slot for the failed request.
                    unsafe { *bad_wr = wr };
                }
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn create_qp<T: Driver>(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core allocated `qp` with `size_ib_qp` of driver `T` and set its PD,
            // a live PD of this device; `attr` is valid for the call.
            let (pd, attr) = unsafe { (Pd::<T>::from_raw((*qp).pd), &mut *attr) };
            let mut init = QpInit::new(attr);
            // SAFETY: A non-null `udata` is the driver data of a user call on this device.
            let mut user = unsafe { User::<T>::from_udata(udata)? };
            let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
            let pinit = T::create_qp(pd, &mut init, user.as_mut());
            // SAFETY: `data` of the new QP is uninitialised and pinned in the core's allocation.
            unsafe { pinit.__init(Qp::<T>::data_ptr(qp))? };
            let undo = |e: Error| {
                // SAFETY: The QP is live with initialised data, and nobody else knows it.
                let _ = T::destroy_qp(unsafe { Qp::<T>::from_raw(qp) });
                // SAFETY: The data was initialised above; the core frees the QP on error.
                unsafe { core::ptr::drop_in_place(Qp::<T>::data_ptr(qp)) };
                Err(e)
            };
            // A driver that does not number its QP made an unusable one.
            let Some(qp_num) = init.qp_num() else {
                return undo(EINVAL);
            };
            // SAFETY: The QP is not visible to anyone else yet.
            unsafe { (*qp).qp_num = qp_num };
            if let Err(e) = Device::<T>::table_insert(&pd.device().qps, node, qp_num, qp as usize) {
                return undo(e);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn modify_qp<T: Driver>(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `qp` is a live QP of driver `T`; `attr` is valid for the call.
            let (qp, attr) = unsafe { (Qp::<T>::from_raw(qp), &*attr) };
            let attr = QpAttr::new(attr, QpAttrMask::from_raw(mask as u32));
            let mut udata = if udata.is_null() {
                None
            } else {
                // SAFETY: `udata` is non-null and valid for the call.
                Some(unsafe { Udata::from_raw(udata)? })
            };
            T::modify_qp(qp, &attr, udata.as_mut())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn query_qp<T: Driver>(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `qp` is a live QP of driver `T`; `attr` and `init` are valid for writes.
            let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(qp), &mut *attr, &mut *init) };
            T::query_qp(qp, QpAttrMask::from_raw(mask as u32))?.write_to(attr, init);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn destroy_qp<T: Driver>(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `qp` is a live QP of driver `T` with initialised data.
            let q = unsafe { Qp::<T>::from_raw(qp) };
            // Out of the table first: no event or completion finds it from now on.
            let removed = q.device().qps.lock().remove_node(&q.qp_num());
            if let Err(e) = T::destroy_qp(q) {
                if let Some(node) = removed {
                    q.device().qps.lock().insert(node);
                }
                return Err(e);
            }
            // SAFETY: The core frees the QP after a successful return.
            unsafe { core::ptr::drop_in_place(Qp::<T>::data_ptr(qp)) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn reg_user_mr<T: Driver>(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let req = UserMr {
            start,
            length,
            iova,
            access: Access::from_raw(access as u32),
        };
        // SAFETY: `pd` is a live PD of driver `T`; `udata` the driver data of the call.
        let (pd, mut user) = match unsafe { mr_args::<T>(pd, udata) } {
            Ok(v) => v,
            Err(e) => return e.to_ptr(),
        };
        let mut keys = MrKeys::default();
        let mr = alloc_mr::<T>(T::reg_user_mr(pd, &req, &mut user, &mut keys));
        set_keys(mr, keys)
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe extern "C" fn reg_user_mr_dmabuf<T: Driver>(
        pd: *mut bindings::ib_pd,
        offset: u64,
        length: u64,
        iova: u64,
        fd: c_int,
        access: c_int,
        _dmah: *mut bindings::ib_dmah,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> *mut bindings::ib_mr {
        let req = DmabufMr {
            offset,
            length,
            iova,
            fd,
            access: Access::from_raw(access as u32),
        };
        if attrs.is_null() {
            return EINVAL.to_ptr();
        }
        // SAFETY: `attrs` is the valid bundle of the user call.
        let udata = unsafe { bindings::rdma_uverbs_attr_bundle_udata(attrs) };
        // SAFETY: `pd` is a live PD of driver `T`; `udata` the driver data of the call.
        let (pd, mut user) = match unsafe { mr_args::<T>(pd, udata) } {
            Ok(v) => v,
            Err(e) => return e.to_ptr(),
        };
        let mut keys = MrKeys::default();
        let mr = alloc_mr::<T>(T::reg_user_mr_dmabuf(pd, &req, &mut user, &mut keys));
        set_keys(mr, keys)
    }

    /// The PD and the user call of a memory registration.
    ///
    /// # Safety
    ///
    /// `pd` must be a live PD of driver `T`, `udata` the driver data of a user call on it, both
    /// valid for `'a`.
    unsafe fn mr_args<'a, T: Driver>(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> Result<(&'a Pd<T>, User<'a, T>)> {
        // SAFETY: By the safety requirements.
        let (pd, user) = unsafe { (Pd::<T>::from_raw(pd), User::<T>::from_udata(udata)?) };
        Ok((pd, user.ok_or(EINVAL)?))
    }

    /// Allocate a memory region whose data `init` makes.
    fn alloc_mr<T: Driver>(init: impl PinInit<T::Mr, Error>) -> Result<*mut Mr<T>> {
        let mr = KBox::pin_init(
            try_pin_init!(Mr::<T> {
                ib: Opaque::zeroed(),
                data <- init,
            }? Error),
            GFP_KERNEL,
        )?;
        // SAFETY: The MR stays pinned: it is only freed through `KBox::from_raw` in `dereg_mr`.
        Ok(KBox::into_raw(unsafe { Pin::into_inner_unchecked(mr) }))
    }

    /// Give a new memory region its keys and hand it to the core.
    fn set_keys<T: Driver>(mr: Result<*mut Mr<T>>, keys: MrKeys) -> *mut bindings::ib_mr {
        match mr {
            Ok(mr) => {
                // SAFETY: `mr` was just allocated by `alloc_mr` and is not visible to the core.
                unsafe {
                    let raw = (*mr).as_raw();
                    (*raw).lkey = keys.lkey;
                    (*raw).rkey = keys.rkey;
                    raw
                }
            }
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn dereg_mr<T: Driver>(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `mr` is a live MR of driver `T`, allocated by `reg_user_mr`.
            T::dereg_mr(unsafe { Mr::<T>::from_raw(mr) })?;
            // SAFETY: The MR was allocated by `reg_user_mr` as a pinned box; the core does not
            // use it after a successful return.
            drop(unsafe { Pin::new_unchecked(KBox::from_raw(mr.cast::<Mr<T>>())) });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn mmap<T: Driver>(
        ctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ctx` is a live context of driver `T`, `vma` the VMA being mapped.
            let entry = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
            if entry.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: Entries of the contexts of driver `T` are `MmapEntry<T>`s; the reference
            // taken above keeps it alive until the put below.
            let res = unsafe {
                T::mmap(
                    Ucontext::<T>::from_raw(ctx),
                    MmapEntry::<T>::from_raw(entry),
                    &mut Vma::new(ctx, vma),
                )
            };
            // SAFETY: Drops the reference taken by `rdma_user_mmap_entry_get()`.
            unsafe { bindings::rdma_user_mmap_entry_put(entry) };
            res.map(|()| 0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn mmap_free<T: Driver>(
        entry: *mut bindings::rdma_user_mmap_entry,
    ) {
        // SAFETY: The last reference to the entry is gone; it was allocated as a pinned box by
        // `MmapEntry::insert`, and nothing uses it after this.
        unsafe {
            T::mmap_free(MmapEntry::<T>::from_raw(entry));
            drop(Pin::new_unchecked(KBox::from_raw(
                entry.cast::<MmapEntry<T>>(),
            )));
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn fill_res_qp_entry<T: Driver>(
        msg: *mut bindings::sk_buff,
        qp: *mut bindings::ib_qp,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `qp` is a live QP of driver `T`; `msg` is the message being built.
            let (qp, mut msg) = unsafe { (Qp::<T>::from_raw(qp), ResMsg::new(msg)) };
            T::fill_res_qp_entry(qp, &mut msg)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn fill_res_cq_entry<T: Driver>(
        msg: *mut bindings::sk_buff,
        cq: *mut bindings::ib_cq,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `cq` is a live CQ of driver `T`; `msg` is the message being built.
            let (cq, mut msg) = unsafe { (Cq::<T>::from_raw(cq), ResMsg::new(msg)) };
            T::fill_res_cq_entry(cq, &mut msg)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core, as this operation of a device of driver `T`.
    pub(super) unsafe extern "C" fn fill_res_mr_entry<T: Driver>(
        msg: *mut bindings::sk_buff,
        mr: *mut bindings::ib_mr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `mr` is a live MR of driver `T`; `msg` is the message being built.
            let (mr, mut msg) = unsafe { (Mr::<T>::from_raw(mr), ResMsg::new(msg)) };
            T::fill_res_mr_entry(mr, &mut msg)?;
            Ok(0)
        })
    }
}
