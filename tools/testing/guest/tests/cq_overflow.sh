# SPDX-License-Identifier: GPL-2.0
# A CQ of 16 under 40 signalled WRITEs that nobody polls overflows: the
# owner gets IB_EVENT_CQ_ERR once, the driver logs it, the CQ holds the
# 16 completions it had room for; a new QP and CQ work. The ports'
# interfaces are up first: the program's first event must be the CQ's
# (an interface it brought up itself would give it PORT_ACTIVE).
. /lib/gaudi/guest-lib.sh
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$(kparam ports 2)" "before the QPs"
expect_warning 'CQ [0-9]+ \(port 1\) overflowed'
gaudi-verbs-test cq-overflow || fail "CQ overflow not reported or not recovered"
test_log | grep -q -E 'CQ [0-9]+ \(port 1\) overflowed' || fail "no log line for the overflow"
