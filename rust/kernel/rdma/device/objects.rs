// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's objects of a device (user contexts, protection domains, CQs, QPs, memory
//! regions), with the driver's data in them.

use super::*;

/// Where the RDMA core's objects keep the driver's data.
///
/// The core allocates each object with the size the driver declares (`size_ib_*` of
/// `struct ib_device_ops`), with the core object at offset 0, and hands it to the driver to
/// initialise. These wrappers are those allocations.
macro_rules! core_object {
    (@data_ptr $raw:ident, $data:ident) => {
        /// A pointer to the driver's data of a raw core object.
        ///
        /// # Safety
        ///
        /// `raw` must be the core object of a `Self` allocation.
        pub(crate) unsafe fn data_ptr(raw: *mut bindings::$raw) -> *mut T::$data {
            // SAFETY: `raw` is the start of a `Self` allocation by the safety requirements.
            unsafe { &raw mut (*raw.cast::<Self>()).data }
        }
    };
    (@glue_ptr $raw:ident, $gty:ty) => {
        /// A pointer to the glue's part of a raw core object.
        ///
        /// # Safety
        ///
        /// `raw` must be the core object of a `Self` allocation.
        pub(crate) unsafe fn glue_ptr(raw: *mut bindings::$raw) -> *mut $gty {
            // SAFETY: `raw` is the start of a `Self` allocation by the safety requirements.
            unsafe { &raw mut (*raw.cast::<Self>()).glue }
        }
    };
    ($(#[$meta:meta])* $name:ident, $raw:ident, $data:ident $(, $core_allocated:ident)?
     $(; glue: $gty:ty)?) => {
        $(#[$meta])*
        ///
        /// # Invariants
        ///
        /// The object was allocated by the RDMA core for a device of driver `T` (with the size
        /// of `Self`), the core object is initialised by the core, `data` by the driver and the
        /// glue's part, if any, by the glue.
        #[repr(C)]
        #[pin_data]
        pub struct $name<T: Driver> {
            ib: Opaque<bindings::$raw>,
            $(
                #[pin]
                glue: $gty,
            )?
            #[pin]
            data: T::$data,
        }

        impl<T: Driver> $name<T> {
            /// The object for a raw core object.
            ///
            /// # Safety
            ///
            /// `raw` must be the core object of a live `Self` whose data is initialised, valid
            /// for `'a`.
            pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::$raw) -> &'a Self {
                // SAFETY: The core object is the first field of `#[repr(C)] Self`, valid for
                // `'a` by the safety requirements.
                unsafe { &*raw.cast::<Self>() }
            }

            $(core_object!(@$core_allocated $raw, $data);)?
            $(core_object!(@glue_ptr $raw, $gty);)?

            /// The raw core object.
            pub fn as_raw(&self) -> *mut bindings::$raw {
                self.ib.get()
            }

            /// The device the object belongs to.
            pub fn device(&self) -> &Device<T> {
                // SAFETY: By the type invariants the core set `device` to the registered device
                // of driver `T` that the object belongs to, which outlives its objects.
                unsafe { Device::from_raw((*self.as_raw()).device) }
            }

            /// The driver's data.
            pub fn data(&self) -> &T::$data {
                &self.data
            }
        }

        // SAFETY: The core object is synchronised by the RDMA core; the driver's data is `Send`.
        unsafe impl<T: Driver> Send for $name<T> {}
        // SAFETY: Shared references only read what the core does not change during the object's
        // life and hand out `&T::$data`, which is `Sync`.
        unsafe impl<T: Driver> Sync for $name<T> {}
    };
}

/// A user context (`struct ib_ucontext`): what one process opened on a device.
///
/// # Invariants
///
/// The object was allocated by the RDMA core for a device of driver `T` (with the size of
/// `Self`); the core object is initialised by the core, `mmap` and `data` by the glue. `mmap`
/// holds the entries inserted by [`Ucontext::mmap_insert`] and not yet removed, each with its
/// insertion reference.
#[repr(C)]
#[pin_data]
pub struct Ucontext<T: Driver> {
    pub(super) ib: Opaque<bindings::ib_ucontext>,
    #[pin]
    pub(super) mmap: Mutex<KVec<usize>>,
    #[pin]
    pub(super) data: T::Ucontext,
}

// SAFETY: The core object is synchronised by the RDMA core, `mmap` by its lock; the driver's
// data is `Send`.
unsafe impl<T: Driver> Send for Ucontext<T> {}
// SAFETY: Shared references only read what the core does not change during the object's life,
// lock `mmap`, and hand out `&T::Ucontext`, which is `Sync`.
unsafe impl<T: Driver> Sync for Ucontext<T> {}

