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
//! qp-error PORT QPN        move a QP to the error state (QP_ERROR event)
//! fatal                    device fatal error (DEVICE_FATAL event)
//! capture PORT PATH|off    write the port's frames to a pcap file
//! peek VA LEN              read LEN (up to 4096) bytes at device VA VA through
//!                          the MMU: "data HEX", or err naming the fault
//! poke VA HEX              write bytes at device VA VA through the MMU
//! devmem-peek OFFSET LEN   read LEN (up to 4096) bytes of device memory at
//!                          OFFSET: "data HEX", or err if outside it
//! qps PORT                 "qps I J ...": the QP indexes that exist on the port
//! stat                     "dma_audit N", "mmu_faults N", "eq_dropped N",
//!                          "stale_translation N" (strict mode's audit of
//!                          cached translations), "unwaited_invalidation N"
//!                          (those of them of a page whose entry was gone
//!                          when an MMU_INVALIDATE still under way was
//!                          written: no register read since),
//!                          "dma_no_master N" and "irq_no_master N" (DMA
//!                          and interrupts refused while Bus Master Enable
//!                          was clear or the vector not enabled),
//!                          "cmd_overlap N" and "cmd_data_busy N" (strict:
//!                          CMD, or CMD_DATA, written or read while a
//!                          command was outstanding), "bad_doorbells N" (SQ
//!                          producer indexes refused: QP to ERR),
//!                          "cq_ci_ignored N" (CQ consumer indexes
//!                          ignored), then per port "port P tx N rx N
//!                          rx_drops N retransmits N naks N icrc_errors N
//!                          injected N rnr_naks N link up|down"
//! ```

use crate::device::Device;
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
        "qp-error" => {
            let p = port(&mut w)?;
            if !d.inject_qp_error(p, num(w.next(), "qpn")?) {
                return Err("no such QP".into());
            }
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
            let a = d.audits();
            let mut out = vec![
                format!("dma_audit {}", d.audit()),
                format!("mmu_faults {}", d.mmu.faults),
                format!("eq_dropped {}", d.eq_dropped()),
                format!("stale_translation {}", d.stale_translations()),
                format!("unwaited_invalidation {}", d.unwaited_invalidations()),
                format!("dma_no_master {}", d.dma_no_master()),
                format!("irq_no_master {}", d.irq_no_master()),
                format!("cmd_overlap {}", a.cmd_overlap),
                format!("cmd_data_busy {}", a.cmd_data_busy),
                format!("bad_doorbells {}", a.bad_doorbells),
                format!("cq_ci_ignored {}", a.cq_ci_ignored),
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
