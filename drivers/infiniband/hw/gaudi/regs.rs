// SPDX-License-Identifier: GPL-2.0

//! BAR0 register map of the Gaudi2 NIC.
//!
//! Documentation/infiniband/gaudi/device-model.rst is the reference.

/// Size of BAR0.
pub(crate) const BAR0_SIZE: usize = 0x1_0000;

/// Identification register; reads [`ID_MAGIC`].
pub(crate) const ID: usize = 0x0000;
/// Programming-model version: major in bits 31:16, minor in bits 15:0.
pub(crate) const VERSION: usize = 0x0004;
/// Scratch register, no side effects.
pub(crate) const SCRATCH: usize = 0x0008;
/// Write a vector number to raise a test interrupt on it.
pub(crate) const IRQ_TEST: usize = 0x0010;
/// Pending interrupt causes; write 1 to clear.
pub(crate) const IRQ_CAUSE: usize = 0x0014;

/// DMA self-test: bus address (low, high) and length of a host buffer.
pub(crate) const DMA_TEST_ADDR_LO: usize = 0x0020;
pub(crate) const DMA_TEST_ADDR_HI: usize = 0x0024;
pub(crate) const DMA_TEST_LEN: usize = 0x0028;
/// Write [`DMA_TEST_START`] to invert the buffer in place; read the status.
pub(crate) const DMA_TEST_CTRL: usize = 0x002c;

pub(crate) const DMA_TEST_START: u32 = 1;
pub(crate) const DMA_TEST_DONE: u32 = 1;

/// "GAU2".
pub(crate) const ID_MAGIC: u32 = 0x4741_5532;
/// The programming-model major version this driver implements.
pub(crate) const MODEL_MAJOR: u32 = 1;
/// Interrupt cause: test interrupt.
pub(crate) const CAUSE_TEST: u32 = 1 << 0;
