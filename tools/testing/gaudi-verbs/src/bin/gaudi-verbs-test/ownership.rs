// SPDX-License-Identifier: GPL-2.0

//! Who may use the data path: any process may open a user context, query the
//! device and use the standard verbs (a PD, regions, QPs: the kernel checks
//! every address); a context that drives the NIC itself (a QP set, device
//! memory) must have it to itself: EBUSY while another context has a PD, and
//! other contexts' PDs are refused while it lives; each refusal adds a
//! rate-limited log line.

use super::*;
use gaudi_verbs::{KernelLog, LINK_LAYER_ETHERNET, PORT_ACTIVE, PORT_PHYS_LINK_UP};

/// The driver's log line for a refused QP set or device memory.
const REFUSED: &str = "exclusive data path refused: another user context uses the NIC";
/// The driver's log line for a PD refused while another context drives the NIC.
const REFUSED_PD: &str = "PD refused: another user context drives the NIC exclusively";

/// The PCI IDs of the NIC.
const VENDOR_ID: u32 = 0x1da3;
const DEVICE_ID: u32 = 0x1020;

/// Device memory asked for.
const HBM_BYTES: u64 = 2 << 20;

/// Two ports of a QP set.
const SET_PORTS: u64 = 0b11;

pub(crate) fn kernel_log() -> KernelLog {
    KernelLog::open().unwrap_or_else(|e| fail(format!("/dev/kmsg: {e}")))
}

/// The records added to the kernel log since the last read, and how many of
/// them contain `pat`.
pub(crate) fn new_lines(log: &mut KernelLog, pat: &str) -> (u64, usize) {
    let (n, texts) = log
        .read_new()
        .unwrap_or_else(|e| fail(format!("/dev/kmsg: {e}")));
    (n, texts.iter().filter(|t| t.contains(pat)).count())
}

/// Check `ok` of every port 1..=`ports`; fail naming the first port it
/// rejects (with its reason), else report `what` once.
fn every_port(ports: u32, what: &str, mut ok: impl FnMut(u32) -> Result<(), String>) {
    for p in 1..=ports {
        if let Err(why) = ok(p) {
            fail(format!("{what}: port {p}: {why}"));
        }
    }
    check(true, format!("{what}: all {ports} ports"));
}

