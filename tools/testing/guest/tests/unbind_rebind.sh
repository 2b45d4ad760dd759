# SPDX-License-Identifier: GPL-2.0
# Unbind releases the device and its interrupts; bind probes it again;
# the module unloads and reloads.
. /lib/gaudi/guest-lib.sh
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_ib ] || fail "device not bound"
echo "$d" >/sys/bus/pci/drivers/gaudi_ib/unbind
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
! grep -q gaudi_ib /proc/interrupts || fail "interrupts still registered after unbind"
test_log | grep -q "gaudi_ib $d: released" || fail "no release after unbind"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 0 ] || fail "device still enabled after unbind"
emu_quiet_after "unbind"
echo "$d" >/sys/bus/pci/drivers/gaudi_ib/bind
[ "$(bound_driver "$d")" = gaudi_ib ] || fail "bind did not probe"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 1 ] || fail "device not enabled after bind"
rmmod gaudi_ib
[ -z "$(bound_driver "$d")" ] || fail "still bound after rmmod"
insmod /lib/modules/gaudi_ib.ko $(gaudi_modargs)
[ "$(bound_driver "$d")" = gaudi_ib ] || fail "insmod did not probe"
probes=$(test_log | grep -c "gaudi_ib $d: probe complete")
[ "$probes" = 2 ] || fail "expected 2 completed probes (bind, insmod), saw $probes"
[ "$(test_log | grep -c "gaudi_ib $d: released")" = 2 ] || fail "expected 2 releases (unbind, rmmod)"
emu_quiet_after "unbind, bind, rmmod and insmod"
echo "unbind/bind and rmmod/insmod: $probes probes"
