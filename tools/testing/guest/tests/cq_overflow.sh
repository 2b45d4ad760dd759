# SPDX-License-Identifier: GPL-2.0
# A CQ of 16 under 40 signalled WRITEs that nobody polls overflows: the
# owner gets IB_EVENT_CQ_ERR once, the driver logs it, the CQ holds the
# 16 completions it had room for; a new QP and CQ work.
. /lib/gaudi/guest-lib.sh
load_driver
expect_warning 'CQ [0-9]+ \(port 1\) overflowed'
gaudi-verbs-test cq-overflow || fail "CQ overflow not reported or not recovered"
test_log | grep -q -E 'CQ [0-9]+ \(port 1\) overflowed' || fail "no log line for the overflow"
