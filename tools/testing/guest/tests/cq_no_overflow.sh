# SPDX-License-Identifier: GPL-2.0
# The port's CQ 1, which every standard QP of the port completes on (the
# NIC has no WRITE with immediate and no responder completions), never
# overflows: a QP's send queue (1024 requests, a ring of 2048 WQEs) is
# counted against CQ 1's 8192 entries when it enters INIT, so four QPs of
# port 1 fill it and a fifth is refused there with ENOMEM and one log line.
# The four post 1024 signalled WRITEs each (port 1 writes to port 2), their
# queues full, while nobody polls: every completion arrives, in order and
# successful, every WRITE lands, no event comes. With one QP destroyed, the
# fifth enters INIT. The ports' interfaces are up first (one the program
# brought up itself would give it PORT_ACTIVE).
. /lib/gaudi/guest-lib.sh
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$(kparam ports 2)" "before the QPs"
gaudi-verbs-test cq-no-overflow || fail "a full CQ 1 lost, reordered or failed WRITEs"
