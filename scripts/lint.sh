#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
#   lint.sh rustfmt        format the overlay's Rust files and the tools
#   lint.sh rustfmtcheck   fail if anything is not formatted
#   lint.sh clippy         build (always with CLIPPY=1) and show clippy's verdict on our code
#   lint.sh checkpatch-provider
#                          the rdma-core provider's sources through the kernel's
#                          checkpatch.pl as rdma-core's CI runs it

. "$(dirname "$0")/lib.sh"

KSRC=$CACHE/linux/$KVER_PIN/src
rust_files() { cd "$TOP" && find drivers rust -name '*.rs' 2>/dev/null | sort; }

case "${1:-}" in
rustfmt | rustfmtcheck)
	check=""
	[ "$1" = rustfmtcheck ] && check=--check
	# The kernel's .rustfmt.toml applies to the overlay files.
	files=$(rust_files)
	# shellcheck disable=SC2086
	(cd "$TOP" && in_env rustfmt $check --edition 2021 --config-path "$KSRC/.rustfmt.toml" $files)
	cargo_env fmt $check
	;;
clippy)
	# The kernel build runs clippy-driver on every Rust object (CLIPPY=1)
	# and recompiles ours whenever their sources have no verdict yet
	# (kernel.sh): the verdicts of the current sources.
	"$TOP/scripts/kernel.sh" build
	kout=$("$TOP/scripts/kernel.sh" path)
	clippy_keys
	bad=0
	for v in "$kout/clippy-drv-$drv_key" "$kout/clippy-crate-$crate_key"; do
		[ -e "$v" ] || die "no clippy verdict for the current sources: built with CLIPPY=0?"
		[ "$(cat "$v")" = clean ] || { cat "$v"; bad=1; }
	done
	[ $bad = 0 ] || die "clippy warnings in our code"
	echo "clippy: no warnings in the driver or our part of the kernel crate"
	;;
checkpatch-provider)
	# rdma-core's CI (buildlib/azp-checkpatch) ignores what does not apply to
	# user space: kernel types, negative errnos (libibverbs returns positive
	# ones), file paths, and its own list of constant structures.
	files=$(cd "$TOP" && find tools/rdma-core/providers -name '*.[ch]' | sort)
	# shellcheck disable=SC2086
	(cd "$TOP" && in_env perl "$KSRC/scripts/checkpatch.pl" --no-tree --show-types --terse \
		--ignore PREFER_KERNEL_TYPES,FILE_PATH_CHANGES,EXECUTE_PERMISSIONS,USE_NEGATIVE_ERRNO,CONST_STRUCT \
		-f $files)
	;;
*) die "usage: lint.sh rustfmt|rustfmtcheck|clippy|checkpatch-provider" ;;
esac
