# SPDX-License-Identifier: GPL-2.0
# WQEs written by user space name their source by device VA; the device
# MMU is the boundary. A WQE whose source is a device VA never mapped,
# beyond every region, of a deregistered region, of a region of a context
# that is gone, or the QP's own send queue or CQ ends in a local protection
# error CQE and the QP in ERR; WRITEs aimed at the peer's CQ ring (its
# device VA, or the iova its region would translate to it) are refused by
# the peer: they lie outside the region its QP is bound to. Nothing lands,
# the emulator counts each local translation fault, its DMA audit stays 0,
# the driver logs the faults, and the QP works after a reset.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test dv-foreign-address || fail "foreign device VAs were not refused as expected"
# Model 1.5 logs the translation fault, model 2.0 the QP_ERR syndrome.
test_log | grep -q -e "translation fault of QP" -e "QP [0-9]* (port 1) of a QP set: error, syndrome" ||
	fail "no translation fault in the kernel log"
