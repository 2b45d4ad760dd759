// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Direct verbs of the Habana Labs Gaudi2 NIC (gaudidv.h): calls into the
 * driver's uverbs ioctl namespace (kernel-headers/rdma/gaudi_user_ioctl_*.h).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <infiniband/cmd_ioctl.h>
#include <rdma/gaudi_user_ioctl_cmds.h>
#include <rdma/gaudi_user_ioctl_verbs.h>
#include <util/util.h>

#include "gaudi.h"
#include "gaudidv.h"

#define GAUDI_DB_PAGE_SIZE 4096

struct gaudi_qp_set {
	struct gaudidv_qp_set pub;
	uint32_t handle;
};

struct gaudi_hbm {
	struct gaudidv_hbm pub;
	uint32_t handle;
};

bool gaudidv_is_supported(struct ibv_device *device)
{
	return is_gaudi_dev(device);
}

/* The caller's structure reaches up to and including field f. */
#define gaudi_attr_has(attr, f, inlen)                                         \
	((inlen) >= offsetof(typeof(*(attr)), f) + sizeof((attr)->f))

static bool gaudi_check_ctx(struct ibv_context *context)
{
	if (!is_gaudi_dev(context->device)) {
		errno = EOPNOTSUPP;
		return false;
	}
	return true;
}

int gaudi_query_model(struct ibv_context *context, uint32_t *model)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_DEVICE,
			       GAUDI_IB_METHOD_QUERY_DEVICE, 1);
	struct gaudi_ib_device_info info = {};
	int err;

	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &info);
	err = execute_ioctl(context, cmd);
	if (err) {
		errno = err;
		return err;
	}
	*model = info.model_version;
	return 0;
}

int gaudidv_query_device(struct ibv_context *context,
			 struct gaudidv_device_attr *attr, uint32_t inlen)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_DEVICE,
			       GAUDI_IB_METHOD_QUERY_DEVICE, 1);
	struct gaudi_ib_device_info info = {};
	int err;

	if (!gaudi_check_ctx(context))
		return EOPNOTSUPP;
	if (!gaudi_attr_has(attr, devmem_free, inlen))
		return EINVAL;

	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &info);
	err = execute_ioctl(context, cmd);
	if (err)
		return err;

	memset(attr, 0, inlen);
	attr->model_version = info.model_version;
	attr->num_ports = to_gaudi_context(context)->num_ports;
	attr->devmem_size = info.devmem_size;
	attr->devmem_free = info.devmem_free;
	return 0;
}

int gaudidv_query_port(struct ibv_context *context, uint32_t port_num,
		       struct gaudidv_port_attr *attr, uint32_t inlen)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_DEVICE,
			       GAUDI_IB_METHOD_QUERY_PORT, 2);
	struct gaudi_ib_port_info info = {};
	int err;

	if (!gaudi_check_ctx(context))
		return EOPNOTSUPP;
	if (!gaudi_attr_has(attr, speed_mbps, inlen))
		return EINVAL;

	fill_attr_const_in(cmd, GAUDI_IB_ATTR_QUERY_PORT_NUM, port_num);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QUERY_PORT_RESP, &info);
	err = execute_ioctl(context, cmd);
	if (err)
		return err;

	memset(attr, 0, inlen);
	memcpy(attr->mac, info.mac, sizeof(attr->mac));
	if (info.flags & GAUDI_IB_PORT_LINK_UP)
		attr->flags |= GAUDIDV_PORT_LINK_UP;
	attr->speed_mbps = info.speed_mbps;
	return 0;
}

int gaudidv_query_mr(struct ibv_mr *mr, struct gaudidv_mr_attr *attr,
		     uint32_t inlen)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_DEVICE,
			       GAUDI_IB_METHOD_QUERY_MR, 2);
	struct gaudi_ib_mr_info info = {};
	int err;

	if (!gaudi_check_ctx(mr->context))
		return EOPNOTSUPP;
	if (!gaudi_attr_has(attr, page_shift, inlen))
		return EINVAL;

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_QUERY_MR_HANDLE, mr->handle);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QUERY_MR_RESP, &info);
	err = execute_ioctl(mr->context, cmd);
	if (err)
		return err;

	memset(attr, 0, inlen);
	attr->mmu_va = info.mmu_va;
	attr->page_shift = info.page_shift;
	return 0;
}

