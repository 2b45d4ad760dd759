// SPDX-License-Identifier: GPL-2.0
//! The device in-process: two devices whose port 0 frames the test moves
//! by hand, on a clock the test advances. What arrives when is the test's
//! choice, so packet-level races (a key revoked between two packets of a
//! message, a page-table entry removed mid-message, RNR timers) are
//! deterministic.

use super::*;
use crate::qp::Region;
use std::sync::Mutex;

const RAM: u64 = 0x1000_0000;
const RAM_SIZE: usize = 16 << 20;
const CQ_VA: u64 = 0x10_0000;
const SQ_VA: u64 = 0x20_0000;
const SRC_VA: u64 = 0x4000_0000;
const DST_VA: u64 = 0x8000_0000;
/// Where peers name b's region (an address in some process).
const IOVA: u64 = 0x7f12_3456_0000;
const KEY_A: u32 = 0xa11c_e000;
const KEY_B: u32 = 0xb0b0_0000;
const QPN_A: u32 = 7;
const QPN_B: u32 = 9;
const MTU: usize = 4096;

/// One device as a driver sees it, with guest RAM and a bump allocator.
struct Dev {
    d: Device,
    now: Instant,
    next: u64,
    root: u64,
    eq: u64,
    eq_ci: u32,
}

struct TCq {
    cqn: u32,
    bus: u64,
    log: u32,
    ci: u32,
}

struct TQp {
    qpn: u32,
    sq_bus: u64,
    pi: u32,
}

const EQ_LOG: u32 = 6;

impl Dev {
    fn new(instance: u8, tweak: impl FnOnce(&mut Options)) -> Self {
        let mut opts = Options {
            ports: 1,
            devmem: 1 << 20,
            instance,
            ..Default::default()
        };
        tweak(&mut opts);
        let vectors = Arc::new(Vectors::new(MSIX_VECTORS as usize));
        let mut d = Device::new(opts, vectors).unwrap();
        let ram = crate::mem::memfd(c"ram", RAM_SIZE).unwrap();
        d.memory().map(RAM, RAM_SIZE as u64, Some(ram), 0).unwrap();
        d.set_bus_master(true);
        let mut s = Self {
            d,
            now: Instant::now(),
            next: RAM,
            root: 0,
            eq: 0,
            eq_ci: 0,
        };
        s.root = s.alloc(4096);
        s.wr64(MMU_ROOT_LO, s.root);
        s.wr(MMU_CTRL, 1);
        s.eq = s.alloc(EQE_SIZE << EQ_LOG);
        s.wr64(EQ_BASE_LO, s.eq);
        s.wr(EQ_LOG_SIZE, EQ_LOG);
        s.wr(EQ_CTRL, 1);
        s
    }

    fn wr(&mut self, off: u64, v: u32) {
        self.d.write32(off, v, self.now);
    }

    fn wr64(&mut self, off: u64, v: u64) {
        self.wr(off, v as u32);
        self.wr(off + 4, (v >> 32) as u32);
    }

    fn rd(&mut self, off: u64) -> u32 {
        self.d.read32(off)
    }

    fn alloc(&mut self, len: usize) -> u64 {
        let at = self.next;
        self.next += (len as u64).next_multiple_of(4096);
        assert!(self.next <= RAM + RAM_SIZE as u64, "test RAM exhausted");
        at
    }

    fn put(&mut self, bus: u64, b: &[u8]) {
        assert!(self.d.memory().write(bus, b));
    }

    fn get(&mut self, bus: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        assert!(self.d.memory().read(bus, &mut b));
        b
    }

    fn pte_slot(&mut self, va: u64, create: bool) -> u64 {
        let mut table = self.root;
        for level in 0..2 {
            let slot = table + ((va >> (30 - 9 * level)) & 0x1ff) * 8;
            let e = u64::from_le_bytes(self.get(slot, 8).try_into().unwrap());
            table = if e & PTE_VALID != 0 {
                e & PTE_ADDR_MASK
            } else {
                assert!(create, "{va:#x} not mapped");
                let t = self.alloc(4096);
                self.put(slot, &(t | PTE_VALID).to_le_bytes());
                t
            };
        }
        table + ((va >> 12) & 0x1ff) * 8
    }

    /// Map `pages` 4 KiB pages from `va` to `bus` (host memory, or device
    /// memory offsets with PTE_DEVMEM in `flags`).
    fn map(&mut self, va: u64, bus: u64, pages: u64, flags: u64) {
        for i in 0..pages {
            let slot = self.pte_slot(va + i * 4096, true);
            self.put(slot, &((bus + i * 4096) | PTE_VALID | flags).to_le_bytes());
        }
        self.wr(MMU_INVALIDATE, 1);
    }

    /// Remove the mapping of the page at `va`, invalidating or not; an
    /// invalidation is waited for as the model says (a register read).
    fn unmap(&mut self, va: u64, invalidate: bool) {
        self.unmap_unwaited(va, invalidate);
        if invalidate {
            self.rd(STATUS);
        }
    }

    /// As [`Dev::unmap`], without waiting for the invalidation.
    fn unmap_unwaited(&mut self, va: u64, invalidate: bool) {
        let slot = self.pte_slot(va, false);
        self.put(slot, &0u64.to_le_bytes());
        if invalidate {
            self.wr(MMU_INVALIDATE, 1);
        }
    }

    /// A physically contiguous buffer of `len` bytes at `va`.
    fn buffer(&mut self, va: u64, len: usize, flags: u64) -> u64 {
        let bus = self.alloc(len);
        self.map(va, bus, len.div_ceil(4096) as u64, flags);
        bus
    }

    fn cmd(&mut self, opcode: u32, index: u32, data: &[u8]) -> u32 {
        self.cmd_on(opcode, 0, index, data)
    }

    fn cmd_on(&mut self, opcode: u32, port: u32, index: u32, data: &[u8]) -> u32 {
        let mut d = [0u8; CMD_DATA_LEN];
        d[..data.len()].copy_from_slice(data);
        for (i, c) in d.chunks(4).enumerate() {
            self.wr(
                CMD_DATA + 4 * i as u64,
                u32::from_le_bytes(c.try_into().unwrap()),
            );
        }
        self.wr(CMD, opcode << 24 | port << 16 | index);
        self.rd(CMD_STATUS)
    }

    fn ctx(&mut self, qpn: u32) -> QpCtx {
        assert_eq!(self.cmd(CMD_QP_READ, qpn, &[]), 0);
        let b: Vec<u8> = (0..QpCtx::LEN as u64 / 4)
            .flat_map(|i| self.rd(CMD_DATA + 4 * i).to_le_bytes())
            .collect();
        QpCtx::decode(&b)
    }

    fn cq(&mut self, cqn: u32, va: u64, log: u32) -> TCq {
        let bus = self.buffer(va, CQE_SIZE << log, PTE_WRITE | PTE_RING);
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&va.to_le_bytes());
        d[8..12].copy_from_slice(&log.to_le_bytes());
        assert_eq!(self.cmd(CMD_CQ_CREATE, cqn, &d), 0);
        TCq {
            cqn,
            bus,
            log,
            ci: 0,
        }
    }

    /// The next CQE of `cq`, if there is one; consuming it moves the
    /// consumer index (doorbell).
    fn poll(&mut self, cq: &mut TCq) -> Option<Cqe> {
        let at = cq.bus + u64::from(cq.ci & ((1 << cq.log) - 1)) * CQE_SIZE as u64;
        let (cqe, owner) = Cqe::decode(&self.get(at, CQE_SIZE));
        if owner != ((cq.ci >> cq.log) & 1 == 0) {
            return None;
        }
        cq.ci += 1;
        self.wr(DB_BASE + DB_CQ, cq.cqn << 16 | (cq.ci & 0xffff));
        Some(cqe)
    }

    fn drain(&mut self, cq: &mut TCq) -> Vec<Cqe> {
        std::iter::from_fn(|| self.poll(cq)).collect()
    }

    /// A QP in RTS talking to `peer`, context as `tweak` leaves it.
    fn qp(
        &mut self,
        qpn: u32,
        peer: Endpoint,
        dest_qpn: u32,
        keys: (u32, u32),
        tweak: impl FnOnce(&mut QpCtx),
    ) -> TQp {
        let sq_log = 6;
        let sq_va = SQ_VA + u64::from(qpn) * 0x1_0000;
        let sq_bus = self.buffer(sq_va, WQE_SIZE << sq_log, PTE_RING);
        let mut ctx = QpCtx {
            log_mtu: MTU.trailing_zeros() as u8,
            retry_cnt: 7,
            timeout: 14,
            cqn: 1,
            sq_base: sq_va,
            sq_log_size: sq_log,
            dest_qpn,
            sq_psn: 1000,
            rq_psn: 1000,
            remote_rkey: keys.0,
            local_rkey: keys.1,
            dest: peer,
            udp_sport: qpn as u16,
            flags: QPF_REMOTE_WRITE,
            ..Default::default()
        };
        tweak(&mut ctx);
        for s in [QPS_INIT, QPS_RTR, QPS_RTS] {
            ctx.state = s;
            assert_eq!(self.cmd(CMD_QP_WRITE, qpn, &ctx.encode()), 0, "QP to {s}");
        }
        TQp { qpn, sq_bus, pi: 0 }
    }

    fn post(&mut self, qp: &mut TQp, wqe: Wqe) -> u16 {
        let idx = qp.pi as u16;
        self.put(
            qp.sq_bus + u64::from(qp.pi % 64) * WQE_SIZE as u64,
            &wqe.encode(),
        );
        qp.pi += 1;
        self.wr(DB_BASE + DB_SQ, qp.qpn << 16 | (qp.pi & 0xffff));
        idx
    }

    /// Events since the last call: (type, data0, data1).
    fn events(&mut self) -> Vec<(u8, u32, u32)> {
        let mut out = Vec::new();
        loop {
            let at = self.eq + u64::from(self.eq_ci % (1 << EQ_LOG)) * EQE_SIZE as u64;
            let e = self.get(at, EQE_SIZE);
            if (e[15] & 1 != 0) != ((self.eq_ci >> EQ_LOG) & 1 == 0) {
                break;
            }
            let w = |o: usize| u32::from_le_bytes(e[o..o + 4].try_into().unwrap());
            out.push((e[0], w(4), w(8)));
            self.eq_ci += 1;
        }
        self.wr(EQ_CI, self.eq_ci);
        out
    }

    fn counters(&self) -> Counters {
        self.d.ports[0].counters
    }
}

/// Two devices, port 0 of each wired to the other by the test.
struct Rig {
    a: Dev,
    b: Dev,
}

impl Rig {
    /// a (requester) and b (responder), QP 7 on a and QP 9 on b, CQ 1 of
    /// 2^`cq_log` entries on each; `tweak_a` and `tweak_b` adjust the
    /// contexts, `opts` both devices.
    fn new(
        cq_log: u32,
        opts: impl Fn(&mut Options),
        tweak_a: impl FnOnce(&mut QpCtx),
        tweak_b: impl FnOnce(&mut QpCtx),
    ) -> (Self, TCq, TQp, TCq) {
        let mut a = Dev::new(1, &opts);
        let mut b = Dev::new(2, &opts);
        let (ea, eb) = (a.d.ports[0].ep, b.d.ports[0].ep);
        let cqa = a.cq(1, CQ_VA, 6);
        let cqb = b.cq(1, CQ_VA, cq_log);
        let qpa = a.qp(QPN_A, eb, QPN_B, (KEY_B, KEY_A), tweak_a);
        b.qp(QPN_B, ea, QPN_A, (KEY_A, KEY_B), tweak_b);
        (Self { a, b }, cqa, qpa, cqb)
    }

