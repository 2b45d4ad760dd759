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
    rdma::{
        types::{DeviceAttr, Event, Gid, LinkLayer, PortAttr, PortImmutable},
        udata::{Udata, User},
        uverbs::UapiDef,
    },
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
}

/// An RDMA device of driver `T`: a `struct ib_device` with the driver's data.
///
/// # Invariants
///
/// - `ib` is a `struct ib_device` allocated by `_ib_alloc_device()` with the size of `Self`, its
///   operations are those of [`Registration<T>`], and `data` is initialised.
/// - A `&Device<T>` exists only while the device is registered or being registered, that is
///   between [`Registration::new`] and the drop of the [`Registration`].
#[repr(C)]
#[pin_data]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    #[pin]
    data: T::Data,
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
        let (kind, port) = event.raw();
        if port == 0 || port > self.port_count() {
            return Err(EINVAL);
        }
        crate::task::might_sleep();
        let mut raw: bindings::ib_event = pin_init::zeroed();
        raw.device = self.as_raw();
        raw.event = kind;
        raw.element.port_num = port;
        // SAFETY: `raw` is a valid event of this registered device, as `ib_dispatch_event()`
        // requires; the core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&raw) };
        Ok(())
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
    ($(#[$meta:meta])* $name:ident, $raw:ident, $data:ident) => {
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

            /// A pointer to the driver's data of a raw core object.
            ///
            /// # Safety
            ///
            /// `raw` must be the core object of a `Self` allocation.
            pub(crate) unsafe fn data_ptr(raw: *mut bindings::$raw) -> *mut T::$data {
                // SAFETY: `raw` is the start of a `Self` allocation by the safety requirements.
                unsafe { &raw mut (*raw.cast::<Self>()).data }
            }

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

core_object!(
    /// A user context (`struct ib_ucontext`): what one process opened on a device.
    Ucontext,
    ib_ucontext,
    Ucontext
);

core_object!(
    /// A protection domain (`struct ib_pd`).
    Pd,
    ib_pd,
    Pd
);

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
/// `dev` points to a registered [`Device<T>`] owned by this registration.
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
        size_ib_ucontext: core::mem::size_of::<Ucontext<T>>(),
        size_ib_pd: core::mem::size_of::<Pd<T>>(),
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
        // aligned (checked above), with the `struct ib_device` at offset 0; `data` is not
        // initialised yet and is pinned in that allocation.
        let res = unsafe { data.__init(&raw mut (*dev.as_ptr()).data) };
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

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariants the device is registered while `self` lives.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let ib = self.device().as_raw();
        // SAFETY: The device is registered (type invariants). `ib_unregister_device()` returns
        // after every client is gone: user contexts are disassociated and freed, so no callback
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
            let init = T::alloc_ucontext(dev, &mut udata);
            // SAFETY: `data` of the new context is uninitialised and pinned in the core's
            // allocation; on error the core frees the allocation without calling dealloc.
            unsafe { init.__init(Ucontext::<T>::data_ptr(ctx))? };
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
            T::dealloc_ucontext(Ucontext::<T>::from_raw(ctx));
            core::ptr::drop_in_place(Ucontext::<T>::data_ptr(ctx));
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
}
