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
    auxiliary, bindings,
    device::{self, Bound},
    devres::Devres,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    net::ethernet::NetDev,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    rdma::{
        cq::WcSink,
        mmap::{MmapEntry, QueueMem, ResMsg, Vma},
        qp::{CqInit, QpAttr, QpAttrMask, QpInit, QpQuery},
        types::{DeviceAttr, Event, Gid, GidAttr, LinkLayer, PortAttr, PortImmutable},
        udata::{Udata, User},
        umem::Access,
        uverbs::UapiDef,
        wr::{
            RecvWrs,
            SendWrs, //
        },
    },
    sync::{aref::ARef, new_spinlock_irq, Completion, Mutex, Refcount, SpinLockIrq},
    types::Opaque,
    xarray::{AllocKind, XArray},
    ThisModule,
};
use core::{marker::PhantomData, pin::Pin, ptr::NonNull};

mod callbacks;
mod driver;
mod objects;
mod registration;

pub use driver::{DmabufMr, Driver, MrKeys, UserMr};
pub use objects::{Cq, Mr, Pd, Qp, QpEvent, Ucontext};
pub use registration::{NodeType, Options, Registration};

/// An RDMA device of driver `T`: a `struct ib_device` with the driver's data.
///
/// # Invariants
///
/// - `ib` is a `struct ib_device` allocated by `_ib_alloc_device()` with the size of `Self`, its
///   operations are those of [`Registration<T>`], and `data` is initialised.
/// - A `&Device<T>` exists only between [`Registration::new`] and the drop of the
///   [`Registration`]: while the device is registered, being registered, or unregistered early
///   by [`DeviceHandle::unregister`] (its memory and data stay until the registration goes).
/// - `qps` holds an entry for each live queue pair of the device (the `struct ib_qp`, its data
///   initialised), under its number; `cqs` one for each live completion queue that its driver
///   numbered, under that number (see `Table`).
#[repr(C)]
#[pin_data]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// Live queue pairs by number (see [`Device::with_qp`]).
    #[pin]
    qps: Table,
    /// Live completion queues by the number their driver gave them (see [`Device::with_cq`]).
    #[pin]
    cqs: Table,
    #[pin]
    data: T::Data,
}

/// Core objects of one type of a device by number, for the lookups of event handlers:
/// addresses of `Qp<T>` or `Cq<T>` in counted entries.
///
/// An entry is stored once its object is created. A lookup takes a use of the entry under the
/// table's lock and gives it back when done, without the lock. Destruction removes the entry
/// under the lock (no lookup finds it from then on), gives up the table's own use and waits
/// until the last use is given back, and only then lets the driver and the core destroy and free
/// the object. Lookups thus run without a device-wide lock and may sleep; they must not be
/// made by the destruction of the object they look up (it would wait for itself).
///
/// Completion polling does not use these tables: each completion queue has its own table of the
/// queue pairs that complete on it ([`CqQps`]).
type Table = XArray<Pin<KBox<TableEntry>>>;

/// One object of a [`Table`].
///
/// # Invariants
///
/// `uses` counts the table's own use while the entry is in its table, plus the lookups in
/// progress. `idle` is completed when `uses` drops to zero, and not before.
#[pin_data]
struct TableEntry {
    /// The address of the object (`Qp<T>` or `Cq<T>`).
    raw: usize,
    uses: Refcount,
    #[pin]
    idle: Completion,
}

impl TableEntry {
    fn new(raw: usize) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Self {
                raw,
                uses: Refcount::new(1),
                idle <- Completion::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Give back one use; the last one completes `idle`.
    fn put(&self) {
        if self.uses.dec_and_test() {
            self.idle.complete_all();
        }
    }
}

impl<T: Driver> Device<T> {
    /// Run `f` with a use of the entry of `table` under `key`: the address of its object.
    fn with_entry<R>(table: &Table, key: u32, f: impl FnOnce(usize) -> R) -> Option<R> {
        crate::task::might_sleep();
        let entry: *const TableEntry = {
            let t = table.lock();
            let e = t.get(key as usize)?;
            // The entry is in the table, so the table's own use is not given up yet: the
            // count is at least one and may be incremented.
            e.uses.inc();
            &*e
        };
        // SAFETY: The use taken above keeps the entry allocated: its destruction removes it
        // from the table and waits until `idle` completes, that is until every use is given
        // back, before freeing it.
        let e = unsafe { &*entry };
        let r = f(e.raw);
        e.put();
        Some(r)
    }

    /// Store the object at `raw` in `table` under `key`. `EEXIST` if the key is taken.
    fn table_insert(table: &Table, key: u32, raw: usize) -> Result {
        let entry = TableEntry::new(raw)?;
        let mut t = table.lock();
        if t.get(key as usize).is_some() {
            return Err(EEXIST);
        }
        match t.store(key as usize, entry, GFP_KERNEL) {
            Ok(None) => Ok(()),
            // Another insertion under the same key won the lock while this one allocated:
            // put that one back (its slot exists, so this does not allocate). The lock was held
            // from the replacement on, so no lookup saw this entry; lookups may be using the
            // other one, which is therefore never freed here, even if it could not go back.
            Ok(Some(other)) => {
                if let Err(e) = t.store(key as usize, other, GFP_ATOMIC) {
                    core::mem::forget(e.value);
                }
                Err(EEXIST)
            }
            Err(e) => Err(e.error),
        }
    }

