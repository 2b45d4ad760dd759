# SPDX-License-Identifier: GPL-2.0
# One user context cannot take the device's memory. The driver is loaded
# with small limits (module parameters max_qp_sets=64, max_queue_mib=24,
# max_mrs=2048; the defaults are 256, 256 MiB and 65536): 64 QP sets, then
# ENOSPC (one more after one is destroyed); sets of the largest queues
# until the 24 MiB of queue memory give ENOSPC at the set the arithmetic
# predicts, filled to the byte (24 MiB: the 7 user blocks of a port hold
# the 5 large sets, the rest's and the smallest); 2048 memory regions of one page, then
# ENOSPC; with RLIMIT_MEMLOCK at 64 MiB (CAP_IPC_LOCK dropped), 64 GiB of
# never-touched MAP_NORESERVE memory fails with ENOMEM at once. No MMU
# fault, the DMA audit unchanged; a soft lockup would show in the kernel
# log. The driver is loaded with its defaults again at the end.
. /lib/gaudi/guest-lib.sh
load_driver
rmmod gaudi_ib || fail "rmmod gaudi_ib"
insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs) max_qp_sets=64 max_queue_mib=24 max_mrs=2048 ||
	fail "insmod gaudi_ib with small limits"
load_driver
t0=$(uptime_cs)
gaudi-verbs-test limits-enforced --max-sets 64 --max-queue-mib 24 --max-mrs 2048 ||
	fail "a per-context limit was not enforced"
echo "limits_enforced took $((($(uptime_cs) - t0) / 100)) s"
rmmod gaudi_ib || fail "rmmod gaudi_ib after the test"
load_driver
