// SPDX-License-Identifier: GPL-2.0
//! The Gaudi2 NIC's memory formats (device model 2.0): the requester and
//! responder QP contexts, the send and receive WQEs, the CQE and the EQE.
//! Every field is a row of Documentation/infiniband/gaudi/device-model.rst
//! naming its public source (the `model_sources` test holds them together).

use super::layout::{Bits, Layout};

const fn b(name: &'static str, lsb: u32, width: u32) -> Bits {
    Bits::new(name, lsb, width)
}

/// Requester QP context: 128 bytes per QP in the port's requester table.
pub struct ReqQpc;

impl Layout for ReqQpc {
    const SIZE: usize = 128;
    const FIELDS: &'static [Bits] = &[
        b("DST_QP", 0, 24),
        b("RKEY", 128, 32),
        b("DST_IP", 160, 32),
        b("DST_MAC_LSB", 192, 32),
        b("DST_MAC_MSB", 224, 16),
        b("SEQUENCE_ERROR_RETRY_COUNT", 240, 8),
        b("TIMEOUT_RETRY_COUNT", 248, 8),
        b("NTS_PSN", 256, 24),
        b("BCS_PSN", 288, 24),
        b("SCHD_Q_NUM", 312, 8),
        b("ONA_PSN", 320, 24),
        b("BCC_PSN", 352, 24),
        b("TM_GRANULARITY", 376, 7),
        b("WQ_BACK_PRESSURE", 383, 1),
        b("CONGESTION_MARKED_ACK", 384, 24),
        b("REMOTE_WQ_LOG_SZ", 408, 5),
        b("ENCAP_TYPE", 413, 3),
        b("CONGESTION_NON_MARKED_ACK", 416, 24),
        b("CQ_NUM", 440, 5),
        b("RTT_STATE", 445, 2),
        b("ENCAP_ENABLE", 447, 1),
        b("CONGESTION_WIN", 448, 24),
        b("RTT_TIMESTAMP", 480, 25),
        b("RTT_MARKED_PSN", 512, 24),
        b("BURST_SIZE", 544, 22),
        b("ASID", 566, 10),
        b("LAST_IDX", 576, 22),
        b("EXECUTION_IDX", 608, 22),
        b("CONSUMER_IDX", 640, 22),
        b("LOCAL_PRODUCER_IDX", 672, 22),
        b("REMOTE_PRODUCER_IDX", 704, 22),
        b("REMOTE_CONSUMER_IDX", 736, 22),
        b("OLDEST_UNACKED_REMOTE_PRODUCER_IDX", 768, 22),
        b("PSN_SINCE_ACKREQ", 800, 8),
        b("ACKREQ_FREQ", 808, 8),
        b("PACING_TIME", 832, 16),
        b("PSN_DELIVERED", 864, 24),
        b("DATA_MMU_BYPASS", 1003, 1),
        b("MOD_GAUDI1", 1004, 1),
        b("PORT", 1005, 2),
        b("WQ_TYPE", 1007, 2),
        b("SWQ_GRANULARITY", 1009, 1),
        b("TRANSPORT_SERVICE", 1010, 1),
        b("PRIORITY", 1011, 2),
        b("CONGESTION_MODE", 1013, 2),
        b("MTU", 1015, 2),
        b("WQ_BASE_ADDR", 1017, 2),
        b("TRUST_LEVEL", 1019, 2),
        b("IN_WORK", 1021, 1),
        b("ERROR", 1022, 1),
        b("VALID", 1023, 1),
    ];
}

/// Responder QP context: 32 bytes per QP in the port's responder table.
pub struct ResQpc;

impl Layout for ResQpc {
    const SIZE: usize = 32;
    const FIELDS: &'static [Bits] = &[
        b("DST_QP", 0, 24),
        b("PORT", 24, 2),
        b("PRIORITY", 26, 2),
        b("CONN_STATE", 28, 2),
        b("NACK_SYNDROME", 30, 2),
        b("LKEY", 32, 32),
        b("DST_IP", 64, 32),
        b("DST_MAC_LSB", 96, 32),
        b("DST_MAC_MSB", 128, 16),
        b("ECN_COUNT", 144, 5),
        b("TRANSPORT_SERVICE", 149, 1),
        b("ASID", 150, 10),
        b("PEER_QP", 160, 24),
        b("SCHD_Q_NUM", 184, 8),
        b("EXPECTED_PSN", 192, 24),
        b("TRUST_LEVEL", 216, 2),
        b("MOD_GAUDI1", 218, 1),
        b("DATA_MMU_BYPASS", 219, 1),
        b("ENCAP_TYPE", 220, 3),
        b("ENCAP_ENABLE", 223, 1),
        b("CYCLIC_IDX", 224, 24),
        b("CQ_NUM", 248, 5),
        b("PEER_WQ_GRAN", 253, 1),
        b("IN_WORK", 254, 1),
        b("VALID", 255, 1),
    ];
}

