// SPDX-License-Identifier: GPL-2.0

//! The standard verbs' RC queue pairs on the NIC's own contexts (device model 2.0): the
//! requester and responder contexts written through the QPC gateway, each QP's slot of the
//! port's send WQ array in its protection domain's ASID, the kernel's doorbell FIFO, and the
//! completions of CQ 1 and the QP errors of the port's event queue turned into work
//! completions of the QPs' completion queues.
//!
//! See "Queue pairs on the NIC's contexts" in Documentation/infiniband/gaudi/design.rst.

use kernel::net::gaudi::gaudi2::{
    self,
    req,
    res,
    wqe,
    SqWqe, //
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::io_write,
    prelude::*,
    rdma::{
        self,
        cq::{
            Wc,
            WcOpcode,
            WcStatus, //
        },
        qp::QpState,
        QpEvent,
    },
    sync::Arc,
};

use crate::{
    chip::{
        AddressSpace,
        Mapping, //
    },
    ib::GaudiIbDriver,
    mmu::{
        self,
        Place, //
    },
    nic::Nic,
    queue::{
        QpAttrs,
        QpData,
        Sq, //
    },
};

/// Where the ports' send WQ arrays 1 (the RC QPs') are in every ASID: the top 2 GiB of the
/// 48 bits the device MMU translates, above the VAs of the regions; port index p's at
/// [`wq_array_va`]`(p)`, so that the QPs of one number on several ports (a QP set) have
/// slots of their own in one ASID.
pub(crate) const WQ_ARRAY_VA: u64 = (1 << mmu::ASID_VA_BITS) - (2 << 30);
/// A QP's slot in the array: `2^LOG_SLOT_LINES` lines of 128 bytes.
pub(crate) const LOG_SLOT_LINES: u32 = 9;
/// Bytes of a slot.
pub(crate) const SLOT_BYTES: u64 = 128 << LOG_SLOT_LINES;
/// Bytes of a send WQE.
pub(crate) const WQE_BYTES: usize = size_of::<SqWqe>();
/// Entries of the largest send queue (one is always left empty: the producer index the NIC
/// is given runs modulo the entries).
pub(crate) const MAX_WQES: u32 = (SLOT_BYTES / WQE_BYTES as u64) as u32;
/// Entries of the smallest send queue (device-model.rst: "Work-queue arrays").
pub(crate) const MIN_WQES: u32 = 16;
/// Bytes of a port's send WQ array 1: a slot per QP number.
const PORT_ARRAY_BYTES: u64 = gaudi2::TABLE_QPS * SLOT_BYTES;
const _: () =
    assert!(WQ_ARRAY_VA + gaudi2::PORTS as u64 * PORT_ARRAY_BYTES <= 1 << mmu::ASID_VA_BITS);

/// Where port index `port`'s send WQ array 1 is in every ASID.
pub(crate) const fn wq_array_va(port: usize) -> u64 {
    WQ_ARRAY_VA + port as u64 * PORT_ARRAY_BYTES
}

/// Where QP `qpn`'s slot of port index `port`'s send WQ array 1 is in every ASID.
pub(crate) const fn slot_va(port: usize, qpn: u32) -> u64 {
    wq_array_va(port) + qpn as u64 * SLOT_BYTES
}

/// Send WQ entries all RC QPs of a port may hold: CQ 1's, so that it never overflows.
pub(crate) const PORT_WQES: u32 = 1 << gaudi2::CQ_LOG_MAX;

/// Completions of a QP that went to ERR, each with the send queue index its poll frees the
/// entries up to (`None`: a receive's).
pub(crate) type Flushed = KVec<(Wc, Option<u16>)>;

