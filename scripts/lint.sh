#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
#   lint.sh rustfmt        format the overlay's Rust files and the tools
#   lint.sh rustfmtcheck   fail if anything is not formatted
#   lint.sh clippy         rebuild the kernel's Rust code with CLIPPY=1

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
	"$TOP/scripts/kernel.sh" source
	"$TOP/scripts/kernel.sh" make CLIPPY=1 drivers/infiniband/hw/gaudi/ rust/ 2>&1 |
		grep -E -A8 'warning|error' || echo "clippy: no warnings"
	;;
*) die "usage: lint.sh rustfmt|rustfmtcheck|clippy" ;;
esac
