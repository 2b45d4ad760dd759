// SPDX-License-Identifier: GPL-2.0

//! Memory regions: the software lkey check's half in the device MMU.
//!
//! Every region gets a linear range of device VA in its protection domain's ASID (a region
//! open to remote writes at its iova); its pinned pages (host memory, a peer's dma-buf, or
//! the device's own memory) are entered there with device pages that never reach past the
//! pinned memory, and a key names it. Work requests are checked against the region
//! and their addresses rewritten to device VAs (see `queue::translate`). See "Memory regions"
//! in Documentation/infiniband/gaudi/design.rst.

use kernel::{
    prelude::*,
    rdma::{
        self,
        umem::{
            Access,
            BlockSize,
            Umem,
            UmemDmabuf, //
        },
        uverbs::{
            self,
            AttrDef,
            Call,
            Method,
            Presence, //
        },
        DmabufMr,
        MrKeys,
        User,
        UserMr, //
    },
    uapi,
};

use crate::{
    chip::Mapping,
    hbm::Hbm,
    ib::{
        Charge,
        GaudiIbDriver,
        Limit, //
    },
    mmu,
    queue::MrView,
};

/// What work requests and queue pairs need of a memory region, found by its key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrInfo {
    pub(crate) view: MrView,
    pub(crate) access: Access,
}

/// The memory behind a memory region.
pub(crate) enum Pinned {
    /// Pinned user memory.
    User(Umem),
    /// An imported dma-buf (device memory of this or another device).
    Dmabuf(UmemDmabuf),
}

/// The driver's data of a memory region.
pub(crate) struct MrData {
    /// The region's pages in its protection domain's ASID; they leave it (and the device MMU
    /// forgets them) when the data is dropped, before the memory is unpinned (the field
    /// below).
    _asid_map: Mapping,
    /// Unpinned when the data is dropped, after the pages left the device MMU.
    _pinned: Pinned,
    /// Given back to the context's limits with the region.
    _charge: Charge,
    shift: u32,
    key: u32,
}

/// Register user memory (`ib_reg_user_mr`).
pub(crate) fn reg_user(
    pd: &rdma::Pd<GaudiIbDriver>,
    req: &UserMr,
    user: &mut User<'_, GaudiIbDriver>,
    keys: &mut MrKeys,
) -> Result<MrData> {
    let dev = pd.device();
    let d = dev.data();
    check_mr(dev, req.length, req.access)?;
    let len = usize::try_from(req.length).map_err(|_| EINVAL)?;
    let umem = Umem::get(dev, req.start, len, req.access)?;
    let bs = umem
        .best_block_size(
            contained_page_sizes(d.mr_page_sizes, req.iova, req.length)?,
            req.iova,
        )
        .ok_or(EINVAL)?;
    let blocks = umem.num_dma_blocks(bs) as u64;
    let region = MrRegion {
        iova: req.iova,
        length: req.length,
        access: req.access,
        bs,
        blocks,
        devmem: false,
    };
    register(pd, &region, user, keys, Pinned::User(umem))
}

/// Register the memory of a dma-buf (`ib_reg_user_mr_dmabuf`): a peer's, or this device's own
/// (its HBM).
pub(crate) fn reg_dmabuf(
    pd: &rdma::Pd<GaudiIbDriver>,
    req: &DmabufMr,
    user: &mut User<'_, GaudiIbDriver>,
    keys: &mut MrKeys,
) -> Result<MrData> {
    let dev = pd.device();
    let d = dev.data();
    check_mr(dev, req.length, req.access)?;
    let len = usize::try_from(req.length).map_err(|_| EINVAL)?;
    // The exporter decides whether this device may reach the memory (peer-to-peer).
    let umem = UmemDmabuf::get_pinned(dev, req.offset, len, req.fd, req.access)?;
    let bs = umem
        .best_block_size(
            contained_page_sizes(d.mr_page_sizes, req.iova, req.length)?,
            req.iova,
        )
        .ok_or(EINVAL)?;
    let blocks = umem.num_dma_blocks(bs) as u64;
    // Blocks in the device's own memory (its BAR 4, as when it imports a dma-buf of its
    // HBM) are entered as device memory offsets: the device does not reach its own BAR
    // over PCI. Anything else is a bus address of a peer. A region is one or the other.
    let hbm = d.hbm();
    let mut own = 0u64;
    let mut straddles = false;
    for addr in umem.dma_blocks(bs) {
        if hbm.offset_of(addr, bs.bytes()).is_some() {
            own += 1;
        } else if hbm.overlaps(addr, bs.bytes()) {
            straddles = true;
        }
    }
    let devmem = own != 0;
    if straddles || (devmem && own != blocks) {
        kernel::ibdev_info_ratelimited!(
            dev,
            "dma-buf region refused: it mixes device memory and peer memory\n"
        );
        return Err(EINVAL);
    }
    let region = MrRegion {
        iova: req.iova,
        length: req.length,
        access: req.access,
        bs,
        blocks,
        devmem,
    };
    register(pd, &region, user, keys, Pinned::Dmabuf(umem))
}

