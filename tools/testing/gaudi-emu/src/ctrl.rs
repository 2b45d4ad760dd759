// SPDX-License-Identifier: GPL-2.0
//! The control interface for tests: a Unix stream socket taking one
//! command per line and answering with result lines ending in "ok" or
//! "err MESSAGE".
//!
//! ```text
//! link PORT up|down        change a port's link state (SVC_LINK; the NIC's
//!                          LINK_STATUS event)
//! drop PORT N              drop the next N RoCE frames the port sends
//! corrupt PORT N           corrupt the next N frames (their ICRC fails)
//! delay PORT MS            delay the port's frames by MS milliseconds
//! reorder PORT N           of the next N frames the port sends, hold every
//!                          other one back by 5 ms (the next overtakes it)
//! eq-flood N               N COMPLETION events of the kernel's RC CQ on
//!                          port 0's event queue at once: "posted P
//!                          overwritten O", O the events written over
//!                          entries not consumed yet
//! fatal                    device fatal error (SVC_STATUS.FATAL, the fatal
//!                          cause on vector 0)
//! id HEX                   SVC_ID reads HEX from now on (as --id)
//! unplug                   QEMU removes the device (device_del over its
//!                          monitor, --qmp); the guest ejects it
//! plug                     QEMU adds the device again (device_add), which
//!                          connects to this emulator afresh
//! vanish                   the device vanishes, as a PCIe device that fell
//!                          off the bus (or a crashed emulator, to a QEMU
//!                          that survives it): every register and
//!                          configuration read returns all ones, writes are
//!                          dropped, it does nothing more (device memory
//!                          mapped into the guest stays readable)
//! reset-hangs on|off       resets from now on never finish (as
//!                          --reset-hangs), or finish again
//! capture PORT PATH|off    write the port's frames to a pcap file
//! nic-hold PORT on|off     the port's NIC takes no doorbell from its FIFOs
//!                          (as a NIC busy elsewhere), or takes them again;
//!                          a test hook for FIFO overruns
//! nic-event PORT TYPE DATA1 DATA2
//!                          an entry on the port's event queue as the NIC
//!                          writes one (decimal fields), e.g. a QP_ERR (2)
//!                          of a QP with a syndrome; fails if the queue is
//!                          full
//! fuzz-nic PORT N SEED     N entries no NIC produces (device/fuzz.rs:
//!                          NIC_KINDS) on the port's event queue and CQs 0
//!                          and 1, written as the NIC writes entries:
//!                          "fuzz-nic port P injected I not_injected S
//!                          eqe_unknown N ... cqe_rc_bad N"
//! nic-rd OFF [OFF...]      the NIC's registers at configuration-space
//!                          offsets OFF (hex): "OFF=VALUE ..."
//! peek asid=N VA LEN       read LEN (up to 4096) bytes at device VA VA as
//!                          ASID N's tables map them now: "data HEX", or err
//!                          naming the fault
//! asid-find VA             "asids A:rw B:ro ...", the ASIDs whose page
//!                          tables map device VA VA now, and the page's
//!                          right ("asids" alone: none)
//! asid-peek ASID VA LEN    LEN (up to 4096) bytes at device VA VA of ASID
//!                          as its tables map them now: "data HEX", or err
//!                          naming the fault (no fault counted)
//! peek-bytes asid=N VA [VA...]
//!                          one byte at each device VA (up to 64) as ASID
//!                          N's tables map it: "bytes B B ...", B two hex
//!                          digits or "--" for a fault
//! poke asid=N VA HEX       write bytes at device VA VA as ASID N's tables
//!                          map it, writable pages only
//! hash asid=N VA LEN       "hash H": the region hash (below) of LEN bytes
//!                          at device VA VA as ASID N's tables map them, or
//!                          err naming the fault
//! devmem-peek OFFSET LEN   read LEN (up to 4096) bytes of device memory at
//!                          OFFSET: "data HEX", or err if outside it
//! stat                     "dma_audit N", "mmu_faults N" (the device
//!                          MMU's translation faults), "stale_translation
//!                          N" (strict mode's audit of cached
//!                          translations), "dma_no_master N" and
//!                          "irq_no_master N" (DMA and interrupts refused
//!                          while Bus Master Enable was clear or the vector
//!                          not enabled), "nic gw_ops N gw_write_while_busy
//!                          N gw_read_while_busy N gw_unreachable N
//!                          unknown_register N cq_ci_refused N eq_dropped N
//!                          cqe_dropped N db_overruns N raw_rx_dropped N
//!                          eq_overwritten N" (the NIC: gateway operations
//!                          done, software's misuse, what was lost), then
//!                          per port "port P tx N rx N rx_drops N
//!                          retransmits N naks N icrc_errors N injected N
//!                          rnr_naks N link up|down looped N link_sent N
//!                          link_send_errors N link_received N link_lost N
//!                          eth_tx N eth_rx N" (rnr_naks, eth_tx and eth_rx
//!                          always 0)
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
use crate::engine::{open_capture, Captures, Waker};
use crate::hotplug::Qmp;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Serve the control socket; `waker` wakes the engine after every command
/// (which may have given the device work: `nic-hold PORT off`, `poke`, ...).
pub fn serve(
    listener: UnixListener,
    device: Arc<Mutex<Device>>,
    captures: Captures,
    qmp: Option<Arc<Qmp>>,
    waker: Waker,
) {
    for conn in listener.incoming().flatten() {
        let device = device.clone();
        let captures = captures.clone();
        let qmp = qmp.clone();
        let waker = waker.clone();
        std::thread::spawn(move || session(conn, &device, &captures, qmp.as_deref(), &waker));
    }
}

