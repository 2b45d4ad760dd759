# SPDX-License-Identifier: GPL-2.0
# The driver registers one InfiniBand device with every port of the NIC;
# iproute2's rdma tool sees it through RDMA netlink.
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
grep -q '^gaudi_ib ' /proc/modules || insmod /lib/modules/gaudi_ib.ko
devs=$(rdma dev show) || fail "rdma dev show failed"
echo "$devs"
n=$(echo "$devs" | grep -c ': gaudi_[0-9]*:')
[ "$n" = 1 ] || fail "expected one gaudi device, rdma dev show lists $n"
echo "$devs" | grep -q 'node_type ca' || fail "gaudi device is not a channel adapter"
links=$(rdma link show) || fail "rdma link show failed"
echo "$links"
n=$(echo "$links" | grep -c '^link gaudi_0/[0-9]* ')
[ "$n" = "$ports" ] || fail "expected $ports links, rdma link show lists $n"
active=$(echo "$links" | grep -c '^link gaudi_0/[0-9]* state ACTIVE ')
[ "$active" = "$ports" ] || fail "expected $ports ACTIVE links, saw $active"
[ -e /dev/infiniband/uverbs0 ] || fail "no /dev/infiniband/uverbs0"
echo "one device, $ports links, all ACTIVE"
