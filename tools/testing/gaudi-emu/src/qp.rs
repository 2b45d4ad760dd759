// SPDX-License-Identifier: GPL-2.0
//! Queue-pair, completion-queue and work-queue-entry layouts and state.

use crate::mmu::Cached;
use crate::regs::*;
use crate::roce::{Endpoint, Gid};
use std::collections::VecDeque;
use std::time::Instant;

/// (1.2) The local region of a QP: peers name `[iova, iova + len)`; byte
/// `iova` is at device VA `va`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub iova: u64,
    pub len: u64,
    pub va: u64,
}

impl Region {
    /// QP_WRITE accepts a region that is not empty and whose two ranges do
    /// not wrap around.
    pub fn is_valid(&self) -> bool {
        self.len != 0
            && self.iova.checked_add(self.len).is_some()
            && self.va.checked_add(self.len).is_some()
    }

    /// The device VA of `[addr, addr + len)` if the range lies inside the
    /// region (computed without overflow; an empty range may sit at the
    /// region's end).
    pub fn resolve(&self, addr: u64, len: u64) -> Option<u64> {
        let off = addr.checked_sub(self.iova)?;
        let room = self.len.checked_sub(off)?;
        (len <= room).then_some(self.va + off)
    }
}

/// The QP context as the driver writes it through CMD_DATA (112 bytes;
/// software written for model 1.1 writes the first 64 and zeros after, for
/// 1.2 the first 96, and never sets [`QPF_GRH`], without which the rest is
/// not read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCtx {
    pub state: u8,
    /// log2 of the path MTU, 8 (256 B) to 13 (8 KiB).
    pub log_mtu: u8,
    pub retry_cnt: u8,
    /// Local ACK timeout: 4.096 us * 2^timeout; 0 waits forever.
    pub timeout: u8,
    pub cqn: u32,
    /// Device VA of the send queue ring.
    pub sq_base: u64,
    pub sq_log_size: u32,
    pub dest_qpn: u32,
    pub sq_psn: u32,
    pub rq_psn: u32,
    /// The one rkey this QP's WRITEs carry to the peer.
    pub remote_rkey: u32,
    /// The one rkey incoming WRITEs must carry.
    pub local_rkey: u32,
    /// The destination: with [`QPF_GRH`] its GID is the context's
    /// destination GID, else the IPv4 address at offset 48.
    pub dest: Endpoint,
    pub udp_sport: u16,
    pub flags: u32,
    /// (1.3, with [`QPF_GRH`]) The GRH fields: source GID index, hop
    /// limit, traffic class and flow label (20 bits).
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub tclass: u8,
    pub flow_label: u32,
    /// (1.2) Bounds and addresses incoming WRITEs when [`QPF_REGION`] is set.
    pub region: Region,
    /// (1.2) RNR NAKs in a row the requester accepts, 0 to 7
    /// ([`RNR_RETRY_FOREVER`]: without limit).
    pub rnr_retry: u8,
    /// (1.2) The RNR timer (5-bit IBA code) the responder asks for.
    pub min_rnr_timer: u8,
    /// (1.5, with [`QPF_RCQ`]) The CQ of received WRITEs with immediate.
    pub rcqn: u32,
}

/// What admitted an incoming WRITE at its first packet: the rest of the
/// message is accepted only while the context still grants the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub rkey: u32,
    pub region: Option<Region>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

impl QpCtx {
    pub const LEN: usize = 112;

