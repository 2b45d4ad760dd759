// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`) and imported dma-bufs (`struct ib_umem_dmabuf`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! A memory region registered by user space is pinned and DMA-mapped for the device by
//! [`Umem::get`]; the driver then walks its DMA blocks, in a page size the device supports, to
//! build the device's translation tables. The memory stays pinned until the [`Umem`] is dropped.
//!
//! # Examples
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::umem::{Access, BlockSize, Umem};
//!
//! /// Fill `ptes` with the DMA address of every 4 KiB, 2 MiB or 1 GiB block of `umem`.
//! fn fill_ptes(umem: &Umem, iova: u64, ptes: &mut KVec<u64>) -> Result<BlockSize> {
//!     let bs = umem
//!         .best_block_size((1 << 12) | (1 << 21) | (1 << 30), iova)
//!         .ok_or(EINVAL)?;
//!     for addr in umem.dma_blocks(bs) {
//!         ptes.push(addr, GFP_KERNEL)?;
//!     }
//!     Ok(bs)
//! }
//! ```

use crate::{
    bindings, device, error::from_err_ptr, prelude::*, rdma::Device, rdma::Driver, sync::aref::ARef,
};
use core::{marker::PhantomData, ptr::NonNull};

/// Access rights of a memory region (`enum ib_access_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// The device may write the memory (receives, RDMA READ responses).
    pub const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// Remote peers may write the memory (RDMA WRITE target).
    pub const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// Remote peers may read the memory (RDMA READ source).
    pub const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// Remote peers may run atomics on the memory.
    pub const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    /// Memory windows may be bound to the region.
    pub const MW_BIND: Self = Self(bindings::ib_access_flags_IB_ACCESS_MW_BIND);
    /// Addresses of the region start at 0.
    pub const ZERO_BASED: Self = Self(bindings::ib_access_flags_IB_ZERO_BASED);
    /// On-demand paging.
    pub const ON_DEMAND: Self = Self(bindings::ib_access_flags_IB_ACCESS_ON_DEMAND);
    /// Relaxed ordering is allowed (an optional flag: may be ignored).
    pub const RELAXED_ORDERING: Self = Self(bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING);
    /// The optional flags, which a driver may ignore.
    pub const OPTIONAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// Whether the device must be able to write the memory.
    pub const fn device_writes(self) -> bool {
        self.0
            & (bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC)
            != 0
    }
}

crate::rdma::raw_flags!(Access);

/// A block size for walking the DMA blocks of a [`Umem`]: at most `PAGE_SIZE`, or one that
/// [`Umem::best_block_size`] found the memory to be aligned to.
///
/// # Invariants
///
/// The size is a power of two, and either at most `PAGE_SIZE` or returned by
/// `ib_umem_find_best_pgsz()` for the umem it is used with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSize(u64);

impl BlockSize {
    /// A block size of at most `PAGE_SIZE`, valid for any umem; `None` unless `size` is a power
    /// of two no larger than `PAGE_SIZE`.
    pub fn small(size: u64) -> Option<Self> {
        // INVARIANT: Checked here.
        (size.is_power_of_two() && size <= bindings::PAGE_SIZE as u64).then_some(Self(size))
    }

    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// log2 of the size.
    pub fn shift(self) -> u32 {
        self.0.trailing_zeros()
    }
}

/// References on the devices a umem is released through: `ib_umem_release()` reads the
/// InfiniBand device and unmaps through its DMA device. A umem may be dropped after the
/// InfiniBand device was unregistered and deallocated (it is `'static` and `Send`), so it
/// keeps both structures alive until it is released.
struct DevRefs {
    _ib: ARef<device::Device>,
    _dma: ARef<device::Device>,
}

impl DevRefs {
    fn new<T: Driver>(dev: &Device<T>) -> Self {
        // SAFETY: `dev` is a registered device: its embedded `struct device` is initialised.
        let ib: &device::Device =
            unsafe { device::Device::from_raw(&raw mut (*dev.as_raw()).__bindgen_anon_1.dev) };
        Self {
            _ib: ARef::from(ib),
            _dma: dev.parent().into(),
        }
    }
}

