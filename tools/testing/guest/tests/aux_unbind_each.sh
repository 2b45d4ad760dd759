# SPDX-License-Identifier: GPL-2.0
# The RDMA driver is unbound from the NIC core's auxiliary device while both
# ports' interfaces carry frames (port 1 pings an address behind port 2
# across the link) and QPs write (gaudi-verbs-test removal): the InfiniBand
# device goes and the writing process is told (DEVICE_FATAL, then EIO),
# while the interfaces stay, keep their carrier and go on carrying the
# frames. Binding it again gives a working InfiniBand device (every port
# ACTIVE, attached to its interface, a user context and the uverbs checks),
# the frames still flowing; the emulator saw no DMA outside guest memory
# and none without bus mastering. No splat and no leak (the session's
# KASAN, lockdep and kmemleak). The Ethernet side of the split (unbinding
# the Ethernet driver under RDMA traffic) comes with the Ethernet driver
# of its own: today the interfaces are the NIC core's.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 2)
ib=$(ls /sys/bus/auxiliary/devices | grep '^gaudi_cn\.ib\.' | head -n 1)
[ -n "$ib" ] || fail "no gaudi_cn.ib auxiliary device"
drv=/sys/bus/auxiliary/drivers/gaudi_ib.gaudi_ib
i0=$(nic_with_mac 02:1d:a3:00:00:00)
i1=$(nic_with_mac 02:1d:a3:00:00:01)
[ -n "$i0" ] && [ -n "$i1" ] || fail "no interfaces for ports 1 and 2"
d=$(gaudi_devices | head -n 1)
# No IPv6 (its neighbour and router solicitations would count as frames).
for i in "$i0" "$i1"; do
	sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1" || fail "$i: IPv6 not disabled"
done
cross_link_up 10.52 "$i0" 02:1d:a3:00:00:00 "$i1" 02:1d:a3:00:00:01
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
ping -q -i 0.02 -w 600 -I "$i0" 10.52.9.9 >/dev/null 2>&1 &
p0=$!
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
ports_attached "$d" ACTIVE "$ports" "after the bind"
gaudi-verbs-test uverbs --ports "$ports" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the InfiniBand device of the rebound driver does not work"
}
frames_flow "RDMA driver bound again"
kill $p0 2>/dev/null || true
wait $p0 2>/dev/null || true
for i in "$i0" "$i1"; do
	ip addr flush dev "$i"
	ip link set "$i" down
	sysctl -qw "net.ipv6.conf.$i.disable_ipv6=0" || true
done
emu_quiet_after "the RDMA driver's unbind and bind under traffic"
echo "RDMA driver unbound and bound again under Ethernet and RDMA traffic; the frames never stopped"
