// SPDX-License-Identifier: GPL-2.0

//! What a memory region opens: device pages that end where the pinned
//! memory ends, and remote WRITEs that stay inside the pages of the
//! regions their QP's PD opens to remote writes, named by their iova and
//! the PD's key.

use super::*;
use gaudi_verbs::WC_REM_ACCESS_ERR;

const PAGE: u64 = 4096;
const HUGE: u64 = 2 << 20;
const RW: u32 = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;

/// [`fill`], with no zero byte: a device read of the wrong memory, or of
/// nothing, cannot pass for one of these bytes.
fn nonzero_fill(buf: &mut [u8], seed: u64) {
    fill(buf, seed);
    for b in buf.iter_mut().filter(|b| **b == 0) {
        *b = 1;
    }
}

/// What the device sees of `mr`, `len` bytes registered at `iova` whose
/// first and last bytes the CPU set to `ends`: 4 KiB device pages, the
/// device VA at the iova's offset in its page, the first and last byte as
/// written, and nothing mapped one byte before the first pinned page or at
/// the byte after the last one. The MMU faults provoked (2).
fn contained(
    emu: &mut EmuCtl,
    mr: &Mr,
    iova: u64,
    len: u64,
    ends: (u8, u8),
) -> Result<u64, String> {
    let (shift, va) = (mr.resp.page_shift, mr.resp.mmu_va);
    let lead = iova % PAGE;
    if shift != 12 {
        return Err(format!("device pages of 2^{shift} bytes, expected 2^12"));
    }
    if va % PAGE != lead {
        return Err(format!(
            "device VA {va:#x} is not at the iova's offset {lead:#x} in its page"
        ));
    }
    // As the region's ASID maps it (at its iova: it is open to remote
    // writes).
    emu.view_asid_of(va)
        .map_err(|e| format!("emulator asid-find: {e}"))?;
    let first_page = va - lead;
    let end = first_page + (lead + len).next_multiple_of(PAGE);
    // Four bytes as the device sees them, read in one command.
    let at = [first_page.wrapping_sub(1), end, va, va + len - 1];
    let got = emu
        .peek_bytes(&at)
        .map_err(|e| format!("emulator peek-bytes: {e}"))?;
    for (what, i) in [
        ("one byte before the first pinned page", 0),
        ("the byte after the last pinned page", 1),
    ] {
        if let Some(v) = got[i] {
            return Err(format!(
                "{what} (device VA {:#x}) is mapped: it reads {v:#04x}",
                at[i]
            ));
        }
    }
    for (what, i, want) in [("the first byte", 2, ends.0), ("the last byte", 3, ends.1)] {
        if got[i] != Some(want) {
            return Err(format!(
                "{what} (device VA {:#x}): {:?}, the CPU wrote {want:#04x}",
                at[i], got[i]
            ));
        }
    }
    Ok(2)
}

/// Register `len` bytes at byte `off` of `map` with `iova`, check what the
/// device sees ([`contained`]) and deregister; the faults provoked and the
/// region's device VA.
#[allow(clippy::too_many_arguments)]
fn host_region(
    ctx: &Context,
    pd: &Pd,
    emu: &mut EmuCtl,
    map: &mut Mapping,
    off: usize,
    len: usize,
    iova: u64,
    what: &str,
) -> (u64, u64) {
    let addr = map.addr() + off as u64;
    let b = &map.bytes()[off..off + len];
    let ends = (b[0], b[len - 1]);
    let mr = ctx
        .reg_mr(pd, addr, len as u64, iova, RW)
        .unwrap_or_else(|e| fail(format!("{what}: reg_mr of {len} B at iova {iova:#x}: {e}")));
    let r = contained(emu, &mr, iova, len as u64, ends);
    let va = mr.resp.mmu_va;
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("{what}: dereg_mr: {e}")));
    let faults = r.unwrap_or_else(|e| fail(format!("{what}: {len} B at iova {iova:#x}: {e}")));
    (faults, va)
}

