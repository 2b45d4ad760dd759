// SPDX-License-Identifier: GPL-2.0

//! In-guest checks of the gaudi_ib uverbs interface. Each subcommand prints
//! what it checked and exits non-zero on the first mismatch.
//!
//!   gaudi-verbs-test uverbs --ports N [--instance I]
//!       context, PD and the driver namespace, against the emulator's
//!       default port addresses (MAC 02:1d:a3:I:00:P, IPv4 10.I.P.1).
//!   gaudi-verbs-test hold
//!       take the device's context and a PD, print "holding", sleep until
//!       killed.
//!   gaudi-verbs-test context --expect-errno E
//!       open a context: E = 0 expects success, else that errno.
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
//!   gaudi-verbs-test unsupported-opcodes
//!       on an RC QP: SEND, SEND_WITH_IMM, RDMA_READ and the atomics fail in
//!       post_send with EOPNOTSUPP naming the request, post_recv with
//!       EOPNOTSUPP; QP types and sizes the NIC lacks are refused.
//!   gaudi-verbs-test fatal [--timeout S]
//!       hold a context, a PD and the async event file, print "listening";
//!       expect DEVICE_FATAL, then the disassociation: the driver's method
//!       and a new PD fail with EIO, and only DEVICE_FATAL follows on the
//!       event file.