int gaudidv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, const struct gaudidv_qp_keys *keys)
{
	struct ib_uverbs_ex_modify_qp_resp resp;
	struct gaudi_modify_qp cmd = {};

	if (!gaudi_check_ctx(qp->context))
		return EOPNOTSUPP;
	if (keys->comp_mask || keys->reserved ||
	    (keys->mask & ~(GAUDIDV_QP_REMOTE_RKEY | GAUDIDV_QP_LOCAL_RKEY)))
		return EINVAL;

	if (keys->mask & GAUDIDV_QP_REMOTE_RKEY) {
		cmd.flags |= GAUDI_IB_MODIFY_QP_REMOTE_RKEY;
		cmd.remote_rkey = keys->remote_rkey;
	}
	if (keys->mask & GAUDIDV_QP_LOCAL_RKEY) {
		cmd.flags |= GAUDI_IB_MODIFY_QP_LOCAL_RKEY;
		cmd.local_rkey = keys->local_rkey;
	}
	return ibv_cmd_modify_qp_ex(qp, attr, attr_mask, &cmd.ibv_cmd,
				    sizeof(cmd), &resp, sizeof(resp));
}

static void gaudi_unmap_qp_set(struct gaudidv_qp_set *set)
{
	struct gaudidv_qp_set_port *p;
	uint32_t i;

	for (i = 0; i < set->num_ports; i++) {
		p = &set->port[i];
		if (p->sq && p->sq != MAP_FAILED)
			munmap(p->sq, set->sq_bytes);
		if (p->cq && p->cq != MAP_FAILED)
			munmap(p->cq, set->cq_bytes);
		if (p->db && p->db != MAP_FAILED)
			munmap(p->db, GAUDI_DB_PAGE_SIZE);
	}
}

static int gaudi_destroy_qp_set_handle(struct ibv_context *context,
				       uint32_t handle)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_QP_SET,
			       GAUDI_IB_METHOD_QP_SET_DESTROY, 1);

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_QP_SET_DESTROY_HANDLE, handle);
	return execute_ioctl(context, cmd);
}

static void *gaudi_map(struct ibv_context *context, size_t len,
		       uint64_t offset)
{
	return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    context->cmd_fd, offset);
}

