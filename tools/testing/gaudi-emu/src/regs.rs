// SPDX-License-Identifier: GPL-2.0
//! The programming model's numbers: BAR0 register map, command interface,
//! context, WQE, CQE and EQE layouts. Documentation/infiniband/gaudi/
//! device-model-1.rst is the reference; the driver mirrors what it uses.
//!
//! [`REGISTER_MAP`] is the register map as data, built from the constants
//! the device model uses; the `register_map_matches_doc` test compares it,
//! and the driver's `register!` definitions, with the document's tables.

// ---- Global registers -------------------------------------------------

/// Identification: reads [`ID_MAGIC`].
pub const ID: u64 = 0x0000;
/// Programming-model version: [`VERSION_MAJOR`], [`VERSION_MINOR`].
pub const VERSION: u64 = 0x0004;
/// [`VERSION`]: incompatible changes.
pub const VERSION_MAJOR: Field = Field::new("major", 31, 16);
/// [`VERSION`]: compatible additions.
pub const VERSION_MINOR: Field = Field::new("minor", 15, 0);
/// Read/write scratch register with no side effects.
pub const SCRATCH: u64 = 0x0008;
/// Device status: [`STATUS_READY`], [`STATUS_FATAL`].
pub const STATUS: u64 = 0x000c;
/// Write a vector number: the device raises it with [`CAUSE_TEST`] set.
pub const IRQ_TEST: u64 = 0x0010;
/// Pending interrupt causes; write 1 to clear.
pub const IRQ_CAUSE: u64 = 0x0014;
/// Test interrupts raised since power-on (read-only).
pub const IRQ_TEST_COUNT: u64 = 0x0018;
/// Write [`RESET_MAGIC`] to reset the device; READY clears until done.
pub const RESET: u64 = 0x001c;
/// DMA self-test: bus address (low, high) and length of a host buffer.
pub const DMA_TEST_ADDR_LO: u64 = 0x0020;
pub const DMA_TEST_ADDR_HI: u64 = 0x0024;
pub const DMA_TEST_LEN: u64 = 0x0028;
/// Write [`DMA_TEST_START`]: the device inverts the buffer in place.
/// Reads the status of the last test.
pub const DMA_TEST_CTRL: u64 = 0x002c;
/// The DMA audit: device accesses refused because their bus address was
/// outside the memory the device may reach (read-only, never reset).
pub const DMA_FAULT_COUNT: u64 = 0x0030;

// ---- Capabilities (read-only) ------------------------------------------

pub const NUM_PORTS: u64 = 0x0040;
/// QPs per port.
pub const MAX_QPS: u64 = 0x0044;
/// CQs per port.
pub const MAX_CQS: u64 = 0x0048;
/// Entries per CQ.
pub const MAX_CQE: u64 = 0x004c;
/// WQEs per send queue.
pub const MAX_SQE: u64 = 0x0050;
/// Largest path MTU in bytes.
pub const MAX_MTU: u64 = 0x0054;
/// Supported MMU page sizes: bit n set means 2^n bytes.
pub const MMU_PAGE_SIZES: u64 = 0x0058;
/// Largest message (WQE length) in bytes.
pub const MAX_MSG: u64 = 0x005c;
/// Device memory (BAR4) size in bytes, low and high word.
pub const DEVMEM_SIZE_LO: u64 = 0x0060;
pub const DEVMEM_SIZE_HI: u64 = 0x0064;
/// MSI-X vectors.
pub const NUM_VECTORS: u64 = 0x0068;
/// (1.3) Entries of each port's GID table.
pub const MAX_GIDS: u64 = 0x006c;
/// (1.3) Largest Ethernet frame the rings carry, without FCS.
pub const ETH_MAX_FRAME: u64 = 0x0070;
/// Firmware version: [`FW_VERSION_LEN`] bytes of NUL-padded ASCII.
pub const FW_VERSION: u64 = 0x0100;
pub const FW_VERSION_LEN: usize = 32;

