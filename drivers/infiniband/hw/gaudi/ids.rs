// SPDX-License-Identifier: GPL-2.0

//! QP and CQ numbers, and the identities of protection domains.
//!
//! A QP number is an index into the QPs of one port, and the collective engine needs a QP to
//! have the same index on every port it uses: an index is held per port. A QP of the standard
//! verbs holds its index on every port (its port is chosen when it enters INIT); a QP set holds
//! it on the ports of the set, all at once or not at all. A CQ number is held on every port.

use kernel::{
    id_pool::IdPool,
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        SpinLock,
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
    /// CQ numbers in use; 0 and those the device lacks are held from the start.
    #[pin]
    cqs: SpinLock<IdPool>,
    /// Where the search for a free CQ number starts: numbers are handed out in turn, so that
    /// one freed is not reused soon.
    next_cq: Atomic<u32>,
}

impl Ids {
    /// Numbers of a device with `ports` ports (1 to 32), `max_qps` QPs and `max_cqs` CQs per
    /// port.
    pub(crate) fn new(ports: u32, max_qps: u32, max_cqs: u32) -> Result<impl PinInit<Self, Error>> {
        let mut cqs = IdPool::with_capacity(max_cqs as usize, GFP_KERNEL)?;
        // The pool may be larger than asked for.
        for id in Iterator::chain(0..FIRST_CQN as usize, max_cqs as usize..cqs.capacity()) {
            if let Some(unused) = cqs.find_unused_id(id) {
                unused.acquire();
            }
        }
        Ok(try_pin_init!(Self {
            ports,
            max_qps,
            max_cqs,
            qps <- XArray::new(AllocKind::Alloc),
            next_qp: Atomic::new(kernel::random::get_random_u32()),
            cqs <- new_spinlock!(cqs),
            next_cq: Atomic::new(FIRST_CQN),
        }))
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

    /// The QP indexes held on port index `port`.
    pub(crate) fn qp_indexes_on(&self, port: usize) -> Result<KVec<u32>> {
        let mut out = KVec::new();
        let held = self.qps.lock();
        for i in FIRST_QPN..self.max_qps {
            if held
                .get(i as usize)
                .is_some_and(|h| port < 32 && *h & (1 << port) != 0)
            {
                out.push(i, GFP_ATOMIC)?;
            }
        }
        Ok(out)
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

    /// Take a free CQ number: the next free one after the last handed out, wrapping.
    pub(crate) fn alloc_cqn(&self) -> Result<u32> {
        let mut pool = self.cqs.lock();
        let next = self.next_cq.load(Relaxed);
        let from = if (FIRST_CQN..self.max_cqs).contains(&next) {
            next
        } else {
            FIRST_CQN
        };
        let id = match pool.find_unused_id(from as usize) {
            Some(unused) => unused.acquire(),
            None => pool
                .find_unused_id(FIRST_CQN as usize)
                .ok_or(ENOSPC)?
                .acquire(),
        };
        // Every number beyond the device's CQs is held from the start (see `new`).
        self.next_cq.store(id as u32 + 1, Relaxed);
        Ok(id as u32)
    }

    /// Give back CQ number `id`.
    pub(crate) fn free_cqn(&self, id: u32) {
        if (FIRST_CQN..self.max_cqs).contains(&id) {
            self.cqs.lock().release_id(id as usize);
        }
    }
}

/// The identity of a protection domain: what a memory region and a QP are bound to, so that
/// one PD's keys and addresses never resolve in another. Identities are handed out in order
/// and never reused, even after the PD is gone: when they run out, no PD is created any more
/// (at one a microsecond that takes half a million years, from the default start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PdId(u64);

/// Where the next [`PdId`] comes from.
pub(crate) struct PdIds {
    next: Atomic<u64>,
}

impl PdIds {
    /// Identities from `first` (at least 1) on.
    pub(crate) fn new(first: u64) -> Self {
        Self {
            next: Atomic::new(first.max(1)),
        }
    }

    /// A fresh identity; `ENOSPC` once they have run out (the last one handed out is
    /// `u64::MAX - 1`).
    pub(crate) fn take(&self) -> Result<PdId> {
        let mut cur = self.next.load(Relaxed);
        loop {
            let next = cur.checked_add(1).ok_or(ENOSPC)?;
            match self.next.cmpxchg(cur, next, Relaxed) {
                Ok(_) => return Ok(PdId(cur)),
                Err(seen) => cur = seen,
            }
        }
    }
}
