# SPDX-License-Identifier: GPL-2.0
# The device as an adversary: the NIC's port queues (the emulator's
# fuzz-nic, CQ 1 included) under a connected QP pair. Malformed CQEs never
# reach a consumer, malformed event queue entries reach no context and lose
# nothing, a WRITE lands after each round, a link flap still arrives; the
# kernel log stays bounded. A rebind then gives a working device. The
# ports' interfaces are up first: a port is ACTIVE (and its link flap
# reported) only while its interface is up, and the program takes no
# other event.
. /lib/gaudi/guest-lib.sh
load_driver
d=$(gaudi_devices | head -n 1)
ports_up "$d" "$(kparam ports 2)" "before the garbage"
# What the driver reports about a misbehaving NIC (rate-limited; fuzz-nic,
# as in fuzz_nic).
expect_warning 'unknown event type'
expect_warning 'transmit completion of WQE [0-9]+ that is not outstanding'
expect_warning 'completion event of CQ [0-9]+, which is not in use'
expect_warning 'port [0-9]+: event [25] '
expect_warning 'CQE of element [0-9]+ and [0-9]+ bytes ignored'
expect_warning 'CQE of QP [0-9]+ \(tag 0x[0-9a-f]+, requester [01]\) names no outstanding request'
gaudi-verbs-test fuzz-device --seed "$(kparam fuzz_seed 1)" || fail "the driver did not withstand the device's garbage"
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/unbind
echo "$d" >/sys/bus/pci/drivers/gaudi_pci/bind
load_driver
gaudi-verbs-test write-loopback --max-mib 1 --from 1 --to 2 >/tmp/after.out 2>&1 || {
	cat /tmp/after.out
	fail "no working device after the rebind"
}
emu_quiet_after "the device's garbage and a rebind"
