#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build everything, boot the VM with the emulated Gaudi2, load gaudi_ib,
# show the device and the driver's log, power off.

. "$(dirname "$0")/lib.sh"

vars=$("$TOP/scripts/build.sh")
eval "$vars"
export KERNEL INITRD EMU
log "booting (accelerator: ${ACCEL:-tcg})"
t0=$SECONDS
CONSOLE=1 KERNEL_ARGS=$(tsc_args) in_env "$TOP/tools/testing/vm/session.sh" "$CACHE/vm/run" run "" "${VM_TIMEOUT:-300}" -- ||
	die "VM session failed (status $?); emulator log: $CACHE/vm/run/emu.log"
log "VM session took $((SECONDS - t0)) s"
