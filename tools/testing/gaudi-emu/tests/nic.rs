// SPDX-License-Identifier: GPL-2.0
//! Device model 2.0 driven over the vfio-user socket as a driver would:
//! the Gaudi2 NIC's registers at their configuration-space offsets in BAR0.

use gaudi_emu::nic::formats::{ReqQpc, ResQpc};
use gaudi_emu::nic::layout::{bytes, field, words, Layout};
use gaudi_emu::nic::regs::*;
use gaudi_emu::nic::DRAM_PHYS_BASE;
use gaudi_emu::testkit::Emu;
use std::path::Path;
use std::time::{Duration, Instant};

const EMU: &str = env!("CARGO_BIN_EXE_gaudi-emu");

/// How long one gateway operation takes in these tests: long enough that
/// GW_BUSY is seen set over the socket.
const GW_DELAY_US: &str = "20000";

fn emu() -> Emu {
    let args: Vec<String> = ["--strict", "--ports", "2", "--cmd-delay-us", GW_DELAY_US]
        .iter()
        .map(|s| s.to_string())
        .collect();
    Emu::start(Path::new(EMU), &args, 64)
}

/// BAR0 offset of per-port register `reg` (element `i`) of `port`.
fn at(reg: u64, port: usize, i: u64) -> u64 {
    CFG_IN_BAR0 + port_cfg(reg, port) + 4 * i
}

/// The context tables: offsets in HBM.
const REQ_TABLE: u64 = 0x10_0000;
const RES_TABLE: u64 = 0x20_0000;

fn set_tables(e: &mut Emu, port: usize) {
    let (req, res) = (DRAM_PHYS_BASE + REQ_TABLE, DRAM_PHYS_BASE + RES_TABLE);
    e.wr(at(QPC0_REQ_BASE_ADDRESS_63_32, port, 0), (req >> 32) as u32);
    e.wr(at(QPC0_REQ_BASE_ADDRESS_31_7, port, 0), (req as u32) >> 7);
    e.wr(at(QPC0_RES_BASE_ADDRESS_63_32, port, 0), (res >> 32) as u32);
    e.wr(at(QPC0_RES_BASE_ADDRESS_31_7, port, 0), (res as u32) >> 7);
}

/// Run one gateway operation as hbl_cn's sequence does it; returns how many
/// reads of GW_BUSY saw it set.
fn gateway(e: &mut Emu, port: usize, qpn: u32, req: bool, mask: &[u32], data: &[u32]) -> u32 {
    assert_eq!(
        e.rd(at(QPC0_GW_BUSY, port, 0)),
        0,
        "gateway busy before the operation"
    );
    for i in 0..32 {
        e.wr(
            at(QPC0_GW_MASK_0, port, i),
            mask.get(i as usize).copied().unwrap_or(0),
        );
    }
    for (i, d) in data.iter().enumerate() {
        e.wr(at(QPC0_GW_DATA_0, port, i as u64), *d);
    }
    e.wr(
        at(QPC0_GW_CTRL, port, 0),
        qpn | if req { 1 << 24 } else { 0 },
    );
    e.wr(at(QPC0_GW_BUSY, port, 0), 1);
    let t0 = Instant::now();
    let mut busy = 0;
    while e.rd(at(QPC0_GW_BUSY, port, 0)) != 0 {
        busy += 1;
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "GW_BUSY never cleared"
        );
    }
    busy
}

/// A context read through the gateway (all mask words 0).
fn read_ctx(e: &mut Emu, port: usize, qpn: u32, req: bool) -> Vec<u32> {
    gateway(e, port, qpn, req, &[], &[]);
    let n = if req { ReqQpc::SIZE } else { ResQpc::SIZE } / 4;
    (0..n)
        .map(|i| e.rd(at(QPC0_GW_DATA_0, port, i as u64)))
        .collect()
}

/// HBM bytes as the control socket shows them.
fn hbm(e: &Emu, off: u64, len: usize) -> Vec<u8> {
    let l = e.ctl(&format!("devmem-peek {off} {len}"));
    let hex = l[0].strip_prefix("data ").unwrap();
    (0..len)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn le_words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn nic_stat(e: &Emu, key: &str) -> u64 {
    let lines = e.ctl("stat");
    let l = lines
        .iter()
        .find(|l| l.starts_with("nic "))
        .expect("nic stat line");
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| *x == key).expect("nic stat field");
    w[i + 1].parse().unwrap()
}

/// The QPC gateway is a masked read-modify-write of the contexts in HBM: a
/// write changes exactly the bits whose mask bit is set, a read copies the
/// context into GW_DATA, and nothing reaches the gateway while GW_BUSY.
#[test]
fn qpc_gateway() {
    let mut e = emu();
    // Port 1: the odd engine's QPC block (QPC1) of macro 0.
    let port = 1;
    set_tables(&mut e, port);
    let qpn = 5;
    let full: Vec<u32> = (0..32u32)
        .map(|i| 0x0101_0101u32.wrapping_mul(i + 1) ^ 0x5a00_00a5)
        .collect();
    let busy = gateway(&mut e, port, qpn, true, &[u32::MAX; 32], &full);
    assert!(
        busy > 0,
        "GW_BUSY never read 1 during a {GW_DELAY_US} us operation"
    );

    // GW_BUSY honoured: while an operation runs, writes to the gateway are
    // dropped (and counted); the operation completes with what it was given.
    let rkey = field::<ReqQpc>("RKEY").unwrap();
    e.wr(at(QPC0_GW_MASK_0, port, 0), 0);
    e.wr(at(QPC0_GW_CTRL, port, 0), qpn | 1 << 24);
    e.wr(at(QPC0_GW_BUSY, port, 0), 1); // a read of QP 5's context
    e.wr(at(QPC0_GW_MASK_0, port, 4), u32::MAX); // dropped
    e.wr(at(QPC0_GW_CTRL, port, 0), 6 | 1 << 24); // dropped
    assert_eq!(nic_stat(&e, "gw_write_while_busy"), 2);
    while e.rd(at(QPC0_GW_BUSY, port, 0)) != 0 {}
    assert_eq!(e.rd(at(QPC0_GW_CTRL, port, 0)), qpn | 1 << 24);
    let got: Vec<u32> = (0..32).map(|i| e.rd(at(QPC0_GW_DATA_0, port, i))).collect();
    assert_eq!(got, full, "the read returned the context written");

    // A partial mask: only the RKEY field (bits 159:128, word 4) changes.
    let before = read_ctx(&mut e, port, qpn, true);
    let mut mask = [0u32; 32];
    let mut data = [u32::MAX; 32];
    let mut m = [0u64; 16];
    rkey.set(&mut m, u64::MAX);
    for (i, w) in le_words(&bytes(&m)).iter().enumerate() {
        mask[i] = *w;
    }
    assert_eq!(mask.iter().filter(|&&w| w != 0).count(), 1);
    data[4] = 0xc0ff_ee01;
    gateway(&mut e, port, qpn, true, &mask, &data);
    let after = read_ctx(&mut e, port, qpn, true);
    for i in 0..32 {
        let want = if i == 4 { 0xc0ff_ee01 } else { before[i] };
        assert_eq!(after[i], want, "requester word {i}");
    }
    let ctx = words(
        &after
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    assert_eq!(rkey.get(&ctx), 0xc0ff_ee01);

    // Partial bits inside a word: the low byte of word 9 only.
    let mut mask = [0u32; 32];
    mask[9] = 0xff;
    gateway(&mut e, port, qpn, true, &mask, &[0u32; 32]);
    let after2 = read_ctx(&mut e, port, qpn, true);
    assert_eq!(after2[9], after[9] & !0xff);
    assert_eq!(
        after2
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 9)
            .map(|(_, w)| *w)
            .collect::<Vec<_>>(),
        after
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 9)
            .map(|(_, w)| *w)
            .collect::<Vec<_>>()
    );

    // The context is in HBM at the table base + QPN x 128; its neighbours
    // were never touched.
    let table = hbm(&e, REQ_TABLE + 4 * 128, 3 * 128);
    assert!(table[..128].iter().all(|&b| b == 0), "QP 4's context");
    assert_eq!(le_words(&table[128..256]), after2, "QP 5's context in HBM");
    assert!(table[256..].iter().all(|&b| b == 0), "QP 6's context");

    // The responder context: 32 bytes at its own table; LKEY is word 1.
    let mut mask = [0u32; 32];
    mask[1] = u32::MAX;
    let mut data = [0xeeee_eeeeu32; 32];
    data[1] = 0x1234_5678;
    gateway(&mut e, port, qpn, false, &mask, &data);
    let res = read_ctx(&mut e, port, qpn, false);
    assert_eq!(res, [0, 0x1234_5678, 0, 0, 0, 0, 0, 0]);
    assert_eq!(le_words(&hbm(&e, RES_TABLE + 5 * 32, 32)), res);
    assert_eq!(
        read_ctx(&mut e, port, qpn, true),
        after2,
        "requester untouched by the responder write"
    );

    // The other engine of the macro has its own gateway and tables.
    assert_eq!(e.rd(at(QPC0_GW_BUSY, 0, 0)), 0);
    assert_eq!(e.rd(at(QPC0_REQ_BASE_ADDRESS_31_7, 0, 0)), 0);
    assert_eq!(nic_stat(&e, "gw_write_while_busy"), 2);
    assert_eq!(nic_stat(&e, "gw_unreachable"), 0);
    assert_eq!(nic_stat(&e, "unknown_register"), 0);
}

