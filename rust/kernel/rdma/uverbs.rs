// SPDX-License-Identifier: GPL-2.0

//! A driver's uverbs ioctl namespace: objects, methods and attributes.
//!
//! C headers: [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h),
//! [`include/rdma/uverbs_types.h`](srctree/include/rdma/uverbs_types.h)
//!
//! User space calls a method of an object with `ioctl(RDMA_VERBS_IOCTL)` and a list of
//! attributes. The RDMA core parses and checks the attributes against the method's
//! specification (presence, sizes, object handles and their types) before the handler runs;
//! the handler then reads them, typed, from a [`Call`].
//!
//! The specifications are the C tables of `struct uapi_definition`, built here by `const`
//! functions, so a driver declares them as `static` items: [`AttrDef`]s make a method
//! ([`MethodDef`], implemented by a [`Method`]), methods make an object ([`ObjectDef`]), objects
//! are chained into the driver's definitions ([`UapiDef`]), which [`Driver::UAPI`] names.
//!
//! Driver ids start at [`NS_DRIVER`] (`1 << UVERBS_ID_NS_SHIFT`), for objects, methods and
//! attributes alike.
//!
//! # Examples
//!
//! A global method (an object without handles) returning a structure:
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::uverbs::{AttrDef, Call, Method, MethodDef, ObjectDef, Presence, UapiDef};
//!
//! # struct MyDriver;
//! # #[vtable]
//! # impl kernel::rdma::Driver for MyDriver {
//! #     type Data = u32;
//! #     type Ucontext = ();
//! #     type Pd = ();
//! #     type Cq = ();
//! #     type Qp = ();
//! #     type Mr = ();
//! #     type MmapEntry = ();
//! #     const NAME: &'static CStr = c"mydev_%d";
//! #     const DRIVER_ID: u32 = 0;
//! #     fn query_device(_: &kernel::rdma::Device<Self>) -> Result<kernel::rdma::DeviceAttr> {
//! #         Err(EINVAL)
//! #     }
//! #     fn query_port(_: &kernel::rdma::Device<Self>, _: u32) -> Result<kernel::rdma::PortAttr> {
//! #         Err(EINVAL)
//! #     }
//! #     fn get_port_immutable(
//! #         _: &kernel::rdma::Device<Self>,
//! #         _: u32,
//! #     ) -> Result<kernel::rdma::PortImmutable> {
//! #         Err(EINVAL)
//! #     }
//! #     fn alloc_ucontext(
//! #         _: &kernel::rdma::Device<Self>,
//! #         _: &mut kernel::rdma::Udata<'_>,
//! #     ) -> impl PinInit<(), Error> {
//! #         Ok(())
//! #     }
//! #     fn alloc_pd(
//! #         _: &kernel::rdma::Device<Self>,
//! #         _: Option<&mut kernel::rdma::User<'_, Self>>,
//! #     ) -> impl PinInit<(), Error> {
//! #         Ok(())
//! #     }
//! # }
//! const MY_OBJECT_DEVICE: u16 = kernel::rdma::uverbs::NS_DRIVER;
//! const MY_METHOD_QUERY: u16 = kernel::rdma::uverbs::NS_DRIVER;
//! const MY_ATTR_QUERY_INDEX: u16 = kernel::rdma::uverbs::NS_DRIVER;
//! const MY_ATTR_QUERY_RESP: u16 = kernel::rdma::uverbs::NS_DRIVER + 1;
//!
//! struct Query;
//!
//! impl Method for Query {
//!     type Driver = MyDriver;
//!     const ID: u16 = MY_METHOD_QUERY;
//!     const ATTRS: &'static [&'static AttrDef] = &[
//!         &AttrDef::const_in(MY_ATTR_QUERY_INDEX, Presence::Mandatory),
//!         &AttrDef::ptr_out::<u64>(MY_ATTR_QUERY_RESP, Presence::Mandatory),
//!     ];
//!
//!     fn handle(call: &mut Call<'_, MyDriver>) -> Result {
//!         let index = call.const_in(MY_ATTR_QUERY_INDEX, 0, 7)?;
//!         let value = u64::from(*call.device()?.data()) + index;
//!         call.write(MY_ATTR_QUERY_RESP, &value)
//!     }
//! }
//!
//! static QUERY: MethodDef<MyDriver> = MethodDef::new::<Query>();
//! static DEVICE_OBJECT: ObjectDef<MyDriver> = ObjectDef::global(MY_OBJECT_DEVICE, &[&QUERY]);
//! static UAPI: [UapiDef<MyDriver>; 2] = [UapiDef::object(&DEVICE_OBJECT), UapiDef::END];
//! ```

use crate::{
    bindings,
    error::from_result,
    prelude::*,
    rdma::{Device, Driver, Ucontext, Udata},
};
use core::marker::PhantomData;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The first id of the driver namespace (`1 << UVERBS_ID_NS_SHIFT`).
pub const NS_DRIVER: u16 = 1 << bindings::UVERBS_ID_NS_SHIFT;

/// An id (object, method or attribute) of a driver's uAPI as bindgen generates it from the
/// `enum`s of the driver's header in `kernel::uapi`. Use it in a `const`: the build fails if
/// the value does not fit the 16 bits the protocol gives ids.
pub const fn id(value: u32) -> u16 {
    assert!(value <= u16::MAX as u32, "uverbs ids are 16 bits");
    value as u16
}

/// The core's memory region object type (`UVERBS_OBJECT_MR`), for [`AttrDef::idr`].
pub const OBJECT_MR: u16 = bindings::uverbs_default_objects_UVERBS_OBJECT_MR as u16;

/// The core's protection domain object type (`UVERBS_OBJECT_PD`), for [`AttrDef::idr`].
pub const OBJECT_PD: u16 = bindings::uverbs_default_objects_UVERBS_OBJECT_PD as u16;

/// An all-zero C value.
///
/// # Safety
///
/// All-zero must be a valid value of `T`.
const unsafe fn zeroed<T>() -> T {
    // SAFETY: The caller guarantees that all-zero is a valid `T`.
    unsafe { core::mem::MaybeUninit::zeroed().assume_init() }
}

