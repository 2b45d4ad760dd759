// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The standard verbs of the Habana Labs Gaudi2 NIC.
 *
 * The NIC executes RDMA WRITE and RDMA WRITE with immediate on RC QPs; its
 * work requests carry device addresses that only the kernel may compute,
 * after checking them against the registered regions (the NIC has one
 * translation domain and no lkeys). So every verb here is a command to the
 * kernel driver, the data path included: ibv_post_send() and the
 * ibv_wr_*() calls end in ibv_cmd_post_send(), ibv_poll_cq() in
 * ibv_cmd_poll_cq(), ibv_post_recv() in ibv_cmd_post_recv() (receives are
 * credits of incoming WRITEs with immediate). What the NIC cannot do fails
 * with EOPNOTSUPP.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <util/compiler.h>
#include <util/util.h>

#include "gaudi.h"
#include "verbs.h"

int gaudi_query_device_ex(struct ibv_context *context,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw_ver;
	int err;

	err = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (err)
		return err;

	/* The device's programming model version, major.minor.0 */
	fw_ver = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw_ver >> 32) & 0xffff,
		 (unsigned int)(fw_ver >> 16) & 0xffff,
		 (unsigned int)fw_ver & 0xffff);
	return 0;
}

int gaudi_query_port(struct ibv_context *context, uint8_t port,
		     struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

struct ibv_pd *gaudi_alloc_pd(struct ibv_context *context)
{
	struct gaudi_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd;
	struct gaudi_pd *pd;
	int err;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	err = ibv_cmd_alloc_pd(context, &pd->ibvpd, &cmd, sizeof(cmd),
			       &resp.ibv_resp, sizeof(resp));
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	pd->pdn = resp.pdn;
	return &pd->ibvpd;
}

int gaudi_dealloc_pd(struct ibv_pd *ibvpd)
{
	int err;

	err = ibv_cmd_dealloc_pd(ibvpd);
	if (err)
		return err;
	free(to_gaudi_pd(ibvpd));
	return 0;
}

struct ibv_mr *gaudi_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access)
{
	/*
	 * The driver's reply (struct gaudi_ib_reg_mr_resp) would follow the
	 * 12-byte core reply unaligned; gaudidv_query_mr() gives it instead.
	 */
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct gaudi_mr *mr;
	int err;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;

	err = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, &mr->vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	return &mr->vmr.ibv_mr;
}

struct ibv_mr *gaudi_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				   size_t length, uint64_t iova, int fd,
				   int access)
{
	struct gaudi_mr *mr;
	int err;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;

	err = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access,
				    &mr->vmr, NULL);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	return &mr->vmr.ibv_mr;
}

int gaudi_dereg_mr(struct verbs_mr *vmr)
{
	int err;

	err = ibv_cmd_dereg_mr(vmr);
	if (err)
		return err;
	free(container_of(vmr, struct gaudi_mr, vmr));
	return 0;
}

struct ibv_cq *gaudi_create_cq(struct ibv_context *context, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp;
	struct ibv_create_cq cmd;
	struct gaudi_cq *cq;
	int err;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	err = ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->ibvcq,
				&cmd, sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(cq);
		errno = err;
		return NULL;
	}
	return &cq->ibvcq;
}

int gaudi_destroy_cq(struct ibv_cq *ibvcq)
{
	int err;

	err = ibv_cmd_destroy_cq(ibvcq);
	if (err)
		return err;
	free(to_gaudi_cq(ibvcq));
	return 0;
}

int gaudi_poll_cq(struct ibv_cq *ibvcq, int nwc, struct ibv_wc *wc)
{
	return ibv_cmd_poll_cq(ibvcq, nwc, wc);
}

int gaudi_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(ibvcq, solicited_only);
}

/* The ibv_wr_*() operations the NIC executes. */
#define GAUDI_SEND_OPS                                                         \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)

static struct ibv_send_wr *gaudi_wr_next(struct gaudi_qp *qp)
{
	struct ibv_send_wr *wr;

	if (qp->wr_err)
		return NULL;
	if (qp->nwr == qp->sq_wrs) {
		/* More than the send queue holds: the kernel would refuse. */
		qp->wr_err = ENOMEM;
		return NULL;
	}
	wr = &qp->wrs[qp->nwr];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = qp->vqp.qp_ex.wr_id;
	wr->send_flags = qp->vqp.qp_ex.wr_flags;
	wr->sg_list = &qp->sges[qp->nwr * qp->max_sge];
	if (qp->nwr)
		qp->wrs[qp->nwr - 1].next = wr;
	qp->nwr++;
	return wr;
}

/* The request the last ibv_wr_rdma_write*() started. */
static struct ibv_send_wr *gaudi_wr_cur(struct gaudi_qp *qp)
{
	if (qp->wr_err)
		return NULL;
	if (!qp->nwr) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	return &qp->wrs[qp->nwr - 1];
}

static void gaudi_wr_start(struct ibv_qp_ex *qpx)
{
	struct gaudi_qp *qp = qpx_to_gaudi_qp(qpx);

	pthread_spin_lock(&qp->wr_lock);
	qp->nwr = 0;
	qp->wr_err = 0;
}

