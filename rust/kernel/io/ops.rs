// SPDX-License-Identifier: GPL-2.0

//! Register access through the operations of the driver that owns the registers.
//!
//! A block of a device is sometimes driven by a driver that does not own the device: the owner
//! maps the registers and gives the block's driver operations to read and write them (an
//! accelerator driver and the auxiliary driver of its NIC, say). [`OpsView`] puts such
//! operations behind [`Io`](super::Io), so that the block's driver uses the same typed accessors
//! (`register!`, `read`, `try_write`, ...) as a driver that maps its registers itself, and the
//! same code serves both.
//!
//! Only 32-bit accesses exist: what register operations of this kind provide.
//!
//! # Examples
//!
//! ```
//! use kernel::io::{
//!     ops::{
//!         OpsView,
//!         RegisterOps, //
//!     },
//!     register,
//!     Io, //
//! };
//! use kernel::sync::atomic::{
//!     Atomic,
//!     Relaxed, //
//! };
//!
//! register! {
//!     DEV_STATUS(u32) @ 0x8 {
//!         0:0 ready => bool;
//!     }
//! }
//!
//! /// Four registers held in memory, as a test double of an owner's operations.
//! struct Regs([Atomic<u32>; 4]);
//!
//! impl RegisterOps for Regs {
//!     fn read32(&self, offset: usize) -> u32 {
//!         self.0[offset / 4].load(Relaxed)
//!     }
//!     fn write32(&self, offset: usize, value: u32) {
//!         self.0[offset / 4].store(value, Relaxed)
//!     }
//! }
//!
//! let regs = Regs([const { Atomic::new(0) }; 4]);
//! let io = OpsView::<kernel::io::Region<16>>::new(&regs);
//! io.write_reg(DEV_STATUS::zeroed().with_ready(true));
//! assert!(io.read(DEV_STATUS).ready());
//! assert_eq!(regs.0[2].load(Relaxed), 1);
//! // Beyond the 16 bytes of the space: refused before the operations are called.
//! assert_eq!(io.try_read32(16), Err(EINVAL));
//! # Ok::<(), Error>(())
//! ```

use super::{
    IoBackend,
    IoBase,
    IoCapable,
    Region, //
};
use crate::ptr::KnownSize;

/// Register accesses that the owner of a register space provides.
///
/// Offsets are in bytes from the start of the space. [`OpsView`] calls the operations only with
/// offsets that are 4-byte aligned and lie within the size the view was made with.
pub trait RegisterOps: Send + Sync {
    /// Read the 32-bit register at `offset`. A space that is gone reads all ones.
    fn read32(&self, offset: usize) -> u32;

    /// Write `value` to the 32-bit register at `offset`. Writes to a space that is gone are
    /// dropped.
    fn write32(&self, offset: usize, value: u32);
}

/// A view of (part of) a register space that is accessed through [`RegisterOps`].
///
/// It implements [`Io`](super::Io): accesses are bounds-checked against the size of the view,
/// at build time or at run time, as for a mapped region.
pub struct OpsView<'a, T: ?Sized> {
    ops: &'a dyn RegisterOps,
    /// Where the view lies in the space: its address is the offset from the start, its
    /// metadata the size. Never dereferenced.
    ptr: *mut T,
}

impl<T: ?Sized> Clone for OpsView<'_, T> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for OpsView<'_, T> {}

impl<'a, const SIZE: usize> OpsView<'a, Region<SIZE>> {
    /// A view of the whole register space of `SIZE` bytes that `ops` accesses.
    #[inline]
    pub fn new(ops: &'a dyn RegisterOps) -> Self {
        Self {
            ops,
            ptr: Region::<SIZE>::ptr_from_raw_parts_mut(core::ptr::null_mut(), SIZE),
        }
    }
}

impl<'a, T: ?Sized + KnownSize> IoBase<'a> for OpsView<'a, T> {
    type Backend = OpsBackend;
    type Target = T;

    #[inline]
    fn as_view(self) -> Self {
        self
    }
}

/// The I/O backend of [`OpsView`].
pub struct OpsBackend;

