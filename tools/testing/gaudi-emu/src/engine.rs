// SPDX-License-Identifier: GPL-2.0
//! The device's clock and wires: one thread moves frames between the
//! ports and their links (UDP datagrams carrying Ethernet frames, as
//! QEMU's `-netdev dgram` does) and advances the device's timers. It
//! sleeps between rounds until a frame arrives, a [`Waker`] wakes it or the
//! device's next deadline comes ([`Device::next_deadline`]), so that an
//! idle device costs no CPU.

use crate::device::Device;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest the engine waits between rounds when the device has
/// nothing pending: a bound on the delay of work whose coming
/// [`Device::next_deadline`] did not foresee and no one woke the engine for.
const MAX_WAIT: Duration = Duration::from_millis(50);

/// Wakes the engine when the device may have work: after every register
/// write (a doorbell, a gateway operation), configuration write, reset and
/// control command. The engine otherwise sleeps until the device's next
/// deadline ([`Device::next_deadline`]) or a frame.
#[derive(Clone)]
pub struct Waker(Arc<UnixDatagram>);

impl Waker {
    pub fn wake(&self) {
        let _ = self.0.send(&[1]);
    }
}

/// A port's link: a UDP socket and where its frames go.
pub struct Link {
    pub socket: UdpSocket,
    pub peer: SocketAddr,
}