/// Deregister `mr`.
pub(crate) fn dereg(mr: &rdma::Mr<GaudiIbDriver>) -> Result {
    // The key goes first: no new work request can name the region. Its pages leave the PD's
    // ASID, and the device MMU forgets them (incoming WRITEs in flight fault from their next
    // packet), when the data is dropped, before the umem is unpinned.
    mr.pd().device().data().remove_mr(mr.data().key);
    Ok(())
}

/// Refuse what the NIC cannot do with a memory region of `length` bytes and `access`.
fn check_mr(dev: &rdma::Device<GaudiIbDriver>, length: u64, access: Access) -> Result {
    // The NIC executes RDMA WRITE only: nothing atomically updates its memory on behalf of a
    // peer, and it has no memory windows or on-demand paging. `REMOTE_READ`, which software
    // asks for with every region (there is no capability to say it would be refused), is
    // kept and grants nothing: the NIC executes no READ request (it takes only the packets of
    // WRITEs and acknowledgements), and the device writes a region only with `REMOTE_WRITE`.
    let unsupported = Access::REMOTE_ATOMIC | Access::MW_BIND;
    if access.bits() & unsupported.bits() != 0 || access.contains(Access::ON_DEMAND) {
        kernel::ibdev_info_ratelimited!(
            dev,
            "memory registration with access {:#x} refused: the NIC does RDMA WRITE only\n",
            access.bits()
        );
        return Err(EOPNOTSUPP);
    }
    if length == 0 || length > crate::chip::MAX_MR_SIZE {
        return Err(EINVAL);
    }
    Ok(())
}

/// The device page sizes of `sizes` (bit n: 2^n bytes) whose pages over the region
/// [`iova`, `iova + length`) cover exactly its 4 KiB pages: the pinned memory. The device MMU
/// is the only bound of a region, so a larger page that reached past the first or the last
/// pinned page would give the device memory nobody registered. 4 KiB pages always qualify.
fn contained_page_sizes(sizes: u64, iova: u64, length: u64) -> Result<u64> {
    const SMALL: u64 = 1 << 12;
    let start = iova & !(SMALL - 1);
    let end = iova
        .checked_add(length)
        .and_then(|e| e.checked_next_multiple_of(SMALL))
        .ok_or(EINVAL)?;
    Ok((12..64)
        .map(|shift| 1u64 << shift)
        .filter(|&s| sizes & s != 0 && (s == SMALL || (start % s == 0 && end % s == 0)))
        .fold(0, |all, s| all | s))
}

/// A memory region about to be entered in the device MMU.
struct MrRegion {
    iova: u64,
    length: u64,
    access: Access,
    /// The size of its device pages.
    bs: BlockSize,
    blocks: u64,
    /// The pages are offsets in device memory rather than bus addresses.
    devmem: bool,
}

/// The addresses of the device pages of `r`, the memory of `pinned`: bus addresses, or offsets
/// in `hbm` for a region of device memory.
fn pages_of<'a>(
    pinned: &'a Pinned,
    r: &'a MrRegion,
    hbm: &'a Hbm,
) -> impl Iterator<Item = u64> + 'a {
    let blocks = match pinned {
        Pinned::User(u) => u.dma_blocks(r.bs),
        Pinned::Dmabuf(u) => u.dma_blocks(r.bs),
    };
    blocks.map(move |addr| {
        if r.devmem {
            // Every block was found inside device memory.
            hbm.offset_of(addr, r.bs.bytes()).unwrap_or(addr)
        } else {
            addr
        }
    })
}

