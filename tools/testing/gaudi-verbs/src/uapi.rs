// SPDX-License-Identifier: GPL-2.0

//! The uAPI of gaudi_ib and of the RDMA core's uverbs, generated at build time by bindgen from
//! the headers (`build/bindings.rs` says how): `include/uapi/rdma/gaudi-abi.h`,
//! `gaudi_user_ioctl_verbs.h` and `gaudi_user_ioctl_cmds.h` of this repository, and the core's
//! `rdma_user_ioctl_cmds.h`, `ib_user_verbs.h`, `ib_user_ioctl_verbs.h` and
//! `ib_user_ioctl_cmds.h` (of `GAUDI_UAPI_CORE_INCLUDE`). Nothing here is copied from the
//! headers by hand; the `uapi_layout` test checks the layouts against the C compiler's.
//!
//! - Structures and unions keep their C names (`gaudi_ib_port_info`, `ib_uverbs_wc`);
//!   anonymous members are `__bindgen_anon_1`...
//! - Enum entries and `#define`d constants keep theirs, with the enum's C type
//!   (`GAUDI_IB_PORT_LINK_UP: u32`), except the object, method and attribute ids of
//!   `ib_user_ioctl_cmds.h` and `gaudi_user_ioctl_cmds.h` (`GAUDI_IB_METHOD_QUERY_PORT`,
//!   `UVERBS_ATTR_UHW_IN`): those are `u16` here, their width in `struct ib_uverbs_attr` and
//!   `struct ib_uverbs_ioctl_hdr`, each checked at compile time to fit.
//! - [`Plain`] marks the structures whose bytes may be read and written as such (no padding),
//!   for the ioctl attributes: [`bytes_of`], [`bytes_of_mut`], [`read_from`].

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/uapi_bindings.rs"));
}

pub use generated::*;

// The ids as `u16`; these items shadow the bindings' of the same names.
include!(concat!(env!("OUT_DIR"), "/uapi_ids.rs"));

/// Id `index` of the driver's namespace (`UVERBS_ID_DRIVER_NS` with `index`), for ids the
/// headers do not have: the tests of how the kernel refuses unknown ones. The headers' ids
/// are the constants of this module; the `uapi_layout` test fails on a use of this function
/// that makes one of them.
pub const fn driver_ns_id(index: u16) -> u16 {
    assert!(
        (index as u32) < 1 << UVERBS_ID_NS_SHIFT,
        "an index inside the namespace"
    );
    UVERBS_ID_DRIVER_NS | index
}

/// `v` as a `u16`; at compile time, fails the build if it does not fit.
pub const fn fit_u16(v: u64) -> u16 {
    assert!(
        v <= u16::MAX as u64,
        "a uverbs id or flag does not fit 16 bits"
    );
    v as u16
}

/// A type whose values are plain bytes: any bytes of its size are a value, every byte of a
/// value is initialized, and nothing is to be dropped (integers, and structures of them
/// without padding, whose unions have members of the union's size only). The ioctl
/// attributes carry them as bytes.
///
/// # Safety
///
/// Only for such types: the build script implements it for the structures of the bindings
/// that are (`uapi_plain.rs`), this module for integers and arrays of `Plain`.
pub unsafe trait Plain {}

// SAFETY: integers: every bit pattern is a value, no padding.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: an array of `Plain` elements has no padding between them.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

include!(concat!(env!("OUT_DIR"), "/uapi_plain.rs"));

