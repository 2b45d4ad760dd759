// SPDX-License-Identifier: GPL-2.0

//! Typed device, port and GID attributes exchanged with the RDMA core.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The RDMA core passes zeroed C structures to the driver to fill. These types are their Rust
//! counterparts: a driver fills a plain Rust value and the callback glue writes it into the C
//! structure, so no driver code touches the C layout.
//!
//! # Examples
//!
//! ```
//! use kernel::rdma::{Mtu, PortAttr, PortState};
//!
//! let attr = PortAttr {
//!     state: PortState::Active,
//!     max_mtu: Mtu::Mtu4096,
//!     active_mtu: Mtu::Mtu4096,
//!     gid_tbl_len: 1,
//!     pkey_tbl_len: 1,
//!     max_msg_sz: 1 << 31,
//!     ..PortAttr::default()
//! };
//! assert_eq!(attr.state as u32, 4);
//! ```

use crate::bindings;

/// The state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum PortState {
    /// No state change.
    #[default]
    Nop = bindings::ib_port_state_IB_PORT_NOP,
    /// The link is down.
    Down = bindings::ib_port_state_IB_PORT_DOWN,
    /// The link is being initialised.
    Init = bindings::ib_port_state_IB_PORT_INIT,
    /// The link is armed.
    Armed = bindings::ib_port_state_IB_PORT_ARMED,
    /// The link is up and the port can carry traffic.
    Active = bindings::ib_port_state_IB_PORT_ACTIVE,
}

/// The physical state of a port (`enum ib_port_phys_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum PhysState {
    /// Not reported.
    #[default]
    Unknown = 0,
    /// Disabled.
    Disabled = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
    /// Polling for a peer.
    Polling = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING as u8,
    /// The link is up.
    LinkUp = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8,
}

/// A path MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = bindings::ib_mtu_IB_MTU_256,
    /// 512 bytes.
    Mtu512 = bindings::ib_mtu_IB_MTU_512,
    /// 1024 bytes.
    #[default]
    Mtu1024 = bindings::ib_mtu_IB_MTU_1024,
    /// 2048 bytes.
    Mtu2048 = bindings::ib_mtu_IB_MTU_2048,
    /// 4096 bytes.
    Mtu4096 = bindings::ib_mtu_IB_MTU_4096,
}

impl Mtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// The MTU for a raw `enum ib_mtu` value, if it is one.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            bindings::ib_mtu_IB_MTU_256 => Self::Mtu256,
            bindings::ib_mtu_IB_MTU_512 => Self::Mtu512,
            bindings::ib_mtu_IB_MTU_1024 => Self::Mtu1024,
            bindings::ib_mtu_IB_MTU_2048 => Self::Mtu2048,
            bindings::ib_mtu_IB_MTU_4096 => Self::Mtu4096,
            _ => return None,
        })
    }
}

/// The link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum LinkLayer {
    /// Not specified.
    Unspecified = bindings::rdma_link_layer_IB_LINK_LAYER_UNSPECIFIED,
    /// InfiniBand.
    InfiniBand = bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
    /// Ethernet (RoCE, iWARP).
    Ethernet = bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
}

/// Link width of a port (`enum ib_port_width`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum PortWidth {
    /// One lane.
    #[default]
    X1 = bindings::ib_port_width_IB_WIDTH_1X as u8,
    /// Two lanes.
    X2 = bindings::ib_port_width_IB_WIDTH_2X as u8,
    /// Four lanes.
    X4 = bindings::ib_port_width_IB_WIDTH_4X as u8,
    /// Eight lanes.
    X8 = bindings::ib_port_width_IB_WIDTH_8X as u8,
    /// Twelve lanes.
    X12 = bindings::ib_port_width_IB_WIDTH_12X as u8,
}

/// Per-lane speed of a port (`enum ib_port_speed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u16)]
pub enum PortSpeed {
    /// 2.5 Gb/s.
    #[default]
    Sdr = bindings::ib_port_speed_IB_SPEED_SDR as u16,
    /// 5 Gb/s.
    Ddr = bindings::ib_port_speed_IB_SPEED_DDR as u16,
    /// 10 Gb/s.
    Qdr = bindings::ib_port_speed_IB_SPEED_QDR as u16,
    /// 10.3125 Gb/s.
    Fdr10 = bindings::ib_port_speed_IB_SPEED_FDR10 as u16,
    /// 14.0625 Gb/s.
    Fdr = bindings::ib_port_speed_IB_SPEED_FDR as u16,
    /// 25.78125 Gb/s.
    Edr = bindings::ib_port_speed_IB_SPEED_EDR as u16,
    /// 50 Gb/s.
    Hdr = bindings::ib_port_speed_IB_SPEED_HDR as u16,
    /// 100 Gb/s.
    Ndr = bindings::ib_port_speed_IB_SPEED_NDR as u16,
}

