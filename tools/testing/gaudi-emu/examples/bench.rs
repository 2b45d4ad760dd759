// SPDX-License-Identifier: GPL-2.0
//! Emulator-to-emulator RDMA WRITE bandwidth, two processes linked over
//! UDP on loopback. A benchmark, not a test: it prints figures.
//!
//! usage: bench [PATH-TO-gaudi-emu] [SECONDS-PER-SIZE]

use gaudi_emu::qp::Wqe;
use gaudi_emu::regs::*;
use gaudi_emu::testkit::{udp_ports, Emu};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SRC_VA: u64 = 0x4000_0000;
const DST_VA: u64 = 0x8000_0000;

fn main() {
    let mut args = std::env::args().skip(1);
    let bin = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let mut p = std::env::current_exe().unwrap();
        p.pop();
        p.pop();
        p.push("gaudi-emu");
        p
    });
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let base = udp_ports(2);
    let start = |inst: &str, l: u16, r: u16| {
        let a: Vec<String> = [
            "--ports",
            "1",
            "--instance",
            inst,
            "--link",
            &format!("0={l}:{r}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Emu::start(&bin, &a, 64)
    };
    let mut a = start("1", base, base + 1);
    let mut b = start("2", base + 1, base);
    let (ea, eb) = (a.endpoint(0), b.endpoint(0));
    let max = 1 << 20;
    for (e, flags) in [(&mut a, 0), (&mut b, PTE_WRITE)] {
        e.mmu_enable();
        e.eq_enable(6);
        let bus = e.ram.alloc(max, 4096);
        e.map(
            if flags == 0 { SRC_VA } else { DST_VA },
            bus,
            (max / 4096) as u64,
            flags,
        );
    }
    let mut cq = a.cq(0, 1, 0x10_0000, 10);
    let mut qp = a.qp(0, 7, 1, 0x20_0000, eb, 9, (1, 1), (7, 14));
    let _ = b.cq(0, 1, 0x10_0000, 10);
    let _ = b.qp(0, 9, 1, 0x20_0000, ea, 7, (1, 1), (7, 14));
    println!("emulator-to-emulator RDMA WRITE, MTU 4096, one QP, loopback UDP");
    for (size, batch) in [(4096usize, 32u32), (1 << 20, 4)] {
        let t0 = Instant::now();
        let mut bytes = 0u64;
        let mut msgs = 0u64;
        while t0.elapsed() < Duration::from_secs_f64(secs) {
            for _ in 0..batch {
                a.post(
                    &mut qp,
                    Wqe {
                        opcode: WQE_RDMA_WRITE,
                        flags: WQE_SIGNALED,
                        len: size as u32,
                        local_va: SRC_VA,
                        remote_va: DST_VA,
                        imm: 0,
                    },
                );
            }
            for _ in 0..batch {
                let c = a
                    .poll(&mut cq, Duration::from_secs(10))
                    .expect("completion");
                assert_eq!(c.status, ST_SUCCESS);
            }
            bytes += size as u64 * u64::from(batch);
            msgs += u64::from(batch);
        }
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "{:>8} B messages: {:8.1} MB/s, {:8.0} messages/s ({} messages in {:.2} s)",
            size,
            bytes as f64 / dt / 1e6,
            msgs as f64 / dt,
            msgs,
            dt
        );
    }
    println!("retransmits: {}", a.stat("port 0 retransmits"));
}
