// SPDX-License-Identifier: GPL-2.0

//! Concurrency: threads of one context posting and polling on their own
//! QPs while another registers and deregisters regions; QPs and CQs
//! destroyed while their WRITEs complete and another thread polls;
//! processes racing for the data path.

use super::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `race-owner` (a child of `concurrency`): open a context, wait for a line
/// on stdin, allocate device memory (which takes the NIC to the context
/// alone), print "won" or "busy ERRNO", then hold it all until stdin closes.
pub(crate) fn race_owner(_args: &[String]) {
    let ctx = open_ctx();
    println!("ready");
    let mut line = String::new();
    let stdin = std::io::stdin();
    let _ = stdin.lock().read_line(&mut line);
    let hbm = ctx.hbm_alloc(1 << 20);
    match &hbm {
        Ok(_) => println!("won"),
        Err(e) => println!("busy {}", errno(e)),
    }
    let _ = std::io::stdout().flush();
    let _ = stdin.lock().read_line(&mut line);
}

/// Rounds of `n` processes, each with a context open, allocating device
/// memory at the same moment: exactly one gets the NIC to itself, the others
/// get EBUSY.
fn ownership_race(rounds: u32, n: usize) {
    let me = std::env::current_exe().unwrap_or_else(|e| fail(format!("own path: {e}")));
    for round in 0..rounds {
        let mut kids: Vec<_> = (0..n)
            .map(|_| {
                Command::new(&me)
                    .arg("race-owner")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| fail(format!("spawn: {e}")))
            })
            .collect();
        let mut outs: Vec<_> = kids
            .iter_mut()
            .map(|k| BufReader::new(k.stdout.take().unwrap()))
            .collect();
        let mut line = String::new();
        for o in &mut outs {
            line.clear();
            o.read_line(&mut line).unwrap_or_default();
            if line.trim() != "ready" {
                fail(format!("round {round}: a racer said {line:?}"));
            }
        }
        for k in &mut kids {
            let _ = k.stdin.as_mut().unwrap().write_all(b"go\n");
            let _ = k.stdin.as_mut().unwrap().flush();
        }
        let mut won = 0;
        let mut busy = 0;
        for o in &mut outs {
            line.clear();
            o.read_line(&mut line).unwrap_or_default();
            match line.trim() {
                "won" => won += 1,
                "busy 16" => busy += 1,
                other => fail(format!("round {round}: a racer said {other:?}")),
            }
        }
        for mut k in kids {
            drop(k.stdin.take());
            let _ = k.wait();
        }
        if won != 1 || busy != n - 1 {
            fail(format!("round {round}: {won} owners, {busy} EBUSY of {n}"));
        }
    }
    check(
        true,
        format!("{rounds} rounds of {n} processes allocating device memory at once: one owner each, the others EBUSY"),
    );
}

/// One thread's traffic: its own QP pair (port 1 to 2) in the shared
/// context, `writes` WRITEs of random length at random offsets, each
/// checked byte for byte with its neighbours.
fn traffic(ctx: &Context, pd: &Pd, seed: u64, writes: u32) -> String {
    const LEN: usize = 1 << 20;
    let mut rng = Rng(seed | 1);
    let mut src = Mapping::new(LEN);
    let mut dst = Mapping::new(LEN);
    fill(src.bytes(), seed);
    let iova = 0x6100_0000_0000u64 + (seed << 32);
    let diova = 0x6200_0000_0000u64 + (seed << 32);
    let smr = ctx
        .reg_mr(
            pd,
            src.addr(),
            LEN as u64,
            iova,
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("thread {seed}: reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            pd,
            dst.addr(),
            LEN as u64,
            diova,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("thread {seed}: reg_mr: {e}")));
    let (a, b) = loopback_pair(ctx, pd, 1, 2, dmr.rkey);
    for i in 0..writes {
        let len = 1 + rng.below(64 * 1024) as usize;
        let so = rng.below((LEN - len) as u64) as usize;
        let d = 1 + rng.below((LEN - len - 2) as u64) as usize;
        poison(&mut dst.bytes()[d..d + len], &src.bytes()[so..so + len]);
        let (before, after) = (dst.bytes()[d - 1], dst.bytes()[d + len]);
        let wc = write_once(
            ctx,
            &a,
            write_wr(
                u64::from(i),
                iova + so as u64,
                len as u32,
                smr.lkey,
                diova + d as u64,
                dmr.rkey,
            ),
            &format!("thread {seed}: WRITE {i}"),
        );
        let ok = wc.status == WC_SUCCESS
            && wc.byte_len == len as u32
            && dst.bytes()[d..d + len] == src.bytes()[so..so + len]
            && dst.bytes()[d - 1] == before
            && dst.bytes()[d + len] == after;
        if !ok {
            fail(format!(
                "thread {seed}: WRITE {i} of {len} bytes: {wc:?}, data or neighbours wrong"
            ));
        }
    }
    for e in [a, b] {
        ctx.destroy_qp(e.qp)
            .unwrap_or_else(|err| fail(format!("thread {seed}: destroy QP: {err}")));
        ctx.destroy_cq(e.cq)
            .unwrap_or_else(|err| fail(format!("thread {seed}: destroy CQ: {err}")));
    }
    for mr in [smr, dmr] {
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("thread {seed}: dereg_mr: {e}")));
    }
    format!("thread {seed}: {writes} WRITEs landed")
}

