# SPDX-License-Identifier: GPL-2.0
# The drivers are laid out as on a Gaudi2 host: gaudi_pci (the chip's
# owner, as habanalabs is on a host) binds the PCI function and adds one
# auxiliary device, gaudi_pci.cn.N, a child of the function; the NIC core
# gaudi_cn binds it and adds gaudi_cn.en.N and gaudi_cn.ib.N, also
# children of the function, which the Ethernet driver gaudi_en and the
# RDMA driver gaudi_ib bind. gaudi_0 and the ports' interfaces are
# children of the function, the interfaces gaudi_en's (ethtool -i), and
# rdma link show names each port's interface.
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
aux_bound 'gaudi_cn.en.*' gaudi_en.gaudi_en
aux_bound 'gaudi_cn.ib.*' gaudi_ib.gaudi_ib
# The core's devices have the id of the chip's.
cn=$(aux_device gaudi_pci.cn.)
for a in gaudi_cn.en gaudi_cn.ib; do
	[ -e "/sys/bus/auxiliary/devices/$a.${cn##*.}" ] ||
		fail "no $a.${cn##*.} beside $cn: $(ls /sys/bus/auxiliary/devices)"
done
all=$(ls /sys/bus/auxiliary/devices)
echo "$all"
[ "$(echo "$all" | grep -c '^gaudi_' || true)" = 3 ] || fail "not 3 gaudi auxiliary devices: $all"
ib_parent=$(basename "$(readlink -f /sys/class/infiniband/gaudi_0/device)")
[ "$ib_parent" = "$d" ] || fail "gaudi_0's device is $ib_parent, expected $d"
# The interfaces are children of the function (ports_attached counts them),
# whose driver is gaudi_pci, and gaudi_en's (ethtool -i of the first).
ports_attached "$d" '[A-Z_]*' "$ports" "after loading"
first=
for i in /sys/bus/pci/devices/"$d"/net/*; do
	[ -e "$i" ] && first=${i##*/} && break
done
[ -n "$first" ] || fail "$d has no network interface"
info=$(ethtool -i "$first") || fail "ethtool -i $first failed"
echo "$info" | grep -qx 'driver: gaudi_en' || { echo "$info"; fail "ethtool -i $first does not name gaudi_en"; }
echo "$first: a child of $d (bound to $(bound_driver "$d")), its driver gaudi_en"
echo "gaudi_pci binds $d, gaudi_cn its auxiliary device, gaudi_en and gaudi_ib the core's; gaudi_0 and $ports interfaces of gaudi_en are children of $d, each port attached to its interface"
