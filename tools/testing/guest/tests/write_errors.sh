# SPDX-License-Identifier: GPL-2.0
# Errors on the wire between port 1 and port 2: dropped and corrupted frames
# are resent and the data lands; the link going down mid-transfer ends in
# RETRY_EXC_ERR, flushed requests, QP_FATAL and a QP in ERR, never a hang;
# the QP recovers through RESET.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test write-errors || fail "error handling of the send path failed"
test_log | grep -q "QP [0-9]* (port 1): error" || fail "no log line for the QP error"
