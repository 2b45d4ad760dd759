// SPDX-License-Identifier: GPL-2.0

//! User-space access to the gaudi_ib RDMA driver through the kernel's uverbs
//! ioctl interface (`RDMA_VERBS_IOCTL` on `/dev/infiniband/uverbsN`), without
//! libibverbs: the standard objects (context, PD) and the driver's own
//! namespace (include/uapi/rdma/gaudi_user_ioctl_cmds.h).
//!
//! The structures, ids and values of the uAPI headers (the gaudi headers and the core's
//! rdma_user_ioctl_cmds.h, ib_user_ioctl_cmds.h, ib_user_verbs.h and ib_user_ioctl_verbs.h)
//! are generated from them at build time: [`uapi`]. The values here that are not theirs are
//! the kernel's internal enums (include/rdma/ib_verbs.h), which the uAPI carries as plain
//! integers.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;
use uapi::*;

pub mod dv;
pub mod hbm;
pub mod table;
pub mod uapi;

pub use uapi::RDMA_DRIVER_GAUDI;

/// `UVERBS_ATTR_F_MANDATORY`, as the `u16` of `struct ib_uverbs_attr`'s `flags`.
pub const ATTR_F_MANDATORY: u16 = fit_u16(UVERBS_ATTR_F_MANDATORY as u64);

/// `struct ib_uverbs_attr`, an attribute of an ioctl.
pub type Attr = ib_uverbs_attr;

impl ib_uverbs_attr {
    /// A mandatory attribute.
    fn mandatory(id: u16, len: u16, data: u64) -> Self {
        let mut a = Self {
            attr_id: id,
            len,
            flags: ATTR_F_MANDATORY,
            ..Default::default()
        };
        a.set_data(data);
        a
    }

    /// An inline value (`len` up to 8 bytes).
    pub fn value(id: u16, v: u64) -> Self {
        Self::mandatory(id, 8, v)
    }

    /// An object handle (IDR attribute: no length).
    pub fn handle(id: u16, handle: u32) -> Self {
        Self::mandatory(id, 0, handle.into())
    }

    /// A pointer to `len` bytes at `ptr` (input or output).
    pub fn buf(id: u16, ptr: *const u8, len: usize) -> Self {
        Self::mandatory(id, len as u16, ptr as u64)
    }

    /// An input structure. Inputs of up to 8 bytes travel inline in `data`,
    /// as the kernel expects of them.
    pub fn input<T: Plain>(id: u16, v: &T) -> Self {
        let bytes = bytes_of(v);
        let len = bytes.len();
        if len > 8 {
            return Self::buf(id, bytes.as_ptr(), len);
        }
        let mut data = [0u8; 8];
        data[..len].copy_from_slice(bytes);
        Self::mandatory(id, len as u16, u64::from_ne_bytes(data))
    }

    /// An output structure.
    pub fn output<T: Plain>(id: u16, v: &mut T) -> Self {
        Self::buf(id, bytes_of_mut(v).as_mut_ptr(), std::mem::size_of::<T>())
    }
}

/// `struct ib_uverbs_ioctl_hdr` followed by its `N` attributes (its flexible array).
#[repr(C)]
struct IoctlBuf<const N: usize> {
    hdr: ib_uverbs_ioctl_hdr,
    attrs: [Attr; N],
}

// The attributes follow the header where its flexible array begins.
const _: () = assert!(
    std::mem::offset_of!(IoctlBuf<1>, attrs) == std::mem::offset_of!(ib_uverbs_ioctl_hdr, attrs)
);

/// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`.
pub const RDMA_VERBS_IOCTL: libc::Ioctl = libc::_IOWR::<ib_uverbs_ioctl_hdr>(RDMA_IOCTL_MAGIC, 1);

/// What the core's `IB_USER_VERBS_CMD_QUERY_DEVICE` reports (`struct
/// ib_uverbs_query_device_resp`, the fields this NIC fills).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttrs {
    /// `node_guid` as the bytes of its big-endian value.
    pub node_guid: [u8; 8],
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_sge: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_pd: u32,
    pub phys_port_cnt: u8,
}

/// `enum ib_port_state` `IB_PORT_ACTIVE`, `enum ib_port_phys_state`
/// `LINK_UP`, `IB_LINK_LAYER_ETHERNET` (the kernel's, not in the uAPI).
pub const PORT_ACTIVE: u8 = 4;
pub const PORT_PHYS_LINK_UP: u8 = 5;
pub const LINK_LAYER_ETHERNET: u8 = 2;

/// What the core's `UVERBS_METHOD_QUERY_PORT` reports (`struct
/// ib_uverbs_query_port_resp`, the fields this NIC fills).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttrs {
    pub state: u8,
    pub phys_state: u8,
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub link_layer: u8,
    pub gid_tbl_len: u32,
    pub pkey_tbl_len: u16,
    pub max_msg_sz: u32,
}

/// `struct ib_uverbs_gid_entry`.
pub type GidEntry = ib_uverbs_gid_entry;

/// A raw uverbs ioctl call with `N` attributes.
pub fn ioctl<const N: usize>(
    fd: &File,
    object_id: u16,
    method_id: u16,
    attrs: [Attr; N],
) -> io::Result<[Attr; N]> {
    let mut b = IoctlBuf {
        hdr: ib_uverbs_ioctl_hdr {
            length: std::mem::size_of::<IoctlBuf<N>>() as u16,
            object_id,
            method_id,
            num_attrs: N as u16,
            driver_id: RDMA_DRIVER_GAUDI,
            ..Default::default()
        },
        attrs,
    };
    // SAFETY: `b` is a valid ioctl header followed by its N attributes;
    // the pointers in the attributes point to live buffers of their lengths.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), RDMA_VERBS_IOCTL, &mut b) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(b.attrs)
}

/// A uverbs ioctl of any header and attributes (the fuzzer's): `object_id`, `method_id`,
/// `driver_id` and `reserved1` as given, `length` and `num_attrs` those of `attrs`. The
/// `data` of every attribute is written back into `attrs` (new handles and file descriptors);
/// the rest of them is left as given.
///
/// # Safety
///
/// Every pointer in `attrs` is NULL, an address that faults, or points to a live buffer of
/// at least the length given (an inline value is not dereferenced).
pub unsafe fn ioctl_raw(
    fd: &File,
    object_id: u16,
    method_id: u16,
    driver_id: u32,
    reserved1: u64,
    attrs: &mut [Attr],
) -> io::Result<()> {
    let head = std::mem::size_of::<ib_uverbs_ioctl_hdr>();
    let len = head + std::mem::size_of_val(attrs);
    let hdr = ib_uverbs_ioctl_hdr {
        length: len as u16,
        object_id,
        method_id,
        num_attrs: attrs.len() as u16,
        reserved1,
        driver_id,
        ..Default::default()
    };
    // 8-byte words: the header and the attributes are 8-byte aligned.
    let mut words = vec![0u64; len.div_ceil(8)];
    // SAFETY: `words` holds `len` bytes, 8-byte aligned: the header, then the attributes
    // where its flexible array begins.
    unsafe {
        let base = words.as_mut_ptr().cast::<u8>();
        std::ptr::write(base.cast::<ib_uverbs_ioctl_hdr>(), hdr);
        std::ptr::copy_nonoverlapping(attrs.as_ptr(), base.add(head).cast::<Attr>(), attrs.len());
    }
    // SAFETY: a header and its attributes; the caller vouches for their pointers.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), RDMA_VERBS_IOCTL, words.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    for (k, a) in attrs.iter_mut().enumerate() {
        // SAFETY: attribute `k` of those copied in above, inside `words`.
        let back =
            unsafe { std::ptr::read(words.as_ptr().cast::<u8>().add(head).cast::<Attr>().add(k)) };
        a.set_data(back.data());
    }
    Ok(())
}

