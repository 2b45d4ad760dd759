# SPDX-License-Identifier: GPL-2.0
# 20 unbind/bind cycles of the PCI function and 20 rmmod/insmod cycles of
# the NIC core, the Ethernet and the RDMA driver staying loaded
# (gaudi.cycles of each: 1000 in the soak): every one removes the
# InfiniBand device and the ports' network interfaces and brings them
# back (each port attached to its own interface after the last), the
# kernel log has no warning, the emulator sees no DMA or interrupt without
# bus mastering; what leaked shows in the session's kmemleak scan. It
# runs early in the queues session (2 ports; a longer time limit): under
# TCG with KASAN, 40 cycles of a 2-port device take about 100 s; each of
# 24 ports adds about 0.1 s of network device registration and removal to
# a cycle.
. /lib/gaudi/guest-lib.sh
load_driver
debugfs
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "device not bound"
ports=$(kparam ports 24)
# The network interfaces of the device: $1 of them.
netdevs() {
	[ "$(ls "/sys/bus/pci/devices/$d/net" 2>/dev/null | wc -l)" = "$1" ]
}
t0=$(cut -d. -f1 /proc/uptime)
i=0
n=$(kparam cycles 20)
while [ $i -lt "$n" ]; do
	echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
	[ -z "$(bound_driver "$d")" ] || fail "cycle $i: still bound after unbind"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after unbind"
	netdevs 0 || fail "cycle $i: network interfaces left after unbind"
	echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after bind"
	netdevs "$ports" || fail "cycle $i: not $ports network interfaces after bind"
	i=$((i + 1))
done
i=0
while [ $i -lt "$n" ]; do
	# The Ethernet and the RDMA driver stay loaded: each is unbound with its
	# core's device and binds the new one.
	rmmod gaudi_cn || fail "cycle $i: rmmod failed"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after rmmod"
	netdevs 0 || fail "cycle $i: network interfaces left after rmmod"
	insmod /lib/modules/gaudi_cn.ko || fail "cycle $i: insmod failed"
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after insmod"
	netdevs "$ports" || fail "cycle $i: not $ports network interfaces after insmod"
	i=$((i + 1))
done
ports_attached "$d" '[A-Z_]*' "$ports" "after the cycles"
gaudi-verbs-test context --expect-errno 0 || fail "no user context after the cycles"
! test_log | grep -E 'WARNING:|BUG:|Call Trace' || fail "kernel warnings during the cycles"
emu_quiet_after "$((2 * n)) cycles"
echo "cycles took $(($(cut -d. -f1 /proc/uptime) - t0)) s"
echo "$n unbind/bind and $n rmmod/insmod cycles, gaudi_0 and $ports interfaces back each time"
