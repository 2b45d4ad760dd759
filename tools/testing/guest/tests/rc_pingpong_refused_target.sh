# SPDX-License-Identifier: GPL-2.0
# The server side of rc_pingpong_refused: Debian's ibv_rc_pingpong fails at
# its first receive post, before it waits for a client, and never hangs.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
st=0
t0=$(uptime_cs)
VERBS_LOG_LEVEL=4 timeout 30 ibv_rc_pingpong -d gaudi_0 -i 1 -g 1 >/tmp/pp.txt 2>&1 || st=$?
took=$(($(uptime_cs) - t0))
cat /tmp/pp.txt
[ "$st" != 0 ] || fail "ibv_rc_pingpong (server) succeeded"
# Killed by the timeout (busybox's exits 143, coreutils' 124): the time
# taken says it whatever the status.
[ "$st" != 124 ] && [ "$st" != 143 ] && [ "$took" -lt 3000 ] ||
	fail "ibv_rc_pingpong (server) hung (killed after 30 s: exit $st after $((took / 100)) s)"
grep -q "Couldn't post receive" /tmp/pp.txt || fail "ibv_rc_pingpong (server) did not fail at its receive post"
echo "ibv_rc_pingpong (server): refused at its first receive post (exit $st)"
