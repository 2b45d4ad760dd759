// SPDX-License-Identifier: GPL-2.0

//! The Gaudi2 NIC's blocks as device model 2.0 describes them (the real NIC's programming
//! interface): their registers at their configuration-space offsets, the QPC gateway, and each
//! port's event queue and completion-queue region. The formats of the QP contexts, work queue
//! entries, completions and events, which the RDMA driver writes and reads too, are
//! [`kernel::net::gaudi::gaudi2`] (re-exported here).
//!
//! Documentation/infiniband/gaudi/device-model.rst is the reference; each register and field
//! here and there has its row there, with the public source it comes from.
//!
//! Configuration-space offset X is BAR0 offset [`CFG_IN_BAR0`] + X. Registers are defined at
//! port 0's offset; [`PortLoc`] and [`PortArrayLoc`] place them for a port, [`MacroLoc`] for
//! the blocks a macro's two ports share.
//!
//! The NIC's own structures (event queues, completion queues, the kernel's work queue and
//! Ethernet buffers) are in kernel memory, reached by bus address with the MMU bypassed:
//! nothing a user maps or registers can reach them.

use core::marker::PhantomData;

use kernel::{
    device::{
        Bound,
        Device, //
    },
    dma::Coherent,
    io::{
        io_project,
        io_read,
        io_write,
        poll::read_poll_timeout,
        register,
        register::{
            Register,
            RegisterArray, //
        },
        Io,
        IoLoc,
        Region, //
    },
    prelude::*,
    rdma::mmap::QueueMem,
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        barrier::{
            dma_mb,
            Read, //
        },
        SpinLockIrq,
    },
    time::Delta,
};

use kernel::net::gaudi::chip::Chip;
// The formats of the NIC's structures, which the RDMA driver writes and reads too.
pub(crate) use kernel::net::gaudi::gaudi2::*;

/// Where configuration-space offset 0 is in BAR0.
pub(crate) const CFG_IN_BAR0: usize = 0x400_0000;
/// Distance between the blocks of two macros.
const MACRO_STRIDE: usize = 0x8_0000;
/// The first per-port register whose odd-port copy is [`ODD_HI`] away (`NIC0_RXE0_CONTROL`).
const CFG_HI_START: usize = 0x544_a000;
const ODD_LO: usize = 0x2_0000;
const ODD_HI: usize = 0x1000;

/// BAR0 offset of port `port`'s copy of the per-port register at port-0 offset `reg`.
const fn port_offset(reg: usize, port: usize) -> usize {
    let odd = if port & 1 == 0 {
        0
    } else if reg < CFG_HI_START {
        ODD_LO
    } else {
        ODD_HI
    };
    CFG_IN_BAR0 + reg + MACRO_STRIDE * (port >> 1) + odd
}

/// Port `port`'s copy of per-port register `T`.
pub(crate) struct PortLoc<T>(usize, PhantomData<T>);

impl<T: Register> PortLoc<T> {
    /// `None` for a port the chip does not have.
    pub(crate) fn of(port: usize) -> Option<Self> {
        (port < PORTS).then(|| Self(port_offset(T::OFFSET, port), PhantomData))
    }
}

impl<const SIZE: usize, T: Register> IoLoc<Region<SIZE>, T> for PortLoc<T> {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        self.0
    }
}

/// Element `idx` of port `port`'s copy of per-port register array `T`.
pub(crate) struct PortArrayLoc<T>(usize, PhantomData<T>);

impl<T: RegisterArray> PortArrayLoc<T> {
    /// `None` for a port the chip does not have or an index beyond the array.
    pub(crate) fn of(port: usize, idx: usize) -> Option<Self> {
        (port < PORTS && idx < T::SIZE)
            .then(|| Self(port_offset(T::OFFSET, port) + idx * T::STRIDE, PhantomData))
    }
}

impl<const SIZE: usize, T: RegisterArray> IoLoc<Region<SIZE>, T> for PortArrayLoc<T> {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        self.0
    }
}

/// Element `idx` of register array `T` of the block the macro of `port` shares.
pub(crate) struct MacroLoc<T>(usize, PhantomData<T>);

impl<T: RegisterArray> MacroLoc<T> {
    /// `None` for a port the chip does not have or an index beyond the array.
    pub(crate) fn of(port: usize, idx: usize) -> Option<Self> {
        (port < PORTS && idx < T::SIZE).then(|| {
            Self(
                CFG_IN_BAR0 + T::OFFSET + MACRO_STRIDE * (port >> 1) + idx * T::STRIDE,
                PhantomData,
            )
        })
    }
}

impl<const SIZE: usize, T: RegisterArray> IoLoc<Region<SIZE>, T> for MacroLoc<T> {
    type IoType = T::Storage;

    fn offset(self) -> usize {
        self.0
    }
}