/// An open uverbs device with its user context.
pub struct Context {
    fd: File,
    pub resp: gaudi_ib_alloc_ucontext_resp,
    pub num_comp_vectors: u32,
    /// The handle of the PD allocated last ([`NO_PD`]: none), which
    /// [`Context::create_qp_set`] names (a set works in its PD's address
    /// space).
    pub pd: std::sync::atomic::AtomicU64,
}

/// [`Context::pd`] before a PD is allocated.
pub const NO_PD: u64 = u64::MAX;

/// `IB_SEND_SIGNALED` of `enum ib_send_flags` (the kernel's, not in the uAPI).
pub const SEND_SIGNALED: u32 = 1 << 1;
/// `IB_SEND_INLINE` of `enum ib_send_flags`.
pub const SEND_INLINE: u32 = 1 << 3;

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    pub handle: u32,
    pub cqe: u32,
    /// The handle the CQ's events name (completion channel, async events):
    /// distinct for every CQ of the process.
    pub user_handle: u64,
}

/// A queue pair and the sizes the kernel granted.
#[derive(Debug)]
pub struct Qp {
    pub handle: u32,
    pub qpn: u32,
    pub max_send_wr: u32,
    pub max_send_sge: u32,
    /// The receive queue and inline data the kernel granted.
    pub max_recv_wr: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// Queue sizes asked for a queue pair.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ib_uverbs_sge`.
pub type Sge = ib_uverbs_sge;

/// A send work request as `IB_USER_VERBS_CMD_POST_SEND` carries it.
#[derive(Clone, Debug, Default)]
pub struct SendWr {
    pub wr_id: u64,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub sges: Vec<Sge>,
}

/// `enum ib_qp_state` (the kernel's, not in the uAPI).
pub const QPS_RESET: u8 = 0;
pub const QPS_INIT: u8 = 1;
pub const QPS_RTR: u8 = 2;
pub const QPS_RTS: u8 = 3;
pub const QPS_ERR: u8 = 6;

/// `enum ib_qp_attr_mask` (the kernel's, not in the uAPI).
pub const QP_STATE: u32 = 1 << 0;
pub const QP_CUR_STATE: u32 = 1 << 1;
pub const QP_ACCESS_FLAGS: u32 = 1 << 3;
pub const QP_PKEY_INDEX: u32 = 1 << 4;
pub const QP_PORT: u32 = 1 << 5;
pub const QP_AV: u32 = 1 << 7;
pub const QP_PATH_MTU: u32 = 1 << 8;
pub const QP_TIMEOUT: u32 = 1 << 9;
pub const QP_RETRY_CNT: u32 = 1 << 10;
pub const QP_RNR_RETRY: u32 = 1 << 11;
pub const QP_RQ_PSN: u32 = 1 << 12;
pub const QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const QP_SQ_PSN: u32 = 1 << 16;
pub const QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const QP_DEST_QPN: u32 = 1 << 20;

/// `enum ib_mtu` (the kernel's, not in the uAPI).
pub const MTU_1024: u8 = 3;
pub const MTU_4096: u8 = 5;

/// The attributes of a QP modification (`struct ib_uverbs_modify_qp`,
/// the fields this NIC uses).
#[derive(Clone, Copy, Debug, Default)]
pub struct ModifyQp {
    pub attr_mask: u32,
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub port_num: u8,
    pub qp_access_flags: u32,
    pub pkey_index: u16,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    /// The address vector (with [`QP_AV`]).
    pub ah: Ah,
    /// The driver data; `None` sends none.
    pub driver: Option<gaudi_ib_modify_qp>,
}

/// An address vector with a global route (`struct ib_uverbs_qp_dest`), as RoCE needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ah {
    pub port_num: u8,
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

/// The IPv4-mapped GID of `ip` (`::ffff:a.b.c.d`).
pub fn gid_v4(ip: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip);
    g
}

/// The name of the first InfiniBand device of gaudi_ib (`gaudi_0`).
pub fn ib_name() -> io::Result<String> {
    let path = find_device()?;
    let n = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ibdev = std::fs::read_to_string(
        Path::new("/sys/class/infiniband_verbs")
            .join(n)
            .join("ibdev"),
    )?;
    Ok(ibdev.trim().to_string())
}

/// The network interface of `port` (from 1) of InfiniBand device `ib`: the interface of the
/// same PCI device whose `dev_port` is `port - 1`.
pub fn port_netdev(ib: &str, port: u8) -> io::Result<String> {
    let pci = std::fs::canonicalize(format!("/sys/class/infiniband/{ib}/device"))?;
    for e in std::fs::read_dir("/sys/class/net")? {
        let e = e?;
        let Ok(dev) = std::fs::canonicalize(e.path().join("device")) else {
            continue;
        };
        let dev_port = std::fs::read_to_string(e.path().join("dev_port")).unwrap_or_default();
        if dev == pci && dev_port.trim() == (u32::from(port) - 1).to_string() {
            return Ok(e.file_name().to_string_lossy().into_owned());
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no network interface for {ib} port {port}"),
    ))
}

/// Run iproute2's `ip` with `args`.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = std::process::Command::new("/usr/bin/ip")
        .args(args)
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The index of GID `gid` in the table of `port` of InfiniBand device `ib`, as RoCE v2,
/// if it is there.
pub fn gid_index(ib: &str, port: u8, gid: &[u8; 16]) -> Option<u8> {
    let want = gid
        .chunks(2)
        .map(|w| format!("{:02x}{:02x}", w[0], w[1]))
        .collect::<Vec<_>>()
        .join(":");
    let base = format!("/sys/class/infiniband/{ib}/ports/{port}");
    (0..=255u8).find(|i| {
        std::fs::read_to_string(format!("{base}/gids/{i}")).is_ok_and(|g| g.trim() == want)
            && std::fs::read_to_string(format!("{base}/gid_attrs/types/{i}"))
                .is_ok_and(|t| t.trim() == "RoCE v2")
    })
}

/// The IPv4 address the tests give a port: the one QUERY_PORT reports (the first of the port's
/// network interface, which the NIC sends from), or, for a port without one, 10.I.P.1 with I
/// and P the last two bytes of its emulated MAC (the emulator instance and the port index).
pub fn port_ipv4(info: &uapi::gaudi_ib_port_info) -> [u8; 4] {
    if info.ipv4 != [0; 4] {
        info.ipv4
    } else {
        [10, info.mac[3], info.mac[5], 1]
    }
}

/// The first IPv4 address among the RoCE v2 GIDs of `port` of the gaudi device (the lowest
/// index), as sysfs shows them.
pub fn first_ipv4_gid(port: u8) -> Option<[u8; 4]> {
    let ib = ib_name().ok()?;
    (0..=255u8).find_map(|i| {
        let g = gid_at(&ib, port, i)?;
        let v2 = std::fs::read_to_string(format!(
            "/sys/class/infiniband/{ib}/ports/{port}/gid_attrs/types/{i}"
        ))
        .is_ok_and(|t| t.trim() == "RoCE v2");
        (v2 && g[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])
            .then(|| [g[12], g[13], g[14], g[15]])
    })
}

