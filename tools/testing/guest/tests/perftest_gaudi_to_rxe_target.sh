# SPDX-License-Identifier: GPL-2.0
# The rxe side of perftest_gaudi_to_rxe: Debian's ib_write_bw as server on
# the kernel's soft-RoCE (rxe0 on the NIC linked to the Gaudi2 port 2).
. /lib/gaudi/guest-lib.sh
exchange_up >/dev/null || exit 1
rxe_link_rxe_up >/dev/null || exit 1
x=$(gid_index_v4 rxe0 "$RXE_LINK_RXE") || fail "no RoCE v2 GID of $RXE_LINK_RXE on rxe0"
ib_write_bw -d rxe0 -i 1 -x "$x" -F -s 65536 -n 50 --report_gbits >/tmp/bw.txt 2>&1 ||
	{ cat /tmp/bw.txt; fail "ib_write_bw (rxe server) failed"; }
cat /tmp/bw.txt