    /// Frames a sends now (after letting it work).
    fn sent_by_a(&mut self) -> Vec<Vec<u8>> {
        self.a.d.step(self.a.now);
        self.a.d.take_tx(0, self.a.now)
    }

    fn deliver_to_b(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            self.b.d.receive(0, f, self.b.now);
        }
    }

    /// Move frames both ways until both devices are quiet.
    fn run(&mut self) {
        for _ in 0..10_000 {
            self.a.d.step(self.a.now);
            self.b.d.step(self.b.now);
            let fa = self.a.d.take_tx(0, self.a.now);
            let fb = self.b.d.take_tx(0, self.b.now);
            if fa.is_empty() && fb.is_empty() {
                return;
            }
            self.deliver_to_b(&fa);
            for f in &fb {
                self.a.d.receive(0, f, self.a.now);
            }
        }
        panic!("the devices never went quiet");
    }

    fn advance(&mut self, d: Duration) {
        self.a.now += d;
        self.b.now += d;
    }
}

fn wqe(len: usize, remote_va: u64, imm: Option<u32>) -> Wqe {
    Wqe {
        opcode: if imm.is_some() {
            WQE_RDMA_WRITE_IMM
        } else {
            WQE_RDMA_WRITE
        },
        flags: WQE_SIGNALED,
        len: len as u32,
        local_va: SRC_VA,
        remote_va,
        imm: imm.unwrap_or(0),
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

fn region(len: u64) -> impl FnOnce(&mut QpCtx) {
    move |c: &mut QpCtx| {
        c.flags = QPF_REMOTE_WRITE | QPF_REGION;
        c.region = Region {
            iova: IOVA,
            len,
            va: DST_VA,
        };
    }
}

// ---- Region, rkey ------------------------------------------------------

#[test]
fn write_by_iova_lands_at_the_region_address() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, region(3 * 4096));
    let len = 5000;
    let data = pattern(len, 1);
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &data);
    let dst = r.b.buffer(DST_VA, 3 * 4096, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, IOVA + 4096 + 100, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    let got = r.b.get(dst, 3 * 4096);
    assert_eq!(&got[4096 + 100..4096 + 100 + len], &data[..]);
    assert!(got[..4096 + 100].iter().all(|&x| x == 0), "nothing before");
    assert!(
        got[4096 + 100 + len..].iter().all(|&x| x == 0),
        "nothing after"
    );
    // An empty WRITE at the very end of the region is inside it.
    r.a.post(&mut qpa, wqe(0, IOVA + 3 * 4096, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    assert_eq!(r.b.ctx(QPN_B).state, QPS_RTS);
}

#[test]
fn write_outside_the_region_is_refused_and_nothing_lands() {
    let cases: [(u64, usize, &str); 5] = [
        (IOVA + 2 * 4096, 4096 + 1, "runs past the end"),
        (IOVA - 1, 2, "starts before"),
        (IOVA + 3 * 4096, 1, "starts at the end"),
        (DST_VA, 16, "a device VA instead of the iova"),
        (IOVA, 3 * 4096 + 4096, "longer than the region"),
    ];
    for (va, len, what) in cases {
        let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, region(3 * 4096));
        let src = r.a.buffer(SRC_VA, len, 0);
        r.a.put(src, &pattern(len, 2));
        // b maps more than the region: the region, not the MMU, refuses.
        let dst = r.b.buffer(DST_VA - 4096, 5 * 4096, PTE_WRITE);
        let idx = r.a.post(&mut qpa, wqe(len, va, None));
        r.run();
        let c = r.a.poll(&mut cqa).unwrap();
        assert_eq!((c.status, c.wqe_index), (ST_REM_ACCESS_ERR, idx), "{what}");
        assert!(
            r.b.get(dst, 5 * 4096).iter().all(|&x| x == 0),
            "{what}: nothing landed"
        );
        assert_eq!(r.b.ctx(QPN_B).state, QPS_ERR, "{what}");
        let ev = r.b.events();
        assert!(
            ev.contains(&(EV_QP_ERROR, QPN_B, u32::from(ST_REM_ACCESS_ERR))),
            "{what}: {ev:?}"
        );
        assert!(
            !ev.iter().any(|e| e.0 == EV_MMU_FAULT),
            "{what}: not a translation fault"
        );
        assert_eq!(r.b.d.mmu.faults, 0, "{what}");
        assert_eq!(r.b.counters().naks_sent, 1, "{what}");
    }
}

#[test]
fn rkey_zero_never_matches() {
    // Model 1.1 contexts (no region) with key 0 on both ends.
    let (mut r, mut cqa, mut qpa, _) =
        Rig::new(6, |_| {}, |c| c.remote_rkey = 0, |c| c.local_rkey = 0);
    let src = r.a.buffer(SRC_VA, 64, 0);
    r.a.put(src, &[0x77; 64]);
    let dst = r.b.buffer(DST_VA, 4096, PTE_WRITE);
    r.a.post(&mut qpa, wqe(64, DST_VA, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_REM_ACCESS_ERR);
    assert!(r.b.get(dst, 64).iter().all(|&x| x == 0));
    assert_eq!(r.b.ctx(QPN_B).state, QPS_ERR);
}

#[test]
fn model_1_1_contexts_still_address_device_vas() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, |_| {});
    let data = pattern(10_000, 3);
    let src = r.a.buffer(SRC_VA, data.len(), 0);
    r.a.put(src, &data);
    let dst = r.b.buffer(DST_VA, data.len(), PTE_WRITE);
    r.a.post(&mut qpa, wqe(data.len(), DST_VA, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    assert_eq!(r.b.get(dst, data.len()), data);
    let c = r.b.ctx(QPN_B);
    assert_eq!(
        (c.flags, c.region, c.rnr_retry),
        (QPF_REMOTE_WRITE, Region::default(), 0)
    );
}

#[test]
fn qp_write_validates_the_region() {
    let mut d = Dev::new(1, |_| {});
    d.cq(1, CQ_VA, 4);
    d.buffer(SQ_VA, 4096, PTE_RING);
    let good = QpCtx {
        state: QPS_INIT,
        cqn: 1,
        sq_base: SQ_VA,
        sq_log_size: 4,
        local_rkey: 5,
        flags: QPF_REMOTE_WRITE | QPF_REGION,
        region: Region {
            iova: 0x1000,
            len: 0x2000,
            va: DST_VA,
        },
        ..Default::default()
    };
    let bad = [
        QpCtx {
            local_rkey: 0,
            ..good
        },
        QpCtx {
            region: Region {
                len: 0,
                ..good.region
            },
            ..good
        },
        QpCtx {
            region: Region {
                iova: u64::MAX - 0x1000,
                ..good.region
            },
            ..good
        },
        QpCtx {
            region: Region {
                va: u64::MAX - 0x1000,
                ..good.region
            },
            ..good
        },
    ];
    for c in bad {
        assert_eq!(d.cmd(CMD_QP_WRITE, 3, &c.encode()), EINVAL, "{c:?}");
    }
    assert_eq!(d.cmd(CMD_QP_READ, 3, &[]), ENOENT, "nothing created");
    // Without REGION the region fields are not looked at (1.1 software
    // writes zeros; anything else is ignored as well).
    let no_region = QpCtx {
        flags: QPF_REMOTE_WRITE,
        local_rkey: 0,
        ..bad[1]
    };
    assert_eq!(d.cmd(CMD_QP_WRITE, 3, &no_region.encode()), 0);
    assert_eq!(d.cmd(CMD_QP_WRITE, 4, &good.encode()), 0);
    assert_eq!(d.ctx(4).region, good.region);
    // RNR parameters: a retry count beyond 7 cannot go to RTS, a timer
    // beyond 5 bits cannot go to RTR.
    let mut c = QpCtx {
        state: QPS_RTR,
        log_mtu: 12,
        dest: Endpoint {
            mac: [2, 0, 0, 0, 0, 1],
            ip: Gid::v4([10, 0, 0, 1]),
        },
        min_rnr_timer: 32,
        ..good
    };
    assert_eq!(d.cmd(CMD_QP_WRITE, 4, &c.encode()), EINVAL);
    c.min_rnr_timer = 31;
    assert_eq!(d.cmd(CMD_QP_WRITE, 4, &c.encode()), 0);
    c.state = QPS_RTS;
    c.rnr_retry = 8;
    assert_eq!(d.cmd(CMD_QP_WRITE, 4, &c.encode()), EINVAL);
    c.rnr_retry = 7;
    assert_eq!(d.cmd(CMD_QP_WRITE, 4, &c.encode()), 0);
    let got = d.ctx(4);
    assert_eq!(
        (got.rnr_retry, got.min_rnr_timer, got.region),
        (7, 31, good.region)
    );
}

// ---- Loopback ------------------------------------------------------------

#[test]
fn two_qps_of_one_port_reach_each_other_off_the_wire() {
    let mut d = Dev::new(1, |_| {});
    let e = d.d.ports[0].ep;
    let mut cq = d.cq(1, CQ_VA, 6);
    let mut qpa = d.qp(QPN_A, e, QPN_B, (KEY_B, KEY_A), |_| {});
    d.qp(QPN_B, e, QPN_A, (KEY_A, KEY_B), region(2 * 4096));
    let len = 6000;
    let src = d.buffer(SRC_VA, len, 0);
    d.put(src, &pattern(len, 9));
    let dst = d.buffer(DST_VA, 2 * 4096, PTE_WRITE);
    d.post(&mut qpa, wqe(len, IOVA + 100, None));
    let mut wire = 0;
    for _ in 0..100 {
        d.d.step(d.now);
        wire += d.d.take_tx(0, d.now).len();
    }
    assert_eq!(wire, 0, "nothing went on the wire");
    assert_eq!(d.poll(&mut cq).unwrap().status, ST_SUCCESS);
    let got = d.get(dst, 2 * 4096);
    assert_eq!(&got[100..100 + len], &pattern(len, 9)[..]);
    assert!(got[..100].iter().all(|&x| x == 0));
    assert!(got[100 + len..].iter().all(|&x| x == 0));
    let c = &d.d.ports[0].counters;
    assert_eq!(c.looped, c.tx, "every frame sent was looped back");
    assert!(c.looped >= 3, "two packets and an ACK at least");
}

// ---- QP_KEYS (1.4) -----------------------------------------------------

/// QP_KEYS's argument: flags, remote rkey, local rkey, reserved, region.
fn qp_keys(flags: u32, remote: u32, local: u32, reserved: u32, r: Region) -> Vec<u8> {
    [flags, remote, local, reserved]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .chain([r.iova, r.len, r.va].iter().flat_map(|x| x.to_le_bytes()))
        .collect()
}

#[test]
fn qp_keys_rebind_running_qps_and_keep_their_psns() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, region(2 * 4096));
    let len = 3000;
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &pattern(len, 5));
    let dst = r.b.buffer(DST_VA, 2 * 4096, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, IOVA, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    let (a0, b0) = (r.a.ctx(QPN_A), r.b.ctx(QPN_B));
    // b takes another key for the same region, a writes with it.
    let reg = b0.region;
    let new_key = 0x5eed_0000;
    assert_eq!(
        r.b.cmd(
            CMD_QP_KEYS,
            QPN_B,
            &qp_keys(QP_KEYS_LOCAL, 0, new_key, 0, reg)
        ),
        0
    );
    assert_eq!(
        r.a.cmd(
            CMD_QP_KEYS,
            QPN_A,
            &qp_keys(QP_KEYS_REMOTE, new_key, 0, 0, reg)
        ),
        0
    );
    let (a1, b1) = (r.a.ctx(QPN_A), r.b.ctx(QPN_B));
    assert_eq!((a1.remote_rkey, b1.local_rkey), (new_key, new_key));
    assert_eq!(
        (a1.state, a1.sq_psn, a1.rq_psn, a1.local_rkey),
        (a0.state, a0.sq_psn, a0.rq_psn, a0.local_rkey),
        "the requester's state, PSNs and local key stay"
    );
    assert_eq!(
        (b1.state, b1.sq_psn, b1.rq_psn, b1.remote_rkey, b1.flags),
        (b0.state, b0.sq_psn, b0.rq_psn, b0.remote_rkey, b0.flags),
        "the responder's state, PSNs, remote key and flags stay"
    );
    r.a.put(src, &pattern(len, 6));
    r.a.post(&mut qpa, wqe(len, IOVA + 4096, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    let got = r.b.get(dst, 2 * 4096);
    assert_eq!(&got[..len], &pattern(len, 5)[..]);
    assert_eq!(&got[4096..4096 + len], &pattern(len, 6)[..]);
    assert!(got[len..4096].iter().all(|&x| x == 0));
    // The old key is refused now.
    r.a.cmd(
        CMD_QP_KEYS,
        QPN_A,
        &qp_keys(QP_KEYS_REMOTE, KEY_B, 0, 0, reg),
    );
    r.a.post(&mut qpa, wqe(16, IOVA, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_REM_ACCESS_ERR);
    // A local key of 0 (or an empty region) takes the region away.
    assert_eq!(
        r.b.cmd(CMD_QP_KEYS, QPN_B, &qp_keys(QP_KEYS_LOCAL, 0, 0, 0, reg)),
        0
    );
    let c = r.b.ctx(QPN_B);
    assert_eq!(
        (c.local_rkey, c.flags & (QPF_REMOTE_WRITE | QPF_REGION)),
        (0, 0)
    );
}

#[test]
fn qp_keys_arguments() {
    let mut d = Dev::new(1, |_| {});
    let none = Region::default();
    assert_eq!(
        d.cmd(CMD_QP_KEYS, 3, &qp_keys(QP_KEYS_REMOTE, 1, 0, 0, none)),
        ENOENT,
        "no such QP"
    );
    assert_eq!(
        d.cmd(CMD_QP_KEYS, 3, &qp_keys(1 << 2, 1, 0, 0, none)),
        EINVAL,
        "unknown flag"
    );
    assert_eq!(
        d.cmd(CMD_QP_KEYS, 3, &qp_keys(QP_KEYS_REMOTE, 1, 0, 9, none)),
        EINVAL,
        "reserved bytes"
    );
}

// ---- RKEY_REVOKE -------------------------------------------------------

#[test]
fn rkey_revoke_refuses_the_rest_of_a_message() {
    for region_mode in [false, true] {
        let tweak_b: Box<dyn FnOnce(&mut QpCtx)> = if region_mode {
            Box::new(region(3 * 4096))
        } else {
            Box::new(|_: &mut QpCtx| {})
        };
        let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, tweak_b);
        let len = 3 * MTU;
        let src = r.a.buffer(SRC_VA, len, 0);
        r.a.put(src, &pattern(len, 4));
        let dst = r.b.buffer(DST_VA, len, PTE_WRITE);
        let remote = if region_mode { IOVA } else { DST_VA };
        r.a.post(&mut qpa, wqe(len, remote, None));
        let frames = r.sent_by_a();
        assert_eq!(frames.len(), 3, "First, Middle, Last");
        r.deliver_to_b(&frames[..1]);
        // Another QP on b with the same key, and one with another key.
        let ea = r.a.d.ports[0].ep;
        r.b.qp(20, ea, 1, (0, KEY_B), |_| {});
        r.b.qp(21, ea, 1, (0, 0x1234), |_| {});
        assert_eq!(r.b.cmd(CMD_RKEY_REVOKE, 0, &KEY_B.to_le_bytes()), 0);
        assert_eq!(r.b.rd(CMD_DATA + 4), 2, "two contexts changed");
        r.deliver_to_b(&frames[1..]);
        r.run();
        assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_REM_ACCESS_ERR);
        let got = r.b.get(dst, len);
        assert_eq!(
            &got[..MTU],
            &pattern(len, 4)[..MTU],
            "the first packet landed"
        );
        assert!(got[MTU..].iter().all(|&x| x == 0), "the rest did not");
        let c = r.b.ctx(QPN_B);
        assert_eq!(
            (c.state, c.local_rkey, c.flags, c.region),
            (QPS_ERR, 0, 0, Region::default())
        );
        assert_eq!(r.b.ctx(20).local_rkey, 0);
        assert_eq!(r.b.ctx(21).local_rkey, 0x1234, "other keys stay");
        assert_eq!(r.b.counters().naks_sent, 1);
    }
}

#[test]
fn rkey_revoke_arguments() {
    let mut d = Dev::new(1, |_| {});
    assert_eq!(
        d.cmd(CMD_RKEY_REVOKE, 0, &0u32.to_le_bytes()),
        EINVAL,
        "key 0"
    );
    assert_eq!(
        d.cmd(CMD_RKEY_REVOKE, 0, &7u32.to_le_bytes()),
        0,
        "no QP holds it"
    );
    assert_eq!(d.rd(CMD_DATA + 4), 0);
    // Port and index are ignored, even a port the device does not have.
    assert_eq!(
        d.cmd_on(CMD_RKEY_REVOKE, 31, 0xffff, &7u32.to_le_bytes()),
        0
    );
}

#[test]
fn qp_write_with_another_region_refuses_the_rest_of_a_message() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, region(2 * 4096));
    let len = 2 * MTU;
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &pattern(len, 5));
    let dst = r.b.buffer(DST_VA, 2 * len, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, IOVA, None));
    let frames = r.sent_by_a();
    r.deliver_to_b(&frames[..1]);
    let mut c = r.b.ctx(QPN_B);
    c.region.va = DST_VA + len as u64;
    assert_eq!(r.b.cmd(CMD_QP_WRITE, QPN_B, &c.encode()), 0, "RTS to RTS");
    r.deliver_to_b(&frames[1..]);
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_REM_ACCESS_ERR);
    assert!(r
        .b
        .get(dst + MTU as u64, 2 * len - MTU)
        .iter()
        .all(|&x| x == 0));
}

