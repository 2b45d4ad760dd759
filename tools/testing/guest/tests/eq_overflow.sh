# SPDX-License-Identifier: GPL-2.0
# Event queue overflow: the emulator posts 1,000 events at once into the
# 256-entry event queue; the ones that found it full are counted by the
# device (EQ_OVERFLOWS), and the driver logs exactly that many as lost
# (rate-limited: one line per interrupt run here). The queue works on: a
# link down and up afterwards reaches a user program as PORT_ERR and
# PORT_ACTIVE.
. /lib/gaudi/guest-lib.sh
load_driver
expect_warning 'event queue full: [0-9]+ events lost'
before=$(emu_ctl stat | awk '$1 == "eq_dropped" { print $2 }')
r=$(emu_ctl eq-flood 1000) || fail "emulator refused eq-flood"
echo "emulator: $r"
dropped=$(echo "$r" | awk '{ print $4 }')
[ "$dropped" -gt 0 ] || fail "1000 events did not overflow the event queue: $r"
i=0
logged=0
while [ $i -lt 100 ]; do
	logged=$(test_log | sed -n 's/.*event queue full: \([0-9]*\) events lost.*/\1/p' |
		awk '{ s += $1 } END { print s + 0 }')
	[ "$logged" -ge "$dropped" ] && break
	sleep 0.1
	i=$((i + 1))
done
[ "$logged" = "$dropped" ] || fail "device dropped $dropped events, driver logged $logged lost"
after=$(emu_ctl stat | awk '$1 == "eq_dropped" { print $2 }')
[ $((after - before)) = "$dropped" ] || fail "eq_dropped moved by $((after - before)), expected $dropped"
start_listener events gaudi-verbs-test events --expect "PORT_ERR:1,PORT_ACTIVE:1"
emu_ctl link 0 down || fail "emulator refused link down"
sleep 0.5
emu_ctl link 0 up || fail "emulator refused link up"
wait $bg_pid || {
	cat /tmp/events.out
	fail "events after the overflow did not reach user space"
}
echo "event queue overflow: $dropped events dropped and logged as lost; later events arrive"
