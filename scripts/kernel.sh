#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Prepare and build the pinned kernel with the overlay.
#
#   kernel.sh source        extract the pinned source (once) and apply the overlay
#   kernel.sh config        write .config from tinyconfig + the fragments
#   kernel.sh build         build bzImage and modules (incremental)
#   kernel.sh make ARGS...  run make in the kernel build directory
#
# FLAVOR=debug (the default) adds kernel/configs/debug.config (KASAN, lockdep,
# kmemleak); FLAVOR=release builds without it.

. "$(dirname "$0")/lib.sh"

FLAVOR=${FLAVOR:-debug}
KSRC=$CACHE/linux/$KVER_PIN/src
[ -f "$ENVROOT/.toolchain" ] || die "build environment missing: run scripts/setup-env.sh"
KOUT=$CACHE/linux/$KVER_PIN/build-$FLAVOR-$(sha256sum <"$ENVROOT/.toolchain" | cut -c1-12)
FRAGMENTS="$TOP/kernel/configs/gaudi.config"
[ "$FLAVOR" = debug ] && FRAGMENTS="$FRAGMENTS $TOP/kernel/configs/debug.config"
# One job more than CPUs keeps them busy while a job waits for the disk.
JOBS=${JOBS:-$(($(nproc) + 1))}
export KSRC KOUT

# Rust is always built through clippy-driver (it compiles and lints in one
# pass), so the lints cost no second build; CLIPPY=0 turns this off.
CLIPPY=${CLIPPY:-1}
kmake() {
	in_env make -C "$KSRC" O="$KOUT" LLVM=1 CLIPPY="$CLIPPY" -j"$JOBS" "$@"
}

do_source() {
	if [ ! -e "$KSRC/.extracted" ]; then
		local tar=$ENVROOT/usr/src/$KPKG.tar.xz
		[ -f "$tar" ] || die "$tar missing: the build environment has no $KPKG"
		log "extracting $KPKG $KVER_PIN"
		rm -rf "$KSRC.tmp"
		mkdir -p "$KSRC.tmp"
		tar -C "$KSRC.tmp" --strip-components=1 -xf "$tar"
		rm -rf "$KSRC"
		mv "$KSRC.tmp" "$KSRC"
		echo "$KVER_PIN" >"$KSRC/.extracted"
	fi
	"$TOP/scripts/overlay.sh" "$KSRC"
}

do_config() {
	mkdir -p "$KOUT"
	local stamp=$KOUT/.fragments
	local want
	want=$(cat $FRAGMENTS | sha256sum)
	if [ -f "$KOUT/.config" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	log "configuring ($FLAVOR): tinyconfig + $(echo $FRAGMENTS | xargs -n1 basename | xargs)"
	kmake tinyconfig >/dev/null
	# shellcheck disable=SC2086
	in_env sh -c "cd '$KOUT' && '$KSRC/scripts/kconfig/merge_config.sh' -m .config $FRAGMENTS" >/dev/null
	kmake olddefconfig >/dev/null
	# Kconfig silently drops what it cannot satisfy: check every symbol.
	local bad=0 line sym val got
	while read -r line; do
		case "$line" in
		CONFIG_*=*) sym=${line%%=*} val=${line#*=} ;;
		'# CONFIG_'*' is not set') sym=${line#\# } sym=${sym%% *} val=n ;;
		*) continue ;;
		esac
		got=$(grep -E "^$sym=|^# $sym is not set" "$KOUT/.config" || true)
		case "$got" in
		"$sym=$val") ;;
		"# $sym is not set") [ "$val" = n ] || { echo "  $sym: wanted $val, not set" >&2; bad=1; } ;;
		*) echo "  $sym: wanted $val, got '${got#*=}'" >&2; bad=1 ;;
		esac
	done < <(cat $FRAGMENTS)
	[ $bad = 0 ] || die "kernel config does not hold the fragment (see above)"
	echo "$want" >"$stamp"
}

do_build() {
	do_source
	do_config
	log "building kernel ($FLAVOR) in $KOUT"
	local rc=$KOUT/.build-rc
	rm -f "$rc"
	# Clippy lints an object when it is compiled. For the verdict on our
	# code to be a real check of the current sources, the objects of ours
	# whose sources have no verdict yet are removed, so this build compiles
	# and lints them; its warnings in our files become the verdict.
	local drv_key crate_key lint_drv=0 lint_crate=0
	clippy_keys
	if [ "$CLIPPY" = 1 ]; then
		[ -e "$KOUT/clippy-drv-$drv_key" ] || {
			lint_drv=1
			rm -f "$KOUT"/drivers/infiniband/hw/gaudi/*.o "$KOUT"/drivers/net/ethernet/habana/*/*.o
		}
		[ -e "$KOUT/clippy-crate-$crate_key" ] || { lint_crate=1; rm -f "$KOUT/rust/kernel.o"; }
	fi
	# Full log in build.log; warnings, errors and our own files on screen.
	{ kmake bzImage modules 2>&1; echo $? >"$rc"; } | tee "$KOUT/build.log" |
		grep -E --line-buffered 'warning:|error:|Error|hw/gaudi/|ethernet/habana/|rust/kernel/rdma' >&2 || true
	[ "$(cat "$rc")" = 0 ] || die "kernel build failed, see $KOUT/build.log"
	[ $lint_drv = 1 ] && lint_verdict 'drivers/(infiniband/hw/gaudi|net/ethernet/habana)/' >"$KOUT/clippy-drv-$drv_key"
	[ $lint_crate = 1 ] && lint_verdict "$(cd "$TOP" && {
		find rust -name '*.rs'
		sed -n 's|^+++ b/\(rust/.*\.rs\)$|\1|p' kernel/patches/*.patch
	} | sort -u | paste -sd'|')" >"$KOUT/clippy-crate-$crate_key"
	return 0
}

# The warnings and errors of build.log (each with the lines that follow it)
# that point into files matching the pattern $1, or "clean".
lint_verdict() {
	awk -v pat="$1" '
		/^(warning|error)/ { if (blk ~ pat) { out = out blk; bad = 1 } blk = $0 "\n"; next }
		blk != "" { blk = blk $0 "\n" }
		END { if (blk ~ pat) { out = out blk; bad = 1 } if (bad) printf "%s", out; else print "clean" }
	' "$KOUT/build.log"
}

case "${1:-build}" in
source) do_source ;;
config) do_source && do_config ;;
build) do_build ;;
make) shift && kmake "$@" ;;
path) echo "$KOUT" ;;
*) die "usage: kernel.sh source|config|build|make ARGS|path" ;;
esac
