// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The rdma-core provider of the Habana Labs Gaudi2 NIC (kernel driver
 * gaudi_ib): device matching and the user context.
 */

#include <stdlib.h>

#include <util/util.h>

#include "gaudi.h"
#include "verbs.h"

#define PCI_VENDOR_ID_HABANALABS 0x1da3

static const struct verbs_match_ent gaudi_table[] = {
	VERBS_DRIVER_ID(RDMA_DRIVER_GAUDI),
	VERBS_PCI_MATCH(PCI_VENDOR_ID_HABANALABS, 0x1020, NULL),
	{}
};

static void gaudi_free_context(struct ibv_context *ibvctx);

static const struct verbs_context_ops gaudi_ctx_ops = {
	.alloc_pd = gaudi_alloc_pd,
	.create_cq = gaudi_create_cq,
	.create_qp = gaudi_create_qp,
	.create_qp_ex = gaudi_create_qp_ex,
	.dealloc_pd = gaudi_dealloc_pd,
	.dereg_mr = gaudi_dereg_mr,
	.destroy_cq = gaudi_destroy_cq,
	.destroy_qp = gaudi_destroy_qp,
	.modify_qp = gaudi_modify_qp,
	.poll_cq = gaudi_poll_cq,
	.post_recv = gaudi_post_recv,
	.post_send = gaudi_post_send,
	.query_device_ex = gaudi_query_device_ex,
	.query_port = gaudi_query_port,
	.query_qp = gaudi_query_qp,
	.reg_dmabuf_mr = gaudi_reg_dmabuf_mr,
	.reg_mr = gaudi_reg_mr,
	.req_notify_cq = gaudi_req_notify_cq,
	.free_context = gaudi_free_context,
};

static struct verbs_context *gaudi_alloc_context(struct ibv_device *vdev,
						 int cmd_fd,
						 void *private_data)
{
	struct gaudi_alloc_ucontext_resp resp = {};
	struct ibv_get_context cmd;
	struct gaudi_context *ctx;

	ctx = verbs_init_and_alloc_context(vdev, cmd_fd, ctx, ibvctx,
					   RDMA_DRIVER_GAUDI);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->ibvctx, &cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp)))
		goto err_free;

	if (resp.abi_version != GAUDI_IB_UVERBS_ABI_VERSION) {
		verbs_err(&ctx->ibvctx,
			  "gaudi_ib speaks ABI %u, this provider %u\n",
			  resp.abi_version, GAUDI_IB_UVERBS_ABI_VERSION);
		errno = EPROTONOSUPPORT;
		goto err_free;
	}
	ctx->num_ports = resp.num_ports;
	/* Model 2.0, the NIC's own contexts, has no WRITE with immediate. */
	if (gaudi_query_model(&ctx->ibvctx.context, &ctx->model_version))
		goto err_free;

	verbs_set_ops(&ctx->ibvctx, &gaudi_ctx_ops);
	return &ctx->ibvctx;

err_free:
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
	return NULL;
}

static void gaudi_free_context(struct ibv_context *ibvctx)
{
	struct gaudi_context *ctx = to_gaudi_context(ibvctx);

	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
}

static struct verbs_device *gaudi_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct gaudi_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void gaudi_uninit_device(struct verbs_device *verbs_device)
{
	free(container_of(verbs_device, struct gaudi_device, vdev));
}

static const struct verbs_device_ops gaudi_dev_ops = {
	.name = "gaudi",
	.match_min_abi_version = GAUDI_IB_UVERBS_ABI_VERSION,
	.match_max_abi_version = GAUDI_IB_UVERBS_ABI_VERSION,
	.match_table = gaudi_table,
	.alloc_device = gaudi_device_alloc,
	.uninit_device = gaudi_uninit_device,
	.alloc_context = gaudi_alloc_context,
};

bool is_gaudi_dev(struct ibv_device *device)
{
	struct verbs_device *verbs_device = verbs_get_device(device);

	return verbs_device->ops == &gaudi_dev_ops;
}

PROVIDER_DRIVER(gaudi, gaudi_dev_ops);
