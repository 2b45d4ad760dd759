// SPDX-License-Identifier: GPL-2.0

//! The ports' raw paths (device model 2.0, "Ethernet"), as the core programs them for the
//! Ethernet driver.
//!
//! A port sends a frame as a LINEAR WQE of QP 0 in send WQ array 0, rung on the kernel's
//! doorbell FIFO; the NIC reports each sent WQE in a `RAW_TX_COMP` event. It writes each frame
//! it receives for the port (its MAC, broadcast and multicast; anything in promiscuous mode)
//! into the next element of the port's receive ring, with a CQE on CQ 0 naming the element and
//! the length. The send queue and the ring are the Ethernet driver's coherent memory, reached
//! by bus address with the MMU bypassed, so nothing a user maps or registers can reach them.

use kernel::{
    dma::Coherent,
    io::Io,
    net::gaudi::{
        chip::Chip,
        cn::{
            RAW_LOG_ELEM,
            RAW_LOG_RING,
            RAW_QPN, //
        },
    },
    prelude::*,
};

use crate::{
    device::{
        Nic,
        PortsState,
        Writer, //
    },
    nic::{
        self,
        req,
        MacroLoc,
        PortArrayLoc,
        PortLoc,
        SqWqe, //
    },
};

/// WQEs of QP 0's send queue, and elements of the receive ring.
const RING: usize = 1 << RAW_LOG_RING;
/// 32-bit words of a send WQE.
const WQE_WORDS: usize = size_of::<SqWqe>() / 4;
/// log2 of the 128-byte lines of QP 0's slot in send WQ array 0.
const LOG_WQ_LINES: u32 = RAW_LOG_RING + 5 - 7;

/// The location of a per-port register, `EINVAL` for a port beyond the map.
fn at<L>(loc: Option<L>) -> Result<L> {
    loc.ok_or(EINVAL)
}

impl Nic {
    /// Open port `port`'s raw path on the Ethernet driver's send queue `wq` and receive ring
    /// `ring`: QP 0's contexts through the gateway, its send queue, the receive ring and CQ 0,
    /// the MAC filter; then arm CQ 0. On an error nothing of it stays enabled.
    pub(crate) fn raw_open(
        &self,
        regs: &dyn Chip,
        port: usize,
        wq: &Coherent<[u32]>,
        ring: &Coherent<[u8]>,
        mac: &[u8; 6],
        promisc: bool,
    ) -> Result {
        let q = self.queues(port)?;
        if wq.len() < RING * WQE_WORDS || ring.len() < RING << RAW_LOG_ELEM {
            return Err(EINVAL);
        }
        {
            let mut st = self.ports_state.lock();
            if PortsState::set(&mut st.raw_open, port, true) {
                return Err(EBUSY);
            }
            PortsState::set(&mut st.raw_promisc, port, promisc);
        }
        let r = self.raw_program(regs, port, q, wq, ring, mac);
        if r.is_err() {
            let _ = self.raw_halt(regs, port);
            PortsState::set(&mut self.ports_state.lock().raw_open, port, false);
        }
        r
    }

