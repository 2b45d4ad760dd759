// SPDX-License-Identifier: GPL-2.0

//! The device goes away under traffic: a fatal error, a crash of the
//! device (surprise removal), a hot unplug.

use super::*;
use gaudi_verbs::dv::CQE_SUCCESS;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the traffic saw when the device went away.
enum Stop {
    /// The DEVICE_FATAL event, between two WRITEs.
    Event,
    /// A verb failed, with this errno.
    Errno(&'static str, i32),
    /// A completion with this status.
    Status(u32),
    /// No completion within the wait.
    NoCompletion(&'static str),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Event => write!(f, "the DEVICE_FATAL event"),
            Stop::Errno(what, e) => write!(f, "{what} failed with errno {e}"),
            Stop::Status(s) => write!(f, "a completion with status {s}"),
            Stop::NoCompletion(what) => write!(f, "no completion of a {what} WRITE"),
        }
    }
}

/// WRITEs from port 1 to port 2 on a standard QP pair and through the
/// mapped queues of a QP set, in chunks of one region, each checked byte
/// for byte.
struct Traffic<'c> {
    ctx: &'c Context,
    src: Mapping,
    dst: Mapping,
    smr: Mr,
    dmr: Mr,
    si: gaudi_ib_mr_info,
    di: gaudi_ib_mr_info,
    a: End,
    b: End,
    set: gaudi_verbs::dv::QpSet,
    /// WRITEs that landed on each path.
    standard: u32,
    fast: u32,
}

impl<'c> Traffic<'c> {
    const LEN: usize = 1 << 20;
    const CHUNK: usize = 64 << 10;

