# SPDX-License-Identifier: GPL-2.0
# The drivers are laid out as on a Gaudi2 host: gaudi_pci (the chip's
# owner, as habanalabs is on a host) binds the PCI function and adds one
# auxiliary device, gaudi_pci.cn.N, a child of the function; the NIC core
# gaudi_cn binds it and adds gaudi_cn.ib.N, also a child of the function,
# which the RDMA driver gaudi_ib binds. gaudi_0 and the ports' interfaces
# are children of the function, and rdma link show names each port's
# interface.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "$d not bound to gaudi_pci"
# Auxiliary devices named $1 (a glob): exactly one, a child of $d, bound to
# driver $2 (an auxiliary driver is named after its module and itself).
aux_bound() {
	n=0
	for a in /sys/bus/auxiliary/devices/$1; do
		[ -e "$a" ] || continue
		n=$((n + 1))
		parent=$(basename "$(readlink -f "$a/..")")
		[ "$parent" = "$d" ] || fail "${a##*/}: parent $parent, expected $d"
		drv=$(basename "$(readlink "$a/driver" 2>/dev/null)")
		[ "$drv" = "$2" ] || fail "${a##*/} bound to '${drv:-nothing}', expected $2"
		echo "${a##*/}: child of $d, bound to $drv"
	done
	[ "$n" = 1 ] || fail "$n auxiliary devices $1, expected 1"
}
aux_bound 'gaudi_pci.cn.*' gaudi_cn.gaudi_cn
aux_bound 'gaudi_cn.ib.*' gaudi_ib.gaudi_ib
all=$(ls /sys/bus/auxiliary/devices | grep -c '^gaudi_' || true)
[ "$all" = 2 ] || fail "$all gaudi auxiliary devices, expected 2: $(ls /sys/bus/auxiliary/devices)"
ib_parent=$(basename "$(readlink -f /sys/class/infiniband/gaudi_0/device)")
[ "$ib_parent" = "$d" ] || fail "gaudi_0's device is $ib_parent, expected $d"
ports_attached "$d" '[A-Z_]*' "$ports" "after loading"
echo "gaudi_pci binds $d, gaudi_cn its auxiliary device, gaudi_ib the core's; gaudi_0 and $ports interfaces are children of $d, each port attached to its interface"