/// Make `port` of the gaudi device a RoCE v2 endpoint at `ipv4`: its network interface up with
/// that address (a /32), a host route to `peer` through it (the core resolves the peer's MAC
/// with ARP on that interface, also when the peer is another port of this host), and the
/// index of the GID the core derived from the address, waited for. Idempotent.
pub fn roce_address(port: u8, ipv4: [u8; 4], peer: Option<[u8; 4]>) -> io::Result<u8> {
    // What this process set up already, checked with one read (tests that
    // reconnect a QP thousands of times call this each time).
    type Done = std::collections::HashMap<(u8, [u8; 4], Option<[u8; 4]>), (String, u8)>;
    static DONE: std::sync::Mutex<Option<Done>> = std::sync::Mutex::new(None);
    let key = (port, ipv4, peer);
    if let Some((ib, i)) = DONE
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|d| d.get(&key))
        .cloned()
    {
        if gid_at(&ib, port, i) == Some(gid_v4(ipv4)) {
            return Ok(i);
        }
    }
    let i = roce_address_setup(port, ipv4, peer)?;
    DONE.lock()
        .unwrap()
        .get_or_insert_with(Default::default)
        .insert(key, (ib_name()?, i));
    Ok(i)
}

/// GID `index` of `port` of InfiniBand device `ib`, if sysfs has it.
fn gid_at(ib: &str, port: u8, index: u8) -> Option<[u8; 16]> {
    let text = std::fs::read_to_string(format!(
        "/sys/class/infiniband/{ib}/ports/{port}/gids/{index}"
    ))
    .ok()?;
    let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(g)
}

fn roce_address_setup(port: u8, ipv4: [u8; 4], peer: Option<[u8; 4]>) -> io::Result<u8> {
    let ib = ib_name()?;
    let ifname = port_netdev(&ib, port)?;
    let addr = format!("{}.{}.{}.{}", ipv4[0], ipv4[1], ipv4[2], ipv4[3]);
    let gid = gid_v4(ipv4);
    // IFF_UP: an interface that is down has no routes, not even to its own
    // addresses.
    let flags = std::fs::read_to_string(format!("/sys/class/net/{ifname}/flags"))?;
    let up = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap_or(0) & 1 != 0;
    if !up {
        ip(&["link", "set", "dev", &ifname, "up"])?;
    }
    if gid_index(&ib, port, &gid).is_none() {
        ip(&["addr", "replace", &format!("{addr}/32"), "dev", &ifname])?;
    }
    if let Some(p) = peer.filter(|p| *p != ipv4) {
        let to = format!("{}.{}.{}.{}/32", p[0], p[1], p[2], p[3]);
        ip(&["route", "replace", &to, "dev", &ifname])?;
        // Two ports of this host on one link (as the tests wire them):
        // each must take ARP from an address of the other, which Linux
        // drops as a martian source unless told to accept local ones.
        std::fs::write("/proc/sys/net/ipv4/conf/all/accept_local", "1")?;
    }
    let start = std::time::Instant::now();
    loop {
        if let Some(i) = gid_index(&ib, port, &gid) {
            return Ok(i);
        }
        if start.elapsed() > std::time::Duration::from_secs(10) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no RoCE v2 GID for {addr} on {ib} port {port} ({ifname})"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What `IB_USER_VERBS_CMD_QUERY_QP` reports (the fields this NIC uses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrs {
    pub qp_state: u8,
    pub path_mtu: u8,
    pub port_num: u8,
    pub qp_access_flags: u32,
    pub dest_qp_num: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub max_send_wr: u32,
    pub max_send_sge: u32,
}

/// `enum ib_wc_status`, `IB_WC_RECV_RDMA_WITH_IMM` of `enum ib_wc_opcode` and
/// `IB_WC_WITH_IMM` of `enum ib_wc_flags` (the kernel's, not in the uAPI; the uAPI's
/// opcodes are `IB_UVERBS_WC_*`).
pub const WC_SUCCESS: u32 = 0;
pub const WC_LOC_PROT_ERR: u32 = 4;
pub const WC_WR_FLUSH_ERR: u32 = 5;
pub const WC_REM_ACCESS_ERR: u32 = 10;
pub const WC_RETRY_EXC_ERR: u32 = 12;
pub const WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const WC_WITH_IMM: u32 = 2;

/// `struct ib_uverbs_wc`.
pub type Wc = ib_uverbs_wc;

/// A completion event channel: a CQ created on it reports one event per
/// arming (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`).
#[derive(Debug)]
pub struct CompChannel {
    pub fd: File,
}

impl CompChannel {
    /// Wait up to `timeout_ms` for a completion event; the CQ handle.
    pub fn next(&self, timeout_ms: i32) -> io::Result<Option<u64>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        let mut handle = [0u8; 8];
        (&self.fd).read_exact(&mut handle)?;
        Ok(Some(u64::from_ne_bytes(handle)))
    }
}

/// A memory region.
#[derive(Debug)]
pub struct Mr {
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
    pub resp: gaudi_ib_reg_mr_resp,
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    pub handle: u32,
    pub pdn: u32,
}

/// The first uverbs character device bound to gaudi_ib.
pub fn find_device() -> io::Result<std::path::PathBuf> {
    let base = Path::new("/sys/class/infiniband_verbs");
    let mut found = Vec::new();
    for e in std::fs::read_dir(base)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("uverbs") {
            continue;
        }
        let ibdev = std::fs::read_to_string(e.path().join("ibdev")).unwrap_or_default();
        if ibdev.trim().starts_with("gaudi_") {
            found.push(name);
        }
    }
    found.sort();
    found
        .first()
        .map(|n| Path::new("/dev/infiniband").join(n))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no gaudi uverbs device"))
}

