#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Everything the VM needs, incrementally: build environment, kernel and
# module, emulator, initramfs. Prints the paths as shell assignments.

. "$(dirname "$0")/lib.sh"

t0=$SECONDS
"$TOP/scripts/setup-env.sh"
t1=$SECONDS
"$TOP/scripts/kernel.sh" build
t2=$SECONDS
KOUT=$("$TOP/scripts/kernel.sh" path)

log "building the emulator"
cargo_env build --release --quiet
EMU=$CACHE/cargo-target/release/gaudi-emu
[ -x "$EMU" ] || die "emulator build failed"
t3=$SECONDS

INITRD=$CACHE/initramfs-$(basename "$KOUT").cpio
"$TOP/scripts/initramfs.sh" "$KOUT" "$INITRD"
t4=$SECONDS
log "set-up $((t1 - t0)) s, kernel $((t2 - t1)) s, emulator $((t3 - t2)) s, initramfs $((t4 - t3)) s"

cat <<VARS
KOUT='$KOUT'
KERNEL='$KOUT/arch/x86/boot/bzImage'
INITRD='$INITRD'
EMU='$EMU'
VARS
