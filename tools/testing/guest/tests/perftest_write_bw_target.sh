# SPDX-License-Identifier: GPL-2.0
# The server of perftest_write_bw: Debian's ib_write_bw, unmodified, waits
# for the client, receives its WRITEs (its QP stays in RTR, bound to its one
# region by the driver's responder rule) and ends with it.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
ib_write_bw -d gaudi_0 -i 1 -F -a -n 10 --report_gbits >/tmp/bw.txt 2>&1 ||
	{ cat /tmp/bw.txt; fail "ib_write_bw (server) failed"; }
cat /tmp/bw.txt
