// SPDX-License-Identifier: GPL-2.0
//! Drive an emulator process the way QEMU and a driver would: over its
//! vfio-user socket, with guest memory in a memfd. Used by the
//! integration tests and the benchmark.

use crate::qp::{Cqe, QpCtx, Wqe};
use crate::regs::*;
use crate::roce::{Endpoint, Gid, Packet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
};

/// Bus address where the test's guest memory starts.
pub const RAM_BASE: u64 = 0x1000_0000;

/// Guest memory: a memfd mapped here and DMA-mapped into the device.
pub struct Ram {
    file: File,
    ptr: *mut u8,
    size: usize,
    /// Bump allocator, in bytes from the start.
    next: usize,
}

impl Ram {
    pub fn new(size: usize) -> Self {
        let file = crate::mem::memfd(c"guest-ram", size).expect("memfd");
        let ptr = crate::mem::map_shared(&file, size, 0).expect("mmap");
        Self {
            file,
            ptr,
            size,
            next: 0,
        }
    }

    /// Allocate `len` bytes aligned to `align`; returns the bus address.
    pub fn alloc(&mut self, len: usize, align: usize) -> u64 {
        let start = self.next.next_multiple_of(align);
        assert!(start + len <= self.size, "test RAM exhausted");
        self.next = start + len;
        RAM_BASE + start as u64
    }

