// SPDX-License-Identifier: GPL-2.0

//! Interrupt vectors of a PCI device together with their handlers.
//!
//! [`irq::Registration::new`] is `unsafe` because a registration that is
//! forgotten in place leaves the interrupt core with a dangling cookie, and
//! a handler that borrows device resources may outlive them. [`IrqHandlers`]
//! removes both hazards for the common driver case: every registration is
//! heap-pinned and owned by the set, handlers borrow nothing (`T: 'static`),
//! and the set frees the interrupts before it frees the vectors.
//!
//! [`ThreadedIrqHandlers`] is the same for threaded handlers, whose second
//! half runs in a kernel thread and may sleep.

use super::{
    Device,
    IrqTypes,
    IrqVectorRegistration, //
};
use crate::{
    device::Bound,
    irq::{
        self,
        IrqRequest, //
    },
    prelude::*,
    str::CStr,
};

mod private {
    /// Only the registration types of [`crate::irq`] implement
    /// [`super::VectorRegistration`].
    pub trait Sealed {}
}

/// A registration of one interrupt handler, as [`IrqVectors`] keeps it.
///
/// Implemented by [`irq::Registration`] and [`irq::ThreadedRegistration`].
pub trait VectorRegistration<'a>: private::Sealed + Sized + 'a {
    /// The handler type.
    type Handler: 'static;

    /// Register `handler` for `request`.
    ///
    /// # Safety
    ///
    /// The returned registration must be dropped before the vector of
    /// `request` is freed, and must not be forgotten.
    unsafe fn register(
        request: IrqRequest<'a>,
        name: &'static CStr,
        handler: impl PinInit<Self::Handler, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a;

    /// The handler.
    fn handler(&self) -> &Self::Handler;

    /// Wait until the handler (and its thread, if any) is not running.
    fn synchronize(&self);
}

impl<T: irq::Handler + 'static> private::Sealed for irq::Registration<'_, T> {}

impl<'a, T: irq::Handler + 'static> VectorRegistration<'a> for irq::Registration<'a, T> {
    type Handler = T;