/// Send WQE: 32 bytes (64 with the multi-stride granularity, which the
/// model does not implement).
pub struct SqWqe;

impl Layout for SqWqe {
    const SIZE: usize = 32;
    const FIELDS: &'static [Bits] = &[
        b("OPCODE", 0, 5),
        b("TRACE_EVENT_DATA", 5, 1),
        b("TRACE_EVENT", 6, 1),
        b("WQE_INDEX", 8, 8),
        b("REDUCTION_OPCODE", 16, 13),
        b("SE", 29, 1),
        b("INLINE", 30, 1),
        b("ACKREQ", 31, 1),
        b("SIZE", 32, 32),
        b("LOCAL_ADDRESS", 64, 64),
        b("REMOTE_ADDRESS", 128, 64),
        b("TAG", 192, 32),
        b("REMOTE_SOB", 224, 27),
        b("REMOTE_SOB_DATA", 251, 2),
        b("SOB_CMD", 253, 1),
        b("COMPLETION_TYPE", 254, 2),
    ];
}

/// Receive WQE: 16 bytes.
pub struct RqWqe;

impl Layout for RqWqe {
    const SIZE: usize = 16;
    const FIELDS: &'static [Bits] = &[
        b("OPCODE", 0, 5),
        b("WQE_INDEX", 8, 8),
        b("SOB_CMD", 31, 1),
        b("LOCAL_SOB", 32, 27),
        b("LOCAL_SOB_DATA", 59, 3),
        b("COMPLETION_TYPE", 62, 2),
        b("SIZE", 64, 32),
        b("TAG", 96, 32),
    ];
}

/// Completion queue entry: 16 bytes; the consumer clears VALID.
pub struct Cqe;

impl Layout for Cqe {
    const SIZE: usize = 16;
    const FIELDS: &'static [Bits] = &[
        b("QPN", 0, 24),
        b("IS_REQ", 24, 1),
        b("VALID", 31, 1),
        b("WQE_INDEX", 32, 32),
        b("TAG", 64, 32),
        b("RAW_PKT_SIZE", 96, 32),
    ];
}

/// Event queue entry: 16 bytes; the consumer clears VALID. What words 1
/// and 2 carry depends on the type (`EQE_*`).
pub struct Eqe;

impl Layout for Eqe {
    const SIZE: usize = 16;
    const FIELDS: &'static [Bits] = &[
        b("TYPE", 0, 4),
        b("VALID", 31, 1),
        b("DATA1", 32, 32),
        b("DATA2", 64, 32),
        b("DATA3", 96, 32),
    ];
}

/// Send WQE opcodes.
pub const WQE_OPCODE_NOP: u64 = 0;
pub const WQE_OPCODE_SEND: u64 = 1;
/// RDMA WRITE of one linear buffer.
pub const WQE_OPCODE_LINEAR: u64 = 2;
pub const WQE_OPCODE_STRIDE: u64 = 3;
pub const WQE_OPCODE_MULTI_STRIDE: u64 = 4;
pub const WQE_OPCODE_RENDEZVOUS_WR: u64 = 5;
pub const WQE_OPCODE_RENDEZVOUS_RD: u64 = 6;
pub const WQE_OPCODE_QOS_UPDATE: u64 = 7;

/// WQE completion types.
pub const COMPLETION_NONE: u64 = 0;
pub const COMPLETION_SOB: u64 = 1;
pub const COMPLETION_CQ: u64 = 2;

/// Requester context WQ_TYPE values.
pub const WQ_TYPE_WRITE: u64 = 1;
pub const WQ_TYPE_RDV_READ: u64 = 2;
pub const WQ_TYPE_RDV_WRITE: u64 = 3;

/// TRANSPORT_SERVICE values.
pub const TRANSPORT_RC: u64 = 0;
pub const TRANSPORT_RAW: u64 = 1;

/// EQE types.
pub const EQE_COMP: u64 = 0;
pub const EQE_COMP_ERR: u64 = 1;
pub const EQE_QP_ERR: u64 = 2;
pub const EQE_LINK_STATUS: u64 = 3;
pub const EQE_RAW_TX_COMP: u64 = 4;
pub const EQE_DB_FIFO_OVERRUN: u64 = 5;
pub const EQE_CONG: u64 = 6;
pub const EQE_CONG_ERR: u64 = 7;

#[cfg(test)]
mod tests {
    use super::super::layout::overlaps;
    use super::*;

    fn check<L: Layout>() {
        assert_eq!(overlaps(L::FIELDS, L::SIZE), Vec::<String>::new());
        let mut names: Vec<_> = L::FIELDS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), L::FIELDS.len(), "a field name twice");
        assert!(
            L::FIELDS.windows(2).all(|w| w[0].lsb < w[1].lsb),
            "not in bit order"
        );
    }

    #[test]
    fn formats_are_consistent() {
        check::<ReqQpc>();
        check::<ResQpc>();
        check::<SqWqe>();
        check::<RqWqe>();
        check::<Cqe>();
        check::<Eqe>();
    }
}
