# SPDX-License-Identifier: GPL-2.0
# 50 unbind/bind cycles and 50 rmmod/insmod cycles: every one brings the
# InfiniBand device back, nothing leaks (kmemleak) and the kernel log has
# no warning. Its own session (with a longer time limit): under TCG with
# KASAN the 100 cycles take about 140 s.
. /lib/gaudi/guest-lib.sh
debugfs
d=$(gaudi_devices | head -n 1)
[ "$(bound_driver "$d")" = gaudi_ib ] || fail "device not bound"
echo scan >/sys/kernel/debug/kmemleak
echo clear >/sys/kernel/debug/kmemleak
t0=$(cut -d. -f1 /proc/uptime)
before=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace' || true)
i=0
while [ $i -lt 50 ]; do
	echo "$d" >/sys/bus/pci/drivers/gaudi_ib/unbind
	[ -z "$(bound_driver "$d")" ] || fail "cycle $i: still bound after unbind"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after unbind"
	echo "$d" >/sys/bus/pci/drivers/gaudi_ib/bind
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after bind"
	i=$((i + 1))
done
i=0
while [ $i -lt 50 ]; do
	rmmod gaudi_ib || fail "cycle $i: rmmod failed"
	[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: gaudi_0 left after rmmod"
	insmod /lib/modules/gaudi_ib.ko || fail "cycle $i: insmod failed"
	[ -e /sys/class/infiniband/gaudi_0 ] || fail "cycle $i: no gaudi_0 after insmod"
	i=$((i + 1))
done
gaudi-verbs-test context --expect-errno 0 || fail "no user context after the cycles"
after=$(dmesg | grep -c -E 'WARNING:|BUG:|Call Trace' || true)
[ "$after" = "$before" ] || fail "kernel warnings during the cycles"
echo "cycles took $(($(cut -d. -f1 /proc/uptime) - t0)) s"
kmemleak_clean_after "100 cycles"
echo "50 unbind/bind and 50 rmmod/insmod cycles, gaudi_0 back each time, kmemleak clean"