/// Whether user space must give an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// The call fails with `EINVAL` without the attribute.
    Mandatory,
    /// The attribute may be left out.
    Optional,
}

/// What a method does with the object an object attribute names (`enum uverbs_obj_access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Access {
    /// Shared access to an existing object.
    Read = bindings::uverbs_obj_access_UVERBS_ACCESS_READ as u8,
    /// Exclusive access to an existing object.
    Write = bindings::uverbs_obj_access_UVERBS_ACCESS_WRITE as u8,
    /// The method creates the object.
    New = bindings::uverbs_obj_access_UVERBS_ACCESS_NEW as u8,
    /// The method destroys the object.
    Destroy = bindings::uverbs_obj_access_UVERBS_ACCESS_DESTROY as u8,
}

// Bits of the bitfield byte of `struct uverbs_attr_spec`, in declaration order.
const SPEC_ZERO_TRAILING: u8 = 1 << 0;
const SPEC_ALLOC_AND_COPY: u8 = 1 << 1;
const SPEC_MANDATORY: u8 = 1 << 2;
const SPEC_IS_UDATA: u8 = 1 << 3;

/// The specification of one attribute of a method (`struct uverbs_attr_def`).
#[repr(transparent)]
pub struct AttrDef(bindings::uverbs_attr_def);

// SAFETY: An attribute definition is immutable; the only pointer it may hold (the ids of an
// enum attribute) is not used by the constructors of this module.
unsafe impl Sync for AttrDef {}

impl AttrDef {
    const fn ptr(id: u16, kind: u32, min_len: u16, len: u16, flags: u8, p: Presence) -> Self {
        let flags = match p {
            Presence::Mandatory => flags | SPEC_MANDATORY,
            Presence::Optional => flags,
        };
        // SAFETY: All-zero is a valid `struct uverbs_attr_spec`.
        let mut attr: bindings::uverbs_attr_spec = unsafe { zeroed() };
        attr.type_ = kind as u8;
        attr._bitfield_1 = bindings::__BindgenBitfieldUnit::new([flags]);
        attr.u.ptr.len = len;
        attr.u.ptr.min_len = min_len;
        Self(bindings::uverbs_attr_def { id, attr })
    }

    const fn size_of<S>() -> u16 {
        let size = core::mem::size_of::<S>();
        assert!(
            size <= u16::MAX as usize,
            "attribute larger than the protocol allows"
        );
        size as u16
    }

    /// An input structure `S`, exactly its size (`UVERBS_ATTR_TYPE`).
    pub const fn ptr_in<S: FromBytes>(id: u16, p: Presence) -> Self {
        let size = Self::size_of::<S>();
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN,
            size,
            size,
            0,
            p,
        )
    }

    /// An extensible input structure `S` of which user space gives at least `min_len` bytes;
    /// bytes beyond `S` must be zero (`UVERBS_ATTR_STRUCT`).
    pub const fn ptr_in_ext<S: FromBytes>(id: u16, min_len: u16, p: Presence) -> Self {
        let size = Self::size_of::<S>();
        assert!(min_len <= size);
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN,
            min_len,
            size,
            SPEC_ZERO_TRAILING,
            p,
        )
    }

    /// An output structure `S`; user space gives room for all of it (`UVERBS_ATTR_TYPE`).
    pub const fn ptr_out<S: IntoBytes>(id: u16, p: Presence) -> Self {
        let size = Self::size_of::<S>();
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT,
            size,
            size,
            0,
            p,
        )
    }

    /// An extensible output structure `S`; user space gives room for at least `min_len` bytes
    /// and the rest is truncated.
    pub const fn ptr_out_ext<S: IntoBytes>(id: u16, min_len: u16, p: Presence) -> Self {
        let size = Self::size_of::<S>();
        assert!(min_len <= size);
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT,
            min_len,
            size,
            0,
            p,
        )
    }

    /// An output array of `S`, written with [`Call::write_slice`]: user space gives room for at
    /// least one element (`UVERBS_ATTR_MIN_SIZE`).
    pub const fn array_out<S: IntoBytes>(id: u16, p: Presence) -> Self {
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT,
            Self::size_of::<S>(),
            u16::MAX,
            0,
            p,
        )
    }

    /// An unsigned integer value, read with [`Call::const_in`] (`UVERBS_ATTR_CONST_IN`).
    pub const fn const_in(id: u16, p: Presence) -> Self {
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN,
            8,
            8,
            0,
            p,
        )
    }

    /// A set of flags, 32 or 64 bits, read with [`Call::flags`] (`UVERBS_ATTR_FLAGS_IN`).
    pub const fn flags_in(id: u16, p: Presence) -> Self {
        Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN,
            4,
            8,
            0,
            p,
        )
    }

    /// The handle of an object of type `obj_type` (`UVERBS_ATTR_IDR`).
    pub const fn idr(id: u16, obj_type: u16, access: Access, p: Presence) -> Self {
        let mut def = Self::ptr(
            id,
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_IDR,
            0,
            0,
            0,
            p,
        );
        def.0.attr.u.obj.obj_type = obj_type;
        def.0.attr.u.obj.access = access as u8;
        def
    }

    /// The driver request of a verb, read through [`Call::udata`] (`UVERBS_ATTR_UHW`).
    pub const UHW_IN: Self = Self::ptr(
        bindings::UVERBS_ATTR_UHW_IN as u16,
        bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN,
        0,
        u16::MAX,
        SPEC_IS_UDATA,
        Presence::Optional,
    );

    /// The driver response of a verb, written through [`Call::udata`] (`UVERBS_ATTR_UHW`).
    pub const UHW_OUT: Self = Self::ptr(
        bindings::UVERBS_ATTR_UHW_OUT as u16,
        bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT,
        0,
        u16::MAX,
        SPEC_IS_UDATA,
        Presence::Optional,
    );

    /// The attribute id.
    pub const fn id(&self) -> u16 {
        self.0.id
    }

    /// The object type of a handle attribute ([`AttrDef::idr`]); `None` for other kinds.
    pub const fn idr_type(&self) -> Option<u16> {
        if self.0.attr.type_ as u32 == bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_IDR {
            // SAFETY: Handle attributes use the `obj` arm of the union (`AttrDef::idr`).
            Some(unsafe { self.0.attr.u.obj.obj_type })
        } else {
            None
        }
    }

    /// Whether user space must give the attribute.
    pub fn presence(&self) -> Presence {
        if self.0.attr.mandatory() != 0 {
            Presence::Mandatory
        } else {
            Presence::Optional
        }
    }

    /// The raw specification.
    pub const fn as_raw(&self) -> &bindings::uverbs_attr_def {
        &self.0
    }
}

