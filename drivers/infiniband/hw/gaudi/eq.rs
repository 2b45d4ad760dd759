// SPDX-License-Identifier: GPL-2.0

//! The event queue: asynchronous events written by the device into host memory.
//!
//! Documentation/infiniband/gaudi/device-model-1.rst ("Event queue") is the reference. The queue
//! belongs to the kernel: its memory is addressed by bus address, never through the device MMU,
//! so no user work request can reach it.

use kernel::{
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
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            dma_mb,
            Read, //
        },
    },
};

use crate::{
    hw::Eqe,
    regs,
    shared::Bar, //
};

/// log2 of the number of entries.
const LOG_SIZE: u32 = 8;
const ENTRIES: u32 = 1 << LOG_SIZE;
/// 32-bit words per entry.
const WORDS: usize = size_of::<Eqe>() / 4;

/// Entries handed out per call of [`EventQueue::poll`].
pub(crate) const BATCH: usize = 16;

/// Event types.
pub(crate) const PORT_UP: u8 = 1;
pub(crate) const PORT_DOWN: u8 = 2;
pub(crate) const QP_ERROR: u8 = 3;
pub(crate) const CQ_OVERFLOW: u8 = 4;
pub(crate) const MMU_FAULT: u8 = 5;
pub(crate) const DEVICE_FATAL: u8 = 6;
pub(crate) const COMPLETION: u8 = 7;
/// (1.3) A port's Ethernet rings moved after they were armed.
pub(crate) const ETH: u8 = 8;

/// The event queue of a device.
pub(crate) struct EventQueue {
    mem: Coherent<[u32]>,
    /// Consumer index: entries taken since the queue was enabled (wrapping; the ring position
    /// and the owner bit's pass are derived from it). Only the interrupt thread changes it.
    ci: Atomic<u32>,
    /// `EQ_OVERFLOWS` when last looked at.
    overflows: Atomic<u32>,
}

impl EventQueue {
    /// Allocate the queue's memory, zeroed (no entry is valid in pass 0 until written).
    pub(crate) fn new(dev: &Device<Bound>) -> Result<Self> {
        Ok(Self {
            mem: Coherent::zeroed_slice(dev, ENTRIES as usize * WORDS, GFP_KERNEL)?,
            ci: Atomic::new(0),
            overflows: Atomic::new(0),
        })
    }

    /// Point the device at the queue and enable it (the device zeroes both indexes).
    pub(crate) fn enable(&self, bar: &Bar<'_>) {
        let addr = self.mem.dma_address();
        self.ci.store(0, Relaxed);
        bar.write_reg(regs::EQ_BASE_LO::from_raw(addr as u32));
        bar.write_reg(regs::EQ_BASE_HI::from_raw((addr >> 32) as u32));
        bar.write_reg(regs::EQ_LOG_SIZE::from_raw(LOG_SIZE));
        bar.write_reg(regs::EQ_CTRL::zeroed().with_enable(true));
        self.overflows
            .store(bar.read(regs::EQ_OVERFLOWS).into_raw(), Relaxed);
    }

    /// Stop the device writing to the queue.
    pub(crate) fn disable(bar: &Bar<'_>) {
        bar.write_reg(regs::EQ_CTRL::zeroed());
    }

    /// Take up to `out.len()` new entries into `out` and return how many, acknowledging them
    /// to the device.
    pub(crate) fn poll(&self, bar: &Bar<'_>, out: &mut [Eqe]) -> Result<usize> {
        let mut ci = self.ci.load(Relaxed);
        let mut n = 0;
        while n < out.len() {
            let base = (ci & (ENTRIES - 1)) as usize * WORDS;
            let entry = io_project!(&self.mem, [try: base..base + WORDS]).try_cast::<Eqe>()?;
            // The owner bit is 1 in even passes over the ring, 0 in odd ones.
            let owner = u8::from((ci >> LOG_SIZE) & 1 == 0);
            let seen: u8 = io_read!(entry, .owner);
            if seen & 1 != owner {
                break;
            }
            // Read the entry only after seeing its owner bit.
            dma_mb(Read);
            out[n] = entry.copy_read();
            n += 1;
            ci = ci.wrapping_add(1);
        }
        if n > 0 {
            self.ci.store(ci, Relaxed);
            bar.write_reg(regs::EQ_CI::from_raw(ci));
        }
        Ok(n)
    }

    /// Events the device dropped (queue full) since the last call, if any.
    pub(crate) fn new_overflows(&self, bar: &Bar<'_>) -> u32 {
        let now = bar.read(regs::EQ_OVERFLOWS).into_raw();
        now.wrapping_sub(self.overflows.xchg(now, Relaxed))
    }

    /// Entries one interrupt-thread run takes at most: one ring's worth. Entries written
    /// meanwhile raise their own interrupt.
    pub(crate) const fn max_per_run() -> usize {
        ENTRIES as usize
    }
}
