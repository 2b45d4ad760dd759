// SPDX-License-Identifier: GPL-2.0

//! Typed queue pair and completion queue attributes (`struct ib_qp_init_attr`,
//! `struct ib_qp_attr`, `struct ib_cq_init_attr`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! `modify_qp` passes a `struct ib_qp_attr` of which only the fields named by a mask are
//! meaningful. [`QpAttr`] hands out a field only with its mask bit set, so a driver cannot read a
//! field user space did not give.
//!
//! # Examples
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::rdma::qp::{QpAttr, QpAttrMask, QpState};
//!
//! /// The PSN to start sending with, when moving to RTS.
//! fn rts_psn(attr: &QpAttr<'_>) -> Result<Option<u32>> {
//!     if attr.state()? != Some(QpState::Rts) {
//!         return Ok(None);
//!     }
//!     Ok(Some(attr.sq_psn().ok_or(EINVAL)?))
//! }
//! # let _ = QpAttrMask::STATE;
//! ```

use crate::{bindings, prelude::*, rdma::Gid, rdma::GidAttr, rdma::Mtu};

/// The state of a queue pair (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpState {
    /// Reset.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// Initialised.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// Ready to receive.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// Ready to send.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// Send queue drain.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// Send queue error.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// Error.
    Err = bindings::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    /// The state of a raw `enum ib_qp_state` value; `EINVAL` for anything else.
    pub fn from_raw(raw: u32) -> Result<Self> {
        Ok(match raw {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return Err(EINVAL),
        })
    }
}

/// The transport of a queue pair (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// Any other type (raw packet, XRC, driver-specific, ...), by raw value.
    Other(u32),
}

impl QpType {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            other => Self::Other(other),
        }
    }
}

/// Queue sizes of a queue pair (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// The creation attributes of a queue pair (`struct ib_qp_init_attr`).
///
/// The driver reads the request and writes back the sizes it granted with [`QpInit::grant`].
pub struct QpInit<'a> {
    raw: &'a mut bindings::ib_qp_init_attr,
    qp_num: Option<u32>,
}

impl<'a> QpInit<'a> {
    pub(crate) fn new(raw: &'a mut bindings::ib_qp_init_attr) -> Self {
        Self { raw, qp_num: None }
    }

    /// The transport.
    pub fn qp_type(&self) -> QpType {
        QpType::from_raw(self.raw.qp_type)
    }

    /// The requested queue sizes.
    pub fn cap(&self) -> QpCap {
        QpCap::from_raw(&self.raw.cap)
    }

    /// Report the queue sizes the driver granted (at least those requested).
    pub fn grant(&mut self, cap: QpCap) {
        cap.write_to(&mut self.raw.cap);
    }

    /// Whether every send work request generates a completion (`IB_SIGNAL_ALL_WR`).
    pub fn signal_all(&self) -> bool {
        self.raw.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    }

    /// Whether the queue pair has a shared receive queue.
    pub fn has_srq(&self) -> bool {
        !self.raw.srq.is_null()
    }

    /// Raw creation flags (`enum ib_qp_create_flags`); a driver refuses those it does not know.
    pub fn create_flags(&self) -> u32 {
        self.raw.create_flags
    }

    /// `cq`, the send or receive CQ of the creation, if it belongs to `dev`.
    fn cq_of<'b, T: crate::rdma::Driver>(
        &'b self,
        cq: *mut bindings::ib_cq,
        dev: &crate::rdma::Device<T>,
    ) -> Option<&'b crate::rdma::Cq<T>> {
        // SAFETY: `cq` is `send_cq` or `recv_cq` of the attributes: null, or a live CQ the
        // core holds for the creation, whose device is set at its creation.
        if cq.is_null() || unsafe { (*cq).device } != dev.as_raw() {
            return None;
        }
        // SAFETY: The CQ belongs to `dev`, a device of driver `T`, so it was created by the
        // glue of `T` with initialised data; it stays live during the creation of the QP
        // (`'b`).
        Some(unsafe { crate::rdma::Cq::<T>::from_raw(cq) })
    }

    /// The completion queue of the send queue, if it belongs to `dev`.
    pub fn send_cq<'b, T: crate::rdma::Driver>(
        &'b self,
        dev: &crate::rdma::Device<T>,
    ) -> Option<&'b crate::rdma::Cq<T>> {
        self.cq_of(self.send_cq_raw(), dev)
    }

    /// The completion queue of the receive queue, if it belongs to `dev`.
    pub fn recv_cq<'b, T: crate::rdma::Driver>(
        &'b self,
        dev: &crate::rdma::Device<T>,
    ) -> Option<&'b crate::rdma::Cq<T>> {
        self.cq_of(self.recv_cq_raw(), dev)
    }

    /// The raw completion queue of the send queue.
    pub fn send_cq_raw(&self) -> *mut bindings::ib_cq {
        self.raw.send_cq
    }

    /// The raw receive completion queue.
    pub fn recv_cq_raw(&self) -> *mut bindings::ib_cq {
        self.raw.recv_cq
    }

    /// Set the number of the new queue pair, which the driver must do.
    pub fn set_qp_num(&mut self, qp_num: u32) {
        self.qp_num = Some(qp_num);
    }

    pub(crate) fn qp_num(&self) -> Option<u32> {
        self.qp_num
    }
}

