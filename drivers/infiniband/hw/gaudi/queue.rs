// SPDX-License-Identifier: GPL-2.0

//! Completion queues and queue pairs of the standard verbs: the software CQs the driver
//! completes into, the QPs' state and send queues (on the NIC's contexts, `crate::rc`), the
//! send path with its software lkey check, and polling.
//!
//! See "Completion queues and queue pairs" in Documentation/infiniband/gaudi/design.rst.

use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    device::{
        Bound,
        Device, //
    },
    io::{
        io_project,
        Io, //
    },
    prelude::*,
    rdma::{
        cq::{
            Wc,
            WcOpcode,
            WcSink,
            WcStatus, //
        },
        qp::QpState,
        wr::{
            Opcode,
            RecvWrs,
            SendWrs, //
        },
        Gid, Mtu,
    },
    sync::{
        new_mutex,
        new_spinlock_irq,
        Arc,
        Mutex,
        SpinLockIrq, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    chip::AddressSpace,
    ids::PdId,
    nic::Nic, //
    rc,
};

/// The bytes of one inline request, as the driver copies them for the device to read: a WQE
/// of such a request names them as its source.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, zerocopy_derive::Immutable)]
pub(crate) struct InlineData {
    pub(crate) bytes: [u8; INLINE_MAX],
}

/// The largest inline request.
pub(crate) const INLINE_MAX: usize = 256;

/// SGEs a request of the standard verbs may have: each takes a WQE of its own.
pub(crate) const MAX_SEND_SGE: u32 = 4;

/// Completions the driver made (taken from a port's CQ 1 or flushed), waiting to be polled:
/// the QPN, the completion, and the send queue index its poll frees the entries up to (`None`
/// for a receive's).
struct SwCq {
    entries: KVec<(u32, Wc, Option<u16>)>,
    head: usize,
    count: usize,
    /// A completion event is due with the next completion.
    armed: bool,
    /// A completion found the CQ full: the CQ is in error, reported once, and takes no more.
    overflowed: bool,
}

/// A completion queue: the driver's data of one (in an [`Arc`], which its queue pairs share).
#[pin_data]
pub(crate) struct Cq {
    nic: Arc<Nic>,
    /// CQ number in [`rdma::Device::with_cq`].
    id: u32,
    #[pin]
    sw: SpinLockIrq<SwCq>,
}

impl Cq {
    pub(crate) fn new(nic: Arc<Nic>, id: u32, log_size: u32) -> Result<impl PinInit<Self, Error>> {
        // Sized by user space: charged to its memory cgroup.
        let n = 1usize << log_size;
        let mut entries = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        let none = Wc {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::RdmaWrite,
            vendor_err: 0,
            byte_len: 0,
            imm: None,
            port: 0,
        };
        entries.resize(n, (0, none, None), GFP_KERNEL_ACCOUNT)?;
        Ok(try_pin_init!(Self {
            nic,
            id,
            sw <- new_spinlock_irq!(SwCq {
                entries,
                head: 0,
                count: 0,
                armed: false,
                overflowed: false,
            }),
        }))
    }

