// SPDX-License-Identifier: GPL-2.0

//! Driver of the emulated Gaudi2 NIC function.
//!
//! On a Gaudi2 host the accelerator's PCI function belongs to habanalabs, which gives the NIC
//! to the NIC core through an auxiliary device. Under test, QEMU presents the function of the
//! Gaudi2 NIC emulator instead: this driver owns it and plays habanalabs' part. It identifies
//! and resets the chip, takes its interrupts, watches that it is still there, and gives the
//! chip services (device-model.rst, "Chip services") to the NIC core through the auxiliary
//! device `gaudi_pci.cn.N`, whose registration data is a [`ChipDevice`].
//!
//! Documentation: Documentation/infiniband/gaudi/design.rst, "Layering".

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    io::{
        ops::RegisterOps,
        poll::read_poll_timeout,
        register,
        register::Array,
        Io, //
    },
    irq::{
        IrqReturn,
        ThreadedHandler,
        ThreadedIrqReturn, //
    },
    net::gaudi::{
        chip::{
            Chip,
            ChipDevice,
            ChipEvents,
            DevMem,
            MmuFlags,
            CONFIG_SIZE, //
        },
        Receiver,
    },
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        Arc,
        Mutex, //
    },
    time::Delta,
};

mod mmu;

/// The name of the driver, its interrupts and its BAR regions.
const DRV_NAME: &CStr = c"gaudi_pci";

/// MSI-X vectors the driver asks for: vector 0 carries the chip services' interrupts (the
/// fatal error, the test), vectors 1 to 7 the ports' event queues. A function without MSI-X
/// gets one MSI vector, which then carries everything.
const NUM_VECTORS: u32 = 8;

/// How often the driver checks that the device is still there: a device that fell off the bus
/// (surprise removal) raises no interrupt, and its registers read all ones.
const PRESENCE_PERIOD: Delta = Delta::from_secs(1);

/// How long the chip may take to become ready after a reset, and a scrub to finish.
const RESET_TIMEOUT: Delta = Delta::from_secs(1);

type Bar0 = pci::DevresBar<CONFIG_SIZE>;
pub(crate) type Bar<'a> = pci::Bar<'a, CONFIG_SIZE>;

register! {
    /// Identity of the emulated function: [`ID_MAGIC`].
    pub(crate) SVC_ID(u32) @ 0x103000 {}
    /// The device model's version.
    pub(crate) SVC_VERSION(u32) @ 0x103004 {
        /// Incompatible changes.
        31:16 major;
        /// Compatible additions.
        15:0 minor;
    }
    /// Bit p: the firmware enables port p.
    pub(crate) SVC_PORT_MASK(u32) @ 0x103008 {}
    /// Write [`RESET_MAGIC`]: the chip resets, every block and the MMU.
    pub(crate) SVC_RESET(u32) @ 0x10300c {}
    /// Bit p: port p's link is up.
    pub(crate) SVC_LINK(u32) @ 0x103010 {}
    /// Chip status.
    pub(crate) SVC_STATUS(u32) @ 0x103014 {
        /// The chip stopped on a fatal error; it executes nothing until reset.
        1:1 fatal => bool;
        /// The last reset has finished.
        0:0 ready => bool;
    }
    /// Interrupt causes of vector 0; write 1 to clear.
    pub(crate) SVC_IRQ_CAUSE(u32) @ 0x103018 {
        /// The chip stopped on a fatal error.
        1:1 fatal => bool;
        /// A test interrupt.
        0:0 test => bool;
    }
    /// Write a vector number: that vector is raised, with the test cause.
    pub(crate) SVC_IRQ_TEST(u32) @ 0x10301c {}
    /// HBM size in bytes, bits 31:0.
    pub(crate) SVC_HBM_SIZE_LO(u32) @ 0x103020 {}
    /// Bits 63:32.
    pub(crate) SVC_HBM_SIZE_HI(u32) @ 0x103024 {}
    /// HBM scrub: offset, bits 31:0 (4 KiB aligned).
    pub(crate) SVC_SCRUB_ADDR_LO(u32) @ 0x103028 {}
    /// Bits 63:32.
    pub(crate) SVC_SCRUB_ADDR_HI(u32) @ 0x10302c {}
    /// HBM scrub: length, bits 31:0 (a multiple of 4 KiB).
    pub(crate) SVC_SCRUB_LEN_LO(u32) @ 0x103030 {}
    /// Bits 63:32.
    pub(crate) SVC_SCRUB_LEN_HI(u32) @ 0x103034 {}
    /// Write [`SCRUB_START`] to zero the range; reads [`SCRUB_DONE`] or [`SCRUB_REFUSED`].
    pub(crate) SVC_SCRUB_CTRL(u32) @ 0x103038 {}
    /// Port p's MAC address, bytes 2 to 5 big-endian.
    pub(crate) SVC_MAC_LO(u32)[24, stride = 8] @ 0x103100 {}
    /// Its bytes 0 and 1, bits 15:0.
    pub(crate) SVC_MAC_HI(u32)[24, stride = 8] @ 0x103104 {}
}

