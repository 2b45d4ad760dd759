// SPDX-License-Identifier: GPL-2.0

//! The device-specific fast path of gaudi_ib: QP sets whose queues this
//! process drives itself (include/uapi/rdma/gaudi_user_ioctl_cmds.h).
//!
//! [`Context::create_qp_set`] creates one QP per port of a set of ports,
//! all with the same index, in the address space (ASID) of the context's
//! PD, and maps each QP's send queue, CQ and doorbell page (a UMR block of
//! the port). [`DvQp::post_write`] then writes a WQE and rings the
//! doorbell, [`DvQp::poll`] reads the next CQE: plain loads and stores, no
//! system call. The formats are the NIC's (Documentation/infiniband/gaudi/
//! device-model.rst and uapi.rst). A WQE's source is
//! a device VA: an address `a` of a local region is `a - iova + mmu_va`
//! ([`Context::query_mr`]). Its destination is an address of the peer's
//! region as the peer registered it (its iova), as in the standard verbs:
//! the responder takes WRITEs carrying its PD's key (the QP's local rkey)
//! and translates them in the PD's address space.

use crate::uapi::*;
use crate::{ioctl, Attr, Context, Mr};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, Ordering};

impl gaudi_ib_mr_info {
    /// The device VA of `addr`, an address (IOVA) of the region.
    pub fn device_va(&self, addr: u64) -> u64 {
        addr - self.iova + self.mmu_va
    }
}

// The NIC's formats (Documentation/infiniband/gaudi/device-model.rst): the
// send WQE and its opcodes, the CQE and the UMR block's registers.
/// Bytes of a send WQE.
pub const WQE_SIZE: usize = 32;
/// Send WQE opcodes: SEND (no QP set may post it: the NIC puts the QP in
/// ERR) and LINEAR, the RDMA WRITE.
pub const WQE2_OPCODE_SEND: u64 = 1;
pub const WQE2_OPCODE_LINEAR: u64 = 2;
const CQE2_SIZE: usize = 16;
const CQE2_VALID: u32 = 1 << 31;
const CQE2_IS_REQ: u32 = 1 << 24;
/// The status [`DvQp::poll`] gives a CQE of a responder (the NIC writes
/// none).
pub const CQE2_NOT_REQUESTER: u8 = 0xff;
const UMR_DB_FIRST32: usize = 0x000;
const UMR_DB_SECOND32: usize = 0x004;
const UMR_CQ_NUMBER: usize = 0x100;
const UMR_CQ_CONSUMER_INDEX: usize = 0x104;

/// A send WQE: `opcode`, WQE index `index` (its entry in the
/// queue), `len` bytes from device VA `local` to `remote`, tag `tag`, a CQE
/// if `signaled`.
pub fn wqe2(
    opcode: u64,
    index: u32,
    len: u32,
    local: u64,
    remote: u64,
    tag: u32,
    signaled: bool,
) -> [u8; WQE_SIZE] {
    let mut w = [0u64; 4];
    w[0] = opcode & 0x1f | u64::from(index & 0xff) << 8 | u64::from(len) << 32;
    if signaled {
        // ACKREQ, and COMPLETION_TYPE 2: a CQE on the QP's CQ.
        w[0] |= 1 << 31;
        w[3] = 2 << 62;
    }
    w[1] = local;
    w[2] = remote;
    w[3] |= u64::from(tag);
    let mut b = [0u8; WQE_SIZE];
    for (i, v) in w.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// The status [`DvQp::poll`] gives a requester's CQE: a request done (the
/// NIC writes no CQE for a request that failed).
pub const CQE_SUCCESS: u8 = 0;

/// A CQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub qpn: u32,
    /// The tag of the WQE: its producer index.
    pub wqe_index: u16,
    /// [`CQE_SUCCESS`] for a requester's CQE, else [`CQE2_NOT_REQUESTER`].
    pub status: u8,
}

