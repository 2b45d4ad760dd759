// SPDX-License-Identifier: GPL-2.0

//! Work requests: what `post_send` and `post_recv` hand to a driver.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::bindings;
use core::marker::PhantomData;

/// The operation of a send work request (`enum ib_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// `IB_WR_RDMA_WRITE`.
    RdmaWrite,
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm,
    /// `IB_WR_SEND`.
    Send,
    /// `IB_WR_SEND_WITH_IMM`.
    SendWithImm,
    /// `IB_WR_RDMA_READ`.
    RdmaRead,
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp,
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd,
    /// Any other operation, by its raw value.
    Other(u32),
}

impl Opcode {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            bindings::ib_wr_opcode_IB_WR_SEND => Self::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpAndSwp,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAndAdd,
            other => Self::Other(other),
        }
    }

    /// Whether the request is an `ib_rdma_wr` (it names a remote address and key).
    fn is_rdma(self) -> bool {
        matches!(
            self,
            Self::RdmaWrite | Self::RdmaWriteWithImm | Self::RdmaRead
        )
    }
}

/// A scatter/gather element (`struct ib_sge`).
#[repr(transparent)]
pub struct Sge(bindings::ib_sge);

impl Sge {
    /// Start address, in the memory region's IOVA space.
    pub fn addr(&self) -> u64 {
        self.0.addr
    }

    /// Length in bytes.
    pub fn length(&self) -> u32 {
        self.0.length
    }

    /// Local key of the memory region.
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// A send work request (`struct ib_send_wr`), borrowed for a `post_send` call.
pub struct SendWr<'a> {
    raw: &'a bindings::ib_send_wr,
}

impl<'a> SendWr<'a> {
    /// The caller's identifier, reported in the completion.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: `wr_id` and `wr_cqe` share the storage; reading the bits as `u64` is valid
        // either way, and completions hand them back the same way.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// The operation.
    pub fn opcode(&self) -> Opcode {
        Opcode::from_raw(self.raw.opcode)
    }

    /// Whether the request asks for a completion (`IB_SEND_SIGNALED`).
    pub fn signaled(&self) -> bool {
        self.raw.send_flags & bindings::ib_send_flags_IB_SEND_SIGNALED != 0
    }

    /// The flags (`enum ib_send_flags`).
    pub fn flags(&self) -> u32 {
        self.raw.send_flags as u32
    }

    /// The scatter/gather list.
    pub fn sges(&self) -> &'a [Sge] {
        let n = usize::try_from(self.raw.num_sge).unwrap_or(0);
        if n == 0 || self.raw.sg_list.is_null() {
            return &[];
        }
        // SAFETY: The poster provides `num_sge` elements at `sg_list`, valid for the call
        // (`'a`); `Sge` is a transparent `ib_sge`.
        unsafe { core::slice::from_raw_parts(self.raw.sg_list.cast::<Sge>(), n) }
    }

    /// Remote address and key of an RDMA operation; `None` for other operations.
    pub fn rdma(&self) -> Option<(u64, u32)> {
        if !self.opcode().is_rdma() {
            return None;
        }
        // SAFETY: Requests of RDMA operations are the `wr` field (offset 0) of a
        // `struct ib_rdma_wr`, as `rdma_wr()` assumes: uverbs builds them so, kernel posters
        // must.
        let rdma = unsafe { &*core::ptr::from_ref(self.raw).cast::<bindings::ib_rdma_wr>() };
        Some((rdma.remote_addr, rdma.rkey))
    }

    /// Immediate data (`ex.imm_data`), in network byte order as posted.
    pub fn imm_data(&self) -> u32 {
        // SAFETY: Both members of `ex` are 32-bit integers.
        unsafe { self.raw.ex.imm_data }
    }
}

/// A receive work request (`struct ib_recv_wr`), borrowed for a `post_recv` call.
pub struct RecvWr<'a> {
    raw: &'a bindings::ib_recv_wr,
}

impl<'a> RecvWr<'a> {
    /// The caller's identifier, reported in the completion that consumes the request.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: `wr_id` and `wr_cqe` share the storage; reading the bits as `u64` is valid
        // either way, and completions hand them back the same way.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// The scatter/gather list.
    pub fn sges(&self) -> &'a [Sge] {
        let n = usize::try_from(self.raw.num_sge).unwrap_or(0);
        if n == 0 || self.raw.sg_list.is_null() {
            return &[];
        }
        // SAFETY: The poster provides `num_sge` elements at `sg_list`, valid for the call
        // (`'a`); `Sge` is a transparent `ib_sge`.
        unsafe { core::slice::from_raw_parts(self.raw.sg_list.cast::<Sge>(), n) }
    }
}