    // A view of shared memory that the device writes too, as a driver's
    // view of DMA memory is: `&self` on purpose (see SAFETY).
    #[allow(clippy::mut_from_ref)]
    pub fn slice(&self, bus: u64, len: usize) -> &mut [u8] {
        let off = (bus - RAM_BASE) as usize;
        assert!(off + len <= self.size);
        // SAFETY: in bounds of the mapping; tests are single-threaded on
        // their side and the device writes only what it was asked to.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }

    pub fn put_u64(&self, bus: u64, v: u64) {
        self.slice(bus, 8).copy_from_slice(&v.to_le_bytes());
    }
}

impl Drop for Ram {
    fn drop(&mut self) {
        // SAFETY: ptr/size are what mmap returned.
        unsafe { libc::munmap(self.ptr.cast(), self.size) };
    }
}

/// An emulator process with its vfio-user connection.
pub struct Emu {
    child: Child,
    pub dir: PathBuf,
    client: vfio_user::Client,
    pub ram: Ram,
    eventfd: File,
    /// Page-table root and next table allocation.
    pt_root: u64,
    eq_base: u64,
    eq_ci: u32,
    eq_log: u32,
}

fn eventfd() -> File {
    // SAFETY: no preconditions; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0);
    // SAFETY: fresh descriptor.
    unsafe { File::from_raw_fd(fd) }
}

/// A free UDP port pair base for links (distinct per call in a process).
pub fn udp_ports(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20000 + (std::process::id() % 2000) as u16 * 16;
    base + NEXT.fetch_add(n, Ordering::Relaxed)
}

impl Emu {
    /// Start `bin` with `args` and connect to it with `ram_mib` of guest RAM.
    pub fn start(bin: &Path, args: &[String], ram_mib: usize) -> Self {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("gaudi-emu-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("dev.sock");
        let child = Command::new(bin)
            .arg("--socket")
            .arg(&sock)
            .arg("--control")
            .arg(dir.join("ctl.sock"))
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("emu.log")).unwrap())
            .spawn()
            .expect("start emulator");
        let t0 = Instant::now();
        while !sock.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "emulator did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut client = vfio_user::Client::new(&sock).expect("vfio-user connect");
        // Memory decoding and bus mastering, as a driver's probe enables them.
        client
            .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 4, &0x0006u16.to_le_bytes())
            .unwrap();
        let ram = Ram::new(ram_mib << 20);
        client
            .dma_map(0, RAM_BASE, ram.size as u64, ram.file.as_raw_fd())
            .unwrap();
        let ev = eventfd();
        client
            .set_irqs(
                VFIO_PCI_MSIX_IRQ_INDEX,
                VFIO_IRQ_SET_ACTION_TRIGGER | VFIO_IRQ_SET_DATA_EVENTFD,
                0,
                1,
                &[ev.as_raw_fd()],
            )
            .unwrap();
        Self {
            child,
            dir,
            client,
            ram,
            eventfd: ev,
            pt_root: 0,
            eq_base: 0,
            eq_ci: 0,
            eq_log: 0,
        }
    }

    pub fn rd(&mut self, off: u64) -> u32 {
        let mut b = [0u8; 4];
        self.client
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, off, &mut b)
            .unwrap();
        u32::from_le_bytes(b)
    }

    pub fn wr(&mut self, off: u64, v: u32) {
        self.client
            .region_write(VFIO_PCI_BAR0_REGION_INDEX, off, &v.to_le_bytes())
            .unwrap();
    }

    pub fn wr64(&mut self, lo: u64, v: u64) {
        self.wr(lo, v as u32);
        self.wr(lo + 4, (v >> 32) as u32);
    }

    pub fn config_write16(&mut self, off: u64, v: u16) {
        self.client
            .region_write(VFIO_PCI_CONFIG_REGION_INDEX, off, &v.to_le_bytes())
            .unwrap();
    }

    pub fn region_read(&mut self, region: u32, off: u64, buf: &mut [u8]) {
        self.client.region_read(region, off, buf).unwrap();
    }

    /// Number of MSI-X vector 0 interrupts since the last call.
    pub fn irqs(&mut self) -> u64 {
        let mut b = [0u8; 8];
        match self.eventfd.read(&mut b) {
            Ok(8) => u64::from_le_bytes(b),
            _ => 0,
        }
    }

    /// Send a control command; returns the result lines or panics on "err".
    pub fn ctl(&self, cmd: &str) -> Vec<String> {
        let mut s = UnixStream::connect(self.dir.join("ctl.sock")).expect("control socket");
        writeln!(s, "{cmd}").unwrap();
        let mut lines = Vec::new();
        for l in BufReader::new(s).lines() {
            let l = l.unwrap();
            if l == "ok" {
                return lines;
            }
            assert!(!l.starts_with("err"), "control '{cmd}': {l}");
            lines.push(l);
        }
        panic!("control '{cmd}': connection closed");
    }

    /// A named counter from `stat`: "dma_audit", "stale_translation", ...,
    /// or "port P FIELD".
    pub fn stat(&self, key: &str) -> u64 {
        let lines = self.ctl("stat");
        let mut k = key.split_whitespace();
        let (prefix, field) = match (k.next(), k.next(), k.next()) {
            (Some(a), None, None) => (a.to_string(), a),
            (Some("port"), Some(p), Some(f)) => (format!("port {p} "), f),
            _ => panic!("bad stat key {key}"),
        };
        let line = lines
            .iter()
            .find(|l| l.starts_with(&prefix))
            .expect("stat line");
        let w: Vec<&str> = line.split_whitespace().collect();
        let i = w.iter().position(|x| *x == field).expect("stat field");
        w[i + 1].parse().unwrap()
    }

    /// Run a command; returns its CMD_STATUS.
    pub fn cmd(&mut self, opcode: u32, port: u32, index: u32, data: &[u8]) -> u32 {
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

    // ---- MMU -----------------------------------------------------------

    /// Install an empty page table and enable translation.
    pub fn mmu_enable(&mut self) {
        self.pt_root = self.ram.alloc(4096, 4096);
        self.wr64(MMU_ROOT_LO, self.pt_root);
        self.wr(MMU_CTRL, 1);
    }

    /// Map device VA `va` (4 KiB aligned) to `pages` 4 KiB pages at `bus`.
    pub fn map(&mut self, va: u64, bus: u64, pages: u64, flags: u64) {
        for i in 0..pages {
            let v = va + i * 4096;
            let mut table = self.pt_root;
            for level in 0..2 {
                let shift = 30 - 9 * level;
                let slot = table + ((v >> shift) & 0x1ff) * 8;
                let e = u64::from_le_bytes(self.ram.slice(slot, 8).try_into().unwrap());
                table = if e & PTE_VALID != 0 {
                    e & PTE_ADDR_MASK
                } else {
                    let t = self.ram.alloc(4096, 4096);
                    self.ram.put_u64(slot, t | PTE_VALID);
                    t
                };
            }
            let slot = table + ((v >> 12) & 0x1ff) * 8;
            self.ram.put_u64(slot, (bus + i * 4096) | PTE_VALID | flags);
        }
        self.wr(MMU_INVALIDATE, 1);
    }

    /// Remove the 4 KiB mappings of `pages` pages from device VA `va`;
    /// with `invalidate`, then write MMU_INVALIDATE and read a register
    /// (the invalidation has finished when the read returns), as the
    /// model asks. Without, the device may go on with what it cached.
    pub fn unmap(&mut self, va: u64, pages: u64, invalidate: bool) {
        for i in 0..pages {
            let v = va + i * 4096;
            let mut table = self.pt_root;
            for level in 0..2 {
                let shift = 30 - 9 * level;
                let slot = table + ((v >> shift) & 0x1ff) * 8;
                let e = u64::from_le_bytes(self.ram.slice(slot, 8).try_into().unwrap());
                assert!(e & PTE_VALID != 0, "unmap of {v:#x}: not mapped");
                table = e & PTE_ADDR_MASK;
            }
            self.ram.put_u64(table + ((v >> 12) & 0x1ff) * 8, 0);
        }
        if invalidate {
            self.wr(MMU_INVALIDATE, 1);
            self.rd(STATUS);
        }
    }

    // ---- Event queue ---------------------------------------------------

    pub fn eq_enable(&mut self, log: u32) {
        self.eq_base = self.ram.alloc(EQE_SIZE << log, 4096);
        self.eq_log = log;
        self.eq_ci = 0;
        self.wr64(EQ_BASE_LO, self.eq_base);
        self.wr(EQ_LOG_SIZE, log);
        self.wr(EQ_CTRL, 1);
    }

    /// Events posted since the last call: (type, port, data0, data1).
    pub fn events(&mut self) -> Vec<(u8, u8, u32, u32)> {
        let mut out = Vec::new();
        loop {
            let size = 1u32 << self.eq_log;
            let at = self.eq_base + u64::from(self.eq_ci & (size - 1)) * EQE_SIZE as u64;
            let e = self.ram.slice(at, EQE_SIZE).to_vec();
            let want = (self.eq_ci >> self.eq_log) & 1 == 0;
            if (e[15] & 1 != 0) != want {
                break;
            }
            out.push((
                e[0],
                e[1],
                u32::from_le_bytes(e[4..8].try_into().unwrap()),
                u32::from_le_bytes(e[8..12].try_into().unwrap()),
            ));
            self.eq_ci += 1;
        }
        self.wr(EQ_CI, self.eq_ci);
        out
    }
}