/// Every port's registers are where the chip has them: a value written at
/// one port's offset reads back there and nowhere else among the ports.
#[test]
fn nic_registers_per_port() {
    let mut e = emu();
    for port in 0..PORTS {
        e.wr(
            at(TXE0_SQ_BASE_ADDRESS_31_0_0, port, 1),
            0x1000 + port as u32,
        );
        e.wr(at(QPC0_EVENT_QUE_LOG_SIZE, port, 0), port as u32);
    }
    for port in 0..PORTS {
        assert_eq!(
            e.rd(at(TXE0_SQ_BASE_ADDRESS_31_0_0, port, 1)),
            0x1000 + port as u32
        );
        assert_eq!(e.rd(at(TXE0_SQ_BASE_ADDRESS_31_0_0, port, 0)), 0);
        assert_eq!(e.rd(at(QPC0_EVENT_QUE_LOG_SIZE, port, 0)), port as u32);
    }
    // A hole in the NIC's part of configuration space is no register.
    assert_eq!(e.rd(CFG_IN_BAR0 + QPC0_GW_BUSY + 0x10_0000 + 8), 0);
    assert_eq!(nic_stat(&e, "unknown_register"), 1);
}

// ---- The data path: a port brought up as hbl_cn does it ----------------

use gaudi_emu::chip::{SVC_MAC_HI, SVC_MAC_LO};
use gaudi_emu::nic::formats::{
    Cqe, Eqe, SqWqe, COMPLETION_CQ, EQE_DB_FIFO_OVERRUN, EQE_QP_ERR, WQE_OPCODE_LINEAR,
};
use gaudi_emu::nic::layout::Bits;
use gaudi_emu::testkit::udp_ports;

/// Entries of the test's event queue and CQs.
const EQ_LOG: u32 = 8;
const CQ_LOG: u32 = 6;
/// log2 of a QP's send-WQ slot in 128-byte lines: 32 lines, 128 WQEs.
const WQ_LOG_LINES: u32 = 5;
const WQ_ENTRIES: u32 = 128;
const USER_ASID: u32 = 1;
/// The user CQ of the tests' requesters.
const REQ_CQ: u32 = 2;

fn rf(name: &str) -> Bits {
    ReqQpc::field(name)
}

fn sf(name: &str) -> Bits {
    ResQpc::field(name)
}

/// A port as hbl_cn sets it up: context tables in HBM, the event queue,
/// the CQ region and user CQ 2, send WQ array 1 in host memory (MMU
/// bypassed), a doorbell FIFO, its MAC and source address.
struct Port {
    port: usize,
    mac: [u8; 6],
    ip: [u8; 4],
    eq: u64,
    eq_ci: u32,
    cqs: u64,
    cq_ci: u32,
    sq_array: u64,
    fifo_ci: u64,
}

fn wr_pair(e: &mut Emu, hi: u64, lo: u64, port: usize, i: u64, addr: u64, shift: u32) {
    e.wr(at(hi, port, i), (addr >> 32) as u32);
    e.wr(at(lo, port, i), ((addr & 0xffff_ffff) >> shift) as u32);
}

impl Port {
    fn up(e: &mut Emu, port: usize, last_octet: u8) -> Self {
        let mac = [0x02, 0x1d, 0xa3, 0x20, 0x00, last_octet];
        Self::up_at(e, port, mac, [10, 20, 0, last_octet])
    }

    /// As [`Port::up`], at the port's factory addresses (the MAC that
    /// SVC_MAC gives and the IPv4 address 10.0.PORT.1 of the emulator's
    /// instance 0), which the emulator counts ICRC errors of.
    fn up_factory(e: &mut Emu, port: usize) -> Self {
        let (hi, lo) = (
            e.rd(SVC_MAC_HI + 8 * port as u64),
            e.rd(SVC_MAC_LO + 8 * port as u64),
        );
        let lo = lo.to_be_bytes();
        let mac = [(hi >> 8) as u8, hi as u8, lo[0], lo[1], lo[2], lo[3]];
        Self::up_at(e, port, mac, [10, 0, port as u8, 1])
    }

    fn up_at(e: &mut Emu, port: usize, mac: [u8; 6], ip: [u8; 4]) -> Self {
        // Context tables in HBM, one pair per port.
        let tables = DRAM_PHYS_BASE + 0x100_0000 * (port as u64 + 1);
        wr_pair(
            e,
            QPC0_REQ_BASE_ADDRESS_63_32,
            QPC0_REQ_BASE_ADDRESS_31_7,
            port,
            0,
            tables,
            7,
        );
        wr_pair(
            e,
            QPC0_RES_BASE_ADDRESS_63_32,
            QPC0_RES_BASE_ADDRESS_31_7,
            port,
            0,
            tables + 0x80_0000,
            7,
        );
        e.wr(at(QPC0_RETRY_COUNT_MAX, port, 0), 0x0303);
        // Event queue.
        let eq = e.ram.alloc(16 << EQ_LOG, 128);
        let eq_pi = e.ram.alloc(128, 128);
        wr_pair(
            e,
            QPC0_EVENT_QUE_PI_ADDR_63_32,
            QPC0_EVENT_QUE_PI_ADDR_31_7,
            port,
            0,
            eq_pi,
            7,
        );
        wr_pair(
            e,
            QPC0_EVENT_QUE_BASE_ADDR_63_32,
            QPC0_EVENT_QUE_BASE_ADDR_31_7,
            port,
            0,
            eq,
            7,
        );
        e.wr(at(QPC0_EVENT_QUE_LOG_SIZE, port, 0), EQ_LOG);
        e.wr(at(QPC0_EVENT_QUE_CFG, port, 0), 0x19);
        // CQ region (16 slots of 2^CQ_LOG entries) and user CQ 2.
        let cqs = e.ram.alloc(16 * (16 << CQ_LOG), 128);
        e.wr(at(RXE0_CQ_BASE_ADDR_63_32, port, 0), (cqs >> 32) as u32);
        e.wr(at(RXE0_CQ_BASE_ADDR_31_7, port, 0), cqs as u32);
        e.wr(at(RXE0_CQ_LOG_MAX_SIZE, port, 0), CQ_LOG);
        let cq_pi = e.ram.alloc(128, 128);
        e.wr(at(RXE0_CQ_LOG_SIZE_0, port, REQ_CQ.into()), CQ_LOG);
        e.wr(
            at(RXE0_CQ_PI_ADDR_HI_0, port, REQ_CQ.into()),
            (cq_pi >> 32) as u32,
        );
        e.wr(at(RXE0_CQ_PI_ADDR_LO_0, port, REQ_CQ.into()), cq_pi as u32);
        e.wr(at(RXE0_CQ_CFG_0, port, REQ_CQ.into()), 0x9);
        // Send WQ array 1: every QP's slot, physical.
        let sq_array = e.ram.alloc(64 * (128 << WQ_LOG_LINES), 4096);
        e.wr(
            at(TXE0_SQ_BASE_ADDRESS_63_32_0, port, 1),
            (sq_array >> 32) as u32,
        );
        e.wr(at(TXE0_SQ_BASE_ADDRESS_31_0_0, port, 1), sq_array as u32);
        e.wr(at(TXE0_LOG_MAX_WQ_SIZE_0, port, 1), WQ_LOG_LINES);
        e.wr(at(TXE0_WQE_USER_CFG, port, 0), 0x3);
        // User doorbell FIFO 0 (UMR block 0, doorbell 0) for ASID 1.
        let fifo_ci = e.ram.alloc(128, 128);
        wr_pair(
            e,
            QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32,
            QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7,
            port,
            0,
            fifo_ci,
            7,
        );
        e.wr(at(QPC0_DB_FIFO_USER_OVRD_0, port, 0), USER_ASID);
        // Addresses: the source MAC, encapsulation 0's source IPv4, the
        // RDMA MAC filter (index 0 even port, 2 odd).
        let hi = u32::from(mac[0]) << 8 | u32::from(mac[1]);
        let lo = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        e.wr(at(TXE0_PORT0_MAC_CFG_47_32, port, 0), hi);
        e.wr(at(TXE0_PORT0_MAC_CFG_31_0, port, 0), lo);
        e.wr(at(TXE0_SOURCE_IP_PORT0_0, port, 0), u32::from_be_bytes(ip));
        let fi = if port & 1 == 0 { 0 } else { 2 };
        e.wr(
            CFG_IN_BAR0 + macro_cfg(RXB_CORE_TS_RC_MAC_47_32_0, port) + 4 * fi,
            hi,
        );
        e.wr(
            CFG_IN_BAR0 + macro_cfg(RXB_CORE_TS_RC_MAC_31_0_0, port) + 4 * fi,
            lo,
        );
        Port {
            port,
            mac,
            ip,
            eq,
            eq_ci: 0,
            cqs,
            cq_ci: 0,
            sq_array,
            fifo_ci,
        }
    }

