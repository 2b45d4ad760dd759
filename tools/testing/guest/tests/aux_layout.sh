# SPDX-License-Identifier: GPL-2.0
# The drivers are laid out as on a Gaudi2 host: gaudi_pci (the chip's
# owner, as habanalabs is on a host) binds the PCI function and adds one
# auxiliary device, gaudi_pci.cn.N, a child of the function; gaudi_ib binds
# it. gaudi_0 and the ports' interfaces are children of the function, and
# rdma link show names each port's interface.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "$d not bound to gaudi_pci"
n=0
for a in /sys/bus/auxiliary/devices/gaudi_pci.cn.*; do
	[ -e "$a" ] || continue
	n=$((n + 1))
	parent=$(basename "$(readlink -f "$a/..")")
	[ "$parent" = "$d" ] || fail "${a##*/}: parent $parent, expected $d"
	# An auxiliary driver is named after its module and itself.
	drv=$(basename "$(readlink "$a/driver" 2>/dev/null)")
	[ "$drv" = gaudi_ib.gaudi_ib ] || fail "${a##*/} bound to '${drv:-nothing}', expected gaudi_ib.gaudi_ib"
	echo "${a##*/}: child of $d, bound to $drv"
done
[ "$n" = 1 ] || fail "$n gaudi_pci.cn auxiliary devices, expected 1"
ib_parent=$(basename "$(readlink -f /sys/class/infiniband/gaudi_0/device)")
[ "$ib_parent" = "$d" ] || fail "gaudi_0's device is $ib_parent, expected $d"
links=$(rdma link show) || fail "rdma link show failed"
for p in $(seq 1 "$ports"); do
	ifc=$(port_if "$p")
	[ -n "$ifc" ] || fail "port $p: no interface that is a child of $d"
	echo "$links" | grep -q "^link gaudi_0/$p .* netdev $ifc *$" ||
		fail "rdma link show: port $p is not attached to $ifc"
done
echo "gaudi_pci binds $d, gaudi_ib its auxiliary device; gaudi_0 and $ports interfaces are children of $d, each port attached to its interface"
