// SPDX-License-Identifier: GPL-2.0
//! Device model 2.0 names a public source for everything it uses:
//! `model_sources` checks that every register of the emulator's NIC
//! (`nic::regs::NIC_REGISTERS`) and every field of its formats
//! (`nic::formats`) has a row in Documentation/infiniband/gaudi/
//! device-model.rst with the same offset, shape, scope and bits, and a
//! Source that is one of the document's source keys; and that the
//! document has no register or field row the emulator lacks. It also reads
//! the drivers' model 2.0 definitions (the NIC core's registers,
//! drivers/net/ethernet/habana/gaudi_cn/nic.rs, and the formats the NIC
//! drivers share, rust/kernel/net/gaudi/gaudi2.rs): each register the core
//! defines has the document's offset, shape and bits, and each field of the
//! formats the document's bits. The chip
//! services' registers (the emulated function's, model-defined) have the
//! same names and offsets in the document's table, the emulator
//! (`chip::SVC_REGISTERS`) and the driver of the emulated function
//! (drivers/net/ethernet/habana/gaudi_pci/). The other test shows that it catches a changed document or
//! driver. `register_map_matches_doc` runs the three comparisons together:
//! the document, the driver and the emulator.

mod rst;

use gaudi_emu::chip::SVC_REGISTERS;
use gaudi_emu::nic::formats::{Cqe, Eqe, ReqQpc, ResQpc, RqWqe, SqWqe};
use gaudi_emu::nic::layout::{Bits, Layout};
use gaudi_emu::nic::regs::{NicReg, Scope, NIC_REGISTERS};
use rst::tables;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const DOC: &str = "Documentation/infiniband/gaudi/device-model.rst";
/// The NIC core's registers, and the formats the NIC drivers share.
const DRIVER: &str = "drivers/net/ethernet/habana/gaudi_cn/nic.rs";
const FORMATS: &str = "rust/kernel/net/gaudi/gaudi2.rs";

/// The driver files with the NIC's registers and formats.
fn driver_nic() -> String {
    read(DRIVER) + &read(FORMATS)
}

/// `line` without a leading `pub(crate) ` or `pub `.
fn public(line: &str) -> Option<&str> {
    line.strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
}
/// The driver of the emulated function (the chip's owner), which has the chip services.
const DRIVER_PCI: &str = "drivers/net/ethernet/habana/gaudi_pci/gaudi_pci.rs";
const DRIVER_PCI_MMU: &str = "drivers/net/ethernet/habana/gaudi_pci/mmu.rs";

/// The driver files with chip services registers.
fn driver_services() -> String {
    read(DRIVER_PCI) + &read(DRIVER_PCI_MMU)
}

/// The driver's format modules and the sections of their tables.
const DRIVER_FORMATS: &[(&str, &str)] = &[
    ("req", "Requester QP context"),
    ("res", "Responder QP context"),
    ("wqe", "Send WQE"),
    ("cqe", "CQE"),
    ("eqe", "EQE"),
];

/// A register the driver defines: name, offset, shape as the document
/// writes it, fields (name, high bit, low bit).
type DriverReg = (String, u64, String, BTreeSet<(String, u32, u32)>);

/// The registers of the driver's `register!` blocks.
fn driver_registers(src: &str) -> Vec<DriverReg> {
    let mut out = Vec::new();
    let mut cur: Option<DriverReg> = None;
    for line in src.lines().map(str::trim) {
        if let Some(rest) = public(line) {
            let Some((head, off)) = rest.split_once(" @ ") else {
                continue;
            };
            let Some((name, shape)) = head.split_once("(u32)") else {
                continue;
            };
            let off = off.trim_end_matches(['{', '}', ' ']).trim();
            let Ok(off) = u64::from_str_radix(&off.trim_start_matches("0x").replace('_', ""), 16)
            else {
                continue;
            };
            let shape = match shape
                .trim()
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
            {
                None => "1".to_string(),
                Some(a) => {
                    let (n, stride) = a.split_once(", stride = ").unwrap_or((a, "4"));
                    let stride: u64 = if let Some(h) = stride.strip_prefix("0x") {
                        u64::from_str_radix(&h.replace('_', ""), 16).unwrap_or(0)
                    } else {
                        stride.parse().unwrap_or(0)
                    };
                    if stride < 10 {
                        format!("{n} x {stride}")
                    } else {
                        format!("{n} x {stride:#x}")
                    }
                }
            };
            if let Some(r) = cur.take() {
                out.push(r);
            }
            cur = Some((name.to_string(), off, shape, BTreeSet::new()));
            if line.ends_with("{}") {
                out.extend(cur.take());
            }
            continue;
        }
        if line == "}" {
            out.extend(cur.take());
            continue;
        }
        if let Some(r) = cur.as_mut() {
            let mut w = line.split_whitespace();
            if let (Some(bits), Some(name)) = (w.next(), w.next()) {
                if let Some((h, l)) = bits.split_once(':') {
                    if let (Ok(h), Ok(l)) = (h.parse(), l.parse()) {
                        r.3.insert((name.trim_end_matches(';').to_string(), h, l));
                    }
                }
            }
        }
    }
    out
}