/// A raw element of a work request list: `struct ib_send_wr` or `struct ib_recv_wr`.
pub trait RawWr: private::Sealed {
    /// The element after this one (null at the end).
    fn next_raw(&self) -> *const Self;
}

mod private {
    pub trait Sealed {}
    impl Sealed for crate::bindings::ib_send_wr {}
    impl Sealed for crate::bindings::ib_recv_wr {}
}

impl RawWr for bindings::ib_send_wr {
    fn next_raw(&self) -> *const Self {
        self.next
    }
}

impl RawWr for bindings::ib_recv_wr {
    fn next_raw(&self) -> *const Self {
        self.next
    }
}

/// The list of work requests of one `post_send` or `post_recv` call.
///
/// The driver takes the requests in order. When it fails, the request it took last (or the
/// first, if it took none) is reported to the poster as the one that failed (`bad_wr`):
/// requests before it were posted, it and those after were not.
pub struct WrList<'a, R: RawWr> {
    next: *const R,
    last: *const R,
    _p: PhantomData<&'a R>,
}

/// The send work requests of one `post_send` call.
pub type SendWrs<'a> = WrList<'a, bindings::ib_send_wr>;

/// The receive work requests of one `post_recv` call.
pub type RecvWrs<'a> = WrList<'a, bindings::ib_recv_wr>;

impl<'a, R: RawWr> WrList<'a, R> {
    /// # Safety
    ///
    /// `first` is null or the head of a list of work requests valid for `'a`.
    pub(crate) unsafe fn new(first: *const R) -> Self {
        Self {
            next: first,
            last: first,
            _p: PhantomData,
        }
    }

    /// The request [`WrList::take`] would take, without taking it.
    fn peek_raw(&self) -> Option<&'a R> {
        // SAFETY: A non-null `next` is a request of the list, valid for `'a` (type invariants
        // of `new`).
        unsafe { self.next.as_ref() }
    }

    /// Take the next request; it becomes the one reported as failed.
    fn take(&mut self) -> Option<&'a R> {
        let raw = self.peek_raw()?;
        self.last = self.next;
        self.next = raw.next_raw();
        Some(raw)
    }

    /// The request to report as failed.
    pub(crate) fn failed(&self) -> *const R {
        self.last
    }
}

impl<'a> SendWrs<'a> {
    /// The request [`Iterator::next`] would take, without taking it.
    pub fn peek(&self) -> Option<SendWr<'a>> {
        self.peek_raw().map(|raw| SendWr { raw })
    }
}

impl<'a> Iterator for SendWrs<'a> {
    type Item = SendWr<'a>;

    fn next(&mut self) -> Option<SendWr<'a>> {
        self.take().map(|raw| SendWr { raw })
    }
}

impl<'a> Iterator for RecvWrs<'a> {
    type Item = RecvWr<'a>;

    fn next(&mut self) -> Option<RecvWr<'a>> {
        self.take().map(|raw| RecvWr { raw })
    }
}

#[macros::kunit_tests(rust_kernel_rdma_wr)]
mod tests {
    use super::*;

    /// A list of three requests: RDMA WRITE with two SGEs, SEND, RDMA READ.
    fn list(rdma: &mut [bindings::ib_rdma_wr; 3], sges: &mut [bindings::ib_sge; 2]) {
        let ops = [
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            bindings::ib_wr_opcode_IB_WR_SEND,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ,
        ];
        for (i, op) in ops.into_iter().enumerate() {
            rdma[i].wr.opcode = op;
            rdma[i].wr.__bindgen_anon_1.wr_id = 100 + i as u64;
            rdma[i].remote_addr = 0x10_0000 * (i as u64 + 1);
            rdma[i].rkey = 40 + i as u32;
        }
        rdma[0].wr.sg_list = sges.as_mut_ptr();
        rdma[0].wr.num_sge = 2;
        rdma[0].wr.send_flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        let second: *mut bindings::ib_send_wr = &raw mut rdma[1].wr;
        let third: *mut bindings::ib_send_wr = &raw mut rdma[2].wr;
        rdma[0].wr.next = second;
        rdma[1].wr.next = third;
    }

