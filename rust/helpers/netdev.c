// SPDX-License-Identifier: GPL-2.0

#include <linux/bottom_half.h>
#include <linux/etherdevice.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>

__rust_helper void *rust_helper_netdev_priv(const struct net_device *dev)
{
	return netdev_priv(dev);
}

__rust_helper void rust_helper_netif_napi_add(struct net_device *dev, struct napi_struct *napi,
					      int (*poll)(struct napi_struct *, int))
{
	netif_napi_add(dev, napi, poll);
}

__rust_helper void rust_helper_netif_napi_del(struct napi_struct *napi)
{
	netif_napi_del(napi);
}

__rust_helper bool rust_helper_napi_schedule(struct napi_struct *napi)
{
	return napi_schedule(napi);
}

__rust_helper void rust_helper_netif_start_queue(struct net_device *dev)
{
	netif_start_queue(dev);
}

__rust_helper void rust_helper_netif_stop_queue(struct net_device *dev)
{
	netif_stop_queue(dev);
}

__rust_helper void rust_helper_netif_wake_queue(struct net_device *dev)
{
	netif_wake_queue(dev);
}

__rust_helper bool rust_helper_netif_queue_stopped(const struct net_device *dev)
{
	return netif_queue_stopped(dev);
}

__rust_helper bool rust_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

__rust_helper bool rust_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

__rust_helper void rust_helper_eth_hw_addr_set(struct net_device *dev, const u8 *addr)
{
	eth_hw_addr_set(dev, addr);
}

__rust_helper bool rust_helper_is_valid_ether_addr(const u8 *addr)
{
	return is_valid_ether_addr(addr);
}

__rust_helper void rust_helper_dev_kfree_skb_any(struct sk_buff *skb)
{
	dev_kfree_skb_any(skb);
}

__rust_helper void rust_helper_dev_consume_skb_any(struct sk_buff *skb)
{
	dev_consume_skb_any(skb);
}

/* Set the protocol of a received Ethernet frame, and pull its header. */
__rust_helper void rust_helper_skb_set_eth_protocol(struct sk_buff *skb, struct net_device *dev)
{
	skb->protocol = eth_type_trans(skb, dev);
}

__rust_helper gro_result_t rust_helper_napi_gro_receive(struct napi_struct *napi,
							struct sk_buff *skb)
{
	return napi_gro_receive(napi, skb);
}

__rust_helper void rust_helper_local_bh_disable(void)
{
	local_bh_disable();
}

__rust_helper void rust_helper_local_bh_enable(void)
{
	local_bh_enable();
}

__rust_helper void rust_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}
