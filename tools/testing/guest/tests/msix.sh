# SPDX-License-Identifier: GPL-2.0
# Every MSI-X vector of gaudi_pci took its test interrupt: the kernel's own
# per-IRQ counters moved, and the driver saw the test cause on each.
. /lib/gaudi/guest-lib.sh
load_driver
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "device not bound"
n=$(cat "/sys/bus/pci/devices/$d/msi_irqs/"* 2>/dev/null | grep -c msix || true)
[ "$n" -ge 1 ] || fail "no MSI-X vectors enabled on $d"
lines=$(grep -c 'gaudi_pci' /proc/interrupts || true)
[ "$lines" = "$n" ] || fail "$n MSI-X vectors but $lines gaudi_pci lines in /proc/interrupts"
grep gaudi_pci /proc/interrupts
grep gaudi_pci /proc/interrupts | while read -r irq count rest; do
	[ "$count" -ge 1 ] || fail "IRQ ${irq%:} never fired"
done
v=0
while [ $v -lt "$n" ]; do
	dmesg | grep -q "gaudi_pci $d: MSI-X test interrupt received on vector $v " ||
		fail "vector $v: no test interrupt"
	v=$((v + 1))
done
echo "$n vectors, each took its test interrupt"
