// SPDX-License-Identifier: GPL-2.0

//! The InfiniBand device of a Gaudi2 NIC: one device for all its ports.
//!
//! Each user context has at most one protection domain, each protection domain an address
//! space (ASID) of its own in the device MMU; see Documentation/infiniband/gaudi/design.rst.

use kernel::net::gaudi::gaudi2;
use kernel::{
    prelude::*,
    rdma::{
        self,
        cq::WcSink,
        qp::{
            AddressVector,
            CqInit,
            QpAttr,
            QpAttrMask,
            QpCap,
            QpInit,
            QpQuery,
            QpState,
            QpType, //
        },
        uverbs::{
            self,
            AttrDef,
            Call,
            Method,
            MethodDef,
            ObjectDef,
            Presence,
            UapiDef, //
        },
        wr::{
            RecvWrs,
            SendWrs, //
        },
        DeviceAttr,
        DmabufMr,
        Gid,
        GidAttr,
        GidType,
        LinkLayer,
        MrKeys,
        Mtu,
        PhysState,
        PortAttr,
        PortImmutable,
        PortProtocol,
        PortSpeed,
        PortState,
        PortWidth,
        Udata,
        User,
        UserMr, //
    },
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
        Mutex, //
    },
    uapi,
    xarray::{
        AllocKind,
        XArray, //
    },
};

use crate::{
    chip::AddressSpace,
    dv,
    hbm::{
        self,
        Hbm, //
    },
    ids::{
        Ids,
        PdId,
        PdIds, //
    },
    mmu,
    mr::{
        self,
        MrData,
        MrInfo, //
    },
    nic::Nic,
    queue::{
        self,
        Path,
        QpAttrs,
        QpData,
        QpParams, //
    },
};

/// The device model whose formats user space writes and reads (QUERY_DEVICE's
/// `model_version`): 2.0, the NIC's own (device-model.rst).
const MODEL_VERSION: u32 = 0x0002_0000;

/// ABI version of the structures of include/uapi/rdma/gaudi-abi.h.
const ABI_VERSION: u32 = uapi::GAUDI_IB_UVERBS_ABI_VERSION;

/// What the device can do: the NIC's limits and the chip's enabled ports.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    pub(crate) ports: u32,
    pub(crate) max_qps: u32,
    pub(crate) max_cqs: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_sqe: u32,
    pub(crate) max_mtu: u32,
    pub(crate) page_sizes: u32,
    pub(crate) max_msg: u32,
    /// Entries of each port's GID table.
    pub(crate) max_gids: u32,
    /// The device model, major << 16 | minor.
    pub(crate) model: u32,
}

impl Caps {
    /// The limits of a chip of device model `model` with `ports` ports.
    pub(crate) fn new(ports: u32, model: u32) -> Self {
        Self {
            ports,
            // A port's context tables hold this many QPs (QPNs from `ids::FIRST_QPN`).
            max_qps: gaudi2::TABLE_QPS as u32,
            // CQs of the standard verbs are the driver's (`crate::queue`): its own limits.
            max_cqs: 1024,
            max_cqe: 1 << 13,
            // A QP's slot of the port's send WQ array.
            max_sqe: crate::rc::MAX_WQES,
            // The context's MTU field goes up to 8 KiB.
            max_mtu: 8192,
            // The device MMU's pages: 4 KiB, 2 MiB, 1 GiB.
            page_sizes: (1 << 12) | (1 << 21) | (1 << 30),
            // A WQE's SIZE field is 32 bits; a message is at most 2 GiB.
            max_msg: 1 << 31,
            // GID tables are the driver's (the NIC sends from its encapsulations' addresses).
            max_gids: 16,
            model,
        }
    }
}

/// The driver's data of the InfiniBand device.
#[pin_data]
pub(crate) struct IbDev {
    pub(crate) nic: Arc<Nic>,
    caps: Caps,
    vendor_part_id: u32,
    /// The node GUID, which is also the system image GUID.
    node_guid: u64,
    /// The device's memory (HBM).
    hbm: Arc<Hbm>,
    /// Who uses the data path ([`Self::claim`]).
    #[pin]
    owners: Mutex<Owners>,
    /// Ids of user contexts, from 1.
    next_ctx: Atomic<u64>,
    /// Page sizes both the device MMU and the driver's tables support (bit n: 2^n bytes).
    pub(crate) mr_page_sizes: u64,
    /// Memory regions by key (their lkey). Keys are random (`get_random_u32`), never 0, and
    /// a key that was revoked is not issued again while it is among the last
    /// [`QUARANTINE`] revoked: nothing can be learnt from one key about another, and a
    /// recently revoked key finds nothing.
    #[pin]
    pub(crate) mrs: XArray<KBox<MrInfo>>,
    /// The keys revoked last, oldest overwritten first.
    #[pin]
    revoked: Mutex<Quarantine>,
    pd_ids: PdIds,
    /// QP and CQ numbers in use.
    pub(crate) ids: Arc<Ids>,
    /// The GID tables as the core's GID cache last set them (`max_gids` entries per port, port
    /// 1 first; the zero GID is a free entry): what the device sends from.
    #[pin]
    gids: Mutex<KVVec<Gid>>,
}