/// Enter the pages of `r`, the memory of `pinned`, in the device MMU, give the region a key
/// and report it to user space; on failure nothing stays mapped or keyed, and `pinned` is
/// released.
fn register(
    pd: &rdma::Pd<GaudiIbDriver>,
    r: &MrRegion,
    user: &mut User<'_, GaudiIbDriver>,
    keys: &mut MrKeys,
    pinned: Pinned,
) -> Result<MrData> {
    let dev = pd.device();
    let d = dev.data();
    let charge = user
        .ucontext
        .data()
        .usage()
        .charge(&[(Limit::Mrs, 1), (Limit::Ptes, r.blocks)])?;
    let shift = r.bs.shift();
    let hbm = d.hbm();
    // The device writes to registered memory only for incoming RDMA WRITEs.
    let flags = mmu::Flags {
        writable: r.access.contains(Access::REMOTE_WRITE),
        devmem: r.devmem,
    };
    // In the ASID, a region a peer may write is at its iova: the address the peer's WRITEs
    // carry, which the NIC translates unchanged. Such regions of one PD do not overlap; their
    // iova must lie below the VAs of the others (`EINVAL` otherwise).
    let place = if flags.writable {
        // Below the driver's own VAs (the other regions', the send WQ array's).
        if r.iova
            .checked_add(r.length)
            .is_none_or(|e| e > crate::chip::LOCAL_VA_START)
        {
            return Err(EINVAL);
        }
        mmu::Place::At(r.iova & !(r.bs.bytes() - 1))
    } else {
        mmu::Place::Anywhere
    };
    let asid_map = pd.data().space.map(
        dev.parent(),
        place,
        pages_of(&pinned, r, hbm),
        r.blocks,
        shift,
        flags,
    )?;
    let info = MrInfo {
        view: MrView {
            pd: pd.data().id,
            iova: r.iova,
            length: r.length,
            asid_va: asid_map.va() + (r.iova & (r.bs.bytes() - 1)),
        },
        access: r.access,
    };
    let key = d.insert_mr(info)?;
    if let Err(e) = user.udata.write(&uapi::gaudi_ib_reg_mr_resp {
        page_shift: shift,
        mmu_va: info.view.asid_va,
        ..Default::default()
    }) {
        d.remove_mr(key);
        return Err(e);
    }
    keys.lkey = key;
    // A peer reaches every region of the PD open to remote writes with the PD's key, the one
    // key its QPs' responders take; the MMU bounds what it reaches. A region closed to remote
    // writes has its own key as rkey, which no responder takes.
    keys.rkey = if flags.writable { pd.data().key } else { key };
    Ok(MrData {
        _asid_map: asid_map,
        _pinned: pinned,
        _charge: charge,
        shift,
        key,
    })
}

const METHOD_QUERY_MR: u16 = uverbs::id(uapi::gaudi_ib_device_methods_GAUDI_IB_METHOD_QUERY_MR);
const ATTR_QUERY_MR_HANDLE: u16 =
    uverbs::id(uapi::gaudi_ib_query_mr_attrs_GAUDI_IB_ATTR_QUERY_MR_HANDLE);
const ATTR_QUERY_MR_RESP: u16 =
    uverbs::id(uapi::gaudi_ib_query_mr_attrs_GAUDI_IB_ATTR_QUERY_MR_RESP);

/// `GAUDI_IB_METHOD_QUERY_MR`: where a memory region sits in its protection domain's ASID.
pub(crate) struct QueryMr;

impl Method for QueryMr {
    type Driver = GaudiIbDriver;
    const ID: u16 = METHOD_QUERY_MR;
    const ATTRS: &'static [&'static AttrDef] = &[
        &AttrDef::idr(
            ATTR_QUERY_MR_HANDLE,
            rdma::uverbs::OBJECT_MR,
            rdma::uverbs::Access::Read,
            Presence::Mandatory,
        ),
        &AttrDef::ptr_out::<uapi::gaudi_ib_mr_info>(ATTR_QUERY_MR_RESP, Presence::Mandatory),
    ];

    fn handle(call: &mut Call<'_, GaudiIbDriver>) -> Result {
        let mr = call.mr(ATTR_QUERY_MR_HANDLE)?;
        let m = mr.data();
        let info = mr.device().data().mr(m.key).ok_or(EINVAL)?;
        call.write(
            ATTR_QUERY_MR_RESP,
            &uapi::gaudi_ib_mr_info {
                page_shift: m.shift,
                mmu_va: info.view.asid_va,
                iova: info.view.iova,
                length: info.view.length,
                key: m.key,
                access: info.access.bits(),
                ..Default::default()
            },
        )
    }
}
