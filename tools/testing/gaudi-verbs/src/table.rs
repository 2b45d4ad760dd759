// SPDX-License-Identifier: GPL-2.0

//! The uverbs methods, structures and write() commands of the uAPI headers, as the build
//! script (`build.rs`, which documents how) derived them: the core's objects and methods and
//! the driver's namespace. The fuzzer (`gaudi-verbs-test fuzz-uverbs`) draws its calls from
//! this table, so that a method added to a header is fuzzed without editing it.

/// An object type.
#[derive(Debug)]
pub struct Object {
    pub name: &'static str,
    pub id: u16,
    /// Of the driver's namespace.
    pub driver: bool,
}

/// What an attribute carries, as its name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The handle of the object the method creates (the kernel writes it back).
    New,
    /// The file descriptor the method creates (the kernel writes it back).
    NewFd,
    /// The handle of an existing object, of the object type given if known.
    Handle(Option<u16>),
    /// A file descriptor.
    Fd,
    /// A reply the kernel writes.
    Out,
    /// A value or a structure the kernel reads.
    In,
}

/// An attribute of a method.
#[derive(Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub id: u16,
    pub role: Role,
    /// The index in [`STRUCTS`] of the structure it carries, if known.
    pub strukt: Option<u16>,
}

/// How a method's attributes were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The attribute enum named as the method.
    Named,
    /// No enum is named as the method: the union of the enums of its object (the fuzzer adds
    /// random attribute ids).
    Union,
}

/// A method of an object.
#[derive(Debug)]
pub struct Method {
    pub name: &'static str,
    pub object_name: &'static str,
    pub object: u16,
    pub id: u16,
    /// Of the driver's namespace.
    pub driver: bool,
    /// Creates an object (its name has CREATE, ALLOC, REG or OPEN).
    pub creates: bool,
    /// Destroys one (DESTROY, FREE, DEALLOC, DEREG, CLOSE).
    pub destroys: bool,
    pub rule: Rule,
    pub attrs: &'static [AttrSpec],
}

/// A field of a structure (nested structures flattened): `count` elements of `size` bytes at
/// `offset` (`count` 0: a flexible array member).
#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub offset: u32,
    pub size: u32,
    pub count: u32,
}

/// A structure of the uAPI headers.
#[derive(Debug)]
pub struct Struct {
    pub name: &'static str,
    pub size: u32,
    /// Its size without the flexible array member it ends with, if any.
    pub data_end: u32,
    pub fields: &'static [Field],
}

/// A write() command (`UVERBS_METHOD_INVOKE_WRITE`'s `UVERBS_ATTR_WRITE_CMD`).
#[derive(Debug)]
pub struct WriteCmd {
    pub name: &'static str,
    /// With `IB_USER_VERBS_CMD_FLAG_EXTENDED` for the extended ones.
    pub command: u32,
    /// Indexes in [`STRUCTS`]: request, response, and the driver's data in and out.
    pub req: Option<u16>,
    pub resp: Option<u16>,
    pub uhw_in: Option<u16>,
    pub uhw_out: Option<u16>,
    /// The object type its name ends with.
    pub object: Option<u16>,
    /// Creates an object (the response starts with its handle).
    pub creates: bool,
}

include!(concat!(env!("OUT_DIR"), "/uapi_table.rs"));

/// The method `name`.
pub fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// The structure `name`.
pub fn strukt(name: &str) -> Option<&'static Struct> {
    STRUCTS.iter().find(|s| s.name == name)
}

