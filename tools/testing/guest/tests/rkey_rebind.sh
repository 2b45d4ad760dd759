# SPDX-License-Identifier: GPL-2.0
# The requester rule of QPs given no remote rkey: the requester context holds
# one key, its peer PD's (one key per PD). The first WRITE after RTS binds
# the rkey it names and lands; a WRITE with another PD's key is refused with
# EINVAL (nothing posted, completed or landed), even with the send queue
# idle; through RESET the QP connects to another PD's responder and its
# first WRITE binds that PD's key and lands there. A key given at RTR is
# bound from the start: the other key is refused at the first WRITE.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test rkey-rebind || fail "rkey binding not as documented"
