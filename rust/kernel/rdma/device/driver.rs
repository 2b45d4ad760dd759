// SPDX-License-Identifier: GPL-2.0

//! The operations and types an RDMA driver implements ([`Driver`]), and the requests some of
//! them take.

use super::*;

/// The operations and types of an RDMA driver.
///
/// Every method is called by the RDMA core for a [`Device`] registered through a
/// [`Registration`] of this driver, in process context, and may sleep.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// The driver's data of a device.
    type Data: Send + Sync;
    /// The driver's data of a user context ([`Ucontext`]).
    type Ucontext: Send + Sync;
    /// The driver's data of a protection domain ([`Pd`]).
    type Pd: Send + Sync;
    /// The driver's data of a completion queue ([`Cq`]).
    type Cq: Send + Sync;
    /// The driver's data of a queue pair ([`Qp`]).
    type Qp: Send + Sync;
    /// The driver's data of a memory region ([`Mr`]).
    type Mr: Send + Sync;
    /// The driver's data of an mmap entry ([`MmapEntry`]).
    type MmapEntry: Send + Sync;

    /// The device name pattern, for example `c"gaudi_%d"`.
    const NAME: &'static CStr;
    /// The driver's `enum rdma_driver_id`, which binds its uverbs namespace to its devices.
    const DRIVER_ID: u32;
    /// The ABI version of the driver's udata structures.
    const UVERBS_ABI_VERSION: u32 = 0;
    /// The driver's uverbs ioctl namespace (see [`crate::rdma::uverbs`]), terminated by
    /// [`UapiDef::END`].
    const UAPI: Option<&'static [UapiDef<Self>]> = None;

    /// Report the attributes of the device.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;

    /// Report the attributes of port `port` (numbered from 1).
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Report what never changes about port `port`.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// The link layer of port `port`. Without this the core derives it from the node type
    /// (InfiniBand for a channel adapter), so RoCE drivers implement it.
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Entry `index` of the GID table of `port`, for devices whose GIDs are not managed by the
    /// core from a netdev.
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: u32) -> Result<Gid> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The core's GID cache wrote entry `attr.index` of the table of RoCE port `attr.port`
    /// (derived from the addresses of the port's network device, see
    /// [`Options::netdevs`]): make the device use it. Called for different ports
    /// concurrently, never twice for one port at once; an entry is added only while free, so
    /// a [`Driver::del_gid`] comes between two additions at one index.
    ///
    /// Drivers that implement it also implement [`Driver::del_gid`].
    fn add_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The network device attached to port `port` (see [`Options::netdevs`]) went up or down
    /// or changed its carrier. Without this the core itself reports the port's state as the
    /// network device's (up with carrier: `PORT_ACTIVE`, else `PORT_ERR`); a driver that
    /// implements it reports port events itself ([`Device::dispatch_event`]), for ports whose
    /// state is not their network device's.
    fn report_port_event(_dev: &Device<Self>, _port: u32) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The core's GID cache removed entry `attr.index` of the table of RoCE port `attr.port`
    /// (also for every entry when the device is unregistered). The core goes on whatever the
    /// result.
    fn del_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Entry `index` of the partition key table of `port`.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Create the driver's part of a new user context.
    ///
    /// `udata` carries the driver's request from user space and takes its response.
    fn alloc_ucontext(
        dev: &Device<Self>,
        udata: &mut Udata<'_>,
    ) -> impl PinInit<Self::Ucontext, Error>;

    /// Called before a user context is freed; its data is dropped afterwards.
    fn dealloc_ucontext(_ctx: &Ucontext<Self>) {}

    /// The device is going away while user space still holds the context: stop every access
    /// of user space to the device (the core zaps the context's mappings).
    fn disassociate_ucontext(_ctx: &Ucontext<Self>) {}

    /// Create the driver's part of a new protection domain, for user space (`user` is given)
    /// or for a kernel consumer.
    fn alloc_pd(
        dev: &Device<Self>,
        user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Pd, Error>;

    /// Called before a protection domain is freed; its data is dropped afterwards. An error
    /// keeps the protection domain.
    fn dealloc_pd(_pd: &Pd<Self>) -> Result {
        Ok(())
    }

    /// Create the driver's part of a completion queue; the driver reports the entries it
    /// granted with [`CqInit::grant_cqe`].
    fn create_cq(
        _dev: &Device<Self>,
        _init: &mut CqInit,
        _user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Cq, Error> {
        Err::<Self::Cq, Error>(EOPNOTSUPP)
    }

    /// Called before a completion queue is freed; its data is dropped afterwards. An error
    /// keeps the completion queue.
    fn destroy_cq(_cq: &Cq<Self>) -> Result {
        Ok(())
    }

    /// Take completions of `cq` into `out` until it is full or the queue is empty. Kernel
    /// consumers poll from any context: this must not sleep.
    fn poll_cq(_cq: &Cq<Self>, _out: &mut WcSink<'_, Self>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Arm `cq` for one completion event (`solicited`: only for solicited completions). With
    /// `report_missed`, return whether completions are pending already (the caller polls
    /// again). Must not sleep.
    fn req_notify_cq(_cq: &Cq<Self>, _solicited: bool, _report_missed: bool) -> Result<bool> {
        Err(EOPNOTSUPP)
    }

    /// Create the driver's part of a queue pair in `pd`; the driver must set its number with
    /// [`QpInit::set_qp_num`] and reports the queue sizes it granted.
    fn create_qp(
        _pd: &Pd<Self>,
        _init: &mut QpInit<'_>,
        _user: Option<&mut User<'_, Self>>,
    ) -> impl PinInit<Self::Qp, Error> {
        Err::<Self::Qp, Error>(EOPNOTSUPP)
    }

    /// Change the attributes of a queue pair (state transitions).
    fn modify_qp(_qp: &Qp<Self>, _attr: &QpAttr<'_>, _udata: Option<&mut Udata<'_>>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Report the attributes of a queue pair.
    fn query_qp(_qp: &Qp<Self>, _mask: QpAttrMask) -> Result<QpQuery> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called before a queue pair is freed; its data is dropped afterwards. An error keeps the
    /// queue pair.
    fn destroy_qp(_qp: &Qp<Self>) -> Result {
        Ok(())
    }

    /// Post the send work requests of `wrs` to `qp`, in order. On an error, the request taken
    /// last from `wrs` is reported as the failed one (see [`SendWrs`]). Kernel posters may hold
    /// spinlocks: this must not sleep.
    fn post_send(_qp: &Qp<Self>, _wrs: &mut SendWrs<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Post the receive work requests of `wrs` to `qp`, in order. On an error, the request
    /// taken last from `wrs` is reported as the failed one (see [`RecvWrs`]). Drivers of
    /// devices without receive queues keep the default, `EOPNOTSUPP`. Must not sleep.
    fn post_recv(_qp: &Qp<Self>, _wrs: &mut RecvWrs<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Register user memory as a memory region of `pd`; the driver sets its keys in `keys`.
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _req: &UserMr,
        _user: &mut User<'_, Self>,
        _keys: &mut MrKeys,
    ) -> impl PinInit<Self::Mr, Error> {
        Err::<Self::Mr, Error>(EOPNOTSUPP)
    }

    /// Register a range of a dma-buf as a memory region of `pd` (for example device memory of
    /// a peer, see [`UmemDmabuf`](crate::rdma::umem::UmemDmabuf)); the driver sets its keys.
    fn reg_user_mr_dmabuf(
        _pd: &Pd<Self>,
        _req: &DmabufMr,
        _user: &mut User<'_, Self>,
        _keys: &mut MrKeys,
    ) -> impl PinInit<Self::Mr, Error> {
        Err::<Self::Mr, Error>(EOPNOTSUPP)
    }

    /// Called before a memory region is freed; its data is dropped afterwards. An error keeps
    /// the memory region.
    fn dereg_mr(_mr: &Mr<Self>) -> Result {
        Ok(())
    }

    /// Map `entry` into `vma` (an `mmap()` of the device file by the context owning it).
    fn mmap(_ctx: &Ucontext<Self>, _entry: &MmapEntry<Self>, _vma: &mut Vma<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Called when an mmap entry is freed (removed and unmapped); its data is dropped
    /// afterwards.
    fn mmap_free(_entry: &MmapEntry<Self>) {}

    /// Add driver attributes of a queue pair to `rdma res` output.
    fn fill_res_qp_entry(_qp: &Qp<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Add driver attributes of a completion queue to `rdma res` output.
    fn fill_res_cq_entry(_cq: &Cq<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Add driver attributes of a memory region to `rdma res` output.
    fn fill_res_mr_entry(_mr: &Mr<Self>, _msg: &mut ResMsg<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A request to register user memory (`reg_user_mr`).
#[derive(Clone, Copy, Debug)]
pub struct UserMr {
    /// User virtual address of the memory.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for `start` (the IOVA).
    pub iova: u64,
    /// Access rights.
    pub access: Access,
}

/// A request to register a range of a dma-buf (`reg_user_mr_dmabuf`).
#[derive(Clone, Copy, Debug)]
pub struct DmabufMr {
    /// Offset of the range in the dma-buf.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for the first byte.
    pub iova: u64,
    /// The file descriptor of the dma-buf, in the calling process.
    pub fd: i32,
    /// Access rights.
    pub access: Access,
}

/// The keys of a new memory region.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrKeys {
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}
