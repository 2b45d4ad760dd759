# SPDX-License-Identifier: GPL-2.0
# The NIC as an adversary (the emulator's fuzz-nic): entries no NIC writes
# for a driver that set its port up as device-model.rst says, on the first
# port's event queue and on CQ 0 (the Ethernet receive ring): EQEs of
# unknown types, transmit completions of WQEs that are not outstanding,
# completion events of CQs not in use, QP errors of QPs and overruns of
# FIFOs that do not exist, CQEs naming the wrong ring element, a length no
# frame has or another QP; CQEs on CQ 1 (the RDMA requesters' CQ) of QPs
# that do not exist, of a responder, or of no outstanding request. In four
# rounds of 16, each bad CQE of CQ 0 moves
# rx_bad_cqe by one and each bad completion tx_bad_completion by one,
# exactly; the rest is logged, rate-limited, and ignored. Frames then go
# from each port's interface to the other byte for byte, and the emulator
# saw no stray DMA.
. /lib/gaudi/guest-lib.sh
load_driver
expect_warning 'unknown event type'
expect_warning 'transmit completion of WQE [0-9]+ that is not outstanding'
expect_warning 'completion event of CQ [0-9]+, which is not in use'
expect_warning 'port [0-9]+: event [25] '
expect_warning 'CQE of element [0-9]+ and [0-9]+ bytes ignored'
expect_warning 'CQE of QP [0-9]+ \(tag 0x[0-9a-f]+, requester [01]\) names no outstanding request'
port_ifaces
quiet_ifaces
stat_of() { ethtool -S "$1" | awk -v k="$2:" '$1 == k { print $2 }'; }
kind() { echo "$1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
seed=$(kparam fuzz_seed 1)
total=0
kinds=""
round=0
while [ $round -lt 4 ]; do
	cqe0=$(stat_of "$a" rx_bad_cqe)
	tx0=$(stat_of "$a" tx_bad_completion)
	r=$(emu_ctl fuzz-nic 0 16 $((seed * 10 + round))) || fail "fuzz-nic"
	echo "$r"
	bad=$(kind "$r" cqe_bad)
	txc=$(kind "$r" eqe_tx_comp)
	inj=$(kind "$r" injected)
	[ -n "$bad" ] && [ -n "$txc" ] && [ -n "$inj" ] || fail "fuzz-nic reply: $r"
	t=0
	until [ $(($(stat_of "$a" rx_bad_cqe) - cqe0)) = "$bad" ] &&
		[ $(($(stat_of "$a" tx_bad_completion) - tx0)) = "$txc" ]; do
		t=$((t + 1))
		[ $t -lt 50 ] || fail "round $round: rx_bad_cqe moved by $(($(stat_of "$a" rx_bad_cqe) - cqe0)) (injected $bad), tx_bad_completion by $(($(stat_of "$a" tx_bad_completion) - tx0)) (injected $txc)"
		sleep 0.1
	done
	echo "ok: round $round: $bad bad CQEs and $txc bad transmit completions counted, each once"
	total=$((total + inj))
	kinds="$kinds $r"
	round=$((round + 1))
done
[ $total -ge 48 ] || fail "only $total of 64 entries injected"
# Every kind at least once (64 draws of 6 kinds: a kind is missed about
# once in 20,000 seeds).
for k in eqe_unknown eqe_tx_comp eqe_comp eqe_qp_err eqe_fifo cqe_bad cqe_rc_bad; do
	n=$(echo "$kinds" | grep -o "$k [0-9]*" | awk '{ s += $2 } END { print s + 0 }')
	[ "$n" -gt 0 ] || fail "no $k among the entries injected"
done
gaudi-verbs-test netdev-loopback "$a" "$b" exact 50 || fail "frames after the garbage, $a to $b"
gaudi-verbs-test netdev-loopback "$b" "$a" exact 50 || fail "frames after the garbage, $b to $a"
emu_quiet_after "the NIC's garbage"
echo PASS
