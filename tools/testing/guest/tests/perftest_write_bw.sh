# SPDX-License-Identifier: GPL-2.0
# perftest's ib_write_bw from Debian, unmodified and with its default post
# API, between two hosts with a Gaudi2 each (port 1 linked to port 1): this
# host is the client, perftest_write_bw_target the server; it picks the
# ports' IPv4 RoCE v2 GIDs itself and exchanges over TCP on the Gaudi link.
# Every size from 2 B to 8 MiB (-a, 10 iterations each) completes and is
# reported; the report is kept in the session log for the benchmark.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
perftest_client /tmp/bw.txt ib_write_bw "$peer" -a -n 10 --report_gbits ||
	{ cat /tmp/bw.txt; fail "ib_write_bw (client) failed"; }
cat /tmp/bw.txt
perftest_sizes /tmp/bw.txt 23 || fail "ib_write_bw did not report every size from 2 B to 8 MiB"
echo "ib_write_bw: 2 B to 8 MiB, $(awk '$1 == 8388608 { print $4 " Gb/s average at 8 MiB" }' /tmp/bw.txt)"