/// A method of driver `T`'s namespace: its id, attributes and handler.
pub trait Method {
    /// The driver the method belongs to.
    type Driver: Driver;
    /// The method id, from [`NS_DRIVER`] on for methods of the driver namespace.
    const ID: u16;
    /// The attributes of the method.
    const ATTRS: &'static [&'static AttrDef];

    /// Run the method. The attributes were checked against [`Method::ATTRS`] by the core.
    fn handle(call: &mut Call<'_, Self::Driver>) -> Result;
}

/// The specification of a method (`struct uverbs_method_def`).
#[repr(transparent)]
pub struct MethodDef<T: Driver>(bindings::uverbs_method_def, PhantomData<T>);

// SAFETY: A method definition is immutable and points only to `'static` attribute definitions
// and functions.
unsafe impl<T: Driver> Sync for MethodDef<T> {}

impl<T: Driver> MethodDef<T> {
    /// The definition of method `M`.
    pub const fn new<M: Method<Driver = T>>() -> Self {
        // SAFETY: All-zero is a valid `struct uverbs_method_def`.
        let mut def: bindings::uverbs_method_def = unsafe { zeroed() };
        def.id = M::ID;
        def.num_attrs = M::ATTRS.len();
        // `&AttrDef` has the representation of `*const struct uverbs_attr_def`.
        def.attrs = M::ATTRS.as_ptr().cast();
        def.handler = Some(method_handler::<M>);
        Self(def, PhantomData)
    }

    /// A method destroying the object named by its one attribute, an [`AttrDef::idr`] with
    /// [`Access::Destroy`] (`DECLARE_UVERBS_NAMED_METHOD_DESTROY`).
    pub const fn destroy(id: u16, handle: &'static [&'static AttrDef; 1]) -> Self {
        // SAFETY: All-zero is a valid `struct uverbs_method_def`.
        let mut def: bindings::uverbs_method_def = unsafe { zeroed() };
        def.id = id;
        def.num_attrs = 1;
        def.attrs = handle.as_ptr().cast();
        def.handler = Some(bindings::uverbs_destroy_def_handler);
        Self(def, PhantomData)
    }

    /// The method id.
    pub const fn id(&self) -> u16 {
        self.0.id
    }

    /// The attributes of the method.
    pub const fn attrs(&self) -> &[&AttrDef] {
        // SAFETY: `attrs` and `num_attrs` were taken from a `&'static [&'static AttrDef]`.
        unsafe { core::slice::from_raw_parts(self.0.attrs.cast(), self.0.num_attrs) }
    }
}

/// # Safety
///
/// Called only by the uverbs core, as the handler of method `M`.
unsafe extern "C" fn method_handler<M: Method>(bundle: *mut bindings::uverbs_attr_bundle) -> c_int {
    from_result(|| {
        // SAFETY: The core calls the handler with the parsed bundle of a call of method `M` of a
        // device of `M::Driver` (its namespace is only installed on those), valid for the call.
        let mut call = unsafe { Call::<M::Driver>::from_raw(bundle, M::ATTRS) };
        M::handle(&mut call)?;
        Ok(0)
    })
}

/// Why an object is being destroyed (`enum rdma_remove_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoveReason {
    /// User space destroys the handle; the only case that may fail.
    Destroy,
    /// The file was closed.
    Close,
    /// The device is going away.
    DriverRemove,
    /// The method creating it failed.
    Abort,
    /// A destroy failed and the device is being disconnected.
    DriverFailure,
}

impl RemoveReason {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::rdma_remove_reason_RDMA_REMOVE_DESTROY => Self::Destroy,
            bindings::rdma_remove_reason_RDMA_REMOVE_CLOSE => Self::Close,
            bindings::rdma_remove_reason_RDMA_REMOVE_DRIVER_REMOVE => Self::DriverRemove,
            bindings::rdma_remove_reason_RDMA_REMOVE_ABORT => Self::Abort,
            _ => Self::DriverFailure,
        }
    }
}

/// A driver object that user space holds by handle (an IDR object of the namespace).
///
/// Objects are created by a method with [`Call::new_object`], found by [`Call::object`] and
/// destroyed by a destroy method ([`MethodDef::destroy`]), by closing the device file, or when
/// the device goes away; they are dropped after [`Object::destroy`].
pub trait Object: Send + Sync + Sized + 'static {
    /// The driver of the object.
    type Driver: Driver;

    /// Release what the object holds on the device; `handle` is the handle going away. Only
    /// for [`RemoveReason::Destroy`] may this fail (the handle then stays); otherwise errors
    /// are ignored.
    fn destroy(&self, _handle: &Handle<'_, Self::Driver>, _why: RemoveReason) -> Result {
        Ok(())
    }
}

/// The handle of a driver object being destroyed (`struct ib_uobject`).
///
/// # Invariants
///
/// `raw` is a uobject of a context of driver `T` being destroyed, valid for `'a`; its context
/// is null or alive for `'a`.
pub struct Handle<'a, T: Driver> {
    raw: *mut bindings::ib_uobject,
    _p: PhantomData<(&'a bindings::ib_uobject, T)>,
}

impl<'a, T: Driver> Handle<'a, T> {
    /// The user context the handle belongs to. The core destroys a context's objects before
    /// the context itself, for every reason.
    pub fn ucontext(&self) -> Option<&'a Ucontext<T>> {
        // SAFETY: `raw` is valid (type invariants).
        let ctx = unsafe { (*self.raw).context };
        if ctx.is_null() {
            return None;
        }
        // SAFETY: A non-null context of the uobject is a live context of driver `T` for `'a`
        // (type invariants).
        Some(unsafe { Ucontext::from_raw(ctx) })
    }
}

#[repr(C)]
struct BoxHeader {
    tag: core::any::TypeId,
    destroy: unsafe fn(*mut BoxHeader, *mut bindings::ib_uobject, RemoveReason) -> Result,
}