/// Regions of the shapes `(length, offset in the first page)` starting in
/// page `page` of `map`, each at iovas `k * 4 KiB + offset` for `k` below
/// `window`. The case that matters is the iova whose device VA is congruent
/// to the first page's physical address modulo 2 MiB: a driver that chose
/// device pages by that congruence alone would map 2 MiB there. With
/// `stride` 1 every `k` is registered (one of them is that case, whatever
/// the memory); otherwise the physical address comes from
/// `/proc/self/pagemap` and the congruent `k`, its neighbours, every
/// `stride`-th `k` and the last are registered, and the sweep fails unless
/// one of them was congruent. The faults provoked.
#[allow(clippy::too_many_arguments)]
fn sweep(
    ctx: &Context,
    pd: &Pd,
    emu: &mut EmuCtl,
    map: &mut Mapping,
    page: usize,
    shapes: &[(usize, usize)],
    window: u64,
    stride: u64,
    what: &str,
) -> u64 {
    let mut faults = 0;
    let off = page * PAGE as usize;
    let pa = dv::bus_address(map.addr() + off as u64) % HUGE;
    for &(len, lead) in shapes {
        let t = std::time::Instant::now();
        // The device VA of a region at iova k * 4 KiB + lead is that iova
        // plus an offset fixed for the PD (a multiple of 4 KiB), which the
        // first registration shows.
        let (f, va) = host_region(ctx, pd, emu, map, off + lead, len, lead as u64, what);
        faults += f;
        let shift = (va - lead as u64) % HUGE;
        let k0 = (pa + HUGE - shift) % HUGE / PAGE;
        let ks: Vec<u64> = (1..window)
            .filter(|&k| stride <= 1 || k % stride == 0 || k + 1 == window || k0.abs_diff(k) <= 1)
            .collect();
        let mut congruent = (va - lead as u64) % HUGE == pa;
        for &k in &ks {
            let iova = k * PAGE + lead as u64;
            let (f, va) = host_region(
                ctx,
                pd,
                emu,
                map,
                off + lead,
                len,
                iova,
                &format!("{what}, iova {iova:#x}"),
            );
            faults += f;
            congruent |= (va - lead as u64) % HUGE == pa;
        }
        check(
            congruent,
            format!("{what}: one of the iovas has its device VA congruent to the physical address {pa:#x} modulo 2 MiB (k = {k0})"),
        );
        println!(
            "ok: {what}: {len} B at byte {lead} of a page, at {} of the {window} iovas {:#x} to {:#x} (the one whose device VA is congruent to the memory's physical address modulo 2 MiB among them, k = {k0}): 4 KiB device pages, nothing mapped next to the pinned pages, the ends read as written ({:?})",
            ks.len() + 1,
            lead,
            (window - 1) * PAGE + lead as u64,
            t.elapsed()
        );
    }
    faults
}

/// A transparent huge page split down to its first 8 KiB: a 2 MiB-aligned
/// 2 MiB of `map`, advised, touched, and all but the first 8 KiB dropped.
/// The offset of those 8 KiB in `map`, or `None` when the kernel has no
/// transparent huge pages.
fn split_thp(map: &mut Mapping) -> Option<usize> {
    let start = (map.addr().next_multiple_of(HUGE) - map.addr()) as usize;
    let base = map.addr() + start as u64;
    // SAFETY: advice on 2 MiB of our own mapping.
    if unsafe {
        libc::madvise(
            base as *mut libc::c_void,
            HUGE as usize,
            libc::MADV_HUGEPAGE,
        )
    } != 0
    {
        println!(
            "# MADV_HUGEPAGE: {} (no transparent huge pages in this kernel): the split-THP case is left out; the hugetlbfs page stands for physically contiguous memory",
            std::io::Error::last_os_error()
        );
        return None;
    }
    nonzero_fill(&mut map.bytes()[start..start + HUGE as usize], 0x7e);
    let huge = std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    println!("THP: 2 MiB at {base:#x} touched, AnonHugePages {huge}");
    // SAFETY: drops pages of our own mapping; they read as zeros after.
    if unsafe {
        libc::madvise(
            (base + 8192) as *mut libc::c_void,
            HUGE as usize - 8192,
            libc::MADV_DONTNEED,
        )
    } != 0
    {
        fail(format!(
            "MADV_DONTNEED: {}",
            std::io::Error::last_os_error()
        ));
    }
    Some(start)
}

