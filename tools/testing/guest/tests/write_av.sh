# SPDX-License-Identifier: GPL-2.0
# Two hosts, each with its own Gaudi2, port 1 linked to port 1, connect RC
# QPs with a standard address vector only (the peer's GID, a source GID
# index, a hop limit; no MAC, no driver data): once over IPv4 GIDs
# (10.20.0.1/24 here, 10.20.0.2 there, resolved by ARP) and once over IPv6
# GIDs (fd00:20::1/64 and ::2). Over IPv4 this host writes 1 B to 64 MiB into the other's region
# (write_av_target), which checks every byte. The NIC sends RoCE over IPv4
# only: with the IPv6 GIDs each side's move to RTR fails with EOPNOTSUPP
# and the QP stays in INIT.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
for a in 10.20.0.1/24 fd00:20::1/64; do
	echo "# source GID $a"
	gaudi-verbs-test write-source --peer "$peer" --port 1 --max-mib 64 --addr "$a" ||
		fail "WRITEs from $a failed"
done
