// SPDX-License-Identifier: GPL-2.0

//! The device as an adversary: malformed CQEs and event queue entries,
//! garbage from the wire, bogus register values (the emulator's fuzz
//! commands). The driver drops what is wrong, keeps its log bounded, and
//! goes on working.

use super::*;
use gaudi_verbs::KernelLog;

/// The number after `key` in an emulator reply line.
fn field(reply: &[String], key: &str) -> u64 {
    reply
        .iter()
        .flat_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.windows(2)
                .filter(|p| p[0] == key)
                .filter_map(|p| p[1].parse().ok())
                .collect::<Vec<u64>>()
        })
        .next()
        .unwrap_or_else(|| fail(format!("no {key} in {reply:?}")))
}

fn command(emu: &mut EmuCtl, cmd: &str) -> Vec<String> {
    let r = emu
        .command(cmd)
        .unwrap_or_else(|e| fail(format!("emulator {cmd}: {e}")));
    println!("# {cmd}: {}", r.join(" / "));
    r
}

/// `fuzz-device [--seed S]`: malformed CQEs on a QP's CQ (none reaches
/// the consumer, a real WRITE completes after them), malformed event queue
/// entries (nothing lost, the queue stays in step: a link flap still
/// arrives), garbage frames on the responder's link (counted and dropped
/// by the device, the DMA audit stays 0, the pair works after a reset),
/// bogus command statuses (calls fail, nothing hangs). The kernel log
/// grows by a bounded number of lines.
///
/// Model 2.0 has no per-QP CQ rings, no commands and no 1.5 event queue:
/// there the adversary is the NIC's port queues (`fuzz_device2`).
pub(crate) fn fuzz_device(args: &[String]) {
    let seed = arg(args, "--seed", Some(1));
    if model2() {
        return fuzz_device2(seed);
    }
    let mut klog = KernelLog::open().unwrap_or_else(|e| fail(format!("kernel log: {e}")));
    let (ctx, events, pd) = open_with_events();
    let mut rg = Regions::new(
        &ctx,
        &pd,
        65536,
        seed,
        (0x6500_0000_0000u64, 0x6600_0000_0000u64),
    );
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, rg.dmr.rkey);
    let mut emu = emu();

    // Malformed CQEs on the requester's CQ (the only CQ on port 1).
    let cqs = command(&mut emu, "cqs 0");
    let cqns: Vec<u32> = cqs[0]
        .split_whitespace()
        .skip(1)
        .filter_map(|c| c.parse().ok())
        .collect();
    let [cqn] = cqns[..] else {
        fail(format!("expected one CQ on port 1: {cqs:?}"));
    };
    // Earlier tests of the session may have moved it (user space rings the
    // doorbells of its own queues): only this test's CQEs count.
    let ignored0 = field(&command(&mut emu, "stat"), "cq_ci_ignored");
    for round in 0..4 {
        ctx.req_notify_cq(&a.cq)
            .unwrap_or_else(|e| fail(format!("arm CQ: {e}")));
        let r = command(
            &mut emu,
            &format!("fuzz-cqe 0 {cqn} 16 {}", seed * 100 + round),
        );
        let visible = field(&r, "visible");
        std::thread::sleep(Duration::from_millis(300));
        let wcs = ctx.poll_cq(&a.cq, 64).unwrap_or_default();
        check(
            wcs.is_empty(),
            format!("round {round}: {visible} malformed CQEs visible to the driver, {} completions reached the consumer", wcs.len()),
        );
        real_write(
            &ctx,
            &a,
            &mut rg,
            10 + round,
            &format!("after malformed CQEs, round {round}"),
        );
    }
    let ignored = field(&command(&mut emu, "stat"), "cq_ci_ignored") - ignored0;
    check(
        ignored == 0,
        format!("the driver's CQ consumer index stayed in step ({ignored} ignored)"),
    );

    // Malformed event queue entries; then a real link flap still arrives.
    let dropped = field(&command(&mut emu, "stat"), "eq_dropped");
    command(&mut emu, &format!("fuzz-eqe 64 {seed}"));
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(Some(_)) = events.next(Duration::from_millis(300)) {}
    check(
        field(&command(&mut emu, "stat"), "eq_dropped") == dropped,
        "malformed event queue entries: no event lost".into(),
    );
    link_flap_arrives(&mut emu, &events);
    reconnect(&ctx, &a, &b, rg.dmr.rkey);
    real_write(&ctx, &a, &mut rg, 20, "after malformed events");

    // Garbage frames on the responder's link.
    let r = command(&mut emu, &format!("fuzz-wire 1 200 {seed}"));
    let lines: Vec<String> = r
        .iter()
        .filter(|l| l.contains(" injected "))
        .cloned()
        .collect();
    let moved: Vec<String> = r
        .iter()
        .filter(|l| l.contains(" moved "))
        .cloned()
        .collect();
    let dropped_kinds: u64 = [
        "truncated",
        "bad_opcode",
        "bad_qpn",
        "not_for_port",
        "bad_icrc",
        "bad_pad",
    ]
    .iter()
    .map(|k| field(&lines, k))
    .sum();
    // Frames that are not RoCE for the port go to its Ethernet receive
    // ring while its interface is up (the test's QPs brought it up), and
    // are dropped otherwise.
    let not_rdma = field(&moved, "rx_drops") + field(&moved, "eth");
    check(
        field(&moved, "icrc_errors") == field(&lines, "bad_icrc") && not_rdma >= dropped_kinds,
        format!(
            "200 garbage frames: {} ICRC errors counted for {} bad ICRCs, {not_rdma} dropped or passed to the interface for {dropped_kinds} undeliverable",
            field(&moved, "icrc_errors"),
            field(&lines, "bad_icrc"),
        ),
    );
    check(
        stat(&mut emu, "dma_audit") == 0,
        "garbage from the wire: DMA audit 0".into(),
    );
    std::thread::sleep(Duration::from_millis(500));
    while let Ok(Some(_)) = events.next(Duration::from_millis(300)) {}
    reconnect(&ctx, &a, &b, rg.dmr.rkey);
    real_write(&ctx, &a, &mut rg, 30, "after garbage frames");

    // Bogus command statuses: calls fail or succeed, none hangs or
    // crashes. The device and the driver may disagree afterwards: the
    // guest test rebinds.
    command(&mut emu, &format!("fuzz-regs 20 {seed} cmd_status"));
    // A QP to INIT writes its context (and its CQ's) to the device: commands.
    let mut failed = 0;
    for _ in 0..20 {
        let e = end(&ctx, &pd, 1, None);
        if ctx.modify_qp(&e.qp, &init_attrs(1)).is_err() {
            failed += 1;
        }
        if ctx.destroy_qp(e.qp).is_err() {
            failed += 1;
        }
        if ctx.destroy_cq(e.cq).is_err() {
            failed += 1;
        }
    }
    check(
        failed > 0,
        format!("20 QPs to INIT under bogus command statuses: {failed} calls failed, none hung"),
    );

    let (n, _) = klog
        .read_new()
        .unwrap_or_else(|e| fail(format!("kernel log: {e}")));
    check(
        n <= 200,
        format!("the kernel log grew by {n} lines (rate-limited)"),
    );
    println!("PASS");
}