/// A shared, readable and writable mapping of `len` bytes of a file (the
/// device file at an offset the driver handed out, a BAR's sysfs
/// resource), unmapped on drop.
pub struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    pub fn new(file: &impl AsRawFd, offset: u64, len: usize) -> io::Result<Self> {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh shared mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The mapped bytes. Another agent (the device) may change them.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, and
        // borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is a mapping made by `Map::new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One QP of a set, with its mapped queues.
pub struct DvQp {
    pub port: u32,
    pub info: gaudi_ib_qp_set_port,
    sq: Map,
    cq: Map,
    db: Map,
    index: u32,
    log_sq: u32,
    log_cq: u32,
    /// Producer index of the send queue, consumer index of the CQ.
    pub pi: u32,
    pub ci: u32,
}

// SAFETY: the mappings are plain memory and device registers, usable from
// any thread; one thread at a time drives a QP (`&mut self`).
unsafe impl Send for DvQp {}

impl DvQp {
    fn db_write(&self, off: usize, v: u32) {
        // SAFETY: `off` is a doorbell register inside the 4 KiB page.
        unsafe { std::ptr::write_volatile(self.db.ptr.add(off).cast::<u32>(), v) };
    }

    /// Post one RDMA WRITE of `len` bytes from device VA `local_va` to
    /// `remote_va`, an address (iova) of the peer's region, and ring the
    /// doorbell: stores only. `false` if
    /// the send queue is full (counting unsignalled WQEs not yet passed by a
    /// CQE).
    pub fn post_write(
        &mut self,
        local_va: u64,
        remote_va: u64,
        len: u32,
        signaled: bool,
        imm: Option<u32>,
    ) -> bool {
        self.post_wqes(&[(local_va, remote_va, len, signaled, imm)])
    }

    /// Post several WRITEs, as [`DvQp::post_write`], with one doorbell:
    /// 32-byte LINEAR WQEs, each tagged with its producer index, and the
    /// doorbell {producer index, QPN} on the block's FIFO. A WRITE with
    /// immediate is not on the NIC: such a WQE carries an opcode the NIC
    /// refuses (SEND).
    pub fn post_wqes(&mut self, wqes: &[(u64, u64, u32, bool, Option<u32>)]) -> bool {
        let size = 1u32 << self.log_sq;
        for &(local_va, remote_va, len, signaled, imm) in wqes {
            let w = wqe2(
                if imm.is_some() {
                    WQE2_OPCODE_SEND
                } else {
                    WQE2_OPCODE_LINEAR
                },
                self.pi & (size - 1),
                len,
                local_va,
                remote_va,
                self.pi,
                signaled,
            );
            self.write_wqe(self.pi, &w);
            self.pi = self.pi.wrapping_add(1);
        }
        // The WQEs are visible before the doorbell.
        fence(Ordering::SeqCst);
        self.ring2(self.pi & (size - 1));
        true
    }

    /// Push the doorbell {`pi`, QPN} on the block's FIFO.
    pub fn ring2(&self, pi: u32) {
        self.db_write(UMR_DB_FIRST32, pi);
        self.db_write(UMR_DB_SECOND32, self.index);
    }

    /// Write `wqe`, any 32 bytes, into the send queue slot of producer index `pi`, without
    /// ringing (the fuzzer's wild WQEs).
    pub fn write_wqe(&mut self, pi: u32, wqe: &[u8; WQE_SIZE]) {
        let slot = (pi & ((1u32 << self.log_sq) - 1)) as usize;
        // SAFETY: `slot` is inside the ring of `1 << log_sq` WQEs.
        unsafe {
            std::ptr::copy_nonoverlapping(wqe.as_ptr(), self.sq.ptr.add(slot * WQE_SIZE), WQE_SIZE)
        };
    }

    /// How many WQEs the send queue holds.
    pub fn sq_entries(&self) -> u32 {
        1 << self.log_sq
    }

    /// Write `value` at byte `offset` of the doorbell page, the QP's UMR
    /// block (made 4-byte aligned and wrapped into the page): any register,
    /// any value.
    pub fn ring(&self, offset: usize, value: u32) {
        self.db_write(offset & 0xffc, value);
    }

    /// The next CQE, if the device wrote one: 16-byte CQEs with a VALID
    /// bit the consumer clears; moves the consumer index and gives it
    /// through the block's CQ slot. The NIC writes CQEs of successful
    /// requests only (a failed one puts the QP in ERR:
    /// [`Context::query_qp_set`]); the CQE's tag is the WQE's producer index.
    pub fn poll(&mut self) -> Option<Cqe> {
        if !self.cqe_ready() {
            return None;
        }
        let base = self.next_cqe();
        fence(Ordering::Acquire);
        let mut w = [0u32; 4];
        for (i, v) in w.iter_mut().enumerate() {
            // SAFETY: a word of the CQE inside the ring.
            *v = unsafe { std::ptr::read_volatile(base.add(i)) };
        }
        // SAFETY: as above; the entry is free for the device's next pass.
        unsafe { std::ptr::write_volatile(base, 0) };
        self.ci = self.ci.wrapping_add(1);
        self.db_write(UMR_CQ_NUMBER, self.info.cqn);
        self.db_write(UMR_CQ_CONSUMER_INDEX, self.ci);
        Some(Cqe {
            qpn: w[0] & 0xff_ffff,
            // The tag: the WQE's producer index (word 1 is its entry).
            wqe_index: w[2] as u16,
            status: if w[0] & CQE2_IS_REQ != 0 {
                CQE_SUCCESS
            } else {
                CQE2_NOT_REQUESTER
            },
        })
    }

    /// The slot of the CQ the consumer index points at.
    fn next_cqe(&self) -> *mut u32 {
        let size = 1u32 << self.log_cq;
        let slot = (self.ci & (size - 1)) as usize;
        // SAFETY: `slot` is inside the ring of `size` CQEs.
        unsafe { self.cq.ptr.add(slot * CQE2_SIZE) }.cast::<u32>()
    }

    /// Whether the device wrote the next CQE (its VALID bit), without taking
    /// it: [`DvQp::poll`] does.
    pub fn cqe_ready(&self) -> bool {
        // SAFETY: word 0 of the next CQE, inside the ring, written by the
        // device.
        let w0 = unsafe { std::ptr::read_volatile(self.next_cqe()) };
        w0 & CQE2_VALID != 0
    }

    /// Busy-poll for the next CQE, at most `spins` tries.
    pub fn poll_spin(&mut self, spins: u64) -> Option<Cqe> {
        for _ in 0..spins {
            if let Some(c) = self.poll() {
                return Some(c);
            }
            std::hint::spin_loop();
        }
        None
    }
}

/// A QP set: one QP per port, one index.
pub struct QpSet {
    pub handle: u32,
    pub resp: gaudi_ib_qp_set_create_resp,
    pub qps: Vec<DvQp>,
}

impl QpSet {
    /// The QP of port `port` (from 1).
    pub fn qp(&mut self, port: u32) -> &mut DvQp {
        self.qps
            .iter_mut()
            .find(|q| q.port == port)
            .expect("port of the set")
    }
}

impl Context {
    /// `GAUDI_IB_METHOD_QUERY_MR`: where `mr` sits in the device's
    /// translation domain.
    pub fn query_mr(&self, mr: &Mr) -> io::Result<gaudi_ib_mr_info> {
        let mut info = gaudi_ib_mr_info::default();
        self.dv_raw(
            GAUDI_IB_OBJECT_DEVICE,
            GAUDI_IB_METHOD_QUERY_MR,
            [
                Attr::handle(GAUDI_IB_ATTR_QUERY_MR_HANDLE, mr.handle),
                Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut info),
            ],
        )?;
        Ok(info)
    }

    /// Any method of the namespace with the attributes given, to test how
    /// the kernel checks them.
    pub fn dv_raw<const N: usize>(
        &self,
        object: u16,
        method: u16,
        attrs: [Attr; N],
    ) -> io::Result<[Attr; N]> {
        ioctl(self.file(), object, method, attrs)
    }

    /// `GAUDI_IB_METHOD_QP_SET_CREATE` without mapping anything: the handle
    /// and the replies.
    pub fn create_qp_set_raw(
        &self,
        req: &gaudi_ib_qp_set_create,
    ) -> io::Result<(u32, gaudi_ib_qp_set_create_resp, Vec<gaudi_ib_qp_set_port>)> {
        let mut resp = gaudi_ib_qp_set_create_resp::default();
        let n = req.ports.count_ones().max(1) as usize;
        let mut ports = vec![gaudi_ib_qp_set_port::default(); n];
        let pd = self.pd.load(std::sync::atomic::Ordering::Relaxed);
        let buf = Attr::buf(
            GAUDI_IB_ATTR_QP_SET_CREATE_PORTS,
            ports.as_mut_ptr().cast(),
            n * std::mem::size_of::<gaudi_ib_qp_set_port>(),
        );
        let handle = if pd == crate::NO_PD {
            let attrs = self.dv_raw(
                GAUDI_IB_OBJECT_QP_SET,
                GAUDI_IB_METHOD_QP_SET_CREATE,
                [
                    Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE, 0),
                    Attr::input(GAUDI_IB_ATTR_QP_SET_CREATE_REQ, req),
                    Attr::output(GAUDI_IB_ATTR_QP_SET_CREATE_RESP, &mut resp),
                    buf,
                ],
            )?;
            attrs[0].data()
        } else {
            let attrs = self.dv_raw(
                GAUDI_IB_OBJECT_QP_SET,
                GAUDI_IB_METHOD_QP_SET_CREATE,
                [
                    Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE, 0),
                    Attr::input(GAUDI_IB_ATTR_QP_SET_CREATE_REQ, req),
                    Attr::output(GAUDI_IB_ATTR_QP_SET_CREATE_RESP, &mut resp),
                    buf,
                    Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_PD, pd as u32),
                ],
            )?;
            attrs[0].data()
        };
        Ok((handle as u32, resp, ports))
    }

    /// `GAUDI_IB_METHOD_QP_SET_CREATE`: a QP on each port of `ports` (bit n:
    /// port n + 1) with `index` (any free one if `None`), send queues of
    /// `1 << log_sq` WQEs and CQs of `1 << log_cq` CQEs, mapped.
    pub fn create_qp_set(
        &self,
        ports: u64,
        index: Option<u32>,
        log_sq: u32,
        log_cq: u32,
    ) -> io::Result<QpSet> {
        let req = gaudi_ib_qp_set_create {
            flags: if index.is_some() {
                GAUDI_IB_QP_SET_CREATE_INDEX
            } else {
                0
            },
            ports,
            log_sq_entries: log_sq,
            log_cq_entries: log_cq,
            index: index.unwrap_or(0),
            ..Default::default()
        };
        let (handle, resp, infos) = self.create_qp_set_raw(&req)?;
        let mut set = QpSet {
            handle,
            resp,
            qps: Vec::new(),
        };
        for info in infos {
            let qp = (|| -> io::Result<DvQp> {
                Ok(DvQp {
                    port: info.port_num,
                    info,
                    sq: Map::new(self.file(), info.sq_offset, resp.sq_bytes as usize)?,
                    cq: Map::new(self.file(), info.cq_offset, resp.cq_bytes as usize)?,
                    db: Map::new(self.file(), info.db_offset, 4096)?,
                    index: resp.index,
                    log_sq,
                    log_cq,
                    pi: 0,
                    ci: 0,
                })
            })();
            match qp {
                Ok(q) => set.qps.push(q),
                Err(e) => {
                    let _ = self.destroy_qp_set(set);
                    return Err(e);
                }
            }
        }
        Ok(set)
    }

    /// `GAUDI_IB_METHOD_QP_SET_DESTROY` of a set created with
    /// [`Context::create_qp_set_raw`].
    pub fn destroy_qp_set_handle(&self, handle: u32) -> io::Result<()> {
        self.dv_raw(
            GAUDI_IB_OBJECT_QP_SET,
            GAUDI_IB_METHOD_QP_SET_DESTROY,
            [Attr::handle(GAUDI_IB_ATTR_QP_SET_DESTROY_HANDLE, handle)],
        )
        .map(|_| ())
    }

    /// `GAUDI_IB_METHOD_QP_SET_DESTROY`; the mappings go with `set`.
    pub fn destroy_qp_set(&self, set: QpSet) -> io::Result<()> {
        self.destroy_qp_set_handle(set.handle)
    }

    /// `GAUDI_IB_METHOD_QP_SET_MODIFY` of the QP on `port`.
    pub fn modify_qp_set(
        &self,
        handle: u32,
        port: u32,
        m: &gaudi_ib_qp_set_modify,
    ) -> io::Result<()> {
        self.dv_raw(
            GAUDI_IB_OBJECT_QP_SET,
            GAUDI_IB_METHOD_QP_SET_MODIFY,
            [
                Attr::handle(GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE, handle),
                Attr::value(GAUDI_IB_ATTR_QP_SET_MODIFY_PORT, port.into()),
                Attr::input(GAUDI_IB_ATTR_QP_SET_MODIFY_REQ, m),
            ],
        )
        .map(|_| ())
    }

    /// `GAUDI_IB_METHOD_QP_SET_QUERY` of the QP on `port`.
    pub fn query_qp_set(&self, handle: u32, port: u32) -> io::Result<gaudi_ib_qp_set_qp_info> {
        let mut info = gaudi_ib_qp_set_qp_info::default();
        self.dv_raw(
            GAUDI_IB_OBJECT_QP_SET,
            GAUDI_IB_METHOD_QP_SET_QUERY,
            [
                Attr::handle(GAUDI_IB_ATTR_QP_SET_QUERY_HANDLE, handle),
                Attr::value(GAUDI_IB_ATTR_QP_SET_QUERY_PORT, port.into()),
                Attr::output(GAUDI_IB_ATTR_QP_SET_QUERY_RESP, &mut info),
            ],
        )?;
        Ok(info)
    }

    /// Bring the QP of `qp` to RTS towards the peer QP `dest_qpn` at
    /// `mac`/`ipv4`: its WRITEs carry `remote_rkey`; incoming WRITEs must
    /// carry `local_rkey`, the key of the PD's regions open to remote writes
    /// (0: none accepted), and land in those regions. `mtu` is `enum ib_mtu`,
    /// `timeout` the local ACK timeout exponent.
    #[allow(clippy::too_many_arguments)]
    pub fn connect_dv(
        &self,
        handle: u32,
        qp: &mut DvQp,
        mac: [u8; 6],
        ipv4: [u8; 4],
        dest_qpn: u32,
        remote_rkey: u32,
        local_rkey: u32,
        mtu: u8,
        timeout: u8,
    ) -> io::Result<()> {
        let mut m = gaudi_ib_qp_set_modify {
            state: u32::from(crate::QPS_RESET),
            ..Default::default()
        };
        self.modify_qp_set(handle, qp.port, &m)?;
        // The device starts the queues over.
        qp.pi = 0;
        m.state = u32::from(crate::QPS_INIT);
        self.modify_qp_set(handle, qp.port, &m)?;
        // The QP sends from the port's IPv4 address (a GID of its network interface).
        let own = crate::port_ipv4(&self.query_port(u64::from(qp.port))?);
        let port = u8::try_from(qp.port).map_err(io::Error::other)?;
        crate::roce_address(port, own, Some(ipv4))?;
        m = gaudi_ib_qp_set_modify {
            state: u32::from(crate::QPS_RTR),
            dest_qpn,
            rq_psn: 0x100,
            remote_rkey,
            local_rkey,
            path_mtu: mtu,
            dmac: mac,
            dest_ipv4: ipv4,
            ..Default::default()
        };
        self.modify_qp_set(handle, qp.port, &m)?;
        m = gaudi_ib_qp_set_modify {
            state: u32::from(crate::QPS_RTS),
            sq_psn: 0x100,
            timeout,
            retry_cnt: 7,
            ..Default::default()
        };
        self.modify_qp_set(handle, qp.port, &m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<gaudi_ib_mr_info>(), 40);
        assert_eq!(std::mem::size_of::<gaudi_ib_qp_set_create>(), 32);
        assert_eq!(std::mem::size_of::<gaudi_ib_qp_set_create_resp>(), 24);
        assert_eq!(std::mem::size_of::<gaudi_ib_qp_set_port>(), 48);
        assert_eq!(std::mem::size_of::<gaudi_ib_qp_set_modify>(), 48);
        assert_eq!(std::mem::size_of::<gaudi_ib_qp_set_qp_info>(), 16);
        assert_eq!(std::mem::offset_of!(gaudi_ib_qp_set_modify, dmac), 32);
        assert_eq!(std::mem::offset_of!(gaudi_ib_qp_set_modify, dest_ipv4), 40);
    }
}