// Names are the public headers' without their `NIC0_` prefix; offsets are port 0's.
register! {
    /// User doorbell pages (UMR), one 4 KiB block each: FIFO 2b's producer index (the first
    /// register of block b).
    pub(crate) UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32(u32)[15, stride = 0x1000] @ 0x540_0000 {}
    /// The requester context table (in device memory), bits 63:32.
    pub(crate) QPC0_REQ_BASE_ADDRESS_63_32(u32) @ 0x541_f00c {}
    /// The requester context table, bits 31:7.
    pub(crate) QPC0_REQ_BASE_ADDRESS_31_7(u32) @ 0x541_f010 {
        24:0 r;
    }
    /// Retries before a QP fails.
    pub(crate) QPC0_RETRY_COUNT_MAX(u32) @ 0x541_f028 {
        15:8 sequence_error;
        7:0 timeout;
    }
    /// The responder context table, bits 63:32.
    pub(crate) QPC0_RES_BASE_ADDRESS_63_32(u32) @ 0x541_f040 {}
    /// The responder context table, bits 31:7.
    pub(crate) QPC0_RES_BASE_ADDRESS_31_7(u32) @ 0x541_f044 {
        24:0 r;
    }
    /// The gateway: write 1 to start an operation; reads 1 until it is done.
    pub(crate) QPC0_GW_BUSY(u32) @ 0x541_f080 {
        0:0 r => bool;
    }
    /// The gateway's operation.
    pub(crate) QPC0_GW_CTRL(u32) @ 0x541_f084 {
        26:26 doorbell_force => bool;
        25:25 doorbell_mask => bool;
        24:24 requester => bool;
        23:0 qpn;
    }
    /// The context words the gateway writes, or has read.
    pub(crate) QPC0_GW_DATA_0(u32)[32, stride = 4] @ 0x541_f08c {}
    /// The bits of the context the gateway replaces.
    pub(crate) QPC0_GW_MASK_0(u32)[32, stride = 4] @ 0x541_f124 {}
    /// The address space of the QPs a user doorbell FIFO may ring.
    pub(crate) QPC0_DB_FIFO_USER_OVRD_0(u32)[32, stride = 4] @ 0x541_f360 {
        10:10 mmu_bypass => bool;
        9:0 asid;
    }
    /// Where the NIC writes each doorbell FIFO's consumer index, bits 63:32.
    pub(crate) QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32(u32)[32, stride = 8] @ 0x541_f720 {}
    /// Where the NIC writes each doorbell FIFO's consumer index, bits 31:7.
    pub(crate) QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7(u32)[32, stride = 8] @ 0x541_f724 {}
    /// The kernel's doorbell FIFO: the producer index.
    pub(crate) QPC0_SECURED_DB_FIRST32(u32) @ 0x541_f460 {}
    /// The kernel's doorbell FIFO: the QPN; writing it pushes the doorbell.
    pub(crate) QPC0_SECURED_DB_SECOND32(u32) @ 0x541_f464 {}
    /// Interrupt causes pending.
    pub(crate) QPC0_INTERRUPT_CAUSE(u32) @ 0x541_f690 {}
    /// Interrupt causes masked.
    pub(crate) QPC0_INTERRUPT_MASK(u32) @ 0x541_f694 {}
    /// Write 1s to clear interrupt causes (and re-arm them).
    pub(crate) QPC0_INTERRUPT_CLR(u32) @ 0x541_f698 {}
    /// Interrupt enables.
    pub(crate) QPC0_INTERRUPT_EN(u32) @ 0x541_f69c {
        20:20 interrupt10_wire_en => bool;
        19:19 interrupt9_msi_en => bool;
    }
    /// The event queue's ring, bits 63:32.
    pub(crate) QPC0_EVENT_QUE_BASE_ADDR_63_32(u32) @ 0x541_f830 {}
    /// The event queue's ring, bits 31:7.
    pub(crate) QPC0_EVENT_QUE_BASE_ADDR_31_7(u32) @ 0x541_f834 {
        24:0 r;
    }
    /// log2 of the event queue's entries.
    pub(crate) QPC0_EVENT_QUE_LOG_SIZE(u32) @ 0x541_f838 {
        4:0 r;
    }
    /// The NIC's write index.
    pub(crate) QPC0_EVENT_QUE_WRITE_INDEX(u32) @ 0x541_f83c {
        23:0 r;
    }
    /// The NIC's producer index.
    pub(crate) QPC0_EVENT_QUE_PRODUCER_INDEX(u32) @ 0x541_f840 {
        23:0 r;
    }
    /// Where the NIC writes the producer index, bits 63:32.
    pub(crate) QPC0_EVENT_QUE_PI_ADDR_63_32(u32) @ 0x541_f844 {}
    /// Where the NIC writes the producer index, bits 31:7.
    pub(crate) QPC0_EVENT_QUE_PI_ADDR_31_7(u32) @ 0x541_f848 {
        24:0 r;
    }
    /// The consumer index, as the NIC last saw it.
    pub(crate) QPC0_EVENT_QUE_CONSUMER_INDEX_CB(u32) @ 0x541_f84c {
        23:0 r;
    }
    /// The event queue's configuration.
    pub(crate) QPC0_EVENT_QUE_CFG(u32) @ 0x541_f850 {
        4:4 interrupt_per_eqe => bool;
        3:3 write_pi_en => bool;
        1:1 overrun_en => bool;
        0:0 enable => bool;
    }
    /// The kernel's CQ consumer-index slot: the CQ.
    pub(crate) QPC0_SECURED_CQ_NUMBER(u32) @ 0x541_f8f0 {
        15:0 cq_num;
    }
    /// The kernel's CQ consumer-index slot: the index; writing it updates the CQ.
    pub(crate) QPC0_SECURED_CQ_CONSUMER_INDEX(u32) @ 0x541_f8f4 {}
    /// The event queue's consumer index.
    pub(crate) QPC0_EVENT_QUE_CONSUMER_INDEX(u32) @ 0x541_f9a8 {
        31:24 eq_num;
        23:0 ci;
    }
    /// Arming a CQ: the CQ.
    pub(crate) QPC0_ARM_CQ_NUM(u32) @ 0x541_f9ac {
        15:0 cq_num;
    }
    /// Arming a CQ: a completion event once its producer index passes this one.
    pub(crate) QPC0_ARM_CQ_INDEX(u32) @ 0x541_f9b0 {}

    /// The raw MAC filters (RXB, shared by a macro; index 0 the even port's, 2 the odd
    /// one's): address bits 31:0.
    pub(crate) RXB_CORE_TS_RAW0_MAC_31_0_0(u32)[4, stride = 4] @ 0x544_92e0 {}
    /// Address bits 47:32.
    pub(crate) RXB_CORE_TS_RAW0_MAC_47_32_0(u32)[4, stride = 4] @ 0x544_92f0 {}
    /// Bits of the address the filter ignores, 31:0.
    pub(crate) RXB_CORE_TS_RAW0_MAC_31_0_MASK_0(u32)[4, stride = 4] @ 0x544_9340 {}
    /// Bits of the address the filter ignores, 47:32.
    pub(crate) RXB_CORE_TS_RAW0_MAC_47_32_MASK_0(u32)[4, stride = 4] @ 0x544_9350 {}
    /// The RDMA MAC filters (index 0 the even port's, 2 the odd one's), MAC bits 31:0.
    pub(crate) RXB_CORE_TS_RC_MAC_31_0_0(u32)[4, stride = 4] @ 0x544_92c0 {}
    /// The RDMA MAC filters, MAC bits 47:32.
    pub(crate) RXB_CORE_TS_RC_MAC_47_32_0(u32)[4, stride = 4] @ 0x544_92d0 {}
    /// The RDMA filters' masks, bits 31:0 (0: exact match).
    pub(crate) RXB_CORE_TS_RC_MAC_31_0_MASK_0(u32)[4, stride = 4] @ 0x544_9320 {}
    /// The RDMA filters' masks, bits 47:32.
    pub(crate) RXB_CORE_TS_RC_MAC_47_32_MASK_0(u32)[4, stride = 4] @ 0x544_9330 {}

    /// The raw path's QP.
    pub(crate) RXE0_RAW_QPN_P0_0(u32) @ 0x544_a010 {
        23:0 raw_qpn;
    }
    /// The port's CQ region, bits 31:7.
    pub(crate) RXE0_CQ_BASE_ADDR_31_7(u32) @ 0x544_a100 {
        31:7 r;
    }
    /// The port's CQ region, bits 63:32.
    pub(crate) RXE0_CQ_BASE_ADDR_63_32(u32) @ 0x544_a104 {}
    /// log2 of the entries of each CQ's slot in the region.
    pub(crate) RXE0_CQ_LOG_MAX_SIZE(u32) @ 0x544_a108 {}
    /// A CQ's configuration.
    pub(crate) RXE0_CQ_CFG_0(u32)[32, stride = 4] @ 0x544_a180 {
        3:3 write_pi_en => bool;
        1:1 overrun_en => bool;
        0:0 enable => bool;
    }
    /// A CQ's write index.
    pub(crate) RXE0_CQ_WRITE_INDEX_0(u32)[32, stride = 4] @ 0x544_a200 {}
    /// A CQ's producer index.
    pub(crate) RXE0_CQ_PRODUCER_INDEX_0(u32)[32, stride = 4] @ 0x544_a280 {}
    /// Where the NIC writes a CQ's producer index, bits 31:0.
    pub(crate) RXE0_CQ_PI_ADDR_LO_0(u32)[32, stride = 4] @ 0x544_a380 {}
    /// Where the NIC writes a CQ's producer index, bits 63:32.
    pub(crate) RXE0_CQ_PI_ADDR_HI_0(u32)[32, stride = 4] @ 0x544_a400 {}
    /// log2 of a CQ's entries.
    pub(crate) RXE0_CQ_LOG_SIZE_0(u32)[32, stride = 4] @ 0x544_a500 {}
    /// The raw receive ring, bits 31:0.
    pub(crate) RXE0_RAW_BASE_LO_P0_0(u32) @ 0x544_a710 {}
    /// The raw receive ring, bits 63:32.
    pub(crate) RXE0_RAW_BASE_HI_P0_0(u32) @ 0x544_a720 {}
    /// The raw receive ring's geometry.
    pub(crate) RXE0_RAW_MISC_P0_0(u32) @ 0x544_a730 {
        19:15 log_buffer_size_mask;
        3:0 log_raw_entry_size;
    }

    /// Each send WQ array's slot size: log2 of its 128-byte lines.
    pub(crate) TXE0_LOG_MAX_WQ_SIZE_0(u32)[4, stride = 4] @ 0x545_2010 {
        4:0 r;
    }
    /// Each send WQ array, bits 63:32.
    pub(crate) TXE0_SQ_BASE_ADDRESS_63_32_0(u32)[4, stride = 4] @ 0x545_2020 {}
    /// Each send WQ array, bits 31:0.
    pub(crate) TXE0_SQ_BASE_ADDRESS_31_0_0(u32)[4, stride = 4] @ 0x545_2030 {}
    /// Bit n: WQEs of send WQ array n are fetched with the MMU bypassed.
    pub(crate) TXE0_WQE_USER_CFG(u32) @ 0x545_2040 {
        3:0 mmu_bypass;
    }
    /// The source MAC of RoCE packets, bits 47:32.
    pub(crate) TXE0_PORT0_MAC_CFG_47_32(u32) @ 0x545_2088 {
        15:0 r;
    }
    /// The source MAC of RoCE packets, bits 31:0.
    pub(crate) TXE0_PORT0_MAC_CFG_31_0(u32) @ 0x545_208c {}
    /// The source IPv4 address of each encapsulation.
    pub(crate) TXE0_SOURCE_IP_PORT0_0(u32)[8, stride = 4] @ 0x545_2250 {}
}