// ---- DEVMEM_FILL -------------------------------------------------------

#[test]
fn devmem_fill_fills_exactly_the_range() {
    let mut d = Dev::new(1, |_| {});
    let size = 1u64 << 20;
    let fill = |d: &mut Dev, off: u64, len: u64, pat: u32| {
        let mut a = [0u8; 20];
        a[0..8].copy_from_slice(&off.to_le_bytes());
        a[8..16].copy_from_slice(&len.to_le_bytes());
        a[16..20].copy_from_slice(&pat.to_le_bytes());
        d.cmd(CMD_DEVMEM_FILL, 0, &a)
    };
    assert!(d.d.devmem().write(0, &vec![0xee; size as usize]));
    assert_eq!(fill(&mut d, 0x1000, 0x2000, 0xdead_beef), 0);
    let mut b = vec![0u8; 0x4000];
    d.d.devmem().read(0, &mut b);
    assert!(b[..0x1000].iter().all(|&x| x == 0xee));
    assert!(b[0x1000..0x3000]
        .chunks(4)
        .all(|c| c == 0xdead_beefu32.to_le_bytes()));
    assert!(b[0x3000..].iter().all(|&x| x == 0xee));
    for (off, len, what) in [
        (1, 0x1000, "offset not page aligned"),
        (0x1000, 0x800, "length not page aligned"),
        (0x1000, 0, "empty"),
        (size - 0x1000, 0x2000, "past the end"),
        (size, 0x1000, "at the end"),
        (u64::MAX - 0xfff, 0x1000, "wraps"),
        (0x1000, u64::MAX - 0xfff, "huge"),
    ] {
        assert_eq!(fill(&mut d, off, len, 0), EINVAL, "{what}");
    }
    assert_eq!(
        fill(&mut d, size - 0x1000, 0x1000, 0x0102_0304),
        0,
        "the last page"
    );
    d.d.devmem().read(size - 4, &mut b[..4]);
    assert_eq!(&b[..4], &[4, 3, 2, 1]);
    d.d.devmem().read(0x3000, &mut b[..4]);
    assert_eq!(&b[..4], &[0xee; 4], "refused fills wrote nothing");
}

// ---- RNR ---------------------------------------------------------------

/// b's CQ has 2^`cq_log` entries and b's QP asks for RNR timer `timer`;
/// a retries RNR NAKs `rnr_retry` times.
fn rnr_rig(cq_log: u32, rnr_retry: u8, timer: u8) -> (Rig, TCq, TQp, TCq, u64) {
    let (mut r, cqa, qpa, cqb) = Rig::new(
        cq_log,
        |_| {},
        |c| c.rnr_retry = rnr_retry,
        |c| c.min_rnr_timer = timer,
    );
    let src = r.a.buffer(SRC_VA, 64, 0);
    r.a.put(src, &[0x42; 64]);
    let dst = r.b.buffer(DST_VA, 16 * 64, PTE_WRITE);
    (r, cqa, qpa, cqb, dst)
}

fn imm_write(i: u32) -> Wqe {
    wqe(64, DST_VA + u64::from(i) * 64, Some(0x100 + i))
}

#[test]
fn full_responder_cq_answers_rnr_naks_until_the_consumer_moves() {
    // Timer 14: 1.28 ms.
    let (mut r, mut cqa, mut qpa, mut cqb, dst) = rnr_rig(1, RNR_RETRY_FOREVER, 14);
    for i in 0..5 {
        r.a.post(&mut qpa, imm_write(i));
    }
    r.run();
    // Two fit; the third gets an RNR NAK, the others wait behind it.
    assert_eq!(r.b.counters().rnr_naks_sent, 1);
    assert_eq!(r.b.counters().naks_sent, 0, "RNR NAKs are counted apart");
    assert_eq!(r.b.rd(PORT_BASE + PORT_RNR_NAKS_SENT), 1);
    assert_eq!(r.a.drain(&mut cqa).len(), 2);
    let landed = |r: &mut Rig| {
        r.b.get(dst, 5 * 64)
            .chunks(64)
            .filter(|c| c[0] == 0x42)
            .count()
    };
    assert_eq!(landed(&mut r), 2, "nothing of the NAKed packet stored");
    assert_eq!(r.b.ctx(QPN_B).state, QPS_RTS);
    assert_eq!(r.b.ctx(QPN_B).rq_psn, 1002, "expected PSN kept");
    // Before the timer the requester keeps quiet.
    r.advance(Duration::from_micros(1200));
    assert!(r.sent_by_a().is_empty(), "nothing before the RNR timer");
    // After it, it resends; the CQ is still full: another RNR NAK.
    r.advance(Duration::from_micros(100));
    r.run();
    assert_eq!(r.b.counters().rnr_naks_sent, 2);
    // The consumer frees the CQ: everything lands, in order.
    let mut imms: Vec<u32> = r.b.drain(&mut cqb).iter().map(|c| c.imm).collect();
    for _ in 0..10 {
        r.advance(Duration::from_millis(2));
        r.run();
        imms.extend(r.b.drain(&mut cqb).iter().map(|c| c.imm));
    }
    assert_eq!(imms, (0..5).map(|i| 0x100 + i).collect::<Vec<_>>());
    assert_eq!(landed(&mut r), 5);
    let done = r.a.drain(&mut cqa);
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|c| c.status == ST_SUCCESS));
    assert!(!r.b.events().iter().any(|e| e.0 == EV_CQ_OVERFLOW));
    assert_eq!(r.a.ctx(QPN_A).state, QPS_RTS);
}