struct gaudidv_qp_set *
gaudidv_create_qp_set(struct ibv_context *context,
		      const struct gaudidv_qp_set_init_attr *attr)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_QP_SET,
			       GAUDI_IB_METHOD_QP_SET_CREATE, 5);
	struct gaudi_ib_qp_set_create req = {};
	struct gaudi_ib_qp_set_create_resp resp = {};
	struct gaudi_ib_qp_set_port *kports;
	struct ib_uverbs_attr *handle;
	struct gaudi_qp_set *set;
	uint32_t i, n;
	int err;

	if (!gaudi_check_ctx(context))
		return NULL;
	if (attr->comp_mask || (attr->flags & ~GAUDIDV_QP_SET_INIT_INDEX)) {
		errno = EINVAL;
		return NULL;
	}
	n = __builtin_popcountll(attr->ports);
	if (!n) {
		errno = EINVAL;
		return NULL;
	}

	set = calloc(1, sizeof(*set));
	kports = calloc(n, sizeof(*kports));
	if (!set || !kports)
		goto err_free;
	set->pub.port = calloc(n, sizeof(*set->pub.port));
	if (!set->pub.port)
		goto err_free;

	req.ports = attr->ports;
	req.log_sq_entries = attr->log_sq_entries;
	req.log_cq_entries = attr->log_cq_entries;
	if (attr->flags & GAUDIDV_QP_SET_INIT_INDEX) {
		req.flags |= GAUDI_IB_QP_SET_CREATE_INDEX;
		req.index = attr->index;
	}
	handle = fill_attr_out_obj(cmd, GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE);
	fill_attr_in_ptr(cmd, GAUDI_IB_ATTR_QP_SET_CREATE_REQ, &req);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QP_SET_CREATE_RESP, &resp);
	fill_attr_out(cmd, GAUDI_IB_ATTR_QP_SET_CREATE_PORTS, kports,
		      n * sizeof(*kports));
	if (attr->pd)
		fill_attr_in_obj(cmd, GAUDI_IB_ATTR_QP_SET_CREATE_PD,
				 attr->pd->handle);
	err = execute_ioctl(context, cmd);
	if (err) {
		errno = err;
		goto err_free;
	}
	set->handle = read_attr_obj(GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE, handle);

	set->pub.context = context;
	set->pub.index = resp.index;
	set->pub.ports = resp.ports;
	set->pub.num_ports = n;
	set->pub.sq_bytes = resp.sq_bytes;
	set->pub.cq_bytes = resp.cq_bytes;
	for (i = 0; i < n; i++) {
		struct gaudidv_qp_set_port *p = &set->pub.port[i];

		p->port_num = kports[i].port_num;
		p->cqn = kports[i].cqn;
		p->sq_va = kports[i].sq_va;
		p->cq_va = kports[i].cq_va;
		p->sq = gaudi_map(context, resp.sq_bytes, kports[i].sq_offset);
		p->cq = gaudi_map(context, resp.cq_bytes, kports[i].cq_offset);
		p->db = gaudi_map(context, GAUDI_DB_PAGE_SIZE,
				  kports[i].db_offset);
		if (p->sq == MAP_FAILED || p->cq == MAP_FAILED ||
		    p->db == MAP_FAILED) {
			err = errno;
			gaudi_unmap_qp_set(&set->pub);
			gaudi_destroy_qp_set_handle(context, set->handle);
			errno = err;
			goto err_free;
		}
	}
	free(kports);
	return &set->pub;

err_free:
	if (set)
		free(set->pub.port);
	free(set);
	free(kports);
	return NULL;
}

int gaudidv_destroy_qp_set(struct gaudidv_qp_set *pub)
{
	struct gaudi_qp_set *set = container_of(pub, struct gaudi_qp_set, pub);
	int err;

	err = gaudi_destroy_qp_set_handle(pub->context, set->handle);
	if (err)
		return err;
	gaudi_unmap_qp_set(pub);
	free(pub->port);
	free(set);
	return 0;
}

int gaudidv_modify_qp_set(struct gaudidv_qp_set *pub, uint32_t port_num,
			  const struct gaudidv_qp_set_attr *attr)
{
	struct gaudi_qp_set *set = container_of(pub, struct gaudi_qp_set, pub);
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_QP_SET,
			       GAUDI_IB_METHOD_QP_SET_MODIFY, 3);
	struct gaudi_ib_qp_set_modify req = {};

	if (attr->comp_mask)
		return EINVAL;

	req.state = attr->state;
	req.dest_qpn = attr->dest_qpn;
	req.rq_psn = attr->rq_psn;
	req.sq_psn = attr->sq_psn;
	req.remote_rkey = attr->remote_rkey;
	req.local_rkey = attr->local_rkey;
	req.path_mtu = attr->path_mtu;
	req.timeout = attr->timeout;
	req.retry_cnt = attr->retry_cnt;
	memcpy(req.dmac, attr->dmac, sizeof(req.dmac));
	req.udp_sport = attr->udp_sport;
	memcpy(req.dest_ipv4, attr->dest_ipv4, sizeof(req.dest_ipv4));

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE, set->handle);
	fill_attr_const_in(cmd, GAUDI_IB_ATTR_QP_SET_MODIFY_PORT, port_num);
	fill_attr_in_ptr(cmd, GAUDI_IB_ATTR_QP_SET_MODIFY_REQ, &req);
	return execute_ioctl(pub->context, cmd);
}

