// SPDX-License-Identifier: GPL-2.0
//! Drive an emulator process the way QEMU and a driver would: over its
//! vfio-user socket, with guest memory in a memfd. Used by the
//! integration tests.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
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

    /// The CPU time the emulator process has used, user and system (to the
    /// clock tick, 10 ms on most systems).
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("emulator's /proc stat");
        // The fields after the command name in parentheses, from field 3
        // (state): utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|x| x.parse().expect("stat field"))
            .collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_micros((f[0] + f[1]) * 1_000_000 / hz)
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