impl Link {
    pub fn new(local: SocketAddr, peer: SocketAddr) -> std::io::Result<Self> {
        let socket = UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        // Room for a window of MTU-sized frames on every QP of a burst, and
        // for the frames that arrive while the emulator waits for the CPU
        // (two guests and two emulators on two CPUs): the host drops a
        // datagram for which the buffer has no room, as a cable never does.
        // The forcing options pass the host's maxima (net.core.rmem_max,
        // wmem_max) where the emulator may (as root); elsewhere the plain
        // ones get what the maxima allow.
        let size: libc::c_int = 32 << 20;
        for (force, plain) in [
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        ] {
            for opt in [force, plain] {
                // SAFETY: a valid socket and a pointer to an int of the given size.
                let r = unsafe {
                    libc::setsockopt(
                        socket.as_raw_fd(),
                        libc::SOL_SOCKET,
                        opt,
                        (&size as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                if r == 0 {
                    break;
                }
            }
        }
        Ok(Self { socket, peer })
    }

    /// Datagrams the host dropped for want of room in the socket's receive
    /// buffer, since the socket was opened.
    fn drops(&self) -> u32 {
        // SO_MEMINFO (include/uapi/asm-generic/socket.h), which the libc
        // crate does not name.
        const SO_MEMINFO: libc::c_int = 55;
        let mut info = [0u32; 16];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: a valid socket, and a buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.socket.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r == 0 {
            info[libc::SK_MEMINFO_DROPS as usize]
        } else {
            0
        }
    }
}

/// What the engine counted on a port's link since it last told the device.
#[derive(Clone, Copy, Default)]
struct LinkCount {
    sent: u32,
    send_errors: u32,
    received: u32,
    lost: u32,
    /// The socket's drop count when last read.
    drops: u32,
}

/// pcap writers, per port, set from the control interface.
pub type Captures = Arc<Mutex<Vec<Option<BufWriter<File>>>>>;

pub fn open_capture(path: &str) -> std::io::Result<BufWriter<File>> {
    let mut w = BufWriter::new(File::create(path)?);
    // pcap global header: magic, v2.4, tz 0, sigfigs 0, snaplen, Ethernet.
    w.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
    w.write_all(&2u16.to_le_bytes())?;
    w.write_all(&4u16.to_le_bytes())?;
    w.write_all(&[0; 8])?;
    w.write_all(&65535u32.to_le_bytes())?;
    w.write_all(&1u32.to_le_bytes())?;
    w.flush()?;
    Ok(w)
}

fn capture(caps: &Captures, port: usize, frame: &[u8]) {
    let mut caps = caps.lock().unwrap();
    let Some(Some(w)) = caps.get_mut(port) else {
        return;
    };
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut rec = Vec::with_capacity(16 + frame.len());
    rec.extend_from_slice(&(t.as_secs() as u32).to_le_bytes());
    rec.extend_from_slice(&t.subsec_micros().to_le_bytes());
    rec.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    rec.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    rec.extend_from_slice(frame);
    if w.write_all(&rec).and_then(|_| w.flush()).is_err() {
        caps[port] = None;
    }
}

pub struct Engine {
    device: Arc<Mutex<Device>>,
    links: Vec<Option<Link>>,
    wake_rx: UnixDatagram,
    pub captures: Captures,
}

impl Engine {
    pub fn new(
        device: Arc<Mutex<Device>>,
        links: Vec<Option<Link>>,
    ) -> std::io::Result<(Self, Waker)> {
        let (tx, rx) = UnixDatagram::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        let n = links.len();
        Ok((
            Self {
                device,
                links,
                wake_rx: rx,
                captures: Arc::new(Mutex::new((0..n).map(|_| None).collect())),
            },
            Waker(Arc::new(tx)),
        ))
    }

    pub fn run(self) -> ! {
        let mut buf = vec![0u8; 65536];
        // The ports of the links, in the order of their descriptors after
        // the waker's.
        let ports: Vec<usize> = (0..self.links.len())
            .filter(|&p| self.links[p].is_some())
            .collect();
        let mut fds: Vec<libc::pollfd> = std::iter::once(self.wake_rx.as_raw_fd())
            .chain(self.links.iter().flatten().map(|l| l.socket.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut counts = vec![LinkCount::default(); self.links.len()];
        // The first round looks at everything.
        let mut wait = Duration::ZERO;
        loop {
            let ts = libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `fds` is a valid array of pollfd of the given length,
            // `ts` a valid timespec, and a null signal mask leaves the
            // thread's as it is.
            let n = unsafe {
                libc::ppoll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    &ts,
                    std::ptr::null(),
                )
            };
            if n < 0 {
                // Interrupted (no revents were set): look at everything.
                fds.iter_mut().for_each(|f| f.revents = libc::POLLIN);
            }
            if fds[0].revents != 0 {
                while self.wake_rx.recv(&mut buf).is_ok() {}
            }
            let mut rx = Vec::new();
            for (fd, &port) in fds[1..].iter().zip(&ports) {
                // A socket with nothing to read (nor an error to clear)
                // has dropped nothing either: the host drops datagrams
                // only while the receive buffer holds some.
                if fd.revents == 0 {
                    continue;
                }
                let Some(link) = &self.links[port] else {
                    continue;
                };
                // Bound the batch so that one busy link cannot starve the
                // rest; what is left makes the next poll return at once.
                for _ in 0..256 {
                    match link.socket.recv(&mut buf) {
                        Ok(n) => {
                            rx.push((port, buf[..n].to_vec()));
                            counts[port].received += 1;
                        }
                        Err(_) => break,
                    }
                }
                let drops = link.drops();
                counts[port].lost = drops.wrapping_sub(counts[port].drops);
                counts[port].drops = drops;
            }
            let now = Instant::now();
            let mut tx = Vec::new();
            let next = {
                let mut d = self.device.lock().unwrap();
                Self::count(&mut d, &mut counts);
                for (port, frame) in &rx {
                    capture(&self.captures, *port, frame);
                    d.receive(*port, frame, now);
                }
                d.step(now);
                for port in 0..self.links.len() {
                    for f in d.take_tx(port, now) {
                        tx.push((port, f));
                    }
                }
                d.next_deadline(Instant::now())
            };
            for (port, f) in tx {
                capture(&self.captures, port, &f);
                if let Some(link) = &self.links[port] {
                    match link.socket.send_to(&f, link.peer) {
                        Ok(_) => counts[port].sent += 1,
                        Err(e) => {
                            counts[port].send_errors += 1;
                            log::debug!("port {port}: send: {e}");
                        }
                    }
                }
            }
            if counts.iter().any(|c| c.sent != 0 || c.send_errors != 0) {
                Self::count(&mut self.device.lock().unwrap(), &mut counts);
            }
            // Until the device's next deadline, or until something
            // arrives: a frame, or a wake (a register write, a control
            // command); in any case at most MAX_WAIT, in case a deadline
            // escaped next_deadline().
            wait = next.map_or(MAX_WAIT, |t| {
                t.saturating_duration_since(Instant::now()).min(MAX_WAIT)
            });
        }
    }

    /// Add what the engine counted on the links to the ports' counters.
    fn count(d: &mut Device, counts: &mut [LinkCount]) {
        for (port, n) in counts.iter_mut().enumerate() {
            let c = &mut d.ports[port].counters;
            c.link_sent = c.link_sent.wrapping_add(n.sent);
            c.link_send_errors = c.link_send_errors.wrapping_add(n.send_errors);
            c.link_received = c.link_received.wrapping_add(n.received);
            c.link_lost = c.link_lost.wrapping_add(n.lost);
            *n = LinkCount {
                drops: n.drops,
                ..Default::default()
            };
        }
    }
}
