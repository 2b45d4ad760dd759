# SPDX-License-Identifier: GPL-2.0
# Address spaces: each protection domain has an ASID of its
# own and its regions are entered there, a region open to remote writes at
# its iova; the same iova in two PDs reaches each PD's own memory; regions
# open to remote writes of one PD do not overlap and stay below 2^47
# (EINVAL); deregistered regions and deallocated PDs leave nothing mapped,
# and a new PD gets an ASID no live or just-freed PD had (gaudi-verbs-test
# asid-mappings, read through the emulator's view of the ASIDs' tables).
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test asid-mappings || fail "address spaces"
