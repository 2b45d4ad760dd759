// SPDX-License-Identifier: GPL-2.0
//! The Gaudi2 NIC's registers (device model 2.0), at their offsets in the
//! chip's configuration space. Names are the public headers' symbols; the
//! offsets are those of port 0 (macro 0, even engine). Each row of
//! [`NIC_REGISTERS`] is a row of device-model.rst with its source, and the
//! `model_sources` test holds the two together.
//!
//! Addressing: the chip's configuration space appears in BAR0 at
//! [`CFG_IN_BAR0`]. Port `p` is engine `p & 1` of macro `p >> 1`; a macro's
//! blocks are [`MACRO_STRIDE`] apart. The odd engine's copy of a per-port
//! register below [`NIC_CFG_HI_START`] is [`ODD_LO`] above the even one's,
//! at or above it [`ODD_HI`]. Macro-shared blocks (RXB, TXB, TMR, MAC)
//! exist once per macro.

/// A field of a register: bits `hi` down to `lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub hi: u32,
    pub lo: u32,
}

impl Field {
    pub const fn new(name: &'static str, hi: u32, lo: u32) -> Self {
        assert!(lo <= hi && hi < 32);
        Self { name, hi, lo }
    }

    /// The field's bits, in place.
    pub const fn mask(self) -> u32 {
        (u32::MAX >> (31 - (self.hi - self.lo))) << self.lo
    }

    /// The field's value in register value `reg`.
    pub const fn get(self, reg: u32) -> u32 {
        (reg & self.mask()) >> self.lo
    }

    /// `v` moved into the field's bits (bits of `v` that do not fit are
    /// dropped).
    pub const fn put(self, v: u32) -> u32 {
        (v << self.lo) & self.mask()
    }
}

/// Size of BAR0: SRAM and configuration space.
pub const BAR0_SIZE: u64 = 0x1000_0000;
/// Where configuration-space offset 0 is in BAR0.
pub const CFG_IN_BAR0: u64 = 0x400_0000;
/// The NIC's part of configuration space: 12 macros.
pub const NIC_CFG_START: u64 = 0x540_0000;
pub const MACRO_STRIDE: u64 = 0x8_0000;
pub const MACROS: usize = 12;
pub const PORTS: usize = 2 * MACROS;
pub const NIC_CFG_END: u64 = NIC_CFG_START + MACRO_STRIDE * MACROS as u64;
/// First per-port register whose odd-engine copy is [`ODD_HI`] away
/// (NIC0_RXE0_CONTROL).
pub const NIC_CFG_HI_START: u64 = 0x544_a000;
pub const ODD_LO: u64 = 0x2_0000;
pub const ODD_HI: u64 = 0x1000;

/// Per port, or once per macro.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Port,
    Macro,
}

/// A register, or an array of `count` registers `stride` bytes apart.
#[derive(Clone, Copy, Debug)]
pub struct NicReg {
    /// The public headers' symbol.
    pub name: &'static str,
    /// Configuration-space offset for port 0.
    pub offset: u64,
    pub count: u32,
    pub stride: u64,
    pub scope: Scope,
    pub fields: &'static [Field],
}

/// Configuration-space offset of `reg` (a port-0 offset) for port `port`.
pub const fn port_cfg(reg: u64, port: usize) -> u64 {
    let odd = if port & 1 == 0 {
        0
    } else if reg < NIC_CFG_HI_START {
        ODD_LO
    } else {
        ODD_HI
    };
    reg + MACRO_STRIDE * (port as u64 >> 1) + odd
}

/// Configuration-space offset of macro-shared `reg` for the macro of `port`.
pub const fn macro_cfg(reg: u64, port: usize) -> u64 {
    reg + MACRO_STRIDE * (port as u64 >> 1)
}

