// SPDX-License-Identifier: GPL-2.0

//! The device-specific fast path: QP sets, whose queues user space drives itself.
//!
//! A QP set is one QP per port of a set of ports, all with the same QP index (as the
//! collective engine needs), each with a CQ of its own. User space maps each QP's send queue,
//! its CQ and its UMR block (doorbell FIFO and CQ consumer index), writes WQEs with device VAs
//! itself and rings the doorbell: no system call per work request. The device MMU is then the
//! security boundary: the set works in its protection domain's ASID, which holds only the
//! memory that PD registered and the set's send queues (which the NIC only reads). See
//! Documentation/infiniband/gaudi/design.rst.

use kernel::net::gaudi::gaudi2;
use kernel::{
    device::{
        Bound,
        Device, //
    },
    prelude::*,
    rdma::{
        self,
        mmap::{
            Caching,
            MmapEntry,
            QueueMem,
            Vma, //
        },
        umem::Access,
        uverbs::{
            self,
            AttrDef,
            Call,
            Method,
            MethodDef,
            Object,
            ObjectDef,
            Presence,
            RemoveReason, //
        },
        Gid, Mtu,
    },
    sync::{
        new_mutex,
        Arc,
        Mutex, //
    },
    uapi,
};

use crate::{
    chip::{
        AddressSpace,
        Mapping, //
    },
    ib::{
        Charge,
        GaudiIbDriver,
        Limit, //
    },
    ids::Ids,
    mmu,
    nic::Nic, //
    queue::{
        Path,
        QpAttrs, //
    },
    rc::{
        self,
        Owner, //
    },
};

/// Queues are mapped with 4 KiB pages, for the device and for user space.
const PAGE_SHIFT: u32 = 12;
const PAGE_SIZE: usize = 1 << PAGE_SHIFT;
/// Bytes of a CQE.
const CQE_BYTES: usize = size_of::<gaudi2::Cqe>();

/// What an mmap entry of a user context maps.
pub(crate) enum Map {
    /// The send queue of a QP of a set: the entry's memory.
    Queue,
    /// The UMR block of a QP of a set: its doorbell FIFOs and CQ consumer index
    /// slots. The block stays the set's until the last mapping of it is gone.
    Umr(Arc<UserBlock>),
    /// The CQ of a UMR block: the entry's memory, part of the port's CQ region; the block
    /// is held as long.
    UserCq { _block: Arc<UserBlock> },
}

/// Map `entry` into `vma`.
pub(crate) fn mmap(entry: &MmapEntry<GaudiIbDriver>, vma: &mut Vma<'_>) -> Result {
    match entry.data() {
        Map::Queue | Map::UserCq { .. } => vma.map_coherent(entry),
        Map::Umr(b) => vma.io_map_bar(
            entry,
            0,
            b.nic.umr_page(b.port, b.block).ok_or(EINVAL)? as u64,
            PAGE_SIZE,
            Caching::Uncached,
        ),
    }
}

/// A UMR block of a port held by a QP of a set: user doorbell FIFO 2b, which rings only QPs
/// of the set's ASID, and CQ 2b + 2, whose entries the process maps. Given back to the port
/// only when the set and every mapping of the block's page and CQ are gone, so that no
/// process keeps a doorbell or CQ that another is given; the ASID it names is held as long.
pub(crate) struct UserBlock {
    nic: Arc<Nic>,
    _space: Arc<AddressSpace>,
    port: usize,
    block: usize,
    /// The CQ's entries.
    cq: QueueMem,
}

impl UserBlock {
    /// Take a block of port index `port` for ASID `space` with a CQ of `2^log_cq` entries.
    fn new(
        nic: &Arc<Nic>,
        space: &Arc<AddressSpace>,
        port: usize,
        log_cq: u32,
    ) -> Result<Arc<Self>> {
        let (block, cq) = nic.user_block(port, space.asid(), log_cq)?;
        // From here dropping the block gives it back.
        let b = Self {
            nic: nic.clone(),
            _space: space.clone(),
            port,
            block,
            cq,
        };
        Ok(Arc::new(b, GFP_KERNEL)?)
    }

