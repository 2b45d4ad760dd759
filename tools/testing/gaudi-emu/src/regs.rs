// SPDX-License-Identifier: GPL-2.0
//! BAR0 register map. Documentation/infiniband/gaudi/device-model.rst is
//! the reference; the driver's `regs.rs` mirrors the same offsets.

/// Identification: reads [`ID_MAGIC`] on a Gaudi2 NIC.
pub const ID: u64 = 0x0000;
/// Programming-model version, major << 16 | minor.
pub const VERSION: u64 = 0x0004;
/// Read/write scratch register with no side effects.
pub const SCRATCH: u64 = 0x0008;
/// Write a vector number: the device raises that MSI-X vector with the
/// TEST cause set.
pub const IRQ_TEST: u64 = 0x0010;
/// Pending interrupt causes; write 1 to clear.
pub const IRQ_CAUSE: u64 = 0x0014;
/// Number of test interrupts the device has raised (read-only).
pub const IRQ_TEST_COUNT: u64 = 0x0018;

/// DMA self-test: bus address (low, high) and length of a host buffer.
pub const DMA_TEST_ADDR_LO: u64 = 0x0020;
pub const DMA_TEST_ADDR_HI: u64 = 0x0024;
pub const DMA_TEST_LEN: u64 = 0x0028;
/// Write [`DMA_TEST_START`]: the device reads the buffer and writes it back
/// with every byte inverted. Reads the status of the last test.
pub const DMA_TEST_CTRL: u64 = 0x002c;
/// Device DMA accesses refused because they fell outside guest memory the
/// device can reach (read-only).
pub const DMA_FAULT_COUNT: u64 = 0x0030;

pub const DMA_TEST_START: u32 = 1;
pub const DMA_TEST_IDLE: u32 = 0;
pub const DMA_TEST_DONE: u32 = 1;
pub const DMA_TEST_FAULT: u32 = 2;
/// Longest DMA self-test buffer.
pub const DMA_TEST_MAX_LEN: u32 = 4096;

/// "GAU2".
pub const ID_MAGIC: u32 = 0x4741_5532;
/// Programming model 1.0.
pub const MODEL_VERSION: u32 = 0x0001_0000;
/// Cause bit: test interrupt.
pub const CAUSE_TEST: u32 = 1 << 0;

/// Size of BAR0.
pub const BAR0_SIZE: u64 = 0x1_0000;
