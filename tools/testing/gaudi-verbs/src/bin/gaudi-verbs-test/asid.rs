// SPDX-License-Identifier: GPL-2.0

//! Address spaces: every protection domain has an ASID of its
//! own, and its regions are entered there, a region peers may write at its
//! iova. Checked through the emulator's view of the device MMU's tables.

use super::*;

const PAGE: usize = 4096;
const RW: u32 = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;

/// The ASIDs whose tables map device VA `va`, with the page's write right.
fn asids_at(emu: &mut EmuCtl, va: u64) -> Vec<(u32, bool)> {
    let r = emu
        .command(&format!("asid-find {va:#x}"))
        .unwrap_or_else(|e| fail(format!("asid-find: {e}")));
    let line = r
        .iter()
        .find_map(|l| l.strip_prefix("asids"))
        .unwrap_or_else(|| fail(format!("asid-find: reply {r:?}")));
    line.split_whitespace()
        .map(|w| {
            let (a, right) = w
                .split_once(':')
                .unwrap_or_else(|| fail(format!("asid-find: {w}")));
            let a = a
                .parse()
                .unwrap_or_else(|_| fail(format!("asid-find: {w}")));
            (a, right == "rw")
        })
        .collect()
}

/// `len` bytes at device VA `va` of `asid`, as its tables map them.
fn asid_bytes(emu: &mut EmuCtl, asid: u32, va: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let n = (len - out.len()).min(PAGE);
        let at = va + out.len() as u64;
        let r = emu
            .command(&format!("asid-peek {asid} {at:#x} {n}"))
            .unwrap_or_else(|e| fail(format!("asid-peek {asid} {at:#x}: {e}")));
        let hex = r
            .iter()
            .find_map(|l| l.strip_prefix("data "))
            .unwrap_or_else(|| fail(format!("asid-peek: reply {r:?}")));
        out.extend((0..hex.len()).step_by(2).map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .unwrap_or_else(|_| fail(format!("asid-peek: {hex}")))
        }));
    }
    out
}

/// The one ASID that maps `va`, writable.
fn only_asid(emu: &mut EmuCtl, va: u64, what: &str) -> u32 {
    match asids_at(emu, va)[..] {
        [(a, true)] => a,
        ref v => fail(format!(
            "{what} at {va:#x}: in ASIDs {v:?}, expected one, writable"
        )),
    }
}

