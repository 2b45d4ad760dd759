// SPDX-License-Identifier: GPL-2.0

//! User-space access to the gaudi_ib RDMA driver through the kernel's uverbs
//! ioctl interface (`RDMA_VERBS_IOCTL` on `/dev/infiniband/uverbsN`), without
//! libibverbs: the standard objects (context, PD) and the driver's own
//! namespace (include/uapi/rdma/gaudi_user_ioctl_cmds.h).
//!
//! The structures mirror include/uapi/rdma/rdma_user_ioctl_cmds.h,
//! ib_user_ioctl_cmds.h, ib_user_verbs.h and the gaudi headers.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

pub mod dv;
pub mod hbm;
pub mod table;

/// `UVERBS_ID_NS_SHIFT`: driver ids start at `1 << 12`.
pub const NS_DRIVER: u16 = 1 << 12;

/// `RDMA_DRIVER_GAUDI` of `enum rdma_driver_id`.
pub const RDMA_DRIVER_GAUDI: u32 = 22;

// enum uverbs_default_objects
const UVERBS_OBJECT_DEVICE: u16 = 0;
// enum uverbs_methods_device
const UVERBS_METHOD_INVOKE_WRITE: u16 = 0;
const UVERBS_METHOD_QUERY_PORT: u16 = 2;
const UVERBS_METHOD_GET_CONTEXT: u16 = 3;
const UVERBS_METHOD_QUERY_GID_TABLE: u16 = 5;
// enum uverbs_attrs_query_port_cmd_attr_ids
const UVERBS_ATTR_QUERY_PORT_PORT_NUM: u16 = 0;
const UVERBS_ATTR_QUERY_PORT_RESP: u16 = 1;
// enum uverbs_attrs_query_gid_table_cmd_attr_ids
const UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE: u16 = 0;
const UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES: u16 = 2;
const UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3;
// enum uverbs_attrs_get_context_attr_ids
const UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
const UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT: u16 = 1;
// enum uverbs_attrs_invoke_write_cmd_attr_ids
const UVERBS_ATTR_CORE_IN: u16 = 0;
const UVERBS_ATTR_CORE_OUT: u16 = 1;
const UVERBS_ATTR_WRITE_CMD: u16 = 2;
// enum uverbs_attrs_uhw
const UVERBS_ATTR_UHW_IN: u16 = NS_DRIVER;
const UVERBS_ATTR_UHW_OUT: u16 = NS_DRIVER + 1;
// enum ib_uverbs_write_cmds
const IB_USER_VERBS_CMD_QUERY_DEVICE: u64 = 1;
const IB_USER_VERBS_CMD_ALLOC_PD: u64 = 3;
const IB_USER_VERBS_CMD_REG_MR: u64 = 9;
const IB_USER_VERBS_CMD_CREATE_CQ: u64 = 18;
const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u64 = 17;
const IB_USER_VERBS_CMD_POLL_CQ: u64 = 21;
const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u64 = 23;
const IB_USER_VERBS_CMD_CREATE_QP: u64 = 24;
const IB_USER_VERBS_CMD_QUERY_QP: u64 = 25;
const IB_USER_VERBS_CMD_MODIFY_QP: u64 = 26;
const IB_USER_VERBS_CMD_POST_SEND: u64 = 28;
const IB_USER_VERBS_CMD_POST_RECV: u64 = 29;
const UVERBS_OBJECT_CQ: u16 = 3;
const UVERBS_OBJECT_QP: u16 = 4;
const UVERBS_METHOD_CQ_DESTROY: u16 = 1;
const UVERBS_METHOD_QP_DESTROY: u16 = 1;
// UVERBS_ATTR_DESTROY_{CQ,QP}_{HANDLE,RESP}
const UVERBS_ATTR_DESTROY_HANDLE: u16 = 0;
const UVERBS_ATTR_DESTROY_RESP: u16 = 1;
const UVERBS_OBJECT_MR: u16 = 7;
const UVERBS_METHOD_MR_DESTROY: u16 = 1;
const UVERBS_ATTR_DESTROY_MR_HANDLE: u16 = 0;
// enum uverbs_methods_pd, enum uverbs_attrs_destroy_pd
const UVERBS_OBJECT_PD: u16 = 1;
const UVERBS_METHOD_PD_DESTROY: u16 = 0;
const UVERBS_ATTR_DESTROY_PD_HANDLE: u16 = 0;
const UVERBS_OBJECT_ASYNC_EVENT: u16 = 16;
const UVERBS_METHOD_ASYNC_EVENT_ALLOC: u16 = 0;
const UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE: u16 = 0;
// UVERBS_ATTR_F_MANDATORY
const ATTR_F_MANDATORY: u16 = 1;

