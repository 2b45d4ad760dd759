// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of device memory for peer-to-peer DMA.
//!
//! C header: [`include/linux/dma-buf.h`](srctree/include/linux/dma-buf.h)
//!
//! A driver exports a range of one of its PCI BARs (device memory, such as HBM) as a dma-buf,
//! so that other devices (an RDMA NIC registering it as a memory region, a GPU) reach it
//! peer-to-peer. Only importers that declare peer-to-peer support and that the PCI topology
//! allows to reach the exporter ([`pci_p2pdma_distance`]) may attach; others are refused with
//! `EOPNOTSUPP`. Mappings are DMA mappings of the BAR range ([`dma_map_resource`]) for the
//! importing device, described by a one-entry scatterlist without pages.
//!
//! The exported memory is described by a [`BarRange`], shared through an [`Arc`]: the dma-buf
//! holds a reference until it is released, that is after every importer has detached and every
//! file referring to it is closed, so the range stays allocated for as long as anyone may map
//! it. Once the device goes away, [`BarRange::phys_range`] fails and new mappings with it.
//!
//! [`pci_p2pdma_distance`]: srctree/include/linux/pci-p2pdma.h
//! [`dma_map_resource`]: srctree/include/linux/dma-mapping.h
//!
//! # Examples
//!
//! ```
//! use kernel::dma_buf::{BarRange, DmaBuf};
//! use kernel::prelude::*;
//! use kernel::sync::{aref::ARef, Arc};
//! use kernel::{device, pci};
//!
//! /// 2 MiB of device memory at `offset` into BAR 4.
//! struct HbmChunk {
//!     pdev: ARef<pci::Device>,
//!     phys: u64,
//! }
//!
//! impl BarRange for HbmChunk {
//!     fn provider(&self) -> &device::Device {
//!         self.pdev.as_ref()
//!     }
//!
//!     fn phys_range(&self) -> Result<(u64, usize)> {
//!         Ok((self.phys, 2 << 20))
//!     }
//! }
//!
//! fn export(chunk: Arc<HbmChunk>, module: &'static kernel::ThisModule) -> Result<u32> {
//!     DmaBuf::export(module, c"hbm", chunk, 2 << 20)?.into_fd(0)
//! }
//! ```

use crate::{
    bindings, device,
    error::{from_err_ptr, from_result, to_result},
    fs::File,
    prelude::*,
    sync::{aref::ARef, Arc},
    ThisModule,
};
use core::{marker::PhantomData, ptr::NonNull};

/// Largest length of one scatterlist entry (a 32-bit field), kept page-aligned.
const SG_MAX_LEN: usize = 1 << 31;

/// Set the DMA address and length of `sg` (`sg_dma_address()`, `sg_dma_len()`), wherever the
/// architecture keeps the DMA length.
///
/// # Safety
///
/// `sg` must be a valid entry of a table the caller owns.
unsafe fn sg_set_dma(sg: *mut bindings::scatterlist, addr: u64, len: u32) {
    // SAFETY: By the safety requirements.
    unsafe {
        (*sg).dma_address = addr;
        #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
        {
            (*sg).dma_length = len;
        }
        #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
        {
            (*sg).length = len;
        }
    }
}

/// The DMA length of `sg` (`sg_dma_len()`).
///
/// # Safety
///
/// `sg` must be a valid entry of a live table.
unsafe fn sg_dma_len(sg: *mut bindings::scatterlist) -> u32 {
    // SAFETY: By the safety requirements.
    unsafe {
        #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
        {
            (*sg).dma_length
        }
        #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
        {
            (*sg).length
        }
    }
}

/// Device memory exported as a dma-buf: a range of a PCI BAR of the provider device.
pub trait BarRange: Send + Sync + Sized + 'static {
    /// The PCI device whose BAR holds the memory.
    fn provider(&self) -> &device::Device;

    /// The CPU physical address and the length of the range; `ENODEV` once the provider is
    /// unbound. The length must not change.
    fn phys_range(&self) -> Result<(u64, usize)>;
}

/// A reference to a dma-buf (a reference to its file).
///
/// # Invariants
///
/// `ptr` is a dma-buf to which this object holds one reference.
pub struct DmaBuf {
    ptr: NonNull<bindings::dma_buf>,
}

