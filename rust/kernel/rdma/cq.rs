// SPDX-License-Identifier: GPL-2.0

//! Work completions: what a driver's `poll_cq` reports (`struct ib_wc`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    prelude::*,
    rbtree::RBTree,
    rdma::device::{Driver, Qp},
};
use core::marker::PhantomData;

/// Status of a work completion (`enum ib_wc_status`), those a driver reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcStatus {
    /// The request completed.
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// The request was longer than the device allows.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// The request or the queue pair was invalid.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// The device could not access the local memory of the request.
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed: the queue pair went to the error state before the request ran.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// The responder refused access to the remote memory.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// The responder failed the operation.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// No acknowledgement after every retry.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// The responder was not ready (receiver not ready NAKs) after every retry.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    /// The responder found the request invalid.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// Any other error; the vendor error code says more.
    GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
}

/// Operation of a work completion (`enum ib_wc_opcode`), those a driver reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WcOpcode {
    /// An RDMA WRITE this side sent (with or without immediate).
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// An RDMA WRITE with immediate this side received.
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

/// One work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// The work request's identifier (0 for a received WRITE with immediate: no receive request
    /// names it).
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Operation.
    pub opcode: WcOpcode,
    /// Device-specific error code, 0 on success.
    pub vendor_err: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data, in host order, of a received WRITE with immediate.
    pub imm: Option<u32>,
    /// The port the completion belongs to (from 1).
    pub port: u32,
}

/// Where a driver's `poll_cq` puts the completions it takes from its queue: the caller's
/// array of `struct ib_wc`. It also finds the queue pairs that complete on the queue.
///
/// # Invariants
///
/// `wc` is valid for writes of `cap` entries for `'a`; `len <= cap` entries were written.
/// `qps` is the locked table of the queue pairs of the polled completion queue: addresses of
/// live `Qp<T>` with initialised data, kept for `'a` (see `CqGlue`).
pub struct WcSink<'a, T: Driver> {
    wc: *mut bindings::ib_wc,
    cap: usize,
    len: usize,
    qps: &'a RBTree<u32, usize>,
    _p: PhantomData<(&'a mut bindings::ib_wc, T)>,
}

impl<'a, T: Driver> WcSink<'a, T> {
    /// # Safety
    ///
    /// `wc` must be valid for writes of `cap` entries for `'a` (or `cap` must be 0); `qps` must
    /// be the locked table of the queue pairs of the completion queue being polled.
    pub(crate) unsafe fn new(
        wc: *mut bindings::ib_wc,
        cap: usize,
        qps: &'a RBTree<u32, usize>,
    ) -> Self {
        // INVARIANT: By the safety requirements; nothing is written yet.
        Self {
            wc,
            cap,
            len: 0,
            qps,
            _p: PhantomData,
        }
    }

    /// The queue pair numbered `qpn`, if it is one that completes on the polled queue (its
    /// send or receive completion queue). It is not destroyed while the poll goes on.
    pub fn qp(&self, qpn: u32) -> Option<&'a Qp<T>> {
        let raw = *self.qps.get(&qpn)?;
        // SAFETY: Entries of `qps` are live queue pairs with initialised data, kept for `'a`
        // (type invariants).
        Some(unsafe { Qp::<T>::from_raw(raw as *mut bindings::ib_qp) })
    }

    /// Completions written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The caller's array is full: the driver leaves the rest in its queue.
    pub fn is_full(&self) -> bool {
        self.len == self.cap
    }

    /// Report `wc` of queue pair `qp`. `ENOSPC` if the array is full.
    pub fn push(&mut self, qp: &Qp<T>, wc: &Wc) -> Result {
        if self.is_full() {
            return Err(ENOSPC);
        }
        let mut raw: bindings::ib_wc = pin_init::zeroed();
        raw.__bindgen_anon_1.wr_id = wc.wr_id;
        raw.status = wc.status as u32;
        raw.opcode = wc.opcode as u32;
        raw.vendor_err = wc.vendor_err;
        raw.byte_len = wc.byte_len;
        raw.qp = qp.as_raw();
        if let Some(imm) = wc.imm {
            raw.ex.imm_data = imm.to_be();
            raw.wc_flags = bindings::ib_wc_flags_IB_WC_WITH_IMM as c_int;
        }
        raw.pkey_index = 0;
        raw.port_num = wc.port;
        // SAFETY: `len < cap`, so the entry is inside the array, valid for writes by the type
        // invariants.
        unsafe { self.wc.add(self.len).write(raw) };
        // INVARIANT: One more entry was written, at most `cap`.
        self.len += 1;
        Ok(())
    }
}