impl IbDev {
    pub(crate) fn new(
        nic: Arc<Nic>,
        caps: Caps,
        vendor_part_id: u32,
        node_guid: u64,
        hbm: Arc<Hbm>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nic,
            caps,
            vendor_part_id,
            node_guid,
            hbm,
            owners <- kernel::new_mutex!(Owners::default()),
            next_ctx: Atomic::new(1),
            mr_page_sizes: mmu::PAGE_SHIFTS
                .iter()
                .map(|s| 1u64 << s)
                .filter(|size| u64::from(caps.page_sizes) & size != 0)
                .fold(0, |all, size| all | size),
            mrs <- XArray::new(AllocKind::Alloc),
            revoked <- kernel::new_mutex!(Quarantine::default()),
            pd_ids: PdIds::new(crate::module_parameters::first_pd_id.value()),
            ids: Arc::pin_init(Ids::new(caps.ports, caps.max_qps, caps.max_cqs)?, GFP_KERNEL)?,
            gids <- kernel::new_mutex!(KVVec::from_elem(
                Gid::default(),
                (caps.ports * caps.max_gids) as usize,
                GFP_KERNEL
            )?),
        })
    }

    /// Take a QP index on every port, for a QP of the standard verbs.
    fn alloc_qpn(&self) -> Result<u32> {
        self.ids.alloc_qp_index(self.ids.all_ports(), None)
    }

    /// The memory region of key `key`, as the send path checks it.
    pub(crate) fn mr(&self, key: u32) -> Option<MrInfo> {
        self.mrs.lock().get(key as usize).copied()
    }

    /// The device's memory.
    pub(crate) fn hbm(&self) -> &Arc<Hbm> {
        &self.hbm
    }

    /// The NIC, through the core.
    pub(crate) fn nic(&self) -> &Arc<Nic> {
        &self.nic
    }

    /// Enter `info` under a fresh key.
    pub(crate) fn insert_mr(&self, info: MrInfo) -> Result<u32> {
        let entry = KBox::new(info, GFP_KERNEL)?;
        let revoked = self.revoked.lock();
        let mut mrs = self.mrs.lock();
        // The keys in use and in quarantine are a tiny part of 2^32: a draw almost never
        // meets one.
        for _ in 0..64 {
            let key = kernel::random::get_random_u32();
            if key == 0 || mrs.get(key as usize).is_some() || revoked.holds(key) {
                continue;
            }
            mrs.store(key as usize, entry, GFP_KERNEL)
                .map_err(|e| e.error)?;
            return Ok(key);
        }
        Err(ENOSPC)
    }

    /// Take the region of `key` out of the table; its key goes into quarantine.
    pub(crate) fn remove_mr(&self, key: u32) {
        let mut revoked = self.revoked.lock();
        if self.mrs.lock().remove(key as usize).is_some() {
            revoked.add(key);
        }
    }

    /// Make context `ctx` the exclusive owner of the device's memory: `EBUSY` while another
    /// context owns it or has a protection domain. The owner keeps it until it is closed. (A
    /// rule from when the device had one translation domain for every context, kept for
    /// device memory until it is revisited.)
    pub(crate) fn claim(&self, dev: &rdma::Device<GaudiIbDriver>, ctx: &Context) -> Result {
        let mut o = self.owners.lock();
        if o.exclusive == ctx.id {
            return Ok(());
        }
        let own_pd = u32::from(ctx.has_pd.load(Relaxed));
        if o.exclusive != 0 || o.pds > own_pd {
            kernel::ibdev_info_ratelimited!(
                dev,
                "exclusive data path refused: another user context uses the NIC\n"
            );
            return Err(EBUSY);
        }
        o.exclusive = ctx.id;
        Ok(())
    }

    /// Keep entry `index` of the GID table of `port` (`None` clears it), as the core's GID
    /// cache sets it. The table is the driver's: the NIC sends from the source address of a
    /// QP's encapsulation, which the driver takes from it.
    fn set_gid(&self, port: u32, index: u32, gid: Option<Gid>) -> Result {
        let port_index = self.port_index(port)?;
        if index >= self.caps.max_gids {
            return Err(EINVAL);
        }
        let slot = port_index * self.caps.max_gids as usize + index as usize;
        *self.gids.lock().get_mut(slot).ok_or(EINVAL)? = gid.unwrap_or_default();
        Ok(())
    }

    /// The GID of entry `index` of the table of `port`, if it is valid.
    pub(crate) fn gid(&self, port: u32, index: u32) -> Option<Gid> {
        let port_index = self.port_index(port).ok()?;
        if index >= self.caps.max_gids {
            return None;
        }
        let slot = port_index * self.caps.max_gids as usize + index as usize;
        self.gids
            .lock()
            .get(slot)
            .copied()
            .filter(|g| *g != Gid::default())
    }

    /// The first valid IPv4 GID of `port` and its index.
    pub(crate) fn first_ipv4_gid(&self, port: u32) -> Option<(u32, Gid)> {
        (0..self.caps.max_gids).find_map(|i| {
            self.gid(port, i)
                .filter(|g| g.to_ipv4().is_some())
                .map(|g| (i, g))
        })
    }

    /// The index (from 0) of `port` (numbered from 1), if the device has it.
    fn port_index(&self, port: u32) -> Result<usize> {
        if port == 0 || port > self.caps.ports {
            return Err(EINVAL);
        }
        Ok((port - 1) as usize)
    }

    /// The port's first IPv4 address (from its network device), 0.0.0.0 if it has none.
    fn port_ipv4(&self, port: u32) -> Result<[u8; 4]> {
        self.port_index(port)?;
        Ok(self
            .first_ipv4_gid(port)
            .and_then(|(_, g)| g.to_ipv4())
            .unwrap_or_default())
    }

    fn port_mac(&self, port: u32) -> Result<[u8; 6]> {
        let i = self.port_index(port)?;
        self.nic.chip()?.mac(i)
    }

    fn port_up(&self, port: u32) -> Result<bool> {
        let i = self.port_index(port)?;
        Ok(self.nic.chip()?.link_up(i))
    }

    fn port_speed(&self, port: u32) -> Result<u32> {
        self.port_index(port)?;
        Ok(gaudi2::PORT_SPEED_MBPS)
    }
}

/// The modified EUI-64 of a MAC address (RFC 4291, appendix A), as a node GUID.
pub(crate) fn eui64(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// What a user context may hold of the device at a time ("Ownership and limits" in uapi.rst,
/// module parameters): they bound the kernel memory (page tables, queues) and device VA
/// space one process can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Memory regions.
    Mrs = 0,
    /// Device page-table entries of its regions (8 bytes each, in 4 KiB tables).
    Ptes = 1,
    /// QP sets.
    Sets = 2,
    /// Bytes of QP set queues (DMA-coherent kernel memory mapped by the process).
    QueueBytes = 3,
}

/// The use of the [`Limit`]s by one user context.
pub(crate) struct Usage {
    used: [Atomic<u64>; 4],
    /// The limits, as the module parameters were when the context was opened.
    caps: [u64; 4],
}

