// SPDX-License-Identifier: GPL-2.0
//! vfio-user server emulating a Gaudi2-like RDMA NIC (PCI 1da3:1020).
//!
//! Serves one QEMU (or test) connection and exits when it disconnects;
//! with --qmp, serves the next connection too (the device plugged again).

use gaudi_emu::device::{Device, Options, MAX_PORTS};
use gaudi_emu::engine::{Engine, Link};
use gaudi_emu::hotplug::Qmp;
use gaudi_emu::irq::Vectors;
use gaudi_emu::roce::Endpoint;
use gaudi_emu::server::Backend;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vfio_user::Server;

/// How long a reset takes under --strict without --reset-delay-ms.
const STRICT_RESET_DELAY: Duration = Duration::from_millis(50);

const USAGE: &str = "usage: gaudi-emu --socket PATH [options]
  --id HEX                  value of the SVC_ID register (default 47324546)
  --ports N                 number of ports (default 24)
  --devmem MIB              device memory size in MiB (default 256)
  --instance N              distinguishes emulators in default addresses
  --addr PORT=MAC,IPV4      a port's MAC and IPv4 address
  --link PORT=LPORT:RPORT   attach a port to UDP 127.0.0.1:LPORT, sending to
                            127.0.0.1:RPORT (QEMU -netdev dgram compatible)
  --control PATH            control socket for tests
  --qmp PATH                QEMU's monitor socket: the control commands
                            unplug and plug remove and add the device; after
                            a disconnection the next connection is served
  --msi                     interrupt with MSI (up to 8 messages), not MSI-X:
                            QEMU 11.1 cannot remove a vfio-user-pci device
                            with MSI-X, so hot unplug tests use this
  --reset-hangs             a reset never finishes (SVC_STATUS.READY stays 0)
  --reset-delay-ms N        SVC_STATUS.READY reads 0 for N ms after a reset; the
                            device does nothing meanwhile (default 0, 50
                            with --strict)
  --strict                  as late and as lenient as the model allows, and
                            audited: every use of a cached translation of
                            the device MMU is checked against the page
                            table (stat stale_translation); the NIC's
                            gateway operations take the command delay
  --cmd-delay-us N          with --strict: how long a gateway operation takes
                            (default 500)";

