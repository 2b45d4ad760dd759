/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * Structures and values of the uverbs ioctl namespace of the Habana Labs
 * Gaudi2 NIC driver (gaudi_ib). See Documentation/infiniband/gaudi/uapi.rst.
 */
#ifndef GAUDI_USER_IOCTL_VERBS_H
#define GAUDI_USER_IOCTL_VERBS_H

#include <linux/types.h>

enum gaudi_ib_port_flags {
	/* The link of the port is up. */
	GAUDI_IB_PORT_LINK_UP = 1 << 0,
};

/* Reply of GAUDI_IB_METHOD_QUERY_PORT. */
struct gaudi_ib_port_info {
	__u32 comp_mask;
	/* the port number asked for */
	__u32 port_num;
	/* MAC address, byte 0 first */
	__u8 mac[6];
	__u8 reserved0[2];
	/*
	 * the first IPv4 address of the port's network interface (the one
	 * its QP sets send from), network byte order; 0.0.0.0 if none
	 */
	__u8 ipv4[4];
	/* enum gaudi_ib_port_flags */
	__u32 flags;
	/* link speed, Mb/s */
	__u32 speed_mbps;
	__u32 reserved1;
};

/*
 * Reply of GAUDI_IB_METHOD_QUERY_MR: where a memory region sits in its
 * protection domain's address space (ASID). A work address A of the
 * region is the device VA (A - iova) + mmu_va; WQEs of QP sets carry
 * device VAs.
 */
struct gaudi_ib_mr_info {
	__u32 comp_mask;
	/* log2 of the device pages mapping the region */
	__u32 page_shift;
	/* device VA of iova */
	__aligned_u64 mmu_va;
	__aligned_u64 iova;
	__aligned_u64 length;
	/*
	 * the region's own key: its lkey, and its rkey unless it was
	 * registered with IB_ACCESS_REMOTE_WRITE (then the PD's key)
	 */
	__u32 key;
	/* enum ib_access_flags the region was registered with */
	__u32 access;
};

/*
 * GAUDI_IB_METHOD_QUERY_DEVICE: what the standard device query does not
 * say. The programming model versions the WQE, CQE and doorbell formats.
 */
struct gaudi_ib_device_info {
	__u32 comp_mask;
	/* the device's programming model: major << 16 | minor */
	__u32 model_version;
	/* bytes of device memory (HBM), and of it not allocated */
	__aligned_u64 devmem_size;
	__aligned_u64 devmem_free;
};

enum gaudi_ib_qp_set_create_flags {
	/* index is given: the set takes that index or fails with EBUSY */
	GAUDI_IB_QP_SET_CREATE_INDEX = 1 << 0,
};

/* Request of GAUDI_IB_METHOD_QP_SET_CREATE. */
struct gaudi_ib_qp_set_create {
	__u32 comp_mask;
	/* enum gaudi_ib_qp_set_create_flags */
	__u32 flags;
	/* ports of the set: bit n is port n + 1 */
	__aligned_u64 ports;
	/* log2 of the WQEs of each send queue, 4 to 11 */
	__u32 log_sq_entries;
	/* log2 of the CQEs of each CQ, 2 to 13 */
	__u32 log_cq_entries;
	/* with GAUDI_IB_QP_SET_CREATE_INDEX: the QP index, 2 to max_qps - 1 */
	__u32 index;
	__u32 reserved;
};

/* Reply of GAUDI_IB_METHOD_QP_SET_CREATE. */
struct gaudi_ib_qp_set_create_resp {
	__u32 comp_mask;
	/* the QP index (QP number) of the set on every one of its ports */
	__u32 index;
	/* ports of the set, as asked */
	__aligned_u64 ports;
	/* length in bytes of each send queue and each CQ mapping */
	__u32 sq_bytes;
	__u32 cq_bytes;
};

/*
 * One port of a QP set (GAUDI_IB_ATTR_QP_SET_CREATE_PORTS). The send
 * queue, the CQ and the QP's UMR page (its doorbell FIFO and CQ consumer
 * index) are mapped with mmap() on the device file at the offsets given;
 * see Documentation/infiniband/gaudi/uapi.rst for the WQE, CQE and
 * doorbell formats.
 */
