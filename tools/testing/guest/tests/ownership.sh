# SPDX-License-Identifier: GPL-2.0
# Who may use the data path. While process A holds a PD (the standard
# verbs), process B opens a context, queries the device, every port and the
# GID table (the core's and the driver's methods, checked against the
# emulator) and gets a PD of its own; its QP set is made, in B's own PD and
# address space; its device memory is refused with EBUSY, each refusal
# adding the driver's log line after the step began; 50 refused
# allocations in a row add 10 (rate limit). Once A is gone, a new process
# takes the NIC to itself (PD, QP set, device memory) and keeps it until its
# context is closed: another context's PD is refused meanwhile. The
# ports' interfaces are up first: QUERY_PORT must find every port ACTIVE,
# which a port is only while its interface is up.
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$ports" "before the queries"
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
	fail "beside another process's PD: queries, PD or refusals not as expected"
kill -0 "$holder" 2>/dev/null || { cat /tmp/hold.out; fail "the holder died"; }
kill "$holder"
wait "$holder" 2>/dev/null || true
gaudi-verbs-test ownership --step owner --ports "$ports" ||
	fail "the NIC was not free for a single owner after the other process exited"
echo "standard verbs and QP sets shared, device memory exclusive: EBUSY (logged, rate-limited) beside another PD; one owner after it exited"
