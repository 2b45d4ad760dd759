# SPDX-License-Identifier: GPL-2.0
# The other side of netdev_traffic: port 1's interface at 10.10.0.2 and
# fd00:10::2 receives 16 MiB over TCP; the sender's checksum and interface
# counters come over the management network and must match what arrived
# here: the SHA-256 of the data, and each side's sent frames and bytes the
# other side's received ones.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
peer=$(kparam peer "")
ifc=$(data_if_up 10.10.0.2 fd00:10::2) || exit 1
# The sender resolves this side's addresses (ARP, neighbour discovery);
# this side knows the sender's port from the start, so that it never
# probes whether the sender is still reachable: such a probe (5 s after
# the last ping) and its answer could cross the link while the two sides
# take their counters, and count on one side and not the other.
ip neigh replace 10.10.0.1 lladdr 02:1d:a3:00:00:00 dev "$ifc" nud permanent
ip neigh replace fd00:10::1 lladdr 02:1d:a3:00:00:00 dev "$ifc" nud permanent
# The sender's counters when the interfaces are quiet, and ours then.
recv_file 5002 /tmp/start || fail "no word from $peer"
start=$(cat /tmp/start)
mine0=$(counters "$ifc")
recv_file 5001 /tmp/received &
rcv=$!
sleep 0.5
echo go | send_to "$peer" 5003 || fail "cannot answer $peer"
wait $rcv || fail "receiving over TCP failed"
got=$(sha256sum </tmp/received | cut -d' ' -f1)

size=$(wc -c </tmp/received)
rm -f /tmp/received
recv_file 5004 /tmp/report || fail "no report from $peer"
report=$(cat /tmp/report)
mine1=$(counters "$ifc")
delta() { # BEFORE AFTER: the four differences
	set -- $1 $2
	echo "$(($5 - $1)) $(($6 - $2)) $(($7 - $3)) $(($8 - $4))"
}
set -- $report
sum=$1
set -- $(delta "$start" "$2 $3 $4 $5")
s_tx=$1 s_txb=$2 s_rx=$3 s_rxb=$4
set -- $(delta "$mine0" "$mine1")
tx=$1 txb=$2 rx=$3 rxb=$4
verdict="ok: 16 MiB arrived intact; $s_tx frames ($s_txb bytes) one way, $tx ($txb) back"
if [ "$got" != "$sum" ] || [ "$size" != $((16 << 20)) ]; then
	verdict="FAIL: $size bytes with SHA-256 $got, sent $sum"
elif [ "$s_tx" != "$rx" ] || [ "$s_txb" != "$rxb" ]; then
	verdict="FAIL: the sender sent $s_tx frames ($s_txb bytes), $ifc received $rx ($rxb)"
elif [ "$tx" != "$s_rx" ] || [ "$txb" != "$s_rxb" ]; then
	verdict="FAIL: $ifc sent $tx frames ($txb bytes), the sender received $s_rx ($s_rxb)"
elif [ "$s_txb" -lt $((16 << 20)) ]; then
	verdict="FAIL: the sender sent only $s_txb bytes for 16 MiB"
fi
# What this side's device dropped (want of a buffer, filter) says where a
# missing frame went.
case "$verdict" in
ok:*) ;;
*) verdict="$verdict; here: $(ethtool -S "$ifc" | tr -s ' \n' ' '); emulator: $(emu_ctl stat | grep '^port 0 ')" ;;
esac
echo "$verdict" | send_to "$peer" 5005 || fail "cannot report to $peer"
echo "$verdict"
case "$verdict" in ok:*) ;; *) fail "${verdict#FAIL: }" ;; esac
