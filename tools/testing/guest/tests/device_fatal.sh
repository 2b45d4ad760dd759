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
n=$(rdma dev show | grep -c ': gaudi_' || true)
[ "$n" = 0 ] || fail "the gaudi device is still registered after the fatal error"
[ "$(bound_driver "$dev")" = gaudi_ib ] || fail "the PCI device lost its driver"
echo "$dev" >/sys/bus/pci/drivers/gaudi_ib/unbind || fail "unbind failed"
emu_quiet_after "the fatal error and unbind"
echo "$dev" >/sys/bus/pci/drivers/gaudi_ib/bind || fail "bind failed"
n=$(rdma link show | grep -c '^link gaudi_[0-9]*/[0-9]* state ACTIVE ' || true)
[ "$n" = "$ports" ] || fail "after rebind: $n ACTIVE links, expected $ports"
gaudi-verbs-test uverbs --ports "$ports" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the rebound device does not work"
}
echo "DEVICE_FATAL reached user space, context disassociated, rebind gave a working device"
