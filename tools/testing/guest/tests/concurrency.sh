# SPDX-License-Identifier: GPL-2.0
# Concurrency, on an SMP preemptible kernel under lockdep and KASAN: processes
# racing for the NIC to themselves (device memory: one owner, the others EBUSY), threads of one
# context posting and polling on their own QPs while regions come and go,
# QPs and CQs destroyed under completing WRITEs and a polling thread; then
# async events racing unbind: while a program writes and port events flow
# (links flapping), the device is unbound: the program ends with an error
# within bounded time, the device binds again, five times.
. /lib/gaudi/guest-lib.sh
load_driver
# The session's guest has two CPUs: threads and processes race on both.
cpus=$(grep -c ^processor /proc/cpuinfo)
echo "CPUs online: $cpus"
[ "$cpus" -ge 2 ] || fail "the races need two CPUs, the guest has $cpus"
gaudi-verbs-test concurrency || fail "concurrent use failed"
d=$(gaudi_devices | head -n 1)
round=0
while [ $round -lt 5 ]; do
	gaudi-verbs-test write-traffic --mib 4 >/tmp/traffic.out 2>&1 &
	traffic=$!
	j=0
	until grep -q "traffic running" /tmp/traffic.out; do
		j=$((j + 1))
		[ $j -lt 300 ] || { cat /tmp/traffic.out; fail "round $round: traffic did not start"; }
		kill -0 $traffic 2>/dev/null || { cat /tmp/traffic.out; fail "round $round: traffic ended early"; }
		sleep 0.1
	done
	(
		k=0
		while [ $k -lt 20 ]; do
			emu_ctl link 1 down >/dev/null 2>&1 || true
			emu_ctl link 1 up >/dev/null 2>&1 || true
			k=$((k + 1))
		done
	) &
	flap=$!
	sleep 0.2
	echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
	j=0
	while kill -0 $traffic 2>/dev/null; do
		j=$((j + 1))
		[ $j -lt 300 ] || { cat /tmp/traffic.out; fail "round $round: the program hangs after unbind"; }
		sleep 0.1
	done
	wait $flap || true
	cat /tmp/traffic.out
	echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
	load_driver # (it counts with i)
	round=$((round + 1))
done
gaudi-verbs-test context --expect-errno 0 || fail "no user context after the unbind races"
emu_quiet_after "five unbinds under traffic and link flaps"
echo "concurrency: ownership races, threads, destroy races, unbind under traffic and events"
