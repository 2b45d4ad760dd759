# SPDX-License-Identifier: GPL-2.0
# One Ethernet interface per port, with the port's MAC address (the
# emulator's 02:1d:a3:00:00:PP), linked to its InfiniBand port; its carrier
# follows the port's link (injected down and up); ethtool names the driver
# (the Ethernet driver, gaudi_en), the bus address, the link speed, the
# rings and the raw path's counters (CQEs refused, transmit queue full:
# none yet); a new unicast MAC address is taken, a multicast one refused.
. /lib/gaudi/guest-lib.sh
load_driver
dev=$(gaudi_devices | head -n 1)
ports=$(kparam ports 24)
n=0
for p in $(seq 0 $((ports - 1))); do
	mac=$(printf '02:1d:a3:00:00:%02x' "$p")
	ifc=$(nic_with_mac "$mac")
	[ -n "$ifc" ] || fail "no interface with port $((p + 1))'s MAC $mac"
	drv=$(basename "$(readlink "/sys/class/net/$ifc/device/driver")")
	[ "$drv" = gaudi_pci ] || fail "$ifc ($mac) belongs to $drv"
	[ "$(basename "$(readlink "/sys/class/net/$ifc/device")")" = "$dev" ] ||
		fail "$ifc is not a child of $dev"
	n=$((n + 1))
done
total=0
for i in /sys/class/net/*; do
	[ "$(basename "$(readlink "$i/device/driver" 2>/dev/null)")" = gaudi_pci ] && total=$((total + 1))
done
[ "$total" = "$ports" ] || fail "$total interfaces of the function for $ports ports"
echo "$n interfaces, one per port, with the ports' MAC addresses"
links=$(rdma link show) || fail "rdma link show failed"
for p in $(seq 0 $((ports - 1))); do
	ifc=$(nic_with_mac "$(printf '02:1d:a3:00:00:%02x' "$p")")
	echo "$links" | grep -q "^link gaudi_0/$((p + 1)) .* netdev $ifc *\$" ||
		{ echo "$links"; fail "rdma link show does not name $ifc for port $((p + 1))"; }
done
echo "rdma link show names each port's interface"
ifc=$(nic_with_mac 02:1d:a3:00:00:00)
ip link set "$ifc" up || fail "ip link set $ifc up failed"
wait_carrier() { # IFACE 0|1
	i=0
	while [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" != "$2" ]; do
		i=$((i + 1))
		[ $i -lt 50 ] || fail "$1: carrier not $2 5 s after the link change"
		sleep 0.1
	done
}
wait_carrier "$ifc" 1
emu_ctl link 0 down >/dev/null || fail "emulator: link down failed"
wait_carrier "$ifc" 0
ip link show "$ifc" | grep -q 'NO-CARRIER' || fail "ip link does not show NO-CARRIER"
emu_ctl link 0 up >/dev/null || fail "emulator: link up failed"
wait_carrier "$ifc" 1
echo "$ifc: carrier followed the link down and up"
info=$(ethtool -i "$ifc") || fail "ethtool -i failed"
echo "$info" | grep -qx 'driver: gaudi_en' || { echo "$info"; fail "ethtool -i does not name gaudi_en"; }
echo "$info" | grep -qx "bus-info: $dev" || { echo "$info"; fail "ethtool -i does not name $dev"; }
settings=$(ethtool "$ifc") || fail "ethtool failed"
echo "$settings" | grep -q 'Speed: 100000Mb/s' || { echo "$settings"; fail "no 100000Mb/s"; }
echo "$settings" | grep -q 'Link detected: yes' || { echo "$settings"; fail "no link detected"; }
rings=$(ethtool -g "$ifc") || fail "ethtool -g failed"
[ "$(echo "$rings" | grep -c '^RX:[[:space:]]*32$')" = 2 ] || { echo "$rings"; fail "ethtool -g: not 32 RX descriptors"; }
stats=$(ethtool -S "$ifc") || fail "ethtool -S failed"
echo "$stats" | grep -q 'rx_bad_cqe: 0$' || { echo "$stats"; fail "ethtool -S: no rx_bad_cqe of 0"; }
echo "$stats" | grep -q 'tx_queue_full: ' || { echo "$stats"; fail "ethtool -S: no tx_queue_full"; }
echo "ethtool: driver, bus, speed, rings and counters"
ip link set "$ifc" address 02:1d:a3:aa:bb:cc || fail "cannot change the MAC address"
[ "$(cat "/sys/class/net/$ifc/address")" = 02:1d:a3:aa:bb:cc ] || fail "MAC address not changed"
ip link set "$ifc" address 01:00:5e:00:00:01 2>/dev/null && fail "a multicast MAC address was accepted"
echo "$ifc: MAC address changed, a multicast one refused"
ip link set "$ifc" address 02:1d:a3:00:00:00
ip link set "$ifc" down