/// The bytes of `v`.
pub fn bytes_of<T: Plain>(v: &T) -> &[u8] {
    // SAFETY: `T: Plain`: every byte of `v` is initialized; the slice borrows `v`.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// The bytes of `v`, to write.
pub fn bytes_of_mut<T: Plain>(v: &mut T) -> &mut [u8] {
    // SAFETY: `T: Plain`: any bytes written are a value of `T`; the slice borrows `v`.
    unsafe { std::slice::from_raw_parts_mut((v as *mut T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// A `T` from the first bytes of `b`, `None` if `b` is shorter.
pub fn read_from<T: Plain>(b: &[u8]) -> Option<T> {
    if b.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: `b` holds `size_of::<T>()` bytes, any of which are a `T` (`Plain`); the read
    // takes no alignment.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}

impl ib_uverbs_attr {
    /// `data`: the pointer, the inline value, the handle or the file descriptor.
    pub fn data(&self) -> u64 {
        // SAFETY: both members of the union are 8-byte integers.
        unsafe { self.__bindgen_anon_1.data }
    }

    pub fn set_data(&mut self, v: u64) {
        self.__bindgen_anon_1.data = v;
    }

    /// `attr_data.reserved` (the element of an enum attribute).
    pub fn reserved(&self) -> u16 {
        // SAFETY: both members of the union are 2 bytes of integers.
        unsafe { self.attr_data.reserved }
    }

    pub fn set_reserved(&mut self, v: u16) {
        self.attr_data.reserved = v;
    }
}

/// As the library's `Attr` printed before the bindings (the unions flattened).
impl std::fmt::Debug for ib_uverbs_attr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attr")
            .field("attr_id", &self.attr_id)
            .field("len", &self.len)
            .field("flags", &self.flags)
            .field("reserved", &self.reserved())
            .field("data", &self.data())
            .finish()
    }
}

impl ib_uverbs_wc {
    /// `ex.imm_data`: the immediate data, in network byte order.
    pub fn imm_data(&self) -> u32 {
        // SAFETY: both members of the union are 4-byte integers.
        unsafe { self.ex.imm_data }
    }
}

/// As the library's `Wc` printed before the bindings (the union flattened).
impl std::fmt::Debug for ib_uverbs_wc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wc")
            .field("wr_id", &self.wr_id)
            .field("status", &self.status)
            .field("opcode", &self.opcode)
            .field("vendor_err", &self.vendor_err)
            .field("byte_len", &self.byte_len)
            .field("imm_data", &self.imm_data())
            .field("qp_num", &self.qp_num)
            .field("src_qp", &self.src_qp)
            .field("wc_flags", &self.wc_flags)
            .field("pkey_index", &self.pkey_index)
            .field("slid", &self.slid)
            .field("sl", &self.sl)
            .field("dlid_path_bits", &self.dlid_path_bits)
            .field("port_num", &self.port_num)
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl PartialEq for ib_uverbs_wc {
    fn eq(&self, o: &Self) -> bool {
        bytes_of(self) == bytes_of(o)
    }
}

impl Eq for ib_uverbs_wc {}

/// As the library's `AsyncEvent` printed before the bindings.
impl std::fmt::Debug for ib_uverbs_async_event_desc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEvent")
            .field("element", &self.element)
            .field("event_type", &self.event_type)
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl ib_uverbs_gid_entry {
    /// The GID as its 16 bytes.
    pub fn gid_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b.copy_from_slice(bytes_of(&self.gid));
        b
    }
}

/// As the library's `GidEntry` printed before the bindings (the GID as bytes).
impl std::fmt::Debug for ib_uverbs_gid_entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GidEntry")
            .field("gid", &self.gid_bytes())
            .field("gid_index", &self.gid_index)
            .field("port_num", &self.port_num)
            .field("gid_type", &self.gid_type)
            .field("netdev_ifindex", &self.netdev_ifindex)
            .finish()
    }
}

/// The layout of every structure of the headers three ways, for the `uapi_layout` test: as
/// the header parser of `build.rs` has it (the fuzzer's table), as the bindings have it, and
/// a C program that prints the C compiler's.
pub mod layout {
    use super::generated;

    /// A structure.
    #[derive(Debug)]
    pub struct Row {
        pub name: &'static str,
        /// The file name of its header.
        pub header: &'static str,
        /// Of the driver's headers.
        pub driver: bool,
        /// Its size, as the parser has it.
        pub size: u64,
        /// Its size in the bindings; `None` if they do not have it.
        pub rust_size: Option<usize>,
        pub fields: &'static [FieldRow],
    }

    /// A field (nested aggregates flattened, as in the fuzzer's table).
    #[derive(Debug)]
    pub struct FieldRow {
        /// As C names it (`dmac`, `attr_data.enum_data.elem_id`, `wc[0].wr_id`).
        pub path: &'static str,
        /// As the parser has it: the offset, the size of an element, the elements (0: a
        /// flexible array member; 1: not an array).
        pub offset: u64,
        pub size: u64,
        pub count: u64,
        /// The offset and element size in the bindings.
        pub rust: Option<fn() -> (usize, usize)>,
    }

    /// An array type, of the bindings.
    pub trait Array {
        type Elem;
    }

    impl<T, const N: usize> Array for [T; N] {
        type Elem = T;
    }

    impl<T> Array for generated::__IncompleteArrayField<T> {
        type Elem = T;
    }

    /// The offset in `S` of the field `f` gives the place of, and the field's size.
    pub fn one<S, F>(f: fn(*const S) -> *const F) -> (usize, usize) {
        let s = std::mem::MaybeUninit::<S>::uninit();
        let base = s.as_ptr();
        (f(base) as usize - base as usize, std::mem::size_of::<F>())
    }

    /// The offset in `S` of the array `f` gives the place of, and the size of its elements.
    pub fn elem<S, A: Array>(f: fn(*const S) -> *const A) -> (usize, usize) {
        let (offset, _) = one(f);
        (offset, std::mem::size_of::<A::Elem>())
    }

    /// The place of element `k` of the array at `a`.
    pub fn idx<A: Array>(a: *const A, k: usize) -> *const A::Elem {
        a.cast::<A::Elem>().wrapping_add(k)
    }

    include!(concat!(env!("OUT_DIR"), "/uapi_layout.rs"));
}
