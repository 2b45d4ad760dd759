// SPDX-License-Identifier: GPL-2.0

//! The registration of a device with the RDMA core, and how it is undone.

use super::*;

/// A registered RDMA device.
///
/// Created by [`Registration::new`] or [`Registration::new_auxiliary`], which hand it out inside
/// a [`Devres`] of the device the registration was made for (the parent, or an auxiliary device
/// of it): the RDMA device is unregistered, its data dropped and the `struct ib_device` released
/// when that device is unbound (or when the [`Devres`] is dropped, if that comes first).
///
/// # Invariants
///
/// `dev` points to a [`Device<T>`] owned by this registration, registered by it (and unregistered
/// by its drop, or earlier by [`DeviceHandle::unregister`]).
pub struct Registration<T: Driver> {
    dev: NonNull<Device<T>>,
    _p: PhantomData<T>,
}

// SAFETY: The registration only owns the device, which is `Send`.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: Shared references only give `&Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for Registration<T> {}

/// How a device is registered.
pub struct Options<'a> {
    /// Physical ports, numbered from 1.
    pub ports: u32,
    /// Completion vectors.
    pub comp_vectors: u32,
    /// Node type (`enum rdma_node_type`).
    pub node_type: NodeType,
    /// The network devices of the ports, the first for port 1 (empty: none; else one for each
    /// port). The core derives the GID tables of RoCE ports from their addresses (see
    /// [`Driver::add_gid`]), resolves address vectors through them and names them
    /// (`rdma link show`).
    ///
    /// The RDMA device holds a reference to each until it is unregistered; a network device
    /// unregistered before the RDMA device makes its unregistration wait for that, so
    /// register the network devices first for the same device, as their [`Devres`] are then
    /// released after this one.
    pub netdevs: &'a [&'a NetDev],
    /// Node GUID (an EUI-64, for example derived from a MAC address), 0 for none.
    pub node_guid: u64,
}

/// The kind of RDMA node (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NodeType {
    /// An InfiniBand or RoCE channel adapter.
    Ca = bindings::RDMA_NODE_IB_CA as u8,
    /// A verbs device of no standard kind (as efa).
    Unspecified = bindings::RDMA_NODE_UNSPECIFIED as u8,
}

