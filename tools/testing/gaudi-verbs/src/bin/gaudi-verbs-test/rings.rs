// SPDX-License-Identifier: GPL-2.0

//! Rings at their limits: wraparound of the send queue, CQ and event queue
//! (16-bit indexes past 65535), a full send queue, an overflowing CQ.

use super::*;
use gaudi_verbs::IB_EVENT_CQ_ERR;

/// Port 1 writing to port 2 with the given sizes; returns (requester,
/// responder).
fn sized_pair(
    ctx: &Context,
    pd: &Pd,
    sq: u32,
    cqe: u32,
    channel: Option<&CompChannel>,
    rkey: u32,
) -> (End, End) {
    let a = end_sized(ctx, pd, 1, (sq, cqe), channel);
    let b = end_sized(ctx, pd, 2, (2, 16), None);
    connect(
        ctx,
        &a,
        b.info.mac,
        gaudi_verbs::port_ipv4(&b.info),
        b.qp.qpn,
        rkey,
        0,
    );
    connect(
        ctx,
        &b,
        a.info.mac,
        gaudi_verbs::port_ipv4(&a.info),
        a.qp.qpn,
        0,
        rkey,
    );
    (a, b)
}

/// Slots of 8 bytes in the destination: WRITE `i` puts `i` into slot
/// `i % SLOTS`, so a WRITE that did not land leaves the value of an older
/// one there.
const SLOTS: u64 = 4096;

