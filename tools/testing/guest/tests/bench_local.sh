# SPDX-License-Identifier: GPL-2.0
# Benchmark (make bench): registration of 1 GiB against bare pinning of the
# same memory, and post_send per WQE against a minimal ioctl.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test bench-local --mib 1024 || fail "bench-local failed"
