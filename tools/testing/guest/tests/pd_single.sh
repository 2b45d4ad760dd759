# SPDX-License-Identifier: GPL-2.0
# A context has one protection domain: the second alloc_pd fails with ENOSPC
# (documented in Documentation/infiniband/gaudi/uapi.rst); freeing the first
# makes room again.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test pd-single || fail "PD checks failed"
