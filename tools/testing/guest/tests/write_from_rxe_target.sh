# SPDX-License-Identifier: GPL-2.0
# The soft-RoCE side of write_from_rxe: rxe on the NIC linked to the other
# host's Gaudi2 port 2 (RXE_LINK_RXE/24), and rxe-peer --source, a
# libibverbs program, writes 4 MiB into the Gaudi2 host's region and has
# it checked there.
. /lib/gaudi/guest-lib.sh
peer=$(exchange_up) || exit 1
data=$(rxe_link_rxe_up) || exit 1
rxe-peer --source "$peer" rxe0 "$data" 4 || fail "rxe-peer --source failed"
