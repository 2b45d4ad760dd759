// SPDX-License-Identifier: GPL-2.0

//! The formats of the Gaudi2 NIC's hardware structures, as the NIC core, the Ethernet driver
//! and the RDMA driver all write and read them: the QP contexts, work queue entries,
//! completions and events, and the layout facts the drivers share (ports, CQs, UMR blocks, the
//! context tables in device memory).
//!
//! The C drivers share these through `include/linux/net/intel/gaudi2.h`; the Rust drivers are
//! separate modules whose only common crate is `kernel`. The values are device model 2.0's
//! (Documentation/infiniband/gaudi/device-model.rst), each field with its row there and the
//! public source it comes from. Registers are not here: only the NIC core reaches them.

use zerocopy_derive::Immutable;

use crate::prelude::*;

/// Ports of the chip: 12 macros of two.
pub const PORTS: usize = 24;

/// A field of a hardware structure: its lowest bit and width over the whole structure, as
/// the model's format tables give them. No field crosses a 64-bit word.
#[derive(Clone, Copy)]
pub struct Field {
    lsb: u32,
    width: u32,
}

impl Field {
    /// The field of `width` bits from bit `lsb` of the structure.
    pub const fn new(lsb: u32, width: u32) -> Self {
        Self { lsb, width }
    }

    fn mask(self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }

    /// The field's value in `words`; 0 if it lies beyond them.
    pub fn get(self, words: &[u64]) -> u64 {
        let (w, s) = ((self.lsb / 64) as usize, self.lsb % 64);
        words.get(w).map_or(0, |v| (v >> s) & self.mask())
    }

    /// Set the field in `words` to `v` (cut to its width).
    pub fn set(self, words: &mut [u64], v: u64) {
        let (w, s) = ((self.lsb / 64) as usize, self.lsb % 64);
        if let Some(word) = words.get_mut(w) {
            let m = self.mask() << s;
            *word = (*word & !m) | ((v << s) & m);
        }
    }

    /// The 32-bit gateway data words that hold the field.
    pub fn words(self) -> core::ops::RangeInclusive<usize> {
        (self.lsb / 32) as usize..=((self.lsb + self.width.max(1) - 1) / 32) as usize
    }

    /// Set every bit of the field in `words`: a gateway mask for it.
    pub fn select(self, words: &mut [u64]) {
        self.set(words, u64::MAX);
    }
}

/// Requester QP context fields ("Requester QP context").
pub mod req {
    use super::Field;

    /// `DST_QP`: bits 23:0.
    pub const DST_QP: Field = Field::new(0, 24);
    /// `RKEY`: bits 159:128.
    pub const RKEY: Field = Field::new(128, 32);
    /// `DST_IP`: bits 191:160.
    pub const DST_IP: Field = Field::new(160, 32);
    /// `DST_MAC_LSB`: bits 223:192.
    pub const DST_MAC_LSB: Field = Field::new(192, 32);
    /// `DST_MAC_MSB`: bits 239:224.
    pub const DST_MAC_MSB: Field = Field::new(224, 16);
    /// `NTS_PSN`: bits 279:256.
    pub const NTS_PSN: Field = Field::new(256, 24);
    /// `BCS_PSN`: bits 311:288.
    pub const BCS_PSN: Field = Field::new(288, 24);
    /// `ONA_PSN`: bits 343:320.
    pub const ONA_PSN: Field = Field::new(320, 24);
    /// `BCC_PSN`: bits 375:352.
    pub const BCC_PSN: Field = Field::new(352, 24);
    /// `TM_GRANULARITY`: bits 382:376.
    pub const TM_GRANULARITY: Field = Field::new(376, 7);
    /// `ENCAP_TYPE`: bits 415:413.
    pub const ENCAP_TYPE: Field = Field::new(413, 3);
    /// `CQ_NUM`: bits 444:440.
    pub const CQ_NUM: Field = Field::new(440, 5);
    /// `ENCAP_ENABLE`: bit 447.
    pub const ENCAP_ENABLE: Field = Field::new(447, 1);
    /// `CONGESTION_WIN`: bits 471:448.
    pub const CONGESTION_WIN: Field = Field::new(448, 24);
    /// `BURST_SIZE`: bits 565:544.
    pub const BURST_SIZE: Field = Field::new(544, 22);
    /// `ASID`: bits 575:566.
    pub const ASID: Field = Field::new(566, 10);
    /// `ACKREQ_FREQ`: bits 815:808.
    pub const ACKREQ_FREQ: Field = Field::new(808, 8);
    /// `CONGESTION_MODE`: bits 1014:1013.
    pub const CONGESTION_MODE: Field = Field::new(1013, 2);
    /// `MTU`: bits 1016:1015.
    pub const MTU: Field = Field::new(1015, 2);
    /// `IN_WORK`: bit 1021.
    pub const IN_WORK: Field = Field::new(1021, 1);
    /// `ERROR`: bit 1022.
    pub const ERROR: Field = Field::new(1022, 1);
    /// `LAST_IDX`: bits 597:576.
    pub const LAST_IDX: Field = Field::new(576, 22);
    /// `WQ_BACK_PRESSURE`: bit 383.
    pub const WQ_BACK_PRESSURE: Field = Field::new(383, 1);
    /// `DATA_MMU_BYPASS`: bit 1003.
    pub const DATA_MMU_BYPASS: Field = Field::new(1003, 1);
    /// `WQ_TYPE`: bits 1008:1007.
    pub const WQ_TYPE: Field = Field::new(1007, 2);
    /// `TRANSPORT_SERVICE`: bit 1010.
    pub const TRANSPORT_SERVICE: Field = Field::new(1010, 1);
    /// `WQ_BASE_ADDR`: bits 1018:1017.
    pub const WQ_BASE_ADDR: Field = Field::new(1017, 2);
    /// `TRUST_LEVEL`: bits 1020:1019.
    pub const TRUST_LEVEL: Field = Field::new(1019, 2);
    /// `VALID`: bit 1023.
    pub const VALID: Field = Field::new(1023, 1);
}

