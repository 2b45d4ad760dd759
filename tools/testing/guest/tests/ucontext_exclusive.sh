# SPDX-License-Identifier: GPL-2.0
# One owner at a time: while a process holds the device's user context, a
# second process's context fails with EBUSY (and the driver says why); once
# the first process exits, a new context succeeds.
. /lib/gaudi/guest-lib.sh
gaudi-verbs-test hold >/tmp/hold.out 2>&1 &
holder=$!
i=0
while ! grep -q holding /tmp/hold.out && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
grep -q holding /tmp/hold.out || { cat /tmp/hold.out; fail "the holder got no context"; }
gaudi-verbs-test context --expect-errno 16 || fail "second process: expected EBUSY"
dmesg | grep -q "user context refused" || fail "no log line for the refused context"
kill "$holder"
wait "$holder" 2>/dev/null || true
gaudi-verbs-test context --expect-errno 0 || fail "no context after the holder exited"
echo "exclusive context: EBUSY while held, granted after the holder exited"
