# SPDX-License-Identifier: GPL-2.0
# The soak's traffic (make soak, not make check): for gaudi.soak_seconds,
# rounds of the self-checking traffic tests with their faults (wire faults,
# device errors, ring wraparound, concurrency with unbind races), each
# checked as in make check; prints the rounds and WRITEs done.
. /lib/gaudi/guest-lib.sh
load_driver
expect_warning 'translation fault writing a CQ ring'
secs=$(kparam soak_seconds 3600)
t0=$(cut -d. -f1 /proc/uptime)
rounds=0
while [ $(($(cut -d. -f1 /proc/uptime) - t0)) -lt "$secs" ]; do
	gaudi-verbs-test wire-faults >/tmp/soak.out 2>&1 || { cat /tmp/soak.out; fail "round $rounds: wire faults"; }
	gaudi-verbs-test device-errors >/tmp/soak.out 2>&1 || { cat /tmp/soak.out; fail "round $rounds: device errors"; }
	gaudi-verbs-test rings-wrap --writes 20000 --events 300 >/tmp/soak.out 2>&1 ||
		{ cat /tmp/soak.out; fail "round $rounds: rings"; }
	gaudi-verbs-test concurrency --rounds 2 --writes 100 >/tmp/soak.out 2>&1 ||
		{ cat /tmp/soak.out; fail "round $rounds: concurrency"; }
	rounds=$((rounds + 1))
	echo "soak: round $rounds done at $(($(cut -d. -f1 /proc/uptime) - t0)) s"
done
emu_quiet_after "the soak's traffic"
echo "soak: $rounds rounds of mixed traffic with faults in $(($(cut -d. -f1 /proc/uptime) - t0)) s"