// ---- MMU ---------------------------------------------------------------

/// Bus address of the level-0 page table (4 KiB aligned), low and high.
pub const MMU_ROOT_LO: u64 = 0x0200;
pub const MMU_ROOT_HI: u64 = 0x0204;
/// [`MMU_CTRL_ENABLE`]: translation enabled.
pub const MMU_CTRL: u64 = 0x0208;
pub const MMU_CTRL_ENABLE: u32 = 1 << 0;
/// Write 1: forget every cached translation.
pub const MMU_INVALIDATE: u64 = 0x020c;
/// Translation faults since reset, and the last faulting device VA.
pub const MMU_FAULT_COUNT: u64 = 0x0210;
pub const MMU_FAULT_VA_LO: u64 = 0x0214;
pub const MMU_FAULT_VA_HI: u64 = 0x0218;

// ---- Event queue -------------------------------------------------------

/// Bus address of the event queue (kernel memory, not translated).
pub const EQ_BASE_LO: u64 = 0x0300;
pub const EQ_BASE_HI: u64 = 0x0304;
/// log2 of the number of entries, 4 to 12.
pub const EQ_LOG_SIZE: u64 = 0x0308;
/// [`EQ_CTRL_ENABLE`]: enabled.
pub const EQ_CTRL: u64 = 0x030c;
pub const EQ_CTRL_ENABLE: u32 = 1 << 0;
/// Consumer index (free running), written by the driver.
pub const EQ_CI: u64 = 0x0310;
/// Producer index (free running, read-only).
pub const EQ_PI: u64 = 0x0314;
/// Events dropped because the event queue was full (read-only).
pub const EQ_OVERFLOWS: u64 = 0x0318;

// ---- Command interface -------------------------------------------------

/// 32 data registers (128 bytes) carrying a command's argument or result.
pub const CMD_DATA: u64 = 0x0400;
pub const CMD_DATA_LEN: usize = 128;
/// Write to execute: [`CMD_OPCODE`], [`CMD_PORT`], [`CMD_INDEX`].
pub const CMD: u64 = 0x0480;
/// [`CMD`]: one of the `CMD_*` opcodes below.
pub const CMD_OPCODE: Field = Field::new("opcode", 31, 24);
/// [`CMD`]: the port.
pub const CMD_PORT: Field = Field::new("port", 20, 16);
/// [`CMD`]: the object on the port (QPN, CQN).
pub const CMD_INDEX: Field = Field::new("index", 15, 0);
/// Result of the last command: 0 or a positive errno value.
pub const CMD_STATUS: u64 = 0x0484;

pub const CMD_CQ_CREATE: u32 = 0x01;
pub const CMD_CQ_DESTROY: u32 = 0x02;
pub const CMD_QP_WRITE: u32 = 0x03;
pub const CMD_QP_READ: u32 = 0x04;
pub const CMD_QP_DESTROY: u32 = 0x05;
/// (1.2) Take a key away from every QP context holding it as local rkey.
/// Argument: the key in CMD_DATA bytes 0..3; result: the number of
/// contexts changed in bytes 4..7. Port and index are ignored.
pub const CMD_RKEY_REVOKE: u32 = 0x06;
/// (1.2) Fill device memory: offset (bytes 0..7), length (8..15), 32-bit
/// pattern (16..19). Port and index are ignored.
pub const CMD_DEVMEM_FILL: u32 = 0x07;
/// DEVMEM_FILL offsets and lengths are multiples of this.
pub const DEVMEM_FILL_ALIGN: u64 = 4096;
/// (1.3) Write GID table entry `index` of the port: the GID in CMD_DATA
/// bytes 0..15, [`GID_VALID`] in bytes 16..19.
pub const CMD_GID_SET: u32 = 0x08;
pub const GID_VALID: u32 = 1 << 0;
/// (1.4) Replace keys of QP `index` of the port, leaving its state and PSNs:
/// flags (bytes 0..3: [`QP_KEYS_REMOTE`], [`QP_KEYS_LOCAL`]), remote rkey
/// (4..7), local rkey (8..11), 0 (12..15), region iova (16..23), length
/// (24..31), device VA (32..39).
pub const CMD_QP_KEYS: u32 = 0x09;
/// QP_KEYS: set the remote rkey.
pub const QP_KEYS_REMOTE: u32 = 1 << 0;
/// QP_KEYS: set the local rkey and its region (rkey 0 or length 0: none).
pub const QP_KEYS_LOCAL: u32 = 1 << 1;

