# SPDX-License-Identifier: GPL-2.0
# The target of hbm_dmabuf_p2p: 64 MiB of HBM exported as a dma-buf; vgem's
# PRIME import (no peer-to-peer) is refused with EOPNOTSUPP, the dma-buf is
# registered as a memory region for remote writes at iova 0x60000000 (the
# address the source names it by); each WRITE is checked
# byte for byte through BAR 4 and, at its ends, through the device MMU (the
# emulator); the block stays allocated while the dma-buf lives and is free
# again once the region and the dma-buf are gone.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
gaudi-verbs-test write-target --port 1 --max-mib 64 --hbm ||
	fail "HBM dma-buf target failed"
test_log | grep -q "dma-buf of device memory refused: the importer does not do peer-to-peer" ||
	fail "no log line for the refused import"