// gaudi_user_ioctl_cmds.h
const GAUDI_IB_OBJECT_DEVICE: u16 = NS_DRIVER;
const GAUDI_IB_METHOD_QUERY_PORT: u16 = NS_DRIVER;
const GAUDI_IB_ATTR_QUERY_PORT_NUM: u16 = NS_DRIVER;
const GAUDI_IB_ATTR_QUERY_PORT_RESP: u16 = NS_DRIVER + 1;

/// `struct ib_uverbs_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Attr {
    pub attr_id: u16,
    pub len: u16,
    pub flags: u16,
    pub reserved: u16,
    pub data: u64,
}

impl Attr {
    /// An inline value (`len` up to 8 bytes).
    pub fn value(id: u16, v: u64) -> Self {
        Self {
            attr_id: id,
            len: 8,
            flags: ATTR_F_MANDATORY,
            reserved: 0,
            data: v,
        }
    }

    /// An object handle (IDR attribute: no length).
    pub fn handle(id: u16, handle: u32) -> Self {
        Self {
            attr_id: id,
            len: 0,
            flags: ATTR_F_MANDATORY,
            reserved: 0,
            data: handle.into(),
        }
    }

    /// A pointer to `len` bytes at `ptr` (input or output).
    pub fn buf(id: u16, ptr: *const u8, len: usize) -> Self {
        Self {
            attr_id: id,
            len: len as u16,
            flags: ATTR_F_MANDATORY,
            reserved: 0,
            data: ptr as u64,
        }
    }

    /// An input structure. Inputs of up to 8 bytes travel inline in `data`,
    /// as the kernel expects of them.
    pub fn input<T>(id: u16, v: &T) -> Self {
        let len = std::mem::size_of::<T>();
        if len > 8 {
            return Self::buf(id, (v as *const T).cast(), len);
        }
        let mut data = [0u8; 8];
        // SAFETY: `v` is `len` readable bytes, `len <= 8`.
        let bytes = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), len) };
        data[..len].copy_from_slice(bytes);
        Self {
            attr_id: id,
            len: len as u16,
            flags: ATTR_F_MANDATORY,
            reserved: 0,
            data: u64::from_ne_bytes(data),
        }
    }

    /// An output structure.
    pub fn output<T>(id: u16, v: &mut T) -> Self {
        Self::buf(id, (v as *mut T).cast(), std::mem::size_of::<T>())
    }
}

/// `struct ib_uverbs_ioctl_hdr` followed by its attributes.
#[repr(C)]
struct IoctlHdr<const N: usize> {
    length: u16,
    object_id: u16,
    method_id: u16,
    num_attrs: u16,
    reserved1: u64,
    driver_id: u32,
    reserved2: u32,
    attrs: [Attr; N],
}

/// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`.
const RDMA_VERBS_IOCTL: u64 = (3 << 30) | (24 << 16) | (0x1b << 8) | 1;

/// `struct gaudi_ib_alloc_ucontext_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocUcontextResp {
    pub comp_mask: u32,
    pub abi_version: u32,
    pub ports_mask: u64,
    pub num_ports: u32,
    pub max_qps: u32,
    pub max_cqs: u32,
    pub max_cqe: u32,
    pub max_sqe: u32,
    pub max_mtu: u32,
    pub max_msg: u64,
    pub page_size_cap: u64,
}

/// `struct gaudi_ib_alloc_pd_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocPdResp {
    pub comp_mask: u32,
    pub pdn: u32,
}

/// `struct gaudi_ib_port_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PortInfo {
    pub comp_mask: u32,
    pub port_num: u32,
    pub mac: [u8; 6],
    pub reserved0: [u8; 2],
    pub ipv4: [u8; 4],
    pub flags: u32,
    pub speed_mbps: u32,
    pub reserved1: u32,
}

/// `GAUDI_IB_PORT_LINK_UP`.
pub const PORT_LINK_UP: u32 = 1;

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
/// `LINK_UP`, `IB_LINK_LAYER_ETHERNET`.
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