int gaudidv_query_qp_set(struct gaudidv_qp_set *pub, uint32_t port_num,
			 struct gaudidv_qp_set_qp_attr *attr, uint32_t inlen)
{
	struct gaudi_qp_set *set = container_of(pub, struct gaudi_qp_set, pub);
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_QP_SET,
			       GAUDI_IB_METHOD_QP_SET_QUERY, 3);
	struct gaudi_ib_qp_set_qp_info info = {};
	int err;

	if (!gaudi_attr_has(attr, rq_psn, inlen))
		return EINVAL;

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_QP_SET_QUERY_HANDLE, set->handle);
	fill_attr_const_in(cmd, GAUDI_IB_ATTR_QP_SET_QUERY_PORT, port_num);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_QP_SET_QUERY_RESP, &info);
	err = execute_ioctl(pub->context, cmd);
	if (err)
		return err;

	memset(attr, 0, inlen);
	attr->state = info.state;
	attr->sq_psn = info.sq_psn;
	attr->rq_psn = info.rq_psn;
	return 0;
}

struct gaudidv_hbm *gaudidv_alloc_hbm(struct ibv_context *context,
				      uint64_t length)
{
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_HBM,
			       GAUDI_IB_METHOD_HBM_ALLOC, 3);
	struct gaudi_ib_hbm_alloc req = { .length = length };
	struct gaudi_ib_hbm_alloc_resp resp = {};
	struct ib_uverbs_attr *handle;
	struct gaudi_hbm *hbm;
	int err;

	if (!gaudi_check_ctx(context))
		return NULL;
	hbm = calloc(1, sizeof(*hbm));
	if (!hbm)
		return NULL;

	handle = fill_attr_out_obj(cmd, GAUDI_IB_ATTR_HBM_ALLOC_HANDLE);
	fill_attr_in_ptr(cmd, GAUDI_IB_ATTR_HBM_ALLOC_REQ, &req);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_HBM_ALLOC_RESP, &resp);
	err = execute_ioctl(context, cmd);
	if (err) {
		free(hbm);
		errno = err;
		return NULL;
	}
	hbm->handle = read_attr_obj(GAUDI_IB_ATTR_HBM_ALLOC_HANDLE, handle);
	hbm->pub.context = context;
	hbm->pub.offset = resp.offset;
	hbm->pub.length = resp.length;
	return &hbm->pub;
}

int gaudidv_free_hbm(struct gaudidv_hbm *pub)
{
	struct gaudi_hbm *hbm = container_of(pub, struct gaudi_hbm, pub);
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_HBM,
			       GAUDI_IB_METHOD_HBM_DESTROY, 1);
	int err;

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_HBM_DESTROY_HANDLE, hbm->handle);
	err = execute_ioctl(pub->context, cmd);
	if (err)
		return err;
	free(hbm);
	return 0;
}

int gaudidv_export_hbm(struct gaudidv_hbm *pub, uint32_t flags)
{
	struct gaudi_hbm *hbm = container_of(pub, struct gaudi_hbm, pub);
	DECLARE_COMMAND_BUFFER(cmd, GAUDI_IB_OBJECT_HBM,
			       GAUDI_IB_METHOD_HBM_EXPORT, 3);
	struct gaudi_ib_hbm_export req = {};
	struct gaudi_ib_hbm_export_resp resp = {};
	int err;

	if (flags & ~GAUDIDV_HBM_EXPORT_CLOEXEC) {
		errno = EINVAL;
		return -1;
	}
	if (flags & GAUDIDV_HBM_EXPORT_CLOEXEC)
		req.flags |= GAUDI_IB_HBM_EXPORT_CLOEXEC;

	fill_attr_in_obj(cmd, GAUDI_IB_ATTR_HBM_EXPORT_HANDLE, hbm->handle);
	fill_attr_in_ptr(cmd, GAUDI_IB_ATTR_HBM_EXPORT_REQ, &req);
	fill_attr_out_ptr(cmd, GAUDI_IB_ATTR_HBM_EXPORT_RESP, &resp);
	err = execute_ioctl(pub->context, cmd);
	if (err) {
		errno = err;
		return -1;
	}
	return resp.fd;
}
