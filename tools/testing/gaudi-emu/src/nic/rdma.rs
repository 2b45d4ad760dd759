// SPDX-License-Identifier: GPL-2.0
//! RDMA WRITE over RoCE v2 as the NIC does it from its contexts: the
//! requester executes LINEAR WQEs from its port's send WQ array up to the
//! producer index a doorbell gave, sends the packets with the requester
//! context's RKEY, and retires WQEs as the responder acknowledges them;
//! the responder checks the key and the PSN of what arrives and writes it
//! at the address the packet carries. Contexts stay in memory (read and
//! written back around every step); what is not in a context (the packet
//! under way, timers) is the engine's.

use super::formats::*;
use super::layout::{bytes, words, Bits, Layout};
use super::queues::{cqe, Event};
use super::regs::*;
use super::{Memory, Regs};
use crate::roce::{aeth, op, psn_lt, Endpoint, Gid, Packet, Reth, PSN_MASK};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Packets a requester may have unacknowledged (model-defined).
pub const WINDOW: u32 = 256;
/// Syndromes (gaudi2_cn.c `qp_syndromes`).
pub const SYND_RES_KEY_INVALID: u32 = 0x10;
pub const SYND_TMR_RETRY: u32 = 0x40;
pub const SYND_DB_QP_INVALID: u32 = 0x41;
pub const SYND_DB_SECURITY: u32 = 0x42;
pub const SYND_DB_PI_LAST: u32 = 0x43;
pub const SYND_WQ_TYPE_OPCODE: u32 = 0x80;
pub const SYND_WRITE_SIZE_0: u32 = 0x84;
pub const SYND_WQE_INDEX: u32 = 0x91;
/// Model-defined (no public syndrome): the requester received a NAK remote
/// access error.
pub const SYND_MODEL_NAK: u32 = 0x7f;
/// Model-defined: the device MMU refused a WQE fetch or a local data read
/// of the requester.
pub const SYND_MODEL_MMU: u32 = 0x7e;
/// Model-defined: the requester received a NAK invalid request.
pub const SYND_MODEL_NAK_INV: u32 = 0x7d;
/// Model-defined: the requester received a NAK remote operational error.
pub const SYND_MODEL_NAK_OP: u32 = 0x7c;
/// Model-defined: the device MMU refused the target of a WRITE the
/// responder received.
pub const SYND_MODEL_RES_MMU: u32 = 0x7b;

fn f<L: Layout>(name: &str) -> Bits {
    L::field(name)
}

/// A WRITE sent and not yet acknowledged.
#[derive(Clone, Copy, Debug)]
struct Msg {
    index: u32,
    wqe: [u64; 4],
    first_psn: u32,
    last_psn: u32,
    tag: u32,
    completion: u64,
}

/// The requester's transient state.
#[derive(Default)]
pub struct Req {
    pending: VecDeque<Msg>,
    /// The WQE being sent: its index, words, bytes sent and first PSN.
    cur: Option<(u32, [u64; 4], u64, u32)>,
    last_progress: Option<Instant>,
    /// The retransmission timeout of the context as last read.
    timeout: Option<Duration>,
}

impl Req {
    /// When [`timers`] next has something to do: the retransmission
    /// timeout after the last progress, with packets unacknowledged.
    pub fn deadline(&self) -> Option<Instant> {
        if self.pending.is_empty() && self.cur.is_none() {
            return None;
        }
        self.last_progress?.checked_add(self.timeout?)
    }
}

/// The retransmission timeout of a requester context: 2^(TM_GRANULARITY
/// + 2) us.
fn timeout_of(c: &[u64; 16]) -> Duration {
    Duration::from_micros(1u64 << (f::<ReqQpc>("TM_GRANULARITY").get(c) + 2).min(40))
}

/// The responder's transient state: the WRITE under way.
#[derive(Default)]
pub struct Res {
    va: u64,
    left: u64,
    bypass: bool,
    asid: u32,
    nak_sent: bool,
}

