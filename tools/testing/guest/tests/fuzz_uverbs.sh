# SPDX-License-Identifier: GPL-2.0
# The uverbs interface under random calls: gaudi-verbs-test fuzz-uverbs
# calls every method of the driver's namespace and every standard method
# (the write() commands too) of the table derived from the uAPI headers,
# with random attribute sets, sizes, handles and values, and writes random
# WQEs and doorbells to mapped QP set queues: gaudi.fuzz_calls calls
# (default 10000) of seed gaudi.fuzz_seed (default fixed, so that a session
# is reproducible), at most gaudi.fuzz_seconds seconds if given. No splat in
# the kernel log, the emulator's DMA audit unchanged; on a failure, the seed,
# the shortest failing call sequence found and the last calls made. Then the
# driver is reloaded: nothing stays referenced (kmemleak is scanned by the
# session afterwards).
. /lib/gaudi/guest-lib.sh
load_driver
# The one warning a process can provoke with its own queues, which the
# fuzzer does: a QP set whose CQ is smaller than its send queue (or a CQ
# shared by QPs with more WQEs outstanding than it holds) overflows when the
# queue is flushed.
expect_warning 'overflowed: completions lost'
seed=$(kparam fuzz_seed 20261123)
calls=$(kparam fuzz_calls 10000)
seconds=$(kparam fuzz_seconds 0)
set -- --seed "$seed" --calls "$calls"
[ "$seconds" = 0 ] || set -- "$@" --seconds "$seconds"
if ! gaudi-verbs-test fuzz-uverbs --emu "$@"; then
	echo "== the last calls made (/tmp/fuzz-calls.log: seed, index, call)"
	tail -n 50 /tmp/fuzz-calls.log
	fail "fuzz-uverbs failed (seed $seed)"
fi
rmmod gaudi_ib || fail "rmmod gaudi_ib after fuzzing: the module is still referenced"
insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs) || fail "insmod gaudi_ib after fuzzing"
load_driver
