# SPDX-License-Identifier: GPL-2.0
# A WRITE held back (the NIC takes no doorbell for a while, as when it is
# busy or its link slow), its source region deregistered and another
# context registering memory at once: when the NIC takes the WRITE, the
# source is gone from the poster's address space, and the WRITE completes
# in error (a standard verbs QP) or stops its QP with no CQE (a QP set's),
# one fault of the device MMU; nothing lands at the destination and the
# other context's memory keeps its bytes. A region the poster's own PD
# registers at once (standard verbs) gets other device VAs than the held
# WRITE's, which come back once the WRITE retired.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test stale-wqe-after-dereg ||
	fail "a WRITE held past its region's deregistration did what it must not"
