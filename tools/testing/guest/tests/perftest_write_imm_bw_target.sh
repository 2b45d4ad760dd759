# SPDX-License-Identifier: GPL-2.0
# The server side of perftest_write_imm_bw: it posts the receives, and each
# WRITE with immediate completes one of them.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
for s in 65536 4096; do
	ib_write_bw -d gaudi_0 -i 1 -F --write_with_imm -s "$s" -n 100 --report_gbits >/tmp/imm.txt 2>&1 ||
		{ cat /tmp/imm.txt; fail "ib_write_bw --write_with_imm -s $s (server) failed"; }
	# perftest's notice that it measures no peak with --write_with_imm says
	# "WARNING:", which the kernel log check would take for the kernel's.
	grep -v "WARNING: BW peak won't be measured" /tmp/imm.txt
	perftest_sizes /tmp/imm.txt 1 || fail "ib_write_bw --write_with_imm -s $s (server) reported no result"
done
echo "ib_write_bw --write_with_imm (server): 64 KiB and 4 KiB, 100 WRITEs with immediate each"
