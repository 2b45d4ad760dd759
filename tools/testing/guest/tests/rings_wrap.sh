# SPDX-License-Identifier: GPL-2.0
# Ring wraparound: 70,000 signalled WRITEs through a send queue and a CQ of
# 16 entries (16-bit indexes past 65535; the port's CQ 1 and the driver's
# software CQ wrap), the first 1,100 batches through completion events (the
# 256-entry event queue wraps 4 times), every completion and every WRITE
# checked; then the same through a QP set's queues mapped in user space,
# which have the NIC's formats (its CQEs carry the WQE's producer index as
# tag, no length).
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test rings-wrap --writes "$(kparam wrap_writes 70000)" ||
	fail "ring wraparound failed"
