// SPDX-License-Identifier: GPL-2.0

//! Address spaces of the device MMU: one ASID per protection domain, whose tables the chip's
//! owner keeps ([`kernel::net::gaudi::chip::Chip::mmu_space`]); the device VAs in each, and
//! when a VA may be reused.
//!
//! Every protection domain gets an ASID of its own ([`AddressSpace`]). The NIC translates the
//! data accesses of a QP in its context's ASID, so no QP reaches a page its ASID does not map,
//! whatever address or key it names. A region a peer may write is entered at its iova, the
//! address the peer puts in its WRITEs (the responder translates it unchanged); any other
//! region at device VAs from [`LOCAL_VA_START`], where no iova of such a region lies.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    prelude::*,
    sync::{
        Arc,
        CondVar,
        CondVarTimeoutResult,
        Mutex,
        SpinLockIrq, //
    },
    time::msecs_to_jiffies,
};

use crate::{
    mmu::{
        Domain,
        Flags,
        Held,
        Place,
        VaRange,
        VaSpace, //
    },
    nic::Nic,
};

/// Device VAs of regions no peer writes: from 2^47 to the end of an ASID's VAs. Below are the
/// iovas of regions peers write (user-space addresses, or addresses a user chose).
pub(crate) const LOCAL_VA_START: u64 = 1 << 47;

/// The largest memory region: what the device VAs of an ASID's local regions hold.
pub(crate) const MAX_MR_SIZE: u64 = crate::rc::WQ_ARRAY_VA - LOCAL_VA_START;

/// The work requests the device may still execute in an address space, counted by epoch.
///
/// A range of device VA that leaves the space is held until every WQE posted before it left
/// has retired (completed, failed or flushed from a stopped QP), so that such a WQE never
/// reaches what is mapped at the range next. WQEs count in the epoch they were posted in; a
/// new epoch starts only once the one before the current has drained, so at most two epochs
/// have work outstanding, and a range that left in epoch E may be reused once E has drained.
/// The kernel counts the WQEs it writes (the standard verbs); QP sets' WQEs are user space's
/// (see "Threat model" in design.rst).
struct Work {
    /// The current epoch; from 2, so that the two before it exist.
    epoch: u64,
    /// WQEs outstanding by epoch parity: the current epoch's and the one before's.
    inflight: [u64; 2],
}

impl Work {
    /// The newest epoch whose work has all retired.
    fn drained(&self) -> u64 {
        let cur = self.inflight[(self.epoch & 1) as usize];
        let prev = self.inflight[((self.epoch + 1) & 1) as usize];
        match (prev, cur) {
            (0, 0) => self.epoch,
            (0, _) => self.epoch - 1,
            _ => self.epoch - 2,
        }
    }

    /// Start a new epoch if the one before the current has drained.
    fn advance(&mut self) {
        if self.inflight[((self.epoch + 1) & 1) as usize] == 0 {
            self.epoch += 1;
        }
    }
}

/// How long a registration at a chosen VA waits for the work that still names a range there
/// (a QP's transport timeouts end it sooner; design.rst, "Reuse of device VAs").
const HELD_WAIT_MS: u32 = 10_000;

/// One ASID and its translation domain: the device VAs of one protection domain.
#[pin_data(PinnedDrop)]
pub(crate) struct AddressSpace {
    nic: Arc<Nic>,
    asid: u32,
    #[pin]
    domain: Mutex<Domain>,
    /// Taken inside a QP's send queue lock.
    #[pin]
    work: SpinLockIrq<Work>,
    /// Notified when an epoch parity's outstanding work drops to none.
    #[pin]
    drained: CondVar,
}

impl AddressSpace {
    /// Take an ASID, with nothing mapped, from the chip's owner.
    pub(crate) fn new(nic: &Arc<Nic>, dev: &Device<Bound>) -> Result<Arc<Self>> {
        let chip = nic.chip()?;
        let asid = chip.mmu_space(dev)?;
        Arc::pin_init(
            try_pin_init!(Self {
                nic: nic.clone(),
                asid,
                domain <- kernel::new_mutex!(Domain {
                    space: KBox::pin_init(
                        VaSpace::new(LOCAL_VA_START, crate::rc::WQ_ARRAY_VA),
                        GFP_KERNEL,
                    )?,
                    held: KVec::new(),
                }),
                work <- kernel::new_spinlock_irq!(Work {
                    epoch: 2,
                    inflight: [0; 2],
                }),
                drained <- kernel::new_condvar!(),
            }),
            GFP_KERNEL,
        )
        // From here on the drop gives the ASID back.
        .inspect_err(|_| chip.mmu_space_free(asid))
    }

    /// The ASID.
    pub(crate) fn asid(&self) -> u32 {
        self.asid
    }

    /// A WQE is posted in the space: returns what [`AddressSpace::retire_work`] takes back
    /// when it retires.
    pub(crate) fn post_work(&self) -> bool {
        let mut w = self.work.lock();
        let parity = w.epoch & 1;
        w.inflight[parity as usize] += 1;
        parity == 1
    }