    pub fn decode(b: &[u8]) -> Self {
        let flags = u32_at(b, 56);
        let grh = flags & QPF_GRH != 0;
        Self {
            state: b[0],
            log_mtu: b[1],
            retry_cnt: b[2],
            timeout: b[3],
            cqn: u32_at(b, 4),
            sq_base: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            sq_log_size: u32_at(b, 16),
            dest_qpn: u32_at(b, 20),
            sq_psn: u32_at(b, 24),
            rq_psn: u32_at(b, 28),
            remote_rkey: u32_at(b, 32),
            local_rkey: u32_at(b, 36),
            dest: Endpoint {
                mac: b[40..46].try_into().unwrap(),
                ip: if grh {
                    Gid(b[96..112].try_into().unwrap())
                } else {
                    Gid::v4(b[48..52].try_into().unwrap())
                },
            },
            udp_sport: u16::from_le_bytes([b[52], b[53]]),
            flags,
            sgid_index: if grh { b[54] } else { 0 },
            hop_limit: if grh { b[46] } else { 0 },
            tclass: if grh { b[47] } else { 0 },
            flow_label: if grh { u32_at(b, 60) & 0xf_ffff } else { 0 },
            region: Region {
                iova: u64_at(b, 64),
                len: u64_at(b, 72),
                va: u64_at(b, 80),
            },
            rnr_retry: b[88],
            min_rnr_timer: b[89],
            rcqn: if flags & QPF_RCQ != 0 {
                u32_at(b, 92)
            } else {
                0
            },
        }
    }

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = self.state;
        b[1] = self.log_mtu;
        b[2] = self.retry_cnt;
        b[3] = self.timeout;
        b[4..8].copy_from_slice(&self.cqn.to_le_bytes());
        b[8..16].copy_from_slice(&self.sq_base.to_le_bytes());
        b[16..20].copy_from_slice(&self.sq_log_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.dest_qpn.to_le_bytes());
        b[24..28].copy_from_slice(&self.sq_psn.to_le_bytes());
        b[28..32].copy_from_slice(&self.rq_psn.to_le_bytes());
        b[32..36].copy_from_slice(&self.remote_rkey.to_le_bytes());
        b[36..40].copy_from_slice(&self.local_rkey.to_le_bytes());
        b[40..46].copy_from_slice(&self.dest.mac);
        if self.has_grh() {
            b[46] = self.hop_limit;
            b[47] = self.tclass;
            b[54] = self.sgid_index;
            b[60..64].copy_from_slice(&self.flow_label.to_le_bytes());
            b[96..112].copy_from_slice(&self.dest.ip.0);
        } else {
            b[48..52].copy_from_slice(&self.dest.ip.to_v4().unwrap_or_default());
        }
        b[52..54].copy_from_slice(&self.udp_sport.to_le_bytes());
        b[56..60].copy_from_slice(&self.flags.to_le_bytes());
        b[64..72].copy_from_slice(&self.region.iova.to_le_bytes());
        b[72..80].copy_from_slice(&self.region.len.to_le_bytes());
        b[80..88].copy_from_slice(&self.region.va.to_le_bytes());
        b[88] = self.rnr_retry;
        b[89] = self.min_rnr_timer;
        if self.flags & QPF_RCQ != 0 {
            b[92..96].copy_from_slice(&self.rcqn.to_le_bytes());
        }
        b
    }

    /// The CQ of the completions of received WRITEs with immediate.
    pub fn responder_cqn(&self) -> u32 {
        if self.flags & QPF_RCQ != 0 {
            self.rcqn
        } else {
            self.cqn
        }
    }

    pub fn mtu(&self) -> u64 {
        1 << self.log_mtu
    }

    pub fn has_region(&self) -> bool {
        self.flags & QPF_REGION != 0
    }

    /// (1.3) The addresses are GIDs.
    pub fn has_grh(&self) -> bool {
        self.flags & QPF_GRH != 0
    }

    /// What the context grants a WRITE carrying `rkey`, if anything: rkey
    /// 0 never matches (whatever the mode), and incoming WRITEs need
    /// REMOTE_WRITE.
    pub fn grant(&self, rkey: u32) -> Option<Grant> {
        (self.flags & QPF_REMOTE_WRITE != 0 && rkey != 0 && rkey == self.local_rkey).then(|| {
            Grant {
                rkey,
                region: self.has_region().then_some(self.region),
            }
        })
    }

    /// The device VA an incoming WRITE of `[va, va + len)` admitted by `g`
    /// lands at: with a region, inside it and addressed by iova; without
    /// (model 1.1), `va` is a device VA.
    pub fn target(g: &Grant, va: u64, len: u64) -> Option<u64> {
        match g.region {
            Some(r) => r.resolve(va, len),
            None => Some(va),
        }
    }

    /// QP_KEYS (1.4) with `flags`: the remote rkey, and the local rkey with its region, as
    /// given; a local rkey 0 or an empty region accepts no WRITE.
    pub fn set_keys(&mut self, flags: u32, remote: u32, local: u32, region: Region) {
        if flags & QP_KEYS_REMOTE != 0 {
            self.remote_rkey = remote;
        }
        if flags & QP_KEYS_LOCAL != 0 {
            if local == 0 || region.len == 0 {
                self.revoke();
            } else {
                self.local_rkey = local;
                self.region = region;
                self.flags |= QPF_REMOTE_WRITE | QPF_REGION;
            }
        }
    }

    /// RKEY_REVOKE: the context no longer accepts any WRITE.
    pub fn revoke(&mut self) {
        self.local_rkey = 0;
        self.flags &= !(QPF_REMOTE_WRITE | QPF_REGION);
        self.region = Region::default();
    }
}