/// The HBM part: 4 KiB, then 8 KiB of device memory (first fit puts the
/// 8 KiB right after the 4 KiB); the 8 KiB exported and registered from its
/// dma-buf at iovas congruent to its bus address modulo 2 MiB and 1 GiB (its
/// bus address itself) and at 2 MiB: 4 KiB device pages, nothing mapped
/// next to it (the 4 KiB block before it is another owner's). The faults
/// provoked.
fn hbm_region(ctx: &Context, pd: &Pd, emu: &mut EmuCtl) -> u64 {
    let small = ctx
        .hbm_alloc(PAGE)
        .unwrap_or_else(|e| fail(format!("HBM alloc of 4 KiB: {e}")));
    let block = ctx
        .hbm_alloc(2 * PAGE)
        .unwrap_or_else(|e| fail(format!("HBM alloc of 8 KiB: {e}")));
    let mut window = hbm::BarWindow::new(block.offset, 2 * PAGE as usize);
    let bytes = window.bytes();
    nonzero_fill(bytes, 0x99);
    let ends = (bytes[0], bytes[2 * PAGE as usize - 1]);
    let bar = hbm::bar4_address();
    println!(
        "HBM: 4 KiB at {:#x}, 8 KiB at {:#x}; BAR 4 at {bar:#x}",
        small.offset, block.offset
    );
    let buf = ctx
        .hbm_export(&block, GAUDI_IB_HBM_EXPORT_CLOEXEC)
        .unwrap_or_else(|e| fail(format!("HBM export: {e}")));
    let mut faults = 0;
    for iova in [bar + block.offset, HUGE] {
        let mr = ctx
            .reg_dmabuf_mr(pd, &buf, 0, 2 * PAGE, iova, RW)
            .unwrap_or_else(|e| fail(format!("dma-buf MR of 8 KiB at iova {iova:#x}: {e}")));
        let r = contained(emu, &mr, iova, 2 * PAGE, ends);
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
        faults += r.unwrap_or_else(|e| fail(format!("HBM, 8 KiB at iova {iova:#x}: {e}")));
        println!(
            "ok: HBM: 8 KiB from a dma-buf at iova {iova:#x}: 4 KiB device pages, nothing mapped next to the block, the ends read as written"
        );
    }
    drop(buf);
    for h in [block, small] {
        ctx.hbm_destroy(h)
            .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
    }
    faults
}

