// SPDX-License-Identifier: GPL-2.0

//! The C callbacks of [`Registration::OPS`].
//!
//! Each is installed only in the operations of devices of driver `T`, so the core objects they
//! receive belong to a [`Device<T>`].

use super::objects::{alloc_mr, CqGlue};
use super::*;

/// # Safety
///
/// `ib` must be a device registered by [`Registration<T>`].
unsafe fn dev<'a, T: Driver>(ib: *mut bindings::ib_device) -> &'a Device<T> {
    // SAFETY: The core calls the operations of a device only while it is registered.
    unsafe { Device::from_raw(ib) }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn query_device<T: Driver>(
    ib: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `ib` is a device of driver `T`; `attr` is valid for writes.
        let (dev, attr) = unsafe { (dev::<T>(ib), &mut *attr) };
        T::query_device(dev)?.write_to(attr);
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn query_port<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `ib` is a device of driver `T`; `attr` is valid for writes.
        let (dev, attr) = unsafe { (dev::<T>(ib), &mut *attr) };
        T::query_port(dev, port)?.write_to(attr);
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn get_port_immutable<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    out: *mut bindings::ib_port_immutable,
) -> c_int {
    from_result(|| {
        // SAFETY: `ib` is a device of driver `T`; `out` is valid for writes.
        let (dev, out) = unsafe { (dev::<T>(ib), &mut *out) };
        T::get_port_immutable(dev, port)?.write_to(out);
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn get_link_layer<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
) -> bindings::rdma_link_layer {
    // SAFETY: `ib` is a device of driver `T`.
    T::get_link_layer(unsafe { dev::<T>(ib) }, port) as bindings::rdma_link_layer
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn query_gid<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: c_int,
    gid: *mut bindings::ib_gid,
) -> c_int {
    from_result(|| {
        let index = u32::try_from(index).map_err(|_| EINVAL)?;
        // SAFETY: `ib` is a device of driver `T`.
        let value = T::query_gid(unsafe { dev::<T>(ib) }, port, index)?;
        // SAFETY: `gid` is valid for writes of a `union ib_gid`, whose `raw` member is the
        // 16 bytes of the GID.
        unsafe { (*gid).raw = value.0 };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`, with a network
/// device it holds.
pub(super) unsafe extern "C" fn report_port_event<T: Driver>(
    ib: *mut bindings::ib_device,
    ndev: *mut bindings::net_device,
    _event: crate::ffi::c_ulong,
) {
    let mut port = 0u32;
    // SAFETY: `ib` is a registered device and `ndev` a live network device (the core holds
    // both for the call); `port` is valid for writes.
    if unsafe { bindings::ib_query_netdev_port(ib, ndev, &mut port) } != 0 {
        return;
    }
    // SAFETY: `ib` is a device of driver `T`.
    T::report_port_event(unsafe { dev::<T>(ib) }, port);
}

/// Run `op` on the GID table entry `attr` of a device of driver `T`.
///
/// # Safety
///
/// `attr` is valid for reads during the call, and its device is one of driver `T`.
unsafe fn gid_op<T: Driver>(
    attr: *const bindings::ib_gid_attr,
    op: impl FnOnce(&Device<T>, &GidAttr) -> Result,
) -> c_int {
    from_result(|| {
        // SAFETY: As the function's safety requirements say.
        let (raw, dev) = unsafe { (&*attr, dev::<T>((*attr).device)) };
        op(dev, &GidAttr::from_raw(raw).ok_or(EINVAL)?)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core's GID cache, as this operation of a device of driver `T`, with
/// an entry of one of its ports.
pub(super) unsafe extern "C" fn add_gid<T: Driver>(
    attr: *const bindings::ib_gid_attr,
    _context: *mut *mut core::ffi::c_void,
) -> c_int {
    // SAFETY: The core passes an entry of a device of driver `T`, valid during the call.
    unsafe { gid_op(attr, T::add_gid) }
}

/// # Safety
///
/// Called only by the RDMA core's GID cache, as this operation of a device of driver `T`, with
/// an entry of one of its ports.
pub(super) unsafe extern "C" fn del_gid<T: Driver>(
    attr: *const bindings::ib_gid_attr,
    _context: *mut *mut core::ffi::c_void,
) -> c_int {
    // SAFETY: The core passes an entry of a device of driver `T`, valid during the call.
    unsafe { gid_op(attr, T::del_gid) }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn query_pkey<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    from_result(|| {
        // SAFETY: `ib` is a device of driver `T`.
        let value = T::query_pkey(unsafe { dev::<T>(ib) }, port, index)?;
        // SAFETY: `pkey` is valid for writes.
        unsafe { *pkey = value };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn alloc_ucontext<T: Driver>(
    ctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core allocated `ctx` with `size_ib_ucontext` of driver `T` and set its
        // device; `udata` is the driver data of the call, valid for its duration.
        let (dev, mut udata) = unsafe { (dev::<T>((*ctx).device), Udata::from_raw(udata)?) };
        let uc = ctx.cast::<Ucontext<T>>();
        // SAFETY: `mmap` of the new context is uninitialised and pinned in the core's
        // allocation.
        unsafe { crate::new_mutex!(KVec::new()).__init(&raw mut (*uc).mmap)? };
        let init = T::alloc_ucontext(dev, &mut udata);
        // SAFETY: `data` of the new context is uninitialised and pinned in the core's
        // allocation; on error the core frees the allocation without calling dealloc, so
        // `mmap` (an empty list) is dropped here.
        if let Err(e) = unsafe { init.__init(&raw mut (*uc).data) } {
            // SAFETY: `mmap` was initialised above and is not used after this.
            unsafe { core::ptr::drop_in_place(&raw mut (*uc).mmap) };
            return Err(e);
        }
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn dealloc_ucontext<T: Driver>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: `ctx` is a live context of driver `T` whose data was initialised by
    // `alloc_ucontext`; the core frees it after this returns, and nothing uses it after.
    unsafe {
        let uc = Ucontext::<T>::from_raw(ctx);
        T::dealloc_ucontext(uc);
        // Entries must go while the context exists: freeing one erases it from the
        // context's table.
        uc.mmap_remove_all();
        let uc = ctx.cast::<Ucontext<T>>();
        core::ptr::drop_in_place(&raw mut (*uc).data);
        core::ptr::drop_in_place(&raw mut (*uc).mmap);
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn disassociate_ucontext<T: Driver>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: `ctx` is a live context of driver `T`.
    T::disassociate_ucontext(unsafe { Ucontext::<T>::from_raw(ctx) });
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn alloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core allocated `pd` with `size_ib_pd` of driver `T` and set its device;
        // a non-null `udata` is the driver data of a user call, valid for its duration.
        let dev = unsafe { dev::<T>((*pd).device) };
        // SAFETY: As above.
        let mut user = unsafe { User::<T>::from_udata(udata)? };
        let init = T::alloc_pd(dev, user.as_mut());
        // SAFETY: `data` of the new PD is uninitialised and pinned in the core's allocation;
        // on error the core frees it without calling dealloc.
        unsafe { init.__init(Pd::<T>::data_ptr(pd))? };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn dealloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `pd` is a live PD of driver `T` with initialised data.
        T::dealloc_pd(unsafe { Pd::<T>::from_raw(pd) })?;
        // SAFETY: The core frees the PD after a successful return and nothing uses the data.
        unsafe { core::ptr::drop_in_place(Pd::<T>::data_ptr(pd)) };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn create_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: The core allocated `cq` with `size_ib_cq` of driver `T` and set its
        // device; `attr` is valid; a non-null `attrs` is the bundle of a user call.
        let (dev, mut init) = unsafe { (dev::<T>((*cq).device), CqInit::from_raw(&*attr)) };
        let udata = if attrs.is_null() {
            core::ptr::null_mut()
        } else {
            // SAFETY: `attrs` is a valid bundle.
            unsafe { bindings::rdma_uverbs_attr_bundle_udata(attrs) }
        };
        // SAFETY: A non-null `udata` is the driver data of a user call on this device.
        let mut user = unsafe { User::<T>::from_udata(udata)? };
        let pinit = T::create_cq(dev, &mut init, user.as_mut());
        // SAFETY: `data` of the new CQ is uninitialised and pinned in the core's allocation;
        // on error the core frees it without calling destroy.
        unsafe { pinit.__init(Cq::<T>::data_ptr(cq))? };
        // SAFETY: The glue's part is uninitialised and pinned in the same allocation; its
        // initialiser cannot fail.
        let _ = unsafe { CqGlue::new(init.id()).__init(Cq::<T>::glue_ptr(cq)) };
        if let Some(id) = init.id() {
            if let Err(e) = Device::<T>::table_insert(&dev.cqs, id, cq as usize) {
                // SAFETY: The CQ is live and initialised, and nobody else knows it.
                let _ = T::destroy_cq(unsafe { Cq::<T>::from_raw(cq) });
                // SAFETY: Both parts were initialised above; the core frees the CQ on error.
                unsafe {
                    core::ptr::drop_in_place(Cq::<T>::data_ptr(cq));
                    core::ptr::drop_in_place(Cq::<T>::glue_ptr(cq));
                }
                return Err(e);
            }
        }
        let cqe = init.granted().unwrap_or(init.cqe);
        // SAFETY: The CQ is not visible to anyone else yet.
        unsafe { (*cq).cqe = cqe.min(i32::MAX as u32) as c_int };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn destroy_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of driver `T` with initialised data.
        let c = unsafe { Cq::<T>::from_raw(cq) };
        // Out of the table first: no completion event finds it from now on, and none that
        // found it is still using it.
        let id = c.glue().id;
        let removed = id.is_some_and(|id| Device::<T>::table_remove(&c.device().cqs, id));
        if let Err(e) = T::destroy_cq(c) {
            if let (Some(id), true) = (id, removed) {
                if Device::<T>::table_insert(&c.device().cqs, id, cq as usize).is_err() {
                    crate::ibdev_err!(c.device(), "CQ {}: its events are lost from now on\n", id);
                }
            }
            return Err(e);
        }
        // SAFETY: The core frees the CQ after a successful return. It has no queue pair left
        // (the core refuses to destroy a CQ in use), so the glue's table is empty.
        unsafe {
            core::ptr::drop_in_place(Cq::<T>::data_ptr(cq));
            core::ptr::drop_in_place(Cq::<T>::glue_ptr(cq));
        }
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn poll_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    num_entries: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    // SAFETY: `cq` is a live CQ of driver `T` with initialised data and glue.
    let c = unsafe { Cq::<T>::from_raw(cq) };
    // The queue pairs of the CQ stay while the sink can find them.
    let qps = c.glue().qps.lock();
    // SAFETY: The caller's array holds `num_entries` entries; `qps` is the CQ's table, locked.
    let mut out = unsafe { WcSink::new(wc, num_entries.max(0) as usize, &qps) };
    match T::poll_cq(c, &mut out) {
        Err(e) if out.is_empty() => e.to_errno(),
        // What was taken from the queue is reported; the error comes back next time.
        _ => out.len() as c_int,
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn req_notify_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    let solicited = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
    let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
    // SAFETY: `cq` is a live CQ of driver `T` with initialised data.
    match T::req_notify_cq(unsafe { Cq::<T>::from_raw(cq) }, solicited, report) {
        Ok(missed) => c_int::from(missed && report),
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn post_send<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: `wr` is the poster's list, valid for the call.
    let mut wrs = unsafe { SendWrs::new(wr) };
    // SAFETY: `qp` is a live QP of driver `T` with initialised data.
    match T::post_send(unsafe { Qp::<T>::from_raw(qp) }, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            if !bad_wr.is_null() {
                // SAFETY: A non-null `bad_wr` is the poster's slot for the failed request.
                unsafe { *bad_wr = wrs.failed() };
            }
            e.to_errno()
        }
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn post_recv<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: `wr` is the poster's list, valid for the call.
    let mut wrs = unsafe { RecvWrs::new(wr) };
    // SAFETY: `qp` is a live QP of driver `T` with initialised data.
    match T::post_recv(unsafe { Qp::<T>::from_raw(qp) }, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            if !bad_wr.is_null() {
                // SAFETY: A non-null `bad_wr` is the poster's slot for the failed request.
                unsafe { *bad_wr = wrs.failed() };
            }
            e.to_errno()
        }
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn create_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: The core allocated `qp` with `size_ib_qp` of driver `T` and set its PD,
        // a live PD of this device; `attr` is valid for the call.
        let (pd, attr) = unsafe { (Pd::<T>::from_raw((*qp).pd), &mut *attr) };
        let mut init = QpInit::new(attr);
        // SAFETY: A non-null `udata` is the driver data of a user call on this device.
        let mut user = unsafe { User::<T>::from_udata(udata)? };
        // The CQs the QP completes on, which must be of this device.
        // SAFETY: The core set the QP's CQs, live while the QP exists, or left them null.
        let cqs = unsafe { qp_cqs::<T>(qp)? };
        let mut nodes = [None, None];
        for (node, _) in nodes.iter_mut().zip(cqs).filter(|(_, cq)| cq.is_some()) {
            *node = Some(RBTreeNodeReservation::new(GFP_KERNEL)?);
        }
        let pinit = T::create_qp(pd, &mut init, user.as_mut());
        // SAFETY: `data` of the new QP is uninitialised and pinned in the core's allocation.
        unsafe { pinit.__init(Qp::<T>::data_ptr(qp))? };
        let undo = |e: Error| {
            // SAFETY: The QP is live with initialised data, and nobody else knows it.
            let _ = T::destroy_qp(unsafe { Qp::<T>::from_raw(qp) });
            // SAFETY: The data was initialised above; the core frees the QP on error.
            unsafe { core::ptr::drop_in_place(Qp::<T>::data_ptr(qp)) };
            Err(e)
        };
        // A driver that does not number its QP made an unusable one.
        let Some(qp_num) = init.qp_num() else {
            return undo(EINVAL);
        };
        // SAFETY: The QP is not visible to anyone else yet.
        unsafe { (*qp).qp_num = qp_num };
        if let Err(e) = Device::<T>::table_insert(&pd.device().qps, qp_num, qp as usize) {
            return undo(e);
        }
        // Last, once the QP is complete: its completions can be reported from now on.
        for (cq, node) in cqs.into_iter().zip(nodes) {
            if let (Some(cq), Some(node)) = (cq, node) {
                // The device's table just took the number, so no CQ has it.
                cq.glue()
                    .qps
                    .lock()
                    .insert(node.into_node(qp_num, qp as usize));
            }
        }
        Ok(0)
    })
}

/// The distinct CQs of `qp` (send, then receive), as CQs of driver `T`. `EINVAL` if one
/// belongs to another device.
///
/// # Safety
///
/// `qp` must be a QP of a device of driver `T` whose `send_cq` and `recv_cq` are null or live
/// CQs for `'a`.
unsafe fn qp_cqs<'a, T: Driver>(qp: *mut bindings::ib_qp) -> Result<[Option<&'a Cq<T>>; 2]> {
    // SAFETY: `qp` is valid by the safety requirements.
    let (dev, send, mut recv) = unsafe { ((*qp).device, (*qp).send_cq, (*qp).recv_cq) };
    if recv == send {
        recv = core::ptr::null_mut();
    }
    let mut cqs = [None, None];
    for (slot, raw) in cqs.iter_mut().zip([send, recv]) {
        if raw.is_null() {
            continue;
        }
        // SAFETY: `raw` is a live CQ by the safety requirements.
        if unsafe { (*raw).device } != dev {
            return Err(EINVAL);
        }
        // SAFETY: A CQ of this device, a device of driver `T`, is a `Cq<T>` with initialised
        // data and glue once the core hands it out; live for `'a`.
        *slot = Some(unsafe { Cq::<T>::from_raw(raw) });
    }
    Ok(cqs)
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn modify_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of driver `T`; `attr` is valid for the call.
        let (qp, attr) = unsafe { (Qp::<T>::from_raw(qp), &*attr) };
        let attr = QpAttr::new(attr, QpAttrMask::from_raw(mask as u32));
        let mut udata = if udata.is_null() {
            None
        } else {
            // SAFETY: `udata` is non-null and valid for the call.
            Some(unsafe { Udata::from_raw(udata)? })
        };
        T::modify_qp(qp, &attr, udata.as_mut())?;
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn query_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of driver `T`; `attr` and `init` are valid for writes.
        let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(qp), &mut *attr, &mut *init) };
        T::query_qp(qp, QpAttrMask::from_raw(mask as u32))?.write_to(attr, init);
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn destroy_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of driver `T` with initialised data.
        let q = unsafe { Qp::<T>::from_raw(qp) };
        let qp_num = q.qp_num();
        // Out of the tables first: no event or completion finds it from now on, and no event
        // handler that found it is still using it.
        let removed = Device::<T>::table_remove(&q.device().qps, qp_num);
        // SAFETY: The core keeps the QP's CQs while the QP exists; they are of this device,
        // as checked at creation, so this finds the same ones.
        let cqs = unsafe { qp_cqs::<T>(qp) }.unwrap_or([None, None]);
        let nodes =
            cqs.map(|cq| cq.and_then(|cq| Some((cq, cq.glue().qps.lock().remove_node(&qp_num)?))));
        if let Err(e) = T::destroy_qp(q) {
            for (cq, node) in nodes.into_iter().flatten() {
                cq.glue().qps.lock().insert(node);
            }
            if removed && Device::<T>::table_insert(&q.device().qps, qp_num, qp as usize).is_err() {
                crate::ibdev_err!(
                    q.device(),
                    "QP {}: its events are lost from now on\n",
                    qp_num
                );
            }
            return Err(e);
        }
        // SAFETY: The core frees the QP after a successful return.
        unsafe { core::ptr::drop_in_place(Qp::<T>::data_ptr(qp)) };
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn reg_user_mr<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    _dmah: *mut bindings::ib_dmah,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let req = UserMr {
        start,
        length,
        iova,
        access: Access::from_raw(access as u32),
    };
    // SAFETY: `pd` is a live PD of driver `T`; `udata` the driver data of the call.
    let (pd, mut user) = match unsafe { mr_args::<T>(pd, udata) } {
        Ok(v) => v,
        Err(e) => return e.to_ptr(),
    };
    let mut keys = MrKeys::default();
    let mr = alloc_mr::<T>(T::reg_user_mr(pd, &req, &mut user, &mut keys));
    set_keys(mr, keys)
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn reg_user_mr_dmabuf<T: Driver>(
    pd: *mut bindings::ib_pd,
    offset: u64,
    length: u64,
    iova: u64,
    fd: c_int,
    access: c_int,
    _dmah: *mut bindings::ib_dmah,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> *mut bindings::ib_mr {
    let req = DmabufMr {
        offset,
        length,
        iova,
        fd,
        access: Access::from_raw(access as u32),
    };
    if attrs.is_null() {
        return EINVAL.to_ptr();
    }
    // SAFETY: `attrs` is the valid bundle of the user call.
    let udata = unsafe { bindings::rdma_uverbs_attr_bundle_udata(attrs) };
    // SAFETY: `pd` is a live PD of driver `T`; `udata` the driver data of the call.
    let (pd, mut user) = match unsafe { mr_args::<T>(pd, udata) } {
        Ok(v) => v,
        Err(e) => return e.to_ptr(),
    };
    let mut keys = MrKeys::default();
    let mr = alloc_mr::<T>(T::reg_user_mr_dmabuf(pd, &req, &mut user, &mut keys));
    set_keys(mr, keys)
}

/// The PD and the user call of a memory registration.
///
/// # Safety
///
/// `pd` must be a live PD of driver `T`, `udata` the driver data of a user call on it, both
/// valid for `'a`.
unsafe fn mr_args<'a, T: Driver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> Result<(&'a Pd<T>, User<'a, T>)> {
    // SAFETY: By the safety requirements.
    let (pd, user) = unsafe { (Pd::<T>::from_raw(pd), User::<T>::from_udata(udata)?) };
    Ok((pd, user.ok_or(EINVAL)?))
}

/// Give a new memory region its keys and hand it to the core.
fn set_keys<T: Driver>(mr: Result<*mut Mr<T>>, keys: MrKeys) -> *mut bindings::ib_mr {
    match mr {
        Ok(mr) => {
            // SAFETY: `mr` was just allocated by `alloc_mr` and is not visible to the core.
            unsafe {
                let raw = (*mr).as_raw();
                (*raw).lkey = keys.lkey;
                (*raw).rkey = keys.rkey;
                raw
            }
        }
        Err(e) => e.to_ptr(),
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn dereg_mr<T: Driver>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `mr` is a live MR of driver `T`, allocated by `reg_user_mr`.
        T::dereg_mr(unsafe { Mr::<T>::from_raw(mr) })?;
        // SAFETY: The MR was allocated by `reg_user_mr` as a pinned box; the core does not
        // use it after a successful return.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(mr.cast::<Mr<T>>())) });
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn mmap<T: Driver>(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    from_result(|| {
        // SAFETY: `ctx` is a live context of driver `T`, `vma` the VMA being mapped.
        let entry = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
        if entry.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Entries of the contexts of driver `T` are `MmapEntry<T>`s; the reference
        // taken above keeps it alive until the put below.
        let res = unsafe {
            T::mmap(
                Ucontext::<T>::from_raw(ctx),
                MmapEntry::<T>::from_raw(entry),
                &mut Vma::new(ctx, vma),
            )
        };
        // SAFETY: Drops the reference taken by `rdma_user_mmap_entry_get()`.
        unsafe { bindings::rdma_user_mmap_entry_put(entry) };
        res.map(|()| 0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn mmap_free<T: Driver>(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: The last reference to the entry is gone; it was allocated as a pinned box by
    // `MmapEntry::insert`, and nothing uses it after this.
    unsafe {
        T::mmap_free(MmapEntry::<T>::from_raw(entry));
        drop(Pin::new_unchecked(KBox::from_raw(
            entry.cast::<MmapEntry<T>>(),
        )));
    }
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn fill_res_qp_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live QP of driver `T`; `msg` is the message being built.
        let (qp, mut msg) = unsafe { (Qp::<T>::from_raw(qp), ResMsg::new(msg)) };
        T::fill_res_qp_entry(qp, &mut msg)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn fill_res_cq_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    cq: *mut bindings::ib_cq,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` is a live CQ of driver `T`; `msg` is the message being built.
        let (cq, mut msg) = unsafe { (Cq::<T>::from_raw(cq), ResMsg::new(msg)) };
        T::fill_res_cq_entry(cq, &mut msg)?;
        Ok(0)
    })
}

/// # Safety
///
/// Called only by the RDMA core, as this operation of a device of driver `T`.
pub(super) unsafe extern "C" fn fill_res_mr_entry<T: Driver>(
    msg: *mut bindings::sk_buff,
    mr: *mut bindings::ib_mr,
) -> c_int {
    from_result(|| {
        // SAFETY: `mr` is a live MR of driver `T`; `msg` is the message being built.
        let (mr, mut msg) = unsafe { (Mr::<T>::from_raw(mr), ResMsg::new(msg)) };
        T::fill_res_mr_entry(mr, &mut msg)?;
        Ok(0)
    })
}
