// SPDX-License-Identifier: GPL-2.0

//! Tests of device memory: HBM exported as a dma-buf and registered as a
//! memory region, so that remote WRITEs land in HBM.

use super::*;
use gaudi_verbs::dv::Map;
use gaudi_verbs::hbm::Hbm;
use std::os::fd::{AsRawFd, OwnedFd};

/// `DRM_IOCTL_PRIME_FD_TO_HANDLE`: `_IOWR('d', 0x2e, struct drm_prime_handle)`.
const DRM_IOCTL_PRIME_FD_TO_HANDLE: libc::c_ulong = 0xc00c_642e;

/// `struct drm_prime_handle`.
#[repr(C)]
struct DrmPrimeHandle {
    handle: u32,
    flags: u32,
    fd: i32,
}

/// Import dma-buf `fd` into the first DRM device (vgem, whose PRIME import
/// attaches without peer-to-peer support): the errno of the refusal, 0 if
/// it was taken.
fn drm_import(fd: &OwnedFd) -> i32 {
    let dri = std::fs::read_dir("/dev/dri")
        .unwrap_or_else(|e| fail(format!("/dev/dri: {e} (no DRM device to import with)")));
    let mut nodes: Vec<_> = dri
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("card"))
        })
        .collect();
    nodes.sort();
    let node = nodes
        .first()
        .unwrap_or_else(|| fail("no /dev/dri/card* to import with".into()));
    let drm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node)
        .unwrap_or_else(|e| fail(format!("{}: {e}", node.display())));
    let mut arg = DrmPrimeHandle {
        handle: 0,
        flags: 0,
        fd: fd.as_raw_fd(),
    };
    // SAFETY: `arg` is the structure this ioctl reads and writes.
    let r = unsafe { libc::ioctl(drm.as_raw_fd(), DRM_IOCTL_PRIME_FD_TO_HANDLE, &mut arg) };
    if r == 0 {
        println!(
            "{}: imported the dma-buf as handle {}",
            node.display(),
            arg.handle
        );
        return 0;
    }
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The programming model of the WQE, CQE and doorbell formats user space
/// drives: 2.0, the NIC's own (device-model.rst).
pub(crate) const MODEL_VERSION: u32 = 0x0002_0000;

fn device_info(ctx: &Context) -> gaudi_ib_device_info {
    ctx.query_device_info()
        .unwrap_or_else(|e| fail(format!("QUERY_DEVICE: {e}")))
}

/// The sysfs directory of the PCI device bound to gaudi_pci (the function whose chip gaudi_ib
/// drives).
fn pci_dir() -> std::path::PathBuf {
    let drv = std::path::Path::new("/sys/bus/pci/drivers/gaudi_pci");
    std::fs::read_dir(drv)
        .unwrap_or_else(|e| fail(format!("{}: {e}", drv.display())))
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().contains(':'))
        .map(|e| drv.join(e.file_name()))
        .unwrap_or_else(|| fail("no device bound to gaudi_pci".into()))
}

/// A window on device memory through BAR 4 (sysfs `resource4`).
pub(crate) struct BarWindow(Map);

impl BarWindow {
    pub(crate) fn new(offset: u64, len: usize) -> Self {
        let path = pci_dir().join("resource4");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        let map = Map::new(&f, offset, len)
            .unwrap_or_else(|e| fail(format!("mmap {}: {e}", path.display())));
        Self(map)
    }
}

impl Region for BarWindow {
    fn bytes(&mut self) -> &mut [u8] {
        self.0.bytes()
    }
}

/// The iova of the region of `write-target --hbm`, the address its source
/// names it by: neither 0 nor the region's device VA, and 2 MiB-aligned
/// (the device may map the block with large pages).
pub(crate) const HBM_IOVA: u64 = 0x6000_0000;

/// The target region of `write-target --hbm`: `len` bytes of HBM exported
/// as a dma-buf and registered as a memory region of `pd` at [`HBM_IOVA`],
/// seen through BAR 4.
pub(crate) struct HbmTarget {
    pub(crate) window: BarWindow,
    /// The device VA of the region.
    va: u64,
    buf: Option<OwnedFd>,
    offset: u64,
    len: u64,
}

