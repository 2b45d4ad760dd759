// SPDX-License-Identifier: GPL-2.0
//! The emulator driven over its vfio-user socket, as QEMU and a driver
//! would drive it: registers, commands, the MMU, and RDMA WRITEs between
//! emulator processes over their links.

use gaudi_emu::qp::{Cqe, QpCtx, Region, Wqe};
use gaudi_emu::regs::*;
use gaudi_emu::roce::{aeth, op, Endpoint, Gid, Packet, Reth};
use gaudi_emu::testkit::{udp_ports, Emu, Peer, TestCq, TestQp};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EMU: &str = env!("CARGO_BIN_EXE_gaudi-emu");
const WAIT: Duration = Duration::from_secs(10);

fn emu(args: &[&str]) -> Emu {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    Emu::start(Path::new(EMU), &args, 64)
}

/// Deterministic test data.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

const CQ_VA: u64 = 0x10_0000;
const SQ_VA: u64 = 0x20_0000;
const SRC_VA: u64 = 0x4000_0000;
const DST_VA: u64 = 0x8000_0000;
const RKEY_A: u32 = 0xa11c_e000;
const RKEY_B: u32 = 0xb0b0_0000;

/// One side of a connection: its emulator, CQ and QP.
struct Side {
    emu: Emu,
    cq: TestCq,
    qp: TestQp,
}

/// Two emulators, port 0 of each linked to the other; a QP on each.
fn pair(retry: (u8, u8)) -> (Side, Side) {
    pair_cfg(Cfg::new(retry))
}

/// As [`pair`], with `a` carrying `a_remote_rkey` in its WRITEs.
fn pair_with_rkey(retry: (u8, u8), a_remote_rkey: u32) -> (Side, Side) {
    pair_cfg(Cfg {
        a_remote_rkey,
        ..Cfg::new(retry)
    })
}

/// How [`pair_cfg`] builds the two sides.
struct Cfg {
    retry: (u8, u8),
    a_remote_rkey: u32,
    b_local_rkey: u32,
    /// log2 of the entries of b's CQ.
    b_cq_log: u32,
    /// Extra emulator arguments, both sides.
    args: &'static [&'static str],
    /// Adjust the QP contexts before they are written.
    tweak_a: fn(&mut QpCtx),
    tweak_b: fn(&mut QpCtx),
}

impl Cfg {
    fn new(retry: (u8, u8)) -> Self {
        Self {
            retry,
            a_remote_rkey: RKEY_B,
            b_local_rkey: RKEY_B,
            b_cq_log: 6,
            args: &[],
            tweak_a: |_| {},
            tweak_b: |_| {},
        }
    }
}

