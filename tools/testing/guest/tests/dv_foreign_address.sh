# SPDX-License-Identifier: GPL-2.0
# WQEs written by user space name device VAs; the device MMU is the
# boundary. A WQE whose source is a device VA never mapped, beyond every
# region, of a deregistered region, of a region of a context that is gone,
# or the QP's own send queue or CQ ends in a local protection error CQE and
# the QP in ERR; a WRITE into the peer's CQ ring is refused by the peer.
# Nothing lands, the emulator counts each translation fault, its DMA audit
# stays 0, the driver logs the faults, and the QP works after a reset.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test dv-foreign-address || fail "foreign device VAs were not refused as expected"
dmesg | grep -q "translation fault of QP" || fail "no translation fault in the kernel log"
kmemleak_clean_after "foreign-address WQEs"
