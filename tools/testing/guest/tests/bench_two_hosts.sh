# SPDX-License-Identifier: GPL-2.0
# Benchmark (make bench): one 16 MiB RDMA WRITE to the other VM through the
# Gaudi2 ports, then through rxe on virtio-net NICs between the same VMs.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
data=$(rxe_up 02:00:00:00:09: "$(kparam data "")")
gaudi-verbs-test write-source --peer "$(kparam peer "")" --port 1 --max-mib 16 ||
	fail "Gaudi WRITEs failed"
rxe-peer --source "$(kparam peer "")" rxe0 "$data" 16 || fail "rxe WRITE failed"
# TCP between the same VMs: 32 MiB over port 1's network interface (MTU
# 9000), then over the virtio-net NICs (MTU 1500); the other side counts
# the bytes.
gifc=$(data_if_up 10.10.0.1 fd00:10::1) || exit 1
until ping -c 1 -W 1 10.10.0.2 >/dev/null 2>&1; do sleep 0.5; done
head -c $((32 << 20)) /dev/urandom >/tmp/data
t0=$(uptime_cs)
send_to 10.10.0.2 5011 </tmp/data || fail "TCP over $gifc failed"
t1=$(uptime_cs)
send_to "$(kparam peer_data "")" 5012 </tmp/data || fail "TCP over $data failed"
t2=$(uptime_cs)
g=$((32 * 1048576 / (t1 - t0)))
v=$((32 * 1048576 / (t2 - t1)))
echo "bench: TCP, 32 MiB: Gaudi port $((g / 10000)).$((g / 1000 % 10)) MB/s, virtio-net $((v / 10000)).$((v / 1000 % 10)) MB/s, ratio $((g * 100 / v))%"