impl HbmTarget {
    /// The target and its memory region.
    pub(crate) fn new(ctx: &Context, pd: &Pd, len: usize) -> (Self, Mr) {
        let len = len as u64;
        let before = device_info(ctx);
        // The emulator's programming model and its 256 MiB of device memory
        // (its default), as BAR 4 shows them too; the last 4 MiB hold the
        // NIC's context tables and are not the users'.
        check(
            before.model_version == MODEL_VERSION,
            format!("programming model {:#x}", before.model_version),
        );
        let bar = std::fs::metadata(pci_dir().join("resource4")).map_or(0, |m| m.len());
        check(
            before.devmem_size == (256 << 20) - (4 << 20) && bar == 256 << 20,
            format!(
                "{} bytes of device memory, BAR 4 of {bar} bytes",
                before.devmem_size
            ),
        );
        check(
            before.devmem_free == before.devmem_size,
            format!("all {} bytes free", before.devmem_free),
        );
        let hbm = ctx
            .hbm_alloc(len)
            .unwrap_or_else(|e| fail(format!("HBM alloc of {len} bytes: {e}")));
        println!(
            "HBM block of {} bytes at offset {:#x}",
            hbm.length, hbm.offset
        );
        check(hbm.length == len, format!("block of {len} bytes"));
        let free = device_info(ctx).devmem_free;
        check(
            free == before.devmem_size - len,
            format!("{free} bytes free after the allocation"),
        );
        let buf = ctx
            .hbm_export(&hbm, GAUDI_IB_HBM_EXPORT_CLOEXEC)
            .unwrap_or_else(|e| fail(format!("HBM export: {e}")));
        // SAFETY: F_GETFD on a descriptor we own.
        let fdflags = unsafe { libc::fcntl(buf.as_raw_fd(), libc::F_GETFD) };
        check(
            fdflags & libc::FD_CLOEXEC != 0,
            format!("dma-buf fd {} is close-on-exec", buf.as_raw_fd()),
        );
        let err = drm_import(&buf);
        check(
            err == libc::EOPNOTSUPP,
            format!("a DRM (vgem) import without peer-to-peer is refused: errno {err}"),
        );
        expect_errno(
            "HBM export with an unknown flag",
            ctx.hbm_export(&hbm, 1 << 5),
            libc::EINVAL,
        );
        let mr = ctx
            .reg_dmabuf_mr(
                pd,
                &buf,
                0,
                len,
                HBM_IOVA,
                IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
            )
            .unwrap_or_else(|e| fail(format!("dma-buf MR of the HBM block: {e}")));
        println!(
            "dma-buf MR: rkey {:#x}, iova {HBM_IOVA:#x}, device VA {:#x}, pages of 2^{} bytes",
            mr.rkey, mr.resp.mmu_va, mr.resp.page_shift
        );
        let rw = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
        expect_errno(
            "dma-buf MR past the end of the dma-buf",
            ctx.reg_dmabuf_mr(pd, &buf, 4096, len, 0, rw),
            libc::EINVAL,
        );
        expect_errno(
            "dma-buf MR for remote atomics (the NIC does RDMA WRITE only)",
            ctx.reg_dmabuf_mr(pd, &buf, 0, len, 0, rw | IB_UVERBS_ACCESS_REMOTE_ATOMIC),
            libc::EOPNOTSUPP,
        );
        // The object goes; the dma-buf and the MR keep the block: a new
        // block of the same size lands elsewhere.
        let offset = hbm.offset;
        ctx.hbm_destroy(hbm)
            .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
        let other = ctx
            .hbm_alloc(len)
            .unwrap_or_else(|e| fail(format!("second HBM alloc: {e}")));
        check(
            other.offset != offset,
            format!(
                "a destroyed but exported block stays allocated (new block at {:#x})",
                other.offset
            ),
        );
        ctx.hbm_destroy(other)
            .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
        let free = device_info(ctx).devmem_free;
        check(
            free == before.devmem_size - len,
            format!("{free} bytes free with the block held by its dma-buf"),
        );
        let mut window = BarWindow::new(offset, len as usize);
        window.bytes().fill(0);
        let t = Self {
            window,
            va: mr.resp.mmu_va,
            buf: Some(buf),
            offset,
            len,
        };
        (t, mr)
    }