/// Pinned, DMA-mapped user memory (`struct ib_umem`).
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get*()`, owned by this object and released on drop,
/// before `_devs` lets go of the devices it is released through.
pub struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    _devs: DevRefs,
}

// SAFETY: A umem is not tied to the task that created it: it holds its own references on the
// owning mm and the pages, and may be released from any process context.
unsafe impl Send for Umem {}
// SAFETY: Shared references only read fields that do not change after creation.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pin `len` bytes of the calling process's memory at `addr` and map them for DMA by `dev`,
    /// with `access` (pages are pinned writable if the device may write them).
    pub fn get<T: Driver>(dev: &Device<T>, addr: u64, len: usize, access: Access) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `dev` is a registered device; a null bundle means "use `addr`", as
        // `ib_umem_get_va()` does.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(
                dev.as_raw(),
                core::ptr::null(),
                0,
                addr,
                len,
                access.bits() as c_int,
            )
        })?;
        // INVARIANT: `ib_umem_get_attr_or_va()` returned a umem that we own.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            _devs: DevRefs::new(dev),
        })
    }

    fn raw(&self) -> &bindings::ib_umem {
        // SAFETY: `ptr` is a live umem by the type invariants.
        unsafe { self.ptr.as_ref() }
    }

    /// The raw `struct ib_umem`.
    pub fn as_raw(&self) -> *mut bindings::ib_umem {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw().length
    }

    /// Whether the umem is empty (it never is: [`Umem::get`] refuses empty ranges).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The user virtual address of the first byte.
    pub fn address(&self) -> u64 {
        self.raw().address as u64
    }

    /// The I/O virtual address user space uses for the first byte (initially the address).
    pub fn iova(&self) -> u64 {
        self.raw().iova
    }

    /// Whether the pages were pinned writable.
    pub fn writable(&self) -> bool {
        self.raw().writable() != 0
    }

    /// The largest block size of `pgsz_bitmap` (bit n: blocks of 2^n bytes) in which the
    /// memory can be mapped at device address `virt`, `None` if none fits.
    pub fn best_block_size(&self, pgsz_bitmap: u64, virt: u64) -> Option<BlockSize> {
        // SAFETY: `ptr` is a live umem.
        let size = unsafe {
            bindings::ib_umem_find_best_pgsz(self.as_raw(), pgsz_bitmap as c_ulong, virt)
        };
        // INVARIANT: `ib_umem_find_best_pgsz()` found `size` for this umem; zero is none.
        (size != 0).then_some(BlockSize(size as u64))
    }

    /// The number of blocks of size `bs` the memory spans.
    pub fn num_dma_blocks(&self, bs: BlockSize) -> usize {
        // SAFETY: `ptr` is a live umem; `bs` is a power of two.
        unsafe { bindings::ib_umem_num_dma_blocks(self.as_raw(), bs.0 as c_ulong) }
    }

    /// The DMA address of every block of size `bs` of the memory, in order.
    pub fn dma_blocks(&self, bs: BlockSize) -> DmaBlocks<'_> {
        // SAFETY: `ptr` is a live umem, borrowed for the life of the iterator; `bs` is valid
        // for it by the invariants of `BlockSize`.
        unsafe { DmaBlocks::new(self.as_raw(), bs) }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: `ptr` is owned by `self` (type invariants) and not used after this.
        unsafe { bindings::ib_umem_release(self.as_raw()) };
    }
}

/// A dma-buf imported for DMA by an RDMA device, pinned and mapped (`struct ib_umem_dmabuf`
/// from `ib_umem_dmabuf_get_pinned()`), for example device memory of another device registered
/// as a memory region.
///
/// # Invariants
///
/// `ptr` is a pinned, mapped umem_dmabuf owned by this object and released on drop, before
/// `_devs` lets go of the devices it is released through.
pub struct UmemDmabuf {
    ptr: NonNull<bindings::ib_umem_dmabuf>,
    _devs: DevRefs,
}

// SAFETY: As for `Umem`: the import holds its own references and may be released anywhere.
unsafe impl Send for UmemDmabuf {}
// SAFETY: Shared references only read fields that do not change while pinned.
unsafe impl Sync for UmemDmabuf {}

impl UmemDmabuf {
    /// Import `len` bytes at `offset` of the dma-buf of file descriptor `fd` (of the calling
    /// process) for DMA by `dev`, pinned, with `access`. Fails if the exporter refuses the
    /// device (for example `EOPNOTSUPP` without a peer-to-peer path).
    pub fn get_pinned<T: Driver>(
        dev: &Device<T>,
        offset: u64,
        len: usize,
        fd: i32,
        access: Access,
    ) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `dev` is a registered device; the core looks `fd` up in the calling process.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_dmabuf_get_pinned(
                dev.as_raw(),
                offset as c_ulong,
                len,
                fd,
                access.bits() as c_int,
            )
        })?;
        // INVARIANT: A pinned and mapped import that we own.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            _devs: DevRefs::new(dev),
        })
    }

    fn umem(&self) -> *mut bindings::ib_umem {
        // SAFETY: `ptr` is live (type invariants); `umem` is its first field.
        unsafe { &raw mut (*self.ptr.as_ptr()).umem }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: The umem of a live import.
        unsafe { (*self.umem()).length }
    }

    /// Whether the import is empty (never: [`UmemDmabuf::get_pinned`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// See [`Umem::best_block_size`].
    pub fn best_block_size(&self, pgsz_bitmap: u64, virt: u64) -> Option<BlockSize> {
        // SAFETY: The umem of a live, mapped import.
        let size =
            unsafe { bindings::ib_umem_find_best_pgsz(self.umem(), pgsz_bitmap as c_ulong, virt) };
        // INVARIANT: Found by `ib_umem_find_best_pgsz()` for this umem.
        (size != 0).then_some(BlockSize(size as u64))
    }

    /// The number of blocks of size `bs` the imported range spans (at the device address given
    /// to [`UmemDmabuf::best_block_size`]).
    pub fn num_dma_blocks(&self, bs: BlockSize) -> usize {
        // SAFETY: The umem of a live import; `bs` is a power of two.
        unsafe { bindings::ib_umem_num_dma_blocks(self.umem(), bs.0 as c_ulong) }
    }

    /// The DMA address of every block of size `bs` of the imported range, in order.
    pub fn dma_blocks(&self, bs: BlockSize) -> DmaBlocks<'_> {
        // SAFETY: The umem of a live, pinned and mapped import, borrowed for the iterator.
        unsafe { DmaBlocks::new(self.umem(), bs) }
    }
}

impl Drop for UmemDmabuf {
    fn drop(&mut self) {
        // SAFETY: Owned by `self` (type invariants), not used after this.
        unsafe { bindings::ib_umem_dmabuf_release(self.ptr.as_ptr()) };
    }
}

/// An iterator over the DMA blocks of a [`Umem`] (`rdma_umem_for_each_dma_block`).
///
/// # Invariants
///
/// `umem` is a live umem for `'a`, `bs` a valid block size for it; `iter` was started on it once
/// `started` is set.
pub struct DmaBlocks<'a> {
    umem: *mut bindings::ib_umem,
    bs: BlockSize,
    iter: bindings::ib_block_iter,
    started: bool,
    _p: PhantomData<&'a Umem>,
}

