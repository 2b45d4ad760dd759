# SPDX-License-Identifier: GPL-2.0
# The server side of perftest_write_imm_bw: the client's posts are refused
# (the NIC has no WRITE with immediate), so the server gets no completion,
# and is stopped when the client says so, with no result.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
ib_write_bw -d gaudi_0 -i 1 -F --write_with_imm -s 4096 -n 100 --report_gbits >/tmp/imm.txt 2>&1 &
server=$!
# The client's word that its post was refused (it would wait two minutes
# for WRITEs).
timeout 300 sh -c '. /lib/gaudi/guest-lib.sh; recv_file 5011 /tmp/imm_done' ||
	fail "no word from the client"
kill "$server" 2>/dev/null || true
wait "$server" && {
	cat /tmp/imm.txt
	fail "ib_write_bw --write_with_imm (server) completed on a NIC without WRITE with immediate"
}
# Killed, it may have printed nothing (its output is buffered). perftest's
# notice that it measures no peak with --write_with_imm says "WARNING:",
# which the kernel log check would take for the kernel's.
grep -v "WARNING: BW peak won't be measured" /tmp/imm.txt || true
perftest_sizes /tmp/imm.txt 0 || fail "ib_write_bw --write_with_imm (server) reported a result"
echo "ib_write_bw --write_with_imm (server): no WRITE with immediate arrived"
