# SPDX-License-Identifier: GPL-2.0
# The software lkey check of the send path: SGEs before, after, straddling
# and overflowing their region, unknown, stale and deregistered keys, a
# wrong rkey and oversized lengths fail with EINVAL naming the request;
# nothing reaches the device (its MMU fault count does not move) and the
# DMA audit stays 0; the requests before a refused one are posted.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test mr-out-of-bounds || fail "out-of-bounds SGEs were not all refused"