impl Context {
    /// Open `path` and allocate a user context (`UVERBS_METHOD_GET_CONTEXT`).
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = OpenOptions::new().read(true).write(true).open(path)?;
        let mut resp = gaudi_ib_alloc_ucontext_resp::default();
        let mut ncv = 0u32;
        let mut core_support = 0u64;
        ioctl(
            &fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_GET_CONTEXT,
            [
                Attr::output(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &mut ncv),
                Attr::output(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core_support),
                Attr::output(UVERBS_ATTR_UHW_OUT, &mut resp),
            ],
        )?;
        Ok(Self {
            fd,
            resp,
            num_comp_vectors: ncv,
            pd: std::sync::atomic::AtomicU64::new(NO_PD),
        })
    }

    /// The device file.
    pub fn file(&self) -> &File {
        &self.fd
    }

    /// A legacy write() command through the ioctl path
    /// (`UVERBS_METHOD_INVOKE_WRITE`), as rdma-core issues them.
    fn invoke_write<I: Plain, O: Plain, U: Plain>(
        &self,
        cmd: ib_uverbs_write_cmds,
        input: &I,
        out: &mut O,
        uhw: &mut U,
    ) -> io::Result<()> {
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            [
                Attr::input(UVERBS_ATTR_CORE_IN, input),
                Attr::output(UVERBS_ATTR_CORE_OUT, out),
                Attr::value(UVERBS_ATTR_WRITE_CMD, cmd.into()),
                Attr::output(UVERBS_ATTR_UHW_OUT, uhw),
            ],
        )
        .map(|_| ())
    }

    /// A legacy write() command without response, with driver input data.
    fn invoke_write_in<I: Plain, U: Plain>(
        &self,
        cmd: ib_uverbs_write_cmds,
        input: &I,
        uhw: Option<&U>,
    ) -> io::Result<()> {
        match uhw {
            Some(u) => ioctl(
                &self.fd,
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_INVOKE_WRITE,
                [
                    Attr::input(UVERBS_ATTR_CORE_IN, input),
                    Attr::value(UVERBS_ATTR_WRITE_CMD, cmd.into()),
                    Attr::input(UVERBS_ATTR_UHW_IN, u),
                ],
            )
            .map(|_| ()),
            None => ioctl(
                &self.fd,
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_INVOKE_WRITE,
                [
                    Attr::input(UVERBS_ATTR_CORE_IN, input),
                    Attr::value(UVERBS_ATTR_WRITE_CMD, cmd.into()),
                ],
            )
            .map(|_| ()),
        }
    }

    /// Change a queue pair (`IB_USER_VERBS_CMD_MODIFY_QP`).
    pub fn modify_qp(&self, qp: &Qp, m: &ModifyQp) -> io::Result<()> {
        let cmd = ib_uverbs_modify_qp {
            qp_handle: qp.handle,
            attr_mask: m.attr_mask,
            rq_psn: m.rq_psn,
            sq_psn: m.sq_psn,
            dest_qp_num: m.dest_qp_num,
            qp_access_flags: m.qp_access_flags,
            pkey_index: m.pkey_index,
            qp_state: m.qp_state,
            cur_qp_state: m.cur_qp_state,
            path_mtu: m.path_mtu,
            max_rd_atomic: m.max_rd_atomic,
            max_dest_rd_atomic: m.max_dest_rd_atomic,
            port_num: m.port_num,
            timeout: m.timeout,
            retry_cnt: m.retry_cnt,
            rnr_retry: m.rnr_retry,
            dest: ib_uverbs_qp_dest {
                dgid: m.ah.dgid,
                flow_label: m.ah.flow_label,
                sgid_index: m.ah.sgid_index,
                hop_limit: m.ah.hop_limit,
                traffic_class: m.ah.traffic_class,
                is_global: 1,
                port_num: m.ah.port_num,
                ..Default::default()
            },
            ..Default::default()
        };
        self.invoke_write_in(IB_USER_VERBS_CMD_MODIFY_QP, &cmd, m.driver.as_ref())
    }

    /// Query a queue pair (`IB_USER_VERBS_CMD_QUERY_QP`).
    pub fn query_qp(&self, qp: &Qp) -> io::Result<QpAttrs> {
        let cmd = ib_uverbs_query_qp {
            qp_handle: qp.handle,
            attr_mask: u32::MAX,
            ..Default::default()
        };
        let mut r = ib_uverbs_query_qp_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_QUERY_QP, &cmd, &mut r, &mut [0u64; 0])?;
        Ok(QpAttrs {
            max_send_wr: r.max_send_wr,
            max_send_sge: r.max_send_sge,
            rq_psn: r.rq_psn,
            sq_psn: r.sq_psn,
            dest_qp_num: r.dest_qp_num,
            qp_access_flags: r.qp_access_flags,
            qp_state: r.qp_state,
            path_mtu: r.path_mtu,
            port_num: r.port_num,
            timeout: r.timeout,
            retry_cnt: r.retry_cnt,
        })
    }

    /// Take up to `n` completions of `cq` (`IB_USER_VERBS_CMD_POLL_CQ`).
    pub fn poll_cq(&self, cq: &Cq, n: usize) -> io::Result<Vec<Wc>> {
        let cmd = ib_uverbs_poll_cq {
            cq_handle: cq.handle,
            ne: n as u32,
            ..Default::default()
        };
        // struct ib_uverbs_poll_cq_resp, then its `n` completions.
        let head = std::mem::size_of::<ib_uverbs_poll_cq_resp>();
        let wc = std::mem::size_of::<Wc>();
        let mut resp = vec![0u8; head + n * wc];
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            [
                Attr::input(UVERBS_ATTR_CORE_IN, &cmd),
                Attr::buf(UVERBS_ATTR_CORE_OUT, resp.as_mut_ptr(), resp.len()),
                Attr::value(UVERBS_ATTR_WRITE_CMD, IB_USER_VERBS_CMD_POLL_CQ.into()),
            ],
        )?;
        let count = read_from::<ib_uverbs_poll_cq_resp>(&resp).map_or(0, |r| r.count as usize);
        Ok((0..count.min(n))
            .filter_map(|i| read_from::<Wc>(&resp[head + i * wc..]))
            .collect())
    }

    /// Poll `cq` until `n` completions arrived or `timeout_ms` passed.
    ///
    /// Between empty polls it sleeps 200 us, twice as long after each
    /// empty one up to 2 ms: a completion that comes at once is seen at
    /// once, and a long wait (a WRITE of a GiB) leaves most of the CPU to
    /// the device instead of spending it on polls.
    pub fn wait_cq(&self, cq: &Cq, n: usize, timeout_ms: u64) -> io::Result<Vec<Wc>> {
        let start = std::time::Instant::now();
        let mut all = Vec::new();
        let mut pause = std::time::Duration::from_micros(200);
        while all.len() < n {
            let got = self.poll_cq(cq, n - all.len())?;
            if got.is_empty() {
                if start.elapsed().as_millis() as u64 > timeout_ms {
                    break;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(2));
            } else {
                pause = std::time::Duration::from_micros(200);
            }
            all.extend(got);
        }
        Ok(all)
    }

    /// Arm `cq` for one completion event (`IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`).
    pub fn req_notify_cq(&self, cq: &Cq) -> io::Result<()> {
        let cmd = ib_uverbs_req_notify_cq {
            cq_handle: cq.handle,
            solicited_only: 0,
        };
        self.invoke_write_in::<_, u64>(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &cmd, None)
    }

    /// A completion event channel (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`).
    pub fn create_comp_channel(&self) -> io::Result<CompChannel> {
        let cmd = ib_uverbs_create_comp_channel::default();
        let mut out = ib_uverbs_create_comp_channel_resp::default();
        self.invoke_write(
            IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            &cmd,
            &mut out,
            &mut [0u64; 0],
        )?;
        // SAFETY: the kernel created this file descriptor for us.
        Ok(CompChannel {
            fd: unsafe { File::from_raw_fd(out.fd as i32) },
        })
    }

    /// Allocate a protection domain (`IB_USER_VERBS_CMD_ALLOC_PD`).
    pub fn alloc_pd(&self) -> io::Result<Pd> {
        let cmd = ib_uverbs_alloc_pd::default();
        let mut out = ib_uverbs_alloc_pd_resp::default();
        let mut uhw = gaudi_ib_alloc_pd_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_ALLOC_PD, &cmd, &mut out, &mut uhw)?;
        self.pd
            .store(out.pd_handle.into(), std::sync::atomic::Ordering::Relaxed);
        Ok(Pd {
            handle: out.pd_handle,
            pdn: uhw.pdn,
        })
    }

    /// Free a protection domain (`UVERBS_METHOD_PD_DESTROY`).
    pub fn dealloc_pd(&self, pd: Pd) -> io::Result<()> {
        ioctl(
            &self.fd,
            UVERBS_OBJECT_PD,
            UVERBS_METHOD_PD_DESTROY,
            [Attr::handle(UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle)],
        )
        .map(|_| ())
    }

    /// Create a completion queue of at least `cqe` entries
    /// (`IB_USER_VERBS_CMD_CREATE_CQ`).
    pub fn create_cq(&self, cqe: u32) -> io::Result<Cq> {
        self.create_cq_on(cqe, None)
    }

    /// As [`Context::create_cq`], reporting events on `channel`.
    pub fn create_cq_on(&self, cqe: u32, channel: Option<&CompChannel>) -> io::Result<Cq> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let user_handle = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cmd = ib_uverbs_create_cq {
            user_handle,
            cqe,
            comp_vector: 0,
            comp_channel: channel.map_or(-1, |c| c.fd.as_raw_fd()),
            ..Default::default()
        };
        let mut out = ib_uverbs_create_cq_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_CREATE_CQ, &cmd, &mut out, &mut [0u64; 0])?;
        Ok(Cq {
            handle: out.cq_handle,
            cqe: out.cqe,
            user_handle,
        })
    }

    /// Destroy a completion queue (`UVERBS_METHOD_CQ_DESTROY`).
    pub fn destroy_cq(&self, cq: Cq) -> io::Result<()> {
        let mut resp = ib_uverbs_destroy_cq_resp::default();
        ioctl(
            &self.fd,
            UVERBS_OBJECT_CQ,
            UVERBS_METHOD_CQ_DESTROY,
            [
                Attr::handle(UVERBS_ATTR_DESTROY_CQ_HANDLE, cq.handle),
                Attr::output(UVERBS_ATTR_DESTROY_CQ_RESP, &mut resp),
            ],
        )
        .map(|_| ())
    }

    /// Create a queue pair of type `qp_type` (`IB_UVERBS_QPT_*`) in `pd`, completing on
    /// `cq` (`IB_USER_VERBS_CMD_CREATE_QP`).
    pub fn create_qp(
        &self,
        pd: &Pd,
        cq: &Cq,
        qp_type: ib_uverbs_qp_type,
        caps: QpCaps,
    ) -> io::Result<Qp> {
        let cmd = ib_uverbs_create_qp {
            pd_handle: pd.handle,
            send_cq_handle: cq.handle,
            recv_cq_handle: cq.handle,
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_send_sge,
            max_recv_sge: caps.max_recv_sge,
            max_inline_data: caps.max_inline_data,
            qp_type: u8::try_from(qp_type)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            ..Default::default()
        };
        let mut out = ib_uverbs_create_qp_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_CREATE_QP, &cmd, &mut out, &mut [0u64; 0])?;
        Ok(Qp {
            handle: out.qp_handle,
            qpn: out.qpn,
            max_send_wr: out.max_send_wr,
            max_send_sge: out.max_send_sge,
            max_recv_wr: out.max_recv_wr,
            max_recv_sge: out.max_recv_sge,
            max_inline_data: out.max_inline_data,
        })
    }

    /// Destroy a queue pair (`UVERBS_METHOD_QP_DESTROY`).
    pub fn destroy_qp(&self, qp: Qp) -> io::Result<()> {
        let mut resp = ib_uverbs_destroy_qp_resp::default();
        ioctl(
            &self.fd,
            UVERBS_OBJECT_QP,
            UVERBS_METHOD_QP_DESTROY,
            [
                Attr::handle(UVERBS_ATTR_DESTROY_QP_HANDLE, qp.handle),
                Attr::output(UVERBS_ATTR_DESTROY_QP_RESP, &mut resp),
            ],
        )
        .map(|_| ())
    }

    /// A posting command: `head` (`struct ib_uverbs_post_send` or `_recv`), then the
    /// requests in `wqes`, then the SGEs, sent through `UVERBS_METHOD_INVOKE_WRITE`, the
    /// kernel's reply in `resp` (the request it reports as failed, on an error).
    fn post<H: Plain, R: Plain>(
        &self,
        cmd: ib_uverbs_write_cmds,
        head: &H,
        wqes: &[u8],
        sges: &[Sge],
        resp: &mut R,
    ) -> io::Result<()> {
        let mut buf =
            Vec::with_capacity(std::mem::size_of::<H>() + wqes.len() + std::mem::size_of_val(sges));
        buf.extend_from_slice(bytes_of(head));
        buf.extend_from_slice(wqes);
        for s in sges {
            buf.extend_from_slice(bytes_of(s));
        }
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            [
                Attr::buf(UVERBS_ATTR_CORE_IN, buf.as_ptr(), buf.len()),
                Attr::output(UVERBS_ATTR_CORE_OUT, resp),
                Attr::value(UVERBS_ATTR_WRITE_CMD, cmd.into()),
            ],
        )
        .map(|_| ())
    }

    /// Post send work requests (`IB_USER_VERBS_CMD_POST_SEND`); on an error,
    /// also the index of the request the kernel reports as failed.
    pub fn post_send(&self, qp: &Qp, wrs: &[SendWr]) -> Result<(), (io::Error, u32)> {
        let wqe_size = std::mem::size_of::<ib_uverbs_send_wr>();
        let mut wqes = Vec::with_capacity(wrs.len() * wqe_size);
        let mut sges = Vec::new();
        for w in wrs {
            // Every byte zero (the union `wr` too), then the fields of an RDMA request.
            let mut wr = ib_uverbs_send_wr {
                wr_id: w.wr_id,
                num_sge: w.sges.len() as u32,
                opcode: w.opcode,
                send_flags: w.send_flags,
                ..Default::default()
            };
            wr.ex.imm_data = w.imm_data;
            wr.wr.rdma.remote_addr = w.remote_addr;
            wr.wr.rdma.rkey = w.rkey;
            // SAFETY: `wr` is plain integers without padding, and every byte of it is
            // initialized: `Default` zeroed all of it (its unions whole), fields were written
            // since. (Not `Plain`: a value of it made otherwise may leave bytes of a union
            // uninitialized.)
            wqes.extend_from_slice(unsafe {
                std::slice::from_raw_parts((&wr as *const ib_uverbs_send_wr).cast::<u8>(), wqe_size)
            });
            sges.extend_from_slice(&w.sges);
        }
        let head = ib_uverbs_post_send {
            qp_handle: qp.handle,
            wr_count: wrs.len() as u32,
            sge_count: sges.len() as u32,
            wqe_size: wqe_size as u32,
            ..Default::default()
        };
        let mut resp = ib_uverbs_post_send_resp::default();
        self.post(IB_USER_VERBS_CMD_POST_SEND, &head, &wqes, &sges, &mut resp)
            .map_err(|e| (e, resp.bad_wr))
    }

    /// Post one receive work request with one SGE
    /// (`IB_USER_VERBS_CMD_POST_RECV`).
    pub fn post_recv(&self, qp: &Qp, wr_id: u64, sge: Sge) -> io::Result<()> {
        let wr = ib_uverbs_recv_wr {
            wr_id,
            num_sge: 1,
            reserved: 0,
        };
        let head = ib_uverbs_post_recv {
            qp_handle: qp.handle,
            wr_count: 1,
            sge_count: 1,
            wqe_size: std::mem::size_of::<ib_uverbs_recv_wr>() as u32,
            ..Default::default()
        };
        let mut resp = ib_uverbs_post_recv_resp::default();
        self.post(
            IB_USER_VERBS_CMD_POST_RECV,
            &head,
            bytes_of(&wr),
            &[sge],
            &mut resp,
        )
    }

    /// Register `len` bytes at `addr` with `iova` (`IB_USER_VERBS_CMD_REG_MR`).
    pub fn reg_mr(&self, pd: &Pd, addr: u64, len: u64, iova: u64, access: u32) -> io::Result<Mr> {
        let cmd = ib_uverbs_reg_mr {
            start: addr,
            length: len,
            hca_va: iova,
            pd_handle: pd.handle,
            access_flags: access,
            ..Default::default()
        };
        let mut out = ib_uverbs_reg_mr_resp::default();
        let mut uhw = gaudi_ib_reg_mr_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_REG_MR, &cmd, &mut out, &mut uhw)?;
        Ok(Mr {
            handle: out.mr_handle,
            lkey: out.lkey,
            rkey: out.rkey,
            resp: uhw,
        })
    }

    /// Deregister a memory region (`UVERBS_METHOD_MR_DESTROY`).
    pub fn dereg_mr(&self, mr: Mr) -> io::Result<()> {
        ioctl(
            &self.fd,
            UVERBS_OBJECT_MR,
            UVERBS_METHOD_MR_DESTROY,
            [Attr::handle(UVERBS_ATTR_DESTROY_MR_HANDLE, mr.handle)],
        )
        .map(|_| ())
    }

    /// The context's asynchronous event file (`UVERBS_METHOD_ASYNC_EVENT_ALLOC`).
    pub fn async_events(&self) -> io::Result<AsyncEvents> {
        let attrs = ioctl(
            &self.fd,
            UVERBS_OBJECT_ASYNC_EVENT,
            UVERBS_METHOD_ASYNC_EVENT_ALLOC,
            [Attr::handle(UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0)],
        )?;
        let fd = attrs[0].data() as i32;
        // SAFETY: the kernel created this file descriptor for us; nothing
        // else owns it.
        Ok(AsyncEvents {
            fd: unsafe { File::from_raw_fd(fd) },
        })
    }

    /// The core's `IB_USER_VERBS_CMD_QUERY_DEVICE` (as `ibv_query_device()`).
    pub fn query_device_attrs(&self) -> io::Result<DeviceAttrs> {
        let cmd = ib_uverbs_query_device::default();
        let mut r = ib_uverbs_query_device_resp::default();
        self.invoke_write(IB_USER_VERBS_CMD_QUERY_DEVICE, &cmd, &mut r, &mut [0u64; 0])?;
        Ok(DeviceAttrs {
            node_guid: r.node_guid.to_ne_bytes(),
            max_mr_size: r.max_mr_size,
            page_size_cap: r.page_size_cap,
            vendor_id: r.vendor_id,
            vendor_part_id: r.vendor_part_id,
            max_qp: r.max_qp,
            max_qp_wr: r.max_qp_wr,
            max_sge: r.max_sge,
            max_cq: r.max_cq,
            max_cqe: r.max_cqe,
            max_pd: r.max_pd,
            phys_port_cnt: r.phys_port_cnt,
        })
    }

    /// The core's `UVERBS_METHOD_QUERY_PORT` (as `ibv_query_port()`).
    pub fn query_port_attrs(&self, port: u8) -> io::Result<PortAttrs> {
        let mut r = ib_uverbs_query_port_resp_ex::default();
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_QUERY_PORT,
            [
                Attr::value(UVERBS_ATTR_QUERY_PORT_PORT_NUM, port.into()),
                Attr::output(UVERBS_ATTR_QUERY_PORT_RESP, &mut r),
            ],
        )?;
        let l = &r.legacy_resp;
        Ok(PortAttrs {
            max_msg_sz: l.max_msg_sz,
            gid_tbl_len: l.gid_tbl_len,
            pkey_tbl_len: l.pkey_tbl_len,
            state: l.state,
            max_mtu: l.max_mtu,
            active_mtu: l.active_mtu,
            phys_state: l.phys_state,
            link_layer: l.link_layer,
        })
    }

    /// The core's `UVERBS_METHOD_QUERY_GID_TABLE`: every valid GID of every
    /// port, at most `max` of them (as `ibv_query_gid_table()`).
    pub fn query_gid_table(&self, max: usize) -> io::Result<Vec<GidEntry>> {
        let mut entries = vec![GidEntry::default(); max];
        let mut n = 0u64;
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_QUERY_GID_TABLE,
            [
                Attr::value(
                    UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
                    std::mem::size_of::<GidEntry>() as u64,
                ),
                Attr::buf(
                    UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
                    entries.as_mut_ptr().cast(),
                    max * std::mem::size_of::<GidEntry>(),
                ),
                Attr::output(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut n),
            ],
        )?;
        entries.truncate((n as usize).min(max));
        Ok(entries)
    }

    /// `GAUDI_IB_METHOD_QUERY_PORT` of the driver namespace.
    pub fn query_port(&self, port: u64) -> io::Result<gaudi_ib_port_info> {
        let mut info = gaudi_ib_port_info::default();
        self.query_port_raw([
            Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, port),
            Attr::output(GAUDI_IB_ATTR_QUERY_PORT_RESP, &mut info),
        ])?;
        Ok(info)
    }

    /// `GAUDI_IB_METHOD_QUERY_PORT` with the attributes given, to test how
    /// the kernel checks them.
    pub fn query_port_raw<const N: usize>(&self, attrs: [Attr; N]) -> io::Result<[Attr; N]> {
        ioctl(
            &self.fd,
            GAUDI_IB_OBJECT_DEVICE,
            GAUDI_IB_METHOD_QUERY_PORT,
            attrs,
        )
    }
}