#[test]
fn write_imm_completes_on_the_responder_cq() {
    let mut a = Dev::new(1, |_| {});
    let mut b = Dev::new(2, |_| {});
    let (ea, eb) = (a.d.ports[0].ep, b.d.ports[0].ep);
    let mut cqa = a.cq(1, CQ_VA, 6);
    let mut cqb = b.cq(1, CQ_VA, 6);
    // A context naming a responder CQ that does not exist is refused.
    let bad = QpCtx {
        state: QPS_INIT,
        cqn: 1,
        sq_base: SQ_VA,
        sq_log_size: 6,
        flags: QPF_RCQ,
        rcqn: 2,
        ..Default::default()
    };
    assert_eq!(b.cmd(CMD_QP_WRITE, 11, &bad.encode()), EINVAL);
    let mut rcqb = b.cq(2, CQ_VA + 0x1_0000, 6);
    let mut qpa = a.qp(QPN_A, eb, QPN_B, (KEY_B, KEY_A), |_| {});
    b.qp(QPN_B, ea, QPN_A, (KEY_A, KEY_B), |c| {
        c.flags |= QPF_RCQ;
        c.rcqn = 2;
    });
    assert_eq!(b.ctx(QPN_B).responder_cqn(), 2);
    let mut r = Rig { a, b };
    let src = r.a.buffer(SRC_VA, 64, 0);
    r.a.put(src, &[0x42; 64]);
    let dst = r.b.buffer(DST_VA, 2 * 64, PTE_WRITE);
    r.a.post(&mut qpa, imm_write(0));
    r.a.post(&mut qpa, wqe(64, DST_VA + 64, None));
    r.run();
    assert_eq!(r.a.drain(&mut cqa).len(), 2);
    assert_eq!(r.b.get(dst, 2 * 64), vec![0x42; 2 * 64]);
    // The WRITE with immediate completes on the responder CQ only.
    assert!(r.b.drain(&mut cqb).is_empty(), "nothing on the QP's CQ");
    let got = r.b.drain(&mut rcqb);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].qpn, got[0].opcode, got[0].imm, got[0].byte_len),
        (QPN_B, CQE_RECV_WRITE_IMM, 0x100, 64)
    );
    // A CQ a context names as responder CQ stays.
    assert_eq!(r.b.cmd(CMD_CQ_DESTROY, 2, &[]), EBUSY);
}

#[test]
fn write_without_immediate_needs_no_cq_room() {
    let (mut r, mut cqa, mut qpa, _, dst) = rnr_rig(1, 0, 1);
    for i in 0..2 {
        r.a.post(&mut qpa, imm_write(i));
    }
    r.run();
    r.a.post(&mut qpa, wqe(64, DST_VA + 0x200, None));
    r.run();
    assert_eq!(r.a.drain(&mut cqa).len(), 3);
    assert_eq!(r.b.get(dst + 0x200, 64), vec![0x42; 64]);
    assert_eq!(r.b.counters().rnr_naks_sent, 0);
}

#[test]
fn rnr_retries_exhausted() {
    for retry in [0u8, 2] {
        // Timer 1: 10 us.
        let (mut r, mut cqa, mut qpa, _, _) = rnr_rig(1, retry, 1);
        let idx: Vec<u16> = (0..4).map(|i| r.a.post(&mut qpa, imm_write(i))).collect();
        r.run();
        for _ in 0..10 {
            r.advance(Duration::from_millis(1));
            r.run();
        }
        assert_eq!(
            r.b.counters().rnr_naks_sent,
            u32::from(retry) + 1,
            "retry count {retry}"
        );
        let c = r.a.drain(&mut cqa);
        let got: Vec<(u16, u8)> = c.iter().map(|c| (c.wqe_index, c.status)).collect();
        assert_eq!(
            got,
            [
                (idx[0], ST_SUCCESS),
                (idx[1], ST_SUCCESS),
                (idx[2], ST_RNR_RETRY_EXC_ERR),
                (idx[3], ST_WR_FLUSH_ERR)
            ],
            "retry count {retry}"
        );
        assert_eq!(r.a.ctx(QPN_A).state, QPS_ERR);
        assert!(r
            .a
            .events()
            .contains(&(EV_QP_ERROR, QPN_A, u32::from(ST_RNR_RETRY_EXC_ERR))));
        assert_eq!(r.b.ctx(QPN_B).state, QPS_RTS, "the responder is fine");
    }
}

#[test]
fn requester_waits_the_timer_of_the_nak() {
    // Code 0 is the longest timer (655.36 ms), 31 the next (491.52 ms).
    for (code, wait) in [(0u8, 655_360u64), (31, 491_520)] {
        let (mut r, _, mut qpa, _, _) = rnr_rig(1, RNR_RETRY_FOREVER, code);
        for i in 0..3 {
            r.a.post(&mut qpa, imm_write(i));
        }
        r.run();
        assert_eq!(r.b.counters().rnr_naks_sent, 1);
        r.advance(Duration::from_micros(wait - 1000));
        assert!(r.sent_by_a().is_empty(), "code {code}: too early");
        r.advance(Duration::from_micros(1000));
        assert_eq!(r.sent_by_a().len(), 1, "code {code}: resent at the timer");
    }
}

// ---- Strict mode -------------------------------------------------------

/// A 3-packet WRITE whose first packet reached b, then b's mapping of the
/// target's last page is removed (and invalidated or not); then the rest
/// arrives.
fn unmap_mid_message(strict: bool, invalidate: bool) -> (Rig, Cqe, Vec<u8>) {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |o| o.strict = strict, |_| {}, |_| {});
    let len = 3 * MTU;
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &pattern(len, 6));
    let dst = r.b.buffer(DST_VA, len, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, DST_VA, None));
    let frames = r.sent_by_a();
    r.deliver_to_b(&frames[..1]);
    r.b.unmap(DST_VA + 2 * 4096, invalidate);
    r.deliver_to_b(&frames[1..]);
    r.run();
    let c = r.a.poll(&mut cqa).unwrap();
    let got = r.b.get(dst, len);
    (r, c, got)
}

#[test]
fn strict_mode_counts_a_translation_used_after_its_entry_went() {
    let (r, c, got) = unmap_mid_message(true, false);
    // The device went on with what it had cached, as hardware may: the
    // audit says the driver broke the contract.
    assert_eq!(c.status, ST_SUCCESS);
    assert_eq!(got, pattern(3 * MTU, 6));
    assert_eq!(r.b.d.stale_translations(), 1, "one packet used the page");
    assert_eq!(r.b.d.unwaited_invalidations(), 0, "no invalidation at all");
}

#[test]
fn strict_mode_counts_nothing_when_the_driver_invalidates() {
    let (mut r, c, got) = unmap_mid_message(true, true);
    // The message translates again after MMU_INVALIDATE and faults.
    assert_eq!(c.status, ST_REM_ACCESS_ERR);
    assert!(got[2 * MTU..].iter().all(|&x| x == 0));
    assert_eq!(r.b.d.stale_translations(), 0);
    assert_eq!(r.b.d.unwaited_invalidations(), 0);
    assert!(r
        .b
        .events()
        .contains(&(EV_MMU_FAULT, QPN_B, (DST_VA + 2 * 4096) as u32)));
    assert_eq!(r.b.ctx(QPN_B).state, QPS_ERR);
}

#[test]
fn default_mode_does_not_audit() {
    let (r, c, _) = unmap_mid_message(false, false);
    assert_eq!(c.status, ST_SUCCESS, "the per-page cache still maps it");
    assert_eq!(r.b.d.stale_translations(), 0);
    let (_, c, _) = unmap_mid_message(false, true);
    assert_eq!(c.status, ST_REM_ACCESS_ERR);
}

#[test]
fn strict_mode_requester_resends_through_its_cached_translation() {
    for invalidate in [false, true] {
        let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |o| o.strict = true, |_| {}, |_| {});
        let len = 2 * MTU;
        let src = r.a.buffer(SRC_VA, len, 0);
        r.a.put(src, &pattern(len, 7));
        r.b.buffer(DST_VA, len, PTE_WRITE);
        r.a.post(&mut qpa, wqe(len, DST_VA, None));
        // The frames are lost; the source's second page goes meanwhile.
        assert_eq!(r.sent_by_a().len(), 2);
        r.a.unmap(SRC_VA + 4096, invalidate);
        r.advance(Duration::from_millis(100));
        r.run();
        let c = r.a.poll(&mut cqa).unwrap();
        if invalidate {
            assert_eq!(c.status, ST_LOC_PROT_ERR);
            assert_eq!(r.a.d.stale_translations(), 0);
        } else {
            assert_eq!(c.status, ST_SUCCESS);
            assert!(r.a.d.stale_translations() >= 1);
        }
    }
}

// ---- Reset, bus master -------------------------------------------------

#[test]
fn nothing_happens_until_a_delayed_reset_finishes() {
    let delay = Duration::from_millis(150);
    let mut d = Dev::new(1, |o| o.reset_delay = delay);
    assert_eq!(d.rd(STATUS), STATUS_READY, "power-on is not a reset");
    let t0 = Instant::now();
    d.wr(RESET, RESET_MAGIC);
    assert_eq!(d.rd(STATUS) & STATUS_READY, 0);
    let mut cq = [0u8; 16];
    cq[0..8].copy_from_slice(&CQ_VA.to_le_bytes());
    cq[8] = 4;
    assert_eq!(d.cmd(CMD_CQ_CREATE, 1, &cq), EBUSY);
    d.wr(IRQ_TEST, 0);
    assert_eq!(d.rd(IRQ_TEST_COUNT), 0);
    let buf = d.alloc(64);
    d.wr64(DMA_TEST_ADDR_LO, buf);
    d.wr(DMA_TEST_LEN, 64);
    d.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(d.rd(DMA_TEST_CTRL), DMA_TEST_IDLE, "no DMA");
    assert_eq!(d.get(buf, 64), vec![0; 64]);
    while d.rd(STATUS) & STATUS_READY == 0 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(t0.elapsed() >= delay);
    assert_eq!(d.rd(CMD_STATUS), EBUSY, "the refused command's status");
    assert_eq!(
        d.cmd(CMD_CQ_CREATE, 1, &cq),
        0,
        "the refused command did nothing"
    );
    d.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(d.rd(DMA_TEST_CTRL), DMA_TEST_DONE);
}