/// [`SVC_ID`]: "G2EF".
const ID_MAGIC: u32 = 0x4732_4546;
/// [`SVC_RESET`]: "RSET".
const RESET_MAGIC: u32 = 0x5253_4554;
/// The model major version the NIC drivers program.
const MODEL_MAJOR: u32 = 2;
const SCRUB_START: u32 = 1;
const SCRUB_DONE: u32 = 1;
const SCRUB_REFUSED: u32 = 2;

/// The chip's identity and model version, `ENODEV` if it is not a function this driver knows
/// (a real Gaudi2, which belongs to habanalabs, among them).
fn identify(dev: &Device, bar: &Bar<'_>) -> Result<(u32, u32)> {
    let id = bar.read(SVC_ID).into_raw();
    if id != ID_MAGIC {
        dev_err!(
            dev,
            "unknown identification {:#010x} (expected {:#010x}), refusing device\n",
            id,
            ID_MAGIC
        );
        return Err(ENODEV);
    }
    let v = bar.read(SVC_VERSION);
    let (major, minor) = (v.major().get(), v.minor().get());
    if major != MODEL_MAJOR {
        dev_err!(
            dev,
            "unsupported device model {}.{} (driver implements {}.x), refusing device\n",
            major,
            minor,
            MODEL_MAJOR
        );
        return Err(ENODEV);
    }
    Ok((major, minor))
}

/// Reset the chip and wait until it is ready (sleeps).
fn reset(dev: &Device, bar: &Bar<'_>) -> Result {
    bar.write_reg(SVC_RESET::from_raw(RESET_MAGIC));
    let s = read_poll_timeout(
        || Ok(bar.read(SVC_STATUS)),
        |s| s.ready(),
        Delta::from_millis(1),
        RESET_TIMEOUT,
    )
    .inspect_err(|_| {
        dev_err!(
            dev,
            "device not ready {} ms after reset (status {:#010x}), refusing device\n",
            RESET_TIMEOUT.as_millis(),
            bar.read(SVC_STATUS).into_raw()
        )
    })?;
    if s.fatal() {
        dev_err!(
            dev,
            "device reports a fatal error after reset (status {:#010x})\n",
            s.into_raw()
        );
        return Err(EIO);
    }
    Ok(())
}

/// The device memory the host reaches: the chip's HBM size at the start of BAR 4, if the BAR
/// holds it (otherwise none can be used).
fn devmem(pdev: &pci::Device<Bound>, bar: &Bar<'_>) -> Result<DevMem> {
    let size = u64::from(bar.read(SVC_HBM_SIZE_LO).into_raw())
        | (u64::from(bar.read(SVC_HBM_SIZE_HI).into_raw()) << 32);
    let bar_len = pdev.resource_len(4)?;
    if size > bar_len || size % (1 << 12) != 0 {
        dev_err!(
            pdev,
            "device memory of {:#x} bytes does not fit BAR 4 ({:#x} bytes): not used\n",
            size,
            bar_len
        );
        return Ok(DevMem::default());
    }
    Ok(DevMem {
        start: pdev.resource_start(4)?,
        size,
    })
}