    /// Drop the tables and the data of `dev`.
    ///
    /// # Safety
    ///
    /// `dev` must be an initialised device that nothing uses any more (unregistered, or never
    /// registered); its fields are not used afterwards.
    unsafe fn drop_fields(dev: *mut Self) {
        // SAFETY: By the safety requirements the fields are initialised and unused.
        unsafe {
            core::ptr::drop_in_place(&raw mut (*dev).qps);
            core::ptr::drop_in_place(&raw mut (*dev).cqs);
            core::ptr::drop_in_place(&raw mut (*dev).data);
        }
    }

    /// Remove the entry under `key` from `table` and wait until no lookup uses it. Returns
    /// whether there was one. May sleep.
    fn table_remove(table: &Table, key: u32) -> bool {
        let Some(entry) = table.lock().remove(key as usize) else {
            return false;
        };
        // INVARIANT: Out of the table: the table's own use is given up.
        entry.put();
        entry.idle.wait_for_completion();
        true
    }
}

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

    /// The parent device (the PCI function, for a PCI driver or an auxiliary driver of one),
    /// bound while `self` exists.
    pub fn parent(&self) -> &device::Device<Bound> {
        // SAFETY: `Registration::new` set `dev.parent` to a bound device and hands the
        // registration out as a `Devres` of that device, dropped at the latest while it is being
        // unbound; `Registration::new_auxiliary` set it to the parent of a bound auxiliary
        // device, which stays bound while the auxiliary device is (the auxiliary device's
        // registration is dropped while its parent's driver is being unbound), and hands the
        // registration out as a `Devres` of the auxiliary device. A `&Device<T>` does not
        // outlive the registration (type invariants).
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

    /// The network device attached to port `port` (from 1), if there is one.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDev>> {
        if port == 0 || port > self.port_count() {
            return None;
        }
        // SAFETY: `as_raw` is a live device and `port` one of its ports; the core returns the
        // attached device with a reference taken for the caller (`dev_hold`), or null.
        let raw = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        let raw = NonNull::new(raw)?;
        // SAFETY: `raw` is a live network device whose reference the caller owns now; `NetDev`
        // is transparent over `struct net_device`.
        Some(unsafe { ARef::from_raw(raw.cast()) })
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

    /// Run `f` on the queue pair numbered `qpn`, if it exists; the queue pair is not destroyed
    /// before `f` returns. No lock is held during `f`, which may sleep, and must not destroy the
    /// queue pair. May sleep.
    pub fn with_qp<R>(&self, qpn: u32, f: impl FnOnce(&Qp<T>) -> R) -> Option<R> {
        Self::with_entry(&self.qps, qpn, |raw| {
            // SAFETY: Entries of `qps` are live queue pairs of this device with initialised
            // data (type invariants), kept while a lookup uses the entry (see `Table`).
            f(unsafe { Qp::<T>::from_raw(raw as *mut bindings::ib_qp) })
        })
    }

    /// Run `f` on the completion queue the driver numbered `id` (see [`CqInit::set_id`]), if
    /// it exists. As [`Device::with_qp`]: `f` may sleep, and must not destroy the queue.
    pub fn with_cq<R>(&self, id: u32, f: impl FnOnce(&Cq<T>) -> R) -> Option<R> {
        Self::with_entry(&self.cqs, id, |raw| {
            // SAFETY: As for `with_qp`: the entry is a live completion queue of this device
            // while the lookup uses it.
            f(unsafe { Cq::<T>::from_raw(raw as *mut bindings::ib_cq) })
        })
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

    /// Attach `netdev` to port `port` (from 1) in place of the port's previous network device,
    /// or with `None` detach it, if the device is still registered: `ENODEV` when it is not
    /// (unregistration dropped every attachment). Ports beyond [`Device::port_count`] are
    /// refused with `EINVAL`.
    ///
    /// The RDMA core keeps a reference to an attached device until it is detached or this
    /// device unregistered; the network device's unregistration waits for it, so a driver
    /// detaches it before. On a RoCE port the core then derives the GIDs from the new device's
    /// addresses (it looks at those it has now: this takes the RTNL lock, which the caller
    /// must not hold), and the port's state and events from its state, unless the driver
    /// implements [`Driver::report_port_event`]. GID entries of the previous device are deleted
    /// when it is unregistered. May sleep.
    pub fn set_netdev(&self, port: u32, netdev: Option<&NetDev>) -> Result {
        crate::task::might_sleep();
        let ib = self.ib.as_ptr();
        // SAFETY: `phys_port_cnt` is written before registration and never changes afterwards.
        if port == 0 || port > unsafe { (*ib).phys_port_cnt } {
            return Err(EINVAL);
        }
        // SAFETY: The device's memory is live (type invariants). A successful
        // `ib_device_try_get()` holds off unregistration until the matching put.
        if !unsafe { bindings::ib_device_try_get(ib) } {
            return Err(ENODEV);
        }
        let raw = netdev.map_or(core::ptr::null_mut(), NetDev::as_raw);
        // SAFETY: The device is registered until the put below, so its port data exist and
        // unregistration (which drops the core's references to network devices) comes after
        // the call; `raw` is null or a live network device (`NetDev` invariants), of which
        // the core takes a reference.
        let ret = to_result(unsafe { bindings::ib_device_set_netdev(ib, raw, port) });
        if ret.is_ok() && netdev.is_some() {
            // SAFETY: The device is registered and `port` is one of its ports.
            unsafe { bindings::rdma_roce_rescan_port(ib, port) };
        }
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
