# SPDX-License-Identifier: GPL-2.0
# The NIC executes RDMA WRITE only: SEND, RDMA_READ and the atomics fail in
# post_send with EOPNOTSUPP (and the failed request named), post_recv with
# EOPNOTSUPP; QPs other than RC, and with a receive queue, several SGEs or
# inline data, are refused. The refusals are checked on a QP in RESET and on
# a connected one in RTS (ports 1 and 2 linked): no frame leaves for them,
# and the next WRITE is the first completion.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test unsupported-opcodes || fail "unsupported operations were not refused as expected"
test_log | grep -q "QP of type Ud refused" || fail "no log line for the refused UD QP"
