# SPDX-License-Identifier: GPL-2.0
# The wire through the driver: PSNs wrapping at 2^24 within a run of
# WRITEs, every frame delayed by 20 ms, frames reordered (sequence NAKs,
# resends), acknowledgements lost (timeouts, resends, duplicates taken
# once); every WRITE lands byte for byte with its neighbours untouched.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test wire-faults || fail "WRITEs did not survive the wire's faults"
