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
