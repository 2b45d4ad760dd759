// SPDX-License-Identifier: GPL-2.0
//! MSI-X vectors as QEMU hands them over: one eventfd per vector.

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

/// The eventfds of the MSI-X vectors, shared with any thread that raises
/// interrupts.
pub struct Vectors {
    fds: Mutex<Vec<Option<File>>>,
    /// The function interrupts with MSI: a vector beyond the messages the
    /// guest enabled uses one of them (its number modulo their count), as
    /// a multi-message MSI function does; MSI-X vectors stand alone.
    msi: bool,
}

impl Vectors {
    pub fn new(count: usize) -> Self {
        Self::with_msi(count, false)
    }

    /// `count` vectors of MSI (`msi`) or MSI-X.
    pub fn with_msi(count: usize, msi: bool) -> Self {
        Self {
            fds: Mutex::new((0..count).map(|_| None).collect()),
            msi,
        }
    }

    /// Apply a SET_IRQS message: `fds` (at most one per message from
    /// QEMU) fill the slots from `start`; a message without fds clears
    /// `count` slots from `start`; `count == 0` disables all.
    pub fn set(&self, start: u32, count: u32, fds: Vec<File>) -> std::io::Result<()> {
        let mut slots = self.fds.lock().unwrap();
        let start = start as usize;
        let count = count as usize;
        if count == 0 {
            slots.iter_mut().for_each(|s| *s = None);
            return Ok(());
        }
        let end = start
            .checked_add(count)
            .filter(|&e| e <= slots.len())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        if fds.is_empty() {
            slots[start..end].iter_mut().for_each(|s| *s = None);
        } else {
            if fds.len() > count {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            for (slot, fd) in slots[start..].iter_mut().zip(fds) {
                *slot = Some(fd);
            }
        }
        Ok(())
    }

    /// Raise `vector`. Returns false if the guest has not enabled it.
    pub fn raise(&self, vector: usize) -> bool {
        let mut slots = self.fds.lock().unwrap();
        let enabled = slots.iter().take_while(|s| s.is_some()).count();
        let vector = if self.msi && enabled > 0 && vector >= enabled {
            vector % enabled
        } else {
            vector
        };
        match slots.get_mut(vector) {
            Some(Some(fd)) => fd.write_all(&1u64.to_le_bytes()).is_ok(),
            _ => false,
        }
    }

    pub fn count(&self) -> usize {
        self.fds.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eventfd() -> File {
        // SAFETY: eventfd has no memory-safety preconditions; the returned
        // descriptor is checked and then owned by the File.
        let fd = unsafe { libc::eventfd(0, 0) };
        assert!(fd >= 0);
        use std::os::fd::FromRawFd;
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        unsafe { File::from_raw_fd(fd) }
    }

    #[test]
    fn raise_only_enabled_vectors() {
        let v = Vectors::new(4);
        assert!(!v.raise(1));
        v.set(1, 1, vec![eventfd()]).unwrap();
        assert!(v.raise(1));
        assert!(!v.raise(0));
        assert!(!v.raise(4));
        v.set(1, 1, vec![]).unwrap();
        assert!(!v.raise(1));
    }

    #[test]
    fn msi_folds_vectors_onto_the_enabled_messages() {
        let v = Vectors::with_msi(8, true);
        assert!(!v.raise(3));
        v.set(0, 1, vec![eventfd()]).unwrap();
        assert!(v.raise(0));
        assert!(v.raise(3));
        assert!(v.raise(7));
        let x = Vectors::new(8);
        x.set(0, 1, vec![eventfd()]).unwrap();
        assert!(!x.raise(3), "MSI-X vectors do not fold");
    }

    #[test]
    fn out_of_range_set_is_refused() {
        let v = Vectors::new(4);
        assert!(v.set(3, 2, vec![eventfd()]).is_err());
        assert!(v.set(u32::MAX, 2, vec![]).is_err());
        v.set(0, 0, vec![]).unwrap();
    }
}
