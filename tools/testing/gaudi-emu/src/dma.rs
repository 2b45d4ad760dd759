// SPDX-License-Identifier: GPL-2.0
//! Guest memory as QEMU shares it: DMA_MAP messages carry a file
//! descriptor (the guest RAM memfd), which the emulator maps.

use std::fs::File;

struct Mapping {
    iova: u64,
    size: u64,
    host: *mut u8,
}

// SAFETY: the mapping is plain shared memory, valid until dropped; access
// goes through the bounds-checked methods of `GuestMemory`.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `host`/`size` are exactly what mmap returned.
        unsafe { libc::munmap(self.host.cast(), self.size as usize) };
    }
}

/// The guest physical ranges the device may reach.
#[derive(Default)]
pub struct GuestMemory {
    maps: Vec<Mapping>,
}

impl GuestMemory {
    /// Record a DMA_MAP of `[iova, iova + size)` backed by `fd` at `offset`.
    pub fn map(
        &mut self,
        iova: u64,
        size: u64,
        fd: Option<File>,
        offset: u64,
    ) -> std::io::Result<()> {
        let einval = || std::io::Error::from_raw_os_error(libc::EINVAL);
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(einval());
        }
        // QEMU maps ROM and other non-shared ranges without a descriptor:
        // they exist for the IOMMU view but the device cannot reach them.
        // (Guest RAM without a descriptor means QEMU was started without
        // shared memory; device DMA into it then fails and is reported.)
        let Some(fd) = fd else {
            log::debug!("DMA_MAP {iova:#x}+{size:#x} without a descriptor: not reachable");
            return Ok(());
        };
        let len = usize::try_from(size).map_err(|_| einval())?;
        let host = crate::mem::map_shared(&fd, len, offset)?;
        self.maps.push(Mapping {
            iova,
            size,
            host: host.cast(),
        });
        Ok(())
    }

    /// Forget the mappings inside `[iova, iova + size)`.
    pub fn unmap(&mut self, iova: u64, size: u64) {
        let end = iova.saturating_add(size);
        self.maps.retain(|m| m.iova < iova || m.iova + m.size > end);
    }

    fn slice(&self, addr: u64, len: usize) -> Option<*mut u8> {
        let m = self
            .maps
            .iter()
            .find(|m| addr >= m.iova && addr - m.iova < m.size)?;
        let off = addr - m.iova;
        (off.checked_add(len as u64)? <= m.size).then(|| {
            // SAFETY: off + len lies inside the mapping.
            unsafe { m.host.add(off as usize) }
        })
    }

    /// Copy guest memory at `addr` into `buf`; false if not all mapped.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        match self.slice(addr, buf.len()) {
            Some(p) => {
                // SAFETY: `slice` checked that buf.len() bytes at p are mapped.
                unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
                true
            }
            None => false,
        }
    }

    /// Copy `buf` into guest memory at `addr`; false if not all mapped.
    pub fn write(&self, addr: u64, buf: &[u8]) -> bool {
        match self.slice(addr, buf.len()) {
            Some(p) => {
                // SAFETY: `slice` checked that buf.len() bytes at p are mapped.
                unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), p, buf.len()) };
                true
            }
            None => false,
        }
    }

    /// Write a queue entry at `addr` as the device does: see [`crate::mem::write_entry`].
    pub fn write_entry(&self, addr: u64, buf: &[u8]) -> bool {
        match self.slice(addr, buf.len()) {
            // SAFETY: `slice` checked that buf.len() bytes at p are mapped.
            Some(p) => unsafe { crate::mem::write_entry(p, buf) },
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd(size: u64) -> File {
        crate::mem::memfd(c"guest", size as usize).unwrap()
    }

    #[test]
    fn bounded_access() {
        let mut g = GuestMemory::default();
        g.map(0x1000, 0x2000, Some(memfd(0x3000)), 0x1000).unwrap();
        assert!(g.write(0x1ffe, &[1, 2, 3, 4]));
        let mut b = [0u8; 4];
        assert!(g.read(0x1ffe, &mut b));
        assert_eq!(b, [1, 2, 3, 4]);
        assert!(!g.read(0x2fff, &mut b), "straddles the end");
        assert!(!g.read(0xfff, &mut [0u8; 1]), "before the start");
        assert!(!g.write(u64::MAX, &[0]));
        g.unmap(0x1000, 0x2000);
        assert!(!g.read(0x1000, &mut [0u8; 1]));
    }

    #[test]
    fn map_without_fd_is_unreachable() {
        let mut g = GuestMemory::default();
        g.map(0, 0x1000, None, 0).unwrap();
        assert!(!g.read(0, &mut [0u8; 1]));
        assert!(g.map(u64::MAX, 2, None, 0).is_err());
    }
}