    /// The send WQ slot of QP `qpn`, entry `i`.
    fn wqe_at(&self, qpn: u32, i: u32) -> u64 {
        self.sq_array + (u64::from(qpn) << WQ_LOG_LINES) * 128 + u64::from(i) * 32
    }

    /// Write the requester context of `qpn` (RTS), sending to `to`'s QP `dqpn`.
    fn requester(&self, e: &mut Emu, qpn: u32, to: &Port, dqpn: u32, rkey: u32) {
        let mut c = [0u64; 16];
        rf("DST_QP").set(&mut c, dqpn.into());
        rf("RKEY").set(&mut c, rkey.into());
        rf("DST_IP").set(&mut c, u32::from_be_bytes(to.ip).into());
        rf("DST_MAC_LSB").set(
            &mut c,
            u32::from_be_bytes([to.mac[2], to.mac[3], to.mac[4], to.mac[5]]).into(),
        );
        rf("DST_MAC_MSB").set(&mut c, (u64::from(to.mac[0]) << 8) | u64::from(to.mac[1]));
        rf("TM_GRANULARITY").set(&mut c, 16); // 2^18 us
        rf("ENCAP_ENABLE").set(&mut c, 1);
        rf("CQ_NUM").set(&mut c, REQ_CQ.into());
        rf("ASID").set(&mut c, USER_ASID.into());
        rf("LAST_IDX").set(&mut c, u64::from(WQ_ENTRIES - 1));
        rf("ACKREQ_FREQ").set(&mut c, 8);
        rf("DATA_MMU_BYPASS").set(&mut c, 1);
        rf("WQ_TYPE").set(&mut c, 1);
        rf("MTU").set(&mut c, 0); // 1 KiB
        rf("WQ_BASE_ADDR").set(&mut c, 1);
        rf("VALID").set(&mut c, 1);
        let data: Vec<u32> = le_words(&bytes(&c));
        gateway(e, self.port, qpn, true, &[u32::MAX; 32], &data);
    }

    /// Write the responder context of `qpn` (RTR), acknowledging to
    /// `from`'s QP `dqpn`.
    fn responder(&self, e: &mut Emu, qpn: u32, from: &Port, dqpn: u32, lkey: u32) {
        let mut c = [0u64; 4];
        sf("DST_QP").set(&mut c, dqpn.into());
        sf("LKEY").set(&mut c, lkey.into());
        sf("DST_IP").set(&mut c, u32::from_be_bytes(from.ip).into());
        sf("DST_MAC_LSB").set(
            &mut c,
            u32::from_be_bytes([from.mac[2], from.mac[3], from.mac[4], from.mac[5]]).into(),
        );
        sf("DST_MAC_MSB").set(
            &mut c,
            (u64::from(from.mac[0]) << 8) | u64::from(from.mac[1]),
        );
        sf("ASID").set(&mut c, USER_ASID.into());
        sf("PEER_QP").set(&mut c, dqpn.into());
        sf("ENCAP_ENABLE").set(&mut c, 1);
        sf("DATA_MMU_BYPASS").set(&mut c, 1);
        sf("VALID").set(&mut c, 1);
        gateway(
            e,
            self.port,
            qpn,
            false,
            &[u32::MAX; 8],
            &le_words(&bytes(&c)),
        );
    }

    /// Put a LINEAR WQE at entry `i` of QP `qpn`'s slot, with `index_field`
    /// in its WQE_INDEX.
    fn put_wqe(&self, e: &Emu, qpn: u32, i: u32, index_field: u32, what: Linear) {
        let Linear(src, dst, len, tag) = what;
        let mut w = [0u64; 4];
        SqWqe::field("OPCODE").set(&mut w, WQE_OPCODE_LINEAR);
        SqWqe::field("WQE_INDEX").set(&mut w, u64::from(index_field & 0xff));
        SqWqe::field("SIZE").set(&mut w, len.into());
        SqWqe::field("LOCAL_ADDRESS").set(&mut w, src);
        SqWqe::field("REMOTE_ADDRESS").set(&mut w, dst);
        SqWqe::field("TAG").set(&mut w, tag.into());
        SqWqe::field("COMPLETION_TYPE").set(&mut w, COMPLETION_CQ);
        e.ram
            .slice(self.wqe_at(qpn, i), 32)
            .copy_from_slice(&bytes(&w));
    }

    /// Ring user FIFO 0 (UMR block 0, doorbell 0): producer index `pi` of `qpn`.
    fn ring(&self, e: &mut Emu, qpn: u32, pi: u32) {
        e.wr(
            at(UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32, self.port, 0),
            pi,
        );
        e.wr(
            at(UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_SECOND32, self.port, 0),
            qpn,
        );
    }

    /// New events (type, data1, data2), their VALID cleared as hbl_cn does.
    fn events(&mut self, e: &Emu) -> Vec<(u64, u32, u32)> {
        let mut out = Vec::new();
        loop {
            let entry = self.eq + u64::from(self.eq_ci % (1 << EQ_LOG)) * 16;
            let s = e.ram.slice(entry, 16);
            let mut w = words(s);
            if Eqe::field("VALID").get(&w) == 0 {
                return out;
            }
            out.push((
                Eqe::field("TYPE").get(&w),
                Eqe::field("DATA1").get(&w) as u32,
                Eqe::field("DATA2").get(&w) as u32,
            ));
            Eqe::field("VALID").set(&mut w, 0);
            s.copy_from_slice(&bytes(&w));
            self.eq_ci += 1;
        }
    }