fn pair_cfg(cfg: Cfg) -> (Side, Side) {
    let base = udp_ports(2);
    let (pa, pb) = (base.to_string(), (base + 1).to_string());
    let args = |inst: &str, l: &str, r: &str| {
        let mut v: Vec<String> = ["--ports", "2", "--instance", inst, "--link"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.push(format!("0={l}:{r}"));
        v.extend(cfg.args.iter().map(|s| s.to_string()));
        v
    };
    let mut a = Emu::start(Path::new(EMU), &args("1", &pa, &pb), 64);
    let mut b = Emu::start(Path::new(EMU), &args("2", &pb, &pa), 64);
    let (ea, eb) = (a.endpoint(0), b.endpoint(0));
    let mut sides = Vec::new();
    for (e, peer, qpn, peer_qpn, rkeys, cq_log, tweak) in [
        (
            &mut a,
            eb,
            7,
            9,
            (cfg.a_remote_rkey, RKEY_A),
            6,
            cfg.tweak_a,
        ),
        (
            &mut b,
            ea,
            9,
            7,
            (RKEY_A, cfg.b_local_rkey),
            cfg.b_cq_log,
            cfg.tweak_b,
        ),
    ] {
        e.mmu_enable();
        e.eq_enable(6);
        let cq = e.cq(0, 1, CQ_VA, cq_log);
        let qp = e.qp_with(0, qpn, 1, SQ_VA, peer, peer_qpn, rkeys, cfg.retry, tweak);
        sides.push((cq, qp));
    }
    let (cqb, qpb) = sides.pop().unwrap();
    let (cqa, qpa) = sides.pop().unwrap();
    (
        Side {
            emu: a,
            cq: cqa,
            qp: qpa,
        },
        Side {
            emu: b,
            cq: cqb,
            qp: qpb,
        },
    )
}

/// Allocate `len` bytes and map them at `va`, pages in reverse physical
/// order so that every page boundary is a discontinuity.
fn buffer(e: &mut Emu, va: u64, len: usize, flags: u64) -> Vec<u64> {
    let pages = len.div_ceil(4096).max(1);
    let bus = e.ram.alloc(pages * 4096, 4096);
    let mut page_bus = Vec::new();
    for i in 0..pages {
        let b = bus + ((pages - 1 - i) * 4096) as u64;
        e.map(va + (i * 4096) as u64, b, 1, flags);
        page_bus.push(b);
    }
    page_bus
}

fn fill(e: &Emu, pages: &[u64], data: &[u8]) {
    for (i, chunk) in data.chunks(4096).enumerate() {
        e.ram.slice(pages[i], chunk.len()).copy_from_slice(chunk);
    }
}

fn gather(e: &Emu, pages: &[u64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for (i, p) in pages.iter().enumerate() {
        let n = (len - i * 4096).min(4096);
        out.extend_from_slice(e.ram.slice(*p, n));
    }
    out
}

fn write_wqe(len: usize, imm: Option<u32>) -> Wqe {
    Wqe {
        opcode: if imm.is_some() {
            WQE_RDMA_WRITE_IMM
        } else {
            WQE_RDMA_WRITE
        },
        flags: WQE_SIGNALED,
        len: len as u32,
        local_va: SRC_VA,
        remote_va: DST_VA,
        imm: imm.unwrap_or(0),
    }
}

fn expect_cqe(e: &mut Emu, cq: &mut TestCq) -> Cqe {
    e.poll(cq, WAIT).expect("completion")
}

#[test]
fn registers_and_capabilities() {
    let mut e = emu(&["--ports", "5", "--devmem", "8"]);
    assert_eq!(e.rd(ID), ID_MAGIC);
    assert_eq!(e.rd(VERSION), MODEL_VERSION);
    assert_eq!(e.rd(NUM_PORTS), 5);
    assert_eq!(e.rd(MAX_MTU), 8192);
    assert_eq!(e.rd(MMU_PAGE_SIZES), (1 << 12) | (1 << 21) | (1 << 30));
    assert_eq!(e.rd(DEVMEM_SIZE_LO), 8 << 20);
    assert_eq!(e.rd(DEVMEM_SIZE_HI), 0);
    let fw: Vec<u8> = (0..FW_VERSION_LEN as u64 / 4)
        .flat_map(|i| e.rd(FW_VERSION + 4 * i).to_le_bytes())
        .collect();
    assert!(fw.starts_with(b"gaudi-emu 1.3\0"));
    assert_eq!(e.rd(PORT_BASE + PORT_RNR_NAKS_SENT), 0);
    assert_eq!((e.rd(MAX_GIDS), e.rd(ETH_MAX_FRAME)), (16, 9216));
    // (1.3) The station address is writable; a reset restores it.
    let mac = (e.rd(PORT_BASE + PORT_MAC_LO), e.rd(PORT_BASE + PORT_MAC_HI));
    e.wr(PORT_BASE + PORT_MAC_LO, 0x4433_2202);
    e.wr(PORT_BASE + PORT_MAC_HI, 0xffff_6655);
    assert_eq!(e.rd(PORT_BASE + PORT_MAC_LO), 0x4433_2202);
    assert_eq!(e.rd(PORT_BASE + PORT_MAC_HI), 0x6655);
    e.wr(PORT_BASE + PORT_IPV4, 0);
    assert_ne!(e.rd(PORT_BASE + PORT_IPV4), 0, "PORT_IPV4 stays read-only");
    e.wr(RESET, RESET_MAGIC);
    assert_eq!(e.rd(STATUS) & STATUS_READY, STATUS_READY);
    assert_eq!(
        (e.rd(PORT_BASE + PORT_MAC_LO), e.rd(PORT_BASE + PORT_MAC_HI)),
        mac
    );
    // Read-only registers ignore writes; scratch holds until reset.
    e.wr(ID, 0);
    e.wr(NUM_PORTS, 99);
    assert_eq!(e.rd(ID), ID_MAGIC);
    assert_eq!(e.rd(NUM_PORTS), 5);
    e.wr(SCRATCH, 0x1234_5678);
    assert_eq!(e.rd(SCRATCH), 0x1234_5678);
    // Reset handshake: only the magic value resets, READY comes back.
    e.wr(RESET, 1);
    assert_eq!(e.rd(SCRATCH), 0x1234_5678);
    e.wr(RESET, RESET_MAGIC);
    assert_eq!(e.rd(STATUS) & STATUS_READY, STATUS_READY);
    assert_eq!(e.rd(SCRATCH), 0);
    // Per-port registers exist for the 5 ports, not beyond.
    let p4 = PORT_BASE + 4 * PORT_STRIDE;
    assert_eq!(e.rd(p4 + PORT_STATE), 1);
    assert_eq!(e.rd(p4 + PORT_SPEED), 100_000);
    assert_eq!(e.rd(p4 + PORT_STRIDE + PORT_SPEED), 0);
    // DMA self-test: the device inverts a buffer in guest memory, and
    // refuses (and audits) one outside it.
    let buf = e.ram.alloc(64, 64);
    e.ram.slice(buf, 64).copy_from_slice(&pattern(64, 1));
    e.wr64(DMA_TEST_ADDR_LO, buf);
    e.wr(DMA_TEST_LEN, 64);
    e.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(e.rd(DMA_TEST_CTRL), DMA_TEST_DONE);
    let want: Vec<u8> = pattern(64, 1).iter().map(|b| !b).collect();
    assert_eq!(e.ram.slice(buf, 64), &want[..]);
    e.wr64(DMA_TEST_ADDR_LO, 0x4000);
    e.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(e.rd(DMA_TEST_CTRL), DMA_TEST_FAULT);
    assert_eq!(e.rd(DMA_FAULT_COUNT), 1);
    // Without bus mastering the device reaches no host memory at all and
    // raises no interrupt; that is counted apart from the DMA audit.
    e.irqs();
    e.wr(IRQ_TEST, 0);
    assert_eq!(e.irqs(), 1);
    e.config_write16(4, 0x0002);
    e.wr64(DMA_TEST_ADDR_LO, buf);
    e.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(e.rd(DMA_TEST_CTRL), DMA_TEST_FAULT);
    assert_eq!(e.rd(DMA_FAULT_COUNT), 1, "not an address outside memory");
    assert_eq!(e.stat("dma_no_master"), 1);
    assert_eq!(e.ram.slice(buf, 64), &want[..], "untouched");
    e.wr(IRQ_TEST, 0);
    assert_eq!(e.irqs(), 0, "no interrupt");
    assert_eq!(e.stat("irq_no_master"), 1);
    e.config_write16(4, 0x0006);
    e.wr(IRQ_TEST, 0);
    assert_eq!(e.irqs(), 1);
    e.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(e.rd(DMA_TEST_CTRL), DMA_TEST_DONE);
    assert_eq!((e.stat("dma_no_master"), e.stat("irq_no_master")), (1, 1));
    // Device memory is reachable through BAR4.
    let mut b = [0u8; 4];
    e.region_read(4, 0, &mut b);
    assert_eq!(b, [0; 4]);
}

#[test]
fn commands_validate_their_input() {
    let mut e = emu(&["--ports", "2"]);
    e.mmu_enable();
    let mut cq = [0u8; 16];
    cq[0..8].copy_from_slice(&CQ_VA.to_le_bytes());
    // Log size 0 and beyond MAX_CQE, misaligned ring, port and index range.
    cq[8] = 0;
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1, &cq), 22);
    cq[8] = 14;
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1, &cq), 22);
    cq[8] = 4;
    assert_eq!(e.cmd(CMD_CQ_CREATE, 2, 1, &cq), 22, "no port 2");
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1024, &cq), 22, "CQN beyond MAX_CQS");
    cq[0] = 8;
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1, &cq), 22, "misaligned ring");
    cq[0] = 0;
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1, &cq), 0);
    assert_eq!(e.cmd(CMD_CQ_CREATE, 0, 1, &cq), 17, "exists");
    assert_eq!(e.cmd(0x7f, 0, 0, &[]), 22, "unknown opcode");
    // QP state machine: no RTS out of nothing, no INIT without its CQ.
    let mut ctx = gaudi_emu::qp::QpCtx {
        state: QPS_RTS,
        cqn: 1,
        sq_base: SQ_VA,
        sq_log_size: 4,
        log_mtu: 12,
        ..Default::default()
    };
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()), 22);
    ctx.state = QPS_INIT;
    ctx.cqn = 2;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()), 22, "no CQ 2");
    ctx.cqn = 1;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()), 0);
    ctx.state = QPS_RTR;
    assert_eq!(
        e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()),
        22,
        "RTR needs a destination"
    );
    ctx.dest.mac = [2, 0, 0, 0, 0, 1];
    ctx.dest.ip = Gid::v4([10, 0, 0, 1]);
    ctx.log_mtu = 14;
    assert_eq!(
        e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()),
        22,
        "MTU beyond 8 KiB"
    );
    ctx.log_mtu = 12;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &ctx.encode()), 0);
    assert_eq!(e.cmd(CMD_CQ_DESTROY, 0, 1, &[]), 16, "CQ in use");
    assert_eq!(e.cmd(CMD_QP_READ, 0, 3, &[]), 0);
    assert_eq!(e.rd(CMD_DATA) & 0xff, u32::from(QPS_RTR));
    assert_eq!(e.cmd(CMD_QP_DESTROY, 0, 3, &[]), 0);
    assert_eq!(e.cmd(CMD_QP_READ, 0, 3, &[]), 2);
    assert_eq!(e.cmd(CMD_CQ_DESTROY, 0, 1, &[]), 0);
    // Doorbells for objects that do not exist change nothing.
    e.wr(DB_BASE + DB_SQ, 3 << 16 | 1);
    e.wr(DB_BASE + DB_CQ, 1 << 16 | 1);
    assert_eq!(e.stat("port 0 tx"), 0);
    assert_eq!(e.stat("dma_audit"), 0);
}

