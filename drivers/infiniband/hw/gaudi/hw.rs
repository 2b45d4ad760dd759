// SPDX-License-Identifier: GPL-2.0

//! What the device reads and writes in memory, and the contexts of its commands: typed
//! layouts of Documentation/infiniband/gaudi/device-model-1.rst.
//!
//! Every multi-byte field is little-endian, and the fields are native integers: the driver
//! supports little-endian hosts (Gaudi2 hosts are x86-64); a big-endian port would convert
//! them. The layouts are `#[repr(C)]` without padding; their sizes are checked at
//! build time against the model's.

use kernel::{
    bitfield,
    prelude::*, //
};
use zerocopy_derive::Immutable;

bitfield! {
    /// A device page-table entry ("Device MMU").
    pub(crate) struct Pte(u64) {
        /// Next table (bus address) or the page, bits 51:12 of the address.
        51:12 address;
        /// (1.1) The page holds queues: WQE fetches and CQE writes may use it, nothing else.
        4:4 ring => bool;
        /// The address is an offset into device memory (BAR 4).
        3:3 devmem => bool;
        /// At level 0 or 1: the entry maps a 1 GiB or 2 MiB page.
        2:2 leaf => bool;
        /// The device may write the page.
        1:1 write => bool;
        /// The entry maps something; the page is readable.
        0:0 valid => bool;
    }
}

impl Pte {
    /// An entry pointing to `addr` (bits 51:12 only are kept: the caller checked alignment
    /// and range).
    pub(crate) fn to(addr: u64) -> Self {
        Self::from_raw(addr & Self::ADDRESS_MASK).with_valid(true)
    }
}

/// An event queue entry ("Event queue").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct Eqe {
    /// One of the `EQE_*` types.
    pub(crate) kind: u8,
    /// Port index (from 0).
    pub(crate) port: u8,
    pub(crate) reserved0: u16,
    pub(crate) data0: u32,
    pub(crate) data1: u32,
    pub(crate) reserved1: [u8; 3],
    /// Bit 0: the owner bit (1 in even passes over the ring).
    pub(crate) owner: u8,
}

/// A send queue entry ("Send queue and WQE").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct Wqe {
    /// [`WQE_RDMA_WRITE`] or [`WQE_RDMA_WRITE_IMM`].
    pub(crate) opcode: u8,
    /// [`WQE_SIGNALED`].
    pub(crate) flags: u8,
    pub(crate) reserved0: u16,
    /// Length in bytes.
    pub(crate) length: u32,
    /// Source device VA.
    pub(crate) local_va: u64,
    /// Remote address, as the peer's QP region names it.
    pub(crate) remote_va: u64,
    /// Immediate data, in the byte order of the wire.
    pub(crate) imm: u32,
    pub(crate) reserved1: u32,
}

/// The bytes of one inline request, as the driver copies them for the device to read: a WQE
/// of such a request names them as its source.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable)]
pub(crate) struct InlineData {
    pub(crate) bytes: [u8; INLINE_MAX],
}

/// The largest inline request.
pub(crate) const INLINE_MAX: usize = 256;

pub(crate) const WQE_RDMA_WRITE: u8 = 0x01;
pub(crate) const WQE_RDMA_WRITE_IMM: u8 = 0x02;
/// [`Wqe::flags`]: a CQE on success.
pub(crate) const WQE_SIGNALED: u8 = 1 << 0;

/// A completion queue entry ("Completions").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct Cqe {
    pub(crate) qpn: u32,
    /// The WQE's index (send completions).
    pub(crate) wqe_index: u16,
    /// [`CQE_SEND`] or [`CQE_RECV_WRITE_IMM`].
    pub(crate) opcode: u8,
    /// A status code of the model.
    pub(crate) status: u8,
    pub(crate) byte_len: u32,
    /// Immediate data (incoming WRITE with immediate), in the byte order of the wire.
    pub(crate) imm: u32,
    pub(crate) reserved: [u8; 15],
    /// Bit 0: the owner bit, as for event queue entries.
    pub(crate) owner: u8,
}

pub(crate) const CQE_SEND: u8 = 0x01;
pub(crate) const CQE_RECV_WRITE_IMM: u8 = 0x02;

/// The argument of `CQ_CREATE`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct CqContext {
    /// Device VA of the ring (32-byte aligned).
    pub(crate) ring_va: u64,
    /// log2 of the entries.
    pub(crate) log_size: u32,
    /// MSI-X vector for notifications (this version: 0, they go through the event queue).
    pub(crate) vector: u32,
}