    /// The block's CQ.
    fn cqn(&self) -> usize {
        gaudi2::CQ_USER_FIRST + 2 * self.block
    }
}

impl Drop for UserBlock {
    fn drop(&mut self) {
        self.nic.user_block_stop(self.port, self.block);
        self.nic.user_block_put(self.port, self.block);
    }
}

/// A QP's state as software keeps it (the NIC's contexts have none).
#[derive(Clone, Copy, Default)]
struct SetQp {
    /// `enum ib_qp_state`.
    state: u32,
    attrs: QpAttrs,
    /// The port's encapsulation the QP sends from, held from RTR.
    encap: Option<usize>,
    /// The responder context (and from RTS the requester's) is written.
    on_device: bool,
}

/// The QP of a set on one port: its contexts, its send queue at its slot of send
/// WQ array 1 in the set's ASID, and its UMR block.
struct SetPort {
    port: usize,
    block: Arc<UserBlock>,
    /// Dropped before the memory: the queue leaves the ASID first.
    sq_map: Option<Mapping>,
    sq: QueueMem,
}

impl SetPort {
    fn new(
        set: &SetParams<'_>,
        space: &Arc<AddressSpace>,
        dev: &Device<Bound>,
        port: usize,
    ) -> Result<Self> {
        let block = UserBlock::new(set.nic, space, port, set.log_cq)?;
        let sq = QueueMem::new(set.dev, rc::WQE_BYTES << set.log_sq)?;
        let base = sq.dma_address();
        let pages = (sq.size() / PAGE_SIZE) as u64;
        // The NIC only reads the queue; user space writes it.
        let map = space.map(
            dev,
            mmu::Place::At(rc::slot_va(port, set.index)),
            (0..pages).map(|i| base + i * PAGE_SIZE as u64),
            pages,
            PAGE_SHIFT,
            mmu::Flags::default(),
        )?;
        Ok(Self {
            port,
            block,
            sq_map: Some(map),
            sq,
        })
    }
}

/// Move the QP of `set` at `slot` (on its port) from `s` to `next` with attributes `a`
/// (checked by [`Modify::apply`]). Sleeps.
fn transition(
    set: &QpSet,
    nic: &Nic,
    slot: usize,
    s: &mut SetQp,
    next: u32,
    a: &QpAttrs,
) -> Result {
    let p = set.ports.get(slot).ok_or(EINVAL)?;
    let qpn = set.index;
    // The responder takes the PD's key if the QP is open to WRITEs, else one nobody has.
    let lkey = if a.path.local_rkey != 0 {
        set.pd_key
    } else {
        set.closed_key
    };
    let log_sq = set.log_sq;
    let port = p.port;
    let owner = Owner {
        asid: p.block._space.asid(),
        trust: 0,
        cq: p.block.cqn(),
        lkey,
        last_idx: (1 << log_sq) - 1,
    };
    match (s.state, next) {
        (_, IB_QPS_RESET) => {
            if s.on_device {
                match rc::teardown(nic, port, qpn) {
                    Ok(()) | Err(ENODEV) => {}
                    Err(e) => return Err(e),
                }
            }
            if let Some(e) = s.encap.take() {
                nic.encap_put(port, e);
            }
            *s = SetQp::default();
        }
        (_, IB_QPS_ERR) => {
            if s.on_device {
                match rc::stop(nic, port, qpn) {
                    Ok(()) | Err(ENODEV) => {}
                    Err(e) => return Err(e),
                }
            }
            s.state = IB_QPS_ERR;
        }
        (IB_QPS_RESET | IB_QPS_INIT, IB_QPS_INIT) => s.state = IB_QPS_INIT,
        (IB_QPS_INIT, IB_QPS_RTR) => {
            let src = a.path.src_ip;
            if src == 0 {
                return Err(EADDRNOTAVAIL);
            }
            let encap = nic.encap_get(port, src)?;
            let res = rc::res_context(&owner, a, encap).and_then(|c| {
                nic.gateway_write(port, qpn, false, &c, &[u64::MAX; gaudi2::RES_QPC_WORDS])
            });
            if let Err(e) = res {
                nic.encap_put(port, encap);
                return Err(e);
            }
            s.encap = Some(encap);
            s.on_device = true;
            s.state = IB_QPS_RTR;
            s.attrs = *a;
        }
        (IB_QPS_RTR, IB_QPS_RTS) => {
            let encap = s.encap.ok_or(EINVAL)?;
            let c = rc::req_context(&owner, a, encap, a.path.remote_rkey)?;
            nic.gateway_write(port, qpn, true, &c, &[u64::MAX; gaudi2::REQ_QPC_WORDS])?;
            s.state = IB_QPS_RTS;
            s.attrs = *a;
        }
        _ => return Err(EINVAL),
    }
    Ok(())
}

