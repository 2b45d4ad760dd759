// SPDX-License-Identifier: GPL-2.0

//! The event queue: asynchronous events written by the device into host memory.
//!
//! Documentation/infiniband/gaudi/device-model.rst ("Event queue") is the reference. The queue
//! belongs to the kernel: its memory is addressed by bus address, never through the device MMU,
//! so no user work request can reach it.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
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
    regs,
    Bar, //
};

/// log2 of the number of entries.
const LOG_SIZE: u32 = 8;
const ENTRIES: u32 = 1 << LOG_SIZE;
/// 32-bit words per entry (16 bytes).
const WORDS: usize = 4;

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

/// One event queue entry, decoded.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Entry {
    pub(crate) kind: u8,
    /// Port index, from 0.
    pub(crate) port: u8,
    pub(crate) data0: u32,
    pub(crate) data1: u32,
}

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
        bar.write32(addr as u32, regs::EQ_BASE_LO);
        bar.write32((addr >> 32) as u32, regs::EQ_BASE_HI);
        bar.write32(LOG_SIZE, regs::EQ_LOG_SIZE);
        bar.write32(regs::EQ_CTRL_ENABLE, regs::EQ_CTRL);
        self.overflows
            .store(bar.read32(regs::EQ_OVERFLOWS), Relaxed);
    }

    /// Stop the device writing to the queue.
    pub(crate) fn disable(bar: &Bar<'_>) {
        bar.write32(0, regs::EQ_CTRL);
    }

    /// Take up to `out.len()` new entries into `out` and return how many, acknowledging them
    /// to the device.
    pub(crate) fn poll(&self, bar: &Bar<'_>, out: &mut [Entry]) -> Result<usize> {
        let mut ci = self.ci.load(Relaxed);
        let mut n = 0;
        while n < out.len() {
            let base = (ci & (ENTRIES - 1)) as usize * WORDS;
            // The owner bit is 1 in even passes over the ring, 0 in odd ones.
            let owner = u32::from((ci >> LOG_SIZE) & 1 == 0);
            let word3: u32 = io_read!(&self.mem, [try: base + 3]);
            if word3 >> 24 & 1 != owner {
                break;
            }
            // Read the entry only after seeing its owner bit.
            dma_mb(Read);
            let word0: u32 = io_read!(&self.mem, [try: base]);
            out[n] = Entry {
                kind: word0 as u8,
                port: (word0 >> 8) as u8,
                data0: io_read!(&self.mem, [try: base + 1]),
                data1: io_read!(&self.mem, [try: base + 2]),
            };
            n += 1;
            ci = ci.wrapping_add(1);
        }
        if n > 0 {
            self.ci.store(ci, Relaxed);
            bar.write32(ci, regs::EQ_CI);
        }
        Ok(n)
    }

    /// Events the device dropped (queue full) since the last call, if any.
    pub(crate) fn new_overflows(&self, bar: &Bar<'_>) -> u32 {
        let now = bar.read32(regs::EQ_OVERFLOWS);
        now.wrapping_sub(self.overflows.xchg(now, Relaxed))
    }

    /// Entries one interrupt-thread run takes at most: one ring's worth. Entries written
    /// meanwhile raise their own interrupt.
    pub(crate) const fn max_per_run() -> usize {
        ENTRIES as usize
    }
}