    unsafe fn register(
        request: IrqRequest<'a>,
        name: &'static CStr,
        handler: impl PinInit<T, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a {
        // SAFETY: Forwarded to the caller.
        unsafe { irq::Registration::new(request, irq::Flags::TRIGGER_NONE, name, handler) }
    }

    fn handler(&self) -> &T {
        irq::Registration::handler(self)
    }

    fn synchronize(&self) {
        irq::Registration::synchronize(self)
    }
}

impl<T: irq::ThreadedHandler + 'static> private::Sealed for irq::ThreadedRegistration<'_, T> {}

impl<'a, T: irq::ThreadedHandler + 'static> VectorRegistration<'a>
    for irq::ThreadedRegistration<'a, T>
{
    type Handler = T;

    unsafe fn register(
        request: IrqRequest<'a>,
        name: &'static CStr,
        handler: impl PinInit<T, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a {
        // SAFETY: Forwarded to the caller.
        unsafe { irq::ThreadedRegistration::new(request, irq::Flags::TRIGGER_NONE, name, handler) }
    }

    fn handler(&self) -> &T {
        irq::ThreadedRegistration::handler(self)
    }

    fn synchronize(&self) {
        irq::ThreadedRegistration::synchronize(self)
    }
}

/// Interrupt vectors allocated for a PCI device, each with a registered
/// handler of type `T`.
///
/// Dropping the set frees every interrupt (waiting for running handlers)
/// and then the vectors.
///
/// # Examples
///
/// ```
/// use kernel::{
///     device::Bound,
///     irq::{Handler, IrqReturn},
///     pci,
///     prelude::*,
///     sync::atomic::{Atomic, Relaxed},
///     sync::Arc,
/// };
///
/// struct Counter(Arc<Atomic<u32>>);
///
/// impl Handler for Counter {
///     fn handle(&self) -> IrqReturn {
///         self.0.add(1, Relaxed);
///         IrqReturn::Handled
///     }
/// }
///
/// fn setup<'a>(
///     pdev: &'a pci::Device<Bound>,
///     seen: &Arc<Atomic<u32>>,
/// ) -> Result<pci::IrqHandlers<'a, Counter>> {
///     let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
///     pdev.request_irq_handlers(4, msix, c"sample", |_vector| {
///         Ok(Counter(seen.clone()))
///     })
/// }
/// ```
pub type IrqHandlers<'a, T> = IrqVectors<'a, irq::Registration<'a, T>>;

/// Interrupt vectors allocated for a PCI device, each with a registered
/// threaded handler of type `T`.
pub type ThreadedIrqHandlers<'a, T> = IrqVectors<'a, irq::ThreadedRegistration<'a, T>>;

/// Interrupt vectors allocated for a PCI device, each with a handler
/// registration of type `R`: see [`IrqHandlers`] and [`ThreadedIrqHandlers`].
///
/// Dropping the set frees every interrupt (waiting for running handlers
/// and handler threads) and then the vectors.
pub struct IrqVectors<'a, R: VectorRegistration<'a>> {
    // Field order matters: the handlers are dropped (and their interrupts
    // freed) before the vectors they use.
    handlers: KVec<Pin<KBox<R>>>,
    vectors: IrqVectorRegistration<'a>,
}

impl<'a, R: VectorRegistration<'a>> IrqVectors<'a, R> {
    /// Number of vectors (and handlers).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    /// The handler of `vector`, if there is such a vector.
    pub fn handler(&self, vector: usize) -> Option<&R::Handler> {
        self.handlers.get(vector).map(|r| r.handler())
    }

    /// The Linux interrupt number of `vector`, for log messages.
    pub fn irq(&self, vector: usize) -> Result<u32> {
        Ok(IrqRequest::from(self.vectors.index(vector)?).irq())
    }

    /// Wait until no handler of this set is running on any CPU.
    pub fn synchronize(&self) {
        for r in self.handlers.iter() {
            r.synchronize();
        }
    }
}

impl Device<Bound> {
    /// Allocate exactly `count` interrupt vectors of one of `types` and
    /// register a handler on each, initialised by `init(vector_index)`
    /// (a `Result<T>` is such an initialiser).
    ///
    /// On failure nothing stays allocated or registered.
    pub fn request_irq_handlers<'a, T, I, F>(
        &'a self,
        count: u32,
        types: IrqTypes,
        name: &'static CStr,
        init: F,
    ) -> Result<IrqHandlers<'a, T>>
    where
        T: irq::Handler + 'static,
        I: PinInit<T, Error> + 'a,
        F: FnMut(usize) -> I,
    {
        self.request_vectors(count, types, name, init)
    }

    /// As [`Device::request_irq_handlers`], with threaded handlers: the
    /// hard interrupt half decides whether the thread, which may sleep,
    /// runs.
    pub fn request_threaded_irq_handlers<'a, T, I, F>(
        &'a self,
        count: u32,
        types: IrqTypes,
        name: &'static CStr,
        init: F,
    ) -> Result<ThreadedIrqHandlers<'a, T>>
    where
        T: irq::ThreadedHandler + 'static,
        I: PinInit<T, Error> + 'a,
        F: FnMut(usize) -> I,
    {
        self.request_vectors(count, types, name, init)
    }

    fn request_vectors<'a, R, I, F>(
        &'a self,
        count: u32,
        types: IrqTypes,
        name: &'static CStr,
        mut init: F,
    ) -> Result<IrqVectors<'a, R>>
    where
        R: VectorRegistration<'a>,
        I: PinInit<R::Handler, Error> + 'a,
        F: FnMut(usize) -> I,
    {
        let vectors = self.alloc_irq_vectors(count, count, types)?;
        let mut handlers = KVec::with_capacity(vectors.len(), GFP_KERNEL)?;
        for index in 0..vectors.len() {
            let irq = IrqRequest::from(vectors.index(index)?).irq();
            // SAFETY: `irq` was resolved from `vectors`, an allocation for
            // `self`, which stays allocated for as long as the request is
            // used (the registrations are dropped before `vectors`).
            let request = unsafe { IrqRequest::new(self.as_ref(), irq) };
            let handler = init(index);
            // SAFETY: the registration is pinned in a box that only
            // `IrqVectors` (or, on error, this function) owns and drops
            // before `vectors`. Forgetting an `IrqVectors` leaks the box
            // instead of freeing it, and handlers are `'static`: they
            // borrow nothing that could go away while they can still run.
            let registration = unsafe { R::register(request, name, handler) };
            handlers.push(KBox::pin_init(registration, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        Ok(IrqVectors { handlers, vectors })
    }
}