impl Usage {
    fn new() -> Result<Arc<Self>> {
        use crate::module_parameters as p;
        Ok(Arc::new(
            Self {
                used: [const { Atomic::new(0) }; 4],
                caps: [
                    p::max_mrs.value(),
                    p::max_mr_ptes.value(),
                    p::max_qp_sets.value(),
                    p::max_queue_mib.value().saturating_mul(1 << 20),
                ],
            },
            GFP_KERNEL,
        )?)
    }

    /// Take `amounts` of their limits, all or nothing: `ENOSPC` if one would go over its cap.
    /// They are given back when the returned charge is dropped.
    pub(crate) fn charge(self: &Arc<Self>, amounts: &[(Limit, u64)]) -> Result<Charge> {
        let mut charge = Charge {
            usage: self.clone(),
            amounts: [0; 4],
        };
        for &(limit, n) in amounts {
            let i = limit as usize;
            let before = self.used[i].fetch_add(n, Full);
            // Entered before the check, so that `charge`'s drop gives it back on failure.
            charge.amounts[i] += n;
            if before.saturating_add(n) > self.caps[i] {
                return Err(ENOSPC);
            }
        }
        Ok(charge)
    }
}

/// Resources a user context holds against its [`Limit`]s, given back when dropped.
pub(crate) struct Charge {
    usage: Arc<Usage>,
    amounts: [u64; 4],
}

impl Drop for Charge {
    fn drop(&mut self) {
        for (used, n) in self.usage.used.iter().zip(self.amounts) {
            used.fetch_sub(n, Full);
        }
    }
}

/// The driver's data of a user context.
pub(crate) struct Context {
    /// Identifies the context as the exclusive owner of the data path ([`IbDev::claim`]).
    id: u64,
    /// What the context holds against its limits.
    usage: Arc<Usage>,
    /// The protection domain of the context exists.
    has_pd: Atomic<bool>,
}

impl Context {
    /// What the context holds against its limits.
    pub(crate) fn usage(&self) -> &Arc<Usage> {
        &self.usage
    }
}

/// Keys revoked last, which no new region gets.
pub(crate) const QUARANTINE: usize = 4096;

/// The last [`QUARANTINE`] revoked keys.
#[derive(Default)]
struct Quarantine {
    keys: KVec<u32>,
    /// Where the next revoked key goes once `keys` is full.
    next: usize,
}

impl Quarantine {
    fn holds(&self, key: u32) -> bool {
        self.keys.contains(&key)
    }

    fn add(&mut self, key: u32) {
        if self.keys.len() < QUARANTINE {
            // Without memory for it the key is simply not held back.
            let _ = self.keys.push(key, GFP_KERNEL);
        } else {
            self.keys[self.next] = key;
            self.next = (self.next + 1) % QUARANTINE;
        }
    }
}

/// Who uses the data path.
#[derive(Default)]
struct Owners {
    /// The id of the user context that drives the NIC itself (QP sets, device memory); 0:
    /// none. It has the data path to itself.
    exclusive: u64,
    /// Protection domains of user contexts (at most one each).
    pds: u32,
}

/// The driver's data of a protection domain.
pub(crate) struct Pd {
    /// The context owning the PD, for user PDs.
    user: bool,
    /// Identifies the PD in [`MrInfo`].
    pub(crate) id: PdId,
    /// Its ASID and device VAs: its regions are entered there.
    pub(crate) space: Arc<AddressSpace>,
    /// The key of its regions open to remote writes: the one key the responder contexts of
    /// its QPs take. Random, never 0.
    pub(crate) key: u32,
}

impl Pd {
    fn new(dev: &rdma::Device<GaudiIbDriver>, user: bool, id: PdId) -> Result<Self> {
        Ok(Self {
            user,
            id,
            space: AddressSpace::new(&dev.data().nic, dev.parent())?,
            key: loop {
                let k = kernel::random::get_random_u32();
                if k != 0 {
                    break k;
                }
            },
        })
    }
}

const MODIFY_QP_REMOTE_RKEY: u32 = uapi::gaudi_ib_modify_qp_flags_GAUDI_IB_MODIFY_QP_REMOTE_RKEY;
const MODIFY_QP_LOCAL_RKEY: u32 = uapi::gaudi_ib_modify_qp_flags_GAUDI_IB_MODIFY_QP_LOCAL_RKEY;
const MODIFY_QP_FLAGS: u32 = MODIFY_QP_REMOTE_RKEY | MODIFY_QP_LOCAL_RKEY;

/// The protection domain number user space sees (one PD per context).
const PDN: u32 = 1;

const PORT_FLAG_LINK_UP: u32 = uapi::gaudi_ib_port_flags_GAUDI_IB_PORT_LINK_UP;

/// The RDMA driver of the Gaudi2 NIC: the auxiliary driver of the core's `ib` device, and
/// the driver of the InfiniBand device it registers.
pub(crate) struct GaudiIbDriver;

#[vtable]
impl rdma::Driver for GaudiIbDriver {
    type Data = IbDev;
    type Ucontext = Context;
    type Pd = Pd;
    type Cq = Arc<queue::Cq>;
    type Qp = QpData;
    type Mr = MrData;
    type MmapEntry = dv::Map;

    const NAME: &'static CStr = c"gaudi_%d";
    const DRIVER_ID: u32 = uapi::rdma_driver_id_RDMA_DRIVER_GAUDI;
    const UVERBS_ABI_VERSION: u32 = ABI_VERSION;
    const UAPI: Option<&'static [UapiDef<Self>]> = Some(&UAPI);

    fn mmap(
        _ctx: &rdma::Ucontext<Self>,
        entry: &rdma::mmap::MmapEntry<Self>,
        vma: &mut rdma::mmap::Vma<'_>,
    ) -> Result {
        dv::mmap(entry, vma)
    }

