// SPDX-License-Identifier: GPL-2.0
//! Hot unplug and plug of the emulated device through QEMU's monitor
//! (QMP), for tests: the guest asks over the control socket, the emulator
//! tells QEMU to remove its `vfio-user-pci` device (`device_del`, which
//! the guest acknowledges through ACPI, after which QEMU disconnects) or
//! to add it again (`device_add`, which makes QEMU connect to the
//! emulator's socket once more).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The QEMU id of the device (`-device ...,id=gaudi`).
pub const DEVICE_ID: &str = "gaudi";

/// Where QEMU's monitor and the emulator's own socket are.
pub struct Qmp {
    pub monitor: PathBuf,
    pub socket: PathBuf,
}

impl Qmp {
    /// Run one QMP command (a JSON object) in a fresh monitor session:
    /// `Ok` on its "return", `Err` with QEMU's error otherwise.
    fn execute(&self, command: &str) -> Result<(), String> {
        let s = UnixStream::connect(&self.monitor)
            .map_err(|e| format!("QMP {}: {e}", self.monitor.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut out = s.try_clone().map_err(|e| e.to_string())?;
        let mut lines = BufReader::new(s).lines();
        // The greeting, then capabilities negotiation, then the command;
        // events may come in between.
        let mut reply = || -> Result<String, String> {
            loop {
                let l = lines
                    .next()
                    .ok_or("QMP: connection closed")?
                    .map_err(|e| format!("QMP: {e}"))?;
                if !l.contains("\"event\"") {
                    return Ok(l);
                }
            }
        };
        reply()?;
        for c in [r#"{"execute":"qmp_capabilities"}"#, command] {
            writeln!(out, "{c}").map_err(|e| format!("QMP: {e}"))?;
            let r = reply()?;
            if !r.contains("\"return\"") {
                return Err(format!("QMP: {c}: {r}"));
            }
        }
        Ok(())
    }

    /// Ask QEMU to remove the device (the guest's ACPI eject follows).
    pub fn unplug(&self) -> Result<(), String> {
        self.execute(&format!(
            r#"{{"execute":"device_del","arguments":{{"id":"{DEVICE_ID}"}}}}"#
        ))
    }

    /// Ask QEMU to add the device again, connected to this emulator.
    pub fn plug(&self) -> Result<(), String> {
        let path = self.socket.to_str().ok_or("socket path is not UTF-8")?;
        if path.contains(['"', '\\']) {
            return Err("socket path needs JSON escaping".into());
        }
        self.execute(&format!(
            r#"{{"execute":"device_add","arguments":{{"driver":"vfio-user-pci","id":"{DEVICE_ID}","socket":{{"path":"{path}","type":"unix"}}}}}}"#
        ))
    }
}