#[repr(C)]
struct Boxed<O> {
    hdr: BoxHeader,
    obj: O,
}

/// # Safety
///
/// `hdr` must be the header of a live `Boxed<O>` made by [`Call::new_object`], owned by the
/// caller; `uobj` the uobject holding it, being destroyed, whose context is null or alive.
unsafe fn destroy_boxed<O: Object>(
    hdr: *mut BoxHeader,
    uobj: *mut bindings::ib_uobject,
    why: RemoveReason,
) -> Result {
    let ptr = hdr.cast::<Boxed<O>>();
    // INVARIANT: The core destroys `uobj`, of a context of `O::Driver`, before its context.
    let handle = Handle::<O::Driver> {
        raw: uobj,
        _p: PhantomData,
    };
    // SAFETY: `ptr` is a live `Boxed<O>` by the safety requirements.
    let res = unsafe { (*ptr).obj.destroy(&handle, why) };
    if why == RemoveReason::Destroy {
        res?;
    }
    // SAFETY: The box came from `KBox::into_raw` in `new_object` and is owned by the caller.
    drop(unsafe { KBox::from_raw(ptr) });
    Ok(())
}

/// # Safety
///
/// Called only by the uverbs core, as `destroy_object` of an [`ObjType::IDR`] object.
unsafe extern "C" fn idr_destroy(
    uobj: *mut bindings::ib_uobject,
    why: bindings::rdma_remove_reason,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: `uobj` is the uobject being destroyed; its object is null or a box made by
    // `new_object`, whose header knows its type.
    unsafe {
        let hdr = (*uobj).object.cast::<BoxHeader>();
        if hdr.is_null() {
            return 0;
        }
        match ((*hdr).destroy)(hdr, uobj, RemoveReason::from_raw(why)) {
            Ok(()) => {
                (*uobj).object = core::ptr::null_mut();
                0
            }
            Err(e) => e.to_errno(),
        }
    }
}

/// The type of driver objects held by handle (`UVERBS_TYPE_ALLOC_IDR`).
#[repr(transparent)]
pub struct ObjType(bindings::uverbs_obj_idr_type);

// SAFETY: The type is immutable and points to the core's `'static` IDR class and to a function.
unsafe impl Sync for ObjType {}

/// The one type of every driver object ([`Object`]): handles in the uverbs IDR, destroyed
/// through [`Object::destroy`].
pub static IDR_OBJECT: ObjType = ObjType(bindings::uverbs_obj_idr_type {
    type_: bindings::uverbs_obj_type {
        type_class: &raw const bindings::uverbs_idr_class,
        obj_size: core::mem::size_of::<bindings::ib_uobject>(),
    },
    destroy_object: Some(idr_destroy),
});

/// The specification of an object and its methods (`struct uverbs_object_def`).
#[repr(transparent)]
pub struct ObjectDef<T: Driver>(bindings::uverbs_object_def, PhantomData<T>);

// SAFETY: An object definition is immutable and points only to `'static` definitions.
unsafe impl<T: Driver> Sync for ObjectDef<T> {}

impl<T: Driver> ObjectDef<T> {
    /// An object without handles, whose methods are called on the device
    /// (`DECLARE_UVERBS_GLOBAL_METHODS`). `id` may also be a core object (for example
    /// `UVERBS_OBJECT_DEVICE`) to which the driver adds methods.
    pub const fn global(id: u16, methods: &'static [&'static MethodDef<T>]) -> Self {
        // SAFETY: All-zero is a valid `struct uverbs_object_def`.
        let mut def: bindings::uverbs_object_def = unsafe { zeroed() };
        def.id = id;
        def.num_methods = methods.len();
        // `&MethodDef<T>` has the representation of `*const struct uverbs_method_def`.
        def.methods = methods.as_ptr().cast();
        Self(def, PhantomData)
    }

    /// An object whose instances user space holds by handle ([`Object`]), with its methods
    /// (`DECLARE_UVERBS_NAMED_OBJECT` with `UVERBS_TYPE_ALLOC_IDR`).
    pub const fn with_handles(id: u16, methods: &'static [&'static MethodDef<T>]) -> Self {
        let mut def = Self::global(id, methods);
        def.0.type_attrs = &IDR_OBJECT.0.type_;
        def
    }

    /// The object id.
    pub const fn id(&self) -> u16 {
        self.0.id
    }

    /// The methods of the object.
    pub const fn methods(&self) -> &[&MethodDef<T>] {
        // SAFETY: `methods` and `num_methods` were taken from a `&'static [&'static MethodDef]`.
        unsafe { core::slice::from_raw_parts(self.0.methods.cast(), self.0.num_methods) }
    }
}

/// One entry of a driver's uAPI definitions (`struct uapi_definition`).
#[repr(transparent)]
pub struct UapiDef<T: Driver>(bindings::uapi_definition, PhantomData<T>);

// SAFETY: A definition is immutable and points only to `'static` definitions.
unsafe impl<T: Driver> Sync for UapiDef<T> {}

impl<T: Driver> UapiDef<T> {
    /// The end of the definitions.
    pub const END: Self = Self(
        // SAFETY: All-zero is a valid `struct uapi_definition`, of kind `UAPI_DEF_END`.
        unsafe { zeroed() },
        PhantomData,
    );

    /// Add object `obj` and its methods (`UAPI_DEF_CHAIN_OBJ_TREE_NAMED`).
    pub const fn object(obj: &'static ObjectDef<T>) -> Self {
        // SAFETY: All-zero is a valid `struct uapi_definition`.
        let mut def: bindings::uapi_definition = unsafe { zeroed() };
        def.kind = bindings::uapi_definition_kind_UAPI_DEF_CHAIN_OBJ_TREE as u8;
        def.__bindgen_anon_1.object_start.object_id = obj.id();
        def.__bindgen_anon_2.chain_obj_tree = &obj.0;
        Self(def, PhantomData)
    }

    /// The kind of the entry (`enum uapi_definition_kind`).
    pub const fn kind(&self) -> u8 {
        self.0.kind
    }

