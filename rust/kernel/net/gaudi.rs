// SPDX-License-Identifier: GPL-2.0

//! What the drivers of the Gaudi2 NIC exchange.
//!
//! The NIC of a Habana Labs Gaudi2 accelerator is a block of the chip, not a device of its
//! own. Whoever owns the chip (habanalabs on a host, the driver of the emulated PCI function
//! under test) gives it to the NIC core through an auxiliary device whose registration data is
//! a [`chip::ChipDevice`]: the chip's registers and services behind [`chip::Chip`]. The core
//! gives the RDMA driver an auxiliary device of its own whose registration data is a
//! `cn::CnDevice`: the core behind `cn::Cn`. The formats of the NIC's structures, which
//! they all write or read, are in [`gaudi2`].
//!
//! The drivers are separate modules, and `kernel` is the only crate modules share: the types
//! they exchange live here, as those of Habana's C drivers live in
//! `include/linux/net/intel/`.
//!
//! Documentation: Documentation/infiniband/gaudi/design.rst, "Layering".

pub mod chip;
#[cfg(all(CONFIG_INFINIBAND = "y", CONFIG_INFINIBAND_USER_ACCESS = "y"))]
pub mod cn;
pub mod gaudi2;
pub mod habanalabs;