    fn raw_program(
        &self,
        regs: &dyn Chip,
        p: usize,
        q: &nic::PortQueues,
        wq: &Coherent<[u32]>,
        ring: &Coherent<[u8]>,
        mac: &[u8; 6],
    ) -> Result {
        // Doorbells of an earlier opening the NIC has not taken yet would run against the
        // new queue: wait for the kernel's FIFO to empty.
        q.fifo_drained()?;
        // Send WQ array 0 holds QP 0's slot only; its WQEs are fetched by bus address.
        let wq = wq.dma_address();
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_SQ_BASE_ADDRESS_63_32_0>::of(p, 0))?,
            nic::TXE0_SQ_BASE_ADDRESS_63_32_0::from_raw((wq >> 32) as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_SQ_BASE_ADDRESS_31_0_0>::of(p, 0))?,
            nic::TXE0_SQ_BASE_ADDRESS_31_0_0::from_raw(wq as u32),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::TXE0_LOG_MAX_WQ_SIZE_0>::of(p, 0))?,
            nic::TXE0_LOG_MAX_WQ_SIZE_0::zeroed().try_with_r(LOG_WQ_LINES)?,
        )?;
        regs.try_update(at(PortLoc::<nic::TXE0_WQE_USER_CFG>::of(p))?, |c| {
            let bypass = c.mmu_bypass().get() | 1;
            c.try_with_mmu_bypass(bypass).unwrap_or(c)
        })?;
        // QP 0's requester context, whole: a raw, secured QP whose data accesses are physical.
        let mut c = [0u64; nic::REQ_QPC_WORDS];
        req::TRANSPORT_SERVICE.set(&mut c, nic::TRANSPORT_RAW);
        req::LAST_IDX.set(&mut c, RING as u64 - 1);
        req::WQ_TYPE.set(&mut c, nic::WQ_TYPE_WRITE);
        req::TRUST_LEVEL.set(&mut c, nic::TRUST_SECURED);
        req::WQ_BASE_ADDR.set(&mut c, 0);
        req::DATA_MMU_BYPASS.set(&mut c, 1);
        req::WQ_BACK_PRESSURE.set(&mut c, 1);
        req::VALID.set(&mut c, 1);
        self.gateway_write(
            regs,
            Writer::Core,
            p,
            RAW_QPN,
            true,
            &c,
            &[u64::MAX; nic::REQ_QPC_WORDS],
        )?;
        // And its responder context: raw, secured, physical, with a key nobody holds (a
        // raw context takes no RDMA; should the NIC disagree, no WRITE carries its key).
        let mut c = [0u64; nic::RES_QPC_WORDS];
        nic::res::TRANSPORT_SERVICE.set(&mut c, nic::TRANSPORT_RAW);
        nic::res::LKEY.set(&mut c, u64::from(kernel::random::get_random_u32() | 1));
        nic::res::TRUST_LEVEL.set(&mut c, nic::TRUST_SECURED);
        nic::res::DATA_MMU_BYPASS.set(&mut c, 1);
        nic::res::VALID.set(&mut c, 1);
        self.gateway_write(
            regs,
            Writer::Core,
            p,
            RAW_QPN,
            false,
            &c,
            &[u64::MAX; nic::RES_QPC_WORDS],
        )?;
        // The receive ring: element n at the base + n x 2^RAW_LOG_ELEM.
        let ring = ring.dma_address();
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_QPN_P0_0>::of(p))?,
            nic::RXE0_RAW_QPN_P0_0::zeroed().try_with_raw_qpn(RAW_QPN)?,
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_BASE_LO_P0_0>::of(p))?,
            nic::RXE0_RAW_BASE_LO_P0_0::from_raw(ring as u32),
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_BASE_HI_P0_0>::of(p))?,
            nic::RXE0_RAW_BASE_HI_P0_0::from_raw((ring >> 32) as u32),
        )?;
        regs.try_write(
            at(PortLoc::<nic::RXE0_RAW_MISC_P0_0>::of(p))?,
            nic::RXE0_RAW_MISC_P0_0::zeroed()
                .try_with_log_raw_entry_size(RAW_LOG_ELEM)?
                .try_with_log_buffer_size_mask(RAW_LOG_RING)?,
        )?;
        // CQ 0 from index 0, as many entries as the ring has elements: the NIC then never
        // writes an element whose completion the driver has not taken.
        regs.try_write(
            at(PortArrayLoc::<nic::RXE0_CQ_PRODUCER_INDEX_0>::of(
                p,
                nic::CQ_ETH,
            ))?,
            nic::RXE0_CQ_PRODUCER_INDEX_0::zeroed(),
        )?;
        regs.try_write(
            at(PortArrayLoc::<nic::RXE0_CQ_WRITE_INDEX_0>::of(
                p,
                nic::CQ_ETH,
            ))?,
            nic::RXE0_CQ_WRITE_INDEX_0::zeroed(),
        )?;
        q.cq_consumed(regs, nic::CQ_ETH, 0)?;
        q.cq_enable(regs, nic::CQ_ETH, RAW_LOG_RING)?;
        self.raw_set_filter(regs, p, mac)?;
        q.cq_arm(regs, nic::CQ_ETH, 0)
    }

    /// Close port `port`'s raw path: no frame is received, no WQE executed, and the NIC has
    /// taken every doorbell (an earlier opening's would otherwise run against the next).
    pub(crate) fn raw_close(&self, regs: &dyn Chip, port: usize) -> Result {
        self.queues(port)?;
        if !PortsState::set(&mut self.ports_state.lock().raw_open, port, false) {
            return Ok(());
        }
        self.raw_halt(regs, port)
    }

    fn raw_halt(&self, regs: &dyn Chip, port: usize) -> Result {
        let q = self.queues(port)?;
        q.cq_disable(regs, nic::CQ_ETH);
        let mut c = [0u64; nic::REQ_QPC_WORDS];
        let mut mask = [0u64; nic::REQ_QPC_WORDS];
        req::VALID.select(&mut mask);
        req::VALID.set(&mut c, 0);
        self.gateway_write(regs, Writer::Core, port, RAW_QPN, true, &c, &mask)?;
        q.fifo_drained()
    }

    /// Whether port `port`'s raw path is open.
    pub(crate) fn raw_is_open(&self, port: usize) -> bool {
        port < nic::PORTS && self.ports_state.lock().raw_open & (1 << port) != 0
    }

    /// Port `port`'s raw MAC filter: `mac`, or every address in promiscuous mode (group
    /// addresses pass it always), while its raw path is open.
    pub(crate) fn raw_filter(
        &self,
        regs: &dyn Chip,
        port: usize,
        mac: &[u8; 6],
        promisc: bool,
    ) -> Result {
        self.queues(port)?;
        {
            let mut st = self.ports_state.lock();
            PortsState::set(&mut st.raw_promisc, port, promisc);
            if st.raw_open & (1 << port) == 0 {
                return Err(EINVAL);
            }
        }
        self.raw_set_filter(regs, port, mac)
    }

    fn raw_set_filter(&self, regs: &dyn Chip, p: usize, mac: &[u8; 6]) -> Result {
        // Filter 0 is the macro's even port's, 2 its odd one's.
        let i = if p & 1 == 0 { 0 } else { 2 };
        let hi = u32::from(mac[0]) << 8 | u32::from(mac[1]);
        let lo = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        let (mask_hi, mask_lo) = if self.ports_state.lock().raw_promisc & (1 << p) != 0 {
            (0xffff, u32::MAX)
        } else {
            (0, 0)
        };
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_31_0_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_31_0_MASK_0::from_raw(mask_lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_47_32_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_47_32_MASK_0::from_raw(mask_hi),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_31_0_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_31_0_0::from_raw(lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RAW0_MAC_47_32_0>::of(p, i))?,
            nic::RXB_CORE_TS_RAW0_MAC_47_32_0::from_raw(hi),
        )?;
        // RoCE to this MAC goes to the RDMA engine (always an exact match), which sends from
        // it.
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_31_0_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_31_0_MASK_0::zeroed(),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_47_32_MASK_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_47_32_MASK_0::zeroed(),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_31_0_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_31_0_0::from_raw(lo),
        )?;
        regs.try_write(
            at(MacroLoc::<nic::RXB_CORE_TS_RC_MAC_47_32_0>::of(p, i))?,
            nic::RXB_CORE_TS_RC_MAC_47_32_0::from_raw(hi),
        )?;
        regs.try_write(
            at(PortLoc::<nic::TXE0_PORT0_MAC_CFG_31_0>::of(p))?,
            nic::TXE0_PORT0_MAC_CFG_31_0::from_raw(lo),
        )?;
        regs.try_write(
            at(PortLoc::<nic::TXE0_PORT0_MAC_CFG_47_32>::of(p))?,
            nic::TXE0_PORT0_MAC_CFG_47_32::zeroed().try_with_r(hi)?,
        )
    }
}
