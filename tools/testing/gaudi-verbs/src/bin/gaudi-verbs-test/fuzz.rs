// SPDX-License-Identifier: GPL-2.0

//! `fuzz-uverbs`: a seeded, reproducible fuzzer of the uverbs interface of gaudi_ib.
//!
//! Every method of the table `build.rs` derives from the uAPI headers (the driver's namespace
//! and the core's methods, with the write() commands `UVERBS_METHOD_INVOKE_WRITE` carries) is
//! called, the driver's and the creating ones more often, so that live objects exist. Seven
//! calls in ten are plausible: every attribute of the method, mandatory (or optional) flags,
//! buffers of the structures' sizes (or arrays of a few) filled field by field from the
//! structures' layouts and the fields' names (handles, descriptors, keys, addresses and QP
//! numbers the kernel returned earlier, lengths, flags, ports, the headers' constants, edge
//! values, random ones). The rest are wild: a random subset of the attributes, unknown and
//! duplicate ids, random flags and reserved fields, stale and random handles, NULL, unmapped,
//! kernel and non-canonical pointers, sizes 0, tiny, exact or bigger, unknown methods and
//! objects. A buffer the kernel may write is always the fuzzer's own and at least as long as
//! declared; a value is inline only up to 8 bytes. Now and then a QP set is created (and
//! connected to another port) through the library, random WQEs in the NIC's format are
//! written into its mapped send queue, its UMR page written (its own doorbell with random
//! producer indexes, other QPs' doorbells, other CQs' consumer indexes, any register) and its
//! mapped CQ polled.
//!
//! Call `i` of seed `s` is drawn from a generator seeded by `(s, i)` alone (only the handles
//! it names depend on what earlier calls created), so any subset of calls can be replayed
//! (`--replay`). Before each call, a line saying what it is goes to `/tmp/fuzz-calls.log`
//! (truncated every 10,000 lines). Every 500 calls and at the end (after the context is closed
//! with whatever it holds), new kernel log lines must show no splat and, with `--emu`, the
//! emulator's `dma_audit` (and `dma_no_master`, `irq_no_master`, `stale_translation` if it has
//! them) must not move.
//! On a failure the fuzzer prints the seed, then replays subsets of the calls in fresh
//! processes to find a short sequence that still fails (greedy chunk removal, 120 s at most).
//!
//! Memory stays bounded: `RLIMIT_MEMLOCK` is 64 MiB with `CAP_IPC_LOCK` dropped, so random
//! region lengths fail in `ib_umem_get()` instead of pinning the guest's memory, and the context
//! is closed and opened again after 128 objects created (or at random), which frees whatever
//! the kernel allocated for them.

