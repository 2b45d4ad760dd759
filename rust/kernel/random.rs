// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A random `u32` (`get_random_u32()`), for values a peer or another process must not guess,
/// such as memory keys.
///
/// Callable from any context.
pub fn get_random_u32() -> u32 {
    // SAFETY: `get_random_u32()` has no preconditions and may be called from any context.
    unsafe { bindings::get_random_u32() }
}

/// A random `u32` below `ceil` (0 when `ceil` is 0), by multiplying and shifting: the bias is
/// below `ceil / 2^32`, which does not matter for spreading identifiers.
pub fn get_random_u32_below(ceil: u32) -> u32 {
    ((u64::from(get_random_u32()) * u64::from(ceil)) >> 32) as u32
}