/// The model 2.0 part of a queue pair: its send queue, entered in its ASID at its slot of the
/// send WQ array, and the data of its inline requests.
pub(crate) struct V2 {
    /// The PD's address space, where the send queue is entered from INIT (`Sq::wq_map`).
    pub(crate) space: Arc<AddressSpace>,
    pub(crate) wq: Coherent<[u32]>,
    /// Inline requests' data, one `queue::INLINE_MAX` area per send queue entry, and where it is
    /// in the ASID (dropped before the memory).
    pub(crate) bounce: Option<(Mapping, u64, Coherent<[u32]>)>,
    pub(crate) asid: u32,
    /// The key incoming WRITEs must carry: the PD's.
    pub(crate) pd_key: u32,
    /// The responder's key when the QP takes no WRITE: one nobody was given.
    closed_key: u32,
}

impl V2 {
    /// The send queue of QP `qpn` with `entries` WQEs (and inline areas if `inline`), in the
    /// ASID of `space`.
    pub(crate) fn new(
        dev: &Device<Bound>,
        space: &Arc<AddressSpace>,
        pd_key: u32,
        qpn: u32,
        entries: u32,
        inline: bool,
    ) -> Result<Self> {
        if u64::from(qpn) >= gaudi2::TABLE_QPS || entries > MAX_WQES {
            return Err(EINVAL);
        }
        let bytes = (entries as usize * WQE_BYTES).next_multiple_of(4096);
        let wq = Coherent::<u32>::zeroed_slice(dev, bytes / 4, GFP_KERNEL)?;
        let bounce = if inline {
            let bytes = (entries as usize * crate::queue::INLINE_MAX).next_multiple_of(4096);
            let mem = Coherent::<u32>::zeroed_slice(dev, bytes / 4, GFP_KERNEL)?;
            let base = mem.dma_address();
            let pages = (bytes / 4096) as u64;
            let m = space.map(
                dev,
                Place::Anywhere,
                (0..pages).map(|i| base + i * 4096),
                pages,
                12,
                mmu::Flags::default(),
            )?;
            let va = m.va();
            Some((m, va, mem))
        } else {
            None
        };
        let mut closed_key = 0;
        while closed_key == 0 || closed_key == pd_key {
            closed_key = kernel::random::get_random_u32();
        }
        Ok(Self {
            space: space.clone(),
            wq,
            bounce,
            asid: space.asid(),
            pd_key,
            closed_key,
        })
    }

    /// Enter the send queue, read-only to the NIC, at QP `qpn`'s slot of port index `port`'s
    /// send WQ array 1.
    fn map_wq(&self, dev: &Device<Bound>, port: usize, qpn: u32) -> Result<Mapping> {
        let base = self.wq.dma_address();
        let pages = (self.wq.size() / 4096) as u64;
        self.space.map(
            dev,
            Place::At(slot_va(port, qpn)),
            (0..pages).map(|i| base + i * 4096),
            pages,
            12,
            mmu::Flags::default(),
        )
    }

    /// Write `w` at entry `slot` of the send queue.
    pub(crate) fn write_wqe(&self, slot: usize, w: &[u64; 4]) -> Result {
        let at = slot * WQE_BYTES / 4;
        for (i, v) in w.iter().enumerate() {
            io_write!(&self.wq, [try: at + 2 * i], *v as u32);
            io_write!(&self.wq, [try: at + 2 * i + 1], (*v >> 32) as u32);
        }
        Ok(())
    }
}

/// A send WQE: an RDMA WRITE of `len` bytes from device VA `local` to `remote`, entry `index`
/// of the queue, tagged `tag`, with a completion on the context's CQ if `complete`.
pub(crate) fn write_wqe(
    index: u32,
    len: u32,
    local: u64,
    remote: u64,
    tag: u32,
    complete: bool,
) -> [u64; 4] {
    let mut w = [0u64; 4];
    wqe::OPCODE.set(&mut w, gaudi2::WQE_OPCODE_LINEAR);
    wqe::WQE_INDEX.set(&mut w, u64::from(index & 0xff));
    wqe::SIZE.set(&mut w, len.into());
    wqe::LOCAL_ADDRESS.set(&mut w, local);
    wqe::REMOTE_ADDRESS.set(&mut w, remote);
    wqe::TAG.set(&mut w, tag.into());
    if complete {
        wqe::ACKREQ.set(&mut w, 1);
        wqe::COMPLETION_TYPE.set(&mut w, gaudi2::COMPLETION_CQ);
    }
    w
}

