# SPDX-License-Identifier: GPL-2.0
# What user space provokes by the thousand does not flood the kernel log:
# 3,000 refused verbs (REG_MR with REMOTE_ATOMIC, each EOPNOTSUPP) add at
# most 20 kernel log lines, and 1,000 MMU faults of a QP set's WQEs (each
# a QP_ERR syndrome, the QP in ERR with no CQE and reset to RTS after it;
# the emulator counts exactly 1,000) at most 40. It exhausts the driver's log rate limits, so
# it runs last in its session (before kmemleak_clean).
. /lib/gaudi/guest-lib.sh
load_driver
before=$(dmesg | wc -l)
gaudi-verbs-test log-ratelimited --verbs 3000 --faults 1000 ||
	fail "refused verbs or MMU faults flooded the kernel log, or were not as expected"
after=$(dmesg | wc -l)
echo "kernel log: $before lines before, $after after"
