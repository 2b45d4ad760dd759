/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The rdma-core provider of the Habana Labs Gaudi2 NIC (kernel driver
 * gaudi_ib): objects and helpers shared by its files.
 */

#ifndef __GAUDI_H__
#define __GAUDI_H__

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <infiniband/driver.h>

#include "gaudi-abi.h"

struct gaudi_device {
	struct verbs_device vdev;
};

struct gaudi_context {
	struct verbs_context ibvctx;
	uint32_t num_ports;
	/* the device's programming model: major << 16 | minor */
	uint32_t model_version;
};

struct gaudi_pd {
	struct ibv_pd ibvpd;
	uint32_t pdn;
};

struct gaudi_mr {
	struct verbs_mr vmr;
};

struct gaudi_cq {
	struct ibv_cq ibvcq;
};

/*
 * A QP. Work requests reach the device through the kernel, which checks
 * every address against the regions of the QP's PD (the NIC's WQEs carry
 * no lkey): ibv_post_send() and the ibv_wr_*() calls between
 * ibv_wr_start() and ibv_wr_complete() end in one ibv_cmd_post_send().
 */
struct gaudi_qp {
	struct verbs_qp vqp;
	/* the requests ibv_wr_*() built since ibv_wr_start(), at most sq_wrs */
	pthread_spinlock_t wr_lock;
	struct ibv_send_wr *wrs;
	/* max_sge of them for each request */
	struct ibv_sge *sges;
	uint32_t sq_wrs;
	uint32_t max_sge;
	uint32_t nwr;
	/* the first error of the batch, returned by ibv_wr_complete() */
	int wr_err;
};

static inline struct gaudi_context *to_gaudi_context(struct ibv_context *ctx)
{
	return container_of(ctx, struct gaudi_context, ibvctx.context);
}

static inline struct gaudi_pd *to_gaudi_pd(struct ibv_pd *pd)
{
	return container_of(pd, struct gaudi_pd, ibvpd);
}

static inline struct gaudi_cq *to_gaudi_cq(struct ibv_cq *cq)
{
	return container_of(cq, struct gaudi_cq, ibvcq);
}

static inline struct gaudi_qp *to_gaudi_qp(struct ibv_qp *qp)
{
	return container_of(qp, struct gaudi_qp, vqp.qp);
}

static inline struct gaudi_qp *qpx_to_gaudi_qp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct gaudi_qp, vqp.qp_ex);
}

bool is_gaudi_dev(struct ibv_device *device);
/* The device's programming model (GAUDI_IB_METHOD_QUERY_DEVICE). */
int gaudi_query_model(struct ibv_context *context, uint32_t *model);

#endif /* __GAUDI_H__ */
