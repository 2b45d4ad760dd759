# SPDX-License-Identifier: GPL-2.0
# Benchmark (make bench): one 16 MiB RDMA WRITE to the other VM through the
# Gaudi2 ports, then through rxe on virtio-net NICs between the same VMs;
# TCP through both; perftest through both. All of it BENCH_RUNS times (the
# target side likewise), each figure reported as min/median/max.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
data=$(rxe_up 02:00:00:00:09: "$(kparam data "")")
gifc=$(data_if_up 10.10.0.1 fd00:10::1) || exit 1
until ping -c 1 -W 1 10.10.0.2 >/dev/null 2>&1; do sleep 0.5; done
head -c $((32 << 20)) /dev/urandom >/tmp/data
gx=$(gid_index_v4 gaudi_0 10.10.0.1) || fail "no RoCE v2 GID of 10.10.0.1 on gaudi_0"
rx=$(gid_index_v4 rxe0 "$(kparam data "")") || fail "no RoCE v2 GID on rxe0"
peer=$(kparam peer "")
: >/tmp/bench.runs
run=0
while [ $run -lt $BENCH_RUNS ]; do
run=$((run + 1))
echo "# run $run of $BENCH_RUNS"
gaudi-verbs-test write-source --peer "$peer" --port 1 --max-mib 16 >/tmp/bench.run ||
	{ cat /tmp/bench.run; fail "Gaudi WRITEs failed"; }
rxe-peer --source "$peer" rxe0 "$data" 16 >>/tmp/bench.run || { cat /tmp/bench.run; fail "rxe WRITE failed"; }
# TCP between the same VMs: 32 MiB over port 1's network interface (MTU
# 9000), then over the virtio-net NICs (MTU 1500); the other side counts
# the bytes.
t0=$(uptime_cs)
send_to 10.10.0.2 5011 </tmp/data || fail "TCP over $gifc failed"
t1=$(uptime_cs)
send_to "$(kparam peer_data "")" 5012 </tmp/data || fail "TCP over $data failed"
t2=$(uptime_cs)
g=$((32 * 1048576 / (t1 - t0)))
v=$((32 * 1048576 / (t2 - t1)))
echo >>/tmp/bench.run "bench: TCP, 32 MiB: Gaudi port $((g / 10000)).$((g / 1000 % 10)) MB/s, virtio-net $((v / 10000)).$((v / 1000 % 10)) MB/s, ratio $((g * 100 / v))%"
# perftest between the same VMs: Debian's ib_write_bw (64 KiB, 50 WRITEs)
# and ib_write_lat (2 B, 200 WRITEs), unmodified, through the Gaudi2 ports
# (gaudi_0 port 1, the RoCE v2 GIDs of 10.10.0.x), then through rxe on the
# virtio-net NICs; same sizes, same flags (the QP timeout -u 18, which the
# rxe side needs under TCG).
for dev in gaudi_0:$gx rxe0:$rx; do
	PERFTEST_DEV=${dev%:*} perftest_client "/tmp/bw.${dev%:*}" ib_write_bw "$peer" -x "${dev#*:}" \
		-s 65536 -n 50 -u 18 --report_gbits || { cat "/tmp/bw.${dev%:*}"; fail "ib_write_bw on ${dev%:*} failed"; }
	PERFTEST_DEV=${dev%:*} perftest_client "/tmp/lat.${dev%:*}" ib_write_lat "$peer" -x "${dev#*:}" \
		-s 2 -n 200 -u 18 || { cat "/tmp/lat.${dev%:*}"; fail "ib_write_lat on ${dev%:*} failed"; }
done
cat /tmp/bw.gaudi_0 /tmp/bw.rxe0 /tmp/lat.gaudi_0 /tmp/lat.rxe0
gbw=$(awk '$1 == 65536 { print $4 }' /tmp/bw.gaudi_0)
rbw=$(awk '$1 == 65536 { print $4 }' /tmp/bw.rxe0)
glat=$(awk '$1 == 2 { print $5 }' /tmp/lat.gaudi_0)
rlat=$(awk '$1 == 2 { print $5 }' /tmp/lat.rxe0)
# perftest's clock is the TSC at the rate the guest's kernel reports; a
# rate it cannot read gives 0 Gb/s and infinite latencies.
awk -v a="$gbw" -v b="$rbw" -v c="$glat" -v d="$rlat" 'BEGIN {
	exit !(a + 0 > 0 && b + 0 > 0 && c + 0 > 0 && d + 0 > 0 && c != "inf" && d != "inf")
}' || fail "perftest reported no valid result: $gbw, $rbw Gb/s, $glat, $rlat us"
echo >>/tmp/bench.run "bench: perftest ib_write_bw, 64 KiB: Gaudi2 pair $gbw Gb/s, rxe pair $rbw Gb/s, ratio $(awk -v a="$gbw" -v b="$rbw" 'BEGIN { printf "%.0f", (b > 0 ? a / b : 0) }')x"
echo >>/tmp/bench.run "bench: perftest ib_write_lat, 2 B: Gaudi2 pair $glat us, rxe pair $rlat us typical, ratio $(awk -v a="$rlat" -v b="$glat" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')x lower"
cat /tmp/bench.run
grep '^bench:' /tmp/bench.run >>/tmp/bench.runs
done
bench_summary /tmp/bench.runs