    /// Wait for events until `pred` holds of all seen so far.
    fn wait_events(
        &mut self,
        e: &Emu,
        pred: impl Fn(&[(u64, u32, u32)]) -> bool,
    ) -> Vec<(u64, u32, u32)> {
        let t0 = Instant::now();
        let mut all = Vec::new();
        loop {
            all.extend(self.events(e));
            if pred(&all) {
                return all;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "events so far: {all:x?}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Wait for `n` CQEs of the requester CQ: (QPN, IS_REQ, index, tag).
    fn cqes(&mut self, e: &mut Emu, n: usize) -> Vec<(u32, u64, u32, u32)> {
        let t0 = Instant::now();
        let mut out = Vec::new();
        let slot = self.cqs + u64::from(REQ_CQ) * (16 << CQ_LOG);
        while out.len() < n {
            let entry = slot + u64::from(self.cq_ci % (1 << CQ_LOG)) * 16;
            let s = e.ram.slice(entry, 16);
            let mut w = words(s);
            if Cqe::field("VALID").get(&w) == 0 {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "CQEs so far: {out:x?}"
                );
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            out.push((
                Cqe::field("QPN").get(&w) as u32,
                Cqe::field("IS_REQ").get(&w),
                Cqe::field("WQE_INDEX").get(&w) as u32,
                Cqe::field("TAG").get(&w) as u32,
            ));
            Cqe::field("VALID").set(&mut w, 0);
            s.copy_from_slice(&bytes(&w));
            self.cq_ci += 1;
            // The consumer index through the CQ's UMR slot (CQ 2: block 0, CI_0).
            e.wr(
                at(UMR0_0_COMPLETION_QUEUE_CI_0_CQ_NUMBER, self.port, 0),
                REQ_CQ,
            );
            e.wr(
                at(UMR0_0_COMPLETION_QUEUE_CI_0_CQ_CONSUMER_INDEX, self.port, 0),
                self.cq_ci,
            );
        }
        out
    }
}

/// A LINEAR WQE's source, destination, size and tag.
#[derive(Clone, Copy)]
struct Linear(u64, u64, u32, u32);

/// One emulator, ports 0 and 1 linked to each other.
fn linked() -> Emu {
    let p = udp_ports(2);
    let args: Vec<String> = [
        "--strict".to_string(),
        "--ports".into(),
        "2".into(),
        "--link".into(),
        format!("0={}:{}", p, p + 1),
        "--link".into(),
        format!("1={}:{}", p + 1, p),
    ]
    .to_vec();
    Emu::start(Path::new(EMU), &args, 64)
}

fn fill(e: &Emu, at: u64, len: usize, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect();
    e.ram.slice(at, len).copy_from_slice(&data);
    data
}

/// A QP's send WQs are slots of its port's array at base + QPN x 2^L x 128
/// bytes: WQEs there are executed (multi-packet WRITEs land byte for byte,
/// their neighbours untouched, a CQE per WQE with its index and tag),
/// poison WQEs in the neighbouring QPs' slots are never read, a producer
/// index beyond LAST_IDX raises QP_ERR 0x43, and a WQE whose index is not
/// the execution index raises QP_ERR 0x91.
#[test]
fn wq_arrays() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let mut b = Port::up(&mut e, 1, 2);
    let (qa, qb) = (5u32, 9u32);
    a.requester(&mut e, qa, &b, qb, 0x5eed_0001);
    b.responder(&mut e, qb, &a, qa, 0x5eed_0001);
    // Poison in the slots of QPs 4 and 6: a WRITE of garbage to `dst`.
    let src = e.ram.alloc(3 * 4096, 4096);
    let dst = e.ram.alloc(4 * 4096, 4096);
    e.ram.slice(dst, 4 * 4096).fill(0xee);
    let want: Vec<Vec<u8>> = (0..3)
        .map(|i| fill(&e, src + i * 4096, 4096, i as u8))
        .collect();
    for q in [qa - 1, qa + 1] {
        for i in 0..4 {
            a.put_wqe(&e, q, i, i, Linear(src, dst + 4096, 4096, 0xbad));
        }
    }
    // WRITEs of 4 KiB (4 packets at MTU 1 KiB) to dst, of 4 KiB to
    // dst + 8 KiB and of 2 KiB over the second half of that: they land in
    // order of index.
    let targets = [dst, dst + 2 * 4096, dst + 3 * 4096 - 4096 / 2];
    let lens = [4096u32, 4096, 2048];
    for i in 0..3u32 {
        a.put_wqe(
            &e,
            qa,
            i,
            i,
            Linear(
                src + u64::from(i) * 4096,
                targets[i as usize],
                lens[i as usize],
                0x7a90 + i,
            ),
        );
    }
    a.ring(&mut e, qa, 3);
    let c = a.cqes(&mut e, 3);
    assert_eq!(
        c,
        [(qa, 1, 0, 0x7a90), (qa, 1, 1, 0x7a91), (qa, 1, 2, 0x7a92)]
    );
    let got = e.ram.slice(dst, 4 * 4096).to_vec();
    assert_eq!(&got[..4096], &want[0][..], "first WRITE");
    assert!(
        got[4096..2 * 4096].iter().all(|&x| x == 0xee),
        "the gap, where the poison WQEs would write"
    );
    assert_eq!(
        &got[2 * 4096..2 * 4096 + 2048],
        &want[1][..2048],
        "second WRITE, up to the third's start"
    );
    assert_eq!(
        &got[2 * 4096 + 2048..3 * 4096],
        &want[2][..2048],
        "third, over the second's end"
    );
    assert!(
        got[3 * 4096..].iter().all(|&x| x == 0xee),
        "after the last WRITE"
    );
    // The FIFO's consumer index was written back: one doorbell taken.
    assert_eq!(
        u32::from_le_bytes(e.ram.slice(a.fifo_ci, 4).try_into().unwrap()),
        1
    );
    assert!(a.events(&e).is_empty() && b.events(&e).is_empty());

    // A producer index beyond LAST_IDX.
    a.ring(&mut e, qa, WQ_ENTRIES);
    let ev = a.wait_events(&e, |v| !v.is_empty());
    assert_eq!(ev, [(EQE_QP_ERR, qa, 0x43)]);
    assert_eq!(
        rf("ERROR").get(&words(&bytes_of(&read_ctx(&mut e, 0, qa, true)))),
        1
    );

    // A WQE whose index field is not the execution index.
    let (qc, qd) = (7, 11);
    a.requester(&mut e, qc, &b, qd, 0x5eed_0002);
    b.responder(&mut e, qd, &a, qc, 0x5eed_0002);
    // The first WQE goes out; the second stops the QP before the first's
    // acknowledgement arrives, which a QP in error no longer takes (its
    // owner flushes what was outstanding): no CQE.
    let dst2 = e.ram.alloc(4096, 4096);
    e.ram.slice(dst2, 4096).fill(0xee);
    a.put_wqe(&e, qc, 0, 0, Linear(src, dst2, 64, 1));
    a.put_wqe(&e, qc, 1, 5, Linear(src, dst2 + 64, 64, 2));
    a.ring(&mut e, qc, 2);
    let ev = a.wait_events(&e, |v| !v.is_empty());
    assert_eq!(ev, [(EQE_QP_ERR, qc, 0x91)]);
    let t0 = Instant::now();
    while e.ram.slice(dst2, 64) != &want[0][..64] {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the first WQE's data never landed"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        e.ram.slice(dst2 + 64, 4096 - 64).iter().all(|&x| x == 0xee),
        "the bad WQE sent nothing"
    );
    let next = a.cqs + u64::from(REQ_CQ) * (16 << CQ_LOG) + u64::from(a.cq_ci % (1 << CQ_LOG)) * 16;
    assert_eq!(
        Cqe::field("VALID").get(&words(e.ram.slice(next, 16))),
        0,
        "a CQE after the error"
    );
    assert!(a.events(&e).is_empty());
    assert_eq!(nic_stat(&e, "unknown_register"), 0);
    assert_eq!(e.stat("dma_audit"), 0);
}

fn bytes_of(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Doorbell FIFOs: each doorbell the NIC takes is executed once, the
/// FIFO's consumer index is written back as it advances, and a FIFO of 64
/// full entries loses what comes next, each loss raising
/// DB_FIFO_OVERRUN with the FIFO's number.
/// A WRITE longer than the requester's window (256 packets): 1 MiB at
/// MTU 1 KiB is 1024 packets. The acknowledgements of its first packets move
/// the window on, so it completes once, byte for byte, well within the
/// retransmit timer's retries; a second such WRITE after it does too.
#[test]
fn write_longer_than_the_window() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let b = Port::up(&mut e, 1, 2);
    let (qa, qb) = (7u32, 8u32);
    a.requester(&mut e, qa, &b, qb, 0x1f00_0001);
    b.responder(&mut e, qb, &a, qa, 0x1f00_0001);
    let len = 1 << 20;
    let src = e.ram.alloc(len, 4096);
    let dst = e.ram.alloc(len + 8192, 4096);
    e.ram.slice(dst, len + 8192).fill(0xee);
    let want = fill(&e, src, len, 3);
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst + 4096, len as u32, 0x10));
    a.put_wqe(&e, qa, 1, 1, Linear(src, dst + 4096, len as u32, 0x11));
    a.ring(&mut e, qa, 2);
    assert_eq!(a.cqes(&mut e, 2), [(qa, 1, 0, 0x10), (qa, 1, 1, 0x11)]);
    let got = e.ram.slice(dst, len + 8192).to_vec();
    assert!(got[..4096].iter().all(|&x| x == 0xee), "before the target");
    assert_eq!(&got[4096..4096 + len], &want[..], "the WRITE");
    assert!(
        got[4096 + len..].iter().all(|&x| x == 0xee),
        "after the target"
    );
    assert_eq!(a.events(&e), [], "no QP error");
}

/// A responder whose LKEY is 0 takes no WRITE, not even one carrying key
/// 0 (software never issues 0; a context left at 0 is closed): the WRITE is
/// refused (QP_ERR 0x10 at the responder, a NAK at the requester) and
/// nothing is written.
#[test]
fn lkey_zero_matches_nothing() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let mut b = Port::up(&mut e, 1, 2);
    let (qa, qb) = (3u32, 4u32);
    a.requester(&mut e, qa, &b, qb, 0);
    b.responder(&mut e, qb, &a, qa, 0);
    let src = e.ram.alloc(4096, 4096);
    let dst = e.ram.alloc(4096, 4096);
    e.ram.slice(dst, 4096).fill(0xee);
    fill(&e, src, 4096, 9);
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 4096, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(
        b.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qb, 0x10)]
    );
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qa, 0x7f)]
    );
    assert!(
        e.ram.slice(dst, 4096).iter().all(|&x| x == 0xee),
        "nothing written"
    );
}

