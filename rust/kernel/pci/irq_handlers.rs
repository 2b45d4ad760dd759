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
//!
//! A device that fell off the bus raises no interrupt to say so. A threaded
//! handler that is also a [`PolledHandler`] can be polled by a timer of the
//! set ([`IrqVectors::start_poll`]), which runs the handler's thread when the
//! poll says so: the driver learns of the removal in process context, where
//! it can tear down what depends on the device.

use super::{
    Device,
    IrqTypes,
    IrqVectorRegistration, //
};
use crate::{
    bindings,
    device::Bound,
    irq::{
        self,
        IrqRequest, //
    },
    prelude::*,
    str::CStr,
    time::Delta,
    types::Opaque,
};
use core::ffi::c_void;

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
    // Field order matters: the poll timer is cancelled before the handlers
    // it calls are dropped, the handlers are dropped (and their interrupts
    // freed) before the vectors they use.
    poller: Option<Pin<KBox<Poller<R>>>>,
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
        Ok(IrqVectors {
            poller: None,
            handlers,
            vectors,
        })
    }
}

/// A threaded handler that is also polled, for what the device cannot signal
/// by interrupt (see [`IrqVectors::start_poll`]).
pub trait PolledHandler: irq::ThreadedHandler {
    /// Called every period of the poll, in hard interrupt context (it must
    /// not sleep): `true` runs the handler's thread
    /// ([`irq::ThreadedHandler::handle_threaded`]) as an interrupt whose
    /// hard half asked for it would.
    fn poll(&self) -> bool;
}

/// The poll timer of an [`IrqVectors`] set.
///
/// # Invariants
///
/// `timer` was set up by `hrtimer_setup()` with [`poll_callback::<R>`] as its
/// function, for an `R` whose handler is a [`PolledHandler`]. `registration`
/// points to the registration of the polled vector, heap-pinned in the set
/// that owns this poller, which cancels the timer before it drops the
/// registration; `irq` is the interrupt of that registration.
#[pin_data(PinnedDrop)]
struct Poller<R> {
    #[pin]
    timer: Opaque<bindings::hrtimer>,
    period: Delta,
    irq: u32,
    registration: *const R,
}

// SAFETY: The poller only reads the registration, which is `Sync`, from
// the timer, and calls interrupt core functions that may be called from any
// thread.
unsafe impl<R: Sync> Send for Poller<R> {}
// SAFETY: As for `Send`: `&Poller` gives access to nothing but the above.
unsafe impl<R: Sync> Sync for Poller<R> {}

#[pinned_drop]
impl<R> PinnedDrop for Poller<R> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: The timer was set up (type invariants); `hrtimer_cancel()`
        // returns once the timer is inactive and its callback, which re-arms
        // it, is not running, so it never runs again.
        unsafe { bindings::hrtimer_cancel(self.timer.get()) };
    }
}

/// The timer function of a [`Poller<R>`].
///
/// # Safety
///
/// `timer` is the `timer` field of a live [`Poller<R>`] (the only timers
/// set up with this function).
unsafe extern "C" fn poll_callback<'a, R>(
    timer: *mut bindings::hrtimer,
) -> bindings::hrtimer_restart
where
    R: VectorRegistration<'a>,
    R::Handler: PolledHandler,
{
    // SAFETY: `timer` is the `timer` field of a live `Poller<R>` (function
    // safety requirement); `Opaque<T>` has the layout of `T`.
    let poller = unsafe {
        &*crate::container_of!(timer.cast::<Opaque<bindings::hrtimer>>(), Poller<R>, timer)
    };
    // SAFETY: The registration outlives the poller's timer (type invariants
    // of `Poller`).
    let registration = unsafe { &*poller.registration };
    if registration.handler().poll() {
        // SAFETY: The cookie of a registration of `IrqVectors` is a pointer
        // to the registration (the invariant of the registration types of
        // `crate::irq`), registered for `poller.irq`. The core only compares
        // it to the cookies of the interrupt's actions.
        unsafe {
            bindings::irq_wake_thread(poller.irq, poller.registration.cast::<c_void>().cast_mut())
        };
    }
    // SAFETY: `timer` is set up, and this is its callback.
    unsafe { bindings::hrtimer_forward(timer, bindings::ktime_get(), poller.period.as_nanos()) };
    bindings::hrtimer_restart::HRTIMER_RESTART
}

impl<'a, T: PolledHandler + 'static> IrqVectors<'a, irq::ThreadedRegistration<'a, T>> {
    /// Poll the handler of `vector` every `period` from a timer, running its
    /// thread whenever [`PolledHandler::poll`] returns `true`, until the set
    /// is dropped (which stops the timer before it frees the interrupts).
    /// `EBUSY` if the set is polled already, `EINVAL` for no such vector or a
    /// period under a millisecond.
    pub fn start_poll(&mut self, vector: usize, period: Delta) -> Result {
        if self.poller.is_some() {
            return Err(EBUSY);
        }
        if period.as_nanos() < 1_000_000 {
            return Err(EINVAL);
        }
        let registration: *const irq::ThreadedRegistration<'a, T> =
            &**self.handlers.get(vector).ok_or(EINVAL)?;
        let irq = self.irq(vector)?;
        let poller = KBox::pin_init(
            pin_init!(Poller {
                timer <- Opaque::ffi_init(|place: *mut bindings::hrtimer| {
                    // SAFETY: `place` is the timer of a poller being
                    // initialised; `hrtimer_setup()` needs no prior state.
                    unsafe {
                        bindings::hrtimer_setup(
                            place,
                            Some(poll_callback::<irq::ThreadedRegistration<'a, T>>),
                            bindings::CLOCK_MONOTONIC as bindings::clockid_t,
                            bindings::hrtimer_mode_HRTIMER_MODE_REL,
                        )
                    }
                }),
                period,
                irq,
                registration,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The timer is set up with `poll_callback` for this
        // registration type and points to a registration of this set, which
        // the set drops only after the poller (field order): the invariants
        // of `Poller` hold from here on. The poller is pinned in a box the
        // set owns; dropping it cancels the timer.
        unsafe {
            bindings::hrtimer_start_range_ns(
                poller.timer.get(),
                period.as_nanos(),
                0,
                bindings::hrtimer_mode_HRTIMER_MODE_REL,
            )
        };
        self.poller = Some(poller);
        Ok(())
    }
}