/// What the ports of a new set share.
struct SetParams<'a> {
    nic: &'a Arc<Nic>,
    dev: &'a rdma::Device<GaudiIbDriver>,
    index: u32,
    log_sq: u32,
    log_cq: u32,
}

/// A QP set (`GAUDI_IB_OBJECT_QP_SET`).
pub(crate) struct QpSet {
    ids: Arc<Ids>,
    index: u32,
    /// Port indexes of the set (bit n: port index n).
    mask: u32,
    log_sq: u32,
    log_cq: u32,
    /// mmap offsets of the set's entries (send queues, CQs and UMR pages).
    offsets: KVec<u64>,
    /// Given back to the context's limits with the set.
    charge: Option<Charge>,
    /// One per port of the set, lowest first, their states, and the keys their responders
    /// take: the PD's (`local_rkey` given) or one nobody has.
    ports: KVec<SetPort>,
    states: Pin<KBox<Mutex<KVec<SetQp>>>>,
    pd_key: u32,
    closed_key: u32,
}

impl QpSet {
    /// Take index `want` (or any index free on all of them) on the ports of `mask` and, on
    /// each, a UMR block and a send queue at the index's slot in the ASID of `pd`. The
    /// QPs are in RESET: nothing is on the NIC until they move on. Nothing is left behind on
    /// failure.
    #[expect(clippy::too_many_arguments)]
    fn new(
        nic: &Arc<Nic>,
        ids: &Arc<Ids>,
        dev: &rdma::Device<GaudiIbDriver>,
        pd: &crate::ib::Pd,
        mask: u32,
        want: Option<u32>,
        log_sq: u32,
        log_cq: u32,
    ) -> Result<Self> {
        let index = ids.alloc_qp_index(mask, want)?;
        let n = mask.count_ones() as usize;
        let mut closed_key = 0;
        while closed_key == 0 || closed_key == pd.key {
            closed_key = kernel::random::get_random_u32();
        }
        let mut set = Self {
            ids: ids.clone(),
            index,
            mask,
            log_sq,
            log_cq,
            offsets: KVec::new(),
            charge: None,
            ports: KVec::new(),
            states: KBox::pin_init(new_mutex!(KVec::new()), GFP_KERNEL)?,
            pd_key: pd.key,
            closed_key,
        };
        if u64::from(index) >= gaudi2::TABLE_QPS {
            return Err(ENOSPC);
        }
        set.ports.reserve(n, GFP_KERNEL)?;
        let params = SetParams {
            nic,
            dev,
            index,
            log_sq,
            log_cq,
        };
        for port in (0..32).filter(|p| mask & (1 << p) != 0) {
            let p = SetPort::new(&params, &pd.space, dev.parent(), port as usize)?;
            set.ports.push(p, GFP_KERNEL)?;
        }
        set.states.lock().resize(n, SetQp::default(), GFP_KERNEL)?;
        Ok(set)
    }

