# SPDX-License-Identifier: GPL-2.0
# A device that does not come out of reset is refused after the driver's
# timeout, with a message and ETIMEDOUT, and nothing is left behind (the
# emulator's resets never finish during this test).
. /lib/gaudi/guest-lib.sh
probe_refused "device not ready 1000 ms after reset" "reset-hangs on" "reset-hangs off"
test_log | grep -q "probe with driver gaudi_pci failed with error -110" ||
	fail "probe did not fail with ETIMEDOUT"
