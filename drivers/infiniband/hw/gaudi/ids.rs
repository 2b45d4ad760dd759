// SPDX-License-Identifier: GPL-2.0

//! QP and CQ numbers.
//!
//! A QP number is an index into the QPs of one port, and the collective engine needs a QP to
//! have the same index on every port it uses: an index is held per port. A QP of the standard
//! verbs holds its index on every port (its port is chosen when it enters INIT); a QP set holds
//! it on the ports of the set, all at once or not at all. A CQ number is held on every port.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    xarray::{
        AllocKind,
        Guard,
        XArray, //
    },
};

/// QP numbers 0 and 1 are special in InfiniBand (SMI, GSI); the NIC has neither.
pub(crate) const FIRST_QPN: u32 = 2;

/// CQ number 0 is left unused, so that a zeroed CQE names no CQ.
const FIRST_CQN: u32 = 1;

/// The QP and CQ numbers of a device in use.
#[pin_data]
pub(crate) struct Ids {
    ports: u32,
    max_qps: u32,
    max_cqs: u32,
    /// By QP index: the ports (bit n: port index n) holding it.
    #[pin]
    qps: XArray<KBox<u32>>,
    next_qp: Atomic<u32>,
    /// CQ numbers in use.
    #[pin]
    cqs: XArray<KBox<u32>>,
    next_cq: Atomic<u32>,
}

impl Ids {
    /// Numbers of a device with `ports` ports (1 to 32), `max_qps` QPs and `max_cqs` CQs per
    /// port.
    pub(crate) fn new(ports: u32, max_qps: u32, max_cqs: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ports,
            max_qps,
            max_cqs,
            qps <- XArray::new(AllocKind::Alloc),
            next_qp: Atomic::new(kernel::random::get_random_u32()),
            cqs <- XArray::new(AllocKind::Alloc),
            next_cq: Atomic::new(FIRST_CQN),
        })
    }

    /// Every port of the device, as a mask of port indexes.
    pub(crate) fn all_ports(&self) -> u32 {
        u32::MAX >> (32 - self.ports)
    }

    /// Take a QP index on every port of `ports` (a mask of port indexes) at once: `want`, or
    /// the next index free on all of them, counting up in random steps so that an index freed
    /// is not reused soon. `EINVAL` for a port the device lacks or an index out of range, `EBUSY` if `want`
    /// is held on any of the ports, `ENOSPC` if no index is free on all of them.
    pub(crate) fn alloc_qp_index(&self, ports: u32, want: Option<u32>) -> Result<u32> {
        let end = self.max_qps;
        if ports == 0 || ports & !self.all_ports() != 0 {
            return Err(EINVAL);
        }
        let entry = KBox::new(ports, GFP_KERNEL)?;
        let mut held = self.qps.lock();
        let free = |held: &Guard<'_, KBox<u32>>, i: u32| match held.get(i as usize) {
            Some(h) => *h & ports == 0,
            None => true,
        };
        let index = match want {
            Some(i) if !(FIRST_QPN..end).contains(&i) => return Err(EINVAL),
            Some(i) if !free(&held, i) => return Err(EBUSY),
            Some(i) => i,
            None => {
                // From a random start, counting up in random steps: a peer cannot guess the
                // QPNs in use, and an index freed is still not reused soon.
                let span = end.saturating_sub(FIRST_QPN);
                let step = 1 + kernel::random::get_random_u32_below(64);
                let start = self.next_qp.fetch_add(step, Relaxed) % span.max(1);
                (0..span)
                    .map(|n| FIRST_QPN + (start + n) % span)
                    .find(|&i| free(&held, i))
                    .ok_or(ENOSPC)?
            }
        };
        match held.get_mut(index as usize) {
            Some(h) => *h |= ports,
            None => {
                held.store(index as usize, entry, GFP_KERNEL)
                    .map_err(|e| e.error)?;
            }
        }
        Ok(index)
    }

    /// Give back QP index `index` on the ports of `ports`.
    pub(crate) fn free_qp_index(&self, index: u32, ports: u32) {
        let mut held = self.qps.lock();
        let empty = match held.get_mut(index as usize) {
            Some(h) => {
                *h &= !ports;
                *h == 0
            }
            None => false,
        };
        if empty {
            held.remove(index as usize);
        }
    }

    /// Take a free CQ number.
    pub(crate) fn alloc_cqn(&self) -> Result<u32> {
        let entry = KBox::new(0u32, GFP_KERNEL)?;
        let span = self.max_cqs.saturating_sub(FIRST_CQN);
        let mut held = self.cqs.lock();
        for _ in 0..span {
            let n = self.next_cq.fetch_add(1, Relaxed);
            let id = FIRST_CQN + n.wrapping_sub(FIRST_CQN) % span;
            if held.get(id as usize).is_none() {
                held.store(id as usize, entry, GFP_KERNEL)
                    .map_err(|e| e.error)?;
                return Ok(id);
            }
        }
        Err(ENOSPC)
    }

    /// Give back CQ number `id`.
    pub(crate) fn free_cqn(&self, id: u32) {
        self.cqs.lock().remove(id as usize);
    }
}
