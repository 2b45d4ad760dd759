// SPDX-License-Identifier: GPL-2.0
//! The BAR0 register map is written down three times: the register tables
//! of Documentation/infiniband/gaudi/device-model-1.rst (the specification),
//! the driver's `register!` definitions in drivers/infiniband/hw/gaudi/
//! regs.rs, and the emulator's `regs::REGISTER_MAP`.
//! `register_map_matches_doc` checks that they agree: every register of the
//! document is in the emulator's map and the other way round, every
//! register the driver defines is in the document, and each has the same
//! offset, array shape (count and stride) and fields (names and bits). The
//! other tests show that the parsers and the comparison catch a changed
//! document, driver or map.
//!
//! The document's convention (its "Conventions" section): a register table
//! has the columns Offset, Name, (Acc.,) Meaning; `NAME[0..n]` is an array
//! of n + 1 registers 4 bytes apart; the paragraph above a table of
//! per-port registers gives the block as ``base + port * stride`` and the
//! ports as "ports 0 to n"; a field is its lower-case name in literal text
//! followed by `bit n` or `bits h:l`. The doorbell table's names (`SQ`...)
//! are `DB_SQ`... in the driver and the emulator.

use gaudi_emu::regs::{RegDef, BAR0_SIZE, REGISTER_MAP};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

const DOC: &str = "Documentation/infiniband/gaudi/device-model-1.rst";
const DRIVER: &str = "drivers/infiniband/hw/gaudi/regs.rs";

/// A register, or an array of registers, as one source defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Reg {
    name: String,
    offset: u64,
    /// 1 for a single register.
    count: u32,
    /// 4 for a single register.
    stride: u64,
    /// Highest bits first.
    fields: Vec<Fld>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Fld {
    hi: u32,
    lo: u32,
    name: String,
}

impl Reg {
    fn new(name: &str, offset: u64, count: u32, stride: u64, mut fields: Vec<Fld>) -> Self {
        fields.sort_by(|a, b| b.cmp(a));
        Reg {
            name: name.to_string(),
            offset,
            count,
            stride,
            fields,
        }
    }
}

impl fmt::Display for Fld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bits {}:{}", self.hi, self.lo)
    }
}

/// "32 x 0x40" or "single".
fn shape(r: &Reg) -> String {
    if r.count == 1 {
        "single".to_string()
    } else {
        format!("{} x {:#x}", r.count, r.stride)
    }
}

mod rst;
use rst::tables;

// ---- The document's register tables ----------------------------------

/// The text of the literals (``...``) of `s`, each with the text after it.
fn literals(s: &str) -> Result<Vec<(&str, &str)>, String> {
    let parts: Vec<&str> = s.split("``").collect();
    if parts.len() % 2 == 0 {
        return Err(format!("unbalanced ``: {s:?}"));
    }
    Ok((1..parts.len())
        .step_by(2)
        .map(|k| (parts[k], parts[k + 1]))
        .collect())
}

/// A hexadecimal number "0x..." (underscores allowed).
fn hex(s: &str) -> Option<u64> {
    let digits = s.trim().strip_prefix("0x")?.replace('_', "");
    u64::from_str_radix(&digits, 16).ok()
}

/// The decimal number at the start of `s`, and the rest.
fn number(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n = s[..end].parse().ok()?;
    let rest = &s[end..];
    // "bit 0x..." or "bit 1st" is not a bit number.
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some((n, rest))
}