#[test]
fn write_between_two_emulators() {
    let (mut a, mut b) = pair((7, 14));
    for (len, imm) in [
        (1usize, None),
        (4096, Some(0xfeed_f00d)),
        (1 << 20, Some(7)),
        (300_001, None),
    ] {
        let data = pattern(len, len as u32);
        let src = buffer(&mut a.emu, SRC_VA, len, 0);
        let dst = buffer(&mut b.emu, DST_VA, len, PTE_WRITE);
        fill(&a.emu, &src, &data);
        let idx = a.emu.post(&mut a.qp, write_wqe(len, imm));
        let c = expect_cqe(&mut a.emu, &mut a.cq);
        assert_eq!(
            (c.status, c.opcode, c.wqe_index, c.byte_len, c.qpn),
            (ST_SUCCESS, CQE_SEND, idx, len as u32, 7),
            "{len} bytes"
        );
        assert!(
            gather(&b.emu, &dst, len) == data,
            "{len} bytes landed byte-exact"
        );
        if let Some(imm) = imm {
            let c = expect_cqe(&mut b.emu, &mut b.cq);
            assert_eq!(
                (c.opcode, c.imm, c.byte_len, c.qpn),
                (CQE_RECV_WRITE_IMM, imm, len as u32, 9)
            );
        }
    }
    assert!(
        b.emu.poll(&mut b.cq, Duration::from_millis(50)).is_none(),
        "no extra completions"
    );
    for e in [&a.emu, &b.emu] {
        assert_eq!(e.stat("dma_audit"), 0);
        assert_eq!(e.stat("port 0 icrc_errors"), 0);
    }
}

#[test]
fn mmu_fault_gives_error_cqe_and_no_dma() {
    let (mut a, mut b) = pair((7, 14));
    a.emu.irqs();
    // Source not mapped at all.
    let idx = a.emu.post(&mut a.qp, write_wqe(4096, None));
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    assert_eq!((c.status, c.wqe_index), (ST_LOC_PROT_ERR, idx));
    let ev = a.emu.events();
    assert!(ev.contains(&(EV_MMU_FAULT, 0, 7, SRC_VA as u32)), "{ev:?}");
    assert!(
        ev.contains(&(EV_QP_ERROR, 0, 7, u32::from(ST_LOC_PROT_ERR))),
        "{ev:?}"
    );
    assert!(a.emu.irqs() > 0, "event interrupt raised");
    assert_eq!(
        a.emu.stat("port 0 tx"),
        0,
        "nothing sent for the faulting WQE"
    );
    assert_eq!(a.emu.rd(MMU_FAULT_VA_LO), SRC_VA as u32);
    // The QP is in error: later WQEs are flushed, not executed.
    buffer(&mut a.emu, SRC_VA, 4096, 0);
    let idx = a.emu.post(&mut a.qp, write_wqe(4096, None));
    let _ = idx;
    assert_eq!(a.emu.cmd(CMD_QP_READ, 0, 7, &[]), 0);
    assert_eq!(a.emu.rd(CMD_DATA) & 0xff, u32::from(QPS_ERR));
    // A page table entry pointing outside guest memory: the device
    // refuses the access and the audit counts it.
    let bad = 0x7000_0000_0000 & PTE_ADDR_MASK;
    b.emu.map(SRC_VA, bad, 1, 0);
    buffer(&mut b.emu, DST_VA, 4096, PTE_WRITE);
    b.emu.post(&mut b.qp, write_wqe(16, None));
    let c = expect_cqe(&mut b.emu, &mut b.cq);
    assert_eq!(c.status, ST_LOC_PROT_ERR);
    assert_eq!(b.emu.stat("dma_audit"), 1, "refused and audited");
    assert_eq!(a.emu.stat("dma_audit"), 0);
}

#[test]
fn remote_access_error_is_reported_to_both_sides() {
    let (mut a, mut b) = pair((7, 14));
    let data = pattern(8192, 1);
    let src = buffer(&mut a.emu, SRC_VA, data.len(), 0);
    fill(&a.emu, &src, &data);
    // The target is mapped read-only: the responder refuses the WRITE.
    let dst = buffer(&mut b.emu, DST_VA, data.len(), 0);
    let idx = a.emu.post(&mut a.qp, write_wqe(data.len(), None));
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    assert_eq!((c.status, c.wqe_index), (ST_REM_ACCESS_ERR, idx));
    assert!(
        gather(&b.emu, &dst, data.len()).iter().all(|&x| x == 0),
        "nothing written"
    );
    let ev = b.emu.events();
    assert!(ev.iter().any(|e| e.0 == EV_QP_ERROR && e.2 == 9), "{ev:?}");
    assert!(ev.iter().any(|e| e.0 == EV_MMU_FAULT && e.2 == 9), "{ev:?}");
    assert_eq!(b.emu.stat("port 0 naks"), 1);
    assert_eq!(a.emu.stat("dma_audit") + b.emu.stat("dma_audit"), 0);
}

#[test]
fn wrong_rkey_is_refused() {
    // a carries an rkey that b does not hold.
    let (mut a, mut b) = pair_with_rkey((7, 14), 0x1234);
    buffer(&mut a.emu, SRC_VA, 64, 0);
    let dst = buffer(&mut b.emu, DST_VA, 64, PTE_WRITE);
    b.emu.ram.slice(dst[0], 64).fill(0x5a);
    a.emu.post(&mut a.qp, write_wqe(64, None));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_REM_ACCESS_ERR);
    assert!(b.emu.ram.slice(dst[0], 64).iter().all(|&x| x == 0x5a));
}