    /// The position of port index `port` in the set.
    fn slot(&self, port: u32) -> Result<usize> {
        self.ports
            .iter()
            .position(|p| p.port == port as usize)
            .ok_or(EINVAL)
    }

    /// Take the set's QPs off the NIC (each stopped, drained and invalidated),
    /// their queues out of the ASID and their CQs stopped. Sleeps.
    fn teardown(&self, nic: &Nic) {
        let mut st = self.states.lock();
        for (slot, s) in st.iter_mut().enumerate() {
            let Some(p) = self.ports.get(slot) else {
                break;
            };
            let r = transition(self, nic, slot, s, IB_QPS_RESET, &QpAttrs::default());
            if let Err(e) = r {
                kernel::ratelimited!(dev_warn!(
                    nic.dev,
                    "QP set {}: QP on port {} not taken off the NIC: {:?}\n",
                    self.index,
                    p.port + 1,
                    e
                ));
            }
            nic.user_block_stop(p.port, p.block.block);
        }
    }
}

impl Drop for QpSet {
    fn drop(&mut self) {
        // The ports first (queues out of the ASID), then the index they held.
        for p in self.ports.iter_mut() {
            p.sq_map = None;
        }
        self.ports.clear();
        self.ids.free_qp_index(self.index, self.mask);
    }
}

impl Object for QpSet {
    type Driver = GaudiIbDriver;

    fn destroy(&self, handle: &uverbs::Handle<'_, GaudiIbDriver>, _why: RemoveReason) -> Result {
        // No new mapping of its queues; the device lets go of them when the set is dropped.
        if let Some(ctx) = handle.ucontext() {
            withdraw(ctx, &self.offsets);
            let dev = ctx.device();
            self.teardown(dev.data().nic());
        }
        Ok(())
    }
}

pub(crate) const OBJECT_QP_SET: u16 = uverbs::id(uapi::gaudi_ib_objects_GAUDI_IB_OBJECT_QP_SET);
const METHOD_QP_SET_CREATE: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_methods_GAUDI_IB_METHOD_QP_SET_CREATE);
const METHOD_QP_SET_DESTROY: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_methods_GAUDI_IB_METHOD_QP_SET_DESTROY);
const METHOD_QP_SET_MODIFY: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_methods_GAUDI_IB_METHOD_QP_SET_MODIFY);
const METHOD_QP_SET_QUERY: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_methods_GAUDI_IB_METHOD_QP_SET_QUERY);
const ATTR_CREATE_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_create_attrs_GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE);
const ATTR_CREATE_REQ: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_create_attrs_GAUDI_IB_ATTR_QP_SET_CREATE_REQ);
const ATTR_CREATE_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_create_attrs_GAUDI_IB_ATTR_QP_SET_CREATE_RESP);
const ATTR_CREATE_PORTS: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_create_attrs_GAUDI_IB_ATTR_QP_SET_CREATE_PORTS);
const ATTR_CREATE_PD: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_create_attrs_GAUDI_IB_ATTR_QP_SET_CREATE_PD);
const ATTR_DESTROY_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_destroy_attrs_GAUDI_IB_ATTR_QP_SET_DESTROY_HANDLE);
const ATTR_MODIFY_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_modify_attrs_GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE);
const ATTR_MODIFY_PORT: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_modify_attrs_GAUDI_IB_ATTR_QP_SET_MODIFY_PORT);
const ATTR_MODIFY_REQ: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_modify_attrs_GAUDI_IB_ATTR_QP_SET_MODIFY_REQ);
const ATTR_QUERY_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_query_attrs_GAUDI_IB_ATTR_QP_SET_QUERY_HANDLE);
const ATTR_QUERY_PORT: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_query_attrs_GAUDI_IB_ATTR_QP_SET_QUERY_PORT);
const ATTR_QUERY_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_qp_set_query_attrs_GAUDI_IB_ATTR_QP_SET_QUERY_RESP);