/// `mr-no-foreign-frames`: device pages never reach past the pinned memory.
/// Regions whose page-rounded span does not start and end on a 2 MiB
/// boundary get 4 KiB device pages, whatever their iova and physical
/// memory: 8 KiB, 5000 B (at byte 100 of a page) and 12289 B at every
/// 4 KiB iova of a 2 MiB window (`--window-pages`, default 512) inside a
/// 2 MiB huge page (physically contiguous: one iova of the window is
/// congruent to it), 8 KiB of ordinary memory likewise; 8 KiB at the start
/// and at the end of a huge page at its own address; a THP split down to
/// 8 KiB (if the kernel has THP); an 8 KiB HBM block registered from its
/// dma-buf. For each: one byte before the first pinned page and the byte
/// after the last are unmapped on the device, the first and last byte read
/// as the CPU wrote them. A whole huge page still gets a 2 MiB device page
/// (the check can tell). The MMU fault count moves by the faults provoked,
/// the DMA audit does not move.
pub(crate) fn mr_no_foreign_frames(args: &[String]) {
    let window = arg(args, "--window-pages", Some(512));
    let stride = arg(args, "--stride", Some(32));
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut emu = emu();
    let faults0 = stat(&mut emu, "mmu_faults");
    let audit0 = stat(&mut emu, "dma_audit");
    let mut faults = 0;

    // Inside a huge page of 2 MiB: physically contiguous memory, the case
    // where large device pages are possible at all.
    let mut huge = Mapping::huge(HUGE as usize, 21)
        .unwrap_or_else(|e| fail(format!("a 2 MiB huge page (hugetlbfs): {e}")));
    nonzero_fill(huge.bytes(), 0x21);
    faults += sweep(
        &ctx,
        &pd,
        &mut emu,
        &mut huge,
        3,
        &[(8192, 0), (5000, 100), (12289, 0)],
        window,
        stride,
        "inside a 2 MiB huge page",
    );
    let base = huge.addr();
    let tail = (HUGE - 8192) as usize;
    for (what, off, iova) in [
        ("the first 8 KiB of a huge page at its address", 0, base),
        ("the first 8 KiB of a huge page at iova 1 GiB", 0, 1 << 30),
        (
            "the last 8 KiB of a huge page at their address",
            tail,
            base + tail as u64,
        ),
    ] {
        faults += host_region(&ctx, &pd, &mut emu, &mut huge, off, 8192, iova, what).0;
        println!("ok: {what}: 4 KiB device pages, nothing mapped next to the pinned pages");
    }
    // The control: the whole page may and does get one device page.
    let mr = ctx
        .reg_mr(&pd, base, HUGE, base, RW)
        .unwrap_or_else(|e| fail(format!("reg_mr of a whole huge page: {e}")));
    let shift = mr.resp.page_shift;
    emu.view_asid_of(mr.resp.mmu_va)
        .unwrap_or_else(|e| fail(format!("a whole huge page: {e}")));
    let after = emu.peek(mr.resp.mmu_va + HUGE, 1);
    let last = emu.peek(mr.resp.mmu_va + HUGE - 1, 1);
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    faults += 1;
    check(
        shift == 21 && after.is_err() && last.ok() == Some(vec![huge.bytes()[HUGE as usize - 1]]),
        format!("a whole huge page at its address: one device page of 2^{shift} bytes, ending where the page ends"),
    );
    drop(huge);

    // Ordinary, physically scattered memory.
    let mut map = Mapping::new(4 * PAGE as usize);
    nonzero_fill(map.bytes(), 0x12);
    faults += sweep(
        &ctx,
        &pd,
        &mut emu,
        &mut map,
        1,
        &[(8192, 0)],
        window,
        stride,
        "ordinary memory",
    );
    drop(map);

    // A transparent huge page split down to 8 KiB: the pages left are the
    // first two of a 2 MiB-aligned physical block whose rest went back to
    // the allocator.
    let mut thp = Mapping::new(2 * HUGE as usize);
    if let Some(off) = split_thp(&mut thp) {
        let va = thp.addr() + off as u64;
        for iova in [va, 1 << 30] {
            let what = format!("8 KiB left of a split THP, at iova {iova:#x}");
            faults += host_region(&ctx, &pd, &mut emu, &mut thp, off, 8192, iova, &what).0;
            println!("ok: {what}: 4 KiB device pages, nothing mapped next to the pinned pages");
        }
    }
    drop(thp);

    faults += hbm_region(&ctx, &pd, &mut emu);

    let got = stat(&mut emu, "mmu_faults") - faults0;
    check(
        got == faults,
        format!("MMU faults: {got}, the {faults} provoked"),
    );
    let audit = stat(&mut emu, "dma_audit");
    check(
        audit == audit0,
        format!("DMA audit unchanged ({audit0} -> {audit})"),
    );
    println!("PASS");
}

