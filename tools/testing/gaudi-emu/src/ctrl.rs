// SPDX-License-Identifier: GPL-2.0
//! The control interface for tests: a Unix stream socket taking one
//! command per line and answering with result lines ending in "ok" or
//! "err MESSAGE".
//!
//! ```text
//! link PORT up|down        change a port's link state (PORT_UP/PORT_DOWN event)
//! drop PORT N              drop the next N frames the port sends
//! corrupt PORT N           corrupt the next N frames (their ICRC fails)
//! delay PORT MS            delay the port's frames by MS milliseconds
//! reorder PORT N           of the next N frames the port sends, hold every
//!                          other one back by 5 ms (the next overtakes it)
//! qp-error PORT QPN        move a QP to the error state (QP_ERROR event)
//! nak PORT invalid|op|access N
//!                          the port's responder answers the first packet of
//!                          the next N incoming WRITEs with that NAK (invalid
//!                          request, remote operational error, remote access
//!                          error) and moves its QP to ERR
//! fail-wqe PORT STATUS N   the next N WQEs fetched on the port fail with CQE
//!                          status STATUS (1 to 9), their QP moved to ERR
//! cq-fault PORT QPN        the next CQE written to the QP's CQ faults (as an
//!                          unmapped ring page: MMU_FAULT event, CQ stops)
//! eq-flood N               N COMPLETION events for CQ 0xffffff (none has
//!                          that number) at once: "posted P dropped D", D
//!                          the events that found the event queue full
//! fatal                    device fatal error (DEVICE_FATAL event)
//! capture PORT PATH|off    write the port's frames to a pcap file
//! peek VA LEN              read LEN (up to 4096) bytes at device VA VA through
//!                          the MMU: "data HEX", or err naming the fault
//! poke VA HEX              write bytes at device VA VA through the MMU
//! hash VA LEN             "hash H": the region hash (below) of LEN bytes at
//!                          device VA VA read through the MMU, or err naming
//!                          the fault
//! devmem-peek OFFSET LEN   read LEN (up to 4096) bytes of device memory at
//!                          OFFSET: "data HEX", or err if outside it
//! qps PORT                 "qps I J ...": the QP indexes that exist on the port
//! stat                     "dma_audit N", "mmu_faults N", "eq_dropped N",
//!                          "stale_translation N" (strict mode's audit of
//!                          cached translations), "dma_no_master N" and
//!                          "irq_no_master N" (DMA and interrupts refused
//!                          while Bus Master Enable was clear or the vector
//!                          not enabled), then per port "port P tx N rx N
//!                          rx_drops N retransmits N naks N icrc_errors N
//!                          injected N rnr_naks N link up|down"
//! ```

use crate::device::Device;

/// The hash of `hash`: FNV-1a over the little-endian 64-bit words of the
/// bytes (the last word zero-padded), then the length xored in. The test
/// library computes the same over the memory it registered.
struct RegionHash {
    h: u64,
    len: u64,
    tail: Vec<u8>,
}

impl RegionHash {
    fn new() -> Self {
        Self {
            h: 0xcbf2_9ce4_8422_2325,
            len: 0,
            tail: Vec::new(),
        }
    }

    fn word(&mut self, w: &[u8]) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        self.h = (self.h ^ u64::from_le_bytes(b)).wrapping_mul(0x100_0000_01b3);
    }

    fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.tail.is_empty() {
            let k = (8 - self.tail.len()).min(data.len());
            self.tail.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.tail.len() < 8 {
                return;
            }
            let t = std::mem::take(&mut self.tail);
            self.word(&t);
        }
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            self.word(w);
        }
        self.tail.extend_from_slice(words.remainder());
    }

    fn finish(mut self) -> u64 {
        if !self.tail.is_empty() {
            let t = std::mem::take(&mut self.tail);
            self.word(&t);
        }
        self.h ^ self.len
    }
}
use crate::engine::{open_capture, Captures};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub fn serve(listener: UnixListener, device: Arc<Mutex<Device>>, captures: Captures) {
    for conn in listener.incoming().flatten() {
        let device = device.clone();
        let captures = captures.clone();
        std::thread::spawn(move || session(conn, &device, &captures));
    }
}