/// Attributes of a device (`struct ib_device_attr`), reported by `query_device`.
///
/// Fields not listed here are reported as zero (not supported).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: u64,
    /// System image GUID, in network byte order as the core expects.
    pub sys_image_guid: u64,
    /// Largest memory region, in bytes.
    pub max_mr_size: u64,
    /// Page sizes the device can map (bitmap of sizes).
    pub page_size_cap: u64,
    /// PCI vendor ID.
    pub vendor_id: u32,
    /// PCI device ID.
    pub vendor_part_id: u32,
    /// Hardware revision.
    pub hw_ver: u32,
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue pair.
    pub max_qp_wr: u32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// Partition keys per port.
    pub max_pkeys: u16,
}

impl DeviceAttr {
    pub(crate) fn write_to(&self, out: &mut bindings::ib_device_attr) {
        out.fw_ver = self.fw_ver;
        out.sys_image_guid = self.sys_image_guid;
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.vendor_part_id = self.vendor_part_id;
        out.hw_ver = self.hw_ver;
        out.max_qp = self.max_qp;
        out.max_qp_wr = self.max_qp_wr;
        out.device_cap_flags = self.device_cap_flags;
        out.max_send_sge = self.max_send_sge;
        out.max_recv_sge = self.max_recv_sge;
        out.max_cq = self.max_cq;
        out.max_cqe = self.max_cqe;
        out.max_mr = self.max_mr;
        out.max_pd = self.max_pd;
        out.max_pkeys = self.max_pkeys;
    }
}

/// Attributes of a port (`struct ib_port_attr`), reported by `query_port`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttr {
    /// Logical state.
    pub state: PortState,
    /// Physical state.
    pub phys_state: PhysState,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU in use.
    pub active_mtu: Mtu,
    /// Physical (Ethernet) MTU in bytes.
    pub phys_mtu: u32,
    /// Entries of the GID table.
    pub gid_tbl_len: u32,
    /// Entries of the partition key table.
    pub pkey_tbl_len: u16,
    /// `IB_PORT_*` capability flags.
    pub port_cap_flags: u32,
    /// Largest message, in bytes.
    pub max_msg_sz: u32,
    /// Link width.
    pub active_width: PortWidth,
    /// Per-lane speed.
    pub active_speed: PortSpeed,
    /// GIDs are IP addresses (RoCE v2).
    pub ip_gids: bool,
}

impl PortAttr {
    pub(crate) fn write_to(&self, out: &mut bindings::ib_port_attr) {
        out.state = self.state as u32;
        out.phys_state = self.phys_state as u8;
        out.max_mtu = self.max_mtu as u32;
        out.active_mtu = self.active_mtu as u32;
        out.phys_mtu = self.phys_mtu;
        out.gid_tbl_len = self.gid_tbl_len.min(i32::MAX as u32) as i32;
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.active_width = self.active_width as u8;
        out.active_speed = self.active_speed as u16;
        out.set_ip_gids(self.ip_gids.into());
    }
}

/// The port protocol a driver implements (`RDMA_CORE_PORT_*` of `core_cap_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PortProtocol {
    /// InfiniBand.
    InfiniBand = bindings::RDMA_CORE_PORT_IBA_IB,
    /// RoCE v1 (Ethernet type 0x8915).
    RoceV1 = bindings::RDMA_CORE_PORT_IBA_ROCE,
    /// RoCE v2 (UDP port 4791).
    RoceV2 = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP,
    /// iWARP.
    Iwarp = bindings::RDMA_CORE_PORT_IWARP,
    /// Raw packet interface only.
    RawPacket = bindings::RDMA_CORE_PORT_RAW_PACKET,
    /// No standard protocol (verbs only, as efa).
    Unspecified = 0,
}

/// What never changes about a port (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug)]
pub struct PortImmutable {
    /// Entries of the partition key table.
    pub pkey_tbl_len: u16,
    /// Entries of the GID table.
    pub gid_tbl_len: u32,
    /// The protocol of the port.
    pub protocol: PortProtocol,
    /// Largest MAD the port handles, zero without MAD support.
    pub max_mad_size: u32,
}

impl PortImmutable {
    pub(crate) fn write_to(&self, out: &mut bindings::ib_port_immutable) {
        out.pkey_tbl_len = self.pkey_tbl_len.into();
        out.gid_tbl_len = self.gid_tbl_len.min(i32::MAX as u32) as i32;
        out.core_cap_flags = self.protocol as u32;
        out.max_mad_size = self.max_mad_size;
    }
}

/// A 128-bit global identifier (`union ib_gid`), in network byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The IPv4-mapped IPv6 GID of an IPv4 address (`::ffff:a.b.c.d`), as RoCE v2 uses.
    pub const fn from_ipv4(addr: [u8; 4]) -> Self {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12] = addr[0];
        raw[13] = addr[1];
        raw[14] = addr[2];
        raw[15] = addr[3];
        Self(raw)
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), `None` for other GIDs.
    pub fn to_ipv4(&self) -> Option<[u8; 4]> {
        let g = &self.0;
        if g[..10].iter().all(|b| *b == 0) && g[10] == 0xff && g[11] == 0xff {
            Some([g[12], g[13], g[14], g[15]])
        } else {
            None
        }
    }

    /// The link-local GID (`fe80::/64`) with the modified EUI-64 of a MAC address.
    pub const fn from_mac(mac: [u8; 6]) -> Self {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[8] = mac[0] ^ 2;
        raw[9] = mac[1];
        raw[10] = mac[2];
        raw[11] = 0xff;
        raw[12] = 0xfe;
        raw[13] = mac[3];
        raw[14] = mac[4];
        raw[15] = mac[5];
        Self(raw)
    }
}

