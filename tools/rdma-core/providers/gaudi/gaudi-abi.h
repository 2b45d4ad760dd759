/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The commands of the standard verbs with the driver data of gaudi_ib
 * (kernel-headers/rdma/gaudi-abi.h).
 */

#ifndef __GAUDI_ABI_H__
#define __GAUDI_ABI_H__

#include <infiniband/kern-abi.h>
#include <kernel-abi/gaudi-abi.h>
#include <rdma/gaudi-abi.h>

DECLARE_DRV_CMD(gaudi_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT, empty,
		gaudi_ib_alloc_ucontext_resp);
DECLARE_DRV_CMD(gaudi_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD, empty,
		gaudi_ib_alloc_pd_resp);
DECLARE_DRV_CMD(gaudi_modify_qp, IB_USER_VERBS_EX_CMD_MODIFY_QP,
		gaudi_ib_modify_qp, empty);

#endif /* __GAUDI_ABI_H__ */