#[test]
fn db_fifo() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let b = Port::up(&mut e, 1, 2);
    let (qa, qb) = (3u32, 4u32);
    a.requester(&mut e, qa, &b, qb, 7);
    b.responder(&mut e, qb, &a, qa, 7);
    let src = e.ram.alloc(4096, 4096);
    let dst = e.ram.alloc(8192, 4096);
    let data = fill(&e, src, 4096, 9);
    e.ram.slice(dst, 8192).fill(0xee);
    // WQE i writes 8 bytes of src at dst + 8 i.
    for i in 0..WQ_ENTRIES {
        a.put_wqe(
            &e,
            qa,
            i,
            i,
            Linear(
                src + u64::from(i) * 8,
                dst + u64::from(i) * 8,
                8,
                0x1000 + i,
            ),
        );
    }
    e.ram
        .slice(a.fifo_ci, 4)
        .copy_from_slice(&0xdead_beefu32.to_le_bytes());
    // Held: 70 doorbells, one WQE each; 64 fit, 6 are lost.
    e.ctl("nic-hold 0 on");
    for pi in 1..=70 {
        a.ring(&mut e, qa, pi);
    }
    let ev = a.wait_events(&e, |v| v.len() >= 6);
    assert_eq!(ev, vec![(EQE_DB_FIFO_OVERRUN, 0, 0); 6]);
    assert_eq!(nic_stat(&e, "db_overruns"), 6);
    assert_eq!(
        e.ram.slice(a.fifo_ci, 4),
        0xdead_beefu32.to_le_bytes(),
        "CI written while held"
    );
    e.ctl("nic-hold 0 off");
    // The 64 taken: producer index 64, WQEs 0 to 63, each once.
    let c = a.cqes(&mut e, 64);
    let want: Vec<_> = (0..64).map(|i| (qa, 1, i, 0x1000 + i)).collect();
    assert_eq!(c, want);
    assert_eq!(
        u32::from_le_bytes(e.ram.slice(a.fifo_ci, 4).try_into().unwrap()),
        0,
        "64 taken: CI 0 mod 64"
    );
    assert_eq!(&e.ram.slice(dst, 64 * 8)[..], &data[..64 * 8]);
    assert!(
        e.ram
            .slice(dst + 64 * 8, 8192 - 64 * 8)
            .iter()
            .all(|&x| x == 0xee),
        "nothing beyond WQE 63"
    );
    // The next doorbell continues where the last taken one left off.
    a.ring(&mut e, qa, 65);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 64, 0x1040)]);
    assert_eq!(
        u32::from_le_bytes(e.ram.slice(a.fifo_ci, 4).try_into().unwrap()),
        1
    );
    assert_eq!(&e.ram.slice(dst + 64 * 8, 8)[..], &data[64 * 8..65 * 8]);
    std::thread::sleep(Duration::from_millis(50));
    assert!(a.events(&e).is_empty(), "no event besides the overruns");
    assert_eq!(nic_stat(&e, "cqe_dropped"), 0);
}

/// What a wrong key and a foreign doorbell do: a WRITE whose key is not the
/// responder context's LKEY is refused (QP_ERR 0x10 at the responder, a
/// NAK that puts the requester in error with the model's syndrome 0x7f)
/// and writes nothing; a doorbell of a FIFO of another ASID is ignored;
/// a doorbell for a QP without a valid context raises QP_ERR 0x41.
#[test]
fn syndromes_raised() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let mut b = Port::up(&mut e, 1, 2);
    let (qa, qb) = (3u32, 4u32);
    a.requester(&mut e, qa, &b, qb, 0x1111);
    b.responder(&mut e, qb, &a, qa, 0x2222);
    let src = e.ram.alloc(4096, 4096);
    let dst = e.ram.alloc(4096, 4096);
    fill(&e, src, 4096, 1);
    e.ram.slice(dst, 4096).fill(0xee);
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 3000, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(
        b.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qb, 0x10)]
    );
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qa, 0x7f)]
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        e.ram.slice(dst, 4096).iter().all(|&x| x == 0xee),
        "a refused WRITE wrote"
    );
    assert!(a.events(&e).is_empty() && b.events(&e).is_empty());

    // FIFO 0 belongs to ASID 1; a QP of ASID 2 rung through it: ignored.
    let (qc, qd) = (5u32, 6u32);
    a.requester(&mut e, qc, &b, qd, 9);
    b.responder(&mut e, qd, &a, qc, 9);
    let mut m = [0u32; 32];
    m[17] = u32::MAX; // bits 575:544: BURST_SIZE and ASID
    let mut d = [0u32; 32];
    let mut w = [0u64; 16];
    rf("ASID").set(&mut w, 2);
    d[17] = le_words(&bytes(&w))[17];
    gateway(&mut e, 0, qc, true, &m, &d);
    a.put_wqe(&e, qc, 0, 0, Linear(src, dst, 64, 1));
    a.ring(&mut e, qc, 1);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        e.ram.slice(dst, 4096).iter().all(|&x| x == 0xee),
        "a foreign doorbell was executed"
    );
    let ctx = words(&bytes_of(&read_ctx(&mut e, 0, qc, true)));
    assert_eq!(rf("LOCAL_PRODUCER_IDX").get(&ctx), 0);
    assert_eq!(rf("NTS_PSN").get(&ctx), 0);

    // No valid context.
    a.ring(&mut e, 100, 1);
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, 100, 0x41)]
    );
    assert_eq!(e.stat("dma_audit"), 0);
}

// ---- Translation in an ASID (the emulated function's device MMU) ------

use gaudi_emu::chip::{
    SVC_MMU_FAULTS, SVC_MMU_FAULT_ASID, SVC_MMU_FAULT_VA_HI, SVC_MMU_FAULT_VA_LO, SVC_MMU_ROOT_LO,
};

/// A page table of the emulated function's device MMU for one ASID, in
/// the test's RAM: four levels of 512 entries, 4 KiB pages.
struct PageTable {
    root: u64,
}

impl PageTable {
    fn new(e: &mut Emu, asid: u32) -> Self {
        let root = e.ram.alloc(4096, 4096);
        e.ram.slice(root, 4096).fill(0);
        e.wr(SVC_MMU_ROOT_LO + 8 * u64::from(asid), root as u32);
        e.wr(
            SVC_MMU_ROOT_LO + 8 * u64::from(asid) + 4,
            (root >> 32) as u32,
        );
        PageTable { root }
    }

    /// Map the 4 KiB page at `bus` at device VA `va`, writable.
    fn map(&self, e: &mut Emu, va: u64, bus: u64) {
        let mut table = self.root;
        for level in 0..4 {
            let idx = (va >> (39 - 9 * level)) & 0x1ff;
            let slot = table + idx * 8;
            let pte = u64::from_le_bytes(e.ram.slice(slot, 8).try_into().unwrap());
            if level == 3 {
                e.ram.put_u64(slot, bus | 0x3);
            } else if pte & 1 == 0 {
                let next = e.ram.alloc(4096, 4096);
                e.ram.slice(next, 4096).fill(0);
                e.ram.put_u64(slot, next | 0x1);
                table = next;
            } else {
                table = pte & 0x000f_ffff_ffff_f000;
            }
        }
    }
}

