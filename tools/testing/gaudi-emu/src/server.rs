// SPDX-License-Identifier: GPL-2.0
//! The vfio-user face of the device: configuration space, BARs, interrupts.

use crate::device::{Device, MSIX_VECTORS};
use crate::engine::Waker;
use crate::irq::Vectors;
use crate::pci;
use std::fs::File;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vfio_bindings::bindings::vfio::{
    vfio_region_info, vfio_region_sparse_mmap_area, VFIO_IRQ_INFO_EVENTFD,
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_BAR4_REGION_INDEX,
    VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_ERR_IRQ_INDEX, VFIO_PCI_INTX_IRQ_INDEX,
    VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS,
    VFIO_PCI_REQ_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{IrqInfo, ServerBackend, ServerRegion, SparseArea};

/// BAR2 holds the MSI-X table (QEMU emulates it) and PBA; with MSI it is
/// empty.
const BAR2_SIZE: u64 = 0x1000;
const MSIX_PBA_OFFSET: u32 = 0x800;

fn einval() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::EINVAL)
}

pub struct Backend {
    config: pci::ConfigSpace,
    device: Arc<Mutex<Device>>,
    vectors: Arc<Vectors>,
    waker: Waker,
    /// The function interrupts with MSI, not MSI-X.
    msi: bool,
}

impl Backend {
    /// The face of `device`, interrupting through `vectors` with MSI-X or,
    /// if `msi`, with MSI.
    pub fn new(device: Arc<Mutex<Device>>, vectors: Arc<Vectors>, waker: Waker, msi: bool) -> Self {
        let devmem = device.lock().unwrap().devmem().size() as u64;
        let mut bars = vec![
            pci::Bar {
                index: 0,
                size: crate::nic::regs::BAR0_SIZE,
                prefetchable: false,
            },
            pci::Bar {
                index: 2,
                size: BAR2_SIZE,
                prefetchable: false,
            },
        ];
        if devmem != 0 {
            bars.push(pci::Bar {
                index: 4,
                size: crate::mem::DevMem::bar_size(devmem as usize),
                prefetchable: true,
            });
        }
        let irq = if msi {
            pci::Interrupts::Msi {
                vectors: MSIX_VECTORS as u16,
            }
        } else {
            pci::Interrupts::Msix(pci::Msix {
                vectors: MSIX_VECTORS as u16,
                bar: 2,
                table_offset: 0,
                pba_offset: MSIX_PBA_OFFSET,
            })
        };
        let config = pci::ConfigSpace::new(&bars, irq);
        Self {
            config,
            device,
            vectors,
            waker,
            msi,
        }
    }

    pub fn regions(&self) -> Vec<ServerRegion> {
        (0..VFIO_PCI_NUM_REGIONS)
            .map(|index| {
                let size = match index {
                    VFIO_PCI_CONFIG_REGION_INDEX => pci::CONFIG_SIZE as u64,
                    _ => self
                        .config
                        .bars()
                        .iter()
                        .find(|b| b.index as u32 == index)
                        .map_or(0, |b| b.size),
                };
                // Device memory is plain memory: QEMU maps it into the guest, so
                // that CPU reads and writes of BAR4 do not trap.
                let mmap_fd = (index == VFIO_PCI_BAR4_REGION_INDEX && size != 0)
                    .then(|| self.device.lock().unwrap().devmem().fd());
                let mmap = if mmap_fd.is_some() {
                    VFIO_REGION_INFO_FLAG_MMAP
                } else {
                    0
                };
                ServerRegion {
                    region_info: vfio_region_info {
                        argsz: std::mem::size_of::<vfio_region_info>() as u32,
                        index,
                        size,
                        flags: if size != 0 {
                            VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE | mmap
                        } else {
                            0
                        },
                        ..Default::default()
                    },
                    // The fd travels with the sparse-mmap capability only.
                    sparse_areas: mmap_fd
                        .map(|_| SparseArea {
                            area: vfio_region_sparse_mmap_area { offset: 0, size },
                        })
                        .into_iter()
                        .collect(),
                    mmap_fd,
                }
            })
            .collect()
    }

    /// The interrupt index that delivers the device's vectors.
    fn vector_index(&self) -> u32 {
        if self.msi {
            VFIO_PCI_MSI_IRQ_INDEX
        } else {
            VFIO_PCI_MSIX_IRQ_INDEX
        }
    }

