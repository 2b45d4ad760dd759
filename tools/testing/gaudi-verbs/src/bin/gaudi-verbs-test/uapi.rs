// SPDX-License-Identifier: GPL-2.0

//! `uapi-bad-attrs`: every method of the driver namespace with missing,
//! short, oversized, misaligned and out-of-range attributes.

use super::*;

/// An attribute id no method has.
const UNKNOWN_ATTR: u16 = driver_ns_id(9);
/// A method id the device object does not have.
const UNKNOWN_METHOD: u16 = driver_ns_id(9);

/// `attr` without `UVERBS_ATTR_F_MANDATORY`.
fn optional(mut attr: Attr) -> Attr {
    attr.flags = 0;
    attr
}

/// `attr` with length `len` (its data pointer or inline value kept).
fn sized(mut attr: Attr, len: usize) -> Attr {
    attr.len = len as u16;
    attr
}

struct Cases<'a> {
    ctx: &'a Context,
    count: usize,
}

impl Cases<'_> {
    /// `attrs` to `object`/`method` fail with `errno` (0: succeed).
    /// Returns the attributes as the kernel left them, on success.
    fn expect<const N: usize>(
        &mut self,
        what: &str,
        object: u16,
        method: u16,
        attrs: [Attr; N],
        errno: i32,
    ) -> Option<[Attr; N]> {
        let r = self.ctx.dv_raw(object, method, attrs);
        let got = match &r {
            Ok(_) => 0,
            Err(e) => gaudi_verbs::errno(e),
        };
        check(
            got == errno,
            format!("{what}: errno {got}, expected {errno}"),
        );
        self.count += 1;
        r.ok()
    }
}