    /// Check that `defs` ends with [`UapiDef::END`] and holds no other end.
    pub fn check_terminated(defs: &[Self]) -> Result {
        let end = bindings::uapi_definition_kind_UAPI_DEF_END as u8;
        match defs.iter().position(|d| d.kind() == end) {
            Some(i) if i + 1 == defs.len() => Ok(()),
            _ => Err(EINVAL),
        }
    }
}

/// The attributes of one call of a method of driver `T` (`struct uverbs_attr_bundle`).
///
/// # Invariants
///
/// `raw` is the parsed attribute bundle of a running call of a method on a device of driver `T`,
/// whose attributes the core checked against `attrs`.
pub struct Call<'a, T: Driver> {
    raw: *mut bindings::uverbs_attr_bundle,
    attrs: &'static [&'static AttrDef],
    _p: PhantomData<(&'a mut bindings::uverbs_attr_bundle, T)>,
}

impl<'a, T: Driver> Call<'a, T> {
    /// # Safety
    ///
    /// `raw` must be the bundle of a running call of a method on a device of driver `T`, valid
    /// for `'a`, parsed by the core against the attribute specifications `attrs`.
    pub(crate) unsafe fn from_raw(
        raw: *mut bindings::uverbs_attr_bundle,
        attrs: &'static [&'static AttrDef],
    ) -> Self {
        // INVARIANT: By the safety requirements.
        Self {
            raw,
            attrs,
            _p: PhantomData,
        }
    }

    /// The object type of attribute `id` if the method declares it as a handle: only then does
    /// the bundle hold a uobject for it (for other kinds the same slot holds the user's inline
    /// data). `EINVAL` for an attribute the method does not have or that is not a handle.
    fn idr_type(&self, id: u16) -> Result<u16> {
        self.attrs
            .iter()
            .find(|a| a.id() == id)
            .and_then(|a| a.idr_type())
            .ok_or(EINVAL)
    }

    /// The uobject of handle attribute `id`, once [`Self::idr_type`] said it is one.
    fn uobject(&self, id: u16) -> Result<*mut bindings::ib_uobject> {
        // SAFETY: `raw` is a valid bundle.
        let uobj =
            crate::error::from_err_ptr(unsafe { bindings::uverbs_attr_get_uobject(self.raw, id) })?;
        if uobj.is_null() {
            return Err(EINVAL);
        }
        Ok(uobj)
    }

    /// Whether `uobj`, the uobject of a handle attribute, is a driver object ([`Object`]),
    /// whose object pointer is a [`Boxed`] value.
    ///
    /// # Safety
    ///
    /// `uobj` must be the uobject of a handle attribute of this call.
    unsafe fn is_driver_object(uobj: *mut bindings::ib_uobject) -> bool {
        // SAFETY: A uobject of a parsed handle attribute points to its object type's uAPI
        // description for as long as the call runs.
        let api = unsafe { (*uobj).uapi_object };
        // SAFETY: As above; `api` is valid if not null.
        !api.is_null() && core::ptr::eq(unsafe { (*api).type_attrs }, &IDR_OBJECT.0.type_)
    }

    /// The raw attribute bundle.
    pub fn as_raw(&self) -> *mut bindings::uverbs_attr_bundle {
        self.raw
    }

    /// The user context of the calling process; `EIO` once it is disassociated.
    pub fn ucontext(&self) -> Result<&'a Ucontext<T>> {
        // SAFETY: `raw` is a valid bundle by the type invariants.
        let ctx =
            crate::error::from_err_ptr(unsafe { bindings::ib_uverbs_get_ucontext(self.raw) })?;
        if ctx.is_null() {
            return Err(EIO);
        }
        // SAFETY: The context of the calling file, on this device of driver `T`, lives for the
        // call: the core holds the file's disassociation lock while a method runs.
        Ok(unsafe { Ucontext::from_raw(ctx) })
    }

    /// The device of the call.
    pub fn device(&self) -> Result<&'a Device<T>> {
        Ok(self.ucontext()?.device())
    }

    /// Whether user space gave attribute `id`.
    pub fn has(&self, id: u16) -> bool {
        // SAFETY: `raw` is a valid bundle by the type invariants.
        unsafe { bindings::uverbs_attr_is_valid(self.raw, id.into()) }
    }

    /// The length user space gave for attribute `id`; `ENOENT` without it.
    pub fn len(&self, id: u16) -> Result<usize> {
        // SAFETY: `raw` is a valid bundle by the type invariants.
        let len = unsafe { bindings::uverbs_attr_get_len(self.raw, id) };
        crate::error::to_result(len)?;
        Ok(len as usize)
    }

    /// The value of integer attribute `id`, which must lie in `min..=max` (`EINVAL`
    /// otherwise); `ENOENT` if user space did not give it.
    pub fn const_in(&self, id: u16, min: u64, max: u64) -> Result<u64> {
        if !self.has(id) {
            return Err(ENOENT);
        }
        let mut value = 0u64;
        // SAFETY: `raw` is a valid bundle; `value` is valid for writes; no default is passed.
        crate::error::to_result(unsafe {
            bindings::_uverbs_get_const_unsigned(
                &mut value,
                self.raw,
                id.into(),
                max,
                core::ptr::null_mut(),
            )
        })?;
        if value < min {
            return Err(EINVAL);
        }
        Ok(value)
    }

    /// The flags of attribute `id`: `EINVAL` if any bit outside `allowed` is set; zero if user
    /// space did not give it.
    pub fn flags(&self, id: u16, allowed: u64) -> Result<u64> {
        let mut value = 0u64;
        // SAFETY: `raw` is a valid bundle; `value` is valid for writes.
        crate::error::to_result(unsafe {
            bindings::uverbs_get_flags64(&mut value, self.raw, id.into(), allowed)
        })?;
        Ok(value)
    }

    /// Read input structure `S` of attribute `id`; a shorter extensible input leaves the rest
    /// zero. `ENOENT` if user space did not give it.
    pub fn read<S: FromBytes + IntoBytes>(&self, id: u16) -> Result<S> {
        let mut value = S::new_zeroed();
        let bytes = value.as_mut_bytes();
        // SAFETY: `raw` is a valid bundle; `bytes` is valid for writes of its length.
        crate::error::to_result(unsafe {
            bindings::_uverbs_copy_from_or_zero(
                bytes.as_mut_ptr().cast(),
                self.raw,
                id.into(),
                bytes.len(),
            )
        })?;
        Ok(value)
    }

    /// The driver data of the call (`UVERBS_ATTR_UHW_IN` and `UVERBS_ATTR_UHW_OUT`).
    pub fn udata(&mut self) -> Result<Udata<'_>> {
        // SAFETY: `raw` is a valid bundle; its driver data lives as long as the call.
        unsafe { Udata::from_raw(bindings::rdma_uverbs_attr_bundle_udata(self.raw)) }
    }

    /// Make `value` the object of the new handle of attribute `id` (an [`AttrDef::idr`] with
    /// [`Access::New`]). From here on the object belongs to the handle: if the method fails
    /// later, the core destroys it ([`Object::destroy`] with [`RemoveReason::Abort`]).
    pub fn new_object<O: Object<Driver = T>>(&mut self, id: u16, value: O) -> Result<&'a O> {
        self.idr_type(id)?;
        let uobj = self.uobject(id)?;
        // SAFETY: `uobj` is the uobject of handle attribute `id`, alive for the call.
        if !unsafe { Self::is_driver_object(uobj) } || !unsafe { (*uobj).object }.is_null() {
            return Err(EINVAL);
        }
        let boxed = KBox::new(
            Boxed {
                hdr: BoxHeader {
                    tag: core::any::TypeId::of::<O>(),
                    destroy: destroy_boxed::<O>,
                },
                obj: value,
            },
            GFP_KERNEL,
        )?;
        let ptr = KBox::into_raw(boxed);
        // SAFETY: The new uobject takes the box; committing it early makes the core destroy it
        // (through its type's `destroy_object`, [`idr_destroy`]) if the method fails later.
        unsafe {
            (*uobj).object = ptr.cast();
            bindings::uverbs_finalize_uobj_create(self.raw, id);
            Ok(&(*ptr).obj)
        }
    }

    /// The object of handle attribute `id` (an [`AttrDef::idr`] with [`Access::Read`],
    /// [`Access::Write`] or [`Access::Destroy`]); `EINVAL` if it is not an `O`.
    pub fn object<O: Object<Driver = T>>(&self, id: u16) -> Result<&'a O> {
        self.idr_type(id)?;
        let uobj = self.uobject(id)?;
        // SAFETY: `uobj` is the uobject of handle attribute `id`, alive for the call.
        if !unsafe { Self::is_driver_object(uobj) } {
            return Err(EINVAL);
        }
        // SAFETY: `uobj` is the locked uobject of attribute `id`, alive for the call.
        let hdr = unsafe { (*uobj).object }.cast::<BoxHeader>();
        if hdr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Objects of uobjects with `IDR_OBJECT` type are `Boxed` values, whose header
        // comes first.
        if unsafe { (*hdr).tag } != core::any::TypeId::of::<O>() {
            return Err(EINVAL);
        }
        // SAFETY: The tag says this is a `Boxed<O>`, alive while the uobject is locked.
        Ok(unsafe { &(*hdr.cast::<Boxed<O>>()).obj })
    }

    /// The memory region of handle attribute `id` (an [`AttrDef::idr`] of `UVERBS_OBJECT_MR`).
    pub fn mr(&self, id: u16) -> Result<&'a crate::rdma::Mr<T>> {
        if self.idr_type(id)? != OBJECT_MR {
            return Err(EINVAL);
        }
        let uobj = self.uobject(id)?;
        // SAFETY: `uobj` is the locked uobject of attribute `id`, alive for the call.
        let mr = unsafe { (*uobj).object }.cast::<bindings::ib_mr>();
        if mr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The method declares attribute `id` as a handle of `UVERBS_OBJECT_MR` (checked
        // above), so the core checked the handle is an MR of the calling context, a device of
        // driver `T`; it stays locked, and alive, for the call.
        Ok(unsafe { crate::rdma::Mr::from_raw(mr) })
    }

    /// The protection domain of handle attribute `id` (an [`AttrDef::idr`] of
    /// `UVERBS_OBJECT_PD`).
    pub fn pd(&self, id: u16) -> Result<&'a crate::rdma::Pd<T>> {
        if self.idr_type(id)? != OBJECT_PD {
            return Err(EINVAL);
        }
        let uobj = self.uobject(id)?;
        // SAFETY: `uobj` is the locked uobject of attribute `id`, alive for the call.
        let pd = unsafe { (*uobj).object }.cast::<bindings::ib_pd>();
        if pd.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: The method declares attribute `id` as a handle of `UVERBS_OBJECT_PD` (checked
        // above), so the core checked the handle is a PD of the calling context, a device of
        // driver `T`, whose data is initialised; it stays locked, and alive, for the call.
        Ok(unsafe { crate::rdma::Pd::from_raw(pd) })
    }

    /// Write `values` to output array attribute `id` ([`AttrDef::array_out`]): `ENOSPC` if
    /// user space gave room for fewer, `ENOENT` if it did not give the attribute.
    pub fn write_slice<S: IntoBytes + Immutable>(&mut self, id: u16, values: &[S]) -> Result {
        let bytes = values.as_bytes();
        if self.len(id)? < bytes.len() {
            return Err(ENOSPC);
        }
        // SAFETY: `raw` is a valid bundle; `bytes` is valid for reads of its length.
        crate::error::to_result(unsafe {
            bindings::uverbs_copy_to(self.raw, id.into(), bytes.as_ptr().cast(), bytes.len())
        })
    }

    /// Write `value` to output attribute `id`, truncated to the room user space gave.
    /// `ENOENT` if user space did not give it.
    pub fn write<S: IntoBytes + Immutable>(&mut self, id: u16, value: &S) -> Result {
        let bytes = value.as_bytes();
        // SAFETY: `raw` is a valid bundle; `bytes` is valid for reads of its length.
        crate::error::to_result(unsafe {
            bindings::uverbs_copy_to(self.raw, id.into(), bytes.as_ptr().cast(), bytes.len())
        })
    }
}

