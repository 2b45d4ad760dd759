# SPDX-License-Identifier: GPL-2.0
# The fast path: a QP set over ports 1 and 2 (one QP index on both, the
# emulator links them); the QP of port 1 writes 1 B to gaudi.write_max_mib
# MiB (default 1024) to the QP of port 2 through its mapped send queue,
# doorbell page and CQ, from a thread whose system calls a seccomp filter
# counts: none. The set's QPs are NIC contexts in the PD's ASID, and WQEs,
# CQEs and doorbells have the NIC's formats. Every byte lands (the
# destination holds other bytes before each WRITE) and the bytes around
# stay; one CQE covers unsignalled WQEs; WQEs name the source by the device
# VA the QUERY_MR method gives and the destination by its iova. The NIC
# having no WRITE with immediate, a WQE of another opcode moves the QP to
# ERR with no CQE and nothing landed.
. /lib/gaudi/guest-lib.sh
load_driver
gaudi-verbs-test dv-write --max-mib "$(kparam write_max_mib 1024)" --from 1 --to 2 ||
	fail "dv WRITEs failed"