#[test]
fn retransmission_after_injected_drop() {
    let (mut a, mut b) = pair((7, 12));
    let len = 64 * 1024;
    let data = pattern(len, 3);
    let src = buffer(&mut a.emu, SRC_VA, len, 0);
    let dst = buffer(&mut b.emu, DST_VA, len, PTE_WRITE);
    fill(&a.emu, &src, &data);
    a.emu.ctl("drop 0 3");
    a.emu.post(&mut a.qp, write_wqe(len, None));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    assert!(
        gather(&b.emu, &dst, len) == data,
        "data landed after retransmission"
    );
    assert_eq!(a.emu.stat("port 0 injected"), 3);
    assert!(a.emu.stat("port 0 retransmits") >= 3);
    // Corruption too: the receiver drops frames with a bad ICRC.
    a.emu.ctl("corrupt 0 2");
    fill(&a.emu, &src, &pattern(len, 4));
    a.emu.post(&mut a.qp, write_wqe(len, None));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    assert!(gather(&b.emu, &dst, len) == pattern(len, 4));
    assert_eq!(b.emu.stat("port 0 icrc_errors"), 2);
}

#[test]
fn retry_exhaustion_after_link_down() {
    // Timeout 4.096 us * 2^8 = 1 ms, 2 retries.
    let (mut a, _b) = pair((2, 8));
    buffer(&mut a.emu, SRC_VA, 8192, 0);
    a.emu.events();
    a.emu.ctl("link 0 down");
    let idx = a.emu.post(&mut a.qp, write_wqe(8192, None));
    let second = a.emu.post(&mut a.qp, write_wqe(16, None));
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    assert_eq!((c.status, c.wqe_index), (ST_RETRY_EXC_ERR, idx));
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    assert_eq!((c.status, c.wqe_index), (ST_WR_FLUSH_ERR, second));
    let ev = a.emu.events();
    assert!(ev.contains(&(EV_PORT_DOWN, 0, 0, 0)), "{ev:?}");
    assert!(
        ev.contains(&(EV_QP_ERROR, 0, 7, u32::from(ST_RETRY_EXC_ERR))),
        "{ev:?}"
    );
    a.emu.ctl("link 0 up");
    assert!(a.emu.events().contains(&(EV_PORT_UP, 0, 0, 0)));
}

#[test]
fn loopback_between_ports_of_one_device() {
    let base = udp_ports(2);
    let (p0, p1) = (base.to_string(), (base + 1).to_string());
    let mut e = emu(&[
        "--ports",
        "2",
        "--link",
        &format!("0={p0}:{p1}"),
        "--link",
        &format!("1={p1}:{p0}"),
    ]);
    let (e0, e1) = (e.endpoint(0), e.endpoint(1));
    e.mmu_enable();
    e.eq_enable(6);
    let mut cq0 = e.cq(0, 1, CQ_VA, 6);
    let mut cq1 = e.cq(1, 1, 0x300_0000, 6);
    let mut qp0 = e.qp(0, 5, 1, SQ_VA, e1, 6, (RKEY_B, RKEY_A), (7, 14));
    e.qp(1, 6, 1, 0x400_0000, e0, 5, (RKEY_A, RKEY_B), (7, 14));
    let len = 100_000;
    let data = pattern(len, 5);
    let src = buffer(&mut e, SRC_VA, len, 0);
    let dst = buffer(&mut e, DST_VA, len, PTE_WRITE);
    fill(&e, &src, &data);
    e.post(&mut qp0, write_wqe(len, Some(42)));
    assert_eq!(expect_cqe(&mut e, &mut cq0).status, ST_SUCCESS);
    let c = expect_cqe(&mut e, &mut cq1);
    assert_eq!(
        (c.opcode, c.imm, c.byte_len),
        (CQE_RECV_WRITE_IMM, 42, len as u32)
    );
    assert!(gather(&e, &dst, len) == data);
}

#[test]
fn capture_decodes_as_roce_with_valid_icrc() {
    let (mut a, mut b) = pair((7, 14));
    let pcap = a.emu.dir.join("port0.pcap");
    a.emu.ctl(&format!("capture 0 {}", pcap.display()));
    let len = 10_000;
    let src = buffer(&mut a.emu, SRC_VA, len, 0);
    buffer(&mut b.emu, DST_VA, len, PTE_WRITE);
    fill(&a.emu, &src, &pattern(len, 9));
    a.emu.post(&mut a.qp, write_wqe(len, Some(0x0102_0304)));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    a.emu.ctl("capture 0 off");
    let text = tshark_fields(
        &pcap,
        &[
            "frame.protocols",
            "infiniband.bth.opcode",
            "infiniband.bth.psn",
            "infiniband.invariant.crc",
        ],
    );
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "{text}");
    // FIRST, MIDDLE, LAST_WITH_IMM out; one ACK back; PSNs from 1000.
    let fields: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    let data = "eth:ethertype:ip:udp:infiniband:data";
    assert_eq!(
        fields,
        [
            (data, "6", "1000"),
            (data, "7", "1001"),
            (data, "9", "1002"),
            ("eth:ethertype:ip:udp:infiniband", "17", "1002")
        ],
        "{text}"
    );
    // Wireshark decodes the ICRC but does not check it: check what it
    // decoded against an independent, bit-by-bit computation.
    let frames = read_pcap(&pcap);
    assert_eq!(frames.len(), rows.len());
    for (f, r) in frames.iter().zip(&rows) {
        check_icrc(f, r[3]);
        let mut g = f.clone();
        let i = g.len() - 5;
        g[i] ^= 1;
        assert_ne!(
            icrc_bitwise(&g),
            u32::from_le_bytes(g[g.len() - 4..].try_into().unwrap())
        );
    }
}

