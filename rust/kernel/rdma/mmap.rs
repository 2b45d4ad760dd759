// SPDX-License-Identifier: GPL-2.0

//! What user space may map of a device (`struct rdma_user_mmap_entry`), and resource-tracking
//! output (`rdma res`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver offers a range of device memory (a doorbell page, a queue in a BAR) to a user
//! context with [`Ucontext::mmap_insert`], which returns the offset user space passes to
//! `mmap()` on the device file. [`Driver::mmap`] then maps the range into the VMA with
//! [`Vma::io_map_bar`], which takes the range from a memory BAR of the device's own PCI
//! function and checks it, so that no driver can map other memory. An entry is removed by [`Ucontext::mmap_remove`] or when the context goes
//! away, and freed once no VMA maps it any more: its data is dropped after
//! [`Driver::mmap_free`]. The driver keeps offsets, never references to entries, so nothing
//! it holds can outlive the context.
//!
//! Queues in host memory that user space writes and the device reads (or the reverse) are
//! [`QueueMem`], DMA-coherent memory allocated for the device, offered with
//! [`Ucontext::mmap_insert_coherent`]: the entry holds a reference to the memory, and
//! [`Vma::map_coherent`] maps exactly that memory, so the memory outlives every mapping of it,
//! even when the driver has long let go of it.
//!
//! # Examples
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::mmap::{Caching, MmapEntry, Vma};
//!
//! /// Map the doorbell page at `offset` of BAR 0 for `entry`.
//! fn map_doorbell<T: kernel::rdma::Driver>(entry: &MmapEntry<T>, vma: &mut Vma<'_>, offset: u64)
//!     -> Result
//! {
//!     vma.io_map_bar(entry, 0, offset, 4096, Caching::Uncached)
//! }
//! ```

use core::marker::PhantomData;

use crate::{
    bindings, device,
    dma::{Coherent, DmaAddress},
    error::to_result,
    prelude::*,
    rdma::{Device, Driver, Ucontext},
    sync::{aref::ARef, Arc},
    types::Opaque,
};

/// Zeroed DMA-coherent host memory for a queue that user space maps (a multiple of
/// `PAGE_SIZE`), allocated for the parent of an RDMA device, the device's DMA device, or a
/// page-aligned part of such memory ([`QueueMem::part`]).
///
/// Clones and parts share the memory; it is freed with the last of them, and an mmap entry
/// holds one until its last mapping is gone.
#[derive(Clone)]
pub struct QueueMem {
    mem: Arc<Coherent<[u32]>>,
    /// The device the memory was allocated for.
    dev: ARef<device::Device>,
    /// The bytes of `mem` this value stands for: `len` from `offset`, both multiples of
    /// `PAGE_SIZE`.
    offset: usize,
    len: usize,
}

impl QueueMem {
    /// Allocate `bytes`, rounded up to a multiple of `PAGE_SIZE`, for `dev`.
    pub fn new<T: Driver>(dev: &Device<T>, bytes: usize) -> Result<Self> {
        Self::new_for(dev.parent(), bytes)
    }

    /// Allocate `bytes`, rounded up to a multiple of `PAGE_SIZE`, for the DMA device `dev`
    /// (the parent an RDMA device will have), for memory the driver also uses itself.
    pub fn new_for(dev: &device::Device<device::Bound>, bytes: usize) -> Result<Self> {
        let bytes = bytes.max(1).next_multiple_of(bindings::PAGE_SIZE);
        let mem = Arc::new(
            Coherent::<u32>::zeroed_slice(dev, bytes / 4, GFP_KERNEL)?,
            GFP_KERNEL,
        )?;
        let plain: &device::Device = dev;
        Ok(Self {
            mem,
            dev: plain.into(),
            offset: 0,
            len: bytes,
        })
    }

    /// The `len` bytes from `offset` of this memory (both multiples of `PAGE_SIZE`), sharing
    /// it: `EINVAL` for an empty, unaligned or outlying range.
    pub fn part(&self, offset: usize, len: usize) -> Result<Self> {
        let page = bindings::PAGE_SIZE;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || offset % page != 0 || len % page != 0 || end > self.len {
            return Err(EINVAL);
        }
        Ok(Self {
            mem: self.mem.clone(),
            dev: self.dev.clone(),
            offset: self.offset + offset,
            len,
        })
    }

    /// The whole allocation this memory is (part of), for the driver's own accesses.
    pub fn coherent(&self) -> &Coherent<[u32]> {
        &self.mem
    }

    /// The address the device reaches the memory at.
    pub fn dma_address(&self) -> DmaAddress {
        self.mem.dma_address() + self.offset as DmaAddress
    }

    /// Length in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Whether the memory is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the memory was allocated for the DMA device of the context `ctx`.
    pub(crate) fn is_for<T: Driver>(&self, ctx: &Ucontext<T>) -> bool {
        core::ptr::eq(self.dev.as_raw(), ctx.device().parent().as_raw())
    }
}

