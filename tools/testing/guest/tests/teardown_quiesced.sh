# SPDX-License-Identifier: GPL-2.0
# The device goes away under traffic (write-traffic: WRITEs of 16 MiB from
# port 1 to port 2, two outstanding) and is quiet before the driver lets go
# of it. The emulator's reset takes 200 ms (--reset-delay-ms 200). Unbinding
# returns (bounded), after the reset's 200 ms; write-traffic ends by itself
# with an error, not a hang; the emulator saw no DMA and no interrupt after
# bus mastering was turned off (dma_no_master, irq_no_master 0), no stale
# translation and no DMA outside what it may reach. The same after binding
# again, starting traffic again and rmmod; insmod brings gaudi_0 back. The
# driver never logs that the device was not ready at teardown.
. /lib/gaudi/guest-lib.sh
load_driver
d=$(gaudi_devices | head -n 1)
drv=/sys/bus/pci/drivers/gaudi_pci

quiet() { # after what
	for c in dma_no_master irq_no_master dma_audit stale_translation; do
		v=$(emu_stat $c)
		[ "$v" = 0 ] || fail "emulator: $c '$v' after $1"
	done
	echo "emulator after $1: dma_no_master 0, irq_no_master 0, dma_audit 0, stale_translation 0"
}

# Start write-traffic and wait until its first WRITE completed; sets $tpid.
start_traffic() {
	rm -f /tmp/traffic.log
	gaudi-verbs-test write-traffic >/tmp/traffic.log 2>&1 &
	tpid=$!
	i=0
	until grep -q '^traffic running' /tmp/traffic.log; do
		running $tpid || { cat /tmp/traffic.log; fail "write-traffic exited before its first WRITE"; }
		i=$((i + 1))
		[ $i -lt 1200 ] || { cat /tmp/traffic.log; fail "write-traffic not running after 120 s"; }
		sleep 0.1
	done
}

# write-traffic ends by itself within 30 s of $1, with its error status 3.
traffic_ended() {
	wait_gone $tpid 30 || {
		cat /tmp/traffic.log
		kill -9 $tpid 2>/dev/null || true
		fail "write-traffic still running 30 s after $1"
	}
	st=0
	wait $tpid || st=$?
	cat /tmp/traffic.log
	[ $st = 3 ] || fail "write-traffic ended with status $st after $1, expected 3 (an error)"
}

# Run "$@" in the background; fail unless it succeeds within 60 s. Sets
# $took_cs (hundredths of a second) and $st.
bounded() { # what command...
	what=$1
	shift
	t0=$(uptime_cs)
	"$@" &
	bpid=$!
	wait_gone $bpid 60 || fail "$what did not return within 60 s"
	st=0
	wait $bpid || st=$?
	took_cs=$(($(uptime_cs) - t0))
}

quiet "the earlier tests"
start_traffic
bounded unbind sh -c "echo $d >$drv/unbind"
[ $st = 0 ] || fail "unbind failed (status $st)"
echo "unbind under traffic took $took_cs/100 s"
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
[ ! -e /sys/class/infiniband/gaudi_0 ] || fail "gaudi_0 left after unbind"
# Teardown waits for STATUS.READY after its reset: at least the 200 ms the
# emulator takes.
[ $took_cs -ge 19 ] || fail "unbind took $took_cs/100 s: less than the reset's 200 ms"
traffic_ended unbind
quiet unbind

bounded bind sh -c "echo $d >$drv/bind"
[ $st = 0 ] || fail "bind failed (status $st)"
load_driver
start_traffic
bounded rmmod unload_drivers
if [ $st = 0 ]; then
	echo "rmmod under traffic took $took_cs/100 s"
	traffic_ended rmmod
else
	# The module is held while a process has the device open.
	echo "rmmod refused while write-traffic runs (status $st): stopping it first"
	kill $tpid 2>/dev/null || true
	wait_gone $tpid 30 || fail "write-traffic did not end on SIGTERM"
	wait $tpid || true
	cat /tmp/traffic.log
	bounded rmmod unload_drivers
	[ $st = 0 ] || fail "rmmod failed (status $st)"
fi
[ -z "$(bound_driver "$d")" ] || fail "still bound after rmmod"
quiet rmmod
load_driver
[ "$(bound_driver "$d")" = gaudi_pci ] || fail "insmod did not probe"
gaudi-verbs-test context --expect-errno 0 || fail "no user context after insmod"
if test_log | grep -q "device not ready"; then
	test_log | grep "device not ready"
	fail "the driver logged a device not ready at teardown"
fi
quiet insmod
