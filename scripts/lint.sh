#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
#   lint.sh rustfmt        format the overlay's Rust files and the tools
#   lint.sh rustfmtcheck   fail if anything is not formatted
#   lint.sh clippy         build (always with CLIPPY=1) and show clippy's verdict on our code

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
*) die "usage: lint.sh rustfmt|rustfmtcheck|clippy" ;;
esac