/// `IB_UVERBS_GID_TYPE_ROCE_V2`.
pub const GID_TYPE_ROCE_V2: u32 = 2;

/// `struct ib_uverbs_gid_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GidEntry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub netdev_ifindex: u32,
}

/// A raw uverbs ioctl call with `N` attributes.
pub fn ioctl<const N: usize>(
    fd: &File,
    object_id: u16,
    method_id: u16,
    attrs: [Attr; N],
) -> io::Result<[Attr; N]> {
    let mut hdr = IoctlHdr {
        length: std::mem::size_of::<IoctlHdr<N>>() as u16,
        object_id,
        method_id,
        num_attrs: N as u16,
        reserved1: 0,
        driver_id: RDMA_DRIVER_GAUDI,
        reserved2: 0,
        attrs,
    };
    // SAFETY: `hdr` is a valid ioctl header followed by its N attributes;
    // the pointers in the attributes point to live buffers of their lengths.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), RDMA_VERBS_IOCTL as _, &mut hdr) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(hdr.attrs)
}

/// An open uverbs device with its user context.
pub struct Context {
    fd: File,
    pub resp: AllocUcontextResp,
    pub num_comp_vectors: u32,
}

/// `enum ib_access_flags`.
pub const ACCESS_LOCAL_WRITE: u32 = 1;
pub const ACCESS_REMOTE_WRITE: u32 = 2;
pub const ACCESS_REMOTE_READ: u32 = 4;
pub const ACCESS_REMOTE_ATOMIC: u32 = 8;

/// `struct gaudi_ib_reg_mr_resp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RegMrResp {
    pub comp_mask: u32,
    pub page_shift: u32,
    pub mmu_va: u64,
}

/// `enum ib_wr_opcode` (`IB_UVERBS_WR_*`).
pub const WR_RDMA_WRITE: u32 = 0;
pub const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const WR_SEND: u32 = 2;
pub const WR_SEND_WITH_IMM: u32 = 3;
pub const WR_RDMA_READ: u32 = 4;
pub const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `IB_QPT_RC`, `IB_QPT_UD`.
/// `enum ib_send_flags`.
pub const SEND_SIGNALED: u32 = 1 << 1;

pub const QPT_RC: u8 = 2;
pub const QPT_UD: u8 = 4;

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
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

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

/// `enum ib_qp_state`.
pub const QPS_RESET: u8 = 0;
pub const QPS_INIT: u8 = 1;
pub const QPS_RTR: u8 = 2;
pub const QPS_RTS: u8 = 3;
pub const QPS_ERR: u8 = 6;

/// `enum ib_qp_attr_mask`.
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

/// `enum ib_mtu`.
pub const MTU_1024: u8 = 3;
pub const MTU_4096: u8 = 5;

/// `enum gaudi_ib_modify_qp_flags`.
pub const MODIFY_QP_DEST: u32 = 1 << 0;
pub const MODIFY_QP_REMOTE_RKEY: u32 = 1 << 1;
pub const MODIFY_QP_LOCAL_RKEY: u32 = 1 << 2;

/// `struct gaudi_ib_modify_qp`: the driver data of a QP modification.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GaudiModifyQp {
    pub comp_mask: u32,
    pub flags: u32,
    pub remote_rkey: u32,
    pub local_rkey: u32,
    pub dmac: [u8; 6],
    pub reserved0: [u8; 2],
    pub dest_ipv4: [u8; 4],
    pub udp_sport: u16,
    pub reserved1: u16,
}

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
    /// The driver data; `None` sends none.
    pub driver: Option<GaudiModifyQp>,
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

/// `enum ib_wc_status` and `enum ib_wc_opcode` values.
pub const WC_SUCCESS: u32 = 0;
pub const WC_LOC_PROT_ERR: u32 = 4;
pub const WC_WR_FLUSH_ERR: u32 = 5;
pub const WC_REM_ACCESS_ERR: u32 = 10;
pub const WC_RETRY_EXC_ERR: u32 = 12;
pub const WC_RDMA_WRITE: u32 = 1;
pub const WC_RECV_RDMA_WITH_IMM: u32 = 129;
pub const WC_WITH_IMM: u32 = 2;