/// `MTU` of a context: log2 of the path MTU's bytes minus 10. `EINVAL` below 1 KiB, which the
/// NIC cannot send.
fn mtu_field(a: &QpAttrs) -> Result<u64> {
    let log = 7 + a.mtu as u32;
    log.checked_sub(10)
        .map(u64::from)
        .filter(|&v| v <= 3)
        .ok_or(EINVAL)
}

/// The destination's IPv4 address as the context holds it (big-endian as a number), and its
/// MAC's two halves.
fn dest(a: &QpAttrs) -> Result<(u64, u64, u64)> {
    let ip = a.path.dgid.to_ipv4().ok_or(EOPNOTSUPP)?;
    let m = a.path.dmac;
    let hi = u64::from(m[0]) << 8 | u64::from(m[1]);
    let lo = u64::from(u32::from_be_bytes([m[2], m[3], m[4], m[5]]));
    Ok((u64::from(u32::from_be_bytes(ip)), hi, lo))
}

/// Whom a QP's contexts act for.
pub(crate) struct Owner {
    pub(crate) asid: u32,
    /// `TRUST_LEVEL`: the kernel's QPs are secured, user space's rung from its FIFOs.
    pub(crate) trust: u64,
    /// The CQ of the QP's completions.
    pub(crate) cq: usize,
    /// The key incoming WRITEs must carry.
    pub(crate) lkey: u32,
    /// The last entry of the send queue.
    pub(crate) last_idx: u32,
}

impl V2 {
    /// The owner of the contexts of a standard verbs QP with `entries` send queue entries
    /// and attributes `a`.
    fn owner(&self, a: &QpAttrs, entries: u32) -> Owner {
        let open = a.access & kernel::rdma::umem::Access::REMOTE_WRITE.bits() != 0;
        Owner {
            asid: self.asid,
            trust: gaudi2::TRUST_SECURED,
            cq: gaudi2::CQ_RC,
            lkey: if open { self.pd_key } else { self.closed_key },
            last_idx: entries - 1,
        }
    }
}

/// The responder context of a QP of `o` with attributes `a`, its source encapsulation `encap`.
pub(crate) fn res_context(
    o: &Owner,
    a: &QpAttrs,
    encap: usize,
) -> Result<[u64; gaudi2::RES_QPC_WORDS]> {
    let (ip, mac_hi, mac_lo) = dest(a)?;
    let mut c = [0u64; gaudi2::RES_QPC_WORDS];
    res::DST_QP.set(&mut c, a.dest_qpn.into());
    res::PEER_QP.set(&mut c, a.dest_qpn.into());
    res::LKEY.set(&mut c, o.lkey.into());
    res::DST_IP.set(&mut c, ip);
    res::DST_MAC_LSB.set(&mut c, mac_lo);
    res::DST_MAC_MSB.set(&mut c, mac_hi);
    res::ASID.set(&mut c, o.asid.into());
    res::EXPECTED_PSN.set(&mut c, a.rq_psn.into());
    res::TRUST_LEVEL.set(&mut c, o.trust);
    res::ENCAP_TYPE.set(&mut c, encap as u64);
    res::ENCAP_ENABLE.set(&mut c, 1);
    res::CQ_NUM.set(&mut c, o.cq as u64);
    res::VALID.set(&mut c, 1);
    Ok(c)
}