/// A field name: lower case, as the driver's and the emulator's.
fn is_field_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A register name, upper case.
fn is_reg_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The fields a register's meaning lists: ``name`` bit n, ``name`` bits h:l.
fn doc_fields(meaning: &str) -> Result<Vec<Fld>, String> {
    let mut out = Vec::new();
    for (lit, after) in literals(meaning)? {
        if !is_field_name(lit) {
            continue;
        }
        let after = after.trim_start();
        let bad =
            || format!("field ``{lit}`` not followed by \"bit n\" or \"bits h:l\": {meaning:?}");
        let (hi, lo) = if let Some(rest) = after.strip_prefix("bits ") {
            let (hi, rest) = number(rest).ok_or_else(bad)?;
            let (lo, _) = rest.strip_prefix(':').and_then(number).ok_or_else(bad)?;
            if hi <= lo {
                return Err(format!(
                    "field ``{lit}``: \"bits {hi}:{lo}\", not h > l: {meaning:?}"
                ));
            }
            (hi, lo)
        } else if let Some(rest) = after.strip_prefix("bit ") {
            let (n, rest) = number(rest).ok_or_else(bad)?;
            if rest.starts_with(':') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
                return Err(format!(
                    "field ``{lit}``: \"bit\" with a range (write \"bits h:l\"): {meaning:?}"
                ));
            }
            (n, n)
        } else {
            return Err(bad());
        };
        out.push(Fld {
            hi,
            lo,
            name: lit.to_string(),
        });
    }
    Ok(out)
}

/// A per-port block from a table's intro: ``base + port * stride`` and
/// "ports 0 to n" give (base, ports, stride).
fn port_block(intro: &str) -> Result<Option<(u64, u32, u64)>, String> {
    let mut block = None;
    for (lit, _) in literals(intro)? {
        let lit = lit.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some((base, stride)) = lit.split_once(" + port * ") else {
            continue;
        };
        match (hex(base), hex(stride)) {
            (Some(b), Some(s)) => block = Some((b, s)),
            _ => {
                return Err(format!(
                    "per-port block {lit:?}: not \"0x.. + port * 0x..\""
                ))
            }
        }
    }
    let Some((base, stride)) = block else {
        return Ok(None);
    };
    let ports = intro
        .split_once("ports 0 to ")
        .and_then(|(_, rest)| number(rest.trim_start()))
        .ok_or_else(|| format!("per-port block without \"ports 0 to n\": {intro:?}"))?
        .0;
    Ok(Some((base, ports + 1, stride)))
}

/// The registers of the document's register tables, and what is wrong with
/// them.
fn parse_doc(text: &str) -> (Vec<Reg>, Vec<String>) {
    let mut errors = Vec::new();
    let mut regs = Vec::new();
    let mut found = false;
    for t in tables(text, &mut errors) {
        if !(t.header.len() >= 3 && t.header[0] == "Offset" && t.header[1] == "Name") {
            continue;
        }
        found = true;
        let block = match port_block(&t.intro) {
            Ok(b) => b,
            Err(e) => {
                let line = t.rows.first().map_or(0, |r| r.line);
                errors.push(format!("doc, table at line {line}: {e}"));
                continue;
            }
        };
        let prefix = if t.section == "Doorbells" { "DB_" } else { "" };
        for row in &t.rows {
            let err = |e: String| format!("doc, line {}: {e}", row.line);
            let meaning = row.cells.last().unwrap();
            let offset = row.cells[0]
                .strip_prefix("``")
                .and_then(|s| s.strip_suffix("``"))
                .and_then(hex);
            let Some(offset) = offset else {
                errors.push(err(format!("offset {:?} is not ``0x..``", row.cells[0])));
                continue;
            };
            let name = row.cells[1]
                .strip_prefix("``")
                .and_then(|s| s.strip_suffix("``"))
                .unwrap_or("");
            let (name, count) = match name.split_once('[') {
                None => (name, 1),
                Some((n, range)) => {
                    let last = range
                        .strip_prefix("0..")
                        .and_then(|r| r.strip_suffix(']'))
                        .and_then(|r| r.parse::<u32>().ok());
                    match last {
                        Some(last) => (n, last + 1),
                        None => ("", 0),
                    }
                }
            };
            if !is_reg_name(name) {
                errors.push(err(format!(
                    "name {:?} is not ``NAME`` or ``NAME[0..n]``",
                    row.cells[1]
                )));
                continue;
            }
            let fields = match doc_fields(meaning) {
                Ok(f) => f,
                Err(e) => {
                    errors.push(err(e));
                    continue;
                }
            };
            let name = format!("{prefix}{name}");
            let reg = match block {
                None => Reg::new(&name, offset, count, 4, fields),
                Some(_) if count != 1 => {
                    errors.push(err(format!("{name}: an array in a per-port block")));
                    continue;
                }
                Some((base, ports, stride)) => {
                    Reg::new(&name, base + offset, ports, stride, fields)
                }
            };
            regs.push(reg);
        }
    }
    if !found {
        errors.push("doc: no register table (columns Offset, Name, ..., Meaning)".to_string());
    }
    (regs, errors)
}

