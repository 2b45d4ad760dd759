# SPDX-License-Identifier: GPL-2.0
# Two hosts, each with its own Gaudi2, port 1 linked to port 1: this host
# writes 1 B to gaudi.write_max_mib MiB (default 1024) into a region of the
# other (write_two_hosts_target), which checks every byte; each completion
# names its wr_id with status success. Addresses, keys and QP numbers go
# over the Gaudi link itself (IP on the ports' interfaces).
. /lib/gaudi/guest-lib.sh
load_driver
peer=$(exchange_up) || exit 1
gaudi-verbs-test write-source --peer "$peer" --port 1 \
	--max-mib "$(kparam write_max_mib 1024)" || fail "two-host WRITEs failed"