/// The fields of the driver's format modules: (module, name, lsb, width).
fn driver_fields(src: &str) -> Vec<(String, String, u32, u32)> {
    let mut out = Vec::new();
    let mut module = None;
    for line in src.lines().map(str::trim) {
        if let Some(m) = public(line)
            .and_then(|l| l.strip_prefix("mod "))
            .and_then(|m| m.strip_suffix(" {"))
        {
            module = Some(m.to_string());
            continue;
        }
        if line == "}" {
            module = None;
            continue;
        }
        let Some(m) = module.as_ref() else {
            continue;
        };
        let Some(rest) = public(line).and_then(|l| l.strip_prefix("const ")) else {
            continue;
        };
        let Some((name, def)) = rest.split_once(": Field = Field::new(") else {
            continue;
        };
        let Some((lsb, width)) = def.trim_end_matches(");").split_once(", ") else {
            continue;
        };
        if let (Ok(lsb), Ok(width)) = (lsb.parse(), width.parse()) {
            out.push((m.clone(), name.to_string(), lsb, width));
        }
    }
    out
}

/// Everything wrong between `doc` and the driver's definitions in `src`.
fn check_driver(doc: &str, src: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let ts = tables(doc, &mut errors);
    let mut regs = BTreeMap::new();
    for t in ts
        .iter()
        .filter(|t| t.header == ["Offset", "Register", "Count", "Source", "Meaning"])
    {
        for r in &t.rows {
            if let Some(name) = literal(&r.cells[1]).and_then(|n| n.strip_prefix("NIC0_")) {
                let off = u64::from_str_radix(r.cells[0].trim_start_matches("0x"), 16).ok();
                regs.insert(
                    name.to_string(),
                    (r.line, off, r.cells[2].clone(), doc_fields(&r.cells[4])),
                );
            }
        }
    }
    let defined = driver_registers(src);
    if defined.is_empty() {
        errors.push("driver: no register definitions found".into());
    }
    for (name, off, shape, fields) in defined {
        let Some((line, doc_off, count, doc_fields)) = regs.get(&name) else {
            errors.push(format!(
                "{name}: used by the driver, no row in the document"
            ));
            continue;
        };
        if *doc_off != Some(off) {
            errors.push(format!(
                "doc, line {line}: {name}: offset {doc_off:x?}, driver {off:#x}"
            ));
        }
        if count.trim_end_matches(" shared") != shape {
            errors.push(format!(
                "doc, line {line}: {name}: count {count:?}, driver {shape:?}"
            ));
        }
        if !fields.is_subset(doc_fields) {
            errors.push(format!(
                "doc, line {line}: {name}: fields {doc_fields:?}, driver {fields:?}"
            ));
        }
    }
    let fields = driver_fields(src);
    if fields.is_empty() {
        errors.push("driver: no format fields found".into());
    }
    for (module, name, lsb, width) in fields {
        let Some((_, title)) = DRIVER_FORMATS.iter().find(|(m, _)| *m == module) else {
            errors.push(format!("driver: format module {module:?} has no section"));
            continue;
        };
        let Some(t) = ts
            .iter()
            .find(|t| t.section == *title && t.header == ["Field", "Bits", "Source", "Meaning"])
        else {
            errors.push(format!("doc: no field table in section {title:?}"));
            continue;
        };
        let row = t
            .rows
            .iter()
            .find(|r| literal(&r.cells[0]) == Some(name.as_str()));
        match row {
            None => errors.push(format!(
                "{title}: {name}: used by the driver, no row in the document"
            )),
            Some(r) if r.cells[1] != format!("{lsb}/{width}") => errors.push(format!(
                "doc, line {}: {title}: {name}: bits {}, driver {lsb}/{width}",
                r.line, r.cells[1]
            )),
            Some(_) => {}
        }
    }
    errors
}

