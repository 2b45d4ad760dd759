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
//! id HEX                   the ID register reads HEX from now on (as --id)
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
//! nic-hold PORT on|off     model 2.0: the port's NIC takes no doorbell from
//!                          its FIFOs (as a NIC busy elsewhere), or takes
//!                          them again; a test hook for FIFO overruns
//! nic-event PORT TYPE DATA1 DATA2
//!                          model 2.0: an entry on the port's event queue
//!                          as the NIC writes one (decimal fields), e.g. a
//!                          QP_ERR (2) of a QP with a syndrome; fails if
//!                          the queue is full
//! fuzz-nic PORT N SEED     model 2.0: N entries no NIC produces (device/
//!                          fuzz.rs: NIC_KINDS) on the port's event queue
//!                          and CQ 0, written as the NIC writes entries:
//!                          "fuzz-nic port P injected I not_injected S
//!                          eqe_unknown N ... cqe_rc_bad N"
//! nic-rd OFF [OFF...]      model 2.0: the NIC's registers at configuration-
//!                          space offsets OFF (hex): "OFF=VALUE ..."
//! peek VA LEN              read LEN (up to 4096) bytes at device VA VA through
//!                          the MMU: "data HEX", or err naming the fault
//! asid-find VA             model 2.0: "asids A:rw B:ro ...", the ASIDs whose
//!                          page tables map device VA VA now, and the page's
//!                          right ("asids" alone: none)
//! asid-peek ASID VA LEN    model 2.0: LEN (up to 4096) bytes at device VA VA
//!                          of ASID as its tables map them now: "data HEX",
//!                          or err naming the fault
//! peek-bytes VA [VA...]    one byte at each device VA (up to 64) through the
//!                          MMU: "bytes B B ...", B two hex digits or "--"
//!                          for a fault
//! poke VA HEX              write bytes at device VA VA through the MMU
//!                          (peek, peek-bytes, hash and poke: with asid=N
//!                          before the arguments, as ASID N's tables map
//!                          them instead, writable pages only for poke)
//! hash VA LEN             "hash H": the region hash (below) of LEN bytes at
//!                          device VA VA read through the MMU, or err naming
//!                          the fault
//! devmem-peek OFFSET LEN   read LEN (up to 4096) bytes of device memory at
//!                          OFFSET: "data HEX", or err if outside it
//! qps PORT                 "qps I J ...": the QP indexes that exist on the port
//! cqs PORT                 "cqs I J ...": the CQ indexes that exist on the port
//! stat                     "dma_audit N", "mmu_faults N" (both MMUs'
//!                          translation faults), "eq_dropped N",
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
//!                          ignored), "fuzz_regs left N CLASS N ..." (see
//!                          fuzz-regs), "nic gw_ops N gw_write_while_busy N
//!                          gw_read_while_busy N gw_unreachable N
//!                          unknown_register N cq_ci_refused N eq_dropped N
//!                          cqe_dropped N db_overruns N raw_rx_dropped N"
//!                          (model 2.0's NIC:
//!                          gateway operations done, software's misuse,
//!                          what was lost), then
//!                          per port "port P tx N rx N
//!                          rx_drops N retransmits N naks N icrc_errors N
//!                          injected N rnr_naks N link up|down"
//! ```
//!
//! Fuzzing: test hooks that make the device misbehave toward the driver
//! (see `device::fuzz`); not device behaviour. N is at most 65536; SEED (a
//! 64-bit number, decimal or 0x hexadecimal) makes the injection
//! repeatable. CQEs never complete an outstanding WQE; event queue entries
//! name only ports, QPs and CQs that exist nowhere, and never carry a
//! device fatal error. Each reply line lists every kind with its count
//! (zeros included); injected + not_injected is N.
//!
//! ```text
//! fuzz-cqe PORT CQN N SEED write N malformed CQEs into the CQ's ring, as the
//!                          device writes CQEs, and notify the CQ if armed.
//!                          Kinds: unknown_qpn, bad_index (a send completion
//!                          of a WQE not outstanding), foreign_cq (a QP of
//!                          another CQ), bad_opcode, bad_status,
//!                          long_byte_count (an incoming WRITE longer than
//!                          the QP's region or any message), imm_not_allowed
//!                          (an incoming WRITE on a QP without REMOTE_WRITE),
//!                          garbage (every byte random), stale_owner (the
//!                          owner bit of the previous pass: not to be
//!                          consumed). Kinds needing a QP the port lacks
//!                          become unknown_qpn. At most half the ring is
//!                          filled; stale entries go into free slots ahead
//!                          of the producer. Reply: "fuzz-cqe port P cq C
//!                          injected N visible N not_injected N KIND N ..."
//!                          (visible: entries the consumer is to take).
//! fuzz-eqe N SEED          write N malformed event queue entries and raise
//!                          vector 0. Kinds: bad_port (beyond NUM_PORTS),
//!                          unknown_type, unknown_object (a QPN or CQN that
//!                          exists on no port), stale_owner (not to be
//!                          consumed), skipped (an entry written and
//!                          signalled one slot ahead of the producer, the
//!                          slot before it filled 20 ms later: two entries,
//!                          one count). At most half the queue is filled,
//!                          and the device is released while a slot is
//!                          open. Reply:
//!                          "fuzz-eqe injected N visible N not_injected N
//!                          KIND N ..."
//! fuzz-regs N SEED [CLASSES]
//!                          the next N reads of registers of the classes
//!                          (comma-separated, "default" or "all"; default:
//!                          all but port_addr) return bogus values: status
//!                          (STATUS), irq_cause (IRQ_CAUSE), cmd_status
//!                          (CMD_STATUS: never 0 or an errno of the model),
//!                          cmd_data (CMD_DATA), eq (EQ_PI past the ring or
//!                          backwards, EQ_CI, EQ_OVERFLOWS jumping),
//!                          mmu_fault (MMU_FAULT_COUNT, MMU_FAULT_VA_LO/HI),
//!                          port (PORT_STATE, PORT_SPEED, the counters),
//!                          port_addr (PORT_MAC_LO/HI, PORT_IPV4). Values:
//!                          all-ones, 0, random, and the class's own. N 0
//!                          disarms. Reply: "fuzz-regs armed N classes
//!                          C,C,..."; the reads served show in stat's
//!                          "fuzz_regs left N status N irq_cause N ..."
//! fuzz-wire PORT N SEED    N garbage frames arrive on the port's link:
//!                          truncated, bad_opcode (operations and transports
//!                          the device lacks), bad_qpn, not_for_port (another
//!                          MAC or IPv4 address), bad_icrc, bad_pad (a pad
//!                          count beyond the frame), psn (requests the
//!                          responder has seen or far ahead; ACKs and NAKs of
//!                          PSNs not outstanding), garbage (good headers and
//!                          ICRC, random rest), wild_reth (a WRITE at the
//!                          expected PSN with a wild VA, length or rkey,
//!                          never one that lands). Frames for a QP in RTR or
//!                          RTS look as if from its peer and are answered
//!                          (garbage and wild_reth may move it to ERR);
//!                          without one, psn and wild_reth become bad_qpn.
//!                          Reply: "fuzz-wire port P injected N KIND N ..."
//!                          and "fuzz-wire port P moved rx N rx_drops N
//!                          icrc_errors N naks N mmu_faults N eth N" (how
//!                          the counters moved; eth: frames handed to the
//!                          port's Ethernet receive ring, stored or not)
//! ```

