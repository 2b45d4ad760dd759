# SPDX-License-Identifier: GPL-2.0
# Errors from the device: the NIC reports them as QP_ERR syndromes on its
# event queue (gaudi-verbs-test device-errors runs eq-syndromes), one class
# of syndrome at a time with two WRITEs outstanding: the first completes
# with the status the syndrome names (its vendor_err the syndrome), or with
# WR_FLUSH_ERR when the QP's responder failed, the second with
# WR_FLUSH_ERR; the owner gets QP_FATAL (QP_ACCESS_ERR for the responder's
# errors), the QP stays in ERR until RESET, and the driver logs the
# syndrome. The NIC writes its CQs by bus address: no CQ ring faults.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test device-errors || fail "QP errors not reported as documented"
test_log | grep -q "QP [0-9]* (port 1): error, syndrome 0x40" || fail "no log line for the QP errors"