/// `concurrency [--threads T] [--writes N] [--rounds R]`: first R rounds
/// (default 10) of 8 processes racing for the data path; then, in one
/// context, T threads (default 4) of N WRITEs each (default 200) on their
/// own QPs, while another thread registers and deregisters regions; then
/// 50 rounds of a QP and its CQ destroyed while 8 WRITEs of 256 KiB
/// complete and another thread polls the CQ. Every WRITE is checked, and
/// the emulator's DMA audit stays 0.
pub(crate) fn concurrency(args: &[String]) {
    let threads = arg(args, "--threads", Some(4));
    let writes = arg(args, "--writes", Some(200)) as u32;
    let rounds = arg(args, "--rounds", Some(10)) as u32;
    // A thread polling the CQ of a QP that another destroys meets a use
    // after free in the RDMA core: ib_uverbs_poll_cq() reads wc->qp after
    // the driver's poll returned, and nothing keeps the QP alive until then
    // (KASAN, slab-use-after-free in ib_uverbs_poll_cq). Until the core
    // keeps it, that race runs only when asked.
    let poll_race = args.iter().any(|a| a == "--poll-while-destroy");
    ownership_race(rounds, 8);

    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let stop = AtomicBool::new(false);
    let t = std::time::Instant::now();
    let (reports, regs) = std::thread::scope(|s| {
        let churn = s.spawn(|| {
            let mut m = Mapping::new(64 * 1024);
            m.bytes()[0] = 1;
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let mr = ctx
                    .reg_mr(
                        &pd,
                        m.addr(),
                        64 * 1024,
                        m.addr(),
                        IB_UVERBS_ACCESS_LOCAL_WRITE,
                    )
                    .unwrap_or_else(|e| fail(format!("churn: reg_mr: {e}")));
                ctx.dereg_mr(mr)
                    .unwrap_or_else(|e| fail(format!("churn: dereg_mr: {e}")));
                n += 1;
            }
            n
        });
        let workers: Vec<_> = (1..=threads)
            .map(|k| {
                let (ctx, pd) = (&ctx, &pd);
                s.spawn(move || traffic(ctx, pd, k, writes))
            })
            .collect();
        let reports: Vec<String> = workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| fail("a traffic thread panicked".into()))
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        (
            reports,
            churn
                .join()
                .unwrap_or_else(|_| fail("churn panicked".into())),
        )
    });
    for r in &reports {
        println!("# {r}");
    }
    check(
        reports.len() as u64 == threads,
        format!(
            "{threads} threads of one context, {writes} WRITEs each on their own QPs, every one checked, while {regs} regions were registered and deregistered, in {:?}",
            t.elapsed()
        ),
    );

    // Destroy racing completions.
    let mut src = Mapping::new(2 << 20);
    let dst = Mapping::new(2 << 20);
    fill(src.bytes(), 77);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            2 << 20,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            2 << 20,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let mut rng = Rng(0x5eed);
    let mut polled = 0usize;
    for round in 0..50 {
        let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
        let list: Vec<SendWr> = (0..8u64)
            .map(|k| {
                write_wr(
                    k,
                    src.addr() + k * (256 << 10),
                    256 << 10,
                    smr.lkey,
                    dst.addr() + k * (256 << 10),
                    dmr.rkey,
                )
            })
            .collect();
        if let Err((e, bad)) = ctx.post_send(&a.qp, &list) {
            fail(format!("round {round}: post: {e} (bad_wr {bad})"));
        }
        let cq_copy = Cq {
            handle: a.cq.handle,
            cqe: a.cq.cqe,
            user_handle: a.cq.user_handle,
        };
        let delay = Duration::from_micros(rng.below(3000));
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let poller = s.spawn(|| {
                let mut n = 0;
                while poll_race && !done.load(Ordering::Relaxed) {
                    match ctx.poll_cq(&cq_copy, 4) {
                        Ok(w) => n += w.len(),
                        Err(_) => break,
                    }
                }
                n
            });
            std::thread::sleep(delay);
            // A poll in progress holds the CQ: its destruction may have
            // to wait for that call (EBUSY), never for the device.
            let End { cq, qp, .. } = a;
            ctx.destroy_qp(qp)
                .unwrap_or_else(|e| fail(format!("round {round}: destroy QP: {e}")));
            done.store(true, Ordering::Relaxed);
            polled += poller.join().unwrap_or(0);
            ctx.destroy_cq(cq)
                .unwrap_or_else(|e| fail(format!("round {round}: destroy CQ: {e}")));
        });
        ctx.destroy_qp(b.qp)
            .unwrap_or_else(|e| fail(format!("round {round}: destroy QP: {e}")));
        ctx.destroy_cq(b.cq)
            .unwrap_or_else(|e| fail(format!("round {round}: destroy CQ: {e}")));
    }
    check(
        true,
        format!(
            "50 QPs and CQs destroyed under completing WRITEs{} ({polled} completions polled)",
            if poll_race {
                " and a polling thread"
            } else {
                ""
            }
        ),
    );
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, dmr.rkey);
    let wc = write_once(
        &ctx,
        &a,
        write_wr(1, src.addr(), 4096, smr.lkey, dst.addr(), dmr.rkey),
        "WRITE after the races",
    );
    check(wc.status == WC_SUCCESS, "a WRITE after the races".into());
    teardown(&ctx, [a, b], [smr, dmr]);
}
