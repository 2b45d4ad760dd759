# SPDX-License-Identifier: GPL-2.0
# A device that does not come out of reset is refused after the driver's
# timeout, with a message, and nothing is left behind (the emulator runs
# with --reset-hangs for this test).
. /lib/gaudi/guest-lib.sh
d=$(gaudi_devices | head -n 1)
[ -n "$d" ] || fail "no 1da3:1020 device on the PCI bus"
if insmod /lib/modules/gaudi_ib.ko; then :; fi
grep -q '^gaudi_ib ' /proc/modules || fail "module did not load"
drv=$(bound_driver "$d")
[ -z "$drv" ] || fail "device stuck in reset bound to $drv"
dmesg | grep -q "gaudi_ib $d: device not ready 1000 ms after reset" ||
	fail "no message for the reset timeout"
dmesg | grep -q "gaudi_ib $d: probe with driver gaudi_ib failed with error -110" ||
	fail "probe did not fail with ETIMEDOUT"
! grep -q gaudi_ib /proc/interrupts || fail "refused probe left interrupts behind"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 0 ] || fail "refused probe left the device enabled"
dmesg | grep "gaudi_ib $d"
