# SPDX-License-Identifier: GPL-2.0
# Debian's ibv_rc_pingpong, unmodified, between the two hosts: it exchanges
# SENDs, which need receive queues the NIC does not have, so it fails at its
# first receive post (ibv_post_recv: EOPNOTSUPP, the documented limit, which
# the provider's debug log, VERBS_LOG_LEVEL=4, names) with its message,
# within seconds, on both
# sides (rc_pingpong_refused_target is the server), and never hangs.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
t0=$(uptime_cs)
st=0
rm -f /tmp/verbs.log
VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=/tmp/verbs.log timeout 30 ibv_rc_pingpong -d gaudi_0 -i 1 -g 1 "$peer" \
	>/tmp/pp.txt 2>&1 || st=$?
cat /tmp/pp.txt
cat /tmp/verbs.log 2>/dev/null || true
took=$(($(uptime_cs) - t0))
[ "$st" != 0 ] || fail "ibv_rc_pingpong succeeded"
# Killed by the timeout: busybox's exits 143 (the program died of
# SIGTERM), coreutils' 124; the time taken says it whatever the status.
[ "$st" != 124 ] && [ "$st" != 143 ] && [ "$took" -lt 3000 ] ||
	fail "ibv_rc_pingpong hung (killed after 30 s: exit $st after $((took / 100)) s)"
grep -q "Couldn't post receive" /tmp/pp.txt || fail "ibv_rc_pingpong did not fail at its receive post"
grep -q "post_recv: the device has no receive queues" /tmp/verbs.log ||
	fail "the provider's log does not name the limit"
echo "ibv_rc_pingpong: refused at its first receive post (exit $st) after $((took / 100)).$((took % 100 / 10)) s"
