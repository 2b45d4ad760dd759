# SPDX-License-Identifier: GPL-2.0
# The Gaudi2 function is hot-unplugged (QEMU device_del; the guest ejects
# it through ACPI) while a process has WRITEs flowing on a standard QP pair
# and through a QP set's mapped queues (gaudi-verbs-test removal): the
# driver is unbound under it, the process gets DEVICE_FATAL and then EIO,
# its mappings read and write a dummy page, the device leaves the bus.
# Plugged again (device_add), the function is probed and works.
# The function has MSI, not MSI-X (the emulator's --msi: QEMU 11.1 cannot
# remove a vfio-user-pci device with MSI-X): both probes fall back to one
# MSI vector, which takes its test interrupt.
. /lib/gaudi/guest-lib.sh
load_driver
dev=$(gaudi_devices | head -n 1)
[ -n "$dev" ] || fail "no Gaudi2 device"
# $1: the kernel log to look in; the device's interrupts are one MSI vector.
one_msi_vector() {
	kinds=$(cat "/sys/bus/pci/devices/$dev/msi_irqs/"* 2>/dev/null | sort | uniq -c | xargs)
	[ "$kinds" = "1 msi" ] || fail "$dev: interrupts '$kinds', expected one MSI vector"
	$1 | grep -q "gaudi_pci $dev: MSI enabled, vectors: 1\$" || fail "no fallback to one MSI vector logged"
	$1 | grep -q "gaudi_pci $dev: MSI test interrupt received on vector 0 " ||
		fail "the MSI vector took no test interrupt"
}
one_msi_vector dmesg
echo "$dev runs on one MSI vector"
start_removal_traffic
emu_ctl unplug >/dev/null || fail "the emulator could not unplug the device"
wait $bg_pid || { cat /tmp/removal.out; fail "the traffic did not end in DEVICE_FATAL and EIO"; }
cat /tmp/removal.out
i=0
while [ -e "/sys/bus/pci/devices/$dev" ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "$dev still on the bus 30 s after the unplug"
	sleep 0.1
done
n=$(rdma dev show | grep -c ': gaudi_' || true)
[ "$n" = 0 ] || fail "a gaudi device is still registered after the unplug"
test_log | grep -q "gaudi_pci $dev: released" || fail "the driver did not release the unplugged device"
echo "unplugged: $dev left the bus, the driver let go of it"
emu_ctl plug >/dev/null || fail "the emulator could not plug the device back"
i=0
while [ ! -e /sys/class/infiniband/gaudi_0 ]; do
	i=$((i + 1))
	[ $i -lt 300 ] || { test_log | tail -n 20; fail "no gaudi_0 30 s after the device was plugged back"; }
	sleep 0.1
done
dev=$(gaudi_devices | head -n 1)
echo "plugged back as $dev, bound to $(bound_driver "$dev")"
one_msi_vector test_log
gaudi-verbs-test uverbs --ports "$(kparam ports 2)" >/tmp/uverbs.out 2>&1 || {
	cat /tmp/uverbs.out
	fail "the device plugged back does not work"
}
emu_quiet_after "the unplug under traffic and the plug"
echo "hot unplug under traffic and plug: the process told, the device back and working"