    /// Queue `wc` of QP `qpn` for poll, which frees the QP's send queue entries up to index
    /// `frees`, and raise the completion event if the CQ is armed. A completion that finds the
    /// CQ full puts it in error, as a device CQ stops at an overflow: the owner gets one CQ
    /// error and the log one line, and the CQ takes no completion after (its QPs are
    /// destroyed with it, as the verbs' recovery goes). Sleeps.
    pub(crate) fn deliver(
        &self,
        ib: &kernel::rdma::Device<crate::ib::GaudiIbDriver>,
        qpn: u32,
        wc: Wc,
        frees: Option<u16>,
    ) {
        let (notify, overflow) = {
            let mut s = self.sw.lock();
            let n = s.entries.len();
            if s.overflowed {
                (false, false)
            } else if s.count == n {
                s.overflowed = true;
                (false, true)
            } else {
                let tail = (s.head + s.count) % n;
                s.entries[tail] = (qpn, wc, frees);
                s.count += 1;
                (core::mem::replace(&mut s.armed, false), false)
            }
        };
        if overflow {
            kernel::ratelimited!(dev_warn!(
                self.nic.dev,
                "CQ {} (port {}) overflowed: completions lost, from QP {} on\n",
                self.id,
                wc.port,
                qpn
            ));
            ib.with_cq(self.id, |c| c.dispatch_error());
        } else if notify {
            ib.with_cq(self.id, |c| c.notify_completion());
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }
}

/// Where the peer of a queue pair is (from the address vector: GIDs, the resolved MAC and the
/// global route's fields), and its keys (`struct gaudi_ib_modify_qp`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Path {
    pub(crate) dmac: [u8; 6],
    /// The destination GID; zero until RTR.
    pub(crate) dgid: Gid,
    /// IPv6 flow label (20 bits): the UDP source port derives from it.
    pub(crate) flow_label: u32,
    /// UDP source port (its low 14 bits).
    pub(crate) udp_sport: u16,
    pub(crate) remote_rkey: u32,
    /// `remote_rkey` was given explicitly (`struct gaudi_ib_modify_qp`): the QP keeps it,
    /// rather than binding the rkey its requests name ([`QpData::bind_remote`]).
    pub(crate) remote_explicit: bool,
    /// The key incoming WRITEs must carry: the PD's, or 0 (none taken).
    pub(crate) local_rkey: u32,
    /// The source GID's IPv4 address, big-endian as a number (0 for IPv6).
    pub(crate) src_ip: u32,
}

impl Path {
    /// This path with the keys of `old`.
    pub(crate) fn with_keys(self, old: &Path) -> Path {
        Path {
            remote_rkey: old.remote_rkey,
            remote_explicit: old.remote_explicit,
            local_rkey: old.local_rkey,
            ..self
        }
    }
}

/// Attributes of a queue pair, as last written to the device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpAttrs {
    pub(crate) port: u32,
    pub(crate) mtu: Mtu,
    pub(crate) access: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    /// The RNR NAK timer the QP's responder asks for (IBA encoding, 5 bits).
    pub(crate) min_rnr_timer: u8,
    pub(crate) path: Path,
}

impl Default for QpAttrs {
    fn default() -> Self {
        Self {
            port: 0,
            mtu: Mtu::Mtu1024,
            access: 0,
            dest_qpn: 0,
            rq_psn: 0,
            sq_psn: 0,
            // 4.096 us * 2^14: about 67 ms, as rdma-core's examples use.
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            // 0.64 ms: a consumer that polls catches up well within it.
            min_rnr_timer: 12,
            path: Path::default(),
        }
    }
}

/// The send queue: what posting and polling share.
pub(crate) struct Sq {
    pub(crate) state: QpState,
    /// The owner moved the QP to ERR (since its last RESET): the device's QP_ERROR event that
    /// follows is not an asynchronous error.
    pub(crate) owner_err: bool,
    /// The device's error of the QP was reported as an asynchronous event (since the last
    /// RESET).
    pub(crate) err_reported: bool,
    /// The device has the QP (it was written in INIT and not destroyed since).
    pub(crate) on_device: bool,
    /// Port index (from 0) once the QP is in INIT.
    pub(crate) port: u32,
    pub(crate) remote_rkey: u32,
    /// `remote_rkey` was given explicitly: requests naming another fail.
    pub(crate) remote_explicit: bool,
    /// The QP's access rights include `IB_ACCESS_REMOTE_WRITE`: it takes receives.
    pub(crate) remote_write: bool,
    /// The receives posted, oldest first from `recv_head` (a ring of `recvs.len()` entries,
    /// `recv_count` of them taken). Nothing consumes them (the NIC has no receive queue and
    /// no WRITE with immediate); an error flushes them.
    pub(crate) recvs: KVec<u64>,
    pub(crate) recv_head: usize,
    pub(crate) recv_count: usize,
    /// Producer index (next WQE to write), consumer index (oldest WQE not completed).
    pub(crate) pi: u16,
    pub(crate) ci: u16,
    pub(crate) wr_ids: KVec<u64>,
    /// By slot: the length of the request (all its SGEs), which its completion reports.
    pub(crate) lens: KVec<u32>,
    /// By slot: the WQE continues the request of the slot before it (a request of several
    /// SGEs takes one WQE per SGE, see [`post_send`]).
    pub(crate) cont: KVec<bool>,
    /// Send WQ entries counted against the port's CQ 1 (see `rc::PORT_WQES`), and the
    /// source address's encapsulation.
    pub(crate) reserved: u32,
    pub(crate) encap: Option<usize>,
    /// The send queue at the QP's slot of its port's send WQ array in its ASID, from INIT
    /// (taken out, and dropped outside the lock, at RESET).
    pub(crate) wq_map: Option<crate::chip::Mapping>,
    /// WQEs before this index are done (completed by the NIC or flushed);
    /// their entries are free once their completions are polled (`ci`).
    pub(crate) retired: u16,
    /// By slot: the address-space epoch the WQE was posted in (`AddressSpace::post_work`).
    pub(crate) epochs: KVec<bool>,
}

