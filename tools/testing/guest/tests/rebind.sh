# SPDX-License-Identifier: GPL-2.0
# 20 unbind/bind cycles and 20 rmmod/insmod cycles (gaudi.cycles of each:
# 1000 in the soak): every one brings the InfiniBand device back, the
# kernel log has no warning, the emulator sees no DMA or interrupt without
# bus mastering; what leaked shows in the session's kmemleak scan. Its own
# session (with a longer time limit): under TCG with KASAN 40 cycles take
# about a minute.
. /lib/gaudi/guest-lib.sh
debugfs
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_ib ] || fail "device not bound"
t0=$(cut -d. -f1 /proc/uptime)
i=0
n=$(kparam cycles 20)
while [ $i -lt "$n" ]; do
	echo "$d" >/sys/bus/pci/drivers/gaudi_ib/unbind
	[ -z "$(bound_driver "$d")" ] || fail "cycle $i: still bound after unbind"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after unbind"
	echo "$d" >/sys/bus/pci/drivers/gaudi_ib/bind
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after bind"
	i=$((i + 1))
done
i=0
while [ $i -lt "$n" ]; do
	rmmod gaudi_ib || fail "cycle $i: rmmod failed"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after rmmod"
	insmod /lib/modules/gaudi_ib.ko || fail "cycle $i: insmod failed"
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after insmod"
	i=$((i + 1))
done
gaudi-verbs-test context --expect-errno 0 || fail "no user context after the cycles"
! test_log | grep -E 'WARNING:|BUG:|Call Trace' || fail "kernel warnings during the cycles"
emu_quiet_after "$((2 * n)) cycles"
echo "cycles took $(($(cut -d. -f1 /proc/uptime) - t0)) s"
echo "$n unbind/bind and $n rmmod/insmod cycles, gaudi_0 back each time"
