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
rebind_after_fatal "$dev" "$(kparam ports 2)" "the fatal error under traffic"
echo "fatal error under traffic: DEVICE_FATAL and EIO in the process, rebind gave a working device"
