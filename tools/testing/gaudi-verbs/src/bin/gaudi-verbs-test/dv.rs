// SPDX-License-Identifier: GPL-2.0

//! Tests of the device-specific fast path: QP sets driven from user space.

use super::*;
use gaudi_verbs::dv::{Cqe, DvQp, QpSet, CQE_SUCCESS};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// System calls trapped on a thread run by [`without_syscalls`].
static TRAPPED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sigsys(_: libc::c_int) {
    TRAPPED.fetch_add(1, Relaxed);
}

/// Run `f` on a thread where every system call but `exit` and
/// `rt_sigreturn` is trapped by a seccomp filter: not executed, counted.
/// Returns what `f` returned and how many system calls it made. Before `f`
/// the thread makes one system call on purpose, which must be counted, so a
/// filter that does not work cannot pass for a clean run.
fn without_syscalls<R: Send>(f: impl FnOnce() -> R + Send) -> (R, u64) {
    // SAFETY: a handler that only increments an atomic counter.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigsys as *const () as usize;
        if libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()) != 0 {
            fail(format!("sigaction: {}", std::io::Error::last_os_error()));
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            // struct sock_filter: allow exit and rt_sigreturn, trap the rest.
            const LD_W_ABS: u16 = 0x20;
            const JEQ_K: u16 = 0x15;
            const RET_K: u16 = 0x06;
            const RET_ALLOW: u32 = 0x7fff_0000;
            const RET_TRAP: u32 = 0x0003_0000;
            let prog: [libc::sock_filter; 5] = [
                libc::sock_filter {
                    code: LD_W_ABS,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                libc::sock_filter {
                    code: JEQ_K,
                    jt: 2,
                    jf: 0,
                    k: libc::SYS_rt_sigreturn as u32,
                },
                libc::sock_filter {
                    code: JEQ_K,
                    jt: 1,
                    jf: 0,
                    k: libc::SYS_exit as u32,
                },
                libc::sock_filter {
                    code: RET_K,
                    jt: 0,
                    jf: 0,
                    k: RET_TRAP,
                },
                libc::sock_filter {
                    code: RET_K,
                    jt: 0,
                    jf: 0,
                    k: RET_ALLOW,
                },
            ];
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr().cast_mut(),
            };
            // SAFETY: installs a filter on this thread only (no TSYNC); the
            // program is valid for the call.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(libc::SYS_seccomp, 1, 0, &fprog) != 0
                {
                    fail(format!("seccomp: {}", std::io::Error::last_os_error()));
                }
            }
            let before = TRAPPED.load(Relaxed);
            // SAFETY: a system call without arguments or effects.
            unsafe { libc::syscall(libc::SYS_getppid) };
            let base = TRAPPED.load(Relaxed);
            if base != before + 1 {
                fail("the seccomp filter did not count a system call".into());
            }
            let r = f();
            (r, TRAPPED.load(Relaxed) - base)
        })
        .join()
        .unwrap_or_else(|_| fail("the test thread panicked".into()))
    })
}

/// Busy-polling a CQE gives up after this many tries (minutes under TCG;
/// no clock is read, as that may be a system call).
const SPINS: u64 = 20_000_000_000;