#[test]
fn no_dma_and_no_interrupt_without_bus_master() {
    let mut d = Dev::new(1, |_| {});
    // SAFETY: eventfd has no preconditions; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    let ev = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    d.d.vectors
        .set(0, 1, vec![ev.try_clone().unwrap()])
        .unwrap();
    let fired = || {
        let mut b = [0u8; 8];
        std::io::Read::read(&mut &ev, &mut b).map_or(0, |_| u64::from_le_bytes(b))
    };
    d.wr(IRQ_TEST, 0);
    assert_eq!((fired(), d.rd(IRQ_TEST_COUNT)), (1, 1));
    let buf = d.alloc(64);
    d.put(buf, &[0x0f; 64]);
    d.wr64(DMA_TEST_ADDR_LO, buf);
    d.wr(DMA_TEST_LEN, 64);
    d.d.set_bus_master(false);
    d.wr(DMA_TEST_CTRL, DMA_TEST_START);
    assert_eq!(d.rd(DMA_TEST_CTRL), DMA_TEST_FAULT);
    assert_eq!(d.get(buf, 64), vec![0x0f; 64], "untouched");
    assert_eq!((d.d.dma_no_master(), d.d.audit()), (1, 0));
    d.wr(IRQ_TEST, 0);
    assert_eq!(
        (fired(), d.rd(IRQ_TEST_COUNT), d.d.irq_no_master()),
        (0, 1, 1)
    );
    // An event is neither written nor signalled.
    d.d.set_link(0, false);
    assert_eq!(fired(), 0);
    assert_eq!(
        d.d.irq_no_master(),
        1,
        "no EQ write, so no interrupt either"
    );
    assert!(d.d.dma_no_master() >= 2);
    d.d.set_bus_master(true);
    assert!(d.events().is_empty(), "the event was lost, not queued");
    // A vector without an eventfd (MSI-X disabled) is suppressed too.
    d.wr(IRQ_TEST, 3);
    assert_eq!(d.d.irq_no_master(), 2);
    d.wr(IRQ_TEST, 0);
    assert_eq!((fired(), d.rd(IRQ_TEST_COUNT)), (1, 2));
    assert_eq!(d.d.audit(), 0);
}

// ---- Strict mode: late commands and invalidations --------------------

fn strict(delay: Duration) -> impl Fn(&mut Options) {
    move |o: &mut Options| {
        o.strict = true;
        o.cmd_delay = delay;
    }
}

/// A CQ context for CQ_CREATE: a ring at `va` of 2^`log` entries.
fn cq_ctx(va: u64, log: u32) -> [u8; 16] {
    let mut d = [0u8; 16];
    d[0..8].copy_from_slice(&va.to_le_bytes());
    d[8..12].copy_from_slice(&log.to_le_bytes());
    d
}

#[test]
fn strict_commands_finish_late_and_results_wait_for_cmd_status() {
    let delay = Duration::from_millis(250);
    let mut d = Dev::new(1, strict(delay));
    d.buffer(CQ_VA, 4096, PTE_WRITE | PTE_RING);
    // RKEY_REVOKE's result (bytes 4 to 7) goes where a marker is.
    d.wr(CMD_DATA, 7);
    d.wr(CMD_DATA + 4, 0xdead);
    let t0 = Instant::now();
    d.wr(CMD, CMD_RKEY_REVOKE << 24);
    assert_eq!(
        d.rd(CMD_DATA + 4),
        0xdead,
        "a result read before CMD_STATUS is the old value"
    );
    assert_eq!(d.d.audits().cmd_data_busy, 1);
    assert_eq!(d.rd(CMD_STATUS), 0, "CMD_STATUS waits for the command");
    assert!(t0.elapsed() >= delay);
    assert_eq!(d.rd(CMD_DATA + 4), 0, "the result, after CMD_STATUS");
    assert_eq!(d.d.audits().cmd_data_busy, 1);
    // A command's effect shows only when it finishes: at CMD_STATUS ...
    let ctx = cq_ctx(CQ_VA, 4);
    let create = |d: &mut Dev, cqn: u32| {
        for (i, c) in ctx.chunks(4).enumerate() {
            d.wr(
                CMD_DATA + 4 * i as u64,
                u32::from_le_bytes(c.try_into().unwrap()),
            );
        }
        d.wr(CMD, CMD_CQ_CREATE << 24 | cqn);
    };
    create(&mut d, 1);
    assert!(!d.d.ports[0].cqs.contains_key(&1), "not before it finishes");
    assert_eq!(d.rd(CMD_STATUS), 0);
    assert!(d.d.ports[0].cqs.contains_key(&1));
    // ... or after the delay, by itself (the engine's clock).
    create(&mut d, 2);
    std::thread::sleep(delay + Duration::from_millis(20));
    assert!(!d.d.ports[0].cqs.contains_key(&2));
    d.d.step(d.now);
    assert!(d.d.ports[0].cqs.contains_key(&2), "finished by itself");
    assert_eq!(d.rd(CMD_STATUS), 0);
    assert_eq!(d.d.audits().cmd_overlap, 0);
    // A command written while one is executing is counted and lost.
    create(&mut d, 3);
    d.wr(CMD, CMD_CQ_CREATE << 24 | 4);
    assert_eq!(d.rd(CMD_STATUS), 0);
    assert!(d.d.ports[0].cqs.contains_key(&3));
    assert!(!d.d.ports[0].cqs.contains_key(&4), "the device was busy");
    assert_eq!(d.d.audits().cmd_overlap, 1);
    // One written after the last finished, before its CMD_STATUS was
    // read, is counted and executed.
    create(&mut d, 5);
    std::thread::sleep(delay + Duration::from_millis(20));
    d.d.step(d.now);
    d.wr(CMD, CMD_CQ_CREATE << 24 | 6);
    assert_eq!(d.rd(CMD_STATUS), 0);
    assert!(d.d.ports[0].cqs.contains_key(&5) && d.d.ports[0].cqs.contains_key(&6));
    assert_eq!(d.d.audits().cmd_overlap, 2);
    assert_eq!(
        d.d.audits().cmd_data_busy,
        1,
        "arguments written after CMD_STATUS"
    );
    // Errors come late too, and a reset drops a command under way.
    create(&mut d, 6);
    assert_eq!(d.rd(CMD_STATUS), EEXIST);
    create(&mut d, 7);
    d.wr(RESET, RESET_MAGIC);
    assert_eq!(d.rd(CMD_STATUS), 0);
    std::thread::sleep(delay + Duration::from_millis(20));
    d.d.step(d.now);
    assert!(d.d.ports[0].cqs.is_empty());
}

#[test]
fn default_mode_commands_are_synchronous_and_not_audited() {
    let mut d = Dev::new(1, |_| {});
    d.wr(CMD_DATA, 7);
    d.wr(CMD_DATA + 4, 0xdead);
    d.wr(CMD, CMD_RKEY_REVOKE << 24);
    assert_eq!(d.rd(CMD_DATA + 4), 0);
    d.wr(CMD, CMD_RKEY_REVOKE << 24);
    assert_eq!(d.rd(CMD_STATUS), 0);
    assert_eq!(d.d.audits(), Audits::default());
}

/// A 3-packet WRITE whose first packet reached b; then b's mapping of the
/// target's last page goes with an MMU_INVALIDATE that nothing waits for,
/// and the rest arrives.
#[test]
fn strict_mode_counts_uses_while_an_invalidation_is_not_waited_for() {
    let (mut r, mut cqa, mut qpa, _) =
        Rig::new(6, strict(Duration::from_micros(500)), |_| {}, |_| {});
    // Only a register read finishes b's invalidations now.
    r.b.d.opts.cmd_delay = Duration::from_secs(600);
    let len = 3 * MTU;
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &pattern(len, 8));
    let dst = r.b.buffer(DST_VA, len, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, DST_VA, None));
    let frames = r.sent_by_a();
    r.deliver_to_b(&frames[..1]);
    r.b.unmap_unwaited(DST_VA + 2 * 4096, true);
    assert!(r.b.d.mmu.invalidating);
    // The invalidation has not finished: the device may still use what it
    // cached, and the use is counted against the driver.
    r.deliver_to_b(&frames[1..]);
    assert_eq!(r.b.d.stale_translations(), 1);
    assert_eq!(r.b.d.unwaited_invalidations(), 1);
    assert_eq!(r.b.get(dst, len), pattern(len, 8), "the WRITE landed");
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    // A register read finishes it: the next WRITE there faults.
    r.b.rd(SCRATCH);
    assert!(!r.b.d.mmu.invalidating);
    r.a.post(&mut qpa, wqe(64, DST_VA + 2 * 4096, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_REM_ACCESS_ERR);
    assert_eq!(r.b.d.stale_translations(), 1);
    assert_eq!(r.b.d.unwaited_invalidations(), 1);
}

#[test]
fn strict_invalidation_finishes_by_itself_after_the_delay() {
    let delay = Duration::from_millis(200);
    let mut d = Dev::new(1, strict(delay));
    let bus = d.buffer(DST_VA, 4096, PTE_WRITE);
    d.rd(STATUS);
    d.d.mmu_write(DST_VA, &[1]).unwrap();
    d.put(bus, &[0]);
    d.unmap_unwaited(DST_VA, true);
    d.d.step(d.now);
    assert!(d.d.mmu.invalidating, "not yet");
    std::thread::sleep(delay + Duration::from_millis(10));
    d.d.step(d.now);
    assert!(!d.d.mmu.invalidating);
    assert!(d.d.mmu_write(DST_VA, &[2]).is_err(), "forgotten");
    assert_eq!(d.get(bus, 1), [0]);
    assert_eq!(d.d.unwaited_invalidations(), 0);
}

// ---- Doorbells ---------------------------------------------------------

#[test]
fn a_producer_index_moving_backwards_moves_the_qp_to_err() {
    // (first doorbell, second doorbell, refused): the ring has 64 WQEs.
    let cases: [(u16, u16, bool, &str); 6] = [
        (3, 2, true, "one back, still ahead of the oldest WQE"),
        (3, 0xffff, true, "back behind the oldest WQE"),
        (3, 3, false, "the same index again"),
        (3, 64, false, "a whole ring ahead of the oldest WQE"),
        (3, 65, true, "more than the ring ahead of the oldest WQE"),
        (60, 3, true, "back by 57 (as 65479 ahead)"),
    ];
    for strict_mode in [false, true] {
        for (first, second, refused, what) in cases {
            let (mut r, mut cqa, _, _) = Rig::new(6, |o| o.strict = strict_mode, |_| {}, |_| {});
            let db = DB_BASE + DB_SQ;
            // WQEs that fault at once if fetched: nothing is mapped at 0.
            r.a.wr(db, QPN_A << 16 | u32::from(first));
            r.a.wr(db, QPN_A << 16 | u32::from(second));
            let c = r.a.ctx(QPN_A);
            assert_eq!(c.state == QPS_ERR, refused, "{what}");
            assert_eq!(
                r.a.d.audits().bad_doorbells,
                u32::from(refused),
                "{what} (strict {strict_mode})"
            );
            if refused {
                let ev = r.a.events();
                assert!(
                    ev.contains(&(EV_QP_ERROR, QPN_A, u32::from(ST_LOC_QP_OP_ERR))),
                    "{what}: {ev:?}"
                );
                // Every WQE up to the last accepted index is flushed, once.
                let cqes = r.a.drain(&mut cqa);
                let idx: Vec<u16> = cqes.iter().map(|c| c.wqe_index).collect();
                assert_eq!(idx, (0..first).collect::<Vec<u16>>(), "{what}");
                assert!(cqes.iter().all(|c| c.status == ST_WR_FLUSH_ERR));
            }
        }
    }
}

#[test]
fn consumer_indexes_moving_backwards_or_past_the_producer_are_ignored() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, |_| {});
    let src = r.a.buffer(SRC_VA, 64, 0);
    r.a.put(src, &[1; 64]);
    r.b.buffer(DST_VA, 4096, PTE_WRITE);
    for _ in 0..3 {
        r.a.post(&mut qpa, wqe(64, DST_VA, None));
    }
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    assert_eq!(r.a.d.audits().cq_ci_ignored, 0);
    let db = DB_BASE + DB_CQ;
    r.a.wr(db, 1 << 16 | 1);
    r.a.wr(db, 1 << 16 | 4);
    assert_eq!(r.a.d.audits().cq_ci_ignored, 2, "backwards, past");
    assert_eq!(r.a.d.ports[0].cqs[&1].ci, 2);
    r.a.wr(db, 1 << 16 | 3);
    assert_eq!(r.a.d.ports[0].cqs[&1].ci, 3, "up to the producer");
    assert_eq!(r.a.d.audits().cq_ci_ignored, 2);
    assert_eq!(r.a.d.audits().bad_doorbells, 0);
}