#[macros::kunit_tests(rust_kernel_rdma_uverbs)]
mod tests {
    use super::*;

    fn bits(flags: u8) -> [u8; 4] {
        let def = AttrDef::ptr(0, 0, 0, 0, flags, Presence::Optional);
        [
            def.0.attr.zero_trailing(),
            def.0.attr.alloc_and_copy(),
            def.0.attr.mandatory(),
            def.0.attr.is_udata(),
        ]
    }

    /// The bit positions used by the `const` constructors are those of the C bitfields, as
    /// bindgen's accessors read them.
    #[test]
    fn spec_bitfield_layout() {
        assert_eq!(bits(0), [0, 0, 0, 0]);
        assert_eq!(bits(SPEC_ZERO_TRAILING), [1, 0, 0, 0]);
        assert_eq!(bits(SPEC_ALLOC_AND_COPY), [0, 1, 0, 0]);
        assert_eq!(bits(SPEC_MANDATORY), [0, 0, 1, 0]);
        assert_eq!(bits(SPEC_IS_UDATA), [0, 0, 0, 1]);
    }

    #[test]
    fn attr_specs() {
        let a = AttrDef::const_in(NS_DRIVER + 3, Presence::Mandatory);
        assert_eq!(a.id(), NS_DRIVER + 3);
        assert_eq!(a.0.attr.mandatory(), 1);
        assert_eq!(a.0.attr.zero_trailing(), 0);
        assert_eq!(
            u32::from(a.0.attr.type_),
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_IN
        );
        // SAFETY: A pointer attribute's specification uses the `ptr` arm.
        let (len, min) = unsafe { (a.0.attr.u.ptr.len, a.0.attr.u.ptr.min_len) };
        assert_eq!((len, min), (8, 8));

        let o = AttrDef::ptr_out::<[u32; 6]>(NS_DRIVER, Presence::Optional);
        assert_eq!(o.presence(), Presence::Optional);
        assert_eq!(
            u32::from(o.0.attr.type_),
            bindings::uverbs_attr_type_UVERBS_ATTR_TYPE_PTR_OUT
        );
        // SAFETY: As above.
        assert_eq!(unsafe { o.0.attr.u.ptr.len }, 24);

        let e = AttrDef::ptr_in_ext::<[u64; 4]>(1, 8, Presence::Mandatory);
        assert_eq!(e.0.attr.zero_trailing(), 1);
        // SAFETY: As above.
        let (len, min) = unsafe { (e.0.attr.u.ptr.len, e.0.attr.u.ptr.min_len) };
        assert_eq!((len, min), (32, 8));

        let h = AttrDef::idr(2, 7, Access::Destroy, Presence::Mandatory);
        // SAFETY: An object attribute's specification uses the `obj` arm.
        let (ty, access) = unsafe { (h.0.attr.u.obj.obj_type, h.0.attr.u.obj.access) };
        assert_eq!((ty, access), (7, Access::Destroy as u8));

        assert_eq!(AttrDef::UHW_IN.0.attr.is_udata(), 1);
        assert_eq!(AttrDef::UHW_OUT.0.attr.is_udata(), 1);
        assert_eq!(AttrDef::UHW_IN.presence(), Presence::Optional);
    }