/// The requester context of a QP of `o` with attributes `a` and remote key `rkey`.
pub(crate) fn req_context(
    o: &Owner,
    a: &QpAttrs,
    encap: usize,
    rkey: u32,
) -> Result<[u64; gaudi2::REQ_QPC_WORDS]> {
    let (ip, mac_hi, mac_lo) = dest(a)?;
    let mut c = [0u64; gaudi2::REQ_QPC_WORDS];
    req::DST_QP.set(&mut c, a.dest_qpn.into());
    req::RKEY.set(&mut c, rkey.into());
    req::DST_IP.set(&mut c, ip);
    req::DST_MAC_LSB.set(&mut c, mac_lo);
    req::DST_MAC_MSB.set(&mut c, mac_hi);
    for f in [req::NTS_PSN, req::BCS_PSN, req::ONA_PSN, req::BCC_PSN] {
        f.set(&mut c, a.sq_psn.into());
    }
    // The IBA timeout is 4.096 us x 2^t, the NIC's 2^(g + 2) us: g = t (0, no timeout: the
    // longest the field holds).
    let g = if a.timeout == 0 { 0x7f } else { a.timeout };
    req::TM_GRANULARITY.set(&mut c, g.into());
    req::ENCAP_TYPE.set(&mut c, encap as u64);
    req::ENCAP_ENABLE.set(&mut c, 1);
    req::CQ_NUM.set(&mut c, o.cq as u64);
    req::CONGESTION_WIN.set(&mut c, 0xff_ffff);
    req::BURST_SIZE.set(&mut c, 1);
    req::ASID.set(&mut c, o.asid.into());
    req::LAST_IDX.set(&mut c, o.last_idx.into());
    req::ACKREQ_FREQ.set(&mut c, 16);
    req::WQ_TYPE.set(&mut c, gaudi2::WQ_TYPE_WRITE);
    req::WQ_BASE_ADDR.set(&mut c, 1);
    req::TRUST_LEVEL.set(&mut c, o.trust);
    req::MTU.set(&mut c, mtu_field(a)?);
    req::VALID.set(&mut c, 1);
    Ok(c)
}

/// Stop QP `qpn`'s contexts on `port`: the requester's window closed, the responder invalid
/// (gaudi2_cn.c `gaudi2_cn_qpc_invalidate`'s first step).
pub(crate) fn stop(nic: &Nic, port: usize, qpn: u32) -> Result {
    let mut c = [0u64; gaudi2::REQ_QPC_WORDS];
    let mut m = [0u64; gaudi2::REQ_QPC_WORDS];
    req::CONGESTION_MODE.set(&mut c, 2);
    req::CONGESTION_MODE.select(&mut m);
    req::CONGESTION_WIN.select(&mut m);
    nic.gateway_write(port, qpn, true, &c, &m)?;
    let c = [0u64; gaudi2::RES_QPC_WORDS];
    let mut m = [0u64; gaudi2::RES_QPC_WORDS];
    res::VALID.select(&mut m);
    nic.gateway_write(port, qpn, false, &c, &m)
}

/// Take QP `qpn` off `port`: stop it, wait until neither context is in work, then write
/// zeros over both. Sleeps.
pub(crate) fn teardown(nic: &Nic, port: usize, qpn: u32) -> Result {
    stop(nic, port, qpn)?;
    // The NIC finishes what is in work; hbl_cn polls 20 times 20 ms.
    for _ in 0..20 {
        let mut r = [0u64; gaudi2::REQ_QPC_WORDS];
        let mut s = [0u64; gaudi2::RES_QPC_WORDS];
        nic.gateway_read(port, qpn, true, &[req::IN_WORK], &mut r)?;
        nic.gateway_read(port, qpn, false, &[res::IN_WORK], &mut s)?;
        if req::IN_WORK.get(&r) == 0 && res::IN_WORK.get(&s) == 0 {
            break;
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(20));
    }
    nic.gateway_write(
        port,
        qpn,
        true,
        &[0; gaudi2::REQ_QPC_WORDS],
        &[u64::MAX; gaudi2::REQ_QPC_WORDS],
    )?;
    nic.gateway_write(
        port,
        qpn,
        false,
        &[0; gaudi2::RES_QPC_WORDS],
        &[u64::MAX; gaudi2::RES_QPC_WORDS],
    )
}

