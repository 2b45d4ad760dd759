// SPDX-License-Identifier: GPL-2.0

//! In-guest checks of the gaudi_ib uverbs interface. Each subcommand prints
//! what it checked and exits non-zero on the first mismatch.
//!
//!   gaudi-verbs-test uverbs --ports N [--instance I]
//!       context, PD and the driver namespace, against the emulator's
//!       default port addresses (MAC 02:1d:a3:I:00:P, IPv4 10.I.P.1).
//!   gaudi-verbs-test hold
//!       open a context and allocate a PD, print "holding", sleep until
//!       killed.
//!   gaudi-verbs-test context --expect-errno E
//!       open a context: E = 0 expects success, else that errno.
//!   gaudi-verbs-test ownership --step refused|owner --ports N [--instance I]
//!       refused (another process holds a PD): a context opens and queries
//!       the device, every port and the GID table (core and driver
//!       methods) and gets a PD; a QP set is made in its own PD; HBM alloc
//!       fails with EBUSY, each adding the driver's log line; 50 refused HBM
//!       allocs add 10 (rate limit). owner (the holder is gone): PD, QP set and
//!       HBM succeed, the context keeps the NIC to itself until it is
//!       closed, and another context's PD is refused meanwhile.
//!   gaudi-verbs-test log-ratelimited [--verbs N] [--faults N]
//!       N (default 10000) REG_MR with REMOTE_ATOMIC, each EOPNOTSUPP, add at
//!       most 20 kernel log lines; N MMU faults of a QP set's WQEs (each a
//!       QP_ERR syndrome, the QP in ERR and reset to RTS after it; the
//!       emulator counts exactly N) at most 40.
//!   gaudi-verbs-test pd-single
//!       the second PD of a context fails with ENOSPC; after freeing the
//!       first, a PD can be allocated again.
//!   gaudi-verbs-test events --expect NAME:PORT,... [--timeout S]
//!       open a context and its async event file, print "listening", then
//!       read events: exactly those listed (PORT_ERR, PORT_ACTIVE), in order,
//!       each within S seconds (default 20).
//!   gaudi-verbs-test mr-register [--max-mib M] [--cycles N]
//!                                [--huge2m-mib H] [--huge1g]
//!       register memory regions of one page up to M MiB (default 1024),
//!       and of H MiB of 2 MiB huge pages and one 1 GiB page if asked
//!       (their device pages must be as large):
//!       the device reads each through its MMU (the emulator's peek) as
//!       the process wrote it, writes land where they should, the region is
//!       unmapped after deregistration; access rights the NIC cannot honour
//!       fail; N (default 1000) register/deregister cycles; the emulator's
//!       MMU fault count moves exactly by the faults provoked, its DMA
//!       audit stays 0.
//!   gaudi-verbs-test mr-no-foreign-frames [--window-pages N] [--stride S]
//!       small and odd-length regions at 4 KiB iovas of a 2 MiB window (N
//!       pages, default 512): the one whose device VA is congruent to the
//!       memory's physical address modulo 2 MiB, its neighbours and every
//!       S-th (default 32; 1: every iova), of ordinary memory and inside a
//!       2 MiB huge page, a THP split to 8 KiB (if the kernel has THP) and an 8 KiB
//!       HBM block registered from its dma-buf: 4 KiB device pages only,
//!       nothing mapped next to the pinned pages, the ends read as written.
//!   gaudi-verbs-test rkey-bounds
//!       remote WRITEs with rkey 0, another PD's rkey, one byte outside
//!       either end of the pages of the responder's region, or to a
//!       deregistered region are refused (REM_ACCESS_ERR, both QPs in ERR,
//!       nothing lands); one by the region's iova lands; 1000 keys are
//!       distinct and not sequential.
//!   gaudi-verbs-test hbm-scrubbed --step fill|check|probe --mib N
//!                                 [--offset O] [--then-fill]
//!       device memory a process wrote and left reads 0 for the next owner
//!       (BAR 4 and the device MMU), and all of it after a probe.
//!   gaudi-verbs-test rkey-rebind
//!       a QP given no remote rkey binds the one its first WRITE names (its
//!       peer PD's key) and refuses another PD's with EINVAL, even with its
//!       queue idle; through RESET it binds another PD's key and lands there.
//!   gaudi-verbs-test unsupported-opcodes
//!       on an RC QP: SEND, SEND_WITH_IMM, RDMA_READ and the atomics fail in
//!       post_send with EOPNOTSUPP naming the request, post_recv with
//!       EOPNOTSUPP; QP types and sizes the NIC lacks are refused; a QP asking
//!       for a receive queue and inline data gets neither and says so.
//!   gaudi-verbs-test fatal [--timeout S]
//!       hold a context, a PD and the async event file, print "listening";
//!       expect DEVICE_FATAL, then the disassociation: the driver's method
//!       and a new PD fail with EIO, and only DEVICE_FATAL follows on the
//!       event file.
//!   gaudi-verbs-test removal [--timeout S]
//!       WRITEs on a standard QP pair and through a QP set's mapped queues,
//!       each checked, until the device goes away (fatal error, crash,
//!       unplug): DEVICE_FATAL, verbs fail with EIO, the event stream ends,
//!       the mapped queues still read and write (see removal.rs).
//!   gaudi-verbs-test link-flap
//!       the same traffic across a 100 ms flap of port 1's link (every
//!       WRITE lands, PORT_ERR and PORT_ACTIVE reach the process) and an
//!       outage past the retry budget (both paths fail, then recover
//!       through RESET).
//!   gaudi-verbs-test cq-no-overflow
//!       port 1's CQ 1 takes the send queues of four QPs of 1024 requests
//!       (a fifth is refused at INIT with ENOMEM); their 4096 signalled
//!       WRITEs, posted while nobody polls, all complete in order and land;
//!       no event. With one QP gone the fifth enters INIT.
//!   gaudi-verbs-test dereg-during-transfer [--mib N]
//!       a WRITE of N MiB (default 64) whose source region is deregistered,
//!       whose requester QP is destroyed, whose destination region is
//!       deregistered while it is under way: error completions, no stale
//!       translation (strict emulator), DMA audit 0, WRITEs land after.
//!   gaudi-verbs-test write-traffic [--mib N]
//!       WRITEs of N MiB (default 16) port 1 -> port 2 until one fails;
//!       "traffic running" after the first, status 3 at the error.
//!   gaudi-verbs-test limits-enforced
//!       the per-context limits: 256 QP sets, 256 MiB of QP set queues,
//!       65536 regions (ENOSPC beyond); 64 GiB under a 64 MiB
//!       RLIMIT_MEMLOCK fails with ENOMEM.
//!   gaudi-verbs-test fuzz-uverbs [--calls N] [--seed S] [--seconds T]
//!                                [--replay I,J-K] [--emu] [--verbose]
//!       N (default 10000) random calls, stopping after T seconds if given,
//!       of every method of the uAPI headers' table (build.rs) and random
//!       WQEs in mapped QP set queues; call I of seed S depends on (S, I)
//!       only, --replay runs just those calls (exit 1 if they fail). No
//!       splat in the kernel log, with --emu the DMA audit unchanged; on a
//!       failure, the seed and the shortest failing sequence found.

use gaudi_verbs::uapi::*;
use gaudi_verbs::{
    errno, event_name, find_device, gid_index, gid_v4, ib_name, ip, port_netdev, region_hash,
    roce_address, Ah, AsyncEvents, Attr, CompChannel, Context, Cq, EmuCtl, ModifyQp, Mr, Pd, Qp,
    QpCaps, SendWr, Sge, Wc, IB_EVENT_DEVICE_FATAL, IB_EVENT_GID_CHANGE, IB_EVENT_PORT_ACTIVE,
    IB_EVENT_PORT_ERR, IB_EVENT_QP_FATAL, MTU_1024, MTU_4096, QPS_ERR, QPS_INIT, QPS_RESET,
    QPS_RTR, QPS_RTS, QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN, QP_MAX_DEST_RD_ATOMIC, QP_PATH_MTU,
    QP_PKEY_INDEX, QP_PORT, QP_RETRY_CNT, QP_RNR_RETRY, QP_RQ_PSN, QP_SQ_PSN, QP_STATE, QP_TIMEOUT,
    SEND_INLINE, SEND_SIGNALED, WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR, WC_SUCCESS, WC_WR_FLUSH_ERR,
};
use std::io::Write;
use std::process::exit;

mod asid;
mod concurrency;
mod dv;
mod fuzz;
mod fuzzdev;
mod hbm;
mod limits;
mod netdev;
mod ownership;
mod regions;
mod removal;
mod rings;
mod syndromes;
mod transfer;
mod uapi;
mod wire;
use std::time::Duration;

const MIB: usize = 1 << 20;

fn fail(msg: String) -> ! {
    println!("FAIL: {msg}");
    exit(1)
}

fn check(cond: bool, msg: String) {
    if !cond {
        fail(msg);
    }
    println!("ok: {msg}");
}

fn expect_errno<T: std::fmt::Debug>(what: &str, r: std::io::Result<T>, want: i32) {
    match r {
        Ok(v) => fail(format!("{what}: succeeded ({v:?}), expected errno {want}")),
        Err(e) => check(
            errno(&e) == want,
            format!("{what}: errno {} ({e}), expected {want}", errno(&e)),
        ),
    }
}

fn arg(args: &[String], name: &str, default: Option<u64>) -> u64 {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| fail(format!("{name} needs a number"))),
        None => default.unwrap_or_else(|| fail(format!("{name} missing"))),
    }
}

fn uverbs(args: &[String]) {
    let ports = arg(args, "--ports", None) as u32;
    let inst = arg(args, "--instance", Some(0)) as u8;
    let path = find_device().unwrap_or_else(|e| fail(format!("find device: {e}")));
    println!("device file {}", path.display());

    let ctx = Context::open(&path).unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let r = ctx.resp;
    check(
        r.abi_version == GAUDI_IB_UVERBS_ABI_VERSION,
        format!("ucontext: ABI version {}", r.abi_version),
    );
    check(
        r.num_ports == ports,
        format!("ucontext: {} ports", r.num_ports),
    );
    let mask = if ports >= 64 {
        u64::MAX
    } else {
        (1u64 << ports) - 1
    };
    check(
        r.ports_mask == mask,
        format!("ucontext: ports mask {:#x}", r.ports_mask),
    );
    check(
        r.comp_mask == 0,
        format!("ucontext: comp_mask {}", r.comp_mask),
    );
    check(
        r.max_qps > 0 && r.max_cqe.is_power_of_two() && r.page_size_cap & 0x1000 != 0,
        format!(
            "ucontext: limits qps {} cqe {} page sizes {:#x}",
            r.max_qps, r.max_cqe, r.page_size_cap
        ),
    );

    // Any process may open a context and use the standard verbs: a second
    // context opens, queries, and gets a PD of its own.
    let other = Context::open(&path).unwrap_or_else(|e| fail(format!("second context: {e}")));
    check(
        other.resp.num_ports == ports,
        "a second context opens".into(),
    );

    // One PD per context; it is left to the context's release.
    let _pd = pd_checks(&ctx);

    other
        .query_port(1)
        .unwrap_or_else(|e| fail(format!("second context: QUERY_PORT 1: {e}")));
    let other_pd = other
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("second context: alloc_pd beside the first: {e}")));
    check(
        other_pd.pdn == 1,
        "second context: a PD beside the first's".into(),
    );
    drop(other);

    for p in 1..=ports {
        let info = ctx
            .query_port(p.into())
            .unwrap_or_else(|e| fail(format!("QUERY_PORT {p}: {e}")));
        let idx = (p - 1) as u8;
        let mac = [0x02, 0x1d, 0xa3, inst, 0, idx];
        // The first IPv4 address of the port's interface (none: 0.0.0.0).
        let ip = gaudi_verbs::first_ipv4_gid(p as u8).unwrap_or_default();
        check(
            info.port_num == p
                && info.mac == mac
                && info.ipv4 == ip
                && info.flags == GAUDI_IB_PORT_LINK_UP
                && info.speed_mbps == 100_000
                && info.comp_mask == 0
                && info.reserved0 == [0; 2]
                && info.reserved1 == 0,
            format!(
                "QUERY_PORT {p}: mac {:02x?} ipv4 {:?} flags {} speed {}",
                info.mac, info.ipv4, info.flags, info.speed_mbps
            ),
        );
    }

    // Attribute checks of the core and of the driver.
    let mut info = gaudi_ib_port_info::default();
    expect_errno("QUERY_PORT port 0", ctx.query_port(0), libc::EINVAL);
    expect_errno(
        "QUERY_PORT port past the last",
        ctx.query_port(u64::from(ports) + 1),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT port 2^32+1",
        ctx.query_port((1 << 32) + 1),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT without the port",
        ctx.query_port_raw([Attr::output(GAUDI_IB_ATTR_QUERY_PORT_RESP, &mut info)]),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT without the reply",
        ctx.query_port_raw([Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, 1)]),
        libc::EINVAL,
    );
    let short = Attr::buf(
        GAUDI_IB_ATTR_QUERY_PORT_RESP,
        (&mut info as *mut gaudi_ib_port_info).cast(),
        16,
    );
    expect_errno(
        "QUERY_PORT short reply buffer",
        ctx.query_port_raw([Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, 1), short]),
        libc::EINVAL,
    );
    let mut port32 = Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, 1);
    port32.len = 4;
    expect_errno(
        "QUERY_PORT 4-byte port",
        ctx.query_port_raw([
            port32,
            Attr::output(GAUDI_IB_ATTR_QUERY_PORT_RESP, &mut info),
        ]),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT unknown mandatory attribute",
        ctx.query_port_raw([
            Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, 1),
            Attr::output(GAUDI_IB_ATTR_QUERY_PORT_RESP, &mut info),
            Attr::value(driver_ns_id(7), 0),
        ]),
        libc::EPROTONOSUPPORT,
    );

    drop(ctx);

    let ctx = Context::open(&path).unwrap_or_else(|e| fail(format!("context after close: {e}")));
    check(
        ctx.resp.num_ports == ports,
        "context again after the first closed".into(),
    );
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("PD in new context: {e}")));
    check(pd.pdn == 1, "PD in the new context".into());
    println!("PASS");
}

fn open() -> (std::path::PathBuf, std::io::Result<Context>) {
    let path = find_device().unwrap_or_else(|e| fail(format!("find device: {e}")));
    let ctx = Context::open(&path);
    (path, ctx)
}