    /// Check `len` bytes at `off` once more through the device MMU (the
    /// emulator reads its page tables): at most 64 bytes at each end.
    pub(crate) fn check_through_device(&mut self, emu: &mut EmuCtl, off: usize, len: usize) {
        let va = self.va;
        let n = len.min(64);
        // In the region's ASID, where it sits at its iova.
        emu.view_asid_of(va)
            .unwrap_or_else(|e| fail(format!("HBM region: {e}")));
        for at in [off, off + len - n] {
            let got = emu
                .peek(va + at as u64, n)
                .unwrap_or_else(|e| fail(format!("peek HBM at {at}: {e}")));
            if got != self.window.bytes()[at..at + n] {
                fail(format!(
                    "device MMU and BAR 4 disagree on {n} bytes at offset {at}"
                ));
            }
        }
    }

    /// After the MR is deregistered: closing the dma-buf returns the block.
    pub(crate) fn finish(mut self, ctx: &Context) {
        drop(self.buf.take());
        let info = device_info(ctx);
        check(
            info.devmem_free == info.devmem_size,
            format!("all {} bytes free again", info.devmem_free),
        );
        let again: Hbm = ctx
            .hbm_alloc(self.len)
            .unwrap_or_else(|e| fail(format!("HBM alloc after release: {e}")));
        check(
            again.offset == self.offset,
            format!(
                "the released block is free again (new block at {:#x})",
                again.offset
            ),
        );
        ctx.hbm_destroy(again)
            .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
    }
}

/// The bus address of BAR 4 (sysfs `resource`, the fifth line).
pub(crate) fn bar4_address() -> u64 {
    let path = pci_dir().join("resource");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
    text.lines()
        .nth(4)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| fail(format!("{}: no BAR 4 line", path.display())))
}

/// The offset of the first byte other than 0 in `buf`.
fn first_nonzero(buf: &[u8]) -> Option<usize> {
    // Or-ed a page at a time (no early exit inside: the loop vectorizes).
    let page = buf
        .chunks(4096)
        .position(|c| c.iter().fold(0u8, |a, b| a | b) != 0)?;
    let at = page * 4096;
    buf[at..].iter().position(|b| *b != 0).map(|i| at + i)
}

/// The pattern `hbm-scrubbed` leaves in device memory.
const SCRUB_SEED: u64 = 0x5c7b;

/// Spots across `len` bytes for device reads: 64 B at 64 places, the first
/// and the last 64 B among them.
fn spots(len: usize) -> Vec<usize> {
    let step = len / 64;
    let mut v: Vec<usize> = (0..64)
        .map(|i| i * step + (i * 4099) % (step - 64))
        .collect();
    v[0] = 0;
    v[63] = len - 64;
    v
}

/// Export `hbm` and register all of it; the dma-buf and the region.
fn hbm_mr(ctx: &Context, pd: &Pd, hbm: &Hbm) -> (OwnedFd, Mr) {
    let buf = ctx
        .hbm_export(hbm, GAUDI_IB_HBM_EXPORT_CLOEXEC)
        .unwrap_or_else(|e| fail(format!("HBM export: {e}")));
    let mr = ctx
        .reg_dmabuf_mr(
            pd,
            &buf,
            0,
            hbm.length,
            0,
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("dma-buf MR of the HBM block: {e}")));
    (buf, mr)
}

/// The block `hbm` reads 0 everywhere through BAR 4, and at 64 spots
/// through the device MMU (a dma-buf region of it).
fn zeros(ctx: &Context, pd: &Pd, emu: &mut EmuCtl, hbm: &Hbm, what: &str) {
    let len = hbm.length as usize;
    let mut w = BarWindow::new(hbm.offset, len);
    let nz = first_nonzero(w.bytes());
    check(
        nz.is_none(),
        format!(
            "{what}: all {len} bytes at {:#x} read 0 through BAR 4{}",
            hbm.offset,
            nz.map_or(String::new(), |at| format!(
                "; byte {at} reads {:#04x}",
                w.bytes()[at]
            ))
        ),
    );
    let (buf, mr) = hbm_mr(ctx, pd, hbm);
    emu.view_asid_of(mr.resp.mmu_va)
        .unwrap_or_else(|e| fail(format!("{what}: {e}")));
    let bad = spots(len).into_iter().find(|&at| {
        emu.peek(mr.resp.mmu_va + at as u64, 64)
            .map_or(true, |v| v.iter().any(|b| *b != 0))
    });
    check(
        bad.is_none(),
        format!("{what}: the device reads 0 at 64 places across the block (first other: {bad:?})"),
    );
    ctx.dereg_mr(mr)
        .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
    drop(buf);
}