    #[test]
    fn walk_and_failed_request() {
        let mut sges: [bindings::ib_sge; 2] = pin_init::zeroed();
        sges[0].addr = 0x1000;
        sges[0].length = 64;
        sges[0].lkey = 7;
        sges[1].addr = 0x2000;
        sges[1].length = 32;
        sges[1].lkey = 8;
        let mut rdma: [bindings::ib_rdma_wr; 3] = pin_init::zeroed();
        list(&mut rdma, &mut sges);
        let first: *const bindings::ib_send_wr = &raw const rdma[0].wr;
        // SAFETY: `first` heads a list of three requests that outlive `wrs`.
        let mut wrs = unsafe { SendWrs::new(first) };
        // Nothing taken yet: the first request is the failed one.
        assert_eq!(wrs.failed(), first);
        // Peeking takes nothing.
        assert_eq!(wrs.peek().map(|w| w.wr_id()), Some(100));
        assert_eq!(wrs.peek().and_then(|w| w.rdma()), Some((0x10_0000, 40)));
        assert_eq!(wrs.failed(), first);

        let w = wrs.next().expect("first request");
        assert_eq!(w.opcode(), Opcode::RdmaWrite);
        assert_eq!(w.wr_id(), 100);
        assert!(w.signaled());
        assert_eq!(w.rdma(), Some((0x10_0000, 40)));
        let s = w.sges();
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].addr(), s[1].length(), s[1].lkey()), (0x2000, 32, 8));
        assert_eq!(wrs.failed(), first);

        let w = wrs.next().expect("second request");
        assert_eq!(w.opcode(), Opcode::Send);
        assert!(!w.signaled());
        // A SEND is a plain `ib_send_wr`: no remote address is read from it.
        assert_eq!(w.rdma(), None);
        assert!(w.sges().is_empty());
        assert_eq!(wrs.failed(), &raw const rdma[1].wr);

        assert_eq!(wrs.peek().map(|w| w.wr_id()), Some(102));
        let w = wrs.next().expect("third request");
        assert_eq!(w.opcode(), Opcode::RdmaRead);
        assert_eq!(w.rdma(), Some((0x30_0000, 42)));
        assert!(wrs.peek().is_none());
        assert!(wrs.next().is_none());
        assert_eq!(wrs.failed(), &raw const rdma[2].wr);
    }

    #[test]
    fn empty_list_and_unknown_opcode() {
        // SAFETY: A null list is empty.
        let mut wrs = unsafe { SendWrs::new(core::ptr::null()) };
        assert!(wrs.peek().is_none());
        assert!(wrs.next().is_none());
        assert_eq!(Opcode::from_raw(0x7f), Opcode::Other(0x7f));
    }

    #[test]
    fn receive_requests_and_failed_request() {
        let mut sges: [bindings::ib_sge; 2] = pin_init::zeroed();
        sges[0].addr = 0x4000;
        sges[0].length = 16;
        sges[0].lkey = 9;
        let mut wrs: [bindings::ib_recv_wr; 2] = pin_init::zeroed();
        wrs[0].__bindgen_anon_1.wr_id = 7;
        wrs[0].sg_list = sges.as_mut_ptr();
        wrs[0].num_sge = 1;
        wrs[1].__bindgen_anon_1.wr_id = 8;
        // A negative count is no SGE at all.
        wrs[1].sg_list = sges.as_mut_ptr();
        wrs[1].num_sge = -1;
        let second: *const bindings::ib_recv_wr = &raw const wrs[1];
        wrs[0].next = second.cast_mut();
        let first: *const bindings::ib_recv_wr = &raw const wrs[0];
        // SAFETY: `first` heads a list of two requests that outlive `list`.
        let mut list = unsafe { RecvWrs::new(first) };
        assert_eq!(list.failed(), first);
        let w = list.next().expect("first request");
        assert_eq!(w.wr_id(), 7);
        let s = w.sges();
        assert_eq!(
            (s.len(), s[0].addr(), s[0].length(), s[0].lkey()),
            (1, 0x4000, 16, 9)
        );
        assert_eq!(list.failed(), first);
        let w = list.next().expect("second request");
        assert_eq!(w.wr_id(), 8);
        assert!(w.sges().is_empty());
        assert_eq!(list.failed(), second);
        assert!(list.next().is_none());
        assert_eq!(list.failed(), second);
    }
}
