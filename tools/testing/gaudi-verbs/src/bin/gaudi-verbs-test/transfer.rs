// SPDX-License-Identifier: GPL-2.0

//! Transfers the device is in the middle of when something changes under
//! them: a responder CQ that is full, a region deregistered or a QP
//! destroyed while a WRITE runs, and traffic for a device that goes away.

use super::*;
use crate::ownership::{kernel_log, new_lines};
use gaudi_verbs::{WC_LOC_PROT_ERR, WC_REM_ACCESS_ERR};
use std::time::Instant;

/// The path MTU of these tests (`MTU_4096`): a WRITE of `n` bytes is
/// `n / PACKET` packets.
const PACKET: usize = 4096;

/// The state of `e`'s QP.
fn qp_state(ctx: &Context, e: &End) -> u8 {
    ctx.query_qp(&e.qp)
        .unwrap_or_else(|err| fail(format!("query_qp {}: {err}", e.qp.qpn)))
        .qp_state
}

/// The state of `e`'s QP once it is `want`, or after 5 s.
fn qp_state_within(ctx: &Context, e: &End, want: u8) -> u8 {
    let t = Instant::now();
    let mut s = qp_state(ctx, e);
    while s != want && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        s = qp_state(ctx, e);
    }
    s
}

pub(crate) fn emu_cmd(emu: &mut EmuCtl, cmd: &str) {
    emu.command(cmd)
        .unwrap_or_else(|e| fail(format!("emulator {cmd}: {e}")));
}

/// Whether QP `qpn` has a valid requester and a valid responder context
/// on port 1's NIC (the emulator reads the context tables).
fn device_has_qp(emu: &mut EmuCtl, qpn: u32) -> (bool, bool) {
    emu.nic_qp_valid(1, qpn)
        .unwrap_or_else(|e| fail(format!("QP {qpn}'s contexts on port 1: {e}")))
}

/// Frame delays (ms, the requester's port) of the tries to catch a WRITE
/// in the middle: none first; if the WRITE ended before the step under
/// test, slower (with 200 ms and 256 packets in flight, 64 MiB take about
/// 13 s).
const DELAYS: [u64; 3] = [0, 50, 200];

/// Local ACK timeout of the QPs of `dereg-during-transfer`: 4.096 us *
/// 2^20, about 4.3 s, well above the frame delays, and long enough that a
/// requester whose link is down resends nothing while the test
/// deregisters its source.
const ACK_TIMEOUT: u8 = 20;

/// The process's memory, regions and QP pair of `dereg-during-transfer`.
struct Rig {
    ctx: Context,
    pd: Pd,
    emu: EmuCtl,
    src: Mapping,
    dst: Mapping,
    len: usize,
}

impl Rig {
    /// Register the source (`dst`: the destination) at its address.
    fn reg(&self, dst: bool) -> Mr {
        let (m, access, what) = if dst {
            (
                &self.dst,
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
                "destination",
            )
        } else {
            (&self.src, IB_UVERBS_ACCESS_LOCAL_WRITE, "source")
        };
        self.ctx
            .reg_mr(&self.pd, m.addr(), self.len as u64, m.addr(), access)
            .unwrap_or_else(|e| fail(format!("reg_mr {what}: {e}")))
    }

    /// Both ends through RESET to RTS, `a` writing with `rkey`, `b` taking
    /// WRITEs that carry it.
    fn connect(&self, a: &End, b: &End, rkey: u32) {
        for e in [a, b] {
            let reset = ModifyQp {
                attr_mask: QP_STATE,
                qp_state: QPS_RESET,
                ..Default::default()
            };
            self.ctx
                .modify_qp(&e.qp, &reset)
                .unwrap_or_else(|err| fail(format!("QP {} to RESET: {err}", e.qp.qpn)));
        }
        let mtu = (MTU_4096, ACK_TIMEOUT);
        connect_mtu(
            &self.ctx,
            a,
            b.info.mac,
            gaudi_verbs::port_ipv4(&b.info),
            b.qp.qpn,
            rkey,
            0,
            mtu,
        );
        connect_mtu(
            &self.ctx,
            b,
            a.info.mac,
            gaudi_verbs::port_ipv4(&a.info),
            a.qp.qpn,
            0,
            rkey,
            mtu,
        );
    }

    /// Packets port 2 (emulator port 1) has accepted.
    fn rx(&mut self) -> u64 {
        port_stat(&mut self.emu, 1, "rx")
    }

