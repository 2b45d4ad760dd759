# SPDX-License-Identifier: GPL-2.0
# The driver registers one InfiniBand device with every port of the NIC;
# iproute2's rdma tool sees it through RDMA netlink. Every port is ACTIVE
# once the ports' interfaces are up (a port's state is its interface's).
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
load_driver
ports_up "$(gaudi_devices | head -n 1)" "$ports" "with the interfaces up"
devs=$(rdma dev show) || fail "rdma dev show failed"
echo "$devs"
n=$(echo "$devs" | grep -c ': gaudi_[0-9]*:')
[ "$n" = 1 ] || fail "expected one gaudi device, rdma dev show lists $n"
echo "$devs" | grep -q 'node_type ca' || fail "gaudi device is not a channel adapter"
# The node GUID is the EUI-64 of port 1's MAC (the emulator's 02:1d:a3:00:00:00).
guid=$(cat /sys/class/infiniband/gaudi_0/node_guid)
[ "$guid" = "001d:a3ff:fe00:0000" ] || fail "node GUID $guid, expected 001d:a3ff:fe00:0000"
links=$(rdma link show) || fail "rdma link show failed"
echo "$links"
n=$(echo "$links" | grep -c '^link gaudi_0/[0-9]* ')
[ "$n" = "$ports" ] || fail "expected $ports links, rdma link show lists $n"
active=$(echo "$links" | grep -c '^link gaudi_0/[0-9]* state ACTIVE ')
[ "$active" = "$ports" ] || fail "expected $ports ACTIVE links, saw $active"
[ -e /dev/infiniband/uverbs0 ] || fail "no /dev/infiniband/uverbs0"
# Each port is attached to its network interface: rdma link names it, and
# GID 0 is the port's default GID (fe80:: with the EUI-64 of its MAC, the
# emulator's 02:1d:a3:00:00:P for port index P), of type RoCE v2, which the
# core's GID cache derives from the interface.
sys=/sys/class/infiniband/gaudi_0/ports
p=1
while [ $p -le "$ports" ]; do
	ifc=$(nic_with_mac "$(printf '02:1d:a3:00:00:%02x' $((p - 1)))")
	echo "$links" | grep -q "^link gaudi_0/$p .* netdev $ifc *\$" ||
		fail "port $p: rdma link show does not name netdev $ifc"
	want=$(printf 'fe80:0000:0000:0000:001d:a3ff:fe00:00%02x' $((p - 1)))
	read -r gid <$sys/$p/gids/0 || fail "port $p: no GID 0"
	[ "$gid" = "$want" ] || fail "port $p: GID 0 is $gid, expected $want"
	read -r type <$sys/$p/gid_attrs/types/0 || fail "port $p: no GID 0 type"
	[ "$type" = "RoCE v2" ] || fail "port $p: GID 0 type is '$type'"
	p=$((p + 1))
done
echo "GID 0 of port 1: $(cat $sys/1/gids/0) ($(cat $sys/1/gid_attrs/types/0))"
echo "one device, $ports links, all ACTIVE, each with its interface and default GID"
