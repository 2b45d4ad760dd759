# SPDX-License-Identifier: GPL-2.0
# The NIC drivers are separate modules that find each other on the
# auxiliary bus, so they may be loaded in any order: for every one of the
# 24 orders of gaudi_pci, gaudi_cn, gaudi_en and gaudi_ib, all are
# unloaded, loaded in that order, and the result is the same device: the
# same auxiliary devices bound to the same drivers, gaudi_0 with the same
# node GUID, the same interfaces (down, as a load leaves them), and every
# port attached to the same interface (each to its own, as the first load
# showed) and DOWN with it. For 6 of the orders, chosen so that each
# module is loaded first in one of them and last in another, the
# interfaces are then brought up, every port must turn ACTIVE, and the
# data path is checked (RDMA WRITEs from port 1 to port 2 that land:
# write-loopback up to 1 MiB): bringing the interfaces up (the raw path of
# each opened) and a write-loopback cost as much as several loads, and the
# end state of every order is checked.
. /lib/gaudi/guest-lib.sh
load_driver
ports=$(kparam ports 24)
d=$(gaudi_devices | head -n 1)
[ -n "$d" ] || fail "no Gaudi2 device"
MODULES="gaudi_pci gaudi_cn gaudi_en gaudi_ib"
# First: pci, ib, cn, en, pci, ib; last: ib, pci, en, cn, en, cn. The
# RDMA driver also binds before and after the interfaces exist.
DATA_ORDERS="gaudi_pci,gaudi_cn,gaudi_en,gaudi_ib gaudi_ib,gaudi_en,gaudi_cn,gaudi_pci \
gaudi_cn,gaudi_pci,gaudi_ib,gaudi_en gaudi_en,gaudi_ib,gaudi_pci,gaudi_cn \
gaudi_pci,gaudi_cn,gaudi_ib,gaudi_en gaudi_ib,gaudi_pci,gaudi_en,gaudi_cn"
ibargs=$(gaudi_modargs)

# The driver bound to the device of sysfs directory $1 (its uevent's
# DRIVER), or "none", in $drv. Shell built-ins only: 24 orders, and each
# process costs a tenth of a second under TCG.
driver_of() {
	drv=none
	while IFS='=' read -r k v; do
		if [ "$k" = DRIVER ]; then drv=$v; fi
	done <"$1/uevent"
}

# What the loaded drivers made of the device, as one text. An auxiliary
# device's id is the owner's (it counts the owner's bindings): the core's
# devices must have the id of the chip's, the text names none. An
# auxiliary device is a child of the function if the function's directory
# has it.
signature() {
	for a in /sys/bus/auxiliary/devices/gaudi_pci.cn.*; do
		[ -e "$a" ] || continue
		for c in gaudi_cn.en gaudi_cn.ib; do
			[ -e "/sys/bus/auxiliary/devices/$c.${a##*.}" ] ||
				echo "ids: no $c.${a##*.} beside ${a##*/}"
		done
	done
	for a in /sys/bus/auxiliary/devices/*; do
		[ -e "$a" ] || continue
		name=${a##*/}
		parent=another
		[ -e "/sys/bus/pci/devices/$d/$name" ] && parent=$d
		driver_of "$a"
		echo "aux ${name%.*} $parent $drv"
	done
	driver_of "/sys/bus/pci/devices/$d"
	echo "pci $drv"
	guid=
	read -r guid 2>/dev/null </sys/class/infiniband/gaudi_0/node_guid || true
	echo "guid $guid"
	for i in /sys/bus/pci/devices/"$d"/net/*; do
		if [ -e "$i" ]; then echo "net ${i##*/}"; fi
	done
	rdma link show 2>/dev/null || true
}

# Bring up the function's interfaces and wait up to 10 s until all ports
# are ACTIVE with an interface (which ones, the signature says); $1 says
# after what.
ifaces_up() {
	up=""
	for i in /sys/bus/pci/devices/"$d"/net/*; do
		if [ -e "$i" ]; then up="$up ${i##*/}"; fi
	done
	[ -n "$up" ] || fail "$1: $d has no network interface"
	# shellcheck disable=SC2086 # one word per interface
	printf 'link set dev %s up\n' $up | ip -batch - || fail "$1: cannot bring up$up"
	t=0
	until [ "$(rdma link show 2>/dev/null | grep -c '^link gaudi_0/[0-9]* state ACTIVE .* netdev ')" = "$ports" ]; do
		t=$((t + 1))
		[ $t -lt 100 ] || { rdma link show; fail "$1: not $ports ports ACTIVE 10 s after bringing up$up"; }
		sleep 0.1
	done
}

# Every order of the modules, one a line, comma-separated (built-ins only).
orders() {
	for m1 in $MODULES; do
		for m2 in $MODULES; do
			[ "$m2" != "$m1" ] || continue
			for m3 in $MODULES; do
				[ "$m3" != "$m1" ] && [ "$m3" != "$m2" ] || continue
				for m4 in $MODULES; do
					[ "$m4" != "$m1" ] && [ "$m4" != "$m2" ] && [ "$m4" != "$m3" ] || continue
					echo "$m1,$m2,$m3,$m4"
				done
			done
		done
	done
}

# The first load: each port attached to its own interface, DOWN while the
# interface is (the end state every order must reach), and ACTIVE once it
# is up.
ports_attached "$d" DOWN "$ports" "the first load"
want=$(signature)
ports_up "$d" "$ports" "the first load"
for c in "gaudi_cn.en $d gaudi_en.gaudi_en" "gaudi_cn.ib $d gaudi_ib.gaudi_ib"; do
	echo "$want" | grep -qx "aux $c" || fail "the first load gave no $c: $want"
done
! echo "$want" | grep -q "^ids:" || fail "the first load: $want"
[ "$(echo "$want" | grep -c ' state DOWN .* netdev ')" = "$ports" ] ||
	fail "the first load has not $ports ports DOWN with their interfaces: $want"
n=0
data=0
for order in $(orders); do
	# Every module is loaded here (load_driver, then each order).
	rmmod gaudi_ib gaudi_en gaudi_cn gaudi_pci || fail "before $order: rmmod failed"
	for a in /sys/bus/auxiliary/devices/gaudi_*; do
		[ ! -e "$a" ] || fail "before $order: ${a##*/} left after unloading"
	done
	ifs=$IFS
	IFS=,
	# shellcheck disable=SC2086 # the order's modules, one word each
	set -- $order
	IFS=$ifs
	for m in "$@"; do
		args=
		[ "$m" = gaudi_ib ] && args=$ibargs
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
	n=$((n + 1))
	case " $DATA_ORDERS " in
	*" $order "*)
		# The ports turn ACTIVE with their interfaces; the RC QPs' send WQ
		# arrays, CQ 1 and the gateway work: WRITEs from port 1 to port 2
		# land.
		ifaces_up "loading $order"
		gaudi-verbs-test write-loopback --max-mib 1 --from 1 --to 2 >/tmp/wl.out 2>&1 || {
			cat /tmp/wl.out
			fail "$order: WRITEs from port 1 to port 2 failed"
		}
		data=$((data + 1))
		echo "$order: the same device, ACTIVE when up, WRITEs land"
		;;
	*) echo "$order: the same device" ;;
	esac
done
[ "$n" = 24 ] || fail "$n load orders tried, expected 24"
[ "$data" = 6 ] || fail "WRITEs checked after $data load orders, expected 6"
emu_quiet_after "$n load orders"
echo "$n load orders of $MODULES, each the same device; WRITEs landed after $data of them"
