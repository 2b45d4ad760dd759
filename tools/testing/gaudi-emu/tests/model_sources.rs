// SPDX-License-Identifier: GPL-2.0
//! Device model 2.0 names a public source for everything it uses:
//! `model_sources` checks that every register of the emulator's NIC
//! (`nic::regs::NIC_REGISTERS`) and every field of its formats
//! (`nic::formats`) has a row in Documentation/infiniband/gaudi/
//! device-model.rst with the same offset, shape, scope and bits, and a
//! Source that is one of the document's source keys; and that the
//! document has no register or field row the emulator lacks. The other
//! tests show that it catches a changed document.

mod rst;

use gaudi_emu::nic::formats::{Cqe, Eqe, ReqQpc, ResQpc, RqWqe, SqWqe};
use gaudi_emu::nic::layout::{Bits, Layout};
use gaudi_emu::nic::regs::{NicReg, Scope, NIC_REGISTERS};
use rst::tables;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const DOC: &str = "Documentation/infiniband/gaudi/device-model.rst";

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

/// The document, found from the package directory cargo names when it runs the test (a test
/// binary reused from a build of another checkout must not read that one).
fn doc() -> String {
    let p = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../../..")
        .join(DOC);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
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
}
