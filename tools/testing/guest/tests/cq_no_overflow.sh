# SPDX-License-Identifier: GPL-2.0
# A responder's CQ never overflows with incoming WRITEs with immediate
# (port 1 writes to port 2): with a CQ of 16 entries, 64 WRITEs with
# immediate while the responder does not poll for 1 s get RNR NAKs (the
# emulator counts them) and only 16 complete; then every immediate arrives
# once and in order with its byte count, every WRITE's data lands, the
# requester's completions are all successes, no CQ_ERR or QP_FATAL event
# comes, and both QPs stay in RTS.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test cq-no-overflow || fail "a full responder CQ lost, reordered or failed WRITEs with immediate"