// ---- The driver's register! definitions ------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(u64),
    Punct(char),
    Str,
}

/// Rust tokens of `text` with their line numbers, comments (doc comments
/// included) left out.
fn lex(text: &str) -> Result<Vec<(Tok, usize)>, String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let start_line = line;
        match c[i] {
            '\n' => {
                line += 1;
                i += 1;
            }
            x if x.is_whitespace() => i += 1,
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
                i += 2;
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    line += usize::from(c[i] == '\n');
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push((Tok::Str, start_line));
            }
            // A character literal; a lifetime's quote is punctuation.
            '\'' if c.get(i + 2) == Some(&'\'') => i += 3,
            '\'' if c.get(i + 1) == Some(&'\\') => {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            x if x.is_ascii_alphabetic() || x == '_' => {
                let s = i;
                while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Ident(c[s..i].iter().collect()), line));
            }
            x if x.is_ascii_digit() => {
                let s = i;
                while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                let lit: String = c[s..i].iter().filter(|&&x| x != '_').collect();
                let n = match lit.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => {
                        let end = lit.find(|x: char| !x.is_ascii_digit()).unwrap_or(lit.len());
                        lit[..end].parse().ok()
                    }
                };
                let n = n.ok_or_else(|| format!("driver, line {line}: number {lit:?}"))?;
                out.push((Tok::Num(n), line));
            }
            x => {
                out.push((Tok::Punct(x), line));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A cursor over the tokens of a `register!` block.
struct Cursor<'a> {
    toks: &'a [(Tok, usize)],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.0)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.at)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.peek().cloned();
        self.at += 1;
        t
    }

    fn is(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn err(&self, what: &str) -> String {
        format!(
            "driver, line {}: expected {what}, found {:?}",
            self.line(),
            self.peek()
        )
    }

    fn punct(&mut self, c: char) -> Result<(), String> {
        if self.is(c) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.err(&format!("'{c}'")))
        }
    }

    fn ident(&mut self, what: &str) -> Result<String, String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.err(what)),
        }
    }

    fn num(&mut self, what: &str) -> Result<u64, String> {
        match self.peek() {
            Some(&Tok::Num(n)) => {
                self.at += 1;
                Ok(n)
            }
            _ => Err(self.err(what)),
        }
    }

    /// Skips the rest of a group opened by `open` (already taken).
    fn skip_group(&mut self, open: char, close: char) -> Result<(), String> {
        let mut depth = 1;
        while depth > 0 {
            match self.next() {
                Some(Tok::Punct(c)) if c == open => depth += 1,
                Some(Tok::Punct(c)) if c == close => depth -= 1,
                Some(_) => {}
                None => return Err(format!("driver: '{open}' not closed")),
            }
        }
        Ok(())
    }

    /// Attributes (`#[...]`).
    fn attributes(&mut self) -> Result<(), String> {
        while self.is('#') {
            self.at += 1;
            self.punct('[')?;
            self.skip_group('[', ']')?;
        }
        Ok(())
    }

    /// `[vis] NAME(u32)[[count(, stride = n)]] @ offset { fields }`.
    fn register(&mut self) -> Result<Reg, String> {
        self.attributes()?;
        if self.peek() == Some(&Tok::Ident("pub".into())) {
            self.at += 1;
            if self.is('(') {
                self.at += 1;
                self.skip_group('(', ')')?;
            }
        }
        let name = self.ident("a register name")?;
        self.punct('(')?;
        let ty = self.ident("the register's type")?;
        if ty != "u32" {
            return Err(format!(
                "driver, line {}: {name} is {ty}, registers are u32",
                self.line()
            ));
        }
        self.punct(')')?;
        let (mut count, mut stride) = (1, 4);
        if self.is('[') {
            self.at += 1;
            count = self.num("the array's count")?;
            if self.is(',') {
                self.at += 1;
                if self.ident("stride")? != "stride" {
                    return Err(self.err("stride"));
                }
                self.punct('=')?;
                stride = self.num("the array's stride")?;
            }
            self.punct(']')?;
        }
        self.punct('@')?;
        let offset = self.num("a numeric offset")?;
        self.punct('{')?;
        let mut fields = Vec::new();
        loop {
            self.attributes()?;
            if self.is('}') {
                self.at += 1;
                break;
            }
            let hi = self.num("a field's high bit")?;
            self.punct(':')?;
            let lo = self.num("a field's low bit")?;
            let field = self.ident("a field name")?;
            // The field's type, conversion, doc string: up to the ';'.
            while !self.is(';') {
                match self.next() {
                    None | Some(Tok::Punct('}')) => return Err(self.err("';' after a field")),
                    Some(_) => {}
                }
            }
            self.at += 1;
            fields.push(Fld {
                hi: hi as u32,
                lo: lo as u32,
                name: field,
            });
        }
        Ok(Reg::new(&name, offset, count as u32, stride, fields))
    }
}