const CREATE_INDEX: u32 = uapi::gaudi_ib_qp_set_create_flags_GAUDI_IB_QP_SET_CREATE_INDEX;

// `enum ib_qp_state`.
const IB_QPS_RESET: u32 = 0;
const IB_QPS_INIT: u32 = 1;
const IB_QPS_RTR: u32 = 2;
const IB_QPS_RTS: u32 = 3;
const IB_QPS_ERR: u32 = 6;

/// PSNs and QP numbers on the wire are 24 bits.
const MASK_24: u32 = 0xff_ffff;

/// `GAUDI_IB_METHOD_QP_SET_CREATE`.
struct Create;

impl Create {
    /// The request of `call`, checked: ports the device has, queue sizes within its limits,
    /// room for the reply of every port. Changes nothing.
    fn validate(
        call: &Call<'_, GaudiIbDriver>,
        d: &crate::ib::IbDev,
    ) -> Result<uapi::gaudi_ib_qp_set_create> {
        let req: uapi::gaudi_ib_qp_set_create = call.read(ATTR_CREATE_REQ)?;
        let ports = d.ids.all_ports();
        if req.comp_mask != 0 || req.reserved != 0 || req.flags & !CREATE_INDEX != 0 {
            return Err(EINVAL);
        }
        if req.ports == 0 || req.ports & !u64::from(ports) != 0 {
            return Err(EINVAL);
        }
        // A send queue fits its QP's slot of the WQ array; a CQ its part of the region.
        let sq = rc::MIN_WQES.ilog2()..=rc::MAX_WQES.ilog2();
        let cq = gaudi2::CQ_USER_LOG_MIN..=gaudi2::CQ_LOG_MAX;
        if !sq.contains(&req.log_sq_entries) || !cq.contains(&req.log_cq_entries) {
            return Err(EINVAL);
        }
        let ports = (req.ports as u32).count_ones() as usize;
        if call.len(ATTR_CREATE_PORTS)? < ports * size_of::<uapi::gaudi_ib_qp_set_port>() {
            return Err(ENOSPC);
        }
        Ok(req)
    }

    /// Offer the set's queues and doorbell pages to `mmap()`; on failure nothing stays offered.
    fn offer(
        ctx: &rdma::Ucontext<GaudiIbDriver>,
        set: &QpSet,
        out: &mut KVec<uapi::gaudi_ib_qp_set_port>,
    ) -> Result<KVec<u64>> {
        let mut offsets = KVec::with_capacity(3 * set.ports.len(), GFP_KERNEL)?;
        let res = (|| -> Result {
            for p in set.ports.iter() {
                let sq = ctx.mmap_insert_coherent(&p.sq, Ok(Map::Queue))?;
                offsets.push(sq, GFP_KERNEL)?;
                let cq = ctx.mmap_insert_coherent(
                    &p.block.cq,
                    Ok(Map::UserCq {
                        _block: p.block.clone(),
                    }),
                )?;
                offsets.push(cq, GFP_KERNEL)?;
                let db = ctx.mmap_insert(PAGE_SIZE, Ok(Map::Umr(p.block.clone())))?;
                offsets.push(db, GFP_KERNEL)?;
                out.push(
                    uapi::gaudi_ib_qp_set_port {
                        port_num: p.port as u32 + 1,
                        cqn: p.block.cqn() as u32,
                        sq_offset: sq,
                        cq_offset: cq,
                        db_offset: db,
                        sq_va: rc::slot_va(p.port, set.index),
                        // Reached by bus address, not in the ASID.
                        cq_va: 0,
                    },
                    GFP_KERNEL,
                )?;
            }
            Ok(())
        })();
        if let Err(e) = res {
            withdraw(ctx, &offsets);
            return Err(e);
        }
        Ok(offsets)
    }
}

