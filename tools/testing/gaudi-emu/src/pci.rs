// SPDX-License-Identifier: GPL-2.0
//! PCI configuration space of the emulated function.
//!
//! QEMU's vfio-user client emulates the MSI-X table, the PBA and the
//! MSI-X message-control bits itself (and the whole MSI capability); what
//! the server must get right is the identity, the BAR type bits and sizes,
//! and a capability list that points at an MSI-X capability describing
//! where the table lives, or at an MSI capability.

/// Size of conventional configuration space.
pub const CONFIG_SIZE: usize = 256;

/// Habana Labs.
pub const VENDOR_ID: u16 = 0x1da3;
/// Gaudi2.
pub const DEVICE_ID: u16 = 0x1020;
/// Processing accelerator (base class 0x12, subclass 0x00).
const CLASS_CODE: u32 = 0x12_00_00;
const REVISION: u8 = 0x01;

const CAP_ID_MSI: u8 = 0x05;
const CAP_ID_MSIX: u8 = 0x11;
/// Where the interrupt capability (MSI-X or MSI) is.
const IRQ_CAP_OFFSET: usize = 0x40;

/// One BAR of the function: its index in the 6 BAR slots and its size.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub index: usize,
    pub size: u64,
    pub prefetchable: bool,
}

/// Where the MSI-X table and PBA are.
#[derive(Clone, Copy, Debug)]
pub struct Msix {
    pub vectors: u16,
    pub bar: u8,
    pub table_offset: u32,
    pub pba_offset: u32,
}

/// How the function interrupts.
#[derive(Clone, Copy, Debug)]
pub enum Interrupts {
    /// MSI-X, its table and PBA where [`Msix`] says.
    Msix(Msix),
    /// MSI with 64-bit addresses and up to `vectors` messages (a power of
    /// two, at most 32); no per-vector masking.
    Msi { vectors: u16 },
}

/// Configuration space: the bytes, plus a per-byte writable mask.
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
    bars: Vec<Bar>,
}