/// The formats, by the title of the section holding their table.
fn formats() -> Vec<(&'static str, &'static [Bits])> {
    vec![
        ("Requester QP context", ReqQpc::FIELDS),
        ("Responder QP context", ResQpc::FIELDS),
        ("Send WQE", SqWqe::FIELDS),
        ("Receive WQE", RqWqe::FIELDS),
        ("CQE", Cqe::FIELDS),
        ("EQE", Eqe::FIELDS),
    ]
}

/// The one literal of a cell (``NAME``).
fn literal(cell: &str) -> Option<&str> {
    let s = cell.strip_prefix("``")?;
    let (name, rest) = s.split_once("``")?;
    rest.trim().is_empty().then_some(name)
}

/// The ``name`` bit n / bits h:l fields of a register's Meaning.
fn doc_fields(meaning: &str) -> BTreeSet<(String, u32, u32)> {
    let mut out = BTreeSet::new();
    let parts: Vec<&str> = meaning.split("``").collect();
    for i in (1..parts.len()).step_by(2) {
        let after = parts.get(i + 1).map_or("", |s| s.trim_start());
        let num = |s: &str| {
            s.trim_end_matches([',', ';', ')', '.', ':'])
                .parse::<u32>()
                .ok()
        };
        let mut w = after.split_whitespace();
        match w.next() {
            Some("bit") => {
                if let Some(n) = w.next().and_then(num) {
                    out.insert((parts[i].to_string(), n, n));
                }
            }
            Some("bits") => {
                if let Some((h, l)) = w.next().and_then(|r| r.split_once(':')) {
                    if let (Ok(h), Some(l)) = (h.parse(), num(l)) {
                        out.insert((parts[i].to_string(), h, l));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn shape(r: &NicReg) -> String {
    let c = if r.count == 1 {
        "1".to_string()
    } else if r.stride < 10 {
        format!("{} x {}", r.count, r.stride)
    } else {
        format!("{} x {:#x}", r.count, r.stride)
    };
    match r.scope {
        Scope::Port => c,
        Scope::Macro => format!("{c} shared"),
    }
}

/// Everything wrong between `doc` and the emulator's tables.
fn check(doc: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let ts = tables(doc, &mut errors);
    let keys: BTreeSet<String> = ts
        .iter()
        .filter(|t| t.header == ["Key", "File"])
        .flat_map(|t| t.rows.iter().map(|r| r.cells[0].clone()))
        .collect();
    if keys.is_empty() {
        errors.push("doc: no table of source keys".into());
    }
    let source_ok = |cell: &str| {
        cell.split([':', ' '])
            .next()
            .is_some_and(|k| keys.contains(k))
    };

    // Registers.
    let mut regs = BTreeMap::new();
    for t in ts
        .iter()
        .filter(|t| t.header == ["Offset", "Register", "Count", "Source", "Meaning"])
    {
        for r in &t.rows {
            let c = &r.cells;
            let Some(name) = literal(&c[1]).and_then(|n| n.strip_prefix("NIC0_")) else {
                errors.push(format!(
                    "doc, line {}: register {:?} is not ``NIC0_...``",
                    r.line, c[1]
                ));
                continue;
            };
            let off = u64::from_str_radix(c[0].trim_start_matches("0x"), 16).ok();
            if !source_ok(&c[3]) {
                errors.push(format!(
                    "doc, line {}: {name}: source {:?} is no source key",
                    r.line, c[3]
                ));
            }
            regs.insert(
                name.to_string(),
                (r.line, off, c[2].clone(), doc_fields(&c[4])),
            );
        }
    }
    for r in NIC_REGISTERS {
        let Some((line, off, count, fields)) = regs.remove(r.name) else {
            errors.push(format!(
                "{}: used by the emulator, no row in the document",
                r.name
            ));
            continue;
        };
        if off != Some(r.offset) {
            errors.push(format!(
                "doc, line {line}: {}: offset {off:x?}, emulator {:#x}",
                r.name, r.offset
            ));
        }
        if count != shape(r) {
            errors.push(format!(
                "doc, line {line}: {}: count {count:?}, emulator {:?}",
                r.name,
                shape(r)
            ));
        }
        let code: BTreeSet<_> = r
            .fields
            .iter()
            .map(|f| (f.name.to_string(), f.hi, f.lo))
            .collect();
        if code != fields {
            errors.push(format!(
                "doc, line {line}: {}: fields {fields:?}, emulator {code:?}",
                r.name
            ));
        }
    }
    for (name, (line, ..)) in regs {
        errors.push(format!(
            "doc, line {line}: NIC0_{name}: not in the emulator's register table"
        ));
    }

    // Formats.
    for (title, fields) in formats() {
        let Some(t) = ts
            .iter()
            .find(|t| t.section == title && t.header == ["Field", "Bits", "Source", "Meaning"])
        else {
            errors.push(format!("doc: no field table in section {title:?}"));
            continue;
        };
        let mut rows = BTreeMap::new();
        for r in &t.rows {
            let bits = r.cells[1]
                .split_once('/')
                .and_then(|(l, w)| Some((l.parse::<u32>().ok()?, w.parse::<u32>().ok()?)));
            if !source_ok(&r.cells[2]) {
                errors.push(format!(
                    "doc, line {}: {title}: source {:?} is no source key",
                    r.line, r.cells[2]
                ));
            }
            match literal(&r.cells[0]) {
                Some(n) => {
                    rows.insert(n.to_string(), (r.line, bits));
                }
                None => errors.push(format!(
                    "doc, line {}: field {:?} is not a literal",
                    r.line, r.cells[0]
                )),
            }
        }
        for f in fields {
            match rows.remove(f.name) {
                None => errors.push(format!(
                    "{title}: {}: used by the emulator, no row in the document",
                    f.name
                )),
                Some((line, bits)) if bits != Some((f.lsb, f.width)) => errors.push(format!(
                    "doc, line {line}: {title}: {}: bits {bits:?}, emulator {}/{}",
                    f.name, f.lsb, f.width
                )),
                Some(_) => {}
            }
        }
        for (name, (line, _)) in rows {
            errors.push(format!(
                "doc, line {line}: {title}: {name}: not in the emulator's format"
            ));
        }
    }
    if !ts
        .iter()
        .any(|t| t.header == ["Behaviour", "Model decision", "Why"] && !t.rows.is_empty())
    {
        errors.push("doc: no table of what the model decides".into());
    }
    errors
}

/// `path` of the repository, found from the package directory cargo names when it runs the
/// test (a test binary reused from a build of another checkout must not read that one).
fn read(path: &str) -> String {
    let p = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../../..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Everything wrong between the document's table of the chip services'
/// registers, the emulator's ([`SVC_REGISTERS`]) and the driver's
/// `register!` definitions in `src` (its chip.rs): the same names and
/// offsets.
fn check_services(doc: &str, src: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut rows = BTreeMap::new();
    for t in tables(doc, &mut errors)
        .iter()
        .filter(|t| t.header == ["BAR0 offset", "Register", "Meaning"])
    {
        for r in &t.rows {
            let Some(name) = literal(&r.cells[1]) else {
                continue;
            };
            let name = name.split_once('[').map_or(name, |(n, _)| n);
            let off = u64::from_str_radix(r.cells[0].trim_start_matches("0x"), 16).ok();
            rows.insert(name.to_string(), (r.line, off));
        }
    }
    if rows.is_empty() {
        errors.push("doc: no table of the chip services' registers".into());
    }
    for (name, off) in SVC_REGISTERS {
        match rows.get(*name) {
            None => errors.push(format!("{name}: in the emulator, no row in the document")),
            Some((line, o)) if *o != Some(*off) => errors.push(format!(
                "doc, line {line}: {name}: offset {o:x?}, emulator {off:#x}"
            )),
            Some(_) => {}
        }
    }
    for (name, (line, _)) in &rows {
        if !SVC_REGISTERS.iter().any(|(n, _)| n == name) {
            errors.push(format!("doc, line {line}: {name}: not in the emulator"));
        }
    }
    let defined = driver_registers(src);
    if defined.is_empty() {
        errors.push("driver: no chip services registers found".into());
    }
    for (name, off, _, _) in defined {
        match rows.get(&name) {
            None => errors.push(format!(
                "{name}: used by the driver, no row in the document"
            )),
            Some((line, o)) if *o != Some(off) => errors.push(format!(
                "doc, line {line}: {name}: offset {o:x?}, driver {off:#x}"
            )),
            Some(_) => {}
        }
    }
    errors
}

fn doc() -> String {
    read(DOC)
}

#[test]
fn model_sources() {
    let errors = check(&doc());
    assert!(
        errors.is_empty(),
        "device-model.rst and the emulator disagree:\n{}",
        errors.join("\n")
    );
}

/// The register map written down three times, the document (with its
/// Source column), the driver's `register!` definitions and formats, and
/// the emulator's map, agrees.
#[test]
fn register_map_matches_doc() {
    let errors = check(&doc());
    assert!(
        errors.is_empty(),
        "device-model.rst and the emulator disagree:\n{}",
        errors.join("\n")
    );
    let errors = check_driver(&doc(), &driver_nic());
    assert!(
        errors.is_empty(),
        "device-model.rst and the driver disagree:\n{}",
        errors.join("\n")
    );
    let errors = check_services(&doc(), &driver_services());
    assert!(
        errors.is_empty(),
        "device-model.rst's chip services, the emulator and the driver disagree:\n{}",
        errors.join("\n")
    );
}

fn caught(doc: &str, needle: &str) {
    let errors = check(doc);
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "{needle:?} not among {errors:#?}"
    );
}

#[test]
fn model_sources_catches_a_changed_document() {
    let d = doc();
    // A register's offset.
    caught(
        &d.replacen(
            "0x541f084  ``NIC0_QPC0_GW_CTRL``",
            "0x541f088  ``NIC0_QPC0_GW_CTRL``",
            1,
        ),
        "QPC0_GW_CTRL: offset",
    );
    // A field's bits.
    caught(
        &d.replacen(
            "``RKEY``                                128/32",
            "``RKEY``                                128/16",
            1,
        ),
        "RKEY: bits",
    );
    // A source that is no key.
    let moved: String = d
        .lines()
        .map(|l| if l.contains("``NIC0_QPC0_GW_BUSY``") { l.replace("qpc0_regs", "somewhere") } else { l.to_string() } + "\n")
        .collect();
    caught(&moved, "QPC0_GW_BUSY: source");
    // A register field.
    caught(
        &d.replacen("``requester`` bit 24", "``requester`` bit 23", 1),
        "QPC0_GW_CTRL: fields",
    );
    // A row gone.
    let gone: String = d
        .lines()
        .filter(|l| !l.contains("``NIC0_QPC0_ARM_CQ_NUM``"))
        .map(|l| format!("{l}\n"))
        .collect();
    caught(&gone, "QPC0_ARM_CQ_NUM: used by the emulator, no row");
    // The driver: a register's offset, a field's bits, a register the
    // document lacks.
    let src = driver_nic();
    let caught_driver = |src: &str, needle: &str| {
        let errors = check_driver(&d, src);
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle:?} not among {errors:#?}"
        );
    };
    caught_driver(
        &src.replacen(
            "QPC0_GW_BUSY(u32) @ 0x541_f080",
            "QPC0_GW_BUSY(u32) @ 0x541_f090",
            1,
        ),
        "QPC0_GW_BUSY: offset",
    );
    caught_driver(
        &src.replacen(
            "LAST_IDX: Field = Field::new(576, 22)",
            "LAST_IDX: Field = Field::new(576, 21)",
            1,
        ),
        "LAST_IDX: bits",
    );
    caught_driver(
        &src.replacen("QPC0_GW_CTRL(u32) @", "QPC0_GW_CONTROL(u32) @", 1),
        "QPC0_GW_CONTROL: used by the driver, no row",
    );
    caught_driver(
        &src.replacen("24:24 requester => bool;", "23:23 requester => bool;", 1),
        "QPC0_GW_CTRL: fields",
    );
    // The chip services: an offset of the document's, one of the driver's.
    let chip = driver_services();
    let services = |doc: &str, src: &str, needle: &str| {
        let errors = check_services(doc, src);
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle:?} not among {errors:#?}"
        );
    };
    services(
        &d.replacen(
            "0x102000      ``SVC_MMU_INVALIDATE``",
            "0x102004      ``SVC_MMU_INVALIDATE``",
            1,
        ),
        &chip,
        "SVC_MMU_INVALIDATE: offset",
    );
    services(
        &d,
        &chip.replacen(
            "SVC_MMU_FAULTS(u32) @ 0x102004",
            "SVC_MMU_FAULTS(u32) @ 0x102008",
            1,
        ),
        "SVC_MMU_FAULTS: offset",
    );
}