    struct TestDriver;

    #[vtable]
    impl Driver for TestDriver {
        type Data = ();
        type Ucontext = ();
        type Pd = ();
        type Cq = ();
        type Qp = ();
        type Mr = ();
        type MmapEntry = ();
        const NAME: &'static CStr = c"test_%d";
        const DRIVER_ID: u32 = 0;

        fn query_device(_: &Device<Self>) -> Result<crate::rdma::DeviceAttr> {
            Err(EINVAL)
        }

        fn query_port(_: &Device<Self>, _: u32) -> Result<crate::rdma::PortAttr> {
            Err(EINVAL)
        }

        fn get_port_immutable(_: &Device<Self>, _: u32) -> Result<crate::rdma::PortImmutable> {
            Err(EINVAL)
        }

        fn alloc_ucontext(
            _: &Device<Self>,
            _: &mut crate::rdma::Udata<'_>,
        ) -> impl PinInit<(), Error> {
            Err::<(), Error>(EINVAL)
        }

        fn alloc_pd(
            _: &Device<Self>,
            _: Option<&mut crate::rdma::User<'_, Self>>,
        ) -> impl PinInit<(), Error> {
            Err::<(), Error>(EINVAL)
        }
    }

    /// An attribute bundle as the core builds it after parsing, with inline values.
    #[repr(C)]
    struct FakeBundle {
        bundle: bindings::uverbs_attr_bundle,
        attrs: [bindings::uverbs_attr; 8],
    }

    fn fake(values: &[(u16, u16, u64)]) -> KBox<FakeBundle> {
        let mut b = KBox::new(
            FakeBundle {
                // SAFETY: All-zero is a valid attribute bundle (no attribute present).
                bundle: unsafe { zeroed() },
                attrs: pin_init::zeroed(),
            },
            GFP_KERNEL,
        )
        .unwrap();
        for &(id, len, value) in values {
            // SAFETY: Pure functions of the id.
            let bkey = unsafe { bindings::uapi_bkey_attr(bindings::uapi_key_attr(id.into())) };
            let bkey = bkey as usize;
            // SAFETY: The zeroed header is a valid value of either arm of the union.
            let hdr = unsafe { &mut b.bundle.__bindgen_anon_1.__bindgen_anon_1 };
            hdr.attr_present[bkey / 64] |= 1 << (bkey % 64);
            // SAFETY: Pointer attributes use the `ptr_attr` arm; zeroed memory is valid for it.
            let ptr = unsafe { &mut b.attrs[bkey].__bindgen_anon_1.ptr_attr };
            ptr.len = len;
            ptr.__bindgen_anon_1.data = value;
        }
        b
    }

