# SPDX-License-Identifier: GPL-2.0
# A device whose identification register is wrong is refused at probe
# (the emulator runs with --id 0xdeadbeef for this test).
. /lib/gaudi/guest-lib.sh
d=$(gaudi_devices | head -n 1)
[ -n "$d" ] || fail "no 1da3:1020 device on the PCI bus"
if insmod /lib/modules/gaudi_ib.ko; then :; fi
grep -q '^gaudi_ib ' /proc/modules || fail "module did not load"
drv=$(bound_driver "$d")
[ -z "$drv" ] || fail "device with a wrong ID bound to $drv"
dmesg | grep -q "gaudi_ib $d: unknown identification 0xdeadbeef" ||
	fail "no refusal message"
! grep -q gaudi_ib /proc/interrupts || fail "refused probe left interrupts behind"
[ "$(cat "/sys/bus/pci/devices/$d/enable")" = 0 ] || fail "refused probe left the device enabled"
dmesg | grep "gaudi_ib $d"