#[test]
fn stale_and_bogus_naks_do_nothing() {
    let (mut r, mut cqa, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, |_| {});
    let src = r.a.buffer(SRC_VA, 64, 0);
    r.a.put(src, &[1; 64]);
    r.b.buffer(DST_VA, 4096, PTE_WRITE);
    r.a.post(&mut qpa, wqe(64, DST_VA, None));
    r.run();
    assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS);
    let eb = r.b.d.ports[0].ep;
    let ea = r.a.d.ports[0].ep;
    // PSN 1000 was acknowledged, 1001 never sent.
    for psn in [1000, 1001, 5000] {
        for syndrome in [
            aeth::NAK_REMOTE_ACCESS,
            aeth::NAK_INVALID_REQ,
            aeth::NAK_REMOTE_OP,
            aeth::NAK_PSN_SEQ,
        ] {
            let nak = Packet {
                src: eb,
                dst: ea,
                opcode: op::ACK,
                dqpn: QPN_A,
                psn,
                aeth: Some((syndrome, 0)),
                ..Default::default()
            };
            r.a.d.receive(0, &nak.encode(1), r.a.now);
        }
    }
    assert_eq!(r.a.ctx(QPN_A).state, QPS_RTS);
    assert!(r.a.poll(&mut cqa).is_none());
}

// ---- Fuzzing -----------------------------------------------------------

/// "KIND N" pairs of a fuzz reply line.
fn counts(line: &str) -> HashMap<String, u32> {
    let w: Vec<&str> = line.split_whitespace().collect();
    w.windows(2)
        .filter_map(|p| Some((p[0].to_string(), p[1].parse().ok()?)))
        .collect()
}

#[test]
fn fuzz_cqe_writes_what_it_reports() {
    let mut d = Dev::new(1, |_| {});
    let mut cq = d.cq(1, CQ_VA, 6);
    d.cq(2, CQ_VA + 0x1_0000, 4);
    let peer = Endpoint {
        mac: [2, 0, 0, 0, 0, 9],
        ip: Gid::v4([10, 9, 9, 9]),
    };
    d.qp(10, peer, 1, (1, 0x55), |_| {});
    d.qp(11, peer, 1, (1, 0), |c| c.flags = 0);
    d.qp(12, peer, 1, (1, 0x66), |c| c.cqn = 2);
    d.wr(DB_BASE + DB_CQ_ARM, 1 << 16);
    let line = d.d.fuzz_cqe(0, 1, 40, 7).unwrap();
    let c = counts(&line);
    assert!(line.starts_with("fuzz-cqe port 0 cq 1 injected "), "{line}");
    assert_eq!(c["injected"] + c["not_injected"], 40);
    assert_eq!(c["visible"] + c["stale_owner"], c["injected"]);
    assert!(c["visible"] <= 32, "at most half the ring");
    for k in fuzz::CQE_KINDS {
        assert!(c.contains_key(k), "{k} in {line}");
    }
    let got = d.drain(&mut cq);
    assert_eq!(got.len() as u32, c["visible"], "{line}");
    let ev = d.events();
    assert_eq!(
        ev.iter().filter(|e| e.0 == EV_COMPLETION).count(),
        1,
        "{ev:?}"
    );
    let known = |q: u32| [10, 11, 12].contains(&q);
    let n = |f: &dyn Fn(&Cqe) -> bool| got.iter().filter(|c| f(c)).count() as u32;
    assert!(n(&|e| !known(e.qpn)) >= c["unknown_qpn"]);
    assert!(n(&|e| e.qpn == 12) >= c["foreign_cq"]);
    assert!(n(&|e| e.opcode != CQE_SEND && e.opcode != CQE_RECV_WRITE_IMM) >= c["bad_opcode"]);
    assert!(n(&|e| e.status > ST_RNR_RETRY_EXC_ERR) >= c["bad_status"]);
    assert!(n(&|e| e.qpn == 11 && e.opcode == CQE_RECV_WRITE_IMM) >= c["imm_not_allowed"]);
    assert!(
        n(&|e| e.qpn == 10 && e.opcode == CQE_RECV_WRITE_IMM && e.byte_len > MAX_MSG_LEN)
            >= c["long_byte_count"]
    );
    assert!(n(&|e| (e.qpn == 10 || e.qpn == 11) && e.opcode == CQE_SEND) >= c["bad_index"]);
    // The stale entries are there, with the owner bit of the last pass.
    let at = cq.bus + u64::from(cq.ci % 64) * CQE_SIZE as u64;
    if c["stale_owner"] > 0 {
        assert_ne!(d.get(at, CQE_SIZE), vec![0; CQE_SIZE]);
    }
    assert_eq!(d.d.audits().cq_ci_ignored, 0, "the consumer kept up");
    // Real completions go on after them.
    let before = d.d.ports[0].cqs[&1].pi;
    assert!(d.d.inject_qp_error(0, 10));
    assert_eq!(d.d.ports[0].cqs[&1].pi, before, "nothing outstanding");
    // The same seed writes the same; errors are reported.
    let mut e = Dev::new(1, |_| {});
    e.cq(1, CQ_VA, 6);
    e.qp(10, peer, 1, (1, 0x55), |_| {});
    e.qp(11, peer, 1, (1, 0), |c| c.flags = 0);
    e.cq(2, CQ_VA + 0x1_0000, 4);
    e.qp(12, peer, 1, (1, 0x66), |c| c.cqn = 2);
    assert_eq!(e.d.fuzz_cqe(0, 1, 40, 7).unwrap(), line);
    assert!(e.d.fuzz_cqe(0, 9, 1, 0).is_err(), "no CQ 9");
    // Whatever the seed, nothing breaks; a consumer that takes what is
    // visible keeps the indexes in step.
    for seed in 0..200 {
        let ci = e.d.ports[0].cqs[&1].pi;
        e.wr(DB_BASE + DB_CQ, 1 << 16 | (ci & 0xffff));
        let line = e.d.fuzz_cqe(0, 1, 100, seed).unwrap();
        let pi = e.d.ports[0].cqs[&1].pi;
        assert_eq!(pi.wrapping_sub(ci), counts(&line)["visible"], "{line}");
    }
    assert_eq!(e.d.audit(), 0);
    assert_eq!(e.d.audits().cq_ci_ignored, 0);
    assert!(!e.d.ports[0].cqs[&1].broken);
}

#[test]
fn fuzz_eqe_writes_what_it_reports_and_the_queue_goes_on() {
    let mut d = Dev::new(1, |o| o.ports = 2);
    d.cq(1, CQ_VA, 4);
    let m = Mutex::new(d.d);
    let line = fuzz::fuzz_eqe(&m, 24, 3).unwrap();
    d.d = m.into_inner().unwrap();
    let c = counts(&line);
    assert!(line.starts_with("fuzz-eqe injected "), "{line}");
    for k in fuzz::EQE_KINDS {
        assert!(c.contains_key(k), "{k} in {line}");
    }
    assert!(c["skipped"] > 0, "the seed draws a skipped entry: {line}");
    assert_eq!(
        c["visible"],
        c["bad_port"] + c["unknown_type"] + c["unknown_object"] + 2 * c["skipped"]
    );
    // Raw entries: (type, port, data0).
    let mut got = Vec::new();
    loop {
        let at = d.eq + u64::from(d.eq_ci % (1 << EQ_LOG)) * EQE_SIZE as u64;
        let e = d.get(at, EQE_SIZE);
        if (e[15] & 1 != 0) != ((d.eq_ci >> EQ_LOG) & 1 == 0) {
            break;
        }
        got.push((e[0], e[1], u32::from_le_bytes(e[4..8].try_into().unwrap())));
        d.eq_ci += 1;
    }
    d.wr(EQ_CI, d.eq_ci);
    assert_eq!(got.len() as u32, c["visible"], "{line}: {got:?}");
    assert_eq!(
        d.rd(EQ_PI),
        d.eq_ci,
        "the producer is where the consumer is"
    );
    assert!(got.iter().all(|e| e.0 != EV_DEVICE_FATAL));
    assert!(got.iter().filter(|e| e.1 >= 2).count() as u32 >= c["bad_port"]);
    assert!(
        got.iter()
            .filter(|e| e.0 == 0 || e.0 > EV_COMPLETION)
            .count() as u32
            >= c["unknown_type"] + 2 * c["skipped"]
    );
    for e in &got {
        if matches!(e.0, EV_COMPLETION | EV_CQ_OVERFLOW) {
            assert_ne!(e.2, 1, "CQ 1 exists");
        }
    }
    // The next real event is the next entry.
    d.d.set_link(1, false);
    assert_eq!(d.events(), vec![(EV_PORT_DOWN, 0, 0)]);
    // Same seed, same entries (a fresh device).
    let mut e = Dev::new(1, |o| o.ports = 2);
    e.cq(1, CQ_VA, 4);
    let m = Mutex::new(e.d);
    assert_eq!(fuzz::fuzz_eqe(&m, 24, 3).unwrap(), line);
    // Many at once: at most half the queue, never full.
    let big = fuzz::fuzz_eqe(&m, 1000, 4).unwrap();
    let c = counts(&big);
    assert!(c["visible"] <= 32 && c["not_injected"] > 0, "{big}");
    let d = m.into_inner().unwrap();
    assert_eq!(d.eq_dropped(), 0);
    assert_eq!(d.audit(), 0);
}

#[test]
fn fuzz_regs_serves_bogus_reads_then_stops() {
    let mut d = Dev::new(1, |_| {});
    d.d.fuzz_regs(10, 5, fuzz::reg_classes("cmd_status").unwrap());
    for _ in 0..10 {
        let s = d.cmd(CMD_RKEY_REVOKE, 0, &7u32.to_le_bytes());
        assert!(
            s != 0 && ![2, 5, 16, 17, 22, 95].contains(&s),
            "a bogus status {s:#x}"
        );
        assert_eq!(d.rd(STATUS), STATUS_READY, "another class");
    }
    assert_eq!(d.cmd(CMD_RKEY_REVOKE, 0, &7u32.to_le_bytes()), 0);
    let (left, served) = d.d.fuzz_regs_state();
    assert_eq!(
        (left, served.get("cmd_status"), served.total()),
        (0, 10, 10)
    );
    // The default classes: the registers a driver reads at run time.
    d.d.fuzz_regs(1000, 6, fuzz::REG_DEFAULT);
    let real = PORT_BASE + PORT_MAC_LO;
    let mac = d.d.ports[0].ep.mac;
    for _ in 0..20 {
        assert_eq!(d.rd(ID), ID_MAGIC, "not fuzzed");
        assert_eq!(d.rd(real).to_le_bytes()[..4], mac[..4], "opt-in only");
    }
    let bogus = (0..50).filter(|_| d.rd(EQ_PI) != 0).count();
    assert_eq!(bogus, 50);
    let _ = (d.rd(STATUS), d.rd(IRQ_CAUSE), d.rd(PORT_BASE + PORT_STATE));
    let (left, served) = d.d.fuzz_regs_state();
    assert_eq!(left, 1000 - 53);
    assert_eq!(
        served.to_string(),
        "status 1 irq_cause 1 cmd_status 10 cmd_data 0 eq 50 mmu_fault 0 port 1 port_addr 0"
    );
    d.d.fuzz_regs(0, 0, 0);
    assert_eq!(d.rd(EQ_PI), 0);
}

