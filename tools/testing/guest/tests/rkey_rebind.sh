# SPDX-License-Identifier: GPL-2.0
# The requester rule of QPs given no remote rkey: the first WRITE after RTS
# binds the rkey it names, another rkey is refused with EINVAL while a WRITE
# is outstanding, and rebinds (device command QP_KEYS, PSNs kept) once the
# send queue is idle; the WRITE then lands in the new region, byte-exact.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test rkey-rebind || fail "rkey binding not as documented"