/// Responder QP context fields ("Responder QP context").
pub mod res {
    use super::Field;

    /// `DST_QP`: bits 23:0.
    pub const DST_QP: Field = Field::new(0, 24);
    /// `LKEY`: bits 63:32.
    pub const LKEY: Field = Field::new(32, 32);
    /// `DST_IP`: bits 95:64.
    pub const DST_IP: Field = Field::new(64, 32);
    /// `DST_MAC_LSB`: bits 127:96.
    pub const DST_MAC_LSB: Field = Field::new(96, 32);
    /// `DST_MAC_MSB`: bits 143:128.
    pub const DST_MAC_MSB: Field = Field::new(128, 16);
    /// `ASID`: bits 159:150.
    pub const ASID: Field = Field::new(150, 10);
    /// `PEER_QP`: bits 183:160.
    pub const PEER_QP: Field = Field::new(160, 24);
    /// `EXPECTED_PSN`: bits 215:192.
    pub const EXPECTED_PSN: Field = Field::new(192, 24);
    /// `ENCAP_TYPE`: bits 222:220.
    pub const ENCAP_TYPE: Field = Field::new(220, 3);
    /// `ENCAP_ENABLE`: bit 223.
    pub const ENCAP_ENABLE: Field = Field::new(223, 1);
    /// `CQ_NUM`: bits 252:248.
    pub const CQ_NUM: Field = Field::new(248, 5);
    /// `IN_WORK`: bit 254.
    pub const IN_WORK: Field = Field::new(254, 1);

    /// `TRANSPORT_SERVICE`: bit 149.
    pub const TRANSPORT_SERVICE: Field = Field::new(149, 1);
    /// `TRUST_LEVEL`: bits 217:216.
    pub const TRUST_LEVEL: Field = Field::new(216, 2);
    /// `DATA_MMU_BYPASS`: bit 219.
    pub const DATA_MMU_BYPASS: Field = Field::new(219, 1);
    /// `VALID`: bit 255.
    pub const VALID: Field = Field::new(255, 1);
}

/// The requester context: 128 bytes.
pub const REQ_QPC_WORDS: usize = 16;
/// The responder context: 32 bytes.
pub const RES_QPC_WORDS: usize = 4;
/// Bytes per requester context in its table.
pub const REQ_QPC_SIZE: u64 = 128;
/// Bytes per responder context in its table.
pub const RES_QPC_SIZE: u64 = 32;

/// Where the NIC sees device memory (HBM) offset 0: physical addresses from here on are HBM,
/// those below it host bus addresses (hl_gaudi2.h: `DRAM_PHYS_BASE`).
pub const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;
/// QP contexts each port's tables hold.
pub const TABLE_QPS: u64 = 1024;
/// Bytes of device memory each port's context tables take.
pub const PORT_TABLES: u64 = TABLE_QPS * (REQ_QPC_SIZE + RES_QPC_SIZE);
/// Device memory the driver keeps for the NIC's context tables, at its end (24 ports' tables,
/// rounded up to 4 MiB).
pub const NIC_HBM: u64 = 4 << 20;
const _: () = assert!(PORT_TABLES * PORTS as u64 <= NIC_HBM);

/// `WQ_TYPE`: RDMA WRITE.
pub const WQ_TYPE_WRITE: u64 = 1;
/// `TRANSPORT_SERVICE`: the raw (Ethernet) path.
pub const TRANSPORT_RAW: u64 = 1;
/// `TRUST_LEVEL`: secured (the kernel's QPs).
pub const TRUST_SECURED: u64 = 1;

/// A send WQE: 32 bytes ("Send WQE").
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable)]
pub struct SqWqe(
    /// The entry, as four little-endian 64-bit words.
    pub [u64; 4],
);

/// Send WQE fields.
pub mod wqe {
    use super::Field;