/// Remove the mmap entries at `offsets`: no new mapping can be made of them.
fn withdraw(ctx: &rdma::Ucontext<GaudiIbDriver>, offsets: &[u64]) {
    for off in offsets {
        // ENOENT: already gone with the context.
        let _ = ctx.mmap_remove(*off);
    }
}

impl Method for Create {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QP_SET_CREATE;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_CREATE_HANDLE,
            OBJECT_QP_SET,
            uverbs::Access::New,
            Presence::Mandatory,
        ),
        &AttrDef::ptr_in::<uapi::gaudi_ib_qp_set_create>(ATTR_CREATE_REQ, Presence::Mandatory),
        &AttrDef::ptr_out::<uapi::gaudi_ib_qp_set_create_resp>(
            ATTR_CREATE_RESP,
            Presence::Mandatory,
        ),
        &AttrDef::array_out::<uapi::gaudi_ib_qp_set_port>(ATTR_CREATE_PORTS, Presence::Mandatory),
        &AttrDef::idr(
            ATTR_CREATE_PD,
            uverbs::OBJECT_PD,
            uverbs::Access::Read,
            Presence::Optional,
        ),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let ctx = call.ucontext()?;
        let dev = ctx.device();
        let d = dev.data();
        let req = Create::validate(call, d)?;
        let mask = req.ports as u32;
        // The set works in its PD's ASID, beside the standard verbs of other contexts.
        let pd = call.pd(ATTR_CREATE_PD).map_err(|_| EINVAL)?.data();
        let want = (req.flags & CREATE_INDEX != 0).then_some(req.index);
        let queue_bytes = u64::from(mask.count_ones())
            * ((rc::WQE_BYTES << req.log_sq_entries).next_multiple_of(PAGE_SIZE)
                + (CQE_BYTES << req.log_cq_entries).next_multiple_of(PAGE_SIZE))
                as u64;
        let charge = ctx
            .data()
            .usage()
            .charge(&[(Limit::Sets, 1), (Limit::QueueBytes, queue_bytes)])?;
        let set = QpSet::new(
            d.nic(),
            &d.ids,
            dev,
            pd,
            mask,
            want,
            req.log_sq_entries,
            req.log_cq_entries,
        );
        let mut set = set.inspect_err(|e| {
            if *e == EBUSY {
                kernel::ibdev_info_ratelimited!(
                    dev,
                    "QP set refused: index {} is in use on one of ports {:#x}\n",
                    req.index,
                    req.ports
                );
            }
        })?;
        set.charge = Some(charge);
        let mut out = KVec::new();
        set.offsets = Create::offer(ctx, &set, &mut out)?;
        let resp = uapi::gaudi_ib_qp_set_create_resp {
            index: set.index,
            ports: req.ports,
            sq_bytes: (rc::WQE_BYTES << set.log_sq).next_multiple_of(PAGE_SIZE) as u32,
            cq_bytes: (CQE_BYTES << set.log_cq).next_multiple_of(PAGE_SIZE) as u32,
            ..Default::default()
        };
        let mut offsets = KVec::new();
        if let Err(e) = offsets.extend_from_slice(&set.offsets, GFP_KERNEL) {
            withdraw(ctx, &set.offsets);
            return Err(e.into());
        }
        let res = call
            .new_object(ATTR_CREATE_HANDLE, set)
            .and_then(|_| call.write(ATTR_CREATE_RESP, &resp))
            .and_then(|()| call.write_slice(ATTR_CREATE_PORTS, &out));
        if res.is_err() {
            // The core destroys the set; its queues are not offered any more.
            withdraw(ctx, &offsets);
        }
        res
    }
}

/// `GAUDI_IB_METHOD_QP_SET_MODIFY`.
struct Modify;

