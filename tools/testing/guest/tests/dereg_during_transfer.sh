# SPDX-License-Identifier: GPL-2.0
# A 64 MiB WRITE from port 1 to port 2 of the strict emulator (translations
# kept per message, every use audited) loses what it uses while it is under
# way: (a) its source region is deregistered (port 1's link down meanwhile,
# so that nothing reads the source while it leaves the MMU): the WRITE
# completes with LOC_PROT_ERR or is flushed, never with success, and the QP
# is in ERR; (b) its requester QP is destroyed: the NIC's requester and
# responder contexts of its number on port 1, valid before, are not any
# more; (c) the destination region, open to remote writes in the
# responder's PD, is deregistered: REM_ACCESS_ERR at the requester, both
# QPs in ERR. A try
# whose WRITE ended first is repeated with the frames delayed. After each
# case the emulator counts no stale translation, the DMA audit is 0, and
# after reconnecting a WRITE lands. KASAN would report a use of freed pages.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test dereg-during-transfer || fail "a region or QP that went during a WRITE was not handled safely"