    /// `OPCODE`: bits 4:0.
    pub const OPCODE: Field = Field::new(0, 5);
    /// `WQE_INDEX`: bits 15:8.
    pub const WQE_INDEX: Field = Field::new(8, 8);
    /// `SE`: bit 29.
    pub const SE: Field = Field::new(29, 1);
    /// `ACKREQ`: bit 31.
    pub const ACKREQ: Field = Field::new(31, 1);
    /// `SIZE`: bits 63:32.
    pub const SIZE: Field = Field::new(32, 32);
    /// `LOCAL_ADDRESS`: bits 127:64.
    pub const LOCAL_ADDRESS: Field = Field::new(64, 64);
    /// `REMOTE_ADDRESS`: bits 191:128.
    pub const REMOTE_ADDRESS: Field = Field::new(128, 64);
    /// `TAG`: bits 223:192.
    pub const TAG: Field = Field::new(192, 32);
    /// `COMPLETION_TYPE`: bits 255:254.
    pub const COMPLETION_TYPE: Field = Field::new(254, 2);
}

/// `COMPLETION_TYPE`: a CQE on the requester context's CQ (model-defined value).
pub const COMPLETION_CQ: u64 = 2;

/// `OPCODE`: LINEAR (an RDMA WRITE, or a frame on the raw path).
pub const WQE_OPCODE_LINEAR: u64 = 2;

/// A CQE: 16 bytes ("CQE").
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable)]
pub struct Cqe(
    /// The entry, as two little-endian 64-bit words.
    pub [u64; 2],
);

/// CQE fields.
pub mod cqe {
    use super::Field;

    /// `QPN`: bits 23:0.
    pub const QPN: Field = Field::new(0, 24);
    /// `IS_REQ`: bit 24.
    pub const IS_REQ: Field = Field::new(24, 1);
    /// `VALID`: bit 31.
    pub const VALID: Field = Field::new(31, 1);
    /// `WQE_INDEX`: bits 63:32.
    pub const WQE_INDEX: Field = Field::new(32, 32);
    /// `TAG`: bits 95:64.
    pub const TAG: Field = Field::new(64, 32);
    /// `RAW_PKT_SIZE`: bits 127:96.
    pub const RAW_PKT_SIZE: Field = Field::new(96, 32);
}

/// An EQE: 16 bytes ("EQE").
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable)]
pub struct Eqe(
    /// The entry, as two little-endian 64-bit words.
    pub [u64; 2],
);

/// EQE fields.
pub mod eqe {
    use super::Field;

    /// `TYPE`: bits 3:0.
    pub const TYPE: Field = Field::new(0, 4);
    /// `VALID`: bit 31.
    pub const VALID: Field = Field::new(31, 1);
    /// `DATA1`: bits 63:32.
    pub const DATA1: Field = Field::new(32, 32);
    /// `DATA2`: bits 95:64.
    pub const DATA2: Field = Field::new(64, 32);
}

/// EQE type `COMP`: a CQ got an entry.
pub const EQE_COMP: u64 = 0;
/// EQE type `COMP_ERR`.
pub const EQE_COMP_ERR: u64 = 1;
/// EQE type `QP_ERR`.
pub const EQE_QP_ERR: u64 = 2;
/// EQE type `LINK_STATUS`.
pub const EQE_LINK_STATUS: u64 = 3;
/// EQE type `RAW_TX_COMP`.
pub const EQE_RAW_TX_COMP: u64 = 4;
/// EQE type `DB_FIFO_OVERRUN`.
pub const EQE_DB_FIFO_OVERRUN: u64 = 5;
/// EQE type `CONG`.
pub const EQE_CONG: u64 = 6;
/// EQE type `CONG_ERR`.
pub const EQE_CONG_ERR: u64 = 7;

/// CQ 0 of each port: the raw path's receive completions.
pub const CQ_ETH: usize = 0;
/// CQs of a port.
pub const CQS: usize = 16;
/// CQ 1 of each port: the requester completions of the kernel's RC QPs.
pub const CQ_RC: usize = 1;
/// log2 of the entries of each CQ's slot in a port's CQ region: 8192, the NIC's largest CQ;
/// the region is then the 2 MiB hbl_cn allocates.
pub const CQ_LOG_MAX: u32 = 13;

/// UMR blocks of a port that user space may map (`NUM_OF_USER_NIC_UMR_BLOCKS`).
pub const UMR_BLOCKS: usize = 15;
/// The CQ of UMR block 0; block b's is `CQ_USER_FIRST + 2b` (`NIC_MIN_CQ_ID`).
pub const CQ_USER_FIRST: usize = 2;
/// The UMR blocks the driver hands out: those whose CQ is one of the port's [`CQS`] (blocks
/// 0 to 6, CQs 2 to 14); the model has no CQ for the others.
pub const USER_BLOCKS: usize = (CQS - CQ_USER_FIRST).div_ceil(2);
const _: () = assert!(USER_BLOCKS <= UMR_BLOCKS);
/// log2 of the entries of the smallest CQ (4).
pub const CQ_USER_LOG_MIN: u32 = 2;

/// Every port is 100GbE.
pub const PORT_SPEED_MBPS: u32 = 100_000;