/// Wireshark's `fields` of every frame of `pcap`, a line per frame, comma
/// separated.
fn tshark_fields(pcap: &Path, fields: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "separator=,"])
        .args(fields.iter().flat_map(|f| ["-e", f]))
        .output()
        .expect("run tshark (Debian package tshark)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Frame `f`'s ICRC is what Wireshark decoded (`wire`, its hex field) and
/// what a bit-by-bit computation gives.
fn check_icrc(f: &[u8], wire: &str) {
    let icrc = &f[f.len() - 4..];
    let wire = u32::from_str_radix(wire.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(wire, u32::from_be_bytes(icrc.try_into().unwrap()));
    assert_eq!(
        icrc_bitwise(f),
        u32::from_le_bytes(icrc.try_into().unwrap()),
        "ICRC valid"
    );
}

/// Frames of a pcap file (little-endian, microsecond format).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], &0xa1b2_c3d4u32.to_le_bytes());
    let mut off = 24;
    let mut out = Vec::new();
    while off + 16 <= b.len() {
        let n = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        out.push(b[off + 16..off + 16 + n].to_vec());
        off += 16 + n;
    }
    out
}

/// The RoCEv2 ICRC (IBA Annex A17) of an Ethernet/IPv4 or IPv6 frame,
/// computed bit by bit: CRC-32 over 8 bytes of 0xff, the IP header with
/// its variant fields set to ones (IPv4: TOS, TTL and checksum; IPv6, as
/// rxe masks them: traffic class, flow label and hop limit), the UDP
/// header with its checksum set to ones, the BTH with resv8a set to ones,
/// and the rest up to the ICRC.
fn icrc_bitwise(frame: &[u8]) -> u32 {
    let mut msg = vec![0xffu8; 8];
    let body = &frame[14..frame.len() - 4];
    let mut masked = body.to_vec();
    let udp = if frame[12..14] == [0x86, 0xdd] {
        masked[0] |= 0x0f;
        masked[1..4].fill(0xff);
        masked[7] = 0xff;
        40
    } else {
        masked[1] = 0xff;
        masked[8] = 0xff;
        masked[10] = 0xff;
        masked[11] = 0xff;
        20
    };
    masked[udp + 6] = 0xff;
    masked[udp + 7] = 0xff;
    masked[udp + 8 + 4] = 0xff;
    msg.extend_from_slice(&masked);
    let mut crc = u32::MAX;
    for byte in msg {
        for bit in 0..8 {
            let b = (byte >> bit) & 1;
            let top = crc & 1;
            crc >>= 1;
            if (top ^ u32::from(b)) != 0 {
                crc ^= 0xedb8_8320;
            }
        }
    }
    !crc
}

/// RoCEv2 over IPv6 as the device encodes it is what Wireshark dissects
/// as such, with the GRH fields where IPv6 has them, and its ICRC is the
/// one computed bit by bit with rxe's IPv6 masks.
#[test]
fn ipv6_frames_decode_as_roce_in_wireshark() {
    let dir = std::env::temp_dir().join(format!("gaudi-emu-ipv6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("ipv6.pcap");
    let gid = |n: u8| Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]);
    let ep = |n: u8| Endpoint {
        mac: [2, 0, 0, 0, 0, n],
        ip: gid(n),
    };
    let payload = pattern(300, 4);
    let pkts = [
        Packet {
            src: ep(1),
            dst: ep(2),
            tclass: 0x68,
            flow_label: 0x1_2345,
            hop_limit: 9,
            sport: 0xd001,
            opcode: op::WRITE_ONLY_IMM,
            dqpn: 0x44,
            ackreq: true,
            psn: 77,
            reth: Some(Reth {
                va: 0x7000,
                rkey: 0x1234,
                len: 300,
            }),
            imm: Some(0xabcd),
            payload: &payload,
            ..Default::default()
        },
        Packet {
            src: ep(2),
            dst: ep(1),
            sport: 0xd002,
            opcode: op::ACK,
            dqpn: 0x55,
            psn: 77,
            aeth: Some((aeth::ACK, 1)),
            ..Default::default()
        },
    ];
    let frames: Vec<Vec<u8>> = pkts.iter().map(|p| p.encode(0)).collect();
    // The emulator's own pcap header, then one record per frame.
    let mut w = gaudi_emu::engine::open_capture(pcap.to_str().unwrap()).unwrap();
    for f in &frames {
        let len = (f.len() as u32).to_le_bytes();
        for part in [&[0u8; 8][..], &len, &len, f] {
            std::io::Write::write_all(&mut w, part).unwrap();
        }
    }
    std::io::Write::flush(&mut w).unwrap();
    drop(w);
    let text = tshark_fields(
        &pcap,
        &[
            "frame.protocols",
            "ipv6.tclass",
            "ipv6.flow",
            "ipv6.hlim",
            "ipv6.dst",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.invariant.crc",
        ],
    );
    std::fs::remove_dir_all(&dir).ok();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(
        rows[0][..7],
        [
            "eth:ethertype:ipv6:udp:infiniband:data",
            "0x00000068",
            "0x012345",
            "9",
            "2001:db8::2",
            "11",
            "0x000044"
        ],
        "{text}"
    );
    assert_eq!(
        rows[1][..7],
        [
            "eth:ethertype:ipv6:udp:infiniband",
            "0x00000000",
            "0x000000",
            "64",
            "2001:db8::1",
            "17",
            "0x000055"
        ],
        "{text}"
    );
    for (f, r) in frames.iter().zip(&rows) {
        check_icrc(f, r[7]);
    }
}

#[test]
fn control_interface_faults() {
    let (mut a, mut b) = pair((7, 14));
    // Delay: frames still arrive, later.
    a.emu.ctl("delay 0 30");
    let src = buffer(&mut a.emu, SRC_VA, 4096, 0);
    let dst = buffer(&mut b.emu, DST_VA, 4096, PTE_WRITE);
    fill(&a.emu, &src, &pattern(4096, 11));
    let t0 = std::time::Instant::now();
    a.emu.post(&mut a.qp, write_wqe(4096, None));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert!(gather(&b.emu, &dst, 4096) == pattern(4096, 11));
    a.emu.ctl("delay 0 0");
    // Injected QP error: the QP reports it and stops.
    b.emu.events();
    b.emu.ctl("qp-error 0 9");
    let ev = b.emu.events();
    assert!(
        ev.contains(&(EV_QP_ERROR, 0, 9, u32::from(ST_LOC_QP_OP_ERR))),
        "{ev:?}"
    );
    assert_eq!(b.emu.cmd(CMD_QP_READ, 0, 9, &[]), 0);
    assert_eq!(b.emu.rd(CMD_DATA) & 0xff, u32::from(QPS_ERR));
    // Device fatal: reported once, commands fail until reset.
    a.emu.events();
    a.emu.ctl("fatal");
    assert_eq!(a.emu.events(), vec![(EV_DEVICE_FATAL, 0, 0, 0)]);
    assert_eq!(a.emu.rd(STATUS) & STATUS_FATAL, STATUS_FATAL);
    assert_eq!(a.emu.cmd(CMD_QP_READ, 0, 7, &[]), 5, "EIO");
    a.emu.wr(RESET, RESET_MAGIC);
    assert_eq!(a.emu.rd(STATUS), STATUS_READY);
    assert_eq!(
        a.emu.cmd(CMD_QP_READ, 0, 7, &[]),
        2,
        "QPs are gone after reset"
    );
    // Unknown commands and ports are refused, not obeyed.
    let mut s = std::os::unix::net::UnixStream::connect(a.emu.dir.join("ctl.sock")).unwrap();
    use std::io::{BufRead, Write};
    writeln!(s, "link 99 down").unwrap();
    writeln!(s, "bogus").unwrap();
    let mut r = std::io::BufReader::new(s);
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    assert!(l.starts_with("err no port 99"), "{l}");
    l.clear();
    r.read_line(&mut l).unwrap();
    assert!(l.starts_with("err unknown command"), "{l}");
}

// ---- Model 1.2 ---------------------------------------------------------

/// Where peers name b's region.
const IOVA: u64 = 0x7f12_3456_0000;

fn with_region(c: &mut QpCtx) {
    c.flags = QPF_REMOTE_WRITE | QPF_REGION;
    c.region = Region {
        iova: IOVA,
        len: 3 * 4096,
        va: DST_VA,
    };
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn region_write_by_iova_lands_and_outside_is_refused() {
    let (mut a, mut b) = pair_cfg(Cfg {
        tweak_b: with_region,
        ..Cfg::new((7, 14))
    });
    let c = b.emu.qp_read(0, 9);
    assert_eq!((c.flags, c.region.iova, c.region.len), (3, IOVA, 3 * 4096));
    let len = 5000;
    let data = pattern(len, 21);
    let src = buffer(&mut a.emu, SRC_VA, len + 4096, 0);
    fill(&a.emu, &src, &data);
    // One page more than the region is mapped: the region bounds WRITEs.
    let dst = buffer(&mut b.emu, DST_VA, 4 * 4096, PTE_WRITE);
    let mut w = write_wqe(len, None);
    w.remote_va = IOVA + 4096 + 100;
    a.emu.post(&mut a.qp, w);
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    let got = gather(&b.emu, &dst, 4 * 4096);
    assert!(got[4196..4196 + len] == data[..], "landed at DST_VA + 4196");
    assert!(got[..4196]
        .iter()
        .chain(&got[4196 + len..])
        .all(|&x| x == 0));
    // Runs one byte past the region's end: refused, nothing stored.
    let mut w = write_wqe(4097, None);
    w.remote_va = IOVA + 2 * 4096;
    let idx = a.emu.post(&mut a.qp, w);
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    assert_eq!((c.status, c.wqe_index), (ST_REM_ACCESS_ERR, idx));
    assert!(gather(&b.emu, &dst, 4 * 4096) == got, "nothing more landed");
    let ev = b.emu.events();
    assert!(
        ev.contains(&(EV_QP_ERROR, 0, 9, u32::from(ST_REM_ACCESS_ERR))),
        "{ev:?}"
    );
    assert!(!ev.iter().any(|e| e.0 == EV_MMU_FAULT), "{ev:?}");
    assert_eq!(b.emu.stat("mmu_faults"), 0);
    assert_eq!(b.emu.qp_read(0, 9).state, QPS_ERR);
    assert_eq!(a.emu.stat("dma_audit") + b.emu.stat("dma_audit"), 0);
}

#[test]
fn rkey_zero_is_refused() {
    let (mut a, mut b) = pair_cfg(Cfg {
        a_remote_rkey: 0,
        b_local_rkey: 0,
        ..Cfg::new((7, 14))
    });
    let src = buffer(&mut a.emu, SRC_VA, 64, 0);
    fill(&a.emu, &src, &[0x11; 64]);
    let dst = buffer(&mut b.emu, DST_VA, 64, PTE_WRITE);
    a.emu.post(&mut a.qp, write_wqe(64, None));
    assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_REM_ACCESS_ERR);
    assert!(b.emu.ram.slice(dst[0], 64).iter().all(|&x| x == 0));
    assert_eq!(b.emu.stat("port 0 naks"), 1);
}

#[test]
fn qp_write_refuses_bad_regions() {
    let mut e = emu(&["--ports", "1"]);
    e.mmu_enable();
    e.cq(0, 1, CQ_VA, 4);
    let mut c = QpCtx {
        state: QPS_INIT,
        cqn: 1,
        sq_base: SQ_VA,
        sq_log_size: 4,
        local_rkey: 0,
        ..Default::default()
    };
    with_region(&mut c);
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &c.encode()), 22, "rkey 0");
    c.local_rkey = 5;
    c.region.len = 0;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &c.encode()), 22, "empty");
    c.region.len = u64::MAX - IOVA + 1;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &c.encode()), 22, "iova wraps");
    c.region.len = 4096;
    c.region.va = u64::MAX - 100;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &c.encode()), 22, "VA wraps");
    c.region.va = DST_VA;
    assert_eq!(e.cmd(CMD_QP_WRITE, 0, 3, &c.encode()), 0);
    assert_eq!(e.qp_read(0, 3).region, c.region);
}