impl<T: Driver> Registration<T> {
    const OPS: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        query_device: Some(callbacks::query_device::<T>),
        query_port: Some(callbacks::query_port::<T>),
        get_port_immutable: Some(callbacks::get_port_immutable::<T>),
        get_link_layer: if T::HAS_GET_LINK_LAYER {
            Some(callbacks::get_link_layer::<T>)
        } else {
            None
        },
        query_gid: if T::HAS_QUERY_GID {
            Some(callbacks::query_gid::<T>)
        } else {
            None
        },
        report_port_event: if T::HAS_REPORT_PORT_EVENT {
            Some(callbacks::report_port_event::<T>)
        } else {
            None
        },
        add_gid: if T::HAS_ADD_GID {
            Some(callbacks::add_gid::<T>)
        } else {
            None
        },
        del_gid: if T::HAS_DEL_GID {
            Some(callbacks::del_gid::<T>)
        } else {
            None
        },
        query_pkey: if T::HAS_QUERY_PKEY {
            Some(callbacks::query_pkey::<T>)
        } else {
            None
        },
        alloc_ucontext: Some(callbacks::alloc_ucontext::<T>),
        dealloc_ucontext: Some(callbacks::dealloc_ucontext::<T>),
        // Always set: user contexts are then disassociated when the device goes away, instead
        // of unbind waiting until every process has closed the device.
        disassociate_ucontext: Some(callbacks::disassociate_ucontext::<T>),
        alloc_pd: Some(callbacks::alloc_pd::<T>),
        dealloc_pd: Some(callbacks::dealloc_pd::<T>),
        create_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::create_cq::<T>)
        } else {
            None
        },
        destroy_cq: Some(callbacks::destroy_cq::<T>),
        // Kernel consumers call these without checking: set with completion queues.
        poll_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::poll_cq::<T>)
        } else {
            None
        },
        req_notify_cq: if T::HAS_CREATE_CQ {
            Some(callbacks::req_notify_cq::<T>)
        } else {
            None
        },
        create_qp: if T::HAS_CREATE_QP {
            Some(callbacks::create_qp::<T>)
        } else {
            None
        },
        modify_qp: if T::HAS_MODIFY_QP {
            Some(callbacks::modify_qp::<T>)
        } else {
            None
        },
        query_qp: if T::HAS_QUERY_QP {
            Some(callbacks::query_qp::<T>)
        } else {
            None
        },
        destroy_qp: Some(callbacks::destroy_qp::<T>),
        // Kernel posters call these without checking: set with queue pairs.
        post_send: if T::HAS_CREATE_QP {
            Some(callbacks::post_send::<T>)
        } else {
            None
        },
        post_recv: if T::HAS_CREATE_QP {
            Some(callbacks::post_recv::<T>)
        } else {
            None
        },
        reg_user_mr: if T::HAS_REG_USER_MR {
            Some(callbacks::reg_user_mr::<T>)
        } else {
            None
        },
        reg_user_mr_dmabuf: if T::HAS_REG_USER_MR_DMABUF {
            Some(callbacks::reg_user_mr_dmabuf::<T>)
        } else {
            None
        },
        dereg_mr: Some(callbacks::dereg_mr::<T>),
        mmap: if T::HAS_MMAP {
            Some(callbacks::mmap::<T>)
        } else {
            None
        },
        mmap_free: Some(callbacks::mmap_free::<T>),
        fill_res_qp_entry: if T::HAS_FILL_RES_QP_ENTRY {
            Some(callbacks::fill_res_qp_entry::<T>)
        } else {
            None
        },
        fill_res_cq_entry: if T::HAS_FILL_RES_CQ_ENTRY {
            Some(callbacks::fill_res_cq_entry::<T>)
        } else {
            None
        },
        fill_res_mr_entry: if T::HAS_FILL_RES_MR_ENTRY {
            Some(callbacks::fill_res_mr_entry::<T>)
        } else {
            None
        },
        size_ib_ucontext: core::mem::size_of::<Ucontext<T>>(),
        size_ib_pd: core::mem::size_of::<Pd<T>>(),
        size_ib_cq: core::mem::size_of::<Cq<T>>(),
        size_ib_qp: core::mem::size_of::<Qp<T>>(),
        ..pin_init::zeroed()
    };

    /// Allocate an RDMA device with the driver's data `data`, and register it as a child of
    /// `parent`, which is also the device doing its DMA.
    ///
    /// The device is named after [`Driver::NAME`]. It stays registered until `parent` is
    /// unbound or the returned [`Devres`] is dropped.
    pub fn new<E>(
        parent: &device::Device<Bound>,
        module: &'static ThisModule,
        opts: Options<'_>,
        data: impl PinInit<T::Data, E>,
    ) -> Result<Devres<Self>>
    where
        Error: From<E>,
    {
        Self::register(parent, parent, module, opts, data)
    }

    /// Allocate an RDMA device with the driver's data `data` for the auxiliary device `adev`,
    /// and register it as a child of `adev`'s parent (the function that does the DMA, as
    /// `/sys/class/infiniband/*/device` shows).
    ///
    /// It stays registered until `adev` is unbound or the returned [`Devres`] is dropped.
    pub fn new_auxiliary<E>(
        adev: &auxiliary::Device<Bound>,
        module: &'static ThisModule,
        opts: Options<'_>,
        data: impl PinInit<T::Data, E>,
    ) -> Result<Devres<Self>>
    where
        Error: From<E>,
    {
        Self::register(adev.as_ref(), adev.parent(), module, opts, data)
    }

    /// Register for `bound`, as a child of `parent`, which does the DMA and stays bound while
    /// `bound` is.
    fn register<E>(
        bound: &device::Device<Bound>,
        parent: &device::Device<Bound>,
        module: &'static ThisModule,
        opts: Options<'_>,
        data: impl PinInit<T::Data, E>,
    ) -> Result<Devres<Self>>
    where
        Error: From<E>,
    {
        const {
            assert!(core::mem::align_of::<Device<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Ucontext<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Pd<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Cq<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
            assert!(core::mem::align_of::<Qp<T>>() <= bindings::ARCH_KMALLOC_MINALIGN);
        }
        if opts.ports == 0 || opts.ports > u32::from(u8::MAX) {
            return Err(EINVAL);
        }
        if !opts.netdevs.is_empty() && opts.netdevs.len() != opts.ports as usize {
            return Err(EINVAL);
        }
        if let Some(defs) = T::UAPI {
            UapiDef::check_terminated(defs)?;
        }

        // SAFETY: `init_net` is the initial network namespace, which lives forever.
        let ib = unsafe {
            bindings::_ib_alloc_device(
                core::mem::size_of::<Device<T>>(),
                &raw mut bindings::init_net,
            )
        };
        let ib = NonNull::new(ib).ok_or(ENOMEM)?;
        let dev = ib.cast::<Device<T>>();

        // SAFETY: `_ib_alloc_device()` allocated `size_of::<Device<T>>()` bytes, suitably
        // aligned (checked above), with the `struct ib_device` at offset 0; the tables and
        // `data` are not initialised yet and are pinned in that allocation.
        let res = unsafe {
            let d = dev.as_ptr();
            // The tables' initialisers cannot fail.
            let _ = XArray::new(AllocKind::Alloc).__init(&raw mut (*d).qps);
            let _ = XArray::new(AllocKind::Alloc).__init(&raw mut (*d).cqs);
            data.__init(&raw mut (*d).data)
        };
        if let Err(e) = res {
            // SAFETY: The device was allocated above, never registered, and has no data.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            return Err(e.into());
        }

        // SAFETY: The device is allocated and not registered yet, so its fields are ours to
        // set; the operations are a `'static` constant, and the uAPI definitions are `'static`.
        unsafe {
            let raw = ib.as_ptr();
            bindings::ib_set_device_ops(raw, &Self::OPS);
            (*raw).ops.owner = module.as_ptr();
            (*raw).phys_port_cnt = opts.ports;
            (*raw).num_comp_vectors = opts.comp_vectors.max(1).min(i32::MAX as u32) as i32;
            (*raw).node_type = opts.node_type as u8;
            (*raw).node_guid = opts.node_guid.to_be();
            if T::HAS_CREATE_CQ {
                // Likewise polling and arming completion queues: these reach
                // `Driver::poll_cq` and `Driver::req_notify_cq`.
                (*raw).uverbs_cmd_mask |= (1u64
                    << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ)
                    | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
            }
            if T::HAS_CREATE_QP {
                // The posting commands of user verbs are off unless a driver asks for them
                // (most providers post from user space): these reach `Driver::post_send` and
                // `Driver::post_recv`, which answer with the request that failed.
                (*raw).uverbs_cmd_mask |= (1u64
                    << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
                    | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV);
            }
            (*raw).__bindgen_anon_1.dev.parent = parent.as_raw();
            if let Some(defs) = T::UAPI {
                (*raw).driver_def = defs.as_ptr().cast();
            }
        }

        for (port, ndev) in (1u32..).zip(opts.netdevs) {
            // SAFETY: The device is allocated and not registered; `ndev` is a live network
            // device (`NetDev` invariants), of which the core takes a reference, dropped when
            // the device is unregistered or released. (Attaching one that is being
            // unregistered is not unsound: its unregistration waits for that reference.)
            let ret = unsafe { bindings::ib_device_set_netdev(ib.as_ptr(), ndev.as_raw(), port) };
            if let Err(e) = to_result(ret) {
                // SAFETY: The device was never registered; its release drops the references
                // to the network devices set so far.
                unsafe {
                    Device::drop_fields(dev.as_ptr());
                    bindings::ib_dealloc_device(ib.as_ptr());
                }
                return Err(e);
            }
        }

        // SAFETY: The device is fully set up; `parent` is bound, so it is a valid DMA device;
        // `NAME` is NUL-terminated.
        let ret = unsafe {
            bindings::ib_register_device(ib.as_ptr(), T::NAME.as_char_ptr(), parent.as_raw())
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: Registration failed, so nothing else refers to the device or its data.
            unsafe {
                Device::drop_fields(dev.as_ptr());
                bindings::ib_dealloc_device(ib.as_ptr());
            }
            return Err(e);
        }

        // INVARIANT: The device is registered and owned by the registration.
        Devres::new::<core::convert::Infallible>(
            bound,
            Self {
                dev,
                _p: PhantomData,
            },
        )
    }

    /// The device (registered unless a [`DeviceHandle`] unregistered it).
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariants the device and its data live as long as `self`.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let ib = self.device().as_raw();
        // SAFETY: The device is ours (type invariants). `ib_unregister_device()` (which returns
        // at once if a `DeviceHandle` unregistered the device already) returns after every
        // client is gone: user contexts are disassociated and freed, so no callback
        // runs and no object of the device remains. The tables (empty) and the data are then
        // dropped, and the device released; the core frees its memory when the last reference
        // to it goes.
        unsafe {
            bindings::ib_unregister_device(ib);
            Device::drop_fields(self.dev.as_ptr());
            bindings::ib_dealloc_device(ib);
        }
    }
}
