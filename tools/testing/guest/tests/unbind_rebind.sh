# SPDX-License-Identifier: GPL-2.0
# Unbind releases the device and its interrupts; bind probes it again;
# the modules (the emulated function's and the RDMA driver) unload and
# reload.
. /lib/gaudi/guest-lib.sh
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "device not bound"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
! grep -q gaudi_pci /proc/interrupts || fail "interrupts still registered after unbind"
test_log | grep -q "gaudi_pci $d: released" || fail "no release after unbind"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 0 ] || fail "device still enabled after unbind"
emu_quiet_after "unbind"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "bind did not probe"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 1 ] || fail "device not enabled after bind"
unload_drivers
[ -z "$(bound_driver "$d")" ] || fail "still bound after rmmod"
load_driver
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "insmod did not probe"
probes=$(test_log | grep -c "gaudi_pci $d: probe complete")
[ "$probes" = 2 ] || fail "expected 2 completed probes (bind, insmod), saw $probes"
[ "$(test_log | grep -c "gaudi_pci $d: released")" = 2 ] || fail "expected 2 releases (unbind, rmmod)"
emu_quiet_after "unbind, bind, rmmod and insmod"
echo "unbind/bind and rmmod/insmod: $probes probes"