fn session(
    conn: UnixStream,
    device: &Mutex<Device>,
    captures: &Captures,
    qmp: Option<&Qmp>,
    waker: &Waker,
) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let result = command(line.trim(), device, captures, qmp);
        waker.wake();
        let reply = match result {
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

/// The `asid=N` before the arguments of `peek`, `peek-bytes`, `hash` and
/// `poke`: the ASID whose tables map the addresses; and the first argument
/// after it.
fn view<'a>(w: &mut impl Iterator<Item = &'a str>) -> Result<(u32, Option<&'a str>), String> {
    match w.next() {
        Some(t) if t.starts_with("asid=") => Ok((num(t.strip_prefix("asid="), "ASID")?, w.next())),
        _ => Err("asid=N required".into()),
    }
}

fn num<T: std::str::FromStr>(s: Option<&str>, what: &str) -> Result<T, String> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad or missing {what}"))
}

/// A count of injections: at most 65536.
fn count(s: Option<&str>) -> Result<u32, String> {
    num(s, "count").and_then(|n: u32| {
        if n > 65536 {
            Err("count at most 65536".into())
        } else {
            Ok(n)
        }
    })
}

fn command(
    line: &str,
    device: &Mutex<Device>,
    captures: &Captures,
    qmp: Option<&Qmp>,
) -> Result<Vec<String>, String> {
    let mut w = line.split_whitespace();
    let cmd = w.next().unwrap_or("");
    // QEMU talks to the device while it adds or removes it: the device
    // stays unlocked meanwhile.
    if cmd == "unplug" || cmd == "plug" {
        let qmp = qmp.ok_or("no QEMU monitor (--qmp)")?;
        if cmd == "unplug" {
            qmp.unplug()?;
        } else {
            qmp.plug()?;
        }
        return Ok(Vec::new());
    }
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
        "nic-hold" => {
            let p: usize = num(w.next(), "port")?;
            let on = match w.next() {
                Some("on") => true,
                Some("off") => false,
                _ => return Err("nic-hold PORT on|off".into()),
            };
            if p >= crate::nic::regs::PORTS {
                return Err("nic-hold: no such port".into());
            }
            d.nic.hold(p, on);
        }
        "nic-event" => {
            let p: usize = num(w.next(), "port")?;
            let ty: u64 = num(w.next(), "type")?;
            let data1: u32 = num(w.next(), "data1")?;
            let data2: u32 = num(w.next(), "data2")?;
            if !d.nic_event(p, ty, data1, data2) {
                return Err("nic-event: no such port, or its event queue is full".into());
            }
        }
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
        "eq-flood" => {
            let n: u32 = num(w.next(), "count")?;
            let (posted, over) = d.eq_flood(n);
            return Ok(vec![format!("posted {posted} overwritten {over}")]);
        }
        "fatal" => d.fatal(),
        "vanish" => {
            log::info!("the device vanishes on request: it answers nothing from now on");
            d.vanish();
        }
        "id" => {
            let v = w.next().ok_or("id HEX")?;
            let id = u32::from_str_radix(v.trim_start_matches("0x"), 16)
                .map_err(|_| format!("bad id {v}"))?;
            d.set_id(id);
        }
        "reset-hangs" => {
            let hangs = match w.next() {
                Some("on") => true,
                Some("off") => false,
                _ => return Err("reset-hangs on|off".into()),
            };
            d.set_reset_hangs(hangs);
        }
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
            let (asid, first) = view(&mut w)?;
            let va = addr(first)?;
            let len: usize = num(w.next(), "length")?;
            if len == 0 || len > 4096 {
                return Err("length 1 to 4096".into());
            }
            let mut buf = vec![0u8; len];
            d.view_read(asid, va, &mut buf)
                .map_err(|f| format!("fault {f:?}"))?;
            return Ok(vec![format!("data {}", hex(&buf))]);
        }
        "asid-find" => {
            let va = addr(w.next())?;
            let found = d.asid_mapping(va);
            let list: Vec<String> = found
                .iter()
                .map(|(a, rw)| format!("{a}:{}", if *rw { "rw" } else { "ro" }))
                .collect();
            return Ok(vec![format!("asids {}", list.join(" "))
                .trim_end()
                .to_string()]);
        }
        "asid-peek" => {
            let asid: u32 = num(w.next(), "ASID")?;
            let va = addr(w.next())?;
            let len: usize = num(w.next(), "length")?;
            if len == 0 || len > 4096 {
                return Err("length 1 to 4096".into());
            }
            let mut buf = vec![0u8; len];
            d.asid_peek(asid, va, &mut buf)
                .map_err(|f| format!("fault {f:?}"))?;
            return Ok(vec![format!("data {}", hex(&buf))]);
        }
        "peek-bytes" => {
            let (asid, first) = view(&mut w)?;
            let mut out = Vec::new();
            for a in first.into_iter().chain(w.by_ref()).take(64) {
                let mut b = [0u8];
                out.push(match d.view_read(asid, addr(Some(a))?, &mut b) {
                    Ok(()) => format!("{:02x}", b[0]),
                    Err(_) => "--".into(),
                });
            }
            if out.is_empty() {
                return Err("peek-bytes VA [VA...]".into());
            }
            return Ok(vec![format!("bytes {}", out.join(" "))]);
        }
        "hash" => {
            let (asid, first) = view(&mut w)?;
            let va = addr(first)?;
            let len = addr(w.next())?;
            if len == 0 || len > 1 << 40 {
                return Err("length 1 to 2^40".into());
            }
            let mut h = RegionHash::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut off = 0u64;
            while off < len {
                let n = (len - off).min(buf.len() as u64) as usize;
                d.view_read(asid, va + off, &mut buf[..n])
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
            let (asid, first) = view(&mut w)?;
            let va = addr(first)?;
            let data = unhex(w.next().unwrap_or(""))?;
            if data.is_empty() {
                return Err("poke [asid=N] VA HEX".into());
            }
            d.view_write(asid, va, &data)
                .map_err(|f| format!("fault {f:?}"))?;
        }
        "stat" => {
            let mut out = vec![
                format!("dma_audit {}", d.audit()),
                format!("mmu_faults {}", d.chip.faults),
                format!("stale_translation {}", d.stale_translations()),
                format!("dma_no_master {}", d.dma_no_master()),
                format!("irq_no_master {}", d.irq_no_master()),
            ];
            let n = d.nic.audits();
            out.push(format!(
                "nic gw_ops {} gw_write_while_busy {} gw_read_while_busy {} gw_unreachable {} unknown_register {} cq_ci_refused {} eq_dropped {} cqe_dropped {} db_overruns {} raw_rx_dropped {} eq_overwritten {}",
                d.nic.gw_ops,
                n.gw_write_while_busy,
                n.gw_read_while_busy,
                n.gw_unreachable,
                n.unknown_register,
                n.cq_ci_refused,
                n.eq_dropped,
                n.cqe_dropped,
                n.db_overruns,
                n.raw_rx_dropped,
                n.eq_overwritten
            ));
            for (i, p) in d.ports.iter().enumerate() {
                let c = &p.counters;
                out.push(format!(
                    "port {i} tx {} rx {} rx_drops {} retransmits {} naks {} icrc_errors {} injected {} rnr_naks {} link {} looped {} link_sent {} link_send_errors {} link_received {} link_lost {} eth_tx {} eth_rx {}",
                    c.tx,
                    c.rx,
                    c.rx_drops,
                    d.nic.retransmits.get(i).copied().unwrap_or(0),
                    d.nic.naks.get(i).copied().unwrap_or(0),
                    c.icrc_errors,
                    c.injected,
                    0,
                    if p.link_up { "up" } else { "down" },
                    c.looped,
                    c.link_sent,
                    c.link_send_errors,
                    c.link_received,
                    c.link_lost,
                    0,
                    0
                ));
            }
            return Ok(out);
        }
        "fuzz-nic" => {
            let port = num(w.next(), "port")?;
            let n = count(w.next())?;
            let seed = num(w.next(), "seed")?;
            return Ok(vec![d.fuzz_nic(port, n, seed)?]);
        }
        "nic-rd" => {
            let mut out = Vec::new();
            for a in w {
                let off = u64::from_str_radix(a.trim_start_matches("0x"), 16)
                    .map_err(|_| format!("bad offset {a}"))?;
                out.push(format!("{a}={:#x}", d.nic.peek(off)));
            }
            return Ok(vec![out.join(" ")]);
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