impl Sq {
    /// The slot of WQE index `index`.
    pub(crate) fn slot(&self, index: u16) -> usize {
        usize::from(index) & (self.wr_ids.len() - 1)
    }

    /// The WQEs before index `to` retired: the device executes no more of them.
    pub(crate) fn retire_to(&mut self, space: &AddressSpace, to: u16) {
        let n = to.wrapping_sub(self.retired);
        if n > self.pi.wrapping_sub(self.retired) {
            return;
        }
        for _ in 0..n {
            space.retire_work(self.epochs[self.slot(self.retired)]);
            self.retired = self.retired.wrapping_add(1);
        }
    }

    /// Back to RESET: the device forgot the queue, which starts over at index 0.
    pub(crate) fn reset(&mut self, space: &AddressSpace) {
        let pi = self.pi;
        self.retire_to(space, pi);
        self.state = QpState::Reset;
        self.owner_err = false;
        self.err_reported = false;
        self.on_device = false;
        self.pi = 0;
        self.ci = 0;
        self.remote_rkey = 0;
        self.remote_explicit = false;
        self.remote_write = false;
        // Receives left are discarded (they were never flushed, see `post_recv`).
        self.recv_head = 0;
        self.recv_count = 0;
        self.reserved = 0;
        self.encap = None;
        self.retired = 0;
    }
}

/// The driver's data of a queue pair of the standard verbs.
#[pin_data]
pub(crate) struct QpData {
    nic: Arc<Nic>,
    qpn: u32,
    /// [`crate::ib::Pd`] id, for the check of the SGEs.
    pd: PdId,
    log_sq: u32,
    /// SGEs a request may have (at most [`MAX_SEND_SGE`]).
    max_sge: u32,
    /// WQEs the send queue may hold outstanding.
    limit: u32,
    /// SGEs a receive may have (at most [`MAX_SEND_SGE`]).
    max_recv_sge: u32,
    signal_all: bool,
    /// The CQ of the QP's send completions, and of its receives' without `rcq`.
    cq: Arc<Cq>,
    /// The CQ of the QP's receive completions (their flushes), when it is another.
    rcq: Option<Arc<Cq>>,
    /// The send queue on the NIC's own context (`crate::rc`).
    v2: rc::V2,
    /// Attributes; also serialises modifications.
    #[pin]
    attrs: Mutex<QpAttrs>,
    #[pin]
    sq: SpinLockIrq<Sq>,
}

/// What [`QpData::new`] needs.
pub(crate) struct QpParams {
    pub(crate) qpn: u32,
    pub(crate) pd: PdId,
    pub(crate) log_sq: u32,
    pub(crate) max_sge: u32,
    /// Receives the QP holds, and SGEs each may have.
    pub(crate) max_recv_wr: u32,
    pub(crate) max_recv_sge: u32,
    /// Inline requests may be posted (a QP of user space: their data is copied from the
    /// poster's memory).
    pub(crate) inline: bool,
    pub(crate) signal_all: bool,
    pub(crate) cq: Arc<Cq>,
    /// The receive CQ, when it is not `cq`.
    pub(crate) rcq: Option<Arc<Cq>>,
    /// The PD's address space and key.
    pub(crate) space: Arc<AddressSpace>,
    pub(crate) key: u32,
    /// WQEs the send queue may hold (at most `1 << log_sq`).
    pub(crate) limit: u32,
}