impl Drop for Emu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else if let Ok(log) = std::fs::read_to_string(self.dir.join("emu.log")) {
            eprintln!("--- emulator log ({}):\n{log}", self.dir.display());
        }
    }
}

/// A completion queue as a driver sees it.
pub struct TestCq {
    pub port: u32,
    pub cqn: u32,
    pub va: u64,
    pub bus: u64,
    pub log: u32,
    pub ci: u32,
}

/// A QP with its send ring, as a driver sees it.
pub struct TestQp {
    pub port: u32,
    pub qpn: u32,
    pub sq_va: u64,
    pub sq_bus: u64,
    pub sq_log: u32,
    pub pi: u32,
}

impl Emu {
    /// Create a CQ whose ring is mapped at device VA `va`.
    pub fn cq(&mut self, port: u32, cqn: u32, va: u64, log: u32) -> TestCq {
        let bytes = CQE_SIZE << log;
        let bus = self.ram.alloc(bytes, 4096);
        self.map(va, bus, bytes.div_ceil(4096) as u64, PTE_WRITE | PTE_RING);
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&va.to_le_bytes());
        d[8..12].copy_from_slice(&log.to_le_bytes());
        assert_eq!(self.cmd(CMD_CQ_CREATE, port, cqn, &d), 0, "CQ_CREATE");
        TestCq {
            port,
            cqn,
            va,
            bus,
            log,
            ci: 0,
        }
    }

    /// Poll `cq` until a CQE appears or `timeout` passes.
    pub fn poll(&mut self, cq: &mut TestCq, timeout: Duration) -> Option<Cqe> {
        let t0 = Instant::now();
        loop {
            let at = cq.bus + u64::from(cq.ci & ((1 << cq.log) - 1)) * CQE_SIZE as u64;
            let (cqe, owner) = Cqe::decode(self.ram.slice(at, CQE_SIZE));
            if owner == ((cq.ci >> cq.log) & 1 == 0) {
                cq.ci += 1;
                self.wr(
                    DB_BASE + u64::from(cq.port) * DB_STRIDE + DB_CQ,
                    cq.cqn << 16 | (cq.ci & 0xffff),
                );
                return Some(cqe);
            }
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Create a QP in RTS talking to `dest`/`dest_qpn`.
    #[allow(clippy::too_many_arguments)]
    pub fn qp(
        &mut self,
        port: u32,
        qpn: u32,
        cqn: u32,
        sq_va: u64,
        dest: Endpoint,
        dest_qpn: u32,
        rkeys: (u32, u32),
        retry: (u8, u8),
    ) -> TestQp {
        self.qp_with(port, qpn, cqn, sq_va, dest, dest_qpn, rkeys, retry, |_| {})
    }

    /// As [`Emu::qp`], with `tweak` applied to the context before it is
    /// written (a region, RNR parameters, flags).
    #[allow(clippy::too_many_arguments)]
    pub fn qp_with(
        &mut self,
        port: u32,
        qpn: u32,
        cqn: u32,
        sq_va: u64,
        dest: Endpoint,
        dest_qpn: u32,
        rkeys: (u32, u32),
        retry: (u8, u8),
        tweak: impl FnOnce(&mut QpCtx),
    ) -> TestQp {
        let sq_log = 6;
        let bytes = WQE_SIZE << sq_log;
        let sq_bus = self.ram.alloc(bytes, 4096);
        self.map(sq_va, sq_bus, bytes.div_ceil(4096) as u64, PTE_RING);
        let mut ctx = QpCtx {
            state: QPS_INIT,
            log_mtu: 12,
            retry_cnt: retry.0,
            timeout: retry.1,
            cqn,
            sq_base: sq_va,
            sq_log_size: sq_log,
            dest_qpn,
            sq_psn: 1000,
            rq_psn: 1000,
            remote_rkey: rkeys.0,
            local_rkey: rkeys.1,
            dest,
            udp_sport: qpn as u16,
            flags: QPF_REMOTE_WRITE,
            ..Default::default()
        };
        tweak(&mut ctx);
        for s in [QPS_INIT, QPS_RTR, QPS_RTS] {
            ctx.state = s;
            assert_eq!(
                self.cmd(CMD_QP_WRITE, port, qpn, &ctx.encode()),
                0,
                "QP to state {s}"
            );
        }
        TestQp {
            port,
            qpn,
            sq_va,
            sq_bus,
            sq_log,
            pi: 0,
        }
    }

    /// QP_READ: the context of `qpn` on `port` as the device has it.
    pub fn qp_read(&mut self, port: u32, qpn: u32) -> QpCtx {
        assert_eq!(self.cmd(CMD_QP_READ, port, qpn, &[]), 0, "QP_READ");
        let b: Vec<u8> = (0..QpCtx::LEN as u64 / 4)
            .flat_map(|i| self.rd(CMD_DATA + 4 * i).to_le_bytes())
            .collect();
        QpCtx::decode(&b)
    }

    /// Write `wqe` into the ring and ring the doorbell.
    pub fn post(&mut self, qp: &mut TestQp, wqe: Wqe) -> u16 {
        let idx = qp.pi as u16;
        let at = qp.sq_bus + u64::from(qp.pi & ((1 << qp.sq_log) - 1)) * WQE_SIZE as u64;
        self.ram.slice(at, WQE_SIZE).copy_from_slice(&wqe.encode());
        qp.pi += 1;
        self.wr(
            DB_BASE + u64::from(qp.port) * DB_STRIDE + DB_SQ,
            qp.qpn << 16 | (qp.pi & 0xffff),
        );
        idx
    }

    /// The endpoint of `port` as the device reports it.
    pub fn endpoint(&mut self, port: u32) -> Endpoint {
        let base = PORT_BASE + u64::from(port) * PORT_STRIDE;
        let lo = self.rd(base + PORT_MAC_LO).to_le_bytes();
        let hi = self.rd(base + PORT_MAC_HI).to_le_bytes();
        Endpoint {
            mac: [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]],
            ip: Gid::v4(self.rd(base + PORT_IPV4).to_be_bytes()),
        }
    }
}