    fn delay(&mut self, ms: u64) {
        emu_cmd(&mut self.emu, &format!("delay 0 {ms}"));
    }

    /// Post a WRITE of the whole source to the destination.
    fn post_all(&self, a: &End, id: u64, smr: &Mr, dmr: &Mr) {
        let wr = write_wr(
            id,
            self.src.addr(),
            self.len as u32,
            smr.lkey,
            self.dst.addr(),
            dmr.rkey,
        );
        if let Err((e, bad)) = self.ctx.post_send(&a.qp, &[wr]) {
            fail(format!(
                "post a WRITE of {} MiB: {e} (bad_wr {bad})",
                self.len / MIB
            ));
        }
    }

    /// Wait until 32 packets more than `base` reached port 2 (the WRITE is
    /// under way) or `a` has a completion (taken, and returned).
    fn started(&mut self, a: &End, base: u64) -> Option<Wc> {
        let t = Instant::now();
        loop {
            if let Some(wc) = self.ctx.poll_cq(&a.cq, 1).unwrap_or_default().first() {
                return Some(*wc);
            }
            if self.rx() - base >= 32 {
                return None;
            }
            if t.elapsed() > Duration::from_secs(30) {
                fail("the WRITE did not start within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Try `i` (of `DELAYS`): post the WRITE with the requester's frames
    /// delayed by `delay` ms and wait until it is under way. Returns the
    /// packet count it started from, or `None` if it ended first (the pair is
    /// connected again for the next, slower try; the last try fails).
    fn under_way(
        &mut self,
        (a, b): (&End, &End),
        (smr, dmr): (&Mr, &Mr),
        id: u64,
        i: usize,
        delay: u64,
        what: &str,
    ) -> Option<u64> {
        self.delay(delay);
        let base = self.rx();
        self.post_all(a, id, smr, dmr);
        let wc = self.started(a, base)?;
        println!("# {what}: the WRITE ended first ({wc:?})");
        if i + 1 == DELAYS.len() {
            fail(format!("{what}: no try caught the WRITE under way"));
        }
        self.connect(a, b, dmr.rkey);
        None
    }

    /// The completion of `a`'s WRITE `id` within 60 s.
    fn completion(&self, a: &End, id: u64, what: &str) -> Wc {
        let w = self
            .ctx
            .wait_cq(&a.cq, 1, 60_000)
            .unwrap_or_else(|e| fail(format!("{what}: poll: {e}")));
        match w.first() {
            Some(wc) if wc.wr_id == id => *wc,
            Some(wc) => fail(format!("{what}: completion {wc:?}, expected wr_id {id}")),
            None => fail(format!("{what}: no completion within 60 s")),
        }
    }

    /// The emulator's strict-mode audit of cached translations and its DMA
    /// audit are 0.
    fn audits(&mut self, after: &str) {
        let stale = stat(&mut self.emu, "stale_translation");
        let audit = stat(&mut self.emu, "dma_audit");
        let faults = stat(&mut self.emu, "mmu_faults");
        check(
            stale == 0 && audit == 0,
            format!("after {after}: stale_translation {stale}, DMA audit {audit} (MMU faults so far {faults})"),
        );
    }

    /// A WRITE of 1 MiB from `a` lands byte for byte.
    fn lands(&mut self, a: &End, smr: &Mr, dmr: &Mr, after: &str) {
        let wr = write_wr(
            9000,
            self.src.addr(),
            MIB as u32,
            smr.lkey,
            self.dst.addr(),
            dmr.rkey,
        );
        let (src, dst) = (self.src.bytes(), self.dst.bytes());
        poison(&mut dst[..MIB], &src[..MIB]);
        let wc = write_once(&self.ctx, a, wr, &format!("WRITE after {after}"));
        check(
            wc.status == WC_SUCCESS && dst[..MIB] == src[..MIB],
            format!(
                "after {after}: a WRITE of 1 MiB lands (status {})",
                wc.status
            ),
        );
    }
}

/// `dereg-during-transfer [--mib N]`: a QP pair port 1 -> port 2 of the
/// strict emulator (translations kept per message, every use audited), and
/// WRITEs of N MiB (default 64):
///
/// (a) the source region is deregistered while its WRITE is under way:
///     some packets arrived, then port 1's link goes down (so that nothing
///     reads the source while the driver takes it out of the MMU; the
///     device may use a cached translation until MMU_INVALIDATE, which the
///     strict audit would count), the region is deregistered, the link
///     comes back: the resend translates again, and the WRITE completes
///     with LOC_PROT_ERR (or is flushed), never with success; the QP is in
///     ERR;
/// (b) the requester QP is destroyed while its WRITE is under way: the
///     NIC has no valid context of its number on the port any more (its
///     requester's and responder's contexts were valid before);
/// (c) the destination region (open to remote writes in the responder's
///     PD) is deregistered while the WRITE is arriving: REM_ACCESS_ERR at
///     the requester, both QPs in ERR.
///
/// A try whose WRITE ended before the step is repeated with the
/// requester's frames delayed (50, then 200 ms). After each case the
/// emulator counts no stale translation and its DMA audit is 0, and after
/// reconnecting a WRITE lands.
pub(crate) fn dereg_during_transfer(args: &[String]) {
    let len = arg(args, "--mib", Some(64)) as usize * MIB;
    let packets = (len / PACKET) as u64;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut r = Rig {
        ctx,
        pd,
        emu: emu(),
        src: Mapping::new(len),
        dst: Mapping::new(len),
        len,
    };
    fill(r.src.bytes(), 0xd1);
    r.audits("the earlier tests");
    let mut smr = r.reg(false);
    let mut dmr = r.reg(true);
    let mut a = end(&r.ctx, &r.pd, 1, None);
    let b = end(&r.ctx, &r.pd, 2, None);
    r.connect(&a, &b, dmr.rkey);
    r.lands(&a, &smr, &dmr, "connecting");
    let mut id = 100u64;

    // (a) The source.
    for (i, &delay) in DELAYS.iter().enumerate() {
        id += 1;
        let what = format!("(a) source deregistered, frames delayed {delay} ms");
        r.delay(delay);
        let base = r.rx();
        r.post_all(&a, id, &smr, &dmr);
        let mut done = r.started(&a, base);
        if done.is_none() {
            emu_cmd(&mut r.emu, "link 0 down");
            // What was on its way arrives; then nothing moves until the
            // link is back and the ACK timeout resends.
            std::thread::sleep(Duration::from_millis(100 + delay));
            done = r.ctx.poll_cq(&a.cq, 1).unwrap_or_default().first().copied();
        }
        let arrived = r.rx() - base;
        if done.is_some() || arrived >= packets {
            println!(
                "# {what}: the WRITE ended before the link went down ({arrived} of {packets} packets arrived, completion {done:?})"
            );
            if i + 1 == DELAYS.len() {
                fail(format!("{what}: no try caught the WRITE under way"));
            }
            emu_cmd(&mut r.emu, "link 0 up");
            if done.is_none() {
                r.completion(&a, id, &what);
            }
            r.connect(&a, &b, dmr.rkey);
            continue;
        }
        let t = Instant::now();
        r.ctx
            .dereg_mr(smr)
            .unwrap_or_else(|e| fail(format!("{what}: dereg_mr: {e}")));
        let took = t.elapsed();
        emu_cmd(&mut r.emu, "link 0 up");
        let wc = r.completion(&a, id, &what);
        check(
            wc.status == WC_LOC_PROT_ERR || wc.status == WC_WR_FLUSH_ERR,
            format!(
                "{what}: {arrived} of {packets} packets had arrived, deregistered in {took:?}: the WRITE completes with status {} (LOC_PROT_ERR {WC_LOC_PROT_ERR} or WR_FLUSH_ERR {WC_WR_FLUSH_ERR}; not success {WC_SUCCESS})",
                wc.status
            ),
        );
        let s = qp_state_within(&r.ctx, &a, QPS_ERR);
        check(
            s == QPS_ERR,
            format!("{what}: the requester QP is in ERR ({s})"),
        );
        if took > Duration::from_secs(2) {
            println!("# {what}: the deregistration took {took:?}, close to the ACK timeout");
        }
        r.delay(0);
        r.audits("(a)");
        smr = r.reg(false);
        r.connect(&a, &b, dmr.rkey);
        r.lands(&a, &smr, &dmr, "(a)");
        break;
    }

    // (b) The requester QP.
    for (i, &delay) in DELAYS.iter().enumerate() {
        id += 1;
        let what = format!("(b) requester QP destroyed, frames delayed {delay} ms");
        let Some(base) = r.under_way((&a, &b), (&smr, &dmr), id, i, delay, &what) else {
            continue;
        };
        let arrived = r.rx() - base;
        let qpn = a.qp.qpn;
        let before = device_has_qp(&mut r.emu, qpn);
        let t = Instant::now();
        r.ctx
            .destroy_qp(a.qp)
            .unwrap_or_else(|e| fail(format!("{what}: destroy_qp: {e}")));
        let took = t.elapsed();
        let left = r.ctx.poll_cq(&a.cq, 4).unwrap_or_default();
        r.ctx
            .destroy_cq(a.cq)
            .unwrap_or_else(|e| fail(format!("{what}: destroy_cq: {e}")));
        let after = device_has_qp(&mut r.emu, qpn);
        check(
            before == (true, true) && after == (false, false),
            format!(
                "{what}: {arrived} of {packets} packets had arrived; destroyed in {took:?} (completions left on its CQ: {left:?}); the NIC had QP {qpn}'s requester and responder contexts on port 1 before ({before:?}), not after ({after:?})"
            ),
        );
        r.delay(0);
        // Frames still on their way reach the responder before it is
        // reset.
        std::thread::sleep(Duration::from_millis(100 + delay));
        r.audits("(b)");
        a = end(&r.ctx, &r.pd, 1, None);
        r.connect(&a, &b, dmr.rkey);
        r.lands(&a, &smr, &dmr, "(b)");
        break;
    }

    // (c) The destination, open to remote writes at the responder.
    for (i, &delay) in DELAYS.iter().enumerate() {
        id += 1;
        let what = format!("(c) destination deregistered, frames delayed {delay} ms");
        let Some(base) = r.under_way((&a, &b), (&smr, &dmr), id, i, delay, &what) else {
            continue;
        };
        let arrived = r.rx() - base;
        let t = Instant::now();
        r.ctx
            .dereg_mr(dmr)
            .unwrap_or_else(|e| fail(format!("{what}: dereg_mr: {e}")));
        let took = t.elapsed();
        let wc = r.completion(&a, id, &what);
        if wc.status == WC_SUCCESS {
            // Every packet was stored before the region went: the WRITE
            // was not under way any more. Again, slower.
            println!(
                "# {what}: {arrived} of {packets} packets had arrived when the deregistration began ({took:?}), and the WRITE completed"
            );
            if i + 1 == DELAYS.len() {
                fail(format!(
                    "{what}: the WRITE completed with success although {arrived} of {packets} packets had arrived when the destination was deregistered"
                ));
            }
            dmr = r.reg(true);
            r.connect(&a, &b, dmr.rkey);
            continue;
        }
        let (sa, sb) = (
            qp_state_within(&r.ctx, &a, QPS_ERR),
            qp_state_within(&r.ctx, &b, QPS_ERR),
        );
        check(
            wc.status == WC_REM_ACCESS_ERR && sa == QPS_ERR && sb == QPS_ERR,
            format!(
                "{what}: {arrived} of {packets} packets had arrived, deregistered in {took:?}: status {} (REM_ACCESS_ERR is {WC_REM_ACCESS_ERR}); requester QP state {sa}, responder {sb} (ERR is {QPS_ERR})",
                wc.status
            ),
        );
        r.delay(0);
        std::thread::sleep(Duration::from_millis(100 + delay));
        r.audits("(c)");
        dmr = r.reg(true);
        r.connect(&a, &b, dmr.rkey);
        r.lands(&a, &smr, &dmr, "(c)");
        break;
    }
    let Rig { ctx, .. } = &r;
    teardown(ctx, [a, b], [smr, dmr]);
}

/// The end of `write-traffic`: an error, as the test expects once the
/// device is gone.
fn ended(msg: String, writes: u64) -> ! {
    println!("traffic ended: {msg} (after {writes} WRITEs)");
    exit(3)
}

/// `write-traffic [--mib N]`: WRITEs of N MiB (default 16) from port 1 to
/// port 2, two outstanding, until one fails; prints "traffic running"
/// after the first completion. Ends with status 3 and "traffic ended: ..."
/// at the first error (the device went away), 1 if the set-up fails.
pub(crate) fn write_traffic(args: &[String]) {
    let len = arg(args, "--mib", Some(16)) as usize * MIB;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(len);
    let dst = Mapping::new(len);
    fill(src.bytes(), 0x7a);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            len as u64,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            len as u64,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let (a, _b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let (mut posted, mut done) = (0u64, 0u64);
    loop {
        while posted - done < 2 {
            let wr = write_wr(
                posted,
                src.addr(),
                len as u32,
                smr.lkey,
                dst.addr(),
                dmr.rkey,
            );
            if let Err((e, _)) = ctx.post_send(&a.qp, &[wr]) {
                ended(format!("post_send: {e}"), done);
            }
            posted += 1;
        }
        let wcs = match ctx.wait_cq(&a.cq, 1, 60_000) {
            Ok(w) => w,
            Err(e) => ended(format!("poll: {e}"), done),
        };
        if wcs.is_empty() {
            ended("no completion within 60 s".into(), done);
        }
        for wc in wcs {
            if wc.status != WC_SUCCESS {
                ended(format!("completion {wc:?}"), done);
            }
            done += 1;
            if done == 1 {
                println!("traffic running");
                std::io::stdout().flush().ok();
            }
        }
    }
}

/// `cq-no-overflow`: no WRITE with immediate and no responder completion
/// on the NIC: the CQ that could overflow is the port's CQ 1, which every
/// standard QP of the port completes on. A QP's send queue (1024 requests
/// asked for, a ring of 2048 WQEs) is counted against CQ 1's 8192 entries
/// when it enters INIT: four QPs of port 1 fill it and the fifth is refused
/// there with ENOMEM and one log line. The four post 1024 signalled WRITEs
/// each, their queues full, while nobody polls: every completion arrives,
/// in order and successful, every WRITE lands, no CQ_ERR or QP_FATAL event
/// comes. With one QP destroyed, the fifth enters INIT.
pub(crate) fn cq_no_overflow(_args: &[String]) {
    const SLOT: usize = 64;
    const QPS: usize = 4;
    const WRS: usize = 1024;
    let (ctx, events, pd) = open_with_events();
    let mut log = kernel_log();
    let len = QPS * WRS * SLOT;
    let mut src = Mapping::new(WRS * SLOT);
    let mut dst = Mapping::new(len);
    fill(src.bytes(), 0x0d);
    let smr = reg_mapping(&ctx, &pd, &src, IB_UVERBS_ACCESS_LOCAL_WRITE);
    let dmr = reg_mapping(
        &ctx,
        &pd,
        &dst,
        IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
    );
    let mut ends = Vec::new();
    for i in 0..QPS {
        let a = end_sized(&ctx, &pd, 1, (WRS as u32, WRS as u32), None);
        let b = end(&ctx, &pd, 2, None);
        connect(
            &ctx,
            &a,
            b.info.mac,
            gaudi_verbs::port_ipv4(&b.info),
            b.qp.qpn,
            dmr.rkey,
            0,
        );
        connect(
            &ctx,
            &b,
            a.info.mac,
            gaudi_verbs::port_ipv4(&a.info),
            a.qp.qpn,
            0,
            dmr.rkey,
        );
        check(
            a.qp.max_send_wr as usize >= WRS && a.cq.cqe as usize >= WRS,
            format!(
                "QP {i} of port 1: {} send WRs, a CQ of {}",
                a.qp.max_send_wr, a.cq.cqe
            ),
        );
        ends.push((a, b));
    }
    // The fifth QP of port 1: refused at INIT, CQ 1 is fully counted.
    let fifth = end_sized(&ctx, &pd, 1, (WRS as u32, WRS as u32), None);
    new_lines(&mut log, "send queues are full");
    expect_errno(
        "a fifth QP of 1024 requests on port 1 to INIT",
        ctx.modify_qp(&fifth.qp, &init_attrs(1)),
        libc::ENOMEM,
    );
    let (_, n) = new_lines(&mut log, "send queues are full");
    check(n == 1, format!("the refusal logged {n} line(s)"));

    poison(dst.bytes(), &src.bytes().repeat(QPS));
    for (i, (a, _)) in ends.iter().enumerate() {
        let wrs: Vec<SendWr> = (0..WRS)
            .map(|j| {
                let off = (j * SLOT) as u64;
                let to = dst.addr() + ((i * WRS + j) * SLOT) as u64;
                write_wr(
                    j as u64,
                    src.addr() + off,
                    SLOT as u32,
                    smr.lkey,
                    to,
                    dmr.rkey,
                )
            })
            .collect();
        // In batches: a command's input is at most 64 KiB.
        for (k, batch) in wrs.chunks(256).enumerate() {
            if let Err((e, bad)) = ctx.post_send(&a.qp, batch) {
                fail(format!(
                    "QP {i}: posting WRITEs {} on: {e} (bad_wr {bad})",
                    k * 256
                ));
            }
        }
    }
    // Nobody polls until every QP's last WRITE has landed.
    let src_bytes = src.bytes().to_vec();
    let last = &src_bytes[(WRS - 1) * SLOT..];
    let t = Instant::now();
    let all_landed = |dst: &mut Mapping| {
        (0..QPS).all(|i| {
            let at = ((i + 1) * WRS - 1) * SLOT;
            dst.bytes()[at..at + SLOT] == *last
        })
    };
    while !all_landed(&mut dst) && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, (a, _)) in ends.iter().enumerate() {
        let wcs = ctx
            .wait_cq(&a.cq, WRS, 120_000)
            .unwrap_or_else(|e| fail(format!("QP {i}: poll: {e}")));
        let in_order = wcs
            .iter()
            .enumerate()
            .all(|(j, w)| w.wr_id == j as u64 && w.status == WC_SUCCESS);
        check(
            wcs.len() == WRS && in_order,
            format!(
                "QP {i}: {} of {WRS} completions, in order and successful: {in_order}",
                wcs.len()
            ),
        );
    }
    check(
        dst.bytes()[..] == src_bytes.repeat(QPS)[..],
        format!("all {} WRITEs landed byte-exact", QPS * WRS),
    );
    let ev = events
        .next(Duration::ZERO)
        .unwrap_or_else(|e| fail(format!("events: {e}")));
    check(
        ev.is_none(),
        format!("no event: {:?}", ev.map(|e| event_name(e.event_type))),
    );

    // One QP gone, the fifth enters INIT.
    let (a, b) = ends.pop().unwrap_or_else(|| fail("no QPs".into()));
    destroy_ends(&ctx, [a, b]);
    ctx.modify_qp(&fifth.qp, &init_attrs(1))
        .unwrap_or_else(|e| fail(format!("the fifth QP to INIT after one was destroyed: {e}")));
    check(
        true,
        "the fifth QP entered INIT once one was destroyed".into(),
    );
    destroy_ends(&ctx, [fifth]);
    for (a, b) in ends {
        destroy_ends(&ctx, [a, b]);
    }
    teardown(&ctx, [], [smr, dmr]);
}

/// `stale-wqe-after-dereg`: a WRITE posted, held back (the NIC takes no
/// doorbell: `nic-hold`, a NIC busy elsewhere or a slow link), its source
/// region deregistered and another context registering memory of its own
/// at once. When the NIC takes the WRITE, the source is gone from the
/// poster's ASID: the WRITE completes in error (a standard verbs QP: a
/// work completion in error; a QP set's: the QP in ERR, no CQE), the device
/// MMU counts one fault, nothing lands at the destination (which the other
/// context's bytes would have reached had the device read them), and the
/// other context's memory keeps its bytes. A standard verbs QP's PD
/// registering at once gets other device VAs than the held WRITE's, which
/// are reused once it retired. Both paths, each from a fresh QP.
pub(crate) fn stale_wqe_after_dereg(_args: &[String]) {
    let len = 64 * 1024;
    let mut emu = emu();
    for dv in [false, true] {
        let what = if dv { "QP set" } else { "standard verbs QP" };
        let ctx = open_ctx();
        let pd = ctx
            .alloc_pd()
            .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
        let (src, mut dst, smr, dmr) = src_dst(&ctx, &pd, len, 11);
        dst.bytes().fill(0);
        let (saddr, lkey, raddr, rkey) = (src.addr(), smr.lkey, dst.addr(), dmr.rkey);
        let src_va = crate::dv::mr_info(&ctx, &smr, "source").mmu_va;
        let mut set = None;
        let mut ends = None;
        if dv {
            set = Some(crate::dv::dv_loopback(&ctx, 1, 2, rkey));
        } else {
            ends = Some(loopback_pair(&ctx, &pd, 1, 2, rkey));
        }
        emu.command("nic-hold 0 on")
            .unwrap_or_else(|e| fail(format!("nic-hold: {e}")));
        if let Some(s) = set.as_mut() {
            s.qp(1).post_write(src_va, raddr, len as u32, true, None);
        } else if let Some((a, _)) = ends.as_ref() {
            if let Err((e, bad)) =
                ctx.post_send(&a.qp, &[write_wr(1, saddr, len as u32, lkey, raddr, rkey)])
            {
                fail(format!("{what}: post: {e} (bad_wr {bad})"));
            }
        }
        ctx.dereg_mr(smr)
            .unwrap_or_else(|e| fail(format!("{what}: dereg_mr with the WRITE held: {e}")));
        // The same protection domain registers memory at once: the device VAs the held WRITE
        // names are not reused while it may still execute (the kernel counts the WQEs it
        // writes; a QP set's are user space's).
        let mut mine = None;
        if !dv {
            let mut m = Mapping::new(len);
            fill(m.bytes(), 13);
            let mr = ctx
                .reg_mr(
                    &pd,
                    m.addr(),
                    len as u64,
                    m.addr(),
                    IB_UVERBS_ACCESS_LOCAL_WRITE,
                )
                .unwrap_or_else(|e| fail(format!("{what}: reg_mr at once: {e}")));
            let va = crate::dv::mr_info(&ctx, &mr, "new source").mmu_va;
            check(
                va != src_va,
                format!("{what}: a region registered in the same PD at once is at {va:#x}, not at the held WRITE's {src_va:#x}"),
            );
            mine = Some((m, mr));
        }
        // Another context registers memory at once.
        let other = open_ctx();
        let opd = other
            .alloc_pd()
            .unwrap_or_else(|e| fail(format!("other context: alloc_pd: {e}")));
        let (mut theirs, _, tmr, tdmr) = src_dst(&other, &opd, len, 12);
        let theirs_copy = theirs.bytes().to_vec();
        let faults0 = stat(&mut emu, "mmu_faults");
        emu.command("nic-hold 0 off")
            .unwrap_or_else(|e| fail(format!("nic-hold: {e}")));
        if let Some(s) = set.as_mut() {
            let state = crate::dv::wait_set_err(&ctx, s.handle, Duration::from_secs(5));
            let cqe = s.qp(1).poll_spin(1000);
            check(
                state == u32::from(QPS_ERR) && cqe.is_none(),
                format!("{what}: the held WRITE from the deregistered region: QP state {state} (ERR is 6), CQE {cqe:?}"),
            );
        } else if let Some((a, _)) = ends.as_ref() {
            let wcs = ctx
                .wait_cq(&a.cq, 1, 10_000)
                .unwrap_or_else(|e| fail(format!("{what}: poll: {e}")));
            let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
            check(
                got.len() == 1 && got[0].0 == 1 && got[0].1 != WC_SUCCESS,
                format!("{what}: the held WRITE from the deregistered region completes in error: {got:?}"),
            );
        }
        let faults = stat(&mut emu, "mmu_faults") - faults0;
        check(
            faults == 1,
            format!("{what}: device MMU faults counted: {faults} (expected 1)"),
        );
        check(
            dst.bytes().iter().all(|&b| b == 0),
            format!("{what}: nothing landed at the destination"),
        );
        check(
            theirs.bytes()[..] == theirs_copy[..],
            format!("{what}: the other context's memory keeps its bytes"),
        );
        if let Some((_m, mr)) = mine {
            // The WRITE retired in error: its device VAs are free again, the lowest.
            ctx.dereg_mr(mr)
                .unwrap_or_else(|e| fail(format!("{what}: dereg_mr: {e}")));
            let again = Mapping::new(len);
            let mr = ctx
                .reg_mr(
                    &pd,
                    again.addr(),
                    len as u64,
                    again.addr(),
                    IB_UVERBS_ACCESS_LOCAL_WRITE,
                )
                .unwrap_or_else(|e| fail(format!("{what}: reg_mr after the WRITE retired: {e}")));
            let va = crate::dv::mr_info(&ctx, &mr, "after").mmu_va;
            check(
                va == src_va,
                format!("{what}: once the held WRITE retired, its device VAs {src_va:#x} are reused (a new region at {va:#x})"),
            );
            ctx.dereg_mr(mr)
                .unwrap_or_else(|e| fail(format!("{what}: dereg_mr: {e}")));
        }
        if let Some(s) = set {
            ctx.destroy_qp_set(s)
                .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
            teardown(&ctx, [], [dmr]);
        } else if let Some((a, b)) = ends {
            teardown(&ctx, [a, b], [dmr]);
        }
        teardown(&other, [], [tmr, tdmr]);
    }
    println!("PASS");
}
