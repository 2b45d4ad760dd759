// SPDX-License-Identifier: GPL-2.0
//! The device behind BAR0: registers and their side effects.

use crate::irq::Vectors;
use crate::regs;
use std::sync::Arc;

/// Options the device is built with (command line of the emulator).
#[derive(Clone, Debug)]
pub struct Options {
    /// Value of the ID register; a wrong one lets tests check that the
    /// driver refuses the device.
    pub id: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            id: regs::ID_MAGIC,
        }
    }
}

pub struct Device {
    opts: Options,
    scratch: u32,
    cause: u32,
    test_irqs: u32,
    vectors: Arc<Vectors>,
}

impl Device {
    pub fn new(opts: Options, vectors: Arc<Vectors>) -> Self {
        Self {
            opts,
            scratch: 0,
            cause: 0,
            test_irqs: 0,
            vectors,
        }
    }

    /// A 32-bit register read. Unknown offsets read as 0.
    pub fn read32(&mut self, off: u64) -> u32 {
        match off {
            regs::ID => self.opts.id,
            regs::VERSION => regs::MODEL_VERSION,
            regs::SCRATCH => self.scratch,
            regs::IRQ_CAUSE => self.cause,
            regs::IRQ_TEST_COUNT => self.test_irqs,
            _ => 0,
        }
    }

    /// A 32-bit register write. Writes to read-only or unknown offsets
    /// are ignored, as hardware would.
    pub fn write32(&mut self, off: u64, val: u32) {
        match off {
            regs::SCRATCH => self.scratch = val,
            regs::IRQ_CAUSE => self.cause &= !val,
            regs::IRQ_TEST => {
                self.cause |= regs::CAUSE_TEST;
                if self.vectors.raise(val as usize) {
                    self.test_irqs = self.test_irqs.wrapping_add(1);
                } else {
                    log::warn!("test interrupt on vector {val}: vector not enabled");
                }
            }
            _ => log::debug!("write to unknown register {off:#x} = {val:#x}"),
        }
    }

    /// Reset to power-on state.
    pub fn reset(&mut self) {
        self.scratch = 0;
        self.cause = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev() -> Device {
        Device::new(Options::default(), Arc::new(Vectors::new(2)))
    }

    #[test]
    fn identification() {
        let mut d = dev();
        assert_eq!(d.read32(regs::ID), regs::ID_MAGIC);
        assert_eq!(d.read32(regs::VERSION), regs::MODEL_VERSION);
        d.write32(regs::ID, 0);
        assert_eq!(d.read32(regs::ID), regs::ID_MAGIC);
    }

    #[test]
    fn scratch_holds_value_until_reset() {
        let mut d = dev();
        d.write32(regs::SCRATCH, 0xa5a5_5a5a);
        assert_eq!(d.read32(regs::SCRATCH), 0xa5a5_5a5a);
        d.reset();
        assert_eq!(d.read32(regs::SCRATCH), 0);
    }

    #[test]
    fn test_irq_on_disabled_vector_sets_cause_but_not_count() {
        let mut d = dev();
        d.write32(regs::IRQ_TEST, 0);
        assert_eq!(d.read32(regs::IRQ_CAUSE), regs::CAUSE_TEST);
        assert_eq!(d.read32(regs::IRQ_TEST_COUNT), 0);
        d.write32(regs::IRQ_CAUSE, regs::CAUSE_TEST);
        assert_eq!(d.read32(regs::IRQ_CAUSE), 0);
    }
}
