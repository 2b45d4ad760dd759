# SPDX-License-Identifier: GPL-2.0
# Against a RoCEv2 implementation nobody here wrote: the other VM runs the
# kernel's soft-RoCE (rxe) on a virtio-net NIC on the link of this host's
# port 2, and a libibverbs program there (write_to_rxe_target) registers a
# region and hands over its address, rkey, QP number and addresses (over
# the Gaudi2 link of port 1); this host writes 1 B to 4 MiB into it from
# port 2 at the 1024-byte path MTU rxe uses on Ethernet, and the rxe side
# checks every byte.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
gaudi-verbs-test write-source --peer "$peer" --port 2 --addr "$RXE_LINK_GAUDI/24" --max-mib 4 ||
	fail "WRITEs to the rxe host failed"
