# SPDX-License-Identifier: GPL-2.0
# The responder's key and address space bound every incoming WRITE (port 1
# writes to port 2): the NIC's responder takes one key, its PD's, and the
# device MMU bounds the rest at page granularity. A WRITE with rkey 0, with
# another PD's region's rkey, starting one byte before the region's first
# page or ending one byte after its last, and one to the region after its
# deregistration (the QPs still connected) each complete with
# REM_ACCESS_ERR at the requester, both QPs go to ERR, and nothing lands in
# the region, around it or in the other region. WRITEs named by the
# region's iova (the whole region; 1001 B at byte 777) land byte-exact.
# 1000 registrations give 1000 distinct keys without a fixed stride; two
# regions of one PD open to remote writes share the PD's key as rkey.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test rkey-bounds || fail "WRITEs outside the bound region or key were not all refused"
