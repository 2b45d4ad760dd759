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
pub mod print;
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
    DeviceAttr, Event, Gid, GidAttr, GidType, LinkLayer, Mtu, PhysState, PortAttr, PortImmutable,
    PortProtocol, PortSpeed, PortState, PortWidth,
};
pub use udata::{Udata, User};
