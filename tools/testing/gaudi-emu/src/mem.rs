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

/// Write a queue entry (a CQE, an EQE) of `buf.len()` bytes at `p` as the device does: its
/// first 32-bit word, which holds the bit the consumer clears once it has read the entry
/// (VALID), last, with a single aligned store after the rest. A plain copy may store a byte
/// twice (glibc's `memcpy` of 16 bytes stores the same 16 bytes twice, overlapping): a
/// consumer that read the entry and cleared the bit between the two would find it set again
/// and take the entry a second time, 16 entries later. False, and nothing written, for an
/// entry shorter than a word or a misaligned one.
///
/// # Safety
///
/// `buf.len()` bytes at `p` must be mapped writable memory.
pub unsafe fn write_entry(p: *mut u8, buf: &[u8]) -> bool {
    let Some((first, rest)) = buf.split_first_chunk::<4>() else {
        return false;
    };
    if p as usize % 4 != 0 {
        return false;
    }
    // SAFETY: the caller's mapping covers `buf.len()` bytes from `p`.
    unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), p.add(4), rest.len()) };
    // SAFETY: `p` is 4-byte aligned and mapped (above); the memory is shared with the guest,
    // which accesses it only by aligned words and bytes, so an atomic view of the word is
    // sound, and the release store orders it after the rest of the entry.
    unsafe { std::sync::atomic::AtomicU32::from_ptr(p.cast()) }.store(
        u32::from_le_bytes(*first),
        std::sync::atomic::Ordering::Release,
    );
    true
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

    /// Write a queue entry at `off`: see [`write_entry`].
    pub fn write_entry(&self, off: u64, buf: &[u8]) -> bool {
        let Some(o) = self.range(off, buf.len()) else {
            return false;
        };
        // SAFETY: `range` checked that the bytes lie inside the mapping.
        unsafe { write_entry(self.base.add(o), buf) }
    }

    /// Fill `[off, off + len)` with `pattern` (little-endian, repeated
    /// from `off`). False, and nothing written, if the range is not all
    /// inside device memory.
    pub fn fill(&self, off: u64, len: u64, pattern: u32) -> bool {
        let Ok(n) = usize::try_from(len) else {
            return false;
        };
        if self.range(off, n).is_none() {
            return false;
        }
        const CHUNK: usize = 64 << 10;
        let chunk: Vec<u8> = pattern
            .to_le_bytes()
            .into_iter()
            .cycle()
            .take(CHUNK)
            .collect();
        let mut done = 0;
        while done < n {
            let k = (n - done).min(CHUNK);
            // Chunks are multiples of 4 bytes long, so the pattern stays
            // in phase with `off`.
            self.write(off + done as u64, &chunk[..k]);
            done += k;
        }
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
    /// `n` bytes further (not `std::ops::Add`: a target plus an offset).
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, n: u64) -> Self {
        match self {
            Target::Host(a) => Target::Host(a + n),
            Target::Dev(a) => Target::Dev(a + n),
        }
    }
}

/// The memories plus the audit counters.
pub struct Mem {
    pub guest: GuestMemory,
    pub dev: DevMem,
    /// Accesses refused because they were outside reachable memory.
    pub audit: u32,
    /// PCI bus mastering enabled: without it the device reaches no host
    /// memory.
    pub bus_master: bool,
    /// Host memory accesses refused because bus mastering was off (a PCI
    /// function does no DMA then; counted apart from the audit, which is
    /// about where the device tried to go).
    pub no_master: u32,
}

impl Mem {
    pub fn new(devmem: usize) -> std::io::Result<Self> {
        Ok(Self {
            guest: GuestMemory::default(),
            dev: DevMem::new(devmem)?,
            audit: 0,
            bus_master: false,
            no_master: 0,
        })
    }

    fn refuse(&mut self, t: Target, len: usize, what: &str) -> bool {
        self.audit = self.audit.wrapping_add(1);
        log::warn!("DMA audit: {what} of {len} bytes at {t:x?} refused (outside reachable memory)");
        false
    }

    /// Whether an access to `t` may go out: host memory needs bus
    /// mastering (device memory is the device's own).
    fn mastering(&mut self, t: Target, len: usize, what: &str) -> bool {
        if matches!(t, Target::Host(_)) && !self.bus_master {
            self.no_master = self.no_master.wrapping_add(1);
            log::warn!("DMA {what} of {len} bytes at {t:x?} refused: bus master disabled");
            return false;
        }
        true
    }

    /// Read at `t`; an unreachable address is refused and audited.
    pub fn read(&mut self, t: Target, buf: &mut [u8]) -> bool {
        if !self.mastering(t, buf.len(), "read") {
            return false;
        }
        let ok = match t {
            Target::Host(a) => self.guest.read(a, buf),
            Target::Dev(o) => self.dev.read(o, buf),
        };
        ok || self.refuse(t, buf.len(), "read")
    }

