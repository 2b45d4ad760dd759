# SPDX-License-Identifier: GPL-2.0
# Every method of the driver's uverbs namespace (QUERY_PORT, QUERY_MR and
# the QP set's CREATE, MODIFY, QUERY, DESTROY) called with missing, short,
# oversized, misaligned (odd addresses: accepted) and out-of-range
# attributes, unknown attributes and methods, wrong and stale handles gets
# the errno the uAPI documents; refused creations leave no QP on the device;
# no translation fault, DMA audit unchanged, no splat in the kernel log.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test uapi-bad-attrs || fail "bad attributes were not refused as documented"
if test_log | grep -E 'BUG:|WARNING:|Oops|KASAN|UBSAN|Call Trace'; then
	fail "kernel splat after bad attributes"
fi
