# SPDX-License-Identifier: GPL-2.0
# The rxe side of perftest_rxe_to_gaudi: Debian's ib_write_bw as client on
# the kernel's soft-RoCE, writing into the Gaudi2 host; the report is kept
# for the benchmark.
. /lib/gaudi/guest-lib.sh
peer=$(exchange_up) || exit 1
rxe_link_rxe_up >/dev/null || exit 1
x=$(gid_index_v4 rxe0 "$RXE_LINK_RXE") || fail "no RoCE v2 GID of $RXE_LINK_RXE on rxe0"
i=0
while :; do
	ib_write_bw -d rxe0 -i 1 -x "$x" -F -s 65536 -n 50 -u 18 --report_gbits "$peer" >/tmp/bw.txt 2>&1 && break
	grep -q "Couldn't connect to $peer" /tmp/bw.txt || { cat /tmp/bw.txt; fail "ib_write_bw (rxe client) failed"; }
	i=$((i + 1))
	[ $i -lt 30 ] || { cat /tmp/bw.txt; fail "the Gaudi2 server never listened"; }
	sleep 1
done
cat /tmp/bw.txt
perftest_sizes /tmp/bw.txt 1 || fail "ib_write_bw reported no result"
echo "ib_write_bw rxe -> Gaudi2: $(awk '$1 == 65536 { print $4 " Gb/s average" }' /tmp/bw.txt)"