    /// A WQE posted when [`AddressSpace::post_work`] returned `parity` retired: the device
    /// executes no more of it.
    pub(crate) fn retire_work(&self, parity: bool) {
        let mut w = self.work.lock();
        let n = &mut w.inflight[usize::from(parity)];
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.drained.notify_all();
        }
    }

    /// Give back the held ranges whose epoch has drained; start a new epoch when a range
    /// waits on the current one.
    fn reclaim(&self, m: &mut Domain) {
        if m.held.is_empty() {
            return;
        }
        let drained = {
            let mut w = self.work.lock();
            let drained = w.drained();
            let epoch = w.epoch;
            if m.held.iter().any(|h| h.epoch == epoch) {
                w.advance();
            }
            drained
        };
        m.reclaim(&self.nic.dev, drained);
    }

    /// `range` left the space: give it back, or hold it while work posted before may name it.
    fn release(&self, m: &mut Domain, range: VaRange) {
        let epoch = {
            let mut w = self.work.lock();
            if w.drained() == w.epoch {
                None
            } else {
                let epoch = w.epoch;
                // The WQEs posted from now on cannot name it: count them apart.
                w.advance();
                Some(epoch)
            }
        };
        match epoch {
            None => m.give_back(&self.nic.dev, range),
            Some(epoch) => {
                if m.held.push(Held { range, epoch }, GFP_KERNEL).is_err() {
                    // Not tracked, not reused: the VA stays taken while the space lives.
                    dev_warn!(
                        self.nic.dev,
                        "device VAs {:#x}+{:#x} kept out of reuse\n",
                        range.start,
                        range.len
                    );
                }
            }
        }
    }

    /// Wait until no held range overlaps `[start, start + len)`, for at most
    /// [`HELD_WAIT_MS`]: `EBUSY` if one still does, `ERESTARTSYS` on a signal.
    fn wait_unheld(&self, start: u64, len: u64) -> Result {
        let end = start.checked_add(len).ok_or(EINVAL)?;
        let mut left = msecs_to_jiffies(HELD_WAIT_MS);
        loop {
            let newest = {
                let mut m = self.domain.lock();
                self.reclaim(&mut m);
                m.held
                    .iter()
                    .filter(|h| h.range.start < end && start < h.range.start + h.range.len)
                    .map(|h| h.epoch)
                    .max()
            };
            let Some(epoch) = newest else {
                return Ok(());
            };
            let mut w = self.work.lock();
            if w.drained() >= epoch
                || (w.epoch == epoch && w.inflight[((epoch + 1) & 1) as usize] == 0)
            {
                // Drained, or an epoch can start: reclaim again.
                continue;
            }
            if left == 0 {
                kernel::ratelimited!(dev_info!(
                    self.nic.dev,
                    "ASID {}: device VAs {:#x}+{:#x} still named by work posted before their region left\n",
                    self.asid,
                    start,
                    len
                ));
                return Err(EBUSY);
            }
            left = match self.drained.wait_interruptible_timeout(&mut w, left) {
                CondVarTimeoutResult::Timeout => 0,
                CondVarTimeoutResult::Woken { jiffies } => jiffies,
                CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
            };
        }
    }

    /// Enter `count` pages of `1 << shift` bytes, at the addresses `pages` yields, at `place`.
    pub(crate) fn map(
        self: &Arc<Self>,
        dev: &Device<Bound>,
        place: Place,
        mut pages: impl Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: Flags,
    ) -> Result<Mapping> {
        let len = count.checked_shl(shift).ok_or(EINVAL)?;
        match place {
            Place::At(start) => self.wait_unheld(start, len)?,
            Place::Anywhere => self.reclaim(&mut self.domain.lock()),
        }
        let range = self.domain.lock().take(place, len, 1 << shift)?;
        let entered = self.nic.chip().and_then(|chip| {
            chip.mmu_map(dev, self.asid, range.start, &mut pages, count, shift, flags)
        });
        if let Err(e) = entered {
            // The range was never handed out: no work names it.
            self.domain.lock().give_back(&self.nic.dev, range);
            return Err(e);
        }
        Ok(Mapping {
            space: self.clone(),
            range,
            shift,
        })
    }
}

/// Pages entered in an address space; they leave it when this is dropped, and it returns once
/// the device has forgotten their translations.
pub(crate) struct Mapping {
    space: Arc<AddressSpace>,
    range: VaRange,
    shift: u32,
}

impl Mapping {
    /// The device VA of the first page.
    pub(crate) fn va(&self) -> u64 {
        self.range.start
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let s = &self.space;
        // Without the chip (the driver is unbound from it), its owner dropped the ASID's
        // tables already.
        if let Ok(chip) = s.nic.chip() {
            chip.mmu_unmap(
                s.asid,
                self.range.start,
                self.range.len >> self.shift,
                self.shift,
            );
        }
        // The device has forgotten the translations: the VAs may be handed out again, once no
        // work posted before names them.
        s.release(&mut s.domain.lock(), self.range);
    }
}

#[pinned_drop]
impl PinnedDrop for AddressSpace {
    fn drop(self: Pin<&mut Self>) {
        // The ASID translates nothing more, and its tables go, before another protection
        // domain gets it.
        if let Ok(chip) = self.nic.chip() {
            chip.mmu_space_free(self.asid);
        }
    }
}
