# SPDX-License-Identifier: GPL-2.0
# Common settings for the project's scripts. Sourced, not run.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${GAUDI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gaudi-rdma}

# The pinned kernel: Debian's linux-source-7.3 from trixie-backports.
KPKG=linux-source-7.3
KVER_PIN=${KVER_PIN:-7.3.4-1~bpo13+1}

# Debian suites of the build environment.
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie

# rdma-core: the binary packages (libibverbs, its tools, perftest's
# libibverbs programs, pyverbs) and the source package the device's provider
# is built in must be one version (scripts/rdma-core.sh). pyverbs' dma-buf
# module is rebuilt from that source (cython3, python3-dev, libdrm-dev).
RDMA_CORE_VER=${RDMA_CORE_VER:-56.1-1}
RDMA_CORE_PKGS="libibverbs1=$RDMA_CORE_VER libibverbs-dev=$RDMA_CORE_VER ibverbs-providers=$RDMA_CORE_VER
ibverbs-utils=$RDMA_CORE_VER librdmacm1t64=$RDMA_CORE_VER python3-pyverbs=$RDMA_CORE_VER perftest"
ENV_PKGS="make gcc libc6-dev flex bison bc libelf-dev libssl-dev cpio kmod python3
xz-utils zstd rsync clang lld llvm libclang-dev bindgen busybox-static patch ca-certificates tshark
iproute2 ethtool dpkg-dev cmake ninja-build pkg-config libnl-3-dev libnl-route-3-dev libudev-dev
cython3 python3-dev libdrm-dev $RDMA_CORE_PKGS"
ENV_BPO_PKGS="rustc cargo rust-src rustfmt rust-clippy qemu-system-x86 $KPKG=$KVER_PIN"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# What went into the environment; setup-env.sh brings it up to date when
# this changes.
env_key() {
	printf '%s\n' "$SUITE" "$MIRROR" "$ENV_PKGS" "$ENV_BPO_PKGS" | sha256sum | cut -c1-16
}

ENVROOT=$CACHE/env/$SUITE

# Run a command inside the build environment, with the repository and the
# cache visible at the same paths. The mounts live in a private mount
# namespace and vanish with the command.
in_env() {
	[ -x "$ENVROOT/usr/bin/env" ] || die "build environment missing: run scripts/setup-env.sh"
	unshare --mount --propagation private -- /bin/bash -c '
		set -e
		R=$1; shift
		mount --rbind /proc "$R/proc"
		mount --rbind /sys "$R/sys"
		mount --rbind /dev "$R/dev"
		for d in "$TOP" "$CACHE" /tmp; do
			mkdir -p "$R$d"
			mount --bind "$d" "$R$d"
		done
		# Trust what the host trusts (site proxies with their own CA), except
		# while apt runs (IN_ENV_NO_CA=1): upgrading ca-certificates rewrites
		# the file, which a bind mount would keep busy.
		ca=/etc/ssl/certs/ca-certificates.crt
		if [ -z "${IN_ENV_NO_CA:-}" ] && [ -f "$ca" ] && [ -f "$R$ca" ]; then
			mount --bind "$ca" "$R$ca"
		fi
		exec chroot "$R" /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$PWD" "$@"
	' in_env "$ENVROOT" "$@"
}


# cargo from the build environment, for the emulator and test programs.
cargo_env() {
	# The test library's method table comes from the pinned kernel's uAPI.
	(cd "$TOP/tools/testing" && in_env env CARGO_HOME="$CACHE/cargo-home" \
		CARGO_TARGET_DIR="$CACHE/cargo-target" \
		GAUDI_UAPI_CORE_INCLUDE="$CACHE/linux/$KVER_PIN/src/include/uapi/rdma" cargo "$@")
}
# Keys of our kernel sources, for the clippy verdicts (kernel.sh): the driver
# and its uAPI, and our part of the kernel crate with the kernel patches.
clippy_keys() {
	drv_key=$(cd "$TOP" && find drivers include -type f | sort | xargs cat | sha256sum | cut -c1-16)
	crate_key=$(cd "$TOP" && { cat kernel/patches/*; find rust -type f | sort | xargs cat; } | sha256sum | cut -c1-16)
}
# Kernel parameters that give a guest its clock: under TCG a guest's TSC
# counts at the host's TSC frequency, which the guest cannot calibrate (no
# PIT, HPET or ACPI timer to measure it against), so it keeps time by 4 ms
# jiffies; told the frequency, it keeps time by the TSC, as perftest's
# cycle clock needs. Empty where the host's TSC frequency is not constant,
# or KVM gives the guest its own clock.
tsc_args() {
	local khz
	[ "${ACCEL:-tcg}" = tcg ] && grep -q -w constant_tsc /proc/cpuinfo || return 0
	khz=$(awk -F: '/^cpu MHz/ { printf "%d", $2 * 1000; exit }' /proc/cpuinfo)
	[ "${khz:-0}" -gt 0 ] && echo "tsc_early_khz=$khz tsc=reliable"
	return 0
}
export TOP CACHE
