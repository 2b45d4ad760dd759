// SPDX-License-Identifier: GPL-2.0

//! BAR0 register map of the Gaudi2 NIC.
//!
//! Documentation/infiniband/gaudi/device-model-1.rst is the reference: its register tables, these
//! definitions and the emulator's own map are compared by the `register_map_matches_doc` test.
//! A register whose whole word is one value has no fields; read it with `into_raw()`.

use kernel::io::register;

/// Size of BAR0: model 1.5's registers and doorbell pages in its first MiB, then model 2.0's
/// chip services and, from 64 MiB, the chip's configuration space.
pub(crate) const BAR0_SIZE: usize = 0x1000_0000;

/// Ports the register map has room for (the per-port registers and the doorbell pages).
pub(crate) const MAX_PORTS: u32 = 32;

register! {
    /// Identification; reads [`ID_MAGIC`].
    pub(crate) ID(u32) @ 0x0000 {}

    /// Programming-model version.
    pub(crate) VERSION(u32) @ 0x0004 {
        /// Incompatible changes.
        31:16 major;
        /// Compatible additions.
        15:0 minor;
    }

    /// Scratch register, no side effects.
    pub(crate) SCRATCH(u32) @ 0x0008 {}

    /// Device status.
    pub(crate) STATUS(u32) @ 0x000c {
        /// The device has failed and executes nothing.
        1:1 fatal => bool;
        /// Out of reset and ready.
        0:0 ready => bool;
    }

    /// Write a vector number to raise a test interrupt on it.
    pub(crate) IRQ_TEST(u32) @ 0x0010 {}

    /// Pending interrupt causes; write 1 to clear.
    pub(crate) IRQ_CAUSE(u32) @ 0x0014 {
        /// New event queue entries.
        1:1 event_queue => bool;
        /// A test interrupt.
        0:0 test => bool;
    }

    /// Write [`RESET_MAGIC`] to reset the device.
    pub(crate) RESET(u32) @ 0x001c {}

    /// DMA self-test: bus address of a host buffer, 31:0.
    pub(crate) DMA_TEST_ADDR_LO(u32) @ 0x0020 {}
    /// DMA self-test: bus address of a host buffer, 63:32.
    pub(crate) DMA_TEST_ADDR_HI(u32) @ 0x0024 {}
    /// DMA self-test: length, 1 to 4096 bytes.
    pub(crate) DMA_TEST_LEN(u32) @ 0x0028 {}
    /// Write [`DMA_TEST_START`] to invert the buffer in place; reads [`DMA_TEST_IDLE`] until
    /// a started test has finished, then [`DMA_TEST_DONE`].
    pub(crate) DMA_TEST_CTRL(u32) @ 0x002c {}

    /// Ports.
    pub(crate) NUM_PORTS(u32) @ 0x0040 {}
    /// QPs per port.
    pub(crate) MAX_QPS(u32) @ 0x0044 {}
    /// CQs per port.
    pub(crate) MAX_CQS(u32) @ 0x0048 {}
    /// Entries per CQ.
    pub(crate) MAX_CQE(u32) @ 0x004c {}
    /// WQEs per send queue.
    pub(crate) MAX_SQE(u32) @ 0x0050 {}
    /// Largest path MTU in bytes.
    pub(crate) MAX_MTU(u32) @ 0x0054 {}
    /// Page sizes the device MMU maps: bit n set, pages of 2^n bytes.
    pub(crate) MMU_PAGE_SIZES(u32) @ 0x0058 {}
    /// Largest WQE length in bytes.
    pub(crate) MAX_MSG(u32) @ 0x005c {}
    /// Device memory (BAR 4) size in bytes, 31:0.
    pub(crate) DEVMEM_SIZE_LO(u32) @ 0x0060 {}
    /// Device memory (BAR 4) size in bytes, 63:32.
    pub(crate) DEVMEM_SIZE_HI(u32) @ 0x0064 {}
    /// (1.3) Entries of each port's GID table.
    pub(crate) MAX_GIDS(u32) @ 0x006c {}

    /// Device MMU: bus address of the level-0 table, 31:0 (4 KiB aligned).
    pub(crate) MMU_ROOT_LO(u32) @ 0x0200 {}
    /// Device MMU: bus address of the level-0 table, 63:32.
    pub(crate) MMU_ROOT_HI(u32) @ 0x0204 {}
    /// Device MMU control.
    pub(crate) MMU_CTRL(u32) @ 0x0208 {
        /// Translation enabled.
        0:0 enable => bool;
    }
    /// Write 1 to make the device forget every cached translation.
    pub(crate) MMU_INVALIDATE(u32) @ 0x020c {}

    /// Event queue: bus address, 31:0 (16-byte aligned).
    pub(crate) EQ_BASE_LO(u32) @ 0x0300 {}
    /// Event queue: bus address, 63:32.
    pub(crate) EQ_BASE_HI(u32) @ 0x0304 {}
    /// Event queue: log2 of the entries.
    pub(crate) EQ_LOG_SIZE(u32) @ 0x0308 {}
    /// Event queue control.
    pub(crate) EQ_CTRL(u32) @ 0x030c {
        /// Enabled (enabling zeroes the indexes).
        0:0 enable => bool;
    }
    /// Event queue consumer index, written by the driver.
    pub(crate) EQ_CI(u32) @ 0x0310 {}
    /// Events dropped: queue full or disabled.
    pub(crate) EQ_OVERFLOWS(u32) @ 0x0318 {}

    /// Command argument or result, [`CMD_DATA_WORDS`] words.
    pub(crate) CMD_DATA(u32)[32] @ 0x0400 {}

    /// Command: writing it starts the command.
    pub(crate) CMD(u32) @ 0x0480 {
        /// What to do: one of the `CMD_*` opcodes.
        31:24 opcode;
        /// Port index (from 0).
        20:16 port;
        /// Object index on the port (QPN, CQN).
        15:0 index;
    }

    /// 0 or the positive errno value of the last command.
    pub(crate) CMD_STATUS(u32) @ 0x0484 {}

    /// Per-port registers at `0x2000 + port * 0x40`: MAC address bytes 0 to 3, byte 0 in
    /// bits 7:0.
    pub(crate) PORT_MAC_LO(u32)[32, stride = 0x40] @ 0x2000 {}
    /// MAC address bytes 4 and 5, byte 4 in bits 7:0.
    pub(crate) PORT_MAC_HI(u32)[32, stride = 0x40] @ 0x2004 {}
    /// IPv4 address, first octet in bits 31:24.
    pub(crate) PORT_IPV4(u32)[32, stride = 0x40] @ 0x2008 {}
    /// Link state.
    pub(crate) PORT_STATE(u32)[32, stride = 0x40] @ 0x200c {
        /// The link is up.
        0:0 up => bool;
    }
    /// Link speed in Mb/s.
    pub(crate) PORT_SPEED(u32)[32, stride = 0x40] @ 0x2010 {}

    /// (1.3) Per-port Ethernet registers at `0x3000 + port * 0x40`: transmit ring bus
    /// address, 31:0 (16-byte aligned).
    pub(crate) ETH_TX_BASE_LO(u32)[32, stride = 0x40] @ 0x3000 {}
    /// Transmit ring bus address, 63:32.
    pub(crate) ETH_TX_BASE_HI(u32)[32, stride = 0x40] @ 0x3004 {}
    /// Receive ring bus address, 31:0 (16-byte aligned).
    pub(crate) ETH_RX_BASE_LO(u32)[32, stride = 0x40] @ 0x3008 {}
    /// Receive ring bus address, 63:32.
    pub(crate) ETH_RX_BASE_HI(u32)[32, stride = 0x40] @ 0x300c {}
    /// log2 of each ring's descriptors.
    pub(crate) ETH_LOG_SIZE(u32)[32, stride = 0x40] @ 0x3010 {
        /// Receive ring.
        15:8 rx;
        /// Transmit ring.
        7:0 tx;
    }
    /// The rings' control.
    pub(crate) ETH_CTRL(u32)[32, stride = 0x40] @ 0x3014 {
        /// Take every multicast frame.
        2:2 allmulti => bool;
        /// Take every frame.
        1:1 promisc => bool;
        /// Enabled (enabling zeroes the indexes).
        0:0 enable => bool;
    }
    /// Transmit producer index (16 bits).
    pub(crate) ETH_TX_PI(u32)[32, stride = 0x40] @ 0x3018 {}
    /// Receive producer index (16 bits).
    pub(crate) ETH_RX_PI(u32)[32, stride = 0x40] @ 0x3020 {}
    /// Arm for one `ETH` event, with the consumer indexes the driver has seen.
    pub(crate) ETH_ARM(u32)[32, stride = 0x40] @ 0x3028 {
        /// Transmit descriptors finished.
        31:16 tx;
        /// Receive descriptors filled.
        15:0 rx;
    }
    /// Frames for the receive ring dropped: no buffer posted.
    pub(crate) ETH_RX_NOBUF(u32)[32, stride = 0x40] @ 0x302c {}
    /// Frames dropped by the receive filter.
    pub(crate) ETH_RX_FILTERED(u32)[32, stride = 0x40] @ 0x3030 {}
    /// Transmit descriptors refused, received frames longer than their buffer.
    pub(crate) ETH_ERRORS(u32)[32, stride = 0x40] @ 0x3034 {}
    /// Doorbell pages at `0x10000 + port * 0x1000`: a send queue's producer index.
    pub(crate) DB_SQ(u32)[32, stride = 0x1000] @ 0x10000 {
        /// QP number.
        31:16 qpn;
        /// Producer index.
        15:0 pi;
    }
    /// A CQ's consumer index.
    pub(crate) DB_CQ(u32)[32, stride = 0x1000] @ 0x10008 {
        /// CQ number.
        31:16 cqn;
        /// Consumer index.
        15:0 ci;
    }
    /// As [`DB_CQ`], and arm the CQ for one completion event.
    pub(crate) DB_CQ_ARM(u32)[32, stride = 0x1000] @ 0x1000c {
        /// CQ number.
        31:16 cqn;
        /// Consumer index.
        15:0 ci;
    }
}