/// Data accesses of a QP that does not bypass the MMU are translated in
/// its context's ASID: the same device VA reaches different pages in two
/// ASIDs, a WRITE lands only in the page its ASID maps, and an address
/// mapped only in another ASID is a fault: the requester's QP errs (model
/// syndrome 0x7e) sending nothing, the responder's refuses the WRITE (a
/// NAK, QP_ERR 0x7b) and writes nothing.
#[test]
fn asid_translation() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let mut b = Port::up(&mut e, 1, 2);
    let t1 = PageTable::new(&mut e, USER_ASID);
    let t2 = PageTable::new(&mut e, 2);
    let page = |e: &mut Emu, fill: u8| {
        let p = e.ram.alloc(4096, 4096);
        e.ram.slice(p, 4096).fill(fill);
        p
    };
    let (src1, src2, dst1, dst2, only2) = (
        page(&mut e, 0x11),
        page(&mut e, 0x22),
        page(&mut e, 0xd1),
        page(&mut e, 0xd2),
        page(&mut e, 0x99),
    );
    let want = fill(&e, src1, 4096, 3);
    // User-space-like VAs, two in the same 512 GiB of the top level.
    let (x, y, z) = (0x7f12_3450_0000, 0x7f12_3460_0000, 0x1_0000_3000);
    t1.map(&mut e, x, src1);
    t2.map(&mut e, x, src2);
    t1.map(&mut e, y, dst1);
    t2.map(&mut e, y, dst2);
    t2.map(&mut e, z, only2);
    // Contexts of ASID 1 that go through the MMU.
    let translated = |e: &mut Emu, port: usize, qpn: u32, req: bool| {
        let bits = if req {
            rf("DATA_MMU_BYPASS")
        } else {
            sf("DATA_MMU_BYPASS")
        };
        let mut m = [0u64; 16];
        bits.set(&mut m, 1);
        let mask = le_words(&bytes(&m));
        gateway(e, port, qpn, req, &mask, &[0; 32]);
    };
    let (qa, qb) = (3u32, 4u32);
    a.requester(&mut e, qa, &b, qb, 21);
    b.responder(&mut e, qb, &a, qa, 21);
    translated(&mut e, 0, qa, true);
    translated(&mut e, 1, qb, false);
    a.put_wqe(&e, qa, 0, 0, Linear(x, y, 4096, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 0, 1)]);
    assert_eq!(e.ram.slice(dst1, 4096), &want[..], "ASID 1's page behind y");
    assert!(
        e.ram.slice(dst2, 4096).iter().all(|&v| v == 0xd2),
        "ASID 2's page behind y"
    );
    assert!(e.ram.slice(src2, 4096).iter().all(|&v| v == 0x22));
    assert_eq!(e.rd(SVC_MMU_FAULTS), 0);

    // The requester's source mapped only in ASID 2.
    a.put_wqe(&e, qa, 1, 1, Linear(z, y, 64, 2));
    a.ring(&mut e, qa, 2);
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qa, 0x7e)]
    );
    assert_eq!(e.rd(SVC_MMU_FAULTS), 1);
    assert_eq!(
        (
            e.rd(SVC_MMU_FAULT_ASID),
            e.rd(SVC_MMU_FAULT_VA_HI),
            e.rd(SVC_MMU_FAULT_VA_LO)
        ),
        (USER_ASID, (z >> 32) as u32, z as u32)
    );
    assert_eq!(e.ram.slice(dst1, 4096), &want[..], "nothing sent");

    // The responder's target mapped only in ASID 2.
    let (qc, qd) = (5u32, 6u32);
    a.requester(&mut e, qc, &b, qd, 22);
    b.responder(&mut e, qd, &a, qc, 22);
    translated(&mut e, 1, qd, false);
    a.put_wqe(&e, qc, 0, 0, Linear(src1, z, 4096, 3));
    a.ring(&mut e, qc, 1);
    assert_eq!(
        b.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qd, 0x7b)]
    );
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_QP_ERR, qc, 0x7f)]
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        e.ram.slice(only2, 4096).iter().all(|&v| v == 0x99),
        "ASID 2's page written by ASID 1's QP"
    );
    assert_eq!(e.stat("dma_audit"), 0);
}

// ---- Ethernet: the raw path of QP 0 -----------------------------------

use gaudi_emu::nic::formats::EQE_RAW_TX_COMP;

const RAW_ELEM_LOG: u32 = 11;
const RAW_COUNT_LOG: u32 = 4;

/// The raw path of `p` as hbl_en sets it up: QP 0's requester context
/// (raw, secured, send array 0, 128 entries), send array 0, the receive
/// ring of 16 elements of 2 KiB, CQ 0 and the raw MAC filter. Returns the
/// send array's and the ring's addresses.
fn raw_up(e: &mut Emu, p: &Port) -> (u64, u64) {
    let port = p.port;
    let sq = e.ram.alloc(128 * 32, 4096);
    e.wr(at(TXE0_SQ_BASE_ADDRESS_63_32_0, port, 0), (sq >> 32) as u32);
    e.wr(at(TXE0_SQ_BASE_ADDRESS_31_0_0, port, 0), sq as u32);
    e.wr(at(TXE0_LOG_MAX_WQ_SIZE_0, port, 0), 5);
    let mut c = [0u64; 16];
    rf("TRANSPORT_SERVICE").set(&mut c, 1);
    rf("LAST_IDX").set(&mut c, 127);
    rf("WQ_TYPE").set(&mut c, 1);
    rf("TRUST_LEVEL").set(&mut c, 1);
    rf("DATA_MMU_BYPASS").set(&mut c, 1);
    rf("WQ_BACK_PRESSURE").set(&mut c, 1);
    rf("VALID").set(&mut c, 1);
    gateway(e, port, 0, true, &[u32::MAX; 32], &le_words(&bytes(&c)));
    let ring = e.ram.alloc(1 << (RAW_ELEM_LOG + RAW_COUNT_LOG), 4096);
    e.ram
        .slice(ring, 1 << (RAW_ELEM_LOG + RAW_COUNT_LOG))
        .fill(0);
    e.wr(at(RXE0_RAW_QPN_P0_0, port, 0), 0);
    e.wr(at(RXE0_RAW_BASE_LO_P0_0, port, 0), ring as u32);
    e.wr(at(RXE0_RAW_BASE_HI_P0_0, port, 0), (ring >> 32) as u32);
    e.wr(
        at(RXE0_RAW_MISC_P0_0, port, 0),
        RAW_ELEM_LOG | RAW_COUNT_LOG << 15,
    );
    let pi = e.ram.alloc(128, 128);
    e.wr(at(RXE0_CQ_LOG_SIZE_0, port, 0), CQ_LOG);
    e.wr(at(RXE0_CQ_PI_ADDR_HI_0, port, 0), (pi >> 32) as u32);
    e.wr(at(RXE0_CQ_PI_ADDR_LO_0, port, 0), pi as u32);
    e.wr(at(RXE0_CQ_CFG_0, port, 0), 0x9);
    let fi = if port & 1 == 0 { 0 } else { 2 };
    let hi = u32::from(p.mac[0]) << 8 | u32::from(p.mac[1]);
    let lo = u32::from_be_bytes([p.mac[2], p.mac[3], p.mac[4], p.mac[5]]);
    e.wr(
        CFG_IN_BAR0 + macro_cfg(RXB_CORE_TS_RAW0_MAC_47_32_0, port) + 4 * fi,
        hi,
    );
    e.wr(
        CFG_IN_BAR0 + macro_cfg(RXB_CORE_TS_RAW0_MAC_31_0_0, port) + 4 * fi,
        lo,
    );
    (sq, ring)
}

/// Ethernet over the raw path: frames posted as LINEAR WQEs on QP 0 and
/// rung on the secured FIFO go out as they are, a WQE with SE reports its
/// index in RAW_TX_COMP; the receiver writes the frames its raw filter
/// takes (its MAC, broadcast) into consecutive ring elements with a CQE on
/// CQ 0 carrying the element and the length, and leaves the others.
#[test]
fn ethernet_raw() {
    let mut e = linked();
    let mut a = Port::up(&mut e, 0, 1);
    let mut b = Port::up(&mut e, 1, 2);
    let (sq, _) = raw_up(&mut e, &a);
    let (_, ring) = raw_up(&mut e, &b);
    let frame = |e: &mut Emu, dst: [u8; 6], len: usize, seed: u8| {
        let at = e.ram.alloc(len, 64);
        let mut f: Vec<u8> = dst.iter().chain(&a.mac).copied().collect();
        f.extend([0x88, 0xb5]);
        f.extend((0..len - 14).map(|i| (i as u8).wrapping_mul(7) ^ seed));
        e.ram.slice(at, len).copy_from_slice(&f);
        (at, f)
    };
    let frames = [
        frame(&mut e, b.mac, 100, 1),
        frame(&mut e, [0xff; 6], 60, 2),
        frame(&mut e, [0x02, 0, 0, 0, 0, 0x99], 80, 3),
        frame(&mut e, b.mac, 1500, 4),
    ];
    for (i, (at, f)) in frames.iter().enumerate() {
        let mut w = [0u64; 4];
        SqWqe::field("OPCODE").set(&mut w, WQE_OPCODE_LINEAR);
        SqWqe::field("WQE_INDEX").set(&mut w, i as u64);
        SqWqe::field("SIZE").set(&mut w, f.len() as u64);
        SqWqe::field("LOCAL_ADDRESS").set(&mut w, *at);
        SqWqe::field("SE").set(&mut w, u64::from(i == 3));
        e.ram
            .slice(sq + 32 * i as u64, 32)
            .copy_from_slice(&bytes(&w));
    }
    e.wr(at(QPC0_SECURED_DB_FIRST32, 0, 0), 4);
    e.wr(at(QPC0_SECURED_DB_SECOND32, 0, 0), 0);
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_RAW_TX_COMP, 0, 3)]
    );
    // CQ 0 of the receiver.
    let cq0 = b.cqs;
    let t0 = Instant::now();
    let mut got = Vec::new();
    while got.len() < 3 {
        let s = e.ram.slice(cq0 + 16 * got.len() as u64, 16);
        let w = words(s);
        if Cqe::field("VALID").get(&w) == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "CQEs so far: {got:?}"
            );
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        got.push((
            Cqe::field("WQE_INDEX").get(&w),
            Cqe::field("RAW_PKT_SIZE").get(&w),
            Cqe::field("IS_REQ").get(&w),
        ));
    }
    assert_eq!(got, [(0, 100, 0), (1, 60, 0), (2, 1500, 0)]);
    for (elem, k) in [(0u64, 0usize), (1, 1), (2, 3)] {
        let f = &frames[k].1;
        assert_eq!(
            e.ram.slice(ring + (elem << RAW_ELEM_LOG), f.len()),
            &f[..],
            "element {elem}"
        );
    }
    assert!(
        e.ram
            .slice(ring + (3 << RAW_ELEM_LOG), 1 << RAW_ELEM_LOG)
            .iter()
            .all(|&x| x == 0),
        "a fourth frame"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        Cqe::field("VALID").get(&words(e.ram.slice(cq0 + 48, 16))),
        0,
        "a fourth CQE"
    );
    // The consumer index through the secured slot.
    e.wr(at(QPC0_SECURED_CQ_NUMBER, 1, 0), 0);
    e.wr(at(QPC0_SECURED_CQ_CONSUMER_INDEX, 1, 0), 3);
    assert_eq!(e.rd(at(RXE0_CQ_CONSUMER_INDEX_0, 1, 0)), 3);
    assert!(b.events(&e).is_empty() && a.events(&e).is_empty());
    assert_eq!(nic_stat(&e, "raw_rx_dropped"), 0);
}

