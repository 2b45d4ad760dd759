// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand verbs) device drivers.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! An RDMA driver implements [`Driver`]: the verbs it supports, as typed methods, and the types
//! of its private data for the device and for each object the RDMA core creates on its behalf
//! (user contexts, protection domains, ...). The core allocates those objects with room for the
//! driver's data, which is initialised in place (pin-init) by the driver's callbacks and dropped
//! when the core destroys the object; [`Ucontext`] and [`Pd`] are such objects.
//!
//! [`Registration::new`] allocates and registers a [`Device`] for a bound parent device; the
//! registration is device-managed and undone at unbind. A driver may add its own uverbs ioctl
//! methods ([`uverbs`]) and reads the driver data of user verbs through [`Udata`].
//!
//! See [`device`] for a complete minimal driver.

/// Methods of a `u32` flags type whose bits come from C (and from user space unchecked).
macro_rules! raw_flags {
    ($name:ident) => {
        impl $name {
            /// The flags of a raw value, as the core or user space passes it.
            pub const fn from_raw(raw: u32) -> Self {
                Self(raw)
            }

            /// The raw value.
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// The flags not in `other`.
            pub const fn without(self, other: Self) -> Self {
                Self(self.0 & !other.0)
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                Self(self.0 | rhs.0)
            }
        }
    };
}
pub(crate) use raw_flags;

pub mod cq;
pub mod device;
pub mod mmap;
pub mod qp;
pub mod types;
pub mod udata;
pub mod umem;
pub mod uverbs;
pub mod wr;

pub use device::{
    Cq, Device, DeviceHandle, DmabufMr, Driver, Mr, MrKeys, NodeType, Options, Pd, Qp, QpEvent,
    Registration, Ucontext, UserMr,
};
pub use types::{
    driver_id, DeviceAttr, Event, Gid, LinkLayer, Mtu, PhysState, PortAttr, PortImmutable,
    PortProtocol, PortSpeed, PortState, PortWidth,
};
pub use udata::{Udata, User};

/// Declare a structure of a driver's RDMA uAPI (udata or ioctl attribute), matching its C
/// declaration in `include/uapi/rdma/`.
///
/// The structure is `#[repr(C)]`, `Default` (all zero) and implements
/// [`FromBytes`](crate::transmute::FromBytes) and [`AsBytes`](crate::transmute::AsBytes), so
/// [`Udata`] and [`uverbs::Call`] can copy it from and to user space. The build fails if it has
/// padding (every byte must be a declared field, reserved fields included) or if its size is not
/// a multiple of 8 bytes, as the uAPI rules require.
///
/// # Examples
///
/// ```
/// kernel::rdma::uapi_struct! {
///     /// `struct my_alloc_pd_resp`.
///     pub struct AllocPdResp {
///         pub comp_mask: u32,
///         pub pdn: u32,
///     }
/// }
///
/// let resp = AllocPdResp { pdn: 3, ..Default::default() };
/// assert_eq!(kernel::transmute::AsBytes::as_bytes(&resp), &[0, 0, 0, 0, 3, 0, 0, 0]);
/// ```
#[macro_export]
macro_rules! rdma_uapi_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty),*
        }

        const _: () = {
            ::core::assert!(
                ::core::mem::size_of::<$name>() == 0 $(+ ::core::mem::size_of::<$ty>())*,
                "uAPI structures must not have padding"
            );
            ::core::assert!(
                ::core::mem::size_of::<$name>() % 8 == 0,
                "uAPI structures must be a multiple of 8 bytes"
            );
        };

        const _: fn() = || {
            fn plain<T: $crate::transmute::FromBytes + $crate::transmute::AsBytes>() {}
            $(plain::<$ty>();)*
        };

        // SAFETY: The structure is `#[repr(C)]` without padding (checked above) and all its
        // fields are `FromBytes`, so any bytes make a valid value.
        unsafe impl $crate::transmute::FromBytes for $name {}
        // SAFETY: The structure is `#[repr(C)]` without padding (checked above) and all its
        // fields are `AsBytes`, so all its bytes are initialised.
        unsafe impl $crate::transmute::AsBytes for $name {}
    };
}

pub use crate::rdma_uapi_struct as uapi_struct;