// ---- Ports -------------------------------------------------------------

/// Ports the register map has room for (per-port blocks, doorbell pages).
pub const MAX_PORTS: usize = 32;
/// Per-port register blocks: `PORT_BASE + port * PORT_STRIDE + reg`.
pub const PORT_BASE: u64 = 0x2000;
pub const PORT_STRIDE: u64 = 0x40;
pub const PORT_MAC_LO: u64 = 0x00;
pub const PORT_MAC_HI: u64 = 0x04;
/// IPv4 address, first octet in bits 31:24.
pub const PORT_IPV4: u64 = 0x08;
/// [`PORT_STATE_UP`]: link up.
pub const PORT_STATE: u64 = 0x0c;
pub const PORT_STATE_UP: u32 = 1 << 0;
/// Mb/s.
pub const PORT_SPEED: u64 = 0x10;
pub const PORT_TX_PKTS: u64 = 0x14;
pub const PORT_RX_PKTS: u64 = 0x18;
/// Received frames dropped: bad ICRC, not RoCEv2, unknown QP.
pub const PORT_RX_DROPS: u64 = 0x1c;
pub const PORT_RETRANSMITS: u64 = 0x20;
pub const PORT_NAKS_SENT: u64 = 0x24;
pub const PORT_ICRC_ERRORS: u64 = 0x28;
/// (1.2) RNR NAKs sent (a CQ with no room for a WRITE with immediate).
pub const PORT_RNR_NAKS_SENT: u64 = 0x2c;

// ---- Ethernet rings (1.3) ------------------------------------------------

/// Per-port Ethernet blocks: `ETH_BASE + port * ETH_STRIDE + reg`.
pub const ETH_BASE: u64 = 0x3000;
pub const ETH_STRIDE: u64 = 0x40;
/// Transmit and receive ring bus addresses (16-byte aligned).
pub const ETH_TX_BASE_LO: u64 = 0x00;
pub const ETH_TX_BASE_HI: u64 = 0x04;
pub const ETH_RX_BASE_LO: u64 = 0x08;
pub const ETH_RX_BASE_HI: u64 = 0x0c;
/// [`ETH_LOG_SIZE_TX`], [`ETH_LOG_SIZE_RX`]: log2 of the descriptors.
pub const ETH_LOG_SIZE: u64 = 0x10;
pub const ETH_LOG_SIZE_TX: Field = Field::new("tx", 7, 0);
pub const ETH_LOG_SIZE_RX: Field = Field::new("rx", 15, 8);
/// [`ETH_CTRL_ENABLE`], [`ETH_CTRL_PROMISC`], [`ETH_CTRL_ALLMULTI`].
pub const ETH_CTRL: u64 = 0x14;
pub const ETH_CTRL_ENABLE: u32 = 1 << 0;
pub const ETH_CTRL_PROMISC: u32 = 1 << 1;
pub const ETH_CTRL_ALLMULTI: u32 = 1 << 2;
/// Producer (driver) and consumer (device) indexes, 16-bit.
pub const ETH_TX_PI: u64 = 0x18;
pub const ETH_TX_CI: u64 = 0x1c;
pub const ETH_RX_PI: u64 = 0x20;
pub const ETH_RX_CI: u64 = 0x24;
/// [`ETH_ARM_TX`], [`ETH_ARM_RX`]: arm for one `ETH` event.
pub const ETH_ARM: u64 = 0x28;
pub const ETH_ARM_TX: Field = Field::new("tx", 31, 16);
pub const ETH_ARM_RX: Field = Field::new("rx", 15, 0);
/// Counters (read-only).
pub const ETH_RX_NOBUF: u64 = 0x2c;
pub const ETH_RX_FILTERED: u64 = 0x30;
pub const ETH_ERRORS: u64 = 0x34;
pub const ETH_TX_FRAMES: u64 = 0x38;
pub const ETH_RX_FRAMES: u64 = 0x3c;