/// A send WQE (32 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wqe {
    pub opcode: u8,
    pub flags: u8,
    pub len: u32,
    pub local_va: u64,
    pub remote_va: u64,
    pub imm: u32,
}

impl Wqe {
    pub fn decode(b: &[u8; WQE_SIZE]) -> Self {
        Self {
            opcode: b[0],
            flags: b[1],
            len: u32_at(b, 4),
            local_va: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            remote_va: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            imm: u32_at(b, 24),
        }
    }

    pub fn encode(&self) -> [u8; WQE_SIZE] {
        let mut b = [0u8; WQE_SIZE];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.local_va.to_le_bytes());
        b[16..24].copy_from_slice(&self.remote_va.to_le_bytes());
        b[24..28].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

/// A completion (32 bytes); the owner bit is added when it is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub qpn: u32,
    pub wqe_index: u16,
    pub opcode: u8,
    pub status: u8,
    pub byte_len: u32,
    pub imm: u32,
}

impl Cqe {
    pub fn encode(&self, owner: bool) -> [u8; CQE_SIZE] {
        let mut b = [0u8; CQE_SIZE];
        b[0..4].copy_from_slice(&self.qpn.to_le_bytes());
        b[4..6].copy_from_slice(&self.wqe_index.to_le_bytes());
        b[6] = self.opcode;
        b[7] = self.status;
        b[8..12].copy_from_slice(&self.byte_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.imm.to_le_bytes());
        b[31] = u8::from(owner);
        b
    }

    pub fn decode(b: &[u8]) -> (Self, bool) {
        (
            Self {
                qpn: u32_at(b, 0),
                wqe_index: u16::from_le_bytes([b[4], b[5]]),
                opcode: b[6],
                status: b[7],
                byte_len: u32_at(b, 8),
                imm: u32_at(b, 12),
            },
            b[31] & 1 != 0,
        )
    }
}

pub struct Cq {
    pub va: u64,
    pub log_size: u32,
    pub vector: u32,
    pub pi: u32,
    pub ci: u32,
    pub armed: bool,
    /// Set after an overflow or a ring write fault: nothing more is written.
    pub broken: bool,
    /// The next entry's write faults (control interface `cq-fault`).
    pub fault_next: bool,
}

impl Cq {
    /// Every entry produced and not consumed: one more would overflow.
    pub fn is_full(&self) -> bool {
        self.pi.wrapping_sub(self.ci) >= 1 << self.log_size
    }
}

/// A WQE on the wire or waiting for its acknowledgement.
#[derive(Clone, Debug)]
pub struct Pending {
    pub index: u16,
    pub wqe: Wqe,
    pub first_psn: u32,
    pub npkts: u32,
    /// Strict mode: the translation of the source, made when the WQE
    /// started and kept for its packets and resends.
    pub src: Option<Cached>,
}

/// Where a WRITE being received continues.
#[derive(Clone, Debug)]
pub struct RecvWrite {
    /// Device VA of the next byte.
    pub va: u64,
    pub remaining: u64,
    pub total: u32,
    /// What admitted the message at its first packet.
    pub grant: Grant,
    /// Strict mode: the translation of the target, made at the first
    /// packet and kept for the message.
    pub dst: Option<Cached>,
}

