# SPDX-License-Identifier: GPL-2.0
# The target side of bench_two_hosts: first for the Gaudi2 WRITEs, then for
# the rxe one (both check the bytes), TCP and perftest; BENCH_RUNS times.
. /lib/gaudi/guest-lib.sh
load_driver
mgmt_up
data=$(rxe_up 02:00:00:00:09: "$(kparam data "")")
gifc=$(data_if_up 10.10.0.2 fd00:10::2) || exit 1
gx=$(gid_index_v4 gaudi_0 10.10.0.2) || fail "no RoCE v2 GID of 10.10.0.2 on gaudi_0"
rx=$(gid_index_v4 rxe0 "$(kparam data "")") || fail "no RoCE v2 GID on rxe0"
run=0
while [ $run -lt $BENCH_RUNS ]; do
run=$((run + 1))
gaudi-verbs-test write-target --port 1 --max-mib 16 || fail "Gaudi target failed"
rxe-peer rxe0 "$data" 16 || fail "rxe target failed"
# The receiving side of the TCP comparison: over port 1's interface, then
# over the virtio-net NIC.
recv_file 5011 /tmp/g || fail "nothing over $gifc"
recv_file 5012 /tmp/v || fail "nothing over $data"
[ "$(wc -c </tmp/g)" = $((32 << 20)) ] && [ "$(wc -c </tmp/v)" = $((32 << 20)) ] ||
	fail "TCP: $(wc -c </tmp/g) and $(wc -c </tmp/v) bytes arrived"
echo "TCP: 32 MiB arrived over $gifc and over $data"
# The servers of the perftest comparison, in the client's order.
for dev in gaudi_0:$gx rxe0:$rx; do
	ib_write_bw -d "${dev%:*}" -i 1 -x "${dev#*:}" -F -s 65536 -n 50 -u 18 --report_gbits \
		>/tmp/bw.txt 2>&1 || { cat /tmp/bw.txt; fail "ib_write_bw server on ${dev%:*} failed"; }
	ib_write_lat -d "${dev%:*}" -i 1 -x "${dev#*:}" -F -s 2 -n 200 -u 18 \
		>/tmp/lat.txt 2>&1 || { cat /tmp/lat.txt; fail "ib_write_lat server on ${dev%:*} failed"; }
done
echo "perftest servers done on gaudi_0 and rxe0 (run $run)"
done