// ---- The emulated function's chip services ----------------------------

use gaudi_emu::chip::{SVC_ID, SVC_LINK, SVC_PORT_MASK, SVC_RESET, SVC_VERSION};
use gaudi_emu::nic::formats::EQE_LINK_STATUS;

/// What the firmware and habanalabs tell a NIC driver, as the emulated
/// function says it: identity and model version, the enabled ports, each
/// port's MAC and link state (a change also a LINK_STATUS event on the
/// port's EQ), and the chip reset, after which the NIC's registers and the
/// MMU's roots are back at 0.
#[test]
fn chip_services() {
    let mut e = linked();
    assert_eq!(e.rd(SVC_ID).to_be_bytes(), *b"G2EF");
    assert_eq!(e.rd(SVC_VERSION), 0x0002_0000);
    assert_eq!(e.rd(SVC_PORT_MASK), 0x3);
    for p in 0..2u64 {
        assert_eq!(e.rd(SVC_MAC_HI + 8 * p), 0x021d);
        assert_eq!(e.rd(SVC_MAC_LO + 8 * p), 0xa300_0000 | p as u32);
    }
    assert_eq!(e.rd(SVC_LINK), 0x3);
    let mut b = Port::up(&mut e, 1, 2);
    e.ctl("link 1 down");
    assert_eq!(e.rd(SVC_LINK), 0x1);
    assert_eq!(
        b.wait_events(&e, |v| !v.is_empty()),
        [(EQE_LINK_STATUS, 0, 0)]
    );
    e.ctl("link 1 up");
    assert_eq!(
        b.wait_events(&e, |v| !v.is_empty()),
        [(EQE_LINK_STATUS, 0, 1)]
    );
    assert_eq!(e.rd(SVC_LINK), 0x3);
    // A reset needs its magic.
    let _ = PageTable::new(&mut e, 7);
    e.wr(SVC_RESET, 1);
    assert_ne!(e.rd(at(QPC0_EVENT_QUE_CFG, 1, 0)), 0);
    e.wr(SVC_RESET, u32::from_be_bytes(*b"RSET"));
    let t0 = Instant::now();
    while e.rd(SVC_ID) != u32::from_be_bytes(*b"G2EF") {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the chip did not come back"
        );
    }
    assert_eq!(e.rd(at(QPC0_EVENT_QUE_CFG, 1, 0)), 0);
    assert_eq!(e.rd(at(TXE0_SQ_BASE_ADDRESS_31_0_0, 1, 1)), 0);
    assert_eq!(e.rd(SVC_MMU_ROOT_LO + 8 * 7), 0);
}

// ---- The wire: fault injection, captures, the ICRC --------------------

use gaudi_emu::chip::{
    SVC_CAUSE_FATAL, SVC_CAUSE_TEST, SVC_HBM_SIZE_HI, SVC_HBM_SIZE_LO, SVC_IRQ_CAUSE, SVC_IRQ_TEST,
    SVC_RESET_MAGIC, SVC_STATUS, SVC_STATUS_FATAL, SVC_STATUS_READY,
};
use gaudi_emu::nic::formats::EQE_QP_ERR as QP_ERR;
use gaudi_emu::roce::{aeth, op, Endpoint, Gid, Packet, Reth};
use std::process::Command;

/// Ports 0 and 1 of a linked emulator at their factory addresses, with
/// requester `qa` on port 0 writing to responder `qb` on port 1.
fn factory_pair(e: &mut Emu, qa: u32, qb: u32, key: u32) -> (Port, Port) {
    let a = Port::up_factory(e, 0);
    let b = Port::up_factory(e, 1);
    a.requester(e, qa, &b, qb, key);
    b.responder(e, qb, &a, qa, key);
    (a, b)
}

/// Frames dropped on the link are resent (the responder's sequence NAKs,
/// the timer for the last), and the data lands; frames corrupted on the
/// link fail the receiver's ICRC check, are counted there and resent.
#[test]
fn retransmission_after_injected_drop() {
    let mut e = linked();
    let (qa, qb) = (3u32, 4u32);
    let (mut a, _b) = factory_pair(&mut e, qa, qb, 0x1234);
    let len = 16 * 1024;
    let src = e.ram.alloc(len, 4096);
    let dst = e.ram.alloc(len, 4096);
    let data = fill(&e, src, len, 3);
    e.ctl("drop 0 3");
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, len as u32, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 0, 1)]);
    assert_eq!(e.ram.slice(dst, len), &data[..], "landed after resending");
    assert_eq!(e.stat("port 0 injected"), 3);
    assert!(e.stat("port 0 retransmits") >= 3);
    // Corruption: the receiver drops frames with a bad ICRC.
    let data = fill(&e, src, len, 4);
    e.ctl("corrupt 0 2");
    a.put_wqe(&e, qa, 1, 1, Linear(src, dst, len as u32, 2));
    a.ring(&mut e, qa, 2);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 1, 2)]);
    assert_eq!(e.ram.slice(dst, len), &data[..]);
    assert_eq!(e.stat("port 1 icrc_errors"), 2);
    assert_eq!(e.stat("port 0 injected"), 5);
    assert!(a.events(&e).is_empty());
    assert_eq!(e.stat("dma_audit"), 0);
}

/// With the link down the requester's timer runs out: after its retries
/// the QP errs (QP_ERR, syndrome 0x40), and the port reported the link.
#[test]
fn retry_exhaustion_after_link_down() {
    let mut e = linked();
    let (qa, qb) = (3u32, 4u32);
    let (mut a, _b) = factory_pair(&mut e, qa, qb, 0x1234);
    let src = e.ram.alloc(4096, 4096);
    let dst = e.ram.alloc(4096, 4096);
    e.ctl("link 0 down");
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_LINK_STATUS, 0, 0)]
    );
    let tx = e.stat("port 0 tx");
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 4096, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.wait_events(&e, |v| !v.is_empty()), [(QP_ERR, qa, 0x40)]);
    assert_eq!(e.stat("port 0 tx"), tx, "nothing sent on a link down");
    e.ctl("link 0 up");
    assert_eq!(
        a.wait_events(&e, |v| !v.is_empty()),
        [(EQE_LINK_STATUS, 0, 1)]
    );
}