macro_rules! regs {
    ($($name:ident = $off:literal $([$count:literal, $stride:literal])? $($scope:ident)?
        $({$($f:expr),* $(,)?})?;)*) => {
        $(pub const $name: u64 = $off;)*
        /// Every register of the model.
        pub const NIC_REGISTERS: &[NicReg] = &[$(
            NicReg {
                name: stringify!($name),
                offset: $off,
                count: regs!(@count $($count)?),
                stride: regs!(@stride $($stride)?),
                scope: regs!(@scope $($scope)?),
                fields: &[$($($f),*)?],
            },
        )*];
    };
    (@count $c:literal) => { $c };
    (@count) => { 1 };
    (@stride $s:literal) => { $s };
    (@stride) => { 4 };
    (@scope shared) => { Scope::Macro };
    (@scope) => { Scope::Port };
}

const fn f(name: &'static str, hi: u32, lo: u32) -> Field {
    Field::new(name, hi, lo)
}

// Names without the NIC0_ prefix of their headers, which the document's
// rows carry in full.
regs! {
    // User doorbell pages (UMR): 15 blocks of 4 KiB per port, each with
    // two doorbell FIFOs and two CQ consumer-index slots.
    UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32 = 0x540_0000 [15, 0x1000];
    UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_SECOND32 = 0x540_0004 [15, 0x1000];
    UMR0_0_UNSECURE_DOORBELL1_UNSECURE_DB_FIRST32 = 0x540_0080 [15, 0x1000];
    UMR0_0_UNSECURE_DOORBELL1_UNSECURE_DB_SECOND32 = 0x540_0084 [15, 0x1000];
    UMR0_0_COMPLETION_QUEUE_CI_0_CQ_NUMBER = 0x540_0100 [15, 0x1000];
    UMR0_0_COMPLETION_QUEUE_CI_0_CQ_CONSUMER_INDEX = 0x540_0104 [15, 0x1000];
    UMR0_0_COMPLETION_QUEUE_CI_1_CQ_NUMBER = 0x540_0180 [15, 0x1000];
    UMR0_0_COMPLETION_QUEUE_CI_1_CQ_CONSUMER_INDEX = 0x540_0184 [15, 0x1000];
    // The QPC block.
    QPC0_REQ_QPC_CACHE_INVALIDATE = 0x541_f000;
    QPC0_REQ_STATIC_CONFIG = 0x541_f008 {f("cache_stop", 6, 6)};
    QPC0_REQ_BASE_ADDRESS_63_32 = 0x541_f00c;
    QPC0_REQ_BASE_ADDRESS_31_7 = 0x541_f010 {f("r", 24, 0)};
    QPC0_RETRY_COUNT_MAX = 0x541_f028 {f("sequence_error", 15, 8), f("timeout", 7, 0)};
    QPC0_RES_QPC_CACHE_INVALIDATE = 0x541_f034;
    QPC0_RES_STATIC_CONFIG = 0x541_f03c {f("cache_stop", 5, 5)};
    QPC0_RES_BASE_ADDRESS_63_32 = 0x541_f040;
    QPC0_RES_BASE_ADDRESS_31_7 = 0x541_f044 {f("r", 24, 0)};
    QPC0_GW_BUSY = 0x541_f080 {f("r", 0, 0)};
    QPC0_GW_CTRL = 0x541_f084 {f("doorbell_force", 26, 26), f("doorbell_mask", 25, 25), f("requester", 24, 24), f("qpn", 23, 0)};
    QPC0_GW_DATA_0 = 0x541_f08c [32, 4];
    QPC0_GW_MASK_0 = 0x541_f124 [32, 4];
    QPC0_DB_FIFO_USER_OVRD_0 = 0x541_f360 [32, 4] {f("mmu_bypass", 10, 10), f("asid", 9, 0)};
    QPC0_DB_FIFO_CFG_0 = 0x541_f3e0 [32, 4] {f("bbr_db", 0, 0)};
    QPC0_SECURED_DB_FIRST32 = 0x541_f460;
    QPC0_SECURED_DB_SECOND32 = 0x541_f464;
    QPC0_INTERRUPT_BASE_0 = 0x541_f4b0 [11, 4];
    QPC0_INTERRUPT_DATA_0 = 0x541_f4dc [11, 4];
    QPC0_INTERRUPT_CAUSE = 0x541_f690;
    QPC0_INTERRUPT_MASK = 0x541_f694;
    QPC0_INTERRUPT_CLR = 0x541_f698;
    QPC0_INTERRUPT_EN = 0x541_f69c {f("interrupt10_wire_en", 20, 20), f("interrupt9_msi_en", 19, 19)};
    QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_63_32 = 0x541_f720 [32, 8];
    QPC0_DBFIFO0_CI_UPD_ADDR_DBFIFO_CI_UPD_ADDR_31_7 = 0x541_f724 [32, 8];
    QPC0_EVENT_QUE_BASE_ADDR_63_32 = 0x541_f830;
    QPC0_EVENT_QUE_BASE_ADDR_31_7 = 0x541_f834 {f("r", 24, 0)};
    QPC0_EVENT_QUE_LOG_SIZE = 0x541_f838 {f("r", 4, 0)};
    QPC0_EVENT_QUE_WRITE_INDEX = 0x541_f83c {f("r", 23, 0)};
    QPC0_EVENT_QUE_PRODUCER_INDEX = 0x541_f840 {f("r", 23, 0)};
    QPC0_EVENT_QUE_PI_ADDR_63_32 = 0x541_f844;
    QPC0_EVENT_QUE_PI_ADDR_31_7 = 0x541_f848 {f("r", 24, 0)};
    QPC0_EVENT_QUE_CONSUMER_INDEX_CB = 0x541_f84c {f("r", 23, 0)};
    QPC0_EVENT_QUE_CFG = 0x541_f850 {f("interrupt_per_eqe", 4, 4), f("write_pi_en", 3, 3), f("overrun_en", 1, 1), f("enable", 0, 0)};
    QPC0_SECURED_CQ_NUMBER = 0x541_f8f0 {f("cq_num", 15, 0)};
    QPC0_SECURED_CQ_CONSUMER_INDEX = 0x541_f8f4;
    QPC0_EVENT_QUE_CONSUMER_INDEX = 0x541_f9a8 {f("eq_num", 31, 24), f("ci", 23, 0)};
    QPC0_ARM_CQ_NUM = 0x541_f9ac {f("cq_num", 15, 0)};
    QPC0_ARM_CQ_INDEX = 0x541_f9b0;
    // RXB (shared by the macro's two ports): the MAC filters, index 0 for
    // the even port and 2 for the odd one.
    RXB_CORE_ICRC_CFG = 0x544_9280 shared {f("icrc_rev_bytes", 1, 1), f("icrc_disable", 0, 0)};
    RXB_CORE_TS_RC_MAC_31_0_0 = 0x544_92c0 [4, 4] shared;
    RXB_CORE_TS_RC_MAC_47_32_0 = 0x544_92d0 [4, 4] shared;
    RXB_CORE_TS_RAW0_MAC_31_0_0 = 0x544_92e0 [4, 4] shared;
    RXB_CORE_TS_RAW0_MAC_47_32_0 = 0x544_92f0 [4, 4] shared;
    RXB_CORE_TS_RC_MAC_31_0_MASK_0 = 0x544_9320 [4, 4] shared;
    RXB_CORE_TS_RC_MAC_47_32_MASK_0 = 0x544_9330 [4, 4] shared;
    RXB_CORE_TS_RAW0_MAC_31_0_MASK_0 = 0x544_9340 [4, 4] shared;
    RXB_CORE_TS_RAW0_MAC_47_32_MASK_0 = 0x544_9350 [4, 4] shared;
    // RXE (odd engine: RXE1, 0x1000 above). 16 CQs are used of 32.
    RXE0_CONTROL = 0x544_a000;
    RXE0_RAW_QPN_P0_0 = 0x544_a010 {f("raw_qpn", 23, 0)};
    RXE0_ARUSER_MMU_BP = 0x544_a064 {f("val", 3, 0)};
    RXE0_WIN1_WQ_BASE_LO = 0x544_a090;
    RXE0_WIN1_WQ_BASE_HI = 0x544_a094;
    RXE0_WIN1_WQ_MISC = 0x544_a098 {f("log_max_wq_size", 4, 0)};
    RXE0_CACHE_CFG = 0x544_a0f0 {f("invalidation", 2, 2)};
    RXE0_CQ_BASE_ADDR_31_7 = 0x544_a100 {f("r", 31, 7)};
    RXE0_CQ_BASE_ADDR_63_32 = 0x544_a104;
    RXE0_CQ_LOG_MAX_SIZE = 0x544_a108;
    RXE0_CQ_ARM_TIMEOUT_EN = 0x544_a110;
    RXE0_CQ_ARM_TIMEOUT = 0x544_a114;
    RXE0_CQ_CFG_0 = 0x544_a180 [32, 4] {f("cmpl_event_per_cqe", 4, 4), f("write_pi_en", 3, 3), f("overrun_en", 1, 1), f("enable", 0, 0)};
    RXE0_CQ_WRITE_INDEX_0 = 0x544_a200 [32, 4];
    RXE0_CQ_PRODUCER_INDEX_0 = 0x544_a280 [32, 4];
    RXE0_CQ_CONSUMER_INDEX_0 = 0x544_a300 [32, 4];
    RXE0_CQ_PI_ADDR_LO_0 = 0x544_a380 [32, 4];
    RXE0_CQ_PI_ADDR_HI_0 = 0x544_a400 [32, 4];
    RXE0_CQ_LOG_SIZE_0 = 0x544_a500 [32, 4];
    RXE0_RAW_BASE_LO_P0_0 = 0x544_a710;
    RXE0_RAW_BASE_HI_P0_0 = 0x544_a720;
    RXE0_RAW_MISC_P0_0 = 0x544_a730 {f("log_buffer_size_mask", 19, 15), f("log_raw_entry_size", 3, 0)};
    // TXE (odd engine: TXE1, 0x1000 above). Index 0 of the WQ arrays is
    // the kernel's (Ethernet), 1 the users'.
    TXE0_LOG_MAX_WQ_SIZE_0 = 0x545_2010 [4, 4] {f("r", 4, 0)};
    TXE0_SQ_BASE_ADDRESS_63_32_0 = 0x545_2020 [4, 4];
    TXE0_SQ_BASE_ADDRESS_31_0_0 = 0x545_2030 [4, 4];
    TXE0_WQE_USER_CFG = 0x545_2040 {f("mmu_bypass", 3, 0)};
    TXE0_PORT0_MAC_CFG_47_32 = 0x545_2088 {f("r", 15, 0)};
    TXE0_PORT0_MAC_CFG_31_0 = 0x545_208c;
    TXE0_PORT1_MAC_CFG_47_32 = 0x545_2090 {f("r", 15, 0)};
    TXE0_PORT1_MAC_CFG_31_0 = 0x545_2094;
    TXE0_BTH_MKEY = 0x545_21b0 {f("r", 15, 0)};
    TXE0_SOURCE_IP_PORT0_0 = 0x545_2250 [8, 4];
    TXE0_STATS_TOT_PKTS_LSB = 0x545_22c8;
    TXE0_STATS_TOT_PKTS_MSB = 0x545_22cc;
    TXE0_ENCAP_CFG_0 = 0x545_2300 [8, 4] {f("hdr_format", 28, 28), f("encap_size", 27, 24), f("ipv4_protocol_udp_dest", 15, 0)};
}