pub(crate) fn uapi_bad_attrs(_args: &[String]) {
    let ctx = open_ctx();
    let ports = ctx.resp.num_ports;
    let pd = ctx
        .alloc_pd()
        .unwrap_or_else(|e| fail(format!("alloc_pd: {e}")));
    let mut mem = Mapping::new(2 * 4096);
    mem.bytes().fill(1);
    let mr = ctx
        .reg_mr(
            &pd,
            mem.addr(),
            4096,
            mem.addr(),
            IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let ro = ctx
        .reg_mr(
            &pd,
            mem.addr() + 4096,
            4096,
            mem.addr() + 4096,
            IB_UVERBS_ACCESS_LOCAL_WRITE,
        )
        .unwrap_or_else(|e| fail(format!("reg_mr: {e}")));
    let mut emu = emu();
    let (faults, audit) = (stat(&mut emu, "mmu_faults"), stat(&mut emu, "dma_audit"));
    let mut c = Cases {
        ctx: &ctx,
        count: 0,
    };
    let (dev, set_obj) = (GAUDI_IB_OBJECT_DEVICE, GAUDI_IB_OBJECT_QP_SET);

    // QUERY_PORT.
    let mut info = gaudi_ib_port_info::default();
    let port = |p: u64| Attr::value(GAUDI_IB_ATTR_QUERY_PORT_NUM, p);
    let resp = |i: &mut gaudi_ib_port_info| Attr::output(GAUDI_IB_ATTR_QUERY_PORT_RESP, i);
    c.expect(
        "QUERY_PORT without the port",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [resp(&mut info)],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_PORT without the reply",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [port(1)],
        libc::EINVAL,
    );
    for p in [0, u64::from(ports) + 1, u64::MAX] {
        c.expect(
            &format!("QUERY_PORT of port {p}"),
            dev,
            GAUDI_IB_METHOD_QUERY_PORT,
            [port(p), resp(&mut info)],
            libc::EINVAL,
        );
    }
    c.expect(
        "QUERY_PORT with a 4-byte port",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [sized(port(1), 4), resp(&mut info)],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_PORT with a short reply",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [port(1), sized(resp(&mut info), 8)],
        libc::EINVAL,
    );
    let mut big = [0u8; 64];
    c.expect(
        "QUERY_PORT with an oversized reply",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [
            port(1),
            Attr::buf(GAUDI_IB_ATTR_QUERY_PORT_RESP, big.as_mut_ptr(), 40),
        ],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_PORT with an unknown mandatory attribute",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [port(1), resp(&mut info), Attr::value(UNKNOWN_ATTR, 0)],
        libc::EPROTONOSUPPORT,
    );
    c.expect(
        "QUERY_PORT with an unknown optional attribute",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [
            port(1),
            resp(&mut info),
            optional(Attr::value(UNKNOWN_ATTR, 0)),
        ],
        0,
    );
    let mut r = resp(&mut info);
    r.set_reserved(1);
    c.expect(
        "QUERY_PORT with a reserved field set",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [port(1), r],
        libc::EINVAL,
    );
    c.expect(
        "an unknown method",
        dev,
        UNKNOWN_METHOD,
        [port(1)],
        libc::EPROTONOSUPPORT,
    );
    // A reply at an odd address is written as at an aligned one.
    let aligned = ctx
        .query_port(2)
        .unwrap_or_else(|e| fail(format!("query port: {e}")));
    let n = std::mem::size_of::<gaudi_ib_port_info>();
    c.expect(
        "QUERY_PORT with a reply at an odd address",
        dev,
        GAUDI_IB_METHOD_QUERY_PORT,
        [
            port(2),
            Attr::buf(GAUDI_IB_ATTR_QUERY_PORT_RESP, big[1..].as_mut_ptr(), n),
        ],
        0,
    );
    // `big[1..]` holds the `n` bytes the kernel wrote.
    let odd: gaudi_ib_port_info = read_from(&big[1..]).expect("a reply's bytes");
    check(
        odd.mac == aligned.mac && odd.ipv4 == aligned.ipv4 && odd.port_num == 2,
        "the reply at an odd address is the aligned one".into(),
    );

    // QUERY_MR.
    let mut mi = gaudi_ib_mr_info::default();
    let q = GAUDI_IB_METHOD_QUERY_MR;
    c.expect(
        "QUERY_MR without a handle",
        dev,
        q,
        [Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut mi)],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_MR of a handle that does not exist",
        dev,
        q,
        [
            Attr::handle(GAUDI_IB_ATTR_QUERY_MR_HANDLE, 9999),
            Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut mi),
        ],
        libc::ENOENT,
    );
    c.expect(
        "QUERY_MR of a PD handle",
        dev,
        q,
        [
            Attr::handle(GAUDI_IB_ATTR_QUERY_MR_HANDLE, pd.handle),
            Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut mi),
        ],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_MR with a handle attribute of length 8",
        dev,
        q,
        [
            sized(Attr::handle(GAUDI_IB_ATTR_QUERY_MR_HANDLE, mr.handle), 8),
            Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut mi),
        ],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_MR with a short reply",
        dev,
        q,
        [
            Attr::handle(GAUDI_IB_ATTR_QUERY_MR_HANDLE, mr.handle),
            sized(Attr::output(GAUDI_IB_ATTR_QUERY_MR_RESP, &mut mi), 32),
        ],
        libc::EINVAL,
    );

    // QP_SET_CREATE.
    let good = gaudi_ib_qp_set_create {
        ports: 0b11,
        log_sq_entries: 4,
        log_cq_entries: 4,
        ..Default::default()
    };
    let mut cr = gaudi_ib_qp_set_create_resp::default();
    let mut sp = [gaudi_ib_qp_set_port::default(); 2];
    let sp_len = std::mem::size_of_val(&sp);
    let create = |c: &mut Cases<'_>, what: &str, req: &gaudi_ib_qp_set_create, errno: i32| {
        let mut cr = gaudi_ib_qp_set_create_resp::default();
        let mut sp = [gaudi_ib_qp_set_port::default(); 2];
        c.expect(
            what,
            set_obj,
            GAUDI_IB_METHOD_QP_SET_CREATE,
            [
                Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE, 0),
                Attr::input(GAUDI_IB_ATTR_QP_SET_CREATE_REQ, req),
                Attr::output(GAUDI_IB_ATTR_QP_SET_CREATE_RESP, &mut cr),
                Attr::buf(
                    GAUDI_IB_ATTR_QP_SET_CREATE_PORTS,
                    sp.as_mut_ptr().cast(),
                    std::mem::size_of_val(&sp),
                ),
                // A good PD (mandatory): only `req` is wrong.
                Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_PD, pd.handle),
            ],
            errno,
        );
    };
    let max_log_sq = (ctx.resp.max_sqe as u64).ilog2();
    let max_log_cq = (ctx.resp.max_cqe as u64).ilog2();
    let bad: Vec<(&str, gaudi_ib_qp_set_create)> = vec![
        (
            "a comp_mask",
            gaudi_ib_qp_set_create {
                comp_mask: 1,
                ..good
            },
        ),
        (
            "a reserved field",
            gaudi_ib_qp_set_create {
                reserved: 1,
                ..good
            },
        ),
        (
            "an unknown flag",
            gaudi_ib_qp_set_create { flags: 2, ..good },
        ),
        ("no port", gaudi_ib_qp_set_create { ports: 0, ..good }),
        (
            "a port the device lacks",
            gaudi_ib_qp_set_create {
                ports: 1 << ports,
                ..good
            },
        ),
        (
            "a port beyond 64",
            gaudi_ib_qp_set_create {
                ports: u64::MAX,
                ..good
            },
        ),
        (
            "a send queue of 1 WQE",
            gaudi_ib_qp_set_create {
                log_sq_entries: 0,
                ..good
            },
        ),
        (
            "a send queue beyond max_sqe",
            gaudi_ib_qp_set_create {
                log_sq_entries: max_log_sq + 1,
                ..good
            },
        ),
        (
            "a CQ of 1 CQE",
            gaudi_ib_qp_set_create {
                log_cq_entries: 0,
                ..good
            },
        ),
        (
            "a CQ beyond max_cqe",
            gaudi_ib_qp_set_create {
                log_cq_entries: max_log_cq + 1,
                ..good
            },
        ),
        (
            "index 0",
            gaudi_ib_qp_set_create {
                flags: GAUDI_IB_QP_SET_CREATE_INDEX,
                index: 0,
                ..good
            },
        ),
        (
            "index 1",
            gaudi_ib_qp_set_create {
                flags: GAUDI_IB_QP_SET_CREATE_INDEX,
                index: 1,
                ..good
            },
        ),
        (
            "index max_qps",
            gaudi_ib_qp_set_create {
                flags: GAUDI_IB_QP_SET_CREATE_INDEX,
                index: ctx.resp.max_qps,
                ..good
            },
        ),
    ];
    for (what, req) in &bad {
        create(
            &mut c,
            &format!("QP_SET_CREATE with {what}"),
            req,
            libc::EINVAL,
        );
    }
    let attrs = |req: *const gaudi_ib_qp_set_create,
                 rl: usize,
                 cr: &mut gaudi_ib_qp_set_create_resp,
                 sp: &mut [gaudi_ib_qp_set_port; 2],
                 pl: usize| {
        [
            Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE, 0),
            Attr::buf(GAUDI_IB_ATTR_QP_SET_CREATE_REQ, req.cast(), rl),
            Attr::output(GAUDI_IB_ATTR_QP_SET_CREATE_RESP, cr),
            Attr::buf(
                GAUDI_IB_ATTR_QP_SET_CREATE_PORTS,
                sp.as_mut_ptr().cast(),
                pl,
            ),
            Attr::handle(GAUDI_IB_ATTR_QP_SET_CREATE_PD, pd.handle),
        ]
    };
    let req_len = std::mem::size_of::<gaudi_ib_qp_set_create>();
    c.expect(
        "QP_SET_CREATE with a short request",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        attrs(&good, 16, &mut cr, &mut sp, sp_len),
        libc::EINVAL,
    );
    let mut long = [0u8; 48];
    long[..req_len].copy_from_slice(bytes_of(&good));
    c.expect(
        "QP_SET_CREATE with an oversized request",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        attrs(long.as_ptr().cast(), 40, &mut cr, &mut sp, sp_len),
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_CREATE with room for one port of two",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        attrs(&good, req_len, &mut cr, &mut sp, sp_len / 2),
        libc::ENOSPC,
    );
    c.expect(
        "QP_SET_CREATE with less room than one port",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        attrs(&good, req_len, &mut cr, &mut sp, 8),
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_CREATE without the ports array",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        {
            let a = attrs(&good, req_len, &mut cr, &mut sp, sp_len);
            [a[0], a[1], a[2], a[4]]
        },
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_CREATE without a PD (a set works in its PD's address space)",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_CREATE,
        {
            let a = attrs(&good, req_len, &mut cr, &mut sp, sp_len);
            [a[0], a[1], a[2], a[3]]
        },
        libc::EINVAL,
    );
    // A request at an odd address works.
    let mut odd = [0u8; 40];
    odd[1..1 + req_len].copy_from_slice(bytes_of(&good));
    let a = attrs(odd[1..].as_ptr().cast(), req_len, &mut cr, &mut sp, sp_len);
    let odd_handle = c
        .expect(
            "QP_SET_CREATE with a request at an odd address",
            set_obj,
            GAUDI_IB_METHOD_QP_SET_CREATE,
            a,
            0,
        )
        .map_or(0, |a| a[0].data() as u32);
    check(
        cr.ports == 0b11 && sp[0].port_num == 1 && sp[1].port_num == 2,
        format!(
            "the set from the odd request: index {} on ports 1 and 2",
            cr.index
        ),
    );
    // The refused creations left no QP on the device. A set's QP holds the
    // send WQ slot of its index on its port, mapped in its PD's ASID, from
    // creation on (`qp-set-same-index`); a creation takes the first index
    // free on its ports, so one refused but left behind would hold an index
    // below this set's: no slot below it is mapped on ports 1 and 2, and
    // this set's own are.
    let k = cr.index;
    let slot = |p: usize, i: u32| sp[p].sq_va - u64::from(k - i) * dv::WQ_SLOT;
    let mut mapped = |p: usize, i: u32| !dv::asids_mapping(&mut emu, slot(p, i)).is_empty();
    let own = mapped(0, k) && mapped(1, k);
    let left: Vec<(u32, u32)> = (2..k)
        .flat_map(|i| [(1, i), (2, i)])
        .filter(|&(port, i)| mapped(port as usize - 1, i))
        .collect();
    check(
        own && left.is_empty(),
        format!(
            "the refused creations left no QP on the device: no send WQ slot of an index below {k} mapped on ports 1 and 2 (mapped, as (port, index): {left:?}), index {k}'s mapped: {own}"
        ),
    );
    let set = ctx
        .create_qp_set(0b11, None, 4, 4)
        .unwrap_or_else(|e| fail(format!("create QP set: {e}")));

    // QP_SET_MODIFY.
    let m_ok = gaudi_ib_qp_set_modify {
        state: u32::from(QPS_INIT),
        ..Default::default()
    };
    let modify = |c: &mut Cases<'_>,
                  what: &str,
                  handle: u32,
                  port: u64,
                  m: &gaudi_ib_qp_set_modify,
                  errno: i32| {
        c.expect(
            what,
            set_obj,
            GAUDI_IB_METHOD_QP_SET_MODIFY,
            [
                Attr::handle(GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE, handle),
                Attr::value(GAUDI_IB_ATTR_QP_SET_MODIFY_PORT, port),
                Attr::input(GAUDI_IB_ATTR_QP_SET_MODIFY_REQ, m),
            ],
            errno,
        );
    };
    let h = set.handle;
    modify(
        &mut c,
        "QP_SET_MODIFY of a port not in the set",
        h,
        3,
        &m_ok,
        libc::EINVAL,
    );
    modify(&mut c, "QP_SET_MODIFY of port 0", h, 0, &m_ok, libc::EINVAL);
    modify(
        &mut c,
        "QP_SET_MODIFY of a port beyond the device",
        h,
        u64::from(ports) + 1,
        &m_ok,
        libc::EINVAL,
    );
    modify(
        &mut c,
        "QP_SET_MODIFY of a handle that does not exist",
        9999,
        1,
        &m_ok,
        libc::ENOENT,
    );
    modify(
        &mut c,
        "QP_SET_MODIFY of an MR handle",
        mr.handle,
        1,
        &m_ok,
        libc::EINVAL,
    );
    for (what, m) in [
        (
            "a comp_mask",
            gaudi_ib_qp_set_modify {
                comp_mask: 1,
                ..m_ok
            },
        ),
        (
            "reserved0",
            gaudi_ib_qp_set_modify {
                reserved0: 1,
                ..m_ok
            },
        ),
        (
            "reserved1",
            gaudi_ib_qp_set_modify {
                reserved1: 1,
                ..m_ok
            },
        ),
        ("state SQD", gaudi_ib_qp_set_modify { state: 4, ..m_ok }),
        ("state 7", gaudi_ib_qp_set_modify { state: 7, ..m_ok }),
        (
            "RESET to RTS",
            gaudi_ib_qp_set_modify {
                state: u32::from(QPS_RTS),
                ..m_ok
            },
        ),
    ] {
        modify(
            &mut c,
            &format!("QP_SET_MODIFY with {what}"),
            h,
            1,
            &m,
            libc::EINVAL,
        );
    }
    modify(&mut c, "QP_SET_MODIFY to INIT", h, 1, &m_ok, 0);
    let rtr = gaudi_ib_qp_set_modify {
        state: u32::from(QPS_RTR),
        dest_qpn: 5,
        path_mtu: MTU_4096,
        dmac: [2, 0, 0, 0, 0, 9],
        dest_ipv4: [10, 0, 0, 9],
        local_rkey: mr.rkey,
        ..Default::default()
    };
    for (what, m) in [
        ("path MTU 0", gaudi_ib_qp_set_modify { path_mtu: 0, ..rtr }),
        ("path MTU 6", gaudi_ib_qp_set_modify { path_mtu: 6, ..rtr }),
        (
            "a 25-bit destination QP",
            gaudi_ib_qp_set_modify {
                dest_qpn: 1 << 24,
                ..rtr
            },
        ),
        (
            "a 25-bit receive PSN",
            gaudi_ib_qp_set_modify {
                rq_psn: 1 << 24,
                ..rtr
            },
        ),
        (
            "a multicast MAC",
            gaudi_ib_qp_set_modify {
                dmac: [1, 0, 0x5e, 0, 0, 1],
                ..rtr
            },
        ),
        (
            "a zero MAC",
            gaudi_ib_qp_set_modify {
                dmac: [0; 6],
                ..rtr
            },
        ),
        (
            "no IPv4 address",
            gaudi_ib_qp_set_modify {
                dest_ipv4: [0; 4],
                ..rtr
            },
        ),
        (
            "an unknown local rkey",
            gaudi_ib_qp_set_modify {
                local_rkey: 0x7777,
                ..rtr
            },
        ),
        (
            "the local rkey of a region without remote write",
            gaudi_ib_qp_set_modify {
                local_rkey: ro.rkey,
                ..rtr
            },
        ),
    ] {
        modify(
            &mut c,
            &format!("QP_SET_MODIFY to RTR with {what}"),
            h,
            1,
            &m,
            libc::EINVAL,
        );
    }
    // A QP set's QP sends from its port's IPv4 address.
    let own = c
        .ctx
        .query_port(1)
        .unwrap_or_else(|e| fail(format!("query port 1: {e}")));
    gaudi_verbs::roce_address(1, gaudi_verbs::port_ipv4(&own), None)
        .unwrap_or_else(|e| fail(format!("port 1 address: {e}")));
    modify(&mut c, "QP_SET_MODIFY to RTR", h, 1, &rtr, 0);
    let rts = gaudi_ib_qp_set_modify {
        state: u32::from(QPS_RTS),
        sq_psn: 1,
        timeout: 14,
        retry_cnt: 7,
        ..Default::default()
    };
    for (what, m) in [
        ("timeout 32", gaudi_ib_qp_set_modify { timeout: 32, ..rts }),
        (
            "retry count 8",
            gaudi_ib_qp_set_modify {
                retry_cnt: 8,
                ..rts
            },
        ),
        (
            "a 25-bit send PSN",
            gaudi_ib_qp_set_modify {
                sq_psn: 1 << 24,
                ..rts
            },
        ),
    ] {
        modify(
            &mut c,
            &format!("QP_SET_MODIFY to RTS with {what}"),
            h,
            1,
            &m,
            libc::EINVAL,
        );
    }
    modify(&mut c, "QP_SET_MODIFY to RTS", h, 1, &rts, 0);
    c.expect(
        "QP_SET_MODIFY with a short request",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_MODIFY,
        [
            Attr::handle(GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE, h),
            Attr::value(GAUDI_IB_ATTR_QP_SET_MODIFY_PORT, 1),
            Attr::buf(
                GAUDI_IB_ATTR_QP_SET_MODIFY_REQ,
                (&rts as *const gaudi_ib_qp_set_modify).cast(),
                40,
            ),
        ],
        libc::EINVAL,
    );

    // QP_SET_QUERY.
    let mut qi = gaudi_ib_qp_set_qp_info::default();
    let query = |h: u32, p: u64, qi: &mut gaudi_ib_qp_set_qp_info| {
        [
            Attr::handle(GAUDI_IB_ATTR_QP_SET_QUERY_HANDLE, h),
            Attr::value(GAUDI_IB_ATTR_QP_SET_QUERY_PORT, p),
            Attr::output(GAUDI_IB_ATTR_QP_SET_QUERY_RESP, qi),
        ]
    };
    c.expect(
        "QP_SET_QUERY of a port not in the set",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_QUERY,
        query(h, 3, &mut qi),
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_QUERY of a PD handle",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_QUERY,
        query(pd.handle, 1, &mut qi),
        libc::EINVAL,
    );
    let mut a = query(h, 1, &mut qi);
    a[2].len = 8;
    c.expect(
        "QP_SET_QUERY with a short reply",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_QUERY,
        a,
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_QUERY",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_QUERY,
        query(h, 1, &mut qi),
        0,
    );
    check(
        qi.state == u32::from(QPS_RTS),
        format!("the QP reads back in RTS ({})", qi.state),
    );

    // QP_SET_DESTROY.
    let destroy = |h: u32| [Attr::handle(GAUDI_IB_ATTR_QP_SET_DESTROY_HANDLE, h)];
    c.expect(
        "QP_SET_DESTROY of a handle that does not exist",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_DESTROY,
        destroy(9999),
        libc::ENOENT,
    );
    c.expect(
        "QP_SET_DESTROY of an MR handle",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_DESTROY,
        destroy(mr.handle),
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_DESTROY without a handle",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_DESTROY,
        [],
        libc::EINVAL,
    );
    c.expect(
        "QP_SET_DESTROY",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_DESTROY,
        destroy(odd_handle),
        0,
    );
    c.expect(
        "QP_SET_DESTROY of a destroyed set",
        set_obj,
        GAUDI_IB_METHOD_QP_SET_DESTROY,
        destroy(odd_handle),
        libc::ENOENT,
    );
    ctx.destroy_qp_set(set)
        .unwrap_or_else(|e| fail(format!("destroy QP set: {e}")));
    hbm_cases(&mut c, mr.handle);
    check(
        stat(&mut emu, "mmu_faults") == faults && stat(&mut emu, "dma_audit") == audit,
        "no translation fault, DMA audit unchanged".into(),
    );
    println!("# {} calls checked", c.count);
    teardown(&ctx, [], [mr, ro]);
}

