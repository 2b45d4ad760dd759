// SPDX-License-Identifier: GPL-2.0

#include <linux/dma-buf.h>
#include <linux/pci-p2pdma.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#if IS_BUILTIN(CONFIG_INFINIBAND) && IS_BUILTIN(CONFIG_INFINIBAND_USER_ACCESS)

__rust_helper struct uverbs_attr_bundle *
rust_helper_rdma_udata_to_uverbs_attr_bundle(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata);
}

__rust_helper struct ib_udata *
rust_helper_rdma_uverbs_attr_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

__rust_helper bool
rust_helper_uverbs_attr_is_valid(const struct uverbs_attr_bundle *attrs, unsigned int idx)
{
	return uverbs_attr_is_valid(attrs, idx);
}

__rust_helper int
rust_helper_uverbs_attr_get_len(const struct uverbs_attr_bundle *attrs, u16 idx)
{
	return uverbs_attr_get_len(attrs, idx);
}

__rust_helper int rust_helper__uverbs_copy_from_or_zero(void *to,
							const struct uverbs_attr_bundle *attrs,
							size_t idx, size_t size)
{
	return _uverbs_copy_from_or_zero(to, attrs, idx, size);
}

__rust_helper struct ib_ucontext *
rust_helper_ib_uverbs_get_ucontext(const struct uverbs_attr_bundle *attrs)
{
	return ib_uverbs_get_ucontext(attrs);
}

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper u32 rust_helper_uapi_key_attr(u32 id)
{
	return uapi_key_attr(id);
}

__rust_helper u32 rust_helper_uapi_bkey_attr(u32 attr_key)
{
	return uapi_bkey_attr(attr_key);
}

__rust_helper struct ib_uobject *
rust_helper_uverbs_attr_get_uobject(const struct uverbs_attr_bundle *attrs, u16 idx)
{
	return uverbs_attr_get_uobject(attrs, idx);
}

__rust_helper void rust_helper___rdma_umem_block_iter_start(struct ib_block_iter *biter,
							   struct ib_umem *umem,
							   unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

__rust_helper bool rust_helper___rdma_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

__rust_helper dma_addr_t rust_helper_rdma_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

__rust_helper size_t rust_helper_ib_umem_num_dma_blocks(struct ib_umem *umem, unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

__rust_helper int rust_helper_ib_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

__rust_helper pgprot_t rust_helper_rdma_pgprot_noncached(pgprot_t prot)
{
	return pgprot_noncached(prot);
}

#endif /* CONFIG_INFINIBAND */

#ifdef CONFIG_DMA_SHARED_BUFFER

__rust_helper void rust_helper_get_dma_buf(struct dma_buf *dmabuf)
{
	get_dma_buf(dmabuf);
}

__rust_helper int rust_helper_dma_mapping_error(struct device *dev, dma_addr_t dma_addr)
{
	return dma_mapping_error(dev, dma_addr);
}

#endif /* CONFIG_DMA_SHARED_BUFFER */

__rust_helper int rust_helper_pci_p2pdma_distance(struct pci_dev *provider, struct device *client,
						  bool verbose)
{
	return pci_p2pdma_distance(provider, client, verbose);
}
