# SPDX-License-Identifier: GPL-2.0
# The other direction of write_to_rxe: the kernel's soft-RoCE (rxe) in the
# other VM is the requester (write_from_rxe_target runs rxe-peer --source)
# and writes 4 MiB in one RDMA WRITE, at rxe's 1024-byte path MTU, into a
# region of this host behind port 2, which its QP names by iova and is
# bound to; this host checks every byte and that nothing landed next to
# it. Both sides address each other by GID only; Linux resolves the MACs.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
gaudi-verbs-test write-target --port 2 --addr "$RXE_LINK_GAUDI/24" --max-mib 4 --mtu 1024 ||
	fail "the WRITEs of the rxe host did not land"