    fn new(ctx: &'c Context, pd: &Pd) -> Self {
        let mut src = Mapping::new(Self::LEN);
        let mut dst = Mapping::new(Self::LEN);
        fill(src.bytes(), 77);
        poison(dst.bytes(), src.bytes());
        let smr = ctx
            .reg_mr(
                pd,
                src.addr(),
                Self::LEN as u64,
                src.addr(),
                IB_UVERBS_ACCESS_LOCAL_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
        let dmr = ctx
            .reg_mr(
                pd,
                dst.addr(),
                Self::LEN as u64,
                dst.addr(),
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
        let (si, di) = (
            dv::mr_info(ctx, &smr, "source"),
            dv::mr_info(ctx, &dmr, "destination"),
        );
        let (a, b) = loopback_pair(ctx, pd, 1, 2, dmr.rkey);
        let set = dv::dv_loopback(ctx, 1, 2, dmr.rkey);
        Self {
            ctx,
            src,
            dst,
            smr,
            dmr,
            si,
            di,
            a,
            b,
            set,
            standard: 0,
            fast: 0,
        }
    }

    /// One WRITE on each path, each waited for (`wait_ms` for its
    /// completion) and checked: what ended
    /// the traffic, if anything did. A WRITE that completed without its
    /// data fails the test.
    fn step(&mut self, wait_ms: u64) -> Result<(), Stop> {
        self.write(false, wait_ms)?;
        self.write(true, wait_ms)
    }

    /// One WRITE on the QP set (`dv_path`) or the standard QP pair, as in
    /// [`Traffic::step`].
    fn write(&mut self, dv_path: bool, wait_ms: u64) -> Result<(), Stop> {
        let n = (self.standard + self.fast) as usize;
        // Even chunks by the standard QP, odd ones by the QP set.
        let off = (2 * (n / 2) + usize::from(dv_path)) % (Self::LEN / Self::CHUNK) * Self::CHUNK;
        let len = Self::CHUNK;
        if dv_path {
            let qp = self.set.qp(1);
            qp.post_write(
                self.si.mmu_va + off as u64,
                self.di.iova + off as u64,
                len as u32,
                true,
                None,
            );
            // The mapped CQ, polled in rounds, with the clock read between
            // rounds (this program may make system calls).
            let t = std::time::Instant::now();
            let cqe = loop {
                match qp.poll_spin(100_000) {
                    Some(c) => break Some(c),
                    None if t.elapsed() > Duration::from_millis(wait_ms) => break None,
                    None => {}
                }
            };
            match cqe {
                Some(c) if c.status == CQE_SUCCESS => {}
                Some(c) => return Err(Stop::Status(c.status.into())),
                None => return Err(Stop::NoCompletion("QP set")),
            }
        } else {
            let wr = write_wr(
                n as u64,
                self.src.addr() + off as u64,
                len as u32,
                self.smr.lkey,
                self.dst.addr() + off as u64,
                self.dmr.rkey,
            );
            if let Err((e, _)) = self.ctx.post_send(&self.a.qp, &[wr]) {
                return Err(Stop::Errno("post_send", errno(&e)));
            }
            match self.ctx.wait_cq(&self.a.cq, 1, wait_ms) {
                Ok(wcs) if wcs.is_empty() => return Err(Stop::NoCompletion("standard")),
                Ok(wcs) if wcs[0].status != WC_SUCCESS => return Err(Stop::Status(wcs[0].status)),
                Ok(_) => {}
                Err(e) => return Err(Stop::Errno("poll_cq", errno(&e))),
            }
        }
        if self.dst.bytes()[off..off + len] != self.src.bytes()[off..off + len] {
            fail(format!(
                "WRITE {n} ({}) completed but its data did not land",
                if dv_path { "QP set" } else { "standard" }
            ));
        }
        // The next WRITE to this chunk must land again.
        let src = &self.src.bytes()[off..off + len];
        poison(&mut self.dst.bytes()[off..off + len], src);
        if dv_path {
            self.fast += 1;
        } else {
            self.standard += 1;
        }
        Ok(())
    }
}

/// `removal [--timeout S]`: a context with WRITEs flowing from port 1 to
/// port 2 on a standard QP pair and through the mapped queues of a QP set,
/// each checked byte for byte, until the device goes away (the test makes
/// it: a fatal error, a crash of the device, an unplug). Prints "listening"
/// when the context exists and "traffic" once WRITEs have landed on both
/// paths. The device must go away within S seconds (default 30) of the
/// first WRITE; then DEVICE_FATAL arrives within S seconds of the last
/// WRITE that landed, every verb fails with EIO, the event stream ends
/// with DEVICE_FATAL only, and the mapped queues still read and write
/// without a fault (the core replaced them with a dummy page).
pub(crate) fn removal(args: &[String]) {
    let timeout = Duration::from_secs(arg(args, "--timeout", Some(30)));
    let (ctx, events) = listen();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc PD: {e}")));
    let mut t = Traffic::new(&ctx, &pd);
    let began = std::time::Instant::now();
    let mut last = began;
    let stop = loop {
        if let Err(stop) = t.step(3000) {
            break stop;
        }
        last = std::time::Instant::now();
        if t.standard == 4 {
            println!("traffic");
            let _ = std::io::stdout().flush();
        }
        match events.next(Duration::ZERO) {
            Ok(Some(ev)) if ev.event_type == IB_EVENT_DEVICE_FATAL => break Stop::Event,
            Ok(Some(ev)) => fail(format!(
                "event {} during the traffic",
                event_name(ev.event_type)
            )),
            Ok(None) => {}
            Err(e) => break Stop::Errno("reading events", errno(&e)),
        }
        if began.elapsed() > timeout {
            fail(format!(
                "the device is still there {timeout:?} after the traffic began"
            ));
        }
    };
    let (standard, fast) = (t.standard, t.fast);
    println!("ok: {standard} standard and {fast} QP set WRITEs landed, each checked; then {stop}");
    if !matches!(stop, Stop::Event) {
        let left = timeout.saturating_sub(last.elapsed());
        let (kind, _) = next_event(&events, left, "DEVICE_FATAL");
        check(
            kind == IB_EVENT_DEVICE_FATAL,
            "the first event is DEVICE_FATAL".into(),
        );
    }
    println!(
        "ok: DEVICE_FATAL {:.1} s after the last WRITE that landed",
        last.elapsed().as_secs_f64()
    );
    expect_disassociated(&ctx, timeout);
    let wr = write_wr(0, t.src.addr(), 64, t.smr.lkey, t.dst.addr(), t.dmr.rkey);
    match ctx.post_send(&t.a.qp, &[wr]) {
        Ok(()) => fail("post_send after disassociation succeeded".into()),
        Err((e, _)) => check(
            errno(&e) == libc::EIO,
            format!("post_send after disassociation: errno {}", errno(&e)),
        ),
    }
    // The mapped queues of the QP set read and write a dummy page now.
    let (sva, diova) = (t.si.mmu_va, t.di.iova);
    let qp = t.set.qp(1);
    qp.post_write(sva, diova, 64, true, None);
    let cqe = qp.poll_spin(1000);
    println!("ok: after disassociation: WQE written, doorbell rung, CQ read: {cqe:?}");
    expect_events_end(&events);
    println!("PASS");
}

/// `link-flap`: WRITEs flow on both paths (as in `removal`) while port 1's
/// link goes down for 100 ms and comes back: the process reads PORT_ERR
/// then PORT_ACTIVE for port 1, the emulator retransmitted frames, and
/// every WRITE completes and lands. Then the link stays down while a WRITE
/// is under way on each path until it fails (retry budget: 7 retries of
/// about 67 ms): the standard one with RETRY_EXC_ERR, the QP set's with a
/// QP_ERR syndrome (the QP reads ERR, no CQE); with the link up again both QPs come back through RESET and WRITEs land
/// again.
pub(crate) fn link_flap(_args: &[String]) {
    let (ctx, events, pd) = open_with_events();
    let mut t = Traffic::new(&ctx, &pd);
    let mut emu = EmuCtl::open().unwrap_or_else(|e| fail(format!("emulator control: {e}")));
    for _ in 0..2 {
        t.step(10_000)
            .unwrap_or_else(|s| fail(format!("before the flap: {s}")));
    }
    let re0 = port_stat(&mut emu, 0, "retransmits");
    let (w0, flapping) = (t.standard + t.fast, AtomicBool::new(true));
    let emu = std::thread::scope(|s| {
        let flap = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            transfer::emu_cmd(&mut emu, "link 0 down");
            std::thread::sleep(Duration::from_millis(100));
            transfer::emu_cmd(&mut emu, "link 0 up");
            flapping.store(false, Ordering::Relaxed);
            emu
        });
        // WRITEs during the flap, and two rounds after it.
        let mut after = 0;
        while after < 2 {
            if !flapping.load(Ordering::Relaxed) {
                after += 1;
            }
            t.step(20_000)
                .unwrap_or_else(|s| fail(format!("across a 100 ms link flap: {s}")));
        }
        flap.join()
            .unwrap_or_else(|_| fail("the flapping thread panicked".into()))
    });
    let mut emu = emu;
    let resent = port_stat(&mut emu, 0, "retransmits") - re0;
    check(
        resent > 0,
        format!(
            "{} WRITEs across a 100 ms link flap of port 1, each landed; the emulator retransmitted {resent} packets",
            t.standard + t.fast - w0
        ),
    );
    expect_port_events(
        &events,
        &[(IB_EVENT_PORT_ERR, 1), (IB_EVENT_PORT_ACTIVE, 1)],
    );

