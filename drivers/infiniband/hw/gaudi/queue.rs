// SPDX-License-Identifier: GPL-2.0

//! Completion queues and queue pairs of the standard verbs: device commands, rings in kernel
//! memory mapped into the device MMU, the send path with its software lkey check, and
//! completion polling.
//!
//! See "Completion queues and queue pairs" in Documentation/infiniband/gaudi/design.rst.

use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_project,
        io_read,
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
        barrier::{
            dma_mb,
            Read, //
        },
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
    cmd::{
        CMD_CQ_CREATE,
        CMD_CQ_DESTROY,
        CMD_QP_DESTROY,
        CMD_QP_KEYS,
        CMD_QP_READ,
        CMD_QP_WRITE, //
    },
    hw::{
        self,
        CqContext,
        Cqe,
        InlineData,
        QpContext,
        Wqe,
        INLINE_MAX, //
    },
    ids::PdId,
    mmu::{
        self,
        VaRange, //
    },
    rc,
    shared::{
        Doorbell,
        Shared, //
    },
};

/// Rings are mapped with 4 KiB device pages.
const PAGE_SHIFT: u32 = 12;
const PAGE_SIZE: usize = 1 << PAGE_SHIFT;

/// Bytes of a send WQE and of a CQE.
pub(crate) const WQE_SIZE: usize = size_of::<Wqe>();
pub(crate) const CQE_SIZE: usize = size_of::<Cqe>();
const WQE_WORDS: usize = WQE_SIZE / 4;
const CQE_WORDS: usize = CQE_SIZE / 4;
/// SGEs a request of the standard verbs may have: each takes a WQE of its own.
pub(crate) const MAX_SEND_SGE: u32 = 4;

/// The work completion status of a CQE status code; `None` for codes the model does not
/// define.
fn wc_status(code: u8) -> Option<WcStatus> {
    Some(match code {
        0 => WcStatus::Success,
        1 => WcStatus::LocLenErr,
        2 => WcStatus::LocQpOpErr,
        3 => WcStatus::LocProtErr,
        4 => WcStatus::WrFlushErr,
        5 => WcStatus::RemAccessErr,
        6 => WcStatus::RemOpErr,
        7 => WcStatus::RetryExcErr,
        8 => WcStatus::RemInvReqErr,
        9 => WcStatus::RnrRetryExcErr,
        _ => return None,
    })
}

/// Host memory of a queue entered into the device MMU as a ring, with 4 KiB pages: the device
/// fetches WQEs from it or writes CQEs to it, and no work request or incoming WRITE can name
/// it. It leaves the device MMU (and the device forgets it) when this is dropped, before the
/// memory may be freed.
pub(crate) struct RingMap {
    shared: Arc<Shared>,
    range: VaRange,
    pages: u64,
}

impl RingMap {
    /// Enter the `bytes` (a multiple of 4 KiB) at bus address `base` as a queue.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        dev: &Device<Bound>,
        base: u64,
        bytes: usize,
        writable: bool,
    ) -> Result<Self> {
        Self::map(
            shared,
            dev,
            base,
            bytes,
            mmu::Flags {
                writable,
                ring: true,
                devmem: false,
            },
        )
    }

    /// Enter the `bytes` (a multiple of 4 KiB) at bus address `base` with `flags`.
    fn map(
        shared: &Arc<Shared>,
        dev: &Device<Bound>,
        base: u64,
        bytes: usize,
        flags: mmu::Flags,
    ) -> Result<Self> {
        let pages = (bytes / PAGE_SIZE) as u64;
        let range = shared.map_region(
            dev,
            (0..pages).map(|i| base + i * PAGE_SIZE as u64),
            pages,
            PAGE_SHIFT,
            flags,
        )?;
        Ok(Self {
            shared: shared.clone(),
            range,
            pages,
        })
    }

    /// The device VA of the ring.
    pub(crate) fn va(&self) -> u64 {
        self.range.start
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        self.shared.unmap_region(self.range, PAGE_SHIFT, self.pages);
    }
}

/// A ring in kernel memory (zeroed).
struct Ring {
    /// Dropped first: out of the device MMU before the memory is freed.
    map: RingMap,
    mem: Coherent<[u32]>,
}

impl Ring {
    fn new(
        shared: &Arc<Shared>,
        dev: &Device<Bound>,
        bytes: usize,
        writable: bool,
    ) -> Result<Self> {
        let bytes = bytes.max(1).next_multiple_of(PAGE_SIZE);
        let mem = Coherent::<u32>::zeroed_slice(dev, bytes / 4, GFP_KERNEL)?;
        let map = RingMap::new(shared, dev, mem.dma_address(), bytes, writable)?;
        Ok(Self { map, mem })
    }

