# SPDX-License-Identifier: GPL-2.0
# The device goes away under a process whose QP set has its queues and
# doorbell pages mapped and an exported HBM dma-buf registered as a memory
# region (dv-hold): unbinding does not wait for it; the core
# zaps the mappings and the driver lets go of the queues; the process then
# writes a WQE, rings the doorbell and reads its CQ without a fault (the
# mappings read and write a dummy page), gets EIO from the namespace,
# closes the dma-buf (the block goes after its device) and exits, which
# frees the queue memory. Binding brings the device back, a
# context can be opened, no splat (KASAN would report a use
# of the freed queues).
. /lib/gaudi/guest-lib.sh
load_driver
d=$(gaudi_devices | head -n 1)
rm -f /tmp/dv-go && mkfifo /tmp/dv-go
gaudi-verbs-test dv-hold </tmp/dv-go >/tmp/dv-hold.log 2>&1 &
pid=$!
exec 3>/tmp/dv-go
i=0
until grep -q holding /tmp/dv-hold.log; do
	i=$((i + 1))
	[ $i -lt 600 ] || { cat /tmp/dv-hold.log; fail "dv-hold did not get ready"; }
	kill -0 $pid 2>/dev/null || { cat /tmp/dv-hold.log; fail "dv-hold exited early"; }
	sleep 0.1
done
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
[ -z "$(bound_driver "$d")" ] || fail "still bound after unbind"
emu_quiet_after "unbind under mapped queues"
echo go >&3
exec 3>&-
wait $pid
st=$?
cat /tmp/dv-hold.log
[ $st = 0 ] || fail "dv-hold failed after the unbind (status $st)"
grep -q touched /tmp/dv-hold.log || fail "dv-hold did not touch its mappings"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
[ -e /sys/class/infiniband/gaudi_0 ] || fail "no gaudi_0 after bind"
gaudi-verbs-test context --expect-errno 0 || fail "no user context after the rebind"
emu_quiet_after "the process exited and the device was bound again"