/// `enum ib_event_type` values a device reports (the kernel's, not in the uAPI).
pub const IB_EVENT_DEVICE_FATAL: u32 = 8;
pub const IB_EVENT_PORT_ACTIVE: u32 = 9;
pub const IB_EVENT_PORT_ERR: u32 = 10;
pub const IB_EVENT_GID_CHANGE: u32 = 18;

/// The name of an `enum ib_event_type` value.
pub fn event_name(kind: u32) -> &'static str {
    match kind {
        IB_EVENT_DEVICE_FATAL => "DEVICE_FATAL",
        IB_EVENT_PORT_ACTIVE => "PORT_ACTIVE",
        IB_EVENT_PORT_ERR => "PORT_ERR",
        IB_EVENT_GID_CHANGE => "GID_CHANGE",
        IB_EVENT_CQ_ERR => "CQ_ERR",
        IB_EVENT_QP_FATAL => "QP_FATAL",
        _ => "other",
    }
}

/// `struct ib_uverbs_async_event_desc`: `element` is the port number, QP or CQ handle, by
/// event type.
pub type AsyncEvent = ib_uverbs_async_event_desc;

/// The asynchronous event file of a context (`UVERBS_OBJECT_ASYNC_EVENT`).
pub struct AsyncEvents {
    fd: File,
}

