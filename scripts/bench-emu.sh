#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Emulator-to-emulator RDMA WRITE bandwidth (a benchmark: prints figures).

. "$(dirname "$0")/lib.sh"

"$TOP/scripts/setup-env.sh"
cargo_env build --release --quiet --bins --examples
in_env "$CACHE/cargo-target/release/examples/bench" "$CACHE/cargo-target/release/gaudi-emu" "${BENCH_SECONDS:-2}"
