# SPDX-License-Identifier: GPL-2.0
# The interfaces of the device's two ports, linked to each other, over the
# NIC's raw path: frames of 60, 1514 and 9014 bytes go from each to the
# other byte for byte and in order, both ways at once. With the first
# port's NIC held (it takes no doorbell), frames handed to its interface
# fill the send queue, which stops (tx_queue_full moves) and keeps the rest;
# once the NIC runs again every one of them is sent (tx_packets moves by
# the count, nothing dropped) and what arrives arrives byte for byte, in
# order, each frame once; the rest the receiving NIC counted as dropped
# for want of room (raw_rx_dropped): together exactly the count.
. /lib/gaudi/guest-lib.sh
load_driver
port_ifaces
# Quiet interfaces for the counts; the tests after this one get them back
# as they were.
quiet_ifaces "emu_ctl nic-hold 0 off"
stat_of() { ethtool -S "$1" | awk -v k="$2:" '$1 == k { print $2 }'; }
# The NIC's counts of misuse and loss, which must not move.
nic_misuse() {
	emu_ctl stat | sed -n 's/^nic .*gw_write_while_busy \([0-9]*\).*unknown_register \([0-9]*\).*eq_dropped \([0-9]*\) cqe_dropped \([0-9]*\) db_overruns \([0-9]*\).*/\1 \2 \3 \4 \5/p'
}
misuse0=$(nic_misuse)
[ -n "$misuse0" ] || fail "no nic line in the emulator's stat"
gaudi-verbs-test netdev-loopback "$b" "$a" exact 300 >/tmp/ba.out 2>&1 &
ba=$!
gaudi-verbs-test netdev-loopback "$a" "$b" exact 300 || fail "from $a to $b"
wait $ba || { cat /tmp/ba.out; fail "from $b to $a"; }
cat /tmp/ba.out
n=200
full0=$(stat_of "$a" tx_queue_full)
sent0=$(cat "/sys/class/net/$a/statistics/tx_packets")
drop0=$(cat "/sys/class/net/$a/statistics/tx_dropped")
raw_dropped() { emu_ctl stat | sed -n 's/^nic .* raw_rx_dropped \([0-9]*\).*/\1/p'; }
rxd0=$(raw_dropped)
emu_ctl nic-hold 0 on >/dev/null || fail "cannot hold port 1's NIC"
gaudi-verbs-test netdev-loopback "$a" "$b" queued $n >/tmp/q.out 2>&1 &
q=$!
t=0
until grep -q "frames handed" /tmp/q.out; do
	t=$((t + 1))
	[ $t -lt 300 ] || { cat /tmp/q.out; fail "the frames were not handed to $a"; }
	sleep 0.1
done
full1=$(stat_of "$a" tx_queue_full)
emu_ctl nic-hold 0 off >/dev/null
[ "$full1" -gt "$full0" ] || fail "$n frames with the NIC held: tx_queue_full stayed $full0"
wait $q || { cat /tmp/q.out; fail "queued frames"; }
cat /tmp/q.out
sent1=$(cat "/sys/class/net/$a/statistics/tx_packets")
drop1=$(cat "/sys/class/net/$a/statistics/tx_dropped")
[ $((sent1 - sent0)) = $n ] || fail "tx_packets moved by $((sent1 - sent0)), not $n"
[ "$drop1" = "$drop0" ] || fail "tx_dropped moved by $((drop1 - drop0))"
got=$(sed -n 's/^ok: \([0-9]*\) of .* queued frames arrived at.*/\1/p' /tmp/q.out)
rxd1=$(raw_dropped)
[ $((got + rxd1 - rxd0)) = $n ] ||
	fail "$got frames arrived and the NIC dropped $((rxd1 - rxd0)), not $n in all"
echo "ok: the send queue stopped with the NIC held ($full0 -> $full1) and sent all $n frames once it ran"
gaudi-verbs-test netdev-loopback "$a" "$b" exact 100 || fail "after the hold"
for i in "$a" "$b"; do
	for k in rx_bad_cqe tx_bad_completion; do
		[ "$(stat_of "$i" $k)" = 0 ] || fail "$i: $k $(stat_of "$i" $k)"
	done
done
misuse1=$(nic_misuse)
[ "$misuse1" = "$misuse0" ] ||
	fail "the NIC counted misuse or loss (gateway written while busy, unknown registers, EQ, CQE, doorbells): $misuse0 -> $misuse1"
echo "ok: no CQE or completion refused, the NIC counted no misuse or loss ($misuse1)"
echo PASS