/// The frames of a WRITE and its acknowledgement, captured on the
/// requester's port, are what Wireshark dissects as RoCE v2, and their
/// ICRC is the one computed bit by bit.
#[test]
fn capture_decodes_as_roce_with_valid_icrc() {
    let mut e = linked();
    let (qa, qb) = (3u32, 4u32);
    let (mut a, _b) = factory_pair(&mut e, qa, qb, 0x1234);
    let pcap = e.dir.join("port0.pcap");
    e.ctl(&format!("capture 0 {}", pcap.display()));
    // Three packets at MTU 1 KiB.
    let src = e.ram.alloc(3000, 4096);
    let dst = e.ram.alloc(3000, 4096);
    fill(&e, src, 3000, 9);
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 3000, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 0, 1)]);
    e.ctl("capture 0 off");
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
    let data = "eth:ethertype:ip:udp:infiniband:data";
    let ack = "eth:ethertype:ip:udp:infiniband";
    let psn = |r: &Vec<&str>| r[2].parse::<u32>().unwrap();
    // FIRST, MIDDLE, LAST out, PSNs in a row; the ACK of the last back.
    assert_eq!(rows.len(), 4, "{text}");
    let p0 = psn(&rows[0]);
    let fields: Vec<(&str, &str, u32)> = rows.iter().map(|r| (r[0], r[1], psn(r))).collect();
    assert_eq!(
        fields,
        [
            (data, "6", p0),
            (data, "7", p0 + 1),
            (data, "8", p0 + 2),
            (ack, "17", p0 + 2)
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

// ---- The chip services: identity, interrupts, reset, fatal ------------

/// Send `cmd` to the control socket and return its first reply line.
fn ctl_reply(e: &Emu, cmd: &str) -> String {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(e.dir.join("ctl.sock")).unwrap();
    writeln!(s, "{cmd}").unwrap();
    let mut l = String::new();
    std::io::BufReader::new(s).read_line(&mut l).unwrap();
    l
}

/// What the services say of the device's size (ports, HBM), the test
/// interrupt, and the function's bus mastering: without it the device
/// reaches no host memory and raises no interrupt, counted apart from the
/// DMA audit. HBM is reachable through BAR4.
#[test]
fn registers_and_capabilities() {
    let args: Vec<String> = ["--ports", "5", "--devmem", "8"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut e = Emu::start(Path::new(EMU), &args, 64);
    assert_eq!(e.rd(SVC_PORT_MASK), 0x1f);
    assert_eq!((e.rd(SVC_HBM_SIZE_LO), e.rd(SVC_HBM_SIZE_HI)), (8 << 20, 0));
    assert_eq!(e.rd(SVC_MAC_LO + 8 * 4), 0xa300_0004);
    assert_eq!(e.rd(SVC_MAC_LO + 8 * 5), 0, "no port 5");
    assert_eq!(e.rd(SVC_STATUS), SVC_STATUS_READY);
    // Outside the services and the NIC, BAR0 reads as 0 and ignores writes.
    e.wr(0x100, 0x1234_5678);
    assert_eq!(e.rd(0x100), 0);
    // The test interrupt.
    e.irqs();
    e.wr(SVC_IRQ_TEST, 0);
    assert_eq!(e.irqs(), 1);
    assert_eq!(e.rd(SVC_IRQ_CAUSE), SVC_CAUSE_TEST);
    e.wr(SVC_IRQ_CAUSE, SVC_CAUSE_TEST);
    assert_eq!(e.rd(SVC_IRQ_CAUSE), 0);
    // Bus mastering off: an event the NIC would write is not written, and
    // no interrupt is raised.
    let mut p = Port::up(&mut e, 0, 1);
    e.config_write16(4, 0x0002);
    assert!(ctl_reply(&e, "nic-event 0 2 5 0").starts_with("err "));
    assert!(e.stat("dma_no_master") >= 1);
    e.wr(SVC_IRQ_TEST, 0);
    assert_eq!(e.irqs(), 0, "no interrupt");
    assert_eq!(e.stat("irq_no_master"), 1);
    e.config_write16(4, 0x0006);
    assert!(p.events(&e).is_empty(), "the event was lost, not queued");
    e.ctl("nic-event 0 2 5 0");
    assert_eq!(p.events(&e), [(QP_ERR, 5, 0)]);
    e.wr(SVC_IRQ_TEST, 0);
    assert!(e.irqs() >= 1);
    assert_eq!(e.stat("irq_no_master"), 1);
    assert_eq!(e.stat("dma_audit"), 0);
    // Device memory is reachable through BAR4.
    let mut b = [0u8; 4];
    e.region_read(4, 0, &mut b);
    assert_eq!(b, [0; 4]);
}

/// Faults of the control interface: delayed frames arrive later; a fatal
/// error is reported (SVC_STATUS.FATAL, the fatal cause on vector 0) until
/// a reset; malformed commands are refused, not obeyed.
#[test]
fn control_interface_faults() {
    let mut e = linked();
    let (qa, qb) = (3u32, 4u32);
    let (mut a, _b) = factory_pair(&mut e, qa, qb, 0x1234);
    // Delay: frames still arrive, later.
    e.ctl("delay 0 30");
    let src = e.ram.alloc(4096, 4096);
    let dst = e.ram.alloc(4096, 4096);
    let data = fill(&e, src, 4096, 11);
    let t0 = Instant::now();
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 4096, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 0, 1)]);
    assert!(t0.elapsed() >= Duration::from_millis(30));
    assert_eq!(e.ram.slice(dst, 4096), &data[..]);
    e.ctl("delay 0 0");
    // Device fatal: reported once, cleared by a reset.
    e.irqs();
    e.ctl("fatal");
    e.ctl("fatal");
    assert_eq!(e.irqs(), 1);
    assert_eq!(e.rd(SVC_STATUS), SVC_STATUS_READY | SVC_STATUS_FATAL);
    assert_eq!(e.rd(SVC_IRQ_CAUSE), SVC_CAUSE_FATAL);
    e.wr(SVC_RESET, SVC_RESET_MAGIC);
    wait_ready(&mut e);
    assert_eq!(
        (e.rd(SVC_STATUS), e.rd(SVC_IRQ_CAUSE)),
        (SVC_STATUS_READY, 0)
    );
    // Refused.
    let err = |c: &str| ctl_reply(&e, c);
    assert!(err("link 99 down").starts_with("err no port 99"));
    assert!(err("bogus").starts_with("err unknown command"));
    assert!(err("peek 0x1000 4").starts_with("err asid=N required"));
    assert!(err("poke 0x1000 00").starts_with("err asid=N required"));
    assert!(err("fuzz-nic 0 70000 1").contains("at most 65536"));
    assert!(err("peek asid=1 0x1000 4").starts_with("err fault"));
}

/// Wait for SVC_STATUS.READY, at most 5 s.
fn wait_ready(e: &mut Emu) {
    let t0 = Instant::now();
    while e.rd(SVC_STATUS) & SVC_STATUS_READY == 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "not ready");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// After a reset SVC_STATUS.READY reads 0 for the reset delay; meanwhile
/// the test interrupt is ignored.
#[test]
fn ready_stays_0_during_the_reset_delay() {
    let args: Vec<String> = ["--ports", "1", "--reset-delay-ms", "400"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut e = Emu::start(Path::new(EMU), &args, 64);
    assert_eq!(
        e.rd(SVC_STATUS),
        SVC_STATUS_READY,
        "power-on is not a reset"
    );
    e.irqs();
    let t0 = Instant::now();
    e.wr(SVC_RESET, SVC_RESET_MAGIC);
    assert_eq!(e.rd(SVC_STATUS) & SVC_STATUS_READY, 0);
    e.wr(SVC_IRQ_TEST, 0);
    assert_eq!(e.irqs(), 0);
    wait_ready(&mut e);
    assert!(t0.elapsed() >= Duration::from_millis(400));
    e.wr(SVC_IRQ_TEST, 0);
    assert_eq!(e.irqs(), 1);
}

/// Under --strict a reset takes 50 ms without --reset-delay-ms (the
/// gateway's delay: `qpc_gateway`); --cmd-delay-us is for strict mode
/// only.
#[test]
fn strict_mode_commands_and_resets_take_their_time() {
    let args: Vec<String> = ["--ports", "1", "--strict"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut e = Emu::start(Path::new(EMU), &args, 64);
    let t0 = Instant::now();
    e.wr(SVC_RESET, SVC_RESET_MAGIC);
    assert_eq!(e.rd(SVC_STATUS) & SVC_STATUS_READY, 0);
    wait_ready(&mut e);
    assert!(t0.elapsed() >= Duration::from_millis(50));
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

/// A device at rest costs no CPU: with 24 ports, links and a WRITE done,
/// the emulator sleeps until a frame, a register write, a control command
/// or a deadline of its own (a timer, a held frame) instead of polling
/// (which cost over 1% of a CPU).
#[test]
fn idle_device_sleeps() {
    let p = udp_ports(2);
    let args: Vec<String> = vec![
        "--strict".into(),
        "--link".into(),
        format!("0={}:{}", p, p + 1),
        "--link".into(),
        format!("1={}:{}", p + 1, p),
    ];
    let mut e = Emu::start(Path::new(EMU), &args, 64);
    let (qa, qb) = (3u32, 4u32);
    let (mut a, _b) = factory_pair(&mut e, qa, qb, 0x1234);
    for port in 2..24 {
        Port::up(&mut e, port, port as u8);
    }
    let src = e.ram.alloc(65536, 4096);
    let dst = e.ram.alloc(65536, 4096);
    let data = fill(&e, src, 65536, 7);
    a.put_wqe(&e, qa, 0, 0, Linear(src, dst, 65536, 1));
    a.ring(&mut e, qa, 1);
    assert_eq!(a.cqes(&mut e, 1), [(qa, 1, 0, 1)]);
    assert_eq!(e.ram.slice(dst, 65536), &data[..]);
    std::thread::sleep(Duration::from_millis(100));
    let t0 = e.cpu_time();
    std::thread::sleep(Duration::from_secs(3));
    let used = e.cpu_time() - t0;
    assert!(
        used <= Duration::from_millis(20),
        "{used:?} of CPU in 3 s at rest"
    );
}