impl AsyncEvents {
    /// The next event other than GID_CHANGE (which the tests' own address
    /// set-up causes), waiting up to `timeout` in all: `Ok(None)` on
    /// timeout, an error (EIO) once the device is gone and every event was
    /// read.
    pub fn next(&self, timeout: std::time::Duration) -> io::Result<Option<AsyncEvent>> {
        let start = std::time::Instant::now();
        loop {
            match self.next_any(timeout.saturating_sub(start.elapsed()))? {
                Some(ev) if ev.event_type == IB_EVENT_GID_CHANGE => continue,
                r => return Ok(r),
            }
        }
    }

    /// The next event of any kind, waiting up to `timeout`.
    pub fn next_any(&self, timeout: std::time::Duration) -> io::Result<Option<AsyncEvent>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(None);
        }
        let mut ev = AsyncEvent::default();
        let n = (&self.fd).read(bytes_of_mut(&mut ev))?;
        if n != std::mem::size_of::<AsyncEvent>() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "short event read",
            ));
        }
        Ok(Some(ev))
    }
}

/// The emulator's control interface, reached from the guest through its
/// third serial port (one command per line, replies end in "ok" or "err").
pub struct EmuCtl {
    tty: File,
    /// Bytes read past the last reply's end (none in practice: one command at a time,
    /// see [`EmuCtl::command`]).
    pending: Vec<u8>,
    /// The ASID whose page tables the commands that read or write device
    /// VAs go through ([`EmuCtl::view_asid_of`]; `None`: no `asid=` prefix).
    pub asid: Option<u32>,
}

