// SPDX-License-Identifier: GPL-2.0

//! RDMA driver for the NIC of Habana Labs Gaudi2 accelerators.
//!
//! The NIC is a block of the accelerator, driven by the NIC core (`gaudi_cn`), which gives this
//! driver the NIC through the auxiliary device `ib` ([`kernel::net::gaudi::cn`]). All ports of
//! a device are exposed through one InfiniBand device, each port attached to its network
//! device (the Ethernet driver's, which the core names as it comes and goes); see
//! Documentation/infiniband/gaudi/ for the design and the device model.

use kernel::{
    auxiliary,
    device::{
        Bound,
        Core,
        Device, //
    },
    devres::Devres,
    net::{
        ethernet::NetDev,
        gaudi::cn::{
            Cn,
            CnDevice,
            CnRdmaEvents, //
        },
    },
    prelude::*,
    rdma::{
        self,
        Event, //
    },
    sync::{
        Arc,
        SetOnce, //
    },
    types::CovariantForLt,
};

mod chip;
mod dv;
mod hbm;
mod ib;
mod ids;
mod mmu;
mod mr;
mod nic;
mod queue;
mod rc;

use ib::GaudiIbDriver;
use nic::Nic;

/// Where the NIC core sends what the ports' event queues say of the driver's QPs.
struct RdmaEvents {
    nic: Arc<Nic>,
    /// The InfiniBand device, once it exists.
    ib: SetOnce<rdma::DeviceHandle<GaudiIbDriver>>,
}

impl RdmaEvents {
    /// Run `f` on the InfiniBand device if it exists and is registered.
    fn with_ib<R>(&self, f: impl FnOnce(&rdma::Device<GaudiIbDriver>) -> R) -> Option<R> {
        SetOnce::as_ref(&self.ib)?.with_device(f)
    }
}

impl CnRdmaEvents for RdmaEvents {
    fn completions(&self, port: usize) {
        self.with_ib(|ib| rc::port_completions(ib, &self.nic, port));
    }

    fn qp_error(&self, port: usize, qpn: u32, syndrome: u32) -> bool {
        self.with_ib(|ib| rc::qp_error(ib, port, qpn, syndrome))
            .unwrap_or(false)
    }

    fn recheck_errors(&self, port: usize) {
        self.with_ib(|ib| rc::recheck_errors(ib, &self.nic, port));
    }

    fn netdev_changed(&self, port: usize, netdev: Option<&NetDev>) {
        let Some(ib) = SetOnce::as_ref(&self.ib) else {
            return;
        };
        // The RDMA core derives the port's GIDs and state from the device (and deletes the
        // GIDs of the previous one when it is unregistered). ENODEV: the InfiniBand device is
        // unregistered, which dropped every attachment.
        match ib.set_netdev(port as u32 + 1, netdev) {
            Ok(()) | Err(ENODEV) => {}
            Err(e) => dev_err!(
                self.nic.dev,
                "port {}: network device not {}: {:?}\n",
                port + 1,
                if netdev.is_some() {
                    "attached"
                } else {
                    "detached"
                },
                e
            ),
        }
    }

    /// The device stopped: remove the InfiniBand device, which disassociates the user
    /// contexts. The driver stays bound; rebinding the core resets the device and this driver
    /// registers a new InfiniBand device.
    fn fatal(&self) {
        if let Some(ib) = SetOnce::as_ref(&self.ib) {
            let _ = ib.dispatch_event(Event::DeviceFatal);
            ib.unregister();
        }
    }
}

/// Stops the NIC core's events reaching the driver when dropped; returns once none is being
/// handled, and the core has taken back what the driver left on the NIC.
struct Receiving(Arc<dyn Cn>);

impl Drop for Receiving {
    fn drop(&mut self) {
        self.0.set_rdma_events(None);
    }
}

/// A Gaudi2 NIC the driver is bound to.
struct GaudiIb {
    // Dropped first: the InfiniBand device goes before the events stop reaching it.
    _ib: Devres<rdma::Registration<GaudiIbDriver>>,
    _events: Receiving,
    /// The device's memory, revoked from importers at unbind.
    hbm: Arc<hbm::Hbm>,
}

impl GaudiIb {
    /// The device's limits.
    fn caps(dev: &Device<Bound>, nic: &Nic) -> Result<ib::Caps> {
        let caps = ib::Caps::new(nic.ports, nic.chip()?.model());
        dev_info!(
            dev,
            "{} ports, {} QPs and {} CQs per port\n",
            caps.ports,
            caps.max_qps,
            caps.max_cqs
        );
        Ok(caps)
    }
}

