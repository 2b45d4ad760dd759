# SPDX-License-Identifier: GPL-2.0
# Debian's ib_write_bw, unmodified, between this Gaudi2 host as client and
# the rxe host as server (perftest_gaudi_to_rxe_target), from port 2,
# linked to the rxe host's NIC, over the RoCE v2 GIDs of the link's
# addresses (perftest's own exchange goes over the Gaudi2 link of port 1):
# the Gaudi2 writes into the kernel's soft-RoCE (64 KiB messages, 50 of
# them: rxe runs at about 1 MB/s under TCG). The report is kept for the
# benchmark. The requester's QP timeout is about 1 s (-u 18) instead of
# perftest's 67 ms: the rxe guest, its CPU shared under TCG, sometimes
# answers nothing for longer than 8 x 67 ms, and the requester then gives
# up (RETRY_EXC_ERR) with half the WRITEs done.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
rxe_link_up >/dev/null
x=$(gid_index_v4 gaudi_0 "$RXE_LINK_GAUDI" 2) || fail "no RoCE v2 GID of $RXE_LINK_GAUDI on port 2 of gaudi_0"
PERFTEST_PORT=2 perftest_client /tmp/bw.txt ib_write_bw "$peer" -x "$x" -s 65536 -n 50 -u 18 --report_gbits ||
	{ cat /tmp/bw.txt; fail "ib_write_bw (Gaudi2 client, rxe server) failed"; }
cat /tmp/bw.txt
perftest_sizes /tmp/bw.txt 1 || fail "ib_write_bw reported no result"
echo "ib_write_bw Gaudi2 -> rxe: $(awk '$1 == 65536 { print $4 " Gb/s average" }' /tmp/bw.txt)"
