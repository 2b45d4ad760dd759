# SPDX-License-Identifier: GPL-2.0
# The NIC drivers are separate modules that find each other on the
# auxiliary bus, so they may be loaded in any order: for every order of
# gaudi_pci, gaudi_cn and gaudi_ib, all are unloaded, loaded in that order,
# and the result is the same device: the same auxiliary devices bound to
# the same drivers, gaudi_0 with the same node GUID and every port ACTIVE
# and attached to the same interface, and RDMA WRITEs from port 1 to port
# 2 that land.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
d=$(gaudi_devices | head -n 1)
[ -n "$d" ] || fail "no Gaudi2 device"
MODULES="gaudi_pci gaudi_cn gaudi_ib"

# What the loaded drivers made of the device, as one text. An auxiliary
# device's id is the owner's (it counts the owner's bindings): the core's
# device must have the id of the chip's, the text names neither.
signature() {
	cn=$(ls /sys/bus/auxiliary/devices | sed -n 's/^gaudi_pci\.cn\.//p')
	ib=$(ls /sys/bus/auxiliary/devices | sed -n 's/^gaudi_cn\.ib\.//p')
	[ "$cn" = "$ib" ] || echo "ids: gaudi_pci.cn.$cn and gaudi_cn.ib.$ib differ"
	for a in /sys/bus/auxiliary/devices/*; do
		[ -e "$a" ] || continue
		name=${a##*/}
		echo "aux ${name%.*} $(basename "$(readlink -f "$a/..")") $(basename "$(readlink "$a/driver" 2>/dev/null)")"
	done
	echo "pci $(bound_driver "$d")"
	echo "guid $(cat /sys/class/infiniband/gaudi_0/node_guid 2>/dev/null)"
	ls "/sys/bus/pci/devices/$d/net" 2>/dev/null | sed 's/^/net /'
	rdma link show 2>/dev/null
}

# Every order of the words of $2, each printed after the prefix $1, one
# order a line.
orders() {
	if [ -z "$2" ]; then
		echo "$1"
		return
	fi
	for m in $2; do
		orders "$1 $m" "$(echo " $2 " | sed "s/ $m / /; s/^ *//; s/ *$//")"
	done
}

want=$(signature)
echo "$want" | grep -q "^aux gaudi_cn.ib $d gaudi_ib.gaudi_ib$" ||
	fail "the first load gave no gaudi_cn.ib device bound to gaudi_ib: $want"
! echo "$want" | grep -q "^ids:" || fail "the first load: $want"
[ "$(echo "$want" | grep -c ' state ACTIVE ')" = "$ports" ] ||
	fail "the first load has not $ports ACTIVE ports: $want"
n=0
for order in $(orders "" "$MODULES" | sed "s/^ *//" | tr ' ' ,); do
	unload_drivers
	! ls /sys/bus/auxiliary/devices | grep -q '^gaudi_' ||
		fail "$order: auxiliary devices left after unloading: $(ls /sys/bus/auxiliary/devices)"
	for m in $(echo "$order" | tr , ' '); do
		args=
		[ "$m" = gaudi_ib ] && args=$(gaudi_modargs)
		# shellcheck disable=SC2086 # one word per parameter
		insmod "/lib/modules/$m.ko" $args || fail "$order: insmod $m failed"
	done
	got=$(signature)
	[ "$got" = "$want" ] || {
		echo "expected:"
		echo "$want"
		echo "after loading $order:"
		echo "$got"
		fail "loading $order gave another device"
	}
	# The RC QPs' send WQ arrays, CQ 1 and the gateway work: WRITEs from port
	# 1 to port 2 land.
	gaudi-verbs-test write-loopback --max-mib 1 --from 1 --to 2 >/tmp/wl.out 2>&1 || {
		cat /tmp/wl.out
		fail "$order: WRITEs from port 1 to port 2 failed"
	}
	n=$((n + 1))
	echo "$order: the same device"
done
[ "$n" = 6 ] || fail "$n load orders tried, expected 6"
emu_quiet_after "$n load orders"
echo "$n load orders of $MODULES, each the same device"