impl QpData {
    /// [`QpData::transition`] on the NIC's contexts. `src_ip` is the QP's source IPv4 address.
    pub(crate) fn transition_v2(
        &self,
        dev: &Device<Bound>,
        cur: QpState,
        next: QpState,
        a: &QpAttrs,
    ) -> Result {
        let v = self.v2();
        let nic = self.nic();
        match next {
            QpState::Reset => {
                let (on_device, port, reserved, encap) = {
                    let sq = self.sq_lock();
                    (sq.on_device, sq.port, sq.reserved, sq.encap)
                };
                if on_device {
                    match teardown(nic, port as usize, self.qpn()) {
                        Ok(()) | Err(ENODEV) => {}
                        Err(e) => return Err(e),
                    }
                }
                nic.rc_release(port as usize, reserved);
                if let Some(e) = encap {
                    nic.encap_put(port as usize, e);
                }
                // The queue leaves the ASID (sleeps) after the lock.
                let _wq_map = {
                    let mut sq = self.sq_lock();
                    let m = sq.wq_map.take();
                    // Taken off the NIC (or the device is gone): nothing of it executes.
                    sq.reset(&v.space);
                    m
                };
                return Ok(());
            }
            QpState::Err => {
                let (on_device, port) = {
                    let mut sq = self.sq_lock();
                    sq.state = QpState::Err;
                    sq.owner_err = true;
                    (sq.on_device, sq.port)
                };
                if on_device {
                    match stop(nic, port as usize, self.qpn()) {
                        Ok(()) | Err(ENODEV) => {}
                        Err(e) => return Err(e),
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        let port = a.port.checked_sub(1).ok_or(EINVAL)?;
        if port >= nic.ports {
            return Err(EINVAL);
        }
        match (cur, next) {
            (QpState::Reset, QpState::Init) => {
                // The QP's WQEs are counted against CQ 1 at set-up, so that CQ 1 never
                // overflows: refused here rather than lost later.
                let n = self.sq_entries();
                let map = v.map_wq(dev, port as usize, self.qpn())?;
                if !nic.rc_reserve(port as usize, n) {
                    kernel::ratelimited!(dev_info!(
                        nic.dev,
                        "QP {}: port {}'s send queues are full ({} WQEs)\n",
                        self.qpn(),
                        port + 1,
                        PORT_WQES
                    ));
                    return Err(ENOMEM);
                }
                let mut sq = self.sq_lock();
                sq.port = port;
                sq.reserved = n;
                sq.state = QpState::Init;
                sq.wq_map = Some(map);
                Ok(())
            }
            (QpState::Init, QpState::Rtr) => {
                let src = a.path.src_ip;
                let encap = nic.encap_get(port as usize, src)?;
                let c = match res_context(&v.owner(a, self.sq_entries()), a, encap) {
                    Ok(c) => c,
                    Err(e) => {
                        nic.encap_put(port as usize, encap);
                        return Err(e);
                    }
                };
                if let Err(e) = nic.gateway_write(
                    port as usize,
                    self.qpn(),
                    false,
                    &c,
                    &[u64::MAX; gaudi2::RES_QPC_WORDS],
                ) {
                    nic.encap_put(port as usize, encap);
                    return Err(e);
                }
                let mut sq = self.sq_lock();
                sq.encap = Some(encap);
                sq.on_device = true;
                sq.state = QpState::Rtr;
                sq.remote_write = a.access & kernel::rdma::umem::Access::REMOTE_WRITE.bits() != 0;
                Ok(())
            }
            (QpState::Rtr, QpState::Rts) => {
                let (encap, rkey) = {
                    let sq = self.sq_lock();
                    (sq.encap.ok_or(EINVAL)?, a.path.remote_rkey)
                };
                let c = req_context(&v.owner(a, self.sq_entries()), a, encap, rkey)?;
                nic.gateway_write(
                    port as usize,
                    self.qpn(),
                    true,
                    &c,
                    &[u64::MAX; gaudi2::REQ_QPC_WORDS],
                )?;
                let mut sq = self.sq_lock();
                sq.state = QpState::Rts;
                sq.remote_rkey = rkey;
                sq.remote_explicit = a.path.remote_explicit;
                Ok(())
            }
            // Attributes that can change in these states are the software's.
            (QpState::Init, QpState::Init)
            | (QpState::Rtr, QpState::Rtr)
            | (QpState::Rts, QpState::Rts) => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Give the requester context the remote key `rkey` (the first RDMA WRITE after RTS names
    /// it; a QP keeps its key). Sleeps.
    pub(crate) fn bind_remote_v2(&self, rkey: u32) -> Result {
        let _attrs = self.attrs();
        let port = {
            let sq = self.sq_lock();
            if sq.remote_rkey != 0 || sq.state != QpState::Rts || !sq.on_device {
                return Ok(());
            }
            sq.port
        };
        let nic = self.nic();
        let mut c = [0u64; gaudi2::REQ_QPC_WORDS];
        let mut m = [0u64; gaudi2::REQ_QPC_WORDS];
        req::RKEY.set(&mut c, rkey.into());
        req::RKEY.select(&mut m);
        nic.gateway_write(port as usize, self.qpn(), true, &c, &m)?;
        self.sq_lock().remote_rkey = rkey;
        Ok(())
    }

    /// The PSNs the NIC is at: (next to send, next expected). Sleeps.
    pub(crate) fn psns_v2(&self, port: u32) -> Result<(u32, u32)> {
        let mut r = [0u64; gaudi2::REQ_QPC_WORDS];
        let mut s = [0u64; gaudi2::RES_QPC_WORDS];
        let nic = self.nic();
        nic.gateway_read(port as usize - 1, self.qpn(), true, &[req::NTS_PSN], &mut r)?;
        nic.gateway_read(
            port as usize - 1,
            self.qpn(),
            false,
            &[res::EXPECTED_PSN],
            &mut s,
        )?;
        Ok((
            req::NTS_PSN.get(&r) as u32,
            res::EXPECTED_PSN.get(&s) as u32,
        ))
    }

    /// CQ 1 of port index `port` reported the WQE tagged `tag` of this QP done: complete it
    /// (and the unsignalled ones before it, silently). `Ok(None)` for a WQE of a QP that
    /// went to ERR or RESET since (its requests were flushed); `EPROTO` for one the QP does
    /// not have outstanding (the device's error).
    pub(crate) fn completed_v2(&self, port: u32, tag: u32) -> Result<Option<(Wc, u16)>> {
        let mut sq = self.sq_lock();
        if matches!(sq.state, QpState::Err | QpState::Reset) {
            return Ok(None);
        }
        let outstanding = sq.pi.wrapping_sub(sq.retired);
        let index = tag as u16;
        if sq.port != port
            || tag > u32::from(u16::MAX)
            || index.wrapping_sub(sq.retired) >= outstanding
        {
            return Err(EPROTO);
        }
        let slot = sq.slot(index);
        sq.retire_to(&self.v2().space, index.wrapping_add(1));
        let wc = Wc {
            wr_id: sq.wr_ids[slot],
            status: WcStatus::Success,
            opcode: WcOpcode::RdmaWrite,
            vendor_err: 0,
            byte_len: sq.lens[slot],
            imm: None,
            port: port + 1,
        };
        Ok(Some((wc, sq.retired)))
    }

    /// The NIC put the QP in error on port index `port` with `syndrome`: the QP is in ERR and
    /// every request outstanding completes, the oldest with the status the syndrome names
    /// when the requester failed, the rest flushed; then the receives. Returns those
    /// completions (each with the send queue index its poll frees the entries up to) and the
    /// asynchronous event to report,
    /// `None` if the error is not news (the owner moved the QP to ERR: everything is
    /// flushed). Nothing is returned for a QP in RESET or one whose error was handled.
    pub(crate) fn error_v2(&self, port: u32, syndrome: u32) -> Result<(Flushed, Option<QpEvent>)> {
        let recvs = self.sq_lock().recvs.len();
        let mut out = KVec::with_capacity(self.sq_entries() as usize + recvs, GFP_KERNEL)?;
        let mut sq = self.sq_lock();
        if sq.port != port || sq.state == QpState::Reset || sq.err_reported {
            return Ok((out, None));
        }
        let owner = sq.owner_err;
        sq.state = QpState::Err;
        sq.err_reported = true;
        let (first, event) = syndrome_status(syndrome);
        let mut status = if owner { WcStatus::WrFlushErr } else { first };
        while sq.retired != sq.pi {
            let slot = sq.slot(sq.retired);
            // The QP is stopped in error: the device executes none of its WQEs.
            let next = sq.retired.wrapping_add(1);
            sq.retire_to(&self.v2().space, next);
            let last = sq.retired == sq.pi || !sq.cont[sq.slot(sq.retired)];
            if !last {
                continue;
            }
            let wc = Wc {
                wr_id: sq.wr_ids[slot],
                status,
                opcode: WcOpcode::RdmaWrite,
                vendor_err: if status == WcStatus::WrFlushErr {
                    0
                } else {
                    syndrome
                },
                byte_len: 0,
                imm: None,
                port: port + 1,
            };
            if out.push_within_capacity((wc, Some(sq.retired))).is_err() {
                break;
            }
            status = WcStatus::WrFlushErr;
        }
        while sq.recv_count != 0 {
            let id = sq.recvs[sq.recv_head];
            sq.recv_head = (sq.recv_head + 1) % sq.recvs.len();
            sq.recv_count -= 1;
            let wc = Wc {
                wr_id: id,
                status: WcStatus::WrFlushErr,
                opcode: WcOpcode::RecvRdmaWithImm,
                vendor_err: 0,
                byte_len: 0,
                imm: None,
                port: port + 1,
            };
            if out.push_within_capacity((wc, None)).is_err() {
                break;
            }
        }
        Ok((out, (!owner).then_some(event)))
    }
}

/// Complete `wcs` of QP `qp` on its CQs.
fn deliver_all(
    ib: &rdma::Device<GaudiIbDriver>,
    qp: &rdma::Qp<GaudiIbDriver>,
    wcs: &[(Wc, Option<u16>)],
) {
    let d = qp.data();
    for &(wc, frees) in wcs {
        // Receives (nothing to free) complete on the receive CQ.
        let cq = if frees.is_none() {
            d.recv_cq()
        } else {
            d.send_cq()
        };
        cq.deliver(ib, qp.qp_num(), wc, frees);
    }
}

/// The owner moved `qp` to ERR: flush what it has outstanding.
pub(crate) fn flush(ib: &rdma::Device<GaudiIbDriver>, qp: &rdma::Qp<GaudiIbDriver>) {
    let d = qp.data();
    let port = d.sq_lock().port;
    if let Ok((wcs, _)) = d.error_v2(port, 0) {
        deliver_all(ib, qp, &wcs);
    }
}

/// What a QP_ERR syndrome means to the owner: the status of the request that failed (the
/// oldest outstanding; `WR_FLUSH_ERR` when the requester did not fail) and the asynchronous
/// event (device-model.rst: "QP error syndromes").
pub(crate) fn syndrome_status(syndrome: u32) -> (WcStatus, QpEvent) {
    match syndrome {
        // The responder: a WRITE with another key, or to an address the ASID does not map.
        0x10 | 0x7b => (WcStatus::WrFlushErr, QpEvent::AccessErr),
        0x40 => (WcStatus::RetryExcErr, QpEvent::Fatal),
        0x7f => (WcStatus::RemAccessErr, QpEvent::Fatal),
        0x7d => (WcStatus::RemInvReqErr, QpEvent::Fatal),
        0x7c => (WcStatus::RemOpErr, QpEvent::Fatal),
        0x7e => (WcStatus::LocProtErr, QpEvent::Fatal),
        // Doorbell, context and WQE checks: the driver's own requests.
        _ => (WcStatus::LocQpOpErr, QpEvent::Fatal),
    }
}

/// CQ 1 of port index `port` has new entries: complete the requests they name.
pub(crate) fn port_completions(ib: &rdma::Device<GaudiIbDriver>, nic: &Nic, port: usize) {
    let mut batch = [gaudi2::Cqe::default(); 32];
    loop {
        let n = {
            match nic.rc_take(port, &mut batch) {
                Ok(n) => n,
                Err(ENODEV) => return,
                Err(e) => {
                    kernel::ratelimited!(dev_err!(
                        nic.dev,
                        "port {}: CQ 1 read failed: {:?}\n",
                        port + 1,
                        e
                    ));
                    return;
                }
            }
        };
        for c in &batch[..n] {
            let qpn = gaudi2::cqe::QPN.get(&c.0) as u32;
            let tag = gaudi2::cqe::TAG.get(&c.0) as u32;
            let done = if gaudi2::cqe::IS_REQ.get(&c.0) == 0 {
                Err(EPROTO)
            } else {
                ib.with_qp(qpn, |qp| {
                    let d = qp.data();
                    d.completed_v2(port as u32, tag)
                        .map(|wc| wc.map(|(wc, to)| d.send_cq().deliver(ib, qpn, wc, Some(to))))
                })
                // A QP destroyed since: its requests went with it.
                .unwrap_or(Ok(None))
            };
            if done.is_err() {
                kernel::ratelimited!(dev_warn!(
                    nic.dev,
                    "port {}: CQE of QP {} (tag {:#x}, requester {}) names no outstanding request: dropped\n",
                    port + 1,
                    qpn,
                    tag,
                    gaudi2::cqe::IS_REQ.get(&c.0)
                ));
            }
        }
        if n < batch.len() {
            return;
        }
        kernel::task::cond_resched();
    }
}

/// Port index `port`'s event queue reported QP `qpn` in error with `syndrome`. Returns
/// whether the QP is one of the standard verbs'.
pub(crate) fn qp_error(
    ib: &rdma::Device<GaudiIbDriver>,
    port: usize,
    qpn: u32,
    syndrome: u32,
) -> bool {
    ib.with_qp(qpn, |qp| match qp.data().error_v2(port as u32, syndrome) {
        Ok((wcs, event)) => {
            // The requests are flushed here: the NIC must execute none of them after. The
            // requester of a QP whose responder failed is still running, and a device that
            // reports an error need not have stopped the QP: stop it, as the owner's ERR does.
            if event.is_some() {
                let stopped = stop(qp.data().nic(), port, qpn);
                if let Err(e) = stopped.or_else(|e| if e == ENODEV { Ok(()) } else { Err(e) }) {
                    kernel::ratelimited!(dev_warn!(
                        qp.data().nic().dev,
                        "QP {}: not stopped after its error: {:?}\n",
                        qpn,
                        e
                    ));
                }
            }
            deliver_all(ib, qp, &wcs);
            if let Some(e) = event {
                qp.dispatch_event(e);
            }
        }
        Err(e) => kernel::ratelimited!(dev_warn!(
            qp.data().nic().dev,
            "QP {}: error not handled: {:?}\n",
            qpn,
            e
        )),
    })
    .is_some()
}

/// After an overrun of `port`'s event queue lost QP errors: each RC QP of the port whose
/// requester context says ERROR is handled as its `QP_ERR` event would have been, with the
/// syndrome unknown (0: a local QP operation error). A QP whose error was handled already is
/// left alone. Sleeps.
pub(crate) fn recheck_errors(ib: &rdma::Device<GaudiIbDriver>, nic: &Nic, port: usize) {
    let Ok(qpns) = ib.data().ids.qp_indexes_on(port) else {
        return;
    };
    for qpn in qpns {
        let mut r = [0u64; gaudi2::REQ_QPC_WORDS];
        if nic
            .gateway_read(port, qpn, true, &[req::ERROR], &mut r)
            .is_ok()
            && req::ERROR.get(&r) != 0
        {
            qp_error(ib, port, qpn, 0);
        }
    }
}

/// Ring the doorbell of `sq` (QP `qpn`, on the kernel's FIFO of its port).
pub(crate) fn ring(nic: &Nic, sq: &Sq, qpn: u32) -> Result {
    let pi = u32::from(sq.pi) & (sq.wr_ids.len() as u32 - 1);
    nic.ring_secured(sq.port as usize, qpn, pi)
}