/// Everything a context may ask without owning the data path: the core's
/// device and port queries and GID table, the driver's QUERY_DEVICE and
/// QUERY_PORT, against the emulator's defaults (instance `inst`: port index
/// P has MAC 02:1d:a3:I:00:P and IPv4 10.I.P.1; every link up).
fn queries(ctx: &Context, ports: u32, inst: u8) {
    let r = ctx.resp;
    check(
        r.abi_version == GAUDI_IB_UVERBS_ABI_VERSION && r.num_ports == ports,
        format!(
            "GET_CONTEXT: ABI version {}, {} ports",
            r.abi_version, r.num_ports
        ),
    );
    let d = ctx
        .query_device_attrs()
        .unwrap_or_else(|e| fail(format!("QUERY_DEVICE (core): {e}")));
    check(
        u32::from(d.phys_port_cnt) == ports
            && d.vendor_id == VENDOR_ID
            && d.vendor_part_id == DEVICE_ID
            && d.max_pd == 1
            && d.max_qp > 0
            && d.max_cqe > 0
            && d.max_mr_size > 0
            && d.page_size_cap & 0x1000 != 0,
        format!(
            "QUERY_DEVICE (core): {} ports, vendor {:#x} part {:#x}, max_pd {}, max_qp {}, max_cqe {}, page sizes {:#x}",
            d.phys_port_cnt,
            d.vendor_id,
            d.vendor_part_id,
            d.max_pd,
            d.max_qp,
            d.max_cqe,
            d.page_size_cap
        ),
    );
    // The EUI-64 of port 1's MAC address.
    check(
        d.node_guid == [0x00, 0x1d, 0xa3, 0xff, 0xfe, inst, 0, 0],
        format!("QUERY_DEVICE (core): node GUID {:02x?}", d.node_guid),
    );
    every_port(
        ports,
        "QUERY_PORT (core): ACTIVE, link up, Ethernet, 16 GIDs and one P_Key, MTU 4096",
        |p| {
            let a = ctx.query_port_attrs(p as u8).map_err(|e| format!("{e}"))?;
            if a.state == PORT_ACTIVE
                && a.phys_state == PORT_PHYS_LINK_UP
                && a.link_layer == LINK_LAYER_ETHERNET
                && a.gid_tbl_len == 16
                && a.pkey_tbl_len == 1
                && a.active_mtu == MTU_4096
                && a.max_msg_sz > 0
            {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        },
    );
    let gids = ctx
        .query_gid_table(4 * ports as usize)
        .unwrap_or_else(|e| fail(format!("QUERY_GID_TABLE: {e}")));
    check(
        gids.len() >= ports as usize,
        format!("QUERY_GID_TABLE: {} entries", gids.len()),
    );
    every_port(
        ports,
        "QUERY_GID_TABLE: GID 0 is the port's default (link-local from its MAC), RoCE v2",
        |p| {
            let mac = ctx
                .query_port(u64::from(p))
                .map_err(|e| format!("{e}"))?
                .mac;
            let mut want = [0u8; 16];
            want[0] = 0xfe;
            want[1] = 0x80;
            want[8..11].copy_from_slice(&[mac[0] ^ 2, mac[1], mac[2]]);
            want[11] = 0xff;
            want[12] = 0xfe;
            want[13..].copy_from_slice(&mac[3..]);
            match gids.iter().find(|g| g.port_num == p && g.gid_index == 0) {
                Some(g) if g.gid_bytes() == want && g.gid_type == IB_UVERBS_GID_TYPE_ROCE_V2 => {
                    Ok(())
                }
                g => Err(format!("{g:?}")),
            }
        },
    );
    let info = ctx
        .query_device_info()
        .unwrap_or_else(|e| fail(format!("GAUDI_IB_METHOD_QUERY_DEVICE: {e}")));
    check(
        info.model_version == hbm::MODEL_VERSION
            && info.devmem_size > 0
            && info.devmem_free <= info.devmem_size,
        format!(
            "GAUDI_IB_METHOD_QUERY_DEVICE: model {:#x}, {} bytes of device memory, {} free",
            info.model_version, info.devmem_size, info.devmem_free
        ),
    );
    every_port(
        ports,
        "GAUDI_IB_METHOD_QUERY_PORT: the emulator's MAC, the interface's first IPv4 address, link up",
        |p| {
            let i = ctx.query_port(p.into()).map_err(|e| format!("{e}"))?;
            let idx = (p - 1) as u8;
            if i.port_num == p
                && i.mac == [0x02, 0x1d, 0xa3, inst, 0, idx]
                && i.ipv4 == gaudi_verbs::first_ipv4_gid(p as u8).unwrap_or_default()
                && i.flags == GAUDI_IB_PORT_LINK_UP
                && i.speed_mbps == 100_000
            {
                Ok(())
            } else {
                Err(format!("{i:?}"))
            }
        },
    );
}

/// `step` must fail with EBUSY, and the driver's refusal line `line` appear
/// in the kernel log after the step began (lines from before do not count).
fn refused<T: std::fmt::Debug>(
    log: &mut KernelLog,
    line: &str,
    what: &str,
    step: impl FnOnce() -> std::io::Result<T>,
) {
    new_lines(log, line);
    expect_errno(what, step(), libc::EBUSY);
    let (_, n) = new_lines(log, line);
    check(
        n == 1,
        format!("{what}: {n} kernel log line(s) \"{line}\" since the step began"),
    );
}

/// While another process holds a PD (the standard verbs): a context opens,
/// may query everything and gets a PD of its own; a QP set is made, in the
/// context's own PD (its own address space), with no refusal logged; device
/// memory is refused, with a log line; 50 refused allocations of device
/// memory in a row add 10 (the rate limit).
fn while_shared(ports: u32, inst: u8) {
    let mut log = kernel_log();
    let ctx = open_ctx();
    check(true, "GET_CONTEXT while another process has a PD".into());
    queries(&ctx, ports, inst);
    let (_, n) = new_lines(&mut log, REFUSED);
    check(n == 0, format!("the queries logged no refusal ({n})"));
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd beside the other process's PD: {e}")));
    check(
        pd.pdn == 1,
        "a PD beside the other process's (the standard verbs share the NIC)".into(),
    );
    // A set works in its PD's address space, beside the other process's.
    let set = ctx
        .create_qp_set(SET_PORTS, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("QP set beside the other process's PD: {e}")));
    let (_, n) = new_lines(&mut log, REFUSED);
    check(
        set.qps.len() == 2 && n == 0,
        format!(
            "a QP set over ports 1 and 2 in its own PD, beside the other process's: {} QPs, {n} refusals logged",
            set.qps.len()
        ),
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    refused(&mut log, REFUSED, "HBM alloc", || {
        ctx.hbm_alloc(HBM_BYTES).map(|h| h.offset)
    });
    ctx.dealloc_pd(pd)
        .unwrap_or_else(|e| fail(format!("dealloc PD: {e}")));
    // Still refused without a PD of its own: the other process has one.
    refused(&mut log, REFUSED, "HBM alloc without a PD", || {
        ctx.hbm_alloc(HBM_BYTES).map(|h| h.offset)
    });
    // The queries still work after the refusals.
    ctx.query_port(1)
        .unwrap_or_else(|e| fail(format!("QUERY_PORT after the refusals: {e}")));
    // The rate limit's window (10 lines per 5 s) in progress began at the
    // latest with the last refusal: after 5 s, the next refusal begins a new
    // one, so 50 refusals in a row must add exactly 10 lines.
    std::thread::sleep(Duration::from_millis(5100));
    new_lines(&mut log, REFUSED);
    let t = std::time::Instant::now();
    for i in 0..50 {
        match ctx.hbm_alloc(HBM_BYTES) {
            Err(e) if errno(&e) == libc::EBUSY => {}
            r => fail(format!(
                "refused HBM alloc {i} of 50: {:?}, expected EBUSY",
                r.map(|h| h.offset)
            )),
        }
    }
    let took = t.elapsed();
    let (added, n) = new_lines(&mut log, REFUSED);
    // A loop slower than the interval may see a second window.
    let ok = if took < Duration::from_secs(5) {
        n == 10
    } else {
        (10..=20).contains(&n)
    };
    check(
        ok,
        format!(
            "50 refused HBM allocs in a row in {took:?}: {n} lines \"{REFUSED}\" (10: rate-limited), {added} kernel log lines in all"
        ),
    );
    println!("PASS");
}

/// After the other process went away: this process's context takes the
/// data path to itself (PD, QP set, device memory) and keeps it, even with
/// nothing allocated, until it is closed; meanwhile another context's PD is
/// refused with a log line; then the other context gets one.
fn take_over() {
    let mut log = kernel_log();
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd after the other process exited: {e}")));
    check(pd.pdn == 1, format!("alloc_pd: PD {}", pd.pdn));
    let set = ctx
        .create_qp_set(SET_PORTS, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("QP set after the other process exited: {e}")));
    check(
        set.qps.len() == 2,
        format!("QP set over ports 1 and 2: index {}", set.resp.index),
    );
    let hbm = ctx
        .hbm_alloc(HBM_BYTES)
        .unwrap_or_else(|e| fail(format!("HBM alloc after the other process exited: {e}")));
    check(
        hbm.length == HBM_BYTES,
        format!("HBM alloc: {} bytes at {:#x}", hbm.length, hbm.offset),
    );
    let (_, n) = new_lines(&mut log, REFUSED);
    check(n == 0, format!("no refusal logged for the new owner ({n})"));
    // The data path is this context's now, also with nothing allocated.
    ctx.hbm_destroy(hbm)
        .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    ctx.dealloc_pd(pd)
        .unwrap_or_else(|e| fail(format!("dealloc PD: {e}")));
    let other = open_ctx();
    other
        .query_port(1)
        .unwrap_or_else(|e| fail(format!("second context: QUERY_PORT: {e}")));
    refused(
        &mut log,
        REFUSED_PD,
        "second context: alloc_pd while the first (holding nothing) drives the NIC",
        || other.alloc_pd().map(|p| p.pdn),
    );
    drop(ctx);
    let pd = other
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd after the owner's context closed: {e}")));
    check(
        pd.pdn == 1,
        "the second context gets a PD once the first is closed".into(),
    );
    println!("PASS");
}

/// `ownership --step refused|owner --ports N [--instance I]`.
pub(crate) fn ownership(args: &[String]) {
    let ports = arg(args, "--ports", None) as u32;
    let inst = arg(args, "--instance", Some(0)) as u8;
    if ports < 2 {
        fail(format!("--ports {ports}: two ports needed"));
    }
    match args
        .iter()
        .position(|a| a == "--step")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        Some("refused") => while_shared(ports, inst),
        Some("owner") => take_over(),
        s => fail(format!("--step refused|owner, not {s:?}")),
    }
}
