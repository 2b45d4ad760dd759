# SPDX-License-Identifier: GPL-2.0
# The soft-RoCE side of write_to_rxe: rxe on the NIC linked to the other
# host's Gaudi2 port 2 (RXE_LINK_RXE/24, the port is RXE_LINK_GAUDI), and
# rxe-peer, a libibverbs program, as the target of the WRITEs; it checks
# every byte.
. /lib/gaudi/guest-lib.sh
exchange_up >/dev/null || exit 1
data=$(rxe_link_rxe_up) || exit 1
rdma link show rxe0/1
rxe-peer rxe0 "$data" 4 || fail "rxe-peer failed"
