# SPDX-License-Identifier: GPL-2.0
# Debian's ib_write_bw, unmodified, the other way round: the Gaudi2 host is
# the server on port 2 (its QP in RTR receives into the region the
# driver's responder rule bound it to), the rxe host the client
# (perftest_rxe_to_gaudi_target), 64 KiB messages, 50 of them.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
rxe_link_up >/dev/null
x=$(gid_index_v4 gaudi_0 "$RXE_LINK_GAUDI" 2) || fail "no RoCE v2 GID of $RXE_LINK_GAUDI on port 2 of gaudi_0"
ib_write_bw -d gaudi_0 -i 2 -x "$x" -F -s 65536 -n 50 --report_gbits >/tmp/bw.txt 2>&1 ||
	{ cat /tmp/bw.txt; fail "ib_write_bw (Gaudi2 server, rxe client) failed"; }
cat /tmp/bw.txt
echo "ib_write_bw rxe -> Gaudi2: the Gaudi2 server received 50 WRITEs of 64 KiB"