/// Wait until the device wrote `qp`'s next CQE, or `limit` passed (the poll
/// after it then finds none). Between looks it sleeps, 100 us at first and twice as long after
/// each up to 2 ms: a WRITE of a GiB takes seconds under emulation, and a
/// thread spinning on the CQ meanwhile takes the CPU from the device. Only
/// the waiting sleeps: the post before and the poll after run on a thread
/// without system calls ([`without_syscalls`]).
fn wait_for_cqe(qp: &DvQp, limit: Duration) {
    let start = std::time::Instant::now();
    let mut pause = Duration::from_micros(100);
    while !qp.cqe_ready() && start.elapsed() <= limit {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

/// Post one signalled WRITE on `qp` and take its CQE, each on a thread
/// without system calls, sleeping in between until the CQE is there (at
/// most 5 minutes): the CQE and the system calls the post and the poll made.
fn post_and_poll(qp: &mut DvQp, local: u64, remote: u64, len: u32) -> (Option<Cqe>, u64) {
    let (queued, posted) = without_syscalls(|| qp.post_write(local, remote, len, true, None));
    if queued {
        wait_for_cqe(qp, Duration::from_secs(300));
    }
    let (cqe, polled) = without_syscalls(|| qp.poll());
    (cqe, posted + polled)
}

pub(crate) fn mr_info(ctx: &Context, mr: &Mr, what: &str) -> gaudi_ib_mr_info {
    let info = ctx
        .query_mr(mr)
        .unwrap_or_else(|e| fail(format!("query_mr {what}: {e}")));
    check(
        info.key == mr.lkey && info.mmu_va == mr.resp.mmu_va,
        format!(
            "query_mr {what}: key {:#x}, device VA {:#x} (reg_mr said {:#x}), {} bytes at iova {:#x}, {} KiB pages",
            info.key,
            info.mmu_va,
            mr.resp.mmu_va,
            info.length,
            info.iova,
            (1u64 << info.page_shift) / 1024
        ),
    );
    info
}

/// A QP set over ports `a` and `b`, the QP of `a` writing to the QP of `b`
/// (same index), connected: writes to `b` must carry `rkey`.
pub(crate) fn dv_loopback(ctx: &Context, a: u32, b: u32, rkey: u32) -> QpSet {
    let mut set = ctx
        .create_qp_set(1 << (a - 1) | 1 << (b - 1), None, 7, 8)
        .unwrap_or_else(|e| fail(format!("create QP set: {e}")));
    connect_pair(ctx, &mut set, a, b, rkey);
    set
}

/// (Re)connect the QPs of ports `a` and `b` of `set` to each other, both
/// ends through RESET (the responder's expected PSN starts over too).
pub(crate) fn connect_pair(ctx: &Context, set: &mut QpSet, a: u32, b: u32, rkey: u32) {
    let index = set.resp.index;
    let h = set.handle;
    for (from, to, remote, local) in [(a, b, rkey, 0), (b, a, 0, rkey)] {
        let peer = ctx
            .query_port(to.into())
            .unwrap_or_else(|e| fail(format!("query port {to}: {e}")));
        ctx.connect_dv(
            h,
            set.qp(from),
            peer.mac,
            gaudi_verbs::port_ipv4(&peer),
            index,
            remote,
            local,
            MTU_4096,
            14,
        )
        .unwrap_or_else(|e| fail(format!("QP set {index}: port {from} to RTS: {e}")));
    }
}

/// What one WRITE of [`dv_write`] found, recorded without system calls.
#[derive(Clone, Copy, Default)]
struct Outcome {
    len: usize,
    cqe: Option<Cqe>,
    mismatch: Option<usize>,
    neighbours: bool,
}

/// Where the first of `a` and `b` differ.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    // Compared a page at a time (memcmp), then byte by byte in the first
    // page that differs: a byte loop over a GiB costs seconds under TCG.
    let page = a
        .chunks(4096)
        .zip(b.chunks(4096))
        .position(|(x, y)| x != y)?;
    let at = page * 4096;
    a[at..]
        .iter()
        .zip(&b[at..])
        .position(|(x, y)| x != y)
        .map(|i| at + i)
}

/// `dv-write`: a QP set over ports `--from` and `--to` (same index); the
/// first QP writes 1 B to `--max-mib` MiB to the second, each post and each
/// poll on a thread that makes no system call (a seccomp filter counts them;
/// the wait in between sleeps, [`post_and_poll`]): WQEs and doorbells
/// through the mapped queue and doorbell page, CQEs read from the mapped CQ.
/// WQEs name the source by device VA and the destination by its iova.
/// Every byte lands (the destination holds other bytes before each WRITE),
/// the bytes around stay, one CQE covers unsignalled WQEs before it; a WQE
/// of a WRITE with immediate (not on the NIC) puts the QP in ERR.
pub(crate) fn dv_write(args: &[String]) {
    let max = arg(args, "--max-mib", Some(1024)) as usize * MIB;
    let (pa, pb) = (
        arg(args, "--from", Some(1)) as u32,
        arg(args, "--to", Some(2)) as u32,
    );
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let room = max + 2 * 4096;
    let mut src = Mapping::new(room);
    let mut dst = Mapping::new(room);
    fill(src.bytes(), 7);
    let iova = 0x7000_0000_0000u64;
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            room as u64,
            iova,
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr source: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            room as u64,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr destination: {e}")));
    let si = mr_info(&ctx, &smr, "source");
    let di = mr_info(&ctx, &dmr, "destination");
    let mut set = dv_loopback(&ctx, pa, pb, dmr.rkey);
    let index = set.resp.index;
    check(
        set.qps
            .iter()
            .all(|q| q.info.port_num == pa || q.info.port_num == pb),
        format!("QP set: index {index} on ports {pa} and {pb}, queues mapped"),
    );
    let mut emu = emu();
    let faults = stat(&mut emu, "mmu_faults");
    let tx = port_stat(&mut emu, pa - 1, "tx");

    let sizes = write_sizes(max);
    let (soff, doff) = (3usize, 4096 + 5);
    let mut outcomes = vec![Outcome::default(); sizes.len()];
    let dst_iova = di.iova;
    let (src_b, dst_b) = (src.bytes(), dst.bytes());
    let mut calls = 0;
    let batch_cqe = {
        let mut qa_qb = set.qps.iter_mut();
        let qa: &mut DvQp = match (qa_qb.next(), qa_qb.next()) {
            (Some(x), Some(_)) if x.port == pa => x,
            (Some(_), Some(y)) => y,
            _ => fail("QP set of two ports expected".into()),
        };
        for (o, &len) in outcomes.iter_mut().zip(sizes.iter()) {
            dst_b[doff - 1] = 0xa5;
            dst_b[doff + len] = 0xa5;
            // Other bytes than the source's: what an earlier WRITE left
            // cannot pass for this one.
            poison(&mut dst_b[doff..doff + len], &src_b[soff..soff + len]);
            let (cqe, n) = post_and_poll(
                qa,
                si.device_va(iova + soff as u64),
                dst_iova + doff as u64,
                len as u32,
            );
            calls += n;
            o.len = len;
            o.cqe = cqe;
            o.mismatch = first_difference(&src_b[soff..soff + len], &dst_b[doff..doff + len]);
            o.neighbours = dst_b[doff - 1] == 0xa5 && dst_b[doff + len] == 0xa5;
        }
        let (batch, n) = without_syscalls(|| {
            // Seven unsignalled WRITEs and a signalled one: one CQE.
            poison(&mut dst_b[..512], &src_b[..512]);
            let w = (si.device_va(iova), dst_iova, 512u32);
            let mut batch = [(w.0, w.1, w.2, false, None); 8];
            batch[7].3 = true;
            qa.post_wqes(&batch);
            let last = qa.pi.wrapping_sub(1) as u16;
            let cqe = qa.poll_spin(SPINS);
            let landed = first_difference(&src_b[..512], &dst_b[..512]);
            // Nothing more.
            let extra = qa.poll_spin(1000);
            (cqe, last, extra, landed)
        });
        calls += n;
        batch
    };
    check(
        calls == 0,
        format!("system calls on the post and poll path: {calls}"),
    );
    for o in &outcomes {
        let Some(c) = o.cqe else {
            fail(format!("WRITE of {} bytes: no CQE", o.len));
        };
        check(
            c.status == CQE_SUCCESS && c.qpn == index && o.mismatch.is_none() && o.neighbours,
            format!(
                "dv WRITE of {} bytes: CQE QP {} WQE {} status {}; landed byte-exact: {}; neighbours untouched: {}",
                o.len,
                c.qpn,
                c.wqe_index,
                c.status,
                o.mismatch.map_or("yes".to_string(), |at| format!("no, first difference at {at}")),
                o.neighbours
            ),
        );
    }
    let (bc, last, extra, landed) = batch_cqe;
    check(
        matches!(bc, Some(c) if c.status == CQE_SUCCESS && c.wqe_index == last)
            && extra.is_none()
            && landed.is_none(),
        format!(
            "7 unsignalled + 1 signalled WRITE: one CQE {bc:?} (WQE {last}), then none ({extra:?}); data landed: {}",
            landed.is_none()
        ),
    );
    check(
        stat(&mut emu, "mmu_faults") == faults,
        format!("no translation fault ({faults})"),
    );
    // No WRITE with immediate on the NIC.
    write_imm_refused(&ctx, &mut set, pa, si.device_va(iova), &mut dst, dst_iova);
    check(
        port_stat(&mut emu, pa - 1, "tx") > tx,
        format!(
            "port {pa} sent frames ({tx} -> {})",
            port_stat(&mut emu, pa - 1, "tx")
        ),
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    teardown(&ctx, [], [smr, dmr]);
}

/// A WQE of another opcode than LINEAR (what a WRITE with
/// immediate would need: the NIC has no such operation) puts the QP of
/// port `pa` in ERR, with no CQE and nothing landed at `dst_iova` (`dst`).
fn write_imm_refused(
    ctx: &Context,
    set: &mut QpSet,
    pa: u32,
    src_va: u64,
    dst: &mut Mapping,
    dst_iova: u64,
) {
    let h = set.handle;
    let dst_b = dst.bytes();
    dst_b[..64].fill(0x5a);
    let qa = set.qp(pa);
    qa.post_write(src_va, dst_iova, 64, true, Some(0x1234_5678));
    let mut state = 0;
    for _ in 0..500 {
        state = ctx
            .query_qp_set(h, pa)
            .unwrap_or_else(|e| fail(format!("query QP set: {e}")))
            .state;
        if state == u32::from(gaudi_verbs::QPS_ERR) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let cqe = set.qp(pa).poll_spin(1000);
    check(
        state == u32::from(gaudi_verbs::QPS_ERR) && cqe.is_none() && dst.bytes()[..64].iter().all(|&b| b == 0x5a),
        format!("WRITE with immediate (not on the NIC): QP state {state} (ERR expected), CQE {cqe:?}, nothing landed"),
    );
}

/// The device VA of a region of a context that registered memory and went
/// away: the next owner must not reach it. The context's first region keeps
/// the second above what the next context's small regions take.
fn gone_context_va() -> u64 {
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut big = Mapping::new(64 * MIB);
    let mut small = Mapping::new(4096);
    big.bytes()[0] = 1;
    small.bytes()[0] = 1;
    let _b = ctx
        .reg_mr(
            &pd,
            big.addr(),
            64 * MIB as u64,
            big.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let s = ctx
        .reg_mr(
            &pd,
            small.addr(),
            4096,
            small.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    mr_info(&ctx, &s, "of the first context").mmu_va
}

/// Post one WRITE of 64 bytes from `local` to `remote` on the QP of port 1
/// of `set` and wait until the NIC moves it to ERR: its state then, and the
/// CQE polled after (none expected).
fn write_dv_failing(ctx: &Context, set: &mut QpSet, local: u64, remote: u64) -> (u32, Option<Cqe>) {
    set.qp(1).post_write(local, remote, 64, true, None);
    let state = wait_set_err(ctx, set.handle, std::time::Duration::from_secs(5));
    (state, set.qp(1).poll_spin(1000))
}

/// Query the QP of port 1 of the set `handle` every 10 ms until it is in
/// ERR or `limit` passed: its last state.
pub(crate) fn wait_set_err(ctx: &Context, handle: u32, limit: std::time::Duration) -> u32 {
    let began = std::time::Instant::now();
    loop {
        let state = ctx
            .query_qp_set(handle, 1)
            .unwrap_or_else(|e| fail(format!("query QP set: {e}")))
            .state;
        if state == u32::from(QPS_ERR) || began.elapsed() >= limit {
            return state;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `dv-foreign-address`: a set's QPs work in their PD's ASID, and an error
/// is a QP_ERR syndrome, not a CQE. WQEs naming device VAs the ASID does not
/// map (never mapped, beyond every region, a region deregistered, a region
/// of a context that is gone, the send WQ slot of a QP number the PD does
/// not have) move the QP to ERR with no CQE, each a fault of the device
/// MMU; WRITEs aimed at what the peer's ASID maps read-only (its QP's send
/// queue, a region not open to remote writes) or not at all (past its
/// region) are refused by the peer's MMU (NAK: the requester goes to ERR).
/// Nothing lands, no other ASID maps the gone context's VA, the QP works
/// again after a reset. (The QP's own queues are no WQE source to test: a
/// send queue is mapped read-only in its own ASID, and holds only what the
/// process wrote; CQs are reached by bus address, in no ASID.)
pub(crate) fn dv_foreign_address(_args: &[String]) {
    let mut emu = emu();
    let gone_va = gone_context_va();
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(16 * 4096);
    let mut dst = Mapping::new(16 * 4096);
    fill(src.bytes(), 3);
    dst.bytes().fill(0);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            16 * 4096,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            16 * 4096,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let si = mr_info(&ctx, &smr, "source");
    let mut set = dv_loopback(&ctx, 1, 2, dmr.rkey);
    let mut gone = Mapping::new(4096);
    gone.bytes()[0] = 1;
    let freed = ctx
        .reg_mr(
            &pd,
            gone.addr(),
            4096,
            gone.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let freed_va = mr_info(&ctx, &freed, "to deregister").mmu_va;
    ctx.dereg_mr(freed)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    // No ASID maps the gone context's VA or the deregistered one.
    for va in [gone_va, freed_va] {
        let found = emu
            .command(&format!("asid-find {va}"))
            .unwrap_or_else(|e| fail(format!("emulator asid-find: {e}")));
        check(
            found.iter().any(|l| l.trim() == "asids"),
            format!("device VA {va:#x}: mapped in {found:?} (none expected)"),
        );
    }
    let sq_va = set.qp(1).info.sq_va;
    let peer_sq_va = set.qp(2).info.sq_va;
    let faults0 = stat(&mut emu, "mmu_faults");
    let local = [
        ("a device VA never mapped (4 KiB)", 0x1000u64),
        ("a device VA beyond every region", (1u64 << 39) - 4096),
        ("a deregistered region", freed_va),
        ("a region of a context that is gone", gone_va),
        (
            "the send WQ slot of a QP number the PD lacks",
            sq_va + 16 * 1024,
        ),
    ];
    for (i, (what, va)) in local.iter().enumerate() {
        if i > 0 {
            connect_pair(&ctx, &mut set, 1, 2, dmr.rkey);
        }
        let (state, cqe) = write_dv_failing(&ctx, &mut set, *va, dst.addr());
        check(
            cqe.is_none() && state == u32::from(QPS_ERR),
            format!("WQE source in {what} ({va:#x}): QP state {state} (ERR is 6), CQE {cqe:?}"),
        );
    }
    let remote = [
        ("the peer QP's send queue (read-only)", peer_sq_va),
        (
            "a region of the peer not open to remote writes (read-only in its ASID)",
            si.device_va(src.addr()),
        ),
        ("past the peer's region", dst.addr() + 16 * 4096),
    ];
    for (what, to) in remote {
        connect_pair(&ctx, &mut set, 1, 2, dmr.rkey);
        let (state, cqe) = write_dv_failing(&ctx, &mut set, si.device_va(src.addr()), to);
        check(
            cqe.is_none() && state == u32::from(QPS_ERR),
            format!("WRITE to {what} ({to:#x}): QP state {state} (ERR is 6), CQE {cqe:?}"),
        );
    }
    let faults = stat(&mut emu, "mmu_faults") - faults0;
    let want = (local.len() + remote.len()) as u64;
    check(
        faults == want,
        format!("device MMU faults counted: {faults} (expected {want})"),
    );
    check(
        dst.bytes().iter().all(|b| *b == 0),
        "nothing landed in the destination".into(),
    );
    connect_pair(&ctx, &mut set, 1, 2, dmr.rkey);
    let cqe = write_dv_once(set.qp(1), si.device_va(src.addr()), dst.addr(), 4096);
    check(
        matches!(cqe, Some(c) if c.status == CQE_SUCCESS)
            && dst.bytes()[..4096] == src.bytes()[..4096],
        format!("after a reset a WRITE lands again: {cqe:?}"),
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    teardown(&ctx, [], [smr, dmr]);
}

/// Post one WRITE on `qp` and wait for its CQE; the post and the poll make
/// no system call.
fn write_dv_once(qp: &mut DvQp, local: u64, remote: u64, len: u32) -> Option<Cqe> {
    let (cqe, calls) = post_and_poll(qp, local, remote, len);
    check(
        calls == 0,
        format!("WRITE of {len} bytes: {calls} system calls"),
    );
    cqe
}

/// Bytes of a QP number's slot of a port's send WQ array, and of a port's
/// array (design.rst, "Queue pairs on the NIC's contexts").
pub(crate) const WQ_SLOT: u64 = 64 * 1024;
const WQ_PORT_ARRAY: u64 = 1024 * WQ_SLOT;

/// The ASIDs mapping device VA `va` (emulator `asid-find`).
pub(crate) fn asids_mapping(emu: &mut EmuCtl, va: u64) -> Vec<String> {
    let lines = emu
        .command(&format!("asid-find {va}"))
        .unwrap_or_else(|e| fail(format!("emulator asid-find: {e}")));
    lines
        .iter()
        .find_map(|l| l.strip_prefix("asids"))
        .unwrap_or_else(|| fail(format!("emulator asid-find: {lines:?}")))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `qp-set-same-index`: a QP is on the NIC once it has contexts (from RTR)
/// but holds its send WQ slot of its port, in its PD's ASID, from creation
/// (a set's QPs) or INIT (a standard verbs QP): the slots are what the
/// device shows of an index taken. A set over all ports
/// has its index's slot mapped (read-only, in one ASID) on every port, at
/// the ports' arrays 16 MiB apart; an index held on one port, by another
/// set or by a standard verbs QP is refused (EBUSY) with no slot mapped; a
/// second set gets another index; a port the device lacks is EINVAL; a
/// destroyed set's slots are gone and its index can be taken again.
pub(crate) fn qp_set_same_index(_args: &[String]) {
    let ctx = open_ctx();
    let n = ctx.resp.num_ports;
    let all = (1u64 << n) - 1;
    let mut emu = emu();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let set = ctx
        .create_qp_set(all, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("QP set over {n} ports: {e}")));
    let index = set.resp.index;
    let base = set.qps[0].info.sq_va - u64::from(index) * WQ_SLOT;
    let slot = |p: u32, i: u32| base + u64::from(p) * WQ_PORT_ARRAY + u64::from(i) * WQ_SLOT;
    let held = |emu: &mut EmuCtl, i: u32| -> Vec<bool> {
        (0..n)
            .map(|p| !asids_mapping(emu, slot(p, i)).is_empty())
            .collect()
    };
    let layout = set
        .qps
        .iter()
        .enumerate()
        .all(|(p, q)| q.info.port_num == p as u32 + 1 && q.info.sq_va == slot(p as u32, index));
    let one_ro = (0..n).all(|p| {
        let a = asids_mapping(&mut emu, slot(p, index));
        a.len() == 1 && a[0].ends_with(":ro")
    });
    check(
        set.qps.len() == n as usize && layout && one_ro,
        format!(
            "QP set over {n} ports: index {index}; its send WQ slot mapped read-only in one ASID on every port, the ports' arrays {} MiB apart",
            WQ_PORT_ARRAY >> 20
        ),
    );
    let lone_port = 7u32.min(n);
    let lone = ctx
        .create_qp_set(1 << (lone_port - 1), None, 4, 4)
        .unwrap_or_else(|e| fail(format!("QP set on port {lone_port}: {e}")));
    let taken = lone.resp.index;
    let taken_before = held(&mut emu, taken);
    expect_errno(
        &format!("QP set over {n} ports at index {taken}, held on port {lone_port}"),
        ctx.create_qp_set(all, Some(taken), 4, 4)
            .map(|s| s.resp.index),
        libc::EBUSY,
    );
    expect_errno(
        &format!("QP set over {n} ports at index {index}, held by the first set"),
        ctx.create_qp_set(all, Some(index), 4, 4)
            .map(|s| s.resp.index),
        libc::EBUSY,
    );
    check(
        held(&mut emu, taken) == taken_before
            && taken_before.iter().filter(|h| **h).count() == 1
            && taken_before[lone_port as usize - 1],
        format!("the refused sets mapped no slot: index {taken} only on port {lone_port}"),
    );
    // A QP of the standard verbs holds its number on every port.
    let e = end(&ctx, &pd, 1, None);
    expect_errno(
        &format!(
            "QP set on port {n} at index {}, a verbs QP's number",
            e.qp.qpn
        ),
        ctx.create_qp_set(1 << (n - 1), Some(e.qp.qpn), 4, 4)
            .map(|s| s.resp.index),
        libc::EBUSY,
    );
    let other = ctx
        .create_qp_set(all, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("second QP set: {e}")));
    let o = other.resp.index;
    check(
        o != index && o != taken && o != e.qp.qpn,
        format!("a second set over {n} ports: index {o}"),
    );
    expect_errno(
        "QP set with a port the device lacks",
        ctx.create_qp_set(1 << n, None, 4, 4).map(|s| s.resp.index),
        libc::EINVAL,
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    check(
        held(&mut emu, index).iter().all(|h| !h),
        format!("destroyed: no port holds a slot of index {index} any more"),
    );
    let again = ctx
        .create_qp_set(all, Some(index), 4, 4)
        .unwrap_or_else(|e| fail(format!("QP set at the freed index {index}: {e}")));
    check(
        again.resp.index == index && held(&mut emu, index).iter().all(|h| *h),
        format!("index {index} can be taken again, on every port"),
    );
    for s in [again, other, lone] {
        ctx.destroy_qp_set(s)
            .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    }
    teardown(&ctx, [e], []);
    let left: Vec<u32> = [index, o, taken]
        .into_iter()
        .filter(|&i| held(&mut emu, i).iter().any(|h| *h))
        .collect();
    check(
        left.is_empty(),
        format!("no slot left on the device: indexes still held {left:?}"),
    );
}

/// `dv-write-source`: as `write-source`, from a one-port QP set: the WQEs
/// are written and the doorbell rung without system calls.
pub(crate) fn dv_write_source(args: &[String]) {
    let peer_ip = peer_arg(args);
    let port = arg(args, "--port", Some(1)) as u32;
    let max = arg(args, "--max-mib", Some(1024)) as usize * MIB;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(max);
    let seed = 0xd5;
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
    let si = mr_info(&ctx, &smr, "source");
    let mut set = ctx
        .create_qp_set(1 << (port - 1), None, 7, 8)
        .unwrap_or_else(|e| fail(format!("create QP set: {e}")));
    let info = ctx
        .query_port(port.into())
        .unwrap_or_else(|e| fail(format!("query port: {e}")));
    let mut peer = Peer::dial(&peer_ip);
    let t = peer.recv();
    println!("target: {t}");
    crate::check_peer_test(&t);
    peer.send(&format!(
        "source test={} qpn={} mac={} ip={}",
        crate::test_name(),
        set.resp.index,
        mac_str(info.mac),
        std::net::Ipv4Addr::from(gaudi_verbs::port_ipv4(&info))
    ));
    let (rkey, raddr, rlen) = (
        kv_num(&t, "rkey") as u32,
        kv_num(&t, "addr"),
        kv_num(&t, "len") as usize,
    );
    let h = set.handle;
    ctx.connect_dv(
        h,
        set.qp(port),
        parse_mac(kv(&t, "mac")),
        parse_ip(kv(&t, "ip")),
        kv_num(&t, "qpn") as u32,
        rkey,
        0,
        MTU_4096,
        14,
    )
    .unwrap_or_else(|e| fail(format!("QP set to RTS: {e}")));
    let r = peer.recv();
    check(r == "ready", format!("target ready ({r})"));
    let max = max.min(rlen);
    let sizes = write_sizes(max);
    for len in sizes {
        let off = if len < MIB { 4096 + 5 } else { 0 };
        let cqe = write_dv_once(
            set.qp(port),
            si.device_va(src.addr()),
            raddr + off as u64,
            len as u32,
        );
        check(
            matches!(cqe, Some(c) if c.status == CQE_SUCCESS),
            format!("dv WRITE of {len} bytes to the other host: CQE {cqe:?}"),
        );
        peer.send(&format!("check {off} {len} {seed}"));
        let r = peer.recv();
        check(r == "ok", format!("target checked {len} bytes: {r}"));
    }
    peer.send("done");
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    teardown(&ctx, [], [smr]);
}

/// The fast path's part of `bench-local`: the same 64-byte WRITEs as the
/// post_send measurement (every 32nd signalled and waited for), written to
/// a QP set's mapped send queue with one doorbell per batch. `standard`
/// holds post_send's time-stamp counter ticks in posting per batch size,
/// measured in the same run since `clock` (a time and the counter then),
/// which turns ticks into time. Prints WQEs per second of one core,
/// posting only, and the end-to-end rate.
pub(crate) fn bench_dv_post(
    ctx: &Context,
    smr: &Mr,
    dmr: &Mr,
    total: usize,
    standard: &[(usize, u64)],
    clock: (std::time::Instant, u64),
) {
    let si = mr_info(ctx, smr, "source");
    let di = mr_info(ctx, dmr, "destination");
    let mut set = dv_loopback(ctx, 1, 2, dmr.rkey);
    let qp = set.qp(1);
    let mut results = Vec::new();
    for &(batch, post_send) in standard {
        let mut in_post = 0u64;
        let start = std::time::Instant::now();
        let mut posted = 0usize;
        let mut wqes = Vec::with_capacity(batch);
        while posted < total {
            wqes.clear();
            wqes.extend((0..batch).map(|k| {
                let n = posted + k;
                (
                    si.device_va(si.iova + (n % 1024) as u64 * 64),
                    di.iova,
                    64u32,
                    n % 32 == 31,
                    None,
                )
            }));
            let c = ticks();
            qp.post_wqes(&wqes);
            in_post += ticks() - c;
            posted += batch;
            if posted % 32 == 0 {
                match qp.poll_spin(SPINS) {
                    Some(c) if c.status == CQE_SUCCESS => {}
                    c => fail(format!("dv completion {c:?}")),
                }
            }
        }
        results.push((batch, post_send, in_post, start.elapsed()));
    }
    // Ticks per second, over everything since `clock` (seconds: the guest's
    // coarse clock does not matter).
    let hz = (ticks() - clock.1) as f64 / clock.0.elapsed().as_secs_f64();
    for (batch, post_send, dv, all) in results {
        let ns = |t: u64| t as f64 / hz * 1e9 / total as f64;
        println!(
            "bench: WQEs per second of one core, {batch} per doorbell/call: dv post {:.0} ({:.0} ns per WQE), post_send {:.0} ({:.0} ns per WQE); dv/post_send {:.1}x; dv end to end (post and complete) {:.0} WQEs/s",
            1e9 / ns(dv),
            ns(dv),
            1e9 / ns(post_send),
            ns(post_send),
            ns(post_send) / ns(dv),
            total as f64 / all.as_secs_f64(),
        );
    }
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
}

/// `dv-hold`: a QP set over ports 1 and 2 with its queues and doorbell
/// pages mapped, one WRITE through it; prints "holding" and waits for a
/// line on stdin (the test unbinds the device meanwhile), then writes a WQE,
/// rings the doorbell and reads the CQ through the mappings the core zapped
/// (no fault, nothing reaches the device), expects EIO from the namespace,
/// prints "touched" and exits, unmapping the queues.
pub(crate) fn dv_hold(_args: &[String]) {
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(4096);
    let mut dst = Mapping::new(4096);
    fill(src.bytes(), 9);
    dst.bytes().fill(0);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            4096,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            4096,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let (si, di) = (
        mr_info(&ctx, &smr, "source"),
        mr_info(&ctx, &dmr, "destination"),
    );
    let mut set = dv_loopback(&ctx, 1, 2, dmr.rkey);
    let cqe = write_dv_once(set.qp(1), si.mmu_va, di.iova, 4096);
    check(
        matches!(cqe, Some(c) if c.status == CQE_SUCCESS) && dst.bytes() == src.bytes(),
        format!("a WRITE through the mapped queues: {cqe:?}"),
    );
    // Device memory exported as a dma-buf and registered from it, held
    // across the unbind too.
    let hbm = ctx
        .hbm_alloc(2 << 20)
        .unwrap_or_else(|e| fail(format!("HBM alloc: {e}")));
    let buf = ctx
        .hbm_export(&hbm, GAUDI_IB_HBM_EXPORT_CLOEXEC)
        .unwrap_or_else(|e| fail(format!("HBM export: {e}")));
    let _hmr = ctx
        .reg_dmabuf_mr(
            &pd,
            &buf,
            0,
            2 << 20,
            0,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("dma-buf MR: {e}")));
    println!("holding");
    std::io::stdout().flush().ok();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).ok();
    expect_errno(
        "HBM export after the device went away",
        ctx.hbm_export(&hbm, 0),
        libc::EIO,
    );
    // The last reference to the block goes after its device.
    drop(buf);
    let qp = set.qp(1);
    qp.post_write(si.mmu_va, di.iova, 4096, true, None);
    let after = qp.poll_spin(1000);
    println!("after the device went away: WQE written, doorbell rung, CQ read: {after:?}");
    expect_errno(
        "QP_SET_QUERY after the device went away",
        ctx.query_qp_set(set.handle, 1),
        libc::EIO,
    );
    drop(set);
    println!("touched");
}

/// The most lines a message limited to `burst` per `interval` can add in a
/// phase that took `took`: the window open when it began, and one more per
/// interval begun since (2 bursts for a phase shorter than the interval).
fn rate_limit_bound(took: Duration, interval: Duration, burst: u64) -> u64 {
    burst * (2 + took.as_secs() / interval.as_secs())
}

/// `log-ratelimited [--verbs N] [--faults N]`: what user space provokes by
/// the thousand adds a few dozen kernel log lines at most. N (default
/// 10000) REG_MR with REMOTE_ATOMIC, each refused with EOPNOTSUPP (the driver
/// logs 10 refusals per 5 s), add at most 20 lines; N MMU faults of WQEs
/// whose source device VA is unmapped (each a QP_ERR syndrome: the QP reads
/// ERR through QUERY, no CQE; the QP brought back through RESET, INIT and
/// RTR to RTS after each; the driver logs 10 QP set error lines, with the
/// syndrome, and 10 QP errors per minute) at most 40, and the emulator
/// counts exactly N faults. A phase slower than its interval may add a
/// burst per interval more. Then a WRITE lands again.
pub(crate) fn log_ratelimited(args: &[String]) {
    let verbs = arg(args, "--verbs", Some(10_000));
    let faults = arg(args, "--faults", Some(10_000));
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut src = Mapping::new(4096);
    let mut dst = Mapping::new(4096);
    fill(src.bytes(), 11);
    dst.bytes().fill(0);
    let mut log = ownership::kernel_log();

    let t = std::time::Instant::now();
    for i in 0..verbs {
        match ctx.reg_mr(
            &pd,
            src.addr(),
            4096,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_ATOMIC,
        ) {
            Err(e) if errno(&e) == libc::EOPNOTSUPP => {}
            Err(e) => fail(format!(
                "REG_MR with REMOTE_ATOMIC {i} of {verbs}: errno {} ({e}), expected EOPNOTSUPP",
                errno(&e)
            )),
            Ok(mr) => fail(format!(
                "REG_MR with REMOTE_ATOMIC {i} of {verbs}: accepted (key {:#x})",
                mr.lkey
            )),
        }
    }
    let took = t.elapsed();
    let (lines, refusals) = ownership::new_lines(&mut log, "memory registration with access");
    let allowed = rate_limit_bound(took, Duration::from_secs(5), 10);
    check(
        lines <= allowed && refusals >= 1,
        format!(
            "{verbs} REG_MR with REMOTE_ATOMIC, each EOPNOTSUPP, in {:.1} s: {lines} kernel log lines added ({refusals} \"memory registration with access ... refused\"), at most {allowed}",
            took.as_secs_f64()
        ),
    );

    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            4096,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let dmr = ctx
        .reg_mr(
            &pd,
            dst.addr(),
            4096,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let (si, di) = (
        mr_info(&ctx, &smr, "source"),
        mr_info(&ctx, &dmr, "destination"),
    );
    let mut set = dv_loopback(&ctx, 1, 2, dmr.rkey);
    let (h, index) = (set.handle, set.resp.index);
    let peer = ctx
        .query_port(2)
        .unwrap_or_else(|e| fail(format!("query port 2: {e}")));
    // Port 1's QP through RESET, INIT and RTR to RTS again; port 2's stays
    // in RTS (nothing reached it).
    let reconnect = |qp: &mut DvQp| {
        ctx.connect_dv(
            h,
            qp,
            peer.mac,
            gaudi_verbs::port_ipv4(&peer),
            index,
            dmr.rkey,
            0,
            MTU_4096,
            14,
        )
        .unwrap_or_else(|e| fail(format!("QP set {index}: port 1 back to RTS: {e}")))
    };
    let mut emu = emu();
    let faults0 = stat(&mut emu, "mmu_faults");
    ownership::new_lines(&mut log, "");
    let t = std::time::Instant::now();
    for i in 0..faults {
        let qp = set.qp(1);
        if i > 0 {
            reconnect(qp);
        }
        // Device VA 0x1000 is never mapped: a QP_ERR syndrome, no CQE; the
        // QP reads ERR.
        match write_dv_failing(&ctx, &mut set, 0x1000, di.iova) {
            (state, None) if state == u32::from(QPS_ERR) => {}
            (state, cqe) => fail(format!(
                "fault {i} of {faults}: QP state {state}, CQE {cqe:?}, expected ERR and none"
            )),
        }
    }
    let took = t.elapsed();
    let (lines, texts) = log
        .read_new()
        .unwrap_or_else(|e| fail(format!("/dev/kmsg: {e}")));
    // The driver logs the syndrome of the QP set's QP (no fault address).
    let fault_line = "of a QP set: error, syndrome";
    let fault_lines = texts.iter().filter(|t| t.contains(fault_line)).count();
    let error_lines = texts
        .iter()
        .filter(|t| t.contains("): error, status"))
        .count();
    let moved = stat(&mut emu, "mmu_faults") - faults0;
    let secs = took.as_secs_f64();
    println!(
        "# {faults} fault cycles in {secs:.1} s: {:.0} per second, {:.2} ms each (a WQE, the QP's ERR read back, 4 QP set MODIFY ioctls)",
        faults as f64 / secs,
        secs * 1e3 / faults as f64
    );
    check(
        moved == faults,
        format!("{faults} WQEs from an unmapped device VA: each the QP in ERR, no CQE; the emulator counted {moved} MMU faults"),
    );
    let allowed = 2 * rate_limit_bound(took, Duration::from_secs(60), 10);
    check(
        lines <= allowed && fault_lines >= 1,
        format!(
            "{faults} MMU faults in {secs:.1} s: {lines} kernel log lines added ({fault_lines} \"{fault_line}\", {error_lines} \"QP set ... error\"), at most {allowed}"
        ),
    );

    // The QP works again.
    let qp = set.qp(1);
    reconnect(qp);
    let cqe = write_dv_once(qp, si.device_va(src.addr()), di.iova, 64);
    check(
        matches!(cqe, Some(c) if c.status == CQE_SUCCESS) && dst.bytes()[..64] == src.bytes()[..64],
        format!("after the faults a WRITE lands again: {cqe:?}"),
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    teardown(&ctx, [], [smr, dmr]);
}

/// The numbers of the ASIDs mapping device VA `va` (`asid-find`, without
/// their rights).
fn asid_numbers(emu: &mut EmuCtl, va: u64) -> Vec<u32> {
    asids_mapping(emu, va)
        .iter()
        .map(|a| {
            a.split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| fail(format!("emulator asid-find: {a:?}")))
        })
        .collect()
}

/// The bus address of the byte at `va` of this process (the guest has no
/// IOMMU: its physical address), from `/proc/self/pagemap` (root sees the
/// frame numbers).
pub(crate) fn bus_address(va: u64) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open("/proc/self/pagemap")
        .unwrap_or_else(|e| fail(format!("/proc/self/pagemap: {e}")));
    let mut e = [0u8; 8];
    f.seek(SeekFrom::Start(va / 4096 * 8))
        .and_then(|_| f.read_exact(&mut e))
        .unwrap_or_else(|e| fail(format!("/proc/self/pagemap at {va:#x}: {e}")));
    let e = u64::from_le_bytes(e);
    let pfn = e & ((1 << 55) - 1);
    if e >> 63 == 0 || pfn == 0 {
        fail(format!(
            "page of {va:#x} not present or its frame hidden: {e:#x}"
        ));
    }
    pfn * 4096 + va % 4096
}

/// `asid-isolation`: the QPs of one protection domain reach memory only
/// through their PD's ASID. Context A registers two regions closed to
/// remote writes and one open to them (at its iova); context B registers
/// one of each. The ASIDs' device VA spaces are alike: B's closed region
/// gets the device VA of A's first, and A's second and A's open region are
/// mapped in A's ASID alone. B's QP set (port 1 looped to port 2) names
/// A's second region and A's open region as WQE sources and A's open region
/// as its WRITE's destination: each moves B's QP to ERR with no CQE (a
/// fault of the device MMU in B's ASID), nothing of A's reaches B's
/// destination and A's region keeps its bytes; the VA both ASIDs map reads
/// B's own bytes for B. User space cannot give its QPs the MMU bypass:
/// writing the bypass bit with A's ASID into every register of B's doorbell
/// (UMR) pages (both FIFOs' doorbells, both CQ consumer index slots) leaves the override of B's doorbell FIFOs as
/// the driver set it (B's ASID, no bypass), and a WQE whose source is the
/// bus address of B's own source buffer faults in B's ASID rather than
/// reading it physically. The device MMU counts one fault per refusal, the
/// DMA audit stays 0, and B's QP works after a reset.
pub(crate) fn asid_isolation(_args: &[String]) {
    let mut emu = emu();
    let a = open_ctx();
    let apd = a
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("A: alloc_pd: {e}")));
    let mut closed = Mapping::new(4 * 4096);
    let mut closed2 = Mapping::new(4 * 4096);
    let mut open = Mapping::new(4 * 4096);
    fill(closed.bytes(), 7);
    fill(closed2.bytes(), 6);
    fill(open.bytes(), 8);
    let open_copy = open.bytes().to_vec();
    let amr = a
        .reg_mr(
            &apd,
            closed.addr(),
            4 * 4096,
            closed.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("A: reg_mr: {e}")));
    let amr2 = a
        .reg_mr(
            &apd,
            closed2.addr(),
            4 * 4096,
            closed2.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("A: reg_mr: {e}")));
    let aomr = a
        .reg_mr(
            &apd,
            open.addr(),
            4 * 4096,
            open.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("A: reg_mr: {e}")));
    let closed_va = mr_info(&a, &amr, "A's first region closed to remote writes").mmu_va;
    let closed2_va = mr_info(&a, &amr2, "A's second region closed to remote writes").mmu_va;
    let open_va = mr_info(&a, &aomr, "A's region open to remote writes").mmu_va;
    check(
        open_va == open.addr(),
        format!("A's region open to remote writes is at its iova: {open_va:#x}"),
    );
    let asid_a = asid_numbers(&mut emu, open_va);
    check(
        asid_a.len() == 1 && asid_numbers(&mut emu, closed2_va) == asid_a,
        format!(
            "A's open region and its second closed one are mapped in A's ASID alone: {asid_a:?}"
        ),
    );

    let b = open_ctx();
    let bpd = b
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("B: alloc_pd: {e}")));
    let mut src = Mapping::new(4096);
    let mut dst = Mapping::new(4 * 4096);
    fill(src.bytes(), 9);
    dst.bytes().fill(0);
    let smr = b
        .reg_mr(
            &bpd,
            src.addr(),
            4096,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("B: reg_mr: {e}")));
    let dmr = b
        .reg_mr(
            &bpd,
            dst.addr(),
            4 * 4096,
            dst.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("B: reg_mr: {e}")));
    let src_va = mr_info(&b, &smr, "B's source").mmu_va;
    let asid_b = asid_numbers(&mut emu, dst.addr());
    check(
        asid_b.len() == 1 && asid_b != asid_a,
        format!("B's open region is in an ASID of its own: {asid_b:?} (A's {asid_a:?})"),
    );
    let both = asid_numbers(&mut emu, src_va);
    check(
        src_va == closed_va && both.contains(&asid_a[0]) && both.contains(&asid_b[0]),
        format!(
            "B's closed region has the device VA of A's first ({src_va:#x}), mapped in both ASIDs: {both:?}"
        ),
    );
    let mut set = dv_loopback(&b, 1, 2, dmr.rkey);
    let faults0 = stat(&mut emu, "mmu_faults");
    let audit0 = stat(&mut emu, "dma_audit");

    for (what, va) in [
        ("A's second region closed to remote writes", closed2_va),
        ("A's region open to remote writes", open_va),
    ] {
        connect_pair(&b, &mut set, 1, 2, dmr.rkey);
        let (state, cqe) = write_dv_failing(&b, &mut set, va, dst.addr());
        check(
            cqe.is_none() && state == u32::from(QPS_ERR),
            format!("B's WQE reading {what} ({va:#x}): QP state {state} (ERR is 6), CQE {cqe:?}"),
        );
    }
    connect_pair(&b, &mut set, 1, 2, dmr.rkey);
    let (state, cqe) = write_dv_failing(&b, &mut set, src_va, open_va);
    check(
        cqe.is_none() && state == u32::from(QPS_ERR),
        format!(
            "B's WRITE to A's region open to remote writes ({open_va:#x}): QP state {state}, CQE {cqe:?}"
        ),
    );
    check(
        open.bytes()[..] == open_copy[..],
        "A's region open to remote writes keeps its bytes".into(),
    );

    // The override of B's doorbell FIFOs (QPC0_DB_FIFO_USER_OVRD of FIFOs
    // 2b and 2b + 1, port 1), which no UMR page holds.
    let (asid_a_num, asid_b_num) = (asid_a[0], asid_b[0]);
    let block = (set.qp(1).info.cqn - 2) / 2;
    let ovrd = [
        0x541_f360 + 8 * u64::from(block),
        0x541_f364 + 8 * u64::from(block),
    ];
    let bypass = 1u32 << 10 | asid_a_num;
    // The registers of a UMR page (device-model.rst); its other words hold
    // none.
    const UMR_REGS: [usize; 8] = [0x0, 0x4, 0x80, 0x84, 0x100, 0x104, 0x180, 0x184];
    for q in set.qps.iter() {
        for off in UMR_REGS {
            q.ring(off, bypass);
        }
    }
    let seen = emu
        .nic_rd(&ovrd)
        .unwrap_or_else(|e| fail(format!("emulator nic-rd: {e}")));
    check(
        seen.iter().all(|&v| v == asid_b_num),
        format!(
            "every register of B's UMR pages written {bypass:#x} (bypass, A's ASID): the overrides of B's doorbell FIFOs read {seen:x?} (B's ASID {asid_b_num}, no bypass)"
        ),
    );
    let pa = bus_address(src.addr());
    connect_pair(&b, &mut set, 1, 2, dmr.rkey);
    let (state, cqe) = write_dv_failing(&b, &mut set, pa, dst.addr());
    check(
        cqe.is_none() && state == u32::from(QPS_ERR),
        format!(
            "B's WQE naming the bus address of its own source ({pa:#x}): QP state {state}, CQE {cqe:?}"
        ),
    );
    check(
        dst.bytes().iter().all(|&x| x == 0),
        "nothing reached B's destination".into(),
    );
    let faults = stat(&mut emu, "mmu_faults") - faults0;
    check(
        faults == 4,
        format!("device MMU faults counted: {faults} (expected 4)"),
    );
    check(
        stat(&mut emu, "dma_audit") == audit0,
        "emulator DMA audit unchanged".into(),
    );
    connect_pair(&b, &mut set, 1, 2, dmr.rkey);
    let cqe = write_dv_once(set.qp(1), src_va, dst.addr(), 4096);
    check(
        matches!(cqe, Some(c) if c.status == CQE_SUCCESS) && dst.bytes()[..4096] == src.bytes()[..],
        format!(
            "after a reset B's WRITE from {src_va:#x}, the VA of A's first region too, lands B's own bytes: {cqe:?}"
        ),
    );
    b.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    teardown(&b, [], [smr, dmr]);
    teardown(&a, [], [amr, amr2, aomr]);
    println!("PASS");
}
