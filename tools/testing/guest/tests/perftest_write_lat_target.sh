# SPDX-License-Identifier: GPL-2.0
# The server of perftest_write_lat: Debian's ib_write_lat, unmodified, with
# its defaults, then with every size from 2 B to 8 MiB.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
ib_write_lat -d gaudi_0 -i 1 -F >/tmp/lat.txt 2>&1 ||
	{ cat /tmp/lat.txt; fail "ib_write_lat (server, defaults) failed"; }
cat /tmp/lat.txt
ib_write_lat -d gaudi_0 -i 1 -F -a -n 10 >/tmp/lat.txt 2>&1 ||
	{ cat /tmp/lat.txt; fail "ib_write_lat -a (server) failed"; }
cat /tmp/lat.txt