    /// Write at `t`; an unreachable address is refused and audited.
    pub fn write(&mut self, t: Target, buf: &[u8]) -> bool {
        if !self.mastering(t, buf.len(), "write") {
            return false;
        }
        let ok = match t {
            Target::Host(a) => self.guest.write(a, buf),
            Target::Dev(o) => self.dev.write(o, buf),
        };
        ok || self.refuse(t, buf.len(), "write")
    }

    /// Write a queue entry at `t` (see [`write_entry`]); an unreachable address is refused
    /// and audited.
    pub fn write_entry(&mut self, t: Target, buf: &[u8]) -> bool {
        if !self.mastering(t, buf.len(), "write") {
            return false;
        }
        let ok = match t {
            Target::Host(a) => self.guest.write_entry(a, buf),
            Target::Dev(o) => self.dev.write_entry(o, buf),
        };
        ok || self.refuse(t, buf.len(), "write")
    }

    /// Read at `t` for the emulator's own checks (the strict-mode audit of
    /// cached translations): not a device access, so neither bus
    /// mastering nor the audit applies.
    pub fn peek(&self, t: Target, buf: &mut [u8]) -> bool {
        match t {
            Target::Host(a) => self.guest.read(a, buf),
            Target::Dev(o) => self.dev.read(o, buf),
        }
    }

    /// Write at `t` for the control interface's tests (a debugger's
    /// write): not a device access, so neither bus mastering nor the audit
    /// applies.
    pub fn poke(&self, t: Target, buf: &[u8]) -> bool {
        match t {
            Target::Host(a) => self.guest.write(a, buf),
            Target::Dev(o) => self.dev.write(o, buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_bus_master_no_host_dma_and_not_audited() {
        let mut m = Mem::new(0x2000).unwrap();
        m.guest
            .map(0x1000, 0x1000, Some(memfd(c"ram", 0x1000).unwrap()), 0)
            .unwrap();
        assert!(!m.write(Target::Host(0x1000), &[1]));
        assert!(!m.read(Target::Host(0x1000), &mut [0u8; 1]));
        assert_eq!((m.no_master, m.audit), (2, 0));
        // Device memory is the device's own: no bus mastering needed.
        assert!(m.write(Target::Dev(0), &[1]));
        m.bus_master = true;
        assert!(m.write(Target::Host(0x1000), &[7]));
        assert!(!m.write(Target::Host(0x3000), &[7]), "outside memory");
        assert_eq!((m.no_master, m.audit), (2, 1));
        let mut b = [0u8; 1];
        m.bus_master = false;
        assert!(m.peek(Target::Host(0x1000), &mut b));
        assert_eq!((b[0], m.no_master), (7, 2));
    }

    #[test]
    fn entry_lands_whole_and_misaligned_or_short_is_refused() {
        let mut m = Mem::new(0x1000).unwrap();
        m.guest
            .map(0x1000, 0x1000, Some(memfd(c"ram", 0x1000).unwrap()), 0)
            .unwrap();
        m.bus_master = true;
        let e: Vec<u8> = (1..=16).collect();
        for t in [Target::Host(0x1010), Target::Dev(0x10)] {
            assert!(m.write(t, &[0xee; 32]));
            assert!(m.write_entry(t, &e));
            let mut b = [0u8; 32];
            assert!(m.peek(t, &mut b));
            assert_eq!(&b[..16], &e[..], "{t:x?}");
            assert!(b[16..].iter().all(|&x| x == 0xee), "{t:x?}: past the entry");
        }
        assert!(!m.write_entry(Target::Host(0x1012), &e), "misaligned");
        assert!(
            !m.write_entry(Target::Dev(0x20), &e[..3]),
            "shorter than a word"
        );
        let mut b = [0u8; 4];
        assert!(m.peek(Target::Host(0x1010), &mut b) && b == [1, 2, 3, 4]);
        assert_eq!(m.audit, 2);
        assert!(!m.write_entry(Target::Host(0x1ff8), &e), "past the memory");
    }

    #[test]
    fn fill_repeats_the_pattern_inside_the_range_only() {
        let d = DevMem::new(0x4_0000).unwrap();
        d.write(0, &[0xee; 0x4_0000]);
        assert!(d.fill(0x1000, 0x2_1000, 0x1122_3344));
        let mut b = vec![0u8; 0x4_0000];
        d.read(0, &mut b);
        assert!(b[..0x1000].iter().all(|&x| x == 0xee));
        assert!(b[0x1000..0x2_2000]
            .chunks(4)
            .all(|c| c == [0x44, 0x33, 0x22, 0x11]));
        assert!(b[0x2_2000..].iter().all(|&x| x == 0xee));
        assert!(!d.fill(0x3_f000, 0x2000, 0), "past the end");
        assert!(!d.fill(u64::MAX - 0xfff, 0x1000, 0), "wraps");
        d.read(0x3_f000, &mut b[..0x1000]);
        assert!(b[..0x1000].iter().all(|&x| x == 0xee));
    }
}