#[test]
fn rkey_revoke_refuses_the_rest_of_an_incoming_write() {
    let base = udp_ports(2);
    let mut b = emu(&[
        "--ports",
        "1",
        "--instance",
        "2",
        "--link",
        &format!("0={}:{}", base + 1, base),
    ]);
    let peer = Peer::bind(
        base,
        base + 1,
        Endpoint {
            mac: [2, 0, 0, 0, 0, 0x99],
            ip: Gid::v4([10, 9, 9, 9]),
        },
    );
    let eb = b.endpoint(0);
    b.mmu_enable();
    b.eq_enable(6);
    b.cq(0, 1, CQ_VA, 6);
    b.qp_with(
        0,
        9,
        1,
        SQ_VA,
        peer.ep,
        77,
        (1, RKEY_B),
        (7, 14),
        with_region,
    );
    // A second QP holding the key; one holding another.
    b.qp(0, 10, 1, 0x30_0000, peer.ep, 78, (1, RKEY_B), (7, 14));
    b.qp(0, 11, 1, 0x40_0000, peer.ep, 79, (1, RKEY_A), (7, 14));
    let dst = buffer(&mut b, DST_VA, 3 * 4096, PTE_WRITE);
    let data = pattern(3 * 4096, 22);
    let packet = |opcode: u8, psn: u32, i: usize| Packet {
        dst: eb,
        sport: 0xc000,
        opcode,
        dqpn: 9,
        ackreq: true,
        psn,
        reth: (opcode == op::WRITE_FIRST).then_some(Reth {
            va: IOVA,
            rkey: RKEY_B,
            len: 3 * 4096,
        }),
        payload: &data[i * 4096..(i + 1) * 4096],
        ..Default::default()
    };
    peer.send(&packet(op::WRITE_FIRST, 1000, 0));
    assert_eq!(peer.recv_ack(WAIT), Some((aeth::ACK, 1000)));
    assert_eq!(b.cmd(CMD_RKEY_REVOKE, 0, 0, &RKEY_B.to_le_bytes()), 0);
    assert_eq!(b.rd(CMD_DATA + 4), 2, "contexts changed");
    peer.send(&packet(op::WRITE_MIDDLE, 1001, 1));
    assert_eq!(peer.recv_ack(WAIT), Some((aeth::NAK_REMOTE_ACCESS, 1001)));
    peer.send(&packet(op::WRITE_LAST, 1002, 2));
    let got = gather(&b, &dst, 3 * 4096);
    assert!(got[..4096] == data[..4096], "the first packet landed");
    assert!(got[4096..].iter().all(|&x| x == 0), "the rest did not");
    let c = b.qp_read(0, 9);
    assert_eq!(
        (c.state, c.local_rkey, c.flags, c.region),
        (QPS_ERR, 0, 0, Region::default())
    );
    assert_eq!(b.qp_read(0, 10).local_rkey, 0);
    assert_eq!(b.qp_read(0, 11).local_rkey, RKEY_A);
    assert_eq!(b.cmd(CMD_RKEY_REVOKE, 0, 0, &0u32.to_le_bytes()), 22);
    assert_eq!(b.stat("port 0 naks"), 1);
    assert_eq!(b.stat("dma_audit"), 0);
}

