// SPDX-License-Identifier: GPL-2.0
//! The device behind BAR0: registers and their side effects.

use crate::dma::GuestMemory;
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
        Self { id: regs::ID_MAGIC }
    }
}

pub struct Device {
    opts: Options,
    scratch: u32,
    cause: u32,
    test_irqs: u32,
    dma_test_addr: u64,
    dma_test_len: u32,
    dma_test_status: u32,
    dma_faults: u32,
    vectors: Arc<Vectors>,
    memory: GuestMemory,
}

impl Device {
    pub fn new(opts: Options, vectors: Arc<Vectors>) -> Self {
        Self {
            opts,
            scratch: 0,
            cause: 0,
            test_irqs: 0,
            dma_test_addr: 0,
            dma_test_len: 0,
            dma_test_status: regs::DMA_TEST_IDLE,
            dma_faults: 0,
            vectors,
            memory: GuestMemory::default(),
        }
    }

    /// Guest memory as QEMU maps it for the device.
    pub fn memory(&mut self) -> &mut GuestMemory {
        &mut self.memory
    }

    fn dma_test(&mut self) -> u32 {
        let len = self.dma_test_len;
        if len == 0 || len > regs::DMA_TEST_MAX_LEN {
            log::warn!("DMA test length {len} out of range");
            return regs::DMA_TEST_FAULT;
        }
        let mut buf = vec![0u8; len as usize];
        if !self.memory.read(self.dma_test_addr, &mut buf) {
            self.dma_faults += 1;
            log::warn!(
                "DMA test read at {:#x}+{len:#x} refused",
                self.dma_test_addr
            );
            return regs::DMA_TEST_FAULT;
        }
        buf.iter_mut().for_each(|b| *b = !*b);
        if !self.memory.write(self.dma_test_addr, &buf) {
            self.dma_faults += 1;
            return regs::DMA_TEST_FAULT;
        }
        regs::DMA_TEST_DONE
    }

    /// A 32-bit register read. Unknown offsets read as 0.
    pub fn read32(&mut self, off: u64) -> u32 {
        match off {
            regs::ID => self.opts.id,
            regs::VERSION => regs::MODEL_VERSION,
            regs::SCRATCH => self.scratch,
            regs::IRQ_CAUSE => self.cause,
            regs::IRQ_TEST_COUNT => self.test_irqs,
            regs::DMA_TEST_ADDR_LO => self.dma_test_addr as u32,
            regs::DMA_TEST_ADDR_HI => (self.dma_test_addr >> 32) as u32,
            regs::DMA_TEST_LEN => self.dma_test_len,
            regs::DMA_TEST_CTRL => self.dma_test_status,
            regs::DMA_FAULT_COUNT => self.dma_faults,
            _ => 0,
        }
    }

    /// A 32-bit register write. Writes to read-only or unknown offsets
    /// are ignored, as hardware would.
    pub fn write32(&mut self, off: u64, val: u32) {
        match off {
            regs::SCRATCH => self.scratch = val,
            regs::IRQ_CAUSE => self.cause &= !val,
            regs::DMA_TEST_ADDR_LO => {
                self.dma_test_addr = (self.dma_test_addr & !0xffff_ffff) | u64::from(val)
            }
            regs::DMA_TEST_ADDR_HI => {
                self.dma_test_addr = (self.dma_test_addr & 0xffff_ffff) | (u64::from(val) << 32)
            }
            regs::DMA_TEST_LEN => self.dma_test_len = val,
            regs::DMA_TEST_CTRL if val == regs::DMA_TEST_START => {
                self.dma_test_status = self.dma_test();
            }
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
        self.dma_test_addr = 0;
        self.dma_test_len = 0;
        self.dma_test_status = regs::DMA_TEST_IDLE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::FromRawFd;

    fn guest_ram(size: u64) -> File {
        // SAFETY: the name is NUL-terminated; the result is checked.
        let fd = unsafe { libc::memfd_create(c"ram".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor, owned by the File from here on.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(size).unwrap();
        f
    }

    fn start_dma_test(d: &mut Device, addr: u64, len: u32) -> u32 {
        d.write32(regs::DMA_TEST_ADDR_LO, addr as u32);
        d.write32(regs::DMA_TEST_ADDR_HI, (addr >> 32) as u32);
        d.write32(regs::DMA_TEST_LEN, len);
        d.write32(regs::DMA_TEST_CTRL, regs::DMA_TEST_START);
        d.read32(regs::DMA_TEST_CTRL)
    }

    #[test]
    fn dma_test_inverts_guest_buffer() {
        let mut d = dev();
        d.memory()
            .map(0x10_0000, 0x1000, Some(guest_ram(0x1000)), 0)
            .unwrap();
        d.memory().write(0x10_0010, &[0x00, 0x0f, 0xff]);
        assert_eq!(start_dma_test(&mut d, 0x10_0010, 3), regs::DMA_TEST_DONE);
        let mut b = [0u8; 3];
        assert!(d.memory().read(0x10_0010, &mut b));
        assert_eq!(b, [0xff, 0xf0, 0x00]);
        assert_eq!(d.read32(regs::DMA_FAULT_COUNT), 0);
    }

    #[test]
    fn dma_test_outside_guest_memory_is_refused_and_counted() {
        let mut d = dev();
        d.memory()
            .map(0x10_0000, 0x1000, Some(guest_ram(0x1000)), 0)
            .unwrap();
        assert_eq!(start_dma_test(&mut d, 0x10_0ff0, 32), regs::DMA_TEST_FAULT);
        assert_eq!(d.read32(regs::DMA_FAULT_COUNT), 1);
        assert_eq!(start_dma_test(&mut d, 0x10_0000, 0), regs::DMA_TEST_FAULT);
        assert_eq!(
            start_dma_test(&mut d, 0x10_0000, regs::DMA_TEST_MAX_LEN + 1),
            regs::DMA_TEST_FAULT
        );
        assert_eq!(d.read32(regs::DMA_FAULT_COUNT), 1);
    }

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
