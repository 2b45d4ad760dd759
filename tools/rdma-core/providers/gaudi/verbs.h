/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The standard verbs of the Habana Labs Gaudi2 NIC.
 */

#ifndef __GAUDI_VERBS_H__
#define __GAUDI_VERBS_H__

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

int gaudi_query_device_ex(struct ibv_context *context,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size);
int gaudi_query_port(struct ibv_context *context, uint8_t port,
		     struct ibv_port_attr *attr);
struct ibv_pd *gaudi_alloc_pd(struct ibv_context *context);
int gaudi_dealloc_pd(struct ibv_pd *ibvpd);
struct ibv_mr *gaudi_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access);
struct ibv_mr *gaudi_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				   size_t length, uint64_t iova, int fd,
				   int access);
int gaudi_dereg_mr(struct verbs_mr *vmr);
struct ibv_cq *gaudi_create_cq(struct ibv_context *context, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector);
int gaudi_destroy_cq(struct ibv_cq *ibvcq);
int gaudi_poll_cq(struct ibv_cq *ibvcq, int nwc, struct ibv_wc *wc);
int gaudi_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only);
struct ibv_qp *gaudi_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
struct ibv_qp *gaudi_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr);
int gaudi_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		    int attr_mask);
int gaudi_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		   int attr_mask, struct ibv_qp_init_attr *init_attr);
int gaudi_destroy_qp(struct ibv_qp *ibvqp);
int gaudi_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int gaudi_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);

#endif /* __GAUDI_VERBS_H__ */
