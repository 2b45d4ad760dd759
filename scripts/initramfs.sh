#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Assemble the guest initramfs: busybox, our init and guest tests, the
# driver modules. Rebuilt only when one of its inputs changed.
#
# usage: initramfs.sh KBUILD_DIR OUTPUT

. "$(dirname "$0")/lib.sh"

KOUT=${1:?usage: initramfs.sh KBUILD_DIR OUTPUT}
OUT=${2:?usage: initramfs.sh KBUILD_DIR OUTPUT}
# The driver of the emulated function (the chip's owner), the NIC core, the
# Ethernet driver and the RDMA driver.
MODS="$KOUT/drivers/net/ethernet/habana/gaudi_pci/gaudi_pci.ko"
MODS="$MODS $KOUT/drivers/net/ethernet/habana/gaudi_cn/gaudi_cn.ko"
MODS="$MODS $KOUT/drivers/net/ethernet/habana/gaudi_en/gaudi_en.ko"
MODS="$MODS $KOUT/drivers/infiniband/hw/gaudi/gaudi_ib.ko"
BUSYBOX=$ENVROOT/usr/bin/busybox
VERBS=$CACHE/cargo-target/release/gaudi-verbs-test
RDMA_TOOL=$ENVROOT/usr/bin/rdma
ETHTOOL=$ENVROOT/usr/sbin/ethtool

# The software RoCE peer of write_to_rxe: the kernel's rxe and a libibverbs
# program (Debian's rdma-core) built in the environment.
RXE_MODS="net/ipv4/udp_tunnel.ko net/ipv6/ip6_udp_tunnel.ko drivers/infiniband/sw/rxe/rdma_rxe.ko"
RXE_PEER_SRC=$TOP/tools/testing/rxe-peer/rxe-peer.c
# Keyed by the source's content: a checkout's file times say nothing about
# a binary another checkout left in the cache.
RXE_PEER=$CACHE/rxe-peer-$(sha256sum "$RXE_PEER_SRC" | cut -c1-16)
RXE_PROVIDER=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so

# The device's rdma-core provider (scripts/rdma-core.sh) and the unmodified
# programs of Debian's rdma-core and perftest that drive it.
PROVIDER=$("$TOP/scripts/rdma-core.sh" path)/lib/libgaudi.so.1
# rdma-core's test suite (pyverbs), from the same source tree, with the
# project's patches (tools/rdma-core/patches).
RDMA_TESTS=$("$TOP/scripts/rdma-core.sh" tree)/tests
# pyverbs' modules the project patches, from that source (the guest puts
# them over Debian's).
mapfile -t PYVERBS_MODS < <("$TOP/scripts/rdma-core.sh" pyverbs)
LIBDIR=/usr/lib/x86_64-linux-gnu
RDMA_PROGRAMS="/usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/ib_write_bw /usr/bin/ib_write_lat"

for m in $MODS; do
	[ -f "$m" ] || die "$m missing: build the kernel first"
done
[ -e "$PROVIDER" ] || die "$PROVIDER missing: build the provider first (scripts/rdma-core.sh build)"
if [ ! -x "$RXE_PEER" ]; then
	rm -f "$CACHE"/rxe-peer "$CACHE"/rxe-peer-*
	in_env gcc -O2 -Wall -Werror -o "$RXE_PEER" "$RXE_PEER_SRC" -libverbs ||
		die "building rxe-peer failed"
fi
for m in "${PYVERBS_MODS[@]}"; do
	[ -f "$m" ] || die "$m missing: build the provider first (scripts/rdma-core.sh build)"
done
[ -f "$RDMA_TESTS/run_tests.py" ] || die "$RDMA_TESTS missing: fetch the rdma-core source first (scripts/rdma-core.sh source)"
[ -x "$BUSYBOX" ] || die "busybox missing from the build environment"
[ -x "$VERBS" ] || die "$VERBS missing: build the test programs first"
[ -x "$RDMA_TOOL" ] || die "rdma (iproute2) missing from the build environment"
[ -x "$ETHTOOL" ] || die "ethtool missing from the build environment"