/// Ring sizes: log2 of the descriptors.
pub const ETH_MIN_LOG_SIZE: u32 = 4;
pub const ETH_MAX_LOG_SIZE: u32 = 12;
/// Descriptor size and flags.
pub const ETH_DESC_SIZE: usize = 16;
pub const ETH_DESC_DONE: u16 = 1 << 0;
pub const ETH_DESC_ERROR: u16 = 1 << 1;
/// Shortest frame a transmit descriptor may give, and the minimum frame
/// length the device pads to.
pub const ETH_MIN_FRAME: usize = 14;
pub const ETH_PAD_TO: usize = 60;

// ---- Doorbells ---------------------------------------------------------

/// One 4 KiB doorbell page per port: `DB_BASE + port * DB_STRIDE`.
pub const DB_BASE: u64 = 0x1_0000;
pub const DB_STRIDE: u64 = 0x1000;
/// [`DB_QPN`], [`DB_PI`]: the SQ producer index of a QP.
pub const DB_SQ: u64 = 0x00;
/// [`DB_CQN`], [`DB_CI`]: the consumer index of a CQ.
pub const DB_CQ: u64 = 0x08;
/// As [`DB_CQ`], and arm the CQ for one completion event.
pub const DB_CQ_ARM: u64 = 0x0c;
pub const DB_QPN: Field = Field::new("qpn", 31, 16);
pub const DB_PI: Field = Field::new("pi", 15, 0);
pub const DB_CQN: Field = Field::new("cqn", 31, 16);
pub const DB_CI: Field = Field::new("ci", 15, 0);
// The device decodes a doorbell before it knows which one it is.
const _: () = assert!(DB_QPN.mask() == DB_CQN.mask() && DB_PI.mask() == DB_CI.mask());

// ---- Values ------------------------------------------------------------

/// "GAU2".
pub const ID_MAGIC: u32 = 0x4741_5532;
/// Programming model 1.3 (1.1 added the RING page-table bit; 1.2 the
/// QP's local region, RNR NAKs, RKEY_REVOKE and DEVMEM_FILL; 1.3 the
/// Ethernet rings, the GID table, GRH QP contexts and IPv6).
pub const MODEL_VERSION: u32 = VERSION_MAJOR.put(1) | VERSION_MINOR.put(5);
pub const STATUS_READY: u32 = 1 << 0;
pub const STATUS_FATAL: u32 = 1 << 1;
pub const RESET_MAGIC: u32 = 0x5245_5345;
/// Cause bits.
pub const CAUSE_TEST: u32 = 1 << 0;
pub const CAUSE_EQ: u32 = 1 << 1;

pub const DMA_TEST_START: u32 = 1;
pub const DMA_TEST_IDLE: u32 = 0;
pub const DMA_TEST_DONE: u32 = 1;
pub const DMA_TEST_FAULT: u32 = 2;
/// Longest DMA self-test buffer.
pub const DMA_TEST_MAX_LEN: u32 = 4096;

/// Size of the part of BAR0 that holds the registers of model 1.5 (BAR0
/// itself is the chip's, [`crate::nic::regs::BAR0_SIZE`]).
pub const BAR0_SIZE: u64 = 0x10_0000;

// ---- The register map as data ------------------------------------------

/// A field of a register: bits `hi` down to `lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub hi: u32,
    pub lo: u32,
}

impl Field {
    pub const fn new(name: &'static str, hi: u32, lo: u32) -> Self {
        assert!(lo <= hi && hi < 32);
        Self { name, hi, lo }
    }