pub struct Qp {
    pub ctx: QpCtx,
    // Requester.
    /// Producer index from the doorbell.
    pub sq_pi: u16,
    /// Next WQE to fetch.
    pub sq_fetch: u16,
    /// WQEs fetched and not yet completed, oldest first; the last one may
    /// be partly sent.
    pub pending: VecDeque<Pending>,
    /// Position in `pending` and byte offset of the next packet to send.
    pub send_pos: usize,
    pub send_off: u64,
    /// Next PSN to send; oldest unacknowledged PSN.
    pub next_psn: u32,
    pub una_psn: u32,
    pub retries_left: u8,
    pub last_progress: Instant,
    /// RNR NAKs received in a row (reset by progress).
    pub rnr_naks: u8,
    /// After an RNR NAK: nothing is sent before this time.
    pub rnr_until: Option<Instant>,
    // Responder.
    pub epsn: u32,
    pub msn: u32,
    pub recv: Option<RecvWrite>,
    pub nak_sent: bool,
    /// (1.3) The source address, taken from the GID table when QP_WRITE
    /// set the context's addresses.
    pub src_gid: Gid,
}

impl Qp {
    pub fn new(ctx: QpCtx, now: Instant) -> Self {
        Self {
            ctx,
            sq_pi: 0,
            sq_fetch: 0,
            pending: VecDeque::new(),
            send_pos: 0,
            send_off: 0,
            next_psn: ctx.sq_psn,
            una_psn: ctx.sq_psn,
            retries_left: ctx.retry_cnt,
            last_progress: now,
            rnr_naks: 0,
            rnr_until: None,
            epsn: ctx.rq_psn,
            msn: 0,
            recv: None,
            nak_sent: false,
            src_gid: Gid::default(),
        }
    }

    pub fn sq_size(&self) -> u16 {
        1 << self.ctx.sq_log_size
    }