    fn va(&self) -> u64 {
        self.map.va()
    }
}

/// Where a QP's inline requests are copied for the device to read: one [`InlineData`] per
/// send queue entry, the entry's own, so that it is not reused before the entry completed.
/// Mapped readable, and not as a queue: its WQEs name it as their source.
struct Bounce {
    /// Dropped first: out of the device MMU before the memory is freed.
    map: RingMap,
    mem: Coherent<[u32]>,
}

impl Bounce {
    fn new(shared: &Arc<Shared>, dev: &Device<Bound>, entries: usize) -> Result<Self> {
        let bytes = (entries * INLINE_MAX).next_multiple_of(PAGE_SIZE);
        let mem = Coherent::<u32>::zeroed_slice(dev, bytes / 4, GFP_KERNEL)?;
        let map = RingMap::map(shared, dev, mem.dma_address(), bytes, mmu::Flags::default())?;
        Ok(Self { map, mem })
    }
}

/// A completion queue's ring on one port (the device's CQs belong to a port; an InfiniBand
/// CQ gets one on each port its queue pairs use).
struct CqRing {
    port: u32,
    ring: Ring,
    /// Consumer index.
    ci: u32,
}

/// What poll and notification need of a completion queue.
struct CqRings {
    rings: KVec<CqRing>,
    /// The ring polled first next time, so that one busy port does not starve the others.
    next: usize,
}

/// Completions the driver made (device model 2.0: taken from a port's CQ 1 or flushed),
/// waiting to be polled: the QPN, the completion, and the send queue index its poll frees
/// the entries up to (`None` for a receive's).
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
    shared: Arc<Shared>,
    /// CQ number on every port (the device's index) and in [`rdma::Device::with_cq`].
    id: u32,
    log_size: u32,
    /// Serialises the creation of rings.
    #[pin]
    setup: Mutex<()>,
    #[pin]
    rings: SpinLockIrq<CqRings>,
    #[pin]
    sw: SpinLockIrq<SwCq>,
}

impl Cq {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: u32,
        log_size: u32,
        ports: u32,
    ) -> Result<impl PinInit<Self, Error>> {
        // Room for a ring on every port, so that adding one never allocates under the lock.
        let rings = KVec::with_capacity(ports as usize, GFP_KERNEL)?;
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
            shared,
            id,
            log_size,
            setup <- new_mutex!(()),
            rings <- new_spinlock_irq!(CqRings { rings, next: 0 }),
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
        ib: &kernel::rdma::Device<crate::ib::GaudiRdma>,
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
                self.shared.dev,
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

    /// Make sure the CQ has a ring on port index `port`, creating it on the device.
    fn ensure_port(&self, dev: &Device<Bound>, port: u32) -> Result {
        let _setup = self.setup.lock();
        if self.rings.lock().rings.iter().any(|r| r.port == port) {
            return Ok(());
        }
        let ring = Ring::new(&self.shared, dev, CQE_SIZE << self.log_size, true)?;
        let va = ring.va();
        let ctx = CqContext {
            ring_va: va,
            log_size: self.log_size,
            vector: 0,
        };
        self.shared
            .command(CMD_CQ_CREATE, port, self.id, &ctx, &mut ())?;
        let mut r = self.rings.lock();
        if r.rings
            .push_within_capacity(CqRing { port, ring, ci: 0 })
            .is_err()
        {
            drop(r);
            let _ = self
                .shared
                .command(CMD_CQ_DESTROY, port, self.id, &(), &mut ());
            return Err(ENOSPC);
        }
        Ok(())
    }

    /// Take the device CQs down (before the rings are freed with the data).
    pub(crate) fn destroy(&self) -> Result {
        let _setup = self.setup.lock();
        // Ports are below `regs::MAX_PORTS` (32).
        let ports = self
            .rings
            .lock()
            .rings
            .iter()
            .fold(0u64, |m, r| m | 1 << r.port);
        for port in (0..64).filter(|p| ports & (1 << p) != 0) {
            self.shared.destroy_command(CMD_CQ_DESTROY, port, self.id)?;
        }
        Ok(())
    }
}

impl CqRing {
    /// The CQE at the consumer index, if the device has written it.
    fn peek(&self, log_size: u32) -> Result<Option<Cqe>> {
        let base = (self.ci & ((1 << log_size) - 1)) as usize * CQE_WORDS;
        let cqe = io_project!(&self.ring.mem, [try: base..base + CQE_WORDS]).try_cast::<Cqe>()?;
        let owner = u8::from((self.ci >> log_size) & 1 == 0);
        let seen: u8 = io_read!(cqe, .owner);
        if seen & 1 != owner {
            return Ok(None);
        }
        // The rest of the entry was written before its owner bit.
        dma_mb(Read);
        Ok(Some(cqe.copy_read()))
    }
}