/// An mmap entry of a user context with the driver's data.
///
/// # Invariants
///
/// Allocated by `MmapEntry::insert` as a pinned box, inserted into the entries of a user
/// context of driver `T`; freed by [`Driver::mmap_free`]'s glue once the core drops its last
/// reference.
#[repr(C)]
#[pin_data]
pub struct MmapEntry<T: Driver> {
    raw: Opaque<bindings::rdma_user_mmap_entry>,
    /// Host memory of the device's parent that the entry maps, if any: held until the entry
    /// is freed, that is after its last VMA is gone.
    mem: Option<QueueMem>,
    #[pin]
    data: T::MmapEntry,
}

// SAFETY: The entry is synchronised by the core; the driver's data is `Send`.
unsafe impl<T: Driver> Send for MmapEntry<T> {}
// SAFETY: Shared references only read immutable fields and give `&T::MmapEntry` (`Sync`).
unsafe impl<T: Driver> Sync for MmapEntry<T> {}

impl<T: Driver> MmapEntry<T> {
    /// Insert an entry of `length` bytes (a multiple of `PAGE_SIZE`) described by `data` into
    /// `ctx`; the caller owns the insertion reference of the returned entry.
    pub(crate) fn insert(
        ctx: &Ucontext<T>,
        length: usize,
        mem: Option<QueueMem>,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<*mut bindings::rdma_user_mmap_entry> {
        if length == 0 || length % bindings::PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let entry = KBox::pin_init(
            try_pin_init!(Self {
                raw: Opaque::zeroed(),
                mem,
                data <- data,
            }? Error),
            GFP_KERNEL,
        )?;
        // SAFETY: The box is not moved out of: the entry stays pinned until `mmap_free`.
        let ptr = KBox::into_raw(unsafe { Pin::into_inner_unchecked(entry) });
        // SAFETY: `ptr` is a zeroed entry at the start of a live allocation, `ctx` a live
        // context of driver `T`.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(ctx.as_raw(), (*ptr).raw.get(), length)
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: Insertion failed, so the core holds no reference: free the box.
            drop(unsafe { KBox::from_raw(ptr) });
            return Err(e);
        }
        // SAFETY: `ptr` is live.
        Ok(unsafe { (*ptr).raw.get() })
    }

    /// # Safety
    ///
    /// `raw` must be the entry of a live [`MmapEntry<T>`].
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::rdma_user_mmap_entry) -> &'a Self {
        // SAFETY: `raw` is the first field of a `#[repr(C)]` `MmapEntry<T>`.
        unsafe { &*raw.cast::<Self>() }
    }

    /// The raw entry.
    pub fn as_raw(&self) -> *mut bindings::rdma_user_mmap_entry {
        self.raw.get()
    }

    /// The driver's data.
    pub fn data(&self) -> &T::MmapEntry {
        &self.data
    }

    /// The offset user space passes to `mmap()`.
    pub fn offset(&self) -> u64 {
        // SAFETY: `start_pgoff` is set at insertion and never changes.
        let pgoff = unsafe { (*self.as_raw()).start_pgoff };
        (pgoff as u64) << bindings::PAGE_SHIFT
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: `npages` is set at insertion and never changes.
        unsafe { (*self.as_raw()).npages * bindings::PAGE_SIZE }
    }

    /// Whether the entry is empty (never: [`Ucontext::mmap_insert`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a mapping of device memory is cached by the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    /// Uncached (registers, doorbells).
    Uncached,
    /// Write-combining (queues written by the CPU and read by the device).
    WriteCombine,
}

/// A VMA being set up by `mmap()` on the device file.
///
/// # Invariants
///
/// `vma` is the VMA of a running `mmap()` call on a user context of driver `T`'s device, `ctx`
/// that context.
pub struct Vma<'a> {
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
    _p: PhantomData<&'a mut bindings::vm_area_struct>,
}

impl<'a> Vma<'a> {
    /// # Safety
    ///
    /// `vma` must be the VMA of a running `mmap()` on `ctx`.
    pub(crate) unsafe fn new(
        ctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> Self {
        Self {
            ctx,
            vma,
            _p: PhantomData,
        }
    }

    /// Length of the VMA in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: `vma` is a valid VMA for the duration of the `mmap()` call (type invariants).
        let vma = unsafe { crate::mm::virt::VmaRef::from_raw(self.vma) };
        vma.end() - vma.start()
    }

    /// Whether the VMA is empty (never for a real `mmap()`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Map the host memory of `entry` (inserted by [`Ucontext::mmap_insert_coherent`]), cached,
    /// into the VMA, which must be shared and exactly as long (`EINVAL` otherwise). The entry,
    /// and with it the memory, lives as long as the mapping; the core zaps the mapping when
    /// the context is disassociated.
    pub fn map_coherent<T: Driver>(&mut self, entry: &MmapEntry<T>) -> Result {
        let mem = entry.mem.as_ref().ok_or(EINVAL)?;
        let size = entry.len();
        if size != self.len() || mem.size() < size || !self.owns(entry) {
            return Err(EINVAL);
        }
        // SAFETY: `vma` belongs to a running `mmap()` on `ctx`, and `entry` is an entry of it.
        // `mem.mem` is a live coherent allocation for the device's parent, its DMA device
        // (checked by `Ucontext::mmap_insert_coherent`), owned by the entry, which the mapping
        // references until it is closed; `size` bytes from `mem.offset` lie inside it
        // (`QueueMem::part`, and `size <= mem.len`).
        to_result(unsafe {
            bindings::rdma_user_mmap_coherent(
                self.ctx,
                self.vma,
                mem.mem.as_ptr().cast::<c_void>().cast_mut(),
                mem.mem.dma_address(),
                mem.mem.size(),
                mem.offset,
                entry.as_raw(),
            )
        })
    }