impl<T: Driver> Ucontext<T> {
    /// The context of a raw core object.
    ///
    /// # Safety
    ///
    /// `raw` must be the core object of a live `Self` whose data is initialised, valid for
    /// `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::ib_ucontext) -> &'a Self {
        // SAFETY: The core object is the first field of `#[repr(C)] Self`, valid for `'a`.
        unsafe { &*raw.cast::<Self>() }
    }

    /// The raw core object.
    pub fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.ib.get()
    }

    /// The device the context belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: The core set `device` to the registered device of driver `T`, which outlives
        // its contexts.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The driver's data.
    pub fn data(&self) -> &T::Ucontext {
        &self.data
    }

    /// Offer `length` bytes (a multiple of `PAGE_SIZE`), described by `data`, to `mmap()` by
    /// this context; returns the offset user space passes to `mmap()`. The entry stays until
    /// [`Ucontext::mmap_remove`] or the end of the context, and its data until no VMA maps it.
    pub fn mmap_insert(
        &self,
        length: usize,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        self.mmap_insert_entry(length, None, data)
    }

    /// Offer queue memory `mem`, described by `data`, to `mmap()` by this context
    /// ([`Vma::map_coherent`]); `EINVAL` if it was allocated for another device. Returns the
    /// offset user space passes to `mmap()`. The entry holds `mem` until no VMA maps it any
    /// more.
    pub fn mmap_insert_coherent(
        &self,
        mem: &QueueMem,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        if !mem.is_for(self) {
            return Err(EINVAL);
        }
        self.mmap_insert_entry(mem.size(), Some(mem.clone()), data)
    }

    fn mmap_insert_entry(
        &self,
        length: usize,
        mem: Option<QueueMem>,
        data: impl PinInit<T::MmapEntry, Error>,
    ) -> Result<u64> {
        let mut entries = self.mmap.lock();
        entries.reserve(1, GFP_KERNEL)?;
        let entry = MmapEntry::<T>::insert(self, length, mem, data)?;
        // SAFETY: `entry` was just inserted; its offset never changes.
        let offset = unsafe { MmapEntry::<T>::from_raw(entry) }.offset();
        if entries.push_within_capacity(entry as usize).is_err() {
            // Not reached: room was reserved above. Do not leak the entry.
            // SAFETY: We own the insertion reference of the new entry.
            unsafe { bindings::rdma_user_mmap_entry_remove(entry) };
            return Err(ENOMEM);
        }
        Ok(offset)
    }

    /// Remove the entry at `offset` (from [`Ucontext::mmap_insert`]): no new mapping can be
    /// made of it; existing ones stay until unmapped. `ENOENT` if there is none.
    pub fn mmap_remove(&self, offset: u64) -> Result {
        let entry = {
            let mut entries = self.mmap.lock();
            let listed = |e: &usize| {
                let raw = *e as *mut bindings::rdma_user_mmap_entry;
                // SAFETY: Listed entries are alive (type invariants).
                unsafe { MmapEntry::<T>::from_raw(raw) }.offset()
            };
            let i = entries
                .iter()
                .position(|e| listed(e) == offset)
                .ok_or(ENOENT)?;
            entries.remove(i)?
        };
        // SAFETY: The entry was listed, so we own its insertion reference, given up here.
        unsafe {
            bindings::rdma_user_mmap_entry_remove(entry as *mut bindings::rdma_user_mmap_entry)
        };
        Ok(())
    }

    /// Remove every entry still listed (the context is going away).
    pub(super) fn mmap_remove_all(&self) {
        let entries = core::mem::take(&mut *self.mmap.lock());
        for e in entries.iter() {
            // SAFETY: Each listed entry comes with its insertion reference, given up here.
            unsafe {
                bindings::rdma_user_mmap_entry_remove(*e as *mut bindings::rdma_user_mmap_entry)
            };
        }
    }
}

core_object!(
    /// A protection domain (`struct ib_pd`).
    Pd,
    ib_pd,
    Pd,
    data_ptr
);

core_object!(
    /// A completion queue (`struct ib_cq`).
    Cq,
    ib_cq,
    Cq,
    data_ptr;
    glue: CqGlue
);

/// The glue's part of a completion queue.
///
/// # Invariants
///
/// `qps` holds the live queue pairs of the device that complete on this queue (its send or
/// receive completion queue), under their numbers: the addresses of their `Qp<T>`, with
/// initialised data. An entry is inserted once its queue pair is created and removed, under the
/// lock, before the driver destroys it; polling holds the lock while it reports completions.
#[pin_data]
pub(crate) struct CqGlue {
    /// The number the driver gave the queue, its key in the device's table.
    pub(super) id: Option<u32>,
    #[pin]
    pub(super) qps: CqQps,
}

/// The queue pairs that complete on one completion queue, by number: addresses of `Qp<T>`.
///
/// The lock disables interrupts: completion polling, which kernel consumers do in any context,
/// holds it (one queue's lock, once per poll).
pub(crate) type CqQps = SpinLockIrq<RBTree<u32, usize>>;

