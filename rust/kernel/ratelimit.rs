// SPDX-License-Identifier: GPL-2.0

//! Rate limiting of messages that others can trigger.
//!
//! A driver logs what user space or a network peer can cause (a refused request, a fault of a
//! user's queue) at most a few times per interval, so that nobody can flood the kernel log;
//! counters, not log lines, then say how often it happened.
//!
//! C header: [`include/linux/ratelimit.h`](srctree/include/linux/ratelimit.h)

use crate::{
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

/// Allows `burst` events per `interval`, like `struct ratelimit_state`.
///
/// Lock-free, usable from any context. Concurrent callers at the turn of an interval may let a
/// few more events through than `burst`, never unboundedly many.
pub struct Ratelimit {
    interval_ns: i64,
    burst: u32,
    /// Start of the current interval (monotonic nanoseconds); 0 before the first event.
    begin: Atomic<i64>,
    /// Events in the current interval, let through or not.
    events: Atomic<u32>,
    /// Events suppressed since the last one let through.
    missed: Atomic<u32>,
}

impl Ratelimit {
    /// A state allowing `burst` events per `interval`.
    pub const fn new(interval: Delta, burst: u32) -> Self {
        Self {
            interval_ns: interval.as_nanos(),
            burst,
            begin: Atomic::new(0),
            events: Atomic::new(0),
            missed: Atomic::new(0),
        }
    }

    /// The kernel's default for messages: 10 per 5 seconds
    /// (`DEFAULT_RATELIMIT_BURST`, `DEFAULT_RATELIMIT_INTERVAL`).
    pub const fn default_printk() -> Self {
        Self::new(Delta::from_secs(5), 10)
    }

    /// Whether one more event may pass now.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::<Monotonic>::now().as_nanos())
    }

    fn allow_at(&self, now: i64) -> bool {
        let begin = self.begin.load(Relaxed);
        if begin == 0 || now.saturating_sub(begin) >= self.interval_ns {
            // The first caller to see the interval end starts the next one.
            if self.begin.cmpxchg(begin, now.max(1), Relaxed).is_ok() {
                self.events.store(0, Relaxed);
            }
        }
        if self.events.fetch_add(1, Relaxed) < self.burst {
            true
        } else {
            self.missed.fetch_add(1, Relaxed);
            false
        }
    }

    /// Events suppressed so far (never reset).
    pub fn missed(&self) -> u32 {
        self.missed.load(Relaxed)
    }
}

/// Evaluates the statement (typically a print) at most 10 times per 5 seconds per call site.
///
/// # Examples
///
/// ```
/// for _ in 0..100 {
///     kernel::ratelimited!(kernel::pr_info!("printed at most 10 times\n"));
/// }
/// ```
///
/// With an interval and a burst first, at most `burst` times per `interval` instead, for
/// messages that can come in floods (faults a user can provoke by the thousand):
///
/// ```
/// use kernel::time::Delta;
///
/// kernel::ratelimited!(Delta::from_secs(60), 5, kernel::pr_info!("at most 5 a minute\n"));
/// ```
#[macro_export]
macro_rules! ratelimited {
    ($print:expr) => {{
        static RATELIMIT: $crate::ratelimit::Ratelimit =
            $crate::ratelimit::Ratelimit::default_printk();
        if RATELIMIT.allow() {
            $print;
        }
    }};
    ($interval:expr, $burst:expr, $print:expr) => {{
        static RATELIMIT: $crate::ratelimit::Ratelimit =
            $crate::ratelimit::Ratelimit::new($interval, $burst);
        if RATELIMIT.allow() {
            $print;
        }
    }};
}

#[macros::kunit_tests(rust_kernel_ratelimit)]
mod tests {
    use super::*;

    #[test]
    fn burst_per_interval() {
        let rl = Ratelimit::new(Delta::from_secs(1), 3);
        let t0 = 5_000_000_000;
        let passed = (0..100).filter(|_| rl.allow_at(t0)).count();
        assert_eq!(passed, 3);
        assert_eq!(rl.missed(), 97);
        // Still inside the interval: nothing more.
        assert!(!rl.allow_at(t0 + 999_999_999));
        // The next interval lets the burst through again.
        let passed = (0..10).filter(|_| rl.allow_at(t0 + 1_000_000_000)).count();
        assert_eq!(passed, 3);
    }
}
