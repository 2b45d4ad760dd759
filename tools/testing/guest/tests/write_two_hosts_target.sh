# SPDX-License-Identifier: GPL-2.0
# The target of write_two_hosts: a region of gaudi.write_max_mib MiB
# (default 1024) registered for remote writes, a QP on port 1 bound to it,
# its iova (the address it was registered at), key and QP number handed over
# over the Gaudi link; every WRITE the source reports is checked byte
# for byte here.
. /lib/gaudi/guest-lib.sh
load_driver
exchange_up >/dev/null || exit 1
gaudi-verbs-test write-target --port 1 --max-mib "$(kparam write_max_mib 1024)" ||
	fail "two-host WRITE target failed"
