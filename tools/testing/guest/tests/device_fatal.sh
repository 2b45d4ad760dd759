# SPDX-License-Identifier: GPL-2.0
# A device fatal error injected through the emulator reaches a user program
# as DEVICE_FATAL; its context is disassociated (event file ends, verbs fail
# with EIO) and the InfiniBand device goes away while the program still
# holds its file open, while the NIC core stays bound to the chip's
# device. Unbinding and binding the PCI device then brings a working device
# back (each port attached to its new interface). So does
# reloading the NIC core, the Ethernet and the RDMA driver (the core's
# probe resets the chip), after which a fatal error is reported again; the
# RDMA driver alone refuses a device that stopped.
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
# Wait up to 10 s for gaudi_0 to go away.
ib_gone() {
	i=0
	while [ -e /sys/class/infiniband/gaudi_0 ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || return 1
		sleep 0.1
	done
}
emu_ctl fatal >/dev/null || fail "emulator refused the second fatal error"
ib_gone || fail "gaudi_0 still there 10 s after the second fatal error"
rmmod gaudi_ib || fail "rmmod gaudi_ib after the second fatal error"
expect_warning "the device stopped before probe: rebind the NIC core"
expect_warning "probe with driver gaudi_ib.gaudi_ib failed"
insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs) || fail "insmod gaudi_ib after the second fatal error"
[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "the RDMA driver registered gaudi_0 on a stopped device"
test_log | grep -q "the device stopped before probe" || fail "no log line for the refused RDMA probe"
rmmod gaudi_ib gaudi_en gaudi_cn || fail "rmmod gaudi_ib gaudi_en gaudi_cn after the second fatal error"
load_driver
[ -e /sys/class/infiniband/gaudi_0 ] || fail "reloading gaudi_cn, gaudi_en and gaudi_ib gave no gaudi_0"
ports_attached "$dev" DOWN "$ports" "after reloading gaudi_cn, gaudi_en and gaudi_ib"
gaudi-verbs-test uverbs --ports "$ports" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the device of the reloaded driver does not work"
}
emu_ctl fatal >/dev/null || fail "emulator refused the third fatal error"
ib_gone || fail "a fatal error after the reload was not reported: gaudi_0 still there after 10 s"
rebind_after_fatal "$dev" "$ports" "the third fatal error"
echo "DEVICE_FATAL reached user space, context disassociated, rebind gave a working device;"
echo "reloading the NIC core, the Ethernet and the RDMA driver recovered too, and the next fatal error was reported"
