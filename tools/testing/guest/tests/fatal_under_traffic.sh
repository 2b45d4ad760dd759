# SPDX-License-Identifier: GPL-2.0
# A device fatal error while WRITEs flow on a standard QP pair and through
# a QP set's mapped queues (gaudi-verbs-test removal): every WRITE that
# completed had landed, the process gets DEVICE_FATAL and then EIO, its
# mapped queues read and write a dummy page, the driver logs the error
# once and removes the InfiniBand device; unbinding and binding the PCI
# device brings a working device back.
. /lib/gaudi/guest-lib.sh
load_driver
dev=$(gaudi_devices | head -n 1)
expect_warning "device fatal error: removing the InfiniBand device"
start_removal_traffic
emu_ctl fatal >/dev/null || fail "emulator refused fatal"
wait $bg_pid || { cat /tmp/removal.out; fail "the traffic did not end in DEVICE_FATAL and EIO"; }
cat /tmp/removal.out
n=$(test_log | grep -c "device fatal error" || true)
[ "$n" = 1 ] || fail "the fatal error was logged $n times, expected once"
n=$(rdma dev show | grep -c ': gaudi_' || true)
[ "$n" = 0 ] || fail "the gaudi device is still registered after the fatal error"
[ "$(bound_driver "$dev")" = gaudi_ib ] || fail "the PCI device lost its driver"
echo "$dev" >/sys/bus/pci/drivers/gaudi_ib/unbind || fail "unbind failed"
emu_quiet_after "the fatal error under traffic and unbind"
echo "$dev" >/sys/bus/pci/drivers/gaudi_ib/bind || fail "bind failed"
gaudi-verbs-test uverbs --ports "$(kparam ports 2)" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the rebound device does not work"
}
echo "fatal error under traffic: DEVICE_FATAL and EIO in the process, rebind gave a working device"