use crate::device::{fuzz, Device};

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
use crate::hotplug::Qmp;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub fn serve(
    listener: UnixListener,
    device: Arc<Mutex<Device>>,
    captures: Captures,
    qmp: Option<Arc<Qmp>>,
) {
    for conn in listener.incoming().flatten() {
        let device = device.clone();
        let captures = captures.clone();
        let qmp = qmp.clone();
        std::thread::spawn(move || session(conn, &device, &captures, qmp.as_deref()));
    }
}

fn session(conn: UnixStream, device: &Mutex<Device>, captures: &Captures, qmp: Option<&Qmp>) {
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let reply = match command(line.trim(), device, captures, qmp) {
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

/// The optional `asid=N` before the arguments of `peek`, `peek-bytes`,
/// `hash` and `poke`: the ASID whose tables map the addresses (model 2.0),
/// else the NIC's own MMU (model 1.5); and the first argument after it.
fn view<'a>(
    w: &mut impl Iterator<Item = &'a str>,
) -> Result<(Option<u32>, Option<&'a str>), String> {
    match w.next() {
        Some(t) if t.starts_with("asid=") => {
            Ok((Some(num(t.strip_prefix("asid="), "ASID")?), w.next()))
        }
        t => Ok((None, t)),
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

fn seed(s: Option<&str>) -> Result<u64, String> {
    addr(s).map_err(|_| format!("bad or missing seed {}", s.unwrap_or("")))
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
    // It releases the device while a hole it made stays open.
    if cmd == "fuzz-eqe" {
        let n = count(w.next())?;
        return Ok(vec![fuzz::fuzz_eqe(device, n, seed(w.next())?)?]);
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
        "qps" => {
            let p = port(&mut w)?;
            let mut qps: Vec<u32> = d.ports[p].qps.keys().copied().collect();
            qps.sort_unstable();
            let list: Vec<String> = qps.iter().map(|q| q.to_string()).collect();
            return Ok(vec![format!("qps {}", list.join(" "))
                .trim_end()
                .to_string()]);
        }
        "cqs" => {
            let p = port(&mut w)?;
            let mut cqs: Vec<u32> = d.ports[p].cqs.keys().copied().collect();
            cqs.sort_unstable();
            let list: Vec<String> = cqs.iter().map(|q| q.to_string()).collect();
            return Ok(vec![format!("cqs {}", list.join(" "))
                .trim_end()
                .to_string()]);
        }
        "fuzz-cqe" => {
            let p = port(&mut w)?;
            let cqn = num(w.next(), "cqn")?;
            let n = count(w.next())?;
            return Ok(vec![d.fuzz_cqe(p, cqn, n, seed(w.next())?)?]);
        }
        "fuzz-regs" => {
            let n = count(w.next())?;
            let s = seed(w.next())?;
            let classes = fuzz::reg_classes(w.next().unwrap_or("default"))?;
            d.fuzz_regs(n, s, classes);
            let names: Vec<&str> = fuzz::REG_CLASSES
                .iter()
                .enumerate()
                .filter(|(i, _)| classes & 1 << i != 0)
                .map(|(_, n)| *n)
                .collect();
            return Ok(vec![format!(
                "fuzz-regs armed {n} classes {}",
                names.join(",")
            )]);
        }
        "fuzz-wire" => {
            let p = port(&mut w)?;
            let n = count(w.next())?;
            return d.fuzz_wire(p, n, seed(w.next())?);
        }
        "stat" => {
            let a = d.audits();
            let (left, served) = d.fuzz_regs_state();
            let mut out = vec![
                format!("dma_audit {}", d.audit()),
                // The NIC's own page table (model 1.5) and the chip's
                // (model 2.0: by ASID).
                format!(
                    "mmu_faults {}",
                    u64::from(d.mmu.faults) + u64::from(d.chip.faults)
                ),
                format!("eq_dropped {}", d.eq_dropped()),
                format!("stale_translation {}", d.stale_translations()),
                format!("unwaited_invalidation {}", d.unwaited_invalidations()),
                format!("dma_no_master {}", d.dma_no_master()),
                format!("irq_no_master {}", d.irq_no_master()),
                format!("cmd_overlap {}", a.cmd_overlap),
                format!("cmd_data_busy {}", a.cmd_data_busy),
                format!("bad_doorbells {}", a.bad_doorbells),
                format!("cq_ci_ignored {}", a.cq_ci_ignored),
                format!("fuzz_regs left {left} {served}"),
            ];
            let n = d.nic.audits();
            out.push(format!(
                "nic gw_ops {} gw_write_while_busy {} gw_read_while_busy {} gw_unreachable {} unknown_register {} cq_ci_refused {} eq_dropped {} cqe_dropped {} db_overruns {} raw_rx_dropped {}",
                d.nic.gw_ops,
                n.gw_write_while_busy,
                n.gw_read_while_busy,
                n.gw_unreachable,
                n.unknown_register,
                n.cq_ci_refused,
                n.eq_dropped,
                n.cqe_dropped,
                n.db_overruns,
                n.raw_rx_dropped
            ));
            for (i, p) in d.ports.iter().enumerate() {
                let c = &p.counters;
                out.push(format!(
                    "port {i} tx {} rx {} rx_drops {} retransmits {} naks {} icrc_errors {} injected {} rnr_naks {} link {} looped {} link_sent {} link_send_errors {} link_received {} link_lost {} eth_tx {} eth_rx {}",
                    c.tx,
                    c.rx,
                    c.rx_drops,
                    c.retransmits + d.nic.retransmits.get(i).copied().unwrap_or(0),
                    c.naks_sent + d.nic.naks.get(i).copied().unwrap_or(0),
                    c.icrc_errors,
                    c.injected,
                    c.rnr_naks_sent,
                    if p.link_up { "up" } else { "down" },
                    c.looped,
                    c.link_sent,
                    c.link_send_errors,
                    c.link_received,
                    c.link_lost,
                    p.eth.tx_frames,
                    p.eth.rx_frames
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
