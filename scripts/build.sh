#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Everything the VM needs, incrementally: build environment, kernel and
# module, emulator, initramfs. Prints the paths as shell assignments.

. "$(dirname "$0")/lib.sh"

t0=$SECONDS
"$TOP/scripts/setup-env.sh"
t1=$SECONDS
# The emulator and the test programs (and the host tests' binaries) build
# while the kernel does, at the lowest priority: they take the CPU time the
# kernel build leaves (its serial steps: configuration, linking). They
# need the kernel's uAPI headers, with the overlay.
"$TOP/scripts/kernel.sh" source
log "building the emulator and test programs (in the background)"
(
	nice -n 19 bash -c '. "$TOP/scripts/lib.sh"
		cargo_env build --release --quiet &&
		cargo_env test --release --no-run --quiet' >"$CACHE/tools-build.log" 2>&1
) &
tools=$!
"$TOP/scripts/kernel.sh" build
"$TOP/scripts/rdma-core.sh" build
t2=$SECONDS
KOUT=$("$TOP/scripts/kernel.sh" path)

wait "$tools" || { cat "$CACHE/tools-build.log" >&2; die "emulator or test program build failed"; }
EMU=$CACHE/cargo-target/release/gaudi-emu
[ -x "$EMU" ] || die "emulator build failed"
t3=$SECONDS

INITRD=$CACHE/initramfs-$(basename "$KOUT").cpio
"$TOP/scripts/initramfs.sh" "$KOUT" "$INITRD"
t4=$SECONDS
log "set-up $((t1 - t0)) s, kernel and provider (with the tools alongside) $((t2 - t1)) s, waiting for the tools $((t3 - t2)) s, initramfs $((t4 - t3)) s"

cat <<VARS
KOUT='$KOUT'
KERNEL='$KOUT/arch/x86/boot/bzImage'
INITRD='$INITRD'
EMU='$EMU'
VARS
