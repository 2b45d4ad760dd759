# SPDX-License-Identifier: GPL-2.0
# Any process may open a user context and query the device; the data path
# has one owner. While process A holds a context with a PD, process B opens
# a context, queries the device, every port and the GID table (the core's
# and the driver's methods, checked against the emulator), and its PD, QP
# set and device memory are refused with EBUSY, each refusal adding the
# driver's log line after the step began; 50 refused PDs in a row add 10
# (rate limit). Once A is gone, a new process takes the data path
# and keeps it until its context is closed.
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
load_driver
gaudi-verbs-test hold >/tmp/hold.out 2>&1 &
holder=$!
# The holder goes with the test, also when it fails.
trap 'kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true' EXIT
i=0
while ! grep -q holding /tmp/hold.out && [ $i -lt 100 ]; do
	kill -0 "$holder" 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "the holder got no PD"; }
gaudi-verbs-test ownership --step refused --ports "$ports" ||
	fail "another process's context: queries or refusals not as expected"
kill -0 "$holder" 2>/dev/null || { cat /tmp/hold.out; fail "the holder died"; }
kill "$holder"
wait "$holder" 2>/dev/null || true
gaudi-verbs-test ownership --step owner --ports "$ports" ||
	fail "the data path was not free after the owner exited"
echo "one owner: others query and are refused with EBUSY (logged, rate-limited); free after the owner exited"
