// SPDX-License-Identifier: GPL-2.0

//! The NIC's QP_ERR syndromes as the owner of the QP sees them: the status
//! of its work completions and its asynchronous event.

use super::*;
use gaudi_verbs::{IB_EVENT_QP_FATAL, WC_LOC_PROT_ERR};

// enum ib_wc_status
const WC_LOC_QP_OP_ERR: u32 = 2;
const WC_REM_INV_REQ_ERR: u32 = 9;
const WC_REM_OP_ERR: u32 = 11;
// enum ib_event_type
const IB_EVENT_QP_ACCESS_ERR: u32 = 3;
/// EQE type QP_ERR (device-model.rst, EQE).
const EQE_QP_ERR: u32 = 2;

/// The asynchronous events other than the ports' within `wait`.
fn qp_events(events: &AsyncEvents, wait: Duration) -> Vec<u32> {
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    while let Ok(Some(e)) = events.next(wait.saturating_sub(t.elapsed())) {
        if !matches!(e.event_type, IB_EVENT_PORT_ERR | IB_EVENT_PORT_ACTIVE) {
            got.push(e.event_type);
        }
        if t.elapsed() >= wait {
            break;
        }
    }
    got
}

/// `eq-syndromes` (and `device-errors`: the NIC reports its errors as
/// QP_ERR syndromes, not CQE statuses): for each class of QP_ERR syndrome
/// (device-model.rst, "QP error syndromes"), with port 1's NIC holding its
/// doorbells (nic-hold) so
/// that two signalled WRITEs stay outstanding, the emulator writes a QP_ERR
/// of the QP with the syndrome on port 1's event queue. The first WRITE
/// completes with the status the syndrome names (its vendor_err the
/// syndrome), or with WR_FLUSH_ERR when the QP's responder failed, and the
/// second with WR_FLUSH_ERR; the owner gets exactly one event, QP_FATAL, or
/// QP_ACCESS_ERR for the responder's errors; the QP is in ERR and refuses
/// posts. When the NIC takes the held doorbells, the WRITEs of the QP in ERR
/// complete nothing more, and no byte of the destination changed. RESET
/// and reconnection bring it back, and a WRITE lands.
pub(crate) fn eq_syndromes(_args: &[String]) {
    let (ctx, events, pd) = open_with_events();
    let (mut src, mut dst, smr, dmr) = src_dst(&ctx, &pd, 64 * 1024, 5);
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let mut emu = emu();
    let (saddr, lkey, raddr, rkey) = (src.addr(), smr.lkey, dst.addr(), dmr.rkey);
    let wr = |id: u64, n: usize| write_wr(id, saddr, n as u32, lkey, raddr, rkey);
    let cases = [
        (
            0x40,
            WC_RETRY_EXC_ERR,
            IB_EVENT_QP_FATAL,
            "retries exceeded",
        ),
        (
            0x7f,
            WC_REM_ACCESS_ERR,
            IB_EVENT_QP_FATAL,
            "NAK remote access",
        ),
        (
            0x7d,
            WC_REM_INV_REQ_ERR,
            IB_EVENT_QP_FATAL,
            "NAK invalid request",
        ),
        (
            0x7c,
            WC_REM_OP_ERR,
            IB_EVENT_QP_FATAL,
            "NAK remote operational",
        ),
        (
            0x7e,
            WC_LOC_PROT_ERR,
            IB_EVENT_QP_FATAL,
            "requester MMU fault",
        ),
        (0x91, WC_LOC_QP_OP_ERR, IB_EVENT_QP_FATAL, "WQE index check"),
        (
            0x43,
            WC_LOC_QP_OP_ERR,
            IB_EVENT_QP_FATAL,
            "doorbell beyond LAST_IDX",
        ),
        (
            0x10,
            WC_WR_FLUSH_ERR,
            IB_EVENT_QP_ACCESS_ERR,
            "responder key invalid",
        ),
        (
            0x7b,
            WC_WR_FLUSH_ERR,
            IB_EVENT_QP_ACCESS_ERR,
            "responder MMU fault",
        ),
    ];
    for (syndrome, status, event, what) in cases {
        emu.command("nic-hold 0 on")
            .unwrap_or_else(|e| fail(format!("nic-hold: {e}")));
        if let Err((e, bad)) = ctx.post_send(&a.qp, &[wr(1, 4096), wr(2, 4096)]) {
            fail(format!("{what}: post: {e} (bad_wr {bad})"));
        }
        check(
            ctx.poll_cq(&a.cq, 4).unwrap_or_default().is_empty(),
            format!("{what}: nothing completes while the NIC holds the doorbells"),
        );
        emu.command(&format!("nic-event 0 {EQE_QP_ERR} {} {syndrome}", a.qp.qpn))
            .unwrap_or_else(|e| fail(format!("nic-event: {e}")));
        let wcs = ctx
            .wait_cq(&a.cq, 2, 10_000)
            .unwrap_or_else(|e| fail(format!("{what}: poll: {e}")));
        let got: Vec<(u64, u32, u32)> = wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.vendor_err))
            .collect();
        let vendor = if status == WC_WR_FLUSH_ERR {
            0
        } else {
            syndrome
        };
        check(
            got == [(1, status, vendor), (2, WC_WR_FLUSH_ERR, 0)],
            format!("{what} ({syndrome:#x}): completions {got:?}"),
        );
        let evs = qp_events(&events, Duration::from_millis(1000));
        check(
            evs == [event],
            format!(
                "{what}: events {:?}, expected {}",
                evs.iter().map(|&t| event_name(t)).collect::<Vec<_>>(),
                event_name(event)
            ),
        );
        let q = ctx
            .query_qp(&a.qp)
            .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
        check(
            q.qp_state == QPS_ERR,
            format!("{what}: QP state {}", q.qp_state),
        );
        post_refused(
            &ctx,
            &a.qp,
            &[wr(3, 64)],
            1,
            &format!("{what}: post in ERR"),
        );
        emu.command("nic-hold 0 off")
            .unwrap_or_else(|e| fail(format!("nic-hold: {e}")));
        std::thread::sleep(Duration::from_millis(300));
        let late = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
        check(
            late.is_empty(),
            format!(
                "{what}: the held WRITEs of the QP in ERR complete nothing more ({} completions)",
                late.len()
            ),
        );
        let landed = dst.bytes().iter().filter(|&&x| x != 0).count();
        check(
            landed == 0,
            format!("{what}: nothing of the failed and flushed WRITEs landed ({landed} of {} bytes changed)", dst.bytes().len()),
        );
        reconnect(&ctx, &a, &b, dmr.rkey);
    }
    dst.bytes().fill(0);
    let wc = write_once(&ctx, &a, wr(30, 8192), "WRITE after the errors");
    check(
        wc.status == WC_SUCCESS && dst.bytes()[..8192] == src.bytes()[..8192],
        "after RESET and reconnection a WRITE lands".into(),
    );
    teardown(&ctx, [a, b], [smr, dmr]);
}