/// The registers the driver defines with `register!`, and what the parser
/// could not read.
fn parse_driver(text: &str) -> (Vec<Reg>, Vec<String>) {
    let toks = match lex(text) {
        Ok(t) => t,
        Err(e) => return (Vec::new(), vec![e]),
    };
    let (mut regs, mut errors) = (Vec::new(), Vec::new());
    let mut blocks = 0;
    let mut i = 0;
    while i + 2 < toks.len() {
        if !(toks[i].0 == Tok::Ident("register".into()) && toks[i + 1].0 == Tok::Punct('!')) {
            i += 1;
            continue;
        }
        blocks += 1;
        let mut cur = Cursor {
            toks: &toks,
            at: i + 2,
        };
        let body = cur.punct('{').and_then(|_| {
            while !cur.is('}') {
                if cur.peek().is_none() {
                    return Err("driver: register! block not closed".to_string());
                }
                regs.push(cur.register()?);
            }
            Ok(())
        });
        if let Err(e) = body {
            errors.push(e);
        }
        i = cur.at + 1;
    }
    if blocks == 0 {
        errors.push("driver: no register! block".to_string());
    }
    (regs, errors)
}

// ---- The emulator's map ----------------------------------------------

fn emulator_regs(map: &[RegDef]) -> Vec<Reg> {
    map.iter()
        .map(|r| {
            let fields = r
                .fields
                .iter()
                .map(|f| Fld {
                    hi: f.hi,
                    lo: f.lo,
                    name: f.name.to_string(),
                })
                .collect();
            Reg::new(r.name, r.offset, r.count, r.stride, fields)
        })
        .collect()
}

// ---- Checks ------------------------------------------------------------