    // Down for longer than the retry budget while a WRITE is under way.
    transfer::emu_cmd(&mut emu, "link 0 down");
    match t.write(false, 30_000) {
        Err(Stop::Status(s)) if s == WC_RETRY_EXC_ERR => {
            println!("ok: link down: the standard WRITE completed with RETRY_EXC_ERR")
        }
        other => fail(format!(
            "link down: the standard WRITE ended with {}, expected RETRY_EXC_ERR",
            other.map_or_else(|s| s.to_string(), |()| "success".into())
        )),
    }
    // The QP set's QP fails with a QP_ERR syndrome (retries exceeded), no
    // CQE; it reads ERR.
    match t.write(true, 500) {
        Err(Stop::NoCompletion(_)) => {}
        other => fail(format!(
            "link down: the QP set's WRITE ended with {}, expected no CQE",
            other.map_or_else(|s| s.to_string(), |()| "success".into())
        )),
    }
    let began = std::time::Instant::now();
    let state = crate::dv::wait_set_err(&ctx, t.set.handle, Duration::from_secs(30));
    check(
        state == u32::from(QPS_ERR),
        format!(
            "link down: the QP set's QP in ERR (state {state}) {:.1} s after its WRITE",
            began.elapsed().as_secs_f64()
        ),
    );
    transfer::emu_cmd(&mut emu, "link 0 up");
    // PORT_ERR and PORT_ACTIVE of port 1, with the standard QP's QP_FATAL
    // among them.
    let mut seen = Vec::new();
    while !seen.contains(&(IB_EVENT_PORT_ACTIVE, 1)) {
        let (kind, element) = next_event(&events, Duration::from_secs(10), "PORT_ACTIVE");
        seen.push((kind, element));
    }
    check(
        seen.iter().all(|&(k, e)| {
            (k == IB_EVENT_PORT_ERR && e == 1)
                || k == IB_EVENT_QP_FATAL
                || (k == IB_EVENT_PORT_ACTIVE && e == 1)
        }) && seen.contains(&(IB_EVENT_PORT_ERR, 1)),
        format!("events of the long outage: {seen:?} (PORT_ERR, QP_FATAL, PORT_ACTIVE)"),
    );
    let rkey = t.dmr.rkey;
    reconnect(&ctx, &t.a, &t.b, rkey);
    dv::connect_pair(&ctx, &mut t.set, 1, 2, rkey);
    for _ in 0..2 {
        t.step(10_000)
            .unwrap_or_else(|s| fail(format!("after the QPs came back through RESET: {s}")));
    }
    println!("ok: after the outage both QPs came back through RESET and WRITEs land again");
    println!("PASS");
}

/// Read the next events; they must be `want` (type, element), in order.
fn expect_port_events(events: &AsyncEvents, want: &[(u32, u64)]) {
    for &(kind, element) in want {
        let got = next_event(events, Duration::from_secs(10), event_name(kind));
        check(
            got == (kind, element),
            format!("event {} for port {element}", event_name(kind)),
        );
    }
}
