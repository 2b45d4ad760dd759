/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Direct verbs of the Habana Labs Gaudi2 NIC: what the standard verbs do
 * not express. See gaudidv(7).
 */

#ifndef __GAUDIDV_H__
#define __GAUDIDV_H__

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

bool gaudidv_is_supported(struct ibv_device *device);

struct gaudidv_device_attr {
	uint64_t comp_mask;
	/* the device's programming model: major << 16 | minor */
	uint32_t model_version;
	uint32_t num_ports;
	/* bytes of device memory (HBM), and of it not allocated */
	uint64_t devmem_size;
	uint64_t devmem_free;
};

int gaudidv_query_device(struct ibv_context *context,
			 struct gaudidv_device_attr *attr, uint32_t inlen);

enum gaudidv_port_flags {
	GAUDIDV_PORT_LINK_UP = 1 << 0,
};

struct gaudidv_port_attr {
	uint64_t comp_mask;
	uint8_t mac[6];
	uint8_t reserved[2];
	/* enum gaudidv_port_flags */
	uint32_t flags;
	uint32_t speed_mbps;
};

int gaudidv_query_port(struct ibv_context *context, uint32_t port_num,
		       struct gaudidv_port_attr *attr, uint32_t inlen);

struct gaudidv_mr_attr {
	uint64_t comp_mask;
	/* device VA of the region's iova; (addr - iova) + mmu_va for addr */
	uint64_t mmu_va;
	/* log2 of the device pages mapping the region */
	uint32_t page_shift;
	uint32_t reserved;
};

int gaudidv_query_mr(struct ibv_mr *mr, struct gaudidv_mr_attr *attr,
		     uint32_t inlen);

enum gaudidv_qp_keys_mask {
	/* remote_rkey is given */
	GAUDIDV_QP_REMOTE_RKEY = 1 << 0,
	/* local_rkey is given */
	GAUDIDV_QP_LOCAL_RKEY = 1 << 1,
};

/* The keys of a QP's context, set with a transition to RTR or RTS. */
struct gaudidv_qp_keys {
	uint64_t comp_mask;
	/* enum gaudidv_qp_keys_mask */
	uint32_t mask;
	/* the rkey every RDMA WRITE of the QP carries */
	uint32_t remote_rkey;
	/* the region incoming WRITEs reach (0: none) */
	uint32_t local_rkey;
	uint32_t reserved;
};

int gaudidv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, const struct gaudidv_qp_keys *keys);

enum gaudidv_qp_set_init_flags {
	/* index is given: the set takes it or fails with EBUSY */
	GAUDIDV_QP_SET_INIT_INDEX = 1 << 0,
};

struct gaudidv_qp_set_init_attr {
	uint64_t comp_mask;
	/* ports of the set: bit n is port n + 1 */
	uint64_t ports;
	uint32_t log_sq_entries;
	uint32_t log_cq_entries;
	/* enum gaudidv_qp_set_init_flags */
	uint32_t flags;
	uint32_t index;
	/*
	 * the protection domain whose address space the QPs work in (on
	 * model 2.0, where it is required)
	 */
	struct ibv_pd *pd;
};

/* One port of a QP set: its queues and doorbell page, mapped. */
struct gaudidv_qp_set_port {
	uint32_t port_num;
	uint32_t cqn;
	void *sq;
	void *cq;
	void *db;
	/* device VAs of the queues */
	uint64_t sq_va;
	uint64_t cq_va;
};

struct gaudidv_qp_set {
	struct ibv_context *context;
	/* the QP number of the set on every one of its ports */
	uint32_t index;
	uint32_t num_ports;
	uint64_t ports;
	size_t sq_bytes;
	size_t cq_bytes;
	/* num_ports entries, lowest port first */
	struct gaudidv_qp_set_port *port;
};

struct gaudidv_qp_set *
gaudidv_create_qp_set(struct ibv_context *context,
		      const struct gaudidv_qp_set_init_attr *attr);
int gaudidv_destroy_qp_set(struct gaudidv_qp_set *set);

/* A transition of one QP of a set; the fields of each state as gaudidv_modify_qp_set(3). */
struct gaudidv_qp_set_attr {
	uint64_t comp_mask;
	/* enum ibv_qp_state: RESET, INIT, RTR, RTS or ERR */
	uint32_t state;
	uint32_t dest_qpn;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t remote_rkey;
	uint32_t local_rkey;
	/* enum ibv_mtu */
	uint8_t path_mtu;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t reserved0;
	uint8_t dmac[6];
	uint16_t udp_sport;
	/* first octet first */
	uint8_t dest_ipv4[4];
	uint32_t reserved1;
};

int gaudidv_modify_qp_set(struct gaudidv_qp_set *set, uint32_t port_num,
			  const struct gaudidv_qp_set_attr *attr);

struct gaudidv_qp_set_qp_attr {
	uint64_t comp_mask;
	/* enum ibv_qp_state */
	uint32_t state;
	uint32_t sq_psn;
	uint32_t rq_psn;
	uint32_t reserved;
};

int gaudidv_query_qp_set(struct gaudidv_qp_set *set, uint32_t port_num,
			 struct gaudidv_qp_set_qp_attr *attr, uint32_t inlen);

/* A block of device memory (HBM). */
struct gaudidv_hbm {
	struct ibv_context *context;
	/* offset of the block in the device's memory */
	uint64_t offset;
	uint64_t length;
};

struct gaudidv_hbm *gaudidv_alloc_hbm(struct ibv_context *context,
				      uint64_t length);
int gaudidv_free_hbm(struct gaudidv_hbm *hbm);

enum gaudidv_hbm_export_flags {
	GAUDIDV_HBM_EXPORT_CLOEXEC = 1 << 0,
};

int gaudidv_export_hbm(struct gaudidv_hbm *hbm, uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif /* __GAUDIDV_H__ */