/// What is wrong with one source's map on its own: duplicate names,
/// registers that overlap or leave BAR0, fields that overlap or leave the
/// register.
fn check_shape(source: &str, regs: &[Reg]) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = BTreeMap::new();
    let mut words: BTreeMap<u64, (&str, u32)> = BTreeMap::new();
    for r in regs {
        if names.insert(&r.name, ()).is_some() {
            out.push(format!("{source}: {} defined twice", r.name));
        }
        if r.count == 0 || r.offset % 4 != 0 || (r.count > 1 && (r.stride < 4 || r.stride % 4 != 0))
        {
            out.push(format!(
                "{source}: {} at {:#x}, {}: not aligned 32-bit registers",
                r.name,
                r.offset,
                shape(r)
            ));
            continue;
        }
        for i in 0..r.count {
            let at = r.offset + u64::from(i) * r.stride;
            if at + 4 > BAR0_SIZE {
                out.push(format!(
                    "{source}: {}[{i}] at {at:#x} is beyond BAR0",
                    r.name
                ));
                break;
            }
            if let Some((other, j)) = words.insert(at, (&r.name, i)) {
                out.push(format!(
                    "{source}: {}[{i}] at {at:#x} overlaps {other}[{j}]",
                    r.name
                ));
                break;
            }
        }
        let mut bits = 0u64;
        let mut fields = BTreeMap::new();
        for f in &r.fields {
            if fields.insert(&f.name, ()).is_some() {
                out.push(format!("{source}: {}.{} defined twice", r.name, f.name));
            }
            if f.lo > f.hi || f.hi > 31 {
                out.push(format!(
                    "{source}: {}.{}: {f} is not a bit range of 31:0",
                    r.name, f.name
                ));
                continue;
            }
            let mask = ((1u64 << (f.hi - f.lo + 1)) - 1) << f.lo;
            if bits & mask != 0 {
                out.push(format!(
                    "{source}: {}.{}: {f} overlaps another field",
                    r.name, f.name
                ));
            }
            bits |= mask;
        }
    }
    out
}

/// How register `b` of source `bs` differs from `a` of source `as_`.
fn diff(a: &Reg, as_: &str, b: &Reg, bs: &str, out: &mut Vec<String>) {
    let n = &a.name;
    if a.offset != b.offset {
        out.push(format!(
            "{n}: offset {as_} {:#x}, {bs} {:#x}",
            a.offset, b.offset
        ));
    }
    if (a.count, a.stride) != (b.count, b.stride) {
        out.push(format!("{n}: {as_} {}, {bs} {}", shape(a), shape(b)));
    }
    for f in &a.fields {
        match b.fields.iter().find(|g| g.name == f.name) {
            None => out.push(format!(
                "{n}.{}: in the {as_} ({f}), not in the {bs}",
                f.name
            )),
            Some(g) if g != f => out.push(format!("{n}.{}: {as_} {f}, {bs} {g}", f.name)),
            Some(_) => {}
        }
    }
    for g in &b.fields {
        if !a.fields.iter().any(|f| f.name == g.name) {
            out.push(format!(
                "{n}.{}: in the {bs} ({g}), not in the {as_}",
                g.name
            ));
        }
    }
}

/// Every disagreement between the document, the driver and the emulator.
fn compare(doc: &[Reg], driver: &[Reg], emu: &[Reg]) -> Vec<String> {
    let mut out = Vec::new();
    fn find<'a>(regs: &'a [Reg], name: &str) -> Option<&'a Reg> {
        regs.iter().find(|r| r.name == name)
    }
    for d in doc {
        match find(emu, &d.name) {
            None => out.push(format!(
                "{}: in the doc, missing from the emulator's REGISTER_MAP",
                d.name
            )),
            Some(e) => diff(d, "doc", e, "emulator", &mut out),
        }
    }
    for e in emu {
        if find(doc, &e.name).is_none() {
            out.push(format!(
                "{}: in the emulator's REGISTER_MAP, not in the doc",
                e.name
            ));
        }
    }
    for r in driver {
        match find(doc, &r.name) {
            None => out.push(format!("{}: defined by the driver, not in the doc", r.name)),
            Some(d) => diff(d, "doc", r, "driver", &mut out),
        }
    }
    out
}

/// Parses and compares the three; every problem found.
fn check(doc: &str, driver: &str, emu: &[Reg]) -> (Vec<String>, [usize; 3]) {
    let (doc_regs, mut problems) = parse_doc(doc);
    let (drv_regs, drv_errors) = parse_driver(driver);
    problems.extend(drv_errors);
    problems.extend(check_shape("doc", &doc_regs));
    problems.extend(check_shape("driver", &drv_regs));
    problems.extend(check_shape("emulator", emu));
    problems.extend(compare(&doc_regs, &drv_regs, emu));
    (problems, [doc_regs.len(), drv_regs.len(), emu.len()])
}