/// `struct ib_uverbs_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub port_num: u8,
    pub reserved: u8,
}

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
    pub resp: RegMrResp,
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
        let mut resp = AllocUcontextResp::default();
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
        })
    }

    /// The device file.
    pub fn file(&self) -> &File {
        &self.fd
    }

    /// A legacy write() command through the ioctl path
    /// (`UVERBS_METHOD_INVOKE_WRITE`), as rdma-core issues them.
    fn invoke_write<I, O, U>(
        &self,
        cmd: u64,
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
                Attr::value(UVERBS_ATTR_WRITE_CMD, cmd),
                Attr::output(UVERBS_ATTR_UHW_OUT, uhw),
            ],
        )
        .map(|_| ())
    }

    /// A legacy write() command without response, with driver input data.
    fn invoke_write_in<I, U>(&self, cmd: u64, input: &I, uhw: Option<&U>) -> io::Result<()> {
        match uhw {
            Some(u) => ioctl(
                &self.fd,
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_INVOKE_WRITE,
                [
                    Attr::input(UVERBS_ATTR_CORE_IN, input),
                    Attr::value(UVERBS_ATTR_WRITE_CMD, cmd),
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
                    Attr::value(UVERBS_ATTR_WRITE_CMD, cmd),
                ],
            )
            .map(|_| ()),
        }
    }

    /// Change a queue pair (`IB_USER_VERBS_CMD_MODIFY_QP`).
    pub fn modify_qp(&self, qp: &Qp, m: &ModifyQp) -> io::Result<()> {
        // struct ib_uverbs_modify_qp: two 32-byte ib_uverbs_qp_dest, then
        // the attributes; 112 bytes.
        let mut b = vec![0u8; 112];
        b[64..68].copy_from_slice(&qp.handle.to_ne_bytes());
        b[68..72].copy_from_slice(&m.attr_mask.to_ne_bytes());
        b[76..80].copy_from_slice(&m.rq_psn.to_ne_bytes());
        b[80..84].copy_from_slice(&m.sq_psn.to_ne_bytes());
        b[84..88].copy_from_slice(&m.dest_qp_num.to_ne_bytes());
        b[88..92].copy_from_slice(&m.qp_access_flags.to_ne_bytes());
        b[92..94].copy_from_slice(&m.pkey_index.to_ne_bytes());
        b[96] = m.qp_state;
        b[97] = m.cur_qp_state;
        b[98] = m.path_mtu;
        b[101] = m.max_rd_atomic;
        b[102] = m.max_dest_rd_atomic;
        b[104] = m.port_num;
        b[105] = m.timeout;
        b[106] = m.retry_cnt;
        b[107] = m.rnr_retry;
        let cmd: [u8; 112] = b.try_into().unwrap();
        self.invoke_write_in(IB_USER_VERBS_CMD_MODIFY_QP, &cmd, m.driver.as_ref())
    }

    /// Query a queue pair (`IB_USER_VERBS_CMD_QUERY_QP`).
    pub fn query_qp(&self, qp: &Qp) -> io::Result<QpAttrs> {
        // struct ib_uverbs_query_qp { response, qp_handle, attr_mask }
        let mut cmd = [0u8; 16];
        cmd[8..12].copy_from_slice(&qp.handle.to_ne_bytes());
        cmd[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        let mut r = [0u8; 128];
        self.invoke_write(IB_USER_VERBS_CMD_QUERY_QP, &cmd, &mut r, &mut [0u64; 0])?;
        let u32_at = |o: usize| u32::from_ne_bytes(r[o..o + 4].try_into().unwrap());
        Ok(QpAttrs {
            max_send_wr: u32_at(64),
            max_send_sge: u32_at(72),
            rq_psn: u32_at(88),
            sq_psn: u32_at(92),
            dest_qp_num: u32_at(96),
            qp_access_flags: u32_at(100),
            qp_state: r[108],
            path_mtu: r[110],
            port_num: r[116],
            timeout: r[117],
            retry_cnt: r[118],
        })
    }

    /// Take up to `n` completions of `cq` (`IB_USER_VERBS_CMD_POLL_CQ`).
    pub fn poll_cq(&self, cq: &Cq, n: usize) -> io::Result<Vec<Wc>> {
        // struct ib_uverbs_poll_cq { response, cq_handle, ne }
        let mut cmd = [0u8; 16];
        cmd[8..12].copy_from_slice(&cq.handle.to_ne_bytes());
        cmd[12..16].copy_from_slice(&(n as u32).to_ne_bytes());
        // struct ib_uverbs_poll_cq_resp { count, reserved, wc[] }
        let mut resp = vec![0u8; 8 + n * std::mem::size_of::<Wc>()];
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            [
                Attr::input(UVERBS_ATTR_CORE_IN, &cmd),
                Attr::buf(UVERBS_ATTR_CORE_OUT, resp.as_mut_ptr(), resp.len()),
                Attr::value(UVERBS_ATTR_WRITE_CMD, IB_USER_VERBS_CMD_POLL_CQ),
            ],
        )?;
        let count = u32::from_ne_bytes(resp[0..4].try_into().unwrap()) as usize;
        Ok((0..count.min(n))
            .map(|i| {
                let o = 8 + i * std::mem::size_of::<Wc>();
                // SAFETY: `Wc` is plain data of this size at offset `o`.
                unsafe { std::ptr::read_unaligned(resp[o..].as_ptr().cast::<Wc>()) }
            })
            .collect())
    }

    /// Poll `cq` until `n` completions arrived or `timeout_ms` passed.
    pub fn wait_cq(&self, cq: &Cq, n: usize, timeout_ms: u64) -> io::Result<Vec<Wc>> {
        let start = std::time::Instant::now();
        let mut all = Vec::new();
        while all.len() < n {
            let got = self.poll_cq(cq, n - all.len())?;
            if got.is_empty() {
                if start.elapsed().as_millis() as u64 > timeout_ms {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            all.extend(got);
        }
        Ok(all)
    }

    /// Arm `cq` for one completion event (`IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`).
    pub fn req_notify_cq(&self, cq: &Cq) -> io::Result<()> {
        // struct ib_uverbs_req_notify_cq { cq_handle, solicited_only }
        let cmd = [cq.handle, 0u32];
        self.invoke_write_in::<_, u64>(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &cmd, None)
    }

    /// A completion event channel (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`).
    pub fn create_comp_channel(&self) -> io::Result<CompChannel> {
        // struct ib_uverbs_create_comp_channel { response }
        let cmd = 0u64;
        let mut fd = 0i32;
        self.invoke_write(
            IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            &cmd,
            &mut fd,
            &mut [0u64; 0],
        )?;
        // SAFETY: the kernel created this file descriptor for us.
        Ok(CompChannel {
            fd: unsafe { File::from_raw_fd(fd) },
        })
    }

    /// Allocate a protection domain (`IB_USER_VERBS_CMD_ALLOC_PD`).
    pub fn alloc_pd(&self) -> io::Result<Pd> {
        // struct ib_uverbs_alloc_pd { __aligned_u64 response; }
        let cmd = 0u64;
        // struct ib_uverbs_alloc_pd_resp { __u32 pd_handle; }
        let mut out = 0u32;
        let mut uhw = AllocPdResp::default();
        self.invoke_write(IB_USER_VERBS_CMD_ALLOC_PD, &cmd, &mut out, &mut uhw)?;
        Ok(Pd {
            handle: out,
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
        // struct ib_uverbs_create_cq
        #[repr(C)]
        struct Cmd {
            response: u64,
            user_handle: u64,
            cqe: u32,
            comp_vector: u32,
            comp_channel: i32,
            reserved: u32,
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let user_handle = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cmd = Cmd {
            response: 0,
            user_handle,
            cqe,
            comp_vector: 0,
            comp_channel: channel.map_or(-1, |c| c.fd.as_raw_fd()),
            reserved: 0,
        };
        // struct ib_uverbs_create_cq_resp { cq_handle, cqe }
        let mut out = [0u32; 2];
        self.invoke_write(IB_USER_VERBS_CMD_CREATE_CQ, &cmd, &mut out, &mut [0u64; 0])?;
        Ok(Cq {
            handle: out[0],
            cqe: out[1],
            user_handle,
        })
    }

    /// Destroy a completion queue (`UVERBS_METHOD_CQ_DESTROY`).
    pub fn destroy_cq(&self, cq: Cq) -> io::Result<()> {
        let mut resp = [0u32; 2];
        ioctl(
            &self.fd,
            UVERBS_OBJECT_CQ,
            UVERBS_METHOD_CQ_DESTROY,
            [
                Attr::handle(UVERBS_ATTR_DESTROY_HANDLE, cq.handle),
                Attr::output(UVERBS_ATTR_DESTROY_RESP, &mut resp),
            ],
        )
        .map(|_| ())
    }

    /// Create a queue pair of type `qp_type` in `pd`, completing on `cq`
    /// (`IB_USER_VERBS_CMD_CREATE_QP`).
    pub fn create_qp(&self, pd: &Pd, cq: &Cq, qp_type: u8, caps: QpCaps) -> io::Result<Qp> {
        // struct ib_uverbs_create_qp
        #[repr(C)]
        struct Cmd {
            response: u64,
            user_handle: u64,
            pd_handle: u32,
            send_cq_handle: u32,
            recv_cq_handle: u32,
            srq_handle: u32,
            max_send_wr: u32,
            max_recv_wr: u32,
            max_send_sge: u32,
            max_recv_sge: u32,
            max_inline_data: u32,
            sq_sig_all: u8,
            qp_type: u8,
            is_srq: u8,
            reserved: u8,
        }
        let cmd = Cmd {
            response: 0,
            user_handle: 0,
            pd_handle: pd.handle,
            send_cq_handle: cq.handle,
            recv_cq_handle: cq.handle,
            srq_handle: 0,
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_send_sge,
            max_recv_sge: caps.max_recv_sge,
            max_inline_data: caps.max_inline_data,
            sq_sig_all: 0,
            qp_type,
            is_srq: 0,
            reserved: 0,
        };
        // struct ib_uverbs_create_qp_resp
        let mut out = [0u32; 8];
        self.invoke_write(IB_USER_VERBS_CMD_CREATE_QP, &cmd, &mut out, &mut [0u64; 0])?;
        Ok(Qp {
            handle: out[0],
            qpn: out[1],
            max_send_wr: out[2],
            max_send_sge: out[4],
        })
    }

    /// Destroy a queue pair (`UVERBS_METHOD_QP_DESTROY`).
    pub fn destroy_qp(&self, qp: Qp) -> io::Result<()> {
        let mut resp = 0u32;
        ioctl(
            &self.fd,
            UVERBS_OBJECT_QP,
            UVERBS_METHOD_QP_DESTROY,
            [
                Attr::handle(UVERBS_ATTR_DESTROY_HANDLE, qp.handle),
                Attr::output(UVERBS_ATTR_DESTROY_RESP, &mut resp),
            ],
        )
        .map(|_| ())
    }

    /// A posting command: `struct ib_uverbs_post_{send,recv}` (header, then
    /// `count` requests of `wqe_size` bytes in `wqes`, then the SGEs), sent
    /// through `UVERBS_METHOD_INVOKE_WRITE`; on an error, also the 1-based
    /// index of the request the kernel reports as failed.
    fn post(
        &self,
        cmd: u64,
        qp: &Qp,
        count: usize,
        wqe_size: usize,
        wqes: &[u8],
        sges: &[Sge],
    ) -> Result<(), (io::Error, u32)> {
        let mut buf = Vec::with_capacity(24 + wqes.len() + sges.len() * 16);
        buf.extend_from_slice(&0u64.to_ne_bytes());
        buf.extend_from_slice(&qp.handle.to_ne_bytes());
        buf.extend_from_slice(&(count as u32).to_ne_bytes());
        buf.extend_from_slice(&(sges.len() as u32).to_ne_bytes());
        buf.extend_from_slice(&(wqe_size as u32).to_ne_bytes());
        buf.extend_from_slice(wqes);
        for s in sges {
            buf.extend_from_slice(&s.addr.to_ne_bytes());
            buf.extend_from_slice(&s.length.to_ne_bytes());
            buf.extend_from_slice(&s.lkey.to_ne_bytes());
        }
        let mut bad_wr = 0u32;
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            [
                Attr::buf(UVERBS_ATTR_CORE_IN, buf.as_ptr(), buf.len()),
                Attr::output(UVERBS_ATTR_CORE_OUT, &mut bad_wr),
                Attr::value(UVERBS_ATTR_WRITE_CMD, cmd),
            ],
        )
        .map(|_| ())
        .map_err(|e| (e, bad_wr))
    }

    /// Post send work requests (`IB_USER_VERBS_CMD_POST_SEND`); on an error,
    /// also the index of the request the kernel reports as failed.
    pub fn post_send(&self, qp: &Qp, wrs: &[SendWr]) -> Result<(), (io::Error, u32)> {
        // struct ib_uverbs_send_wr: 56 bytes.
        const WQE_SIZE: usize = 56;
        let mut wqes = Vec::with_capacity(wrs.len() * WQE_SIZE);
        let mut sges = Vec::new();
        for w in wrs {
            let start = wqes.len();
            wqes.extend_from_slice(&w.wr_id.to_ne_bytes());
            wqes.extend_from_slice(&(w.sges.len() as u32).to_ne_bytes());
            wqes.extend_from_slice(&w.opcode.to_ne_bytes());
            wqes.extend_from_slice(&w.send_flags.to_ne_bytes());
            wqes.extend_from_slice(&w.imm_data.to_ne_bytes());
            wqes.extend_from_slice(&w.remote_addr.to_ne_bytes());
            wqes.extend_from_slice(&w.rkey.to_ne_bytes());
            wqes.resize(start + WQE_SIZE, 0);
            sges.extend_from_slice(&w.sges);
        }
        self.post(
            IB_USER_VERBS_CMD_POST_SEND,
            qp,
            wrs.len(),
            WQE_SIZE,
            &wqes,
            &sges,
        )
    }

    /// Post one receive work request with one SGE
    /// (`IB_USER_VERBS_CMD_POST_RECV`).
    pub fn post_recv(&self, qp: &Qp, wr_id: u64, sge: Sge) -> io::Result<()> {
        // struct ib_uverbs_recv_wr { wr_id, num_sge, reserved }
        let mut wqe = Vec::with_capacity(16);
        wqe.extend_from_slice(&wr_id.to_ne_bytes());
        wqe.extend_from_slice(&1u32.to_ne_bytes());
        wqe.extend_from_slice(&0u32.to_ne_bytes());
        self.post(IB_USER_VERBS_CMD_POST_RECV, qp, 1, 16, &wqe, &[sge])
            .map_err(|(e, _)| e)
    }

    /// Register `len` bytes at `addr` with `iova` (`IB_USER_VERBS_CMD_REG_MR`).
    pub fn reg_mr(&self, pd: &Pd, addr: u64, len: u64, iova: u64, access: u32) -> io::Result<Mr> {
        // struct ib_uverbs_reg_mr
        #[repr(C)]
        struct Cmd {
            response: u64,
            start: u64,
            length: u64,
            hca_va: u64,
            pd_handle: u32,
            access_flags: u32,
        }
        let cmd = Cmd {
            response: 0,
            start: addr,
            length: len,
            hca_va: iova,
            pd_handle: pd.handle,
            access_flags: access,
        };
        // struct ib_uverbs_reg_mr_resp { mr_handle, lkey, rkey }
        let mut out = [0u32; 3];
        let mut uhw = RegMrResp::default();
        self.invoke_write(IB_USER_VERBS_CMD_REG_MR, &cmd, &mut out, &mut uhw)?;
        Ok(Mr {
            handle: out[0],
            lkey: out[1],
            rkey: out[2],
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
        let fd = attrs[0].data as i32;
        // SAFETY: the kernel created this file descriptor for us; nothing
        // else owns it.
        Ok(AsyncEvents {
            fd: unsafe { File::from_raw_fd(fd) },
        })
    }

    /// The core's `IB_USER_VERBS_CMD_QUERY_DEVICE` (as `ibv_query_device()`).
    pub fn query_device_attrs(&self) -> io::Result<DeviceAttrs> {
        // struct ib_uverbs_query_device { response }
        let cmd = 0u64;
        // struct ib_uverbs_query_device_resp: 176 bytes.
        let mut r = [0u8; 176];
        self.invoke_write(IB_USER_VERBS_CMD_QUERY_DEVICE, &cmd, &mut r, &mut [0u64; 0])?;
        let u32_at = |o: usize| u32::from_ne_bytes(r[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(r[o..o + 8].try_into().unwrap());
        Ok(DeviceAttrs {
            node_guid: r[8..16].try_into().unwrap(),
            max_mr_size: u64_at(24),
            page_size_cap: u64_at(32),
            vendor_id: u32_at(40),
            vendor_part_id: u32_at(44),
            max_qp: u32_at(52),
            max_qp_wr: u32_at(56),
            max_sge: u32_at(64),
            max_cq: u32_at(72),
            max_cqe: u32_at(76),
            max_pd: u32_at(84),
            phys_port_cnt: r[171],
        })
    }

    /// The core's `UVERBS_METHOD_QUERY_PORT` (as `ibv_query_port()`).
    pub fn query_port_attrs(&self, port: u8) -> io::Result<PortAttrs> {
        // struct ib_uverbs_query_port_resp_ex: the legacy reply (40 bytes),
        // port_cap_flags2, reserved, active_speed_ex.
        let mut r = [0u8; 48];
        ioctl(
            &self.fd,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_QUERY_PORT,
            [
                Attr::value(UVERBS_ATTR_QUERY_PORT_PORT_NUM, port.into()),
                Attr::output(UVERBS_ATTR_QUERY_PORT_RESP, &mut r),
            ],
        )?;
        Ok(PortAttrs {
            max_msg_sz: u32::from_ne_bytes(r[4..8].try_into().unwrap()),
            gid_tbl_len: u32::from_ne_bytes(r[16..20].try_into().unwrap()),
            pkey_tbl_len: u16::from_ne_bytes(r[20..22].try_into().unwrap()),
            state: r[26],
            max_mtu: r[27],
            active_mtu: r[28],
            phys_state: r[36],
            link_layer: r[37],
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
    pub fn query_port(&self, port: u64) -> io::Result<PortInfo> {
        let mut info = PortInfo::default();
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

/// `enum ib_event_type` values a device reports.
pub const IB_EVENT_DEVICE_FATAL: u32 = 8;
pub const IB_EVENT_PORT_ACTIVE: u32 = 9;
pub const IB_EVENT_PORT_ERR: u32 = 10;

/// The name of an `enum ib_event_type` value.
pub fn event_name(kind: u32) -> &'static str {
    match kind {
        IB_EVENT_DEVICE_FATAL => "DEVICE_FATAL",
        IB_EVENT_PORT_ACTIVE => "PORT_ACTIVE",
        IB_EVENT_PORT_ERR => "PORT_ERR",
        IB_EVENT_CQ_ERR => "CQ_ERR",
        IB_EVENT_QP_FATAL => "QP_FATAL",
        _ => "other",
    }
}

/// `struct ib_uverbs_async_event_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Port number, QP or CQ handle, by event type.
    pub element: u64,
    pub event_type: u32,
    pub reserved: u32,
}

/// The asynchronous event file of a context (`UVERBS_OBJECT_ASYNC_EVENT`).
pub struct AsyncEvents {
    fd: File,
}

impl AsyncEvents {
    /// The next event, waiting up to `timeout`: `Ok(None)` on timeout, an
    /// error (EIO) once the device is gone and every event was read.
    pub fn next(&self, timeout: std::time::Duration) -> io::Result<Option<AsyncEvent>> {
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
        // SAFETY: `ev` is a plain structure of the size read.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut ev as *mut AsyncEvent).cast(),
                std::mem::size_of::<AsyncEvent>(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != std::mem::size_of::<AsyncEvent>() {
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
    /// Bytes read past the last reply's end (none in practice: one command at a time).
    pending: Vec<u8>,
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
        })
    }

    /// Send one command; the reply lines before "ok", or the "err" line as
    /// an error.
    pub fn command(&mut self, cmd: &str) -> io::Result<Vec<String>> {
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
        let r = self.command(&format!("hash {va:#x} {len}"))?;
        r.iter()
            .find_map(|l| l.strip_prefix("hash "))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| io::Error::other(format!("bad hash reply {r:?}")))
    }

    pub fn peek(&mut self, va: u64, len: usize) -> io::Result<Vec<u8>> {
        let r = self.command(&format!("peek {va:#x} {len}"))?;
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
        let r = self.command(&format!("peek-bytes {}", list.join(" ")))?;
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
        self.command(&format!("poke {va:#x} {hex}")).map(|_| ())
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

/// `IB_EVENT_CQ_ERR`, `IB_EVENT_QP_FATAL`.
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
        assert_eq!(std::mem::size_of::<IoctlHdr<0>>(), 24);
        assert_eq!(std::mem::size_of::<IoctlHdr<2>>(), 56);
        assert_eq!(std::mem::size_of::<AllocUcontextResp>(), 56);
        assert_eq!(std::mem::size_of::<AllocPdResp>(), 8);
        assert_eq!(std::mem::size_of::<PortInfo>(), 32);
        assert_eq!(std::mem::size_of::<GidEntry>(), 32);
        assert_eq!(RDMA_VERBS_IOCTL, 0xc018_1b01);
    }
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