/// The memory region incoming WRITEs of a QP reach: peers address it by `iova`, the device
/// reaches byte `iova` at device VA `va`. A `length` of 0 is no region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) va: u64,
}

/// Where the peer of a queue pair is (from the address vector: GIDs, the resolved MAC and the
/// global route's fields), and its keys (`struct gaudi_ib_modify_qp`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Path {
    pub(crate) dmac: [u8; 6],
    /// The destination GID; zero until RTR.
    pub(crate) dgid: Gid,
    /// The source GID entry of the QP's port.
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    /// IPv6 flow label (20 bits).
    pub(crate) flow_label: u32,
    /// UDP source port (its low 14 bits).
    pub(crate) udp_sport: u16,
    pub(crate) remote_rkey: u32,
    /// `remote_rkey` was given explicitly (`struct gaudi_ib_modify_qp`): the QP keeps it,
    /// rather than binding the rkey its requests name ([`QpData::bind_remote`]).
    pub(crate) remote_explicit: bool,
    pub(crate) local_rkey: u32,
    /// The region of `local_rkey`, resolved each time the context is written (see
    /// `IbDev::resolve_local`); it goes with its key at deregistration.
    pub(crate) region: Region,
    /// The source GID's IPv4 address, big-endian as a number (0 for IPv6).
    pub(crate) src_ip: u32,
}

