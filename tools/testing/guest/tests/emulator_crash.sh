# SPDX-License-Identifier: GPL-2.0
# The device disappears under traffic: the emulator stops answering
# (control command vanish: every register and configuration read returns
# all ones, as from a PCIe device that fell off the bus, and as QEMU would
# show a crashed emulator if QEMU 10.1 did not abort when its vfio-user
# server dies); no interrupt says so. The driver's presence check finds it
# within seconds, logs it once and removes the InfiniBand device: the
# process (WRITEs on a standard QP pair and through a QP set's mapped
# queues) gets DEVICE_FATAL and then EIO. Unbinding returns, a new probe
# refuses the device, the module unloads, and the device did no DMA after
# it vanished. Runs last in its session: the device stays gone.
. /lib/gaudi/guest-lib.sh
load_driver
dev=$(gaudi_devices | head -n 1)
expect_warning "device removed \(its registers read all ones\)"
expect_warning "gaudi_pci $dev: unknown identification 0xffffffff"
expect_warning "gaudi_pci $dev: probe with driver gaudi_pci failed"
start_removal_traffic
t0=$(cut -d ' ' -f 1 /proc/uptime)
emu_ctl vanish >/dev/null || fail "emulator refused vanish"
wait $bg_pid || { cat /tmp/removal.out; fail "the traffic did not end in DEVICE_FATAL and EIO"; }
t1=$(cut -d ' ' -f 1 /proc/uptime)
cat /tmp/removal.out
n=$(test_log | grep -c "device removed" || true)
[ "$n" = 1 ] || fail "the removal was logged $n times, expected once"
echo "removal found and the process told in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
n=$(rdma dev show | grep -c ': gaudi_' || true)
[ "$n" = 0 ] || fail "the gaudi device is still registered after the removal"
# Unbinding must not wait for a device that answers nothing.
echo "$dev" >/sys/bus/pci/drivers/gaudi_pci/unbind &
ub=$!
i=0
while kill -0 $ub 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 300 ] || fail "unbind still running after 30 s"
	sleep 0.1
done
wait $ub || fail "unbind failed"
[ -z "$(bound_driver "$dev")" ] || fail "still bound after unbind"
echo "$dev" >/sys/bus/pci/drivers/gaudi_pci/bind 2>/dev/null && fail "a device that is gone was bound"
test_log | grep -q "gaudi_pci $dev: unknown identification 0xffffffff" ||
	fail "no refusal of the device that is gone"
unload_drivers
emu_quiet_after "the device vanished, unbind, a refused probe and rmmod"
echo "surprise removal under traffic: found, reported once, unbound, refused, unloaded"