kernel::auxiliary_device_table!(
    AUX_TABLE,
    <GaudiIbDriver as auxiliary::Driver>::IdInfo,
    [(auxiliary::DeviceId::new(c"gaudi_cn", c"ib"), ())]
);

impl auxiliary::Driver for GaudiIbDriver {
    type IdInfo = ();
    type Data<'bound> = GaudiIb;

    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &AUX_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let cn = adev
            .registration_data::<CovariantForLt!(CnDevice)>()?
            .cn()
            .clone();
        // The function: it logs, and does the DMA.
        let dev = adev.parent();
        if cn.is_fatal() {
            dev_err!(
                dev,
                "the device stopped before probe: rebind the NIC core\n"
            );
            return Err(EIO);
        }
        let nic = Arc::new(Nic::new(adev.as_ref(), cn.clone())?, GFP_KERNEL)?;
        let caps = GaudiIb::caps(dev, &nic)?;
        let mem = nic.devmem();
        let hbm = hbm::Hbm::new(dev, mem.start, mem.size)?;
        // The RC QPs' send WQ arrays and CQ 1 start over: no QP of an earlier binding is left.
        for port in 0..caps.ports as usize {
            match cn.rc_enable(port, rc::wq_array_va(port), rc::LOG_SLOT_LINES) {
                // Without device memory there are no QP contexts: no RC QP can be created.
                Ok(()) | Err(ENODEV) => {}
                Err(e) => return Err(e),
            }
        }

        let events = Arc::new(
            RdmaEvents {
                nic: nic.clone(),
                ib: SetOnce::new(),
            },
            GFP_KERNEL,
        )?;
        // The ports are attached to their network devices once the device is registered
        // (the core names them when the receiver is set, and as the Ethernet driver comes and
        // goes): the RDMA core derives each port's GIDs from its device's addresses, and its
        // state from the device's.
        // The node GUID (and system image GUID) is the EUI-64 of the first port's MAC address.
        let node_guid = ib::eui64(nic.chip()?.mac(0)?);
        let ib = rdma::Registration::new_auxiliary(
            adev,
            &<LocalModule as kernel::ModuleMetadata>::THIS_MODULE,
            rdma::Options {
                ports: caps.ports,
                comp_vectors: 1,
                node_type: rdma::NodeType::Ca,
                netdevs: &[],
                node_guid,
            },
            // The part is the Gaudi2 (PCI device 1da3:1020).
            ib::IbDev::new(nic.clone(), caps, 0x1020, node_guid, hbm.clone()),
        )
        .inspect_err(|e| dev_err!(dev, "cannot register the InfiniBand device: {:?}\n", e))?;
        {
            let reg = ib.access(adev.as_ref())?;
            let ibdev = reg.device();
            events.ib.populate(ibdev.handle());
            dev_info!(
                dev,
                "registered {} with {} ports\n",
                ibdev.name(),
                ibdev.port_count()
            );
        }
        // From here on the events of the driver's QPs and the ports' network devices reach
        // it, until `receiving` is dropped.
        cn.set_rdma_events(Some(events.clone()));
        let receiving = Receiving(cn.clone());
        if nic.is_fatal() {
            dev_err!(dev, "device fatal error during probe\n");
            return Err(EIO);
        }
        dev_info!(dev, "probe complete\n");

        Ok(GaudiIb {
            _ib: ib,
            _events: receiving,
            hbm,
        })
    }

    fn unbind<'bound>(_adev: &'bound auxiliary::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Importers of exported device memory cannot map it any more.
        this.hbm.revoke();
    }
}

kernel::module_auxiliary_driver! {
    type: GaudiIbDriver,
    name: "gaudi_ib",
    description: "Habana Labs Gaudi2 NIC RDMA driver",
    license: "GPL v2",
    // Device memory is exported as dma-bufs.
    imports_ns: ["DMA_BUF"],
    params: {
        max_mrs: u64 {
            default: 65536,
            description: "Memory regions a user context may hold",
        },
        max_mr_ptes: u64 {
            default: 16777216,
            description: "Device page-table entries of the regions of a user context",
        },
        max_qp_sets: u64 {
            default: 256,
            description: "QP sets a user context may hold",
        },
        max_queue_mib: u64 {
            default: 256,
            description: "MiB of QP set queues a user context may hold",
        },
        first_pd_id: u64 {
            default: 1,
            description: "Identity of the first protection domain (tests start it near the end)",
        },
    },
}
