// SPDX-License-Identifier: GPL-2.0

//! Driver data of user verbs (`struct ib_udata`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! Most verbs carry, next to their standard arguments, a driver-specific request from user
//! space and room for a driver-specific response. Their layouts live in the driver's uAPI header
//! (`include/uapi/rdma/<driver>-abi.h`) and follow the rules of extensible structures: a newer
//! user space may send a longer request whose extra bytes are zero, and an older one may offer
//! less room for the response, which is then truncated.
//!
//! # Examples
//!
//! The structures come from the uAPI header, through the `uapi` crate, which derives zerocopy's
//! [`FromBytes`], [`IntoBytes`] and [`Immutable`] for them: the build fails if one has padding.
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::Udata;
//! use zerocopy_derive::Immutable;
//!
//! // As the `uapi` crate generates it from `struct my_alloc_pd_resp`.
//! #[repr(C)]
//! #[derive(FromBytes, IntoBytes, Immutable)]
//! struct AllocPdResp {
//!     pdn: u32,
//!     reserved: u32,
//! }
//!
//! fn respond(udata: &mut Udata<'_>, pdn: u32) -> Result {
//!     udata.write(&AllocPdResp { pdn, reserved: 0 })
//! }
//! ```

use crate::{
    bindings,
    prelude::*,
    rdma::{Driver, Ucontext},
    uaccess::{UserPtr, UserSlice},
};
use core::marker::PhantomData;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The driver data of one user verb.
///
/// # Invariants
///
/// `raw` points to a valid `struct ib_udata` for `'a`.
pub struct Udata<'a> {
    raw: *mut bindings::ib_udata,
    _p: PhantomData<&'a mut bindings::ib_udata>,
}

impl<'a> Udata<'a> {
    /// Wrap a raw `struct ib_udata`; `EINVAL` if it is null (a kernel caller).
    ///
    /// # Safety
    ///
    /// A non-null `raw` must be valid for `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Result<Self> {
        if raw.is_null() {
            return Err(EINVAL);
        }
        // INVARIANT: `raw` is non-null and valid for `'a` by the safety requirements.
        Ok(Self {
            raw,
            _p: PhantomData,
        })
    }

    /// The raw `struct ib_udata`.
    pub fn as_raw(&self) -> *mut bindings::ib_udata {
        self.raw
    }

    /// Length of the request from user space, in bytes.
    pub fn in_len(&self) -> usize {
        // SAFETY: `raw` is valid by the type invariants.
        unsafe { (*self.raw).inlen }
    }

    /// Room for the response, in bytes.
    pub fn out_len(&self) -> usize {
        // SAFETY: `raw` is valid by the type invariants.
        unsafe { (*self.raw).outlen }
    }

    /// Read the request as a `T`.
    ///
    /// A shorter request (an older user space) leaves the rest of `T` zero. A longer request is
    /// accepted only if the bytes beyond `T` are zero (a newer user space not using features
    /// this kernel lacks), otherwise it fails with `EOPNOTSUPP`.
    pub fn read<T: FromBytes + IntoBytes>(&self) -> Result<T> {
        let mut value = T::new_zeroed();
        let size = core::mem::size_of::<T>();
        let len = self.in_len();
        // SAFETY: `raw` is valid by the type invariants.
        let ptr = UserPtr::from_ptr(unsafe { (*self.raw).inbuf }.cast_mut());
        let mut reader = UserSlice::new(ptr, len).reader();
        let n = len.min(size);
        reader.read_slice(&mut value.as_mut_bytes()[..n])?;
        // The extra bytes of a longer request must be zero.
        let mut chunk = [0u8; 64];
        while !reader.is_empty() {
            let n = reader.len().min(chunk.len());
            reader.read_slice(&mut chunk[..n])?;
            if chunk[..n].iter().any(|b| *b != 0) {
                return Err(EOPNOTSUPP);
            }
        }
        Ok(value)
    }

    /// Write the response `value`, truncated to the room user space gave.
    pub fn write<T: IntoBytes + Immutable>(&mut self, value: &T) -> Result {
        let bytes = value.as_bytes();
        let n = self.out_len().min(bytes.len());
        // SAFETY: `raw` is valid by the type invariants.
        let ptr = UserPtr::from_ptr(unsafe { (*self.raw).outbuf });
        UserSlice::new(ptr, n).writer().write_slice(&bytes[..n])
    }
}

/// A user verb on an object of driver `T`: the user context it runs in and its driver data.
pub struct User<'a, T: Driver> {
    /// The user context of the calling process.
    pub ucontext: &'a Ucontext<T>,
    /// The driver data of the verb.
    pub udata: Udata<'a>,
}

impl<'a, T: Driver> User<'a, T> {
    /// The user verb of a raw `struct ib_udata`, `None` for a kernel caller (null `udata`).
    ///
    /// # Safety
    ///
    /// A non-null `udata` must be the driver data of a verb of a device of driver `T` on an
    /// existing object (not the verb creating the user context), valid for `'a`.
    pub(crate) unsafe fn from_udata(udata: *mut bindings::ib_udata) -> Result<Option<Self>> {
        if udata.is_null() {
            return Ok(None);
        }
        // SAFETY: Non-null driver data of a user verb is embedded in its attribute bundle.
        let ctx = unsafe {
            let bundle = bindings::rdma_udata_to_uverbs_attr_bundle(udata);
            bindings::ib_uverbs_get_ucontext(bundle)
        };
        let ctx = crate::error::from_err_ptr(ctx)?;
        if ctx.is_null() {
            return Err(EIO);
        }
        Ok(Some(Self {
            // SAFETY: `ctx` is the live context of the calling process, which was created on
            // this device of driver `T` and lives for the call.
            ucontext: unsafe { Ucontext::from_raw(ctx) },
            // SAFETY: `udata` is non-null and valid for `'a`.
            udata: unsafe { Udata::from_raw(udata)? },
        }))
    }
}