    /// The one-bit field of `mask`, which has one bit set.
    pub const fn bit(name: &'static str, mask: u32) -> Self {
        assert!(mask.is_power_of_two());
        Self::new(name, mask.trailing_zeros(), mask.trailing_zeros())
    }

    /// The field's bits, in place.
    pub const fn mask(self) -> u32 {
        (u32::MAX >> (31 - (self.hi - self.lo))) << self.lo
    }

    /// The field's value in register value `reg`.
    pub const fn get(self, reg: u32) -> u32 {
        (reg & self.mask()) >> self.lo
    }

    /// `v` moved into the field's bits (bits of `v` that do not fit are
    /// dropped).
    pub const fn put(self, v: u32) -> u32 {
        (v << self.lo) & self.mask()
    }
}

/// A register of BAR0, or an array of `count` registers `stride` bytes
/// apart (a single register is an array of one, stride 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegDef {
    pub name: &'static str,
    /// Offset in BAR0 of the register, or of the first of the array.
    pub offset: u64,
    pub count: u32,
    pub stride: u64,
    /// Empty for a register that holds one value in its 32 bits.
    pub fields: &'static [Field],
}

/// A register named as its offset constant: `reg!(NAME, [fields])`, or an
/// array of 4-byte registers, `reg!(NAME[count])`.
macro_rules! reg {
    ($name:ident $(, [$($f:expr),* $(,)?])?) => {
        RegDef {
            name: stringify!($name),
            offset: $name,
            count: 1,
            stride: 4,
            fields: &[$($($f),*)?],
        }
    };
    ($name:ident[$count:expr]) => {
        RegDef {
            name: stringify!($name),
            offset: $name,
            count: $count as u32,
            stride: 4,
            fields: &[],
        }
    };
}

/// A per-port register (its constant is the offset in the port's block).
macro_rules! port_reg {
    ($name:ident $(, [$($f:expr),* $(,)?])?) => {
        RegDef {
            name: stringify!($name),
            offset: PORT_BASE + $name,
            count: MAX_PORTS as u32,
            stride: PORT_STRIDE,
            fields: &[$($($f),*)?],
        }
    };
}

/// A per-port Ethernet register (its constant is the offset in the block).
macro_rules! eth_reg {
    ($name:ident $(, [$($f:expr),* $(,)?])?) => {
        RegDef {
            name: stringify!($name),
            offset: ETH_BASE + $name,
            count: MAX_PORTS as u32,
            stride: ETH_STRIDE,
            fields: &[$($($f),*)?],
        }
    };
}

/// A doorbell (its constant is the offset in the port's doorbell page).
macro_rules! doorbell {
    ($name:ident, [$($f:expr),* $(,)?]) => {
        RegDef {
            name: stringify!($name),
            offset: DB_BASE + $name,
            count: MAX_PORTS as u32,
            stride: DB_STRIDE,
            fields: &[$($f),*],
        }
    };
}