/// The structure of index `i` of [`STRUCTS`].
pub fn struct_at(i: Option<u16>) -> Option<&'static Struct> {
    i.and_then(|i| STRUCTS.get(usize::from(i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uapi::*;

    fn ids(m: &Method) -> Vec<u16> {
        m.attrs.iter().map(|a| a.id).collect()
    }

    #[test]
    fn driver_methods_from_the_header() {
        let m = method("GAUDI_IB_METHOD_QP_SET_CREATE").expect("QP set create");
        assert_eq!(m.object, GAUDI_IB_OBJECT_QP_SET);
        assert_eq!(m.object_name, "GAUDI_IB_OBJECT_QP_SET");
        assert_eq!(m.id, GAUDI_IB_METHOD_QP_SET_CREATE);
        assert!(m.driver && m.creates && !m.destroys);
        assert_eq!(m.rule, Rule::Named);
        assert_eq!(
            ids(m),
            [
                GAUDI_IB_ATTR_QP_SET_CREATE_HANDLE,
                GAUDI_IB_ATTR_QP_SET_CREATE_REQ,
                GAUDI_IB_ATTR_QP_SET_CREATE_RESP,
                GAUDI_IB_ATTR_QP_SET_CREATE_PORTS,
                GAUDI_IB_ATTR_QP_SET_CREATE_PD
            ]
        );
        assert_eq!(m.attrs[0].role, Role::New);
        assert_eq!(m.attrs[1].role, Role::In);
        assert_eq!(m.attrs[2].role, Role::Out);
        assert_eq!(m.attrs[4].role, Role::Handle(Some(UVERBS_OBJECT_PD)));
        let req = struct_at(m.attrs[1].strukt).expect("request structure");
        assert_eq!(req.name, "gaudi_ib_qp_set_create");
        assert_eq!(
            req.size as usize,
            std::mem::size_of::<gaudi_ib_qp_set_create>()
        );
        let ports = struct_at(m.attrs[3].strukt).expect("port structure");
        assert_eq!(
            ports.size as usize,
            std::mem::size_of::<gaudi_ib_qp_set_port>()
        );

        let m = method("GAUDI_IB_METHOD_QP_SET_MODIFY").expect("QP set modify");
        assert_eq!(
            ids(m),
            [
                GAUDI_IB_ATTR_QP_SET_MODIFY_HANDLE,
                GAUDI_IB_ATTR_QP_SET_MODIFY_PORT,
                GAUDI_IB_ATTR_QP_SET_MODIFY_REQ
            ]
        );
        assert_eq!(m.attrs[0].role, Role::Handle(Some(GAUDI_IB_OBJECT_QP_SET)));
        let req = struct_at(m.attrs[2].strukt).expect("modify structure");
        assert_eq!(
            req.size as usize,
            std::mem::size_of::<gaudi_ib_qp_set_modify>()
        );
        let dmac = req.fields.iter().find(|f| f.name == "dmac").expect("dmac");
        assert_eq!((dmac.offset, dmac.size, dmac.count), (32, 1, 6));

        let m = method("GAUDI_IB_METHOD_QUERY_MR").expect("query MR");
        assert_eq!(
            (m.object, m.id),
            (GAUDI_IB_OBJECT_DEVICE, GAUDI_IB_METHOD_QUERY_MR)
        );
        // A handle of the core's memory regions.
        assert_eq!(m.attrs[0].role, Role::Handle(Some(UVERBS_OBJECT_MR)));
        assert_eq!(
            struct_at(m.attrs[1].strukt).map(|s| s.size as usize),
            Some(std::mem::size_of::<gaudi_ib_mr_info>())
        );

        let m = method("GAUDI_IB_METHOD_HBM_EXPORT").expect("HBM export");
        assert_eq!(
            (m.object, m.id),
            (GAUDI_IB_OBJECT_HBM, GAUDI_IB_METHOD_HBM_EXPORT)
        );
        assert_eq!(
            ids(m),
            [
                GAUDI_IB_ATTR_HBM_EXPORT_HANDLE,
                GAUDI_IB_ATTR_HBM_EXPORT_REQ,
                GAUDI_IB_ATTR_HBM_EXPORT_RESP
            ]
        );
        // Every method of the driver's namespace has its own attributes.
        let ours: Vec<&Method> = METHODS.iter().filter(|m| m.driver).collect();
        assert_eq!(ours.len(), 10);
        assert!(ours
            .iter()
            .all(|m| m.rule == Rule::Named && !m.attrs.is_empty()));
    }

    #[test]
    fn core_methods_from_the_header() {
        let m = method("UVERBS_METHOD_CQ_CREATE").expect("CQ create");
        assert_eq!((m.object, m.id), (3, 0));
        assert_eq!(m.object_name, "UVERBS_OBJECT_CQ");
        assert!(!m.driver && m.creates);
        assert_eq!(m.rule, Rule::Named);
        let names: Vec<&str> = m.attrs.iter().map(|a| a.name).collect();
        assert_eq!(
            names[..3],
            [
                "UVERBS_ATTR_CREATE_CQ_HANDLE",
                "UVERBS_ATTR_CREATE_CQ_CQE",
                "UVERBS_ATTR_CREATE_CQ_USER_HANDLE"
            ]
        );
        assert_eq!(ids(m)[..8], [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(m.attrs[0].role, Role::New);
        assert_eq!(m.attrs[3].role, Role::Handle(Some(2)));
        assert_eq!(m.attrs[7].role, Role::Fd);

        let m = method("UVERBS_METHOD_QP_CREATE").expect("QP create");
        let pd = m
            .attrs
            .iter()
            .find(|a| a.name == "UVERBS_ATTR_CREATE_QP_PD_HANDLE")
            .expect("PD handle");
        assert_eq!((pd.id, pd.role), (2, Role::Handle(Some(1))));

        let m = method("UVERBS_METHOD_INVOKE_WRITE").expect("invoke write");
        assert_eq!((m.object, m.id), (0, 0));
        assert_eq!(ids(m), [0, 1, 2]);
        let m = method("UVERBS_METHOD_REG_DMABUF_MR").expect("dma-buf MR");
        assert_eq!((m.object, m.id), (7, 4));
        assert_eq!(m.attrs.len(), 9);
        assert_eq!(m.attrs[5].role, Role::Fd);
        // Matched by the fallback: the attribute enum is named for another verb.
        let m = method("UVERBS_METHOD_ASYNC_EVENT_ALLOC").expect("async event");
        assert_eq!((m.object, m.rule), (16, Rule::Union));
        assert_eq!(m.attrs.len(), 1);
        assert_eq!(m.attrs[0].role, Role::NewFd);
        // The driver's data in and out of every core method.
        let common: Vec<u16> = COMMON_ATTRS.iter().map(|a| a.id).collect();
        assert_eq!(common, [UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT]);
        // Every method belongs to an object of the table.
        for m in METHODS {
            assert!(
                OBJECTS.iter().any(|o| o.id == m.object),
                "{}: object {}",
                m.name,
                m.object
            );
        }
    }

    #[test]
    fn write_commands_from_the_header() {
        let w = WRITE_CMDS
            .iter()
            .find(|w| w.name == "IB_USER_VERBS_CMD_REG_MR")
            .expect("REG_MR");
        assert_eq!(w.command, 9);
        assert!(w.creates);
        assert_eq!(w.object, Some(7));
        assert_eq!(struct_at(w.req).map(|s| s.size), Some(40));
        let resp = struct_at(w.resp).expect("REG_MR response");
        assert_eq!(resp.data_end, 12);
        assert_eq!(
            struct_at(w.uhw_out).map(|s| s.size as usize),
            Some(std::mem::size_of::<gaudi_ib_reg_mr_resp>())
        );
        let w = WRITE_CMDS
            .iter()
            .find(|w| w.name == "IB_USER_VERBS_EX_CMD_CREATE_CQ")
            .expect("extended CREATE_CQ");
        assert_eq!(w.command, 0x8000_0012);
        assert_eq!(
            struct_at(w.req).map(|s| s.name),
            Some("ib_uverbs_ex_create_cq")
        );
        let w = WRITE_CMDS
            .iter()
            .find(|w| w.name == "IB_USER_VERBS_CMD_MODIFY_QP")
            .expect("MODIFY_QP");
        assert_eq!(struct_at(w.req).map(|s| s.size), Some(112));
        assert_eq!(
            struct_at(w.uhw_in).map(|s| s.size as usize),
            Some(std::mem::size_of::<gaudi_ib_modify_qp>())
        );
        let send = strukt("ib_uverbs_send_wr").expect("send WR");
        assert_eq!(send.size, 56);
        assert!(CONSTANTS.contains(&0x8000_0000));
    }
}
