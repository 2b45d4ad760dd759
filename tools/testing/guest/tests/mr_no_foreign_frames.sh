# SPDX-License-Identifier: GPL-2.0
# Device pages never reach past the pinned memory: regions of 8 KiB,
# 5000 B and 12289 B registered at 4 KiB iovas of a 2 MiB window (inside a
# 2 MiB huge page, whose memory is physically contiguous, and of ordinary
# memory): the iova whose device VA is congruent to the memory's physical
# address modulo 2 MiB (where a driver choosing device pages by that
# congruence alone would map 2 MiB; the test fails unless it was reached),
# its neighbours and every 32nd (--stride 1 registers at all 512), 8 KiB
# at either end of a huge page, 8 KiB left of a split transparent huge
# page (when the kernel has THP) and an 8 KiB HBM block registered from its
# dma-buf at iovas congruent to its bus address: every one gets 4 KiB
# device pages, the byte before the first pinned page and the byte after
# the last are unmapped on the device (the emulator's peek faults), the
# region's first and last bytes read as the CPU wrote
# them; the MMU fault count moves by the faults provoked, the DMA audit
# does not move.
. /lib/gaudi/guest-lib.sh
load_driver
echo 2 >/proc/sys/vm/nr_hugepages 2>/dev/null || true
[ "$(cat /proc/sys/vm/nr_hugepages)" -ge 1 ] || fail "cannot reserve a huge page of 2 MiB"
if ! gaudi-verbs-test mr-no-foreign-frames; then
	echo 0 >/proc/sys/vm/nr_hugepages
	fail "device pages reach past the pinned memory"
fi
echo 0 >/proc/sys/vm/nr_hugepages
