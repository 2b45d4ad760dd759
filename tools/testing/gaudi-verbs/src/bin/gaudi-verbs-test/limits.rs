// SPDX-License-Identifier: GPL-2.0

//! What one user context may hold of the device ("Limits" in uapi.rst),
//! and the core's bound on pinned memory.

use super::*;
use std::time::Instant;

/// The context's limits (the driver's module parameters `max_qp_sets`,
/// `max_queue_mib`, `max_mrs`; their defaults are 256, 256 and 65536): the
/// test loads the driver with smaller ones and names them with
/// `--max-sets`, `--max-queue-mib` and `--max-mrs`.
struct Caps {
    sets: usize,
    queue_bytes: u64,
    mrs: usize,
}
/// Bytes of a send WQE and of a CQE (the NIC's).
const WQE: u64 = 32;
const CQE: u64 = 16;
const PAGE: u64 = 4096;

/// Queue memory a set charges per port: its send queue and its CQ, each
/// rounded up to pages.
fn per_port(log_sq: u32, log_cq: u32) -> u64 {
    (WQE << log_sq).next_multiple_of(PAGE) + (CQE << log_cq).next_multiple_of(PAGE)
}

/// Create a QP set over `ports` (bit n: port n + 1) without mapping it;
/// its handle.
fn set(ctx: &Context, ports: u64, log_sq: u32, log_cq: u32) -> std::io::Result<u32> {
    let req = gaudi_ib_qp_set_create {
        ports,
        log_sq_entries: log_sq,
        log_cq_entries: log_cq,
        ..Default::default()
    };
    ctx.create_qp_set_raw(&req).map(|(h, _, _)| h)
}

fn destroy_sets(ctx: &Context, sets: &mut Vec<u32>) {
    for h in sets.drain(..) {
        ctx.destroy_qp_set_handle(h)
            .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    }
}

/// `CAP_IPC_LOCK` leaves the effective set of this (single-threaded)
/// process: the core's `RLIMIT_MEMLOCK` check applies to it, root or not.
pub(crate) fn drop_ipc_lock() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget fills a header and two data structures (version 3).
    if unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) } != 0 {
        fail(format!("capget: {}", std::io::Error::last_os_error()));
    }
    d[0].effective &= !(1 << CAP_IPC_LOCK);
    // SAFETY: as above; capset reads them.
    if unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) } != 0 {
        fail(format!("capset: {}", std::io::Error::last_os_error()));
    }
    let mut now = [Data::default(); 2];
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, now.as_mut_ptr()) };
    check(
        now[0].effective & (1 << CAP_IPC_LOCK) == 0,
        "CAP_IPC_LOCK dropped from the effective set".into(),
    );
}

