// SPDX-License-Identifier: GPL-2.0

//! The ports' network interfaces between two linked ports of one device:
//! raw Ethernet frames (packet sockets) from one interface to the other.

use super::*;
use std::time::{Duration, Instant};

/// An EtherType of local experiments (IEEE 802 local experimental 1).
const ETHERTYPE: u16 = 0x88b5;

/// A packet socket bound to interface `ifname` for [`ETHERTYPE`].
struct Packet {
    fd: libc::c_int,
}

impl Packet {
    fn new(ifname: &str) -> Self {
        let proto = ETHERTYPE.to_be();
        // SAFETY: plain socket call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto.into()) };
        if fd < 0 {
            fail(format!(
                "packet socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        let name = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: `name` is a valid C string.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            fail(format!("no interface {ifname}"));
        }
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = index as i32;
        // SAFETY: `sa` is a sockaddr_ll of the size given.
        let r = unsafe {
            libc::bind(
                fd,
                &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r != 0 {
            fail(format!(
                "bind to {ifname}: {}",
                std::io::Error::last_os_error()
            ));
        }
        // Room for every frame a test hands over at once (the NIC may be held) and for
        // every frame that arrives before it is read.
        let room: libc::c_int = 32 << 20;
        for opt in [libc::SO_SNDBUFFORCE, libc::SO_RCVBUFFORCE] {
            // SAFETY: `room` is an int of the size given.
            let r = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    &room as *const libc::c_int as *const libc::c_void,
                    size_of::<libc::c_int>() as u32,
                )
            };
            if r != 0 {
                fail(format!(
                    "socket buffers: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: `tv` is a timeval of the size given.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                size_of::<libc::timeval>() as u32,
            )
        };
        Self { fd }
    }

    /// Send `frame`; false if the interface's queue refused it for now.
    fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: `frame` is valid for its length.
        let n = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        if n == frame.len() as isize {
            return true;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOBUFS) | Some(libc::EAGAIN) => false,
            _ => fail(format!("send of {} bytes: {e}", frame.len())),
        }
    }

    /// The next frame, or None after the receive timeout.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        (n >= 0).then_some(n as usize)
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.fd) };
    }
}

fn mac_of(ifname: &str) -> [u8; 6] {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address"))
        .unwrap_or_else(|e| fail(format!("{ifname}: {e}")));
    let mut m = [0u8; 6];
    for (i, h) in s.trim().split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(h, 16).unwrap_or_else(|_| fail(format!("MAC {s}")));
    }
    m
}

/// Frame `i` from `src` to `dst`: 60, 1514 or 9014 bytes (the largest MTU's
/// frame), its number, then bytes that depend on it.
fn frame(dst: [u8; 6], src: [u8; 6], i: u32) -> Vec<u8> {
    let len = [60usize, 1514, 9014][i as usize % 3];
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&i.to_be_bytes());
    let mut x = i.wrapping_mul(2_654_435_761) | 1;
    while f.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f.push(x as u8);
    }
    f
}

/// Send frames `first..first + count` from `tx` (interface `a`), at most
/// `window` in flight, and check that each arrives at `rx` (interface `b`)
/// byte for byte and in order.
fn exact(
    tx: &Packet,
    rx: &Packet,
    (ma, mb): ([u8; 6], [u8; 6]),
    (a, b): (&str, &str),
    first: u32,
    count: u32,
) {
    const WINDOW: u32 = 8;
    let mut buf = vec![0u8; 16384];
    let (mut sent, mut next, end) = (first, first, first + count);
    while next < end {
        while sent < end && sent - next < WINDOW {
            let f = frame(mb, ma, sent);
            let t0 = Instant::now();
            while !tx.send(&f) {
                if t0.elapsed() > Duration::from_secs(10) {
                    fail(format!("frame {sent}: {a} takes nothing for 10 s"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            sent += 1;
        }
        // Five seconds for the next frame.
        let t0 = Instant::now();
        let len = loop {
            if let Some(len) = rx.recv(&mut buf) {
                break len;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                fail(format!(
                    "frame {next}: nothing arrived at {b} in 5 s ({} of {count} did)",
                    next - first
                ));
            }
        };
        let want = frame(mb, ma, next);
        if buf[..len] != want[..] {
            fail(format!(
                "frame {next}: {len} bytes arrived at {b}, not the {} sent (number {:?})",
                want.len(),
                buf.get(14..18)
            ));
        }
        next += 1;
    }
    println!(
        "ok: frames {first} to {} from {a} arrived at {b} byte for byte, in order",
        end - 1
    );
}

/// `netdev-loopback A B exact N`: N frames from interface A arrive at
/// interface B (their ports linked to each other) byte for byte and in
/// order, at most a few in flight.
///
/// `netdev-loopback A B queued N`: N frames handed to A at once (while the
/// test holds A's NIC, they fill its send queue and wait in the queueing
/// discipline); whatever arrives at B once the NIC runs again arrives byte
/// for byte and in order, each frame at most once.
pub(crate) fn netdev_loopback(args: &[String]) {
    let (a, b, mode, n) = match args {
        [a, b, mode, n] => (
            a.as_str(),
            b.as_str(),
            mode.as_str(),
            n.parse::<u32>()
                .unwrap_or_else(|_| fail(format!("bad count {n}"))),
        ),
        _ => fail("usage: netdev-loopback IFACE_A IFACE_B exact|queued N".into()),
    };
    let macs = (mac_of(a), mac_of(b));
    let tx = Packet::new(a);
    let rx = Packet::new(b);
    let mut buf = vec![0u8; 16384];
    // Whatever is left from the interfaces coming up.
    while rx.recv(&mut buf).is_some() {}
    match mode {
        "exact" => exact(&tx, &rx, macs, (a, b), 0, n),
        "queued" => {
            let first = 1_000_000;
            for i in 0..n {
                if !tx.send(&frame(macs.1, macs.0, first + i)) {
                    fail(format!("frame {i} of {n}: {a} refused it"));
                }
            }
            println!("ok: {n} frames handed to {a}");
            // The test releases the NIC now; frames arrive from then on.
            let t0 = Instant::now();
            let mut next = first;
            let mut got = 0u32;
            let mut quiet = 0;
            while next < first + n && t0.elapsed() < Duration::from_secs(120) {
                let Some(len) = rx.recv(&mut buf) else {
                    // Five seconds without a frame, once some came: the rest is lost.
                    quiet += 1;
                    if got > 0 && quiet >= 25 {
                        break;
                    }
                    continue;
                };
                quiet = 0;
                let num = buf
                    .get(14..18)
                    .map_or(0, |x| u32::from_be_bytes(x.try_into().unwrap()));
                if num < next || num >= first + n {
                    fail(format!("frame number {num} arrived after {next}"));
                }
                if buf[..len] != frame(macs.1, macs.0, num)[..] {
                    fail(format!(
                        "frame {num}: {len} bytes arrived, not what was sent"
                    ));
                }
                next = num + 1;
                got += 1;
            }
            check(got > 0, format!("{got} of {n} queued frames arrived"));
            println!(
                "ok: {got} of {n} queued frames arrived at {b} byte for byte, in order, each once"
            );
        }
        _ => fail(format!("unknown mode {mode}")),
    }
    println!("PASS");
}
