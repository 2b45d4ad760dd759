#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The device's rdma-core provider (tools/rdma-core), built inside Debian's
# rdma-core source package of the same version as the environment's binary
# libibverbs: a provider binds to libibverbs' private ABI
# (IBVERBS_PRIVATE_<n>), so the two must not differ by a single revision.
#
#   rdma-core.sh source   fetch and unpack the source (once), apply the overlay
#   rdma-core.sh build    configure (once) and build the provider and
#                         pyverbs' dma-buf and MR modules (incremental)
#   rdma-core.sh path     the build directory
#   rdma-core.sh tree     the source tree
#   rdma-core.sh pyverbs  the pyverbs modules built
#
# Only the provider, the pyverbs modules the project patches (dma-buf
# allocation through udmabuf where no GPU is, and DmaBufMR; see
# tools/rdma-core/patches; the guest puts them over Debian's) and what they
# link against are built; the man pages, the rest of pyverbs and the other
# providers are not.

. "$(dirname "$0")/lib.sh"

RC=$CACHE/rdma-core/$RDMA_CORE_VER
RSRC=$RC/src
RBUILD=$RC/build
# The pyverbs modules built (ninja targets), named as Python names extension
# modules
PYVERBS_MODULES="dmabuf mr"
pyso() {
	local abi m
	abi=$(in_env python3 -c 'import sysconfig; print(sysconfig.get_config_var("SOABI"))')
	for m in $PYVERBS_MODULES; do
		echo "$m.$abi"
	done
}
CMAKE_FLAGS="-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENABLE_WERROR=1 -DNO_MAN_PAGES=1
-DENABLE_STATIC=0 -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu
-DCMAKE_INSTALL_SYSCONFDIR=/etc"

do_source() {
	local have
	have=$(in_env dpkg-query -W -f '${Version}' libibverbs1 2>/dev/null) ||
		die "libibverbs1 is not installed in the build environment"
	[ "$have" = "$RDMA_CORE_VER" ] ||
		die "the environment's libibverbs1 is $have but the provider is pinned to rdma-core $RDMA_CORE_VER (RDMA_CORE_VER in scripts/lib.sh); a provider must be built from the source of the libibverbs it loads into"
	if [ ! -e "$RSRC/.unpacked" ]; then
		log "fetching Debian's rdma-core $RDMA_CORE_VER source"
		rm -rf "$RC"
		mkdir -p "$RC/dl"
		# The upstream tarball and Debian's changes, checked by apt against the
		# Sources index; unpacked and patched here (quilt format 3.0), which
		# needs no .dsc (a mirror that serves none is still enough).
		(cd "$RC/dl" && in_env apt-get source -q --download-only --tar-only "rdma-core=$RDMA_CORE_VER" &&
			in_env apt-get source -q --download-only --diff-only "rdma-core=$RDMA_CORE_VER") \
			>"$RC/fetch.log" 2>&1 ||
			die "cannot fetch the source package rdma-core=$RDMA_CORE_VER (deb-src of $SUITE), see $RC/fetch.log"
		rm -rf "$RSRC.tmp"
		mkdir -p "$RSRC.tmp"
		tar -C "$RSRC.tmp" --strip-components=1 -xzf "$RC/dl/rdma-core_${RDMA_CORE_VER%-*}.orig.tar.gz"
		tar -C "$RSRC.tmp" -xJf "$RC/dl/rdma-core_$RDMA_CORE_VER.debian.tar.xz"
		while read -r p; do
			case "$p" in '' | '#'*) continue ;; esac
			patch -s -p1 -d "$RSRC.tmp" <"$RSRC.tmp/debian/patches/$p" >>"$RC/fetch.log" 2>&1 ||
				die "Debian's patch $p does not apply, see $RC/fetch.log"
		done <"$RSRC.tmp/debian/patches/series"
		mv "$RSRC.tmp" "$RSRC"
		echo "$RDMA_CORE_VER" >"$RSRC/.unpacked"
	fi
	OVERLAY_ROOT=tools/rdma-core OVERLAY_DIRS="kernel-headers providers" OVERLAY_PATCHES=patches \
		"$TOP/scripts/overlay.sh" "$RSRC"
}

do_build() {
	do_source
	if [ ! -f "$RBUILD/build.ninja" ] || [ "$(cat "$RBUILD/.flags" 2>/dev/null)" != "$CMAKE_FLAGS" ]; then
		log "configuring rdma-core $RDMA_CORE_VER"
		rm -rf "$RBUILD"
		mkdir -p "$RBUILD"
		# shellcheck disable=SC2086
		in_env cmake -S "$RSRC" -B "$RBUILD" $CMAKE_FLAGS >"$RC/configure.log" 2>&1 ||
			{ rm -f "$RBUILD/build.ninja"; die "configuring rdma-core failed, see $RC/configure.log"; }
		grep -q "build python/pyverbs/$(pyso | head -n 1).so" "$RBUILD/build.ninja" ||
			{ rm -f "$RBUILD/build.ninja"; die "rdma-core configured without pyverbs (cython3, python3-dev), see $RC/configure.log"; }
		echo "$CMAKE_FLAGS" >"$RBUILD/.flags"
	fi
	# shellcheck disable=SC2046
	in_env ninja -C "$RBUILD" gaudi $(pyso) >"$RC/build.log" 2>&1 ||
		{ cat "$RC/build.log" >&2; die "building the provider failed"; }
	# Warning-free under rdma-core's own flags (-Werror is on): the log
	# would show any that a future flag turned into a non-error.
	if grep -q 'warning:' "$RC/build.log"; then
		grep 'warning:' "$RC/build.log" >&2
		die "the provider builds with warnings"
	fi
}

case "${1:-}" in
source) do_source ;;
build) do_build ;;
path) echo "$RBUILD" ;;
pyverbs) pyso | sed "s|^|$RBUILD/python/pyverbs/|; s|\$|.so|" ;;
tree) echo "$RSRC" ;;
*) die "usage: rdma-core.sh source|build|path|tree|pyverbs" ;;
esac
