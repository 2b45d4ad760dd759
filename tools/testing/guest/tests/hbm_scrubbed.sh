# SPDX-License-Identifier: GPL-2.0
# Device memory does not carry one owner's data to the next: a process
# writes a pattern into 64 MiB of HBM through BAR 4 (the device reads it)
# and exits; the next process gets the same block (first fit) and reads 0
# all over it through BAR 4 and at 64 places through the device MMU (a
# dma-buf region of it). It writes the pattern again and frees the block;
# after the device is unbound and bound again, all of device memory reads 0
# before any allocation (the probe cleared it), and the block allocated
# again reads 0.
. /lib/gaudi/guest-lib.sh
load_driver
# run NAME ARGS...: gaudi-verbs-test hbm-scrubbed ARGS, its output in /tmp/NAME.log.
run() {
	name=$1
	shift
	if ! gaudi-verbs-test hbm-scrubbed "$@" >"/tmp/$name.log" 2>&1; then
		cat "/tmp/$name.log"
		fail "hbm-scrubbed $*"
	fi
	cat "/tmp/$name.log"
}
run hbm-fill --step fill --mib 64
off=$(sed -n 's/^offset=//p' /tmp/hbm-fill.log)
[ -n "$off" ] || fail "the first process named no block offset"
run hbm-check --step check --mib 64 --offset "$off" --then-fill
d=$(gaudi_devices | head -n 1)
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "bind did not probe"
i=0
while [ ! -e /sys/class/infiniband/gaudi_0 ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -e /sys/class/infiniband/gaudi_0 ] || fail "no gaudi_0 after bind"
run hbm-probe --step probe --mib 64 --offset "$off"