    fn query_device(dev: &rdma::Device<Self>) -> Result<DeviceAttr> {
        let d = dev.data();
        let c = &d.caps;
        Ok(DeviceAttr {
            max_mr_size: crate::chip::MAX_MR_SIZE,
            page_size_cap: u64::from(c.page_sizes),
            vendor_id: u32::from(kernel::pci::Vendor::HABANALABS.as_raw()),
            vendor_part_id: d.vendor_part_id,
            max_qp: c.max_qps.saturating_mul(c.ports),
            max_qp_wr: crate::rc::MAX_WQES / 2,
            // Requests of several SGEs are one WQE per SGE. Receives take as many (the driver
            // holds them, `queue::post_recv`); the uverbs ABI reports the smaller of the two as
            // the device's `max_sge`.
            max_send_sge: queue::MAX_SEND_SGE,
            max_recv_sge: queue::MAX_SEND_SGE,
            max_cq: c.max_cqs.saturating_mul(c.ports),
            max_cqe: c.max_cqe,
            max_pd: 1,
            // Per user context (module parameter `max_mrs`).
            max_mr: u32::try_from(crate::module_parameters::max_mrs.value()).unwrap_or(u32::MAX),
            max_pkeys: 1,
            sys_image_guid: d.node_guid.to_be(),
            // The programming model as major.minor.0 (what `ibv_devinfo` shows as firmware).
            fw_ver: (u64::from(c.model >> 16) << 32) | (u64::from(c.model & 0xffff) << 16),
            ..DeviceAttr::default()
        })
    }

