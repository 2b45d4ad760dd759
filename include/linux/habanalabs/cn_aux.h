/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The auxiliary device through which habanalabs gives the NIC of a Gaudi2
 * accelerator to a NIC driver: "habanalabs.cn.<id>", the accelerator's index.
 *
 * Upstream habanalabs does not add this device (Habana posted it in its 2024
 * RFC, not merged); Habana's packaged driver does. This describes that
 * interface with the names of its structures and operations but not their
 * layout (Habana's driver orders, types and extends them differently, so it
 * is not binary compatible with this), reduced to what the NIC drivers here
 * use, plus what they need that it lacks (marked "addition"): what a
 * habanalabs patch adding the device upstream would contain. See
 * Documentation/infiniband/gaudi/design.rst, "Relation to the habanalabs
 * accel driver".
 *
 * The parent sets aux_data and aux_ops before it adds the device and changes
 * neither while the device is bound; every operation may be called from any
 * thread.
 */
#ifndef _LINUX_HABANALABS_CN_AUX_H
#define _LINUX_HABANALABS_CN_AUX_H

#include <linux/auxiliary_bus.h>
#include <linux/if_ether.h>
#include <linux/types.h>

/* The ports of a Gaudi2 NIC. */
#define HBL_CN_MAX_PORTS 24

/* What an auxiliary device of the accelerator is. */
enum hbl_aux_dev_type {
	HBL_AUX_DEV_CN,
	HBL_AUX_DEV_ETH,
	HBL_AUX_DEV_IB,
};

/*
 * An auxiliary device of the accelerator. Its parent fills aux_data and
 * aux_ops before adding it; the driver that binds it may set priv.
 */
struct hbl_aux_dev {
	struct auxiliary_device adev;
	enum hbl_aux_dev_type type;
	void *aux_data;
	void *aux_ops;
	void *priv;
};

/* What the accelerator tells of the NIC (aux_data of a HBL_AUX_DEV_CN). */
struct hbl_cn_aux_data {
	struct pci_dev *pdev;
	struct device *dev;
	/* The accelerator's index. */
	u32 id;
	u32 fw_major_version;
	u32 fw_minor_version;
	/* Bit p: port p is enabled. */
	u64 ports_mask;
	/* Bytes of device memory reserved for the NIC. */
	u64 dram_size;
	/* Seconds a hard reset may take. */
	u32 pending_reset_long_timeout;
	/* The first MSI-X vector of the ports' event queues, one per port. */
	u32 irq_num_port_base;
};

/*
 * The firmware's information on the NIC, reduced to the ports' MAC addresses
 * (Habana's carries more, and its get_cpucp_info copies all of it).
 */
struct hbl_cn_cpucp_info {
	u8 mac_addrs[HBL_CN_MAX_PORTS][ETH_ALEN];
};

/* How a VM's device VAs are translated. */
enum hbl_cn_mmu_mode {
	HBL_CN_MMU_MODE_EXTERNAL,
	HBL_CN_MMU_MODE_NETWORK_TLB,
};

/*
 * A VM: in the external mode, the ASID the NIC's contexts name (Habana's
 * ext_mmu.work_id).
 */
struct hbl_cn_vm_info {
	enum hbl_cn_mmu_mode mmu_mode;
	u32 asid;
};

/*
 * The accelerator's operations for the NIC driver (aux_ops of a
 * HBL_AUX_DEV_CN). Each takes the auxiliary device first. None may be
 * called from atomic context except rreg and wreg.
 */
struct hbl_cn_aux_ops {
	/* Whether the accelerator works (not in reset, not failed). */
	bool (*device_operational)(struct hbl_aux_dev *aux_dev);
	/*
	 * Start a hard reset of the accelerator; device_operational is false
	 * from its return until the reset is done.
	 */
	void (*device_reset)(struct hbl_aux_dev *aux_dev);
	/* A register of the configuration space, at its offset from CFG_BASE. */
	u32 (*rreg)(struct hbl_aux_dev *aux_dev, u32 reg);
	void (*wreg)(struct hbl_aux_dev *aux_dev, u32 reg, u32 val);
	/* Copy the firmware's NIC information. */
	void (*get_cpucp_info)(struct hbl_aux_dev *aux_dev,
			       struct hbl_cn_cpucp_info *info);
	/* A VM of the NIC driver, and its translation. */
	int (*vm_create)(struct hbl_aux_dev *aux_dev, u64 comp_handle, u32 flags,
			 u64 *vm_handle);
	void (*vm_destroy)(struct hbl_aux_dev *aux_dev, u64 vm_handle);
	int (*get_vm_info)(struct hbl_aux_dev *aux_dev, u64 vm_handle,
			   struct hbl_cn_vm_info *vm_info);
	/*
	 * Addition: enter @count pages of @page_size bytes at @dva of the VM,
	 * their bus addresses in @pages, all or none, writable with @writable;
	 * returns once the MMU translates them.
	 */
	int (*vm_dev_mmu_map_pages)(struct hbl_aux_dev *aux_dev, u64 vm_handle,
				    u64 dva, const u64 *pages, u64 count,
				    u64 page_size, bool writable);
	/*
	 * Remove @size bytes at @dva of the VM; returns once the MMU has
	 * forgotten what it cached of them.
	 */
	void (*vm_dev_mmu_unmap)(struct hbl_aux_dev *aux_dev, u64 vm_handle,
				 u64 dva, size_t size);
	/* Addition: whether port @port's link is up. */
	bool (*port_link_up)(struct hbl_aux_dev *aux_dev, u32 port);
};

#endif /* _LINUX_HABANALABS_CN_AUX_H */