/// Every register of BAR0, in the order of the document's tables.
pub const REGISTER_MAP: &[RegDef] = &[
    // Global registers.
    reg!(ID),
    reg!(VERSION, [VERSION_MAJOR, VERSION_MINOR]),
    reg!(SCRATCH),
    reg!(
        STATUS,
        [
            Field::bit("ready", STATUS_READY),
            Field::bit("fatal", STATUS_FATAL)
        ]
    ),
    reg!(IRQ_TEST),
    reg!(
        IRQ_CAUSE,
        [
            Field::bit("test", CAUSE_TEST),
            Field::bit("event_queue", CAUSE_EQ)
        ]
    ),
    reg!(IRQ_TEST_COUNT),
    reg!(RESET),
    reg!(DMA_TEST_ADDR_LO),
    reg!(DMA_TEST_ADDR_HI),
    reg!(DMA_TEST_LEN),
    reg!(DMA_TEST_CTRL),
    reg!(DMA_FAULT_COUNT),
    // Capabilities.
    reg!(NUM_PORTS),
    reg!(MAX_QPS),
    reg!(MAX_CQS),
    reg!(MAX_CQE),
    reg!(MAX_SQE),
    reg!(MAX_MTU),
    reg!(MMU_PAGE_SIZES),
    reg!(MAX_MSG),
    reg!(DEVMEM_SIZE_LO),
    reg!(DEVMEM_SIZE_HI),
    reg!(NUM_VECTORS),
    reg!(MAX_GIDS),
    reg!(ETH_MAX_FRAME),
    reg!(FW_VERSION[FW_VERSION_LEN / 4]),
    // Device MMU.
    reg!(MMU_ROOT_LO),
    reg!(MMU_ROOT_HI),
    reg!(MMU_CTRL, [Field::bit("enable", MMU_CTRL_ENABLE)]),
    reg!(MMU_INVALIDATE),
    reg!(MMU_FAULT_COUNT),
    reg!(MMU_FAULT_VA_LO),
    reg!(MMU_FAULT_VA_HI),
    // Event queue.
    reg!(EQ_BASE_LO),
    reg!(EQ_BASE_HI),
    reg!(EQ_LOG_SIZE),
    reg!(EQ_CTRL, [Field::bit("enable", EQ_CTRL_ENABLE)]),
    reg!(EQ_CI),
    reg!(EQ_PI),
    reg!(EQ_OVERFLOWS),
    // Command interface.
    reg!(CMD_DATA[CMD_DATA_LEN / 4]),
    reg!(CMD, [CMD_OPCODE, CMD_PORT, CMD_INDEX]),
    reg!(CMD_STATUS),
    // Ports.
    port_reg!(PORT_MAC_LO),
    port_reg!(PORT_MAC_HI),
    port_reg!(PORT_IPV4),
    port_reg!(PORT_STATE, [Field::bit("up", PORT_STATE_UP)]),
    port_reg!(PORT_SPEED),
    port_reg!(PORT_TX_PKTS),
    port_reg!(PORT_RX_PKTS),
    port_reg!(PORT_RX_DROPS),
    port_reg!(PORT_RETRANSMITS),
    port_reg!(PORT_NAKS_SENT),
    port_reg!(PORT_ICRC_ERRORS),
    port_reg!(PORT_RNR_NAKS_SENT),
    // Ethernet rings.
    eth_reg!(ETH_TX_BASE_LO),
    eth_reg!(ETH_TX_BASE_HI),
    eth_reg!(ETH_RX_BASE_LO),
    eth_reg!(ETH_RX_BASE_HI),
    eth_reg!(ETH_LOG_SIZE, [ETH_LOG_SIZE_TX, ETH_LOG_SIZE_RX]),
    eth_reg!(
        ETH_CTRL,
        [
            Field::bit("enable", ETH_CTRL_ENABLE),
            Field::bit("promisc", ETH_CTRL_PROMISC),
            Field::bit("allmulti", ETH_CTRL_ALLMULTI)
        ]
    ),
    eth_reg!(ETH_TX_PI),
    eth_reg!(ETH_TX_CI),
    eth_reg!(ETH_RX_PI),
    eth_reg!(ETH_RX_CI),
    eth_reg!(ETH_ARM, [ETH_ARM_TX, ETH_ARM_RX]),
    eth_reg!(ETH_RX_NOBUF),
    eth_reg!(ETH_RX_FILTERED),
    eth_reg!(ETH_ERRORS),
    eth_reg!(ETH_TX_FRAMES),
    eth_reg!(ETH_RX_FRAMES),
    // Doorbells.
    doorbell!(DB_SQ, [DB_QPN, DB_PI]),
    doorbell!(DB_CQ, [DB_CQN, DB_CI]),
    doorbell!(DB_CQ_ARM, [DB_CQN, DB_CI]),
];

// The command's port field names every port the map has room for.
const _: () = assert!(1 << (CMD_PORT.hi - CMD_PORT.lo + 1) == MAX_PORTS);