impl QpData {
    pub(crate) fn new(
        nic: &Arc<Nic>,
        dev: &Device<Bound>,
        p: QpParams,
    ) -> Result<impl PinInit<Self, Error>> {
        let size = 1usize << p.log_sq;
        let v2 = rc::V2::new(dev, &p.space, p.key, p.qpn, size as u32, p.inline)?;
        let mut wr_ids = KVec::with_capacity(size, GFP_KERNEL)?;
        wr_ids.resize(size, 0, GFP_KERNEL)?;
        let mut lens = KVec::with_capacity(size, GFP_KERNEL)?;
        lens.resize(size, 0, GFP_KERNEL)?;
        let mut cont = KVec::with_capacity(size, GFP_KERNEL)?;
        cont.resize(size, false, GFP_KERNEL)?;
        let mut epochs = KVec::with_capacity(size, GFP_KERNEL)?;
        epochs.resize(size, false, GFP_KERNEL)?;
        // Sized by user space: charged to the poster's memory cgroup.
        let rq = p.max_recv_wr as usize;
        let mut recvs = KVec::with_capacity(rq, GFP_KERNEL_ACCOUNT)?;
        recvs.resize(rq, 0, GFP_KERNEL_ACCOUNT)?;
        let nic = nic.clone();
        Ok(try_pin_init!(Self {
            nic,
            qpn: p.qpn,
            pd: p.pd,
            log_sq: p.log_sq,
            max_sge: p.max_sge,
            limit: p.limit.min(1 << p.log_sq),
            max_recv_sge: p.max_recv_sge,
            signal_all: p.signal_all,
            cq: p.cq,
            rcq: p.rcq,
            v2,
            attrs <- new_mutex!(QpAttrs::default()),
            sq <- new_spinlock_irq!(Sq {
                state: QpState::Reset,
                on_device: false,
                port: 0,
                owner_err: false,
                err_reported: false,
                remote_rkey: 0,
                remote_explicit: false,
                remote_write: false,
                recvs,
                recv_head: 0,
                recv_count: 0,
                pi: 0,
                ci: 0,
                wr_ids,
                lens,
                cont,
                reserved: 0,
                encap: None,
                wq_map: None,
                retired: 0,
                epochs,
            }),
        }))
    }

    pub(crate) fn v2(&self) -> &rc::V2 {
        &self.v2
    }

    pub(crate) fn nic(&self) -> &Nic {
        &self.nic
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    pub(crate) fn sq_lock(&self) -> kernel::sync::SpinLockIrqGuard<'_, Sq> {
        self.sq.lock()
    }

    /// Entries of the send queue.
    pub(crate) fn sq_entries(&self) -> u32 {
        1 << self.log_sq
    }

    pub(crate) fn send_cq(&self) -> &Cq {
        &self.cq
    }

    pub(crate) fn recv_cq(&self) -> &Cq {
        self.rcq.as_ref().unwrap_or(&self.cq)
    }

    pub(crate) fn state(&self) -> QpState {
        self.sq.lock().state
    }

    /// The requests the send queue holds whatever their SGEs.
    pub(crate) fn max_send_wr(&self) -> u32 {
        self.limit / self.max_sge
    }

    pub(crate) fn max_send_sge(&self) -> u32 {
        self.max_sge
    }

    /// The receives the QP holds.
    pub(crate) fn max_recv_wr(&self) -> u32 {
        self.sq.lock().recvs.len() as u32
    }

    pub(crate) fn max_recv_sge(&self) -> u32 {
        self.max_recv_sge
    }

    /// The largest inline request (0: none).
    pub(crate) fn max_inline_data(&self) -> u32 {
        if self.v2.bounce.is_some() {
            INLINE_MAX as u32
        } else {
            0
        }
    }