// SAFETY: dma-buf references may be dropped from any thread.
unsafe impl Send for DmaBuf {}
// SAFETY: Shared references only read immutable fields.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Export the memory of `range`, `size` bytes (a multiple of `PAGE_SIZE`, equal to the
    /// length of the range), as a dma-buf named `name`.
    pub fn export<E: BarRange>(
        module: &'static ThisModule,
        name: &'static CStr,
        range: Arc<E>,
        size: usize,
    ) -> Result<Self> {
        let (_, len) = range.phys_range()?;
        if size == 0 || size != len || size % bindings::PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let info = bindings::dma_buf_export_info {
            exp_name: name.as_char_ptr(),
            owner: module.as_ptr(),
            ops: &BarOps::<E>::OPS,
            size,
            flags: bindings::O_RDWR as c_int,
            resv: core::ptr::null_mut(),
            priv_: Arc::into_raw(range).cast_mut().cast(),
        };
        // SAFETY: `info` is complete; the ops are a `'static` constant whose callbacks expect
        // `priv_` to be an `Arc<E>` turned into a raw pointer, which the dma-buf owns from now.
        let res = from_err_ptr(unsafe { bindings::dma_buf_export(&info) });
        match res {
            // INVARIANT: A new dma-buf comes with one reference.
            Ok(ptr) => Ok(Self {
                ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
            }),
            Err(e) => {
                // SAFETY: The export failed, so `priv_` was not taken over: give it back.
                drop(unsafe { Arc::<E>::from_raw(info.priv_.cast::<E>()) });
                Err(e)
            }
        }
    }

    /// The raw `struct dma_buf`.
    pub fn as_raw(&self) -> *mut bindings::dma_buf {
        self.ptr.as_ptr()
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: `ptr` is live by the type invariants; the size never changes.
        unsafe { (*self.as_raw()).size }
    }

    /// The file of the dma-buf, which takes over this reference; for example to install it in
    /// a [`FileDescriptorReservation`] once the descriptor number has been reported.
    ///
    /// [`FileDescriptorReservation`]: crate::fs::file::FileDescriptorReservation
    pub fn into_file(self) -> ARef<File> {
        // SAFETY: `ptr` is live by the type invariants, and so is its file: a reference to the
        // dma-buf is a reference to its file (`dma_buf_put()` is `fput()`). The file is not in
        // any file descriptor table through this reference, so no `fdget_pos()` is active on
        // it.
        let file = unsafe { File::from_raw_file((*self.as_raw()).file) };
        core::mem::forget(self);
        // SAFETY: The reference of `self`, forgotten above, is handed over.
        unsafe { ARef::from_raw(NonNull::from(file)) }
    }

    /// Install the dma-buf in a new file descriptor of the calling process (`flags`: `O_CLOEXEC`
    /// or 0), which takes over this reference.
    pub fn into_fd(self, flags: u32) -> Result<u32> {
        // SAFETY: `ptr` is live by the type invariants.
        let fd = unsafe { bindings::dma_buf_fd(self.as_raw(), flags as c_int) };
        to_result(fd)?;
        // On success the file descriptor owns the reference.
        core::mem::forget(self);
        Ok(fd as u32)
    }
}

impl Clone for DmaBuf {
    fn clone(&self) -> Self {
        // SAFETY: `ptr` is live by the type invariants; this takes another reference.
        unsafe { bindings::get_dma_buf(self.as_raw()) };
        // INVARIANT: The reference taken above.
        Self { ptr: self.ptr }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: This object owns one reference (type invariants).
        unsafe { bindings::dma_buf_put(self.as_raw()) };
    }
}

/// The `struct dma_buf_ops` of BAR range `E`.
struct BarOps<E>(PhantomData<E>);

/// The importer's view of a BAR range mapping: one DMA range, no pages.
const MAP_ATTRS: usize = bindings::DMA_ATTR_SKIP_CPU_SYNC as usize;