/// What the engine did that the NIC must pass on.
#[derive(Default)]
pub struct Out {
    pub frames: Vec<Vec<u8>>,
    pub events: Vec<Event>,
    pub cqes: Vec<(usize, [u64; 2])>,
    /// Packets to be sent again (go-back-N).
    pub resent: u32,
    /// NAKs sent (a responder's).
    pub naks: u32,
}

/// A MAC address from its register pair (bits 47:32 and 31:0).
pub fn mac_of(hi16: u32, lo32: u32) -> [u8; 6] {
    let v = (u64::from(hi16 & 0xffff) << 32) | u64::from(lo32);
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The port's own address: the source MAC of its TXE and the source
/// IPv4 address of encapsulation `encap` (0.0.0.0 without one).
pub fn source(regs: &Regs, port: usize, encap: Option<u32>) -> Endpoint {
    let mac = mac_of(
        regs.get(TXE0_PORT0_MAC_CFG_47_32, port, 0),
        regs.get(TXE0_PORT0_MAC_CFG_31_0, port, 0),
    );
    let ip = encap.map_or(0, |e| regs.get(TXE0_SOURCE_IP_PORT0_0, port, e & 7));
    Endpoint {
        mac,
        ip: Gid::v4(ip.to_be_bytes()),
    }
}

/// The RDMA MAC filter of the port (RXB, index 0 even port, 2 odd).
pub fn rc_filter(regs: &Regs, port: usize) -> ([u8; 6], [u8; 6]) {
    let i = if port & 1 == 0 { 0 } else { 2 };
    let m = |r: u64| regs.get_macro(r, port, i);
    (
        mac_of(m(RXB_CORE_TS_RC_MAC_47_32_0), m(RXB_CORE_TS_RC_MAC_31_0_0)),
        mac_of(
            m(RXB_CORE_TS_RC_MAC_47_32_MASK_0),
            m(RXB_CORE_TS_RC_MAC_31_0_MASK_0),
        ),
    )
}

pub fn base(regs: &Regs, hi: u64, lo: u64, port: usize) -> u64 {
    (u64::from(regs.get(hi, port, 0)) << 32) | (u64::from(regs.get(lo, port, 0) & 0x1ff_ffff) << 7)
}

fn ctx_addr(regs: &Regs, port: usize, qpn: u32, req: bool) -> u64 {
    if req {
        base(
            regs,
            QPC0_REQ_BASE_ADDRESS_63_32,
            QPC0_REQ_BASE_ADDRESS_31_7,
            port,
        ) + u64::from(qpn) * ReqQpc::SIZE as u64
    } else {
        base(
            regs,
            QPC0_RES_BASE_ADDRESS_63_32,
            QPC0_RES_BASE_ADDRESS_31_7,
            port,
        ) + u64::from(qpn) * ResQpc::SIZE as u64
    }
}

/// Read a context (`N` words).
pub fn read_ctx<const N: usize>(
    regs: &Regs,
    mem: &mut dyn Memory,
    port: usize,
    qpn: u32,
) -> Option<[u64; N]> {
    if qpn >= super::TABLE_QPS {
        return None;
    }
    let mut b = vec![0u8; N * 8];
    mem.read_phys(ctx_addr(regs, port, qpn, N == 16), &mut b)
        .then(|| words(&b).try_into().unwrap())
}

pub fn write_ctx<const N: usize>(
    regs: &Regs,
    mem: &mut dyn Memory,
    port: usize,
    qpn: u32,
    w: &[u64; N],
) {
    if qpn >= super::TABLE_QPS {
        return;
    }
    if !mem.write_phys(ctx_addr(regs, port, qpn, N == 16), &bytes(w)) {
        log::warn!("port {port}: QP {qpn}: context write-back unreachable");
    }
}

fn qp_error(out: &mut Out, ctx: &mut [u64; 16], qpn: u32, syndrome: u32) {
    f::<ReqQpc>("ERROR").set(ctx, 1);
    out.events.push(Event {
        ty: EQE_QP_ERR,
        data1: qpn,
        data2: syndrome,
    });
}

/// A doorbell {`pi`, `qpn`} from FIFO `fifo`. Returns whether the QP has
/// work.
pub fn doorbell(
    regs: &Regs,
    mem: &mut dyn Memory,
    out: &mut Out,
    port: usize,
    fifo: usize,
    pi: u32,
    qpn: u32,
) -> bool {
    if qpn >= super::TABLE_QPS {
        out.events.push(Event {
            ty: EQE_QP_ERR,
            data1: qpn,
            data2: SYND_DB_QP_INVALID,
        });
        return false;
    }
    let Some(mut c) = read_ctx::<16>(regs, mem, port, qpn) else {
        log::warn!("port {port}: doorbell for QP {qpn}: context unreachable");
        return false;
    };
    let g = |n: &str, c: &[u64; 16]| f::<ReqQpc>(n).get(c);
    if g("VALID", &c) == 0 {
        out.events.push(Event {
            ty: EQE_QP_ERR,
            data1: qpn,
            data2: SYND_DB_QP_INVALID,
        });
        return false;
    }
    if g("ERROR", &c) != 0 {
        return false;
    }
    // A user FIFO rings only QPs of its own address space, and never a
    // secured one (the driver sets the port to ignore such doorbells).
    if fifo != super::queues::FIFO_SECURED {
        let ovrd = regs.get(QPC0_DB_FIFO_USER_OVRD_0, port, fifo as u32);
        if u64::from(ovrd & 0x3ff) != g("ASID", &c) || g("TRUST_LEVEL", &c) != 0 {
            log::info!("port {port}: doorbell of FIFO {fifo} for QP {qpn} of another ASID or trust: ignored");
            return false;
        }
    }
    if u64::from(pi) > g("LAST_IDX", &c) {
        qp_error(out, &mut c, qpn, SYND_DB_PI_LAST);
        write_ctx(regs, mem, port, qpn, &c);
        return false;
    }
    f::<ReqQpc>("LOCAL_PRODUCER_IDX").set(&mut c, pi.into());
    write_ctx(regs, mem, port, qpn, &c);
    true
}

/// The WQE at `index` of QP `qpn`'s slot in send WQ array `array` (an
/// array that does not bypass the MMU is read in the QP's ASID).
fn fetch_wqe(
    regs: &Regs,
    mem: &mut dyn Memory,
    port: usize,
    qpn: u32,
    array: u32,
    asid: u32,
    index: u32,
) -> Option<[u64; 4]> {
    let hi = regs.get(TXE0_SQ_BASE_ADDRESS_63_32_0, port, array);
    let lo = regs.get(TXE0_SQ_BASE_ADDRESS_31_0_0, port, array);
    let log = regs.get(TXE0_LOG_MAX_WQ_SIZE_0, port, array) & 0x1f;
    let bypass = regs.get(TXE0_WQE_USER_CFG, port, 0) & (1 << array) != 0;
    let slot = ((u64::from(hi) << 32) | u64::from(lo)).wrapping_add((u64::from(qpn) << log) * 128);
    let at = slot.wrapping_add(u64::from(index) * SqWqe::SIZE as u64);
    let mut b = [0u8; 32];
    super::read_data(mem, bypass, asid, at, &mut b).then(|| words(&b).try_into().unwrap())
}

/// Send what QP `qpn` may send now. Returns whether the QP still has work:
/// WQEs unsent or unacknowledged (an idle QP needs a doorbell to start again).
pub fn pump(
    regs: &Regs,
    mem: &mut dyn Memory,
    st: &mut Req,
    out: &mut Out,
    port: usize,
    qpn: u32,
    now: Instant,
) -> bool {
    let Some(mut c) = read_ctx::<16>(regs, mem, port, qpn) else {
        return false;
    };
    let g = |n: &str, c: &[u64; 16]| f::<ReqQpc>(n).get(c);
    if g("VALID", &c) == 0 || g("ERROR", &c) != 0 {
        return false;
    }
    st.timeout = Some(timeout_of(&c));
    if g("CONGESTION_WIN", &c) == 0 && g("CONGESTION_MODE", &c) == 2 {
        // Stopped (teardown) with work outstanding.
        return true;
    }
    let ring = g("LAST_IDX", &c) as u32 + 1;
    let mtu = 1024u64 << g("MTU", &c);
    loop {
        let nts = g("NTS_PSN", &c) as u32;
        let ona = g("ONA_PSN", &c) as u32;
        if nts.wrapping_sub(ona) & PSN_MASK >= WINDOW {
            break;
        }
        let (index, wqe, off, first_psn) = match st.cur {
            Some(cur) => cur,
            None => {
                let exe = g("EXECUTION_IDX", &c) as u32;
                if exe == g("LOCAL_PRODUCER_IDX", &c) as u32 {
                    break;
                }
                let asid = g("ASID", &c) as u32;
                let array = g("WQ_BASE_ADDR", &c) as u32;
                let Some(wqe) = fetch_wqe(regs, mem, port, qpn, array, asid, exe) else {
                    log::info!("port {port}: QP {qpn}: WQE {exe} unreachable");
                    qp_error(out, &mut c, qpn, SYND_MODEL_MMU);
                    break;
                };
                let w = |n: &str| f::<SqWqe>(n).get(&wqe);
                if w("OPCODE") == WQE_OPCODE_NOP {
                    f::<ReqQpc>("EXECUTION_IDX").set(&mut c, ((exe + 1) % ring).into());
                    continue;
                }
                let syndrome = if w("WQE_INDEX") != u64::from(exe & 0xff) {
                    Some(SYND_WQE_INDEX)
                } else if w("OPCODE") != WQE_OPCODE_LINEAR || g("WQ_TYPE", &c) != WQ_TYPE_WRITE {
                    Some(SYND_WQ_TYPE_OPCODE)
                } else if w("SIZE") == 0 {
                    Some(SYND_WRITE_SIZE_0)
                } else {
                    None
                };
                if let Some(s) = syndrome {
                    qp_error(out, &mut c, qpn, s);
                    break;
                }
                if g("TRANSPORT_SERVICE", &c) == TRANSPORT_RAW {
                    if !raw_send(mem, out, &c, &wqe, port, qpn, exe) {
                        qp_error(out, &mut c, qpn, SYND_MODEL_MMU);
                        break;
                    }
                    f::<ReqQpc>("EXECUTION_IDX").set(&mut c, ((exe + 1) % ring).into());
                    f::<ReqQpc>("CONSUMER_IDX").set(&mut c, ((exe + 1) % ring).into());
                    continue;
                }
                (exe, wqe, 0, nts)
            }
        };
        let w = |n: &str| f::<SqWqe>(n).get(&wqe);
        let size = w("SIZE");
        let n = mtu.min(size - off);
        let mut payload = vec![0u8; n as usize];
        let (bypass, asid) = (g("DATA_MMU_BYPASS", &c) != 0, g("ASID", &c) as u32);
        let at = w("LOCAL_ADDRESS").wrapping_add(off);
        if !super::read_data(mem, bypass, asid, at, &mut payload) {
            log::info!("port {port}: QP {qpn}: local data at {at:#x} (ASID {asid}) unreachable");
            st.cur = None;
            qp_error(out, &mut c, qpn, SYND_MODEL_MMU);
            break;
        }
        let first = off == 0;
        let last = off + n == size;
        let opcode = match (first, last) {
            (true, true) => op::WRITE_ONLY,
            (true, false) => op::WRITE_FIRST,
            (false, true) => op::WRITE_LAST,
            (false, false) => op::WRITE_MIDDLE,
        };
        let since = g("PSN_SINCE_ACKREQ", &c) + 1;
        let freq = g("ACKREQ_FREQ", &c).max(1);
        let ackreq = last || w("ACKREQ") != 0 || since >= freq;
        f::<ReqQpc>("PSN_SINCE_ACKREQ").set(&mut c, if ackreq { 0 } else { since });
        let encap = (g("ENCAP_ENABLE", &c) != 0).then(|| g("ENCAP_TYPE", &c) as u32);
        let dst_mac = mac_of(g("DST_MAC_MSB", &c) as u32, g("DST_MAC_LSB", &c) as u32);
        let pkt = Packet {
            src: source(regs, port, encap),
            dst: Endpoint {
                mac: dst_mac,
                ip: Gid::v4((g("DST_IP", &c) as u32).to_be_bytes()),
            },
            sport: 0xc000 | (qpn as u16 & 0x3fff),
            opcode,
            dqpn: g("DST_QP", &c) as u32,
            ackreq,
            psn: nts,
            reth: first.then_some(Reth {
                va: w("REMOTE_ADDRESS"),
                rkey: g("RKEY", &c) as u32,
                len: size as u32,
            }),
            payload: &payload,
            ..Default::default()
        };
        out.frames.push(pkt.encode(nts as u16));
        f::<ReqQpc>("NTS_PSN").set(&mut c, ((nts + 1) & PSN_MASK).into());
        if st.pending.is_empty() && st.cur.is_none() {
            st.last_progress = Some(now);
        }
        if last {
            st.cur = None;
            st.pending.push_back(Msg {
                index,
                wqe,
                first_psn,
                last_psn: nts,
                tag: w("TAG") as u32,
                completion: w("COMPLETION_TYPE"),
            });
            f::<ReqQpc>("EXECUTION_IDX").set(&mut c, ((index + 1) % ring).into());
        } else {
            st.cur = Some((index, wqe, off + n, first_psn));
        }
    }
    write_ctx(regs, mem, port, qpn, &c);
    let unsent = g("EXECUTION_IDX", &c) != g("LOCAL_PRODUCER_IDX", &c);
    g("ERROR", &c) == 0 && (unsent || st.cur.is_some() || !st.pending.is_empty())
}

/// The raw (Ethernet) path: the WQE's buffer is a whole frame, sent as it
/// is; a WQE with SE reports its index in a RAW_TX_COMP event.
fn raw_send(
    mem: &mut dyn Memory,
    out: &mut Out,
    c: &[u64; 16],
    wqe: &[u64; 4],
    port: usize,
    qpn: u32,
    index: u32,
) -> bool {
    let w = |n: &str| f::<SqWqe>(n).get(wqe);
    let (bypass, asid) = (
        f::<ReqQpc>("DATA_MMU_BYPASS").get(c) != 0,
        f::<ReqQpc>("ASID").get(c) as u32,
    );
    let size = w("SIZE").min(u64::from(super::RAW_MAX_FRAME));
    let mut frame = vec![0u8; size as usize];
    if !super::read_data(mem, bypass, asid, w("LOCAL_ADDRESS"), &mut frame) {
        log::info!(
            "port {port}: raw QP {qpn}: frame at {:#x} unreachable",
            w("LOCAL_ADDRESS")
        );
        return false;
    }
    out.frames.push(frame);
    if w("SE") != 0 {
        out.events.push(Event {
            ty: EQE_RAW_TX_COMP,
            data1: qpn,
            data2: index,
        });
    }
    true
}

/// Send again from the oldest unacknowledged packet (go-back-N): from
/// its place in its WQE, which may be part-acknowledged.
fn rewind(st: &mut Req, c: &mut [u64; 16], out: &mut Out) {
    let Some((index, wqe, first)) = st
        .pending
        .front()
        .map(|m| (m.index, m.wqe, m.first_psn))
        .or(st.cur.map(|cur| (cur.0, cur.1, cur.3)))
    else {
        return;
    };
    let ona = f::<ReqQpc>("ONA_PSN").get(c) as u32;
    let nts = f::<ReqQpc>("NTS_PSN").get(c) as u32;
    out.resent += nts.wrapping_sub(ona) & PSN_MASK;
    let mtu = 1024u64 << f::<ReqQpc>("MTU").get(c);
    let off = u64::from(ona.wrapping_sub(first) & PSN_MASK) * mtu;
    f::<ReqQpc>("EXECUTION_IDX").set(c, index.into());
    f::<ReqQpc>("NTS_PSN").set(c, ona.into());
    st.pending.clear();
    st.cur = (off > 0 && off < f::<SqWqe>("SIZE").get(&wqe)).then_some((index, wqe, off, first));
}

/// Timers of QP `qpn`: retransmit after the context's timeout.
pub fn timers(
    regs: &Regs,
    mem: &mut dyn Memory,
    st: &mut Req,
    out: &mut Out,
    port: usize,
    qpn: u32,
    now: Instant,
) {
    let Some(t0) = st.last_progress else {
        return;
    };
    if st.pending.is_empty() && st.cur.is_none() {
        return;
    }
    let Some(mut c) = read_ctx::<16>(regs, mem, port, qpn) else {
        return;
    };
    let g = |n: &str, c: &[u64; 16]| f::<ReqQpc>(n).get(c);
    if g("VALID", &c) == 0 || g("ERROR", &c) != 0 {
        return;
    }
    let timeout = timeout_of(&c);
    st.timeout = Some(timeout);
    if now.duration_since(t0) < timeout {
        return;
    }
    let retries = g("TIMEOUT_RETRY_COUNT", &c) + 1;
    let max = u64::from(regs.get(QPC0_RETRY_COUNT_MAX, port, 0) & 0xff);
    if retries > max {
        log::info!("port {port}: QP {qpn}: retries exhausted");
        qp_error(out, &mut c, qpn, SYND_TMR_RETRY);
    } else {
        f::<ReqQpc>("TIMEOUT_RETRY_COUNT").set(&mut c, retries);
        rewind(st, &mut c, out);
        st.last_progress = Some(now);
    }
    write_ctx(regs, mem, port, qpn, &c);
}

/// An acknowledgement (or NAK) for requester QP `qpn`.
pub fn ack(
    regs: &Regs,
    mem: &mut dyn Memory,
    st: &mut Req,
    out: &mut Out,
    port: usize,
    pkt: &Packet<'_>,
    now: Instant,
) {
    let qpn = pkt.dqpn;
    let Some(mut c) = read_ctx::<16>(regs, mem, port, qpn) else {
        return;
    };
    let g = |n: &str, c: &[u64; 16]| f::<ReqQpc>(n).get(c);
    if g("VALID", &c) == 0 || g("ERROR", &c) != 0 || g("TRANSPORT_SERVICE", &c) != 0 {
        return;
    }
    let Some((syndrome, _)) = pkt.aeth else {
        return;
    };
    if aeth::is_nak(syndrome) {
        if syndrome == aeth::NAK_PSN_SEQ {
            rewind(st, &mut c, out);
        } else {
            let s = match syndrome {
                aeth::NAK_REMOTE_ACCESS => SYND_MODEL_NAK,
                aeth::NAK_INVALID_REQ => SYND_MODEL_NAK_INV,
                _ => SYND_MODEL_NAK_OP,
            };
            qp_error(out, &mut c, qpn, s);
        }
        write_ctx(regs, mem, port, qpn, &c);
        return;
    }
    // Every message up to the acknowledged PSN is done.
    log::debug!(
        "port {port}: QP {qpn}: ACK {} with {} pending",
        pkt.psn,
        st.pending.len()
    );
    let mut progressed = false;
    while let Some(m) = st.pending.front().copied() {
        if psn_lt(pkt.psn, m.last_psn) {
            break;
        }
        st.pending.pop_front();
        progressed = true;
        f::<ReqQpc>("ONA_PSN").set(&mut c, ((m.last_psn + 1) & PSN_MASK).into());
        let ring = g("LAST_IDX", &c) as u32 + 1;
        f::<ReqQpc>("CONSUMER_IDX").set(&mut c, ((m.index + 1) % ring).into());
        if m.completion == COMPLETION_CQ {
            out.cqes
                .push((g("CQ_NUM", &c) as usize, cqe(qpn, true, m.index, m.tag)));
        }
    }
    // Packets of a message still under way acknowledged: the window moves
    // on (a message may be longer than the window).
    let ona = g("ONA_PSN", &c) as u32;
    let nts = g("NTS_PSN", &c) as u32;
    if !psn_lt(pkt.psn, ona) && psn_lt(pkt.psn, nts) {
        f::<ReqQpc>("ONA_PSN").set(&mut c, ((pkt.psn + 1) & PSN_MASK).into());
        progressed = true;
    }
    if progressed {
        f::<ReqQpc>("TIMEOUT_RETRY_COUNT").set(&mut c, 0);
        st.last_progress = Some(now);
    }
    write_ctx(regs, mem, port, qpn, &c);
}

/// A WRITE packet for responder QP `pkt.dqpn`; returns false if the QP has
/// no valid responder context (the packet is not the NIC's).
pub fn write(
    regs: &Regs,
    mem: &mut dyn Memory,
    st: &mut Res,
    out: &mut Out,
    port: usize,
    pkt: &Packet<'_>,
) -> bool {
    let qpn = pkt.dqpn;
    let Some(mut c) = read_ctx::<4>(regs, mem, port, qpn) else {
        return false;
    };
    let g = |n: &str, c: &[u64; 4]| f::<ResQpc>(n).get(c);
    // RoCE is for RC contexts: a raw (Ethernet) QP's takes none.
    if g("VALID", &c) == 0 || g("TRANSPORT_SERVICE", &c) != 0 {
        return false;
    }
    let expected = g("EXPECTED_PSN", &c) as u32;
    let ctx = c;
    let reply = |syndrome: u8, psn: u32| {
        let c = ctx;
        let encap = (g("ENCAP_ENABLE", &c) != 0).then(|| g("ENCAP_TYPE", &c) as u32);
        Packet {
            src: source(regs, port, encap),
            dst: Endpoint {
                mac: mac_of(g("DST_MAC_MSB", &c) as u32, g("DST_MAC_LSB", &c) as u32),
                ip: Gid::v4((g("DST_IP", &c) as u32).to_be_bytes()),
            },
            sport: 0xc000 | (qpn as u16 & 0x3fff),
            opcode: op::ACK,
            dqpn: g("DST_QP", &c) as u32,
            psn,
            aeth: Some((syndrome, 0)),
            ..Default::default()
        }
        .encode(psn as u16)
    };
    if pkt.psn != expected {
        if psn_lt(pkt.psn, expected) {
            // A duplicate: acknowledge what was received.
            if pkt.ackreq {
                out.frames
                    .push(reply(aeth::ACK, expected.wrapping_sub(1) & PSN_MASK));
            }
        } else if !st.nak_sent {
            st.nak_sent = true;
            out.frames.push(reply(aeth::NAK_PSN_SEQ, expected));
            out.naks += 1;
        }
        return true;
    }
    st.nak_sent = false;
    let first = matches!(pkt.opcode, op::WRITE_FIRST | op::WRITE_ONLY);
    if first {
        let reth = pkt.reth.unwrap_or_default();
        // A context's LKEY of 0 matches no key (software never issues it).
        if reth.rkey != g("LKEY", &c) as u32 || reth.rkey == 0 {
            out.frames.push(reply(aeth::NAK_REMOTE_ACCESS, expected));
            out.naks += 1;
            out.events.push(Event {
                ty: EQE_QP_ERR,
                data1: qpn,
                data2: SYND_RES_KEY_INVALID,
            });
            return true;
        }
        *st = Res {
            va: reth.va,
            left: reth.len.into(),
            bypass: g("DATA_MMU_BYPASS", &c) != 0,
            asid: g("ASID", &c) as u32,
            nak_sent: false,
        };
    }
    let n = pkt.payload.len() as u64;
    if n > st.left {
        out.frames.push(reply(aeth::NAK_INVALID_REQ, expected));
        out.naks += 1;
        return true;
    }
    if !super::write_data(mem, st.bypass, st.asid, st.va, pkt.payload) {
        log::info!(
            "port {port}: QP {qpn}: WRITE target {:#x} (ASID {}) unreachable",
            st.va,
            st.asid
        );
        out.frames.push(reply(aeth::NAK_REMOTE_ACCESS, expected));
        out.naks += 1;
        out.events.push(Event {
            ty: EQE_QP_ERR,
            data1: qpn,
            data2: SYND_MODEL_RES_MMU,
        });
        st.left = 0;
        return true;
    }
    st.va += n;
    st.left -= n;
    f::<ResQpc>("EXPECTED_PSN").set(&mut c, ((expected + 1) & PSN_MASK).into());
    write_ctx(regs, mem, port, qpn, &c);
    if pkt.ackreq {
        out.frames.push(reply(aeth::ACK, expected));
    }
    true
}