#[test]
fn devmem_fill_fills_exactly_the_range() {
    let mut e = emu(&["--ports", "1", "--devmem", "1"]);
    let fill = |e: &mut Emu, off: u64, len: u64, pattern: u32| {
        let mut d = [0u8; 20];
        d[0..8].copy_from_slice(&off.to_le_bytes());
        d[8..16].copy_from_slice(&len.to_le_bytes());
        d[16..20].copy_from_slice(&pattern.to_le_bytes());
        e.cmd(CMD_DEVMEM_FILL, 0, 0, &d)
    };
    assert_eq!(fill(&mut e, 0x2000, 0x3000, 0xcafe_f00d), 0);
    let mut b = vec![0u8; 0x6000];
    e.region_read(4, 0, &mut b);
    assert!(b[..0x2000].iter().all(|&x| x == 0));
    assert!(b[0x2000..0x5000]
        .chunks(4)
        .all(|c| c == 0xcafe_f00du32.to_le_bytes()));
    assert!(b[0x5000..].iter().all(|&x| x == 0));
    assert_eq!(
        e.ctl("devmem-peek 0x4ffc 8"),
        vec!["data 0df0feca00000000".to_string()]
    );
    for (off, len) in [
        (0x800, 0x1000),
        (0x1000, 0x10),
        (0x1000, 0),
        (0xff000, 0x2000),
        (!0xfff, 0x1000),
    ] {
        assert_eq!(fill(&mut e, off, len, 1), 22, "{off:#x}+{len:#x}");
    }
    assert_eq!(fill(&mut e, 0xff000, 0x1000, 0x0101_0101), 0, "last page");
    e.region_read(4, 0, &mut b);
    assert!(
        b[..0x2000].iter().all(|&x| x == 0),
        "refused fills wrote nothing"
    );
}

#[test]
fn full_responder_cq_answers_rnr_naks_then_everything_lands() {
    let (mut a, mut b) = pair_cfg(Cfg {
        b_cq_log: 2,
        tweak_a: |c| c.rnr_retry = RNR_RETRY_FOREVER,
        // 5.12 ms.
        tweak_b: |c| c.min_rnr_timer = 18,
        ..Cfg::new((7, 14))
    });
    let n = 10;
    let src = buffer(&mut a.emu, SRC_VA, 64, 0);
    fill(&a.emu, &src, &[0x33; 64]);
    let dst = buffer(&mut b.emu, DST_VA, 4096, PTE_WRITE);
    for i in 0..n {
        let mut w = write_wqe(64, Some(0x500 + i));
        w.remote_va = DST_VA + u64::from(i) * 64;
        a.emu.post(&mut a.qp, w);
    }
    wait_for("an RNR NAK", || b.emu.stat("port 0 rnr_naks") > 0);
    let landed = |b: &Side| {
        b.emu
            .ram
            .slice(dst[0], 64 * n as usize)
            .chunks(64)
            .filter(|c| c[0] == 0x33)
            .count()
    };
    assert_eq!(landed(&b), 4, "as many as the CQ holds");
    assert_eq!(b.emu.qp_read(0, 9).state, QPS_RTS);
    // The consumer moves: the rest comes in.
    let imms: Vec<u32> = (0..n)
        .map(|_| expect_cqe(&mut b.emu, &mut b.cq).imm)
        .collect();
    assert_eq!(imms, (0..n).map(|i| 0x500 + i).collect::<Vec<_>>());
    assert_eq!(landed(&b), n as usize);
    for _ in 0..n {
        assert_eq!(expect_cqe(&mut a.emu, &mut a.cq).status, ST_SUCCESS);
    }
    assert!(!b.emu.events().iter().any(|e| e.0 == EV_CQ_OVERFLOW));
    assert_eq!(b.emu.stat("port 0 naks"), 0, "RNR NAKs are counted apart");
    assert!(b.emu.rd(PORT_BASE + PORT_RNR_NAKS_SENT) >= 1);
    assert!(a.emu.stat("port 0 retransmits") >= 1);
}

#[test]
fn rnr_retries_exhausted() {
    let (mut a, mut b) = pair_cfg(Cfg {
        b_cq_log: 1,
        tweak_a: |c| c.rnr_retry = 3,
        // 10 us.
        tweak_b: |c| c.min_rnr_timer = 1,
        ..Cfg::new((7, 14))
    });
    buffer(&mut a.emu, SRC_VA, 64, 0);
    buffer(&mut b.emu, DST_VA, 4096, PTE_WRITE);
    let idx: Vec<u16> = (0..4)
        .map(|i| a.emu.post(&mut a.qp, write_wqe(64, Some(i))))
        .collect();
    let got: Vec<(u16, u8)> = (0..4)
        .map(|_| {
            let c = expect_cqe(&mut a.emu, &mut a.cq);
            (c.wqe_index, c.status)
        })
        .collect();
    assert_eq!(
        got,
        [
            (idx[0], ST_SUCCESS),
            (idx[1], ST_SUCCESS),
            (idx[2], ST_RNR_RETRY_EXC_ERR),
            (idx[3], ST_WR_FLUSH_ERR)
        ]
    );
    assert!(a
        .emu
        .events()
        .contains(&(EV_QP_ERROR, 0, 7, u32::from(ST_RNR_RETRY_EXC_ERR))));
    assert_eq!(b.emu.stat("port 0 rnr_naks"), 4, "retry count 3: 4 NAKs");
    assert_eq!(b.emu.qp_read(0, 9).state, QPS_RTS);
}

/// `--strict`: a's WQE source loses its second page while the WQE waits
/// for a retransmission (link down); `invalidate` says whether the test
/// (the driver) writes MMU_INVALIDATE after removing it.
fn strict_resend(invalidate: bool) -> (Side, Side, Cqe) {
    let (mut a, mut b) = pair_cfg(Cfg {
        args: &["--strict"],
        ..Cfg::new((7, 14))
    });
    let len = 8192;
    let src = buffer(&mut a.emu, SRC_VA, len, 0);
    fill(&a.emu, &src, &pattern(len, 23));
    buffer(&mut b.emu, DST_VA, len, PTE_WRITE);
    a.emu.ctl("link 0 down");
    a.emu.post(&mut a.qp, write_wqe(len, None));
    wait_for("a retransmission", || a.emu.stat("port 0 retransmits") > 0);
    a.emu.unmap(SRC_VA + 4096, 1, invalidate);
    a.emu.ctl("link 0 up");
    let c = expect_cqe(&mut a.emu, &mut a.cq);
    (a, b, c)
}

#[test]
fn strict_mode_counts_a_stale_translation() {
    let (a, b, c) = strict_resend(false);
    assert_eq!(c.status, ST_SUCCESS, "the cached translation was used");
    assert!(a.emu.stat("stale_translation") >= 1);
    assert_eq!(b.emu.stat("stale_translation"), 0);
}

