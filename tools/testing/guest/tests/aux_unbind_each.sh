# SPDX-License-Identifier: GPL-2.0
# Each driver of the NIC core's auxiliary devices is unbound under the
# other's traffic, and bound again.
# The RDMA driver, while both ports' interfaces carry frames (port 1 pings
# an address behind port 2 across the link) and QPs write (gaudi-verbs-test
# removal): the InfiniBand device goes and the writing process is told
# (DEVICE_FATAL, then EIO), while the interfaces stay, keep their carrier
# and go on carrying the frames. Binding it again gives a working
# InfiniBand device (every port ACTIVE, attached to its interface, a user
# context and the uverbs checks), the frames still flowing.
# The Ethernet driver, while a QP of port 1 writes 1 B to 64 MiB into a
# region behind a QP of port 2 (gaudi-verbs-test write-source and
# write-target on this host, their exchange over the loopback interface),
# which checks every byte: the interfaces go, rdma link show gives the
# ports no interface (state DOWN), gaudi_0 stays, and the WRITEs go on and
# complete, each landed (the source holds after 1 MiB until the unbind is
# done: those of 16 and 64 MiB come after it). Binding it again brings the interfaces back,
# each port attached to its own again (ACTIVE once it is up), and frames
# cross the link again.
# The emulator saw no DMA outside guest memory and none without bus
# mastering. No splat and no leak (the session's KASAN, lockdep and
# kmemleak).
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 2)
ib=$(aux_device gaudi_cn.ib.)
[ -n "$ib" ] || fail "no gaudi_cn.ib auxiliary device"
drv=/sys/bus/auxiliary/drivers/gaudi_ib.gaudi_ib
en=$(aux_device gaudi_cn.en.)
[ -n "$en" ] || fail "no gaudi_cn.en auxiliary device"
endrv=/sys/bus/auxiliary/drivers/gaudi_en.gaudi_en
[ "$(readlink -f "/sys/bus/auxiliary/devices/$en/driver")" = "$(readlink -f "$endrv")" ] ||
	fail "$en is not bound to $endrv"
d=$(gaudi_devices | head -n 1)
# The interfaces of ports 1 and 2 (new ones after the Ethernet driver's
# bind), IPv6 off (its neighbour and router solicitations would count as
# frames), linked to each other with the addresses of 10.52.
ifaces_linked() {
	i0=$(nic_with_mac 02:1d:a3:00:00:00)
	i1=$(nic_with_mac 02:1d:a3:00:00:01)
	[ -n "$i0" ] && [ -n "$i1" ] || fail "$1: no interfaces for ports 1 and 2"
	for i in "$i0" "$i1"; do
		sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" || fail "$1: $i: IPv6 not disabled"
	done
	cross_link_up 10.52 "$i0" 02:1d:a3:00:00:00 "$i1" 02:1d:a3:00:00:01
}
rx_of() { cat "/sys/class/net/$i1/statistics/rx_packets"; }
# Fail unless $i1 receives 20 frames from $i0 (the ping sends 50 a
# second) within 5 s; $1 says when.
frames_flow() {
	r0=$(rx_of)
	t=0
	while [ "$(rx_of)" -lt $((r0 + 20)) ]; do
		t=$((t + 1))
		[ $t -lt 50 ] || fail "$1: $i1 received $(($(rx_of) - r0)) frames from $i0 in 5 s, not 20"
		sleep 0.1
	done
	echo "$1: $i0 -> $i1 frames flow ($r0 -> $(rx_of))"
}
ping_start() {
	ping -q -i 0.02 -w 600 -I "$i0" 10.52.9.9 >/dev/null 2>&1 &
	p0=$!
}
ping_stop() {
	kill $p0 2>/dev/null || true
	wait $p0 2>/dev/null || true
}

# The RDMA driver under Ethernet (and its own) traffic.
ifaces_linked "at the start"
ping_start
frames_flow "before"
start_removal_traffic
r_before=$(rx_of)
echo "$ib" >"$drv/unbind" || fail "unbind of $ib failed"
[ ! -e "/sys/bus/auxiliary/devices/$ib/driver" ] || fail "$ib still bound"
[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "gaudi_0 left after unbinding the RDMA driver"
wait $bg_pid || { cat /tmp/removal.out; fail "the writing process was not told of the unbind"; }
for i in "$i0" "$i1"; do
	[ -e "/sys/class/net/$i" ] || fail "$i went with the RDMA driver"
	[ "$(cat "/sys/class/net/$i/carrier")" = 1 ] || fail "$i lost its carrier with the RDMA driver"
done
# Frames came while the RDMA driver went, and come after.
[ "$(rx_of)" -gt "$r_before" ] || fail "$i1 received nothing while the RDMA driver was unbound"
frames_flow "RDMA driver unbound"
echo "$ib" >"$drv/bind" || fail "bind of $ib failed"
[ -e /sys/class/infiniband/gaudi_0 ] || fail "no gaudi_0 after binding the RDMA driver again"
ports_up "$d" "$ports" "after the bind"
gaudi-verbs-test uverbs --ports "$ports" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the InfiniBand device of the rebound driver does not work"
}
frames_flow "RDMA driver bound again"
ping_stop
echo "RDMA driver unbound and bound again under Ethernet and RDMA traffic; the frames never stopped"

