# SPDX-License-Identifier: GPL-2.0
# Port 1's link flaps while WRITEs flow on a standard QP pair and through a
# QP set's mapped queues (gaudi-verbs-test link-flap): across a 100 ms flap
# every WRITE lands and the process reads PORT_ERR then PORT_ACTIVE; an
# outage past the retry budget fails the WRITE under way on each path, and
# both QPs recover through RESET once the link is back. The ports'
# interfaces are up first: a port is ACTIVE only while its interface is up
# (and has carrier), and the program takes no other event.
. /lib/gaudi/guest-lib.sh
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$(kparam ports 2)" "before the traffic"
gaudi-verbs-test link-flap >/tmp/link-flap.out 2>&1 || {
	cat /tmp/link-flap.out
	fail "link flap under traffic"
}
cat /tmp/link-flap.out
test_log | grep -q "port 1 link down" || fail "no log line for the link going down"
emu_quiet_after "the link flaps under traffic"