#[test]
fn fuzz_wire_survives_counts_and_lands_nothing() {
    for strict_mode in [false, true] {
        let (mut r, _, _, _) = Rig::new(6, |o| o.strict = strict_mode, |_| {}, region(2 * 4096));
        let dst = r.b.buffer(DST_VA - 4096, 4 * 4096, PTE_WRITE);
        let mut total = HashMap::<String, u32>::new();
        for seed in 0..20 {
            let before = r.b.counters();
            let lines = r.b.d.fuzz_wire(0, 200, seed).unwrap();
            assert_eq!(lines.len(), 2);
            let (k, m) = (counts(&lines[0]), counts(&lines[1]));
            assert!(lines[0].starts_with("fuzz-wire port 0 injected 200 "));
            assert!(lines[1].starts_with("fuzz-wire port 0 moved rx "));
            let after = r.b.counters();
            assert_eq!(m["icrc_errors"], k["bad_icrc"], "{lines:?}");
            assert_eq!(m["icrc_errors"], after.icrc_errors - before.icrc_errors);
            let dropped = [
                "truncated",
                "bad_opcode",
                "bad_qpn",
                "not_for_port",
                "bad_icrc",
                "bad_pad",
            ]
            .iter()
            .map(|x| k[*x])
            .sum::<u32>();
            assert!(m["rx_drops"] >= dropped, "{lines:?}");
            for (x, n) in k {
                *total.entry(x).or_default() += n;
            }
            // The responder may have gone to ERR: bring it back.
            let ea = r.a.d.ports[0].ep;
            assert_eq!(r.b.cmd(CMD_QP_DESTROY, QPN_B, &[]), 0);
            r.b.qp(QPN_B, ea, QPN_A, (KEY_A, KEY_B), region(2 * 4096));
        }
        for k in fuzz::WIRE_KINDS {
            assert!(total[k] > 0, "{k} never drawn: {total:?}");
        }
        assert!(
            r.b.get(dst, 4 * 4096).iter().all(|&x| x == 0),
            "nothing landed"
        );
        assert_eq!((r.b.d.audit(), r.b.d.stale_translations()), (0, 0));
        // Without a QP to aim at.
        let mut d = Dev::new(3, |_| {});
        let lines = d.d.fuzz_wire(0, 500, 1).unwrap();
        let k = counts(&lines[0]);
        assert_eq!(k["psn"] + k["wild_reth"], 0, "{lines:?}");
        assert_eq!(counts(&lines[1])["rx"], k["bad_qpn"] + k["garbage"]);
    }
}

// ---- Addresses and Ethernet rings (1.3) ---------------------------------

fn gid6(n: u8) -> Gid {
    Gid([0xfd, 0x9a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n])
}

/// Set GID table entry `index` of port 0.
fn gid_set(d: &mut Dev, index: u32, gid: Option<Gid>) -> u32 {
    let mut data = [0u8; 20];
    if let Some(g) = gid {
        data[..16].copy_from_slice(&g.0);
        data[16] = GID_VALID as u8;
    }
    d.cmd(CMD_GID_SET, index, &data)
}

/// Two devices whose QPs address each other by GID: each has `gid(side)`
/// at GID index 3 (a is side 1, b side 2).
fn grh_rig(gid: impl Fn(u8) -> Gid, tweak: impl Fn(&mut QpCtx)) -> (Rig, TCq, TQp, TCq) {
    let mut a = Dev::new(1, |_| {});
    let mut b = Dev::new(2, |_| {});
    assert_eq!(gid_set(&mut a, 3, Some(gid(1))), 0);
    assert_eq!(gid_set(&mut b, 3, Some(gid(2))), 0);
    let (ma, mb) = (a.d.ports[0].ep.mac, b.d.ports[0].ep.mac);
    let cqa = a.cq(1, CQ_VA, 6);
    let cqb = b.cq(1, CQ_VA, 6);
    let grh = |c: &mut QpCtx| {
        c.flags |= QPF_GRH;
        c.sgid_index = 3;
        c.hop_limit = 5;
        c.tclass = 0x20;
        c.flow_label = 0x5_4321;
        tweak(c);
    };
    let qpa = a.qp(
        QPN_A,
        Endpoint {
            mac: mb,
            ip: gid(2),
        },
        QPN_B,
        (KEY_B, KEY_A),
        grh,
    );
    b.qp(
        QPN_B,
        Endpoint {
            mac: ma,
            ip: gid(1),
        },
        QPN_A,
        (KEY_A, KEY_B),
        grh,
    );
    (Rig { a, b }, cqa, qpa, cqb)
}

#[test]
fn grh_qps_write_over_ipv6_and_ipv4_gids() {
    for (gid, v6) in [
        (gid6 as fn(u8) -> Gid, true),
        (|n| Gid::v4([192, 0, 2, n]), false),
    ] {
        let (mut r, mut cqa, mut qpa, _) = grh_rig(gid, |_| {});
        let len = 3 * MTU + 5;
        let data = pattern(len, 7);
        let src = r.a.buffer(SRC_VA, len, 0);
        r.a.put(src, &data);
        let dst = r.b.buffer(DST_VA, 4 * MTU, PTE_WRITE);
        r.a.post(&mut qpa, wqe(len, DST_VA, None));
        let frames = r.sent_by_a();
        assert_eq!(frames.len(), 4);
        for f in &frames {
            let p = Packet::decode(f).unwrap();
            assert_eq!((p.src.ip, p.dst.ip), (gid(1), gid(2)));
            assert_eq!((p.hop_limit, p.tclass), (5, 0x20));
            assert_eq!(p.flow_label, if v6 { 0x5_4321 } else { 0 });
            assert_eq!(&f[12..14], if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        }
        r.deliver_to_b(&frames);
        r.run();
        assert_eq!(r.a.poll(&mut cqa).unwrap().status, ST_SUCCESS, "v6 {v6}");
        let got = r.b.get(dst, 4 * MTU);
        assert_eq!(&got[..len], &data[..]);
        assert!(got[len..].iter().all(|&x| x == 0), "nothing after");
        assert_eq!(r.b.counters().rx, 4);
    }
}

#[test]
fn grh_contexts_need_a_valid_source_of_the_destination_family() {
    let mut d = Dev::new(1, |_| {});
    d.cq(1, CQ_VA, 6);
    d.buffer(SQ_VA, WQE_SIZE << 6, PTE_RING);
    let mut ctx = QpCtx {
        log_mtu: 12,
        cqn: 1,
        sq_base: SQ_VA,
        sq_log_size: 6,
        dest_qpn: 1,
        dest: Endpoint {
            mac: [2, 0, 0, 0, 0, 9],
            ip: gid6(9),
        },
        flags: QPF_GRH,
        sgid_index: 3,
        ..Default::default()
    };
    ctx.state = QPS_INIT;
    assert_eq!(d.cmd(CMD_QP_WRITE, 5, &ctx.encode()), 0);
    ctx.state = QPS_RTR;
    assert_eq!(
        d.cmd(CMD_QP_WRITE, 5, &ctx.encode()),
        EINVAL,
        "entry 3 clear"
    );
    assert_eq!(gid_set(&mut d, 3, Some(Gid::v4([10, 1, 1, 1]))), 0);
    assert_eq!(
        d.cmd(CMD_QP_WRITE, 5, &ctx.encode()),
        EINVAL,
        "IPv4 source, IPv6 destination"
    );
    ctx.sgid_index = 200;
    assert_eq!(
        d.cmd(CMD_QP_WRITE, 5, &ctx.encode()),
        EINVAL,
        "index beyond the table"
    );
    assert_eq!(
        gid_set(&mut d, 16, Some(gid6(1))),
        EINVAL,
        "GID_SET beyond the table"
    );
    assert_eq!(gid_set(&mut d, 4, Some(gid6(1))), 0);
    ctx.sgid_index = 4;
    assert_eq!(d.cmd(CMD_QP_WRITE, 5, &ctx.encode()), 0);
    assert_eq!(d.d.ports[0].qps[&5].src_gid, gid6(1));
    // A later GID_SET does not change the QP's source.
    assert_eq!(gid_set(&mut d, 4, None), 0);
    assert_eq!(d.d.ports[0].qps[&5].src_gid, gid6(1));
    // Without GRH, GID entry 0 must be IPv4.
    let mut old = QpCtx {
        dest: Endpoint {
            mac: [2, 0, 0, 0, 0, 9],
            ip: Gid::v4([10, 9, 9, 9]),
        },
        flags: 0,
        sgid_index: 0,
        ..ctx
    };
    old.state = QPS_INIT;
    assert_eq!(d.cmd(CMD_QP_WRITE, 6, &old.encode()), 0);
    old.state = QPS_RTR;
    assert_eq!(gid_set(&mut d, 0, Some(gid6(2))), 0);
    assert_eq!(d.cmd(CMD_QP_WRITE, 6, &old.encode()), EINVAL);
    assert_eq!(gid_set(&mut d, 0, Some(Gid::v4([10, 1, 0, 1]))), 0);
    assert_eq!(d.cmd(CMD_QP_WRITE, 6, &old.encode()), 0);
    assert_eq!(d.d.ports[0].qps[&6].src_gid, Gid::v4([10, 1, 0, 1]));
    // A reset restores entry 0 to the factory address and clears the rest.
    d.wr(RESET, RESET_MAGIC);
    let ep = d.d.ports[0].ep;
    assert_eq!(d.d.ports[0].gids[0], Some(ep.ip));
    assert!(d.d.ports[0].gids[1..].iter().all(Option::is_none));
}

/// Port 0's Ethernet rings: `1 << log` descriptors each, receive buffers
/// of `buf` bytes posted in every receive descriptor.
struct Rings {
    tx: u64,
    rx: u64,
    bufs: Vec<u64>,
    log: u32,
    tx_pi: u16,
}

const ETH0: u64 = ETH_BASE;

impl Dev {
    fn rings(&mut self, log: u32, buf: usize) -> Rings {
        let n = 1usize << log;
        let tx = self.alloc(n * ETH_DESC_SIZE);
        let rx = self.alloc(n * ETH_DESC_SIZE);
        let bufs: Vec<u64> = (0..n).map(|_| self.alloc(buf)).collect();
        for (i, b) in bufs.iter().enumerate() {
            let d = eth::Desc {
                addr: *b,
                len: buf as u16,
                flags: 0,
            };
            self.put(rx + (i * ETH_DESC_SIZE) as u64, &d.encode());
        }
        self.wr64(ETH0 + ETH_TX_BASE_LO, tx);
        self.wr64(ETH0 + ETH_RX_BASE_LO, rx);
        self.wr(ETH0 + ETH_LOG_SIZE, log | log << 8);
        self.wr(ETH0 + ETH_CTRL, ETH_CTRL_ENABLE);
        self.wr(ETH0 + ETH_RX_PI, n as u32);
        Rings {
            tx,
            rx,
            bufs,
            log,
            tx_pi: 0,
        }
    }

    /// Queue `frame` on the transmit ring (its buffer allocated here).
    fn eth_send(&mut self, r: &mut Rings, frame: &[u8]) {
        let b = self.alloc(frame.len().max(1));
        self.put(b, frame);
        let d = eth::Desc {
            addr: b,
            len: frame.len() as u16,
            flags: 0,
        };
        let at = r.tx + u64::from(r.tx_pi % (1 << r.log)) * ETH_DESC_SIZE as u64;
        self.put(at, &d.encode());
        r.tx_pi = r.tx_pi.wrapping_add(1);
        self.wr(ETH0 + ETH_TX_PI, u32::from(r.tx_pi));
    }

    fn desc(&mut self, ring: u64, i: u16) -> eth::Desc {
        eth::Desc::decode(
            &self
                .get(ring + u64::from(i) * ETH_DESC_SIZE as u64, ETH_DESC_SIZE)
                .try_into()
                .unwrap(),
        )
    }
}

fn frame(dst: [u8; 6], ethertype: u16, len: usize, seed: u8) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0x77, 0, 0, 0, 1]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend(pattern(len - 14, seed));
    f
}