fn hold() {
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let _pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    println!("holding");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

fn context(args: &[String]) {
    let want = arg(args, "--expect-errno", None) as i32;
    let (_, ctx) = open();
    match (ctx, want) {
        (Ok(_), 0) => println!("ok: context allocated"),
        (Ok(_), w) => fail(format!("context allocated, expected errno {w}")),
        (Err(e), w) => check(
            errno(&e) == w,
            format!("context: errno {} ({e}), expected {w}", errno(&e)),
        ),
    }
}

/// One PD per context: the first is PD 1, the second and third fail with
/// ENOSPC, and after destroying it one can be allocated again, which is
/// returned.
fn pd_checks(ctx: &Context) -> gaudi_verbs::Pd {
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    check(
        pd.pdn == 1,
        format!("first PD: handle {} pdn {}", pd.handle, pd.pdn),
    );
    expect_errno("second PD", ctx.alloc_pd().map(|p| p.pdn), libc::ENOSPC);
    expect_errno("third PD", ctx.alloc_pd().map(|p| p.pdn), libc::ENOSPC);
    ctx.dealloc_pd(pd)
        .unwrap_or_else(|e| fail(format!("dealloc PD: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("PD after dealloc: {e}")));
    check(pd.pdn == 1, "PD allocated again after dealloc".into());
    pd
}

fn pd_single() {
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let _pd = pd_checks(&ctx);
    println!("PASS");
}

/// `pd-identity`, with the driver loaded with `first_pd_id` at 2^64 - 4, three
/// identities before they run out: context A's PD takes the first and A
/// registers a region open to remote writes. Context B then takes, uses and frees PDs until the
/// identities run out: two PDs, then ENOSPC, and ENOSPC again (they never
/// wrap). With each of B's PDs, B's post_send naming A's key is refused with
/// EINVAL, binding one of B's QPs to A's key is refused with EINVAL, and a
/// WRITE carrying A's key addressed at A's region is refused or fails: A's
/// region is unchanged. A's own WRITE with the key lands.
fn pd_identity() {
    let rw = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    let a = open_ctx();
    let pa = a
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("A's PD: {e}")));
    let mut target = Mapping::new(4096);
    fill(target.bytes(), 1);
    let before = target.bytes().to_vec();
    let amr = reg_mapping(&a, &pa, &target, rw);
    let b = open_ctx();
    let mut src = Mapping::new(4096);
    fill(src.bytes(), 2);
    let mut pds = 0;
    loop {
        let pb = match b.alloc_pd() {
            Ok(p) => p,
            Err(e) if errno(&e) == libc::ENOSPC => break,
            Err(e) => fail(format!("B's PD {}: {e}", pds + 1)),
        };
        pds += 1;
        check(
            pds <= 2,
            format!("B got PD {pds}: identities past the last one"),
        );
        let bmr = reg_mapping(&b, &pb, &src, rw);
        // y takes WRITEs with B's own key.
        let (x, y) = loopback_pair(&b, &pb, 1, 1, bmr.rkey);
        post_refused(
            &b,
            &x.qp,
            &[write_wr(
                1,
                target.addr(),
                64,
                amr.lkey,
                src.addr(),
                bmr.rkey,
            )],
            1,
            &format!("PD {pds} of B posting from A's region with A's lkey"),
        );
        let rebind = ModifyQp {
            attr_mask: QP_STATE,
            qp_state: QPS_RTS,
            driver: Some(gaudi_ib_modify_qp {
                flags: GAUDI_IB_MODIFY_QP_LOCAL_RKEY,
                local_rkey: amr.rkey,
                ..Default::default()
            }),
            ..Default::default()
        };
        expect_errno(
            &format!("PD {pds} of B binding a QP to A's key"),
            b.modify_qp(&y.qp, &rebind),
            libc::EINVAL,
        );
        // A WRITE carrying A's key, at A's region: refused when posted or
        // by the responder, never landing.
        match b.post_send(
            &x.qp,
            &[write_wr(
                2,
                src.addr(),
                64,
                bmr.lkey,
                target.addr(),
                amr.rkey,
            )],
        ) {
            Err((e, _)) => check(
                errno(&e) == libc::EINVAL,
                format!("PD {pds} of B: a WRITE with A's key refused when posted ({e})"),
            ),
            Ok(()) => {
                let wcs = b
                    .wait_cq(&x.cq, 1, 120_000)
                    .unwrap_or_else(|err| fail(format!("poll: {err}")));
                check(
                    wcs.len() == 1 && wcs[0].status != WC_SUCCESS,
                    format!(
                        "PD {pds} of B: a WRITE carrying A's key failed: {:?}",
                        wcs.first().map(|w| w.status)
                    ),
                );
            }
        }
        check(
            target.bytes()[..] == before[..],
            format!("PD {pds} of B: A's region unchanged"),
        );
        destroy_ends(&b, [x, y]);
        b.dereg_mr(bmr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
        b.dealloc_pd(pb)
            .unwrap_or_else(|e| fail(format!("dealloc B's PD: {e}")));
    }
    check(
        pds == 2,
        format!("B got {pds} PDs before the identities ran out, expected 2"),
    );
    expect_errno(
        "a PD after the identities ran out",
        b.alloc_pd().map(|p| p.pdn),
        libc::ENOSPC,
    );
    // A's key still works for A.
    let mut own = Mapping::new(4096);
    fill(own.bytes(), 3);
    let omr = reg_mapping(&a, &pa, &own, rw);
    let (x, y) = loopback_pair(&a, &pa, 1, 1, amr.rkey);
    let wc = write_once(
        &a,
        &x,
        write_wr(3, own.addr(), 4096, omr.lkey, target.addr(), amr.rkey),
        "A's WRITE with its own key",
    );
    check(
        wc.status == WC_SUCCESS && target.bytes()[..] == own.bytes()[..],
        format!("A's WRITE with its key landed (status {})", wc.status),
    );
    teardown(&a, [x, y], [amr, omr]);
}

/// A context with its async event file, announced on stdout.
fn listen() -> (Context, AsyncEvents) {
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let events = ctx
        .async_events()
        .unwrap_or_else(|e| fail(format!("ASYNC_EVENT_ALLOC: {e}")));
    println!("listening");
    let _ = std::io::stdout().flush();
    (ctx, events)
}

/// The next asynchronous event within `timeout`; GID_CHANGE events (the
/// ports' addresses, which tests set up) are passed over unless
/// `waiting_for` names one.
fn next_event(events: &AsyncEvents, timeout: Duration, waiting_for: &str) -> (u32, u64) {
    let got = if waiting_for.starts_with("GID_CHANGE") {
        events.next_any(timeout)
    } else {
        events.next(timeout)
    };
    match got {
        Ok(Some(ev)) => {
            println!(
                "event {} ({}) element {}",
                event_name(ev.event_type),
                ev.event_type,
                ev.element
            );
            (ev.event_type, ev.element)
        }
        Ok(None) => fail(format!(
            "no event within {timeout:?}, waiting for {waiting_for}"
        )),
        Err(e) => fail(format!("reading events, waiting for {waiting_for}: {e}")),
    }
}

fn events(args: &[String]) {
    let timeout = Duration::from_secs(arg(args, "--timeout", Some(20)));
    let list = args
        .iter()
        .position(|a| a == "--expect")
        .and_then(|i| args.get(i + 1))
        .unwrap_or_else(|| fail("--expect NAME:PORT,... missing".into()));
    let mut want = Vec::new();
    for item in list.split(',') {
        let (name, port) = item
            .split_once(':')
            .unwrap_or_else(|| fail(format!("bad event {item}")));
        let kind = match name {
            "PORT_ERR" => IB_EVENT_PORT_ERR,
            "PORT_ACTIVE" => IB_EVENT_PORT_ACTIVE,
            _ => fail(format!("unknown event name {name}")),
        };
        let port: u64 = port
            .parse()
            .unwrap_or_else(|_| fail(format!("bad port in {item}")));
        want.push((kind, port, item));
    }
    let (_ctx, events) = listen();
    for (kind, port, item) in want {
        let got = next_event(&events, timeout, item);
        check(got == (kind, port), format!("expected {item}"));
    }
    match events.next(Duration::from_millis(500)) {
        Ok(None) => println!("ok: no further event"),
        Ok(Some(ev)) => fail(format!("unexpected further event {ev:?}")),
        Err(e) => fail(format!("reading events: {e}")),
    }
    println!("PASS");
}

/// `roce-gid-table --port P`: an IPv4 and an IPv6 address added to the
/// port's network interface become RoCE v2 GIDs of the port (sysfs and
/// `QUERY_GID_TABLE`, naming the interface), with a GID_CHANGE event for
/// the port; deleted, they go, with another event.
fn roce_gid_table(args: &[String]) {
    let port = arg(args, "--port", Some(2)) as u8;
    let timeout = Duration::from_secs(10);
    let ib = ib_name().unwrap_or_else(|e| fail(format!("device name: {e}")));
    let ifc = port_netdev(&ib, port).unwrap_or_else(|e| fail(format!("{e}")));
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{ifc}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| fail(format!("no ifindex for {ifc}")));
    println!("# port {port} is {ifc} (ifindex {ifindex})");
    let (ctx, events) = listen();
    let run = |a: &[&str]| ip(a).unwrap_or_else(|e| fail(format!("{e}")));
    run(&["link", "set", "dev", &ifc, "up"]);
    // Bringing the interface up changes no GID (its link-local address is
    // the default GID); let anything it did settle.
    while let Ok(Some(ev)) = events.next_any(Duration::from_millis(500)) {
        println!(
            "# event {} element {} (before the addresses)",
            event_name(ev.event_type),
            ev.element
        );
    }
    let v4 = [10, 77, port, 1];
    let mut v6 = [0u8; 16];
    v6[..4].copy_from_slice(&[0xfd, 0x77, 0, port]);
    v6[15] = 1;
    let v4s = std::net::Ipv4Addr::from(v4).to_string();
    let v6s = std::net::Ipv6Addr::from(v6).to_string();
    let gids = [(gid_v4(v4), v4s.clone()), (v6, v6s.clone())];
    let table = |ctx: &Context| {
        ctx.query_gid_table(64)
            .unwrap_or_else(|e| fail(format!("QUERY_GID_TABLE: {e}")))
    };
    let wait_for = |gid: &[u8; 16], present: bool, what: &str| -> Option<u8> {
        let start = std::time::Instant::now();
        loop {
            let i = gid_index(&ib, port, gid);
            if i.is_some() == present {
                return i;
            }
            if start.elapsed() > timeout {
                fail(format!(
                    "{what}: sysfs GID {} after {timeout:?}",
                    if present { "absent" } else { "still there" }
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for (gid, text) in &gids {
        check(
            gid_index(&ib, port, gid).is_none(),
            format!("no GID for {text} before it is added"),
        );
    }
    run(&["addr", "add", &format!("{v4s}/24"), "dev", &ifc]);
    run(&["addr", "add", &format!("{v6s}/64"), "dev", &ifc, "nodad"]);
    for (gid, text) in &gids {
        let i = wait_for(gid, true, text).unwrap_or_default();
        check(
            i > 0,
            format!("ip addr add {text}: RoCE v2 GID {i} of port {port} in sysfs"),
        );
        let ndev = std::fs::read_to_string(format!(
            "/sys/class/infiniband/{ib}/ports/{port}/gid_attrs/ndevs/{i}"
        ))
        .unwrap_or_default();
        check(
            ndev.trim() == ifc,
            format!("GID {i} names {} ({ifc} expected)", ndev.trim()),
        );
        let t = table(&ctx);
        check(
            t.iter().any(|g| {
                g.gid_bytes() == *gid
                    && g.port_num == u32::from(port)
                    && g.gid_index == u32::from(i)
                    && g.gid_type == IB_UVERBS_GID_TYPE_ROCE_V2
                    && g.netdev_ifindex == ifindex
            }),
            format!("QUERY_GID_TABLE: {text} at index {i} of port {port}, RoCE v2, on {ifc}"),
        );
    }
    let (kind, element) = next_event(&events, timeout, "GID_CHANGE after the additions");
    check(
        (kind, element) == (IB_EVENT_GID_CHANGE, u64::from(port)),
        format!("GID_CHANGE for port {port} after ip addr add"),
    );
    while let Ok(Some(_)) = events.next_any(Duration::from_millis(300)) {}
    run(&["addr", "del", &format!("{v4s}/24"), "dev", &ifc]);
    run(&["addr", "del", &format!("{v6s}/64"), "dev", &ifc]);
    for (gid, text) in &gids {
        wait_for(gid, false, text);
        let t = table(&ctx);
        check(
            !t.iter().any(|g| g.gid_bytes() == *gid),
            format!("ip addr del {text}: gone from sysfs and QUERY_GID_TABLE"),
        );
    }
    let (kind, element) = next_event(&events, timeout, "GID_CHANGE after the deletions");
    check(
        (kind, element) == (IB_EVENT_GID_CHANGE, u64::from(port)),
        format!("GID_CHANGE for port {port} after ip addr del"),
    );
    run(&["link", "set", "dev", &ifc, "down"]);
    println!("PASS");
}

/// `av-refused`: INIT to RTR takes a standard address vector and refuses
/// none, a source GID of another port, a multicast destination and the
/// destination in driver data (ABI 1) with EINVAL, and an empty source GID
/// entry with ENODATA (the core's lookup); a valid one is then taken.
fn av_refused() {
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    let a = end(&ctx, &pd, 1, None);
    let b = end(&ctx, &pd, 2, None);
    let sgid = roce_address(
        1,
        gaudi_verbs::port_ipv4(&a.info),
        Some(gaudi_verbs::port_ipv4(&b.info)),
    )
    .unwrap_or_else(|e| fail(format!("port 1 address: {e}")));
    let sgid2 = roce_address(2, gaudi_verbs::port_ipv4(&b.info), None)
        .unwrap_or_else(|e| fail(format!("port 2 address: {e}")));
    let ib = ib_name().unwrap_or_else(|e| fail(format!("{e}")));
    let empty = (0..16u8)
        .rev()
        .find(|i| {
            std::fs::read_to_string(format!("/sys/class/infiniband/{ib}/ports/1/gids/{i}"))
                .is_ok_and(|g| g.trim() == "0000:0000:0000:0000:0000:0000:0000:0000")
        })
        .unwrap_or_else(|| fail("no empty GID entry on port 1".into()));
    ctx.modify_qp(&a.qp, &init_attrs(1))
        .unwrap_or_else(|e| fail(format!("to INIT: {e}")));
    let rtr = ModifyQp {
        attr_mask: QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN,
        qp_state: QPS_RTR,
        path_mtu: MTU_4096,
        dest_qp_num: b.qp.qpn,
        rq_psn: 1,
        ah: Ah {
            port_num: 1,
            dgid: gid_v4(gaudi_verbs::port_ipv4(&b.info)),
            sgid_index: sgid,
            hop_limit: 64,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut mcast = gid_v4([224, 0, 0, 5]);
    mcast[15] = 5;
    for (what, m, want) in [
        (
            "no address vector",
            ModifyQp {
                attr_mask: rtr.attr_mask & !QP_AV,
                ..rtr
            },
            libc::EINVAL,
        ),
        (
            "an empty source GID entry",
            ModifyQp {
                ah: Ah {
                    sgid_index: empty,
                    ..rtr.ah
                },
                ..rtr
            },
            libc::ENODATA,
        ),
        (
            "a source GID of another port",
            ModifyQp {
                ah: Ah {
                    port_num: 2,
                    sgid_index: sgid2,
                    ..rtr.ah
                },
                ..rtr
            },
            libc::EINVAL,
        ),
        (
            "a multicast destination",
            ModifyQp {
                ah: Ah {
                    dgid: mcast,
                    ..rtr.ah
                },
                ..rtr
            },
            libc::EINVAL,
        ),
        (
            "the destination as driver data (ABI 1)",
            ModifyQp {
                attr_mask: rtr.attr_mask & !QP_AV,
                driver: Some(gaudi_ib_modify_qp {
                    flags: 1,
                    ..Default::default()
                }),
                ..rtr
            },
            libc::EINVAL,
        ),
    ] {
        expect_errno(&format!("RTR with {what}"), ctx.modify_qp(&a.qp, &m), want);
        let st = ctx
            .query_qp(&a.qp)
            .unwrap_or_else(|e| fail(format!("query QP: {e}")))
            .qp_state;
        check(st == QPS_INIT, format!("still INIT after RTR with {what}"));
    }
    ctx.modify_qp(&a.qp, &rtr)
        .unwrap_or_else(|e| fail(format!("RTR with a valid address vector: {e}")));
    let st = ctx
        .query_qp(&a.qp)
        .unwrap_or_else(|e| fail(format!("query QP: {e}")))
        .qp_state;
    check(
        st == QPS_RTR,
        "RTR with the address vector of port 2's GID".into(),
    );
    teardown(&ctx, [a, b], []);
}

fn fatal(args: &[String]) {
    let timeout = Duration::from_secs(arg(args, "--timeout", Some(20)));
    let (ctx, events) = listen();
    let _pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    let (kind, _) = next_event(&events, timeout, "DEVICE_FATAL");
    check(
        kind == IB_EVENT_DEVICE_FATAL,
        "first event is DEVICE_FATAL".into(),
    );
    expect_disassociated(&ctx, timeout);
    expect_events_end(&events);
    println!("PASS");
}

/// The context is disassociated when the driver removes the device: within
/// `timeout`, every verb fails with EIO from then on.
fn expect_disassociated(ctx: &Context, timeout: Duration) {
    let start = std::time::Instant::now();
    loop {
        match ctx.query_port(1) {
            Ok(_) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(50)),
            Ok(_) => fail(format!(
                "context still works {timeout:?} after DEVICE_FATAL"
            )),
            Err(e) => {
                check(
                    errno(&e) == libc::EIO,
                    format!("QUERY_PORT after disassociation: errno {} ({e})", errno(&e)),
                );
                break;
            }
        }
    }
    expect_errno(
        "alloc PD after disassociation",
        ctx.alloc_pd().map(|p| p.pdn),
        libc::EIO,
    );
}

/// The event file stays readable after disassociation; DEVICE_FATAL
/// (repeated by the core when it disassociated the context) marks the end
/// of the stream: no other event may follow.
fn expect_events_end(events: &AsyncEvents) {
    loop {
        match events.next(Duration::from_millis(500)) {
            Ok(None) => break,
            Ok(Some(ev)) => check(
                ev.event_type == IB_EVENT_DEVICE_FATAL,
                format!("then {} only", event_name(IB_EVENT_DEVICE_FATAL)),
            ),
            Err(e) => fail(format!("reading events after disassociation: {e}")),
        }
    }
}

/// A context with its async event file and its PD.
fn open_with_events() -> (Context, AsyncEvents, Pd) {
    let ctx = open_ctx();
    let events = ctx
        .async_events()
        .unwrap_or_else(|e| fail(format!("async event file: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    (ctx, events, pd)
}

/// Anonymous private memory, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Self {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            fail(format!("mmap {len}: {}", std::io::Error::last_os_error()));
        }
        Self {
            ptr: ptr.cast(),
            len,
        }
    }

    /// `len` bytes of huge pages of `1 << shift` bytes (hugetlbfs).
    fn huge(len: usize, shift: u32) -> std::io::Result<Self> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_HUGETLB
                    | ((shift as i32) << libc::MAP_HUGE_SHIFT),
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, and
        // borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// Memory a test checks in place.
trait Region {
    fn bytes(&mut self) -> &mut [u8];
}

impl Region for Mapping {
    fn bytes(&mut self) -> &mut [u8] {
        Mapping::bytes(self)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is our mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn emu() -> EmuCtl {
    EmuCtl::open().unwrap_or_else(|e| fail(format!("emulator control: {e}")))
}

fn stat(emu: &mut EmuCtl, name: &str) -> u64 {
    emu.stat(name)
        .unwrap_or_else(|e| fail(format!("emulator stat {name}: {e}")))
}

/// Register `map` (filled with a pattern here), check what the device sees
/// through its MMU, deregister; returns the MMU faults provoked.
fn check_region(
    ctx: &Context,
    pd: &gaudi_verbs::Pd,
    emu: &mut EmuCtl,
    mut map: Mapping,
    want_shift: Option<u32>,
) -> u64 {
    let size = map.len as u64;
    let rw = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    let mut faults_expected = 0;
    let addr = map.addr();
    let buf = map.bytes();
    for (i, w) in buf.chunks_mut(8).enumerate() {
        let v = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ size;
        w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
    }
    let t = std::time::Instant::now();
    let mr = ctx
        .reg_mr(pd, addr, size, addr, rw)
        .unwrap_or_else(|e| fail(format!("reg_mr {size}: {e}")));
    let took = t.elapsed();
    let shift = mr.resp.page_shift;
    let page = 1u64 << shift;
    // A region open to remote writes has its PD's key as rkey (the one key
    // its QPs' responders take), and its own lkey.
    check(
        mr.lkey != 0 && mr.lkey != mr.rkey && mr.rkey != 0,
        format!("{size} B: lkey {:#x}, rkey {:#x}", mr.lkey, mr.rkey),
    );
    // The device reaches the region in its PD's ASID, at its iova (it is
    // open to remote writes).
    emu.view_asid_of(mr.resp.mmu_va)
        .unwrap_or_else(|e| fail(format!("{size} B: {e}")));
    check(
        [12, 21, 30].contains(&shift) && mr.resp.mmu_va % page == addr % page,
        format!(
            "{size} B: device VA {:#x}, pages of 2^{shift}, registered in {took:?}",
            mr.resp.mmu_va
        ),
    );
    // The device sees what the process wrote, every byte: the emulator
    // hashes the whole region read through the device MMU, the process the
    // memory it registered.
    let got = emu
        .hash(mr.resp.mmu_va, size)
        .unwrap_or_else(|e| fail(format!("{size} B: device hash: {e}")));
    if got != region_hash(buf) {
        // Find where, for the report.
        let at = (0..size)
            .step_by(4096)
            .find(|&off| {
                let n = (size - off).min(4096);
                emu.peek(mr.resp.mmu_va + off, n as usize).ok().as_deref()
                    != Some(&buf[off as usize..(off + n) as usize])
            })
            .unwrap_or(size);
        fail(format!(
            "{size} B: the device reads other bytes (first differing page at +{at:#x})"
        ));
    }
    println!("ok: {size} B: the device reads the whole region as written");
    // A write through the device MMU lands in the process's memory.
    let data: Vec<u8> = (0..32u8).map(|i| i ^ 0xa5).collect();
    let off = size - 32;
    emu.poke(mr.resp.mmu_va + off, &data)
        .unwrap_or_else(|e| fail(format!("{size} B: poke: {e}")));
    check(
        buf[off as usize..] == data[..],
        format!("{size} B: a device write lands in the last bytes"),
    );
    // Past a page-aligned end nothing is mapped.
    if size % page == 0 {
        let r = emu.peek(mr.resp.mmu_va + size, 8);
        check(
            r.is_err(),
            format!("{size} B: the byte after the end faults"),
        );
        faults_expected += 1;
    }
    let va = mr.resp.mmu_va;
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("dereg_mr {size}: {e}")));
    let r = emu.peek(va, 8);
    check(
        r.is_err(),
        format!("{size} B: unmapped after deregistration"),
    );
    faults_expected += 1;
    if let Some(want) = want_shift {
        check(
            shift == want,
            format!("{size} B: device pages of 2^{shift}, expected 2^{want}"),
        );
    }
    faults_expected
}

/// Keys of successive registrations: all distinct and not 0, and no fixed
/// stride between consecutive ones (a counter, counting by 1 or by any
/// other step, would show one): no difference between consecutive keys
/// occurs 10 times.
fn keys_unpredictable(keys: &[u32], what: &str) {
    let distinct: std::collections::HashSet<u32> = keys.iter().copied().collect();
    check(
        distinct.len() == keys.len() && !distinct.contains(&0),
        format!(
            "{what}: {} distinct non-zero keys of {}",
            distinct.len() - usize::from(distinct.contains(&0)),
            keys.len()
        ),
    );
    no_stride(keys, what);
}

/// Whether `values` (keys, QP numbers) come in no fixed stride: no difference
/// between consecutive ones occurs 10 times.
pub(crate) fn no_stride(keys: &[u32], what: &str) {
    let mut strides = std::collections::HashMap::<u32, usize>::new();
    for w in keys.windows(2) {
        *strides.entry(w[1].wrapping_sub(w[0])).or_default() += 1;
    }
    let (stride, n) = strides
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or((0, 0), |(s, n)| (*s, *n));
    let ones = strides.get(&1).copied().unwrap_or(0);
    check(
        n < 10,
        format!(
            "{what}: not sequential: {ones} consecutive pairs differ by 1; the most common difference, {stride:#x}, occurs {n} times of {}",
            keys.len().saturating_sub(1)
        ),
    );
}

fn mr_register(args: &[String]) {
    let max = arg(args, "--max-mib", Some(1024)) << 20;
    let huge_2m = (arg(args, "--huge2m-mib", Some(0)) << 20) as usize;
    let huge_1g = args.iter().any(|a| a == "--huge1g");
    let cycles = arg(args, "--cycles", Some(1000));
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    let mut emu = emu();
    let faults0 = stat(&mut emu, "mmu_faults");
    let mut faults_expected = 0;
    let rw = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;

    // One page, an odd length, huge-page sized, large, and the maximum.
    let mut sizes = vec![4096u64, 69_632 + 100, 2 << 20, 64 << 20, max];
    sizes.retain(|s| *s <= max);
    sizes.dedup();
    for size in sizes {
        faults_expected += check_region(&ctx, &pd, &mut emu, Mapping::new(size as usize), None);
    }
    // Huge pages (hugetlbfs): the device maps them with pages of the same
    // size.
    if huge_2m != 0 {
        let map = Mapping::huge(huge_2m, 21)
            .unwrap_or_else(|e| fail(format!("{huge_2m} B of 2 MiB pages: {e}")));
        faults_expected += check_region(&ctx, &pd, &mut emu, map, Some(21));
    }
    if huge_1g {
        let map = Mapping::huge(1 << 30, 30).unwrap_or_else(|e| fail(format!("a 1 GiB page: {e}")));
        faults_expected += check_region(&ctx, &pd, &mut emu, map, Some(30));
    }

    // Without REMOTE_WRITE the device may read but not write the region;
    // REMOTE_READ is accepted (software asks for it) and grants nothing more.
    let mut map = Mapping::new(8192);
    map.bytes()[0] = 0x5a;
    for access in [
        IB_UVERBS_ACCESS_LOCAL_WRITE,
        0,
        IB_UVERBS_ACCESS_REMOTE_READ,
        IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_READ,
    ] {
        let mr = ctx
            .reg_mr(&pd, map.addr(), 8192, map.addr(), access)
            .unwrap_or_else(|e| fail(format!("reg_mr access {access}: {e}")));
        let got = emu.peek(mr.resp.mmu_va, 1).unwrap_or_default();
        check(got == [0x5a], format!("access {access}: the device reads"));
        let r = emu.poke(mr.resp.mmu_va, &[1]);
        check(
            r.is_err(),
            format!("access {access}: a device write faults"),
        );
        faults_expected += 1;
        check(
            map.bytes()[0] == 0x5a,
            format!("access {access}: memory unchanged"),
        );
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    }

    // What the NIC cannot do fails explicitly.
    expect_errno(
        "REMOTE_ATOMIC",
        ctx.reg_mr(
            &pd,
            map.addr(),
            8192,
            map.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_ATOMIC,
        )
        .map(|m| m.lkey),
        libc::EOPNOTSUPP,
    );
    expect_errno(
        "length 0",
        ctx.reg_mr(&pd, map.addr(), 0, map.addr(), rw)
            .map(|m| m.lkey),
        libc::EINVAL,
    );

    // Register and deregister, over and over: keys are never reused, and
    // they do not tell the next one.
    let map = Mapping::new(65536);
    let mut keys = Vec::with_capacity(cycles as usize);
    let t = std::time::Instant::now();
    for i in 0..cycles {
        let mr = ctx
            .reg_mr(&pd, map.addr(), 65536, map.addr(), rw)
            .unwrap_or_else(|e| fail(format!("cycle {i}: reg_mr: {e}")));
        keys.push(mr.lkey);
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("cycle {i}: dereg_mr: {e}")));
    }
    println!(
        "ok: {cycles} register/deregister cycles of 64 KiB in {:?}",
        t.elapsed()
    );
    keys_unpredictable(&keys, &format!("{cycles} registrations of 64 KiB"));
    let faults = stat(&mut emu, "mmu_faults") - faults0;
    check(
        faults == faults_expected,
        format!("MMU faults: {faults}, the {faults_expected} provoked"),
    );
    let audit = stat(&mut emu, "dma_audit");
    check(audit == 0, format!("DMA audit {audit}"));
    println!("PASS");
}

fn unsupported_opcodes() {
    let (_, ctx) = open();
    let ctx = ctx.unwrap_or_else(|e| fail(format!("GET_CONTEXT: {e}")));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    let cq = ctx
        .create_cq(16)
        .unwrap_or_else(|e| fail(format!("create CQ: {e}")));
    check(cq.cqe >= 16, format!("CQ of {} entries", cq.cqe));
    let caps = QpCaps {
        max_send_wr: 16,
        max_send_sge: 1,
        ..Default::default()
    };
    expect_errno(
        "UD QP",
        ctx.create_qp(&pd, &cq, IB_UVERBS_QPT_UD, caps)
            .map(|q| q.qpn),
        libc::EOPNOTSUPP,
    );
    // A receive queue asked for is granted (its receives are the credits of
    // WRITEs with immediate); inline data asked for gets the device's 256
    // bytes.
    let asked = QpCaps {
        max_recv_wr: 512,
        max_recv_sge: 1,
        max_inline_data: 220,
        ..caps
    };
    let rq = ctx
        .create_qp(&pd, &cq, IB_UVERBS_QPT_RC, asked)
        .unwrap_or_else(|e| {
            fail(format!(
                "RC QP asking for a receive queue and inline data: {e}"
            ))
        });
    check(
        rq.max_recv_wr == 512 && rq.max_recv_sge == 1 && rq.max_inline_data == 256 && rq.max_send_wr >= 16,
        format!(
            "RC QP asking for 512 receives and 220 inline bytes: granted {} receives, {} receive SGEs, {} inline bytes, {} send WRs",
            rq.max_recv_wr, rq.max_recv_sge, rq.max_inline_data, rq.max_send_wr
        ),
    );
    // No receive in RESET; none on a QP closed to remote writes, which no
    // WRITE with immediate can reach (ibv_rc_pingpong's QP, in INIT with no
    // access rights).
    let mut rmap = Mapping::new(4096);
    rmap.bytes()[0] = 1;
    let rmr = ctx
        .reg_mr(
            &pd,
            rmap.addr(),
            4096,
            rmap.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let rsge = Sge {
        addr: rmap.addr(),
        length: 64,
        lkey: rmr.lkey,
    };
    expect_errno(
        "post_recv in RESET",
        ctx.post_recv(&rq, 1, rsge),
        libc::EINVAL,
    );
    ctx.modify_qp(
        &rq,
        &ModifyQp {
            qp_access_flags: 0,
            ..init_attrs(1)
        },
    )
    .unwrap_or_else(|e| fail(format!("INIT without access rights: {e}")));
    expect_errno(
        "post_recv on a QP without REMOTE_WRITE",
        ctx.post_recv(&rq, 2, rsge),
        libc::EOPNOTSUPP,
    );
    ctx.destroy_qp(rq)
        .unwrap_or_else(|e| fail(format!("destroy QP: {e}")));
    ctx.dereg_mr(rmr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    for (what, bad) in [
        (
            "QP with 5 receive SGEs",
            QpCaps {
                max_recv_wr: 1,
                max_recv_sge: 5,
                ..caps
            },
        ),
        (
            "QP with 5 SGEs",
            QpCaps {
                max_send_sge: 5,
                ..caps
            },
        ),
        (
            "QP without send queue",
            QpCaps {
                max_send_wr: 0,
                ..caps
            },
        ),
    ] {
        expect_errno(
            what,
            ctx.create_qp(&pd, &cq, IB_UVERBS_QPT_RC, bad)
                .map(|q| q.qpn),
            libc::EINVAL,
        );
    }
    let qp = ctx
        .create_qp(&pd, &cq, IB_UVERBS_QPT_RC, caps)
        .unwrap_or_else(|e| fail(format!("create RC QP: {e}")));
    check(
        qp.qpn >= 2 && qp.max_send_wr >= 16 && qp.max_send_sge == 1,
        format!(
            "RC QP {}: {} send WRs, {} SGE",
            qp.qpn, qp.max_send_wr, qp.max_send_sge
        ),
    );
    let qp2 = ctx
        .create_qp(&pd, &cq, IB_UVERBS_QPT_RC, caps)
        .unwrap_or_else(|e| fail(format!("create a second RC QP: {e}")));
    check(qp2.qpn != qp.qpn, format!("second QP {}", qp2.qpn));

    let mut map = Mapping::new(4096);
    let addr = map.addr();
    map.bytes()[0] = 1;
    let mr = ctx
        .reg_mr(&pd, addr, 4096, addr, IB_UVERBS_ACCESS_LOCAL_WRITE)
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let sge = Sge {
        addr,
        length: 64,
        lkey: mr.lkey,
    };
    for (name, opcode) in [
        ("SEND", IB_UVERBS_WR_SEND),
        ("SEND_WITH_IMM", IB_UVERBS_WR_SEND_WITH_IMM),
        ("RDMA_READ", IB_UVERBS_WR_RDMA_READ),
        ("ATOMIC_CMP_AND_SWP", IB_UVERBS_WR_ATOMIC_CMP_AND_SWP),
        ("ATOMIC_FETCH_AND_ADD", IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD),
    ] {
        let wr = SendWr {
            wr_id: 7,
            opcode,
            remote_addr: 0x1000,
            rkey: 1,
            sges: vec![sge],
            ..Default::default()
        };
        post_refused_with(
            &ctx,
            &qp,
            &[wr],
            1,
            libc::EOPNOTSUPP,
            &format!("post_send {name}"),
        );
    }
    // The first request of a list fails: nothing of the list is posted.
    let list = [
        SendWr {
            opcode: IB_UVERBS_WR_RDMA_READ,
            sges: vec![sge],
            ..Default::default()
        },
        SendWr {
            opcode: IB_UVERBS_WR_RDMA_WRITE,
            sges: vec![sge],
            ..Default::default()
        },
    ];
    post_refused_with(
        &ctx,
        &qp,
        &list,
        1,
        libc::EOPNOTSUPP,
        "post_send [RDMA_READ, RDMA_WRITE]",
    );
    expect_errno(
        "post_recv on a QP without a receive queue",
        ctx.post_recv(&qp, 9, sge),
        libc::EOPNOTSUPP,
    );

    // The same on a connected QP in RTS, where a WQE would reach the
    // device: each refused request, alone or first of a list, leaves the
    // send queue as it was. The port sends no frame for them, and the next
    // WRITE is the first completion and lands (had a refused WQE reached
    // the ring, the device would have failed it first and flushed the
    // WRITE).
    let mut dst = Mapping::new(4096);
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            4096,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let mut emu = emu();
    let tx0 = emu
        .port_stat(0, "tx")
        .unwrap_or_else(|e| fail(format!("emulator port stat: {e}")));
    for (name, opcode) in [
        ("SEND", IB_UVERBS_WR_SEND),
        ("SEND_WITH_IMM", IB_UVERBS_WR_SEND_WITH_IMM),
        ("RDMA_READ", IB_UVERBS_WR_RDMA_READ),
        ("ATOMIC_CMP_AND_SWP", IB_UVERBS_WR_ATOMIC_CMP_AND_SWP),
        ("ATOMIC_FETCH_AND_ADD", IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD),
    ] {
        let bad_wr = SendWr {
            wr_id: 7,
            opcode,
            send_flags: SEND_SIGNALED,
            remote_addr: dst.addr(),
            rkey: dmr.rkey,
            sges: vec![sge],
            ..Default::default()
        };
        let good = write_wr(8, addr, 64, mr.lkey, dst.addr(), dmr.rkey);
        for list in [vec![bad_wr.clone()], vec![bad_wr, good]] {
            let n = list.len();
            post_refused_with(
                &ctx,
                &a.qp,
                &list,
                1,
                libc::EOPNOTSUPP,
                &format!("RTS: post_send {name} (list of {n})"),
            );
        }
    }
    let tx1 = emu
        .port_stat(0, "tx")
        .unwrap_or_else(|e| fail(format!("emulator port stat: {e}")));
    dst.bytes().fill(0);
    fill(map.bytes(), 3);
    let wc = write_once(
        &ctx,
        &a,
        write_wr(9, addr, 64, mr.lkey, dst.addr(), dmr.rkey),
        "WRITE after the refused requests",
    );
    let more = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        tx1 == tx0
            && wc.wr_id == 9
            && wc.status == WC_SUCCESS
            && more.is_empty()
            && dst.bytes()[..64] == map.bytes()[..64]
            && dst.bytes()[64] == 0,
        format!(
            "RTS: no frame sent for the refused requests ({} frames), the next WRITE is the only completion ({:?}) and lands",
            tx1 - tx0,
            wc
        ),
    );
    teardown(&ctx, [a, b], [dmr]);
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    ctx.destroy_qp(qp2)
        .unwrap_or_else(|e| fail(format!("destroy QP: {e}")));
    ctx.destroy_qp(qp)
        .unwrap_or_else(|e| fail(format!("destroy QP: {e}")));
    ctx.destroy_cq(cq)
        .unwrap_or_else(|e| fail(format!("destroy CQ: {e}")));
    println!("PASS");
}

/// A source region of `len` bytes at iova `iova` filled with the pattern of
/// `seed`, and a destination region as long at iova `diova` that takes
/// remote WRITEs (its bytes zero), both registered in `pd`.
struct Regions {
    src: Mapping,
    dst: Mapping,
    smr: Mr,
    dmr: Mr,
    iova: u64,
    diova: u64,
}

impl Regions {
    fn new(ctx: &Context, pd: &Pd, len: usize, seed: u64, (iova, diova): (u64, u64)) -> Self {
        let mut src = Mapping::new(len);
        fill(src.bytes(), seed);
        let dst = Mapping::new(len);
        let smr = ctx
            .reg_mr(
                pd,
                src.addr(),
                len as u64,
                iova,
                IB_UVERBS_ACCESS_LOCAL_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr source: {e}")));
        let dmr = ctx
            .reg_mr(
                pd,
                dst.addr(),
                len as u64,
                diova,
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
        Self {
            src,
            dst,
            smr,
            dmr,
            iova,
            diova,
        }
    }
}

/// One end of an RC connection: a QP on `port`, its CQ, and the port's
/// addresses.
struct End {
    cq: Cq,
    qp: Qp,
    port: u8,
    info: gaudi_ib_port_info,
}

/// Destroy the QPs and CQs of `ends` (each must succeed).
fn destroy_ends<const N: usize>(ctx: &Context, ends: [End; N]) {
    for e in ends {
        ctx.destroy_qp(e.qp)
            .unwrap_or_else(|err| fail(format!("destroy QP: {err}")));
        ctx.destroy_cq(e.cq)
            .unwrap_or_else(|err| fail(format!("destroy CQ: {err}")));
    }
}

/// Destroy `ends` and deregister `mrs` (each must succeed), check that the
/// emulator's DMA audit is still 0, and report the pass.
fn teardown<const N: usize, const M: usize>(ctx: &Context, ends: [End; N], mrs: [Mr; M]) {
    destroy_ends(ctx, ends);
    for mr in mrs {
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    }
    check(
        stat(&mut emu(), "dma_audit") == 0,
        "emulator DMA audit 0".into(),
    );
    println!("PASS");
}

fn open_ctx() -> Context {
    let path = find_device().unwrap_or_else(|e| fail(format!("find device: {e}")));
    Context::open(&path).unwrap_or_else(|e| fail(format!("open {}: {e}", path.display())))
}

/// A QP on `port` with its own CQ (on `channel` if given), in RESET.
fn end(ctx: &Context, pd: &Pd, port: u8, channel: Option<&CompChannel>) -> End {
    end_sized(ctx, pd, port, (128, 256), channel)
}

/// As [`end`], with a send queue of `sizes.0` requests and a CQ of
/// `sizes.1` entries.
fn end_sized(
    ctx: &Context,
    pd: &Pd,
    port: u8,
    sizes: (u32, u32),
    channel: Option<&CompChannel>,
) -> End {
    end_sge(ctx, pd, port, sizes, (1, 0), channel)
}

/// As [`end_sized`], with requests of up to `sge.0` SGEs and `sge.1` bytes of
/// inline data.
fn end_sge(
    ctx: &Context,
    pd: &Pd,
    port: u8,
    (sq, cqe): (u32, u32),
    (sge, inline): (u32, u32),
    channel: Option<&CompChannel>,
) -> End {
    let cq = ctx
        .create_cq_on(cqe, channel)
        .unwrap_or_else(|e| fail(format!("create CQ of {cqe}: {e}")));
    // Four receives: the credits of WRITEs with immediate (write-loopback).
    let caps = QpCaps {
        max_send_wr: sq,
        max_send_sge: sge,
        max_inline_data: inline,
        max_recv_wr: 4,
        max_recv_sge: 1,
    };
    let qp = ctx
        .create_qp(pd, &cq, IB_UVERBS_QPT_RC, caps)
        .unwrap_or_else(|e| fail(format!("create QP of {sq} WRs of {sge} SGEs: {e}")));
    let info = ctx
        .query_port(u64::from(port))
        .unwrap_or_else(|e| fail(format!("query port {port}: {e}")));
    // Peers reach the port at its address from the start.
    roce_address(port, gaudi_verbs::port_ipv4(&info), None)
        .unwrap_or_else(|e| fail(format!("port {port} address: {e}")));
    End { cq, qp, port, info }
}

/// Bring `e` to RTS towards a peer at `mac`/`ipv4` with QP `dest_qpn`:
/// its WRITEs carry `remote_rkey`, incoming ones must carry `local_rkey`.
fn connect(
    ctx: &Context,
    e: &End,
    mac: [u8; 6],
    ipv4: [u8; 4],
    dest_qpn: u32,
    remote_rkey: u32,
    local_rkey: u32,
) {
    connect_mtu(
        ctx,
        e,
        mac,
        ipv4,
        dest_qpn,
        remote_rkey,
        local_rkey,
        (MTU_4096, 14),
    );
}

/// As [`connect`], with path MTU `mtu.0` (`enum ib_mtu`) and local ACK
/// timeout `mtu.1` (4.096 us * 2^n).
#[allow(clippy::too_many_arguments)]
fn connect_mtu(
    ctx: &Context,
    e: &End,
    mac: [u8; 6],
    ipv4: [u8; 4],
    dest_qpn: u32,
    remote_rkey: u32,
    local_rkey: u32,
    mtu: (u8, u8),
) {
    connect_psn(
        ctx,
        e,
        (mac, ipv4, dest_qpn),
        remote_rkey,
        local_rkey,
        mtu,
        0x100,
    );
}

/// As [`connect_mtu`], the peer as (MAC, IPv4, QPN), with both PSNs (sent
/// and expected) starting at `psn`. The MAC is not given to the kernel:
/// the core resolves it from the address.
fn connect_psn(
    ctx: &Context,
    e: &End,
    (_mac, ipv4, dest_qpn): ([u8; 6], [u8; 4], u32),
    remote_rkey: u32,
    local_rkey: u32,
    mtu: (u8, u8),
    psn: u32,
) {
    let sgid_index = roce_address(e.port, gaudi_verbs::port_ipv4(&e.info), Some(ipv4))
        .unwrap_or_else(|err| fail(format!("port {} address: {err}", e.port)));
    connect_av(
        ctx,
        e,
        (gid_v4(ipv4), sgid_index, dest_qpn),
        (remote_rkey, local_rkey),
        mtu,
        psn,
    );
}

/// RESET to INIT on `port`, open to incoming WRITEs.
pub(crate) fn init_attrs(port: u8) -> ModifyQp {
    ModifyQp {
        attr_mask: QP_STATE | QP_PORT | QP_PKEY_INDEX | QP_ACCESS_FLAGS,
        qp_state: QPS_INIT,
        port_num: port,
        qp_access_flags: IB_UVERBS_ACCESS_REMOTE_WRITE,
        ..Default::default()
    }
}

/// Bring `e` through INIT and RTR to RTS with a standard address vector
/// only: from its port's GID `sgid_index` to `dgid`, QP `dest_qpn`; its
/// WRITEs carry `keys.0`, incoming ones must carry `keys.1`.
fn connect_av(
    ctx: &Context,
    e: &End,
    av: ([u8; 16], u8, u32),
    (remote_rkey, local_rkey): (u32, u32),
    mtu: (u8, u8),
    psn: u32,
) {
    let keys = gaudi_ib_modify_qp {
        flags: GAUDI_IB_MODIFY_QP_REMOTE_RKEY | GAUDI_IB_MODIFY_QP_LOCAL_RKEY,
        remote_rkey,
        local_rkey,
        ..Default::default()
    };
    connect_av_keys(ctx, e, av, Some(keys), mtu, psn);
}

/// As [`connect_av`], with the keys as driver data of the transition to RTR, or
/// none (as software that knows nothing of them connects).
fn connect_av_keys(
    ctx: &Context,
    e: &End,
    (dgid, sgid_index, dest_qpn): ([u8; 16], u8, u32),
    keys: Option<gaudi_ib_modify_qp>,
    mtu: (u8, u8),
    psn: u32,
) {
    ctx.modify_qp(&e.qp, &init_attrs(e.port))
        .unwrap_or_else(|err| fail(format!("QP {} to INIT: {err}", e.qp.qpn)));
    // The peer by its GID alone: the core resolves its MAC.
    let rtr = ModifyQp {
        attr_mask: QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC,
        qp_state: QPS_RTR,
        path_mtu: mtu.0,
        dest_qp_num: dest_qpn,
        rq_psn: psn,
        ah: Ah {
            port_num: e.port,
            dgid,
            sgid_index,
            hop_limit: 64,
            ..Default::default()
        },
        driver: keys,
        ..Default::default()
    };
    ctx.modify_qp(&e.qp, &rtr)
        .unwrap_or_else(|err| fail(format!("QP {} to RTR: {err}", e.qp.qpn)));
    let rts = ModifyQp {
        attr_mask: QP_STATE | QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY,
        qp_state: QPS_RTS,
        sq_psn: psn,
        timeout: mtu.1,
        retry_cnt: 7,
        rnr_retry: 7,
        ..Default::default()
    };
    ctx.modify_qp(&e.qp, &rts)
        .unwrap_or_else(|err| fail(format!("QP {} to RTS: {err}", e.qp.qpn)));
}

/// With an IPv6 destination in `av` (the NIC sends RoCE over IPv4 only):
/// the QP's move to RTR towards it fails with EOPNOTSUPP and the QP stays
/// in INIT. Returns whether it was checked.
fn ipv6_refused(ctx: &Context, e: &End, (dgid, sgid_index, dest_qpn): ([u8; 16], u8, u32)) -> bool {
    if std::net::Ipv6Addr::from(dgid).to_ipv4_mapped().is_some() {
        return false;
    }
    ctx.modify_qp(&e.qp, &init_attrs(e.port))
        .unwrap_or_else(|err| fail(format!("QP {} to INIT: {err}", e.qp.qpn)));
    let rtr = ModifyQp {
        attr_mask: QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC,
        qp_state: QPS_RTR,
        path_mtu: MTU_4096,
        dest_qp_num: dest_qpn,
        rq_psn: 0x100,
        ah: Ah {
            port_num: e.port,
            dgid,
            sgid_index,
            hop_limit: 64,
            ..Default::default()
        },
        ..Default::default()
    };
    expect_errno(
        &format!(
            "QP {} to RTR towards {} (IPv6: not on the NIC)",
            e.qp.qpn,
            std::net::Ipv6Addr::from(dgid)
        ),
        ctx.modify_qp(&e.qp, &rtr),
        libc::EOPNOTSUPP,
    );
    let state = ctx
        .query_qp(&e.qp)
        .map(|a| a.qp_state)
        .unwrap_or_else(|err| fail(format!("query QP: {err}")));
    check(
        state == QPS_INIT,
        format!("QP {} stays in INIT ({state})", e.qp.qpn),
    );
    true
}

/// Two QPs of one device, `a` on port `pa` writing to `b` on port `pb`,
/// connected; writes to `b` must carry `rkey`.
fn loopback_pair(ctx: &Context, pd: &Pd, pa: u8, pb: u8, rkey: u32) -> (End, End) {
    let a = end(ctx, pd, pa, None);
    let b = end(ctx, pd, pb, None);
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

/// Set each byte of `dst` to the complement of the byte of `src` a WRITE
/// will put there: a WRITE that does not land cannot pass for one that did.
fn poison(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = !*s;
    }
}

/// Word `i` (bytes `8 * i` on, little-endian) of [`fill`]'s pattern of
/// `seed`: a counter times an odd constant, plus the seed's start, mixed by
/// an invertible xorshift, so that no two words of a buffer are alike (a
/// WRITE that lands one word off does not pass). rxe-peer.c computes the
/// same words.
fn pattern_word(seed: u64, i: u64) -> u64 {
    let w = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(i.wrapping_mul(0xd1b5_4a32_d192_ed03));
    w ^ (w >> 29)
}

/// A deterministic pattern, different for each `seed` ([`pattern_word`]).
/// Each word depends on its index only, so the loop vectorizes: a GiB is
/// filled in seconds under TCG.
fn fill(buf: &mut [u8], seed: u64) {
    fill_from(buf, seed, 0);
}

/// [`fill`]'s pattern of `seed` from its word `first` on.
fn fill_from(buf: &mut [u8], seed: u64, first: u64) {
    let mut words = buf.chunks_exact_mut(8);
    let mut i = first;
    for chunk in &mut words {
        chunk.copy_from_slice(&pattern_word(seed, i).to_le_bytes());
        i += 1;
    }
    let tail = words.into_remainder();
    let n = tail.len();
    tail.copy_from_slice(&pattern_word(seed, i).to_le_bytes()[..n]);
}

/// Post one signalled WRITE of `len` bytes from `src` (an address of
/// `lkey`'s region) to device VA `dst` and wait for its completion.
fn write_once(ctx: &Context, e: &End, wr: SendWr, what: &str) -> Wc {
    let id = wr.wr_id;
    if let Err((err, bad)) = ctx.post_send(&e.qp, &[wr]) {
        fail(format!("{what}: post_send: {err} (bad_wr {bad})"));
    }
    let wcs = ctx
        .wait_cq(&e.cq, 1, 120_000)
        .unwrap_or_else(|err| fail(format!("{what}: poll: {err}")));
    let Some(wc) = wcs.first().copied() else {
        fail(format!("{what}: no completion within 120 s"));
    };
    if wc.wr_id != id || wc.qp_num != e.qp.qpn || wc.opcode != IB_UVERBS_WC_RDMA_WRITE {
        fail(format!("{what}: completion {wc:?}, expected wr_id {id}"));
    }
    wc
}

/// Register all of `m` with `access`, its iova its address.
fn reg_mapping(ctx: &Context, pd: &Pd, m: &Mapping, access: u32) -> Mr {
    ctx.reg_mr(pd, m.addr(), m.len as u64, m.addr(), access)
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")))
}

/// Posting `wrs` on `qp` must fail with EINVAL, naming request `bad` (from 1).
fn post_refused(ctx: &Context, qp: &Qp, wrs: &[SendWr], bad: u32, what: &str) {
    post_refused_with(ctx, qp, wrs, bad, libc::EINVAL, what);
}

/// Posting `wrs` on `qp` must fail with `want`, naming request `bad` (from 1).
fn post_refused_with(ctx: &Context, qp: &Qp, wrs: &[SendWr], bad: u32, want: i32, what: &str) {
    match ctx.post_send(qp, wrs) {
        Ok(()) => fail(format!("{what}: accepted")),
        Err((e, got)) => check(
            errno(&e) == want && got == bad,
            format!("{what}: errno {} ({e}), bad_wr {got}", errno(&e)),
        ),
    }
}

fn write_wr(id: u64, addr: u64, len: u32, lkey: u32, raddr: u64, rkey: u32) -> SendWr {
    SendWr {
        wr_id: id,
        opcode: IB_UVERBS_WR_RDMA_WRITE,
        send_flags: SEND_SIGNALED,
        remote_addr: raddr,
        rkey,
        sges: vec![Sge {
            addr,
            length: len,
            lkey,
        }],
        ..Default::default()
    }
}

/// `write-loopback`: WRITEs from port A to port B of the device, sizes 1 B
/// to `--max-mib` MiB, addressed by the destination region's iova, land byte
/// for byte (the destination holds other bytes before each); a WRITE with
/// immediate and a WRITE of no data are refused at post (the NIC's WQEs
/// carry no immediate, and it refuses size 0); the completion channel
/// reports an armed CQ; the QP's state and PSNs read back.
fn write_loopback(args: &[String]) {
    let max = arg(args, "--max-mib", Some(1024)) as usize * MIB;
    let (pa, pb) = (
        arg(args, "--from", Some(1)) as u8,
        arg(args, "--to", Some(2)) as u8,
    );
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(max);
    let mut dst = Mapping::new(max);
    let t = std::time::Instant::now();
    fill(src.bytes(), 1);
    println!("# filled {} MiB in {:?}", max / MIB, t.elapsed());
    // Neither region's iova is its address: SGEs name the source's iova
    // (the driver rewrites it to a device VA), WRITEs the destination's
    // (the responder checks it against its region and translates it).
    let iova = 0x7000_0000_0000u64;
    let diova = 0x6000_0000_0000u64;
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            max as u64,
            iova,
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr source: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            max as u64,
            diova,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
    // A region open to remote writes sits at its iova in its PD's ASID (the
    // address a peer's WRITE carries, which the NIC translates unchanged).
    check(
        dmr.resp.mmu_va == diova,
        format!(
            "destination: iova {diova:#x}, device VA {:#x}",
            dmr.resp.mmu_va
        ),
    );
    let (a, b) = loopback_pair(&ctx, &pd, pa, pb, dmr.rkey);
    check(
        true,
        format!(
            "QP {} (port {pa}) -> QP {} (port {pb}) connected",
            a.qp.qpn, b.qp.qpn
        ),
    );
    let q = ctx
        .query_qp(&a.qp)
        .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
    check(
        q.qp_state == QPS_RTS && q.port_num == pa && q.dest_qp_num == b.qp.qpn && q.sq_psn == 0x100,
        format!(
            "query_qp: state {}, port {}, dest QP {}, sq_psn {:#x}",
            q.qp_state, q.port_num, q.dest_qp_num, q.sq_psn
        ),
    );

    let sizes = write_sizes(max);
    let mut off = 0usize;
    for (i, &len) in sizes.iter().enumerate() {
        // Small writes at odd offsets of both regions, large ones at 0.
        let (so, d_o) = if len < MIB {
            (off % 4096 + 3, off % 8192 + 5)
        } else {
            (0, 0)
        };
        off += 977;
        // The destination holds other bytes than the source's, so that
        // nothing an earlier WRITE left there can pass for this one.
        poison(&mut dst.bytes()[d_o..d_o + len], &src.bytes()[so..so + len]);
        let t = std::time::Instant::now();
        let wc = write_once(
            &ctx,
            &a,
            write_wr(
                1000 + i as u64,
                iova + so as u64,
                len as u32,
                smr.lkey,
                diova + d_o as u64,
                dmr.rkey,
            ),
            &format!("WRITE of {len} bytes"),
        );
        let took = t.elapsed();
        let d = &dst.bytes()[d_o..d_o + len];
        let sbytes = &src.bytes()[so..so + len];
        let same = d == sbytes;
        check(
            wc.status == WC_SUCCESS && wc.byte_len == len as u32 && same,
            format!(
                "WRITE of {len} bytes port {pa} -> {pb}: status {}, byte_len {}, data {} ({:?})",
                wc.status,
                wc.byte_len,
                if same { "byte-exact" } else { "DIFFERS" },
                took
            ),
        );
        // Untouched around it (sizes grow: nothing wrote past the end yet).
        let dd = dst.bytes();
        check(
            (d_o == 0 || dd[d_o - 1] == 0) && (d_o + len == max || dd[d_o + len] == 0),
            format!("bytes around the {len}-byte WRITE untouched"),
        );
        if len < MIB {
            dd[d_o..d_o + len].fill(0);
        }
    }

    // The NIC's WQEs carry no immediate, and it refuses a WRITE of no data
    // (syndrome 0x84): both are refused at post.
    let mut wr = write_wr(77, iova, 4096, smr.lkey, diova, dmr.rkey);
    wr.opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
    post_refused_with(
        &ctx,
        &a.qp,
        &[wr],
        1,
        libc::EOPNOTSUPP,
        "WRITE with immediate",
    );
    post_refused_with(
        &ctx,
        &a.qp,
        &[write_wr(76, iova, 0, smr.lkey, diova, dmr.rkey)],
        1,
        libc::EOPNOTSUPP,
        "WRITE of no data",
    );

    // Unsignalled WRITEs complete with the next signalled one.
    poison(&mut dst.bytes()[..8 * 4096], &src.bytes()[..8 * 4096]);
    let mut list: Vec<SendWr> = (0..8)
        .map(|k| {
            let mut w = write_wr(
                200 + k,
                iova + k * 4096,
                4096,
                smr.lkey,
                diova + k * 4096,
                dmr.rkey,
            );
            w.send_flags = 0;
            w
        })
        .collect();
    list[7].send_flags = SEND_SIGNALED;
    if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
        fail(format!("post 8 WRITEs: {e} (bad_wr {bad})"));
    }
    let wcs = ctx
        .wait_cq(&a.cq, 1, 10_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    let more = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        wcs.len() == 1
            && wcs[0].wr_id == 207
            && more.is_empty()
            && dst.bytes()[..8 * 4096] == src.bytes()[..8 * 4096],
        format!(
            "7 unsignalled WRITEs and a signalled one: one completion (wr_id {:?}), data landed",
            wcs.first().map(|w| w.wr_id)
        ),
    );

    // Unsignalled WRITEs posted one per call, with no signalled one after
    // them: each rings the doorbell, and the data lands without any
    // completion (the bytes are watched, not a CQ); a signalled WRITE then
    // completes alone.
    poison(&mut dst.bytes()[..4 * 4096], &src.bytes()[..4 * 4096]);
    for k in 0..4u64 {
        let mut w = write_wr(
            400 + k,
            iova + k * 4096,
            4096,
            smr.lkey,
            diova + k * 4096,
            dmr.rkey,
        );
        w.send_flags = 0;
        if let Err((e, bad)) = ctx.post_send(&a.qp, &[w]) {
            fail(format!("post unsignalled WRITE {k}: {e} (bad_wr {bad})"));
        }
    }
    let t = std::time::Instant::now();
    let want = src.bytes()[..4 * 4096].to_vec();
    let landed = |dst: &Mapping| {
        let p = dst.addr() as *const u8;
        // SAFETY: the first 16 KiB of the mapping are mapped for as long as
        // `dst` lives; the device writes them, hence volatile reads.
        (0..want.len()).all(|i| unsafe { std::ptr::read_volatile(p.add(i)) } == want[i])
    };
    while !landed(&dst) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let early = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        landed(&dst) && early.is_empty(),
        format!(
            "4 unsignalled WRITEs, each posted alone: data landed in {:?} with no completion ({} CQEs)",
            t.elapsed(),
            early.len()
        ),
    );
    let wc = write_once(
        &ctx,
        &a,
        write_wr(404, iova, 64, smr.lkey, diova, dmr.rkey),
        "signalled WRITE after unsignalled ones",
    );
    let more = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        wc.wr_id == 404 && wc.status == WC_SUCCESS && more.is_empty(),
        format!(
            "then a signalled WRITE: one completion (wr_id {}), {} more",
            wc.wr_id,
            more.len()
        ),
    );

    // Requests of several SGEs (one WQE per SGE in the driver): the SGEs'
    // bytes land one after the other from the remote address, the neighbours
    // untouched, with one completion of the whole length; an SGE of no bytes
    // adds nothing. When the first SGE's WRITE fails, the request completes
    // once, in error (the flush of the rest is not a second completion).
    let g = end_sge(&ctx, &pd, pa, (16, 32), (4, 220), None);
    let h = end(&ctx, &pd, pb, None);
    connect(
        &ctx,
        &g,
        h.info.mac,
        gaudi_verbs::port_ipv4(&h.info),
        h.qp.qpn,
        dmr.rkey,
        0,
    );
    connect(
        &ctx,
        &h,
        g.info.mac,
        gaudi_verbs::port_ipv4(&g.info),
        g.qp.qpn,
        0,
        dmr.rkey,
    );
    check(
        g.qp.max_send_sge == 4 && g.qp.max_send_wr >= 16 && g.qp.max_inline_data == 256,
        format!(
            "QP of 16 requests of 4 SGEs and 220 inline bytes: granted {} of {}, {} inline bytes",
            g.qp.max_send_wr, g.qp.max_send_sge, g.qp.max_inline_data
        ),
    );
    dst.bytes()[..64 * 1024].fill(0);
    let parts = [(100u64, 1000u32), (5000, 0), (9000, 3000), (20_003, 7)];
    let total: u32 = parts.iter().map(|p| p.1).sum();
    let sg = |off: u64| diova + off;
    let mut wr = write_wr(500, 0, 0, smr.lkey, sg(300), dmr.rkey);
    wr.sges = parts
        .iter()
        .map(|&(o, l)| Sge {
            addr: iova + o,
            length: l,
            lkey: smr.lkey,
        })
        .collect();
    let wc = write_once(&ctx, &g, wr.clone(), "WRITE of 4 SGEs");
    let more = ctx.poll_cq(&g.cq, 4).unwrap_or_default();
    let want: Vec<u8> = parts
        .iter()
        .flat_map(|&(o, l)| src.bytes()[o as usize..(o + u64::from(l)) as usize].to_vec())
        .collect();
    let dd = dst.bytes();
    let end_at = 300 + total as usize;
    check(
        wc.status == WC_SUCCESS
            && wc.byte_len == total
            && more.is_empty()
            && dd[300..end_at] == want[..]
            && dd[299] == 0
            && dd[end_at] == 0,
        format!(
            "WRITE of 4 SGEs (1000, 0, 3000 and 7 bytes): status {}, byte_len {} of {total}, {} more completions, data {}",
            wc.status,
            wc.byte_len,
            more.len(),
            if dd[300..end_at] == want[..] { "in order and byte-exact" } else { "DIFFERS" }
        ),
    );
    // Inline: the data is taken when the request is posted (the buffers are
    // overwritten before the completion; their lkey is 0), from two buffers
    // one after the other; 257 bytes are refused, and so is a buffer the
    // poster cannot read (EFAULT).
    dst.bytes()[..64 * 1024].fill(0);
    let mut b1: Vec<u8> = (0..100u32).map(|i| (i * 7 + 1) as u8).collect();
    let mut b2: Vec<u8> = (0..120u32).map(|i| (i * 13 + 5) as u8).collect();
    let want: Vec<u8> = b1.iter().chain(b2.iter()).copied().collect();
    let inline_wr = |id: u64, bufs: &[(u64, u32)]| SendWr {
        wr_id: id,
        opcode: IB_UVERBS_WR_RDMA_WRITE,
        send_flags: SEND_SIGNALED | SEND_INLINE,
        remote_addr: diova + 40_000,
        rkey: dmr.rkey,
        imm_data: 0,
        sges: bufs
            .iter()
            .map(|&(addr, length)| Sge {
                addr,
                length,
                lkey: 0,
            })
            .collect(),
    };
    let w = inline_wr(510, &[(b1.as_ptr() as u64, 100), (b2.as_ptr() as u64, 120)]);
    if let Err((e, bad)) = ctx.post_send(&g.qp, &[w]) {
        fail(format!("post an inline WRITE: {e} (bad_wr {bad})"));
    }
    b1.fill(0xee);
    b2.fill(0xee);
    let wcs = ctx.wait_cq(&g.cq, 1, 10_000).unwrap_or_default();
    let dd = dst.bytes();
    check(
        wcs.len() == 1
            && wcs[0].wr_id == 510
            && wcs[0].status == WC_SUCCESS
            && wcs[0].byte_len == 220
            && dd[40_000..40_220] == want[..]
            && dd[39_999] == 0
            && dd[40_220] == 0,
        format!(
            "inline WRITE of 100 + 120 bytes, sources overwritten after posting: completion {:?}, data {}",
            wcs.first().map(|w| (w.wr_id, w.status, w.byte_len)),
            if dd[40_000..40_220] == want[..] { "as posted" } else { "DIFFERS" }
        ),
    );
    let big = vec![1u8; 257];
    post_refused(
        &ctx,
        &g.qp,
        &[inline_wr(511, &[(big.as_ptr() as u64, 257)])],
        1,
        "inline WRITE of 257 bytes",
    );
    post_refused_with(
        &ctx,
        &g.qp,
        &[inline_wr(512, &[(0x10, 8)])],
        1,
        libc::EFAULT,
        "inline WRITE from an unmapped address",
    );
    let mut imm = wr.clone();
    imm.opcode = IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
    post_refused_with(
        &ctx,
        &g.qp,
        &[imm],
        1,
        libc::EOPNOTSUPP,
        "WRITE with immediate of 3 SGEs with data",
    );
    wr.sges.push(Sge {
        addr: iova,
        length: 1,
        lkey: smr.lkey,
    });
    post_refused(
        &ctx,
        &g.qp,
        &[wr.clone()],
        1,
        "request of 5 SGEs on a QP of 4",
    );
    wr.sges.truncate(3);
    wr.wr_id = 501;
    // The first SGE's WRITE reaches past the destination region.
    wr.remote_addr = diova + max as u64 - 10;
    let got = ctx.post_send(&g.qp, &[wr]).map_err(|(e, _)| e);
    let wcs = ctx.wait_cq(&g.cq, 1, 10_000).unwrap_or_default();
    std::thread::sleep(Duration::from_millis(300));
    let more = ctx.poll_cq(&g.cq, 4).unwrap_or_default();
    check(
        got.is_ok()
            && wcs.len() == 1
            && wcs[0].wr_id == 501
            && wcs[0].status == WC_REM_ACCESS_ERR
            && more.is_empty(),
        format!(
            "WRITE of 3 SGEs whose first fails: post {got:?}, completions {:?} then {} more",
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            more.len()
        ),
    );

    // Notification: an armed CQ on a channel reports the next completion.
    let ch = ctx
        .create_comp_channel()
        .unwrap_or_else(|e| fail(format!("completion channel: {e}")));
    let c = end(&ctx, &pd, pa, Some(&ch));
    let d = end(&ctx, &pd, pb, None);
    connect(
        &ctx,
        &c,
        d.info.mac,
        gaudi_verbs::port_ipv4(&d.info),
        d.qp.qpn,
        dmr.rkey,
        0,
    );
    connect(
        &ctx,
        &d,
        c.info.mac,
        gaudi_verbs::port_ipv4(&c.info),
        c.qp.qpn,
        0,
        dmr.rkey,
    );
    ctx.req_notify_cq(&c.cq)
        .unwrap_or_else(|e| fail(format!("req_notify_cq: {e}")));
    check(
        matches!(ch.next(0), Ok(None)),
        "no completion event before a completion".into(),
    );
    if let Err((e, bad)) =
        ctx.post_send(&c.qp, &[write_wr(300, iova, 64, smr.lkey, diova, dmr.rkey)])
    {
        fail(format!("post: {e} (bad_wr {bad})"));
    }
    let ev = ch.next(10_000);
    check(
        // The event names the CQ by the user handle it was created with.
        matches!(ev, Ok(Some(h)) if h == c.cq.user_handle),
        format!("completion event on the channel: {ev:?}"),
    );
    let wcs = ctx.poll_cq(&c.cq, 4).unwrap_or_default();
    check(
        wcs.len() == 1 && wcs[0].wr_id == 300 && wcs[0].status == WC_SUCCESS,
        format!("the completion after the event: {:?}", wcs.first()),
    );

    teardown(&ctx, [a, b, c, d, g, h], [smr, dmr]);
}

/// `mr-out-of-bounds`: SGEs outside their region, unknown, stale and
/// deregistered keys, a wrong rkey and oversized lengths are refused with
/// EINVAL naming the request, before anything reaches the device (its MMU
/// fault count and DMA audit do not move); requests before a refused one in
/// a list are posted and land.
/// The requester rule of QPs given no remote rkey (software written for
/// other devices): the requester context holds one key and the driver never
/// replaces it behind the QP's back; the QP's keys are its PDs' (one key
/// per PD). The first WRITE after RTS binds the key it names and lands; a
/// WRITE with another PD's key is refused with EINVAL (posts nothing,
/// completes nothing, lands nothing) even with the queue idle; through
/// RESET the QP connects to another PD's responder and its first WRITE
/// binds that PD's key and lands there. A key given at RTR (the driver data
/// of MODIFY_QP) is bound from the start: the other key is refused at the
/// first WRITE.
fn rkey_rebind(_args: &[String]) {
    // Three contexts, each with its PD (one PD per context).
    let ctxs: Vec<Context> = (0..3).map(|_| open_ctx()).collect();
    let pds: Vec<Pd> = ctxs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.alloc_pd()
                .unwrap_or_else(|e| fail(format!("alloc_pd {i}: {e}")))
        })
        .collect();
    let ctx = &ctxs[0];
    let len = 16 * 1024usize;
    let mut src = Mapping::new(len);
    let mut d1 = Mapping::new(len);
    let mut d2 = Mapping::new(len);
    let remote = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    let smr = reg_mapping(ctx, &pds[0], &src, IB_UVERBS_ACCESS_LOCAL_WRITE);
    let m1 = reg_mapping(&ctxs[1], &pds[1], &d1, remote);
    let m2 = reg_mapping(&ctxs[2], &pds[2], &d2, remote);
    check(
        m1.rkey != m2.rkey,
        format!("two PDs, two keys: {:#x} and {:#x}", m1.rkey, m2.rkey),
    );
    let a = end(ctx, &pds[0], 1, None);
    let b1 = end(&ctxs[1], &pds[1], 2, None);
    let b2 = end(&ctxs[2], &pds[2], 2, None);
    // a connects to `to` with the key `key` at RTR, or none; `to`, in
    // context `tc` and bound to `tk`, connects again too (both start their
    // PSNs over).
    let connect_a = |(tc, to, tk): (&Context, &End, u32), key: Option<u32>| {
        let reset = ModifyQp {
            attr_mask: QP_STATE,
            qp_state: QPS_RESET,
            ..Default::default()
        };
        for (c, e) in [(ctx, &a), (tc, to)] {
            c.modify_qp(&e.qp, &reset)
                .unwrap_or_else(|err| fail(format!("QP {} to RESET: {err}", e.qp.qpn)));
        }
        connect(
            tc,
            to,
            a.info.mac,
            gaudi_verbs::port_ipv4(&a.info),
            a.qp.qpn,
            0,
            tk,
        );
        let sgid = roce_address(
            a.port,
            gaudi_verbs::port_ipv4(&a.info),
            Some(gaudi_verbs::port_ipv4(&to.info)),
        )
        .unwrap_or_else(|err| fail(format!("port {} address: {err}", a.port)));
        let keys = key.map(|k| gaudi_ib_modify_qp {
            flags: GAUDI_IB_MODIFY_QP_REMOTE_RKEY,
            remote_rkey: k,
            ..Default::default()
        });
        connect_av_keys(
            ctx,
            &a,
            (gid_v4(gaudi_verbs::port_ipv4(&to.info)), sgid, to.qp.qpn),
            keys,
            (MTU_4096, 14),
            0x100,
        );
    };
    let (lk, sa) = (smr.lkey, src.addr());
    connect_a((&ctxs[1], &b1, m1.rkey), None);
    let first = "the first WRITE (binds PD 1's key)";
    rebind_lands(
        ctx,
        &a,
        (&mut src, lk, 61),
        (&mut d1, &mut d2),
        m1.rkey,
        first,
    );
    let what = "PD 2's key, the queue idle";
    rebind_refused(ctx, &a, (sa, lk), &mut d2, m2.rkey, what);
    let what = "PD 1's key again";
    rebind_lands(
        ctx,
        &a,
        (&mut src, lk, 62),
        (&mut d1, &mut d2),
        m1.rkey,
        what,
    );
    connect_a((&ctxs[2], &b2, m2.rkey), None);
    let what = "after RESET, the first WRITE to PD 2's responder";
    rebind_lands(
        ctx,
        &a,
        (&mut src, lk, 63),
        (&mut d2, &mut d1),
        m2.rkey,
        what,
    );
    connect_a((&ctxs[1], &b1, m1.rkey), Some(m1.rkey));
    let what = "PD 2's key, PD 1's given at RTR";
    rebind_refused(ctx, &a, (sa, lk), &mut d2, m2.rkey, what);
    let what = "PD 1's key, given at RTR";
    rebind_lands(
        ctx,
        &a,
        (&mut src, lk, 64),
        (&mut d1, &mut d2),
        m1.rkey,
        what,
    );
    destroy_ends(&ctxs[1], [b1]);
    destroy_ends(&ctxs[2], [b2]);
    for (c, m) in [(&ctxs[1], m1), (&ctxs[2], m2)] {
        c.dereg_mr(m)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    }
    teardown(ctx, [a], [smr]);
}

/// A WRITE of all of `src` (filled from `seed`) with `key` at `dst` lands
/// byte-exact; `other` is unchanged.
fn rebind_lands(
    ctx: &Context,
    a: &End,
    (src, lkey, seed): (&mut Mapping, u32, u64),
    (dst, other): (&mut Mapping, &mut Mapping),
    key: u32,
    what: &str,
) {
    fill(src.bytes(), seed);
    poison(dst.bytes(), src.bytes());
    let before = other.bytes().to_vec();
    let len = src.bytes().len() as u32;
    let wr = write_wr(seed, src.addr(), len, lkey, dst.addr(), key);
    let wc = write_once(ctx, a, wr, what);
    check(
        wc.status == WC_SUCCESS
            && dst.bytes()[..] == src.bytes()[..]
            && other.bytes()[..] == before[..],
        format!(
            "{what}: rkey {key:#x}, status {}, landed byte-exact, nothing elsewhere",
            wc.status
        ),
    );
}

/// A WRITE with `key` at `dst` is refused with EINVAL when posted: no
/// completion, nothing lands.
fn rebind_refused(
    ctx: &Context,
    a: &End,
    (sa, lkey): (u64, u32),
    dst: &mut Mapping,
    key: u32,
    what: &str,
) {
    let before = dst.bytes().to_vec();
    let wr = write_wr(90, sa, 64, lkey, dst.addr(), key);
    post_refused(ctx, &a.qp, &[wr], 1, what);
    std::thread::sleep(Duration::from_millis(100));
    let wcs = ctx.poll_cq(&a.cq, 4).unwrap_or_default();
    check(
        wcs.is_empty() && dst.bytes()[..] == before[..],
        format!("{what}: {} completions, nothing landed", wcs.len()),
    );
}

fn mr_out_of_bounds(_args: &[String]) {
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut emu = emu();
    let faults0 = stat(&mut emu, "mmu_faults");
    let len = 64 * 1024u64;
    let mut src = Mapping::new(len as usize);
    let mut dst = Mapping::new(len as usize);
    fill(src.bytes(), 5);
    let iova = 0x5000_0000u64;
    let smr = ctx
        .reg_mr(&pd, src.addr(), len, iova, IB_UVERBS_ACCESS_LOCAL_WRITE)
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            len,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    // WRITEs name the destination by its iova (here its address).
    let raddr = dst.addr();
    let rkey = dmr.rkey;

    // A stale key: registered, then deregistered.
    let mut other = Mapping::new(4096);
    other.bytes()[0] = 1;
    let stale = ctx
        .reg_mr(
            &pd,
            other.addr(),
            4096,
            other.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let stale_key = stale.lkey;
    ctx.dereg_mr(stale)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));

    let cases: Vec<(&str, SendWr)> = vec![
        (
            "before the region",
            write_wr(1, iova - 1, 16, smr.lkey, raddr, rkey),
        ),
        (
            "far before the region",
            write_wr(2, 0x1000, 16, smr.lkey, raddr, rkey),
        ),
        (
            "after the region",
            write_wr(3, iova + len, 1, smr.lkey, raddr, rkey),
        ),
        (
            "straddling the end",
            write_wr(4, iova + len - 8, 16, smr.lkey, raddr, rkey),
        ),
        (
            "one byte too long",
            write_wr(5, iova, len as u32 + 1, smr.lkey, raddr, rkey),
        ),
        (
            "address + length overflowing",
            write_wr(6, u64::MAX - 4, 16, smr.lkey, raddr, rkey),
        ),
        (
            "length beyond the largest message",
            write_wr(7, iova, u32::MAX, smr.lkey, raddr, rkey),
        ),
        (
            "unknown lkey",
            write_wr(8, iova, 16, 0x00de_adbe, raddr, rkey),
        ),
        (
            "stale lkey (deregistered region)",
            write_wr(9, other.addr(), 16, stale_key, raddr, rkey),
        ),
        (
            "rkey other than the QP's",
            write_wr(10, iova, 16, smr.lkey, raddr, rkey + 1),
        ),
    ];
    for (name, wr) in cases {
        post_refused(&ctx, &a.qp, &[wr], 1, &format!("SGE {name}"));
    }
    check(
        ctx.poll_cq(&a.cq, 4).unwrap_or_default().is_empty(),
        "no completion for refused requests".into(),
    );

    // In a list, the requests before the refused one are posted.
    let list = [
        write_wr(20, iova, 4096, smr.lkey, raddr, rkey),
        write_wr(21, iova + len - 4, 8, smr.lkey, raddr, rkey),
        write_wr(22, iova, 4096, smr.lkey, raddr, rkey),
    ];
    post_refused(&ctx, &a.qp, &list, 2, "list with a bad second request");
    let wcs = ctx
        .wait_cq(&a.cq, 1, 10_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    check(
        wcs.len() == 1
            && wcs[0].wr_id == 20
            && wcs[0].status == WC_SUCCESS
            && dst.bytes()[..4096] == src.bytes()[..4096],
        format!(
            "the request before it completed and landed: {:?}",
            wcs.first().map(|w| (w.wr_id, w.status))
        ),
    );

    // The exact bounds are accepted: first and last byte.
    write_once(
        &ctx,
        &a,
        write_wr(30, iova, 1, smr.lkey, raddr + 100, rkey),
        "first byte",
    );
    write_once(
        &ctx,
        &a,
        write_wr(31, iova + len - 1, 1, smr.lkey, raddr + 101, rkey),
        "last byte",
    );
    check(
        dst.bytes()[100] == src.bytes()[0] && dst.bytes()[101] == src.bytes()[len as usize - 1],
        "the region's first and last bytes are accepted and land".into(),
    );
    // A deregistered region's key is refused afterwards too.
    ctx.dereg_mr(smr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    post_refused(
        &ctx,
        &a.qp,
        &[write_wr(40, iova, 16, 1, raddr, rkey)],
        1,
        "WRITE from a deregistered region",
    );
    let faults = stat(&mut emu, "mmu_faults");
    check(
        faults == faults0,
        format!("device MMU faults unchanged ({faults0} -> {faults})"),
    );
    teardown(&ctx, [a, b], [dmr]);
}

fn port_stat(emu: &mut EmuCtl, port: u32, field: &str) -> u64 {
    emu.port_stat(port, field)
        .unwrap_or_else(|e| fail(format!("emulator stat port {port} {field}: {e}")))
}

/// Bring both ends of a loopback pair back from any state to RTS.
fn reconnect(ctx: &Context, a: &End, b: &End, rkey: u32) {
    reconnect_keys(ctx, a, b, rkey, rkey);
}

/// As [`reconnect`], `a`'s WRITEs carrying `remote`, `b` taking WRITEs
/// that carry `local`.
fn reconnect_keys(ctx: &Context, a: &End, b: &End, remote: u32, local: u32) {
    for e in [a, b] {
        let reset = ModifyQp {
            attr_mask: QP_STATE,
            qp_state: QPS_RESET,
            ..Default::default()
        };
        ctx.modify_qp(&e.qp, &reset)
            .unwrap_or_else(|err| fail(format!("QP {} to RESET: {err}", e.qp.qpn)));
    }
    connect(
        ctx,
        a,
        b.info.mac,
        gaudi_verbs::port_ipv4(&b.info),
        b.qp.qpn,
        remote,
        0,
    );
    connect(
        ctx,
        b,
        a.info.mac,
        gaudi_verbs::port_ipv4(&a.info),
        a.qp.qpn,
        0,
        local,
    );
}

/// `write-errors`: dropped and corrupted frames are retransmitted and the
/// data still lands; a link going down mid-transfer ends the transfer with
/// RETRY_EXC_ERR, flushes what follows, reports QP_FATAL and leaves the QP
/// in ERR (posting refused), all within bounded time; the QP recovers
/// through RESET.
/// A source of `len` bytes filled from `seed` and a destination open to
/// remote writes, each registered at its own address as iova.
fn src_dst(ctx: &Context, pd: &Pd, len: usize, seed: u64) -> (Mapping, Mapping, Mr, Mr) {
    let mut src = Mapping::new(len);
    let dst = Mapping::new(len);
    fill(src.bytes(), seed);
    let reg = |m: &Mapping, access| {
        ctx.reg_mr(pd, m.addr(), len as u64, m.addr(), access)
            .unwrap_or_else(|e| fail(format!("reg_mr: {e}")))
    };
    let smr = reg(&src, IB_UVERBS_ACCESS_LOCAL_WRITE);
    let dmr = reg(
        &dst,
        IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
    );
    (src, dst, smr, dmr)
}

fn write_errors(_args: &[String]) {
    let (ctx, events, pd) = open_with_events();
    let len = 64 * MIB;
    let (mut src, mut dst, smr, dmr) = src_dst(&ctx, &pd, len, 9);
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let mut emu = emu();
    let (saddr, lkey, raddr, rkey) = (src.addr(), smr.lkey, dst.addr(), dmr.rkey);
    let wr = |id: u64, n: usize| write_wr(id, saddr, n as u32, lkey, raddr, rkey);

    // Dropped frames: go-back-N resends them.
    let re0 = port_stat(&mut emu, 0, "retransmits");
    emu.command("drop 0 5")
        .unwrap_or_else(|e| fail(format!("drop: {e}")));
    let wc = write_once(&ctx, &a, wr(1, MIB), "WRITE with 5 frames dropped");
    let re = port_stat(&mut emu, 0, "retransmits") - re0;
    check(
        wc.status == WC_SUCCESS && re >= 5 && dst.bytes()[..MIB] == src.bytes()[..MIB],
        format!(
            "5 frames dropped: status {}, {re} packets resent, 1 MiB landed byte-exact",
            wc.status
        ),
    );
    dst.bytes()[..MIB].fill(0);

    // Corrupted frames: the receiver drops them (bad ICRC), the sender resends.
    let icrc0 = port_stat(&mut emu, 1, "icrc_errors");
    emu.command("corrupt 0 3")
        .unwrap_or_else(|e| fail(format!("corrupt: {e}")));
    let wc = write_once(&ctx, &a, wr(2, MIB), "WRITE with 3 frames corrupted");
    let icrc = port_stat(&mut emu, 1, "icrc_errors") - icrc0;
    check(
        wc.status == WC_SUCCESS && icrc == 3 && dst.bytes()[..MIB] == src.bytes()[..MIB],
        format!(
            "3 frames corrupted: status {}, {icrc} ICRC errors at the receiver, data landed",
            wc.status
        ),
    );

    // Link down in the middle of 64 MiB, with two more requests queued.
    let t = std::time::Instant::now();
    if let Err((e, bad)) = ctx.post_send(&a.qp, &[wr(10, len), wr(11, 4096), wr(12, 4096)]) {
        fail(format!("post: {e} (bad_wr {bad})"));
    }
    std::thread::sleep(Duration::from_millis(30));
    emu.command("link 0 down")
        .unwrap_or_else(|e| fail(format!("link down: {e}")));
    let wcs = ctx
        .wait_cq(&a.cq, 3, 30_000)
        .unwrap_or_else(|e| fail(format!("poll: {e}")));
    let took = t.elapsed();
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    check(
        got == [
            (10, WC_RETRY_EXC_ERR),
            (11, WC_WR_FLUSH_ERR),
            (12, WC_WR_FLUSH_ERR),
        ],
        format!("link down mid-transfer: completions {got:?} after {took:?} (no hang)"),
    );
    let mut fatal = None;
    while let Ok(Some(ev)) = events.next(Duration::from_secs(5)) {
        if ev.event_type == IB_EVENT_QP_FATAL {
            fatal = Some(ev);
            break;
        }
    }
    check(
        fatal.is_some(),
        format!("QP_FATAL on the async event file: {fatal:?}"),
    );
    let q = ctx
        .query_qp(&a.qp)
        .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
    check(
        q.qp_state == QPS_ERR,
        format!("QP state after the error: {}", q.qp_state),
    );
    post_refused(&ctx, &a.qp, &[wr(20, 64)], 1, "post_send in ERR");

    // Recovery: link up, both ends through RESET to RTS, and a WRITE lands.
    emu.command("link 0 up")
        .unwrap_or_else(|e| fail(format!("link up: {e}")));
    std::thread::sleep(Duration::from_millis(100));
    reconnect(&ctx, &a, &b, dmr.rkey);
    dst.bytes().fill(0);
    let wc = write_once(&ctx, &a, wr(30, 4 * MIB), "WRITE after recovery");
    check(
        wc.status == WC_SUCCESS && dst.bytes()[..4 * MIB] == src.bytes()[..4 * MIB],
        "after RESET and reconnection a WRITE lands again".into(),
    );
    teardown(&ctx, [a, b], [smr, dmr]);
}

/// The first offset where `buf` differs from [`fill`]'s pattern of `seed`.
///
/// The pattern is made 64 KiB at a time ([`fill_from`]) and compared with
/// memcmp: word by word with an early exit, a GiB took seconds under TCG.
fn pattern_mismatch(buf: &[u8], seed: u64) -> Option<usize> {
    const STEP: usize = 64 * 1024;
    let mut want = vec![0u8; STEP];
    for (k, chunk) in buf.chunks(STEP).enumerate() {
        let want = &mut want[..chunk.len()];
        fill_from(want, seed, (k * STEP / 8) as u64);
        if chunk != want {
            let j = chunk.iter().zip(want.iter()).position(|(p, q)| p != q)?;
            return Some(k * STEP + j);
        }
    }
    None
}

/// The WRITE sizes of the tests that write: 1 B to `max`, around the page
/// and the MTU, then by 16 up to 64 MiB, then `max` itself (each size in
/// between costs the guest its fill and check, not a new path).
fn write_sizes(max: usize) -> Vec<usize> {
    let mut sizes = vec![1usize, 7, 4095, 4096, 4097, 65537, MIB, 16 * MIB, 64 * MIB];
    sizes.push(max);
    sizes.retain(|s| *s <= max);
    sizes.dedup();
    sizes
}

/// The value of `--peer`: the other host's management address.
fn peer_arg(args: &[String]) -> String {
    args.iter()
        .position(|a| a == "--peer")
        .and_then(|i| args.get(i + 1))
        .unwrap_or_else(|| fail("--peer missing".into()))
        .clone()
}

/// TCP port of the out-of-band exchange between the hosts of a test.
const EXCHANGE_PORT: u16 = 18515;

fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn parse_mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    v.try_into()
        .unwrap_or_else(|_| fail(format!("bad MAC {s}")))
}

fn parse_ip(s: &str) -> [u8; 4] {
    let a: std::net::Ipv4Addr = s.parse().unwrap_or_else(|_| fail(format!("bad IPv4 {s}")));
    a.octets()
}

/// The path MTU of a target: `--mtu 1024` (a software RoCE source on a
/// 1500-byte Ethernet), else 4096.
fn target_mtu(args: &[String]) -> u8 {
    match arg(args, "--mtu", Some(4096)) {
        4096 => MTU_4096,
        1024 => MTU_1024,
        m => fail(format!("path MTU {m} not used here")),
    }
}

/// A GID as 32 hex digits, for the exchange.
fn gid_hex(g: &[u8; 16]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_gid(s: &str) -> [u8; 16] {
    let v: Vec<u8> = (0..s.len())
        .step_by(2)
        .filter_map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    v.try_into()
        .unwrap_or_else(|_| fail(format!("bad GID {s}")))
}

/// The source GID of `e` for the two-host tests: with `--addr A/LEN` (IPv4
/// or IPv6), that address on the port's interface; else the port's
/// factory IPv4 address. Returns the GID and its index.
fn local_gid(args: &[String], e: &End) -> ([u8; 16], u8) {
    let Some(spec) = args
        .iter()
        .position(|a| a == "--addr")
        .and_then(|i| args.get(i + 1))
    else {
        let i = roce_address(e.port, gaudi_verbs::port_ipv4(&e.info), None)
            .unwrap_or_else(|err| fail(format!("port {} address: {err}", e.port)));
        return (gid_v4(gaudi_verbs::port_ipv4(&e.info)), i);
    };
    let addr: std::net::IpAddr = spec
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| fail(format!("bad --addr {spec}")));
    let gid = match addr {
        std::net::IpAddr::V4(a) => gid_v4(a.octets()),
        std::net::IpAddr::V6(a) => a.octets(),
    };
    let ib = ib_name().unwrap_or_else(|err| fail(format!("device name: {err}")));
    let ifc = port_netdev(&ib, e.port).unwrap_or_else(|err| fail(format!("{err}")));
    let run = |a: &[&str]| ip(a).unwrap_or_else(|err| fail(format!("{err}")));
    run(&["link", "set", "dev", &ifc, "up"]);
    if addr.is_ipv6() {
        run(&["addr", "replace", spec, "dev", &ifc, "nodad"]);
    } else {
        run(&["addr", "replace", spec, "dev", &ifc]);
    }
    let start = std::time::Instant::now();
    loop {
        if let Some(i) = gid_index(&ib, e.port, &gid) {
            println!(
                "# source GID {addr} is index {i} of port {} ({ifc})",
                e.port
            );
            return (gid, i);
        }
        if start.elapsed() > Duration::from_secs(10) {
            fail(format!("no RoCE v2 GID for {addr} on {ifc}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of `key=` in a line of the exchange.
fn kv<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| fail(format!("no {key} in {line:?}")))
}

fn kv_num(line: &str, key: &str) -> u64 {
    let v = kv(line, key);
    v.parse()
        .unwrap_or_else(|_| fail(format!("bad number {key}={v}")))
}

/// The test this run belongs to: init names it in `GAUDI_TEST`, a target's
/// name ends in `_target`. The first line of each side of the exchange
/// carries it, so that a source never pairs with the target of another
/// test (one that failed before dialling would otherwise shift the pairs).
pub(crate) fn test_name() -> String {
    let t = std::env::var("GAUDI_TEST").unwrap_or_else(|_| "none".into());
    t.strip_suffix("_target").unwrap_or(&t).to_string()
}

/// Fail unless the peer's first line names this run's test.
pub(crate) fn check_peer_test(line: &str) {
    let (mine, theirs) = (test_name(), kv(line, "test"));
    if mine != theirs {
        fail(format!(
            "paired with the peer of test {theirs}, this is {mine}"
        ));
    }
}

struct Peer {
    r: std::io::BufReader<std::net::TcpStream>,
    w: std::net::TcpStream,
}

impl Peer {
    /// Connect to the target host `ip` on the exchange port, waiting up to
    /// two minutes for it to listen.
    fn dial(ip: &str) -> Self {
        let start = std::time::Instant::now();
        loop {
            match std::net::TcpStream::connect((ip, EXCHANGE_PORT)) {
                Ok(s) => return Self::new(s),
                Err(_) if start.elapsed() < Duration::from_secs(120) => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(err) => fail(format!("connect to {ip}: {err}")),
            }
        }
    }

    fn new(s: std::net::TcpStream) -> Self {
        let w = s
            .try_clone()
            .unwrap_or_else(|e| fail(format!("socket: {e}")));
        Self {
            r: std::io::BufReader::new(s),
            w,
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.w, "{line}").unwrap_or_else(|e| fail(format!("send {line:?}: {e}")));
    }

    fn recv(&mut self) -> String {
        use std::io::BufRead;
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => fail("peer closed the exchange".into()),
            Ok(_) => l.trim_end().to_string(),
            Err(e) => fail(format!("exchange: {e}")),
        }
    }
}

/// `write-target`: a region for remote WRITEs and a QP on `--port`, handed
/// over to a source host on the exchange port; checks each WRITE the source
/// reports, byte for byte, then clears it. With `--hbm` the region is a
/// block of device memory exported as a dma-buf and registered from it,
/// checked through BAR 4 and the device MMU.
fn write_target(args: &[String]) {
    let port = arg(args, "--port", Some(1)) as u8;
    let max = arg(args, "--max-mib", Some(1024)) as usize * MIB;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut host = None;
    let mut hbm = None;
    // The source names the region by its iova, the address it was
    // registered at.
    let (mr, iova) = if args.iter().any(|a| a == "--hbm") {
        let (t, mr) = hbm::HbmTarget::new(&ctx, &pd, max);
        hbm = Some(t);
        (mr, hbm::HBM_IOVA)
    } else {
        let dst = host.insert(Mapping::new(max));
        let mr = ctx
            .reg_mr(
                &pd,
                dst.addr(),
                max as u64,
                dst.addr(),
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
        (mr, dst.addr())
    };
    let e = end(&ctx, &pd, port, None);
    let (gid, sgid_index) = local_gid(args, &e);
    let l = std::net::TcpListener::bind(("0.0.0.0", EXCHANGE_PORT))
        .unwrap_or_else(|e| fail(format!("listen: {e}")));
    println!("listening");
    let (s, from) = l.accept().unwrap_or_else(|e| fail(format!("accept: {e}")));
    let mut peer = Peer::new(s);
    peer.send(&format!(
        "target test={} qpn={} mac={} ip={} gid={} rkey={} addr={} len={}",
        test_name(),
        e.qp.qpn,
        mac_str(e.info.mac),
        std::net::Ipv4Addr::from(gaudi_verbs::port_ipv4(&e.info)),
        gid_hex(&gid),
        mr.rkey,
        iova,
        max
    ));
    let l = peer.recv();
    check_peer_test(&l);
    // The source's GID, or (a source that names none) its IPv4 address.
    let dgid = if l.split_whitespace().any(|w| w.starts_with("gid=")) {
        parse_gid(kv(&l, "gid"))
    } else {
        gid_v4(parse_ip(kv(&l, "ip")))
    };
    if let Some(ip) = std::net::Ipv6Addr::from(dgid).to_ipv4_mapped() {
        // A host route to a peer outside the port's subnets.
        roce_address(e.port, gaudi_verbs::port_ipv4(&e.info), Some(ip.octets()))
            .unwrap_or_else(|err| fail(format!("route to {ip}: {err}")));
    }
    if ipv6_refused(&ctx, &e, (dgid, sgid_index, kv_num(&l, "qpn") as u32)) {
        return;
    }
    connect_av(
        &ctx,
        &e,
        (dgid, sgid_index, kv_num(&l, "qpn") as u32),
        (0, mr.rkey),
        (target_mtu(args), 14),
        0x100,
    );
    peer.send("ready");
    println!("connected to {from}: {l}");
    let mut emu = emu();
    let mut checks = 0;
    loop {
        let l = peer.recv();
        if l == "done" {
            break;
        }
        let w: Vec<u64> = l
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let [off, len, seed] = w[..] else {
            fail(format!("bad request {l:?}"));
        };
        let (off, len) = (off as usize, len as usize);
        if len == 0 || off + len > max {
            fail(format!("check outside the region: {l:?}"));
        }
        if let Some(t) = hbm.as_mut() {
            t.check_through_device(&mut emu, off, len);
        }
        let dst: &mut dyn Region = match (&mut host, &mut hbm) {
            (Some(m), _) => m,
            (None, Some(t)) => &mut t.window,
            (None, None) => fail("no region".into()),
        };
        let all = dst.bytes();
        if let Some(at) = pattern_mismatch(&all[off..off + len], seed) {
            peer.send(&format!("bad {at}"));
            fail(format!(
                "{len} bytes at offset {off}: first difference at byte {at}"
            ));
        }
        // Nothing landed next to it: the region is zero outside the WRITEs
        // checked so far, each cleared after its check.
        if (off > 0 && all[off - 1] != 0) || (off + len < max && all[off + len] != 0) {
            peer.send("bad neighbour");
            fail(format!(
                "a byte next to the {len} bytes at offset {off} was written"
            ));
        }
        all[off..off + len].fill(0);
        println!("ok: {len} bytes at offset {off} landed byte-exact");
        checks += 1;
        peer.send("ok");
    }
    check(checks > 0, format!("{checks} WRITEs checked"));
    teardown(&ctx, [e], [mr]);
    if let Some(t) = hbm {
        t.finish(&ctx);
    }
}

/// `write-source`: connect to the target host `--peer` on the exchange
/// port, bring a QP on `--port` to RTS towards its QP, write 1 B to
/// `--max-mib` MiB into its region, check each completion and have the
/// target check the bytes.
fn write_source(args: &[String]) {
    // `--hold FILE`: after the WRITE of 1 MiB, wait until FILE exists.
    let hold = args
        .iter()
        .position(|a| a == "--hold")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let peer_ip = peer_arg(args);
    let port = arg(args, "--port", Some(1)) as u8;
    let max = arg(args, "--max-mib", Some(1024)) as usize * MIB;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(max);
    let seed = 0x5eed;
    fill(src.bytes(), seed);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            max as u64,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let e = end(&ctx, &pd, port, None);
    let (gid, sgid_index) = local_gid(args, &e);
    let mut peer = Peer::dial(&peer_ip);
    let t = peer.recv();
    println!("target: {t}");
    check_peer_test(&t);
    peer.send(&format!(
        "source test={} qpn={} mac={} ip={} gid={}",
        test_name(),
        e.qp.qpn,
        mac_str(e.info.mac),
        std::net::Ipv4Addr::from(gaudi_verbs::port_ipv4(&e.info)),
        gid_hex(&gid)
    ));
    let (rkey, raddr, rlen) = (
        kv_num(&t, "rkey") as u32,
        kv_num(&t, "addr"),
        kv_num(&t, "len") as usize,
    );
    // A software RoCE target on a 1500-byte Ethernet says mtu=1024.
    let mtu = match t.split_whitespace().find_map(|w| w.strip_prefix("mtu=")) {
        None | Some("4096") => MTU_4096,
        Some("1024") => MTU_1024,
        Some(m) => fail(format!("path MTU {m} not used here")),
    };
    // A slower peer asks for a longer ACK timeout.
    let timeout = t
        .split_whitespace()
        .find_map(|w| w.strip_prefix("timeout="))
        .map_or(14, |v| v.parse().unwrap_or(14));
    // The target's GID, or (a peer that names none) its IPv4 address.
    let dgid = if t.split_whitespace().any(|w| w.starts_with("gid=")) {
        parse_gid(kv(&t, "gid"))
    } else {
        gid_v4(parse_ip(kv(&t, "ip")))
    };
    if let Some(ip) = std::net::Ipv6Addr::from(dgid).to_ipv4_mapped() {
        // A host route to a peer outside the port's subnets.
        roce_address(e.port, gaudi_verbs::port_ipv4(&e.info), Some(ip.octets()))
            .unwrap_or_else(|err| fail(format!("route to {ip}: {err}")));
    }
    println!(
        "# to {} from GID index {sgid_index}",
        std::net::Ipv6Addr::from(dgid)
    );
    if ipv6_refused(&ctx, &e, (dgid, sgid_index, kv_num(&t, "qpn") as u32)) {
        return;
    }
    connect_av(
        &ctx,
        &e,
        (dgid, sgid_index, kv_num(&t, "qpn") as u32),
        (rkey, 0),
        (mtu, timeout),
        0x100,
    );
    let r = peer.recv();
    check(r == "ready", format!("target ready ({r})"));
    let max = max.min(rlen);
    let sizes = write_sizes(max);
    for (i, &len) in sizes.iter().enumerate() {
        // Small writes at an odd offset of the target's region.
        let off = if len < MIB { 4096 + 5 } else { 0 };
        let t = std::time::Instant::now();
        let wc = write_once(
            &ctx,
            &e,
            write_wr(
                500 + i as u64,
                src.addr(),
                len as u32,
                smr.lkey,
                raddr + off as u64,
                rkey,
            ),
            &format!("WRITE of {len} bytes"),
        );
        let took = t.elapsed();
        if wc.status != WC_SUCCESS {
            fail(format!("WRITE of {len} bytes: status {}", wc.status));
        }
        if i + 1 == sizes.len() {
            println!(
                "bench: Gaudi to the other host: one WRITE of {} MiB in {:.3} s: {:.1} MB/s",
                len / MIB,
                took.as_secs_f64(),
                len as f64 / took.as_secs_f64() / 1e6
            );
        }
        peer.send(&format!("check {off} {len} {seed}"));
        let r = peer.recv();
        check(
            r == "ok",
            format!(
                "WRITE of {len} bytes to the other host: wr_id {}, status {}, {:?}; target: {r}",
                wc.wr_id, wc.status, took
            ),
        );
        if len == MIB {
            if let Some(file) = &hold {
                hold_until(file);
            }
        }
    }
    peer.send("done");
    teardown(&ctx, [e], [smr]);
}

/// Wait until `file` exists (at most 300 s): what a test does meanwhile (an
/// unbind) comes between two WRITEs of one connection, whatever their speed.
fn hold_until(file: &str) {
    println!("holding until {file} exists");
    let start = std::time::Instant::now();
    while !std::path::Path::new(file).exists() {
        if start.elapsed() > Duration::from_secs(300) {
            fail(format!("{file} did not appear within 300 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The CPU's time-stamp counter: fine-grained where the guest's clock is
/// coarse (TCG), and read without a system call.
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no side effects.
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    return std::time::UNIX_EPOCH
        .elapsed()
        .map_or(0, |d| d.as_nanos() as u64);
}

/// Pin `len` bytes at `addr` as a fixed io_uring buffer (the kernel's
/// `pin_user_pages(FOLL_LONGTERM)`, as `ib_umem_get` does, with nothing
/// else) and release them; the two durations.
fn pin_bare(addr: u64, len: usize) -> (Duration, Duration) {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup writes at most a `struct io_uring_params`
    // (120 bytes) into `params`.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) };
    if fd < 0 {
        fail(format!(
            "io_uring_setup: {}",
            std::io::Error::last_os_error()
        ));
    }
    let iov = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    let t = std::time::Instant::now();
    // SAFETY: one valid iovec of our own memory.
    let r = unsafe { libc::syscall(libc::SYS_io_uring_register, fd, 0, &iov, 1) };
    let pin = t.elapsed();
    if r < 0 {
        fail(format!(
            "IORING_REGISTER_BUFFERS: {}",
            std::io::Error::last_os_error()
        ));
    }
    let t = std::time::Instant::now();
    // SAFETY: IORING_UNREGISTER_BUFFERS takes no argument.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            fd,
            1,
            std::ptr::null::<u8>(),
            0,
        )
    };
    let unpin = t.elapsed();
    if r < 0 {
        fail(format!(
            "IORING_UNREGISTER_BUFFERS: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd as i32) };
    (pin, unpin)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `bench-local` (a benchmark, not a test): registration of `--mib` MiB
/// against bare pinning of the same memory, and the cost of `post_send`
/// per WQE against a minimal uverbs ioctl, in one run. Prints "bench:"
/// lines.
fn bench_local(args: &[String]) {
    let len = arg(args, "--mib", Some(1024)) as usize * MIB;
    let rounds = 3;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut map = Mapping::new(len);
    // Touched first: both measure pinning present pages.
    fill(map.bytes(), 3);
    let (mut pin, mut unpin, mut reg, mut dereg) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (p, u) = pin_bare(map.addr(), len);
        pin.push(p);
        unpin.push(u);
        let t = std::time::Instant::now();
        let mr = ctx
            .reg_mr(
                &pd,
                map.addr(),
                len as u64,
                map.addr(),
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
        reg.push(t.elapsed());
        let t = std::time::Instant::now();
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
        dereg.push(t.elapsed());
    }
    let best = |v: &[Duration]| v.iter().min().copied().unwrap_or_default();
    println!(
        "bench: register {} MiB (best of {rounds}): reg_mr {:.1} ms, dereg_mr {:.1} ms; bare pinning (io_uring fixed buffer, FOLL_LONGTERM) {:.1} ms, unpin {:.1} ms; reg_mr/pinning {:.2}x, dereg/unpin {:.2}x",
        len / MIB,
        ms(best(&reg)),
        ms(best(&dereg)),
        ms(best(&pin)),
        ms(best(&unpin)),
        best(&reg).as_secs_f64() / best(&pin).as_secs_f64(),
        best(&dereg).as_secs_f64() / best(&unpin).as_secs_f64(),
    );
    drop(map);

    // post_send: 64-byte WRITEs, every 32nd signalled and waited for.
    let mut src = Mapping::new(MIB);
    let mut dst = Mapping::new(MIB);
    fill(src.bytes(), 4);
    dst.bytes()[0] = 0;
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            MIB as u64,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            MIB as u64,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let total = 4096usize;
    let mut standard = Vec::new();
    let clock = (std::time::Instant::now(), ticks());
    for batch in [1usize, 32] {
        let mut in_post = Duration::ZERO;
        let mut post_ticks = 0u64;
        let mut posted = 0usize;
        while posted < total {
            let list: Vec<SendWr> = (0..batch)
                .map(|k| {
                    let n = posted + k;
                    let mut w = write_wr(
                        n as u64,
                        src.addr() + (n % 1024) as u64 * 64,
                        64,
                        smr.lkey,
                        dst.addr(),
                        dmr.rkey,
                    );
                    if n % 32 != 31 {
                        w.send_flags = 0;
                    }
                    w
                })
                .collect();
            let (t, c) = (std::time::Instant::now(), ticks());
            if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
                fail(format!("post_send: {e} (bad_wr {bad})"));
            }
            post_ticks += ticks() - c;
            in_post += t.elapsed();
            posted += batch;
            if posted % 32 == 0 {
                let w = ctx
                    .wait_cq(&a.cq, 1, 10_000)
                    .unwrap_or_else(|e| fail(format!("poll: {e}")));
                if w.len() != 1 || w[0].status != WC_SUCCESS {
                    fail(format!("completion {w:?}"));
                }
            }
        }
        let t = std::time::Instant::now();
        for _ in 0..total / batch {
            let _ = ctx.query_port(1);
        }
        let ioctl = t.elapsed();
        standard.push((batch, post_ticks));
        println!(
            "bench: post_send, {batch} WQE(s) per call: {:.0} ns per WQE; a minimal uverbs ioctl (the driver's QUERY_PORT) {:.0} ns per call; per WQE / per ioctl {:.2}x",
            in_post.as_nanos() as f64 / total as f64,
            ioctl.as_nanos() as f64 / (total / batch) as f64,
            (in_post.as_nanos() as f64 / total as f64) / (ioctl.as_nanos() as f64 / (total / batch) as f64),
        );
    }
    dv::bench_dv_post(&ctx, &smr, &dmr, total, &standard, clock);
    teardown(&ctx, [a, b], [smr, dmr]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("uverbs") => uverbs(&args[1..]),
        Some("hold") => hold(),
        Some("context") => context(&args[1..]),
        Some("ownership") => ownership::ownership(&args[1..]),
        Some("log-ratelimited") => dv::log_ratelimited(&args[1..]),
        Some("pd-single") => pd_single(),
        Some("pd-identity") => pd_identity(),
        Some("asid-mappings") => asid::asid_mappings(),
        Some("events") => events(&args[1..]),
        Some("roce-gid-table") => roce_gid_table(&args[1..]),
        Some("av-refused") => av_refused(),
        Some("fatal") => fatal(&args[1..]),
        Some("removal") => removal::removal(&args[1..]),
        Some("link-flap") => removal::link_flap(&args[1..]),
        Some("mr-register") => mr_register(&args[1..]),
        Some("unsupported-opcodes") => unsupported_opcodes(),
        Some("write-loopback") => write_loopback(&args[1..]),
        Some("mr-out-of-bounds") => mr_out_of_bounds(&args[1..]),
        Some("rkey-rebind") => rkey_rebind(&args[1..]),
        Some("write-errors") => write_errors(&args[1..]),
        Some("write-target") => write_target(&args[1..]),
        Some("bench-local") => bench_local(&args[1..]),
        Some("write-source") => write_source(&args[1..]),
        Some("dv-write") => dv::dv_write(&args[1..]),
        Some("dv-foreign-address") => dv::dv_foreign_address(&args[1..]),
        Some("asid-isolation") => dv::asid_isolation(&args[1..]),
        Some("stale-wqe-after-dereg") => transfer::stale_wqe_after_dereg(&args[1..]),
        Some("qp-set-same-index") => dv::qp_set_same_index(&args[1..]),
        Some("dv-write-source") => dv::dv_write_source(&args[1..]),
        Some("uapi-bad-attrs") => uapi::uapi_bad_attrs(&args[1..]),
        Some("dv-hold") => dv::dv_hold(&args[1..]),
        Some("mr-no-foreign-frames") => regions::mr_no_foreign_frames(&args[1..]),
        Some("rkey-bounds") => regions::rkey_bounds(&args[1..]),
        Some("hbm-scrubbed") => hbm::hbm_scrubbed(&args[1..]),
        Some("cq-no-overflow") => transfer::cq_no_overflow(&args[1..]),
        Some("dereg-during-transfer") => transfer::dereg_during_transfer(&args[1..]),
        Some("write-traffic") => transfer::write_traffic(&args[1..]),
        Some("limits-enforced") => limits::limits_enforced(&args[1..]),
        Some("concurrency") => concurrency::concurrency(&args[1..]),
        Some("race-owner") => concurrency::race_owner(&args[1..]),
        Some("wire-faults") => wire::wire_faults(&args[1..]),
        Some("fuzz-device") => fuzzdev::fuzz_device(&args[1..]),
        // The NIC reports its errors as QP_ERR syndromes.
        Some("device-errors") => syndromes::eq_syndromes(&args[1..]),
        Some("eq-syndromes") => syndromes::eq_syndromes(&args[1..]),
        Some("rings-wrap") => rings::rings_wrap(&args[1..]),
        Some("sq-full") => rings::sq_full(&args[1..]),
        Some("cq-overflow") => rings::cq_overflow(&args[1..]),
        Some("fuzz-uverbs") => fuzz::fuzz_uverbs(&args[1..]),
        Some("netdev-loopback") => netdev::netdev_loopback(&args[1..]),
        _ => fail(
            "usage: gaudi-verbs-test uverbs --ports N [--instance I] | hold | \
             context --expect-errno E | ownership --step refused|owner --ports N | \
             log-ratelimited [--verbs N] [--faults N] | pd-single | events --expect NAME:PORT,... \
             [--timeout S] | fatal [--timeout S] | mr-register [--max-mib M] [--cycles N] [--huge2m-mib H] [--huge1g] | unsupported-opcodes"
                .into(),
        ),
    }
}