# shellcheck disable=SC2206
inputs=($MODS "$BUSYBOX" "$VERBS" "$RDMA_TOOL" "$ETHTOOL" "$RXE_PEER" "$(readlink -f "$PROVIDER")" "${PYVERBS_MODS[@]}" "$KOUT/include/config/kernel.release" "$TOP/tools/testing/vm/init"
	"$TOP/tools/testing/guest" "$RDMA_TESTS" "$0")
if [ -f "$OUT" ] && [ -z "$(find "${inputs[@]}" -newer "$OUT" -print -quit)" ]; then
	exit 0
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,etc,lib/modules,lib/gaudi,tests}
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
	[ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
install -m 0755 "$TOP/tools/testing/vm/init" "$root/init"
cp "$TOP/tools/testing/guest/guest-lib.sh" "$TOP/tools/testing/guest/pyverbs-run.py" \
	"$TOP/tools/testing/guest/pyverbs-skips.txt" "$root/lib/gaudi/"
cp -r "$RDMA_TESTS" "$root/lib/gaudi/rdma-core-tests"
# Compiled here with the environment's Python, the guest's: not in every run.
in_env python3 -m compileall -q "$root/lib/gaudi/rdma-core-tests" >/dev/null
mkdir -p "$root/lib/gaudi/pyverbs"
cp "${PYVERBS_MODS[@]}" "$root/lib/gaudi/pyverbs/"
cp "$TOP"/tools/testing/guest/tests/*.sh "$root/tests/"
# shellcheck disable=SC2086
cp $MODS "$root/lib/modules/"
cp "$KOUT/include/config/kernel.release" "$root/etc/kernel-release"

# Dynamically linked programs of the build environment (and the test programs
# built there), with the shared libraries they need.
# PATH is as the environment sees it: its own files, or the cache (mounted at
# the same place).
add_program() { # PATH DEST
	local src=$ENVROOT$1 lib
	case "$1" in "$CACHE"/*) src=$1 ;; esac
	mkdir -p "$root$(dirname "$2")"
	cp "$src" "$root$2"
	for lib in $(in_env ldd "$1" | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$ENVROOT$lib" "$root$lib"
	done
}
add_program /usr/bin/rdma /usr/bin/rdma
# iproute2's ip (network namespaces, addresses of both families; busybox's
# shell runs its own applet for "ip", so guest-lib.sh points the name at
# this one), and ethtool.
add_program /usr/bin/ip /usr/bin/ip
add_program /usr/sbin/ethtool /usr/sbin/ethtool
add_program "$VERBS" /usr/bin/gaudi-verbs-test
add_program "$RXE_PEER" /usr/bin/rxe-peer
add_program "$RXE_PROVIDER" "$RXE_PROVIDER"
mkdir -p "$root/etc/libibverbs.d"
cp "$ENVROOT/etc/libibverbs.d/rxe.driver" "$root/etc/libibverbs.d/"
# Loaded into the programs' libibverbs (Debian's): the provider needs
# nothing they do not load already.
cp "$(readlink -f "$PROVIDER")" "$root$LIBDIR/libgaudi.so.1"
mkdir -p "$root$LIBDIR/libibverbs"
ln -s ../libgaudi.so.1 "$root$LIBDIR/libibverbs/libgaudi-rdmav34.so"
echo "driver gaudi" >"$root/etc/libibverbs.d/gaudi.driver"
for p in $RDMA_PROGRAMS; do
	add_program "$p" "$p"
done
for m in $RXE_MODS; do
	cp "$KOUT/$m" "$root/lib/modules/"
done

# cpio comes from the build environment (Debian 12 does not ship it by default).
in_env sh -c "cd '$root' && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0" >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "initramfs: $(du -h "$OUT" | cut -f1)"
