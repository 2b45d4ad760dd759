# SPDX-License-Identifier: GPL-2.0
# The responder's region and key bound every incoming WRITE (port 1 writes
# to port 2): a WRITE with rkey 0, with another region's rkey, starting one
# byte before the bound region or ending one byte after it, and one to the
# region after its deregistration (the QPs still connected) each complete
# with REM_ACCESS_ERR at the requester, both QPs go to ERR, and nothing
# lands in the region, around it or in the other region. WRITEs named by
# the region's iova (the whole region; 1001 B at byte 777) land byte-exact.
# 1000 registrations give 1000 distinct keys without a fixed stride.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test rkey-bounds || fail "WRITEs outside the bound region or key were not all refused"
