// SPDX-License-Identifier: GPL-2.0

//! The device as an adversary: malformed CQEs and event queue entries on
//! the NIC's port queues (the emulator's `fuzz-nic`). The driver drops what
//! is wrong, keeps its log bounded, and goes on working.

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

/// `fuzz-device [--seed S]`: with a standard QP pair of ports 1 and 2
/// connected and nothing outstanding, four rounds of 16 entries no NIC
/// writes on port 1's queues (the emulator's `fuzz-nic`: unknown events,
/// completions and errors of CQs, QPs and FIFOs that do not exist, bad
/// CQEs on the Ethernet ring and on CQ 1, the requesters' CQ, of QPs that
/// do not exist, of a responder, of no outstanding request). No completion
/// reaches the consumer and no event the context, the event queue loses
/// nothing, and a real WRITE completes and lands after each round; then a
/// link flap of port 1 arrives as PORT_ERR, PORT_ACTIVE and a WRITE lands
/// again. The kernel log grows by a bounded number of lines.
pub(crate) fn fuzz_device(args: &[String]) {
    let seed = arg(args, "--seed", Some(1));
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

/// The EQ entries the NIC found no room for (its line of `stat`).
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
