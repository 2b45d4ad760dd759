# SPDX-License-Identifier: GPL-2.0
# A guest NIC on the same link as port 0 of the emulated Gaudi2 (QEMU
# -netdev dgram, the link format of the emulator's ports) resolves the
# port's address: frames cross in both directions and the port answers
# ARP for its IPv4 address (10.0.0.1, MAC 02:1d:a3:00:00:00).
. /lib/gaudi/guest-lib.sh
ifc=
for i in /sys/class/net/*; do
	[ "$(basename "$i")" = lo ] || ifc=$(basename "$i")
done
[ -n "$ifc" ] || fail "no network interface in the guest"
echo "interface $ifc"
ip link set "$ifc" up
ip addr add 10.0.0.2/24 dev "$ifc"
echo "arping 10.0.0.1 on $ifc"
out=$(arping -c 3 -w 5 -I "$ifc" 10.0.0.1 2>&1 || true)
echo "$out"
echo "$out" | grep -q -i "reply from 10.0.0.1 \[02:1d:a3:00:00:00\]" ||
	fail "no ARP reply from the emulated port"