impl Modify {
    /// Check `req` for a move to `state` and fold it into `a`; `pd_key` is the key of the
    /// set's PD.
    fn apply(
        dev: &rdma::Device<GaudiIbDriver>,
        d: &crate::ib::IbDev,
        index: u32,
        req: &uapi::gaudi_ib_qp_set_modify,
        a: &mut QpAttrs,
        pd_key: u32,
    ) -> Result {
        match req.state {
            IB_QPS_RESET => *a = QpAttrs::default(),
            IB_QPS_INIT => {}
            IB_QPS_RTR => {
                a.mtu = match req.path_mtu {
                    1 => Mtu::Mtu256,
                    2 => Mtu::Mtu512,
                    3 => Mtu::Mtu1024,
                    4 => Mtu::Mtu2048,
                    5 => Mtu::Mtu4096,
                    _ => return Err(EINVAL),
                };
                if req.dest_qpn > MASK_24 || req.rq_psn > MASK_24 {
                    return Err(EINVAL);
                }
                // Unicast: the group bit of the first octet is clear.
                if req.dmac == [0; 6] || req.dmac[0] & 1 != 0 || req.dest_ipv4 == [0; 4] {
                    return Err(EINVAL);
                }
                a.access = 0;
                if req.local_rkey != 0 {
                    // The key of the set's PD, the rkey of all its regions open to remote
                    // writes.
                    if req.local_rkey != pd_key {
                        return Err(EINVAL);
                    }
                    a.access = Access::REMOTE_WRITE.bits();
                }
                // From the port's first IPv4 address (a GID the core derived from its network
                // device) to the peer's.
                let Some((_, sgid)) = d.first_ipv4_gid(a.port) else {
                    kernel::ibdev_info_ratelimited!(
                        dev,
                        "QP set {}: port {} has no IPv4 address to send from\n",
                        index,
                        a.port
                    );
                    return Err(EADDRNOTAVAIL);
                };
                a.dest_qpn = req.dest_qpn;
                a.rq_psn = req.rq_psn;
                a.path = Path {
                    dmac: req.dmac,
                    dgid: Gid::from_ipv4(req.dest_ipv4),
                    udp_sport: if req.udp_sport == 0 {
                        ((index ^ req.dest_qpn) & 0x3fff) as u16
                    } else {
                        req.udp_sport & 0x3fff
                    },
                    remote_rkey: req.remote_rkey,
                    local_rkey: req.local_rkey,
                    src_ip: sgid.to_ipv4().map_or(0, u32::from_be_bytes),
                    ..Default::default()
                };
            }
            IB_QPS_RTS => {
                if req.sq_psn > MASK_24 || req.timeout > 31 || req.retry_cnt > 7 {
                    return Err(EINVAL);
                }
                a.sq_psn = req.sq_psn;
                a.timeout = req.timeout;
                a.retry_cnt = req.retry_cnt;
            }
            IB_QPS_ERR => {}
            _ => return Err(EINVAL),
        }
        Ok(())
    }
}

impl Method for Modify {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QP_SET_MODIFY;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_MODIFY_HANDLE,
            OBJECT_QP_SET,
            uverbs::Access::Write,
            Presence::Mandatory,
        ),
        &AttrDef::const_in(ATTR_MODIFY_PORT, Presence::Mandatory),
        &AttrDef::ptr_in::<uapi::gaudi_ib_qp_set_modify>(ATTR_MODIFY_REQ, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let ctx = call.ucontext()?;
        let dev = ctx.device();
        let d = dev.data();
        let set = call.object::<QpSet>(ATTR_MODIFY_HANDLE)?;
        let port = call.const_in(ATTR_MODIFY_PORT, 1, u64::from(dev.port_count()))? as u32;
        let slot = set.slot(port - 1)?;
        let req: uapi::gaudi_ib_qp_set_modify = call.read(ATTR_MODIFY_REQ)?;
        if req.comp_mask != 0 || req.reserved0 != 0 || req.reserved1 != 0 {
            return Err(EINVAL);
        }
        let mut st = set.states.lock();
        let s = st.get_mut(slot).ok_or(EINVAL)?;
        let mut a = s.attrs;
        a.port = port;
        Modify::apply(dev, d, set.index, &req, &mut a, set.pd_key)?;
        transition(set, d.nic(), slot, s, req.state, &a).inspect_err(|e| {
            kernel::ibdev_dbg!(
                dev,
                "QP set {} port {}: move to state {} refused: {:?}\n",
                set.index,
                port,
                req.state,
                e
            )
        })
    }
}