/// Which fields of a [`QpAttr`] are given (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrMask(u32);

impl QpAttrMask {
    /// `qp_state`.
    pub const STATE: Self = Self(bindings::ib_qp_attr_mask_IB_QP_STATE);
    /// `cur_qp_state`.
    pub const CUR_STATE: Self = Self(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE);
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: Self = Self(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS);
    /// `pkey_index`.
    pub const PKEY_INDEX: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX);
    /// `port_num`.
    pub const PORT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PORT);
    /// `ah_attr`: the address vector of the peer.
    pub const AV: Self = Self(bindings::ib_qp_attr_mask_IB_QP_AV);
    /// `path_mtu`.
    pub const PATH_MTU: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU);
    /// `timeout`.
    pub const TIMEOUT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT);
    /// `retry_cnt`.
    pub const RETRY_CNT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT);
    /// `rnr_retry`.
    pub const RNR_RETRY: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY);
    /// `rq_psn`.
    pub const RQ_PSN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN);
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC);
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER);
    /// `sq_psn`.
    pub const SQ_PSN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN);
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC);
    /// `cap`.
    pub const CAP: Self = Self(bindings::ib_qp_attr_mask_IB_QP_CAP);
    /// `dest_qp_num`.
    pub const DEST_QPN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN);
}

crate::rdma::raw_flags!(QpAttrMask);

/// The address vector of a connected queue pair's peer (`struct rdma_ah_attr` with its global
/// route).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// The local port, from 1.
    pub port_num: u32,
    /// The destination GID.
    pub dgid: Gid,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit (IPv4 TTL).
    pub hop_limit: u8,
    /// Traffic class (IPv4 TOS).
    pub traffic_class: u8,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Destination MAC, for RoCE (resolved by the core).
    pub dmac: [u8; 6],
    /// The source GID entry `sgid_index` names, as the core looked it up (`None` if it did
    /// not: the address vector has no global route).
    pub sgid: Option<GidAttr>,
}

/// Attributes of a queue pair change (`struct ib_qp_attr` and its mask).
pub struct QpAttr<'a> {
    raw: &'a bindings::ib_qp_attr,
    mask: QpAttrMask,
}

impl<'a> QpAttr<'a> {
    pub(crate) fn new(raw: &'a bindings::ib_qp_attr, mask: QpAttrMask) -> Self {
        Self { raw, mask }
    }

    /// The fields given.
    pub fn mask(&self) -> QpAttrMask {
        self.mask
    }

    fn has(&self, m: QpAttrMask) -> bool {
        self.mask.contains(m)
    }

    /// The requested state; `EINVAL` if it is not a state.
    pub fn state(&self) -> Result<Option<QpState>> {
        if !self.has(QpAttrMask::STATE) {
            return Ok(None);
        }
        QpState::from_raw(self.raw.qp_state).map(Some)
    }

    /// The state user space believes the queue pair is in.
    pub fn cur_state(&self) -> Result<Option<QpState>> {
        if !self.has(QpAttrMask::CUR_STATE) {
            return Ok(None);
        }
        QpState::from_raw(self.raw.cur_qp_state).map(Some)
    }

    /// The path MTU; `EINVAL` if it is not an MTU.
    pub fn path_mtu(&self) -> Result<Option<Mtu>> {
        if !self.has(QpAttrMask::PATH_MTU) {
            return Ok(None);
        }
        Mtu::from_raw(self.raw.path_mtu).ok_or(EINVAL).map(Some)
    }

    /// Remote access rights (`IB_ACCESS_*`).
    pub fn access_flags(&self) -> Option<u32> {
        self.has(QpAttrMask::ACCESS_FLAGS)
            .then_some(self.raw.qp_access_flags as u32)
    }

    /// The local port.
    pub fn port_num(&self) -> Option<u32> {
        self.has(QpAttrMask::PORT).then_some(self.raw.port_num)
    }

    /// The partition key index.
    pub fn pkey_index(&self) -> Option<u16> {
        self.has(QpAttrMask::PKEY_INDEX)
            .then_some(self.raw.pkey_index)
    }

    /// The peer's queue pair number.
    pub fn dest_qp_num(&self) -> Option<u32> {
        self.has(QpAttrMask::DEST_QPN)
            .then_some(self.raw.dest_qp_num)
    }

