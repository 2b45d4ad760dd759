# SPDX-License-Identifier: GPL-2.0
# A queue pair reaches RTR with a standard address vector only: without
# one, with a source GID of another port, a multicast destination or the
# driver-private destination of ABI 1 it stays in INIT and the kernel
# answers EINVAL (ENODATA for an empty source GID entry, from the core's
# lookup); a valid vector is taken.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test av-refused || fail "address vectors were not checked as documented"