    pub(crate) fn signal_all(&self) -> bool {
        self.signal_all
    }

    pub(crate) fn attrs(&self) -> kernel::sync::MutexGuard<'_, QpAttrs> {
        self.attrs.lock()
    }

    /// Move the QP to `next` with attributes `a` on the NIC (the caller holds `attrs` and
    /// checked the transition).
    pub(crate) fn transition(
        &self,
        dev: &Device<Bound>,
        cur: QpState,
        next: QpState,
        a: &QpAttrs,
    ) -> Result {
        self.transition_v2(dev, cur, next, a)
    }

    /// The PSNs the NIC is at: (next to send, next expected).
    pub(crate) fn psns(&self, port: u32) -> Result<(u32, u32)> {
        self.psns_v2(port)
    }

    /// Bind the remote rkey of the QP to `rkey`, as its first request after RTS names it
    /// (`rc`'s `bind_remote_v2`). Sleeps.
    pub(crate) fn bind_remote(&self, rkey: u32) -> Result {
        self.bind_remote_v2(rkey)
    }

    /// Take the QP off the NIC.
    pub(crate) fn destroy(&self, dev: &Device<Bound>) -> Result {
        let cur = self.state();
        self.transition_v2(dev, cur, QpState::Reset, &QpAttrs::default())
    }
}

/// A memory region as the send path checks it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrView {
    pub(crate) pd: PdId,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    /// Where byte `iova` is in the PD's ASID: the device VA WQEs name.
    pub(crate) asid_va: u64,
}

/// Check the SGE `addr`+`len` against `mr` of protection domain `pd`, and translate it to a
/// device VA: `(addr - iova) + asid_va`. `EINVAL` for a region of another PD or a range not
/// inside the region (overflow included).
pub(crate) fn translate(mr: &MrView, pd: PdId, addr: u64, len: u32) -> Result<u64> {
    if mr.pd != pd {
        return Err(EINVAL);
    }
    let off = addr.checked_sub(mr.iova).ok_or(EINVAL)?;
    let end = off.checked_add(u64::from(len)).ok_or(EINVAL)?;
    if end > mr.length {
        return Err(EINVAL);
    }
    Ok(mr.asid_va + off)
}