impl EmuCtl {
    pub const PATH: &'static str = "/dev/ttyS2";

    pub fn open() -> io::Result<Self> {
        let tty = OpenOptions::new().read(true).write(true).open(Self::PATH)?;
        // SAFETY: termios is plain data, filled by tcgetattr before use.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: `tty` is an open terminal, `t` a valid termios.
        if unsafe { libc::tcgetattr(tty.as_raw_fd(), &mut t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        unsafe { libc::cfmakeraw(&mut t) };
        // SAFETY: as above.
        if unsafe { libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, &t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            tty,
            pending: Vec::new(),
            asid: None,
        })
    }

    /// The `asid=N ` prefix of a command that reads or writes device VAs.
    fn view(&self) -> String {
        self.asid.map_or(String::new(), |a| format!("asid={a} "))
    }

    /// Look at device VAs in the ASID that maps `va` (a VA only the
    /// caller's protection domain maps, e.g. a region open to remote writes
    /// at its iova) from now on. Returns the ASID.
    pub fn view_asid_of(&mut self, va: u64) -> io::Result<u32> {
        let r = self.command(&format!("asid-find {va:#x}"))?;
        let asids: Vec<u32> = r
            .iter()
            .find_map(|l| l.strip_prefix("asids"))
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|a| a.split(':').next()?.parse().ok())
            .collect();
        match asids[..] {
            [a] => {
                self.asid = Some(a);
                Ok(a)
            }
            _ => Err(io::Error::other(format!(
                "device VA {va:#x} is mapped in ASIDs {asids:?}, not one"
            ))),
        }
    }

    /// Send one command; the reply lines before "ok", or the "err" line as
    /// an error.
    ///
    /// The port is one channel for all of the guest's processes: a command
    /// and its reply hold an exclusive lock on it, so that two programs
    /// asking at once (a WRITE source and its target on one host) each read
    /// their own reply.
    pub fn command(&mut self, cmd: &str) -> io::Result<Vec<String>> {
        // The lock is an abstract socket name (the guest's kernel has no file
        // locks): one process at a time can bind it, and it goes with the
        // process that holds it, also when that one is killed. (Abstract
        // names are per network namespace: programs asking from two
        // namespaces at once are not serialised.)
        use std::os::linux::net::SocketAddrExt;
        let name = std::os::unix::net::SocketAddr::from_abstract_name(b"gaudi-emu-ctl")?;
        let _locked = loop {
            match std::os::unix::net::UnixListener::bind_addr(&name) {
                Ok(l) => break l,
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                Err(e) => return Err(e),
            }
        };
        self.exchange(cmd)
    }