/// Read `path` of the repository, found from the package directory cargo names when it runs
/// the test (a test binary reused from a build of another checkout must not read that one).
fn read(path: &str) -> String {
    let p = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../../..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn register_map_matches_doc() {
    let (problems, [d, r, e]) = check(&read(DOC), &read(DRIVER), &emulator_regs(REGISTER_MAP));
    println!("{DOC}: {d} registers; {DRIVER}: {r}; emulator's REGISTER_MAP: {e}");
    assert!(
        problems.is_empty(),
        "{} disagreements in the register map:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

// ---- The checks catch changes ------------------------------------------

/// `text` with its one occurrence of `from` replaced by `to`.
fn mutate(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} is not in the text exactly once"
    );
    text.replacen(from, to, 1)
}

/// The problems found with the doc's `from` replaced by `to`.
fn doc_with(from: &str, to: &str) -> Vec<String> {
    let doc = mutate(&read(DOC), from, to);
    check(&doc, &read(DRIVER), &emulator_regs(REGISTER_MAP)).0
}

/// The problems found with the driver's `from` replaced by `to`.
fn driver_with(from: &str, to: &str) -> Vec<String> {
    let driver = mutate(&read(DRIVER), from, to);
    check(&read(DOC), &driver, &emulator_regs(REGISTER_MAP)).0
}

/// The problems found with the emulator's map changed by `change`.
fn map_with(change: impl FnOnce(&mut Vec<Reg>)) -> Vec<String> {
    let mut map = emulator_regs(REGISTER_MAP);
    change(&mut map);
    check(&read(DOC), &read(DRIVER), &map).0
}

/// Asserts that a problem is `problem`.
fn caught(problems: &[String], problem: &str) {
    assert!(
        problems.iter().any(|p| p == problem),
        "{problem:?} not found; problems: {problems:#?}"
    );
}

/// Asserts that a problem contains all of `needles`.
fn reported(problems: &[String], needles: &[&str]) {
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; problems: {problems:#?}"
    );
}

#[test]
fn doc_field_change_is_caught() {
    let p = doc_with(
        "``major`` bits 31:16, ``minor``",
        "``major`` bits 31:17, ``minor``",
    );
    caught(&p, "VERSION.major: doc bits 31:17, emulator bits 31:16");
    caught(&p, "VERSION.major: doc bits 31:17, driver bits 31:16");
    // A field the doc no longer lists (an upper-case literal is not a field).
    let p = doc_with("``fatal`` bit 1", "``FATAL`` bit 1");
    caught(&p, "STATUS.fatal: in the driver (bits 1:1), not in the doc");
    caught(
        &p,
        "STATUS.fatal: in the emulator (bits 1:1), not in the doc",
    );
}

#[test]
fn doc_offset_and_shape_changes_are_caught() {
    let p = doc_with("``0x0484``  ``CMD_STATUS``", "``0x0488``  ``CMD_STATUS``");
    caught(&p, "CMD_STATUS: offset doc 0x488, emulator 0x484");
    caught(&p, "CMD_STATUS: offset doc 0x488, driver 0x484");
    let p = doc_with("``CMD_DATA[0..31]``", "``CMD_DATA[0..15]``");
    caught(&p, "CMD_DATA: doc 16 x 0x4, driver 32 x 0x4");
    let p = doc_with("registers, ports 0 to 31,", "registers, ports 0 to 23,");
    caught(&p, "PORT_STATE: doc 24 x 0x40, emulator 32 x 0x40");
    let p = doc_with("``0x10000 + port * 0x1000``", "``0x10000 + port * 0x800``");
    caught(&p, "DB_CQ_ARM: doc 32 x 0x800, driver 32 x 0x1000");
}

#[test]
fn doc_missing_register_is_caught() {
    let p = doc_with(
        "``0x0018``  ``IRQ_TEST_COUNT``    RO    test interrupts raised since power-on\n",
        "",
    );
    caught(
        &p,
        "IRQ_TEST_COUNT: in the emulator's REGISTER_MAP, not in the doc",
    );
    // One the driver defines.
    let p = doc_with(
        "``0x0484``  ``CMD_STATUS``        RO    0, or a positive errno value\n",
        "",
    );
    caught(&p, "CMD_STATUS: defined by the driver, not in the doc");
}

#[test]
fn doc_it_cannot_read_is_reported() {
    let p = doc_with("``ready`` bit 0", "``ready`` at bit 0");
    reported(&p, &["doc, line", "field ``ready`` not followed by"]);
    let p = doc_with("``up`` bit 0", "``up`` bit 0:0");
    reported(&p, &["doc, line", "``up``", "write \"bits h:l\""]);
    let p = doc_with("``0x0308``  ``EQ_LOG_SIZE``", "``0308``    ``EQ_LOG_SIZE``");
    reported(&p, &["doc, line", "offset \"``0308``\" is not ``0x..``"]);
    let p = doc_with("registers, ports 0 to 31,", "registers");
    reported(&p, &["per-port block without \"ports 0 to n\""]);
}

#[test]
fn driver_changes_are_caught() {
    let p = driver_with("1:1 fatal => bool;", "2:2 fatal => bool;");
    caught(&p, "STATUS.fatal: doc bits 1:1, driver bits 2:2");
    let p = driver_with("15:0 minor;", "");
    caught(
        &p,
        "VERSION.minor: in the doc (bits 15:0), not in the driver",
    );
    let p = driver_with(
        "0:0 up => bool;",
        "0:0 up => bool;\n        1:1 down => bool;",
    );
    caught(
        &p,
        "PORT_STATE.down: in the driver (bits 1:1), not in the doc",
    );
    let p = driver_with("CMD_STATUS(u32) @ 0x0484", "CMD_STATUS(u32) @ 0x0488");
    caught(&p, "CMD_STATUS: offset doc 0x484, driver 0x488");
    let p = driver_with(
        "PORT_SPEED(u32)[32, stride = 0x40]",
        "PORT_SPEED(u32)[32, stride = 0x44]",
    );
    caught(&p, "PORT_SPEED: doc 32 x 0x40, driver 32 x 0x44");
    let p = driver_with("CMD_DATA(u32)[32] @", "CMD_DATA(u32) @");
    caught(&p, "CMD_DATA: doc 32 x 0x4, driver single");
    let p = driver_with(
        "}\n\n/// Words of",
        "    pub(crate) BOGUS(u32) @ 0x0500 {}\n}\n\n/// Words of",
    );
    caught(&p, "BOGUS: defined by the driver, not in the doc");
}

#[test]
fn driver_it_cannot_read_is_reported() {
    let p = driver_with("CMD_STATUS(u32) @ 0x0484", "CMD_STATUS(u32) @ CMD_BASE");
    reported(&p, &["driver, line", "expected a numeric offset"]);
    let p = driver_with("SCRATCH(u32) @", "SCRATCH(u64) @");
    reported(&p, &["driver, line", "SCRATCH is u64"]);
    let p = driver_with("register! {", "regs! {");
    caught(&p, "driver: no register! block");
}

#[test]
fn emulator_map_changes_are_caught() {
    let p = map_with(|m| m.retain(|r| r.name != "IRQ_TEST_COUNT"));
    caught(
        &p,
        "IRQ_TEST_COUNT: in the doc, missing from the emulator's REGISTER_MAP",
    );

    let p = map_with(|m| {
        let status = m.iter_mut().find(|r| r.name == "STATUS").unwrap();
        status
            .fields
            .iter_mut()
            .find(|f| f.name == "fatal")
            .unwrap()
            .lo = 2;
    });
    caught(&p, "STATUS.fatal: doc bits 1:1, emulator bits 1:2");
    caught(
        &p,
        "emulator: STATUS.fatal: bits 1:2 is not a bit range of 31:0",
    );

    let p = map_with(|m| m.iter_mut().find(|r| r.name == "EQ_PI").unwrap().offset = 0x0310);
    caught(&p, "EQ_PI: offset doc 0x314, emulator 0x310");
    caught(&p, "emulator: EQ_PI[0] at 0x310 overlaps EQ_CI[0]");

    let p = map_with(|m| {
        m.iter_mut()
            .find(|r| r.name == "PORT_RNR_NAKS_SENT")
            .unwrap()
            .count = 24
    });
    caught(&p, "PORT_RNR_NAKS_SENT: doc 32 x 0x40, emulator 24 x 0x40");
}

#[test]
fn parser_reads_tables_and_ignores_the_others() {
    let doc = "\
Title
=====

Some text.

==========  ==========
Vendor      ``1da3``
Class       ``0x1200``
==========  ==========

A
-

==========  ====================  ====  ===========================
Offset      Name                  Acc.  Meaning
==========  ====================  ====  ===========================
``0x0000``  ``ID``                RO    ``0x47415532``
``0x0004``  ``CTRL``              RW    ``go`` bit 0: start;
                                        ``mode`` bits 7:4, ``x``
                                        bit 31
``0x0040``  ``DATA[0..3]``        RW    words
==========  ====================  ====  ===========================

An entry:

=======  =====  ==========
Offset   Size   Field
=======  =====  ==========
0        1      type
1        1      ``owner`` bit 0
=======  =====  ==========

Doorbells
=========

A page at ``0x10000 +
port * 0x1000`` (ports 0 to 7).

==========  ==============  ===================
Offset      Name            Value written
==========  ==============  ===================
``0x08``    ``CQ``          ``cqn`` bits 31:16,
                            ``ci`` bits 15:0
==========  ==============  ===================
";
    let (regs, errors) = parse_doc(doc);
    assert_eq!(errors, Vec::<String>::new());
    let f = |name: &str, hi, lo| Fld {
        hi,
        lo,
        name: name.to_string(),
    };
    assert_eq!(
        regs,
        vec![
            Reg::new("ID", 0, 1, 4, vec![]),
            Reg::new(
                "CTRL",
                4,
                1,
                4,
                vec![f("x", 31, 31), f("mode", 7, 4), f("go", 0, 0)]
            ),
            Reg::new("DATA", 0x40, 4, 4, vec![]),
            Reg::new(
                "DB_CQ",
                0x10008,
                8,
                0x1000,
                vec![f("cqn", 31, 16), f("ci", 15, 0)]
            ),
        ]
    );
}

#[test]
fn driver_parser_reads_the_register_syntax() {
    let text = "\
use kernel::io::register; // not a block
register! {
    /// A doc comment with a { brace.
    pub(crate) A(u32) @ 0x0010 {}
    #[allow(dead_code)]
    B(u32)[8, stride = 0x1_000] @ 0x2000 {
        /// Doc.
        31:16 hi as u16;
        3:3 flag => bool;
        2:0 mode ?=> Mode;
    }
    pub(crate) C(u32)[4] @ 0x30 {}
}
";
    let (regs, errors) = parse_driver(text);
    assert_eq!(errors, Vec::<String>::new());
    let f = |name: &str, hi, lo| Fld {
        hi,
        lo,
        name: name.to_string(),
    };
    assert_eq!(
        regs,
        vec![
            Reg::new("A", 0x10, 1, 4, vec![]),
            Reg::new(
                "B",
                0x2000,
                8,
                0x1000,
                vec![f("hi", 31, 16), f("flag", 3, 3), f("mode", 2, 0)]
            ),
            Reg::new("C", 0x30, 4, 4, vec![]),
        ]
    );
}