    pub fn irqs(&self) -> Vec<IrqInfo> {
        let vectors = self.vector_index();
        (0..VFIO_PCI_NUM_IRQS)
            .map(|index| IrqInfo {
                index,
                flags: VFIO_IRQ_INFO_EVENTFD,
                count: match index {
                    i if i == vectors => self.vectors.count() as u32,
                    VFIO_PCI_MSIX_IRQ_INDEX => 0,
                    VFIO_PCI_INTX_IRQ_INDEX
                    | VFIO_PCI_MSI_IRQ_INDEX
                    | VFIO_PCI_ERR_IRQ_INDEX
                    | VFIO_PCI_REQ_IRQ_INDEX => 1,
                    _ => 0,
                },
            })
            .collect()
    }

    /// BAR0 accepts naturally aligned 32-bit accesses; a 64-bit access is
    /// two, low word first.
    fn bar0_access(off: u64, len: usize) -> std::io::Result<()> {
        if !(len == 4 || len == 8) || off % 4 != 0 || off + len as u64 > crate::nic::regs::BAR0_SIZE
        {
            log::warn!("BAR0 access of {len} bytes at {off:#x} refused");
            return Err(einval());
        }
        Ok(())
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> std::io::Result<()> {
        // A device that vanished answers every read with all ones (BAR0 reads
        // see to it themselves).
        if region != VFIO_PCI_BAR0_REGION_INDEX && self.device.lock().unwrap().is_gone() {
            data.fill(0xff);
            return Ok(());
        }
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => {
                Self::bar0_access(offset, data.len())?;
                let mut d = self.device.lock().unwrap();
                for (i, chunk) in data.chunks_mut(4).enumerate() {
                    let v = d.read32(offset + 4 * i as u64);
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
            }
            // MSI-X table and PBA are QEMU's; anything else reads as zero.
            VFIO_PCI_BAR2_REGION_INDEX => data.fill(0),
            VFIO_PCI_BAR4_REGION_INDEX => {
                if !self.device.lock().unwrap().devmem().read(offset, data) {
                    data.fill(0xff);
                }
            }
            _ => return Err(einval()),
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> std::io::Result<()> {
        // A device that vanished drops every write (BAR0 writes see to it
        // themselves).
        if region != VFIO_PCI_BAR0_REGION_INDEX && self.device.lock().unwrap().is_gone() {
            return Ok(());
        }
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => {
                self.config.write(offset, data);
                let on = self.config.bus_master();
                self.device.lock().unwrap().set_bus_master(on);
                self.waker.wake();
            }
            VFIO_PCI_BAR0_REGION_INDEX => {
                Self::bar0_access(offset, data.len())?;
                let now = Instant::now();
                let mut d = self.device.lock().unwrap();
                for (i, chunk) in data.chunks(4).enumerate() {
                    let v = u32::from_le_bytes(chunk.try_into().unwrap());
                    d.write32(offset + 4 * i as u64, v, now);
                }
                drop(d);
                self.waker.wake();
            }
            VFIO_PCI_BAR2_REGION_INDEX => {}
            VFIO_PCI_BAR4_REGION_INDEX => {
                // Writes past the end of device memory are dropped.
                self.device.lock().unwrap().devmem().write(offset, data);
            }
            _ => return Err(einval()),
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        _flags: vfio_user::DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> std::io::Result<()> {
        log::debug!("dma_map {address:#x}+{size:#x}");
        self.device
            .lock()
            .unwrap()
            .memory()
            .map(address, size, fd, offset)
    }

    fn dma_unmap(
        &mut self,
        _flags: vfio_user::DmaUnmapFlags,
        address: u64,
        size: u64,
    ) -> std::io::Result<()> {
        self.device.lock().unwrap().memory().unmap(address, size);
        Ok(())
    }

    fn reset(&mut self) -> std::io::Result<()> {
        self.device.lock().unwrap().reset();
        self.waker.wake();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> std::io::Result<()> {
        log::debug!(
            "set_irqs index {index} flags {flags:#x} start {start} count {count} fds {}",
            fds.len()
        );
        if index == self.vector_index() {
            return self.vectors.set(start, count, fds).inspect_err(|e| {
                log::error!("set_irqs index {index} start {start} count {count}: {e}");
            });
        }
        // Only MSI-X (or, in MSI mode, MSI) delivers interrupts; the others
        // are accepted so QEMU can set up error and request notification.
        Ok(())
    }
}