    /// A port's state is its network device's (up, with carrier), as the RDMA core reports
    /// its events: a port without one is down. The RDMA engine itself only needs the link,
    /// which `GAUDI_IB_METHOD_QUERY_PORT` reports.
    fn query_port(dev: &rdma::Device<Self>, port: u32) -> Result<PortAttr> {
        let d = dev.data();
        d.port_index(port)?;
        let up = dev
            .netdev(port)
            .is_some_and(|n| n.is_running() && n.carrier_ok());
        Ok(PortAttr {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            phys_state: if up {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            // The device carries up to 8 KiB; InfiniBand path MTUs end at 4 KiB.
            max_mtu: Mtu::Mtu4096,
            active_mtu: Mtu::Mtu4096,
            phys_mtu: d.caps.max_mtu,
            gid_tbl_len: d.caps.max_gids,
            pkey_tbl_len: 1,
            max_msg_sz: d.caps.max_msg,
            // 100GbE: four lanes of 25 Gb/s.
            active_width: PortWidth::X4,
            active_speed: PortSpeed::Edr,
            ip_gids: true,
            ..PortAttr::default()
        })
    }

    fn get_port_immutable(dev: &rdma::Device<Self>, _port: u32) -> Result<PortImmutable> {
        Ok(PortImmutable {
            pkey_tbl_len: 1,
            gid_tbl_len: dev.data().caps.max_gids,
            protocol: PortProtocol::RoceV2,
            max_mad_size: 0,
        })
    }

    /// Every port is an Ethernet port (RoCE v2); the core would say InfiniBand for a channel
    /// adapter.
    fn get_link_layer(_dev: &rdma::Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn add_gid(dev: &rdma::Device<Self>, attr: &GidAttr) -> Result {
        // The ports carry RoCE v2 only, so the core adds no other kind.
        if attr.gid_type != GidType::RoceV2 {
            return Err(EINVAL);
        }
        dev.data().set_gid(attr.port, attr.index, Some(attr.gid))
    }

    fn del_gid(dev: &rdma::Device<Self>, attr: &GidAttr) -> Result {
        dev.data().set_gid(attr.port, attr.index, None)
    }

    fn query_pkey(dev: &rdma::Device<Self>, port: u32, index: u16) -> Result<u16> {
        if index != 0 || port == 0 || port > dev.port_count() {
            return Err(EINVAL);
        }
        Ok(0xffff)
    }

    fn alloc_ucontext(
        dev: &rdma::Device<Self>,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Context, Error> {
        let d = dev.data();
        if d.nic.is_fatal() {
            return Err(EIO);
        }
        let c = &d.caps;
        let resp = uapi::gaudi_ib_alloc_ucontext_resp {
            abi_version: ABI_VERSION,
            ports_mask: if c.ports >= 64 {
                u64::MAX
            } else {
                (1u64 << c.ports) - 1
            },
            num_ports: c.ports,
            max_qps: c.max_qps,
            max_cqs: c.max_cqs,
            max_cqe: c.max_cqe,
            max_sqe: c.max_sqe,
            max_mtu: c.max_mtu,
            max_msg: u64::from(c.max_msg),
            page_size_cap: u64::from(c.page_sizes),
            ..Default::default()
        };
        udata.write(&resp)?;
        Ok(Context {
            id: d.next_ctx.fetch_add(1, Relaxed),
            usage: Usage::new()?,
            has_pd: Atomic::new(false),
        })
    }

    fn dealloc_ucontext(ctx: &rdma::Ucontext<Self>) {
        // Every object of the context is gone: another context may own the data path now.
        let mut o = ctx.device().data().owners.lock();
        if o.exclusive == ctx.data().id {
            o.exclusive = 0;
        }
    }

    fn alloc_pd(
        dev: &rdma::Device<Self>,
        user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Pd, Error> {
        let Some(user) = user else {
            return Pd::new(dev, false, dev.data().pd_ids.take()?);
        };
        let ctx = user.ucontext.data();
        let mut o = dev.data().owners.lock();
        // Contexts of the standard verbs share the NIC (the kernel checks every address they
        // post), unless one drives it itself.
        if o.exclusive != 0 && o.exclusive != ctx.id {
            kernel::ibdev_info_ratelimited!(
                dev,
                "PD refused: another user context drives the NIC exclusively\n"
            );
            return Err(EBUSY);
        }
        if ctx.has_pd.load(Relaxed) {
            return Err(ENOSPC);
        }
        user.udata.write(&uapi::gaudi_ib_alloc_pd_resp {
            pdn: PDN,
            ..Default::default()
        })?;
        // An identity only for a PD that is made: refusals use none up.
        let id = dev.data().pd_ids.take().inspect_err(|_| {
            kernel::ibdev_info_ratelimited!(
                dev,
                "PD refused: protection domain identities exhausted\n"
            )
        })?;
        let pd = Pd::new(dev, true, id).inspect_err(|e| {
            if *e == ENOSPC {
                kernel::ibdev_info_ratelimited!(dev, "PD refused: every ASID is taken\n")
            }
        })?;
        ctx.has_pd.store(true, Relaxed);
        o.pds += 1;
        Ok(pd)
    }

    fn dealloc_pd(pd: &rdma::Pd<Self>) -> Result {
        if pd.data().user {
            if let Some(ctx) = pd.ucontext() {
                let c = ctx.data();
                let mut o = pd.device().data().owners.lock();
                c.has_pd.store(false, Relaxed);
                o.pds = o.pds.saturating_sub(1);
            }
        }
        Ok(())
    }

    fn create_cq(
        dev: &rdma::Device<Self>,
        init: &mut CqInit,
        _user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Arc<queue::Cq>, Error> {
        let d = dev.data();
        if init.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        let entries = init.cqe.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
        // The device's CQs hold at least two entries.
        let entries = entries.max(2);
        if entries > d.caps.max_cqe {
            return Err(EINVAL);
        }
        let id = d.ids.alloc_cqn()?;
        let cq = queue::Cq::new(d.nic.clone(), id, entries.ilog2())
            .and_then(|init| Arc::pin_init(init, GFP_KERNEL));
        match cq {
            Ok(cq) => {
                init.grant_cqe(entries);
                init.set_id(id);
                Ok(cq)
            }
            Err(e) => {
                d.ids.free_cqn(id);
                Err(e)
            }
        }
    }

    fn destroy_cq(cq: &rdma::Cq<Self>) -> Result {
        cq.device().data().ids.free_cqn(cq.data().id());
        Ok(())
    }

    fn poll_cq(cq: &rdma::Cq<Self>, out: &mut WcSink<'_, Self>) -> Result {
        queue::poll(cq.device(), cq.data(), out)
    }

    fn req_notify_cq(cq: &rdma::Cq<Self>, _solicited: bool, _report_missed: bool) -> Result<bool> {
        // Every completion is reported: the device has no solicited-only notification.
        queue::arm(cq.data())
    }

    fn create_qp(
        pd: &rdma::Pd<Self>,
        init: &mut QpInit<'_>,
        user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<QpData, Error> {
        pin_init::pin_init_scope(move || -> Result<_> {
            let dev = pd.device();
            let d = dev.data();
            // Reliable connected only, with a send queue: the NIC executes RDMA WRITE and has
            // no receive queues, shared or not.
            if init.qp_type() != QpType::Rc || init.has_srq() {
                kernel::ibdev_info_ratelimited!(
                    dev,
                    "QP of type {:?} refused: RC only{}\n",
                    init.qp_type(),
                    if init.has_srq() { ", no SRQ" } else { "" }
                );
                return Err(EOPNOTSUPP);
            }
            // A receive queue asked for is granted as asked: its receives are held by the
            // driver until an error flushes them (`queue::post_recv`), as the NIC has no
            // receive queue. Inline data asked for by user space gets a bounce area
            // of `queue::INLINE_MAX` bytes per WQE, which it reports (a kernel consumer's gets
            // none).
            let cap = init.cap();
            let inline = user.is_some() && cap.max_inline_data > 0;
            // Each SGE of a request takes a WQE of its own (`queue::post_send`): the ring
            // holds the requests asked for, each with as many SGEs as asked for.
            let sge = cap.max_send_sge.max(1);
            let wqes = cap.max_send_wr.saturating_mul(sge);
            if cap.max_send_wr == 0
                || sge > queue::MAX_SEND_SGE
                || wqes > d.caps.max_sqe
                || cap.max_recv_wr > d.caps.max_sqe
                || cap.max_recv_sge > queue::MAX_SEND_SGE
            {
                kernel::ibdev_info_ratelimited!(
                    dev,
                    "QP capabilities refused: {:?} (send WRs times SGEs 1 to {}, receive WRs up to {}, SGEs up to {})\n",
                    cap,
                    d.caps.max_sqe,
                    d.caps.max_sqe,
                    queue::MAX_SEND_SGE
                );
                return Err(EINVAL);
            }
            if init.create_flags() != 0 {
                return Err(EOPNOTSUPP);
            }
            // Send completions go to the send CQ, the flushes of receives to the receive CQ
            // (the responder reports nothing).
            let cq = init.send_cq(dev).ok_or(EINVAL)?.data().clone();
            let rcq = match init.recv_cq(dev) {
                Some(r) if r.data().id() != cq.id() => Some(r.data().clone()),
                Some(_) => None,
                None if init.recv_cq_raw().is_null() => None,
                None => return Err(EINVAL),
            };
            // The WQEs granted: what was asked for, rounded up to a power of two. The NIC's
            // queue has one entry more than that at least (one always stays empty,
            // `rc::MAX_WQES`).
            let granted = wqes.next_power_of_two().max(2);
            let entries = (granted * 2).max(crate::rc::MIN_WQES);
            if entries > crate::rc::MAX_WQES {
                kernel::ibdev_info_ratelimited!(
                    dev,
                    "QP refused: {} send WQEs, the NIC's slot holds {}\n",
                    wqes,
                    crate::rc::MAX_WQES / 2
                );
                return Err(EINVAL);
            }
            let qpn = d.alloc_qpn()?;
            let data = QpData::new(
                &d.nic,
                dev.parent(),
                QpParams {
                    qpn,
                    pd: pd.data().id,
                    log_sq: entries.ilog2(),
                    max_sge: sge,
                    max_recv_wr: cap.max_recv_wr,
                    max_recv_sge: cap.max_recv_sge,
                    inline,
                    signal_all: init.signal_all(),
                    cq,
                    rcq,
                    space: pd.data().space.clone(),
                    key: pd.data().key,
                    limit: granted,
                },
            );
            if data.is_err() {
                d.ids.free_qp_index(qpn, d.ids.all_ports());
            }
            init.set_qp_num(qpn);
            init.grant(QpCap {
                max_send_wr: granted / sge,
                max_send_sge: sge,
                max_recv_wr: cap.max_recv_wr,
                max_recv_sge: cap.max_recv_sge,
                max_inline_data: if inline { queue::INLINE_MAX as u32 } else { 0 },
            });
            let data = data?;
            Ok(data)
        })
    }

    fn modify_qp(qp: &rdma::Qp<Self>, attr: &QpAttr<'_>, udata: Option<&mut Udata<'_>>) -> Result {
        let dev = qp.device();
        let res = modify_qp(dev, qp, attr, udata.map(|u| &*u));
        if let Err(e) = res {
            kernel::ibdev_dbg!(dev, "QP {}: modify refused: {:?}\n", qp.qp_num(), e);
        }
        res
    }

    fn query_qp(qp: &rdma::Qp<Self>, _mask: QpAttrMask) -> Result<QpQuery> {
        let q = qp.data();
        let a = *q.attrs();
        let state = q.state();
        let (mut sq_psn, mut rq_psn) = (a.sq_psn, a.rq_psn);
        if a.port != 0 && !matches!(state, QpState::Reset) {
            // Where the device is now; the values last set if it cannot say.
            if let Ok((s, r)) = q.psns(a.port) {
                sq_psn = s;
                rq_psn = r;
            }
        }
        Ok(QpQuery {
            state,
            path_mtu: a.mtu,
            access_flags: a.access,
            port_num: a.port,
            dest_qp_num: a.dest_qpn,
            rq_psn,
            sq_psn,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            cap: QpCap {
                max_send_wr: q.max_send_wr(),
                max_send_sge: q.max_send_sge(),
                max_recv_wr: q.max_recv_wr(),
                max_recv_sge: q.max_recv_sge(),
                max_inline_data: q.max_inline_data(),
            },
            signal_all: q.signal_all(),
        })
    }

    fn destroy_qp(qp: &rdma::Qp<Self>) -> Result {
        qp.data().destroy(qp.device().parent())?;
        let d = qp.device().data();
        d.ids.free_qp_index(qp.qp_num(), d.ids.all_ports());
        Ok(())
    }

    fn post_send(qp: &rdma::Qp<Self>, wrs: &mut SendWrs<'_>) -> Result {
        let d = qp.device().data();
        // User QPs without an explicit remote rkey (software written for other devices)
        // bind the one their first WRITE names, and rebind when their send queue is idle.
        // Only the first request of a call can find the queue idle.
        let first_rkey = wrs.peek().and_then(|wr| wr.rdma()).map(|(_, rkey)| rkey);
        if let Some(rkey) = first_rkey.filter(|_| qp.pd().data().user) {
            if let Err(e) = qp.data().bind_remote(rkey) {
                kernel::ibdev_dbg!(
                    qp.device(),
                    "QP {}: binding rkey {:#x} failed: {:?}\n",
                    qp.qp_num(),
                    rkey,
                    e
                );
                return Err(e);
            }
        }
        let res = queue::post_send(qp.data(), wrs, d.caps.max_msg, |key| {
            d.mr(key).map(|m| m.view)
        });
        if let Err(e) = res {
            kernel::ibdev_dbg!(
                qp.device(),
                "QP {}: post_send refused: {:?}\n",
                qp.qp_num(),
                e
            );
        }
        res
    }

    fn post_recv(qp: &rdma::Qp<Self>, wrs: &mut RecvWrs<'_>) -> Result {
        let d = qp.device().data();
        let res = queue::post_recv(qp.data(), wrs, |key| d.mr(key).map(|m| m.view));
        if let Err(e) = res {
            kernel::ibdev_dbg!(
                qp.device(),
                "QP {}: post_recv refused: {:?}\n",
                qp.qp_num(),
                e
            );
        }
        res
    }

    fn reg_user_mr(
        pd: &rdma::Pd<Self>,
        req: &UserMr,
        user: &mut User<'_, Self>,
        keys: &mut MrKeys,
    ) -> impl PinInit<MrData, Error> {
        mr::reg_user(pd, req, user, keys)
    }

    fn reg_user_mr_dmabuf(
        pd: &rdma::Pd<Self>,
        req: &DmabufMr,
        user: &mut User<'_, Self>,
        keys: &mut MrKeys,
    ) -> impl PinInit<MrData, Error> {
        mr::reg_dmabuf(pd, req, user, keys)
    }

    fn dereg_mr(mr: &rdma::Mr<Self>) -> Result {
        mr::dereg(mr)
    }
}

/// The access rights a QP may be given: `IB_ACCESS_LOCAL_WRITE` and `IB_ACCESS_REMOTE_WRITE`,
/// which the NIC honours, and `IB_ACCESS_REMOTE_READ`, `IB_ACCESS_REMOTE_ATOMIC`,
/// `IB_ACCESS_FLUSH_GLOBAL` and `IB_ACCESS_FLUSH_PERSISTENT`, which it keeps and reports but
/// never exercises: it serves no READ, atomic or FLUSH request whatever the QP allows (it
/// answers them with an invalid-request NAK), so allowing them grants nothing. Unmodified
/// software asks for them on every QP it sets up (rdma-core's tests do).
const QP_ACCESS: u32 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 8) | (1 << 9);

/// The attributes each transition takes (required, optional), as the InfiniBand
/// specification's QP state table for RC, less what the NIC has no use for.
fn transition_attrs(cur: QpState, next: QpState) -> Option<(QpAttrMask, QpAttrMask)> {
    use QpState::*;
    let none = QpAttrMask::default();
    Some(match (cur, next) {
        (_, Reset) | (_, Err) => (none, none),
        (Reset, Init) => (
            QpAttrMask::PORT,
            QpAttrMask::PKEY_INDEX | QpAttrMask::ACCESS_FLAGS,
        ),
        (Init, Init) => (
            none,
            QpAttrMask::PKEY_INDEX | QpAttrMask::ACCESS_FLAGS | QpAttrMask::PORT,
        ),
        (Init, Rtr) => (
            QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN,
            QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER
                | QpAttrMask::ACCESS_FLAGS
                | QpAttrMask::PKEY_INDEX,
        ),
        (Rtr, Rts) => (
            QpAttrMask::SQ_PSN,
            QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER
                | QpAttrMask::ACCESS_FLAGS,
        ),
        (Rts, Rts) => (none, QpAttrMask::ACCESS_FLAGS | QpAttrMask::MIN_RNR_TIMER),
        _ => return None,
    })
}

/// The state machine of the standard verbs' QPs; see "Queue pairs" in uapi.rst for the
/// driver data of RTR and RTS.
fn modify_qp(
    dev: &rdma::Device<GaudiIbDriver>,
    qp: &rdma::Qp<GaudiIbDriver>,
    attr: &QpAttr<'_>,
    udata: Option<&Udata<'_>>,
) -> Result {
    // The QP's attributes stay locked from the check to the device's context.
    let mut attrs = qp.data().attrs();
    let (cur, next, a) = validate_modify(dev, qp, &attrs, attr, udata)?;
    apply_modify(dev, qp, cur, next, a, &mut attrs)
}

/// Check a modification of `qp`, whose attributes are `attrs`, with `attr` and the driver data
/// `udata`: the states (current, next) and the attributes the QP would have. Changes nothing.
fn validate_modify(
    dev: &rdma::Device<GaudiIbDriver>,
    qp: &rdma::Qp<GaudiIbDriver>,
    attrs: &QpAttrs,
    attr: &QpAttr<'_>,
    udata: Option<&Udata<'_>>,
) -> Result<(QpState, QpState, QpAttrs)> {
    let d = dev.data();
    let q = qp.data();
    let cur = q.state();
    if let Some(c) = attr.cur_state()? {
        if c != cur {
            return Err(EINVAL);
        }
    }
    let next = attr.state()?.unwrap_or(cur);
    let (required, optional) = transition_attrs(cur, next).ok_or(EINVAL)?;
    let mask = attr.mask();
    let given = mask.without(QpAttrMask::STATE | QpAttrMask::CUR_STATE);
    if given.without(required | optional) != QpAttrMask::default()
        || required.without(given) != QpAttrMask::default()
    {
        return Err(EINVAL);
    }

    let mut a = *attrs;
    if let Some(port) = attr.port_num() {
        if port == 0 || port > d.caps.ports || (a.port != 0 && port != a.port) {
            return Err(EINVAL);
        }
        a.port = port;
    }
    if attr.pkey_index().is_some_and(|i| i != 0) {
        return Err(EINVAL);
    }
    if let Some(access) = attr.access_flags() {
        if access & !QP_ACCESS != 0 {
            kernel::ibdev_info_ratelimited!(
                dev,
                "QP access {:#x} refused: no memory windows or other rights\n",
                access
            );
            return Err(EOPNOTSUPP);
        }
        a.access = access;
    }
    if let Some(mtu) = attr.path_mtu()? {
        if 128u32 << (mtu as u32) > d.caps.max_mtu {
            return Err(EINVAL);
        }
        a.mtu = mtu;
    }
    if let Some(n) = attr.dest_qp_num() {
        a.dest_qpn = n & 0xff_ffff;
    }
    if let Some(psn) = attr.rq_psn() {
        a.rq_psn = psn & 0xff_ffff;
    }
    if let Some(psn) = attr.sq_psn() {
        a.sq_psn = psn & 0xff_ffff;
    }
    if let Some(t) = attr.timeout() {
        if t > 31 {
            return Err(EINVAL);
        }
        a.timeout = t;
    }
    if let Some(n) = attr.retry_cnt() {
        if n > 7 {
            return Err(EINVAL);
        }
        a.retry_cnt = n;
    }
    if let Some(n) = attr.rnr_retry() {
        a.rnr_retry = n.min(7);
    }
    if let Some(t) = attr.min_rnr_timer() {
        if t > 31 {
            return Err(EINVAL);
        }
        a.min_rnr_timer = t;
    }

    // The peer: the address vector, its MAC resolved by the core.
    if let Some(av) = attr.av() {
        a.path = av_path(dev, qp, &a, &av)?.with_keys(&a.path);
    }
    if let Some(u) = udata.filter(|u| u.in_len() > 0) {
        let req = u.read::<uapi::gaudi_ib_modify_qp>()?;
        if req.comp_mask != 0 || req.flags & !MODIFY_QP_FLAGS != 0 {
            return Err(EINVAL);
        }
        if req.flags != 0 && !matches!(next, QpState::Rtr | QpState::Rts) {
            return Err(EINVAL);
        }
        if req.flags & MODIFY_QP_REMOTE_RKEY != 0 {
            a.path.remote_rkey = req.remote_rkey;
            a.path.remote_explicit = true;
        }
        // The responder takes its PD's key, the rkey of every region of the PD open to
        // remote writes; 0 asks for nothing.
        if req.flags & MODIFY_QP_LOCAL_RKEY != 0
            && req.local_rkey != 0
            && req.local_rkey != qp.pd().data().key
        {
            return Err(EINVAL);
        }
    }
    if attr.av().is_some() || attr.dest_qp_num().is_some() {
        a.path.udp_sport = udp_sport(a.path.flow_label, qp.qp_num(), a.dest_qpn);
    }
    if next == QpState::Reset {
        a = QpAttrs::default();
    }
    Ok((cur, next, a))
}

/// The path of `qp`, whose attributes are `a`, to the peer of the address vector `av`:
/// RoCE v2 from a valid source GID of the QP's port to a unicast destination GID of the
/// same family, at the MAC the core resolved (`EINVAL` otherwise).
fn av_path(
    dev: &rdma::Device<GaudiIbDriver>,
    qp: &rdma::Qp<GaudiIbDriver>,
    a: &QpAttrs,
    av: &AddressVector,
) -> Result<Path> {
    let refuse = |why: &str| {
        kernel::ibdev_dbg!(dev, "QP {}: address vector refused: {}\n", qp.qp_num(), why);
        Err(EINVAL)
    };
    let Some(sgid) = av.sgid else {
        return refuse("no global route");
    };
    if av.port_num != a.port || sgid.port != a.port {
        return refuse("not the QP's port");
    }
    if sgid.gid_type != GidType::RoceV2 || u32::from(av.sgid_index) != sgid.index {
        return refuse("source GID");
    }
    if av.dgid == Gid::default()
        || av.dgid.0[0] == 0xff
        || av.dgid.to_ipv4().is_some_and(|ip| ip[0] >= 224)
    {
        return refuse("destination GID not unicast");
    }
    if sgid.gid.to_ipv4().is_some() != av.dgid.to_ipv4().is_some() {
        return refuse("source and destination of different families");
    }
    // The NIC sends IPv4 only.
    if av.dgid.to_ipv4().is_none() {
        kernel::ibdev_dbg!(
            dev,
            "QP {}: address vector refused: IPv6, the NIC sends IPv4 only\n",
            qp.qp_num()
        );
        return Err(EOPNOTSUPP);
    }
    if av.dmac == [0; 6] || av.dmac[0] & 1 != 0 {
        return refuse("destination MAC not unicast");
    }
    Ok(Path {
        dmac: av.dmac,
        dgid: av.dgid,
        flow_label: av.flow_label & 0xf_ffff,
        src_ip: sgid.gid.to_ipv4().map_or(0, u32::from_be_bytes),
        ..Path::default()
    })
}

/// The UDP source port of a RoCE v2 QP (the low 14 bits the device takes), from the flow
/// label, or when there is none from the QP numbers, as the core's `rdma_get_udp_sport()`.
fn udp_sport(flow_label: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if flow_label != 0 {
        flow_label
    } else {
        let mut v = u64::from(lqpn) * u64::from(rqpn);
        v ^= v >> 20;
        v ^= v >> 40;
        (v & 0xf_ffff) as u32
    };
    let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
    low as u16
}

/// Move `qp` from `cur` to `next` with the checked attributes `a` on the NIC, and keep them
/// in `attrs`; a QP moved to ERR has its outstanding requests and receives flushed.
fn apply_modify(
    dev: &rdma::Device<GaudiIbDriver>,
    qp: &rdma::Qp<GaudiIbDriver>,
    cur: QpState,
    next: QpState,
    a: QpAttrs,
    attrs: &mut QpAttrs,
) -> Result {
    qp.data().transition(dev.parent(), cur, next, &a)?;
    *attrs = a;
    if next == QpState::Err {
        crate::rc::flush(dev, qp);
    }
    Ok(())
}

const OBJECT_DEVICE: u16 = uverbs::id(uapi::gaudi_ib_objects_GAUDI_IB_OBJECT_DEVICE);
const METHOD_QUERY_PORT: u16 = uverbs::id(uapi::gaudi_ib_device_methods_GAUDI_IB_METHOD_QUERY_PORT);
const ATTR_QUERY_PORT_NUM: u16 =
    uverbs::id(uapi::gaudi_ib_query_port_attrs_GAUDI_IB_ATTR_QUERY_PORT_NUM);
const ATTR_QUERY_PORT_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_query_port_attrs_GAUDI_IB_ATTR_QUERY_PORT_RESP);
const METHOD_QUERY_DEVICE: u16 =
    uverbs::id(uapi::gaudi_ib_device_methods_GAUDI_IB_METHOD_QUERY_DEVICE);
const ATTR_QUERY_DEVICE_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_query_device_attrs_GAUDI_IB_ATTR_QUERY_DEVICE_RESP);

/// `GAUDI_IB_METHOD_QUERY_PORT`: addresses and state of one port.
struct QueryPort;

impl Method for QueryPort {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QUERY_PORT;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::const_in(ATTR_QUERY_PORT_NUM, Presence::Mandatory),
        &AttrDef::ptr_out::<uapi::gaudi_ib_port_info>(ATTR_QUERY_PORT_RESP, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let dev = call.device()?;
        let port = call.const_in(ATTR_QUERY_PORT_NUM, 1, u64::from(dev.port_count()))? as u32;
        let d = dev.data();
        let info = uapi::gaudi_ib_port_info {
            port_num: port,
            mac: d.port_mac(port)?,
            ipv4: d.port_ipv4(port)?,
            flags: if d.port_up(port)? {
                PORT_FLAG_LINK_UP
            } else {
                0
            },
            speed_mbps: d.port_speed(port)?,
            ..Default::default()
        };
        call.write(ATTR_QUERY_PORT_RESP, &info)
    }
}

/// `GAUDI_IB_METHOD_QUERY_DEVICE`.
struct QueryDevice;

impl Method for QueryDevice {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QUERY_DEVICE;
    const ATTRS: &'static [&'static AttrDef] = &[&AttrDef::ptr_out::<uapi::gaudi_ib_device_info>(
        ATTR_QUERY_DEVICE_RESP,
        Presence::Mandatory,
    )];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let d = call.ucontext()?.device().data();
        let info = uapi::gaudi_ib_device_info {
            // The formats of WQEs, CQEs and doorbells user space writes and reads: the NIC's.
            model_version: MODEL_VERSION,
            devmem_size: d.hbm.size(),
            devmem_free: d.hbm.free_bytes(),
            ..Default::default()
        };
        call.write(ATTR_QUERY_DEVICE_RESP, &info)
    }
}

static QUERY_PORT: MethodDef<GaudiIbDriver> = MethodDef::new::<QueryPort>();
static QUERY_MR: MethodDef<GaudiIbDriver> = MethodDef::new::<mr::QueryMr>();
static QUERY_DEVICE: MethodDef<GaudiIbDriver> = MethodDef::new::<QueryDevice>();
static DEVICE_OBJECT: ObjectDef<GaudiIbDriver> =
    ObjectDef::global(OBJECT_DEVICE, &[&QUERY_PORT, &QUERY_MR, &QUERY_DEVICE]);
static UAPI: [UapiDef<GaudiIbDriver>; 4] = [
    UapiDef::object(&DEVICE_OBJECT),
    UapiDef::object(&dv::QP_SET_OBJECT),
    UapiDef::object(&hbm::HBM_OBJECT),
    UapiDef::END,
];
