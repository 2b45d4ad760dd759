#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# One VM session: start the Gaudi2 emulator, boot QEMU with it attached
# over vfio-user, wait for the guest to power off (or kill it after a
# timeout). Runs inside the build environment (QEMU >= 10.1).
#
# usage: session.sh OUTDIR MODE TESTS TIMEOUT -- EMULATOR-ARGS...|none
# env:   KERNEL INITRD EMU ACCEL (tcg|kvm) MEM (MiB) CPUS (1 if empty)
#        CONSOLE (1: console to stdout)
#        QEMU_EXTRA (more QEMU arguments, e.g. a NIC on a port's link)
# Writes OUTDIR/console.log, OUTDIR/results.log, OUTDIR/emu.log.
# The guest's third serial port (ttyS2) is the emulator's control socket;
# QEMU's monitor (QMP) is OUTDIR/qmp.sock, which the emulator uses to unplug
# and plug its device (QEMU id "gaudi") when a guest test asks.
# Exit status: 0 if the guest powered off by itself, 124 on timeout.

set -euo pipefail
OUT=$1 MODE=$2 TESTS=$3 TIMEOUT=$4
shift 4
[ "${1:-}" = -- ] && shift
ACCEL=${ACCEL:-tcg}
MEM=${MEM:-512}

mkdir -p "$OUT"
rm -f "$OUT/dev.sock" "$OUT/ctrl.sock" "$OUT/qmp.sock" "$OUT/console.log" "$OUT/results.log" "$OUT/emu.log"
: >"$OUT/results.log"

# EMULATOR-ARGS "none": a VM without a Gaudi2 (a software RoCE peer).
if [ "${1:-}" = none ]; then
	gaudi=() ctrl=(-serial null)
else
	"$EMU" --socket "$OUT/dev.sock" --control "$OUT/ctrl.sock" --qmp "$OUT/qmp.sock" "$@" >"$OUT/emu.log" 2>&1 &
	emu=$!
	cleanup() { kill "$emu" 2>/dev/null || true; wait "$emu" 2>/dev/null || true; }
	trap cleanup EXIT
	for _ in $(seq 100); do
		[ -S "$OUT/dev.sock" ] && [ -S "$OUT/ctrl.sock" ] && break
		kill -0 "$emu" 2>/dev/null || { cat "$OUT/emu.log" >&2; echo "emulator exited" >&2; exit 1; }
		sleep 0.05
	done
	[ -S "$OUT/dev.sock" ] || { echo "emulator did not create its socket" >&2; exit 1; }
	gaudi=(-device "{\"driver\":\"vfio-user-pci\",\"id\":\"gaudi\",\"socket\":{\"path\":\"$OUT/dev.sock\",\"type\":\"unix\"}}")
	ctrl=(-serial "unix:$OUT/ctrl.sock")
fi

case "$ACCEL" in
kvm) accel=(-accel kvm -cpu host) ;;
# Without 5-level paging: while the guest identifies its boot CPU with
# interrupts on, the CPU feature bits are briefly cleared, KASAN then
# takes the 5-level direct map for a wild address, and an interrupt in
# that window (a wide one under TCG) reports a bug in handle_edge_irq.
# Without the fast-string features (ERMS, FSRM, FSRS, FZRM): with them the
# kernel copies and clears with "rep movsb"/"rep stosb", which TCG runs a
# byte an iteration; without, with 8-byte moves. Boots and process starts
# take 10-15 % less CPU; no code of ours depends on these features.
*) accel=(-accel tcg -cpu max,la57=off,-erms,-fsrm,-fsrs,-fzrm) ;;
esac

if [ "${CONSOLE:-0}" = 1 ]; then
	console=(-serial stdio)
else
	console=(-serial "file:$OUT/console.log")
fi

append="console=ttyS0 panic=-1 oops=panic loglevel=6 log_buf_len=8M gaudi.mode=$MODE"
[ -n "$TESTS" ] && append="$append gaudi.tests=$TESTS"
# Extra kernel parameters (KUnit filters, what the guest tests expect).
# KUnit runs at boot only when they select tests (kunit.filter_glob).
case " ${KERNEL_ARGS:-} " in
*" kunit.filter_glob="*) ;;
*) append="$append kunit.enable=0" ;;
esac
# ACPI (a second CPU, PCI hotplug) only when asked for (acpi=force): its
# tables take the guest about 10 s to load under TCG; without it the
# guest boots from the MP table, with one CPU.
case " ${KERNEL_ARGS:-} " in
*" acpi="*) ;;
*) append="$append acpi=off" ;;
esac
append="$append ${KERNEL_ARGS:-}"

status=0
timeout --kill-after=5 "$TIMEOUT" qemu-system-x86_64 \
	"${accel[@]}" -m "${MEM}M" -smp "${CPUS:-1}" \
	-object "memory-backend-memfd,id=mem,size=${MEM}M,share=on" \
	-machine pc,memory-backend=mem \
	-display none -monitor none -qmp "unix:$OUT/qmp.sock,server=on,wait=off" -no-reboot -nic none \
	"${console[@]}" -serial "file:$OUT/results.log" "${ctrl[@]}" \
	-kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
	"${gaudi[@]}" ${QEMU_EXTRA:-} </dev/null || status=$?
exit "$status"
