# SPDX-License-Identifier: GPL-2.0
# As write_two_hosts, from a one-port QP set: this host writes 1 B to
# gaudi.write_max_mib MiB (default 1024) into a region of the other
# (dv_write_two_hosts_target, a QP of the standard verbs), posting WQEs and
# reading CQEs without system calls; the other host checks every byte.
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
gaudi-verbs-test dv-write-source --peer "$peer" --port 1 \
	--max-mib "$(kparam write_max_mib 1024)" || fail "two-host dv WRITEs failed"