/// `INTERRUPT_CAUSE`, `_CLR`: the event queue's interrupt (interrupt 9).
pub(crate) const INTERRUPT_EQ: u32 = 1 << 9;

/// The MSI-X vector of port `port`'s event queue (device model 2.0, "What the model decides").
pub(crate) const fn eq_vector(port: usize) -> usize {
    1 + port % 7
}

/// The port-wide retry limits (timeouts, sequence errors) of RC QPs.
const RC_RETRIES: u32 = 7;
/// The kernel's doorbell FIFO, and the entries of each FIFO.
const FIFO_SECURED: usize = 30;
const FIFO_ENTRIES: u32 = 64;
/// How long the NIC may take to empty the kernel's doorbell FIFO.
const FIFO_TIMEOUT: Delta = Delta::from_secs(1);
/// log2 of the entries of a port's event queue.
const EQ_LOG: u32 = 8;
const EQ_ENTRIES: u32 = 1 << EQ_LOG;
/// Event queue indexes are 24 bits.
const EQ_INDEX_MASK: u32 = 0xff_ffff;
/// How long the gateway may take (hbl_cn gives up after one second).
const GW_TIMEOUT: Delta = Delta::from_secs(1);

/// The location of a register, `EINVAL` for a port or an index the chip does not have.
fn at<L>(loc: Option<L>) -> Result<L> {
    loc.ok_or(EINVAL)
}

/// Write a 64-bit address as a pair of registers, the low one holding bits 31:7.
fn addr_31_7(addr: u64) -> (u32, u32) {
    ((addr >> 32) as u32, ((addr as u32) >> 7) & 0x1ff_ffff)
}

/// What the driver knows of the ports' gateway registers, kept under the lock that serialises
/// their operations, so that an operation writes only what it needs: for each port, the
/// GW_MASK words that may hold a value other than 0, and whether the last operation was seen
/// finished.
///
/// Only a write of 0 to a mask word already known to hold 0 is skipped, and a GW_DATA word only
/// when its mask word is 0 (the NIC takes no bit of it). No public source says whether the
/// gateway registers keep their values after an operation (hbl_cn rewrites all 32 pairs every
/// time); either way a mask word last written 0 holds 0, so the saving assumes nothing.
pub(crate) struct Gateways {
    ports: [GatewayRegs; PORTS],
    /// For each port, the requester and responder contexts the RDMA driver may have made
    /// valid and has not invalidated since (bit `q % 64` of word `q / 64`: QP `q`), which the
    /// core invalidates itself when the RDMA driver goes. In memory of its own: 512 bytes a
    /// port, too much for the probe's stack.
    rdma_valid: KVec<[[u64; QPC_BITMAP_WORDS]; 2]>,
}

/// Words of a bitmap of a port's QP contexts.
const QPC_BITMAP_WORDS: usize = (TABLE_QPS as usize).div_ceil(64);

#[derive(Clone, Copy)]
struct GatewayRegs {
    /// Bit `i`: GW_MASK word `i` may not be 0 (all set when unknown, as after probe).
    mask_set: u32,
    /// The last operation was seen finished: GW_BUSY reads 0.
    idle: bool,
}

impl Gateways {
    /// Nothing known of `ports` ports: the first operation of each writes every mask word.
    pub(crate) fn new(ports: usize) -> Result<Self> {
        let mut rdma_valid = KVec::with_capacity(ports, GFP_KERNEL)?;
        rdma_valid.resize(ports, [[0; QPC_BITMAP_WORDS]; 2], GFP_KERNEL)?;
        Ok(Self {
            ports: [GatewayRegs {
                mask_set: u32::MAX,
                idle: false,
            }; PORTS],
            rdma_valid,
        })
    }

    /// The bit of QP `qpn`'s requester (or responder) context of `port` in `rdma_valid`.
    fn rdma_bit(&mut self, port: usize, qpn: u32, requester: bool) -> Option<(&mut u64, u64)> {
        let p = self.rdma_valid.get_mut(port)?;
        let word = p[usize::from(!requester)].get_mut(qpn as usize / 64)?;
        Some((word, 1 << (qpn % 64)))
    }

