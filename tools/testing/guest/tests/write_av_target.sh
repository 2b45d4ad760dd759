# SPDX-License-Identifier: GPL-2.0
# The target of write_av: a 64 MiB region, a QP on port 1 connected by
# address vector to the source's GID, first from 10.20.0.2/24 (every WRITE
# is checked byte for byte here), then from fd00:20::2/64 (the move to RTR
# towards an IPv6 GID fails with EOPNOTSUPP: the NIC sends RoCE over IPv4
# only).
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
for a in 10.20.0.2/24 fd00:20::2/64; do
	echo "# target GID $a"
	gaudi-verbs-test write-target --port 1 --max-mib 64 --addr "$a" ||
		fail "WRITE target at $a failed"
done
