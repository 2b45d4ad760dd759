# SPDX-License-Identifier: GPL-2.0
# RDMA WRITEs from port 1 to port 2 of the device (the emulator links them)
# through the standard verbs, addressed by the destination region's iova
# (neither its address nor its device VA): sizes 1 B to gaudi.write_max_mib
# MiB (default 1024) land byte for byte (the destination holds other bytes
# before each), each with a completion naming its wr_id and length; a WRITE
# with immediate fails with EOPNOTSUPP and so does one of no data, at post
# (the NIC's WQEs carry no immediate, and it refuses size 0); unsignalled
# requests complete with the next signalled one; a request of several SGEs
# lands them in order at consecutive addresses with one completion of their
# length, and completes once when its first WQE fails (a WRITE with
# immediate of several is refused); an inline WRITE takes its data at post;
# an armed CQ reports its completion on the completion channel; query_qp
# reads the state back.
. /lib/gaudi/guest-lib.sh
load_driver
max=$(kparam write_max_mib 1024)
gaudi-verbs-test write-loopback --max-mib "$max" --from 1 --to 2 ||
	fail "loopback WRITEs failed"
