// SPDX-License-Identifier: GPL-2.0

//! The chip as habanalabs gives it: the `habanalabs.cn` auxiliary device.
//!
//! C header: [`include/linux/habanalabs/cn_aux.h`](srctree/include/linux/habanalabs/cn_aux.h)
//!
//! [`HabanalabsChip`] implements [`Chip`] on the operations habanalabs puts in the device's
//! `struct hbl_aux_dev` (Documentation/infiniband/gaudi/design.rst, "Relation to the
//! habanalabs accel driver", has the mapping of each operation). The operations and data
//! belong to habanalabs and are valid while the device is bound: the chip reaches them only
//! until [`HabanalabsChip::revoke`], which the NIC core calls when it is unbound (a `Devres`
//! of the auxiliary device does), and which waits for the calls that run.

use crate::{
    auxiliary, bindings,
    device::{
        Bound,
        Device, //
    },
    devres::Devres,
    error::to_result,
    io::ops::RegisterOps,
    net::gaudi::chip::{
        Chip,
        ChipEvents,
        DevMem,
        MmuFlags,
        CONFIG_SIZE, //
    },
    prelude::*,
    revocable::Revocable,
    sync::{
        rcu::synchronize_rcu,
        Arc,
        CondVar,
        Mutex, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
};
use core::ptr::NonNull;

/// Where the configuration space starts in BAR0, from which [`Chip::ops`] counts; habanalabs'
/// `rreg` and `wreg` count from `CFG_BASE`, which is there (device-model.rst).
pub const CFG_IN_BAR0: usize = 0x400_0000;

/// Device VAs a call of `vm_dev_mmu_map_pages` takes at most: the pages are passed as an
/// array on the stack.
const MAP_BATCH: usize = 64;

/// A `struct hbl_aux_dev` whose operations and data are those of a Gaudi2's NIC.
///
/// # Invariants
///
/// The pointer is valid, with `aux_ops` pointing to a `struct hbl_cn_aux_ops` whose operations
/// are all set and `aux_data` to a `struct hbl_cn_aux_data`, while the value is reachable
/// (until [`HabanalabsChip::revoke`] returns).
#[derive(Clone, Copy)]
struct Aux(NonNull<bindings::hbl_aux_dev>);

// SAFETY: habanalabs' operations may be called from any thread (the interface's contract).
unsafe impl Send for Aux {}
// SAFETY: As above.
unsafe impl Sync for Aux {}

impl Aux {
    fn raw(self) -> *mut bindings::hbl_aux_dev {
        self.0.as_ptr()
    }

    fn ops(&self) -> &bindings::hbl_cn_aux_ops {
        // SAFETY: By the type invariants `aux_ops` points to the operations, which live while
        // `self` is reachable.
        unsafe { &*(*self.raw()).aux_ops.cast::<bindings::hbl_cn_aux_ops>() }
    }

    fn data(&self) -> &bindings::hbl_cn_aux_data {
        // SAFETY: By the type invariants `aux_data` points to the data, which live while
        // `self` is reachable.
        unsafe { &*(*self.raw()).aux_data.cast::<bindings::hbl_cn_aux_data>() }
    }
}

/// Calls that may sleep, how many run, and the VMs the chip made: (ASID, habanalabs' handle).
struct Sleeping {
    aux: Option<Aux>,
    running: u32,
    vms: KVec<(u32, u64)>,
}

impl Sleeping {
    /// habanalabs' handle of the VM of ASID `asid`, `EINVAL` if the chip did not make it.
    fn vm(&self, asid: u32) -> Result<u64> {
        self.vms
            .iter()
            .find(|(a, _)| *a == asid)
            .map(|(_, vm)| *vm)
            .ok_or(EINVAL)
    }
}

/// The chip of a `habanalabs.cn` auxiliary device.
#[pin_data]
pub struct HabanalabsChip {
    /// For the register accesses, which may come from atomic context.
    #[pin]
    regs: Revocable<Aux>,
    /// For the other operations, which may sleep.
    #[pin]
    sleeping: Mutex<Sleeping>,
    /// Notified when no sleeping call runs any more.
    #[pin]
    idle: CondVar,
    /// The address of the function the chip is part of (the `struct device` habanalabs gave),
    /// 0 if unknown; only compared, never followed.
    function: usize,
    /// The enabled ports and their MAC addresses, as the firmware gave them at probe.
    ports_mask: u32,
    macs: [[u8; 6]; bindings::HBL_CN_MAX_PORTS as usize],
    model: u32,
    reset_timeout: Delta,
}

/// Revokes a [`HabanalabsChip`] when dropped (when its device is unbound, as a `Devres`).
pub struct Revoker(Arc<HabanalabsChip>);

impl Drop for Revoker {
    fn drop(&mut self) {
        self.0.revoke();
    }
}

impl HabanalabsChip {
    /// The chip of habanalabs' `cn` auxiliary device `adev` (`habanalabs.cn.N`), to which the
    /// caller's driver is bound, and what revokes it once `adev` is unbound. `ENODEV` for a
    /// device of another name or one a Rust driver added.
    ///
    /// # Safety
    ///
    /// `adev` was added by a habanalabs that implements `include/linux/habanalabs/cn_aux.h`:
    /// it is the `adev` of a `struct hbl_aux_dev` laid out as that header says, of type
    /// `HBL_AUX_DEV_CN`, whose operations and data stay valid and unchanged while it is bound.
    /// (The name alone does not show it: another module may be named habanalabs.)
    pub unsafe fn from_auxiliary(
        adev: &auxiliary::Device<Bound>,
    ) -> Result<(Arc<Self>, Devres<Revoker>)> {
        let dev: &Device<Bound> = adev.as_ref();
        if !dev.name().to_bytes().starts_with(b"habanalabs.cn.") {
            return Err(ENODEV);
        }
        let raw = dev.as_raw();
        // SAFETY: `raw` is the `dev` of the live `struct auxiliary_device` of `adev`.
        let adev_raw = unsafe { crate::container_of!(raw, bindings::auxiliary_device, dev) };
        // SAFETY: As above; a device a Rust driver added has registration data, habanalabs'
        // has none.
        if !unsafe { (*adev_raw).registration_data_rust }.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `adev` is the `adev` of a `struct hbl_aux_dev` (the caller's guarantee).
        let aux = unsafe { crate::container_of!(adev_raw, bindings::hbl_aux_dev, adev) };
        // SAFETY: The device's operations and data are valid while it is bound (the caller's
        // guarantee); the `Devres` revokes the chip before its unbind completes.
        let chip = unsafe { Self::new(NonNull::new(aux).ok_or(EINVAL)?)? };
        let revoker = Devres::new::<core::convert::Infallible>(dev, Revoker(chip.clone()))?;
        Ok((chip, revoker))
    }

    /// The chip of habanalabs' `cn` auxiliary device `adev`, as
    /// [`HabanalabsChip::from_auxiliary`], in a kernel whose habanalabs implements
    /// `include/linux/habanalabs/cn_aux.h`: its configuration says so
    /// (`CONFIG_GAUDI_CN_HABANALABS`, which is set only for such a habanalabs). `ENODEV` for a
    /// device of another name or one a Rust driver added.
    #[cfg(CONFIG_GAUDI_CN_HABANALABS)]
    pub fn bind(adev: &auxiliary::Device<Bound>) -> Result<(Arc<Self>, Devres<Revoker>)> {
        // SAFETY: The kernel is configured with `CONFIG_GAUDI_CN_HABANALABS`, whose statement is
        // that its habanalabs adds its `cn` devices as the header describes and keeps their
        // operations and data while they are bound; `from_auxiliary()` refuses the devices of
        // other names and those a Rust driver added.
        unsafe { Self::from_auxiliary(adev) }
    }

    /// The chip of the `struct hbl_aux_dev` at `aux`.
    ///
    /// # Safety
    ///
    /// `aux` is a `struct hbl_aux_dev` whose `aux_ops` and `aux_data` (if not NULL) point to
    /// a `struct hbl_cn_aux_ops` and a `struct hbl_cn_aux_data`, all valid and unchanged until
    /// [`HabanalabsChip::revoke`] has returned, which the caller guarantees happens before
    /// they go. Operations that are not set are not called.
    pub unsafe fn new(aux: NonNull<bindings::hbl_aux_dev>) -> Result<Arc<Self>> {
        let a = Aux(aux);
        // SAFETY: `aux` is valid (the caller's guarantee).
        let (ty, ops, data) = unsafe {
            let r = a.raw();
            ((*r).type_, (*r).aux_ops, (*r).aux_data)
        };
        if ty != bindings::hbl_aux_dev_type_HBL_AUX_DEV_CN || ops.is_null() || data.is_null() {
            return Err(EINVAL);
        }
        let mut info = bindings::hbl_cn_cpucp_info {
            mac_addrs: [[0; 6]; bindings::HBL_CN_MAX_PORTS as usize],
        };
        let get_info = a.ops().get_cpucp_info.ok_or(EINVAL)?;
        // SAFETY: The operation is habanalabs' (the caller's guarantee); `info` is writable.
        unsafe { get_info(a.raw(), &mut info) };
        let data = a.data();
        let mut macs = [[0u8; 6]; bindings::HBL_CN_MAX_PORTS as usize];
        for (m, i) in macs.iter_mut().zip(info.mac_addrs.iter()) {
            m.copy_from_slice(&i[..6]);
        }
        let ports = (1u64 << bindings::HBL_CN_MAX_PORTS) - 1;
        Arc::pin_init(
            try_pin_init!(Self {
                regs <- Revocable::new::<core::convert::Infallible>(a),
                sleeping <- crate::new_mutex!(Sleeping {
                    aux: Some(a),
                    running: 0,
                    vms: KVec::new(),
                }),
                idle <- crate::new_condvar!(),
                function: data.dev.addr(),
                ports_mask: (data.ports_mask & ports) as u32,
                macs,
                model: (data.fw_major_version << 16) | (data.fw_minor_version & 0xffff),
                reset_timeout: Delta::from_secs(i64::from(data.pending_reset_long_timeout.max(1))),
            }),
            GFP_KERNEL,
        )
    }

    /// Stop reaching habanalabs' operations and data; returns once no call runs. It must not
    /// be called from an operation of habanalabs, nor while holding a lock they take.
    fn revoke(&self) {
        let mut s = self.sleeping.lock();
        s.aux = None;
        while s.running != 0 {
            self.idle.wait(&mut s);
        }
        drop(s);
        if !self.regs.revoke() {
            // Revoked before: wait for the register accesses that may still run anyway.
            synchronize_rcu();
        }
    }

    /// `EINVAL` unless `dev` is the chip's function (when habanalabs gave it).
    fn check(&self, dev: &Device<Bound>) -> Result {
        if self.function == 0 || dev.as_raw().addr() == self.function {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// The offset from `CFG_BASE` of the register at `offset` of the view, if it is one.
    fn reg(offset: usize) -> Option<u32> {
        if offset >= CONFIG_SIZE || offset % 4 != 0 {
            return None;
        }
        u32::try_from(offset.checked_sub(CFG_IN_BAR0)?).ok()
    }

    /// Run `f` on the device, `ENODEV` once it is revoked; `f` may sleep.
    fn with<R>(&self, f: impl FnOnce(Aux) -> Result<R>) -> Result<R> {
        self.with_vm(None, |a, _| f(a))
    }

    /// As [`HabanalabsChip::with`], with habanalabs' handle of the VM of `asid` (given).
    fn with_vm<R>(&self, asid: Option<u32>, f: impl FnOnce(Aux, u64) -> Result<R>) -> Result<R> {
        let (aux, vm) = {
            let mut s = self.sleeping.lock();
            let aux = s.aux.ok_or(ENODEV)?;
            let vm = match asid {
                Some(asid) => s.vm(asid)?,
                None => 0,
            };
            s.running += 1;
            (aux, vm)
        };
        let r = f(aux, vm);
        let mut s = self.sleeping.lock();
        s.running -= 1;
        if s.running == 0 {
            self.idle.notify_all();
        }
        r
    }

    /// A VM of the NIC driver's, with nothing mapped: its ASID (habanalabs' external MMU
    /// mode).
    fn space(&self) -> Result<u32> {
        // Room for the VM first: a VM that cannot be recorded would never be destroyed.
        self.sleeping.lock().vms.reserve(1, GFP_KERNEL)?;
        let (asid, vm) = self.with(|a| {
            let create = a.ops().vm_create.ok_or(EOPNOTSUPP)?;
            let info = a.ops().get_vm_info.ok_or(EOPNOTSUPP)?;
            let destroy = a.ops().vm_destroy.ok_or(EOPNOTSUPP)?;
            let mut vm = 0u64;
            // SAFETY: The device is not revoked while `with` runs; `vm` is writable.
            to_result(unsafe { create(a.raw(), 0, 0, &mut vm) })?;
            let mut vi = bindings::hbl_cn_vm_info {
                mmu_mode: 0,
                asid: 0,
            };
            // SAFETY: As above; `vi` is writable.
            let r = to_result(unsafe { info(a.raw(), vm, &mut vi) });
            if r.is_err() || vi.mmu_mode != bindings::hbl_cn_mmu_mode_HBL_CN_MMU_MODE_EXTERNAL {
                // SAFETY: As above; `vm` was created above.
                unsafe { destroy(a.raw(), vm) };
                return Err(r.err().unwrap_or(EOPNOTSUPP));
            }
            Ok((vi.asid, vm))
        })?;
        let mut s = self.sleeping.lock();
        if s.vm(asid).is_ok() {
            // habanalabs gave an ASID twice: refused, its VM destroyed.
            drop(s);
            let _ = self.with(|a| {
                if let Some(destroy) = a.ops().vm_destroy {
                    // SAFETY: The device is not revoked while `with` runs.
                    unsafe { destroy(a.raw(), vm) };
                }
                Ok(())
            });
            return Err(EEXIST);
        }
        s.vms.push_within_capacity((asid, vm)).map_err(|_| ENOMEM)?;
        Ok(asid)
    }

    /// Enter `count` pages of `1 << shift` bytes at `va` of `asid`, in batches of
    /// [`MAP_BATCH`], all or nothing.
    fn map(
        &self,
        asid: u32,
        va: u64,
        pages: &mut dyn Iterator<Item = u64>,
        count: u64,
        shift: u32,
        flags: MmuFlags,
    ) -> Result {
        if flags.devmem || !(12..=30).contains(&shift) {
            return Err(EINVAL);
        }
        let size = 1u64 << shift;
        let len = count.checked_mul(size).ok_or(EINVAL)?;
        if va % size != 0 || count == 0 || va.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        // The length of a rollback fits a `usize`.
        usize::try_from(len)?;
        self.with_vm(Some(asid), |a, vm| {
            let map = a.ops().vm_dev_mmu_map_pages.ok_or(EOPNOTSUPP)?;
            let unmap = a.ops().vm_dev_mmu_unmap.ok_or(EOPNOTSUPP)?;
            let mut batch = [0u64; MAP_BATCH];
            // Pages entered so far; `done * size` cannot overflow (checked above).
            let mut done = 0u64;
            let mut res = Ok(());
            while done < count {
                let n = (count - done).min(MAP_BATCH as u64) as usize;
                let mut got = 0;
                for (slot, page) in batch.iter_mut().zip((&mut *pages).take(n)) {
                    *slot = page;
                    got += 1;
                }
                if got != n {
                    res = Err(EINVAL);
                    break;
                }
                // SAFETY: The device is not revoked while `with_vm` runs; `batch` holds `n`
                // addresses.
                res = to_result(unsafe {
                    map(
                        a.raw(),
                        vm,
                        va + done * size,
                        batch.as_ptr(),
                        n as u64,
                        size,
                        flags.writable,
                    )
                });
                if res.is_err() {
                    break;
                }
                done += n as u64;
            }
            if res.is_err() && done != 0 {
                // All or nothing: what was entered leaves again.
                // SAFETY: As above; `done * size <= len`, which fits a `usize`.
                unsafe { unmap(a.raw(), vm, va, (done * size) as usize) };
            }
            res
        })
    }
}

impl RegisterOps for HabanalabsChip {
    fn read32(&self, offset: usize) -> u32 {
        // SRAM, which the NIC driver does not reach through habanalabs, or no register.
        let Some(reg) = Self::reg(offset) else {
            return u32::MAX;
        };
        self.regs
            .try_access_with(|a| match a.ops().rreg {
                // SAFETY: The device is not revoked, so its operations are valid (type
                // invariants of `Aux`); `rreg` may be called from any context.
                Some(rreg) => unsafe { rreg(a.raw(), reg) },
                None => u32::MAX,
            })
            .unwrap_or(u32::MAX)
    }

    fn write32(&self, offset: usize, value: u32) {
        let Some(reg) = Self::reg(offset) else {
            return;
        };
        self.regs.try_access_with(|a| {
            if let Some(wreg) = a.ops().wreg {
                // SAFETY: As in `read32`.
                unsafe { wreg(a.raw(), reg, value) };
            }
        });
    }
}

impl Chip for HabanalabsChip {
    fn ops(&self) -> &dyn RegisterOps {
        self
    }

    fn model(&self) -> u32 {
        self.model
    }

    fn port_mask(&self) -> u32 {
        self.ports_mask
    }

    fn mac(&self, port: usize) -> Result<[u8; 6]> {
        self.macs.get(port).copied().ok_or(EINVAL)
    }

    fn link_up(&self, port: usize) -> bool {
        let Ok(port) = u32::try_from(port) else {
            return false;
        };
        if port >= 32 || self.ports_mask & (1 << port) == 0 {
            return false;
        }
        self.with(|a| {
            let f = a.ops().port_link_up.ok_or(EOPNOTSUPP)?;
            // SAFETY: The device is not revoked while `with` runs.
            Ok(unsafe { f(a.raw(), port) })
        })
        .unwrap_or(false)
    }

    fn devmem(&self) -> DevMem {
        // HBM is habanalabs' memory manager's: none is given to peers.
        DevMem::default()
    }

    fn scrub(&self, _offset: u64, _len: u64) -> Result {
        Err(EOPNOTSUPP)
    }

    fn reset(&self) -> Result {
        self.with(|a| {
            let reset = a.ops().device_reset.ok_or(EOPNOTSUPP)?;
            let operational = a.ops().device_operational.ok_or(EOPNOTSUPP)?;
            // SAFETY: The device is not revoked while `with` runs.
            unsafe { reset(a.raw()) };
            let mut waited = Delta::ZERO;
            // SAFETY: As above.
            while !unsafe { operational(a.raw()) } {
                if waited >= self.reset_timeout {
                    return Err(ETIMEDOUT);
                }
                fsleep(Delta::from_millis(100));
                waited = Delta::from_millis(waited.as_millis() + 100);
            }
            Ok(())
        })
    }

    fn mmu_space(&self, dev: &Device<Bound>) -> Result<u32> {
        self.check(dev)?;
        self.space()
    }

    fn mmu_space_free(&self, asid: u32) {
        let _ = self.with_vm(Some(asid), |a, vm| {
            if let Some(destroy) = a.ops().vm_destroy {
                // SAFETY: The device is not revoked while `with_vm` runs.
                unsafe { destroy(a.raw(), vm) };
            }
            Ok(())
        });
        self.sleeping.lock().vms.retain(|(a, _)| *a != asid);
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
        self.map(asid, va, pages, count, shift, flags)
    }

    fn mmu_unmap(&self, asid: u32, va: u64, count: u64, shift: u32) {
        let Some(len) = (shift < 64)
            .then(|| count.checked_mul(1 << shift))
            .flatten()
            .and_then(|l| usize::try_from(l).ok())
        else {
            return;
        };
        let _ = self.with_vm(Some(asid), |a, vm| {
            let unmap = a.ops().vm_dev_mmu_unmap.ok_or(EOPNOTSUPP)?;
            // SAFETY: The device is not revoked while `with_vm` runs.
            unsafe { unmap(a.raw(), vm, va, len) };
            Ok(())
        });
    }

    fn vectors(&self) -> usize {
        // habanalabs gives the NIC's vectors by index in its own table; none are taken yet.
        0
    }

    fn set_events(&self, _events: Option<Arc<dyn ChipEvents>>) {
        // Nothing calls a receiver yet (see `vectors`).
    }
}

#[macros::kunit_tests(rust_gaudi_habanalabs)]
mod tests {
    use super::*;
    use crate::sync::atomic::{
        Atomic,
        Relaxed, //
    };

    // What the fake habanalabs saw. KUnit runs the tests of a suite one after the other.
    static CALLS: Atomic<u32> = Atomic::new(0);
    static LAST_REG: Atomic<u32> = Atomic::new(0);
    static LAST_VAL: Atomic<u32> = Atomic::new(0);
    static RESETS: Atomic<u32> = Atomic::new(0);
    static POLLS: Atomic<u32> = Atomic::new(0);
    static MAPS: Atomic<u32> = Atomic::new(0);
    static MAPPED: Atomic<u64> = Atomic::new(0);
    static MAP_DVA: Atomic<u64> = Atomic::new(0);
    static MAP_LAST_DVA: Atomic<u64> = Atomic::new(0);
    static MAP_FIRST: Atomic<u64> = Atomic::new(0);
    static MAP_WRITABLE: Atomic<bool> = Atomic::new(false);
    static FAIL_MAP: Atomic<u32> = Atomic::new(u32::MAX);
    static UNMAP_DVA: Atomic<u64> = Atomic::new(0);
    static UNMAP_LEN: Atomic<u64> = Atomic::new(0);
    static DESTROYED: Atomic<u64> = Atomic::new(0);

    const VM: u64 = 7;

    extern "C" fn operational(_a: *mut bindings::hbl_aux_dev) -> bool {
        CALLS.add(1, Relaxed);
        POLLS.add(1, Relaxed);
        // Operational from the second poll after a reset.
        POLLS.load(Relaxed) >= 2
    }

    extern "C" fn reset(_a: *mut bindings::hbl_aux_dev) {
        CALLS.add(1, Relaxed);
        RESETS.add(1, Relaxed);
        POLLS.store(0, Relaxed);
    }

    extern "C" fn rreg(_a: *mut bindings::hbl_aux_dev, reg: u32) -> u32 {
        CALLS.add(1, Relaxed);
        LAST_REG.store(reg, Relaxed);
        reg ^ 0x5a5a
    }

    extern "C" fn wreg(_a: *mut bindings::hbl_aux_dev, reg: u32, val: u32) {
        CALLS.add(1, Relaxed);
        LAST_REG.store(reg, Relaxed);
        LAST_VAL.store(val, Relaxed);
    }

    extern "C" fn info(_a: *mut bindings::hbl_aux_dev, i: *mut bindings::hbl_cn_cpucp_info) {
        CALLS.add(1, Relaxed);
        // SAFETY: `i` is the caller's writable information.
        let i = unsafe { &mut *i };
        for (p, m) in i.mac_addrs.iter_mut().enumerate() {
            *m = [0x02, 0x1d, 0xa3, 0, 0, p as u8];
        }
    }

    use crate::ffi::c_int;

    extern "C" fn vm_create(
        _a: *mut bindings::hbl_aux_dev,
        _comp: u64,
        _flags: u32,
        vm: *mut u64,
    ) -> c_int {
        CALLS.add(1, Relaxed);
        // SAFETY: `vm` is the caller's writable handle.
        unsafe { *vm = VM };
        0
    }

    extern "C" fn vm_destroy(_a: *mut bindings::hbl_aux_dev, vm: u64) {
        CALLS.add(1, Relaxed);
        DESTROYED.store(vm, Relaxed);
    }

    extern "C" fn vm_info(
        _a: *mut bindings::hbl_aux_dev,
        vm: u64,
        vi: *mut bindings::hbl_cn_vm_info,
    ) -> c_int {
        CALLS.add(1, Relaxed);
        // SAFETY: `vi` is the caller's writable information.
        unsafe {
            (*vi).mmu_mode = bindings::hbl_cn_mmu_mode_HBL_CN_MMU_MODE_EXTERNAL;
            (*vi).asid = vm as u32;
        }
        0
    }

    extern "C" fn map(
        _a: *mut bindings::hbl_aux_dev,
        vm: u64,
        dva: u64,
        pages: *const u64,
        count: u64,
        page_size: u64,
        writable: bool,
    ) -> c_int {
        CALLS.add(1, Relaxed);
        let n = MAPS.load(Relaxed) + 1;
        MAPS.store(n, Relaxed);
        if n == FAIL_MAP.load(Relaxed) || vm != VM || page_size != 4096 {
            return -(bindings::ENOMEM as c_int);
        }
        if MAPPED.load(Relaxed) == 0 {
            MAP_DVA.store(dva, Relaxed);
        }
        MAP_LAST_DVA.store(dva, Relaxed);
        // SAFETY: `pages` holds `count` addresses (the interface's contract).
        MAP_FIRST.store(unsafe { *pages }, Relaxed);
        MAP_WRITABLE.store(writable, Relaxed);
        MAPPED.add(count, Relaxed);
        0
    }

    extern "C" fn unmap(_a: *mut bindings::hbl_aux_dev, _vm: u64, dva: u64, size: usize) {
        CALLS.add(1, Relaxed);
        UNMAP_DVA.store(dva, Relaxed);
        UNMAP_LEN.store(size as u64, Relaxed);
    }

    extern "C" fn link(_a: *mut bindings::hbl_aux_dev, port: u32) -> bool {
        CALLS.add(1, Relaxed);
        port % 2 == 1
    }

    /// A habanalabs `cn` device that is never registered, with the fake operations.
    struct Fake {
        aux: KBox<bindings::hbl_aux_dev>,
        _ops: KBox<bindings::hbl_cn_aux_ops>,
        _data: KBox<bindings::hbl_cn_aux_data>,
    }

    fn fake() -> Result<Fake> {
        let mut ops = KBox::new(
            bindings::hbl_cn_aux_ops {
                device_operational: Some(operational),
                device_reset: Some(reset),
                rreg: Some(rreg),
                wreg: Some(wreg),
                get_cpucp_info: Some(info),
                vm_create: Some(vm_create),
                vm_destroy: Some(vm_destroy),
                get_vm_info: Some(vm_info),
                vm_dev_mmu_map_pages: Some(map),
                vm_dev_mmu_unmap: Some(unmap),
                port_link_up: Some(link),
            },
            GFP_KERNEL,
        )?;
        let mut data = KBox::new(
            bindings::hbl_cn_aux_data {
                pdev: core::ptr::null_mut(),
                dev: core::ptr::null_mut(),
                id: 0,
                fw_major_version: 1,
                fw_minor_version: 17,
                ports_mask: 0xff_ffff,
                dram_size: 0,
                pending_reset_long_timeout: 1,
                irq_num_port_base: 22,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: All zeros is a valid `struct hbl_aux_dev` that is never registered.
        let mut aux: KBox<bindings::hbl_aux_dev> =
            KBox::new(unsafe { core::mem::zeroed() }, GFP_KERNEL)?;
        aux.type_ = bindings::hbl_aux_dev_type_HBL_AUX_DEV_CN;
        aux.aux_ops = core::ptr::from_mut(&mut *ops).cast();
        aux.aux_data = core::ptr::from_mut(&mut *data).cast();
        Ok(Fake {
            aux,
            _ops: ops,
            _data: data,
        })
    }

    /// The fake's record, as before any call.
    fn forget() {
        for a in [&CALLS, &LAST_REG, &LAST_VAL, &RESETS, &POLLS, &MAPS] {
            a.store(0, Relaxed);
        }
        for a in [
            &MAPPED,
            &MAP_DVA,
            &MAP_LAST_DVA,
            &MAP_FIRST,
            &UNMAP_DVA,
            &UNMAP_LEN,
            &DESTROYED,
        ] {
            a.store(0, Relaxed);
        }
        MAP_WRITABLE.store(false, Relaxed);
        FAIL_MAP.store(u32::MAX, Relaxed);
    }

    fn chip(f: &mut Fake) -> Result<Arc<HabanalabsChip>> {
        forget();
        // SAFETY: The fake's operations and data live until the test revokes the chip, before
        // the fake is dropped.
        unsafe { HabanalabsChip::new(NonNull::from(&mut *f.aux)) }
    }

    #[test]
    fn each_operation_maps_onto_habanalabs() -> Result {
        let mut f = fake()?;
        let c = chip(&mut f)?;
        // The ports, their MAC addresses and the model, from the data and the firmware.
        assert_eq!(c.port_mask(), 0xff_ffff);
        assert_eq!(c.mac(3)?, [0x02, 0x1d, 0xa3, 0, 0, 3]);
        assert_eq!(c.mac(24), Err(EINVAL));
        assert_eq!(c.model(), 1 << 16 | 17);
        // Registers: BAR0 offsets from the configuration space on are CFG_BASE offsets.
        assert_eq!(c.read32(CFG_IN_BAR0 + 0x541_f000), 0x541_f000 ^ 0x5a5a);
        assert_eq!(LAST_REG.load(Relaxed), 0x541_f000);
        c.write32(CFG_IN_BAR0 + 0x541_f850, 7);
        assert_eq!(
            (LAST_REG.load(Relaxed), LAST_VAL.load(Relaxed)),
            (0x541_f850, 7)
        );
        let calls = CALLS.load(Relaxed);
        assert_eq!(c.read32(0x1000), u32::MAX);
        c.write32(0x1000, 1);
        assert_eq!(CALLS.load(Relaxed), calls);
        // Link state, reset.
        assert!(c.link_up(5));
        assert!(!c.link_up(4));
        c.reset()?;
        assert_eq!(RESETS.load(Relaxed), 1);
        assert_eq!(POLLS.load(Relaxed), 2);
        // No device memory for peers, no scrub.
        assert_eq!(c.devmem(), DevMem::default());
        assert_eq!(c.scrub(0, 4096), Err(EOPNOTSUPP));
        // An address space is a VM; pages go in batches, all or nothing.
        let asid = c.space()?;
        assert_eq!(u64::from(asid), VM);
        let pages = |n: u64| (0..n).map(|i| 0x10_0000 + i * 4096);
        let writable = MmuFlags {
            devmem: false,
            writable: true,
        };
        c.map(asid, 0x1_0000, &mut pages(70), 70, 12, writable)?;
        assert_eq!(MAPS.load(Relaxed), 2);
        assert_eq!(MAPPED.load(Relaxed), 70);
        assert_eq!(MAP_DVA.load(Relaxed), 0x1_0000);
        assert_eq!(MAP_FIRST.load(Relaxed), 0x10_0000 + 64 * 4096);
        assert_eq!(MAP_LAST_DVA.load(Relaxed), 0x1_0000 + 64 * 4096);
        assert!(MAP_WRITABLE.load(Relaxed));
        c.mmu_unmap(asid, 0x1_0000, 70, 12);
        assert_eq!(
            (UNMAP_DVA.load(Relaxed), UNMAP_LEN.load(Relaxed)),
            (0x1_0000, 70 * 4096)
        );
        // The second batch fails: the first leaves again.
        MAPS.store(0, Relaxed);
        MAPPED.store(0, Relaxed);
        FAIL_MAP.store(2, Relaxed);
        UNMAP_LEN.store(0, Relaxed);
        assert_eq!(
            c.map(asid, 0x2_0000, &mut pages(70), 70, 12, writable),
            Err(ENOMEM)
        );
        assert_eq!(
            (UNMAP_DVA.load(Relaxed), UNMAP_LEN.load(Relaxed)),
            (0x2_0000, 64 * 4096)
        );
        FAIL_MAP.store(u32::MAX, Relaxed);
        // Read-only pages; too few pages, device memory, an ASID the chip did not make, a
        // misaligned VA: refused.
        let read_only = MmuFlags::default();
        c.map(asid, 0x4_0000, &mut pages(1), 1, 12, read_only)?;
        assert!(!MAP_WRITABLE.load(Relaxed));
        assert_eq!(
            c.map(asid + 1, 0x5_0000, &mut pages(1), 1, 12, writable),
            Err(EINVAL)
        );
        assert_eq!(
            c.map(asid, 0x5_0800, &mut pages(1), 1, 12, writable),
            Err(EINVAL)
        );
        assert_eq!(
            c.map(asid, 0x3_0000, &mut pages(3), 4, 12, writable),
            Err(EINVAL)
        );
        let devmem = MmuFlags {
            devmem: true,
            writable: false,
        };
        assert_eq!(
            c.map(asid, 0x3_0000, &mut pages(1), 1, 12, devmem),
            Err(EINVAL)
        );
        c.mmu_space_free(asid);
        assert_eq!(DESTROYED.load(Relaxed), VM);
        assert_eq!(
            c.map(asid, 0x6_0000, &mut pages(1), 1, 12, writable),
            Err(EINVAL)
        );
        // Registers beyond the configuration space or misaligned: not reached.
        let calls = CALLS.load(Relaxed);
        assert_eq!(c.read32(CONFIG_SIZE), u32::MAX);
        assert_eq!(c.read32(CFG_IN_BAR0 + 2), u32::MAX);
        assert_eq!(CALLS.load(Relaxed), calls);
        // A port that is not enabled has no link.
        assert!(!c.link_up(25));
        c.revoke();
        Ok(())
    }

    #[test]
    fn a_revoked_chip_reaches_nothing() -> Result {
        let mut f = fake()?;
        let c = chip(&mut f)?;
        c.revoke();
        let calls = CALLS.load(Relaxed);
        assert_eq!(c.read32(CFG_IN_BAR0), u32::MAX);
        c.write32(CFG_IN_BAR0, 1);
        assert!(!c.link_up(1));
        assert_eq!(c.reset(), Err(ENODEV));
        assert_eq!(c.space(), Err(ENODEV));
        c.mmu_unmap(VM as u32, 0, 1, 12);
        assert_eq!(CALLS.load(Relaxed), calls);
        Ok(())
    }
}
