// SPDX-License-Identifier: GPL-2.0

//! The chip interface: what the owner of a Gaudi2 gives its NIC core.
//!
//! The owner creates an auxiliary device named `cn` whose registration data is a
//! [`ChipDevice`]; the NIC core binds it and reaches the chip only through [`Chip`]: the
//! chip's configuration space (the NIC's blocks, with the typed register accessors of
//! [`Regs`]), the ports the firmware enabled with their MAC addresses and link state, device
//! memory and its scrubbing, stopping the chip, and the chip's interrupts, which the owner
//! handles and passes on to the [`ChipEvents`] the core sets.

use crate::{
    device::{
        Bound,
        Device, //
    },
    io::{
        ops::{
            OpsBackend,
            OpsView,
            RegisterOps, //
        },
        IoBase,
        Region, //
    },
    prelude::*,
    sync::Arc,
};

/// Bytes of the chip's configuration space the NIC driver reaches (BAR0 of the emulated
/// function: SRAM, then the configuration space from 64 MiB).
pub const CONFIG_SIZE: usize = 0x1000_0000;

/// The chip's configuration space, with the typed register accessors (`register!`).
pub type Regs<'a> = OpsView<'a, Region<CONFIG_SIZE>>;

/// The chip's device memory (HBM) as the host reaches it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevMem {
    /// Bus address of its first byte (what a peer's DMA and a dma-buf importer use).
    pub start: u64,
    /// Its size in bytes; 0 if the host cannot reach it.
    pub size: u64,
}

/// What pages entered in the device MMU are, and what the device may do with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmuFlags {
    /// The page's address is an offset in device memory, not a bus address.
    pub devmem: bool,
    /// The device may write the page (CQEs, incoming WRITEs).
    pub writable: bool,
}

/// The chip, as its owner gives it to the NIC core.
///
/// Every method may be called from any process context and may sleep, except [`Chip::ops`]
/// and the register accesses it gives, which may be called in atomic context.
pub trait Chip: Send + Sync {
    /// Accesses to the configuration space. Once the chip is gone (surprise removal, or its
    /// owner unbound), reads return all ones and writes are dropped.
    fn ops(&self) -> &dyn RegisterOps;

    /// The version of what the owner drives, major in bits 31:16, minor in 15:0: the device
    /// model's for the emulated function, the firmware's on a host.
    fn model(&self) -> u32;

    /// The ports the firmware enabled: bit `p` for port index `p`.
    fn port_mask(&self) -> u32;

    /// The MAC address of port index `port`, as the firmware gives it.
    fn mac(&self, port: usize) -> Result<[u8; 6]>;

    /// Whether the link of port index `port` is up.
    fn link_up(&self, port: usize) -> bool;

    /// The device memory the host reaches.
    fn devmem(&self) -> DevMem;

    /// Zero `len` bytes of device memory at `offset` (both multiples of 4 KiB). Sleeps.
    /// `EINVAL` for a range outside device memory, `ENODEV` once the chip is gone.
    fn scrub(&self, offset: u64, len: u64) -> Result;

    /// Reset the chip (it stops, and forgets a fatal error) and return once it is ready and
    /// no longer reaches memory. The core calls it before it starts the NIC and before it
    /// frees memory the NIC may write. `ETIMEDOUT` if the chip is not ready in time, `EIO` if
    /// it reports a fatal error after the reset (both logged by the owner), `ENODEV` if it is
    /// gone.
    fn reset(&self) -> Result;

    /// Take an address space of the device MMU with nothing mapped: its ASID, which the NIC's
    /// contexts name. `dev` is the chip's function (the auxiliary device's parent), bound; a
    /// device that is not the chip's is refused with `EINVAL`. Sleeps.
    fn mmu_space(&self, dev: &Device<Bound>) -> Result<u32>;

    /// Give back ASID `asid` (from [`Chip::mmu_space`]): once this returns, it translates
    /// nothing and its tables are gone. Sleeps.
    fn mmu_space_free(&self, asid: u32);

    /// Enter `count` pages of `1 << shift` bytes at device VA `va` of ASID `asid`, their
    /// addresses (bus addresses, or offsets in device memory with `flags.devmem`) from
    /// `pages`. All or nothing: on failure nothing stays entered. The VAs must be free;
    /// `EINVAL` for a misaligned or unknown page size, VA or ASID, `EEXIST` for a VA that
    /// maps something, `ERANGE` for an address the MMU cannot hold. `dev` as for
    /// [`Chip::mmu_space`]. Sleeps.
    #[allow(clippy::too_many_arguments)]
    fn mmu_map(
        &self,
        dev: &Device<Bound>,
        asid: u32,
        va: u64,
        pages: &mut dyn Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: MmuFlags,
    ) -> Result;