impl ConfigSpace {
    /// Build the configuration space of the function with 64-bit memory
    /// BARs `bars` and the interrupt capability `irq`.
    pub fn new(bars: &[Bar], irq: Interrupts) -> Self {
        let mut c = Self {
            bytes: [0; CONFIG_SIZE],
            wmask: [0; CONFIG_SIZE],
            bars: bars.to_vec(),
        };
        c.put16(0x00, VENDOR_ID);
        c.put16(0x02, DEVICE_ID);
        // Command: I/O, memory, bus master, parity, SERR, INTx disable.
        c.wmask16(0x04, 0x0547);
        // Status: capability list.
        c.put16(0x06, 0x0010);
        c.put32(0x08, (CLASS_CODE << 8) | u32::from(REVISION));
        c.put16(0x2c, VENDOR_ID);
        c.put16(0x2e, DEVICE_ID);
        c.bytes[0x34] = IRQ_CAP_OFFSET as u8;
        c.wmask[0x3c] = 0xff; // interrupt line
        c.bytes[0x3d] = 0x01; // INTA

        for bar in bars {
            assert!(
                bar.index % 2 == 0 && bar.index < 6,
                "64-bit BARs take even slots"
            );
            assert!(bar.size.is_power_of_two() && bar.size >= 16);
            let off = 0x10 + 4 * bar.index;
            // Memory, 64-bit, optionally prefetchable.
            let flags = 0x4 | if bar.prefetchable { 0x8 } else { 0 };
            c.put32(off, flags);
            let mask = !(bar.size - 1);
            c.wmask32(off, mask as u32 & !0xf);
            c.wmask32(off + 4, (mask >> 32) as u32);
        }

        let m = IRQ_CAP_OFFSET;
        c.bytes[m + 1] = 0; // end of list
        match irq {
            Interrupts::Msix(msix) => {
                c.bytes[m] = CAP_ID_MSIX;
                c.put16(m + 2, msix.vectors - 1);
                c.wmask16(m + 2, 0xc000); // enable, function mask
                c.put32(m + 4, msix.table_offset | u32::from(msix.bar));
                c.put32(m + 8, msix.pba_offset | u32::from(msix.bar));
            }
            Interrupts::Msi { vectors } => {
                assert!(vectors.is_power_of_two() && vectors <= 32);
                c.bytes[m] = CAP_ID_MSI;
                // 64-bit capable, multiple message capable log2(vectors);
                // writable: enable and multiple message enable.
                c.put16(m + 2, 0x0080 | ((vectors.trailing_zeros() as u16) << 1));
                c.wmask16(m + 2, 0x0071);
                c.wmask32(m + 4, !0x3); // message address, dword aligned
                c.wmask32(m + 8, !0); // upper address
                c.wmask16(m + 12, 0xffff); // message data
            }
        }
        c
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn wmask16(&mut self, off: usize, v: u16) {
        self.wmask[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn wmask32(&mut self, off: usize, v: u32) {
        self.wmask[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Read `data.len()` bytes at `off`. Out-of-range bytes read as 0xff,
    /// as an absent register would.
    pub fn read(&self, off: u64, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = usize::try_from(off)
                .ok()
                .and_then(|o| o.checked_add(i))
                .and_then(|o| self.bytes.get(o).copied())
                .unwrap_or(0xff);
        }
    }

    /// Write `data` at `off`, honouring the writable mask. Writes outside
    /// configuration space are dropped.
    pub fn write(&mut self, off: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let Some(o) = usize::try_from(off).ok().and_then(|o| o.checked_add(i)) else {
                return;
            };
            if o >= CONFIG_SIZE {
                return;
            }
            let m = self.wmask[o];
            self.bytes[o] = (self.bytes[o] & !m) | (b & m);
        }
    }

    /// Whether the guest enabled bus mastering (command register bit 2).
    pub fn bus_master(&self) -> bool {
        self.bytes[0x04] & 0x4 != 0
    }

    /// The BARs this function has.
    pub fn bars(&self) -> &[Bar] {
        &self.bars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> ConfigSpace {
        ConfigSpace::new(
            &[Bar {
                index: 0,
                size: 0x10000,
                prefetchable: false,
            }],
            Interrupts::Msix(Msix {
                vectors: 8,
                bar: 2,
                table_offset: 0,
                pba_offset: 0x800,
            }),
        )
    }

    fn read32(c: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0u8; 4];
        c.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    #[test]
    fn bus_master_follows_the_command_register() {
        let mut c = space();
        assert!(!c.bus_master());
        c.write(0x04, &[0x06, 0x00]);
        assert!(c.bus_master());
        c.write(0x04, &[0x02, 0x00]);
        assert!(!c.bus_master());
    }

    #[test]
    fn identity() {
        let c = space();
        assert_eq!(read32(&c, 0), 0x1020_1da3);
        assert_eq!(read32(&c, 8) >> 8, CLASS_CODE);
    }

    #[test]
    fn bar_sizing_returns_size_mask() {
        let mut c = space();
        c.write(0x10, &u32::MAX.to_le_bytes());
        c.write(0x14, &u32::MAX.to_le_bytes());
        assert_eq!(read32(&c, 0x10), 0xffff_0004);
        assert_eq!(read32(&c, 0x14), 0xffff_ffff);
    }

    #[test]
    fn read_only_identity_ignores_writes() {
        let mut c = space();
        c.write(0, &[0; 4]);
        assert_eq!(read32(&c, 0), 0x1020_1da3);
    }

    #[test]
    fn msix_capability_is_linked() {
        let c = space();
        let ptr = read32(&c, 0x34) as u64 & 0xff;
        let cap = read32(&c, ptr);
        assert_eq!(cap & 0xff, u32::from(CAP_ID_MSIX));
        assert_eq!((cap >> 16) & 0x7ff, 7);
        assert_eq!(read32(&c, ptr + 4), 2);
        assert_eq!(read32(&c, ptr + 8), 0x802);
    }

    #[test]
    fn msi_capability_is_linked_and_only_its_control_bits_write() {
        let mut c = ConfigSpace::new(&[], Interrupts::Msi { vectors: 8 });
        let ptr = read32(&c, 0x34) as u64 & 0xff;
        let cap = read32(&c, ptr);
        assert_eq!(cap & 0xff, u32::from(CAP_ID_MSI));
        assert_eq!(cap >> 24, 0, "next capability");
        // 64-bit, 8 messages capable, nothing enabled.
        assert_eq!((cap >> 16) & 0xffff, 0x0086);
        // Enable with 2 messages; the capability bits stay.
        c.write(ptr + 2, &0xffffu16.to_le_bytes());
        assert_eq!((read32(&c, ptr) >> 16) & 0xffff, 0x00f7);
        c.write(ptr + 4, &u32::MAX.to_le_bytes());
        assert_eq!(read32(&c, ptr + 4), 0xffff_fffc);
    }

    #[test]
    fn out_of_range_reads_all_ones_and_writes_are_dropped() {
        let mut c = space();
        let mut b = [0u8; 4];
        c.read(254, &mut b);
        assert_eq!(&b[2..], &[0xff, 0xff]);
        c.write(u64::MAX, &[1, 2, 3]);
        c.write(300, &[1]);
    }
}
