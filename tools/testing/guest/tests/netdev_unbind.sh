# SPDX-License-Identifier: GPL-2.0
# Unbinding the driver and unloading it while both ports' network
# interfaces carry frames (each pings an address behind the other across
# the link, so one transmits and the other receives) and QPs write
# (gaudi-verbs-test removal): the interfaces and the InfiniBand device go,
# the writing process is told (DEVICE_FATAL, then EIO), the device is quiet
# afterwards, and binding again brings everything back. No splat and no
# leak (the session's KASAN, lockdep and kmemleak).
. /lib/gaudi/guest-lib.sh
load_driver
d=$(gaudi_devices | head -n 1)
i0=$(nic_with_mac 02:1d:a3:00:00:00)
i1=$(nic_with_mac 02:1d:a3:00:00:01)
[ -n "$i0" ] && [ -n "$i1" ] || fail "no interfaces for ports 1 and 2"
start_removal_traffic
cross_link_up 10.51 "$i0" 02:1d:a3:00:00:00 "$i1" 02:1d:a3:00:00:01
rx0=$(cat "/sys/class/net/$i1/statistics/rx_packets")
ping -q -i 0.02 -w 600 -I "$i0" 10.51.9.9 >/dev/null 2>&1 &
p0=$!
sleep 2
rx1=$(cat "/sys/class/net/$i1/statistics/rx_packets")
[ "$rx1" -gt "$rx0" ] || fail "$i1 received nothing from $i0 ($rx0 -> $rx1 frames)"
echo "$i0 -> $i1: $((rx1 - rx0)) frames in 2 s, QPs writing; unbinding"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind || fail "unbind failed"
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
[ ! -e "/sys/class/net/$i0" ] && [ ! -e "/sys/class/net/$i1" ] || fail "interfaces left after unbind"
[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "gaudi_0 left after unbind"
wait $bg_pid || { cat /tmp/removal.out; fail "the writing process was not told of the removal"; }
kill $p0 2>/dev/null || true
wait $p0 2>/dev/null || true
unload_drivers
emu_quiet_after "unbind and rmmod under traffic"
load_driver
n=$(ls -d /sys/class/net/*/device 2>/dev/null | while read -r x; do
	[ "$(basename "$(readlink "$x")")" = "$d" ] && echo "$x"
done | grep -c . || true)
[ "$n" = 2 ] || fail "$n interfaces after loading again, expected 2"
echo "unbound and unloaded under Ethernet and RDMA traffic; loaded again with 2 interfaces"