/// The emulated function's chip, as the NIC core reaches it.
#[pin_data]
struct PciChip {
    bar: Bar0,
    dev: ARef<Device>,
    model: u32,
    devmem: DevMem,
    /// Interrupt vectors, once set up.
    vectors: Atomic<u32>,
    /// The device is gone (its registers read all ones): set by the presence check.
    removed: Atomic<bool>,
    /// A fatal error or the removal was found since the last reset: it is told once.
    stopped: Atomic<bool>,
    /// Serialises the chip services that take several register accesses (scrub, reset).
    #[pin]
    services: Mutex<()>,
    /// The device MMU's ASIDs and their page tables.
    #[pin]
    mmu: mmu::Mmu,
    /// Who receives the chip's events.
    #[pin]
    events: Receiver<dyn ChipEvents>,
}

impl PciChip {
    /// Run `f` on the events' receiver, if there is one; a receiver that is being replaced
    /// waits for it.
    fn to_receiver(&self, f: impl FnOnce(&dyn ChipEvents)) {
        self.events.call(|e| f(e));
    }
}

impl PciChip {
    /// `EINVAL` unless `dev` is the function.
    fn check(&self, dev: &Device<Bound>) -> Result {
        let dev: &Device = dev;
        if core::ptr::eq(dev, &*self.dev) {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Point ASID `asid`'s translations at `root`.
    fn set_root(&self, asid: u32, root: u64) -> Result {
        let bar = self.bar.try_access().ok_or(ENODEV)?;
        mmu::set_root(&bar, asid, root)
    }

    /// Make the device forget ASID `asid`'s cached translations.
    fn invalidate(&self, asid: u32) {
        if let Some(bar) = self.bar.try_access() {
            mmu::invalidate(&bar, asid);
        }
    }
}

impl RegisterOps for PciChip {
    fn read32(&self, offset: usize) -> u32 {
        self.bar
            .try_access()
            .and_then(|b| b.try_read32(offset).ok())
            .unwrap_or(u32::MAX)
    }

    fn write32(&self, offset: usize, value: u32) {
        if let Some(b) = self.bar.try_access() {
            let _ = b.try_write32(value, offset);
        }
    }
}

impl Chip for PciChip {
    fn ops(&self) -> &dyn RegisterOps {
        self
    }

    fn model(&self) -> u32 {
        self.model
    }

    fn port_mask(&self) -> u32 {
        self.bar
            .try_access()
            .map_or(0, |b| b.read(SVC_PORT_MASK).into_raw())
    }

    fn mac(&self, port: usize) -> Result<[u8; 6]> {
        let bar = self.bar.try_access().ok_or(ENODEV)?;
        let lo = bar
            .try_read(SVC_MAC_LO::try_at(port).ok_or(EINVAL)?)?
            .into_raw()
            .to_be_bytes();
        let hi = bar
            .try_read(SVC_MAC_HI::try_at(port).ok_or(EINVAL)?)?
            .into_raw()
            .to_be_bytes();
        Ok([hi[2], hi[3], lo[0], lo[1], lo[2], lo[3]])
    }

    fn link_up(&self, port: usize) -> bool {
        port < 32
            && self
                .bar
                .try_access()
                .is_some_and(|b| b.read(SVC_LINK).into_raw() & (1 << port) != 0)
    }

    fn devmem(&self) -> DevMem {
        self.devmem
    }

    fn scrub(&self, offset: u64, len: u64) -> Result {
        let _services = self.services.lock();
        // Register accesses only under the BAR's guard (an RCU read-side section); the waits
        // outside it.
        {
            let bar = self.bar.try_access().ok_or(ENODEV)?;
            bar.write_reg(SVC_SCRUB_ADDR_LO::from_raw(offset as u32));
            bar.write_reg(SVC_SCRUB_ADDR_HI::from_raw((offset >> 32) as u32));
            bar.write_reg(SVC_SCRUB_LEN_LO::from_raw(len as u32));
            bar.write_reg(SVC_SCRUB_LEN_HI::from_raw((len >> 32) as u32));
            bar.write_reg(SVC_SCRUB_CTRL::from_raw(SCRUB_START));
        }
        let s = read_poll_timeout(
            || {
                self.bar
                    .try_access()
                    .map(|b| b.read(SVC_SCRUB_CTRL).into_raw())
                    .ok_or(ENODEV)
            },
            |s| *s == SCRUB_DONE || *s == SCRUB_REFUSED,
            Delta::from_millis(1),
            RESET_TIMEOUT,
        )?;
        if s == SCRUB_DONE {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    fn reset(&self) -> Result {
        let _services = self.services.lock();
        {
            let bar = self.bar.try_access().ok_or(ENODEV)?;
            bar.write_reg(SVC_RESET::from_raw(RESET_MAGIC));
        }
        // The device has stopped (no event write, no page walk) only once the reset has
        // finished.
        let s = read_poll_timeout(
            || {
                self.bar
                    .try_access()
                    .map(|b| b.read(SVC_STATUS))
                    .ok_or(ENODEV)
            },
            |s| s.ready(),
            Delta::from_millis(1),
            RESET_TIMEOUT,
        )
        .inspect_err(|_| {
            dev_err!(
                self.dev,
                "device not ready {} ms after a reset\n",
                RESET_TIMEOUT.as_millis()
            )
        })?;
        if self.removed.load(Relaxed) || s.into_raw() == u32::MAX {
            // Gone (its registers read all ones): the presence check says so.
            return Err(ENODEV);
        }
        if s.fatal() {
            dev_err!(
                self.dev,
                "device reports a fatal error after a reset (status {:#010x})\n",
                s.into_raw()
            );
            return Err(EIO);
        }
        // A fatal error after this one is told again.
        self.stopped.store(false, Release);
        Ok(())
    }

    fn mmu_space(&self, dev: &Device<Bound>) -> Result<u32> {
        self.check(dev)?;
        self.mmu.take(dev, &|asid, root| self.set_root(asid, root))
    }

    fn mmu_space_free(&self, asid: u32) {
        self.mmu
            .give_back(&|asid, root| self.set_root(asid, root), asid)
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
        self.check(dev)?;
        self.mmu.map(
            dev,
            &|asid| self.invalidate(asid),
            asid,
            va,
            pages,
            count,
            shift,
            flags,
        )
    }

    fn mmu_unmap(&self, asid: u32, va: u64, count: u64, shift: u32) {
        let failed = self
            .mmu
            .unmap(&|asid| self.invalidate(asid), asid, va, count, shift);
        if failed != 0 {
            dev_warn!(
                self.dev,
                "ASID {}: {} pages from device VA {:#x} not removed (no memory); their tables stay\n",
                asid,
                failed,
                va
            );
        }
    }

    fn vectors(&self) -> usize {
        self.vectors.load(Relaxed) as usize
    }

    fn set_events(&self, events: Option<Arc<dyn ChipEvents>>) {
        let Some(events) = events else {
            self.events.set_to(None);
            return;
        };
        self.events.set_to(Some(events.clone()));
        if self.stopped.load(Acquire) {
            // Found while nobody received events: told now.
            events.fatal(self.removed.load(Relaxed));
            return;
        }
        drop(events);
        // Each vector's thread runs once (a test interrupt), so that what the event queues got
        // before is taken, by the thread that takes what follows.
        if let Some(bar) = self.bar.try_access() {
            for vector in 0..self.vectors() {
                bar.write_reg(SVC_IRQ_TEST::from_raw(vector as u32));
            }
        }
    }
}

/// Handler of one interrupt vector (MSI-X, or the one MSI vector).
///
/// Interrupts merge, so the handler never counts interrupts as events: it reads the cause
/// register and handles every cause it finds. The ports' event queues are taken by the NIC
/// core from the handler's thread, as reporting their events may sleep; so is a fatal error.
struct VectorHandler {
    chip: Arc<PciChip>,
    vector: usize,
    /// Interrupts seen on this vector (the probe's interrupt test counts on it).
    irqs: Atomic<u32>,
    /// The chip's fatal cause was seen and not yet passed on (vector 0 only).
    fatal_due: Atomic<bool>,
    /// Vectors the function has: with one, it carries every port's event queue.
    vectors: usize,
}

impl ThreadedHandler for VectorHandler {
    fn handle(&self) -> ThreadedIrqReturn {
        self.irqs.add(1, Relaxed);
        let Some(bar) = self.chip.bar.try_access() else {
            return ThreadedIrqReturn::None;
        };
        // Vector 0 takes both causes, the others only test interrupts.
        let pending = bar.read(SVC_IRQ_CAUSE);
        let cause = SVC_IRQ_CAUSE::zeroed()
            .with_test(pending.test())
            .with_fatal(self.vector == 0 && pending.fatal());
        if cause.into_raw() != 0 {
            bar.write_reg(cause);
        }
        // A vector that carries ports' event queues always runs its thread: the core clears
        // the NIC's interrupt cause, which an entry taken by an earlier scan may have left set.
        let ports = self.vectors == 1 || self.vector != 0;
        if cause.fatal() {
            self.fatal_due.store(true, Release);
        }
        if cause.fatal() || ports {
            ThreadedIrqReturn::WakeThread
        } else if cause.into_raw() != 0 {
            ThreadedIrqReturn::Handled
        } else {
            ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> IrqReturn {
        if self.chip.removed.load(Relaxed) || self.fatal_due.xchg(false, Acquire) {
            // Nothing the device writes can be trusted any more; it is told once (a receiver
            // set later is told by `set_events`).
            if !self.chip.stopped.xchg(true, Full) {
                let removed = self.chip.removed.load(Relaxed);
                self.chip.to_receiver(|e| e.fatal(removed));
            }
        } else if self.vectors == 1 || self.vector != 0 {
            self.chip.to_receiver(|e| e.port_events(self.vector));
        }
        IrqReturn::Handled
    }
}

impl pci::PolledHandler for VectorHandler {
    /// The presence check, every [`PRESENCE_PERIOD`] on vector 0: the registers of a device
    /// that is gone read all ones. Runs the handler's thread once when it finds the device
    /// gone.
    fn poll(&self) -> bool {
        if self.chip.removed.load(Relaxed) {
            return false;
        }
        let Some(bar) = self.chip.bar.try_access() else {
            return false;
        };
        if bar.read(SVC_ID).into_raw() != u32::MAX {
            return false;
        }
        !self.chip.removed.xchg(true, Full)
    }
}

/// Auxiliary device IDs: one per bound function.
static NEXT_ID: Atomic<u32> = Atomic::new(0);

/// Stops the chip when dropped.
struct Stopper(Arc<PciChip>);

impl Drop for Stopper {
    fn drop(&mut self) {
        // Logged by the reset if it fails.
        let _ = self.0.reset();
    }
}

/// A bound emulated function.
struct GaudiPci<'bound> {
    // Dropped first: the NIC core unbinds (it stops the chip before it frees its memory).
    _cn: auxiliary::Registration<'bound, kernel::types::CovariantForLt!(ChipDevice)>,
    // The chip stops again, in case the core never bound, before the interrupts go.
    _stop: Stopper,
    // Interrupts are freed while the BAR is still mapped.
    irqs: pci::ThreadedIrqHandlers<'bound, VectorHandler>,
    pdev: &'bound pci::Device<Bound>,
}

impl GaudiPci<'_> {
    /// Raise a test interrupt on every vector and wait until its handler has seen it.
    fn test_interrupts(
        pdev: &pci::Device<Bound>,
        chip: &PciChip,
        irqs: &pci::ThreadedIrqHandlers<'_, VectorHandler>,
        kind: &str,
    ) -> Result {
        for vector in 0..irqs.len() {
            let handler = irqs.handler(vector).ok_or(EINVAL)?;
            let before = handler.irqs.load(Relaxed);
            chip.bar
                .access(pdev.as_ref())?
                .write_reg(SVC_IRQ_TEST::from_raw(vector as u32));
            let seen = read_poll_timeout(
                || Ok(handler.irqs.load(Relaxed)),
                |n| *n != before,
                Delta::from_millis(1),
                Delta::from_secs(2),
            )
            .inspect_err(|_| {
                dev_err!(
                    pdev,
                    "{} test interrupt on vector {} not received\n",
                    kind,
                    vector
                )
            })?;
            dev_info!(
                pdev,
                "{} test interrupt received on vector {} (irq {}), count {}\n",
                kind,
                vector,
                irqs.irq(vector)?,
                seen
            );
        }
        Ok(())
    }
}

struct GaudiPciDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <GaudiPciDriver as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(pci::Vendor::HABANALABS, 0x1020), ())]
);

impl pci::Driver for GaudiPciDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiPci<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    // The device reaches 52 bits of bus address (page table entries, rings, the event queue):
    // with the default 32, memory or a peer's BAR above 4 GiB would be bounced or refused.
    const DMA_MASK: Option<kernel::dma::DmaMask> = Some(kernel::dma::DmaMask::new::<52>());

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev_info!(
            pdev,
            "probe {:04x}:{:04x}\n",
            pdev.vendor_id().as_raw(),
            pdev.device_id()
        );
        pdev.enable_device_managed()?;
        pdev.set_master();