/// Post `wr` on `a` (connected to `b`), which `b` must refuse: the
/// completion is REM_ACCESS_ERR, and both QPs end in ERR.
fn refused(ctx: &Context, a: &End, b: &End, wr: SendWr, what: &str) {
    let id = wr.wr_id;
    if let Err((e, bad)) = ctx.post_send(&a.qp, &[wr]) {
        fail(format!("{what}: post_send: {e} (bad_wr {bad})"));
    }
    let wcs = ctx
        .wait_cq(&a.cq, 1, 30_000)
        .unwrap_or_else(|e| fail(format!("{what}: poll: {e}")));
    let Some(wc) = wcs.first().copied() else {
        fail(format!("{what}: no completion within 30 s"));
    };
    let state = |e: &End| {
        ctx.query_qp(&e.qp)
            .unwrap_or_else(|err| fail(format!("query_qp: {err}")))
            .qp_state
    };
    let sa = state(a);
    // The responder's QP went to ERR on the device, which reports it.
    let t = std::time::Instant::now();
    let mut sb = state(b);
    while sb != QPS_ERR && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        sb = state(b);
    }
    check(
        wc.wr_id == id
            && wc.qp_num == a.qp.qpn
            && wc.status == WC_REM_ACCESS_ERR
            && sa == QPS_ERR
            && sb == QPS_ERR,
        format!(
            "{what}: refused: completion wr_id {} status {} (REM_ACCESS_ERR is {WC_REM_ACCESS_ERR}); requester QP state {sa}, responder {sb} (ERR is {QPS_ERR})",
            wc.wr_id, wc.status
        ),
    );
}