fn usage(msg: &str) -> ! {
    eprintln!("gaudi-emu: {msg}\n{USAGE}");
    std::process::exit(2);
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).ok())
        .collect::<Option<_>>()?;
    v.try_into().ok()
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let mut socket = None;
    let mut control = None;
    let mut qmp = None;
    let mut msi = false;
    let mut opts = Options::default();
    let mut links: Vec<(usize, u16, u16)> = Vec::new();
    let mut reset_delay = None;
    let mut cmd_delay = None;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let mut v = || {
            it.next()
                .cloned()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--reset-hangs" => opts.reset_hangs = true,
            "--msi" => msi = true,
            "--strict" => opts.strict = true,
            "--socket" => socket = Some(PathBuf::from(v())),
            "--control" => control = Some(PathBuf::from(v())),
            "--qmp" => qmp = Some(PathBuf::from(v())),
            "--id" => {
                opts.id = u32::from_str_radix(v().trim_start_matches("0x"), 16)
                    .unwrap_or_else(|_| usage("bad --id"))
            }
            "--ports" => {
                opts.ports = v()
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PORTS).contains(n))
                    .unwrap_or_else(|| usage("--ports takes 1 to 32"))
            }
            "--devmem" => {
                let mib: usize = v().parse().unwrap_or_else(|_| usage("bad --devmem"));
                opts.devmem = mib << 20;
            }
            "--instance" => opts.instance = v().parse().unwrap_or_else(|_| usage("bad --instance")),
            "--reset-delay-ms" => {
                let ms: u64 = v()
                    .parse()
                    .unwrap_or_else(|_| usage("bad --reset-delay-ms"));
                reset_delay = Some(Duration::from_millis(ms));
            }
            "--cmd-delay-us" => {
                let us: u64 = v().parse().unwrap_or_else(|_| usage("bad --cmd-delay-us"));
                cmd_delay = Some(Duration::from_micros(us));
            }
            "--addr" => {
                let s = v();
                let parsed = s.split_once('=').and_then(|(p, rest)| {
                    let (mac, ip) = rest.split_once(',')?;
                    Some((
                        p.parse().ok()?,
                        parse_mac(mac)?,
                        ip.parse::<Ipv4Addr>().ok()?,
                    ))
                });
                let (p, mac, ip) = parsed.unwrap_or_else(|| usage("bad --addr"));
                opts.addrs.insert(
                    p,
                    Endpoint {
                        mac,
                        ip: ip.octets().into(),
                    },
                );
            }
            "--link" => {
                let s = v();
                let parsed = s.split_once('=').and_then(|(p, rest)| {
                    let (l, r) = rest.split_once(':')?;
                    Some((p.parse().ok()?, l.parse().ok()?, r.parse().ok()?))
                });
                links.push(parsed.unwrap_or_else(|| usage("bad --link")));
            }
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    let socket = socket.unwrap_or_else(|| usage("--socket is required"));
    if cmd_delay.is_some() && !opts.strict {
        usage("--cmd-delay-us needs --strict");
    }
    opts.cmd_delay = cmd_delay.unwrap_or(opts.cmd_delay);
    // Strict mode takes its time to reset too, unless told otherwise.
    opts.reset_delay = reset_delay.unwrap_or(if opts.strict {
        STRICT_RESET_DELAY
    } else {
        Duration::ZERO
    });
    let nports = opts.ports;
    let vectors = Arc::new(Vectors::with_msi(
        gaudi_emu::device::MSIX_VECTORS as usize,
        msi,
    ));
    let device = match Device::new(opts, vectors.clone()) {
        Ok(d) => Arc::new(Mutex::new(d)),
        Err(e) => usage(&format!("cannot create device memory: {e}")),
    };
    let mut port_links: Vec<Option<Link>> = (0..nports).map(|_| None).collect();
    for (p, l, r) in links {
        if p >= nports {
            usage(&format!("--link for port {p}, device has {nports}"));
        }
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, l));
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, r));
        port_links[p] = Some(
            Link::new(local, peer).unwrap_or_else(|e| usage(&format!("port {p}: UDP {l}: {e}"))),
        );
    }
    let (engine, waker) =
        Engine::new(device.clone(), port_links).unwrap_or_else(|e| usage(&e.to_string()));
    if let Some(path) = control {
        let _ = std::fs::remove_file(&path);
        let listener =
            UnixListener::bind(&path).unwrap_or_else(|e| usage(&format!("control socket: {e}")));
        let (device, captures, waker) = (device.clone(), engine.captures.clone(), waker.clone());
        let qmp = qmp.clone().map(|monitor| {
            Arc::new(Qmp {
                monitor,
                socket: socket.clone(),
            })
        });
        std::thread::spawn(move || gaudi_emu::ctrl::serve(listener, device, captures, qmp, waker));
    }
    std::thread::spawn(move || engine.run());

    let mut backend = Backend::new(device.clone(), vectors.clone(), waker.clone(), msi);
    // The socket appears under its name only once it is listening, so a
    // client that waits for the file never finds it refusing connections.
    let tmp = socket.with_extension("binding");
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)
        .and_then(|l| std::fs::rename(&tmp, &socket).map(|_| l))
        .unwrap_or_else(|e| {
            eprintln!("gaudi-emu: cannot serve on {}: {e}", socket.display());
            std::process::exit(1);
        });
    let server = Server::from_owned_fd(listener.into(), true, backend.irqs(), backend.regions());
    log::info!(
        "serving 1da3:1020 with {nports} ports on {}",
        socket.display()
    );
    let mut r = server.run(&mut backend);
    while r.is_ok() && qmp.is_some() {
        // Unplugged: the device is powered off, and plugged again it is a
        // new device to the guest (fresh configuration space).
        log::info!("disconnected: waiting for the device to be plugged again");
        {
            let mut d = device.lock().unwrap();
            d.reset();
            d.memory().unmap(0, u64::MAX);
        }
        waker.wake();
        let _ = vectors.set(0, 0, Vec::new());
        backend = Backend::new(device.clone(), vectors.clone(), waker.clone(), msi);
        r = server.run(&mut backend);
    }
    let _ = std::fs::remove_file(&socket);
    if let Err(e) = r {
        eprintln!("gaudi-emu: {e}");
        std::process::exit(1);
    }
}
