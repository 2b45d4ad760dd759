# SPDX-License-Identifier: GPL-2.0
# Two hosts, port 1 linked to port 1: this host writes 1 B to 64 MiB into
# device memory (HBM) of the other (hbm_dmabuf_p2p_target), which exported
# the memory as a dma-buf, registered the dma-buf as a memory region and
# checks every byte through BAR 4 and its device's MMU.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
gaudi-verbs-test write-source --peer "$peer" --port 1 --max-mib 64 ||
	fail "WRITEs into the other host's HBM failed"