use gaudi_verbs::{
    errno, event_name, find_device, AsyncEvents, Attr, Context, EmuCtl, PortInfo, QpCaps, SendWr,
    Sge, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
    IB_EVENT_DEVICE_FATAL, IB_EVENT_PORT_ACTIVE, IB_EVENT_PORT_ERR, NS_DRIVER, PORT_LINK_UP,
    QPT_RC, QPT_UD, WR_ATOMIC_CMP_AND_SWP, WR_ATOMIC_FETCH_AND_ADD, WR_RDMA_READ, WR_RDMA_WRITE,
    WR_SEND, WR_SEND_WITH_IMM,
};
use std::io::Write;
use std::process::exit;
use std::time::Duration;

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
        r.abi_version == 1,
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

    // One owner at a time: a second context on the device is refused.
    expect_errno(
        "second context",
        Context::open(&path).map(|_| ()),
        libc::EBUSY,
    );

    // One PD per context; it is left to the context's release.
    let _pd = pd_checks(&ctx);

    for p in 1..=ports {
        let info = ctx
            .query_port(p.into())
            .unwrap_or_else(|e| fail(format!("QUERY_PORT {p}: {e}")));
        let idx = (p - 1) as u8;
        let mac = [0x02, 0x1d, 0xa3, inst, 0, idx];
        let ip = [10, inst, idx, 1];
        check(
            info.port_num == p
                && info.mac == mac
                && info.ipv4 == ip
                && info.flags == PORT_LINK_UP
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
    let mut info = PortInfo::default();
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
        ctx.query_port_raw([Attr::output(NS_DRIVER + 1, &mut info)]),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT without the reply",
        ctx.query_port_raw([Attr::value(NS_DRIVER, 1)]),
        libc::EINVAL,
    );
    let short = Attr::buf(NS_DRIVER + 1, (&mut info as *mut PortInfo).cast(), 16);
    expect_errno(
        "QUERY_PORT short reply buffer",
        ctx.query_port_raw([Attr::value(NS_DRIVER, 1), short]),
        libc::EINVAL,
    );
    let mut port32 = Attr::value(NS_DRIVER, 1);
    port32.len = 4;
    expect_errno(
        "QUERY_PORT 4-byte port",
        ctx.query_port_raw([port32, Attr::output(NS_DRIVER + 1, &mut info)]),
        libc::EINVAL,
    );
    expect_errno(
        "QUERY_PORT unknown mandatory attribute",
        ctx.query_port_raw([
            Attr::value(NS_DRIVER, 1),
            Attr::output(NS_DRIVER + 1, &mut info),
            Attr::value(NS_DRIVER + 7, 0),
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

fn next_event(events: &AsyncEvents, timeout: Duration, waiting_for: &str) -> (u32, u64) {
    match events.next(timeout) {
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
    // The context is disassociated when the driver removes the device:
    // from then on every verb fails with EIO.
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
    // The event file stays readable after disassociation; DEVICE_FATAL
    // (repeated by the core when it disassociated the context) marks the
    // end of the stream: no other event may follow.
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
    println!("PASS");
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
    let rw = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
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
    check(
        mr.lkey != 0 && mr.lkey == mr.rkey,
        format!("{size} B: lkey {:#x} = rkey", mr.lkey),
    );
    check(
        [12, 21, 30].contains(&shift) && mr.resp.mmu_va % page == addr % page,
        format!(
            "{size} B: device VA {:#x}, pages of 2^{shift}, registered in {took:?}",
            mr.resp.mmu_va
        ),
    );
    // The device sees what the process wrote: start, across the first
    // page boundary, middle, end.
    let mut spots = vec![(0u64, 64u64), (size / 2, 64), (size - 64, 64)];
    if size > 4096 + 64 {
        spots.push((4096 - 32, 64));
    }
    for (off, len) in spots {
        let got = emu
            .peek(mr.resp.mmu_va + off, len as usize)
            .unwrap_or_else(|e| fail(format!("{size} B: peek at +{off}: {e}")));
        if got[..] != buf[off as usize..(off + len) as usize] {
            fail(format!("{size} B: device reads other bytes at +{off}"));
        }
    }
    println!("ok: {size} B: the device reads the region as written");
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
    let rw = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;

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

    // Without REMOTE_WRITE the device may read but not write the region.
    let mut map = Mapping::new(8192);
    map.bytes()[0] = 0x5a;
    for access in [ACCESS_LOCAL_WRITE, 0] {
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
        "REMOTE_READ",
        ctx.reg_mr(&pd, map.addr(), 8192, map.addr(), ACCESS_REMOTE_READ)
            .map(|m| m.lkey),
        libc::EOPNOTSUPP,
    );
    expect_errno(
        "REMOTE_ATOMIC",
        ctx.reg_mr(
            &pd,
            map.addr(),
            8192,
            map.addr(),
            ACCESS_LOCAL_WRITE | ACCESS_REMOTE_ATOMIC,
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

    // Register and deregister, over and over: keys are never reused.
    let map = Mapping::new(65536);
    let mut last = 0;
    let t = std::time::Instant::now();
    for i in 0..cycles {
        let mr = ctx
            .reg_mr(&pd, map.addr(), 65536, map.addr(), rw)
            .unwrap_or_else(|e| fail(format!("cycle {i}: reg_mr: {e}")));
        if mr.lkey <= last {
            fail(format!("cycle {i}: key {:#x} after {last:#x}", mr.lkey));
        }
        last = mr.lkey;
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("cycle {i}: dereg_mr: {e}")));
    }
    println!(
        "ok: {cycles} register/deregister cycles of 64 KiB in {:?}, keys never reused",
        t.elapsed()
    );
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
        ctx.create_qp(&pd, &cq, QPT_UD, caps).map(|q| q.qpn),
        libc::EOPNOTSUPP,
    );
    for (what, bad) in [
        (
            "QP with a receive queue",
            QpCaps {
                max_recv_wr: 1,
                max_recv_sge: 1,
                ..caps
            },
        ),
        (
            "QP with 2 SGEs",
            QpCaps {
                max_send_sge: 2,
                ..caps
            },
        ),
        (
            "QP with inline data",
            QpCaps {
                max_inline_data: 64,
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
            ctx.create_qp(&pd, &cq, QPT_RC, bad).map(|q| q.qpn),
            libc::EINVAL,
        );
    }
    let qp = ctx
        .create_qp(&pd, &cq, QPT_RC, caps)
        .unwrap_or_else(|e| fail(format!("create RC QP: {e}")));
    check(
        qp.qpn >= 2 && qp.max_send_wr >= 16 && qp.max_send_sge == 1,
        format!(
            "RC QP {}: {} send WRs, {} SGE",
            qp.qpn, qp.max_send_wr, qp.max_send_sge
        ),
    );
    let qp2 = ctx
        .create_qp(&pd, &cq, QPT_RC, caps)
        .unwrap_or_else(|e| fail(format!("create a second RC QP: {e}")));
    check(qp2.qpn != qp.qpn, format!("second QP {}", qp2.qpn));

    let mut map = Mapping::new(4096);
    let addr = map.addr();
    map.bytes()[0] = 1;
    let mr = ctx
        .reg_mr(&pd, addr, 4096, addr, ACCESS_LOCAL_WRITE)
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let sge = Sge {
        addr,
        length: 64,
        lkey: mr.lkey,
    };
    for (name, opcode) in [
        ("SEND", WR_SEND),
        ("SEND_WITH_IMM", WR_SEND_WITH_IMM),
        ("RDMA_READ", WR_RDMA_READ),
        ("ATOMIC_CMP_AND_SWP", WR_ATOMIC_CMP_AND_SWP),
        ("ATOMIC_FETCH_AND_ADD", WR_ATOMIC_FETCH_AND_ADD),
    ] {
        let wr = SendWr {
            wr_id: 7,
            opcode,
            remote_addr: 0x1000,
            rkey: 1,
            sges: vec![sge],
            ..Default::default()
        };
        match ctx.post_send(&qp, &[wr]) {
            Ok(()) => fail(format!("post_send {name}: accepted")),
            Err((e, bad)) => check(
                errno(&e) == libc::EOPNOTSUPP && bad == 1,
                format!("post_send {name}: errno {} ({e}), bad_wr {bad}", errno(&e)),
            ),
        }
    }
    // The first request of a list fails: nothing of the list is posted.
    let list = [
        SendWr {
            opcode: WR_RDMA_READ,
            sges: vec![sge],
            ..Default::default()
        },
        SendWr {
            opcode: WR_RDMA_WRITE,
            sges: vec![sge],
            ..Default::default()
        },
    ];
    match ctx.post_send(&qp, &list) {
        Ok(()) => fail("post_send [RDMA_READ, RDMA_WRITE]: accepted".into()),
        Err((e, bad)) => check(
            errno(&e) == libc::EOPNOTSUPP && bad == 1,
            format!(
                "post_send [RDMA_READ, RDMA_WRITE]: errno {}, bad_wr {bad}",
                errno(&e)
            ),
        ),
    }
    expect_errno("post_recv", ctx.post_recv(&qp, 9, sge), libc::EOPNOTSUPP);
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("uverbs") => uverbs(&args[1..]),
        Some("hold") => hold(),
        Some("context") => context(&args[1..]),
        Some("pd-single") => pd_single(),
        Some("events") => events(&args[1..]),
        Some("fatal") => fatal(&args[1..]),
        Some("mr-register") => mr_register(&args[1..]),
        Some("unsupported-opcodes") => unsupported_opcodes(),
        _ => fail(
            "usage: gaudi-verbs-test uverbs --ports N [--instance I] | hold | \
             context --expect-errno E | pd-single | events --expect NAME:PORT,... \
             [--timeout S] | fatal [--timeout S] | mr-register [--max-mib M] [--cycles N] [--huge2m-mib H] [--huge1g] | unsupported-opcodes"
                .into(),
        ),
    }
}
