#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the Debian trixie environment that holds the kernel toolchain
# (clang/lld/bindgen/rustc), QEMU with the vfio-user client, and the pinned
# kernel source. Debian 12's own clang (14) and QEMU (7.2) are too old.
#
# Idempotent: when the package list (lib.sh) changes, the environment is
# completed in place rather than rebuilt.

. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "set-up needs root (debootstrap, chroot, mounts)"

mkdir -p "$CACHE"
key=$(env_key)
if [ "$(cat "$ENVROOT/.complete" 2>/dev/null)" = "$key" ]; then
	log "build environment ready: $ENVROOT"
	exit 0
fi

avail_kb=$(df -Pk "$CACHE" | awk 'NR == 2 { print $4 }')
if [ ! -e "$ENVROOT/.bootstrapped" ] && [ "$avail_kb" -lt $((8 * 1024 * 1024)) ]; then
	die "need about 8 GiB free in $CACHE (environment, kernel source and build), have $((avail_kb / 1024)) MiB"
fi

host_pkgs=""
command -v debootstrap >/dev/null || host_pkgs="$host_pkgs debootstrap"
command -v unshare >/dev/null || host_pkgs="$host_pkgs util-linux"
if [ -n "$host_pkgs" ]; then
	log "installing on the host:$host_pkgs"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $host_pkgs >/dev/null
fi

if [ ! -e "$ENVROOT/.bootstrapped" ]; then
	rm -rf "$ENVROOT"
	mkdir -p "$ENVROOT"
	log "debootstrap $SUITE into $ENVROOT"
	debootstrap --variant=minbase "$SUITE" "$ENVROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
		die "debootstrap failed, see $CACHE/debootstrap.log"
	printf 'deb %s %s main\n' "$MIRROR" "$SUITE" "$MIRROR" "$SUITE-updates" \
		"$MIRROR" "$SUITE-backports" >"$ENVROOT/etc/apt/sources.list"
	printf 'APT::Install-Recommends "false";\n' >"$ENVROOT/etc/apt/apt.conf.d/90norecommends"
	touch "$ENVROOT/.bootstrapped"
fi

# The rdma-core source package (scripts/rdma-core.sh) comes from deb-src.
if ! grep -q '^deb-src ' "$ENVROOT/etc/apt/sources.list"; then
	printf 'deb-src %s %s main\n' "$MIRROR" "$SUITE" "$MIRROR" "$SUITE-updates" \
		>>"$ENVROOT/etc/apt/sources.list"
fi

# Install (or complete) the package set; apt-get skips what is there.
apt_env() { IN_ENV_NO_CA=1 in_env env DEBIAN_FRONTEND=noninteractive apt-get -q -y "$@"; }
# A run that stopped half way left packages to configure.
IN_ENV_NO_CA=1 in_env dpkg --configure -a >>"$CACHE/apt.log" 2>&1 || true
log "apt-get update"
apt_env update >/dev/null
log "installing toolchain from $SUITE"
# shellcheck disable=SC2086
apt_env install $ENV_PKGS >"$CACHE/apt.log" 2>&1 ||
	die "apt-get install failed (rdma-core is pinned to $RDMA_CORE_VER, RDMA_CORE_VER in scripts/lib.sh), see $CACHE/apt.log"
log "installing rustc, QEMU and $KPKG $KVER_PIN from $SUITE-backports"
# shellcheck disable=SC2086
apt_env install -t "$SUITE-backports" $ENV_BPO_PKGS >>"$CACHE/apt.log" 2>&1 ||
	die "cannot install $KPKG=$KVER_PIN (or rustc/QEMU) from $SUITE-backports; see $CACHE/apt.log"
apt_env clean

# The kernel build directory is keyed by these versions rather than by
# the package list: adding a tool must not force a kernel rebuild.
in_env sh -c 'rustc --version; clang --version | head -n 1; bindgen --version; ld.lld --version' \
	>"$ENVROOT/.toolchain"
cat "$ENVROOT/.toolchain" >&2
in_env qemu-system-x86_64 --version | head -n 1 >&2
echo "$key" >"$ENVROOT/.complete"
log "build environment ready: $ENVROOT"
