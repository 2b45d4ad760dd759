# SPDX-License-Identifier: GPL-2.0
# The soft-RoCE side of write_from_rxe: rxe on the NIC linked to the Gaudi
# port (10.0.0.2/24, the port is 10.0.0.1), and rxe-peer --source, a
# libibverbs program, writes 4 MiB into the Gaudi host's region and has it
# checked there.
. /lib/gaudi/guest-lib.sh
peer=$(exchange_up) || exit 1
# rxe0 is there already when write_to_rxe_target ran first in this VM.
if rdma link show rxe0/1 >/dev/null 2>&1; then
	data=$(nic_with_mac 02:00:00:00:00:02)
else
	data=$(rxe_up 02:00:00:00:00:02 10.0.0.2)
fi
rxe-peer --source "$peer" rxe0 "$data" 4 || fail "rxe-peer --source failed"
