# SPDX-License-Identifier: GPL-2.0
#
# gaudi-rdma: build the pinned kernel with the overlay, boot it under QEMU
# against the emulated Gaudi2, run the tests.
#
#   make run       set up, build, boot, load gaudi_ib, show the device
#   make check     set up, build, run every test (TAP)
#   make kernel    build kernel and module only (incremental)
#   make rdma-core build the device's rdma-core provider only (incremental)
#   make setup     build environment only
#   make rustfmt   format the Rust sources of the overlay and tools
#   make clippy    build the kernel Rust code with CLIPPY=1
#   make bench     driver benchmark: MR registration, post_send, two-VM WRITE bandwidth vs rxe
#   make fuzz      the uverbs fuzzer for long: FUZZ_CALLS (default 1000000) calls
#                  within FUZZ_SECONDS (default 3000), FUZZ_SEED (default: new)
#   make soak      1000 unbind/bind and rmmod/insmod cycles, and SOAK_SECONDS
#                  (default 3600) of mixed traffic with faults
#
# Variables: GAUDI_CACHE (default ~/.cache/gaudi-rdma), FLAVOR=debug|release,
# ACCEL=tcg|kvm, VM_TIMEOUT (seconds per VM session).

.PHONY: run check kernel rdma-core setup rustfmt rustfmtcheck clippy bench fuzz soak

run:
	@scripts/run.sh

check:
	@scripts/check.sh

setup:
	@scripts/setup-env.sh

kernel: setup
	@scripts/kernel.sh build

rdma-core: setup
	@scripts/rdma-core.sh build

rustfmt: setup
	@scripts/kernel.sh source
	@scripts/lint.sh rustfmt

rustfmtcheck: setup
	@scripts/kernel.sh source
	@scripts/lint.sh rustfmtcheck

clippy: setup
	@scripts/lint.sh clippy

# The benchmark (not a test): registration against bare pinning,
# post_send per WQE, two-VM WRITE bandwidth of Gaudi2 against rxe.
bench:
	@BENCH=1 scripts/check.sh

# Not part of make check: long runs that print their figures.
fuzz:
	@FUZZ=1 scripts/check.sh

soak:
	@SOAK=1 scripts/check.sh