static int gaudi_wr_complete(struct ibv_qp_ex *qpx)
{
	struct gaudi_qp *qp = qpx_to_gaudi_qp(qpx);
	struct ibv_send_wr *bad;
	int err = qp->wr_err;

	if (!err && qp->nwr)
		err = ibv_cmd_post_send(&qp->vqp.qp, qp->wrs, &bad);
	qp->nwr = 0;
	pthread_spin_unlock(&qp->wr_lock);
	return err;
}

static void gaudi_wr_abort(struct ibv_qp_ex *qpx)
{
	struct gaudi_qp *qp = qpx_to_gaudi_qp(qpx);

	qp->nwr = 0;
	pthread_spin_unlock(&qp->wr_lock);
}

static void gaudi_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr)
{
	struct ibv_send_wr *wr = gaudi_wr_next(qpx_to_gaudi_qp(qpx));

	if (!wr)
		return;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
}

static void gaudi_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				    uint64_t remote_addr, __be32 imm_data)
{
	struct ibv_send_wr *wr = gaudi_wr_next(qpx_to_gaudi_qp(qpx));

	if (!wr)
		return;
	wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
	wr->imm_data = imm_data;
}

static void gaudi_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			     uint64_t addr, uint32_t length)
{
	struct ibv_send_wr *wr = gaudi_wr_cur(qpx_to_gaudi_qp(qpx));

	if (!wr)
		return;
	wr->sg_list->lkey = lkey;
	wr->sg_list->addr = addr;
	wr->sg_list->length = length;
	wr->num_sge = 1;
}

static void gaudi_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				  const struct ibv_sge *sg_list)
{
	struct gaudi_qp *qp = qpx_to_gaudi_qp(qpx);
	struct ibv_send_wr *wr = gaudi_wr_cur(qp);

	if (!wr)
		return;
	/* Up to max_send_sge; none is a zero-length WRITE. */
	if (num_sge > qp->max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = num_sge;
}

static void gaudi_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				     size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	qpx->wr_set_inline_data_list(qpx, 1, &buf);
}

static void gaudi_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					  size_t num_buf,
					  const struct ibv_data_buf *buf_list)
{
	struct gaudi_qp *qp = qpx_to_gaudi_qp(qpx);
	struct ibv_send_wr *wr = gaudi_wr_cur(qp);
	size_t i;

	if (!wr)
		return;
	/*
	 * The kernel copies inline data into the QP's own bounce area when
	 * the request is posted (ibv_wr_complete()), so the buffers are
	 * free once it returns. Up to max_send_sge buffers, as SGEs.
	 */
	if (num_buf > qp->max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	wr->send_flags |= IBV_SEND_INLINE;
	wr->num_sge = num_buf;
	for (i = 0; i < num_buf; i++) {
		wr->sg_list[i].addr = (uintptr_t)buf_list[i].addr;
		wr->sg_list[i].length = buf_list[i].length;
		wr->sg_list[i].lkey = 0;
	}
}

/* ibv_wr_*() operations outside the QP's send_ops_flags. */
static void gaudi_wr_unsupported(struct ibv_qp_ex *qpx)
{
	qpx_to_gaudi_qp(qpx)->wr_err = EOPNOTSUPP;
}

static void gaudi_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_rkey_op(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t remote_addr)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			     uint64_t remote_addr, uint64_t compare,
			     uint64_t swap)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t remote_addr, uint64_t add)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			     uint32_t rkey,
			     const struct ibv_mw_bind_info *bind_info)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr,
			      uint16_t hdr_sz, uint16_t mss)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				 uint32_t remote_qpn, uint32_t remote_qkey)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr, const void *atomic_wr)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
			   uint64_t remote_addr, size_t len, uint8_t type,
			   uint8_t level)
{
	gaudi_wr_unsupported(qpx);
}

static void gaudi_qp_fill_wr_pfns(struct ibv_qp_ex *qpx)
{
	qpx->wr_start = gaudi_wr_start;
	qpx->wr_complete = gaudi_wr_complete;
	qpx->wr_abort = gaudi_wr_abort;
	qpx->wr_rdma_write = gaudi_wr_rdma_write;
	qpx->wr_rdma_write_imm = gaudi_wr_rdma_write_imm;
	qpx->wr_set_sge = gaudi_wr_set_sge;
	qpx->wr_set_sge_list = gaudi_wr_set_sge_list;
	qpx->wr_set_inline_data = gaudi_wr_set_inline_data;
	qpx->wr_set_inline_data_list = gaudi_wr_set_inline_data_list;

	qpx->wr_send = gaudi_wr_unsupported;
	qpx->wr_send_imm = gaudi_wr_send_imm;
	qpx->wr_send_inv = gaudi_wr_rkey_op;
	qpx->wr_local_inv = gaudi_wr_rkey_op;
	qpx->wr_set_xrc_srqn = gaudi_wr_rkey_op;
	qpx->wr_rdma_read = gaudi_wr_rdma_read;
	qpx->wr_atomic_cmp_swp = gaudi_wr_cmp_swp;
	qpx->wr_atomic_fetch_add = gaudi_wr_fetch_add;
	qpx->wr_bind_mw = gaudi_wr_bind_mw;
	qpx->wr_send_tso = gaudi_wr_send_tso;
	qpx->wr_set_ud_addr = gaudi_wr_set_ud_addr;
	qpx->wr_atomic_write = gaudi_wr_atomic_write;
	qpx->wr_flush = gaudi_wr_flush;
}