/// `asid-mappings`: two contexts, each with its PD, in one process (one
/// address space of the CPU). A region open to remote writes is in exactly
/// one ASID, at its iova, writable, with the bytes the CPU wrote; the other
/// context's region, at another address, in another ASID. Both contexts
/// register different memory at the same iova: each ASID reaches its own
/// bytes there. A second region open to remote writes over the first's
/// iovas, or at an iova from 2^47 (where the others are), is refused with
/// EINVAL; a region only the NIC reads may have such an iova, and no page
/// there is writable. A deregistered region leaves its ASID; a PD deallocated
/// leaves nothing mapped, and the next PD gets an ASID neither had.
pub(crate) fn asid_mappings() {
    let mut emu = emu();
    let a = open_ctx();
    let pa = a
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("A's PD: {e}")));
    let b = open_ctx();
    let pb = b
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("B's PD: {e}")));

    let mut ma = Mapping::new(2 * PAGE);
    fill(ma.bytes(), 0xa1);
    let mut mb = Mapping::new(PAGE);
    fill(mb.bytes(), 0xb2);
    let ra = reg_mapping(&a, &pa, &ma, RW);
    let rb = reg_mapping(&b, &pb, &mb, RW);
    let asid_a = only_asid(&mut emu, ma.addr(), "A's region");
    let asid_b = only_asid(&mut emu, mb.addr(), "B's region");
    check(
        asid_a != asid_b,
        format!("A's and B's PDs share ASID {asid_a}"),
    );
    check(
        only_asid(&mut emu, ma.addr() + PAGE as u64, "A's second page") == asid_a,
        "A's second page in another ASID".into(),
    );
    check(
        asid_bytes(&mut emu, asid_a, ma.addr(), 2 * PAGE) == ma.bytes(),
        "ASID of A: the bytes at A's iova are not A's region".into(),
    );
    check(
        asid_bytes(&mut emu, asid_b, mb.addr(), PAGE) == mb.bytes(),
        "ASID of B: the bytes at B's iova are not B's region".into(),
    );

    // The same iova in both PDs: each reaches its own memory.
    let iova: u64 = 0x5a5a_0000_0000;
    let mut sa = Mapping::new(PAGE);
    fill(sa.bytes(), 0x5a);
    let mut sb = Mapping::new(PAGE);
    fill(sb.bytes(), 0x5b);
    let rsa = a
        .reg_mr(&pa, sa.addr(), PAGE as u64, iova, RW)
        .unwrap_or_else(|e| fail(format!("A's region at iova {iova:#x}: {e}")));
    let rsb = b
        .reg_mr(&pb, sb.addr(), PAGE as u64, iova, RW)
        .unwrap_or_else(|e| fail(format!("B's region at iova {iova:#x}: {e}")));
    let both = asids_at(&mut emu, iova);
    check(
        both == [(asid_a.min(asid_b), true), (asid_a.max(asid_b), true)],
        format!("iova {iova:#x} of both PDs: in ASIDs {both:?}, expected {asid_a} and {asid_b}"),
    );
    check(
        asid_bytes(&mut emu, asid_a, iova, PAGE) == sa.bytes()
            && asid_bytes(&mut emu, asid_b, iova, PAGE) == sb.bytes(),
        "one iova in two PDs: an ASID reaches the other PD's memory".into(),
    );

    // Regions peers write do not overlap in a PD; their iovas stay below 2^47.
    expect_errno(
        "a second region open to remote writes over A's",
        a.reg_mr(&pa, ma.addr(), PAGE as u64, ma.addr() + PAGE as u64, RW)
            .map(|m| m.lkey),
        libc::EINVAL,
    );
    expect_errno(
        "a region open to remote writes at iova 2^47",
        a.reg_mr(&pa, mb.addr(), PAGE as u64, 1 << 47, RW)
            .map(|m| m.lkey),
        libc::EINVAL,
    );
    let local = a
        .reg_mr(
            &pa,
            mb.addr(),
            PAGE as u64,
            1 << 47,
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("a local region at iova 2^47: {e}")));
    let there = asids_at(&mut emu, 1 << 47);
    check(
        there.iter().all(|(_, rw)| !rw),
        format!("a local region's pages writable at its iova: {there:?}"),
    );
    a.dereg_mr(local)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));

    // Deregistration and deallocation.
    a.dereg_mr(ra)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    let left = asids_at(&mut emu, ma.addr());
    check(
        left.is_empty(),
        format!("A's deregistered region still in ASIDs {left:?}"),
    );
    a.dereg_mr(rsa)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    a.dealloc_pd(pa)
        .unwrap_or_else(|e| fail(format!("dealloc A's PD: {e}")));
    let left = asids_at(&mut emu, iova);
    check(
        left == [(asid_b, true)],
        format!("after A's PD went, iova {iova:#x} in ASIDs {left:?}, expected B's only"),
    );
    let c = open_ctx();
    let pc = c
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("C's PD: {e}")));
    let mut mc = Mapping::new(PAGE);
    fill(mc.bytes(), 0xc3);
    let rc = reg_mapping(&c, &pc, &mc, RW);
    let asid_c = only_asid(&mut emu, mc.addr(), "C's region");
    check(
        asid_c != asid_a && asid_c != asid_b,
        format!("C's PD got ASID {asid_c}, given back or held (A {asid_a}, B {asid_b})"),
    );
    for (ctx, mr) in [(&c, rc), (&b, rsb), (&b, rb)] {
        ctx.dereg_mr(mr)
            .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    }
    println!("ASIDs: A {asid_a}, B {asid_b}, C {asid_c}; one iova, two PDs, two pages; PASS");
}
