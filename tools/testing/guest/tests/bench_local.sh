# SPDX-License-Identifier: GPL-2.0
# Benchmark (make bench): registration of 1 GiB against bare pinning of the
# same memory, and post_send per WQE against a minimal ioctl; BENCH_RUNS
# times, each figure reported as min/median/max.
. /lib/gaudi/guest-lib.sh
load_driver
: >/tmp/bench.runs
run=0
while [ $run -lt $BENCH_RUNS ]; do
	run=$((run + 1))
	echo "# run $run of $BENCH_RUNS"
	gaudi-verbs-test bench-local --mib 1024 >/tmp/bench.run || { cat /tmp/bench.run; fail "bench-local failed"; }
	cat /tmp/bench.run
	grep '^bench:' /tmp/bench.run >>/tmp/bench.runs
done
bench_summary /tmp/bench.runs