    #[test]
    fn bundle_attributes() {
        const A: u16 = NS_DRIVER;
        const B: u16 = NS_DRIVER + 1;
        const C: u16 = 2;
        const ABSENT: u16 = NS_DRIVER + 2;
        let mut b = fake(&[(A, 8, 5), (B, 8, 11), (C, 4, 0x1234_5678)]);
        // SAFETY: The fake bundle lives for the calls; only inline attributes are read.
        let call = unsafe { Call::<TestDriver>::from_raw(&mut b.bundle, &[]) };
        assert!(call.has(A) && call.has(B) && call.has(C));
        assert!(!call.has(ABSENT));
        assert_eq!(call.len(A), Ok(8));
        assert_eq!(call.len(C), Ok(4));
        assert_eq!(call.len(ABSENT), Err(ENOENT));
        assert_eq!(call.const_in(A, 1, 10), Ok(5));
        assert_eq!(call.const_in(A, 6, 10), Err(EINVAL));
        assert_eq!(call.const_in(B, 1, 10), Err(EINVAL));
        assert_eq!(call.const_in(ABSENT, 0, 10), Err(ENOENT));
        // A 4-byte input read as 8 bytes: the rest is zero.
        assert_eq!(call.read::<u64>(C), Ok(0x1234_5678));
        assert_eq!(call.read::<u64>(ABSENT), Err(ENOENT));
        assert_eq!(call.flags(A, 0xff), Ok(5));
        assert_eq!(call.flags(A, 0x4), Err(EINVAL));
    }

    /// Handle lookups trust only attributes the method declares as handles: for any other id
    /// the bundle's slot holds user data (here the value 0x1000, which must never be used as
    /// a pointer), so the call is refused before the bundle is read.
    #[test]
    fn handle_attributes_checked() {
        const PTR: u16 = NS_DRIVER;
        const CONST: u16 = NS_DRIVER + 1;
        const MR: u16 = NS_DRIVER + 2;
        const UNDECLARED: u16 = NS_DRIVER + 3;
        static ATTRS: [&AttrDef; 3] = [
            &AttrDef::ptr_in::<u64>(PTR, Presence::Mandatory),
            &AttrDef::const_in(CONST, Presence::Mandatory),
            &AttrDef::idr(MR, OBJECT_MR, Access::Read, Presence::Mandatory),
        ];
        assert_eq!(ATTRS[0].idr_type(), None);
        assert_eq!(ATTRS[1].idr_type(), None);
        assert_eq!(ATTRS[2].idr_type(), Some(OBJECT_MR));
        let mut b = fake(&[
            (PTR, 8, 0x1000),
            (CONST, 8, 0x1000),
            (UNDECLARED, 8, 0x1000),
        ]);
        // SAFETY: The fake bundle lives for the calls; every lookup below is refused before it
        // reads a uobject from it.
        let mut call = unsafe { Call::<TestDriver>::from_raw(&mut b.bundle, &ATTRS) };
        for id in [PTR, CONST, UNDECLARED] {
            assert_eq!(call.object::<TestObj>(id).err(), Some(EINVAL));
            assert_eq!(call.mr(id).err(), Some(EINVAL));
            assert_eq!(
                call.new_object(id, TestObj { refuse: false }).err(),
                Some(EINVAL)
            );
        }
    }

    static DROPS: crate::sync::atomic::Atomic<u32> = crate::sync::atomic::Atomic::new(0);

    struct TestObj {
        refuse: bool,
    }

    impl Object for TestObj {
        type Driver = TestDriver;

        fn destroy(&self, _handle: &Handle<'_, TestDriver>, _why: RemoveReason) -> Result {
            if self.refuse {
                Err(EBUSY)
            } else {
                Ok(())
            }
        }
    }

    impl Drop for TestObj {
        fn drop(&mut self) {
            DROPS.add(1, crate::sync::atomic::Relaxed);
        }
    }

    /// A uobject holding a `TestObj`, as `Call::new_object` leaves it.
    fn uobject(refuse: bool) -> bindings::ib_uobject {
        let mut uobj: bindings::ib_uobject = pin_init::zeroed();
        let b = KBox::new(
            Boxed {
                hdr: BoxHeader {
                    tag: core::any::TypeId::of::<TestObj>(),
                    destroy: destroy_boxed::<TestObj>,
                },
                obj: TestObj { refuse },
            },
            GFP_KERNEL,
        )
        .unwrap();
        uobj.object = KBox::into_raw(b).cast();
        uobj
    }

    #[test]
    fn object_destroy() {
        use crate::sync::atomic::Relaxed;
        let destroy = bindings::rdma_remove_reason_RDMA_REMOVE_DESTROY;
        let close = bindings::rdma_remove_reason_RDMA_REMOVE_CLOSE;
        let before = DROPS.load(Relaxed);

        let mut ok = uobject(false);
        // SAFETY: `ok` holds a box made as `new_object` does.
        let ret = unsafe { idr_destroy(&mut ok, destroy, core::ptr::null_mut()) };
        assert_eq!(ret, 0);
        assert!(ok.object.is_null());
        assert_eq!(DROPS.load(Relaxed), before + 1);

        // A refused destroy keeps the object; a close drops it anyway.
        let mut busy = uobject(true);
        // SAFETY: As above.
        let ret = unsafe { idr_destroy(&mut busy, destroy, core::ptr::null_mut()) };
        assert_eq!(ret, EBUSY.to_errno());
        assert!(!busy.object.is_null());
        assert_eq!(DROPS.load(Relaxed), before + 1);
        // SAFETY: As above.
        let ret = unsafe { idr_destroy(&mut busy, close, core::ptr::null_mut()) };
        assert_eq!(ret, 0);
        assert_eq!(DROPS.load(Relaxed), before + 2);

        // An aborted creation that never got an object.
        let mut empty: bindings::ib_uobject = pin_init::zeroed();
        // SAFETY: A uobject without object.
        let ret = unsafe { idr_destroy(&mut empty, close, core::ptr::null_mut()) };
        assert_eq!(ret, 0);
    }

    #[test]
    fn definitions_end() {
        static M: [&AttrDef; 1] = [&AttrDef::const_in(NS_DRIVER, Presence::Mandatory)];
        assert_eq!(M[0].id(), NS_DRIVER);
        let defs: [UapiDef<TestDriver>; 1] = [UapiDef::END];
        assert_eq!(UapiDef::check_terminated(&defs), Ok(()));
        let empty: [UapiDef<TestDriver>; 0] = [];
        assert_eq!(UapiDef::check_terminated(&empty), Err(EINVAL));
        let two: [UapiDef<TestDriver>; 2] = [UapiDef::END, UapiDef::END];
        assert_eq!(UapiDef::check_terminated(&two), Err(EINVAL));
    }
}
