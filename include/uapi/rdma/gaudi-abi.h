/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * Driver data of the standard verbs of the Habana Labs Gaudi2 NIC driver
 * (gaudi_ib). See Documentation/infiniband/gaudi/uapi.rst.
 *
 * Rules (as efa-abi.h): every structure is 8-byte aligned and padded
 * explicitly; reserved fields are zero; comp_mask says which optional
 * fields are valid. A request may be shorter (older user space) or longer
 * with zero tail (newer user space) than this header says.
 */
#ifndef GAUDI_ABI_USER_H
#define GAUDI_ABI_USER_H

#include <linux/types.h>

/* Increment on incompatible changes of the structures below. */
#define GAUDI_IB_UVERBS_ABI_VERSION 2

/* Response of the user context allocation. */
struct gaudi_ib_alloc_ucontext_resp {
	__u32 comp_mask;
	/* GAUDI_IB_UVERBS_ABI_VERSION of the kernel */
	__u32 abi_version;
	/* bit n: port n + 1 exists */
	__aligned_u64 ports_mask;
	__u32 num_ports;
	/* QPs per port */
	__u32 max_qps;
	/* CQs per port */
	__u32 max_cqs;
	/* entries per CQ */
	__u32 max_cqe;
	/* WQEs per send queue */
	__u32 max_sqe;
	/* largest path MTU, bytes */
	__u32 max_mtu;
	/* largest message, bytes */
	__aligned_u64 max_msg;
	/* page sizes the device MMU maps (bit n: 2^n bytes) */
	__aligned_u64 page_size_cap;
};

/* Response of the protection domain allocation. */
struct gaudi_ib_alloc_pd_resp {
	__u32 comp_mask;
	__u32 pdn;
};

/*
 * Response of a memory registration: where the region sits in its
 * protection domain's address space (ASID). A work address A of the
 * region is the device VA (A - iova) + mmu_va; a region registered with
 * IB_ACCESS_REMOTE_WRITE is at its iova (mmu_va == iova), the address a
 * peer's WRITE names (see Documentation/infiniband/gaudi/uapi.rst).
 */
struct gaudi_ib_reg_mr_resp {
	__u32 comp_mask;
	/* log2 of the device pages mapping the region */
	__u32 page_shift;
	/* device VA of the region's iova */
	__aligned_u64 mmu_va;
};

/*
 * Driver data of a queue pair modification (IB_USER_VERBS_CMD_MODIFY_QP),
 * given to INIT->RTR and RTR/RTS->RTS: the keys, which struct ib_qp_attr
 * has no field for. The destination is the standard address vector (ABI 2;
 * ABI 1 carried a MAC, an IPv4 address and a UDP port here).
 */
enum gaudi_ib_modify_qp_flags {
	/* remote_rkey is given */
	GAUDI_IB_MODIFY_QP_REMOTE_RKEY = 1 << 1,
	/* local_rkey is given */
	GAUDI_IB_MODIFY_QP_LOCAL_RKEY = 1 << 2,
};

struct gaudi_ib_modify_qp {
	__u32 comp_mask;
	/* enum gaudi_ib_modify_qp_flags */
	__u32 flags;
	/* the rkey every RDMA WRITE of the QP carries to the peer */
	__u32 remote_rkey;
	/*
	 * the rkey incoming RDMA WRITEs must carry: the key of the QP's PD
	 * (the rkey of its regions registered with IB_ACCESS_REMOTE_WRITE),
	 * or 0
	 */
	__u32 local_rkey;
};

#endif /* GAUDI_ABI_USER_H */
