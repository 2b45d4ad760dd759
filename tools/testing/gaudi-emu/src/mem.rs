// SPDX-License-Identifier: GPL-2.0
//! Everything the device can reach: guest memory by bus address, its own
//! device memory by offset, and the DMA audit of refused accesses.

use crate::dma::GuestMemory;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};

/// A new memfd of `size` bytes.
pub fn memfd(name: &std::ffi::CStr, size: usize) -> std::io::Result<File> {
    // SAFETY: `name` is NUL-terminated; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size as u64)?;
    Ok(file)
}

/// Map `len` bytes of `file` from `offset`, shared and read-write. The
/// caller unmaps it with `libc::munmap` (or leaks it for good).
pub fn map_shared(file: &File, len: usize, offset: u64) -> std::io::Result<*mut u8> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a fresh shared mapping of a valid descriptor; the result is
    // checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Device memory (HBM) behind BAR4: a shared memfd mapping. The memfd is
/// as large as the BAR (a power of two), so that QEMU can map the whole BAR
/// into the guest; only the first `size` bytes are device memory.
pub struct DevMem {
    base: *mut u8,
    size: usize,
    file: File,
}

// SAFETY: plain shared memory, accessed through bounds-checked methods.
unsafe impl Send for DevMem {}

impl DevMem {
    pub fn new(size: usize) -> std::io::Result<Self> {
        let file = memfd(c"gaudi-hbm", Self::bar_size(size) as usize)?;
        let base = if size == 0 {
            std::ptr::NonNull::dangling().as_ptr()
        } else {
            map_shared(&file, size, 0)?
        };
        Ok(Self { base, size, file })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// The size of BAR4 for `size` bytes of device memory.
    pub fn bar_size(size: usize) -> u64 {
        (size as u64).next_power_of_two().max(0x1000)
    }

    /// The memfd behind the memory, which QEMU maps as BAR4.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }

    fn range(&self, off: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(off).ok()?;
        (off.checked_add(len)? <= self.size).then_some(off)
    }

    pub fn read(&self, off: u64, buf: &mut [u8]) -> bool {
        let Some(o) = self.range(off, buf.len()) else {
            return false;
        };
        // SAFETY: `range` checked that the bytes lie inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(o), buf.as_mut_ptr(), buf.len()) };
        true
    }

    pub fn write(&self, off: u64, buf: &[u8]) -> bool {
        let Some(o) = self.range(off, buf.len()) else {
            return false;
        };
        // SAFETY: `range` checked that the bytes lie inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.base.add(o), buf.len()) };
        true
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        if self.size != 0 {
            // SAFETY: base/size are what mmap returned.
            unsafe { libc::munmap(self.base.cast(), self.size) };
        }
    }
}

/// Where a device access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Host memory, by bus address.
    Host(u64),
    /// Device memory, by offset.
    Dev(u64),
}

impl Target {
    pub fn add(self, n: u64) -> Self {
        match self {
            Target::Host(a) => Target::Host(a + n),
            Target::Dev(a) => Target::Dev(a + n),
        }
    }
}

/// The memories plus the audit counter.
pub struct Mem {
    pub guest: GuestMemory,
    pub dev: DevMem,
    /// Accesses refused because they were outside reachable memory (or
    /// bus mastering was off).
    pub audit: u32,
    /// PCI bus mastering enabled: without it the device reaches no host
    /// memory.
    pub bus_master: bool,
}

impl Mem {
    pub fn new(devmem: usize) -> std::io::Result<Self> {
        Ok(Self {
            guest: GuestMemory::default(),
            dev: DevMem::new(devmem)?,
            audit: 0,
            bus_master: false,
        })
    }

    fn refuse(&mut self, t: Target, len: usize, what: &str) -> bool {
        self.audit = self.audit.wrapping_add(1);
        log::warn!("DMA audit: {what} of {len} bytes at {t:x?} refused (outside reachable memory)");
        false
    }

    /// Read at `t`; an unreachable address is refused and audited.
    pub fn read(&mut self, t: Target, buf: &mut [u8]) -> bool {
        let ok = match t {
            Target::Host(a) => self.bus_master && self.guest.read(a, buf),
            Target::Dev(o) => self.dev.read(o, buf),
        };
        ok || self.refuse(t, buf.len(), "read")
    }

    /// Write at `t`; an unreachable address is refused and audited.
    pub fn write(&mut self, t: Target, buf: &[u8]) -> bool {
        let ok = match t {
            Target::Host(a) => self.bus_master && self.guest.write(a, buf),
            Target::Dev(o) => self.dev.write(o, buf),
        };
        ok || self.refuse(t, buf.len(), "write")
    }
}