/// `hbm-scrubbed --step STEP --mib N [--offset O] [--then-fill]`: device
/// memory does not carry one owner's data to the next.
///
/// - `fill`: with all device memory free, allocate N MiB, print
///   `offset=O`, write a pattern through BAR 4 and check that the device
///   reads it (a dma-buf region of the block, the emulator's peek); exit
///   without freeing: the process's end frees the block.
/// - `check`: allocate N MiB: first fit gives offset O again; the block
///   reads 0 through BAR 4 (all of it) and through the device. With
///   `--then-fill`, write the pattern again and free the block.
/// - `probe` (after the device was unbound and bound again): before any
///   allocation all of device memory reads 0 through BAR 4; then as
///   `check`.
pub(crate) fn hbm_scrubbed(args: &[String]) {
    let step = args
        .iter()
        .position(|a| a == "--step")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
        .unwrap_or_else(|| fail("--step fill|check|probe missing".into()));
    let len = arg(args, "--mib", Some(64)) << 20;
    let ctx = open_ctx();
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut emu = emu();
    let info = device_info(&ctx);
    check(
        info.devmem_free == info.devmem_size,
        format!(
            "{step}: all {} bytes of device memory free ({} free)",
            info.devmem_size, info.devmem_free
        ),
    );
    if step == "probe" {
        let size = info.devmem_size as usize;
        let mut all = BarWindow::new(0, size);
        let nz = first_nonzero(all.bytes());
        check(
            nz.is_none(),
            format!(
                "after the probe, before any allocation: all {size} bytes of device memory read 0 through BAR 4 (first other byte: {nz:?})"
            ),
        );
    }
    let hbm = ctx
        .hbm_alloc(len)
        .unwrap_or_else(|e| fail(format!("HBM alloc of {len} bytes: {e}")));
    match step {
        "fill" => {
            println!("offset={}", hbm.offset);
            let mut w = BarWindow::new(hbm.offset, len as usize);
            fill(w.bytes(), SCRUB_SEED);
            let (buf, mr) = hbm_mr(&ctx, &pd, &hbm);
            emu.view_asid_of(mr.resp.mmu_va)
                .unwrap_or_else(|e| fail(format!("HBM region: {e}")));
            let bad = spots(len as usize).into_iter().find(|&at| {
                emu.peek(mr.resp.mmu_va + at as u64, 64)
                    .map_or(true, |v| v[..] != w.bytes()[at..at + 64])
            });
            check(
                bad.is_none(),
                format!("{len} bytes at {:#x} written through BAR 4: the device reads them (first other: {bad:?})", hbm.offset),
            );
            ctx.dereg_mr(mr)
                .unwrap_or_else(|e| fail(format!("dereg_mr: {e}")));
            drop(buf);
            println!("the block is left to the end of the process");
        }
        "check" | "probe" => {
            let want = arg(args, "--offset", None);
            check(
                hbm.offset == want,
                format!(
                    "{len} bytes at {:#x}: where the earlier owner's block was (first fit)",
                    hbm.offset
                ),
            );
            zeros(
                &ctx,
                &pd,
                &mut emu,
                &hbm,
                if step == "check" {
                    "the block another process wrote and left"
                } else {
                    "the block written before the unbind, allocated after the probe"
                },
            );
            if args.iter().any(|a| a == "--then-fill") {
                fill(BarWindow::new(hbm.offset, len as usize).bytes(), SCRUB_SEED);
                println!("pattern written into the block, which is freed");
            }
            ctx.hbm_destroy(hbm)
                .unwrap_or_else(|e| fail(format!("HBM destroy: {e}")));
        }
        _ => fail(format!("unknown step {step}")),
    }
    teardown(&ctx, [], []);
}
