// SPDX-License-Identifier: GPL-2.0

//! Device-side errors through the standard verbs: every error status the
//! device can report, a CQ ring write fault, an injected QP error.

use super::*;
use gaudi_verbs::IB_EVENT_QP_FATAL;

// enum ib_wc_status
const WC_LOC_LEN_ERR: u32 = 1;
const WC_LOC_QP_OP_ERR: u32 = 2;
const WC_REM_INV_REQ_ERR: u32 = 9;
const WC_REM_OP_ERR: u32 = 11;

/// Device CQE status codes (device-model-1.rst, Completions).
const ST_LOC_LEN_ERR: u32 = 1;
const ST_LOC_QP_OP_ERR: u32 = 2;
const ST_REM_OP_ERR: u32 = 6;
const ST_REM_INV_REQ_ERR: u32 = 8;

/// The QP_FATAL events in `events` within `wait`, by QP handle.
fn qp_fatal_events(events: &AsyncEvents, wait: Duration) -> Vec<u64> {
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    while let Ok(Some(e)) = events.next(wait.saturating_sub(t.elapsed())) {
        match e.event_type {
            IB_EVENT_QP_FATAL => got.push(e.element),
            // The link flap of the injected QP error's case.
            IB_EVENT_PORT_ERR | IB_EVENT_PORT_ACTIVE => {}
            t => fail(format!("unexpected async event {}", event_name(t))),
        }
        if t.elapsed() >= wait {
            break;
        }
    }
    got
}