/// `GAUDI_IB_METHOD_QP_SET_QUERY`.
struct Query;

impl Method for Query {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QP_SET_QUERY;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_QUERY_HANDLE,
            OBJECT_QP_SET,
            uverbs::Access::Read,
            Presence::Mandatory,
        ),
        &AttrDef::const_in(ATTR_QUERY_PORT, Presence::Mandatory),
        &AttrDef::ptr_out::<uapi::gaudi_ib_qp_set_qp_info>(ATTR_QUERY_RESP, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let dev = call.device()?;
        let set = call.object::<QpSet>(ATTR_QUERY_HANDLE)?;
        let port = call.const_in(ATTR_QUERY_PORT, 1, u64::from(dev.port_count()))? as u32;
        let slot = set.slot(port - 1)?;
        let p = set.ports.get(slot).ok_or(EINVAL)?;
        let nic = dev.data().nic();
        let s = *set.states.lock().get(slot).ok_or(EINVAL)?;
        let mut r = [0u64; gaudi2::REQ_QPC_WORDS];
        let mut q = [0u64; gaudi2::RES_QPC_WORDS];
        let mut state = s.state;
        let (mut sq_psn, mut rq_psn) = (s.attrs.sq_psn, s.attrs.rq_psn);
        if s.on_device {
            nic.gateway_read(
                p.port,
                set.index,
                true,
                &[gaudi2::req::ERROR, gaudi2::req::NTS_PSN],
                &mut r,
            )?;
            nic.gateway_read(
                p.port,
                set.index,
                false,
                &[gaudi2::res::EXPECTED_PSN],
                &mut q,
            )?;
            // The NIC stopped the QP: an error of its requester or responder.
            if gaudi2::req::ERROR.get(&r) != 0 {
                state = IB_QPS_ERR;
            }
            rq_psn = gaudi2::res::EXPECTED_PSN.get(&q) as u32;
            if s.state == IB_QPS_RTS {
                sq_psn = gaudi2::req::NTS_PSN.get(&r) as u32;
            }
        }
        call.write(
            ATTR_QUERY_RESP,
            &uapi::gaudi_ib_qp_set_qp_info {
                state,
                sq_psn: sq_psn & MASK_24,
                rq_psn: rq_psn & MASK_24,
                ..Default::default()
            },
        )
    }
}

static CREATE: MethodDef<GaudiIbDriver> = MethodDef::new::<Create>();
static DESTROY_HANDLE: [&AttrDef; 1] = [&AttrDef::idr(
    ATTR_DESTROY_HANDLE,
    OBJECT_QP_SET,
    uverbs::Access::Destroy,
    Presence::Mandatory,
)];
static DESTROY: MethodDef<GaudiIbDriver> =
    MethodDef::destroy(METHOD_QP_SET_DESTROY, &DESTROY_HANDLE);
static MODIFY: MethodDef<GaudiIbDriver> = MethodDef::new::<Modify>();
static QUERY: MethodDef<GaudiIbDriver> = MethodDef::new::<Query>();
pub(crate) static QP_SET_OBJECT: ObjectDef<GaudiIbDriver> =
    ObjectDef::with_handles(OBJECT_QP_SET, &[&CREATE, &DESTROY, &MODIFY, &QUERY]);