impl DmaBlocks<'_> {
    /// # Safety
    ///
    /// `umem` must be a DMA-mapped umem, valid and unchanged for `'a`, and `bs` valid for it.
    unsafe fn new(umem: *mut bindings::ib_umem, bs: BlockSize) -> Self {
        Self {
            umem,
            bs,
            iter: pin_init::zeroed(),
            started: false,
            _p: PhantomData,
        }
    }
}

impl Iterator for DmaBlocks<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if !self.started {
            // SAFETY: `umem` is live and `bs` valid for it (type invariants).
            unsafe {
                bindings::__rdma_umem_block_iter_start(
                    &mut self.iter,
                    self.umem,
                    self.bs.0 as c_ulong,
                )
            };
            self.started = true;
        }
        // SAFETY: The iterator was started on `umem`, which is still live.
        if unsafe { bindings::__rdma_umem_block_iter_next(&mut self.iter) } {
            // SAFETY: The iterator holds a current block.
            Some(unsafe { bindings::rdma_block_iter_dma_address(&mut self.iter) })
        } else {
            None
        }
    }
}

#[macros::kunit_tests(rust_kernel_rdma_umem)]
mod tests {
    use super::*;

    /// A umem over a synthetic, already "mapped" scatterlist: three DMA segments of 8 KiB at
    /// 0x10000, 12 KiB at 0x40000 and 4 KiB at 0x80000, starting 0x100 into the first page.
    struct Synthetic {
        sg: [bindings::scatterlist; 3],
        umem: bindings::ib_umem,
    }