/// `device-errors`: for each error status the device reports on a
/// requester (LOC_LEN_ERR and LOC_QP_OP_ERR injected on a WQE,
/// REM_OP_ERR and REM_INV_REQ_ERR answered by the responder's NAK), two
/// signalled WRITEs: the first completes with the matching IB status and
/// the device's code in vendor_err, the second with WR_FLUSH_ERR; QP_FATAL
/// reaches the async event file for each QP the device moved to ERR
/// (requester, and responder for the NAKs), the QP reads back ERR, posting
/// fails with EINVAL, nothing landed; through RESET the pair works again.
/// Then an injected QP error (QP_FATAL, the outstanding WRITE flushed), and
/// a CQ ring write fault (logged by the driver; the QP and CQ can be
/// destroyed, new ones work). Model 2.0: the NIC reports errors as QP_ERR
/// syndromes, not CQE statuses, and writes its CQs physically: the test is
/// `eq-syndromes`, each class of syndrome.
pub(crate) fn device_errors(args: &[String]) {
    if model2() {
        // The NIC reports its errors as QP_ERR syndromes, no CQE status.
        return crate::syndromes::eq_syndromes(args);
    }
    let (ctx, events, pd) = open_with_events();
    let Regions {
        mut src,
        mut dst,
        smr,
        dmr,
        iova,
        diova,
    } = Regions::new(
        &ctx,
        &pd,
        8192,
        21,
        (0x5700_0000_0000u64, 0x5800_0000_0000u64),
    );
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let mut emu = emu();
    let wrs = |id: u64| {
        [
            write_wr(id, iova, 4096, smr.lkey, diova, dmr.rkey),
            write_wr(id + 1, iova + 4096, 4096, smr.lkey, diova + 4096, dmr.rkey),
        ]
    };
    let cases = [
        (
            "LOC_LEN_ERR",
            "fail-wqe 0 1 1",
            ST_LOC_LEN_ERR,
            WC_LOC_LEN_ERR,
            false,
        ),
        (
            "LOC_QP_OP_ERR",
            "fail-wqe 0 2 1",
            ST_LOC_QP_OP_ERR,
            WC_LOC_QP_OP_ERR,
            false,
        ),
        (
            "REM_OP_ERR",
            "nak 1 op 1",
            ST_REM_OP_ERR,
            WC_REM_OP_ERR,
            true,
        ),
        (
            "REM_INV_REQ_ERR",
            "nak 1 invalid 1",
            ST_REM_INV_REQ_ERR,
            WC_REM_INV_REQ_ERR,
            true,
        ),
    ];
    for (k, (name, inject, code, want, responder_too)) in cases.into_iter().enumerate() {
        poison(dst.bytes(), src.bytes());
        transfer::emu_cmd(&mut emu, inject);
        let id = 100 * k as u64;
        if let Err((e, bad)) = ctx.post_send(&a.qp, &wrs(id)) {
            fail(format!("{name}: post: {e} (bad_wr {bad})"));
        }
        let wcs = ctx
            .wait_cq(&a.cq, 2, 30_000)
            .unwrap_or_else(|e| fail(format!("{name}: poll: {e}")));
        check(
            wcs.len() == 2
                && wcs[0].wr_id == id
                && wcs[0].status == want
                && wcs[0].vendor_err == code
                && wcs[1].wr_id == id + 1
                && wcs[1].status == WC_WR_FLUSH_ERR,
            format!(
                "{name}: first WRITE status {want} (vendor_err {code}), second flushed: {wcs:?}"
            ),
        );
        let fatal = qp_fatal_events(&events, Duration::from_millis(1500));
        let expect = if responder_too { 2 } else { 1 };
        check(
            fatal.len() == expect,
            format!("{name}: {} QP_FATAL events, expected {expect}", fatal.len()),
        );
        let q = ctx
            .query_qp(&a.qp)
            .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
        check(
            q.qp_state == QPS_ERR,
            format!("{name}: QP in state {}", q.qp_state),
        );
        match ctx.post_send(&a.qp, &wrs(id + 10)[..1]) {
            Ok(()) => fail(format!("{name}: posted on a QP in ERR")),
            Err((e, _)) => check(
                errno(&e) == libc::EINVAL,
                format!("{name}: post_send in ERR: errno {}", errno(&e)),
            ),
        }
        check(
            dst.bytes()[4096..] != src.bytes()[4096..],
            format!("{name}: the flushed WRITE did not land"),
        );
        reconnect(&ctx, &a, &b, dmr.rkey);
        dst.bytes().fill(0);
        let wc = write_once(
            &ctx,
            &a,
            write_wr(id + 50, iova, 8192, smr.lkey, diova, dmr.rkey),
            &format!("WRITE after {name}"),
        );
        check(
            wc.status == WC_SUCCESS && dst.bytes()[..] == src.bytes()[..],
            format!("{name}: after RESET the pair works again"),
        );
    }

    // An injected QP error with a WRITE outstanding: the link is down, so
    // the WRITE waits for its acknowledgement until the error flushes it.
    transfer::emu_cmd(&mut emu, "link 1 down");
    if let Err((e, bad)) = ctx.post_send(&a.qp, &wrs(900)[..1]) {
        fail(format!("post before the QP error: {e} (bad_wr {bad})"));
    }
    std::thread::sleep(Duration::from_millis(300));
    transfer::emu_cmd(&mut emu, &format!("qp-error 0 {}", a.qp.qpn));
    let wcs = ctx
        .wait_cq(&a.cq, 1, 30_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    let fatal = qp_fatal_events(&events, Duration::from_millis(1500));
    check(
        wcs.len() == 1
            && wcs[0].wr_id == 900
            && wcs[0].status == WC_WR_FLUSH_ERR
            && fatal.len() == 1,
        format!(
            "injected QP error: outstanding WRITE flushed ({:?}), {} QP_FATAL",
            wcs.first(),
            fatal.len()
        ),
    );
    transfer::emu_cmd(&mut emu, "link 1 up");
    // Port events of the link flap are not QP events: drain them.
    while let Ok(Some(_)) = events.next(Duration::from_millis(500)) {}
    reconnect(&ctx, &a, &b, dmr.rkey);

    // A CQ ring write fault: the device stops writing the CQ and reports
    // the fault; the driver logs it. The WRITE still lands (the fault is
    // the completion's), the QP and CQ are destroyed, new ones work.
    dst.bytes().fill(0);
    transfer::emu_cmd(&mut emu, &format!("cq-fault 0 {}", a.qp.qpn));
    if let Err((e, bad)) = ctx.post_send(&a.qp, &wrs(950)[..1]) {
        fail(format!("post before the CQ fault: {e} (bad_wr {bad})"));
    }
    let t = std::time::Instant::now();
    while dst.bytes()[..4096] != src.bytes()[..4096] && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    let wcs = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        dst.bytes()[..4096] == src.bytes()[..4096] && wcs.is_empty(),
        format!(
            "CQ ring write fault: the WRITE landed, {} completions",
            wcs.len()
        ),
    );
    teardown(&ctx, [a, b], []);
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    dst.bytes().fill(0);
    let wc = write_once(
        &ctx,
        &a,
        write_wr(990, iova, 8192, smr.lkey, diova, dmr.rkey),
        "WRITE on a new QP and CQ",
    );
    check(
        wc.status == WC_SUCCESS && dst.bytes()[..] == src.bytes()[..],
        "after the CQ fault a new QP and CQ work".into(),
    );
    teardown(&ctx, [a, b], [smr, dmr]);
}
