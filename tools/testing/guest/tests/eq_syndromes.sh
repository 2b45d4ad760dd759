# SPDX-License-Identifier: GPL-2.0
# Model 2.0 (the model2 session): each class of the NIC's QP_ERR syndromes
# reaches the QP's owner as the right work completions and asynchronous
# event. With port 1's NIC holding its doorbells, two WRITEs stay
# outstanding and the emulator writes a QP_ERR of the QP on port 1's event
# queue: retries exceeded (0x40), NAKs remote access, invalid request and
# remote operational (0x7f, 0x7d, 0x7c), a requester MMU fault (0x7e), the
# WQE index and doorbell checks (0x91, 0x43) fail the first WRITE with
# RETRY_EXC_ERR, REM_ACCESS_ERR, REM_INV_REQ_ERR, REM_OP_ERR, LOC_PROT_ERR
# or LOC_QP_OP_ERR (vendor_err the syndrome) and report QP_FATAL; the
# responder's key and MMU errors (0x10, 0x7b) flush both and report
# QP_ACCESS_ERR. The second WRITE is flushed, the QP is in ERR and refuses
# posts, the held WRITEs complete nothing more once the NIC takes them, and
# after RESET a WRITE lands. The driver logs the errors (rate-limited: the
# first at least).
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test eq-syndromes || fail "QP errors not reported as documented"
test_log | grep -q "QP [0-9]* (port 1): error, syndrome 0x40" || fail "no log line for the QP errors"
