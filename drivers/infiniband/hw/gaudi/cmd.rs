// SPDX-License-Identifier: GPL-2.0

//! The command interface: QP and CQ contexts, key revocation, the device memory fill and the
//! GID tables.
//!
//! Documentation/infiniband/gaudi/device-model-1.rst ("Command interface") is the reference. A
//! command writes its argument to `CMD_DATA`, starts with the write of `CMD` and has finished
//! when a following read of `CMD_STATUS` returns; one is outstanding at a time.

use kernel::{
    device,
    io::{
        register::Array,
        Io, //
    },
    prelude::*,
    sync::{
        new_mutex,
        Mutex, //
    },
};
use zerocopy::Immutable;

use crate::{
    regs,
    shared::Bar0, //
};

// Opcodes (`CMD.opcode`) of the commands the driver still gives model 1.5's device.
/// (1.2) Fill a range of device memory with a 32-bit pattern.
pub(crate) const CMD_DEVMEM_FILL: u32 = 0x07;
/// (1.3) Write an entry of a port's GID table.
pub(crate) const CMD_GID_SET: u32 = 0x08;

/// The device's command interface: serialises commands (one outstanding at a time).
#[pin_data]
pub(crate) struct Commands {
    #[pin]
    lock: Mutex<()>,
}

impl Commands {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            lock <- new_mutex!(()),
        })
    }

    /// Run command `op` on object `index` of port index `port` of the device behind `bar`
    /// (`ENODEV` once it is unmapped),
    /// with the argument `arg` (written to `CMD_DATA`, `()` for none); the result is read into
    /// `out`. The device reports errors as positive errno values; those the model does not
    /// define are logged (about `dev`) and become `EIO`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run<A, R>(
        &self,
        dev: &device::Device,
        bar: &Bar0,
        op: u32,
        port: u32,
        index: u32,
        arg: &A,
        out: &mut R,
    ) -> Result
    where
        A: IntoBytes + Immutable,
        R: FromBytes + IntoBytes,
    {
        let words = |bytes: usize| bytes.div_ceil(4);
        if words(size_of::<A>()) > regs::CMD_DATA_WORDS
            || words(size_of::<R>()) > regs::CMD_DATA_WORDS
        {
            return Err(EINVAL);
        }
        let cmd = regs::CMD::zeroed()
            .try_with_opcode(op)?
            .try_with_port(port)?
            .try_with_index(index)?;
        // The lock first: the BAR guard is an RCU read-side section, where nothing may sleep.
        let _guard = self.lock.lock();
        let bar = bar.try_access().ok_or(ENODEV)?;
        for (i, chunk) in arg.as_bytes().chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            bar.try_write(
                regs::CMD_DATA::try_at(i).ok_or(EINVAL)?,
                regs::CMD_DATA::from_raw(u32::from_le_bytes(w)),
            )?;
        }
        bar.write_reg(cmd);
        let status = bar.read(regs::CMD_STATUS).into_raw();
        if status != 0 {
            // Only the codes of the device model are passed on; anything else is the device
            // misbehaving.
            return Err(match status {
                1 => EPERM,
                2 => ENOENT,
                5 => EIO,
                16 => EBUSY,
                17 => EEXIST,
                22 => EINVAL,
                95 => EOPNOTSUPP,
                _ => {
                    kernel::ratelimited!(dev_warn!(
                        dev,
                        "command {:#x}: unknown status {:#x}\n",
                        op,
                        status
                    ));
                    EIO
                }
            });
        }
        for (i, chunk) in out.as_mut_bytes().chunks_mut(4).enumerate() {
            let w = bar
                .try_read(regs::CMD_DATA::try_at(i).ok_or(EINVAL)?)?
                .into_raw()
                .to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        Ok(())
    }
}