fn session(conn: UnixStream, device: &Mutex<Device>, captures: &Captures) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let reply = match command(line.trim(), device, captures) {
            Ok(mut lines) => {
                lines.push("ok".into());
                lines.join("\n")
            }
            Err(e) => format!("err {e}"),
        };
        if writeln!(out, "{reply}").is_err() {
            return;
        }
    }
}

/// A number in decimal or, with 0x, hexadecimal.
fn addr(s: Option<&str>) -> Result<u64, String> {
    let s = s.ok_or("missing address")?;
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("bad address {s}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 || s.len() > 8192 {
        return Err("bad hex data".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| "bad hex data".to_string()))
        .collect()
}

fn num<T: std::str::FromStr>(s: Option<&str>, what: &str) -> Result<T, String> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad or missing {what}"))
}

fn command(line: &str, device: &Mutex<Device>, captures: &Captures) -> Result<Vec<String>, String> {
    let mut w = line.split_whitespace();
    let cmd = w.next().unwrap_or("");
    let mut d = device.lock().unwrap();
    let nports = d.ports.len();
    let port = |w: &mut std::str::SplitWhitespace<'_>| -> Result<usize, String> {
        let p: usize = num(w.next(), "port")?;
        if p >= nports {
            return Err(format!("no port {p}"));
        }
        Ok(p)
    };
    match cmd {
        "link" => {
            let p = port(&mut w)?;
            let up = match w.next() {
                Some("up") => true,
                Some("down") => false,
                _ => return Err("link PORT up|down".into()),
            };
            d.set_link(p, up);
        }
        "drop" => {
            let p = port(&mut w)?;
            d.ports[p].inject.drop = num(w.next(), "count")?;
        }
        "corrupt" => {
            let p = port(&mut w)?;
            d.ports[p].inject.corrupt = num(w.next(), "count")?;
        }
        "delay" => {
            let p = port(&mut w)?;
            d.ports[p].inject.delay = Duration::from_millis(num(w.next(), "milliseconds")?);
        }
        "reorder" => {
            let p = port(&mut w)?;
            d.ports[p].inject.reorder = num(w.next(), "count")?;
        }
        "qp-error" => {
            let p = port(&mut w)?;
            if !d.inject_qp_error(p, num(w.next(), "qpn")?) {
                return Err("no such QP".into());
            }
        }
        "nak" => {
            let p = port(&mut w)?;
            let syndrome = match w.next() {
                Some("invalid") => crate::roce::aeth::NAK_INVALID_REQ,
                Some("op") => crate::roce::aeth::NAK_REMOTE_OP,
                Some("access") => crate::roce::aeth::NAK_REMOTE_ACCESS,
                _ => return Err("nak PORT invalid|op|access N".into()),
            };
            let n: u32 = num(w.next(), "count")?;
            d.ports[p].inject.nak = (n > 0).then_some((syndrome, n));
        }
        "fail-wqe" => {
            let p = port(&mut w)?;
            let status: u8 = num(w.next(), "status")?;
            if status == 0 || status > 9 {
                return Err("status 1 to 9".into());
            }
            let n: u32 = num(w.next(), "count")?;
            d.ports[p].inject.fail_wqe = (n > 0).then_some((status, n));
        }
        "cq-fault" => {
            let p = port(&mut w)?;
            if !d.inject_cq_fault(p, num(w.next(), "qpn")?) {
                return Err("no such QP or CQ".into());
            }
        }
        "eq-flood" => {
            let n: u32 = num(w.next(), "count")?;
            let (posted, dropped) = d.eq_flood(n);
            return Ok(vec![format!("posted {posted} dropped {dropped}")]);
        }
        "fatal" => d.fatal(),
        "capture" => {
            let p = port(&mut w)?;
            let w = match w.next() {
                Some("off") => None,
                Some(path) => Some(open_capture(path).map_err(|e| format!("{path}: {e}"))?),
                None => return Err("capture PORT PATH|off".into()),
            };
            captures.lock().unwrap()[p] = w;
        }
        "peek" => {
            let va = addr(w.next())?;
            let len: usize = num(w.next(), "length")?;
            if len == 0 || len > 4096 {
                return Err("length 1 to 4096".into());
            }
            let mut buf = vec![0u8; len];
            d.mmu_read(va, &mut buf)
                .map_err(|f| format!("fault {f:?}"))?;
            return Ok(vec![format!("data {}", hex(&buf))]);
        }
        "hash" => {
            let va = addr(w.next())?;
            let len = addr(w.next())?;
            if len == 0 || len > 1 << 40 {
                return Err("length 1 to 2^40".into());
            }
            let mut h = RegionHash::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut off = 0u64;
            while off < len {
                let n = (len - off).min(buf.len() as u64) as usize;
                d.mmu_read(va + off, &mut buf[..n])
                    .map_err(|f| format!("fault {f:?} at +{off:#x}"))?;
                h.update(&buf[..n]);
                off += n as u64;
            }
            return Ok(vec![format!("hash {:016x}", h.finish())]);
        }
        "devmem-peek" => {
            let off = addr(w.next())?;
            let len: usize = num(w.next(), "length")?;
            if len == 0 || len > 4096 {
                return Err("length 1 to 4096".into());
            }
            let mut buf = vec![0u8; len];
            if !d.devmem().read(off, &mut buf) {
                return Err(format!("{off:#x}+{len:#x} outside device memory"));
            }
            return Ok(vec![format!("data {}", hex(&buf))]);
        }
        "poke" => {
            let va = addr(w.next())?;
            let data = unhex(w.next().unwrap_or(""))?;
            if data.is_empty() {
                return Err("poke VA HEX".into());
            }
            d.mmu_write(va, &data).map_err(|f| format!("fault {f:?}"))?;
        }
        "qps" => {
            let p = port(&mut w)?;
            let mut qps: Vec<u32> = d.ports[p].qps.keys().copied().collect();
            qps.sort_unstable();
            let list: Vec<String> = qps.iter().map(|q| q.to_string()).collect();
            return Ok(vec![format!("qps {}", list.join(" "))
                .trim_end()
                .to_string()]);
        }
        "stat" => {
            let mut out = vec![
                format!("dma_audit {}", d.audit()),
                format!("mmu_faults {}", d.mmu.faults),
                format!("eq_dropped {}", d.eq_dropped()),
                format!("stale_translation {}", d.stale_translations()),
                format!("dma_no_master {}", d.dma_no_master()),
                format!("irq_no_master {}", d.irq_no_master()),
            ];
            for (i, p) in d.ports.iter().enumerate() {
                let c = &p.counters;
                out.push(format!(
                    "port {i} tx {} rx {} rx_drops {} retransmits {} naks {} icrc_errors {} injected {} rnr_naks {} link {}",
                    c.tx,
                    c.rx,
                    c.rx_drops,
                    c.retransmits,
                    c.naks_sent,
                    c.icrc_errors,
                    c.injected,
                    c.rnr_naks_sent,
                    if p.link_up { "up" } else { "down" }
                ));
            }
            return Ok(out);
        }
        "" => return Err("empty command".into()),
        _ => return Err(format!("unknown command {cmd}")),
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::RegionHash;

    /// The value the test library's `region_hash` gives for bytes 0 to 20;
    /// the same in pieces of any size.
    #[test]
    fn region_hash_known_value_in_any_pieces() {
        let data: Vec<u8> = (0..21).collect();
        for split in [1, 3, 7, 8, 9, 21] {
            let mut h = RegionHash::new();
            for piece in data.chunks(split) {
                h.update(piece);
            }
            assert_eq!(h.finish(), 0x7242_fe74_5fec_a42a, "pieces of {split}");
        }
    }
}
