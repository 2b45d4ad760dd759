# SPDX-License-Identifier: GPL-2.0
# Event queue overrun: the emulator writes 1,000 events at once on port 1's
# 256-entry event queue, which the driver enables with overrun as hbl_cn
# does; the NIC writes over the entries the driver has not taken and counts
# them (eq_overwritten), and the driver, seeing its producer index more than
# a ring ahead, logs exactly that many as lost, takes the ring's entries
# that are left and reads back what the lost ones said (CQs, link state).
# The queue works on: a link down and up afterwards reaches a user program
# as PORT_ERR and PORT_ACTIVE (the ports' interfaces are up: a port is
# ACTIVE only while its interface is up and has carrier).
. /lib/gaudi/guest-lib.sh
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$(kparam ports 2)" "before the flood"
expect_warning 'port 1: event queue overrun: [0-9]+ events lost'
overwritten() { emu_ctl stat | sed -n 's/^nic .* eq_overwritten \([0-9]*\).*/\1/p'; }
before=$(overwritten)
r=$(emu_ctl eq-flood 1000) || fail "emulator refused eq-flood"
echo "emulator: $r"
over=$(echo "$r" | awk '{ print $4 }')
[ "$over" -gt 0 ] || fail "1000 events did not overrun the event queue: $r"
i=0
logged=0
while [ $i -lt 100 ]; do
	logged=$(test_log | sed -n 's/.*port 1: event queue overrun: \([0-9]*\) events lost.*/\1/p' |
		awk '{ s += $1 } END { print s + 0 }')
	[ "$logged" -ge "$over" ] && break
	sleep 0.1
	i=$((i + 1))
done
[ "$logged" = "$over" ] || fail "the NIC wrote over $over events, the driver logged $logged lost"
after=$(overwritten)
[ $((after - before)) = "$over" ] || fail "eq_overwritten moved by $((after - before)), expected $over"
start_listener events gaudi-verbs-test events --expect "PORT_ERR:1,PORT_ACTIVE:1"
emu_ctl link 0 down || fail "emulator refused link down"
sleep 0.5
emu_ctl link 0 up || fail "emulator refused link up"
wait $bg_pid || {
	cat /tmp/events.out
	fail "events after the overrun did not reach user space"
}
echo "event queue overrun: $over events written over and logged as lost; later events arrive"