static int gaudi_check_qp_attr(struct ibv_context *context,
			       const struct ibv_qp_init_attr_ex *attr)
{
	uint64_t supported = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_CREATE_FLAGS |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	uint64_t ops = GAUDI_SEND_OPS;

	/* Model 2.0: the NIC's WQEs carry no immediate. */
	if (to_gaudi_context(context)->model_version >> 16 >= 2)
		ops &= ~IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;

	if (!check_comp_mask(attr->comp_mask, supported)) {
		verbs_debug(verbs_get_ctx(context),
			    "QP attributes 0x%x: PD, send_ops_flags and no create flags only\n",
			    attr->comp_mask);
		return EOPNOTSUPP;
	}
	/* Create flags given as none at all are no request. */
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags) {
		verbs_debug(verbs_get_ctx(context),
			    "QP create flags 0x%x: none supported\n",
			    attr->create_flags);
		return EOPNOTSUPP;
	}
	if (attr->qp_type != IBV_QPT_RC || attr->srq) {
		verbs_debug(verbs_get_ctx(context),
			    "QP type %d%s: RC only, without SRQ\n",
			    attr->qp_type, attr->srq ? " with SRQ" : "");
		return EOPNOTSUPP;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & ~ops)) {
		verbs_debug(verbs_get_ctx(context),
			    "send_ops_flags 0x%" PRIx64 ": RDMA WRITE%s only\n",
			    attr->send_ops_flags,
			    ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM ?
				    " (with immediate)" :
				    "");
		return EOPNOTSUPP;
	}
	return 0;
}

struct ibv_qp *gaudi_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_qp_init_attr_ex kattr;
	struct ibv_create_qp cmd;
	struct gaudi_qp *qp;
	int err;

	err = gaudi_check_qp_attr(context, attr);
	if (err)
		goto out;

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		err = ENOMEM;
		goto out;
	}

	kattr = *attr;
	kattr.comp_mask &= IBV_QP_INIT_ATTR_PD;
	err = ibv_cmd_create_qp_ex(context, &qp->vqp, &kattr, &cmd,
				   sizeof(cmd), &resp, sizeof(resp));
	if (err)
		goto err_free_qp;
	/* What the kernel granted. */
	attr->cap = kattr.cap;

	qp->sq_wrs = attr->cap.max_send_wr;
	qp->max_sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
	qp->wrs = calloc(qp->sq_wrs, sizeof(*qp->wrs));
	qp->sges = calloc((size_t)qp->sq_wrs * qp->max_sge, sizeof(*qp->sges));
	if (!qp->wrs || !qp->sges) {
		err = ENOMEM;
		goto err_destroy_qp;
	}
	err = pthread_spin_init(&qp->wr_lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		goto err_destroy_qp;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		gaudi_qp_fill_wr_pfns(&qp->vqp.qp_ex);
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	return &qp->vqp.qp;

err_destroy_qp:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free_qp:
	free(qp->sges);
	free(qp->wrs);
	free(qp);
out:
	errno = err;
	return NULL;
}

struct ibv_qp *gaudi_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {};
	struct ibv_qp *qp;

	memcpy(&attr_ex, attr, sizeof(*attr));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd;
	qp = gaudi_create_qp_ex(pd->context, &attr_ex);
	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

int gaudi_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		    int attr_mask)
{
	struct ibv_modify_qp cmd = {};

	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

int gaudi_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		   int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

int gaudi_destroy_qp(struct ibv_qp *ibvqp)
{
	struct gaudi_qp *qp = to_gaudi_qp(ibvqp);
	int err;

	err = ibv_cmd_destroy_qp(ibvqp);
	if (err)
		return err;
	pthread_spin_destroy(&qp->wr_lock);
	free(qp->sges);
	free(qp->wrs);
	free(qp);
	return 0;
}

int gaudi_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	return ibv_cmd_post_send(qp, wr, bad_wr);
}

int gaudi_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	int err;

	/*
	 * The NIC has no receive queues: a receive is only the credit of an
	 * incoming RDMA WRITE with immediate, which the kernel keeps and hands
	 * to its completion. A QP without IBV_ACCESS_REMOTE_WRITE never takes
	 * one, so it refuses receives.
	 */
	err = ibv_cmd_post_recv(qp, wr, bad_wr);
	if (err == EOPNOTSUPP)
		verbs_debug(verbs_get_ctx(qp->context),
			    "post_recv: the device has no receive queues; receives are credits of RDMA WRITE with immediate, on QPs with IBV_ACCESS_REMOTE_WRITE only\n");
	return err;
}