    /// Note a write of `data` under `mask` to QP `qpn`'s context by the RDMA driver: before
    /// it starts (`done` false), one that may make the context valid (a write that fails
    /// half-way may have); once it is done, one that made it invalid.
    pub(crate) fn note_rdma(
        &mut self,
        done: bool,
        port: usize,
        qpn: u32,
        requester: bool,
        data: &[u64],
        mask: &[u64],
    ) {
        let valid = if requester { req::VALID } else { res::VALID };
        if valid.get(mask) == 0 {
            return;
        }
        let sets = valid.get(data) != 0;
        if let Some((word, bit)) = self.rdma_bit(port, qpn, requester) {
            match (done, sets) {
                (false, true) => *word |= bit,
                (true, false) => *word &= !bit,
                _ => {}
            }
        }
    }

    /// Take the contexts of `port` the RDMA driver may have left valid: (QP, requester).
    pub(crate) fn take_rdma(&mut self, port: usize) -> Result<KVec<(u32, bool)>> {
        let Some(p) = self.rdma_valid.get_mut(port) else {
            return Ok(KVec::new());
        };
        let n = p.iter().flatten().map(|w| w.count_ones() as usize).sum();
        let mut out = KVec::with_capacity(n, GFP_KERNEL)?;
        for (kind, words) in p.iter_mut().enumerate() {
            for (w, word) in words.iter_mut().enumerate() {
                while *word != 0 {
                    let b = word.trailing_zeros();
                    *word &= !(1u64 << b);
                    out.push(((w * 64) as u32 + b, kind == 0), GFP_KERNEL)?;
                }
            }
        }
        Ok(out)
    }

    fn port(&mut self, port: usize) -> Result<&mut GatewayRegs> {
        self.ports.get_mut(port).ok_or(EINVAL)
    }
}

/// The gateway's GW_MASK and GW_DATA words.
const GW_WORDS: usize = 32;
const _: () = assert!(GW_WORDS <= u32::BITS as usize);

/// The GW_MASK and GW_DATA words that hold a requester context (128 bytes) or a responder one
/// (32).
const fn gateway_words(requester: bool) -> usize {
    if requester {
        REQ_QPC_WORDS * 2
    } else {
        RES_QPC_WORDS * 2
    }
}

/// Wait until `port`'s gateway is idle (hbl_cn gives up after one second).
fn gateway_wait(regs: &dyn Chip, port: usize) -> Result {
    let busy = || -> Result<bool> {
        Ok(regs
            .try_read(PortLoc::<QPC0_GW_BUSY>::of(port).ok_or(EINVAL)?)?
            .r())
    };
    read_poll_timeout(busy, |b| !b, Delta::from_micros(10), GW_TIMEOUT).map(|_| ())
}

/// Start the operation the gateway's mask and data words describe on QP `qpn`'s requester or
/// responder context, and wait until it is done.
fn gateway_start(
    regs: &dyn Chip,
    gw: &mut GatewayRegs,
    port: usize,
    qpn: u32,
    requester: bool,
) -> Result {
    let ctrl = QPC0_GW_CTRL::zeroed()
        .try_with_qpn(qpn)?
        .with_requester(requester);
    regs.try_write(PortLoc::<QPC0_GW_CTRL>::of(port).ok_or(EINVAL)?, ctrl)?;
    gw.idle = false;
    regs.try_write(
        PortLoc::<QPC0_GW_BUSY>::of(port).ok_or(EINVAL)?,
        QPC0_GW_BUSY::zeroed().with_r(true),
    )?;
    gateway_wait(regs, port)?;
    gw.idle = true;
    Ok(())
}

/// Write the gateway's 32 mask words for an operation: `mask(i)` for word `i`. The registers
/// end as hbl_cn's sequence leaves them; a word known to hold 0 already is not written again.
fn gateway_masks(
    regs: &dyn Chip,
    gw: &mut GatewayRegs,
    port: usize,
    mask: impl Fn(usize) -> u32,
) -> Result {
    if !gw.idle {
        gateway_wait(regs, port)?;
        gw.idle = true;
    }
    for i in 0..GW_WORDS {
        let m = mask(i);
        if m == 0 && gw.mask_set & (1 << i) == 0 {
            continue;
        }
        regs.try_write(
            PortArrayLoc::<QPC0_GW_MASK_0>::of(port, i).ok_or(EINVAL)?,
            QPC0_GW_MASK_0::from_raw(m),
        )?;
        if m == 0 {
            gw.mask_set &= !(1 << i);
        } else {
            gw.mask_set |= 1 << i;
        }
    }
    Ok(())
}

/// Run one gateway operation on QP `qpn` of `port`: replace the context bits whose `mask` bit
/// is set with those of `data`. The caller serialises a port's gateway operations and passes
/// what is known of them in `gw`.
pub(crate) fn gateway_write(
    regs: &dyn Chip,
    gw: &mut Gateways,
    port: usize,
    qpn: u32,
    requester: bool,
    data: &[u64],
    mask: &[u64],
) -> Result {
    let gw = gw.port(port)?;
    let half = |w: &[u64], i: usize| (w.get(i / 2).copied().unwrap_or(0) >> (32 * (i % 2))) as u32;
    let words = gateway_words(requester);
    // Mask words beyond the context are 0, as hbl_cn writes them.
    gateway_masks(
        regs,
        gw,
        port,
        |i| if i < words { half(mask, i) } else { 0 },
    )?;
    for i in 0..words {
        if half(mask, i) != 0 {
            regs.try_write(
                PortArrayLoc::<QPC0_GW_DATA_0>::of(port, i).ok_or(EINVAL)?,
                QPC0_GW_DATA_0::from_raw(half(data, i)),
            )?;
        }
    }
    gateway_start(regs, gw, port, qpn, requester)
}

/// Read `fields` of QP `qpn`'s context of `port` through the gateway into `out` (16 words for a
/// requester context, 4 for a responder one): an operation whose mask is all 0, after which
/// only the data words holding the fields are read (the other words of `out` are left as they
/// are). The caller serialises a port's gateway operations and passes what is known of them in
/// `gw`.
pub(crate) fn gateway_read(
    regs: &dyn Chip,
    gw: &mut Gateways,
    port: usize,
    qpn: u32,
    requester: bool,
    fields: &[Field],
    out: &mut [u64],
) -> Result {
    let gw = gw.port(port)?;
    let words = gateway_words(requester);
    gateway_masks(regs, gw, port, |_| 0)?;
    gateway_start(regs, gw, port, qpn, requester)?;
    let mut wanted = 0u32;
    for f in fields {
        for i in f.words() {
            if i < words.min(out.len() * 2) {
                wanted |= 1 << i;
            }
        }
    }
    for i in (0..words).filter(|i| wanted & (1 << i) != 0) {
        let v = regs
            .try_read(PortArrayLoc::<QPC0_GW_DATA_0>::of(port, i).ok_or(EINVAL)?)?
            .into_raw();
        let w = out.get_mut(i / 2).ok_or(EINVAL)?;
        let shift = 32 * (i % 2);
        *w = (*w & !(u64::from(u32::MAX) << shift)) | (u64::from(v) << shift);
    }
    Ok(())
}