impl CqGlue {
    pub(super) fn new(id: Option<u32>) -> impl PinInit<Self> {
        pin_init!(Self {
            id,
            qps <- new_spinlock_irq!(RBTree::new(), "rdma::Cq::qps"),
        })
    }
}

core_object!(
    /// A queue pair (`struct ib_qp`).
    Qp,
    ib_qp,
    Qp,
    data_ptr
);

core_object!(
    /// A memory region (`struct ib_mr`), allocated by the driver glue.
    Mr,
    ib_mr,
    Mr
);

impl<T: Driver> Qp<T> {
    /// The queue pair number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: `qp_num` is set at creation and never changes.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The protection domain of the queue pair.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: The core set `pd` to a live PD of this device, which it keeps while the QP
        // exists.
        unsafe { Pd::from_raw((*self.as_raw()).pd) }
    }

    /// Report an asynchronous event of the queue pair (`IB_EVENT_QP_FATAL`, ...) to its owner.
    pub fn dispatch_event(&self, event: QpEvent) {
        // SAFETY: `as_raw` is a live QP; the core calls its event handler if one is set.
        unsafe {
            let qp = self.as_raw();
            if let Some(handler) = (*qp).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*qp).device;
                ev.event = event as u32;
                ev.element.qp = qp;
                handler(&mut ev, (*qp).qp_context);
            }
        }
    }
}

/// Asynchronous events of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpEvent {
    /// The queue pair went to the error state.
    Fatal = bindings::ib_event_type_IB_EVENT_QP_FATAL,
    /// A request violated the access rules (remote access error).
    AccessErr = bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
    /// The first packet arrived on a queue pair in RTR.
    CommEst = bindings::ib_event_type_IB_EVENT_COMM_EST,
}

impl<T: Driver> Cq<T> {
    /// The glue's part.
    pub(crate) fn glue(&self) -> &CqGlue {
        &self.glue
    }

    /// Number of entries.
    pub fn cqe(&self) -> u32 {
        // SAFETY: `cqe` is set at creation (by the glue, from the driver) and only changed by
        // resize, which the glue does not offer.
        unsafe { (*self.as_raw()).cqe as u32 }
    }

    /// Report to the owner that the completion queue failed (`IB_EVENT_CQ_ERR`), as after an
    /// overflow: completions were lost.
    pub fn dispatch_error(&self) {
        // SAFETY: `as_raw` is a live CQ; the core set its event handler and context, if any.
        unsafe {
            let cq = self.as_raw();
            if let Some(handler) = (*cq).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*cq).device;
                ev.event = bindings::ib_event_type_IB_EVENT_CQ_ERR;
                ev.element.cq = cq;
                handler(&mut ev, (*cq).cq_context);
            }
        }
    }

    /// Signal the consumer that completions arrived (the completion event channel for user
    /// space), as an interrupt handler does after an armed CQ got an entry.
    pub fn notify_completion(&self) {
        // SAFETY: `as_raw` is a live CQ; its handler and context are set by the core.
        unsafe {
            let cq = self.as_raw();
            if let Some(handler) = (*cq).comp_handler {
                handler(cq, (*cq).cq_context);
            }
        }
    }
}

impl<T: Driver> Mr<T> {
    /// The keys of the memory region.
    pub fn keys(&self) -> MrKeys {
        // SAFETY: The keys are set at registration and never change.
        unsafe {
            MrKeys {
                lkey: (*self.as_raw()).lkey,
                rkey: (*self.as_raw()).rkey,
            }
        }
    }

    /// The protection domain of the memory region.
    pub fn pd(&self) -> &Pd<T> {
        // SAFETY: The core sets `pd` after registration to a live PD of this device, which it
        // keeps while the MR exists; the driver sees the MR only after that.
        unsafe { Pd::from_raw((*self.as_raw()).pd) }
    }
}

impl<T: Driver> Pd<T> {
    /// The user context the protection domain belongs to, `None` for a kernel consumer's.
    pub fn ucontext(&self) -> Option<&Ucontext<T>> {
        // SAFETY: `uobject` is set by the core before the driver sees the object, and for user
        // objects `uobject->context` is the live context of driver `T` owning it.
        unsafe {
            let uobject = (*self.as_raw()).uobject;
            if uobject.is_null() {
                return None;
            }
            let ctx = (*uobject).context;
            (!ctx.is_null()).then(|| Ucontext::from_raw(ctx))
        }
    }
}

/// Allocate a memory region whose data `init` makes.
pub(super) fn alloc_mr<T: Driver>(init: impl PinInit<T::Mr, Error>) -> Result<*mut Mr<T>> {
    let mr = KBox::pin_init(
        try_pin_init!(Mr::<T> {
            ib: Opaque::zeroed(),
            data <- init,
        }? Error),
        GFP_KERNEL,
    )?;
    // SAFETY: The MR stays pinned: it is only freed through `KBox::from_raw` in `dereg_mr`.
    Ok(KBox::into_raw(unsafe { Pin::into_inner_unchecked(mr) }))
}