    /// Whether `entry` was inserted into this VMA's context: the core finds entries by the
    /// context of the file being mapped, but an entry of another context must not be mapped
    /// here either way.
    fn owns<T: Driver>(&self, entry: &MmapEntry<T>) -> bool {
        // SAFETY: `entry` is a live inserted entry; `ucontext` is set at insertion and never
        // changes.
        core::ptr::eq(unsafe { (*entry.as_raw()).ucontext }, self.ctx)
    }

    /// Map `size` bytes at `offset` of memory BAR `bar` of the PCI function the device belongs
    /// to (the parent of the InfiniBand device) for `entry`. `size` must be the length of the
    /// VMA, at most the entry's, and `offset` and `size` multiples of the page size inside the
    /// BAR (`EINVAL` otherwise, also for an I/O port BAR or a device that is not PCI). The core
    /// zaps the mapping when the context is disassociated.
    ///
    /// Only the driver's own device registers can be mapped this way: never RAM, never another
    /// device.
    pub fn io_map_bar<T: Driver>(
        &mut self,
        entry: &MmapEntry<T>,
        bar: u32,
        offset: u64,
        size: usize,
        caching: Caching,
    ) -> Result {
        let page = bindings::PAGE_SIZE as u64;
        if size != self.len() || size > entry.len() || !self.owns(entry) {
            return Err(EINVAL);
        }
        let len = u64::try_from(size)?;
        if offset % page != 0 || len % page != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `ctx` is the context of a running `mmap()` (type invariants); its device is
        // registered, and its parent (set at registration) bound, for the call.
        let parent = unsafe { (*(*self.ctx).device).__bindgen_anon_1.dev.parent };
        // SAFETY: As above, `parent` is a live device.
        let parent = unsafe { device::Device::from_raw(parent) };
        let pdev = <&crate::pci::Device>::try_from(parent)?;
        let start = pdev.resource_start(bar)?;
        let bar_len = pdev.resource_len(bar)?;
        // `pci::Device` is a transparent wrapper of `struct pci_dev`.
        let raw = core::ptr::from_ref(pdev).cast::<bindings::pci_dev>();
        // SAFETY: `bar` is a valid BAR index (checked by `resource_start`) of a live `pci_dev`.
        let flags = unsafe { (*raw).resource[bar as usize].flags };
        if flags & bindings::IORESOURCE_MEM as usize == 0 || start % page != 0 {
            return Err(EINVAL);
        }
        if offset.checked_add(len).is_none_or(|end| end > bar_len) {
            return Err(EINVAL);
        }
        let pfn = (start + offset) >> bindings::PAGE_SHIFT;
        // SAFETY: `vma` is valid; computing the page protection has no side effects.
        let prot = unsafe {
            let base = (*self.vma).vm_page_prot;
            match caching {
                Caching::Uncached => bindings::rdma_pgprot_noncached(base),
                Caching::WriteCombine => bindings::pgprot_writecombine(base),
            }
        };
        // SAFETY: `vma` belongs to a running `mmap()` on `ctx`, and `entry` is an entry of it;
        // the frames are the checked part of a memory BAR of the device's own PCI function.
        to_result(unsafe {
            bindings::rdma_user_mmap_io(
                self.ctx,
                self.vma,
                pfn as c_ulong,
                size as c_ulong,
                prot,
                entry.as_raw(),
            )
        })
    }
}

/// Driver-specific attributes of a resource in `rdma res` output.
///
/// # Invariants
///
/// `skb` is the netlink message being built by a `fill_res_*_entry` call.
pub struct ResMsg<'a> {
    skb: *mut bindings::sk_buff,
    _p: PhantomData<&'a mut bindings::sk_buff>,
}

impl<'a> ResMsg<'a> {
    /// # Safety
    ///
    /// `skb` must be the message of a running `fill_res_*_entry` call.
    pub(crate) unsafe fn new(skb: *mut bindings::sk_buff) -> Self {
        Self {
            skb,
            _p: PhantomData,
        }
    }

    /// Add `name = value`.
    pub fn put_u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `skb` is the message being built; `name` is NUL-terminated.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.skb, name.as_char_ptr(), value) })
    }

    /// Add `name = value`, shown in hexadecimal.
    pub fn put_u64_hex(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As above.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_u64_hex(self.skb, name.as_char_ptr(), value)
        })
    }

    /// Add `name = value`.
    pub fn put_str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: As above; both strings are NUL-terminated.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_string(self.skb, name.as_char_ptr(), value.as_char_ptr())
        })
    }
}
