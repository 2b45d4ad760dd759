/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * The uverbs ioctl namespace of the Habana Labs Gaudi2 NIC driver
 * (gaudi_ib): objects, methods and attributes. Calls carry driver_id
 * RDMA_DRIVER_GAUDI. See Documentation/infiniband/gaudi/uapi.rst.
 */
#ifndef GAUDI_USER_IOCTL_CMDS_H
#define GAUDI_USER_IOCTL_CMDS_H

#include <linux/types.h>
#include <rdma/ib_user_ioctl_cmds.h>

enum gaudi_ib_objects {
	/* Global methods on the device of the calling context. */
	GAUDI_IB_OBJECT_DEVICE = (1U << UVERBS_ID_NS_SHIFT),
	/*
	 * A QP set: one QP with the same index on each of a set of ports,
	 * each with its own CQ, whose queues user space drives itself.
	 */
	GAUDI_IB_OBJECT_QP_SET,
	/*
	 * A block of the device's memory (HBM), which can be exported as a
	 * dma-buf for peer-to-peer DMA.
	 */
	GAUDI_IB_OBJECT_HBM,
};

enum gaudi_ib_device_methods {
	GAUDI_IB_METHOD_QUERY_PORT = (1U << UVERBS_ID_NS_SHIFT),
	GAUDI_IB_METHOD_QUERY_MR,
	GAUDI_IB_METHOD_QUERY_DEVICE,
};

enum gaudi_ib_query_port_attrs {
	/* const u64, mandatory: port number, 1 to num_ports */
	GAUDI_IB_ATTR_QUERY_PORT_NUM = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_port_info, out, mandatory */
	GAUDI_IB_ATTR_QUERY_PORT_RESP,
};

enum gaudi_ib_query_mr_attrs {
	/* handle of a memory region (UVERBS_OBJECT_MR), mandatory */
	GAUDI_IB_ATTR_QUERY_MR_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_mr_info, out, mandatory */
	GAUDI_IB_ATTR_QUERY_MR_RESP,
};

enum gaudi_ib_query_device_attrs {
	/* struct gaudi_ib_device_info, out, mandatory */
	GAUDI_IB_ATTR_QUERY_DEVICE_RESP = (1U << UVERBS_ID_NS_SHIFT),
};

enum gaudi_ib_qp_set_methods {
	GAUDI_IB_METHOD_QP_SET_CREATE = (1U << UVERBS_ID_NS_SHIFT),
	GAUDI_IB_METHOD_QP_SET_DESTROY,
	GAUDI_IB_METHOD_QP_SET_MODIFY,
	GAUDI_IB_METHOD_QP_SET_QUERY,
};

enum gaudi_ib_qp_set_create_attrs {
	/* the new QP set's handle, mandatory */
	GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_qp_set_create, in, mandatory */
	GAUDI_IB_ATTR_QP_SET_CREATE_REQ,
	/* struct gaudi_ib_qp_set_create_resp, out, mandatory */
	GAUDI_IB_ATTR_QP_SET_CREATE_RESP,
	/*
	 * array of struct gaudi_ib_qp_set_port, out, mandatory: one per port
	 * of the set, lowest port first; room for fewer is ENOSPC
	 */
	GAUDI_IB_ATTR_QP_SET_CREATE_PORTS,
	/*
	 * handle of the protection domain (UVERBS_OBJECT_PD) whose address
	 * space the set's QPs work in; mandatory
	 */
	GAUDI_IB_ATTR_QP_SET_CREATE_PD,
};

enum gaudi_ib_qp_set_destroy_attrs {
	/* handle of the QP set, mandatory */
	GAUDI_IB_ATTR_QP_SET_DESTROY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

enum gaudi_ib_qp_set_modify_attrs {
	/* handle of the QP set, mandatory */
	GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* const u64, mandatory: the port (1 to num_ports) of the QP to modify */
	GAUDI_IB_ATTR_QP_SET_MODIFY_PORT,
	/* struct gaudi_ib_qp_set_modify, in, mandatory */
	GAUDI_IB_ATTR_QP_SET_MODIFY_REQ,
};

enum gaudi_ib_qp_set_query_attrs {
	/* handle of the QP set, mandatory */
	GAUDI_IB_ATTR_QP_SET_QUERY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* const u64, mandatory: the port (1 to num_ports) of the QP to query */
	GAUDI_IB_ATTR_QP_SET_QUERY_PORT,
	/* struct gaudi_ib_qp_set_qp_info, out, mandatory */
	GAUDI_IB_ATTR_QP_SET_QUERY_RESP,
};

enum gaudi_ib_hbm_methods {
	GAUDI_IB_METHOD_HBM_ALLOC = (1U << UVERBS_ID_NS_SHIFT),
	GAUDI_IB_METHOD_HBM_DESTROY,
	GAUDI_IB_METHOD_HBM_EXPORT,
};

enum gaudi_ib_hbm_alloc_attrs {
	/* the new block's handle, mandatory */
	GAUDI_IB_ATTR_HBM_ALLOC_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_hbm_alloc, in, mandatory */
	GAUDI_IB_ATTR_HBM_ALLOC_REQ,
	/* struct gaudi_ib_hbm_alloc_resp, out, mandatory */
	GAUDI_IB_ATTR_HBM_ALLOC_RESP,
};

enum gaudi_ib_hbm_destroy_attrs {
	/* handle of the block, mandatory */
	GAUDI_IB_ATTR_HBM_DESTROY_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
};

enum gaudi_ib_hbm_export_attrs {
	/* handle of the block, mandatory */
	GAUDI_IB_ATTR_HBM_EXPORT_HANDLE = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_hbm_export, in, mandatory */
	GAUDI_IB_ATTR_HBM_EXPORT_REQ,
	/* struct gaudi_ib_hbm_export_resp, out, mandatory */
	GAUDI_IB_ATTR_HBM_EXPORT_RESP,
};

#endif /* GAUDI_USER_IOCTL_CMDS_H */