use super::limits::drop_ipc_lock;
use gaudi_verbs::dv::{wqe2, QpSet, WQE2_OPCODE_LINEAR, WQE2_OPCODE_SEND};
use gaudi_verbs::table::{self, AttrSpec, Method, Role, Rule, Struct, WriteCmd};
use gaudi_verbs::uapi::{gaudi_ib_port_info, GAUDI_IB_OBJECT_QP_SET};
use gaudi_verbs::{
    find_device, ioctl_raw, Attr, Context, EmuCtl, KernelLog, ATTR_F_MANDATORY as MANDATORY,
    RDMA_DRIVER_GAUDI,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::{exit, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const EOPNOTSUPP: i32 = libc::EOPNOTSUPP;
const EPROTONOSUPPORT: i32 = libc::EPROTONOSUPPORT;
/// Kernel log lines that fail the run.
const SPLATS: [&str; 16] = [
    "BUG:",
    "WARNING:",
    "Oops",
    "KASAN",
    "UBSAN",
    "kernel BUG",
    "Call Trace",
    "circular locking",
    "list_add corruption",
    "list_del corruption",
    "blocked for more than",
    "general protection fault",
    "refcount_t:",
    "soft lockup",
    "rcu detected stall",
    "stack-protector",
];
/// Emulator counters that must not move (those it has): DMA outside guest memory, DMA and
/// interrupts without bus mastering, translations used after the driver dropped them (strict
/// mode).
const EMU_COUNTERS: [&str; 4] = [
    "dma_audit",
    "dma_no_master",
    "irq_no_master",
    "stale_translation",
];
const CHECK_EVERY: u64 = 500;
const LOG_LINES: u32 = 10_000;
/// Objects created before the context is closed and opened again.
const MAX_CREATED: u32 = 128;
/// Live handles, keys and addresses remembered per kind.
const POOL: usize = 32;
const ARENA: usize = 4 << 20;
const PAGE: u64 = 4096;
/// A call that has not returned after this long is a failure.
const HUNG: Duration = Duration::from_secs(60);
const EDGES: [u64; 22] = [
    0,
    1,
    2,
    3,
    7,
    0x7f,
    0x80,
    0xff,
    0xfff,
    0x1000,
    0x1001,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// SplitMix64.
struct Rng(u64);

impl Rng {
    /// The generator of call `index` of the run of `seed`.
    fn call(seed: u64, index: u64) -> Self {
        let mut r = Rng(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 if `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        v.get(self.below(v.len() as u64) as usize)
    }
}

/// What a field or an attribute holds, from its name.
#[derive(Clone, Copy)]
enum Class {
    /// `response`: the legacy response pointer, unused through ioctl; always 0.
    Zero,
    /// `comp_mask`, `reserved*`: mostly 0.
    Reserved,
    Handle(Option<u16>),
    Fd,
    Key,
    Addr,
    Len,
    Port,
    /// `log_*`, `state`: small numbers.
    Small,
    /// `qpn`, `cqn`, `index`: numbers of the device's queues.
    Num,
    /// `max_*`, `cqe`: counts.
    Count,
    /// `*flags`: bits.
    Flags,
    Plain,
}

/// The object whose stem ends `words` (`send_cq` -> CQ).
fn object_named(words: &str) -> Option<u16> {
    let w: Vec<&str> = words.split('_').collect();
    (0..w.len()).find_map(|k| {
        let tail = format!("OBJECT_{}", w[k..].join("_")).to_ascii_uppercase();
        table::OBJECTS
            .iter()
            .filter(|o| o.name.ends_with(&tail))
            .min_by_key(|o| o.driver)
            .map(|o| o.id)
    })
}

fn classify(name: &str) -> Class {
    let lower = name.to_ascii_lowercase();
    // The last member of a flattened field, or what follows ATTR_ in an attribute's name.
    let n = lower.rsplit('.').next().unwrap_or("");
    let n = n.split_once("_attr_").map_or(n, |(_, a)| a);
    let ends = |s: &[&str]| s.iter().any(|x| n == *x || n.ends_with(&format!("_{x}")));
    if n == "response" {
        Class::Zero
    } else if n == "comp_mask" || n.starts_with("reserved") || n == "driver_data" {
        Class::Reserved
    } else if let Some(before) = n.strip_suffix("handle") {
        Class::Handle(object_named(before.trim_end_matches('_')))
    } else if ends(&["fd", "comp_channel"]) {
        Class::Fd
    } else if n.contains("key") {
        Class::Key
    } else if ends(&["start", "addr", "va", "iova", "hca_va"]) {
        Class::Addr
    } else if ends(&["length", "len", "size", "offset"]) {
        Class::Len
    } else if n.contains("port") {
        Class::Port
    } else if ends(&["qpn", "cqn", "qp_num", "index"]) {
        Class::Num
    } else if n.starts_with("log_") || n.contains("state") || n.ends_with("mtu") {
        Class::Small
    } else if n.starts_with("max_") || ends(&["cqe", "wr_count", "sge_count", "num_sge"]) {
        Class::Count
    } else if n.ends_with("flags") {
        Class::Flags
    } else {
        Class::Plain
    }
}

/// Where a buffer attribute points.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ptr {
    Ours,
    Null,
    Unmapped,
    Kernel,
    NonCanonical,
}

#[derive(Clone)]
struct PAttr {
    attr: Attr,
    /// A buffer, for pointer attributes.
    buf: Option<(Vec<u8>, Ptr)>,
    spec: Option<&'static AttrSpec>,
    strukt: Option<&'static Struct>,
    /// The kernel writes it.
    out: bool,
}

struct Ioctl {
    method: Option<&'static Method>,
    write: Option<&'static WriteCmd>,
    object: u16,
    method_id: u16,
    driver_id: u32,
    reserved1: u64,
    attrs: Vec<PAttr>,
}

enum Call {
    Ioctl(Ioctl),
    /// A QP set's mapped queues, from this seed.
    Dv(u64),
    /// Close a file descriptor the kernel gave.
    Close(u64),
    /// Close the context with everything it holds, open a new one.
    Reopen,
}

/// A one-line description of a call.
fn describe(c: &Call) -> String {
    let c = match c {
        Call::Ioctl(c) => c,
        Call::Dv(s) => return format!("dv {s:#x}"),
        Call::Close(k) => return format!("close fd #{}", k % 1000),
        Call::Reopen => return "reopen the context".into(),
    };
    let mut s = match (c.method, c.write) {
        (Some(m), Some(w)) => format!("{} {}", m.name, w.name),
        (Some(m), None) if (m.object, m.id) == (c.object, c.method_id) => m.name.to_string(),
        _ => format!("object {} method {}", c.object, c.method_id),
    };
    if c.driver_id != RDMA_DRIVER_GAUDI || c.reserved1 != 0 {
        s += &format!(" driver_id {} reserved {:#x}", c.driver_id, c.reserved1);
    }
    for p in &c.attrs {
        let a = &p.attr;
        s += &format!(" {}", a.attr_id);
        if a.flags != MANDATORY {
            s += &format!("/f{:x}", a.flags);
        }
        if a.reserved() != 0 {
            s += &format!("/r{:x}", a.reserved());
        }
        s += &match (&p.buf, p.spec.map(|s| s.role)) {
            (Some((_, Ptr::Ours)), _) => format!("={}{}", if p.out { "out" } else { "in" }, a.len),
            (Some((_, ptr)), _) => format!("={ptr:?}{}", a.len),
            (None, Some(Role::Handle(_) | Role::New | Role::NewFd)) => format!("=h{}", a.data()),
            (None, Some(Role::Fd)) => format!("=fd{}", a.data() as i64),
            (None, _) => format!("={:#x}/{}", a.data(), a.len),
        };
    }
    s
}

fn errno_name(e: i32) -> String {
    let names = [
        (libc::EPERM, "EPERM"),
        (libc::ENOENT, "ENOENT"),
        (libc::EIO, "EIO"),
        (libc::E2BIG, "E2BIG"),
        (libc::EBADF, "EBADF"),
        (libc::EAGAIN, "EAGAIN"),
        (libc::ENOMEM, "ENOMEM"),
        (libc::EACCES, "EACCES"),
        (libc::EFAULT, "EFAULT"),
        (libc::EBUSY, "EBUSY"),
        (libc::EEXIST, "EEXIST"),
        (libc::ENODEV, "ENODEV"),
        (libc::EINVAL, "EINVAL"),
        (libc::EMFILE, "EMFILE"),
        (libc::ENOTTY, "ENOTTY"),
        (libc::ENOSPC, "ENOSPC"),
        (libc::ERANGE, "ERANGE"),
        (libc::ENOSYS, "ENOSYS"),
        (libc::EMSGSIZE, "EMSGSIZE"),
        (EPROTONOSUPPORT, "EPROTONOSUPPORT"),
        (EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ETIMEDOUT, "ETIMEDOUT"),
        // The kernel's ENOTSUPP, which should not reach user space.
        (524, "ENOTSUPP(524)"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == e)
        .map_or(format!("errno {e}"), |(_, s)| s.to_string())
}

#[derive(Default)]
struct Stats {
    calls: u64,
    succeeded: u64,
    errnos: BTreeMap<i32, u64>,
    /// (object, method) of the table called, and those answered other than "not supported".
    methods: BTreeSet<(u16, u16)>,
    answered: BTreeSet<(u16, u16)>,
    writes: BTreeSet<u32>,
    writes_answered: BTreeSet<u32>,
    dv: u64,
}

impl Stats {
    fn count(&mut self, c: &Ioctl, r: i32) {
        let supported = r != EOPNOTSUPP && r != EPROTONOSUPPORT;
        if r == 0 {
            self.succeeded += 1;
        } else {
            *self.errnos.entry(r).or_default() += 1;
        }
        if let Some(m) = c
            .method
            .filter(|m| (m.object, m.id) == (c.object, c.method_id))
        {
            self.methods.insert((m.object, m.id));
            if supported {
                self.answered.insert((m.object, m.id));
            }
            if let Some(w) = c.write {
                self.writes.insert(w.command);
                if supported {
                    self.writes_answered.insert(w.command);
                }
            }
        }
    }
}

/// The calls' record, for after a crash.
struct CallLog {
    file: File,
    lines: u32,
}

impl CallLog {
    fn record(&mut self, line: &str) {
        if self.lines >= LOG_LINES {
            let _ = self.file.set_len(0);
            let _ = self.file.rewind();
            self.lines = 0;
        }
        let _ = self.file.write_all(format!("{line}\n").as_bytes());
        self.lines += 1;
    }
}

/// What the fuzzer holds: the context, and what the kernel returned.
struct State {
    ctx: Option<Context>,
    ports: Vec<gaudi_ib_port_info>,
    handles: BTreeMap<u16, Vec<u32>>,
    fds: Vec<RawFd>,
    keys: Vec<u32>,
    vas: Vec<u64>,
    /// QP and CQ numbers.
    nums: Vec<u32>,
    sets: Vec<QpSet>,
    created: u32,
    /// Our own file descriptors are at most this: never closed as the kernel's.
    own_fds: RawFd,
    arena: u64,
    guard: u64,
    classes: HashMap<&'static str, Class>,
    /// The current call is wild (malformed headers, flags, pointers, unknown attributes)
    /// rather than plausible (what a library would send, with random values).
    wild: bool,
    /// Cumulative weights of the table's methods.
    weights: Vec<u64>,
}

fn mmap(len: usize, prot: i32) -> u64 {
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        die(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    p as u64
}

fn push<T>(v: &mut Vec<T>, x: T) {
    v.push(x);
    if v.len() > POOL {
        v.remove(0);
    }
}

fn put(b: &mut [u8], off: usize, size: usize, v: u64) {
    let n = size.min(8);
    if let Some(d) = b.get_mut(off..off + n) {
        d.copy_from_slice(&v.to_le_bytes()[..n]);
    }
}

fn get(b: &[u8], off: usize, size: usize) -> Option<u64> {
    let s = b.get(off..off + size.min(8))?;
    let mut w = [0u8; 8];
    w[..s.len()].copy_from_slice(s);
    Some(u64::from_le_bytes(w))
}

impl State {
    /// The fuzzer's state, with a context unless `device` is false (the unit tests).
    fn new(device: bool) -> Self {
        let weights = table::METHODS
            .iter()
            .scan(0, |sum, m| {
                *sum += if m.name == "UVERBS_METHOD_INVOKE_WRITE" {
                    30
                } else {
                    (if m.driver { 6 } else { 1 }) * if m.creates { 3 } else { 1 }
                };
                Some(*sum)
            })
            .collect();
        let mut st = State {
            ctx: None,
            ports: Vec::new(),
            handles: BTreeMap::new(),
            fds: Vec::new(),
            keys: Vec::new(),
            vas: Vec::new(),
            nums: Vec::new(),
            sets: Vec::new(),
            created: 0,
            own_fds: 0,
            arena: mmap(ARENA, libc::PROT_READ | libc::PROT_WRITE),
            guard: mmap(PAGE as usize, libc::PROT_NONE),
            classes: HashMap::new(),
            wild: false,
            weights,
        };
        if device {
            st.open();
            // Opened after the kernel log, the emulator's port and the call log.
            st.own_fds = st.ctx().file().as_raw_fd();
        }
        st
    }

    fn ctx(&self) -> &Context {
        self.ctx.as_ref().expect("an open context")
    }

    fn open(&mut self) {
        let path = find_device().unwrap_or_else(|e| die(format!("find device: {e}")));
        let ctx = Context::open(&path).unwrap_or_else(|e| die(format!("open a context: {e}")));
        self.ports = (1..=ctx.resp.num_ports)
            .map(|p| ctx.query_port(p.into()).unwrap_or_default())
            .collect();
        self.ctx = Some(ctx);
        self.created = 0;
    }

    /// Unmap the QP sets, close the kernel's file descriptors and the context: the kernel
    /// destroys whatever it still holds.
    fn close(&mut self) {
        self.sets.clear();
        self.ctx = None;
        self.handles.clear();
        self.fds.clear();
        // Every descriptor above ours is one the kernel created (event files, dma-bufs).
        let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        for fd in open.into_iter().filter(|fd| *fd > self.own_fds) {
            // SAFETY: not one of ours (those are at most `own_fds`, the context's too).
            unsafe { libc::close(fd) };
        }
    }

    /// Remember `fd`, a descriptor the kernel returned; the oldest goes when there are many.
    fn add_fd(&mut self, fd: u64) {
        let Ok(fd) = RawFd::try_from(fd) else { return };
        if fd > self.own_fds && !self.fds.contains(&fd) {
            self.fds.push(fd);
            if self.fds.len() > POOL {
                // SAFETY: a descriptor the kernel created for us; nothing else uses it.
                unsafe { libc::close(self.fds.remove(0)) };
            }
        }
    }

    fn class(&mut self, name: &'static str) -> Class {
        *self.classes.entry(name).or_insert_with(|| classify(name))
    }

    /// A handle: of a live object of type `obj` mostly, of another type, small or random.
    /// Like every draw that looks at what the kernel returned, it takes as many numbers from
    /// `r` whatever the state, so that a call keeps its shape when earlier calls are left out
    /// (shrinking).
    fn handle(&self, r: &mut Rng, obj: Option<u16>) -> u32 {
        let (k, x) = (r.below(10), r.next());
        let at = |v: &[u32]| (!v.is_empty()).then(|| v[(x % v.len() as u64) as usize]);
        let live = obj.and_then(|o| self.handles.get(&o)).and_then(|v| at(v));
        match (k, live) {
            (0..=6, Some(h)) => h,
            (0..=7, _) => {
                let all: Vec<u32> = self.handles.values().flatten().copied().collect();
                at(&all).unwrap_or((x % 8) as u32)
            }
            (8, _) => (x % 64) as u32,
            _ => x as u32,
        }
    }

    fn fd(&self, r: &mut Rng) -> i64 {
        let (k, x) = (r.below(10), r.next());
        match k {
            0..=5 if !self.fds.is_empty() => {
                i64::from(self.fds[(x % self.fds.len() as u64) as usize])
            }
            0..=6 => self
                .ctx
                .as_ref()
                .map_or(-1, |c| c.file().as_raw_fd().into()),
            7 => -1,
            8 => (x % 1024) as i64,
            _ => x as i64,
        }
    }

    fn value(&self, r: &mut Rng) -> u64 {
        match r.below(20) {
            0..=5 => r.below(16),
            6..=9 => r
                .pick(&EDGES)
                .unwrap()
                .wrapping_add(r.below(3).wrapping_sub(1)),
            10..=11 => r.pick(table::CONSTANTS).copied().unwrap_or(0),
            12..=13 => r.next(),
            14 => r.next() as u32 as u64,
            15 => 1 << r.below(64),
            16 => self.handle(r, None).into(),
            17 => r.pick(&self.keys).copied().unwrap_or(0).into(),
            18 => r.pick(&self.vas).copied().unwrap_or(0),
            _ => self.arena + r.below(ARENA as u64),
        }
    }

    fn value_of(&self, r: &mut Rng, class: Class) -> u64 {
        let nports = self.ports.len() as u64;
        match (class, r.below(10)) {
            (Class::Zero, _) => 0,
            (Class::Reserved, 0) => self.value(r),
            (Class::Reserved, _) => 0,
            (Class::Handle(o), _) => self.handle(r, o).into(),
            (Class::Fd, _) => self.fd(r) as u64,
            (Class::Key, 0..=5) => r.pick(&self.keys).copied().unwrap_or(0).into(),
            (Class::Key, 6..=7) => 0,
            (Class::Addr, 0..=3) => self.arena + PAGE * r.below(ARENA as u64 / PAGE),
            (Class::Addr, 4) => self.arena + r.below(ARENA as u64),
            (Class::Addr, 5..=6) => r.pick(&self.vas).copied().unwrap_or(0) + r.below(2 * PAGE),
            (Class::Len, 0..=2) => PAGE * (1 + r.below(16)),
            (Class::Len, 3..=4) => 1 + r.below(64),
            (Class::Len, 5) => ARENA as u64 + r.below(2),
            (Class::Port, 0..=7) => r.below(nports + 2),
            (Class::Small, 0..=7) => r.below(24),
            (Class::Num, 0..=4) => r.pick(&self.nums).copied().unwrap_or(0).into(),
            (Class::Num, 5..=7) => r.below(64),
            (Class::Count, 0..=3) => 1 << r.below(15),
            (Class::Count, 4..=6) => r.below(17),
            (Class::Flags, 0..=3) => 0,
            (Class::Flags, 4..=7) => 1 << r.below(16),
            _ => self.value(r),
        }
    }

    /// A buffer length for `st`, or any.
    fn buf_len(&self, r: &mut Rng, st: Option<&Struct>) -> usize {
        let size = st.map_or(r.below(64) as usize, |s| s.size as usize);
        let extent = st.map_or(size, |s| {
            s.fields
                .iter()
                .map(|f| (f.offset + f.size * f.count.max(1)) as usize)
                .max()
                .unwrap_or(0)
                .max(size)
        });
        if !self.wild && r.chance(80) {
            // Its size, the first element of a flexible array, or an array of a few.
            return match r.below(10) {
                0..=5 => size,
                6..=7 => extent,
                _ => size * (2 + r.below(24) as usize),
            }
            .min(65535);
        }
        let len = match r.below(20) {
            0 => 0,
            1..=2 => 1 + r.below(8) as usize,
            3..=10 => size,
            11 => st.map_or(size, |s| s.data_end as usize),
            12..=13 => (size + r.below(17) as usize).saturating_sub(8),
            14..=15 => extent + 8 * r.below(4) as usize,
            16 => 4096,
            17 => r.below(65536) as usize,
            _ => r.below(256) as usize,
        };
        len.min(65535)
    }

    /// Fill `b` as a `st`, field by field, from the fields' names.
    fn fill(&mut self, r: &mut Rng, st: Option<&'static Struct>, b: &mut [u8]) {
        let Some(st) = st.filter(|_| !self.wild || r.chance(80)) else {
            for w in b.chunks_mut(8) {
                let v = if r.chance(50) {
                    self.value(r)
                } else {
                    r.next()
                };
                w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
            }
            return;
        };
        for f in st.fields {
            let class = self.class(f.name);
            for e in 0..f.count.clamp(1, 16) {
                if !r.chance(20) {
                    let v = self.value_of(r, class);
                    put(b, (f.offset + e * f.size) as usize, f.size as usize, v);
                }
            }
        }
    }

    /// Remember what the kernel returned in `b`, a `st`.
    fn harvest(&mut self, st: &'static Struct, b: &[u8]) {
        for f in st.fields.iter().filter(|f| f.count == 1) {
            let Some(v) = get(b, f.offset as usize, f.size as usize).filter(|v| *v != 0) else {
                continue;
            };
            match self.class(f.name) {
                Class::Handle(Some(o)) => push(self.handles.entry(o).or_default(), v as u32),
                Class::Fd => self.add_fd(v),
                Class::Key => push(&mut self.keys, v as u32),
                Class::Addr => push(&mut self.vas, v),
                Class::Num => push(&mut self.nums, v as u32),
                _ => {}
            }
        }
    }

    fn flags(&self, r: &mut Rng) -> u16 {
        if !self.wild {
            return if r.chance(90) { MANDATORY } else { 0 };
        }
        match r.below(20) {
            0..=14 => MANDATORY,
            15..=18 => 0,
            _ => r.next() as u16,
        }
    }

    fn buffer(&mut self, r: &mut Rng, st: Option<&'static Struct>, input: bool) -> (Vec<u8>, Ptr) {
        let mut b = vec![0u8; self.buf_len(r, st)];
        if input {
            self.fill(r, st, &mut b);
        }
        let ptr = match r.below(if self.wild { 40 } else { 0 }) {
            1..=2 => Ptr::Null,
            3..=4 => Ptr::Unmapped,
            5 => Ptr::Kernel,
            6 => Ptr::NonCanonical,
            _ => Ptr::Ours,
        };
        (b, ptr)
    }

    /// An attribute as `s` describes it; `st` its structure, `fixed` its value if given.
    fn attr(
        &mut self,
        r: &mut Rng,
        s: &'static AttrSpec,
        st: Option<&'static Struct>,
        fixed: Option<u64>,
    ) -> PAttr {
        let reserved = match r.below(if self.wild { 100 } else { 0 }) {
            0..=79 => 0,
            // The element of an enum attribute.
            90..=96 => r.below(4) as u16,
            _ => r.next() as u16,
        };
        let mut attr = Attr {
            attr_id: s.id,
            len: 0,
            flags: self.flags(r),
            ..Default::default()
        };
        attr.set_reserved(reserved);
        let mut p = PAttr {
            attr,
            buf: None,
            spec: Some(s),
            strukt: st,
            out: false,
        };
        match s.role {
            Role::New | Role::NewFd => {
                p.attr
                    .set_data(if r.chance(90) { 0 } else { self.value(r) })
            }
            Role::Handle(o) => p.attr.set_data(self.handle(r, o).into()),
            Role::Fd => p.attr.set_data(self.fd(r) as u64),
            Role::Out => {
                p.out = true;
                p.buf = Some(self.buffer(r, st, false));
            }
            Role::In => {
                if let Some(v) = fixed.filter(|_| !self.wild || r.chance(80)) {
                    p.attr.len = 8;
                    p.attr.set_data(v);
                } else if st.is_some_and(|st| st.size > 8) || (self.wild && r.chance(12)) {
                    p.buf = Some(self.buffer(r, st, true));
                } else {
                    // Inline: 8 bytes at most, never a pointer to anything.
                    p.attr.len = match (st, r.below(if self.wild { 10 } else { 0 })) {
                        (Some(st), 0..=7) => st.size as u16,
                        (None, 0..=6) => 8,
                        _ => r.below(9) as u16,
                    };
                    let data = match st {
                        // A small structure, filled as any.
                        Some(st) => {
                            let mut b = [0u8; 8];
                            self.fill(r, Some(st), &mut b[..(st.size as usize).min(8)]);
                            u64::from_le_bytes(b)
                        }
                        None => {
                            let class = self.class(s.name);
                            self.value_of(r, class)
                        }
                    };
                    p.attr.set_data(data);
                }
            }
        }
        if let Some((b, _)) = &p.buf {
            p.attr.len = b.len() as u16;
        }
        p
    }

    fn gen(&mut self, r: &mut Rng) -> Call {
        if self.created >= MAX_CREATED {
            return Call::Reopen;
        }
        match r.below(1000) {
            0 => return Call::Reopen,
            1..=2 => return Call::Close(r.next()),
            3..=32 => return Call::Dv(r.next()),
            _ => {}
        }
        let w = r.below(*self.weights.last().unwrap());
        let m = &table::METHODS[self.weights.partition_point(|c| *c <= w)];
        // INVOKE_WRITE carries a write() command, with its structures.
        let write = (m.name == "UVERBS_METHOD_INVOKE_WRITE")
            .then(|| r.pick(table::WRITE_CMDS))
            .flatten();
        self.wild = r.chance(30);
        let keep = match (self.wild, r.chance(50)) {
            (false, _) => 100,
            (true, true) => 90,
            (true, false) => 50,
        };
        let mut attrs = Vec::new();
        let common = if m.driver {
            &[][..]
        } else {
            table::COMMON_ATTRS
        };
        for s in m.attrs.iter().chain(common) {
            let is = |suffix: &str| s.name.ends_with(suffix);
            let (st, fixed) = match write {
                Some(w) if is("_CORE_IN") => (table::struct_at(w.req), None),
                Some(w) if is("_CORE_OUT") => (table::struct_at(w.resp), None),
                Some(w) if is("_UHW_IN") => (table::struct_at(w.uhw_in), None),
                Some(w) if is("_UHW_OUT") => (table::struct_at(w.uhw_out), None),
                Some(w) if is("_WRITE_CMD") => (None, Some(u64::from(w.command))),
                _ => (table::struct_at(s.strukt), None),
            };
            let want = if m.attrs.iter().any(|a| a.id == s.id) {
                keep
            } else if st.is_some() {
                80
            } else if self.wild {
                15
            } else {
                5
            };
            if r.chance(want) {
                attrs.push(self.attr(r, s, st, fixed));
            }
        }
        if !self.wild {
            return Call::Ioctl(Ioctl {
                method: Some(m),
                write,
                object: m.object,
                method_id: m.id,
                driver_id: RDMA_DRIVER_GAUDI,
                reserved1: 0,
                attrs,
            });
        }
        // Unknown ids, duplicates, any order, unknown methods and objects.
        let unknown = if m.rule == Rule::Union { 50 } else { 20 };
        while r.chance(unknown) && attrs.len() < 24 {
            let max = m.attrs.iter().map(|a| a.id).max().unwrap_or(0);
            let other = r.pick(table::METHODS).and_then(|o| r.pick(o.attrs));
            let id = match (r.below(3), other) {
                (0, _) | (_, None) => r.next() as u16,
                (1, _) => max.wrapping_add(1 + r.below(3) as u16),
                (_, Some(o)) => o.id,
            };
            // Shaped as an input of that id if some method has one.
            let Some(spec) = table::METHODS
                .iter()
                .flat_map(|m| m.attrs.iter())
                .chain(table::COMMON_ATTRS)
                .find(|a| a.role == Role::In && (a.id == id || r.chance(5)))
            else {
                break;
            };
            let mut p = self.attr(r, spec, None, None);
            p.attr.attr_id = id;
            attrs.push(p);
        }
        if !attrs.is_empty() && r.chance(10) {
            let d = attrs[r.below(attrs.len() as u64) as usize].clone();
            attrs.push(d);
        }
        if r.chance(30) {
            for k in (1..attrs.len()).rev() {
                attrs.swap(k, r.below(k as u64 + 1) as usize);
            }
        }
        let (mut object, mut method_id) = (m.object, m.id);
        match r.below(100) {
            0..=2 => method_id = method_id.wrapping_add(1 + r.below(8) as u16),
            3..=4 => object = r.next() as u16,
            _ => {}
        }
        Call::Ioctl(Ioctl {
            method: Some(m),
            write,
            object,
            method_id,
            driver_id: match r.below(100) {
                0..=91 => RDMA_DRIVER_GAUDI,
                92..=95 => 0,
                _ => r.next() as u32,
            },
            reserved1: if r.chance(95) { 0 } else { r.next() },
            attrs,
        })
    }

    /// One ioctl; the errno (0 on success).
    fn ioctl(&mut self, c: &mut Ioctl) -> i32 {
        for p in c.attrs.iter_mut() {
            if let Some((b, ptr)) = &p.buf {
                p.attr.set_data(match ptr {
                    Ptr::Ours => b.as_ptr() as u64,
                    Ptr::Null => 0,
                    Ptr::Unmapped => self.guard,
                    Ptr::Kernel => 0xffff_8880_0000_0000,
                    Ptr::NonCanonical => 0x8000_0000_dead_0000,
                });
            }
        }
        let mut attrs: Vec<Attr> = c.attrs.iter().map(|p| p.attr).collect();
        // SAFETY: every pointer in the attributes is NULL, unmapped, a kernel or
        // non-canonical address, or one of the call's buffers of at least the length given
        // (inline values are 8 bytes at most and not dereferenced as ours).
        let r = unsafe {
            ioctl_raw(
                self.ctx().file(),
                c.object,
                c.method_id,
                c.driver_id,
                c.reserved1,
                &mut attrs,
            )
        };
        if let Err(e) = r {
            return e.raw_os_error().unwrap_or(-1);
        }
        // New handles and file descriptors come back in the attributes.
        for (p, a) in c.attrs.iter_mut().zip(&attrs) {
            if p.buf.is_none() {
                p.attr.set_data(a.data());
            }
        }
        let m = c
            .method
            .filter(|m| (m.object, m.id) == (c.object, c.method_id));
        for p in &c.attrs {
            match (p.spec.map(|s| s.role), m) {
                (Some(Role::New), Some(m)) if p.attr.attr_id == p.spec.unwrap().id => {
                    push(
                        self.handles.entry(m.object).or_default(),
                        p.attr.data() as u32,
                    );
                    self.created += 1;
                }
                (Some(Role::NewFd), _) => self.add_fd(p.attr.data()),
                _ => {}
            }
            if let (true, Some(st), Some((b, Ptr::Ours))) = (p.out, p.strukt, &p.buf) {
                self.harvest(st, b);
            }
        }
        if c.write.is_some_and(|w| w.creates) {
            self.created += 1;
        }
        if let Some(m) = m.filter(|m| m.destroys) {
            let h = c
                .attrs
                .iter()
                .find(|p| matches!(p.spec.map(|s| s.role), Some(Role::Handle(_))));
            if let (Some(h), Some(pool)) = (h, self.handles.get_mut(&m.object)) {
                pool.retain(|x| u64::from(*x) != h.attr.data());
            }
        }
        0
    }

    /// A QP set's queues: maybe a new set, maybe connected (through RESET, INIT, RTR, RTS) to
    /// another port, then random WQEs, a doorbell and a few polls of its CQ.
    fn dv(&mut self, seed: u64, log: &mut CallLog) -> String {
        let mut r = Rng(seed);
        let ctx = self.ctx.as_ref().expect("an open context");
        let nports = ctx.resp.num_ports.max(1) as u64;
        let mut s = String::new();
        let new = r.chance(20);
        if self.sets.is_empty() || new {
            let ports = match r.below(10) {
                0..=5 if nports >= 2 => 3 << (2 * r.below(nports / 2)),
                0..=7 => 1 << r.below(nports),
                8 => ctx.resp.ports_mask,
                _ => r.next(),
            };
            let (log_sq, log_cq) = (r.below(12) as u32, r.below(12) as u32);
            let index = r.chance(10).then(|| r.below(64) as u32);
            s +=
                &format!("create ports {ports:#x} log_sq {log_sq} log_cq {log_cq} index {index:?}");
            log.record(&format!("  dv {s}"));
            match ctx.create_qp_set(ports, index, log_sq, log_cq) {
                Ok(set) => {
                    self.created += 1;
                    // The fuzzed methods modify, query and destroy it too, mapped as it is.
                    let pool = self.handles.entry(GAUDI_IB_OBJECT_QP_SET).or_default();
                    push(pool, set.handle);
                    push(&mut self.nums, set.resp.index);
                    for q in &set.qps {
                        push(&mut self.nums, q.info.cqn);
                        push(&mut self.vas, q.info.sq_va);
                    }
                    self.sets.push(set);
                    if self.sets.len() > 4 {
                        let old = self.sets.remove(0);
                        let _ = ctx.destroy_qp_set(old);
                    }
                }
                Err(e) => return s + &format!(": {}", errno_name(gaudi_verbs::errno(&e))),
            }
        }
        // Taken out while its queues are written, so that the values can be drawn.
        let mut sets = std::mem::take(&mut self.sets);
        let s = self.dv_queues(&mut r, &mut sets, s, log);
        self.sets = sets;
        s
    }

    fn dv_queues(
        &self,
        r: &mut Rng,
        sets: &mut [QpSet],
        mut s: String,
        log: &mut CallLog,
    ) -> String {
        let ctx = self.ctx();
        let set = &mut sets[r.below(sets.len() as u64) as usize];
        if set.qps.is_empty() {
            return s;
        }
        let (h, index) = (set.handle, set.resp.index);
        let peers: Vec<u32> = set.qps.iter().map(|q| q.port).collect();
        let qp = &mut set.qps[r.below(peers.len() as u64) as usize];
        s += &format!("; set {h} port {}", qp.port);
        if r.chance(30) {
            let to = *r.pick(&peers).unwrap();
            let peer = self.ports.get(to as usize - 1).copied().unwrap_or_default();
            let (mac, ip) = if r.chance(80) {
                (peer.mac, gaudi_verbs::port_ipv4(&peer))
            } else {
                let v = r.next().to_le_bytes();
                (v[..6].try_into().unwrap(), v[4..].try_into().unwrap())
            };
            let dest = if r.chance(80) { index } else { r.next() as u32 };
            let key = |r: &mut Rng| match r.below(4) {
                0..=1 => r.pick(&self.keys).copied().unwrap_or(0),
                2 => 0,
                _ => r.next() as u32,
            };
            let (rkey, lkey) = (key(r), key(r));
            let (mtu, timeout) = (r.below(7) as u8, r.below(32) as u8);
            s += &format!(", connect to {to} qpn {dest} rkey {rkey:#x} local {lkey:#x} mtu {mtu}");
            let res = ctx.connect_dv(h, qp, mac, ip, dest, rkey, lkey, mtu, timeout);
            if let Err(e) = res {
                s += &format!(" ({})", errno_name(gaudi_verbs::errno(&e)));
            }
        }
        // WQEs in the NIC's format (device-model.rst): mostly LINEAR (the
        // RDMA WRITE) or SEND (which no QP set may post), else any opcode;
        // the entry index mostly right; now and then the fields no QP set
        // writes (trace, reduction, SE, INLINE; the remote SOB) set at random.
        let n = r.below(9);
        let entries = qp.sq_entries();
        for _ in 0..n {
            let opcode = if r.chance(70) {
                *r.pick(&[WQE2_OPCODE_LINEAR, WQE2_OPCODE_SEND]).unwrap()
            } else {
                r.next()
            };
            let entry = if r.chance(90) {
                qp.pi & (entries - 1)
            } else {
                r.next() as u32
            };
            let signaled = r.chance(60);
            let len = self.value_of(r, Class::Len) as u32;
            let info = qp.info;
            let va = |r: &mut Rng| match r.below(10) {
                0..=3 => r.pick(&self.vas).copied().unwrap_or(0) + r.below(8192),
                4 => info.sq_va + r.below(4096),
                5 => info.cq_va + r.below(4096),
                _ => self.value(r),
            };
            let (local, remote) = (va(r), va(r));
            let mut w = wqe2(opcode, entry, len, local, remote, r.next() as u32, signaled);
            if r.chance(10) {
                let word = |w: &[u8; 32], i: usize| {
                    u64::from_le_bytes(w[i * 8..i * 8 + 8].try_into().unwrap())
                };
                let (w0, w3) = (
                    word(&w, 0) ^ (r.next() & 0x7fff_00e0),
                    word(&w, 3) ^ (r.next() & !0xffff_ffff),
                );
                w[..8].copy_from_slice(&w0.to_le_bytes());
                w[24..].copy_from_slice(&w3.to_le_bytes());
            }
            let slot = if r.chance(90) { qp.pi } else { r.next() as u32 };
            qp.write_wqe(slot, &w);
            qp.pi = qp.pi.wrapping_add(1);
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // Writes to the QP's UMR page: the doorbell {producer index, QPN} on
        // the block's first FIFO (at 0x000 and 0x004; its second at 0x080),
        // the CQ slots {CQ number, consumer index} (0x100, 0x180).
        let num = |r: &mut Rng| r.pick(&self.nums).copied().unwrap_or(0);
        let writes: Vec<(usize, u32)> = match r.below(20) {
            0..=13 => vec![(0x000, qp.pi & (entries - 1)), (0x004, index)],
            // Past the queue's last entry, or any producer index.
            14..=15 => vec![(0x000, entries + r.below(4) as u32), (0x004, index)],
            16 => vec![(0x000, r.next() as u32), (0x004, index)],
            // Another QP, the kernel's too (a user FIFO rings only QPs of
            // its PD's address space), on either FIFO.
            17 => {
                let fifo = *r.pick(&[0x000, 0x080]).unwrap();
                vec![(fifo, r.below(1 << 16) as u32), (fifo + 4, num(r))]
            }
            // A consumer index for any CQ (a slot updates its own CQ only).
            18 => {
                let slot = *r.pick(&[0x100, 0x180]).unwrap();
                vec![(slot, num(r)), (slot + 4, r.next() as u32)]
            }
            _ => vec![(4 * r.below(1024) as usize, r.next() as u32)],
        };
        let list: Vec<String> = writes
            .iter()
            .map(|(off, v)| format!("{off:#x} <- {v:#x}"))
            .collect();
        s += &format!("; {n} WQEs, doorbell page {}", list.join(", "));
        log.record(&format!("  dv {s}"));
        for (off, v) in writes {
            qp.ring(off, v);
        }
        let polls = r.below(5);
        let got = (0..polls).filter_map(|_| qp.poll_spin(2000)).count();
        s + &format!("; {got} of {polls} polls found a CQE")
    }

    /// Run call `i` of `seed`; what it was and how it went.
    fn step(&mut self, seed: u64, i: u64, stats: &mut Stats, log: &mut CallLog) -> String {
        INDEX.store(i, Relaxed);
        let mut r = Rng::call(seed, i);
        let mut call = self.gen(&mut r);
        let d = describe(&call);
        log.record(&format!("{seed} {i} {d}"));
        BUSY.store(now_ms(), Relaxed);
        stats.calls += 1;
        let res = match &mut call {
            Call::Ioctl(c) => {
                let e = self.ioctl(c);
                stats.count(c, e);
                if e == 0 {
                    "ok".into()
                } else {
                    errno_name(e)
                }
            }
            Call::Dv(s) => {
                stats.dv += 1;
                self.dv(*s, log)
            }
            Call::Close(k) => match self.fds.len() {
                0 => "none".into(),
                n => {
                    let fd = self.fds.remove((*k % n as u64) as usize);
                    // SAFETY: a descriptor the kernel created for us (above ours); nothing
                    // else uses it.
                    unsafe { libc::close(fd) };
                    format!("closed {fd}")
                }
            },
            Call::Reopen => {
                self.close();
                self.open();
                "ok".into()
            }
        };
        BUSY.store(0, Relaxed);
        format!("{d} -> {res}")
    }
}

/// The kernel log and the emulator's counters, between checks.
struct Checks {
    klog: KernelLog,
    emu: Option<EmuCtl>,
    base: Vec<(&'static str, u64)>,
}

impl Checks {
    fn open(emu: bool) -> Self {
        let klog = KernelLog::open().unwrap_or_else(|e| die(format!("/dev/kmsg: {e}")));
        let mut c = Checks {
            klog,
            emu: emu.then(|| EmuCtl::open().unwrap_or_else(|e| die(format!("emulator: {e}")))),
            base: Vec::new(),
        };
        c.base = c.counters().unwrap_or_else(|e| die(e));
        c
    }

    fn counters(&mut self) -> Result<Vec<(&'static str, u64)>, String> {
        let Some(emu) = &mut self.emu else {
            return Ok(Vec::new());
        };
        let lines = emu
            .command("stat")
            .map_err(|e| format!("emulator stat: {e}"))?;
        Ok(EMU_COUNTERS
            .iter()
            .filter_map(|k| {
                lines.iter().find_map(|l| {
                    let v = l.strip_prefix(k)?.strip_prefix(' ')?;
                    Some((*k, v.trim().parse().ok()?))
                })
            })
            .collect())
    }

    /// What went wrong since the last check, if anything.
    fn check(&mut self) -> Option<String> {
        let (_, lines) = self.klog.read_new().unwrap_or_default();
        if let Some(k) = lines
            .iter()
            .position(|l| SPLATS.iter().any(|s| l.contains(s)))
        {
            println!("kernel log:");
            for l in lines.iter().skip(k.saturating_sub(5)).take(60) {
                println!("  {l}");
            }
            return Some(format!("kernel log: {}", lines[k]));
        }
        let now = match self.counters() {
            Ok(n) => n,
            Err(e) => return Some(e),
        };
        for ((k, was), (_, v)) in self.base.iter().zip(&now) {
            if v != was {
                return Some(format!("emulator {k} {v} (was {was})"));
            }
        }
        None
    }
}

static SEED: AtomicU64 = AtomicU64::new(0);
static INDEX: AtomicU64 = AtomicU64::new(0);
/// When the current call started (ms since the start, 0: none under way).
static BUSY: AtomicU64 = AtomicU64::new(0);
static START: OnceLock<Instant> = OnceLock::new();

fn now_ms() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// A setup error: not a finding (exit status 2).
fn die(msg: String) -> ! {
    println!("FAIL: fuzz-uverbs: {msg}");
    exit(2)
}

/// Write "FAIL: seed S: <what> at call I" without allocating (from a signal handler).
fn raw_fail(what: &[u8]) {
    let mut b = [0u8; 160];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        for c in s {
            if n < b.len() {
                b[n] = *c;
                n += 1;
            }
        }
    };
    let num = |v: u64| {
        let mut d = [0u8; 20];
        let mut k = d.len();
        let mut v = v;
        loop {
            k -= 1;
            d[k] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        (d, k)
    };
    put(b"FAIL: seed ");
    let (d, k) = num(SEED.load(Relaxed));
    put(&d[k..]);
    put(b": ");
    put(what);
    put(b" at call ");
    let (d, k) = num(INDEX.load(Relaxed));
    put(&d[k..]);
    put(b"\n");
    // SAFETY: writes our buffer to standard output.
    unsafe { libc::write(1, b.as_ptr().cast(), n) };
}

extern "C" fn on_signal(_sig: libc::c_int) {
    raw_fail(b"the fuzzer crashed (SIGSEGV, SIGBUS, SIGILL or SIGFPE)");
    // SAFETY: ends the process at once.
    unsafe { libc::_exit(1) };
}

/// Report a crash of the fuzzer itself, or a call that does not return.
fn watch() {
    for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
        // SAFETY: the handler only writes to standard output and exits.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        let b = BUSY.load(Relaxed);
        if b != 0 && now_ms() - b > HUNG.as_millis() as u64 {
            raw_fail(b"a call has not returned in 60 s");
            // SAFETY: ends the process (as far as a task stuck in the kernel lets it).
            unsafe { libc::_exit(1) };
        }
    });
}

/// `a-b,c,...` of sorted indexes.
fn ranges(v: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut k = 0;
    while k < v.len() {
        let mut e = k;
        while e + 1 < v.len() && v[e + 1] == v[e] + 1 {
            e += 1;
        }
        out.push(if e == k {
            v[k].to_string()
        } else {
            format!("{}-{}", v[k], v[e])
        });
        k = e + 1;
    }
    out.join(",")
}

fn parse_ranges(s: &str) -> Vec<u64> {
    let bad = || die(format!("--replay: bad list {s:?}"));
    let num = |x: &str| x.parse::<u64>().unwrap_or_else(|_| bad());
    s.split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => num(a)..=num(b),
            None => num(p)..=num(p),
        })
        .collect()
}

fn opt<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == name)?;
    Some(
        args.get(i + 1)
            .map_or_else(|| die(format!("{name} needs a value")), |v| v.as_str()),
    )
}

fn num(args: &[String], name: &str) -> Option<u64> {
    opt(args, name).map(|v| {
        v.parse()
            .unwrap_or_else(|_| die(format!("{name}: not a number: {v}")))
    })
}

/// How a replay in a fresh process went.
enum Replay {
    Failed,
    Passed,
    /// Could not run, or did not finish in time.
    Broken(String),
}

fn replay(seed: u64, calls: &[u64], emu: bool, verbose: bool) -> (Replay, String) {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args([
        "fuzz-uverbs",
        "--seed",
        &seed.to_string(),
        "--replay",
        &ranges(calls),
    ]);
    if emu {
        cmd.arg("--emu");
    }
    if verbose {
        cmd.arg("--verbose");
    }
    let mut child = match cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn() {
        Ok(c) => c,
        Err(e) => return (Replay::Broken(format!("spawn: {e}")), String::new()),
    };
    let out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = out {
            let _ = std::io::Read::read_to_string(&mut o, &mut s);
        }
        s
    });
    let t = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t.elapsed() > Duration::from_secs(300) => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        return (
            Replay::Broken("a replay did not finish in 300 s".into()),
            String::new(),
        );
    };
    let text = reader.join().unwrap_or_default();
    let r = match status.code() {
        Some(0) => Replay::Passed,
        Some(1) | None => Replay::Failed,
        Some(c) => Replay::Broken(format!("a replay exited with {c}: {}", text.trim())),
    };
    (r, text)
}

/// Remove chunks of `cur` while `fails` says what is left still fails, halving the chunks
/// when none can go, until single calls or `deadline` (a lighter ddmin).
fn minimize(
    mut cur: Vec<u64>,
    deadline: Instant,
    mut fails: impl FnMut(&[u64]) -> Result<bool, String>,
) -> Vec<u64> {
    let mut n = 2;
    'outer: while cur.len() > 1 && Instant::now() < deadline {
        let chunk = cur.len().div_ceil(n);
        for start in (0..cur.len()).step_by(chunk) {
            if Instant::now() >= deadline {
                break 'outer;
            }
            let cand: Vec<u64> = cur[..start]
                .iter()
                .chain(&cur[(start + chunk).min(cur.len())..])
                .copied()
                .collect();
            match fails(&cand) {
                Ok(true) => {
                    cur = cand;
                    n = (n - 1).max(2);
                    continue 'outer;
                }
                Ok(false) => {}
                Err(e) => {
                    println!("shrinking stopped: {e}");
                    break 'outer;
                }
            }
        }
        if chunk == 1 {
            break;
        }
        n = (n * 2).min(cur.len());
    }
    cur
}

/// Find a short failing subsequence of `calls` by removing chunks of it (a lighter ddmin),
/// within `budget`; print it and its calls.
fn shrink(seed: u64, window: &[u64], prefix: &[u64], emu: bool, budget: Duration) {
    let deadline = Instant::now() + budget;
    println!(
        "shrinking: replaying calls in fresh processes for up to {} s",
        budget.as_secs()
    );
    let mut cur = window.to_vec();
    let fails = |c: &[u64]| match replay(seed, c, emu, false).0 {
        Replay::Failed => Ok(true),
        Replay::Passed => Ok(false),
        Replay::Broken(e) => Err(e),
    };
    for candidate in [window, prefix] {
        cur = candidate.to_vec();
        match fails(&cur) {
            Ok(true) => break,
            Ok(false) if candidate.len() == prefix.len() => {
                println!(
                    "not reproduced by replaying calls {} in a fresh process (the failure may depend \
                     on timing, or the kernel reports it once per boot); the calls since the last \
                     clean check were {}",
                    ranges(prefix),
                    ranges(window)
                );
                return;
            }
            Ok(false) => {}
            Err(e) => {
                println!("shrinking stopped: {e}");
                return;
            }
        }
    }
    let cur = minimize(cur, deadline, fails);
    println!(
        "shortest failing sequence ({} calls): seed {seed}, calls {}",
        cur.len(),
        ranges(&cur)
    );
    let (_, text) = replay(seed, &cur, emu, true);
    for l in text
        .lines()
        .filter(|l| l.starts_with("call ") || l.starts_with("reproduced"))
    {
        println!("  {l}");
    }
}

/// `fuzz-uverbs --calls N [--seed S] [--seconds T] [--replay I,J-K] [--emu] [--verbose]
/// [--shrink-seconds T]`.
pub(crate) fn fuzz_uverbs(args: &[String]) {
    let seed = num(args, "--seed").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.map_or(1, |d| d.as_nanos() as u64)
    });
    let calls = num(args, "--calls").unwrap_or(10_000);
    let seconds = num(args, "--seconds").unwrap_or(0);
    let list = opt(args, "--replay").map(parse_ranges);
    let emu = args.iter().any(|a| a == "--emu");
    let verbose = args.iter().any(|a| a == "--verbose");
    let shrink_budget = Duration::from_secs(num(args, "--shrink-seconds").unwrap_or(120));
    SEED.store(seed, Relaxed);
    now_ms();
    watch();

    // Registrations fail in the core beyond 64 MiB pinned (or less, if the limit was lower
    // and cannot be raised) instead of pinning the guest's memory.
    let mut lim = libc::rlimit {
        rlim_cur: 64 << 20,
        rlim_max: 64 << 20,
    };
    // SAFETY: reads and sets a limit of this process through a valid structure.
    let r = unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
            libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim);
            lim.rlim_max = lim.rlim_max.min(64 << 20);
            lim.rlim_cur = lim.rlim_max;
        }
        libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim)
    };
    if r != 0 {
        die(format!(
            "RLIMIT_MEMLOCK: {}",
            std::io::Error::last_os_error()
        ));
    }
    drop_ipc_lock();

    let mut checks = Checks::open(emu);
    let path = if list.is_some() {
        "/tmp/fuzz-replay.log"
    } else {
        "/tmp/fuzz-calls.log"
    };
    let file = File::create(path).unwrap_or_else(|e| die(format!("{path}: {e}")));
    let mut log = CallLog { file, lines: 0 };
    let mut st = State::new(true);
    let mut stats = Stats::default();

    if let Some(list) = list {
        for &i in &list {
            let d = st.step(seed, i, &mut stats, &mut log);
            if verbose {
                println!("call {i}: {d}");
            }
        }
        st.close();
        std::thread::sleep(Duration::from_millis(200));
        match checks.check() {
            Some(w) => {
                println!("reproduced: {w}");
                exit(1)
            }
            None => exit(0),
        }
    }

    let driver = table::METHODS.iter().filter(|m| m.driver).count();
    println!(
        "fuzz-uverbs: seed {seed}, {calls} calls{}; the table has {} methods ({driver} of the \
         driver's namespace), {} write() commands; calls recorded in {path}",
        if seconds > 0 {
            format!(" or {seconds} s")
        } else {
            String::new()
        },
        table::METHODS.len(),
        table::WRITE_CMDS.len(),
    );
    let t0 = Instant::now();
    let mut clean = 0;
    let mut failure = None;
    let mut done = 0;
    while done < calls && (seconds == 0 || t0.elapsed().as_secs() < seconds) {
        let i = done;
        let d = st.step(seed, i, &mut stats, &mut log);
        if verbose {
            println!("call {i}: {d}");
        }
        done += 1;
        if done % CHECK_EVERY == 0 {
            if let Some(f) = checks.check() {
                failure = Some(f);
                break;
            }
            clean = done;
        }
        if done % 10_000 == 0 && done < calls {
            println!(
                "progress: {done} calls, {:.0} s",
                t0.elapsed().as_secs_f64()
            );
        }
    }
    // The context goes with whatever it holds.
    st.close();
    if failure.is_none() {
        std::thread::sleep(Duration::from_millis(200));
        failure = checks
            .check()
            .map(|f| format!("{f} (after closing the context)"));
    }
    let secs = t0.elapsed().as_secs_f64();
    if let Some(f) = failure {
        println!(
            "FAIL: seed {seed}: {f} (calls {clean} to {})",
            done.saturating_sub(1)
        );
        drop(st);
        let window: Vec<u64> = (clean..done).collect();
        let prefix: Vec<u64> = (0..done).collect();
        shrink(seed, &window, &prefix, emu, shrink_budget);
        exit(1);
    }
    let mut errnos: Vec<(&i32, &u64)> = stats.errnos.iter().collect();
    errnos.sort_by(|a, b| b.1.cmp(a.1));
    let errnos: Vec<String> = errnos
        .iter()
        .take(6)
        .map(|(e, n)| format!("{} {n}", errno_name(**e)))
        .collect();
    println!(
        "ok: {} calls, {} distinct methods ({} answered other than EOPNOTSUPP/EPROTONOSUPPORT), \
         {} write() commands ({} answered so), {} calls succeeded, errnos: {}, {} dv steps, \
         {secs:.1} s, {:.0} calls/s, seed {seed}",
        stats.calls,
        stats.methods.len(),
        stats.answered.len(),
        stats.writes.len(),
        stats.writes_answered.len(),
        stats.succeeded,
        errnos.join(", "),
        stats.dv,
        stats.calls as f64 / secs.max(1e-9),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_depend_on_seed_and_index_only() {
        let a: Vec<u64> = (0..4).map(|i| Rng::call(7, i).next()).collect();
        let b: Vec<u64> = (0..4).rev().map(|i| Rng::call(7, i).next()).collect();
        assert_eq!(a, b.into_iter().rev().collect::<Vec<_>>());
        assert_ne!(Rng::call(7, 0).next(), Rng::call(8, 0).next());
        let mut r = Rng(1);
        assert!((0..1000).all(|_| r.below(10) < 10));
    }

    /// Calls are the same for the same seed, index and state; every buffer attribute's length
    /// is at most its buffer's, every inline value is 8 bytes at most.
    #[test]
    fn calls_are_reproducible_and_safe() {
        let mut st = State::new(false);
        st.handles.insert(1, vec![1, 2]);
        st.fds.push(9);
        let mut methods = BTreeSet::new();
        for i in 0..50_000 {
            let a = st.gen(&mut Rng::call(3, i));
            let b = st.gen(&mut Rng::call(3, i));
            assert_eq!(describe(&a), describe(&b));
            if let Call::Ioctl(c) = a {
                methods.insert(c.method.unwrap().name);
                for p in &c.attrs {
                    match &p.buf {
                        Some((b, _)) => assert!(usize::from(p.attr.len) <= b.len()),
                        None if p.spec.is_some_and(|s| s.role == Role::In) => {
                            assert!(p.attr.len <= 8, "{}", describe(&Call::Ioctl(c)))
                        }
                        None => assert_eq!(p.attr.len, 0),
                    }
                }
            }
        }
        assert_eq!(methods.len(), table::METHODS.len());
    }

    /// What earlier calls returned changes a call's values, not its shape: method, attribute
    /// ids, lengths and flags.
    #[test]
    fn call_shape_is_independent_of_state() {
        let shape = |c: Call| match c {
            Call::Ioctl(c) => c
                .attrs
                .iter()
                .map(|p| (p.attr.attr_id, p.attr.len, p.attr.flags, p.attr.reserved()))
                .fold(format!("{} {}", c.object, c.method_id), |s, a| {
                    format!("{s} {a:?}")
                }),
            c => describe(&c),
        };
        let mut empty = State::new(false);
        let mut full = State::new(false);
        full.handles.insert(1, vec![1, 2]);
        full.handles.insert(3, vec![5]);
        full.fds.extend([70, 71]);
        full.keys.push(0x1234);
        full.vas.push(1 << 30);
        full.nums.push(7);
        for i in 0..20_000 {
            let (a, b) = (
                empty.gen(&mut Rng::call(9, i)),
                full.gen(&mut Rng::call(9, i)),
            );
            assert_eq!(shape(a), shape(b), "call {i}");
        }
    }

    #[test]
    fn minimize_finds_the_failing_pair() {
        let mut runs = 0;
        let fails = |c: &[u64]| {
            runs += 1;
            Ok(c.contains(&17) && c.contains(&4242))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(minimize((0..10_000).collect(), deadline, fails), [17, 4242]);
        assert!(runs < 200, "{runs} runs");
    }

    #[test]
    fn ranges_round_trip() {
        let v = [0, 1, 2, 5, 7, 8, 100];
        assert_eq!(ranges(&v), "0-2,5,7-8,100");
        assert_eq!(parse_ranges("0-2,5,7-8,100"), v);
    }

    #[test]
    fn names_classify() {
        assert!(matches!(classify("pd_handle"), Class::Handle(Some(1))));
        assert!(matches!(classify("send_cq_handle"), Class::Handle(Some(3))));
        assert!(matches!(classify("base.cq_handle"), Class::Handle(Some(3))));
        assert!(matches!(classify("UVERBS_ATTR_REG_MR_ADDR"), Class::Addr));
        assert!(matches!(classify("UVERBS_ATTR_REG_MR_LENGTH"), Class::Len));
        assert!(matches!(
            classify("GAUDI_IB_ATTR_QUERY_PORT_NUM"),
            Class::Port
        ));
        assert!(matches!(classify("wr.rdma.rkey"), Class::Key));
        assert!(matches!(classify("fd"), Class::Fd));
        assert!(matches!(classify("response"), Class::Zero));
        assert!(matches!(classify("reserved1"), Class::Reserved));
        assert!(matches!(
            classify("UVERBS_ATTR_REG_MR_ACCESS_FLAGS"),
            Class::Flags
        ));
        assert!(matches!(classify("base.qpn"), Class::Num));
    }
}
