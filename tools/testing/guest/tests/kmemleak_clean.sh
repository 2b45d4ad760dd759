# SPDX-License-Identifier: GPL-2.0
# Everything the earlier tests allocated was released: kmemleak finds no
# unreferenced object (it reports objects older than 5 s, hence the wait).
. /lib/gaudi/guest-lib.sh
kmemleak_clean_after "the earlier tests"
echo "kmemleak: nothing to report"