    /// Remove `count` pages of `1 << shift` bytes at device VA `va` of ASID `asid`; returns
    /// once the device has forgotten their translations. Sleeps.
    fn mmu_unmap(&self, asid: u32, va: u64, count: u64, shift: u32);

    /// How many interrupt vectors carry the ports' event queues: with one, it carries them
    /// all; otherwise port index `p`'s is the vector the device model wires it to.
    fn vectors(&self) -> usize;

    /// Send the chip's events to `events` from now on. The owner then runs each vector's
    /// handling once, so that entries written before are taken, and tells `events` at once of
    /// a fatal error or a removal found since the last reset that nobody was told of.
    ///
    /// With `None`, the events go to nobody; it returns once no call to the previous receiver
    /// runs any more and the owner holds no reference to it (the receiver's module may be
    /// unloaded then).
    fn set_events(&self, events: Option<Arc<dyn ChipEvents>>);
}

/// Where the owner sends the chip's events: implemented by the NIC core.
///
/// Both are called in process context and may sleep: [`ChipEvents::port_events`] from the
/// owner's interrupt thread of the vector, never concurrently for the same vector.
pub trait ChipEvents: Send + Sync {
    /// Interrupt vector `vector` fired: the event queues it carries may have new entries.
    fn port_events(&self, vector: usize);

    /// The chip stopped on a fatal error, or it is gone (`removed`: its registers read all
    /// ones); it executes nothing more until it is reset. Called once per such stop, from an
    /// interrupt thread or from [`Chip::set_events`].
    fn fatal(&self, removed: bool);
}

/// The registration data of the `cn` auxiliary device: the chip.
pub struct ChipDevice {
    chip: Arc<dyn Chip>,
}

impl ChipDevice {
    /// The registration data giving `chip`.
    pub fn new(chip: Arc<dyn Chip>) -> Self {
        Self { chip }
    }

    /// The chip.
    pub fn chip(&self) -> &Arc<dyn Chip> {
        &self.chip
    }
}

/// The chip's configuration space through its owner's operations.
impl<'a, 'b> IoBase<'a> for &'a (dyn Chip + 'b) {
    type Backend = OpsBackend;
    type Target = Region<CONFIG_SIZE>;

    #[inline]
    fn as_view(self) -> Regs<'a> {
        Regs::new(self.ops())
    }
}

/// A chip shared by reference counting is the chip.
impl<T: Chip + ?Sized> Chip for Arc<T> {
    fn ops(&self) -> &dyn RegisterOps {
        (**self).ops()
    }

    fn model(&self) -> u32 {
        (**self).model()
    }

    fn port_mask(&self) -> u32 {
        (**self).port_mask()
    }

    fn mac(&self, port: usize) -> Result<[u8; 6]> {
        (**self).mac(port)
    }

    fn link_up(&self, port: usize) -> bool {
        (**self).link_up(port)
    }

    fn devmem(&self) -> DevMem {
        (**self).devmem()
    }

    fn scrub(&self, offset: u64, len: u64) -> Result {
        (**self).scrub(offset, len)
    }

    fn reset(&self) -> Result {
        (**self).reset()
    }

    fn mmu_space(&self, dev: &Device<Bound>) -> Result<u32> {
        (**self).mmu_space(dev)
    }

    fn mmu_space_free(&self, asid: u32) {
        (**self).mmu_space_free(asid)
    }

    #[allow(clippy::too_many_arguments)]
    fn mmu_map(
        &self,
        dev: &Device<Bound>,
        asid: u32,
        va: u64,
        pages: &mut dyn Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: MmuFlags,
    ) -> Result {
        (**self).mmu_map(dev, asid, va, pages, count, shift, flags)
    }

    fn mmu_unmap(&self, asid: u32, va: u64, count: u64, shift: u32) {
        (**self).mmu_unmap(asid, va, count, shift)
    }

    fn vectors(&self) -> usize {
        (**self).vectors()
    }

    fn set_events(&self, events: Option<Arc<dyn ChipEvents>>) {
        (**self).set_events(events)
    }
}