#[test]
fn strict_mode_counts_nothing_after_mmu_invalidate() {
    let (a, _b, c) = strict_resend(true);
    assert_eq!(c.status, ST_LOC_PROT_ERR, "translated again, and faulted");
    assert_eq!(a.emu.stat("stale_translation"), 0);
    assert_eq!(a.emu.stat("dma_audit"), 0);
}

#[test]
fn ready_stays_0_during_the_reset_delay() {
    let mut e = emu(&["--ports", "1", "--reset-delay-ms", "400"]);
    assert_eq!(e.rd(STATUS) & STATUS_READY, STATUS_READY);
    e.irqs();
    let t0 = Instant::now();
    e.wr(RESET, RESET_MAGIC);
    assert_eq!(e.rd(STATUS) & STATUS_READY, 0);
    assert_eq!(e.cmd(CMD_QP_READ, 0, 1, &[]), 16, "EBUSY");
    e.wr(IRQ_TEST, 0);
    assert_eq!(e.rd(IRQ_TEST_COUNT), 0);
    assert_eq!(e.irqs(), 0);
    wait_for("READY", || e.rd(STATUS) & STATUS_READY != 0);
    assert!(t0.elapsed() >= Duration::from_millis(400));
    assert_eq!(e.cmd(CMD_QP_READ, 0, 1, &[]), 2, "commands run again");
    e.wr(IRQ_TEST, 0);
    assert_eq!(e.irqs(), 1);
}

// ---- Strict mode and fuzzing -------------------------------------------

#[test]
fn strict_mode_commands_and_resets_take_their_time() {
    let mut e = emu(&["--ports", "1", "--strict", "--cmd-delay-us", "30000"]);
    let t0 = Instant::now();
    assert_eq!(e.cmd(CMD_QP_READ, 0, 1, &[]), 2, "ENOENT");
    assert!(
        t0.elapsed() >= Duration::from_millis(30),
        "CMD_STATUS waited"
    );
    // A result read early, and a command written over a running one.
    e.wr(CMD, CMD_QP_READ << 24 | 1);
    e.rd(CMD_DATA);
    e.wr(CMD, CMD_QP_READ << 24 | 2);
    assert_eq!(e.rd(CMD_STATUS), 2);
    assert_eq!(
        (e.stat("cmd_data_busy"), e.stat("cmd_overlap")),
        (1, 1),
        "counted"
    );
    // Without --reset-delay-ms a strict reset takes 50 ms.
    let t0 = Instant::now();
    e.wr(RESET, RESET_MAGIC);
    assert_eq!(e.rd(STATUS) & STATUS_READY, 0);
    wait_for("READY", || e.rd(STATUS) & STATUS_READY != 0);
    assert!(t0.elapsed() >= Duration::from_millis(50));
    // The delay is for strict mode only.
    let dir = std::env::temp_dir().join(format!("gaudi-emu-usage-{}", std::process::id()));
    let st = Command::new(EMU)
        .arg("--socket")
        .arg(&dir)
        .args(["--cmd-delay-us", "5"])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
}

/// Send `cmd` to the control socket and return its "err" line.
fn ctl_err(e: &Emu, cmd: &str) -> String {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(e.dir.join("ctl.sock")).unwrap();
    writeln!(s, "{cmd}").unwrap();
    let mut l = String::new();
    std::io::BufReader::new(s).read_line(&mut l).unwrap();
    assert!(l.starts_with("err "), "{cmd}: {l}");
    l
}

/// The number after `key` in a reply line.
fn field(line: &str, key: &str) -> u64 {
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == key).expect(key);
    w[i + 1].parse().unwrap()
}

#[test]
fn control_fuzz_commands() {
    let (mut a, b) = pair((7, 14));
    assert_eq!(a.emu.ctl("cqs 0"), vec!["cqs 1"]);
    assert_eq!(a.emu.ctl("cqs 1"), vec!["cqs"]);
    // CQEs: the consumer finds exactly the visible ones, an armed CQ is
    // notified.
    a.emu.events();
    a.emu.wr(DB_BASE + DB_CQ_ARM, 1 << 16);
    let r = a.emu.ctl("fuzz-cqe 0 1 20 5");
    assert_eq!(r.len(), 1);
    assert!(r[0].starts_with("fuzz-cqe port 0 cq 1 injected "), "{r:?}");
    let mut got = 0;
    while a.emu.poll(&mut a.cq, Duration::ZERO).is_some() {
        got += 1;
    }
    assert_eq!(got, field(&r[0], "visible"));
    assert_eq!(a.emu.events(), vec![(EV_COMPLETION, 0, 1, 0)]);
    // Event queue entries.
    let r = a.emu.ctl("fuzz-eqe 20 6");
    assert!(r[0].starts_with("fuzz-eqe injected "), "{r:?}");
    assert_eq!(a.emu.events().len() as u64, field(&r[0], "visible"));
    assert_eq!(a.emu.rd(EQ_PI), a.emu.rd(EQ_CI));
    // Registers.
    assert_eq!(
        a.emu.ctl("fuzz-regs 3 1 cmd_status"),
        vec!["fuzz-regs armed 3 classes cmd_status"]
    );
    for _ in 0..3 {
        assert!(a.emu.cmd(CMD_QP_READ, 0, 7, &[]) > 255);
    }
    assert_eq!(a.emu.cmd(CMD_QP_READ, 0, 7, &[]), 0);
    let stat = a.emu.ctl("stat");
    assert!(
        stat.contains(&"fuzz_regs left 0 status 0 irq_cause 0 cmd_status 3 cmd_data 0 eq 0 mmu_fault 0 port 0 port_addr 0".to_string()),
        "{stat:?}"
    );
    // Frames.
    let icrc = b.emu.stat("port 0 icrc_errors");
    let r = b.emu.ctl("fuzz-wire 0 100 7");
    assert_eq!(r.len(), 2);
    assert!(r[0].starts_with("fuzz-wire port 0 injected 100 "), "{r:?}");
    assert!(r[1].starts_with("fuzz-wire port 0 moved rx "), "{r:?}");
    assert_eq!(
        b.emu.stat("port 0 icrc_errors") - icrc,
        field(&r[0], "bad_icrc")
    );
    assert_eq!(field(&r[1], "icrc_errors"), field(&r[0], "bad_icrc"));
    // Refused.
    assert!(ctl_err(&a.emu, "fuzz-cqe 0 9 1 1").contains("no CQ 9"));
    assert!(ctl_err(&a.emu, "fuzz-cqe 5 1 1 1").contains("no port"));
    assert!(ctl_err(&a.emu, "fuzz-regs 1 1 nope").contains("unknown register class"));
    assert!(ctl_err(&a.emu, "fuzz-wire 0 70000 1").contains("at most 65536"));
    assert!(ctl_err(&a.emu, "fuzz-eqe 1").contains("seed"));
    for e in [&a.emu, &b.emu] {
        assert_eq!(e.stat("dma_audit"), 0);
        assert_eq!(e.stat("eq_dropped"), 0);
    }
}
