# SPDX-License-Identifier: GPL-2.0
# The RoCE GID table of a port follows its network interface's addresses
# through the core's GID cache: an IPv4 and an IPv6 address added with
# `ip addr add` become RoCE v2 GIDs (sysfs, QUERY_GID_TABLE with the
# interface), a user program reading its async event file sees GID_CHANGE
# for the port, and `ip addr del` removes them again.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test roce-gid-table --port 2 || fail "GID table did not follow the addresses"