    fn synthetic() -> KBox<Synthetic> {
        let mut s = KBox::new(
            Synthetic {
                sg: pin_init::zeroed(),
                umem: pin_init::zeroed(),
            },
            GFP_KERNEL,
        )
        .unwrap();
        let segs = [
            (0x10000u64, 0x2000u32),
            (0x40000, 0x3000),
            (0x80000, 0x1000),
        ];
        // SAFETY: `sg` is an array of three entries, initialised as a table by
        // `sg_init_table()`; only DMA addresses and lengths are set, as a DMA mapping would.
        unsafe { bindings::sg_init_table(s.sg.as_mut_ptr(), 3) };
        for (sg, (addr, len)) in s.sg.iter_mut().zip(segs) {
            sg.dma_address = addr;
            sg.dma_length = len;
            sg.length = len;
        }
        let sgl = s.sg.as_mut_ptr();
        s.umem.sgt_append.sgt.sgl = sgl;
        s.umem.sgt_append.sgt.nents = 3;
        s.umem.sgt_append.sgt.orig_nents = 3;
        s.umem.address = 0x7f00_0000_0100;
        s.umem.iova = 0x7f00_0000_0100;
        s.umem.length = 0x6000 - 0x100;
        s
    }

    fn blocks(s: &mut Synthetic, bs: u64) -> KVec<u64> {
        let mut out = KVec::new();
        // SAFETY: The synthetic umem and its scatterlist live in `s` for the iteration.
        for a in unsafe { DmaBlocks::new(&mut s.umem, BlockSize(bs)) } {
            out.push(a, GFP_KERNEL).unwrap();
        }
        out
    }

    #[test]
    fn blocks_of_4k() {
        let mut s = synthetic();
        let got = blocks(&mut s, 0x1000);
        assert_eq!(
            &got[..],
            &[0x10000, 0x11000, 0x40000, 0x41000, 0x42000, 0x80000]
        );
        // SAFETY: A live synthetic umem.
        let n = unsafe { bindings::ib_umem_num_dma_blocks(&mut s.umem, 0x1000) };
        assert_eq!(n, got.len());
    }

    #[test]
    fn blocks_stop_at_the_length() {
        let mut s = synthetic();
        // Only the first 4 KiB page is covered.
        s.umem.length = 0x10;
        assert_eq!(&blocks(&mut s, 0x1000)[..], &[0x10000]);
    }

    #[test]
    fn block_size_checks() {
        assert!(BlockSize::small(0x1000).is_some());
        assert!(BlockSize::small(0x200).is_some());
        assert!(BlockSize::small(0x3000).is_none());
        assert!(BlockSize::small(0x20_0000).is_none());
        assert_eq!(BlockSize::small(0x1000).unwrap().shift(), 12);
    }

    #[test]
    fn access_flags() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        assert!(a.contains(Access::REMOTE_WRITE));
        assert!(!a.contains(Access::REMOTE_READ));
        assert!(a.device_writes());
        assert!(!Access::REMOTE_READ.device_writes());
        assert_eq!(a.without(Access::LOCAL_WRITE), Access::REMOTE_WRITE);
    }
}
