// SPDX-License-Identifier: GPL-2.0
//! (1.3) The Ethernet rings of a port: a transmit ring of frames the host
//! built, a receive ring for every frame that is not RoCEv2 for the port,
//! the receive filter, and the `ETH` event (see "Ethernet rings (1.3)" in
//! the device model).

use super::Device;
use crate::mem::Target;
use crate::regs::*;
use std::time::Instant;

/// Largest frame the rings carry (without FCS): a 9000-byte MTU and then
/// some, as [`ETH_MAX_FRAME`] reports it.
pub const MAX_FRAME: usize = 9216;

/// One port's rings and their counters.
#[derive(Clone, Debug, Default)]
pub struct Rings {
    tx_base: u64,
    rx_base: u64,
    /// ETH_LOG_SIZE as written; the sizes in use are latched at enabling.
    log_size: u32,
    ctrl: u32,
    tx_log: u32,
    rx_log: u32,
    tx_pi: u16,
    tx_ci: u16,
    rx_pi: u16,
    rx_ci: u16,
    /// ETH_ARM: the consumer indexes (tx, rx) the driver has seen.
    armed: Option<(u16, u16)>,
    pub rx_nobuf: u32,
    pub rx_filtered: u32,
    pub errors: u32,
    pub tx_frames: u32,
    pub rx_frames: u32,
}

/// A ring descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u16,
    pub flags: u16,
}

impl Desc {
    pub fn decode(b: &[u8; ETH_DESC_SIZE]) -> Self {
        Self {
            addr: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            len: u16::from_le_bytes([b[8], b[9]]),
            flags: u16::from_le_bytes([b[10], b[11]]),
        }
    }

    pub fn encode(&self) -> [u8; ETH_DESC_SIZE] {
        let mut b = [0u8; ETH_DESC_SIZE];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..10].copy_from_slice(&self.len.to_le_bytes());
        b[10..12].copy_from_slice(&self.flags.to_le_bytes());
        b
    }
}

impl Rings {
    pub fn enabled(&self) -> bool {
        self.ctrl & ETH_CTRL_ENABLE != 0
    }

    /// Descriptors from `ci` up to `pi`, at most the ring's size.
    fn pending(pi: u16, ci: u16, log: u32) -> u16 {
        pi.wrapping_sub(ci).min(1 << log)
    }

    /// Whether the receive filter takes a frame to `dst`, the port's
    /// station address being `mac`.
    fn takes(&self, dst: &[u8], mac: &[u8; 6]) -> bool {
        dst == mac
            || dst == [0xff; 6]
            || self.ctrl & ETH_CTRL_PROMISC != 0
            || (dst[0] & 1 != 0 && self.ctrl & ETH_CTRL_ALLMULTI != 0)
    }
}

impl Device {
    pub(super) fn eth_read(&self, port: usize, reg: u64) -> u32 {
        let r = &self.ports[port].eth;
        match reg {
            ETH_TX_BASE_LO => r.tx_base as u32,
            ETH_TX_BASE_HI => (r.tx_base >> 32) as u32,
            ETH_RX_BASE_LO => r.rx_base as u32,
            ETH_RX_BASE_HI => (r.rx_base >> 32) as u32,
            ETH_LOG_SIZE => r.log_size,
            ETH_CTRL => r.ctrl,
            ETH_TX_PI => u32::from(r.tx_pi),
            ETH_TX_CI => u32::from(r.tx_ci),
            ETH_RX_PI => u32::from(r.rx_pi),
            ETH_RX_CI => u32::from(r.rx_ci),
            ETH_RX_NOBUF => r.rx_nobuf,
            ETH_RX_FILTERED => r.rx_filtered,
            ETH_ERRORS => r.errors,
            ETH_TX_FRAMES => r.tx_frames,
            ETH_RX_FRAMES => r.rx_frames,
            _ => 0,
        }
    }

    pub(super) fn eth_write(&mut self, port: usize, reg: u64, val: u32) {
        let r = &mut self.ports[port].eth;
        match reg {
            ETH_TX_BASE_LO => super::set_lo(&mut r.tx_base, val & !0xf),
            ETH_TX_BASE_HI => super::set_hi(&mut r.tx_base, val),
            ETH_RX_BASE_LO => super::set_lo(&mut r.rx_base, val & !0xf),
            ETH_RX_BASE_HI => super::set_hi(&mut r.rx_base, val),
            ETH_LOG_SIZE => r.log_size = val,
            ETH_CTRL => {
                let enable = val & ETH_CTRL_ENABLE != 0;
                let (tx_log, rx_log) = (
                    ETH_LOG_SIZE_TX.get(r.log_size),
                    ETH_LOG_SIZE_RX.get(r.log_size),
                );
                let sizes = ETH_MIN_LOG_SIZE..=ETH_MAX_LOG_SIZE;
                if enable && !(sizes.contains(&tx_log) && sizes.contains(&rx_log)) {
                    log::warn!(
                        "port {port}: Ethernet rings of log sizes {tx_log}/{rx_log} refused"
                    );
                    r.ctrl = val & !ETH_CTRL_ENABLE;
                    return;
                }
                if enable && !r.enabled() {
                    (r.tx_pi, r.tx_ci, r.rx_pi, r.rx_ci) = (0, 0, 0, 0);
                    (r.tx_log, r.rx_log) = (tx_log, rx_log);
                    r.armed = None;
                }
                r.ctrl = val & (ETH_CTRL_ENABLE | ETH_CTRL_PROMISC | ETH_CTRL_ALLMULTI);
            }
            // The transmit ring is served by `step`, as a device would
            // later; a receive buffer is used when a frame comes.
            ETH_TX_PI => r.tx_pi = val as u16,
            ETH_RX_PI => r.rx_pi = val as u16,
            ETH_ARM => {
                r.armed = Some((ETH_ARM_TX.get(val) as u16, ETH_ARM_RX.get(val) as u16));
                self.eth_notify(port);
            }
            _ => log::debug!("port {port}: write to read-only Ethernet register {reg:#x}"),
        }
    }