/// `fuzz-device` on model 2.0: with a standard QP pair of ports 1 and 2
/// connected and nothing outstanding, four rounds of 16 entries no NIC
/// writes on port 1's queues (the emulator's `fuzz-nic`: unknown events,
/// completions and errors of CQs, QPs and FIFOs that do not exist, bad
/// CQEs on the Ethernet ring and on CQ 1, the requesters' CQ, of QPs that
/// do not exist, of a responder, of no outstanding request). No completion
/// reaches the consumer and no event the context, the event queue loses
/// nothing, and a real WRITE completes and lands after each round; then a
/// link flap of port 1 arrives as PORT_ERR, PORT_ACTIVE and a WRITE lands
/// again. The kernel log grows by a bounded number of lines.
fn fuzz_device2(seed: u64) {
    let mut klog = KernelLog::open().unwrap_or_else(|e| fail(format!("kernel log: {e}")));
    let (ctx, events, pd) = open_with_events();
    let mut rg = Regions::new(
        &ctx,
        &pd,
        65536,
        seed,
        (0x6500_0000_0000u64, 0x6600_0000_0000u64),
    );
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, rg.dmr.rkey);
    let mut emu = emu();
    real_write(&ctx, &a, &mut rg, 9, "before the garbage");
    let mut rc_bad = 0;
    for round in 0..4 {
        let dropped = nic_eq_dropped(&mut emu);
        ctx.req_notify_cq(&a.cq)
            .unwrap_or_else(|e| fail(format!("arm CQ: {e}")));
        let r = command(&mut emu, &format!("fuzz-nic 0 16 {}", seed * 100 + round));
        rc_bad += field(&r, "cqe_rc_bad");
        // The driver's event thread takes the entries; a completion or an
        // event it let through would be there by then.
        std::thread::sleep(Duration::from_millis(300));
        let wcs = ctx.poll_cq(&a.cq, 64).unwrap_or_default();
        let ev = events.next(Duration::ZERO).unwrap_or(None);
        check(
            wcs.is_empty() && ev.is_none(),
            format!(
                "round {round}: {} entries no NIC writes; {} completions reached the consumer, event {:?}",
                field(&r, "injected"),
                wcs.len(),
                ev.map(|e| event_name(e.event_type))
            ),
        );
        check(
            nic_eq_dropped(&mut emu) == dropped,
            format!("round {round}: the event queue lost nothing"),
        );
        real_write(
            &ctx,
            &a,
            &mut rg,
            10 + round,
            &format!("after the garbage of round {round}"),
        );
    }
    check(rc_bad > 0, format!("{rc_bad} bad CQEs on CQ 1 among them"));
    link_flap_arrives(&mut emu, &events);
    reconnect(&ctx, &a, &b, rg.dmr.rkey);
    real_write(&ctx, &a, &mut rg, 20, "after the link flap");
    check(
        stat(&mut emu, "dma_audit") == 0,
        "the NIC's garbage: DMA audit 0".into(),
    );
    let (n, _) = klog
        .read_new()
        .unwrap_or_else(|e| fail(format!("kernel log: {e}")));
    check(
        n <= 200,
        format!("the kernel log grew by {n} lines (rate-limited)"),
    );
    teardown(&ctx, [a, b], [rg.smr, rg.dmr]);
}