/// `rkey-bounds`: a QP pair, port 1 writing to port 2, and a REMOTE_WRITE
/// region of 5000 B of the responder's PD (at byte 100 of a page, at an
/// iova that is not its address; a region open to remote writes is entered
/// at its iova). The NIC's responder checks one key, its PD's (the rkey of
/// every region of the PD open to remote writes), and the device MMU bounds
/// the rest at page granularity. A WRITE with rkey 0, with another PD's
/// region's rkey (at an address of that region), starting one byte before
/// the region's first page or ending one byte after its last (the bytes of
/// those pages outside the region are the owner's, reachable by the PD's
/// key: uapi.rst), and, with the QPs still connected, after the region was
/// deregistered, each completes with REM_ACCESS_ERR, both QPs go to ERR,
/// and nothing lands in the region, around it or in the other region (after
/// deregistration, read through the process's mapping); the QPs are reset
/// and connected again between cases. WRITEs of the whole region and of
/// 1001 B at byte 777, named by its iova, land byte-exact with the bytes
/// around unchanged. 1000 registrations give 1000 distinct keys, not
/// sequential; two regions of one PD open to remote writes share the PD's
/// key as rkey, their lkeys their own.
pub(crate) fn rkey_bounds(_args: &[String]) {
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut emu = emu();
    let mut tgt = Mapping::new(4 * PAGE as usize);
    nonzero_fill(tgt.bytes(), 0x77);
    let (t_off, t_len) = (PAGE as usize + 100, 5000usize);
    let t_addr = tgt.addr() + t_off as u64;
    // Congruent to the address modulo the page, as the core requires.
    let t_iova = 0x3000_0000_0000 | (t_addr % PAGE);
    let tmr = ctx
        .reg_mr(&pd, t_addr, t_len as u64, t_iova, RW)
        .unwrap_or_else(|e| fail(format!("reg_mr target: {e}")));
    let k = tmr.rkey;
    check(
        k != 0 && tmr.resp.mmu_va == t_iova,
        format!(
            "target: {t_len} B at iova {t_iova:#x}, device VA {:#x}, rkey {k:#x}",
            tmr.resp.mmu_va
        ),
    );
    let mut other = Mapping::new(PAGE as usize);
    nonzero_fill(other.bytes(), 0x78);
    // Another PD's region (another context's: one PD per context), whose
    // key is that PD's.
    let octx = open_ctx();
    let opd = octx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd other: {e}")));
    let omr = octx
        .reg_mr(&opd, other.addr(), PAGE, other.addr(), RW)
        .unwrap_or_else(|e| fail(format!("reg_mr other: {e}")));
    check(
        omr.rkey != k,
        format!(
            "the other region's rkey {:#x} is not the target's",
            omr.rkey
        ),
    );
    let mut src = Mapping::new(2 * PAGE as usize);
    nonzero_fill(src.bytes(), 0x79);
    let smr = ctx
        .reg_mr(
            &pd,
            src.addr(),
            2 * PAGE,
            src.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr source: {e}")));
    let (a, b) = loopback_pair(&ctx, &pd, 1, 2, k);
    let mut expect = tgt.bytes().to_vec();
    let other_expect = other.bytes().to_vec();
    let naks0 = port_stat(&mut emu, 1, "naks");
    let saddr = src.addr();
    let lkey = smr.lkey;

    // The region's bounds as the device enforces them: its pages.
    let (lo, hi) = (
        t_iova & !(PAGE - 1),
        (t_iova + t_len as u64).next_multiple_of(PAGE),
    );
    let cases = [
        ("a WRITE with rkey 0", 0, t_iova + 16, 64),
        (
            "a WRITE with another region's rkey, at an address of that region",
            omr.rkey,
            other.addr() + 16,
            64,
        ),
        (
            "a WRITE of 16 B starting one byte before the region",
            k,
            lo - 1,
            16,
        ),
        (
            "a WRITE of 16 B ending one byte after the region",
            k,
            hi - 15,
            16,
        ),
    ];
    for (i, &(what, rkey, raddr, len)) in cases.iter().enumerate() {
        // The requester's WRITEs carry `rkey` (post_send checks a request
        // names its QP's key); the responder keeps the target's key, its
        // PD's.
        reconnect_keys(&ctx, &a, &b, rkey, k);
        refused(
            &ctx,
            &a,
            &b,
            write_wr(400 + i as u64, saddr + 8, len, lkey, raddr, rkey),
            what,
        );
        check(
            tgt.bytes() == expect && other.bytes() == other_expect,
            format!("{what}: nothing landed in the region, around it or in the other region"),
        );
    }

    // Named by its iova, the region takes WRITEs up to its bounds.
    reconnect(&ctx, &a, &b, k);
    poison(
        &mut tgt.bytes()[t_off..t_off + t_len],
        &src.bytes()[..t_len],
    );
    let wc = write_once(
        &ctx,
        &a,
        write_wr(410, saddr, t_len as u32, lkey, t_iova, k),
        "WRITE of the whole region",
    );
    expect[t_off..t_off + t_len].copy_from_slice(&src.bytes()[..t_len]);
    check(
        wc.status == WC_SUCCESS && tgt.bytes() == expect,
        format!(
            "a WRITE of the whole region, iova {t_iova:#x} to {:#x}: status {}, landed byte-exact, nothing around it changed",
            t_iova + t_len as u64,
            wc.status
        ),
    );
    let (off, n) = (777usize, 1001usize);
    poison(
        &mut tgt.bytes()[t_off + off..t_off + off + n],
        &src.bytes()[3..3 + n],
    );
    let wc = write_once(
        &ctx,
        &a,
        write_wr(411, saddr + 3, n as u32, lkey, t_iova + off as u64, k),
        "WRITE inside the region",
    );
    expect[t_off + off..t_off + off + n].copy_from_slice(&src.bytes()[3..3 + n]);
    check(
        wc.status == WC_SUCCESS && tgt.bytes() == expect,
        format!(
            "a WRITE of {n} B at iova {:#x}: status {}, landed byte-exact, the bytes around unchanged",
            t_iova + off as u64,
            wc.status
        ),
    );

    // Deregistration takes the region out of the PD's address space; the
    // responder stays connected.
    ctx.dereg_mr(tmr)
        .unwrap_or_else(|e| fail(format!("dereg_mr target: {e}")));
    let q = ctx
        .query_qp(&b.qp)
        .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
    check(
        q.qp_state == QPS_RTS,
        format!(
            "the responder stays connected after the deregistration (state {})",
            q.qp_state
        ),
    );
    let what = "a WRITE to the region after its deregistration";
    refused(
        &ctx,
        &a,
        &b,
        write_wr(420, saddr + 8, 64, lkey, t_iova + 16, k),
        what,
    );
    check(
        tgt.bytes() == expect && other.bytes() == other_expect,
        format!("{what}: nothing landed (read through the process's mapping)"),
    );
    let naks = port_stat(&mut emu, 1, "naks") - naks0;
    check(
        naks > cases.len() as u64,
        format!("port 2 sent NAKs: {naks}"),
    );

    // Keys: distinct, and no stride between them. The regions are local
    // ones over the other region's page: regions open to remote writes of
    // one PD do not overlap (the NIC takes a WRITE by its address).
    let keys: Vec<u32> = (0..1000)
        .map(|i| {
            let mr = ctx
                .reg_mr(
                    &pd,
                    other.addr(),
                    PAGE,
                    other.addr(),
                    IB_UVERBS_ACCESS_LOCAL_WRITE,
                )
                .unwrap_or_else(|e| fail(format!("registration {i}: {e}")));
            let key = mr.rkey;
            ctx.dereg_mr(mr)
                .unwrap_or_else(|e| fail(format!("registration {i}: dereg_mr: {e}")));
            key
        })
        .collect();
    keys_unpredictable(&keys, "1000 registrations of 4 KiB");
    // Regions open to remote writes share their PD's key as rkey; their
    // lkeys are their own.
    let m1 = Mapping::new(PAGE as usize);
    let m2 = Mapping::new(PAGE as usize);
    let r1 = reg_mapping(&ctx, &pd, &m1, RW);
    let r2 = reg_mapping(&ctx, &pd, &m2, RW);
    check(
        r1.rkey == r2.rkey && r1.lkey != r2.lkey && r1.lkey != r1.rkey,
        format!(
            "two regions open to remote writes of one PD: rkeys {:#x} and {:#x} (the PD's), lkeys {:#x} and {:#x}",
            r1.rkey, r2.rkey, r1.lkey, r2.lkey
        ),
    );
    for r in [r1, r2] {
        ctx.dereg_mr(r)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    }

    // QP numbers: no stride between them either, so that an off-path sender
    // cannot guess them (numbers of destroyed QPs may come again).
    let cq = ctx
        .create_cq(4)
        .unwrap_or_else(|e| fail(format!("create CQ: {e}")));
    let caps = QpCaps {
        max_send_wr: 4,
        max_send_sge: 1,
        ..Default::default()
    };
    let qpns: Vec<u32> = (0..64)
        .map(|i| {
            let qp = ctx
                .create_qp(&pd, &cq, IB_UVERBS_QPT_RC, caps)
                .unwrap_or_else(|e| fail(format!("QP {i}: {e}")));
            let qpn = qp.qpn;
            ctx.destroy_qp(qp)
                .unwrap_or_else(|e| fail(format!("QP {i}: destroy: {e}")));
            qpn
        })
        .collect();
    ctx.destroy_cq(cq)
        .unwrap_or_else(|e| fail(format!("destroy CQ: {e}")));
    no_stride(&qpns, "QP numbers of 64 QPs created one after the other");
    octx.dereg_mr(omr)
        .unwrap_or_else(|e| fail(format!("dereg_mr other: {e}")));
    teardown(&ctx, [a, b], [smr]);
}