/// `limits-enforced`: one context. 256 one-port QP sets with the smallest
/// queues are created and the 257th fails with ENOSPC; after one is
/// destroyed one more can be created. Then, the sets freed, sets over every
/// port with the largest queues the device takes are created until the
/// 256 MiB of queue memory give ENOSPC at exactly the set the arithmetic
/// predicts, the rest is filled to the byte with a smaller set, after which
/// even the smallest set is refused. 65536 regions of one 4 KiB page
/// (the same page) are registered and the 65537th fails with ENOSPC (the
/// time is printed). With CAP_IPC_LOCK dropped and RLIMIT_MEMLOCK at 64
/// MiB, 1 MiB registers but 64 GiB of never-touched MAP_NORESERVE memory
/// fails with ENOMEM from the core, at once. Everything is freed; no MMU
/// fault, the DMA audit unchanged.
pub(crate) fn limits_enforced(args: &[String]) {
    let caps = Caps {
        sets: arg(args, "--max-sets", Some(256)) as usize,
        queue_bytes: arg(args, "--max-queue-mib", Some(256)) << 20,
        mrs: arg(args, "--max-mrs", Some(65536)) as usize,
    };
    let (max_sets, max_queue_bytes, max_mrs) = (caps.sets, caps.queue_bytes, caps.mrs);
    let ctx = open_ctx();
    // QP sets work in their PD's address space, with queues of 2^4 to 2^11
    // WQEs and 2^2 to 2^13 CQEs (uapi.rst). The context's one PD serves the
    // regions too.
    let (s0, c0) = (4, 2);
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut emu = emu();
    let faults0 = stat(&mut emu, "mmu_faults");
    let audit0 = stat(&mut emu, "dma_audit");
    let nports = ctx.resp.num_ports;
    let all = ctx.resp.ports_mask;

    // QP sets: their count.
    let t = Instant::now();
    let mut sets: Vec<u32> = (0..max_sets)
        .map(|i| {
            let port = i as u32 % nports;
            set(&ctx, 1 << port, s0, c0)
                .unwrap_or_else(|e| fail(format!("QP set {} of the smallest queues: {e}", i + 1)))
        })
        .collect();
    check(
        true,
        format!(
            "{max_sets} one-port QP sets of 2^{s0} WQEs and 2^{c0} CQEs ({} KiB each) in {:?}",
            per_port(s0, c0) / 1024,
            t.elapsed()
        ),
    );
    expect_errno(
        &format!("QP set {}", max_sets + 1),
        set(&ctx, 1, s0, c0),
        libc::ENOSPC,
    );
    let h = sets.remove(0);
    ctx.destroy_qp_set_handle(h)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    sets.push(
        set(&ctx, 1, s0, c0)
            .unwrap_or_else(|e| fail(format!("a QP set after one was destroyed: {e}"))),
    );
    check(
        true,
        "after one set was destroyed, one more is created".into(),
    );
    expect_errno(
        &format!("QP set {} again", max_sets + 1),
        set(&ctx, 1, s0, c0),
        libc::ENOSPC,
    );
    destroy_sets(&ctx, &mut sets);

    // QP sets: their queue memory.
    let (ls, lc) = (
        ctx.resp.max_sqe.ilog2().min(11),
        ctx.resp.max_cqe.ilog2().min(13),
    );
    let port_bytes = per_port(ls, lc);
    let set_bytes = u64::from(nports) * port_bytes;
    let fit = max_queue_bytes / set_bytes;
    check(
        fit >= 1 && (fit as usize) < max_sets,
        format!(
            "sets over {nports} ports of 2^{ls} WQEs and 2^{lc} CQEs: {} KiB per port, {} KiB per set; {fit} fit in {} MiB",
            port_bytes / 1024,
            set_bytes / 1024,
            max_queue_bytes >> 20
        ),
    );
    let t = Instant::now();
    loop {
        match set(&ctx, all, ls, lc) {
            Ok(h) => sets.push(h),
            Err(e) => {
                check(
                    errno(&e) == libc::ENOSPC && sets.len() as u64 == fit,
                    format!(
                        "large set {} refused with errno {} ({e}) after {} in {:?}: expected ENOSPC after {fit}",
                        sets.len() + 1,
                        errno(&e),
                        sets.len(),
                        t.elapsed()
                    ),
                );
                break;
            }
        }
        if sets.len() as u64 > fit {
            fail(format!(
                "{} large sets created, {} MiB of queues: more than {} MiB",
                sets.len(),
                (sets.len() as u64 * set_bytes) >> 20,
                max_queue_bytes >> 20
            ));
        }
    }
    // The rest, to the byte: a set over as many ports as it holds.
    let rest = max_queue_bytes - fit * set_bytes;
    let k = rest / port_bytes;
    if k > 0 {
        sets.push(set(&ctx, (1u64 << k) - 1, ls, lc).unwrap_or_else(|e| {
            fail(format!(
                "a set over {k} ports for the last {} KiB: {e}",
                rest / 1024
            ))
        }));
    }
    let left = rest - k * port_bytes;
    let smallest = per_port(s0, c0);
    let r = set(&ctx, 1, s0, c0);
    match (&r, left >= smallest) {
        (Ok(_), true) => check(true, format!("{left} bytes left: the smallest set fits")),
        (Err(e), false) if errno(e) == libc::ENOSPC => check(
            true,
            format!(
                "a set over {k} ports took the last {} KiB; {left} bytes left: the smallest set ({smallest} bytes) fails with ENOSPC",
                (rest - left) / 1024
            ),
        ),
        _ => fail(format!(
            "{left} bytes of queue memory left, the smallest set ({smallest} bytes): {:?}",
            r.as_ref().map_err(errno)
        )),
    }
    if let Ok(h) = r {
        sets.push(h);
    }
    destroy_sets(&ctx, &mut sets);
    let again = set(&ctx, all, ls, lc)
        .unwrap_or_else(|e| fail(format!("a large set after all were destroyed: {e}")));
    ctx.destroy_qp_set_handle(again)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    check(
        true,
        format!(
            "the queue memory is given back: a large set again ({:?} in all)",
            t.elapsed()
        ),
    );

    // Memory regions: one page, registered over and over.
    let mut page = Mapping::new(PAGE as usize);
    page.bytes().fill(0x3c);
    let reg = || {
        ctx.reg_mr(
            &pd,
            page.addr(),
            PAGE,
            page.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
    };
    let t = Instant::now();
    let mut mrs = Vec::with_capacity(max_mrs);
    for i in 0..max_mrs {
        mrs.push(reg().unwrap_or_else(|e| fail(format!("registration {}: {e}", i + 1))));
        if (i + 1) % 8192 == 0 {
            println!("# {} registrations in {:?}", i + 1, t.elapsed());
        }
    }
    let took = t.elapsed();
    check(
        true,
        format!("{max_mrs} registrations of the same 4 KiB page in {took:?}"),
    );
    expect_errno(
        &format!("registration {}", max_mrs + 1),
        reg().map(|m| m.lkey),
        libc::ENOSPC,
    );
    let t = Instant::now();
    let n = mrs.len();
    for (i, mr) in mrs.drain(..).enumerate() {
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("deregistration {}: {e}", i + 1)));
    }
    check(true, format!("{n} deregistrations in {:?}", t.elapsed()));

    // Pinned memory: the core's RLIMIT_MEMLOCK.
    drop_ipc_lock();
    let lim = libc::rlimit {
        rlim_cur: 64 << 20,
        rlim_max: 64 << 20,
    };
    // SAFETY: a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } != 0 {
        fail(format!(
            "setrlimit RLIMIT_MEMLOCK: {}",
            std::io::Error::last_os_error()
        ));
    }
    let big = 64u64 << 30;
    // SAFETY: a fresh anonymous mapping; nothing is touched but its first
    // MiB.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            big as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        fail(format!(
            "mmap 64 GiB MAP_NORESERVE: {}",
            std::io::Error::last_os_error()
        ));
    }
    let addr = p as u64;
    let mr = ctx
        .reg_mr(&pd, addr, MIB as u64, addr, IB_UVERBS_ACCESS_LOCAL_WRITE)
        .unwrap_or_else(|e| fail(format!("1 MiB under a 64 MiB RLIMIT_MEMLOCK: {e}")));
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    check(true, "1 MiB registers under a 64 MiB RLIMIT_MEMLOCK".into());
    let t = Instant::now();
    let r = ctx.reg_mr(&pd, addr, big, addr, IB_UVERBS_ACCESS_LOCAL_WRITE);
    let took = t.elapsed();
    match r {
        Ok(_) => fail("64 GiB registered under a 64 MiB RLIMIT_MEMLOCK".into()),
        Err(e) => check(
            errno(&e) == libc::ENOMEM && took < Duration::from_secs(5),
            format!(
                "64 GiB of never-touched MAP_NORESERVE memory under a 64 MiB RLIMIT_MEMLOCK: errno {} ({e}) in {took:?}, expected ENOMEM at once",
                errno(&e)
            ),
        ),
    }
    // SAFETY: our mapping of `big` bytes.
    unsafe { libc::munmap(p, big as usize) };
    ctx.dealloc_pd(pd)
        .unwrap_or_else(|e| fail(format!("dealloc_pd: {e}")));
    let faults = stat(&mut emu, "mmu_faults");
    let audit = stat(&mut emu, "dma_audit");
    check(
        faults == faults0 && audit == audit0,
        format!(
            "device MMU faults {faults0} -> {faults}, DMA audit {audit0} -> {audit}: unchanged"
        ),
    );
    println!("PASS");
}
