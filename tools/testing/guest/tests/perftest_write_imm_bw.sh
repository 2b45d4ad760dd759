# SPDX-License-Identifier: GPL-2.0
# Debian's ib_write_bw --write_with_imm, unmodified, between the two hosts
# (perftest_write_imm_bw_target is the server). The NIC has no WRITE with
# immediate (its WQEs carry no immediate, device-model.rst): the client's
# first post is refused (EOPNOTSUPP), so it reports "Couldn't post send"
# with nothing sent and no result, and ends, and tells the server, which
# would wait two minutes for WRITEs, to stop; nothing hangs.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
if perftest_client /tmp/imm.txt ib_write_bw "$peer" --write_with_imm -s 4096 -n 100 --report_gbits; then
	cat /tmp/imm.txt
	fail "ib_write_bw --write_with_imm ran on a NIC without WRITE with immediate"
fi
# perftest's notice that it measures no peak with --write_with_imm says
# "WARNING:", which the kernel log check would take for the kernel's.
grep -v "WARNING: BW peak won't be measured" /tmp/imm.txt
grep -q "Couldn't post send: qp 0 scnt=0" /tmp/imm.txt ||
	fail "ib_write_bw --write_with_imm: the first post was not the one refused"
perftest_sizes /tmp/imm.txt 0 || fail "ib_write_bw --write_with_imm reported a result"
# The server waits for WRITEs that never come: tell it to stop.
echo done | send_to "$peer" 5011 || fail "cannot tell the server to stop"
echo "ib_write_bw --write_with_imm: refused at the first post"
