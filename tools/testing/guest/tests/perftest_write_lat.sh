# SPDX-License-Identifier: GPL-2.0
# perftest's ib_write_lat from Debian, unmodified, with its defaults (2-byte
# messages, ping-pong by RDMA WRITE, each side polling the last byte of its
# region; perftest turns inline data off on devices it does not know,
# this one among them, so its default is none here), between the two
# hosts: this host is the client,
# perftest_write_lat_target the server. Then every size from 2 B to 8 MiB
# (-a, 10 iterations each).
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
perftest_client /tmp/lat.txt ib_write_lat "$peer" ||
	{ cat /tmp/lat.txt; fail "ib_write_lat (client, defaults) failed"; }
cat /tmp/lat.txt
perftest_sizes /tmp/lat.txt 1 || fail "ib_write_lat with its defaults reported no result"
perftest_client /tmp/lat.txt ib_write_lat "$peer" -a -n 10 ||
	{ cat /tmp/lat.txt; fail "ib_write_lat -a (client) failed"; }
cat /tmp/lat.txt
perftest_sizes /tmp/lat.txt 23 || fail "ib_write_lat did not report every size from 2 B to 8 MiB"
echo "ib_write_lat: defaults, then 2 B to 8 MiB, $(awk '$1 == 2 { print $5 " us typical at 2 B"; exit }' /tmp/lat.txt)"
