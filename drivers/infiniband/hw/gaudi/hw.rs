// SPDX-License-Identifier: GPL-2.0

//! What the device reads and writes in memory, and the contexts of its commands: typed
//! layouts of Documentation/infiniband/gaudi/device-model-1.rst.
//!
//! Every multi-byte field is little-endian, and the fields are native integers: the driver
//! supports little-endian hosts (Gaudi2 hosts are x86-64); a big-endian port would convert
//! them. The layouts are `#[repr(C)]` without padding; their sizes are checked at
//! build time against the model's.

use kernel::{
    bitfield,
    prelude::*, //
};
use zerocopy_derive::Immutable;

bitfield! {
    /// A device page-table entry ("Device MMU").
    pub(crate) struct Pte(u64) {
        /// Next table (bus address) or the page, bits 51:12 of the address.
        51:12 address;
        /// (1.1) The page holds queues: WQE fetches and CQE writes may use it, nothing else.
        4:4 ring => bool;
        /// The address is an offset into device memory (BAR 4).
        3:3 devmem => bool;
        /// At level 0 or 1: the entry maps a 1 GiB or 2 MiB page.
        2:2 leaf => bool;
        /// The device may write the page.
        1:1 write => bool;
        /// The entry maps something; the page is readable.
        0:0 valid => bool;
    }
}

impl Pte {
    /// An entry pointing to `addr` (bits 51:12 only are kept: the caller checked alignment
    /// and range).
    pub(crate) fn to(addr: u64) -> Self {
        Self::from_raw(addr & Self::ADDRESS_MASK).with_valid(true)
    }
}

/// An event queue entry ("Event queue").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct Eqe {
    /// One of the `EQE_*` types.
    pub(crate) kind: u8,
    /// Port index (from 0).
    pub(crate) port: u8,
    pub(crate) reserved0: u16,
    pub(crate) data0: u32,
    pub(crate) data1: u32,
    pub(crate) reserved1: [u8; 3],
    /// Bit 0: the owner bit (1 in even passes over the ring).
    pub(crate) owner: u8,
}

/// The bytes of one inline request, as the driver copies them for the device to read: a WQE
/// of such a request names them as its source.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable)]
pub(crate) struct InlineData {
    pub(crate) bytes: [u8; INLINE_MAX],
}

/// The largest inline request.
pub(crate) const INLINE_MAX: usize = 256;

/// The argument of `GID_SET` (1.3).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct GidEntry {
    /// An IPv6 address, or an IPv4 one as `::ffff:a.b.c.d`.
    pub(crate) gid: [u8; 16],
    /// [`GID_VALID`], or 0 to clear the entry.
    pub(crate) flags: u32,
}

/// [`GidEntry::flags`]: the entry is valid.
pub(crate) const GID_VALID: u32 = 1 << 0;

/// The argument of `DEVMEM_FILL` (1.2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct DevmemFill {
    /// Offset in device memory, a multiple of 4 KiB.
    pub(crate) offset: u64,
    /// Bytes, a multiple of 4 KiB.
    pub(crate) length: u64,
    /// Repeated over the range.
    pub(crate) pattern: u32,
    pub(crate) reserved: u32,
}

// The sizes the model gives.
const _: () = {
    assert!(size_of::<Eqe>() == 16);
    assert!(size_of::<GidEntry>() == 20);
    assert!(core::mem::offset_of!(Eqe, owner) == 15);
};