/// What an offset in BAR0 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Index in [`NIC_REGISTERS`].
    pub reg: usize,
    /// Element of an array register (0 for a single one).
    pub index: u32,
    /// The port; for a macro-shared register, the macro's even port.
    pub port: usize,
}

/// Decoding of configuration-space offsets: every register of every port.
pub struct Decoder {
    map: std::collections::HashMap<u64, Decoded>,
}

impl Default for Decoder {
    fn default() -> Self {
        let mut map = std::collections::HashMap::new();
        for (reg, r) in NIC_REGISTERS.iter().enumerate() {
            for port in 0..PORTS {
                if r.scope == Scope::Macro && port & 1 == 1 {
                    continue;
                }
                for index in 0..r.count {
                    let base = match r.scope {
                        Scope::Port => port_cfg(r.offset, port),
                        Scope::Macro => macro_cfg(r.offset, port),
                    };
                    let old = map.insert(
                        base + u64::from(index) * r.stride,
                        Decoded { reg, index, port },
                    );
                    assert!(old.is_none(), "{} overlaps another register", r.name);
                }
            }
        }
        Self { map }
    }
}

impl Decoder {
    /// The register at configuration-space offset `cfg`, if the model has one.
    pub fn decode(&self, cfg: u64) -> Option<Decoded> {
        self.map.get(&cfg).copied()
    }
}