/// The methods of device memory: ALLOC, EXPORT and DESTROY. `mr` is the
/// handle of a memory region (an object of another type).
fn hbm_cases(c: &mut Cases<'_>, mr: u32) {
    // QUERY_DEVICE.
    let mut di = gaudi_ib_device_info::default();
    c.expect(
        "QUERY_DEVICE without the reply",
        GAUDI_IB_OBJECT_DEVICE,
        GAUDI_IB_METHOD_QUERY_DEVICE,
        [],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_DEVICE with a short reply",
        GAUDI_IB_OBJECT_DEVICE,
        GAUDI_IB_METHOD_QUERY_DEVICE,
        [sized(
            Attr::output(GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &mut di),
            16,
        )],
        libc::EINVAL,
    );
    c.expect(
        "QUERY_DEVICE with an unknown mandatory attribute",
        GAUDI_IB_OBJECT_DEVICE,
        GAUDI_IB_METHOD_QUERY_DEVICE,
        [
            Attr::output(GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &mut di),
            Attr::value(UNKNOWN_ATTR, 0),
        ],
        libc::EPROTONOSUPPORT,
    );
    c.expect(
        "QUERY_DEVICE",
        GAUDI_IB_OBJECT_DEVICE,
        GAUDI_IB_METHOD_QUERY_DEVICE,
        [Attr::output(GAUDI_IB_ATTR_QUERY_DEVICE_RESP, &mut di)],
        0,
    );
    check(
        di.devmem_size != 0 && di.devmem_free == di.devmem_size,
        format!(
            "device memory: {} bytes, {} free",
            di.devmem_size, di.devmem_free
        ),
    );
    let obj = GAUDI_IB_OBJECT_HBM;
    let good = gaudi_ib_hbm_alloc {
        length: 4096,
        ..Default::default()
    };
    let mut ar = gaudi_ib_hbm_alloc_resp::default();
    let alloc = |req: *const gaudi_ib_hbm_alloc, len: usize, ar: &mut gaudi_ib_hbm_alloc_resp| {
        [
            Attr::handle(GAUDI_IB_ATTR_HBM_ALLOC_HANDLE, 0),
            Attr::buf(GAUDI_IB_ATTR_HBM_ALLOC_REQ, req.cast(), len),
            Attr::output(GAUDI_IB_ATTR_HBM_ALLOC_RESP, ar),
        ]
    };
    let req_len = std::mem::size_of::<gaudi_ib_hbm_alloc>();
    c.expect(
        "HBM_ALLOC without the request",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        {
            let a = alloc(&good, req_len, &mut ar);
            [a[0], a[2]]
        },
        libc::EINVAL,
    );
    c.expect(
        "HBM_ALLOC without the reply",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        {
            let a = alloc(&good, req_len, &mut ar);
            [a[0], a[1]]
        },
        libc::EINVAL,
    );
    c.expect(
        "HBM_ALLOC with a short request",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        alloc(&good, 8, &mut ar),
        libc::EINVAL,
    );
    let mut long = [0u8; 32];
    long[..req_len].copy_from_slice(bytes_of(&good));
    c.expect(
        "HBM_ALLOC with an oversized request",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        alloc(long.as_ptr().cast(), 24, &mut ar),
        libc::EINVAL,
    );
    c.expect(
        "HBM_ALLOC with a short reply",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        {
            let mut a = alloc(&good, req_len, &mut ar);
            a[2] = sized(a[2], 8);
            a
        },
        libc::EINVAL,
    );
    let bad = [
        ("length 0", gaudi_ib_hbm_alloc { length: 0, ..good }),
        (
            "length 4097",
            gaudi_ib_hbm_alloc {
                length: 4097,
                ..good
            },
        ),
        (
            "length 1 TiB",
            gaudi_ib_hbm_alloc {
                length: 1 << 40,
                ..good
            },
        ),
        (
            "comp_mask 1",
            gaudi_ib_hbm_alloc {
                comp_mask: 1,
                ..good
            },
        ),
        (
            "reserved 1",
            gaudi_ib_hbm_alloc {
                reserved: 1,
                ..good
            },
        ),
    ];
    for (what, req) in &bad {
        c.expect(
            &format!("HBM_ALLOC with {what}"),
            obj,
            GAUDI_IB_METHOD_HBM_ALLOC,
            alloc(req, req_len, &mut ar),
            libc::EINVAL,
        );
    }
    c.expect(
        "HBM_ALLOC with an unknown mandatory attribute",
        obj,
        GAUDI_IB_METHOD_HBM_ALLOC,
        {
            let a = alloc(&good, req_len, &mut ar);
            [a[0], a[1], a[2], Attr::value(UNKNOWN_ATTR, 0)]
        },
        libc::EPROTONOSUPPORT,
    );
    let mut odd = [0u8; 24];
    odd[1..1 + req_len].copy_from_slice(bytes_of(&good));
    let h = c
        .expect(
            "HBM_ALLOC with a request at an odd address",
            obj,
            GAUDI_IB_METHOD_HBM_ALLOC,
            alloc(odd[1..].as_ptr().cast(), req_len, &mut ar),
            0,
        )
        .map_or(0, |a| a[0].data() as u32);
    check(
        ar.length == 4096 && ar.offset % 4096 == 0,
        format!("a block of 4096 bytes at {:#x}", ar.offset),
    );

    // HBM_EXPORT.
    let ok = gaudi_ib_hbm_export::default();
    let mut er = gaudi_ib_hbm_export_resp::default();
    let export = |h: u32, req: &gaudi_ib_hbm_export, er: &mut gaudi_ib_hbm_export_resp| {
        [
            Attr::handle(GAUDI_IB_ATTR_HBM_EXPORT_HANDLE, h),
            Attr::input(GAUDI_IB_ATTR_HBM_EXPORT_REQ, req),
            Attr::output(GAUDI_IB_ATTR_HBM_EXPORT_RESP, er),
        ]
    };
    let cases = [
        ("of a handle that does not exist", 9999, ok, libc::ENOENT),
        ("of an MR handle", mr, ok, libc::EINVAL),
        (
            "with flags 2",
            h,
            gaudi_ib_hbm_export { flags: 2, ..ok },
            libc::EINVAL,
        ),
        (
            "with comp_mask 1",
            h,
            gaudi_ib_hbm_export { comp_mask: 1, ..ok },
            libc::EINVAL,
        ),
    ];
    for (what, handle, req, errno) in cases {
        c.expect(
            &format!("HBM_EXPORT {what}"),
            obj,
            GAUDI_IB_METHOD_HBM_EXPORT,
            export(handle, &req, &mut er),
            errno,
        );
    }
    c.expect(
        "HBM_EXPORT without a handle",
        obj,
        GAUDI_IB_METHOD_HBM_EXPORT,
        {
            let a = export(h, &ok, &mut er);
            [a[1], a[2]]
        },
        libc::EINVAL,
    );
    c.expect(
        "HBM_EXPORT with a short request",
        obj,
        GAUDI_IB_METHOD_HBM_EXPORT,
        {
            let mut a = export(h, &ok, &mut er);
            a[1] = sized(a[1], 4);
            a
        },
        libc::EINVAL,
    );
    c.expect(
        "HBM_EXPORT with a short reply",
        obj,
        GAUDI_IB_METHOD_HBM_EXPORT,
        {
            let mut a = export(h, &ok, &mut er);
            a[2] = sized(a[2], 4);
            a
        },
        libc::EINVAL,
    );
    // SAFETY: F_GETFD only asks whether a descriptor is open.
    let open_fds = || {
        (0..256)
            .filter(|fd| unsafe { libc::fcntl(*fd, libc::F_GETFD) } >= 0)
            .count()
    };
    let before = open_fds();
    c.expect(
        "HBM_EXPORT",
        obj,
        GAUDI_IB_METHOD_HBM_EXPORT,
        export(h, &ok, &mut er),
        0,
    );
    check(
        open_fds() == before + 1,
        format!(
            "one new descriptor ({}) from the export, none from the refusals",
            er.fd
        ),
    );
    // SAFETY: closing the descriptor the export returned.
    unsafe { libc::close(er.fd as i32) };

    // HBM_DESTROY.
    let destroy = |h: u32| [Attr::handle(GAUDI_IB_ATTR_HBM_DESTROY_HANDLE, h)];
    let cases = [
        (
            "of a handle that does not exist",
            destroy(9999),
            libc::ENOENT,
        ),
        ("of an MR handle", destroy(mr), libc::EINVAL),
        ("of the block", destroy(h), 0),
        ("of a destroyed block", destroy(h), libc::ENOENT),
    ];
    for (what, attrs, errno) in cases {
        c.expect(
            &format!("HBM_DESTROY {what}"),
            obj,
            GAUDI_IB_METHOD_HBM_DESTROY,
            attrs,
            errno,
        );
    }
    c.expect(
        "HBM_DESTROY without a handle",
        obj,
        GAUDI_IB_METHOD_HBM_DESTROY,
        [],
        libc::EINVAL,
    );
}