/// BAR0 offset of UMR block `block` of port `port`, the page its owner maps.
pub(crate) fn umr_page(port: usize, block: usize) -> Option<usize> {
    PortArrayLoc::<UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32>::of(port, block).map(|l| l.0)
}

/// A port's event queue and CQ region: kernel memory, reached by bus address.
pub(crate) struct PortQueues {
    port: usize,
    eq: Coherent<[u32]>,
    /// The event queue's producer index, as the NIC writes it (one 128-byte line).
    eq_pi: Coherent<[u32]>,
    /// Entries taken since the queue was enabled (24 bits, as the NIC's indexes). Only the
    /// interrupt thread of the port's vector changes it.
    eq_ci: Atomic<u32>,
    /// The 16 CQs, back to back, each `2^CQ_LOG_MAX` entries; user CQs' parts are mapped by
    /// their owners.
    cqs: QueueMem,
    /// The CQs' producer indexes, as the NIC writes them: one 128-byte line each (never read
    /// here: the NIC needs a place to write them).
    cq_pi: Coherent<[u32]>,
    /// The kernel's doorbell FIFO's consumer index, as the NIC writes it (one line).
    fifo_ci: Coherent<[u32]>,
    /// Doorbells rung on the kernel's FIFO since the NIC was reset.
    rung: Atomic<u32>,
    /// CQ 1's entries taken. Only the interrupt thread of the port's vector changes it.
    rc_ci: Atomic<u32>,
    /// Send WQ entries of the RC QPs on the port, at most CQ 1's entries.
    rc_wqes: Atomic<u32>,
    /// UMR blocks given to user space (bit b: block b).
    umr_used: Atomic<u32>,
    /// Serialises the port's kernel CQ slot: giving a consumer index (`SECURED_CQ_NUMBER`,
    /// then `SECURED_CQ_CONSUMER_INDEX`) and arming (`ARM_CQ_NUM`, then `ARM_CQ_INDEX`) are
    /// two register writes each, and Ethernet's NAPI poll, the RC completions and the setup
    /// of a QP set's CQ write them for different CQs.
    cq_slot: Pin<KBox<SpinLockIrq<()>>>,
}

/// 32-bit words of a 128-byte line.
const LINE_WORDS: usize = 32;
/// 32-bit words of a CQE or an EQE.
const ENTRY_WORDS: usize = 4;

impl PortQueues {
    /// Allocate port `port`'s queues, zeroed.
    pub(crate) fn new(dev: &Device<Bound>, port: usize) -> Result<Self> {
        Ok(Self {
            port,
            eq: Coherent::zeroed_slice(dev, EQ_ENTRIES as usize * ENTRY_WORDS, GFP_KERNEL)?,
            eq_pi: Coherent::zeroed_slice(dev, LINE_WORDS, GFP_KERNEL)?,
            eq_ci: Atomic::new(0),
            cqs: QueueMem::new_for(dev, CQS * (ENTRY_WORDS << CQ_LOG_MAX) * 4)?,
            cq_pi: Coherent::zeroed_slice(dev, CQS * LINE_WORDS, GFP_KERNEL)?,
            fifo_ci: Coherent::zeroed_slice(dev, LINE_WORDS, GFP_KERNEL)?,
            rung: Atomic::new(0),
            rc_ci: Atomic::new(0),
            rc_wqes: Atomic::new(0),
            umr_used: Atomic::new(0),
            cq_slot: KBox::pin_init(kernel::new_spinlock_irq!(()), GFP_KERNEL)?,
        })
    }