    /// Packets of a message of `len` bytes at path MTU `mtu`.
    pub fn npkts(len: u32, mtu: u64) -> u32 {
        (u64::from(len).div_ceil(mtu)).max(1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grh_fields_are_read_only_with_grh() {
        let mut b = [0u8; QpCtx::LEN];
        b[46] = 9; // hop limit
        b[47] = 0x68; // traffic class
        b[48..52].copy_from_slice(&[10, 0, 0, 7]);
        b[54] = 3; // source GID index
        b[60..64].copy_from_slice(&0xfff1_2345u32.to_le_bytes());
        b[96..112].copy_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let c = QpCtx::decode(&b);
        assert_eq!(c.dest.ip, Gid::v4([10, 0, 0, 7]), "1.2: IPv4 at 48");
        assert_eq!(
            (c.sgid_index, c.hop_limit, c.tclass, c.flow_label),
            (0, 0, 0, 0)
        );
        b[56] = QPF_GRH as u8;
        let c = QpCtx::decode(&b);
        assert_eq!(c.dest.ip.0[..4], [0x20, 1, 0xd, 0xb8]);
        assert_eq!(c.dest.ip.0[15], 2);
        assert_eq!(
            (c.sgid_index, c.hop_limit, c.tclass, c.flow_label),
            (3, 9, 0x68, 0x1_2345)
        );
        let e = c.encode();
        assert_eq!(QpCtx::decode(&e), c);
        assert_eq!(e[48..52], [0; 4], "the IPv4 field is not written with GRH");
    }

    #[test]
    fn layouts_round_trip() {
        let c = QpCtx {
            state: QPS_RTS,
            log_mtu: 12,
            retry_cnt: 7,
            timeout: 14,
            cqn: 3,
            sq_base: 0x1234_5000,
            sq_log_size: 6,
            dest_qpn: 0xab_cdef,
            sq_psn: 100,
            rq_psn: 200,
            remote_rkey: 0x1111,
            local_rkey: 0x2222,
            dest: Endpoint {
                mac: [2, 0, 0, 0, 1, 2],
                ip: Gid::v4([10, 0, 0, 2]),
            },
            udp_sport: 0xc001,
            flags: QPF_REMOTE_WRITE | QPF_REGION,
            region: Region {
                iova: 0x7f00_1234_5000,
                len: 0x3000,
                va: 0x4000_0000,
            },
            rnr_retry: 6,
            min_rnr_timer: 31,
            ..Default::default()
        };
        let b = c.encode();
        assert_eq!(QpCtx::decode(&b), c);
        assert_eq!(b.len(), 112);
        assert_eq!(
            u64::from_le_bytes(b[64..72].try_into().unwrap()),
            0x7f00_1234_5000
        );
        assert_eq!(u64::from_le_bytes(b[72..80].try_into().unwrap()), 0x3000);
        assert_eq!(
            u64::from_le_bytes(b[80..88].try_into().unwrap()),
            0x4000_0000
        );
        assert_eq!((b[88], b[89]), (6, 31));
        assert_eq!(u32::from_le_bytes(b[56..60].try_into().unwrap()), 3);
        let w = Wqe {
            opcode: WQE_RDMA_WRITE_IMM,
            flags: WQE_SIGNALED,
            len: 4096,
            local_va: 1,
            remote_va: 2,
            imm: 3,
        };
        assert_eq!(Wqe::decode(&w.encode()), w);
        let q = Cqe {
            qpn: 5,
            wqe_index: 6,
            opcode: CQE_SEND,
            status: ST_RETRY_EXC_ERR,
            byte_len: 7,
            imm: 8,
        };
        assert_eq!(Cqe::decode(&q.encode(true)), (q, true));
    }

    #[test]
    fn region_bounds_and_translation() {
        let r = Region {
            iova: 0x1000,
            len: 0x3000,
            va: 0x4000_0000,
        };
        assert_eq!(r.resolve(0x1000, 0x3000), Some(0x4000_0000));
        assert_eq!(r.resolve(0x2010, 0x10), Some(0x4000_1010));
        assert_eq!(r.resolve(0x4000, 0), Some(0x4000_3000), "empty at the end");
        assert_eq!(r.resolve(0x4000, 1), None, "one past the end");
        assert_eq!(r.resolve(0x3fff, 2), None, "straddles the end");
        assert_eq!(r.resolve(0xfff, 1), None, "before the start");
        assert_eq!(r.resolve(0x4001, 0), None, "empty beyond the end");
        assert_eq!(r.resolve(0x1000, u64::MAX), None);
        assert_eq!(r.resolve(u64::MAX, u64::MAX), None);
        assert!(r.is_valid());
        for bad in [
            Region { len: 0, ..r },
            Region {
                iova: u64::MAX - 0xfff,
                ..r
            },
            Region {
                va: u64::MAX - 0xfff,
                ..r
            },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
        // The whole address space but one byte is a valid region.
        let all = Region {
            iova: 0,
            len: u64::MAX,
            va: 0,
        };
        assert!(all.is_valid());
        assert_eq!(all.resolve(u64::MAX - 1, 1), Some(u64::MAX - 1));
    }

    #[test]
    fn grants_need_the_flag_and_a_non_zero_matching_key() {
        let mut c = QpCtx {
            local_rkey: 0x55,
            flags: QPF_REMOTE_WRITE,
            ..Default::default()
        };
        assert_eq!(
            c.grant(0x55),
            Some(Grant {
                rkey: 0x55,
                region: None
            })
        );
        assert_eq!(c.grant(0x56), None);
        c.local_rkey = 0;
        assert_eq!(c.grant(0), None, "rkey 0 never matches");
        c.local_rkey = 0x55;
        c.flags = 0;
        assert_eq!(c.grant(0x55), None, "no REMOTE_WRITE");
        c.flags = QPF_REMOTE_WRITE | QPF_REGION;
        c.region = Region {
            iova: 0x10_0000,
            len: 0x1000,
            va: 0x4000_0000,
        };
        let g = c.grant(0x55).unwrap();
        assert_eq!(QpCtx::target(&g, 0x10_0800, 0x800), Some(0x4000_0800));
        assert_eq!(
            QpCtx::target(&g, 0x4000_0000, 1),
            None,
            "device VAs are not names"
        );
        c.revoke();
        assert_eq!((c.local_rkey, c.flags, c.region), (0, 0, Region::default()));
        assert_eq!(c.grant(0x55), None);
    }

    #[test]
    fn packet_counts() {
        assert_eq!(Qp::npkts(0, 4096), 1);
        assert_eq!(Qp::npkts(4096, 4096), 1);
        assert_eq!(Qp::npkts(4097, 4096), 2);
    }
}