impl Path {
    /// This path with the keys and region of `old`.
    pub(crate) fn with_keys(self, old: &Path) -> Path {
        Path {
            remote_rkey: old.remote_rkey,
            remote_explicit: old.remote_explicit,
            local_rkey: old.local_rkey,
            region: old.region,
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
    /// The remote rkey is being replaced on the device ([`QpData::bind_remote`]).
    rebinding: bool,
    /// The length of the region incoming WRITEs reach (0: the QP takes none): a completion
    /// of a WRITE with immediate longer than that did not come from this QP's responder.
    recv_len: u64,
    /// The QP's access rights include `IB_ACCESS_REMOTE_WRITE`: it may take WRITEs with
    /// immediate, and so receives (their credits).
    pub(crate) remote_write: bool,
    /// The receives posted and not consumed, oldest first from `recv_head` (a ring of
    /// `recvs.len()` entries, `recv_count` of them taken): a received WRITE with immediate
    /// completes the oldest.
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
    /// A WQE that was not the last of its request completed in error and was reported: the
    /// flushes of the rest of that request are not reported again.
    partial: bool,
    /// Device model 2.0: send WQ entries counted against the port's CQ 1 (see
    /// `rc::PORT_WQES`), and the source address's encapsulation.
    pub(crate) reserved: u32,
    pub(crate) encap: Option<usize>,
    /// Device model 2.0: the send queue at the QP's slot of its port's send WQ array in its
    /// ASID, from INIT (taken out, and dropped outside the lock, at RESET).
    pub(crate) wq_map: Option<crate::chip::Mapping>,
    /// Device model 2.0: WQEs before this index are done (completed by the NIC or flushed);
    /// their entries are free once their completions are polled (`ci`).
    pub(crate) retired: u16,
}

impl Sq {
    /// The slot of WQE index `index`.
    pub(crate) fn slot(&self, index: u16) -> usize {
        usize::from(index) & (self.wr_ids.len() - 1)
    }

    /// Back to RESET: the device forgot the queue, which starts over at index 0.
    pub(crate) fn reset(&mut self) {
        self.state = QpState::Reset;
        self.owner_err = false;
        self.err_reported = false;
        self.on_device = false;
        self.pi = 0;
        self.ci = 0;
        self.partial = false;
        self.remote_rkey = 0;
        self.remote_explicit = false;
        self.recv_len = 0;
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
    shared: Arc<Shared>,
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
    /// The CQ of the QP's send completions, and of every completion without `rcq`.
    cq: Arc<Cq>,
    /// The CQ of received WRITEs with immediate, when it is another (device model 1.5).
    rcq: Option<Arc<Cq>>,
    /// The send queue on model 1.5.
    ring: Option<Ring>,
    /// The send queue on the NIC's own contexts (device model 2.0, `crate::rc`).
    v2: Option<rc::V2>,
    /// The copies of inline requests: QPs of user space that asked for inline data.
    bounce: Option<Bounce>,
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
    /// Device model 2.0: the PD's address space and key.
    pub(crate) v2: Option<(Arc<AddressSpace>, u32)>,
    /// WQEs the send queue may hold (at most `1 << log_sq`).
    pub(crate) limit: u32,
}

impl QpData {
    pub(crate) fn new(
        shared: &Arc<Shared>,
        dev: &Device<Bound>,
        p: QpParams,
    ) -> Result<impl PinInit<Self, Error>> {
        let size = 1usize << p.log_sq;
        let (ring, v2) = match &p.v2 {
            Some((space, key)) => (
                None,
                Some(rc::V2::new(dev, space, *key, p.qpn, size as u32, p.inline)?),
            ),
            None => (Some(Ring::new(shared, dev, WQE_SIZE * size, false)?), None),
        };
        let bounce = if p.inline && v2.is_none() {
            Some(Bounce::new(shared, dev, size)?)
        } else {
            None
        };
        let mut wr_ids = KVec::with_capacity(size, GFP_KERNEL)?;
        wr_ids.resize(size, 0, GFP_KERNEL)?;
        let mut lens = KVec::with_capacity(size, GFP_KERNEL)?;
        lens.resize(size, 0, GFP_KERNEL)?;
        let mut cont = KVec::with_capacity(size, GFP_KERNEL)?;
        cont.resize(size, false, GFP_KERNEL)?;
        // Sized by user space: charged to the poster's memory cgroup.
        let rq = p.max_recv_wr as usize;
        let mut recvs = KVec::with_capacity(rq, GFP_KERNEL_ACCOUNT)?;
        recvs.resize(rq, 0, GFP_KERNEL_ACCOUNT)?;
        let shared = shared.clone();
        Ok(try_pin_init!(Self {
            shared,
            qpn: p.qpn,
            pd: p.pd,
            log_sq: p.log_sq,
            max_sge: p.max_sge,
            limit: p.limit.min(1 << p.log_sq),
            max_recv_sge: p.max_recv_sge,
            signal_all: p.signal_all,
            cq: p.cq,
            rcq: p.rcq,
            ring,
            v2,
            bounce,
            attrs <- new_mutex!(QpAttrs::default()),
            sq <- new_spinlock_irq!(Sq {
                state: QpState::Reset,
                on_device: false,
                port: 0,
                owner_err: false,
                err_reported: false,
                remote_rkey: 0,
                remote_explicit: false,
                rebinding: false,
                recv_len: 0,
                remote_write: false,
                recvs,
                recv_head: 0,
                recv_count: 0,
                pi: 0,
                ci: 0,
                wr_ids,
                lens,
                cont,
                partial: false,
                reserved: 0,
                encap: None,
                wq_map: None,
                retired: 0,
            }),
        }))
    }

    pub(crate) fn v2(&self) -> Option<&rc::V2> {
        self.v2.as_ref()
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
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

    pub(crate) fn pd(&self) -> PdId {
        self.pd
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
        if self.bounce.is_some() || self.v2.as_ref().is_some_and(|v| v.bounce.is_some()) {
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

    /// The device QP context of `state` with attributes `a`.
    fn context(&self, state: u8, a: &QpAttrs) -> QpContext {
        let va = self.ring.as_ref().map_or(0, |r| r.va());
        let mut c = qp_context(state, self.cq.id, va, self.log_sq, a);
        if let Some(rcq) = &self.rcq {
            c.rcqn = rcq.id;
            c.flags |= hw::QPF_RCQ;
        }
        c
    }

    /// Move the QP to `next` with attributes `a` on the device (the caller holds `attrs` and
    /// checked the transition); the CQ gets a ring on the QP's port first when the QP leaves
    /// RESET.
    pub(crate) fn transition(
        &self,
        dev: &Device<Bound>,
        cur: QpState,
        next: QpState,
        a: &QpAttrs,
    ) -> Result {
        if self.v2.is_some() {
            return self.transition_v2(dev, cur, next, a);
        }
        let (on_device, old_port) = {
            let sq = self.sq.lock();
            (sq.on_device, sq.port)
        };
        let state = match next {
            QpState::Reset => {
                if on_device {
                    match self
                        .shared
                        .command(CMD_QP_DESTROY, old_port, self.qpn, &(), &mut ())
                    {
                        Ok(()) | Err(ENOENT) | Err(EIO) | Err(ENODEV) => {}
                        Err(e) => return Err(e),
                    }
                }
                self.sq.lock().reset();
                return Ok(());
            }
            QpState::Err if !on_device => {
                let mut sq = self.sq.lock();
                sq.state = QpState::Err;
                sq.owner_err = true;
                return Ok(());
            }
            QpState::Init => hw::QPS_INIT,
            QpState::Rtr => hw::QPS_RTR,
            QpState::Rts => hw::QPS_RTS,
            QpState::Err => hw::QPS_ERR,
            _ => return Err(EOPNOTSUPP),
        };
        let port = a.port.checked_sub(1).ok_or(EINVAL)?;
        if cur == QpState::Reset {
            self.cq.ensure_port(dev, port)?;
            if let Some(rcq) = &self.rcq {
                rcq.ensure_port(dev, port)?;
            }
        }
        if next == QpState::Err {
            // Before the device flushes: its QP_ERROR event then finds the owner's ERR and
            // reports no asynchronous error for what the owner asked for.
            let mut sq = self.sq.lock();
            sq.state = QpState::Err;
            sq.owner_err = true;
        }
        self.shared.command(
            CMD_QP_WRITE,
            port,
            self.qpn,
            &self.context(state, a),
            &mut (),
        )?;
        let mut sq = self.sq.lock();
        sq.state = next;
        sq.port = port;
        sq.on_device = true;
        sq.remote_rkey = a.path.remote_rkey;
        sq.remote_explicit = a.path.remote_explicit;
        sq.remote_write = a.access & kernel::rdma::umem::Access::REMOTE_WRITE.bits() != 0;
        sq.recv_len = if sq.remote_write && a.path.local_rkey != 0 {
            a.path.region.length
        } else {
            0
        };
        Ok(())
    }

    /// The PSNs the device is at: (next to send, next expected).
    pub(crate) fn psns(&self, dev: &Device<Bound>, port: u32) -> Result<(u32, u32)> {
        if self.v2.is_some() {
            return self.psns_v2(dev, port);
        }
        let mut ctx = QpContext::default();
        self.shared
            .command(CMD_QP_READ, port - 1, self.qpn, &(), &mut ctx)?;
        Ok((ctx.sq_psn & 0xff_ffff, ctx.rq_psn & 0xff_ffff))
    }

    /// Bind the remote rkey of the QP to `rkey`, as its next request names it: at the first
    /// RDMA WRITE after RTS, or a WRITE with another rkey once the send queue is idle (every
    /// request posted before has completed). The device gets the key with `QP_KEYS`; the QP
    /// keeps its state and PSNs. Nothing happens (and `post_send` decides) when the QP has
    /// the key already or was given one explicitly, is not in RTS, or has requests
    /// outstanding. Requests posted while the key is replaced fail with `EAGAIN`. Sleeps.
    pub(crate) fn bind_remote(&self, dev: &Device<Bound>, rkey: u32) -> Result {
        if self.v2.is_some() {
            return self.bind_remote_v2(dev, rkey);
        }
        // The common case on the send path: the key is bound already (or fixed); no mutex.
        {
            let sq = self.sq.lock();
            if sq.remote_rkey == rkey || sq.remote_explicit {
                return Ok(());
            }
        }
        let mut attrs = self.attrs.lock();
        let port = {
            let mut sq = self.sq.lock();
            if sq.remote_rkey == rkey
                || sq.remote_explicit
                || sq.state != QpState::Rts
                || !sq.on_device
                || sq.rebinding
                || sq.pi != sq.ci
            {
                return Ok(());
            }
            sq.rebinding = true;
            sq.port
        };
        let keys = hw::QpKeys {
            flags: hw::QP_KEYS_REMOTE,
            remote_rkey: rkey,
            ..Default::default()
        };
        let res = self
            .shared
            .command(CMD_QP_KEYS, port, self.qpn, &keys, &mut ());
        let mut sq = self.sq.lock();
        sq.rebinding = false;
        if res.is_ok() {
            sq.remote_rkey = rkey;
            attrs.path.remote_rkey = rkey;
        }
        res
    }

    /// Take the QP off the device.
    pub(crate) fn destroy(&self, dev: &Device<Bound>) -> Result {
        if self.v2.is_some() {
            let cur = self.state();
            return self.transition_v2(dev, cur, QpState::Reset, &QpAttrs::default());
        }
        let sq = self.sq.lock();
        let (on_device, port) = (sq.on_device, sq.port);
        drop(sq);
        if !on_device {
            return Ok(());
        }
        match self
            .shared
            .command(CMD_QP_DESTROY, port, self.qpn, &(), &mut ())
        {
            Ok(()) | Err(ENOENT) | Err(EIO) | Err(ENODEV) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The device reported an error of the QP on port index `port`: it is in ERR now. Returns
    /// whether that is news (an asynchronous error to report), rather than the owner's own
    /// modification to ERR.
    pub(crate) fn device_error(&self, port: u32) -> bool {
        let mut sq = self.sq.lock();
        if sq.port != port || sq.state == QpState::Reset || sq.owner_err || sq.err_reported {
            return false;
        }
        // An error completion polled before this event moved the QP to ERR already.
        sq.state = QpState::Err;
        sq.err_reported = true;
        true
    }
}

/// The device QP context (`QP_WRITE`) of `state` for a QP with CQ `cqn` and a send queue of
/// `1 << log_sq` WQEs at device VA `sq_va`, with attributes `a`.
///
/// Incoming WRITEs are allowed only with the access flag, a non-zero local rkey and its
/// region: a QP without a region accepts none, whatever the key a WRITE carries.
pub(crate) fn qp_context(state: u8, cqn: u32, sq_va: u64, log_sq: u32, a: &QpAttrs) -> QpContext {
    let p = &a.path;
    let r = &p.region;
    let remote_write = a.access & kernel::rdma::umem::Access::REMOTE_WRITE.bits() != 0
        && p.local_rkey != 0
        && r.length != 0;
    let mut c = QpContext {
        state,
        log_mtu: 7 + a.mtu as u8,
        retry_cnt: a.retry_cnt,
        timeout: a.timeout,
        cqn,
        sq_va,
        log_sq_size: log_sq,
        dest_qpn: a.dest_qpn,
        sq_psn: a.sq_psn,
        rq_psn: a.rq_psn,
        remote_rkey: p.remote_rkey,
        dmac: p.dmac,
        hop_limit: p.hop_limit,
        traffic_class: p.traffic_class,
        udp_sport: p.udp_sport,
        sgid_index: p.sgid_index,
        flow_label: p.flow_label & 0xf_ffff,
        dgid: p.dgid.0,
        rnr_retry: a.rnr_retry.min(7),
        min_rnr_timer: a.min_rnr_timer & 0x1f,
        ..Default::default()
    };
    if p.dgid != Gid::default() {
        c.flags |= hw::QPF_GRH;
    }
    if remote_write {
        c.local_rkey = p.local_rkey;
        c.flags |= hw::QPF_REMOTE_WRITE | hw::QPF_REGION;
        c.region_iova = r.iova;
        c.region_length = r.length;
        c.region_va = r.va;
    }
    c
}

/// A memory region as the send path checks it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrView {
    pub(crate) pd: PdId,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    pub(crate) mmu_va: u64,
    /// Where byte `iova` is in the PD's ASID (device model 2.0).
    pub(crate) asid_va: u64,
}

impl MrView {
    /// The device VA of byte `iova` that WQEs name: in the PD's ASID on model 2.0 (`v2`).
    pub(crate) fn device_va(&self, v2: bool) -> u64 {
        if v2 {
            self.asid_va
        } else {
            self.mmu_va
        }
    }
}

/// Check the SGE `addr`+`len` against `mr` of protection domain `pd`, and translate it to a
/// device VA: `(addr - iova) + mmu_va`. `EINVAL` for a region of another PD or a range not
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
    Ok(mr.mmu_va + off)
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
        if qp.v2.is_some() {
            // The doorbell write is ordered after the WQE writes to coherent memory. A full
            // FIFO (the NIC stopped taking doorbells) leaves the requests unsent until the
            // next doorbell of the QP.
            if let Err(e) = rc::ring(&qp.shared, sq, qp.qpn) {
                kernel::ratelimited!(dev_warn!(
                    qp.shared.dev,
                    "QP {}: doorbell failed: {:?}\n",
                    qp.qpn,
                    e
                ));
            }
            return;
        }
        // The doorbell write is ordered after the WQE writes to coherent memory.
        qp.shared.doorbell(
            sq.port,
            Doorbell::Sq {
                qpn: qp.qpn,
                pi: sq.pi,
            },
        )
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
/// The NIC has no receive queue: a receive is a credit that a received RDMA WRITE with
/// immediate consumes, reporting its `wr_id` (nothing is written to its SGEs, which are
/// checked as those of a request). A QP with no receive queue (asked for none) refuses
/// receives with `EOPNOTSUPP`; so does one closed to remote writes, which never takes a
/// WRITE. `EINVAL` in RESET or ERR (receives are not flushed), for more SGEs than the QP
/// takes or an SGE outside a region of its PD; `ENOMEM` when the queue is full.
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
    let size = 1u32 << qp.log_sq;
    let opcode = match wr.opcode() {
        Opcode::RdmaWrite => hw::WQE_RDMA_WRITE,
        // The NIC's WQEs carry no immediate (device model 2.0).
        Opcode::RdmaWriteWithImm if qp.v2.is_some() => return Err(EOPNOTSUPP),
        Opcode::RdmaWriteWithImm => hw::WQE_RDMA_WRITE_IMM,
        // The NIC executes RDMA WRITE (with or without immediate) only.
        _ => return Err(EOPNOTSUPP),
    };
    // Work requests are accepted in RTS only: the device ignores the doorbells of a QP in
    // another state, so they would never complete.
    if sq.state != QpState::Rts {
        return Err(EINVAL);
    }
    let (raddr, rkey) = wr.rdma().ok_or(EINVAL)?;
    // The rkey travels in the QP context: a request naming another one would silently write
    // with the wrong key (`QpData::bind_remote` binds it when the send queue is idle).
    if sq.rebinding {
        return Err(EAGAIN);
    }
    if rkey != sq.remote_rkey {
        return Err(EINVAL);
    }
    // A request of several SGEs is one WQE per SGE that is not empty, all but the last a
    // plain unsignalled WRITE, each writing where the one before ended: the responder sees
    // the data of the SGEs in order at consecutive addresses, and the immediate and the
    // completion come with the last. Every SGE is checked before any WQE is written. An
    // inline request is one WQE whose source is the copy of its data in the bounce area,
    // at its send queue entry.
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
            let mut local = translate(&mr, qp.pd, sge.addr(), sge.length())?;
            if qp.v2.is_some() {
                // The same offset in the region's range of the PD's ASID.
                local = local - mr.mmu_va + mr.asid_va;
            }
            if sge.length() > 0 {
                pieces[n] = (local, sge.length());
                n += 1;
            }
        }
    }
    // No data at all: one zero-length WRITE.
    let n = n.max(1);
    // The responder's completion of a WRITE with immediate counts the bytes of its message,
    // which would be the last SGE's alone.
    if n > 1 && opcode == hw::WQE_RDMA_WRITE_IMM {
        return Err(EINVAL);
    }
    if let Some(v) = &qp.v2 {
        // The NIC cannot execute a WRITE of no data (it refuses size 0, syndrome 0x84); one
        // entry stays empty.
        if total == 0 {
            return Err(EOPNOTSUPP);
        }
        if u32::from(sq.pi.wrapping_sub(sq.ci)) + n as u32 > qp.limit {
            return Err(ENOMEM);
        }
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
            sq.pi = sq.pi.wrapping_add(1);
            remote = remote.wrapping_add(u64::from(len));
        }
        return Ok(());
    }
    if u32::from(sq.pi.wrapping_sub(sq.ci)) + n as u32 > size {
        return Err(ENOMEM);
    }
    if let (Some((data, _)), Some(b)) = (inline, &qp.bounce) {
        let slot = usize::from(sq.pi & mask);
        let words = INLINE_MAX / 4;
        io_project!(&b.mem, [try: slot * words..(slot + 1) * words])
            .try_cast::<InlineData>()?
            .copy_write(*data);
        pieces[0].0 = b.map.va() + (slot * INLINE_MAX) as u64;
    }
    let signaled = qp.signal_all || wr.signaled();
    let mut remote = raddr;
    for (i, &(local, len)) in pieces[..n].iter().enumerate() {
        let last = i + 1 == n;
        let slot = usize::from(sq.pi & mask);
        let wqe = Wqe {
            opcode: if last { opcode } else { hw::WQE_RDMA_WRITE },
            flags: if last && signaled {
                hw::WQE_SIGNALED
            } else {
                0
            },
            length: len,
            local_va: local,
            remote_va: remote,
            imm: if last { u32::from_be(wr.imm_data()) } else { 0 },
            ..Default::default()
        };
        let base = slot * WQE_WORDS;
        io_project!(&qp.ring.as_ref().ok_or(EINVAL)?.mem, [try: base..base + WQE_WORDS])
            .try_cast::<Wqe>()?
            .copy_write(wqe);
        sq.wr_ids[slot] = wr.wr_id();
        sq.lens[slot] = total;
        sq.cont[slot] = i > 0;
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
    {
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
    }
    let mut r = cq.rings.lock();
    let n = r.rings.len();
    let start = r.next;
    for k in 0..n {
        let i = (start + k) % n;
        let mut moved = false;
        while !out.is_full() {
            let ring = &mut r.rings[i];
            let Some(cqe) = ring.peek(cq.log_size)? else {
                break;
            };
            ring.ci = ring.ci.wrapping_add(1);
            moved = true;
            let port = ring.port;
            let taken = out
                .qp(cqe.qpn)
                .map(|qp| complete(qp, cq.id, port, &cqe, out));
            match taken {
                Some(Ok(())) => {}
                Some(Err(e)) if e == ENOSPC => break,
                // Left over from a QP destroyed or reset since.
                None | Some(Err(ESTALE)) => kernel::ibdev_dbg!(
                    dev,
                    "CQ {}: stale CQE of QP {} (index {}) dropped\n",
                    cq.id,
                    cqe.qpn,
                    cqe.wqe_index
                ),
                Some(Err(_)) => kernel::ibdev_warn_ratelimited!(
                    dev,
                    "CQ {} port {}: invalid CQE dropped: QP {}, index {}, opcode {:#x}, status {}\n",
                    cq.id,
                    port + 1,
                    cqe.qpn,
                    cqe.wqe_index,
                    cqe.opcode,
                    cqe.status
                ),
            }
        }
        let ring = &r.rings[i];
        if moved {
            cq.shared.doorbell(
                ring.port,
                Doorbell::Cq {
                    cqn: cq.id,
                    ci: ring.ci as u16,
                    arm: false,
                },
            );
        }
        if out.is_full() {
            r.next = (i + 1) % n.max(1);
            break;
        }
    }
    Ok(())
}

/// Turn `cqe` of QP `qp` into a work completion in `out`. An error drops the CQE: `ESTALE`
/// if it names a WQE the QP does not have outstanding (an entry left over from before a
/// reset), `EPROTO` if the device wrote what it must not (another CQ's QP, another port, an
/// opcode or status the model does not define).
fn complete<T: kernel::rdma::Driver<Qp = QpData>>(
    qp: &kernel::rdma::Qp<T>,
    cq: u32,
    port: u32,
    cqe: &Cqe,
    out: &mut WcSink<'_, T>,
) -> Result {
    let q = qp.data();
    // Send completions come on the QP's CQ, received WRITEs with immediate on its receive CQ
    // (the same one without `rcq`).
    let expected = match cqe.opcode {
        hw::CQE_RECV_WRITE_IMM => q.rcq.as_ref().unwrap_or(&q.cq).id,
        _ => q.cq.id,
    };
    if expected != cq {
        return Err(EPROTO);
    }
    let status = wc_status(cqe.status).ok_or(EPROTO)?;
    let mut wc = Wc {
        wr_id: 0,
        status,
        opcode: WcOpcode::RdmaWrite,
        vendor_err: if status == WcStatus::Success {
            0
        } else {
            u32::from(cqe.status)
        },
        byte_len: cqe.byte_len,
        imm: None,
        port: port + 1,
    };
    match cqe.opcode {
        hw::CQE_SEND => {
            let mut sq = q.sq.lock();
            // The CQE completes its WQE and every unsignalled one before it.
            let outstanding = sq.pi.wrapping_sub(sq.ci);
            if sq.port != port {
                return Err(EPROTO);
            }
            if cqe.wqe_index.wrapping_sub(sq.ci) >= outstanding {
                return Err(ESTALE);
            }
            let mask = (1u16 << q.log_sq) - 1;
            let slot = usize::from(cqe.wqe_index & mask);
            let next = usize::from(cqe.wqe_index.wrapping_add(1) & mask);
            wc.wr_id = sq.wr_ids[slot];
            wc.byte_len = sq.lens[slot];
            sq.ci = cqe.wqe_index.wrapping_add(1);
            // Only the last WQE of a request is signalled, so a completion of another one is
            // an error (or a flush): it completes the request, and the flushes of the rest
            // of the request that follow it are not reported again.
            let last = sq.ci == sq.pi || !sq.cont[next];
            let repeat = sq.cont[slot] && sq.partial;
            sq.partial = !last;
            if repeat {
                return Ok(());
            }
            // A request that completed in error put the QP in ERR on the device: whoever
            // polled the completion finds the QP there, whether or not the device's QP_ERROR
            // event was taken yet (that event still decides the asynchronous report).
            if status != WcStatus::Success {
                sq.state = QpState::Err;
            }
        }
        hw::CQE_RECV_WRITE_IMM => {
            // The responder reports only WRITEs it took: successful, on the QP's port, into
            // the region it is bound to.
            let mut sq = q.sq.lock();
            if status != WcStatus::Success
                || sq.port != port
                || u64::from(cqe.byte_len) > sq.recv_len
            {
                return Err(EPROTO);
            }
            // The oldest receive is its credit; with none posted, the device did not wait
            // for one (it has no receive queue to hold the WRITE back with an RNR NAK).
            if sq.recv_count != 0 {
                wc.wr_id = sq.recvs[sq.recv_head];
                sq.recv_head = (sq.recv_head + 1) % sq.recvs.len();
                sq.recv_count -= 1;
            }
            wc.opcode = WcOpcode::RecvRdmaWithImm;
            wc.imm = Some(cqe.imm);
        }
        _ => return Err(EPROTO),
    }
    out.push(qp, &wc)
}

/// Arm every ring of `cq` for one completion event. Returns whether completions are waiting.
pub(crate) fn arm(cq: &Cq) -> Result<bool> {
    let mut pending = {
        let mut s = cq.sw.lock();
        s.armed = true;
        s.count != 0
    };
    let r = cq.rings.lock();
    for ring in r.rings.iter() {
        pending |= ring.peek(cq.log_size)?.is_some();
        cq.shared.doorbell(
            ring.port,
            Doorbell::Cq {
                cqn: cq.id,
                ci: ring.ci as u16,
                arm: true,
            },
        );
    }
    Ok(pending)
}
