# SPDX-License-Identifier: GPL-2.0
# gaudi_pci binds the emulated Gaudi2 after validating its identification and
# device model (the chip services' SVC_ID and SVC_VERSION) and resetting it;
# the RDMA driver, given the chip, completes its probe.
. /lib/gaudi/guest-lib.sh
devs=$(gaudi_devices)
[ -n "$devs" ] || fail "no 1da3:1020 device on the PCI bus"
load_driver
for d in $devs; do
	drv=$(bound_driver "$d")
	[ "$drv" = gaudi_pci ] || fail "$d bound to '${drv:-nothing}', expected gaudi_pci"
	dmesg | grep -q "gaudi_pci $d: identified Gaudi2 NIC, device model 2\.0$" ||
		fail "$d: no identification line for device model 2.0"
	dmesg | grep -q "gaudi_pci $d: probe complete" || fail "$d: probe did not complete"
	echo "$d bound to $drv"
done
