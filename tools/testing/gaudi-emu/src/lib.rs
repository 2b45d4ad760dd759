// SPDX-License-Identifier: GPL-2.0
//! The emulated Gaudi2 NIC: a vfio-user device model.
//!
//! Documentation/infiniband/gaudi/device-model.rst is the specification;
//! this crate is its executable form.

pub mod chip;
pub mod ctrl;
pub mod device;
pub mod dma;
pub mod engine;
pub mod hotplug;
pub mod irq;
pub mod mem;
pub mod mmu;
pub mod nic;
pub mod pci;
pub mod roce;
pub mod server;
pub mod testkit;