    fn exchange(&mut self, cmd: &str) -> io::Result<Vec<String>> {
        use std::io::{Read, Write};
        self.tty.write_all(format!("{cmd}\n").as_bytes())?;
        let mut lines = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            // Whole lines as they arrive: a read returns what the port has, so a reply
            // takes a few reads, not one per byte.
            let Some(end) = self.pending.iter().position(|b| *b == b'\n') else {
                let n = self.tty.read(&mut chunk)?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "emulator gone",
                    ));
                }
                self.pending.extend_from_slice(&chunk[..n]);
                continue;
            };
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let l = String::from_utf8_lossy(&line[..end]).trim_end().to_string();
            if l == "ok" {
                return Ok(lines);
            }
            if let Some(e) = l.strip_prefix("err ") {
                return Err(io::Error::other(format!("emulator: {cmd}: {e}")));
            }
            lines.push(l);
        }
    }

    /// Read `len` bytes at device VA `va` through the device MMU.
    /// The emulator's hash of `len` bytes at device VA `va`, read through
    /// the device MMU; compare with [`region_hash`] of what the process sees.
    pub fn hash(&mut self, va: u64, len: u64) -> io::Result<u64> {
        let r = self.command(&format!("hash {}{va:#x} {len}", self.view()))?;
        r.iter()
            .find_map(|l| l.strip_prefix("hash "))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| io::Error::other(format!("bad hash reply {r:?}")))
    }

    pub fn peek(&mut self, va: u64, len: usize) -> io::Result<Vec<u8>> {
        let r = self.command(&format!("peek {}{va:#x} {len}", self.view()))?;
        let hex = r
            .first()
            .and_then(|l| l.strip_prefix("data "))
            .ok_or_else(|| io::Error::other("peek: no data"))?;
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(io::Error::other))
            .collect()
    }

    /// One byte at each of `vas` (up to 64) through the device MMU, in one
    /// command: `None` where the read faults.
    pub fn peek_bytes(&mut self, vas: &[u64]) -> io::Result<Vec<Option<u8>>> {
        let list: Vec<String> = vas.iter().map(|v| format!("{v:#x}")).collect();
        let r = self.command(&format!("peek-bytes {}{}", self.view(), list.join(" ")))?;
        let bytes = r
            .first()
            .and_then(|l| l.strip_prefix("bytes "))
            .ok_or_else(|| io::Error::other("peek-bytes: no bytes"))?;
        let got: Vec<Option<u8>> = bytes
            .split(' ')
            .map(|b| u8::from_str_radix(b, 16).ok())
            .collect();
        if got.len() != vas.len() {
            return Err(io::Error::other("peek-bytes: wrong count"));
        }
        Ok(got)
    }

    /// Write `data` at device VA `va` through the device MMU.
    pub fn poke(&mut self, va: u64, data: &[u8]) -> io::Result<()> {
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        self.command(&format!("poke {}{va:#x} {hex}", self.view()))
            .map(|_| ())
    }

    /// The NIC's registers at configuration-space offsets `offs` (`nic-rd`).
    pub fn nic_rd(&mut self, offs: &[u64]) -> io::Result<Vec<u32>> {
        let list: Vec<String> = offs.iter().map(|o| format!("{o:x}")).collect();
        let r = self.command(&format!("nic-rd {}", list.join(" ")))?;
        let line = r
            .first()
            .ok_or_else(|| io::Error::other("nic-rd: no reply"))?;
        let vals: Vec<u32> = line
            .split_whitespace()
            .zip(&list)
            .map(|(kv, o)| {
                kv.strip_prefix(o.as_str())
                    .and_then(|v| v.strip_prefix("=0x"))
                    .and_then(|v| u32::from_str_radix(v, 16).ok())
                    .ok_or_else(|| io::Error::other(format!("nic-rd: {line}")))
            })
            .collect::<io::Result<_>>()?;
        if vals.len() != offs.len() {
            return Err(io::Error::other(format!("nic-rd: {line}")));
        }
        Ok(vals)
    }

    /// `len` bytes of device memory at `offset` (`devmem-peek`).
    pub fn devmem_peek(&mut self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let r = self.command(&format!("devmem-peek {offset:#x} {len}"))?;
        let hex = r
            .first()
            .and_then(|l| l.strip_prefix("data "))
            .ok_or_else(|| io::Error::other("devmem-peek: no data"))?;
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(io::Error::other))
            .collect()
    }

    /// Whether QP `qpn` of port `port` (from 1) has a valid requester and a
    /// valid responder context on the NIC: the VALID bits of its entries in
    /// the port's context tables, found through the tables' base address
    /// registers (`nic-rd`) and read in device memory (`devmem-peek`), where
    /// the driver keeps them (device-model.rst).
    pub fn nic_qp_valid(&mut self, port: u32, qpn: u32) -> io::Result<(bool, bool)> {
        // QPC0_REQ_BASE_ADDRESS_63_32, _31_7, QPC0_RES_BASE_ADDRESS_63_32,
        // _31_7 of port 0; port p is engine p & 1 of macro p >> 1.
        const REGS: [u64; 4] = [0x541_f00c, 0x541_f010, 0x541_f040, 0x541_f044];
        const MACRO_STRIDE: u64 = 0x8_0000;
        const ODD_ENGINE: u64 = 0x2_0000;
        /// Where device memory is in the NIC's physical address space.
        const DRAM_PHYS_BASE: u64 = 0x1001_0000_0000_0000;
        /// Bytes of a requester's and of a responder's context; VALID is
        /// the top bit of each.
        const REQ_QPC: u64 = 128;
        const RES_QPC: u64 = 32;
        let p = u64::from(
            port.checked_sub(1)
                .ok_or_else(|| io::Error::other("no port 0"))?,
        );
        let at = MACRO_STRIDE * (p >> 1) + ODD_ENGINE * (p & 1);
        let r = self.nic_rd(&REGS.map(|o| o + at))?;
        let base = |hi: u32, lo: u32| (u64::from(hi) << 32) | (u64::from(lo & 0x1ff_ffff) << 7);
        let mut valid = |table: u64, size: u64| -> io::Result<bool> {
            let off = table.checked_sub(DRAM_PHYS_BASE).ok_or_else(|| {
                io::Error::other(format!("context table at {table:#x}: not in device memory"))
            })? + u64::from(qpn) * size;
            let c = self.devmem_peek(off, size as usize)?;
            Ok(c[size as usize - 1] & 0x80 != 0)
        };
        Ok((
            valid(base(r[0], r[1]), REQ_QPC)?,
            valid(base(r[2], r[3]), RES_QPC)?,
        ))
    }

    /// A counter of the emulator's "stat" reply, e.g. "dma_audit".
    pub fn stat(&mut self, name: &str) -> io::Result<u64> {
        for l in self.command("stat")? {
            if let Some(v) = l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')) {
                return v.trim().parse().map_err(io::Error::other);
            }
        }
        Err(io::Error::other(format!("stat: no {name}")))
    }

    /// Counter `field` (tx, rx, retransmits, naks, icrc_errors, ...) of port
    /// index `port` (from 0).
    pub fn port_stat(&mut self, port: u32, field: &str) -> io::Result<u64> {
        let prefix = format!("port {port} ");
        for l in self.command("stat")? {
            let Some(rest) = l.strip_prefix(&prefix) else {
                continue;
            };
            let mut w = rest.split_whitespace();
            while let Some(k) = w.next() {
                let v = w.next();
                if k == field {
                    return v.unwrap_or("").parse().map_err(io::Error::other);
                }
            }
        }
        Err(io::Error::other(format!("stat: no {field} of port {port}")))
    }
}

/// `IB_EVENT_CQ_ERR`, `IB_EVENT_QP_FATAL` (the kernel's, not in the uAPI).
pub const IB_EVENT_CQ_ERR: u32 = 0;
pub const IB_EVENT_QP_FATAL: u32 = 1;

/// The kernel log (`/dev/kmsg`), followed from where it stood when opened:
/// how many records (lines of `dmesg`) each step added, and their text.
pub struct KernelLog {
    file: File,
    /// The sequence number of the next record.
    next_seq: u64,
}

impl KernelLog {
    /// Open the log and read past every record already in it.
    pub fn open() -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")?;
        let mut log = Self { file, next_seq: 0 };
        log.read_new()?;
        Ok(log)
    }

    /// The records added since the last call (or since [`KernelLog::open`]):
    /// how many, by their sequence numbers (counting any the ring buffer
    /// overwrote before they were read), and the text of those read.
    pub fn read_new(&mut self) -> io::Result<(u64, Vec<String>)> {
        let start = self.next_seq;
        let mut texts = Vec::new();
        // A record is at most 1 KiB of text plus its properties.
        let mut buf = vec![0u8; 16384];
        loop {
            match (&self.file).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    // "PRIO,SEQ,USEC,FLAGS[,...];TEXT\n" then " KEY=VALUE" lines.
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    let Some((head, body)) = rec.split_once(';') else {
                        continue;
                    };
                    if let Some(seq) = head.split(',').nth(1).and_then(|v| v.parse::<u64>().ok()) {
                        self.next_seq = seq + 1;
                    }
                    texts.push(body.lines().next().unwrap_or("").to_string());
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                // Records were overwritten before this read: the next one
                // returns the oldest left; the sequence numbers count the gap.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok((self.next_seq.saturating_sub(start), texts))
    }
}

/// The errno of an error, 0 if it has none.
pub fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// The emulator's region hash (its `hash` command): FNV-1a over the
/// little-endian 64-bit words of `data` (the last word zero-padded), then
/// the length xored in.
pub fn region_hash(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in data.chunks(8) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(0x100_0000_01b3);
    }
    h ^ data.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The emulator's `hash` gives the same value for bytes 0 to 20.
    #[test]
    fn region_hash_known_value() {
        let data: Vec<u8> = (0..21).collect();
        assert_eq!(region_hash(&data), 0x7242_fe74_5fec_a42a);
    }

    #[test]
    fn layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<Attr>(), 16);
        assert_eq!(std::mem::size_of::<IoctlBuf<0>>(), 24);
        assert_eq!(std::mem::size_of::<IoctlBuf<2>>(), 56);
        assert_eq!(std::mem::size_of::<gaudi_ib_alloc_ucontext_resp>(), 56);
        assert_eq!(std::mem::size_of::<gaudi_ib_alloc_pd_resp>(), 8);
        assert_eq!(std::mem::size_of::<gaudi_ib_port_info>(), 32);
        assert_eq!(std::mem::size_of::<GidEntry>(), 32);
        assert_eq!(std::mem::size_of::<ib_uverbs_send_wr>(), 56);
        assert_eq!(RDMA_VERBS_IOCTL, 0xc018_1b01);
        assert_eq!(RDMA_DRIVER_GAUDI, 22);
        assert_eq!(ATTR_F_MANDATORY, 1);
    }
}
