// SPDX-License-Identifier: GPL-2.0

//! What the drivers of the Gaudi2 NIC exchange.
//!
//! The NIC of a Habana Labs Gaudi2 accelerator is a block of the chip, not a device of its
//! own. Whoever owns the chip (habanalabs on a host, the driver of the emulated PCI function
//! under test) gives it to the NIC core through an auxiliary device whose registration data is
//! a [`chip::ChipDevice`]: the chip's registers and services behind [`chip::Chip`]. The core
//! gives the RDMA driver an auxiliary device of its own whose registration data is a
//! `cn::CnDevice`: the core behind `cn::Cn`. The formats of the NIC's structures, which
//! they all write or read, are in [`gaudi2`].
//!
//! The drivers are separate modules, and `kernel` is the only crate modules share: the types
//! they exchange live here, as those of Habana's C drivers live in
//! `include/linux/net/intel/`.
//!
//! Documentation: Documentation/infiniband/gaudi/design.rst, "Layering".

pub mod chip;
#[cfg(all(CONFIG_INFINIBAND = "y", CONFIG_INFINIBAND_USER_ACCESS = "y"))]
pub mod cn;
pub mod gaudi2;
pub mod habanalabs;

use crate::{
    prelude::*,
    sync::{
        Arc,
        CondVar,
        Mutex, //
    },
};

/// A receiver of events that is set and cleared while events are delivered: clearing it
/// returns once no call to it runs any more, and no reference to it is left.
///
/// # Examples
///
/// ```
/// use kernel::{net::gaudi::Receiver, sync::Arc};
///
/// let r = KBox::pin_init(Receiver::<u32>::new(), GFP_KERNEL)?;
/// assert_eq!(r.call(|v| *v), None);
/// let to = Arc::new(7, GFP_KERNEL)?;
/// r.set_to(Some(to.clone()));
/// assert!(r.is_set());
/// assert_eq!(r.call(|v| *v + 1), Some(8));
/// r.set_to(None);
/// // The slot kept no reference.
/// assert_eq!(r.call(|v| *v), None);
/// assert!(Arc::into_unique_or_drop(to).is_some());
/// # Ok::<(), Error>(())
/// ```
#[pin_data]
pub struct Receiver<T: ?Sized> {
    #[pin]
    state: Mutex<Slot<T>>,
    /// Notified when no call to the receiver runs any more.
    #[pin]
    idle: CondVar,
}

/// The names of the lock classes of every [`Receiver`]'s lock and condition.
static RECEIVER_STATE: &CStr = c"net::gaudi::Receiver::state";
static RECEIVER_IDLE: &CStr = c"net::gaudi::Receiver::idle";

struct Slot<T: ?Sized> {
    to: Option<Arc<T>>,
    running: u32,
}

impl<T: ?Sized + Send + Sync> Receiver<T> {
    /// A receiver slot with nobody in it.
    pub fn new() -> impl PinInit<Self> {
        // The lock classes' names are statics, not literals of this generic function: a
        // literal would be a copy of its own in each crate that instantiates it, and lockdep
        // refuses two names for one class.
        pin_init!(Self {
            state <- Mutex::new(
                Slot { to: None, running: 0 },
                RECEIVER_STATE,
                crate::static_lock_class!()
            ),
            idle <- CondVar::new(RECEIVER_IDLE, crate::static_lock_class!()),
        })
    }

    /// Run `f` on the receiver, if there is one; `None` if there is none. May sleep; must
    /// not be called from the receiver.
    pub fn call<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let to = {
            let mut s = self.state.lock();
            let to = s.to.clone()?;
            s.running += 1;
            to
        };
        let r = f(&to);
        drop(to);
        let mut s = self.state.lock();
        s.running -= 1;
        if s.running == 0 {
            self.idle.notify_all();
        }
        Some(r)
    }

    /// Whether there is a receiver.
    pub fn is_set(&self) -> bool {
        self.state.lock().to.is_some()
    }

    /// Make `to` the receiver; with `None`, return once no call to the previous one runs.
    ///
    /// Callers serialise their calls (a driver's probe and unbind are), and clearing the
    /// receiver from inside one of its calls would wait for itself.
    pub fn set_to(&self, to: Option<Arc<T>>) {
        let mut s = self.state.lock();
        let set = to.is_some();
        let old = core::mem::replace(&mut s.to, to);
        if !set {
            while s.running != 0 {
                self.idle.wait(&mut s);
            }
        }
        drop(s);
        drop(old);
    }
}