struct gaudi_ib_qp_set_port {
	/* port number, 1 to num_ports */
	__u32 port_num;
	/* the number of the QP's CQ on this port */
	__u32 cqn;
	/* mmap() offsets: send queue, CQ, UMR page (4 KiB) */
	__aligned_u64 sq_offset;
	__aligned_u64 cq_offset;
	__aligned_u64 db_offset;
	/*
	 * device VA of the send queue in the set's ASID (read-only there),
	 * and 0: the CQ is in no ASID
	 */
	__aligned_u64 sq_va;
	__aligned_u64 cq_va;
};

/* Request of GAUDI_IB_METHOD_QP_SET_MODIFY: one QP of the set. */
struct gaudi_ib_qp_set_modify {
	__u32 comp_mask;
	/*
	 * the state to move to, enum ib_qp_state: RESET, INIT, RTR, RTS or
	 * ERR; RESET->INIT->RTR->RTS, and any state to RESET or ERR
	 */
	__u32 state;
	/* RTR: the peer's QP number (24 bits) */
	__u32 dest_qpn;
	/* RTR: first PSN expected (24 bits) */
	__u32 rq_psn;
	/* RTS: first PSN sent (24 bits) */
	__u32 sq_psn;
	/* RTR: the rkey every RDMA WRITE of the QP carries */
	__u32 remote_rkey;
	/*
	 * RTR: the rkey incoming RDMA WRITEs must carry: the key of the set's
	 * PD (the rkey of its regions registered with
	 * IB_ACCESS_REMOTE_WRITE); 0 accepts none
	 */
	__u32 local_rkey;
	/* RTR: enum ib_mtu, IB_MTU_256 to IB_MTU_4096 */
	__u8 path_mtu;
	/* RTS: local ACK timeout, 4.096 us * 2^timeout, 0 to 31 */
	__u8 timeout;
	/* RTS: retries, 0 to 7 */
	__u8 retry_cnt;
	__u8 reserved0;
	/* RTR: destination MAC (unicast) */
	__u8 dmac[6];
	/* RTR: UDP source port, low 14 bits; 0: derived from the QP numbers */
	__u16 udp_sport;
	/*
	 * RTR: destination IPv4 address, first octet first; the QP sends
	 * from the port's first IPv4 GID (an address of its network device)
	 */
	__u8 dest_ipv4[4];
	__u32 reserved1;
};

/* Reply of GAUDI_IB_METHOD_QP_SET_QUERY: one QP of the set, as the device has it. */
struct gaudi_ib_qp_set_qp_info {
	__u32 comp_mask;
	/* enum ib_qp_state; IB_QPS_ERR after a fault */
	__u32 state;
	/* next PSN to send, next PSN expected */
	__u32 sq_psn;
	__u32 rq_psn;
};

/*
 * GAUDI_IB_METHOD_HBM_ALLOC: length bytes of device memory, a multiple of
 * 4 KiB. Blocks of 2 MiB or more are aligned to 2 MiB.
 */
struct gaudi_ib_hbm_alloc {
	__u32 comp_mask;
	__u32 reserved;
	__aligned_u64 length;
};

struct gaudi_ib_hbm_alloc_resp {
	__u32 comp_mask;
	__u32 reserved;
	/* offset of the block in the device's memory (BAR 4) */
	__aligned_u64 offset;
	__aligned_u64 length;
};

enum gaudi_ib_hbm_export_flags {
	/* the new file descriptor is close-on-exec */
	GAUDI_IB_HBM_EXPORT_CLOEXEC = 1 << 0,
};

/* GAUDI_IB_METHOD_HBM_EXPORT: the whole block as a dma-buf. */
struct gaudi_ib_hbm_export {
	__u32 comp_mask;
	/* enum gaudi_ib_hbm_export_flags */
	__u32 flags;
};

struct gaudi_ib_hbm_export_resp {
	__u32 comp_mask;
	/* a new file descriptor of the dma-buf, in the calling process */
	__u32 fd;
};

#endif /* GAUDI_USER_IOCTL_VERBS_H */
