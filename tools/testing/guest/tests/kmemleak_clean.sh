# SPDX-License-Identifier: GPL-2.0
# Everything the earlier tests allocated was released: kmemleak finds no
# unreferenced object (it reports objects older than 5 s, hence the wait).
. /lib/gaudi/guest-lib.sh
debugfs
[ -e /sys/kernel/debug/kmemleak ] || fail "kmemleak is not available"
sleep 6
echo scan >/sys/kernel/debug/kmemleak
echo scan >/sys/kernel/debug/kmemleak
leaks=$(cat /sys/kernel/debug/kmemleak)
if [ -n "$leaks" ]; then
	echo "$leaks" | head -n 60
	fail "kmemleak reports unreferenced objects"
fi
echo "kmemleak: nothing to report"