/// A raw RoCEv2 peer on the other end of an emulator port's link: the
/// test builds the frames, so it decides what arrives when.
pub struct Peer {
    socket: UdpSocket,
    /// Where the emulator's port listens.
    emu: std::net::SocketAddr,
    pub ep: Endpoint,
}

impl Peer {
    /// A peer at UDP `local`, talking to the emulator port bound to
    /// `emu_port` (`--link P=EMU_PORT:LOCAL`), with endpoint `ep`.
    pub fn bind(local: u16, emu_port: u16, ep: Endpoint) -> Self {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, local)).expect("bind peer socket");
        Self {
            socket,
            emu: (Ipv4Addr::LOCALHOST, emu_port).into(),
            ep,
        }
    }

    /// Send `pkt` (its source is the peer, its ICRC computed).
    pub fn send(&self, pkt: &Packet<'_>) {
        let mut p = pkt.clone();
        p.src = self.ep;
        self.socket.send_to(&p.encode(1), self.emu).unwrap();
    }

    /// The next frame from the emulator, within `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        self.socket.set_read_timeout(Some(timeout)).unwrap();
        let mut buf = vec![0u8; 16384];
        match self.socket.recv(&mut buf) {
            Ok(n) => Some(buf[..n].to_vec()),
            Err(_) => None,
        }
    }

    /// The AETH (syndrome, MSN) and PSN of the next acknowledgement.
    pub fn recv_ack(&self, timeout: Duration) -> Option<(u8, u32)> {
        let t0 = Instant::now();
        while let Some(f) = self.recv(timeout.saturating_sub(t0.elapsed())) {
            if let Ok(p) = Packet::decode(&f) {
                if let Some((syndrome, _msn)) = p.aeth {
                    return Some((syndrome, p.psn));
                }
            }
        }
        None
    }
}