        let bar = pdev.iomap_region_sized::<CONFIG_SIZE>(0, DRV_NAME)?;
        dev_info!(pdev, "BAR0 mapped\n");
        let (major, minor) = identify(pdev.as_ref(), &bar)?;
        dev_info!(
            pdev,
            "identified Gaudi2 NIC, device model {}.{}\n",
            major,
            minor
        );
        reset(pdev.as_ref(), &bar)?;
        let devmem = devmem(pdev, &bar)?;
        let chip = Arc::pin_init(
            try_pin_init!(PciChip {
                bar: bar.into_devres()?,
                dev: pdev.as_ref().into(),
                model: major << 16 | minor,
                devmem,
                vectors: Atomic::new(0),
                removed: Atomic::new(false),
                stopped: Atomic::new(false),
                services <- kernel::new_mutex!(()),
                mmu <- mmu::Mmu::new(),
                events <- Receiver::new(),
            }),
            GFP_KERNEL,
        )?;

        let vectors = core::cell::Cell::new(NUM_VECTORS as usize);
        let mut handler = |vector| -> Result<VectorHandler> {
            Ok(VectorHandler {
                chip: chip.clone(),
                vector,
                vectors: vectors.get(),
                irqs: Atomic::new(0),
                fatal_due: Atomic::new(false),
            })
        };
        let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
        let msi = pci::IrqTypes::default().with(pci::IrqType::Msi);
        let (kind, mut irqs) =
            match pdev.request_threaded_irq_handlers(NUM_VECTORS, msix, DRV_NAME, &mut handler) {
                Ok(irqs) => ("MSI-X", irqs),
                Err(e) => {
                    dev_info!(
                        pdev,
                        "cannot set up {} MSI-X vectors ({:?}), trying one MSI vector\n",
                        NUM_VECTORS,
                        e
                    );
                    vectors.set(1);
                    let irqs = pdev
                        .request_threaded_irq_handlers(1, msi, DRV_NAME, &mut handler)
                        .inspect_err(|e| {
                            dev_err!(pdev, "cannot set up an MSI vector: {:?}\n", e)
                        })?;
                    ("MSI", irqs)
                }
            };
        dev_info!(pdev, "{} enabled, vectors: {}\n", kind, irqs.len());
        chip.vectors.store(irqs.len() as u32, Relaxed);

        GaudiPci::test_interrupts(pdev, &chip, &irqs, kind)?;
        irqs.start_poll(0, PRESENCE_PERIOD)?;

        let id = NEXT_ID.fetch_add(1, Relaxed);
        let cn = auxiliary::Registration::new(
            pdev.as_ref(),
            c"cn",
            id,
            <LocalModule as kernel::ModuleMetadata>::NAME,
            ChipDevice::new(chip.clone()),
        )
        .inspect_err(|e| dev_err!(pdev, "cannot add the NIC's auxiliary device: {:?}\n", e))?;
        dev_info!(pdev, "chip given to the NIC core (gaudi_pci.cn.{})\n", id);

        Ok(GaudiPci {
            _cn: cn,
            _stop: Stopper(chip),
            irqs,
            pdev,
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.irqs.synchronize();
        dev_info!(pdev, "unbind\n");
    }
}

impl Drop for GaudiPci<'_> {
    fn drop(&mut self) {
        dev_info!(self.pdev, "released\n");
    }
}

kernel::module_pci_driver! {
    type: GaudiPciDriver,
    name: "gaudi_pci",
    description: "Emulated Gaudi2 NIC function",
    license: "GPL v2",
}