/// The kind of a GID table entry (`enum ib_gid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// An InfiniBand GID.
    Ib,
    /// A RoCE v1 GID (Ethernet, EtherType 0x8915).
    RoceV1,
    /// A RoCE v2 GID (UDP/IP): an IPv6 address or an IPv4-mapped one.
    RoceV2,
}

impl GidType {
    fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            bindings::ib_gid_type_IB_GID_TYPE_IB => Some(Self::Ib),
            bindings::ib_gid_type_IB_GID_TYPE_ROCE => Some(Self::RoceV1),
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP => Some(Self::RoceV2),
            _ => None,
        }
    }
}

/// An entry of a RoCE port's GID table as the core's GID cache hands it to a driver
/// (`struct ib_gid_attr`): the core derives the entries from the addresses of the port's
/// network device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidAttr {
    /// The port, from 1.
    pub port: u32,
    /// The index of the entry in the port's table (below `gid_tbl_len`).
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its kind.
    pub gid_type: GidType,
}

impl GidAttr {
    /// The entry `raw` describes; `None` for a kind this abstraction does not know.
    pub(crate) fn from_raw(raw: &bindings::ib_gid_attr) -> Option<Self> {
        Some(Self {
            port: raw.port_num,
            index: u32::from(raw.index),
            // SAFETY: The `raw` member of `union ib_gid` is its bytes, always valid.
            gid: Gid(unsafe { raw.gid.raw }),
            gid_type: GidType::from_raw(raw.gid_type)?,
        })
    }
}

/// An asynchronous event (`enum ib_event_type`) with what it concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The device stopped working; user contexts are disassociated.
    DeviceFatal,
    /// A port became active.
    PortActive(u32),
    /// A port went down.
    PortErr(u32),
    /// The GID table of a port changed.
    GidChange(u32),
}

impl Event {
    /// The `enum ib_event_type` value and the port number of the event.
    pub(crate) fn raw(self) -> (u32, u32) {
        match self {
            Self::DeviceFatal => (bindings::ib_event_type_IB_EVENT_DEVICE_FATAL, 1),
            Self::PortActive(p) => (bindings::ib_event_type_IB_EVENT_PORT_ACTIVE, p),
            Self::PortErr(p) => (bindings::ib_event_type_IB_EVENT_PORT_ERR, p),
            Self::GidChange(p) => (bindings::ib_event_type_IB_EVENT_GID_CHANGE, p),
        }
    }
}

#[macros::kunit_tests(rust_kernel_rdma_types)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bytes() {
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::from_raw(5), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::from_raw(0), None);
        assert_eq!(Mtu::from_raw(6), None);
    }

    #[test]
    fn gid_from_ipv4() {
        let gid = Gid::from_ipv4([10, 0, 0, 1]);
        assert_eq!(
            gid.0,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
    }

    #[test]
    fn gid_to_ipv4() {
        assert_eq!(Gid::from_ipv4([10, 1, 2, 3]).to_ipv4(), Some([10, 1, 2, 3]));
        // Link-local and other IPv6 GIDs have no IPv4 address.
        let ll = Gid::from_mac([0x02, 0x1d, 0xa3, 0x00, 0x00, 0x07]);
        assert_eq!(ll.to_ipv4(), None);
        let mut g = Gid::from_ipv4([10, 1, 2, 3]);
        g.0[10] = 0xfe;
        assert_eq!(g.to_ipv4(), None);
        g = Gid::from_ipv4([10, 1, 2, 3]);
        g.0[0] = 0x20;
        assert_eq!(g.to_ipv4(), None);
    }

    #[test]
    fn gid_from_mac() {
        let gid = Gid::from_mac([0x02, 0x1d, 0xa3, 0x00, 0x00, 0x07]);
        assert_eq!(
            gid.0,
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x1d, 0xa3, 0xff, 0xfe, 0x00, 0x00, 0x07]
        );
    }

    #[test]
    fn port_attr_written() {
        let mut raw = pin_init::zeroed::<bindings::ib_port_attr>();
        PortAttr {
            state: PortState::Active,
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu2048,
            gid_tbl_len: 3,
            pkey_tbl_len: 1,
            ip_gids: true,
            ..PortAttr::default()
        }
        .write_to(&mut raw);
        assert_eq!(raw.state, bindings::ib_port_state_IB_PORT_ACTIVE);
        assert_eq!(raw.max_mtu, bindings::ib_mtu_IB_MTU_4096);
        assert_eq!(raw.active_mtu, bindings::ib_mtu_IB_MTU_2048);
        assert_eq!(raw.gid_tbl_len, 3);
        assert_eq!(raw.ip_gids(), 1);
    }
}
