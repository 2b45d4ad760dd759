# SPDX-License-Identifier: GPL-2.0
# The target of dv_write_two_hosts: as write_two_hosts_target, a region for
# remote writes and a QP on port 1; every WRITE is checked byte for byte.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
gaudi-verbs-test write-target --port 1 --max-mib "$(kparam write_max_mib 1024)" ||
	fail "two-host dv WRITE target failed"
