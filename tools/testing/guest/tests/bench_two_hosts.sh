# SPDX-License-Identifier: GPL-2.0
# Benchmark (make bench): one 16 MiB RDMA WRITE to the other VM through the
# Gaudi2 ports, then through rxe on virtio-net NICs between the same VMs.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
data=$(rxe_up 02:00:00:00:09: "$(kparam data "")")
gaudi-verbs-test write-source --peer "$(kparam peer "")" --port 1 --max-mib 16 ||
	fail "Gaudi WRITEs failed"
rxe-peer --source "$(kparam peer "")" rxe0 "$data" 16 || fail "rxe WRITE failed"
