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
	/* IPv4 address, network byte order */
	__u8 ipv4[4];
	/* enum gaudi_ib_port_flags */
	__u32 flags;
	/* link speed, Mb/s */
	__u32 speed_mbps;
	__u32 reserved1;
};

#endif /* GAUDI_USER_IOCTL_VERBS_H */