#[test]
fn eth_transmit_ring_sends_frames_as_built() {
    let mut d = Dev::new(1, |_| {});
    let mut r = d.rings(4, 2048);
    let small = frame([0xff; 6], 0x0806, 42, 1);
    let big = frame([2, 0, 0, 0, 0, 2], 0x0800, 9216, 2);
    d.eth_send(&mut r, &small);
    d.eth_send(&mut r, &big);
    assert_eq!(d.rd(ETH0 + ETH_TX_CI), 0, "sent later, not at the doorbell");
    d.d.step(d.now);
    let sent = d.d.take_tx(0, d.now);
    let mut padded = small.clone();
    padded.resize(60, 0);
    assert_eq!(sent, [padded, big]);
    assert_eq!(d.rd(ETH0 + ETH_TX_CI), 2);
    assert_eq!(d.rd(ETH0 + ETH_TX_FRAMES), 2);
    for i in 0..2 {
        assert_eq!(d.desc(r.tx, i).flags, ETH_DESC_DONE);
    }
    assert_eq!(d.counters().tx, 0, "not RoCE frames");
    // Lengths out of range are refused, the frame not sent.
    for len in [13, 9217] {
        d.eth_send(&mut r, &vec![0xee; len]);
    }
    d.d.step(d.now);
    assert!(d.d.take_tx(0, d.now).is_empty());
    assert_eq!(d.desc(r.tx, 2).flags, ETH_DESC_DONE | ETH_DESC_ERROR);
    assert_eq!(d.desc(r.tx, 3).flags, ETH_DESC_DONE | ETH_DESC_ERROR);
    assert_eq!((d.rd(ETH0 + ETH_TX_CI), d.rd(ETH0 + ETH_ERRORS)), (4, 2));
    // A link that is down finishes frames without sending them.
    d.d.set_link(0, false);
    d.eth_send(&mut r, &small);
    d.d.step(d.now);
    assert!(d.d.take_tx(0, d.now).is_empty());
    assert_eq!((d.rd(ETH0 + ETH_TX_CI), d.rd(ETH0 + ETH_TX_FRAMES)), (5, 2));
    // A producer index far ahead sends one ring's worth.
    d.d.set_link(0, true);
    d.wr(ETH0 + ETH_TX_PI, u32::from(r.tx_pi.wrapping_add(100)));
    d.d.step(d.now);
    assert_eq!(d.rd(ETH0 + ETH_TX_CI), 5 + 16);
    // A descriptor ring outside memory: audited, the rings stop.
    let audit = d.d.audit();
    d.wr(ETH0 + ETH_CTRL, 0);
    d.wr64(ETH0 + ETH_TX_BASE_LO, 0x4000);
    d.wr(ETH0 + ETH_CTRL, ETH_CTRL_ENABLE);
    d.wr(ETH0 + ETH_TX_PI, 1);
    d.d.step(d.now);
    assert_eq!(d.d.audit(), audit + 1);
    assert_eq!(d.rd(ETH0 + ETH_CTRL) & ETH_CTRL_ENABLE, 0);
}

#[test]
fn eth_receive_ring_takes_what_the_filter_and_buffers_allow() {
    let mut d = Dev::new(1, |_| {});
    let mac = d.d.ports[0].ep.mac;
    let r = d.rings(4, 1600);
    // Poison the buffers: what follows a frame must stay as it was.
    for &b in &r.bufs {
        d.put(b, &[0xa5; 1600]);
    }
    let f = frame(mac, 0x0800, 100, 3);
    d.d.receive(0, &f, d.now);
    assert_eq!(d.rd(ETH0 + ETH_RX_CI), 1);
    let desc = d.desc(r.rx, 0);
    assert_eq!((desc.len, desc.flags), (100, ETH_DESC_DONE));
    let got = d.get(r.bufs[0], 1600);
    assert_eq!(&got[..100], &f[..]);
    assert!(
        got[100..].iter().all(|&x| x == 0xa5),
        "nothing past the frame"
    );
    // Broadcast taken; another unicast MAC and multicast filtered.
    d.d.receive(0, &frame([0xff; 6], 0x0806, 60, 4), d.now);
    d.d.receive(0, &frame([2, 9, 9, 9, 9, 9], 0x0800, 60, 5), d.now);
    d.d.receive(0, &frame([0x33, 0x33, 0, 0, 0, 1], 0x86dd, 80, 6), d.now);
    assert_eq!(
        (d.rd(ETH0 + ETH_RX_CI), d.rd(ETH0 + ETH_RX_FILTERED)),
        (2, 2)
    );
    // allmulti takes multicast, promisc everything.
    d.wr(ETH0 + ETH_CTRL, ETH_CTRL_ENABLE | ETH_CTRL_ALLMULTI);
    d.d.receive(0, &frame([0x33, 0x33, 0, 0, 0, 1], 0x86dd, 80, 6), d.now);
    d.d.receive(0, &frame([2, 9, 9, 9, 9, 9], 0x0800, 60, 5), d.now);
    assert_eq!(
        (d.rd(ETH0 + ETH_RX_CI), d.rd(ETH0 + ETH_RX_FILTERED)),
        (3, 3)
    );
    d.wr(ETH0 + ETH_CTRL, ETH_CTRL_ENABLE | ETH_CTRL_PROMISC);
    d.d.receive(0, &frame([2, 9, 9, 9, 9, 9], 0x0800, 60, 5), d.now);
    assert_eq!(d.rd(ETH0 + ETH_RX_CI), 4);
    // Longer than its buffer: dropped, the descriptor says so.
    d.d.receive(0, &frame(mac, 0x0800, 1601, 7), d.now);
    let desc = d.desc(r.rx, 4);
    assert_eq!((desc.len, desc.flags), (0, ETH_DESC_DONE | ETH_DESC_ERROR));
    assert_eq!((d.rd(ETH0 + ETH_RX_CI), d.rd(ETH0 + ETH_ERRORS)), (5, 1));
    assert!(d.get(r.bufs[4], 1600).iter().all(|&x| x == 0xa5));
    // No buffer left: dropped and counted.
    for i in 0..11 {
        d.d.receive(0, &frame(mac, 0x0800, 60, i), d.now);
    }
    assert_eq!(
        (d.rd(ETH0 + ETH_RX_CI), d.rd(ETH0 + ETH_RX_FRAMES)),
        (16, 15)
    );
    d.d.receive(0, &frame(mac, 0x0800, 60, 99), d.now);
    assert_eq!((d.rd(ETH0 + ETH_RX_CI), d.rd(ETH0 + ETH_RX_NOBUF)), (16, 1));
    // Posting a buffer again (descriptor 0, reused) takes the next frame.
    d.wr(ETH0 + ETH_RX_PI, 17);
    d.d.receive(0, &frame(mac, 0x0800, 70, 8), d.now);
    assert_eq!(d.rd(ETH0 + ETH_RX_CI), 17);
    assert_eq!(d.desc(r.rx, 0).len, 70);
}

#[test]
fn eth_arm_raises_one_event_when_an_index_moves() {
    let mut d = Dev::new(1, |_| {});
    let mac = d.d.ports[0].ep.mac;
    let mut r = d.rings(4, 256);
    d.events();
    d.wr(ETH0 + ETH_ARM, 0);
    assert!(d.events().is_empty(), "nothing moved yet");
    d.d.receive(0, &frame(mac, 0x0800, 60, 1), d.now);
    d.d.receive(0, &frame(mac, 0x0800, 60, 2), d.now);
    assert_eq!(
        d.events(),
        [(EV_ETH, 1, 0)],
        "one event, at the first frame"
    );
    d.eth_send(&mut r, &frame([0xff; 6], 0x0800, 60, 3));
    d.d.step(d.now);
    assert!(d.events().is_empty(), "not armed");
    // Armed with what the driver saw (rx 1, tx 0): behind, so at once.
    d.wr(ETH0 + ETH_ARM, 1);
    assert_eq!(d.events(), [(EV_ETH, 2, 1)]);
    d.wr(ETH0 + ETH_ARM, 1 << 16 | 2);
    d.eth_send(&mut r, &frame([0xff; 6], 0x0800, 60, 4));
    assert!(d.events().is_empty());
    d.d.step(d.now);
    assert_eq!(d.events(), [(EV_ETH, 2, 2)], "a transmit completion");
}

#[test]
fn eth_rings_get_what_is_not_roce_for_the_port() {
    let (mut r, _, mut qpa, _) = Rig::new(6, |_| {}, |_| {}, |_| {});
    let ip_b = r.b.d.ports[0].ep.ip;
    r.b.rings(4, 2048);
    // ARP for b's address reaches the ring; the device does not answer.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    arp.extend_from_slice(&ip_b.to_v4().unwrap());
    r.b.d.receive(0, &arp, r.b.now);
    assert!(
        r.b.d.take_tx(0, r.b.now).is_empty(),
        "no ARP reply from the device"
    );
    assert_eq!(r.b.rd(ETH0 + ETH_RX_CI), 1);
    // RoCE to b's GID goes to the engine, not the ring.
    let len = 100;
    let src = r.a.buffer(SRC_VA, len, 0);
    r.a.put(src, &pattern(len, 1));
    r.b.buffer(DST_VA, 4096, PTE_WRITE);
    r.a.post(&mut qpa, wqe(len, DST_VA, None));
    let frames = r.sent_by_a();
    r.deliver_to_b(&frames);
    assert_eq!((r.b.counters().rx, r.b.rd(ETH0 + ETH_RX_CI)), (1, 1));
    // The same frame to an address b does not have: the ring's.
    let mut other = frames[0].clone();
    other[ETH_HLEN_T + 16..ETH_HLEN_T + 20].copy_from_slice(&[10, 66, 0, 1]);
    crate::roce::reseal(&mut other);
    r.b.d.receive(0, &other, r.b.now);
    assert_eq!((r.b.counters().rx, r.b.rd(ETH0 + ETH_RX_CI)), (1, 2));
    // Once b has that address (GID_SET), the engine takes it.
    assert_eq!(gid_set(&mut r.b, 1, Some(Gid::v4([10, 66, 0, 1]))), 0);
    r.b.d.receive(0, &other, r.b.now);
    assert_eq!((r.b.counters().rx, r.b.rd(ETH0 + ETH_RX_CI)), (2, 2));
    // To b's address but another MAC: the ring's filter drops it.
    let mut wrong_mac = frames[0].clone();
    wrong_mac[..6].copy_from_slice(&[2, 1, 1, 1, 1, 1]);
    r.b.d.receive(0, &wrong_mac, r.b.now);
    assert_eq!(r.b.rd(ETH0 + ETH_RX_FILTERED), 1);
    assert_eq!(r.b.counters().rx, 2);
}

const ETH_HLEN_T: usize = crate::roce::ETH_HLEN;