// ---- Layouts -----------------------------------------------------------

pub const WQE_SIZE: usize = 32;
pub const CQE_SIZE: usize = 32;
pub const EQE_SIZE: usize = 16;

/// WQE opcodes.
pub const WQE_RDMA_WRITE: u8 = 0x01;
pub const WQE_RDMA_WRITE_IMM: u8 = 0x02;
/// WQE flags.
pub const WQE_SIGNALED: u8 = 1 << 0;

/// CQE opcodes.
pub const CQE_SEND: u8 = 0x01;
pub const CQE_RECV_WRITE_IMM: u8 = 0x02;

/// CQE status codes.
pub const ST_SUCCESS: u8 = 0;
pub const ST_LOC_LEN_ERR: u8 = 1;
pub const ST_LOC_QP_OP_ERR: u8 = 2;
pub const ST_LOC_PROT_ERR: u8 = 3;
pub const ST_WR_FLUSH_ERR: u8 = 4;
pub const ST_REM_ACCESS_ERR: u8 = 5;
pub const ST_REM_OP_ERR: u8 = 6;
pub const ST_RETRY_EXC_ERR: u8 = 7;
pub const ST_REM_INV_REQ_ERR: u8 = 8;
/// (1.2) The responder answered RNR NAKs more than RNR retry count times
/// in a row.
pub const ST_RNR_RETRY_EXC_ERR: u8 = 9;

/// Event types.
pub const EV_PORT_UP: u8 = 1;
pub const EV_PORT_DOWN: u8 = 2;
pub const EV_QP_ERROR: u8 = 3;
pub const EV_CQ_OVERFLOW: u8 = 4;
pub const EV_MMU_FAULT: u8 = 5;
pub const EV_DEVICE_FATAL: u8 = 6;
pub const EV_COMPLETION: u8 = 7;
/// (1.3) The port's Ethernet rings were armed and a consumer index moved.
pub const EV_ETH: u8 = 8;

/// QP states.
pub const QPS_RESET: u8 = 0;
pub const QPS_INIT: u8 = 1;
pub const QPS_RTR: u8 = 2;
pub const QPS_RTS: u8 = 3;
pub const QPS_ERR: u8 = 4;

/// QP context flags.
pub const QPF_REMOTE_WRITE: u32 = 1 << 0;
/// (1.2) The local region of the context bounds incoming WRITEs and
/// addresses them by iova.
pub const QPF_REGION: u32 = 1 << 1;
/// (1.3) The context's addresses are GIDs: source GID index, destination
/// GID, hop limit, traffic class, flow label.
pub const QPF_GRH: u32 = 1 << 2;
/// QP context flag (1.5): completions of received WRITEs with immediate go
/// to the responder CQ (`rcqn`, offset 92) rather than to `cqn`.
pub const QPF_RCQ: u32 = 1 << 3;

/// RNR retry count meaning "retry without limit".
pub const RNR_RETRY_FOREVER: u8 = 7;

/// Page-table entry bits.
pub const PTE_VALID: u64 = 1 << 0;
pub const PTE_WRITE: u64 = 1 << 1;
pub const PTE_LEAF: u64 = 1 << 2;
pub const PTE_DEVMEM: u64 = 1 << 3;
/// The page holds queues (model 1.1): only WQE fetches and CQE writes may use it.
pub const PTE_RING: u64 = 1 << 4;
pub const PTE_ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        assert_eq!(MODEL_VERSION, 0x0001_0005);
        assert_eq!(CMD_OPCODE.mask(), 0xff00_0000);
        assert_eq!(CMD_PORT.get(0xffff_ffff), 0x1f);
        assert_eq!(CMD_INDEX.put(0x1_2345), 0x2345);
        assert_eq!(Field::bit("fatal", STATUS_FATAL), Field::new("fatal", 1, 1));
        assert_eq!(Field::new("all", 31, 0).mask(), u32::MAX);
    }
}