# The Ethernet driver under RDMA traffic: WRITEs of 1 B to 64 MiB, port 1
# to port 2, each checked by the target before the next; the two programs
# meet on the loopback interface. The source holds after the WRITE of
# 1 MiB until the unbind is done (--hold): the WRITEs of 16 and 64 MiB
# come after it on the same connection, however fast the device is (when
# they were timed to be under way, a faster emulator finished them first).
ip link set lo up
rm -f /tmp/unbound
# (The source dials until the target listens.)
gaudi-verbs-test write-target --port 2 --max-mib 64 >/tmp/wt.out 2>&1 &
wt=$!
gaudi-verbs-test write-source --peer 127.0.0.1 --port 1 --max-mib 64 --hold /tmp/unbound >/tmp/ws.out 2>&1 &
ws=$!
# They go with the test, also when it fails.
trap 'kill $ws $wt 2>/dev/null || true' EXIT
t=0
until grep -q '^holding until' /tmp/ws.out; do
	t=$((t + 1))
	running $ws && running $wt && [ $t -lt 1200 ] || {
		cat /tmp/wt.out /tmp/ws.out
		fail "no WRITE of 1 MiB landed from port 1 on port 2 (within 120 s)"
	}
	sleep 0.1
done
echo "$en" >"$endrv/unbind" || fail "unbind of $en failed"
landed=$(grep -c '^ok: WRITE of' /tmp/ws.out || true)
touch /tmp/unbound
[ ! -e "/sys/bus/auxiliary/devices/$en/driver" ] || fail "$en still bound"
for i in "$i0" "$i1"; do
	[ ! -e "/sys/class/net/$i" ] || fail "$i left after unbinding the Ethernet driver"
done
n=$(ls "/sys/bus/pci/devices/$d/net" 2>/dev/null | wc -l)
[ "$n" = 0 ] || fail "$n interfaces of $d left after unbinding the Ethernet driver"
[ -e /sys/class/infiniband/gaudi_0 ] || fail "gaudi_0 went with the Ethernet driver"
links=$(rdma link show) || fail "rdma link show failed"
echo "$links"
[ "$(echo "$links" | grep -c '^link gaudi_0/')" = "$ports" ] || fail "not $ports ports of gaudi_0 without the Ethernet driver"
! echo "$links" | grep '^link gaudi_0/' | grep -q ' netdev ' ||
	fail "rdma link show attaches a port to an interface without the Ethernet driver"
[ "$(echo "$links" | grep -c '^link gaudi_0/[0-9]* state DOWN ')" = "$ports" ] ||
	fail "ports of gaudi_0 not DOWN without their interfaces"
wait_gone $ws 300 || { cat /tmp/ws.out; fail "the WRITEs did not complete within 300 s of the Ethernet driver's unbind"; }
st=0
wait $ws || st=$?
cat /tmp/ws.out
[ $st = 0 ] || fail "the WRITEs failed after the Ethernet driver's unbind (status $st)"
wait $wt || { cat /tmp/wt.out; fail "the target's checks failed after the Ethernet driver's unbind"; }
trap - EXIT
tail -n 3 /tmp/wt.out
all=$(grep -c '^ok: WRITE of' /tmp/ws.out || true)
[ "$all" -gt "$landed" ] ||
	fail "no WRITE completed after the Ethernet driver's unbind ($landed of $all before it)"
echo "Ethernet driver unbound under RDMA traffic: $((all - landed)) of $all WRITEs completed and landed after the unbind"
echo "$en" >"$endrv/bind" || fail "bind of $en failed"
[ -e "/sys/bus/auxiliary/devices/$en/driver" ] || fail "$en not bound after the bind"
ifaces_linked "after the Ethernet driver's bind"
ports_up "$d" "$ports" "after the Ethernet driver's bind"
ping_start
frames_flow "Ethernet driver bound again"
ping_stop
for i in "$i0" "$i1"; do
	ip addr flush dev "$i"
	ip link set "$i" down
	sysctl -qw "net.ipv6.conf.$i.disable_ipv6=0" || true
done
emu_quiet_after "the RDMA and the Ethernet driver's unbind and bind under traffic"
echo "RDMA driver unbound under Ethernet traffic, Ethernet driver under RDMA traffic, each bound again and working"