/// Post `wrs` on `qp`: `lookup` finds a region by lkey; `max_msg` is the device's largest
/// message.
pub(crate) fn post_send(
    qp: &QpData,
    wrs: &mut SendWrs<'_>,
    max_msg: u32,
    lookup: impl Fn(u32) -> Option<MrView>,
) -> Result {
    let ring = |sq: &Sq| {
        // The doorbell write is ordered after the WQE writes to coherent memory. A full FIFO
        // (the NIC stopped taking doorbells) leaves the requests unsent until the next
        // doorbell of the QP.
        if let Err(e) = rc::ring(&qp.nic, sq, qp.qpn) {
            kernel::ratelimited!(dev_warn!(
                qp.nic.dev,
                "QP {}: doorbell failed: {:?}\n",
                qp.qpn,
                e
            ));
        }
    };
    let mut sq = qp.sq.lock();
    // The producer index the device was last told. Whoever releases the lock has told it
    // everything posted, so that indexes reach the device in order.
    let mut told = sq.pi;
    let mut res = Ok(());
    for wr in wrs.by_ref() {
        let mut inline = None;
        if wr.flags() & kernel::bindings::ib_send_flags_IB_SEND_INLINE as u32 != 0 {
            // The data comes from the poster's memory, whose pages may have to be faulted
            // in: not under the lock.
            if sq.pi != told {
                ring(&sq);
            }
            drop(sq);
            let copied = copy_inline(qp, wr.sges());
            sq = qp.sq.lock();
            told = sq.pi;
            match copied {
                Ok(c) => inline = Some(c),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        if let Err(e) = post_one(qp, &mut sq, &wr, max_msg, &lookup, inline.as_ref()) {
            res = Err(e);
            break;
        }
    }
    if sq.pi != told {
        ring(&sq);
    }
    res
}

/// Post the receives of `wrs` on `qp`: `lookup` finds a region by lkey.
///
/// The NIC has no receive queue, and executes no operation that consumes a receive: a
/// receive is held by the driver (its SGEs are checked as those of a request) until an
/// error flushes it. A QP with no receive queue (asked for none) refuses receives with
/// `EOPNOTSUPP`; so does one closed to remote writes, which never takes a WRITE. `EINVAL` in
/// RESET or ERR, for more SGEs than the QP takes or an SGE outside a region of its PD;
/// `ENOMEM` when the queue is full.
pub(crate) fn post_recv(
    qp: &QpData,
    wrs: &mut RecvWrs<'_>,
    lookup: impl Fn(u32) -> Option<MrView>,
) -> Result {
    let mut sq = qp.sq.lock();
    for wr in wrs.by_ref() {
        if sq.recvs.is_empty() {
            return Err(EOPNOTSUPP);
        }
        if matches!(sq.state, QpState::Reset | QpState::Err) {
            return Err(EINVAL);
        }
        if !sq.remote_write {
            return Err(EOPNOTSUPP);
        }
        let sges = wr.sges();
        if sges.len() > qp.max_recv_sge as usize {
            return Err(EINVAL);
        }
        for sge in sges {
            let mr = lookup(sge.lkey()).ok_or(EINVAL)?;
            translate(&mr, qp.pd, sge.addr(), sge.length())?;
        }
        if sq.recv_count == sq.recvs.len() {
            return Err(ENOMEM);
        }
        let tail = (sq.recv_head + sq.recv_count) % sq.recvs.len();
        sq.recvs[tail] = wr.wr_id();
        sq.recv_count += 1;
    }
    Ok(())
}

/// The data of an inline request of `sges` (user-space addresses of the poster; lkeys do
/// not matter), and its length. `EINVAL` if the QP takes no inline requests or they do not
/// fit, `EFAULT` if the poster cannot read them.
fn copy_inline(qp: &QpData, sges: &[kernel::rdma::wr::Sge]) -> Result<(InlineData, u32)> {
    if qp.max_inline_data() == 0 || sges.len() > qp.max_sge as usize {
        return Err(EINVAL);
    }
    let mut data = InlineData {
        bytes: [0; INLINE_MAX],
    };
    let mut off = 0usize;
    for sge in sges {
        let len = sge.length() as usize;
        let end = off
            .checked_add(len)
            .filter(|&e| e <= INLINE_MAX)
            .ok_or(EINVAL)?;
        let addr = usize::try_from(sge.addr()).map_err(|_| EFAULT)?;
        UserSlice::new(UserPtr::from_addr(addr), len)
            .reader()
            .read_slice(&mut data.bytes[off..end])?;
        off = end;
    }
    Ok((data, off as u32))
}

/// Post one request `wr` on `qp` whose send queue is `sq`, its data `inline` if it is an
/// inline request.
fn post_one(
    qp: &QpData,
    sq: &mut Sq,
    wr: &kernel::rdma::wr::SendWr<'_>,
    max_msg: u32,
    lookup: &impl Fn(u32) -> Option<MrView>,
    inline: Option<&(InlineData, u32)>,
) -> Result {
    let mask = (1u16 << qp.log_sq) - 1;
    // The NIC executes RDMA WRITE only; its WQEs carry no immediate.
    if wr.opcode() != Opcode::RdmaWrite {
        return Err(EOPNOTSUPP);
    }
    // Work requests are accepted in RTS only: the device ignores the doorbells of a QP in
    // another state, so they would never complete.
    if sq.state != QpState::Rts {
        return Err(EINVAL);
    }
    let (raddr, rkey) = wr.rdma().ok_or(EINVAL)?;
    // The rkey travels in the QP context: a request naming another one would silently write
    // with the wrong key (`QpData::bind_remote` binds the first one named).
    if rkey != sq.remote_rkey {
        return Err(EINVAL);
    }
    // A request of several SGEs is one WQE per SGE that is not empty, all but the last
    // unsignalled, each writing where the one before ended: the responder sees the data of
    // the SGEs in order at consecutive addresses, and the completion comes with the last.
    // Every SGE is checked before any WQE is written. An inline request is one WQE whose
    // source is the copy of its data in the bounce area, at its send queue entry.
    let mut pieces = [(0u64, 0u32); MAX_SEND_SGE as usize];
    let mut n = 0;
    let mut total = 0u32;
    if let Some(&(_, len)) = inline {
        pieces[0] = (0, len);
        n = 1;
        total = len;
    } else {
        let sges = wr.sges();
        if sges.len() > qp.max_sge as usize {
            return Err(EINVAL);
        }
        for sge in sges {
            total = total.checked_add(sge.length()).ok_or(EINVAL)?;
            if total > max_msg {
                return Err(EINVAL);
            }
            let mr = lookup(sge.lkey()).ok_or(EINVAL)?;
            let local = translate(&mr, qp.pd, sge.addr(), sge.length())?;
            if sge.length() > 0 {
                pieces[n] = (local, sge.length());
                n += 1;
            }
        }
    }
    // The NIC cannot execute a WRITE of no data (it refuses size 0, syndrome 0x84).
    if total == 0 {
        return Err(EOPNOTSUPP);
    }
    // One entry stays empty (`rc::MAX_WQES`).
    if u32::from(sq.pi.wrapping_sub(sq.ci)) + n as u32 > qp.limit {
        return Err(ENOMEM);
    }
    let v = &qp.v2;
    if let (Some((data, _)), Some((_, va, mem))) = (inline, &v.bounce) {
        let slot = usize::from(sq.pi & mask);
        let words = INLINE_MAX / 4;
        io_project!(mem, [try: slot * words..(slot + 1) * words])
            .try_cast::<InlineData>()?
            .copy_write(*data);
        pieces[0].0 = va + (slot * INLINE_MAX) as u64;
    }
    let signaled = qp.signal_all || wr.signaled();
    let mut remote = raddr;
    for (i, &(local, len)) in pieces[..n].iter().enumerate() {
        let last = i + 1 == n;
        let slot = usize::from(sq.pi & mask);
        let w = rc::write_wqe(
            u32::from(sq.pi & mask),
            len,
            local,
            remote,
            u32::from(sq.pi),
            last && signaled,
        );
        v.write_wqe(slot, &w)?;
        sq.wr_ids[slot] = wr.wr_id();
        sq.lens[slot] = total;
        sq.cont[slot] = i > 0;
        sq.epochs[slot] = v.space.post_work();
        sq.pi = sq.pi.wrapping_add(1);
        remote = remote.wrapping_add(u64::from(len));
    }
    Ok(())
}

/// Take the completions of `cq` into `out` (see [`rdma::Driver::poll_cq`]): `push` reports one
/// completion of a QP found by `find`.
pub(crate) fn poll<T: kernel::rdma::Driver<Qp = QpData>>(
    dev: &kernel::rdma::Device<T>,
    cq: &Cq,
    out: &mut WcSink<'_, T>,
) -> Result {
    let mut s = cq.sw.lock();
    while s.count != 0 && !out.is_full() {
        let (qpn, wc, frees) = s.entries[s.head];
        s.head = (s.head + 1) % s.entries.len();
        s.count -= 1;
        match out.qp(qpn) {
            Some(qp) => {
                // A send queue entry is free once its completion is polled: the owner
                // sizes its CQ by its send queue.
                if let Some(to) = frees {
                    let mut sq = qp.data().sq_lock();
                    let (ci, pi) = (sq.ci, sq.pi);
                    let n = to.wrapping_sub(ci);
                    if n != 0 && n <= pi.wrapping_sub(ci) {
                        sq.ci = to;
                    }
                }
                out.push(qp, &wc)?
            }
            None => kernel::ibdev_dbg!(
                dev,
                "CQ {}: completion of QP {}, destroyed since, dropped\n",
                cq.id,
                qpn
            ),
        }
    }
    Ok(())
}

/// Arm `cq` for one completion event. Returns whether completions are waiting.
pub(crate) fn arm(cq: &Cq) -> Result<bool> {
    let mut s = cq.sw.lock();
    s.armed = true;
    Ok(s.count != 0)
}
