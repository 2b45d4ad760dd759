# SPDX-License-Identifier: GPL-2.0
# A device fatal error injected through the emulator reaches a user program
# as DEVICE_FATAL; its context is disassociated (event file ends, verbs fail
# with EIO) and the InfiniBand device goes away while the program still
# holds its file open. Unbinding and binding the PCI device then brings a
# working device back.
. /lib/gaudi/guest-lib.sh
ports=$(kparam ports 24)
dev=$(gaudi_devices | head -n 1)
[ -n "$dev" ] || fail "no Gaudi2 device"
expect_warning "device fatal error: removing the InfiniBand device"
start_listener fatal gaudi-verbs-test fatal
emu_ctl fatal || fail "emulator refused fatal"
wait $bg_pid || {
	cat /tmp/fatal.out
	fail "the user program did not see DEVICE_FATAL and the disassociation"
}
cat /tmp/fatal.out
test_log | grep -q "device fatal error" || fail "no log line for the fatal error"
rebind_after_fatal "$dev" "$ports" "the fatal error"
echo "DEVICE_FATAL reached user space, context disassociated, rebind gave a working device"