/// Words of [`CMD_DATA`].
pub(crate) const CMD_DATA_WORDS: usize = 32;

/// Written to [`DMA_TEST_CTRL`] to start the self-test.
pub(crate) const DMA_TEST_START: u32 = 1;
/// [`DMA_TEST_CTRL`] reads 0 until a started test has finished.
pub(crate) const DMA_TEST_IDLE: u32 = 0;
/// [`DMA_TEST_CTRL`] once the test has finished.
pub(crate) const DMA_TEST_DONE: u32 = 1;

/// [`ID`]: "GAU2".
pub(crate) const ID_MAGIC: u32 = 0x4741_5532;
/// [`RESET`]: "RESE".
pub(crate) const RESET_MAGIC: u32 = 0x5245_5345;
/// The programming-model major version this driver implements.
pub(crate) const MODEL_MAJOR: u32 = 1;
/// The oldest minor version the driver drives: 1.1 added the page-table bit that keeps queues
/// out of reach of work requests, 1.2 the region an incoming WRITE must stay in, key
/// revocation and the device memory fill, 1.3 the Ethernet rings of the ports, 1.4 the key
/// replacement of a running QP, 1.5 the responder CQ of a QP.
pub(crate) const MODEL_MINOR_MIN: u32 = 5;

/// Largest counts the 16-bit fields of [`CMD`] and the doorbells can name: QPs and CQs per
/// port, and WQEs (a producer index must tell a full ring from an empty one).
pub(crate) const MAX_INDEXES: u32 = 1 << 16;
/// The largest GID table the driver takes (the core's GID cache holds each entry).
pub(crate) const MAX_GIDS_LIMIT: u32 = 256;
pub(crate) const MAX_SQE_LIMIT: u32 = 1 << 15;
/// Largest CQ the model allows.
pub(crate) const MAX_CQE_LIMIT: u32 = 1 << 13;