    /// The first PSN expected from the peer.
    pub fn rq_psn(&self) -> Option<u32> {
        self.has(QpAttrMask::RQ_PSN).then_some(self.raw.rq_psn)
    }

    /// The first PSN to send.
    pub fn sq_psn(&self) -> Option<u32> {
        self.has(QpAttrMask::SQ_PSN).then_some(self.raw.sq_psn)
    }

    /// The local ACK timeout (4.096 us * 2^timeout).
    pub fn timeout(&self) -> Option<u8> {
        self.has(QpAttrMask::TIMEOUT).then_some(self.raw.timeout)
    }

    /// Retries on timeout.
    pub fn retry_cnt(&self) -> Option<u8> {
        self.has(QpAttrMask::RETRY_CNT)
            .then_some(self.raw.retry_cnt)
    }

    /// Retries on receiver-not-ready.
    pub fn rnr_retry(&self) -> Option<u8> {
        self.has(QpAttrMask::RNR_RETRY)
            .then_some(self.raw.rnr_retry)
    }

    /// The receiver-not-ready NAK timer the responder asks for (IBA encoding).
    pub fn min_rnr_timer(&self) -> Option<u8> {
        self.has(QpAttrMask::MIN_RNR_TIMER)
            .then_some(self.raw.min_rnr_timer)
    }

    /// Outstanding RDMA READs and atomics as initiator.
    pub fn max_rd_atomic(&self) -> Option<u8> {
        self.has(QpAttrMask::MAX_QP_RD_ATOMIC)
            .then_some(self.raw.max_rd_atomic)
    }

    /// Outstanding RDMA READs and atomics as target.
    pub fn max_dest_rd_atomic(&self) -> Option<u8> {
        self.has(QpAttrMask::MAX_DEST_RD_ATOMIC)
            .then_some(self.raw.max_dest_rd_atomic)
    }

    /// The requested queue sizes.
    pub fn cap(&self) -> Option<QpCap> {
        self.has(QpAttrMask::CAP)
            .then(|| QpCap::from_raw(&self.raw.cap))
    }

    /// The address vector of the peer.
    pub fn av(&self) -> Option<AddressVector> {
        if !self.has(QpAttrMask::AV) {
            return None;
        }
        let ah = &self.raw.ah_attr;
        // SAFETY: The `raw` member of `union ib_gid` is its bytes, always valid.
        let dgid = Gid(unsafe { ah.grh.dgid.raw });
        let dmac = if ah.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
            // SAFETY: The core fills the `roce` member for RoCE address vectors.
            unsafe { ah.__bindgen_anon_1.roce.dmac }
        } else {
            [0; 6]
        };
        let sgid = if ah.grh.sgid_attr.is_null() {
            None
        } else {
            // SAFETY: The core holds a reference to the entry of a modification's address
            // vector for the whole call (`rdma_fill_sgid_attr()`).
            GidAttr::from_raw(unsafe { &*ah.grh.sgid_attr })
        };
        Some(AddressVector {
            port_num: ah.port_num,
            dgid,
            sgid_index: ah.grh.sgid_index,
            hop_limit: ah.grh.hop_limit,
            traffic_class: ah.grh.traffic_class,
            flow_label: ah.grh.flow_label,
            dmac,
            sgid,
        })
    }
}

/// The attributes of a queue pair as the driver reports them to `query_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpQuery {
    /// Current state.
    pub state: QpState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Remote access rights.
    pub access_flags: u32,
    /// The local port.
    pub port_num: u32,
    /// The peer's queue pair number.
    pub dest_qp_num: u32,
    /// Next PSN expected.
    pub rq_psn: u32,
    /// Next PSN to send.
    pub sq_psn: u32,
    /// Local ACK timeout.
    pub timeout: u8,
    /// Retries on timeout.
    pub retry_cnt: u8,
    /// Retries on receiver-not-ready.
    pub rnr_retry: u8,
    /// Queue sizes.
    pub cap: QpCap,
    /// Whether every send work request generates a completion.
    pub signal_all: bool,
}

impl QpQuery {
    pub(crate) fn write_to(
        &self,
        attr: &mut bindings::ib_qp_attr,
        init: &mut bindings::ib_qp_init_attr,
    ) {
        attr.qp_state = self.state as u32;
        attr.cur_qp_state = self.state as u32;
        attr.path_mtu = self.path_mtu as u32;
        attr.qp_access_flags = self.access_flags as c_int;
        attr.port_num = self.port_num;
        attr.dest_qp_num = self.dest_qp_num;
        attr.rq_psn = self.rq_psn;
        attr.sq_psn = self.sq_psn;
        attr.timeout = self.timeout;
        attr.retry_cnt = self.retry_cnt;
        attr.rnr_retry = self.rnr_retry;
        self.cap.write_to(&mut attr.cap);
        self.cap.write_to(&mut init.cap);
        init.sq_sig_type = if self.signal_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }
}

