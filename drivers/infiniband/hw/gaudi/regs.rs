// SPDX-License-Identifier: GPL-2.0

//! BAR0 register map of the Gaudi2 NIC.
//!
//! Documentation/infiniband/gaudi/device-model.rst is the reference.

/// Size of BAR0: registers, then the doorbell pages.
pub(crate) const BAR0_SIZE: usize = 0x10_0000;

/// Identification register; reads [`ID_MAGIC`].
pub(crate) const ID: usize = 0x0000;
/// Programming-model version: major in bits 31:16, minor in bits 15:0.
pub(crate) const VERSION: usize = 0x0004;
/// Scratch register, no side effects.
pub(crate) const SCRATCH: usize = 0x0008;
/// Device status: [`STATUS_READY`], [`STATUS_FATAL`].
pub(crate) const STATUS: usize = 0x000c;
/// Write a vector number to raise a test interrupt on it.
pub(crate) const IRQ_TEST: usize = 0x0010;
/// Pending interrupt causes; write 1 to clear.
pub(crate) const IRQ_CAUSE: usize = 0x0014;
/// Write [`RESET_MAGIC`] to reset the device.
pub(crate) const RESET: usize = 0x001c;

/// DMA self-test: bus address (low, high) and length of a host buffer.
pub(crate) const DMA_TEST_ADDR_LO: usize = 0x0020;
pub(crate) const DMA_TEST_ADDR_HI: usize = 0x0024;
pub(crate) const DMA_TEST_LEN: usize = 0x0028;
/// Write [`DMA_TEST_START`] to invert the buffer in place; read the status.
pub(crate) const DMA_TEST_CTRL: usize = 0x002c;

/// Capabilities (read-only).
pub(crate) const NUM_PORTS: usize = 0x0040;
pub(crate) const MAX_QPS: usize = 0x0044;
pub(crate) const MAX_CQS: usize = 0x0048;
pub(crate) const MAX_CQE: usize = 0x004c;
pub(crate) const MAX_SQE: usize = 0x0050;
pub(crate) const MAX_MTU: usize = 0x0054;
pub(crate) const MMU_PAGE_SIZES: usize = 0x0058;
pub(crate) const MAX_MSG: usize = 0x005c;
/// Device memory (BAR 4) size in bytes, low and high word.
pub(crate) const DEVMEM_SIZE_LO: usize = 0x0060;
pub(crate) const DEVMEM_SIZE_HI: usize = 0x0064;

/// Device MMU: bus address of the level-0 table (low, high), control, invalidation.
pub(crate) const MMU_ROOT_LO: usize = 0x0200;
pub(crate) const MMU_ROOT_HI: usize = 0x0204;
pub(crate) const MMU_CTRL: usize = 0x0208;
pub(crate) const MMU_INVALIDATE: usize = 0x020c;
pub(crate) const MMU_CTRL_ENABLE: u32 = 1 << 0;

/// Event queue: bus address (low, high), log2 of the entries, enable, consumer and producer
/// indexes, events dropped.
pub(crate) const EQ_BASE_LO: usize = 0x0300;
pub(crate) const EQ_BASE_HI: usize = 0x0304;
pub(crate) const EQ_LOG_SIZE: usize = 0x0308;
pub(crate) const EQ_CTRL: usize = 0x030c;
pub(crate) const EQ_CI: usize = 0x0310;
pub(crate) const EQ_OVERFLOWS: usize = 0x0318;
pub(crate) const EQ_CTRL_ENABLE: u32 = 1 << 0;

/// Command argument or result, 32 words.
pub(crate) const CMD_DATA: usize = 0x0400;
pub(crate) const CMD_DATA_WORDS: usize = 32;
/// Command: opcode 31:24, port index 20:16, object index 15:0.
pub(crate) const CMD: usize = 0x0480;
/// 0 or the positive errno value of the last command.
pub(crate) const CMD_STATUS: usize = 0x0484;

/// The doorbell page of port `index` (from 0): add one of the `DB_*` offsets.
pub(crate) const fn doorbell(index: u32) -> usize {
    0x1_0000 + index as usize * 0x1000
}
/// Send queue: QPN 31:16, producer index 15:0.
pub(crate) const DB_SQ: usize = 0x00;
/// Completion queue: CQN 31:16, consumer index 15:0.
pub(crate) const DB_CQ: usize = 0x08;
/// As [`DB_CQ`], and arm the CQ for one completion event.
pub(crate) const DB_CQ_ARM: usize = 0x0c;

/// Registers of port `index` (from 0): add one of the `PORT_*` offsets.
pub(crate) const fn port(index: u32) -> usize {
    0x2000 + index as usize * 0x40
}
/// MAC address bytes 0 to 3, byte 0 in bits 7:0.
pub(crate) const PORT_MAC_LO: usize = 0x00;
/// MAC address bytes 4 and 5.
pub(crate) const PORT_MAC_HI: usize = 0x04;
/// IPv4 address, first octet in bits 31:24.
pub(crate) const PORT_IPV4: usize = 0x08;
/// Link state, [`PORT_STATE_UP`].
pub(crate) const PORT_STATE: usize = 0x0c;
/// Link speed in Mb/s.
pub(crate) const PORT_SPEED: usize = 0x10;
pub(crate) const PORT_STATE_UP: u32 = 1 << 0;
/// Ports the register map has room for.
pub(crate) const MAX_PORTS: u32 = 32;

pub(crate) const DMA_TEST_START: u32 = 1;
/// `DMA_TEST_CTRL` reads 0 until a started test has finished.
pub(crate) const DMA_TEST_IDLE: u32 = 0;
pub(crate) const DMA_TEST_DONE: u32 = 1;

/// "GAU2".
pub(crate) const ID_MAGIC: u32 = 0x4741_5532;
/// The programming-model major version this driver implements.
pub(crate) const MODEL_MAJOR: u32 = 1;
/// The oldest minor version the driver drives: 1.1 added the page-table bit that keeps queues
/// out of reach of work requests, 1.2 the region an incoming WRITE must stay in, key
/// revocation and the device memory fill.
pub(crate) const MODEL_MINOR_MIN: u32 = 2;

/// Largest counts the 16-bit fields of `CMD` and the doorbells can name: QPs and CQs per
/// port, and WQEs (a producer index must tell a full ring from an empty one).
pub(crate) const MAX_INDEXES: u32 = 1 << 16;
pub(crate) const MAX_SQE_LIMIT: u32 = 1 << 15;
/// Largest CQ the model allows.
pub(crate) const MAX_CQE_LIMIT: u32 = 1 << 13;
/// Interrupt cause: test interrupt.
pub(crate) const CAUSE_TEST: u32 = 1 << 0;
/// Interrupt cause: new event queue entries.
pub(crate) const CAUSE_EQ: u32 = 1 << 1;

pub(crate) const STATUS_READY: u32 = 1 << 0;
pub(crate) const STATUS_FATAL: u32 = 1 << 1;
/// "RESE".
pub(crate) const RESET_MAGIC: u32 = 0x5245_5345;
