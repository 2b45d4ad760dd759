# SPDX-License-Identifier: GPL-2.0
# WQEs written by user space name their source by device VA; the device
# MMU, in the QP set's PD's address space (ASID), is the boundary. A WQE
# whose source is a device VA the ASID does not map (never mapped, beyond
# every region, of a deregistered region, of a region of a context that is
# gone, the send WQ slot of a QP number the PD does not have) moves the QP
# to ERR with no CQE (a QP_ERR syndrome); WRITEs aimed at what the peer's
# ASID maps read-only (its QP's send queue, a region not open to remote
# writes) or not at all (past its region) are refused by the peer's MMU.
# Nothing lands, the emulator counts each local translation fault, its DMA
# audit stays 0, the driver logs the QP set's syndromes, and the QP works
# after a reset.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test dv-foreign-address || fail "foreign device VAs were not refused as expected"
# The driver logs the QP_ERR syndrome of the QP set's QP.
test_log | grep -q "QP [0-9]* (port 1) of a QP set: error, syndrome" ||
	fail "no QP set error line in the kernel log"