/// The creation attributes of a completion queue (`struct ib_cq_init_attr`).
///
/// The driver sets the number of entries it granted with [`CqInit::grant_cqe`].
pub struct CqInit {
    /// Requested entries.
    pub cqe: u32,
    /// Completion vector.
    pub comp_vector: u32,
    /// Raw creation flags (`enum ib_cq_creation_flags`); a driver refuses those it does not
    /// know.
    pub flags: u32,
    granted: Option<u32>,
    id: Option<u32>,
}

impl CqInit {
    pub(crate) fn from_raw(raw: &bindings::ib_cq_init_attr) -> Self {
        Self {
            cqe: raw.cqe,
            comp_vector: raw.comp_vector,
            flags: raw.flags,
            granted: None,
            id: None,
        }
    }

    /// Report the number of entries granted (at least those requested).
    pub fn grant_cqe(&mut self, cqe: u32) {
        self.granted = Some(cqe);
    }

    pub(crate) fn granted(&self) -> Option<u32> {
        self.granted
    }

    /// Number the completion queue, unique in the device, so that
    /// [`Device::with_cq`](super::Device::with_cq) finds it (for completion events).
    pub fn set_id(&mut self, id: u32) {
        self.id = Some(id);
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.id
    }
}

#[macros::kunit_tests(rust_kernel_rdma_qp)]
mod tests {
    use super::*;

    #[test]
    fn attr_fields_follow_the_mask() {
        let mut raw = pin_init::zeroed::<bindings::ib_qp_attr>();
        raw.qp_state = bindings::ib_qp_state_IB_QPS_RTR;
        raw.path_mtu = bindings::ib_mtu_IB_MTU_4096;
        raw.dest_qp_num = 17;
        raw.rq_psn = 0x1234;
        raw.sq_psn = 0x5678;

        let a = QpAttr::new(&raw, QpAttrMask::STATE | QpAttrMask::DEST_QPN);
        assert_eq!(a.state(), Ok(Some(QpState::Rtr)));
        assert_eq!(a.dest_qp_num(), Some(17));
        // Given but not in the mask: not visible.
        assert_eq!(a.rq_psn(), None);
        assert_eq!(a.sq_psn(), None);
        assert_eq!(a.path_mtu(), Ok(None));
        assert!(a.av().is_none());

        let b = QpAttr::new(&raw, QpAttrMask::PATH_MTU | QpAttrMask::RQ_PSN);
        assert_eq!(b.path_mtu(), Ok(Some(Mtu::Mtu4096)));
        assert_eq!(b.rq_psn(), Some(0x1234));
        assert_eq!(b.state(), Ok(None));
    }

    #[test]
    fn bad_values_are_refused() {
        let mut raw = pin_init::zeroed::<bindings::ib_qp_attr>();
        raw.qp_state = 42;
        raw.path_mtu = 9;
        let a = QpAttr::new(&raw, QpAttrMask::STATE | QpAttrMask::PATH_MTU);
        assert_eq!(a.state(), Err(EINVAL));
        assert_eq!(a.path_mtu(), Err(EINVAL));
    }

    #[test]
    fn roce_av() {
        let mut raw = pin_init::zeroed::<bindings::ib_qp_attr>();
        raw.ah_attr.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        raw.ah_attr.port_num = 3;
        raw.ah_attr.grh.dgid.raw = Gid::from_ipv4([10, 1, 2, 3]).0;
        raw.ah_attr.grh.hop_limit = 64;
        raw.ah_attr.__bindgen_anon_1.roce.dmac = [2, 0, 0, 0, 0, 9];
        let av = QpAttr::new(&raw, QpAttrMask::AV).av().unwrap();
        assert_eq!(av.port_num, 3);
        assert_eq!(av.dgid, Gid::from_ipv4([10, 1, 2, 3]));
        assert_eq!(av.hop_limit, 64);
        assert_eq!(av.dmac, [2, 0, 0, 0, 0, 9]);
        assert_eq!(av.sgid, None);

        let mut entry = pin_init::zeroed::<bindings::ib_gid_attr>();
        entry.gid.raw = Gid::from_ipv4([10, 1, 2, 4]).0;
        entry.gid_type = bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP;
        entry.index = 2;
        entry.port_num = 3;
        raw.ah_attr.grh.sgid_attr = &entry;
        raw.ah_attr.grh.sgid_index = 2;
        let av = QpAttr::new(&raw, QpAttrMask::AV).av().unwrap();
        assert_eq!(
            av.sgid,
            Some(GidAttr {
                port: 3,
                index: 2,
                gid: Gid::from_ipv4([10, 1, 2, 4]),
                gid_type: crate::rdma::GidType::RoceV2,
            })
        );
    }
}
