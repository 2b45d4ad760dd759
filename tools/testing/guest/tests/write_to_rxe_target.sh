# SPDX-License-Identifier: GPL-2.0
# The soft-RoCE side of write_to_rxe: rxe on the NIC linked to the Gaudi
# port (10.0.0.2/24, the port is 10.0.0.1), and rxe-peer, a libibverbs
# program, as the target of the WRITEs; it checks every byte.
. /lib/gaudi/guest-lib.sh
exchange_up >/dev/null || exit 1
data=$(rxe_up 02:00:00:00:00:02 10.0.0.2)
rdma link show rxe0/1
rxe-peer rxe0 "$data" 4 || fail "rxe-peer failed"