impl<E: BarRange> BarOps<E> {
    const OPS: bindings::dma_buf_ops = bindings::dma_buf_ops {
        attach: Some(Self::attach),
        pin: Some(Self::pin),
        unpin: Some(Self::unpin),
        map_dma_buf: Some(Self::map),
        unmap_dma_buf: Some(Self::unmap),
        release: Some(Self::release),
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// `dmabuf` must be a dma-buf exported with these operations.
    unsafe fn range<'a>(dmabuf: *mut bindings::dma_buf) -> &'a E {
        // SAFETY: `priv_` holds the `Arc<E>` given at export until `release`.
        unsafe { &*(*dmabuf).priv_.cast::<E>() }
    }

    /// The PCI device of a `struct device`, if it is one.
    fn pci_dev(dev: &device::Device) -> Option<*mut bindings::pci_dev> {
        // `pci::Device` is a transparent wrapper of `struct pci_dev`.
        <&crate::pci::Device>::try_from(dev).ok().map(|p| {
            core::ptr::from_ref(p)
                .cast::<bindings::pci_dev>()
                .cast_mut()
        })
    }

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn attach(
        dmabuf: *mut bindings::dma_buf,
        attach: *mut bindings::dma_buf_attachment,
    ) -> c_int {
        from_result(|| {
            // SAFETY: The core passes a dma-buf of ours and a valid attachment whose device is
            // live while attached.
            let (range, p2p, importer): (&E, bool, &device::Device) = unsafe {
                (
                    Self::range(dmabuf),
                    (*attach).peer2peer,
                    device::Device::from_raw((*attach).dev),
                )
            };
            if !p2p {
                dev_warn!(
                    importer,
                    "dma-buf of device memory refused: the importer does not do peer-to-peer\n"
                );
                return Err(EOPNOTSUPP);
            }
            let provider = Self::pci_dev(range.provider()).ok_or(EINVAL)?;
            // SAFETY: `provider` is a live PCI device (the range holds a reference) and the
            // importer a live device.
            let dist = unsafe { bindings::pci_p2pdma_distance(provider, (*attach).dev, true) };
            if dist < 0 {
                dev_warn!(
                    importer,
                    "dma-buf of device memory refused: no peer-to-peer path to the exporter\n"
                );
                return Err(EOPNOTSUPP);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn pin(_attach: *mut bindings::dma_buf_attachment) -> c_int {
        // Device memory never moves.
        0
    }

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn unpin(_attach: *mut bindings::dma_buf_attachment) {}

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn map(
        attach: *mut bindings::dma_buf_attachment,
        dir: bindings::dma_data_direction,
    ) -> *mut bindings::sg_table {
        let res = (|| -> Result<*mut bindings::sg_table> {
            // SAFETY: The core passes a valid attachment of a dma-buf of ours.
            let (range, dev) = unsafe { (Self::range((*attach).dmabuf), (*attach).dev) };
            let (phys, len) = range.phys_range()?;
            // One mapping, described by as many entries as the entries' 32-bit lengths need.
            let entries = len.div_ceil(SG_MAX_LEN);
            let nents = u32::try_from(entries).map_err(|_| EINVAL)?;
            if len == 0 {
                return Err(EINVAL);
            }
            // SAFETY: `dev` is the live importing device; the range is device memory of the
            // provider, which the attach check found reachable peer-to-peer.
            let dma = unsafe { bindings::dma_map_resource(dev, phys, len, dir, MAP_ATTRS) };
            // SAFETY: `dma` was just returned for `dev`.
            if unsafe { bindings::dma_mapping_error(dev, dma) } != 0 {
                return Err(EIO);
            }
            let unmap = || {
                // SAFETY: `dma` is a live mapping of `len` bytes for `dev`.
                unsafe { bindings::dma_unmap_resource(dev, dma, len, dir, MAP_ATTRS) }
            };
            let sgt = match KBox::new(pin_init::zeroed::<bindings::sg_table>(), GFP_KERNEL) {
                Ok(b) => KBox::into_raw(b),
                Err(e) => {
                    unmap();
                    return Err(e.into());
                }
            };
            // SAFETY: `sgt` is a zeroed, owned `struct sg_table`.
            let ret = unsafe { bindings::sg_alloc_table(sgt, nents, bindings::GFP_KERNEL) };
            if let Err(e) = to_result(ret) {
                // SAFETY: `sgt` came from `KBox::into_raw` and holds no table.
                drop(unsafe { KBox::from_raw(sgt) });
                unmap();
                return Err(e);
            }
            // SAFETY: The table has `nents` entries, visited in order; they describe the DMA
            // range only (no page).
            unsafe {
                let mut sg = (*sgt).sgl;
                let mut done = 0usize;
                while done < len {
                    let n = (len - done).min(SG_MAX_LEN);
                    sg_set_dma(sg, dma + done as u64, n as u32);
                    done += n;
                    sg = bindings::sg_next(sg);
                }
            }
            Ok(sgt)
        })();
        match res {
            Ok(sgt) => sgt,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn unmap(
        attach: *mut bindings::dma_buf_attachment,
        sgt: *mut bindings::sg_table,
        dir: bindings::dma_data_direction,
    ) {
        // SAFETY: `sgt` is a table returned by `map` for this attachment, which the importer no
        // longer uses; its one entry holds the mapping.
        unsafe {
            let mut len = 0usize;
            let mut sg = (*sgt).sgl;
            for _ in 0..(*sgt).nents {
                len += sg_dma_len(sg) as usize;
                sg = bindings::sg_next(sg);
            }
            bindings::dma_unmap_resource(
                (*attach).dev,
                (*(*sgt).sgl).dma_address,
                len,
                dir,
                MAP_ATTRS,
            );
            bindings::sg_free_table(sgt);
            drop(KBox::from_raw(sgt));
        }
    }

    /// # Safety
    ///
    /// Called only by the dma-buf core, as this operation of a dma-buf exported with `Self::OPS`.
    unsafe extern "C" fn release(dmabuf: *mut bindings::dma_buf) {
        // SAFETY: The last reference to the dma-buf is gone: the `Arc<E>` given at export is
        // dropped here, once.
        drop(unsafe { Arc::<E>::from_raw((*dmabuf).priv_.cast::<E>()) });
    }
}
