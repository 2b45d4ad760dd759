# SPDX-License-Identifier: GPL-2.0
# The QPs of one protection domain reach memory only through their PD's
# address space (ASID): another context's QP set names this context's
# regions that its own ASID does not map (one closed to remote writes, one
# open to them at its iova) as WQE sources and as its WRITE's destination,
# and its QP goes to ERR each time with no CQE, a fault of the device MMU;
# nothing crosses, and a device VA both ASIDs map reads each its own. User space
# cannot give its QPs the MMU bypass: the bypass bit written into every
# register of its doorbell (UMR) pages leaves its FIFOs' override as the
# driver set it, and a WQE naming a bus address faults in the ASID.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test asid-isolation || fail "an ASID was crossed"