/// The EQ entries model 2.0's NIC found no room for (its line of `stat`).
fn nic_eq_dropped(emu: &mut EmuCtl) -> u64 {
    let nic: Vec<String> = command(emu, "stat")
        .into_iter()
        .filter(|l| l.starts_with("nic "))
        .collect();
    field(&nic, "eq_dropped")
}

/// A real WRITE of all of `r`'s source over its cleared destination
/// completes and lands.
fn real_write(ctx: &Context, a: &End, r: &mut Regions, id: u64, what: &str) {
    r.dst.bytes().fill(0);
    let wr = write_wr(id, r.iova, 65536, r.smr.lkey, r.diova, r.dmr.rkey);
    let wc = write_once(ctx, a, wr, what);
    check(
        wc.status == WC_SUCCESS && r.dst.bytes()[..] == r.src.bytes()[..],
        format!("{what}: a real WRITE completes and lands"),
    );
}

/// Port 1's link goes down for 300 ms: PORT_ERR then PORT_ACTIVE of port 1
/// arrive within 20 s (after the device's garbage).
fn link_flap_arrives(emu: &mut EmuCtl, events: &AsyncEvents) {
    command(emu, "link 0 down");
    std::thread::sleep(Duration::from_millis(300));
    command(emu, "link 0 up");
    let mut seen = Vec::new();
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(20)
        && !seen.ends_with(&[IB_EVENT_PORT_ERR, IB_EVENT_PORT_ACTIVE])
    {
        if let Ok(Some(e)) = events.next(Duration::from_millis(500)) {
            if e.element == 1 && [IB_EVENT_PORT_ERR, IB_EVENT_PORT_ACTIVE].contains(&e.event_type) {
                seen.push(e.event_type);
            }
        }
    }
    check(
        seen.ends_with(&[IB_EVENT_PORT_ERR, IB_EVENT_PORT_ACTIVE]),
        format!("after them a link flap of port 1 arrives as PORT_ERR, PORT_ACTIVE ({seen:?})"),
    );
}
