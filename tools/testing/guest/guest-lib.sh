# SPDX-License-Identifier: GPL-2.0
# Helpers for the guest's init and tests (busybox sh).

GAUDI_VENDOR=0x1da3
GAUDI_DEVICE=0x1020

# Report a result line to the host on the second serial port.
result() {
	echo "$1" >/dev/ttyS1
	echo "$1"
}

fail() {
	echo "FAIL: $*"
	exit 1
}

# PCI addresses of all Gaudi2 functions.
gaudi_devices() {
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor")" = $GAUDI_VENDOR ] && [ "$(cat "$d/device")" = $GAUDI_DEVICE ] &&
			basename "$d"
	done
	return 0
}

# Name of the driver bound to PCI function $1, or nothing.
bound_driver() {
	[ -L "/sys/bus/pci/devices/$1/driver" ] &&
		basename "$(readlink "/sys/bus/pci/devices/$1/driver")"
	return 0
}

# An lspci -nnk like listing from sysfs (busybox has no lspci).
lspci_k() {
	for d in /sys/bus/pci/devices/*; do
		a=$(basename "$d")
		v=$(cat "$d/vendor")
		p=$(cat "$d/device")
		c=$(cat "$d/class")
		r=$(cat "$d/revision")
		name=
		[ "$v" = $GAUDI_VENDOR ] && [ "$p" = $GAUDI_DEVICE ] &&
			name=" Habana Labs Ltd. Gaudi2 NIC"
		printf '%s [%s]:%s [%s:%s] (rev %s)\n' "${a#0000:}" "${c#0x}" "$name" \
			"${v#0x}" "${p#0x}" "${r#0x}"
		drv=$(bound_driver "$a")
		[ -n "$drv" ] && printf '\tKernel driver in use: %s\n' "$drv"
	done
	return 0
}

# Value of kernel parameter gaudi.$1, or $2.
kparam() {
	for a in $(cat /proc/cmdline); do
		case "$a" in "gaudi.$1="*) echo "${a#gaudi.$1=}" && return 0 ;; esac
	done
	echo "$2"
}

# Mount debugfs once.
debugfs() {
	[ -e /sys/kernel/debug/kmemleak ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	return 0
}

# Fail unless kmemleak finds no unreferenced object (it reports objects older
# than 5 s, hence the wait); $1 says after what.
kmemleak_clean_after() {
	debugfs
	[ -e /sys/kernel/debug/kmemleak ] || fail "kmemleak is not available"
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	echo scan >/sys/kernel/debug/kmemleak
	leaks=$(cat /sys/kernel/debug/kmemleak)
	if [ -n "$leaks" ]; then
		echo "$leaks" | head -n 60
		fail "kmemleak reports unreferenced objects after $1"
	fi
	return 0
}
