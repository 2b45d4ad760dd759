// SPDX-License-Identifier: GPL-2.0

//! The wire through the driver: PSNs wrapping at 2^24, delayed, reordered
//! and lost frames.

use super::*;

/// A pair of port 1 writing to port 2 whose PSNs start at `psn`.
fn pair_at_psn(ctx: &Context, pd: &Pd, rkey: u32, psn: u32) -> (End, End) {
    let a = end(ctx, pd, 1, None);
    let b = end(ctx, pd, 2, None);
    connect_psn(
        ctx,
        &a,
        (b.info.mac, gaudi_verbs::port_ipv4(&b.info), b.qp.qpn),
        rkey,
        0,
        (MTU_4096, 14),
        psn,
    );
    connect_psn(
        ctx,
        &b,
        (a.info.mac, gaudi_verbs::port_ipv4(&a.info), a.qp.qpn),
        0,
        rkey,
        (MTU_4096, 14),
        psn,
    );
    (a, b)
}

/// `wire-faults`: PSNs start 16 below 2^24 and wrap within a run of
/// 64 KiB WRITEs (16 packets each); WRITEs land with every frame of the
/// requester delayed by 20 ms; with frames reordered (the responder asks
/// for the missing PSN, the requester goes back); with acknowledgements
/// lost (the requester times out and resends, the responder takes the
/// duplicates without writing twice). Each WRITE lands byte for byte with
/// its neighbours untouched, and the port counters move.
pub(crate) fn wire_faults(_args: &[String]) {
    const LEN: usize = 4 << 20;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let Regions {
        mut src,
        mut dst,
        smr,
        dmr,
        iova,
        diova,
    } = Regions::new(
        &ctx,
        &pd,
        LEN,
        31,
        (0x6300_0000_0000u64, 0x6400_0000_0000u64),
    );
    let mut emu = emu();
    let psn0 = 0xff_fff0u32;
    let (a, b) = pair_at_psn(&ctx, &pd, dmr.rkey, psn0);
    // One WRITE of `len` at offset `off` (same in both regions), checked.
    let mut n = 0u64;
    let mut write = |what: &str, off: usize, len: usize| {
        let (src, dst) = (src.bytes(), dst.bytes());
        poison(&mut dst[off..off + len], &src[off..off + len]);
        if off > 0 {
            dst[off - 1] = 0x11;
        }
        if off + len < LEN {
            dst[off + len] = 0x22;
        }
        n += 1;
        let wc = write_once(
            &ctx,
            &a,
            write_wr(
                n,
                iova + off as u64,
                len as u32,
                smr.lkey,
                diova + off as u64,
                dmr.rkey,
            ),
            what,
        );
        let ok = wc.status == WC_SUCCESS
            && wc.byte_len == len as u32
            && dst[off..off + len] == src[off..off + len]
            && (off == 0 || dst[off - 1] == 0x11)
            && (off + len == LEN || dst[off + len] == 0x22);
        check(
            ok,
            format!(
                "{what}: {len} bytes at +{off}: status {}, data {}",
                wc.status,
                if ok {
                    "byte-exact, neighbours untouched"
                } else {
                    "WRONG"
                }
            ),
        );
    };
    for k in 0..4 {
        write("across the PSN wrap", k * 65536 + 3, 65536);
    }
    let q = ctx
        .query_qp(&a.qp)
        .unwrap_or_else(|e| fail(format!("query_qp: {e}")));
    let want = psn0.wrapping_add(4 * 16) & 0xff_ffff;
    check(
        q.sq_psn == want,
        format!(
            "PSNs from {psn0:#x} wrapped at 2^24: next PSN {:#x} (expected {want:#x})",
            q.sq_psn
        ),
    );

    transfer::emu_cmd(&mut emu, "delay 0 20");
    write("every frame delayed by 20 ms", 1 << 20, 1 << 20);
    transfer::emu_cmd(&mut emu, "delay 0 0");

    let naks = port_stat(&mut emu, 1, "naks");
    let resent = port_stat(&mut emu, 0, "retransmits");
    transfer::emu_cmd(&mut emu, "reorder 0 64");
    write("frames reordered", 5, (2 << 20) - 7);
    let (naks2, resent2) = (
        port_stat(&mut emu, 1, "naks"),
        port_stat(&mut emu, 0, "retransmits"),
    );
    check(
        naks2 > naks && resent2 > resent,
        format!(
            "reordering: the responder sent {} sequence NAKs, the requester resent {} packets",
            naks2 - naks,
            resent2 - resent
        ),
    );

    let resent = port_stat(&mut emu, 0, "retransmits");
    // Two packets, and their acknowledgements lost: the requester times
    // out, resends, and the responder acknowledges the duplicates.
    transfer::emu_cmd(&mut emu, "drop 1 2");
    write("acknowledgements lost", 3 << 20, 8192);
    transfer::emu_cmd(&mut emu, "drop 1 0");
    let resent2 = port_stat(&mut emu, 0, "retransmits");
    check(
        resent2 > resent,
        format!(
            "lost acknowledgements: the requester resent {} packets, the duplicates were acknowledged, the data written once",
            resent2 - resent
        ),
    );
    teardown(&ctx, [a, b], [smr, dmr]);
}
