# SPDX-License-Identifier: GPL-2.0
# Debian's ibv_devinfo, through libibverbs and the device's rdma-core
# provider, lists gaudi_0 with every port ACTIVE on Ethernet (the ports'
# interfaces up: a port's state is its interface's), the NIC's
# limits (1024 QPs per port: a port's context tables; the driver's CQs: 1024
# per port of 8192 entries), the device model (the chip services'
# SVC_VERSION, 2.0) as firmware version, and each port's GIDs: the default
# fe80:: GID of its MAC, and the IPv4 GID of an address added to port 1's
# interface. A send queue holds at most 1024 requests (its QP's 64 KiB slot
# of the port's send WQ array, 2048 WQEs, half of them for the ring's
# headroom; design.rst).
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
max_qps=1024
max_cqs=1024
max_cqe=8192
max_sqe=1024
load_driver
ibv_devinfo -l >/tmp/devs.txt 2>&1 || { cat /tmp/devs.txt; fail "ibv_devinfo -l failed"; }
grep -q '^[[:space:]]*gaudi_0$' /tmp/devs.txt || { cat /tmp/devs.txt; fail "ibv_devinfo -l does not list gaudi_0"; }
n=$(data_if_up 10.31.0.1 fd00:31::1)
ports_up "$(gaudi_devices | head -n 1)" "$ports" "with the interfaces up"
i=0
while ! grep -q '0000:0000:0000:0000:0000:ffff:0a1f:0001' /sys/class/infiniband/gaudi_0/ports/1/gids/* 2>/dev/null &&
	[ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
ibv_devinfo -v -d gaudi_0 >/tmp/devinfo.txt 2>&1 || { cat /tmp/devinfo.txt; fail "ibv_devinfo -v failed"; }
# The device and its first port.
awk '$1 == "port:" && $2 == 2 { exit } { print }' /tmp/devinfo.txt
# The value of the device attribute $1 (first occurrence).
attr() { awk -v k="$1:" '$1 == k { print $2; exit }' /tmp/devinfo.txt; }
expect() { # ATTRIBUTE VALUE
	v=$(attr "$1")
	[ "$v" = "$2" ] || fail "ibv_devinfo: $1 is '$v', expected $2"
}
expect hca_id gaudi_0
expect transport InfiniBand
expect vendor_id 0x1da3
expect vendor_part_id 4128
expect fw_ver 2.0.0
expect node_guid 001d:a3ff:fe00:0000
expect phys_port_cnt "$ports"
expect max_qp $((max_qps * ports))
expect max_qp_wr "$max_sqe"
expect max_cq $((max_cqs * ports))
expect max_cqe "$max_cqe"
expect sys_image_guid 001d:a3ff:fe00:0000
expect max_pd 1
# Per context (gaudi_ib's max_mrs).
expect max_mr 65536
# SGEs per send request (each its own WQE); the receive limit is reported
# the same, as the ABI reports the smaller of the two (uapi.rst).
expect max_sge 4
active=$(grep -c 'state:[[:space:]]*PORT_ACTIVE (4)' /tmp/devinfo.txt || true)
[ "$active" = "$ports" ] || fail "$active of $ports ports PORT_ACTIVE"
eth=$(grep -c 'link_layer:[[:space:]]*Ethernet' /tmp/devinfo.txt || true)
[ "$eth" = "$ports" ] || fail "$eth of $ports ports with link layer Ethernet"
# Each port's GID 0, in its own port section (RoCE v2 GIDs print as IPv6
# addresses).
p=1
while [ $p -le "$ports" ]; do
	want=$(printf 'fe80::1d:a3ff:fe00:%x, RoCE v2' $((p - 1)))
	awk -v p="$p" '$1 == "port:" { cur = $2 } cur == p && /GID\[ *0\]:/ { sub(/.*GID\[ *0\]:[[:space:]]*/, ""); print; exit }' \
		/tmp/devinfo.txt >/tmp/gid0.txt
	[ "$(cat /tmp/gid0.txt)" = "$want" ] || fail "port $p: GID 0 is '$(cat /tmp/gid0.txt)', expected '$want'"
	p=$((p + 1))
done
awk '$1 == "port:" { cur = $2 } cur == 1' /tmp/devinfo.txt |
	grep -q 'GID\[ *[0-9]*\]:[[:space:]]*::ffff:10.31.0.1, RoCE v2' ||
	fail "port 1 shows no RoCE v2 GID of 10.31.0.1 (interface $n)"
echo "ibv_devinfo: gaudi_0, $ports ports ACTIVE on Ethernet, limits of the emulator, GIDs of the interfaces"
