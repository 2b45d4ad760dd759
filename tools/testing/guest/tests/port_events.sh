# SPDX-License-Identifier: GPL-2.0
# Port state changes travel from the device's event queue to user space:
# a link taken down and up through the emulator's control interface is seen
# by a program reading its context's async event file as PORT_ERR and then
# PORT_ACTIVE (with the port number), and by `rdma link show`. Another port
# is left alone throughout. The ports' interfaces are up first: as for
# mlx5's RoCE ports, a port is ACTIVE only while its interface is up and
# has carrier, which follows the link.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
ports_up "$(gaudi_devices | head -n 1)" "$ports" "at start"
port=$ports # the last port: its index is the largest the event carries
idx=$((port - 1))
[ "$(link_state gaudi_0/$port)" = ACTIVE ] || fail "port $port not ACTIVE at start"
start_listener events gaudi-verbs-test events --expect "PORT_ERR:$port,PORT_ACTIVE:$port"
emu_ctl link $idx down || fail "emulator refused link down"
i=0
while [ "$(link_state gaudi_0/$port)" != DOWN ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
state=$(link_state gaudi_0/$port)
echo "after link down: gaudi_0/$port $state"
[ "$state" = DOWN ] || fail "rdma link show: port $port is $state after link down"
[ "$(link_state gaudi_0/1)" = ACTIVE ] || fail "port 1 changed with port $port"
emu_ctl stat | grep "^port $idx " | grep -q "link down" || fail "emulator does not report the link down"
emu_ctl link $idx up || fail "emulator refused link up"
wait $bg_pid || {
	cat /tmp/events.out
	fail "the user program did not see PORT_ERR then PORT_ACTIVE on port $port"
}
cat /tmp/events.out
state=$(link_state gaudi_0/$port)
echo "after link up: gaudi_0/$port $state"
[ "$state" = ACTIVE ] || fail "rdma link show: port $port is $state after link up"
test_log | grep -q "port $port link down" || fail "no log line for the link down"
echo "port $port: PORT_ERR and PORT_ACTIVE reached user space, rdma link show followed"