    /// Post the `ETH` event if the rings are armed and a consumer index
    /// moved past what the driver saw.
    fn eth_notify(&mut self, port: usize) {
        let r = &mut self.ports[port].eth;
        let Some((tx, rx)) = r.armed else {
            return;
        };
        if r.tx_ci == tx && r.rx_ci == rx {
            return;
        }
        r.armed = None;
        let (rx_ci, tx_ci) = (r.rx_ci, r.tx_ci);
        self.post_event(EV_ETH, port, u32::from(rx_ci), u32::from(tx_ci));
    }

    /// Read descriptor `index` of the ring at `base` with `1 << log`
    /// entries; a refused read (the audit counted it) disables the rings.
    fn eth_desc(&mut self, port: usize, base: u64, log: u32, index: u16) -> Option<(u64, Desc)> {
        let at = base + u64::from(index & ((1 << log) - 1) as u16) * ETH_DESC_SIZE as u64;
        let mut b = [0u8; ETH_DESC_SIZE];
        if !self.mem.read(Target::Host(at), &mut b) {
            self.eth_stop(port, "descriptor read");
            return None;
        }
        Some((at, Desc::decode(&b)))
    }

    fn eth_put_desc(&mut self, port: usize, at: u64, d: Desc) -> bool {
        if !self.mem.write(Target::Host(at), &d.encode()) {
            self.eth_stop(port, "descriptor write");
            return false;
        }
        true
    }

    /// A ring access the device could not make: it stops the rings (the
    /// driver gave it an address it may not reach; the audit says so).
    fn eth_stop(&mut self, port: usize, what: &str) {
        log::warn!("port {port}: Ethernet {what} refused: rings disabled");
        let r = &mut self.ports[port].eth;
        r.errors = r.errors.wrapping_add(1);
        r.ctrl &= !ETH_CTRL_ENABLE;
    }

    /// Send what the transmit ring holds (from [`Device::step`]).
    pub(super) fn eth_transmit(&mut self, port: usize, now: Instant) {
        let r = &self.ports[port].eth;
        if !r.enabled() || r.tx_pi == r.tx_ci {
            return;
        }
        let (base, log) = (r.tx_base, r.tx_log);
        let n = Rings::pending(r.tx_pi, r.tx_ci, log);
        for _ in 0..n {
            let ci = self.ports[port].eth.tx_ci;
            let Some((at, mut d)) = self.eth_desc(port, base, log, ci) else {
                return;
            };
            let len = usize::from(d.len);
            let mut frame = vec![0u8; len.max(ETH_PAD_TO)];
            let ok = (ETH_MIN_FRAME..=MAX_FRAME).contains(&len)
                && self.mem.read(Target::Host(d.addr), &mut frame[..len]);
            d.flags = ETH_DESC_DONE | if ok { 0 } else { ETH_DESC_ERROR };
            let p = &mut self.ports[port];
            if !ok {
                log::info!("port {port}: transmit descriptor {ci} of {len} bytes refused");
                p.eth.errors = p.eth.errors.wrapping_add(1);
            } else if p.link_up {
                p.eth.tx_frames = p.eth.tx_frames.wrapping_add(1);
                p.tx.push((now, frame));
            }
            if !self.eth_put_desc(port, at, d) {
                return;
            }
            let r = &mut self.ports[port].eth;
            r.tx_ci = r.tx_ci.wrapping_add(1);
        }
        self.eth_notify(port);
    }

    /// Whether the rings take frames; with them off the port drops what is
    /// not RoCEv2 for it (and answers ARP itself).
    pub(super) fn eth_enabled(&self, port: usize) -> bool {
        self.ports[port].eth.enabled()
    }

    /// A received frame that is not RoCEv2 for the port: the receive
    /// filter, then the next posted buffer.
    pub(super) fn eth_receive(&mut self, port: usize, frame: &[u8]) {
        let p = &mut self.ports[port];
        if frame.len() < 14 || !p.eth.takes(&frame[..6], &p.ep.mac) {
            p.eth.rx_filtered = p.eth.rx_filtered.wrapping_add(1);
            return;
        }
        let r = &mut p.eth;
        if Rings::pending(r.rx_pi, r.rx_ci, r.rx_log) == 0 {
            r.rx_nobuf = r.rx_nobuf.wrapping_add(1);
            return;
        }
        let (base, log, ci) = (r.rx_base, r.rx_log, r.rx_ci);
        let Some((at, mut d)) = self.eth_desc(port, base, log, ci) else {
            return;
        };
        let fits = frame.len() <= usize::from(d.len) && frame.len() <= MAX_FRAME;
        let stored = fits && self.mem.write(Target::Host(d.addr), frame);
        if stored {
            d.len = frame.len() as u16;
            d.flags = ETH_DESC_DONE;
        } else {
            log::info!(
                "port {port}: received frame of {} bytes not stored (buffer of {})",
                frame.len(),
                d.len
            );
            d.len = 0;
            d.flags = ETH_DESC_DONE | ETH_DESC_ERROR;
        }
        if !self.eth_put_desc(port, at, d) {
            return;
        }
        let r = &mut self.ports[port].eth;
        if stored {
            r.rx_frames = r.rx_frames.wrapping_add(1);
        } else {
            r.errors = r.errors.wrapping_add(1);
        }
        r.rx_ci = r.rx_ci.wrapping_add(1);
        self.eth_notify(port);
    }
}
