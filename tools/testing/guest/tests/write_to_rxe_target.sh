# SPDX-License-Identifier: GPL-2.0
# The soft-RoCE side of write_to_rxe: rxe on the NIC linked to the Gaudi
# port (10.0.0.2/24, the port is 10.0.0.1), and rxe-peer, a libibverbs
# program, as the target of the WRITEs; it checks every byte.
. /lib/gaudi/guest-lib.sh
for m in udp_tunnel ip6_udp_tunnel rdma_rxe; do
	insmod "/lib/modules/$m.ko" || fail "insmod $m failed"
done
mgmt_up
data=$(nic_with_mac 02:00:00:00:00:02)
[ -n "$data" ] || fail "no NIC on the Gaudi link"
ip addr add 10.0.0.2/24 dev "$data"
ip link set "$data" up
rdma link add rxe0 type rxe netdev "$data" || fail "rdma link add rxe0 failed"
rdma link show rxe0/1
rxe-peer rxe0 "$data" 16 || fail "rxe-peer failed"
