// SPDX-License-Identifier: GPL-2.0

//! Messages about an RDMA device, as the C `ibdev_*()` functions print them.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A message names the driver, the parent device and the RDMA device
//! (`gaudi_ib 0000:00:03.0 gaudi_0: ...`), so that call sites need not. Most of what an RDMA
//! driver reports is caused by user space or by a network peer, which can cause it at will:
//! such messages go through the `_ratelimited` variants, or [`ibdev_dbg!`](crate::ibdev_dbg).
//!
//! # Examples
//!
//! ```ignore
//! kernel::ibdev_warn_ratelimited!(dev, "QP {}: refused: {:?}\n", qpn, e);
//! kernel::ibdev_info!(dev, "{} ports\n", dev.port_count());
//! ```

use crate::{
    bindings,
    fmt,
    rdma::{Device, Driver},
    str::CStrExt, //
};

/// The level of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `KERN_ERR`.
    Err,
    /// `KERN_WARNING`.
    Warn,
    /// `KERN_NOTICE`.
    Notice,
    /// `KERN_INFO`.
    Info,
    /// `KERN_DEBUG`, printed only in kernels built with debug assertions (as `pr_debug!`).
    Debug,
}

impl<T: Driver> Device<T> {
    /// Print `args` at `level` about this device. Use the `ibdev_*!` macros rather than this.
    #[doc(hidden)]
    #[cfg_attr(not(CONFIG_PRINTK), allow(unused_variables))]
    pub fn print(&self, level: Level, args: fmt::Arguments<'_>) {
        let print = match level {
            Level::Err => bindings::ibdev_err,
            Level::Warn => bindings::ibdev_warn,
            Level::Notice => bindings::ibdev_notice,
            Level::Info => bindings::ibdev_info,
            Level::Debug => {
                // The C `ibdev_dbg()` is a dynamic-debug macro, not a function: print with the
                // same prefix through the parent device.
                if cfg!(debug_assertions) {
                    // SAFETY: `KERN_DEBUG` is NUL-terminated; the parent is a live device; the
                    // name is NUL-terminated; "%pA" takes a pointer to the `fmt::Arguments`,
                    // which outlives the call.
                    #[cfg(CONFIG_PRINTK)]
                    unsafe {
                        bindings::_dev_printk(
                            bindings::KERN_DEBUG.as_ptr().cast::<crate::ffi::c_char>(),
                            self.parent().as_raw(),
                            c"%s: %pA".as_char_ptr(),
                            self.name().as_char_ptr(),
                            core::ptr::from_ref(&args).cast::<crate::ffi::c_void>(),
                        )
                    };
                }
                return;
            }
        };
        // SAFETY: `as_raw` is a live, registered device (type invariants of `Device`). The
        // "%pA" format takes a pointer to the `fmt::Arguments`, which outlives the call.
        #[cfg(CONFIG_PRINTK)]
        unsafe {
            print(
                self.as_raw(),
                c"%pA".as_char_ptr(),
                core::ptr::from_ref(&args).cast::<crate::ffi::c_void>(),
            )
        };
    }
}

/// Prints an error-level message about an RDMA device, as the C `ibdev_err()`.
///
/// `ibdev_err!(dev, fmt, args...)` with `dev` a `&kernel::rdma::Device<T>`.
#[macro_export]
macro_rules! ibdev_err {
    ($dev:expr, $($f:tt)*) => {
        $crate::rdma::Device::print($dev, $crate::rdma::print::Level::Err, $crate::prelude::fmt!($($f)*))
    };
}

/// Prints a warning about an RDMA device, as the C `ibdev_warn()`.
#[macro_export]
macro_rules! ibdev_warn {
    ($dev:expr, $($f:tt)*) => {
        $crate::rdma::Device::print($dev, $crate::rdma::print::Level::Warn, $crate::prelude::fmt!($($f)*))
    };
}

/// Prints an informational message about an RDMA device, as the C `ibdev_info()`.
#[macro_export]
macro_rules! ibdev_info {
    ($dev:expr, $($f:tt)*) => {
        $crate::rdma::Device::print($dev, $crate::rdma::print::Level::Info, $crate::prelude::fmt!($($f)*))
    };
}

/// Prints a debug message about an RDMA device, in kernels built with debug assertions only
/// (as `pr_debug!`).
#[macro_export]
macro_rules! ibdev_dbg {
    ($dev:expr, $($f:tt)*) => {
        $crate::rdma::Device::print($dev, $crate::rdma::print::Level::Debug, $crate::prelude::fmt!($($f)*))
    };
}

/// As [`ibdev_err!`](crate::ibdev_err), at most 10 messages per 5 seconds per call site (the
/// C `ibdev_err_ratelimited()`).
#[macro_export]
macro_rules! ibdev_err_ratelimited {
    ($dev:expr, $($f:tt)*) => {
        $crate::ratelimited!($crate::ibdev_err!($dev, $($f)*))
    };
}

/// As [`ibdev_warn!`](crate::ibdev_warn), at most 10 messages per 5 seconds per call site (the
/// C `ibdev_warn_ratelimited()`).
#[macro_export]
macro_rules! ibdev_warn_ratelimited {
    ($dev:expr, $($f:tt)*) => {
        $crate::ratelimited!($crate::ibdev_warn!($dev, $($f)*))
    };
}

/// As [`ibdev_info!`](crate::ibdev_info), at most 10 messages per 5 seconds per call site
/// (the C `ibdev_info_ratelimited()`).
#[macro_export]
macro_rules! ibdev_info_ratelimited {
    ($dev:expr, $($f:tt)*) => {
        $crate::ratelimited!($crate::ibdev_info!($dev, $($f)*))
    };
}