/// The configuration-space offset of BAR0 offset `bar0`, if it is in the
/// NIC's part.
pub fn nic_cfg(bar0: u64) -> Option<u64> {
    let cfg = bar0.checked_sub(CFG_IN_BAR0)?;
    (NIC_CFG_START..NIC_CFG_END).contains(&cfg).then_some(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let f = Field::new("mid", 27, 16);
        assert_eq!(f.mask(), 0x0fff_0000);
        assert_eq!(f.get(0xffff_ffff), 0xfff);
        assert_eq!(f.put(0x1_2345), 0x0345_0000);
        assert_eq!(Field::new("all", 31, 0).mask(), u32::MAX);
        assert_eq!(Field::new("bit", 1, 1).mask(), 2);
    }

    #[test]
    fn port_addressing_follows_the_chip() {
        // The QPC block of port 1 is QPC1, of port 2 the next macro's QPC0.
        assert_eq!(port_cfg(QPC0_GW_CTRL, 1), 0x543_f084);
        assert_eq!(port_cfg(QPC0_GW_CTRL, 2), 0x549_f084);
        assert_eq!(
            port_cfg(QPC0_GW_CTRL, 23),
            0x5_41f084 + 11 * 0x8_0000 + 0x2_0000
        );
        // The UMR pages of port 1 are UMR1_x.
        assert_eq!(
            port_cfg(UMR0_0_UNSECURE_DOORBELL0_UNSECURE_DB_FIRST32, 1),
            0x542_0000
        );
        // High blocks (RXE, TXE) of the odd engine are 0x1000 above.
        assert_eq!(port_cfg(0x544_a000, 1), 0x544_b000);
        assert_eq!(port_cfg(0x545_2000, 3), 0x54d_3000);
    }

    #[test]
    fn every_register_of_every_port_decodes_to_itself() {
        let d = Decoder::default();
        for (i, r) in NIC_REGISTERS.iter().enumerate() {
            for port in 0..PORTS {
                let (base, owner) = match r.scope {
                    Scope::Port => (port_cfg(r.offset, port), port),
                    Scope::Macro => (macro_cfg(r.offset, port), port & !1),
                };
                let last = base + u64::from(r.count - 1) * r.stride;
                let got = d.decode(last).unwrap();
                assert_eq!(
                    (got.reg, got.index, got.port),
                    (i, r.count - 1, owner),
                    "{}",
                    r.name
                );
            }
        }
        assert_eq!(d.decode(QPC0_GW_CTRL + 2), None);
        assert_eq!(nic_cfg(CFG_IN_BAR0 + QPC0_GW_CTRL), Some(QPC0_GW_CTRL));
        assert_eq!(nic_cfg(0x1000), None);
        assert_eq!(nic_cfg(CFG_IN_BAR0 + NIC_CFG_END), None);
    }
}
