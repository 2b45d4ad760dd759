# SPDX-License-Identifier: GPL-2.0
# Error statuses from the device (LOC_LEN_ERR and LOC_QP_OP_ERR on a WQE,
# REM_OP_ERR and REM_INV_REQ_ERR from the responder, injected through the
# emulator) complete the failed WRITE with the matching IB status and the
# device's code, flush the next, report QP_FATAL and leave the QP in ERR
# until RESET; an injected QP error flushes the outstanding WRITE; a CQ
# ring write fault is logged and the CQ can be replaced.
. /lib/gaudi/guest-lib.sh
load_driver
if [ "$(gaudi_model)" = 2 ]; then
	# Model 2.0: errors are QP_ERR syndromes (gaudi-verbs-test runs
	# eq-syndromes), and CQs are written physically.
	gaudi-verbs-test device-errors || fail "QP errors not reported as documented"
	test_log | grep -q "QP [0-9]* (port 1): error, syndrome 0x40" || fail "no log line for the QP errors"
	exit 0
fi
expect_warning 'translation fault writing a CQ ring'
gaudi-verbs-test device-errors || fail "device errors not handled as documented"
test_log | grep -q 'translation fault writing a CQ ring' || fail "no log line for the CQ ring fault"