/// `rings-wrap [--writes N] [--events E]`: N (default 70,000) signalled
/// 8-byte WRITEs through a send queue and a CQ of 16 entries each, so both
/// wrap thousands of times and their 16-bit indexes pass 65535; the
/// first E (default 1,100) batches are waited for through the completion
/// channel, a completion event each, so the event queue (256 entries)
/// wraps more than 4 times. Every completion is checked (order, status,
/// length) and every WRITE's 8 bytes. Then the same through a QP set, its
/// send queue and CQ mapped and driven by the dv library (its CQEs carry
/// the WQE's producer index as tag, no length).
pub(crate) fn rings_wrap(args: &[String]) {
    let n = arg(args, "--writes", Some(70_000));
    let events = arg(args, "--events", Some(1_100));
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(4096);
    let mut dst = Mapping::new((SLOTS * 8) as usize);
    let (iova, diova) = (0x5100_0000_0000u64, 0x5200_0000_0000u64);
    let smr = ctx
        .reg_mr(&pd, src.addr(), 4096, iova, IB_UVERBS_ACCESS_LOCAL_WRITE)
        .unwrap_or_else(|e| fail(format!("reg_mr source: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            SLOTS * 8,
            diova,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
    let ch = ctx
        .create_comp_channel()
        .unwrap_or_else(|e| fail(format!("completion channel: {e}")));
    let (a, b) = sized_pair(&ctx, &pd, 16, 16, Some(&ch), dmr.rkey);
    check(
        a.qp.max_send_wr == 16 && a.cq.cqe == 16,
        format!(
            "send queue of {} WRs, CQ of {} entries",
            a.qp.max_send_wr, a.cq.cqe
        ),
    );
    const BATCH: u64 = 8;
    let t = std::time::Instant::now();
    let mut got_events = 0u64;
    let mut i = 0u64;
    while i < n {
        let k = BATCH.min(n - i);
        let armed = i / BATCH < events;
        for j in 0..k {
            let v = i + j;
            src.bytes()[(j * 8) as usize..(j * 8 + 8) as usize].copy_from_slice(&v.to_le_bytes());
        }
        if armed {
            ctx.req_notify_cq(&a.cq)
                .unwrap_or_else(|e| fail(format!("arm CQ at WRITE {i}: {e}")));
        }
        let list: Vec<SendWr> = (0..k)
            .map(|j| {
                let v = i + j;
                write_wr(
                    v,
                    iova + j * 8,
                    8,
                    smr.lkey,
                    diova + (v % SLOTS) * 8,
                    dmr.rkey,
                )
            })
            .collect();
        if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
            fail(format!("post WRITEs {i}..{}: {e} (bad_wr {bad})", i + k));
        }
        if armed {
            match ch.next(30_000) {
                Ok(Some(_)) => got_events += 1,
                r => fail(format!("WRITE {i}: no completion event ({r:?})")),
            }
        }
        let wcs = ctx
            .wait_cq(&a.cq, k as usize, 30_000)
            .unwrap_or_else(|e| fail(format!("poll at WRITE {i}: {e}")));
        for (j, wc) in wcs.iter().enumerate() {
            let v = i + j as u64;
            if wc.wr_id != v || wc.status != WC_SUCCESS || wc.byte_len != 8 {
                fail(format!("WRITE {v}: completion {wc:?}"));
            }
        }
        if wcs.len() as u64 != k {
            fail(format!("WRITEs {i}..{}: {} completions", i + k, wcs.len()));
        }
        for j in 0..k {
            let v = i + j;
            let s = ((v % SLOTS) * 8) as usize;
            let got = u64::from_le_bytes(dst.bytes()[s..s + 8].try_into().unwrap());
            if got != v {
                fail(format!("WRITE {v}: slot {} holds {got}", v % SLOTS));
            }
        }
        i += k;
    }
    // Nothing more: no late or duplicate completion.
    let late = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        late.is_empty() && got_events == events.min(n.div_ceil(BATCH)),
        format!(
            "{n} WRITEs through a 16-entry send queue and CQ ({} passes, 16-bit indexes wrapped {} times) in {:?}: every completion in order, every WRITE landed; {got_events} completion events ({} passes of the 256-entry event queue)",
            n / 16,
            n >> 16,
            t.elapsed(),
            got_events / 256
        ),
    );
    let q = ctx
        .query_qp(&a.qp)
        .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
    check(
        q.qp_state == QPS_RTS && q.sq_psn == (0x100 + n as u32) & 0xff_ffff,
        format!("QP in RTS, next PSN {:#x} after {n} WRITEs", q.sq_psn),
    );
    teardown(&ctx, [a, b], [dmr]);
    // The same through a QP set: the dv library's producer and consumer
    // indexes and VALID bits, against the device's. A CQE carries no length;
    // its tag is the WQE's producer index, whose low 16 bits are the index
    // checked.
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            SLOTS * 8,
            diova,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
    dst.bytes().fill(0xff);
    let mut set = ctx
        .create_qp_set(0b11, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("create QP set: {e}")));
    dv::connect_pair(&ctx, &mut set, 1, 2, dmr.rkey);
    let local = dv::mr_info(&ctx, &smr, "source").device_va(iova);
    let t = std::time::Instant::now();
    let qp = set.qp(1);
    let mut i = 0u64;
    while i < n {
        let k = BATCH.min(n - i);
        for j in 0..k {
            let v = i + j;
            src.bytes()[(j * 8) as usize..(j * 8 + 8) as usize].copy_from_slice(&v.to_le_bytes());
        }
        let wqes: Vec<_> = (0..k)
            .map(|j| {
                let v = i + j;
                (local + j * 8, diova + (v % SLOTS) * 8, 8u32, true, None)
            })
            .collect();
        qp.post_wqes(&wqes);
        for j in 0..k {
            let v = i + j;
            match qp.poll_spin(2_000_000_000) {
                Some(c) if c.status == gaudi_verbs::dv::CQE_SUCCESS && c.wqe_index == v as u16 => {}
                c => fail(format!("QP set WRITE {v}: CQE {c:?}")),
            }
        }
        for j in 0..k {
            let v = i + j;
            let s = ((v % SLOTS) * 8) as usize;
            let got = u64::from_le_bytes(dst.bytes()[s..s + 8].try_into().unwrap());
            if got != v {
                fail(format!("QP set WRITE {v}: slot {} holds {got}", v % SLOTS));
            }
        }
        i += k;
    }
    check(
        qp.poll().is_none() && qp.pi == n as u32 && qp.ci == n as u32,
        format!(
            "QP set: {n} WRITEs through a 16-entry send queue and CQ mapped in user space in {:?}: every CQE in order (WQE index wrapped at 65536), every WRITE landed",
            t.elapsed()
        ),
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    ctx.dereg_mr(dmr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    ctx.dereg_mr(smr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    check(
        stat(&mut emu(), "dma_audit") == 0,
        "emulator DMA audit 0".into(),
    );
    println!("PASS");
}

/// `sq-full`: a send queue of 16 holds 16 requests, signalled or not, until
/// a completion retires them: the 17th post fails with ENOMEM and posts
/// nothing; once the completion is polled, posting works again; a list
/// longer than the free room posts the requests that fit and names the
/// first that did not (ENOMEM). Every posted WRITE lands, no refused one
/// does.
pub(crate) fn sq_full(_args: &[String]) {
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
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
        4096,
        11,
        (0x5300_0000_0000u64, 0x5400_0000_0000u64),
    );
    let (a, b) = sized_pair(&ctx, &pd, 16, 64, None, dmr.rkey);
    let size = u64::from(a.qp.max_send_wr);
    check(size == 16, format!("send queue of {size} WRs"));
    // WRITE k copies source bytes [16k, 16k + 16) to the same place.
    let wr = |k: u64, signaled: bool| {
        let mut w = write_wr(k, iova + k * 16, 16, smr.lkey, diova + k * 16, dmr.rkey);
        if !signaled {
            w.send_flags = 0;
        }
        w
    };
    let landed = |dst: &mut Mapping, src: &mut Mapping, k: u64| {
        let r = (k * 16) as usize..(k * 16 + 16) as usize;
        dst.bytes()[r.clone()] == src.bytes()[r]
    };

    poison(dst.bytes(), src.bytes());
    let list: Vec<SendWr> = (0..size).map(|k| wr(k, k == size - 1)).collect();
    if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
        fail(format!(
            "post {size} WRITEs ({} unsignalled): {e} (bad_wr {bad})",
            size - 1
        ));
    }
    match ctx.post_send(&a.qp, &[wr(size, true)]) {
        Ok(()) => fail(format!("WRITE {}: posted into a full send queue", size + 1)),
        Err((e, bad)) => check(
            errno(&e) == libc::ENOMEM && bad == 1,
            format!(
                "WRITE {} into the full send queue: errno {} ({e}), bad_wr {bad}",
                size + 1,
                errno(&e)
            ),
        ),
    }
    let wcs = ctx
        .wait_cq(&a.cq, 1, 30_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    std::thread::sleep(Duration::from_millis(200));
    let more = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        wcs.len() == 1
            && wcs[0].wr_id == size - 1
            && wcs[0].status == WC_SUCCESS
            && more.is_empty()
            && (0..size).all(|k| landed(&mut dst, &mut src, k)),
        format!(
            "one completion for the {size} (wr_id {:?}), nothing for the refused one; all {size} landed",
            wcs.first().map(|w| w.wr_id)
        ),
    );

    // The completion retired all 16: a list of 19 posts 16, refuses the
    // 17th with ENOMEM.
    poison(dst.bytes(), src.bytes());
    let list: Vec<SendWr> = (0..size + 3).map(|k| wr(k % 256, true)).collect();
    match ctx.post_send(&a.qp, &list) {
        Ok(()) => fail(format!(
            "a list of {} posted into {size} free slots",
            size + 3
        )),
        Err((e, bad)) => check(
            errno(&e) == libc::ENOMEM && u64::from(bad) == size + 1,
            format!(
                "a list of {}: errno {} ({e}), bad_wr {bad} (the first that did not fit)",
                size + 3,
                errno(&e)
            ),
        ),
    }
    let wcs = ctx
        .wait_cq(&a.cq, size as usize, 30_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    std::thread::sleep(Duration::from_millis(200));
    let more = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        wcs.len() as u64 == size
            && wcs
                .iter()
                .enumerate()
                .all(|(k, w)| w.wr_id == k as u64 && w.status == WC_SUCCESS)
            && more.is_empty()
            && (0..size).all(|k| landed(&mut dst, &mut src, k))
            && (size..size + 3).all(|k| !landed(&mut dst, &mut src, k)),
        format!(
            "{} completions in order for the {size} posted, none for the 3 refused; the posted landed, the refused did not",
            wcs.len()
        ),
    );
    let wc = write_once(&ctx, &a, wr(20, true), "WRITE after the full queue");
    check(
        wc.status == WC_SUCCESS && landed(&mut dst, &mut src, 20),
        "the send queue works on".into(),
    );
    teardown(&ctx, [a, b], [smr, dmr]);
}

/// `cq-overflow`: a CQ of 16 entries under a send queue of 64 whose
/// owner does not poll: the device stops at the 16th completion and
/// reports the overflow; the owner gets IB_EVENT_CQ_ERR (once) and the
/// driver's log line, the CQ holds the 16 completions it had room for, in
/// order. Recovery as documented: the QP and CQ are destroyed, new ones
/// work.
pub(crate) fn cq_overflow(_args: &[String]) {
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
        4096,
        12,
        (0x5500_0000_0000u64, 0x5600_0000_0000u64),
    );
    let (a, b) = sized_pair(&ctx, &pd, 64, 16, None, dmr.rkey);
    check(
        a.cq.cqe == 16 && a.qp.max_send_wr == 64,
        format!(
            "CQ of {} under a send queue of {}",
            a.cq.cqe, a.qp.max_send_wr
        ),
    );
    let list: Vec<SendWr> = (0..40u64)
        .map(|k| write_wr(k, iova + k * 64, 64, smr.lkey, diova + k * 64, dmr.rkey))
        .collect();
    if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
        fail(format!("post 40 WRITEs: {e} (bad_wr {bad})"));
    }
    let ev = events.next(Duration::from_secs(30));
    check(
        matches!(ev, Ok(Some(ref e)) if e.event_type == IB_EVENT_CQ_ERR && e.element == a.cq.user_handle),
        format!("IB_EVENT_CQ_ERR for the CQ: {ev:?}"),
    );
    let wcs = ctx
        .poll_cq(&a.cq, 64)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    check(
        wcs.len() == 16
            && wcs
                .iter()
                .enumerate()
                .all(|(k, w)| w.wr_id == k as u64 && w.status == WC_SUCCESS),
        format!(
            "the CQ holds the {} completions it had room for, in order",
            wcs.len()
        ),
    );
    let again = events.next(Duration::from_millis(1000));
    check(
        matches!(again, Ok(None)),
        format!("one CQ_ERR only: {again:?}"),
    );
    let (a2, b2) = sized_pair(&ctx, &pd, 16, 16, None, dmr.rkey);
    ctx.destroy_qp(a.qp)
        .unwrap_or_else(|e| fail(format!("destroy the QP of the overflowed CQ: {e}")));
    ctx.destroy_cq(a.cq)
        .unwrap_or_else(|e| fail(format!("destroy the overflowed CQ: {e}")));
    ctx.destroy_qp(b.qp)
        .unwrap_or_else(|e| fail(format!("destroy QP: {e}")));
    ctx.destroy_cq(b.cq)
        .unwrap_or_else(|e| fail(format!("destroy CQ: {e}")));
    dst.bytes().fill(0);
    let wc = write_once(
        &ctx,
        &a2,
        write_wr(99, iova, 4096, smr.lkey, diova, dmr.rkey),
        "WRITE on a new QP and CQ",
    );
    check(
        wc.status == WC_SUCCESS && dst.bytes()[..] == src.bytes()[..],
        "recovery: a new QP and CQ work, the WRITE landed".into(),
    );
    teardown(&ctx, [a2, b2], [smr, dmr]);
}