impl IoBackend for OpsBackend {
    type View<'a, T: ?Sized + KnownSize> = OpsView<'a, T>;

    #[inline]
    fn as_ptr<'a, T: ?Sized + KnownSize>(view: Self::View<'a, T>) -> *mut T {
        view.ptr
    }

    #[inline]
    unsafe fn project_view<'a, T: ?Sized + KnownSize, U: ?Sized + KnownSize>(
        view: Self::View<'a, T>,
        ptr: *mut U,
    ) -> Self::View<'a, U> {
        // INVARIANT: `ptr` is a projection of `view.ptr` (the caller's guarantee): its address
        // is an offset within the view, its size fits it.
        OpsView { ops: view.ops, ptr }
    }
}

impl IoCapable<u32> for OpsBackend {
    #[inline]
    fn io_read(view: <Self as IoBackend>::View<'_, u32>) -> u32 {
        view.ops.read32(view.ptr.addr())
    }

    #[inline]
    fn io_write(view: <Self as IoBackend>::View<'_, u32>, value: u32) {
        view.ops.write32(view.ptr.addr(), value)
    }
}

#[macros::kunit_tests(rust_io_ops)]
mod tests {
    use super::*;
    use crate::{
        io::{
            register,
            register::Array,
            Io, //
        },
        prelude::*,
        sync::atomic::{
            Atomic,
            Relaxed, //
        },
    };

    register! {
        DEV_CTRL(u32) @ 0x4 {
            7:4 mode;
            0:0 enable => bool;
        }
        DEV_SLOT(u32)[4, stride = 8] @ 0x10 {}
    }

    /// 16 registers, and the offsets of the accesses made.
    struct Regs {
        words: [Atomic<u32>; 16],
        last: Atomic<usize>,
        calls: Atomic<u32>,
    }

    impl Regs {
        fn new() -> Self {
            Self {
                words: [const { Atomic::new(0) }; 16],
                last: Atomic::new(usize::MAX),
                calls: Atomic::new(0),
            }
        }
    }

    impl RegisterOps for Regs {
        fn read32(&self, offset: usize) -> u32 {
            self.last.store(offset, Relaxed);
            self.calls.add(1, Relaxed);
            self.words[offset / 4].load(Relaxed)
        }

        fn write32(&self, offset: usize, value: u32) {
            self.last.store(offset, Relaxed);
            self.calls.add(1, Relaxed);
            self.words[offset / 4].store(value, Relaxed)
        }
    }

    #[test]
    fn typed_registers_reach_their_offsets() -> Result {
        let regs = Regs::new();
        let io = OpsView::<Region<64>>::new(&regs);
        io.write_reg(DEV_CTRL::zeroed().with_const_mode::<5>().with_enable(true));
        assert_eq!(regs.last.load(Relaxed), 4);
        assert_eq!(regs.words[1].load(Relaxed), 0x51);
        let c = io.read(DEV_CTRL);
        assert_eq!((c.mode().get(), c.enable()), (5, true));
        io.try_write(
            DEV_SLOT::try_at(3).ok_or(EINVAL)?,
            DEV_SLOT::from_raw(0xabcd),
        )?;
        assert_eq!(regs.last.load(Relaxed), 0x10 + 3 * 8);
        assert_eq!(regs.words[(0x10 + 3 * 8) / 4].load(Relaxed), 0xabcd);
        Ok(())
    }

    #[test]
    fn out_of_range_never_reaches_the_operations() -> Result {
        let regs = Regs::new();
        let io = OpsView::<Region<64>>::new(&regs);
        assert_eq!(io.try_read32(64), Err(EINVAL));
        assert_eq!(io.try_write32(1, 62), Err(EINVAL));
        assert_eq!(io.try_read32(2), Err(EINVAL));
        assert_eq!(io.try_read32(usize::MAX - 1), Err(EINVAL));
        assert!(DEV_SLOT::try_at(4).is_none());
        assert_eq!(regs.calls.load(Relaxed), 0);
        assert_eq!(io.try_read32(60)?, 0);
        assert_eq!(regs.calls.load(Relaxed), 1);
        Ok(())
    }
}