/// The argument of `QP_WRITE` and the result of `QP_READ` ("QP context", model 1.3).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct QpContext {
    /// One of the `QPS_*` states.
    pub(crate) state: u8,
    /// log2 of the path MTU.
    pub(crate) log_mtu: u8,
    pub(crate) retry_cnt: u8,
    /// Local ACK timeout: 4.096 us * 2^n; 0 waits forever.
    pub(crate) timeout: u8,
    /// CQ (same port) of all the QP's completions.
    pub(crate) cqn: u32,
    /// Device VA of the send queue ring.
    pub(crate) sq_va: u64,
    /// log2 of the send queue entries.
    pub(crate) log_sq_size: u32,
    /// 24 bits.
    pub(crate) dest_qpn: u32,
    /// 24 bits: `QP_WRITE`, the PSN of the first packet sent; `QP_READ`, the next to send.
    pub(crate) sq_psn: u32,
    /// 24 bits: `QP_WRITE`, the PSN expected first; `QP_READ`, the next expected.
    pub(crate) rq_psn: u32,
    /// Carried by every WRITE this QP sends.
    pub(crate) remote_rkey: u32,
    /// Every WRITE to this QP must carry it.
    pub(crate) local_rkey: u32,
    pub(crate) dmac: [u8; 6],
    /// (1.3) Hop limit (IPv4 TTL; 0 sends 64).
    pub(crate) hop_limit: u8,
    /// (1.3) Traffic class (IPv4 DSCP and ECN).
    pub(crate) traffic_class: u8,
    /// Without [`QPF_GRH`]: the destination, first octet first.
    pub(crate) dest_ipv4: [u8; 4],
    /// UDP source port (its low 14 bits).
    pub(crate) udp_sport: u16,
    /// (1.3) With [`QPF_GRH`]: the source GID entry.
    pub(crate) sgid_index: u8,
    pub(crate) reserved1: u8,
    /// [`QPF_REMOTE_WRITE`], [`QPF_REGION`], [`QPF_GRH`], [`QPF_RCQ`].
    pub(crate) flags: u32,
    /// (1.3) IPv6 flow label, bits 19:0.
    pub(crate) flow_label: u32,
    /// (1.2) The local region: the iova peers name, its length, and the device VA of byte
    /// `region_iova`.
    pub(crate) region_iova: u64,
    pub(crate) region_length: u64,
    pub(crate) region_va: u64,
    /// (1.2) RNR retry count, 0 to 7 (7: without limit).
    pub(crate) rnr_retry: u8,
    /// (1.2) The minimum RNR timer the responder asks for (5-bit encoding).
    pub(crate) min_rnr_timer: u8,
    pub(crate) reserved3: [u8; 2],
    /// (1.5) With [`QPF_RCQ`]: the CQ (same port) of received WRITEs with immediate.
    pub(crate) rcqn: u32,
    /// (1.3) With [`QPF_GRH`]: the destination GID.
    pub(crate) dgid: [u8; 16],
}

/// [`QpContext::flags`]: incoming RDMA WRITEs allowed.
pub(crate) const QPF_REMOTE_WRITE: u32 = 1 << 0;
/// [`QpContext::flags`] (1.2): incoming WRITEs address the context's region by its iova and
/// must stay inside it.
pub(crate) const QPF_REGION: u32 = 1 << 1;
/// [`QpContext::flags`] (1.3): the QP sends from GID entry `sgid_index` to `dgid`, with the
/// hop limit, traffic class and flow label of the context.
pub(crate) const QPF_GRH: u32 = 1 << 2;
/// [`QpContext::flags`] (1.5): completions of received WRITEs with immediate go to CQ
/// `rcqn` rather than `cqn`.
pub(crate) const QPF_RCQ: u32 = 1 << 3;

/// The argument of `GID_SET` (1.3).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct GidEntry {
    /// An IPv6 address, or an IPv4 one as `::ffff:a.b.c.d`.
    pub(crate) gid: [u8; 16],
    /// [`GID_VALID`], or 0 to clear the entry.
    pub(crate) flags: u32,
}

/// [`GidEntry::flags`]: the entry is valid.
pub(crate) const GID_VALID: u32 = 1 << 0;

/// The argument of `QP_KEYS` (1.4).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct QpKeys {
    /// [`QP_KEYS_REMOTE`], [`QP_KEYS_LOCAL`].
    pub(crate) flags: u32,
    pub(crate) remote_rkey: u32,
    /// With its region; 0 (or a region of length 0): the QP accepts no WRITE.
    pub(crate) local_rkey: u32,
    pub(crate) reserved: u32,
    pub(crate) region_iova: u64,
    pub(crate) region_length: u64,
    pub(crate) region_va: u64,
}

/// [`QpKeys::flags`]: set the remote rkey.
pub(crate) const QP_KEYS_REMOTE: u32 = 1 << 0;

// Device QP states ([`QpContext::state`]).
pub(crate) const QPS_RESET: u8 = 0;
pub(crate) const QPS_INIT: u8 = 1;
pub(crate) const QPS_RTR: u8 = 2;
pub(crate) const QPS_RTS: u8 = 3;
pub(crate) const QPS_ERR: u8 = 4;

/// The argument of `DEVMEM_FILL` (1.2).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct DevmemFill {
    /// Offset in device memory, a multiple of 4 KiB.
    pub(crate) offset: u64,
    /// Bytes, a multiple of 4 KiB.
    pub(crate) length: u64,
    /// Repeated over the range.
    pub(crate) pattern: u32,
    pub(crate) reserved: u32,
}

/// The argument of `RKEY_REVOKE` (1.2), and its result.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable)]
pub(crate) struct RkeyRevoke {
    /// The key (argument).
    pub(crate) key: u32,
    /// Contexts changed (result).
    pub(crate) changed: u32,
}

// The sizes the model gives.
const _: () = {
    assert!(size_of::<Eqe>() == 16);
    assert!(size_of::<Wqe>() == 32);
    assert!(size_of::<Cqe>() == 32);
    assert!(size_of::<CqContext>() == 16);
    assert!(size_of::<QpContext>() == 112);
    assert!(size_of::<GidEntry>() == 20);
    assert!(size_of::<QpKeys>() == 40);
    assert!(core::mem::offset_of!(QpContext, hop_limit) == 46);
    assert!(core::mem::offset_of!(QpContext, sgid_index) == 54);
    assert!(core::mem::offset_of!(QpContext, flow_label) == 60);
    assert!(core::mem::offset_of!(QpContext, dgid) == 96);
    assert!(core::mem::offset_of!(QpContext, dmac) == 40);
    assert!(core::mem::offset_of!(QpContext, flags) == 56);
    assert!(core::mem::offset_of!(QpContext, region_iova) == 64);
    assert!(core::mem::offset_of!(QpContext, rnr_retry) == 88);
    assert!(core::mem::offset_of!(Cqe, owner) == 31);
    assert!(core::mem::offset_of!(Eqe, owner) == 15);
};
