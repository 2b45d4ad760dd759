# SPDX-License-Identifier: GPL-2.0
# Two hosts, each with its own Gaudi2, port 1 linked to port 1: the ports'
# network interfaces carry IP between them (netdev_traffic_target is the
# other side). Linux resolves the addresses (ARP, and IPv6 neighbour
# discovery through multicast), ping works over IPv4 and IPv6, 16 MiB sent
# over TCP arrive with the same SHA-256, and the interface counters agree:
# what one side sent is what the other received, in frames and bytes. The
# management network only carries the checksum and the counters.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
peer=$(kparam peer "")
ifc=$(data_if_up 10.10.0.1 fd00:10::1) || exit 1
t=0
until ping -c 1 -W 1 10.10.0.2 >/dev/null 2>&1; do
	t=$((t + 1))
	[ $t -lt 120 ] || fail "10.10.0.2 does not answer on $ifc"
done
ping -c 3 -W 5 10.10.0.2 >/tmp/ping.out 2>&1 || { cat /tmp/ping.out; fail "ping over IPv4 failed"; }
ping -6 -c 3 -W 5 fd00:10::2 >/tmp/ping.out 2>&1 || { cat /tmp/ping.out; fail "ping over IPv6 failed"; }
mac=$(cat /sys/class/net/$ifc/address)
ip neigh show dev "$ifc" | grep -q '^10.10.0.2 lladdr 02:1d:a3:01:00:00' ||
	{ ip neigh show dev "$ifc"; fail "no ARP entry for the peer's port"; }
ip neigh show dev "$ifc" | grep -q '^fd00:10::2 lladdr 02:1d:a3:01:00:00' ||
	{ ip neigh show dev "$ifc"; fail "no IPv6 neighbour entry for the peer's port"; }
echo "$ifc ($mac): ping over IPv4 and IPv6, the peer's port resolved by Linux"
# From here on the counters must add up frame for frame: the resolved
# entries stay, so that no reachability probe crosses the link meanwhile.
ip neigh replace 10.10.0.2 lladdr 02:1d:a3:01:00:00 dev "$ifc" nud permanent
ip neigh replace fd00:10::2 lladdr 02:1d:a3:01:00:00 dev "$ifc" nud permanent
head -c $((16 << 20)) /dev/urandom >/tmp/data
sum=$(sha256sum </tmp/data | cut -d' ' -f1)
# Counters from here on, on both sides: the interface is quiet. The other
# side takes its own when it hears of these, and then listens for the data.
sleep 1
recv_file 5003 /tmp/go &
go=$!
counters "$ifc" | send_to "$peer" 5002 || fail "cannot reach $peer"
wait $go
[ "$(cat /tmp/go)" = go ] || fail "the other side did not answer"
t0=$(uptime_cs)
nc -w 30 10.10.0.2 5001 </tmp/data || fail "sending to 10.10.0.2:5001 failed"
t1=$(uptime_cs)
rm -f /tmp/data
echo "16 MiB sent over TCP in $(((t1 - t0) / 100)).$(((t1 - t0) % 100 / 10)) s"
retrans=$(awk '/^Tcp:/ { if (h) { print $13; exit } h = 1 }' /proc/net/snmp)
echo "TCP segments resent: $retrans; $(ethtool -S "$ifc" | tr -s ' \n' ' ')"
echo "emulator: $(emu_ctl stat | grep '^port 0 ')"
sleep 2
recv_file 5005 /tmp/verdict &
v=$!
echo "$sum $(counters "$ifc")" | send_to "$peer" 5004 120 || fail "cannot report to $peer"
wait $v
verdict=$(cat /tmp/verdict)
echo "$verdict"
case "$verdict" in ok:*) ;; *) fail "the other side: $verdict" ;; esac
