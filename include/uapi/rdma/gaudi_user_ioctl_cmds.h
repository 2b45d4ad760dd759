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
};

enum gaudi_ib_device_methods {
	GAUDI_IB_METHOD_QUERY_PORT = (1U << UVERBS_ID_NS_SHIFT),
};

enum gaudi_ib_query_port_attrs {
	/* const u64, mandatory: port number, 1 to num_ports */
	GAUDI_IB_ATTR_QUERY_PORT_NUM = (1U << UVERBS_ID_NS_SHIFT),
	/* struct gaudi_ib_port_info, out, mandatory */
	GAUDI_IB_ATTR_QUERY_PORT_RESP,
};

#endif /* GAUDI_USER_IOCTL_CMDS_H */