    /// Program the event queue (hbl_cn's sequence: PI address, ring, size, indexes zeroed,
    /// then enabled with the PI written back and an interrupt per entry) and the CQ region.
    pub(crate) fn enable(&self, regs: &dyn Chip, tables: u64) -> Result {
        let p = self.port;
        // The context tables.
        let (hi, lo) = addr_31_7(tables);
        regs.try_write(
            at(PortLoc::<QPC0_REQ_BASE_ADDRESS_63_32>::of(p))?,
            QPC0_REQ_BASE_ADDRESS_63_32::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_REQ_BASE_ADDRESS_31_7>::of(p))?,
            QPC0_REQ_BASE_ADDRESS_31_7::from_raw(lo),
        )?;
        let (hi, lo) = addr_31_7(tables + TABLE_QPS * REQ_QPC_SIZE);
        regs.try_write(
            at(PortLoc::<QPC0_RES_BASE_ADDRESS_63_32>::of(p))?,
            QPC0_RES_BASE_ADDRESS_63_32::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_RES_BASE_ADDRESS_31_7>::of(p))?,
            QPC0_RES_BASE_ADDRESS_31_7::from_raw(lo),
        )?;
        // The event queue.
        let (hi, lo) = addr_31_7(self.eq_pi.dma_address());
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_PI_ADDR_63_32>::of(p))?,
            QPC0_EVENT_QUE_PI_ADDR_63_32::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_PI_ADDR_31_7>::of(p))?,
            QPC0_EVENT_QUE_PI_ADDR_31_7::from_raw(lo),
        )?;
        let (hi, lo) = addr_31_7(self.eq.dma_address());
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_BASE_ADDR_63_32>::of(p))?,
            QPC0_EVENT_QUE_BASE_ADDR_63_32::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_BASE_ADDR_31_7>::of(p))?,
            QPC0_EVENT_QUE_BASE_ADDR_31_7::from_raw(lo),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_LOG_SIZE>::of(p))?,
            QPC0_EVENT_QUE_LOG_SIZE::zeroed().try_with_r(EQ_LOG)?,
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_WRITE_INDEX>::of(p))?,
            QPC0_EVENT_QUE_WRITE_INDEX::zeroed(),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_PRODUCER_INDEX>::of(p))?,
            QPC0_EVENT_QUE_PRODUCER_INDEX::zeroed(),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_CONSUMER_INDEX_CB>::of(p))?,
            QPC0_EVENT_QUE_CONSUMER_INDEX_CB::zeroed(),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_CONSUMER_INDEX>::of(p))?,
            QPC0_EVENT_QUE_CONSUMER_INDEX::zeroed(),
        )?;
        self.eq_ci.store(0, Relaxed);
        // The interrupt armed before the queue takes its first entry.
        regs.try_write(
            at(PortLoc::<QPC0_INTERRUPT_EN>::of(p))?,
            QPC0_INTERRUPT_EN::zeroed().with_interrupt9_msi_en(true),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_INTERRUPT_CLR>::of(p))?,
            QPC0_INTERRUPT_CLR::from_raw(INTERRUPT_EQ),
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_EVENT_QUE_CFG>::of(p))?,
            QPC0_EVENT_QUE_CFG::zeroed()
                .with_enable(true)
                .with_overrun_en(true)
                .with_write_pi_en(true)
                .with_interrupt_per_eqe(true),
        )?;
        // The kernel's doorbell FIFO reports how far the NIC took it.
        let (hi, lo) = addr_31_7(self.fifo_ci.dma_address());
        regs.try_write(
            at(PortArrayLoc::<
                QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32,
            >::of(p, FIFO_SECURED))?,
            QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32::from_raw(hi),
        )?;
        regs.try_write(
            at(PortArrayLoc::<
                QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7,
            >::of(p, FIFO_SECURED))?,
            QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7::from_raw(lo),
        )?;
        // Send WQ array 1's WQEs (the RC QPs') are fetched in the QP's ASID: set once here,
        // as the Ethernet driver updates the same register for array 0.
        regs.try_update(at(PortLoc::<TXE0_WQE_USER_CFG>::of(p))?, |c| {
            let bypass = c.mmu_bypass().get() & !2;
            c.try_with_mmu_bypass(bypass).unwrap_or(c)
        })?;
        let cqs = self.cqs.dma_address();
        regs.try_write(
            at(PortLoc::<RXE0_CQ_BASE_ADDR_63_32>::of(p))?,
            RXE0_CQ_BASE_ADDR_63_32::from_raw((cqs >> 32) as u32),
        )?;
        regs.try_write(
            at(PortLoc::<RXE0_CQ_BASE_ADDR_31_7>::of(p))?,
            RXE0_CQ_BASE_ADDR_31_7::from_raw(cqs as u32 & !0x7f),
        )?;
        regs.try_write(
            at(PortLoc::<RXE0_CQ_LOG_MAX_SIZE>::of(p))?,
            RXE0_CQ_LOG_MAX_SIZE::from_raw(CQ_LOG_MAX),
        )
    }

    /// Program what the kernel's RC queue pairs use (see `crate::rc`): send WQ array 1 at
    /// device VA `wq_va` in each QP's ASID, with slots of `2^log_lines` 128-byte lines; the
    /// port's retry limits; and CQ 1, armed from index 0.
    pub(crate) fn rc_enable(&self, regs: &dyn Chip, wq_va: u64, log_lines: u32) -> Result {
        let p = self.port;
        regs.try_write(
            at(PortArrayLoc::<TXE0_SQ_BASE_ADDRESS_63_32_0>::of(p, 1))?,
            TXE0_SQ_BASE_ADDRESS_63_32_0::from_raw((wq_va >> 32) as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<TXE0_SQ_BASE_ADDRESS_31_0_0>::of(p, 1))?,
            TXE0_SQ_BASE_ADDRESS_31_0_0::from_raw(wq_va as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<TXE0_LOG_MAX_WQ_SIZE_0>::of(p, 1))?,
            TXE0_LOG_MAX_WQ_SIZE_0::zeroed().try_with_r(log_lines)?,
        )?;
        regs.try_write(
            at(PortLoc::<QPC0_RETRY_COUNT_MAX>::of(p))?,
            QPC0_RETRY_COUNT_MAX::zeroed()
                .try_with_timeout(RC_RETRIES)?
                .try_with_sequence_error(RC_RETRIES)?,
        )?;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_PRODUCER_INDEX_0>::of(p, CQ_RC))?,
            RXE0_CQ_PRODUCER_INDEX_0::zeroed(),
        )?;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_WRITE_INDEX_0>::of(p, CQ_RC))?,
            RXE0_CQ_WRITE_INDEX_0::zeroed(),
        )?;
        self.rc_ci.store(0, Relaxed);
        self.rc_wqes.store(0, Relaxed);
        self.cq_consumed(regs, CQ_RC, 0)?;
        self.cq_enable(regs, CQ_RC, CQ_LOG_MAX)?;
        self.cq_arm(regs, CQ_RC, 0)
    }

    /// Count `n` more send WQ entries of RC QPs against CQ 1; false if it cannot hold them.
    pub(crate) fn rc_reserve(&self, n: u32) -> bool {
        let mut cur = self.rc_wqes.load(Relaxed);
        loop {
            let Some(new) = cur.checked_add(n).filter(|&v| v <= 1 << CQ_LOG_MAX) else {
                return false;
            };
            match self.rc_wqes.cmpxchg(cur, new, Relaxed) {
                Ok(_) => return true,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Forget every reservation of [`Self::rc_reserve`] (the RDMA driver is gone).
    pub(crate) fn rc_reset(&self) {
        self.rc_wqes.store(0, Relaxed);
    }

    /// Give back `n` entries counted by [`Self::rc_reserve`].
    pub(crate) fn rc_release(&self, n: u32) {
        let mut cur = self.rc_wqes.load(Relaxed);
        while let Err(seen) = self.rc_wqes.cmpxchg(cur, cur.saturating_sub(n), Relaxed) {
            cur = seen;
        }
    }

    /// Take up to `out.len()` of CQ 1's new entries; when fewer were there, give the NIC the
    /// consumer index and arm the CQ again (an entry written before the arming is then taken
    /// too). Returns the entries taken. Only the interrupt thread of the port's vector calls
    /// this.
    pub(crate) fn rc_take(&self, regs: &dyn Chip, out: &mut [Cqe]) -> Result<usize> {
        let mut ci = self.rc_ci.load(Relaxed);
        let mut n = 0;
        let res = loop {
            while n < out.len() {
                match self.cq_take(CQ_RC, CQ_LOG_MAX, ci)? {
                    Some(c) => {
                        out[n] = c;
                        n += 1;
                        ci = ci.wrapping_add(1);
                    }
                    None => break,
                }
            }
            if n == out.len() {
                break Ok(n);
            }
            self.cq_consumed(regs, CQ_RC, ci)?;
            self.cq_arm(regs, CQ_RC, ci)?;
            if !self.cq_ready(CQ_RC, CQ_LOG_MAX, ci)? {
                break Ok(n);
            }
        };
        self.rc_ci.store(ci, Relaxed);
        if n == out.len() {
            self.cq_consumed(regs, CQ_RC, ci)?;
        }
        res
    }

    /// Whether the kernel's doorbell FIFO has room for another doorbell: at most
    /// `FIFO_ENTRIES - 1` rung and not taken (the consumer index the NIC writes counts modulo
    /// the FIFO's entries).
    pub(crate) fn fifo_room(&self) -> bool {
        let ci = (|| -> Result<u32> { Ok(io_read!(&self.fifo_ci, [try: 0])) })().unwrap_or(0);
        let rung = self.rung.load(Relaxed) % FIFO_ENTRIES;
        (rung + FIFO_ENTRIES - ci % FIFO_ENTRIES) % FIFO_ENTRIES < FIFO_ENTRIES - 1
    }

    /// Whether the NIC wrote an entry the driver has not taken, from the producer index it
    /// writes back. Between two calls of [`Self::take_events`] the interrupt cause is clear
    /// or an interrupt is on its way for an entry not taken, so a vector's thread may skip a
    /// queue for which this is false.
    pub(crate) fn eq_pending(&self) -> bool {
        let ci = self.eq_ci.load(Relaxed);
        let pi = (|| -> Result<u32> { Ok(io_read!(&self.eq_pi, [try: 0])) })().unwrap_or(ci);
        pi & EQ_INDEX_MASK != ci
    }

    /// Whether the NIC wrote over entries the driver had not taken (the queue is enabled with
    /// overrun, as hbl_cn's): how many it lost. The scan then starts at the oldest entry that
    /// is left, one ring behind the written-back producer index.
    pub(crate) fn eq_overrun(&self) -> u32 {
        let ci = self.eq_ci.load(Relaxed);
        let Ok(pi) = (|| -> Result<u32> { Ok(io_read!(&self.eq_pi, [try: 0])) })() else {
            return 0;
        };
        let ahead = pi.wrapping_sub(ci) & EQ_INDEX_MASK;
        if ahead <= EQ_ENTRIES {
            return 0;
        }
        self.eq_ci
            .store(pi.wrapping_sub(EQ_ENTRIES) & EQ_INDEX_MASK, Relaxed);
        ahead - EQ_ENTRIES
    }

    /// Take the event queue's new entries, handing each to `f`, and give the NIC the consumer
    /// index. The NIC raises the interrupt once until software clears its cause
    /// (`INTERRUPT_CLR`), and an entry may set the cause while a scan that then takes it is
    /// under way: so the cause is cleared before each scan, and the scans go on until one
    /// finds nothing. Returns true if it stopped after two rings' worth with entries perhaps
    /// left, which raise no interrupt of their own: the caller calls again.
    pub(crate) fn take_events(&self, regs: &dyn Chip, mut f: impl FnMut(&Eqe)) -> Result<bool> {
        let p = self.port;
        let mut ci = self.eq_ci.load(Relaxed);
        let mut n = 0;
        loop {
            regs.try_write(
                PortLoc::<QPC0_INTERRUPT_CLR>::of(p).ok_or(EINVAL)?,
                QPC0_INTERRUPT_CLR::from_raw(INTERRUPT_EQ),
            )?;
            // A read makes the posted write land before the scan.
            regs.try_read(PortLoc::<QPC0_INTERRUPT_CAUSE>::of(p).ok_or(EINVAL)?)?;
            let before = n;
            while n < 2 * EQ_ENTRIES {
                let base = (ci % EQ_ENTRIES) as usize * ENTRY_WORDS;
                let first: u32 = io_read!(&self.eq, [try: base]);
                if eqe::VALID.get(&[first.into()]) == 0 {
                    break;
                }
                // The rest of the entry only after its VALID bit.
                dma_mb(Read);
                let e = io_project!(&self.eq, [try: base..base + ENTRY_WORDS])
                    .try_cast::<Eqe>()?
                    .copy_read();
                io_write!(&self.eq, [try: base], 0);
                f(&e);
                ci = (ci + 1) & EQ_INDEX_MASK;
                n += 1;
            }
            self.eq_ci.store(ci, Relaxed);
            if n > before {
                regs.try_write(
                    PortLoc::<QPC0_EVENT_QUE_CONSUMER_INDEX>::of(p).ok_or(EINVAL)?,
                    QPC0_EVENT_QUE_CONSUMER_INDEX::zeroed().try_with_ci(ci)?,
                )?;
            }
            if n == before {
                return Ok(false);
            }
            if n >= 2 * EQ_ENTRIES {
                return Ok(true);
            }
        }
    }

    /// Set up CQ `cq` with `2^log` entries (at most the slot's), its PI written back.
    pub(crate) fn cq_enable(&self, regs: &dyn Chip, cq: usize, log: u32) -> Result {
        if cq >= CQS || log > CQ_LOG_MAX {
            return Err(EINVAL);
        }
        let p = self.port;
        let words = ENTRY_WORDS << CQ_LOG_MAX;
        for w in cq * words..(cq + 1) * words {
            io_write!(self.cqs.coherent(), [try: w], 0);
        }
        io_write!(&self.cq_pi, [try: cq * LINE_WORDS], 0);
        let pi = self.cq_pi.dma_address() + (cq * LINE_WORDS * 4) as u64;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_LOG_SIZE_0>::of(p, cq))?,
            RXE0_CQ_LOG_SIZE_0::from_raw(log),
        )?;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_PI_ADDR_HI_0>::of(p, cq))?,
            RXE0_CQ_PI_ADDR_HI_0::from_raw((pi >> 32) as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_PI_ADDR_LO_0>::of(p, cq))?,
            RXE0_CQ_PI_ADDR_LO_0::from_raw(pi as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<RXE0_CQ_CFG_0>::of(p, cq))?,
            RXE0_CQ_CFG_0::zeroed()
                .with_enable(true)
                .with_write_pi_en(true),
        )
    }

    /// Stop CQ `cq`: the NIC writes no more of its entries.
    pub(crate) fn cq_disable(&self, regs: &dyn Chip, cq: usize) {
        if let Some(l) = PortArrayLoc::<RXE0_CQ_CFG_0>::of(self.port, cq) {
            let _ = regs.try_write(l, RXE0_CQ_CFG_0::zeroed());
        }
    }

    /// The entry of CQ `cq` at `index` (of a CQ of `2^log` entries), if the NIC wrote it
    /// (`VALID`); the entry is then cleared for the ring's next pass.
    pub(crate) fn cq_take(&self, cq: usize, log: u32, index: u32) -> Result<Option<Cqe>> {
        if cq >= CQS || log > CQ_LOG_MAX {
            return Err(EINVAL);
        }
        let slot = (index & ((1 << log) - 1)) as usize;
        let base = (cq << CQ_LOG_MAX | slot) * ENTRY_WORDS;
        let first: u32 = io_read!(self.cqs.coherent(), [try: base]);
        if cqe::VALID.get(&[first.into()]) == 0 {
            return Ok(None);
        }
        dma_mb(Read);
        let c = io_project!(self.cqs.coherent(), [try: base..base + ENTRY_WORDS])
            .try_cast::<Cqe>()?
            .copy_read();
        io_write!(self.cqs.coherent(), [try: base], 0);
        Ok(Some(c))
    }

    /// Stop the event queue and every CQ of the port: the NIC writes nothing more to their
    /// memory.
    pub(crate) fn disable(&self, regs: &dyn Chip) {
        for cq in 0..CQS {
            self.cq_disable(regs, cq);
        }
        if let Some(l) = PortLoc::<QPC0_EVENT_QUE_CFG>::of(self.port) {
            let _ = regs.try_write(l, QPC0_EVENT_QUE_CFG::zeroed());
        }
        if let Some(l) = PortLoc::<QPC0_INTERRUPT_EN>::of(self.port) {
            let _ = regs.try_write(l, QPC0_INTERRUPT_EN::zeroed());
        }
    }

    /// Whether the NIC wrote the entry of CQ `cq` at `index` (of a CQ of `2^log` entries).
    pub(crate) fn cq_ready(&self, cq: usize, log: u32, index: u32) -> Result<bool> {
        if cq >= CQS || log > CQ_LOG_MAX {
            return Err(EINVAL);
        }
        let slot = (index & ((1 << log) - 1)) as usize;
        let first: u32 =
            io_read!(self.cqs.coherent(), [try: (cq << CQ_LOG_MAX | slot) * ENTRY_WORDS]);
        Ok(cqe::VALID.get(&[first.into()]) != 0)
    }

    /// Give the NIC CQ `cq`'s consumer index through the kernel's slot.
    pub(crate) fn cq_consumed(&self, regs: &dyn Chip, cq: usize, ci: u32) -> Result {
        let p = self.port;
        let _g = self.cq_slot.lock();
        regs.try_write(
            PortLoc::<QPC0_SECURED_CQ_NUMBER>::of(p).ok_or(EINVAL)?,
            QPC0_SECURED_CQ_NUMBER::zeroed().try_with_cq_num(cq as u32)?,
        )?;
        regs.try_write(
            PortLoc::<QPC0_SECURED_CQ_CONSUMER_INDEX>::of(p).ok_or(EINVAL)?,
            QPC0_SECURED_CQ_CONSUMER_INDEX::from_raw(ci),
        )
    }

    /// Arm CQ `cq`: a completion event once its producer index passes `index`.
    pub(crate) fn cq_arm(&self, regs: &dyn Chip, cq: usize, index: u32) -> Result {
        let p = self.port;
        let _g = self.cq_slot.lock();
        regs.try_write(
            PortLoc::<QPC0_ARM_CQ_NUM>::of(p).ok_or(EINVAL)?,
            QPC0_ARM_CQ_NUM::zeroed().try_with_cq_num(cq as u32)?,
        )?;
        regs.try_write(
            PortLoc::<QPC0_ARM_CQ_INDEX>::of(p).ok_or(EINVAL)?,
            QPC0_ARM_CQ_INDEX::from_raw(index),
        )?;
        // A read makes the posted write land before the caller looks at the CQ again.
        regs.try_read(PortLoc::<QPC0_ARM_CQ_NUM>::of(p).ok_or(EINVAL)?)?;
        Ok(())
    }

    /// Take a free UMR block for the QPs of ASID `asid`: its doorbell FIFO 2b rings only
    /// them, its CQ 2b + 2 is enabled with `2^log` entries, zeroed. Returns the block and the
    /// memory of the CQ's entries. `ENOSPC` if every block is taken.
    pub(crate) fn user_block(
        &self,
        regs: &dyn Chip,
        asid: u32,
        log: u32,
    ) -> Result<(usize, QueueMem)> {
        if !(CQ_USER_LOG_MIN..=CQ_LOG_MAX).contains(&log) {
            return Err(EINVAL);
        }
        let mut cur = self.umr_used.load(Relaxed);
        let block = loop {
            let free = !cur & ((1 << USER_BLOCKS) - 1);
            if free == 0 {
                return Err(ENOSPC);
            }
            let b = free.trailing_zeros();
            match self.umr_used.cmpxchg(cur, cur | 1 << b, Full) {
                Ok(_) => break b as usize,
                Err(seen) => cur = seen,
            }
        };
        let res = (|| {
            let cq = CQ_USER_FIRST + 2 * block;
            let slot = (ENTRY_WORDS * 4) << CQ_LOG_MAX;
            let mem = self
                .cqs
                .part(cq * slot, ((ENTRY_WORDS * 4) << log).next_multiple_of(4096))?;
            let ovrd = QPC0_DB_FIFO_USER_OVRD_0::zeroed().try_with_asid(asid)?;
            // The CQ starts over (its last owner left its indexes anywhere).
            regs.try_write(
                at(PortArrayLoc::<RXE0_CQ_PRODUCER_INDEX_0>::of(self.port, cq))?,
                RXE0_CQ_PRODUCER_INDEX_0::zeroed(),
            )?;
            regs.try_write(
                at(PortArrayLoc::<RXE0_CQ_WRITE_INDEX_0>::of(self.port, cq))?,
                RXE0_CQ_WRITE_INDEX_0::zeroed(),
            )?;
            self.cq_consumed(regs, cq, 0)?;
            for fifo in [2 * block, 2 * block + 1] {
                regs.try_write(
                    at(PortArrayLoc::<QPC0_DB_FIFO_USER_OVRD_0>::of(
                        self.port, fifo,
                    ))?,
                    ovrd,
                )?;
            }
            self.cq_enable(regs, cq, log)?;
            Ok(mem)
        })();
        match res {
            Ok(mem) => Ok((block, mem)),
            Err(e) => {
                self.user_block_put(block);
                Err(e)
            }
        }
    }

    /// Stop the CQ of UMR block `block` (the NIC writes no more of its entries).
    pub(crate) fn user_block_stop(&self, regs: &dyn Chip, block: usize) {
        self.cq_disable(regs, CQ_USER_FIRST + 2 * block);
    }

    /// Give back every UMR block still held (the RDMA driver is gone), their CQs stopped
    /// through `regs` if given; returns how many there were.
    pub(crate) fn user_blocks_reclaim(&self, regs: Option<&dyn Chip>) -> u32 {
        let used = self.umr_used.xchg(0, Full) & ((1 << USER_BLOCKS) - 1);
        if let Some(regs) = regs {
            for block in 0..USER_BLOCKS {
                if used & (1 << block) != 0 {
                    self.user_block_stop(regs, block);
                }
            }
        }
        used.count_ones()
    }

    /// UMR block `block` is free again: nothing maps its page or its CQ's memory any more.
    pub(crate) fn user_block_put(&self, block: usize) {
        if block >= USER_BLOCKS {
            return;
        }
        let mut cur = self.umr_used.load(Relaxed);
        while let Err(seen) = self.umr_used.cmpxchg(cur, cur & !(1 << block), Full) {
            cur = seen;
        }
    }

    /// Ring the kernel's doorbell FIFO: QP `qpn`'s producer index is now `pi`.
    pub(crate) fn ring_secured(&self, regs: &dyn Chip, qpn: u32, pi: u32) -> Result {
        let p = self.port;
        regs.try_write(
            PortLoc::<QPC0_SECURED_DB_FIRST32>::of(p).ok_or(EINVAL)?,
            QPC0_SECURED_DB_FIRST32::from_raw(pi),
        )?;
        regs.try_write(
            PortLoc::<QPC0_SECURED_DB_SECOND32>::of(p).ok_or(EINVAL)?,
            QPC0_SECURED_DB_SECOND32::from_raw(qpn),
        )?;
        self.rung.add(1, Relaxed);
        Ok(())
    }

    /// Wait until the NIC has taken every doorbell rung on the kernel's FIFO (sleeps).
    /// `ETIMEDOUT` if it has not within a second.
    pub(crate) fn fifo_drained(&self) -> Result {
        let want = self.rung.load(Relaxed) % FIFO_ENTRIES;
        let ci = || -> Result<u32> { Ok(io_read!(&self.fifo_ci, [try: 0])) };
        read_poll_timeout(ci, |c| *c == want, Delta::from_millis(1), FIFO_TIMEOUT).map(|_| ())
    }
}
