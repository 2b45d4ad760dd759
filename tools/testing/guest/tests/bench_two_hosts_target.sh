# SPDX-License-Identifier: GPL-2.0
# The target side of bench_two_hosts: first for the Gaudi2 WRITEs, then for
# the rxe one; both check the bytes.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
data=$(rxe_up 02:00:00:00:09: "$(kparam data "")")
gaudi-verbs-test write-target --port 1 --max-mib 16 || fail "Gaudi target failed"
rxe-peer rxe0 "$data" 16 || fail "rxe target failed"
