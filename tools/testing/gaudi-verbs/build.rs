// SPDX-License-Identifier: GPL-2.0

//! The method table of the uverbs fuzzer (`gaudi-verbs-test fuzz-uverbs`), derived from the
//! uAPI headers at build time, so that a method added to a header is fuzzed without editing
//! the fuzzer.
//!
//! Headers read:
//!
//! - the driver's namespace: `include/uapi/rdma/gaudi_user_ioctl_cmds.h` of this repository
//!   (objects, methods, attributes), with `gaudi_user_ioctl_verbs.h` and `gaudi-abi.h`
//!   (structures and values);
//! - the core's: `ib_user_ioctl_cmds.h` (objects, methods, attributes), `ib_user_ioctl_verbs.h`
//!   and `ib_user_verbs.h` (structures, values, and the write() commands that
//!   `UVERBS_METHOD_INVOKE_WRITE` carries), from the directory named by the environment variable
//!   `GAUDI_UAPI_CORE_INCLUDE`, else `/usr/include/rdma`. Point the variable at a kernel's
//!   `include/uapi/rdma` to fuzz the methods of that kernel rather than those of the installed
//!   headers (which may be older).
//!
//! What is taken from them (enum entries are evaluated as C does: `= expression` or the one
//! before plus 1; `#define`s of constants are expanded):
//!
//! - Objects: the entries of an enum named `*_OBJECT_*` (`UVERBS_OBJECT_CQ`,
//!   `GAUDI_IB_OBJECT_QP_SET`). An object's *stem* is its name after `OBJECT_`, lower case
//!   (`cq`, `qp_set`).
//! - Methods: the entries named `*_METHOD_*` of an enum. The enum's stem is its name without the
//!   namespace prefix (`uverbs_`, `gaudi_ib_`), the words `methods`, `method`, `actions` before
//!   and `_methods`, `_ops` after (`uverbs_methods_actions_flow_action_ops` -> `flow_action`,
//!   `gaudi_ib_qp_set_methods` -> `qp_set`). The methods belong to the object of that stem,
//!   looked up among the objects of the same header first, then the others (a driver may add
//!   methods to a core object); failing that, to the object whose stem begins the method's stem
//!   (the part after `METHOD_`), the longest such.
//! - Attributes: the entries named `*_ATTR_*` of an enum. The enum's stem is its name without
//!   the namespace prefix, the words `attrs`, `attr` before and `_cmd_attr_ids`, `_attr_ids`,
//!   `_ids`, `_id`, `_attrs` after. **Naming rule**: the attribute enum belongs to the method
//!   whose stem (after `METHOD_`) has the same words in any order as the enum's stem:
//!   `uverbs_attrs_create_cq_cmd_attr_ids` (`create_cq`) belongs to `UVERBS_METHOD_CQ_CREATE`
//!   (`cq_create`), `gaudi_ib_qp_set_create_attrs` to `GAUDI_IB_METHOD_QP_SET_CREATE`. Methods
//!   of the same header are tried first. An unnamed enum of attributes (`UVERBS_ATTR_UHW_IN`,
//!   `UVERBS_ATTR_UHW_OUT`) holds attributes common to every method of its header.
//! - **Fallback**: an attribute enum that names no method belongs to the object whose stem's
//!   words appear in its stem (the longest; `uverbs_attrs_async_event_create` ->
//!   `async_event`). A method that no attribute enum names takes the union of the attribute
//!   enums of its object (named by a method of the object or by the fallback); the fuzzer adds
//!   random attribute ids to such a method's calls (`Rule::Union`).
//! - The role of an attribute, from its name: in a method that creates (its stem has `create`,
//!   `alloc`, `reg` or `open`), the attribute of the lowest id, when its name ends in `_HANDLE`,
//!   is the new object's handle (`NewFd` when the name also has `_FD`); other names ending in
//!   `_HANDLE` are handles of an object, the one whose stem ends the part before `_HANDLE`
//!   (`UVERBS_ATTR_CREATE_QP_PD_HANDLE` -> PD), else of the method's object; names with `_FD`
//!   are file descriptors; names that end with an object's stem are handles of it
//!   (`UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL`); names with `RESP` or ending in `_OUT`, and those
//!   whose comment has the word `out`, are outputs; the rest inputs.
//! - The structure of an attribute: the `struct NAME` its comment in the header names
//!   (`/* struct gaudi_ib_qp_set_create, in, mandatory */`), else the structure named as the
//!   attribute (its name after `ATTR_`, lower case, with `ib_uverbs_` or the driver's
//!   `gaudi_ib_` before it, or `_ex` after it).
//! - Structures: every `struct` of the headers whose members are fixed-size integers, arrays
//!   of them, and structures or unions of those: its size, the end of its fixed part (before a
//!   flexible array member) and its fields, flattened.
//! - The write() commands: the entries of `enum ib_uverbs_write_cmds` and the extended ones
//!   (`IB_USER_VERBS_EX_CMD_*`, with `IB_USER_VERBS_CMD_FLAG_EXTENDED`), each with its request
//!   and response structure (`ib_uverbs_NAME`, `ib_uverbs_NAME_resp`, `ib_uverbs_ex_NAME`...),
//!   the driver's (`gaudi_ib_NAME`, `gaudi_ib_NAME_resp`) and the object its name ends with.
//! - Values: every enum entry and `#define` constant of the structure headers, as edges for
//!   the fuzzer's values.
//!
//! The table is written to `$OUT_DIR/uapi_table.rs` and included by `src/table.rs`.
//!
//! The same parser, run on the core's `rdma_user_ioctl_cmds.h` too, lays out the structures for
//! the uAPI bindings of `src/uapi.rs`, which `build/bindings.rs` generates with bindgen.

use std::collections::{BTreeSet, HashMap};
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

#[path = "build/bindings.rs"]
mod bindings;

/// The driver's namespace prefix, lower case (enum and structure names).
const DRIVER_PREFIX: &str = "gaudi_ib_";
/// The core's write() command flag of extended commands.
const CMD_FLAG_EXTENDED: u64 = 0x8000_0000;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(u64),
    Punct(&'static str),
    Comment(String),
    Define(String, Vec<Tok>),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

const PUNCTS: [&str; 24] = [
    "<<", ">>", "{", "}", "(", ")", "[", "]", ";", ",", "=", "+", "-", "*", "/", "%", "|", "&",
    "^", "~", "<", ">", "!", ".",
];

fn tokenize(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0, 1, true);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && line_start {
            // A preprocessor line, with its continuations.
            let start = i;
            while i < b.len() && !(b[i] == b'\n' && b[i - 1] != b'\\') {
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            let text = src[start + 1..i].replace("\\\n", " ");
            let text = text.trim_start();
            if let Some(rest) = text.strip_prefix("define") {
                let rest = rest.trim_start();
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = &rest[name.len()..];
                // Object-like macros only.
                if !name.is_empty() && !after.starts_with('(') {
                    let body = tokenize(after)
                        .into_iter()
                        .map(|t| t.tok)
                        .filter(|t| !matches!(t, Tok::Comment(_)))
                        .collect();
                    out.push(Token {
                        tok: Tok::Define(name, body),
                        line,
                    });
                }
            }
            continue;
        }
        line_start = false;
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i + 2;
            let end = src[start..].find("*/").map_or(b.len(), |e| start + e);
            let text = &src[start..end];
            out.push(Token {
                tok: Tok::Comment(text.to_string()),
                line,
            });
            line += text.matches('\n').count();
            i = (end + 2).min(b.len());
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let start = i + 2;
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Comment(src[start..i].to_string()),
                line,
            });
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(src[start..i].to_string()),
                line,
            });
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let text = src[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()
            } else if text.len() > 1 && text.starts_with('0') {
                u64::from_str_radix(&text[1..], 8).ok()
            } else {
                text.parse().ok()
            };
            if let Some(v) = v {
                out.push(Token {
                    tok: Tok::Num(v),
                    line,
                });
            }
            continue;
        }
        if c == b'"' || c == b'\'' {
            // Not in these headers outside preprocessor lines; skip the literal.
            i += 1;
            while i < b.len() && b[i] != c {
                i += 1;
            }
            i += 1;
            continue;
        }
        match PUNCTS.iter().find(|p| src[i..].starts_with(**p)) {
            Some(p) => {
                out.push(Token {
                    tok: Tok::Punct(p),
                    line,
                });
                i += p.len();
            }
            None => i += 1,
        }
    }
    out
}

/// The values of enum entries and object-like macros seen so far.
#[derive(Default)]
struct Symbols {
    values: HashMap<String, i128>,
    macros: HashMap<String, Vec<Tok>>,
}

impl Symbols {
    fn lookup(&self, name: &str, depth: u32) -> Option<i128> {
        if let Some(v) = self.values.get(name) {
            return Some(*v);
        }
        let body = self.macros.get(name)?;
        if depth > 16 {
            return None;
        }
        let mut p = ExprParser {
            toks: body,
            pos: 0,
            syms: self,
            depth: depth + 1,
        };
        let v = p.expr(0)?;
        (p.pos == body.len()).then_some(v)
    }

    fn eval(&self, toks: &[Tok]) -> Option<i128> {
        let mut p = ExprParser {
            toks,
            pos: 0,
            syms: self,
            depth: 0,
        };
        let v = p.expr(0)?;
        (p.pos == toks.len()).then_some(v)
    }
}

/// Integer constant expressions: literals, names, parentheses, unary `- ~ + !` and the binary
/// arithmetic, shift and bitwise operators.
struct ExprParser<'a> {
    toks: &'a [Tok],
    pos: usize,
    syms: &'a Symbols,
    depth: u32,
}

impl ExprParser<'_> {
    fn primary(&mut self) -> Option<i128> {
        let t = self.toks.get(self.pos)?.clone();
        self.pos += 1;
        match t {
            Tok::Num(v) => Some(v.into()),
            Tok::Ident(name) => self.syms.lookup(&name, self.depth),
            Tok::Punct("(") => {
                let v = self.expr(0)?;
                (self.toks.get(self.pos) == Some(&Tok::Punct(")"))).then(|| {
                    self.pos += 1;
                    v
                })
            }
            Tok::Punct("-") => self.primary().map(|v| -v),
            Tok::Punct("+") => self.primary(),
            Tok::Punct("~") => self.primary().map(|v| !v & 0xffff_ffff_ffff_ffff),
            Tok::Punct("!") => self.primary().map(|v| i128::from(v == 0)),
            _ => None,
        }
    }

    fn expr(&mut self, min_prec: u8) -> Option<i128> {
        let mut lhs = self.primary()?;
        loop {
            let Some(Tok::Punct(op)) = self.toks.get(self.pos) else {
                return Some(lhs);
            };
            let prec = match *op {
                "*" | "/" | "%" => 10,
                "+" | "-" => 9,
                "<<" | ">>" => 8,
                "&" => 5,
                "^" => 4,
                "|" => 3,
                _ => return Some(lhs),
            };
            if prec < min_prec {
                return Some(lhs);
            }
            let op = *op;
            self.pos += 1;
            let rhs = self.expr(prec + 1)?;
            lhs = match op {
                "*" => lhs.checked_mul(rhs)?,
                "/" => lhs.checked_div(rhs)?,
                "%" => lhs.checked_rem(rhs)?,
                "+" => lhs.checked_add(rhs)?,
                "-" => lhs.checked_sub(rhs)?,
                "<<" => lhs.checked_shl(u32::try_from(rhs).ok().filter(|s| *s < 64)?)?,
                ">>" => lhs >> u32::try_from(rhs).ok().filter(|s| *s < 64)?,
                "&" => lhs & rhs,
                "^" => lhs ^ rhs,
                _ => lhs | rhs,
            };
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    name: String,
    value: i128,
    /// The comments above the entry (and after it on its line).
    doc: String,
}

#[derive(Clone, Debug)]
struct Enum {
    /// Empty for an unnamed enum.
    name: String,
    entries: Vec<Entry>,
    /// Index of the header it comes from.
    header: usize,
}

/// One step of the path from a structure to a field of it (bindings::layout).
#[derive(Clone, Debug)]
enum Step {
    /// A member, by its name in the bindings (`__bindgen_anon_N` for an anonymous aggregate).
    Member(String),
    /// Element `k` of an array (`flexible`: a flexible array member).
    Index { k: u64, flexible: bool },
}

#[derive(Clone, Debug)]
struct Field {
    name: String,
    offset: u64,
    size: u64,
    count: u64,
    /// How to reach the field, for the layout check (the C path is `name`).
    path: Vec<Step>,
}

#[derive(Clone, Debug)]
struct Struct {
    name: String,
    size: u64,
    align: u64,
    /// Where a flexible array member begins (the size without one).
    data_end: u64,
    fields: Vec<Field>,
    /// A `union`, not a `struct`.
    union: bool,
    /// Index of the header it comes from.
    header: usize,
    /// Plain bytes: no padding, and the members of its unions (and of theirs) each as large
    /// as the union, so that every byte of a value is initialized (bindings::emit_plain).
    plain: bool,
}

/// A structure not laid out yet: name, members, whether a union, its header.
type Pending = (String, Vec<Token>, bool, usize);

#[derive(Default)]
struct Parsed {
    syms: Symbols,
    enums: Vec<Enum>,
    structs: Vec<Struct>,
    /// Structures not laid out yet.
    pending: Vec<Pending>,
}

impl Parsed {
    fn find_struct(&self, name: &str) -> Option<usize> {
        self.structs.iter().position(|s| s.name == name)
    }

    fn parse(&mut self, src: &str, header: usize) {
        let toks = tokenize(src);
        let mut i = 0;
        while i < toks.len() {
            match &toks[i].tok {
                Tok::Define(name, body) => {
                    self.syms.macros.insert(name.clone(), body.clone());
                    i += 1;
                }
                Tok::Ident(k) if k == "enum" => i = self.parse_enum(&toks, i + 1, header),
                Tok::Ident(k) if k == "struct" || k == "union" => {
                    let union = k == "union";
                    match (toks.get(i + 1), toks.get(i + 2)) {
                        (
                            Some(Token {
                                tok: Tok::Ident(name),
                                ..
                            }),
                            Some(Token {
                                tok: Tok::Punct("{"),
                                ..
                            }),
                        ) => {
                            let name = name.clone();
                            let end = matching(&toks, i + 2);
                            let body = toks[i + 3..end].to_vec();
                            match self.layout(&body, union) {
                                Some(mut s) => {
                                    s.name = name;
                                    s.header = header;
                                    self.structs.push(s);
                                }
                                // Perhaps of a structure of a header read later.
                                None => self.pending.push((name, body, union, header)),
                            }
                            i = end + 1;
                        }
                        _ => i += 1,
                    }
                }
                _ => i += 1,
            }
        }
    }

    /// Lay out the pending structures whose members are known now, until no more are; the
    /// rest (of types not known here) are left out of the table.
    fn resolve_pending(&mut self) {
        loop {
            let before = self.pending.len();
            for (name, body, union, header) in std::mem::take(&mut self.pending) {
                match self.layout(&body, union) {
                    Some(mut s) => {
                        s.name = name;
                        s.header = header;
                        self.structs.push(s);
                    }
                    None => self.pending.push((name, body, union, header)),
                }
            }
            if self.pending.len() == before {
                return;
            }
        }
    }

    fn parse_enum(&mut self, toks: &[Token], mut i: usize, header: usize) -> usize {
        let mut name = String::new();
        if let Some(Token {
            tok: Tok::Ident(n), ..
        }) = toks.get(i)
        {
            name = n.clone();
            i += 1;
        }
        if toks.get(i).map(|t| &t.tok) != Some(&Tok::Punct("{")) {
            // A use of an enum type, not a definition.
            return i;
        }
        let end = matching(toks, i);
        let mut entries: Vec<Entry> = Vec::new();
        let mut doc = String::new();
        let mut last_line = 0;
        let mut next: i128 = 0;
        i += 1;
        while i < end {
            match &toks[i].tok {
                Tok::Comment(c) => {
                    match entries.last_mut() {
                        // A comment on the line of the entry before is that entry's.
                        Some(e) if toks[i].line == last_line && doc.is_empty() => {
                            e.doc.push_str(c);
                        }
                        _ => doc.push_str(c),
                    }
                    i += 1;
                }
                Tok::Ident(n) => {
                    let n = n.clone();
                    let line = toks[i].line;
                    i += 1;
                    let mut value = next;
                    if toks[i].tok == Tok::Punct("=") {
                        let start = i + 1;
                        let mut depth = 0;
                        i = start;
                        while i < end {
                            match &toks[i].tok {
                                Tok::Punct("(") => depth += 1,
                                Tok::Punct(")") => depth -= 1,
                                Tok::Punct(",") if depth == 0 => break,
                                _ => {}
                            }
                            i += 1;
                        }
                        let expr: Vec<Tok> = toks[start..i]
                            .iter()
                            .map(|t| t.tok.clone())
                            .filter(|t| !matches!(t, Tok::Comment(_)))
                            .collect();
                        match self.syms.eval(&expr) {
                            Some(v) => value = v,
                            None => {
                                println!("cargo:warning=uAPI table: cannot evaluate {n}");
                                value = next;
                            }
                        }
                    }
                    self.syms.values.insert(n.clone(), value);
                    next = value + 1;
                    entries.push(Entry {
                        name: n,
                        value,
                        doc: std::mem::take(&mut doc),
                    });
                    last_line = line;
                }
                _ => i += 1,
            }
        }
        self.enums.push(Enum {
            name,
            entries,
            header,
        });
        end + 1
    }

    /// The layout of the members in `toks` (between the braces), or `None` if a member is of
    /// a type not known here.
    fn layout(&self, toks: &[Token], union: bool) -> Option<Struct> {
        let mut s = Struct {
            name: String::new(),
            size: 0,
            align: 1,
            data_end: u64::MAX,
            fields: Vec::new(),
            union,
            header: 0,
            plain: true,
        };
        // The size of each member, for `plain`.
        let mut members = Vec::new();
        // Anonymous aggregates are members `__bindgen_anon_1`, `_2`... in the bindings.
        let mut anon = 0;
        let mut i = 0;
        while i < toks.len() {
            if matches!(toks[i].tok, Tok::Comment(_)) {
                i += 1;
                continue;
            }
            // One member: up to its ';' at this level.
            let start = i;
            while i < toks.len() && toks[i].tok != Tok::Punct(";") {
                if toks[i].tok == Tok::Punct("{") {
                    i = matching(toks, i);
                }
                i += 1;
            }
            let member: Vec<&Token> = toks[start..i.min(toks.len())]
                .iter()
                .filter(|t| !matches!(t.tok, Tok::Comment(_)))
                .collect();
            i += 1;
            if member.is_empty() {
                continue;
            }
            let (inner, rest) = self.member_type(&member, toks, start)?;
            // The declarator: NAME, NAME[N], NAME[], or nothing (an anonymous aggregate).
            let (name, count, array) = match rest.as_slice() {
                [] => (String::new(), 1, false),
                [Tok::Ident(n)] => (n.clone(), 1, false),
                [Tok::Ident(n), Tok::Punct("["), Tok::Punct("]")] => (n.clone(), 0, true),
                [Tok::Ident(n), Tok::Punct("["), len @ .., Tok::Punct("]")] => {
                    (n.clone(), u64::try_from(self.syms.eval(len)?).ok()?, true)
                }
                _ => return None,
            };
            let offset = if union {
                0
            } else {
                s.size.next_multiple_of(inner.align)
            };
            if (!union && offset != s.size) || (!inner.plain && count != 0) {
                s.plain = false;
            }
            members.push(inner.size * count);
            if count == 0 && s.data_end == u64::MAX {
                s.data_end = offset;
            }
            s.align = s.align.max(inner.align);
            let bytes = inner.size * count;
            s.size = if union {
                s.size.max(bytes)
            } else {
                offset + bytes
            };
            let member = if name.is_empty() {
                anon += 1;
                Step::Member(format!("__bindgen_anon_{anon}"))
            } else {
                Step::Member(rust_ident(&name))
            };
            if inner.fields.is_empty() {
                s.fields.push(Field {
                    name,
                    offset,
                    size: inner.size,
                    count,
                    path: vec![member],
                });
            } else {
                for k in 0..count.clamp(1, 16) {
                    for f in &inner.fields {
                        let n = match (name.is_empty(), array) {
                            (true, _) => f.name.clone(),
                            (false, false) => format!("{name}.{}", f.name),
                            (false, true) => format!("{name}[{k}].{}", f.name),
                        };
                        let mut path = vec![member.clone()];
                        if array {
                            path.push(Step::Index {
                                k,
                                flexible: count == 0,
                            });
                        }
                        path.extend(f.path.iter().cloned());
                        s.fields.push(Field {
                            name: n,
                            offset: offset + k * inner.size + f.offset,
                            path,
                            ..f.clone()
                        });
                    }
                    if count == 0 {
                        break;
                    }
                }
            }
        }
        let end = s.size;
        s.size = s.size.next_multiple_of(s.align);
        if s.size != end || (union && members.iter().any(|m| *m != s.size)) {
            s.plain = false;
        }
        if s.data_end == u64::MAX {
            s.data_end = s.size;
        }
        Some(s)
    }

    /// The type of `member` and the tokens of its declarator.
    fn member_type(
        &self,
        member: &[&Token],
        all: &[Token],
        start: usize,
    ) -> Option<(Struct, Vec<Tok>)> {
        let toks: Vec<Tok> = member.iter().map(|t| t.tok.clone()).collect();
        let prim = |size: u64| Struct {
            name: String::new(),
            size,
            align: size,
            data_end: size,
            fields: Vec::new(),
            union: false,
            header: 0,
            plain: true,
        };
        let first = match &toks[0] {
            Tok::Ident(t) => t.as_str(),
            _ => return None,
        };
        if first == "struct" || first == "union" {
            let union = first == "union";
            if toks.get(1) == Some(&Tok::Punct("{")) {
                // An aggregate defined in place: lay it out from the original tokens.
                let open = (start..all.len()).find(|&k| all[k].tok == Tok::Punct("{"))?;
                let close = matching(all, open);
                let inner = self.layout(&all[open + 1..close], union)?;
                let after = all[close + 1..]
                    .iter()
                    .take_while(|t| t.tok != Tok::Punct(";"))
                    .map(|t| t.tok.clone())
                    .filter(|t| !matches!(t, Tok::Comment(_)))
                    .collect();
                return Some((inner, after));
            }
            let Some(Tok::Ident(n)) = toks.get(1) else {
                return None;
            };
            let s = self.structs[self.find_struct(n)?].clone();
            return Some((s, toks[2..].to_vec()));
        }
        if first == "enum" {
            return Some((prim(4), toks[2..].to_vec()));
        }
        let size = match first {
            "__u8" | "__s8" | "char" => 1,
            "__u16" | "__s16" | "__be16" | "__le16" => 2,
            "__u32" | "__s32" | "__be32" | "__le32" | "int" => 4,
            "__u64" | "__s64" | "__be64" | "__le64" | "__aligned_u64" | "__aligned_s64"
            | "__aligned_be64" | "__aligned_le64" => 8,
            _ => return None,
        };
        Some((prim(size), toks[1..].to_vec()))
    }
}

/// The name bindgen gives a member named `name`: Rust keywords get a `_` appended.
fn rust_ident(name: &str) -> String {
    const KEYWORDS: [&str; 52] = [
        "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
        "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
        "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub",
        "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "try",
        "type", "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
    ];
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// The index of the brace closing the one at `open`.
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct("{") => depth += 1,
            Tok::Punct("}") => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

fn words(s: &str) -> Vec<String> {
    s.split('_')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn sorted_words(s: &str) -> Vec<String> {
    let mut w = words(s);
    w.sort();
    w
}

/// `name` without the namespace prefix, `lead` words before and `trail` suffixes after.
fn enum_stem(name: &str, lead: &[&str], trail: &[&str]) -> String {
    let mut s = name.to_ascii_lowercase();
    for p in ["uverbs_", DRIVER_PREFIX] {
        if let Some(r) = s.strip_prefix(p) {
            s = r.to_string();
            break;
        }
    }
    'again: loop {
        for l in lead {
            if let Some(r) = s.strip_prefix(&format!("{l}_")) {
                s = r.to_string();
                continue 'again;
            }
        }
        break;
    }
    for t in trail {
        if let Some(r) = s.strip_suffix(t) {
            s = r.to_string();
            break;
        }
    }
    s
}

/// The part of an entry's name after `kind` (`OBJECT_`, `METHOD_`, `ATTR_`), lower case.
fn entry_stem(name: &str, kind: &str) -> Option<String> {
    let at = name.find(kind)?;
    Some(name[at + kind.len()..].to_ascii_lowercase())
}

/// Whether `needle`'s words appear in a row in `hay`'s.
fn contains_words(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

#[derive(Clone, Debug)]
struct Object {
    name: String,
    stem: String,
    id: i128,
    header: usize,
    driver: bool,
}

#[derive(Clone, Debug)]
enum Role {
    New,
    NewFd,
    Handle(Option<i128>),
    Fd,
    Out,
    In,
}

#[derive(Clone, Debug)]
struct Attr {
    name: String,
    id: i128,
    role: Role,
    strukt: Option<usize>,
}

#[derive(Clone, Debug)]
struct Method {
    name: String,
    stem: String,
    id: i128,
    object: usize,
    header: usize,
    driver: bool,
    creates: bool,
    destroys: bool,
    /// Indexes of the attribute enums that belong to it.
    enums: Vec<usize>,
    union: bool,
    attrs: Vec<Attr>,
}

/// The headers, in parse order (a header may use names of those before it).
struct Headers {
    paths: Vec<PathBuf>,
    /// Whether each is of the driver's namespace.
    driver: Vec<bool>,
    /// Which hold objects, methods and attributes (the others: structures and values).
    cmds: Vec<bool>,
    /// The directory of the core's headers, and of the driver's.
    core: PathBuf,
    ours: PathBuf,
}

fn headers() -> Headers {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let ours = manifest.join("../../../include/uapi/rdma");
    let ours = ours.canonicalize().unwrap_or(ours);
    println!("cargo:rerun-if-env-changed=GAUDI_UAPI_CORE_INCLUDE");
    let core = env::var_os("GAUDI_UAPI_CORE_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include/rdma"));
    let list = [
        (core.join("ib_user_ioctl_cmds.h"), false, true),
        (core.join("ib_user_ioctl_verbs.h"), false, false),
        (core.join("ib_user_verbs.h"), false, false),
        (ours.join("gaudi_user_ioctl_cmds.h"), true, true),
        (ours.join("gaudi_user_ioctl_verbs.h"), true, false),
        (ours.join("gaudi-abi.h"), true, false),
    ];
    Headers {
        paths: list.iter().map(|l| l.0.clone()).collect(),
        driver: list.iter().map(|l| l.1).collect(),
        cmds: list.iter().map(|l| l.2).collect(),
        core,
        ours,
    }
}

struct Table {
    objects: Vec<Object>,
    methods: Vec<Method>,
    common: Vec<Attr>,
    structs: Vec<Struct>,
    write_cmds: Vec<WriteCmd>,
    constants: BTreeSet<u64>,
    notes: Vec<String>,
}

#[derive(Debug)]
struct WriteCmd {
    name: String,
    command: u64,
    req: Option<usize>,
    resp: Option<usize>,
    uhw_in: Option<usize>,
    uhw_out: Option<usize>,
    object: Option<usize>,
    creates: bool,
}

const METHOD_LEAD: [&str; 3] = ["methods", "method", "actions"];
const METHOD_TRAIL: [&str; 2] = ["_methods", "_ops"];
const ATTR_LEAD: [&str; 2] = ["attrs", "attr"];
const ATTR_TRAIL: [&str; 5] = ["_cmd_attr_ids", "_attr_ids", "_ids", "_id", "_attrs"];

fn build(h: &Headers) -> Table {
    let mut p = Parsed::default();
    for (k, path) in h.paths.iter().enumerate() {
        println!("cargo:rerun-if-changed={}", path.display());
        let src = fs::read_to_string(path).unwrap_or_else(|e| {
            panic!(
                "uAPI table: cannot read {}: {e} (set GAUDI_UAPI_CORE_INCLUDE to the directory \
                 of the core's rdma uAPI headers)",
                path.display()
            )
        });
        p.parse(&src, k);
    }
    p.resolve_pending();
    let mut notes = Vec::new();
    let in_cmds = |e: &Enum| h.cmds[e.header];

    // Objects.
    let mut objects = Vec::new();
    for e in p.enums.iter().filter(|e| in_cmds(e)) {
        for en in &e.entries {
            if let Some(stem) = entry_stem(&en.name, "_OBJECT_") {
                objects.push(Object {
                    name: en.name.clone(),
                    stem,
                    id: en.value,
                    header: e.header,
                    driver: h.driver[e.header],
                });
            }
        }
    }
    // Same header first, then the others.
    let find_object = |header: usize, f: &dyn Fn(&Object) -> Option<usize>| -> Option<usize> {
        let best = |same: bool| {
            objects
                .iter()
                .enumerate()
                .filter(|(_, o)| (o.header == header) == same)
                .filter_map(|(k, o)| f(o).map(|score| (score, k)))
                .max()
                .map(|(_, k)| k)
        };
        best(true).or_else(|| best(false))
    };

    // Methods.
    let mut methods = Vec::new();
    for e in p.enums.iter().filter(|e| in_cmds(e)) {
        let ms: Vec<&Entry> = e
            .entries
            .iter()
            .filter(|en| en.name.contains("_METHOD_"))
            .collect();
        if ms.is_empty() {
            continue;
        }
        let stem = enum_stem(&e.name, &METHOD_LEAD, &METHOD_TRAIL);
        let mut object = find_object(e.header, &|o| (o.stem == stem).then_some(1));
        for en in ms {
            let mstem = entry_stem(&en.name, "_METHOD_").unwrap_or_default();
            let obj = object.or_else(|| {
                let mw = words(&mstem);
                find_object(e.header, &|o| {
                    let ow = words(&o.stem);
                    mw.starts_with(&ow).then_some(ow.len())
                })
            });
            let Some(obj) = obj else {
                notes.push(format!("{}: no object", en.name));
                println!("cargo:warning=uAPI table: no object for {}", en.name);
                continue;
            };
            object.get_or_insert(obj);
            let w = words(&mstem);
            let has = |x: &[&str]| w.iter().any(|v| x.contains(&v.as_str()));
            methods.push(Method {
                name: en.name.clone(),
                stem: mstem.clone(),
                id: en.value,
                object: obj,
                header: e.header,
                driver: h.driver[e.header],
                creates: has(&["create", "alloc", "reg", "open"]),
                destroys: has(&["destroy", "free", "dealloc", "dereg", "close"]),
                enums: Vec::new(),
                union: false,
                attrs: Vec::new(),
            });
        }
    }

    // Attribute enums: to methods by the naming rule, else to objects.
    let mut common = Vec::new();
    let mut object_enums: Vec<Vec<usize>> = vec![Vec::new(); objects.len()];
    for (k, e) in p.enums.iter().enumerate().filter(|(_, e)| in_cmds(e)) {
        if !e.entries.iter().any(|en| en.name.contains("_ATTR_")) {
            continue;
        }
        if e.name.is_empty() {
            common.push(k);
            continue;
        }
        let stem = enum_stem(&e.name, &ATTR_LEAD, &ATTR_TRAIL);
        let sw = sorted_words(&stem);
        let pick = |same: bool| {
            methods
                .iter()
                .position(|m| (m.header == e.header) == same && sorted_words(&m.stem) == sw)
        };
        if let Some(m) = pick(true).or_else(|| pick(false)) {
            methods[m].enums.push(k);
            object_enums[methods[m].object].push(k);
            continue;
        }
        let ew = words(&stem);
        match find_object(e.header, &|o| {
            let ow = words(&o.stem);
            contains_words(&ew, &ow).then_some(ow.len())
        }) {
            Some(o) => {
                notes.push(format!("{}: of object {}", e.name, objects[o].name));
                object_enums[o].push(k);
            }
            None => {
                notes.push(format!("{}: no method, no object", e.name));
                println!("cargo:warning=uAPI table: {} names no method", e.name);
            }
        }
    }

    // The structures by name, for attributes.
    let struct_named = |n: &str| p.find_struct(n);
    let attr_struct = |en: &Entry, driver: bool| -> Option<usize> {
        if let Some(at) = en.doc.find("struct ") {
            let n: String = en.doc[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if let Some(s) = struct_named(&n) {
                return Some(s);
            }
        }
        let a = entry_stem(&en.name, "_ATTR_")?;
        let prefix = if driver { DRIVER_PREFIX } else { "ib_uverbs_" };
        struct_named(&format!("{prefix}{a}")).or_else(|| struct_named(&format!("{prefix}{a}_ex")))
    };
    let role = |en: &Entry, first: bool, m: Option<&Method>| -> Role {
        let n = &en.name;
        let handle = n.ends_with("_HANDLE");
        let fd = n.contains("_FD");
        if handle && first && m.is_some_and(|m| m.creates) {
            return if fd { Role::NewFd } else { Role::New };
        }
        if handle {
            let before = entry_stem(n, "_ATTR_").unwrap_or_default();
            let before = before.strip_suffix("_handle").unwrap_or(&before);
            let bw = words(before);
            let header = m.map_or(0, |m| m.header);
            let o = find_object(header, &|o| {
                let ow = words(&o.stem);
                bw.ends_with(&ow).then_some(ow.len())
            })
            .or(m.map(|m| m.object));
            return Role::Handle(o.map(|o| objects[o].id));
        }
        if fd {
            return Role::Fd;
        }
        // Named for an object (`UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL`): a handle of it.
        let aw = words(&entry_stem(n, "_ATTR_").unwrap_or_default());
        let header = m.map_or(0, |m| m.header);
        if let Some(o) = find_object(header, &|o| {
            let ow = words(&o.stem);
            aw.ends_with(&ow).then_some(ow.len())
        }) {
            return Role::Handle(Some(objects[o].id));
        }
        // Or the comment says so: `/* array of struct gaudi_ib_qp_set_port, out, mandatory */`.
        let doc_out = en
            .doc
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == "out");
        if n.contains("RESP") || n.ends_with("_OUT") || doc_out {
            return Role::Out;
        }
        Role::In
    };
    let attrs_of = |enums: &[usize], m: Option<&Method>| -> Vec<Attr> {
        let mut out: Vec<Attr> = Vec::new();
        for &k in enums {
            let e = &p.enums[k];
            let lowest = e
                .entries
                .iter()
                .filter(|en| en.name.contains("_ATTR_"))
                .map(|en| en.value)
                .min();
            for en in e.entries.iter().filter(|en| en.name.contains("_ATTR_")) {
                if out.iter().any(|a| a.id == en.value) {
                    continue;
                }
                out.push(Attr {
                    name: en.name.clone(),
                    id: en.value,
                    role: role(en, Some(en.value) == lowest, m),
                    strukt: attr_struct(en, h.driver[e.header]),
                });
            }
        }
        out.sort_by_key(|a| a.id);
        out
    };
    for slot in methods.iter_mut() {
        let m = slot.clone();
        let (enums, union) = if m.enums.is_empty() {
            (object_enums[m.object].clone(), true)
        } else {
            (m.enums.clone(), false)
        };
        if union {
            notes.push(format!(
                "{}: no attribute enum by name; the union of {} enums of {}",
                m.name,
                enums.len(),
                objects[m.object].name
            ));
        }
        slot.attrs = attrs_of(&enums, Some(&m));
        slot.union = union;
    }
    let common = attrs_of(&common, None);

    // write() commands.
    let mut write_cmds = Vec::new();
    for e in &p.enums {
        for en in &e.entries {
            let (stem, ex) = if let Some(s) = en.name.strip_prefix("IB_USER_VERBS_EX_CMD_") {
                (s.to_ascii_lowercase(), true)
            } else if let Some(s) = en.name.strip_prefix("IB_USER_VERBS_CMD_") {
                if e.name != "ib_uverbs_write_cmds" {
                    continue;
                }
                (s.to_ascii_lowercase(), false)
            } else {
                continue;
            };
            let pick = |names: &[String]| names.iter().find_map(|n| struct_named(n));
            let base = format!("ib_uverbs_{stem}");
            let exn = format!("ib_uverbs_ex_{stem}");
            let (req, resp) = if ex {
                (
                    pick(&[exn.clone(), base.clone()]),
                    pick(&[format!("{exn}_resp"), format!("{base}_resp")]),
                )
            } else {
                (
                    pick(std::slice::from_ref(&base)),
                    pick(&[format!("{base}_resp")]),
                )
            };
            let sw = words(&stem);
            let object = find_object(0, &|o| {
                let ow = words(&o.stem);
                (!o.driver && sw.ends_with(&ow)).then_some(ow.len())
            });
            write_cmds.push(WriteCmd {
                name: en.name.clone(),
                command: u64::try_from(en.value).unwrap_or(0)
                    | if ex { CMD_FLAG_EXTENDED } else { 0 },
                req,
                resp,
                uhw_in: struct_named(&format!("{DRIVER_PREFIX}{stem}")),
                uhw_out: struct_named(&format!("{DRIVER_PREFIX}{stem}_resp")),
                object,
                creates: sw
                    .first()
                    .is_some_and(|w| ["create", "alloc", "reg", "open"].contains(&w.as_str())),
            });
        }
    }

    // Values of the structure headers.
    let mut constants = BTreeSet::new();
    for e in p.enums.iter().filter(|e| !in_cmds(e)) {
        for en in &e.entries {
            if let Ok(v) = u64::try_from(en.value) {
                constants.insert(v);
            }
        }
    }
    for name in p.syms.macros.keys() {
        if let Some(v) = p.syms.lookup(name, 0).and_then(|v| u64::try_from(v).ok()) {
            constants.insert(v);
        }
    }

    Table {
        objects,
        methods,
        common,
        structs: p.structs,
        write_cmds,
        constants,
        notes,
    }
}

fn opt(v: Option<usize>) -> String {
    v.map_or("None".into(), |v| format!("Some({v})"))
}

fn attr_code(a: &Attr) -> String {
    let role = match &a.role {
        Role::New => "Role::New".to_string(),
        Role::NewFd => "Role::NewFd".to_string(),
        Role::Handle(o) => format!(
            "Role::Handle({})",
            o.map_or("None".into(), |o| format!("Some({o})"))
        ),
        Role::Fd => "Role::Fd".to_string(),
        Role::Out => "Role::Out".to_string(),
        Role::In => "Role::In".to_string(),
    };
    format!(
        "AttrSpec {{ name: {:?}, id: {}, role: {role}, strukt: {} }}",
        a.name,
        a.id,
        opt(a.strukt)
    )
}

fn emit(t: &Table, out: &Path) {
    let mut s = String::new();
    s.push_str("// Generated by build.rs from the uAPI headers. Do not edit.\n\n");
    s.push_str("pub static OBJECTS: &[Object] = &[\n");
    for o in &t.objects {
        writeln!(
            s,
            "    Object {{ name: {:?}, id: {}, driver: {} }},",
            o.name, o.id, o.driver
        )
        .unwrap();
    }
    s.push_str("];\n\npub static METHODS: &[Method] = &[\n");
    for m in &t.methods {
        let o = &t.objects[m.object];
        writeln!(
            s,
            "    Method {{ name: {:?}, object_name: {:?}, object: {}, id: {}, driver: {}, \
             creates: {}, destroys: {}, rule: Rule::{}, attrs: &[",
            m.name,
            o.name,
            o.id,
            m.id,
            m.driver,
            m.creates,
            m.destroys,
            if m.union { "Union" } else { "Named" }
        )
        .unwrap();
        for a in &m.attrs {
            writeln!(s, "        {},", attr_code(a)).unwrap();
        }
        s.push_str("    ] },\n");
    }
    s.push_str("];\n\npub static COMMON_ATTRS: &[AttrSpec] = &[\n");
    for a in &t.common {
        writeln!(s, "    {},", attr_code(a)).unwrap();
    }
    s.push_str("];\n\npub static STRUCTS: &[Struct] = &[\n");
    for st in &t.structs {
        writeln!(
            s,
            "    Struct {{ name: {:?}, size: {}, data_end: {}, fields: &[",
            st.name, st.size, st.data_end
        )
        .unwrap();
        for f in &st.fields {
            writeln!(
                s,
                "        Field {{ name: {:?}, offset: {}, size: {}, count: {} }},",
                f.name, f.offset, f.size, f.count
            )
            .unwrap();
        }
        s.push_str("    ] },\n");
    }
    s.push_str("];\n\npub static WRITE_CMDS: &[WriteCmd] = &[\n");
    for w in &t.write_cmds {
        writeln!(
            s,
            "    WriteCmd {{ name: {:?}, command: {:#x}, req: {}, resp: {}, uhw_in: {}, \
             uhw_out: {}, object: {}, creates: {} }},",
            w.name,
            w.command,
            opt(w.req),
            opt(w.resp),
            opt(w.uhw_in),
            opt(w.uhw_out),
            w.object
                .map_or("None".into(), |o| format!("Some({})", t.objects[o].id)),
            w.creates
        )
        .unwrap();
    }
    s.push_str("];\n\npub static CONSTANTS: &[u64] = &[\n");
    for c in &t.constants {
        writeln!(s, "    {c:#x},").unwrap();
    }
    s.push_str("];\n\n/// How the table was derived where the naming rule did not apply.\n");
    s.push_str("pub static NOTES: &[&str] = &[\n");
    for n in &t.notes {
        writeln!(s, "    {n:?},").unwrap();
    }
    s.push_str("];\n");
    fs::write(out, s).expect("write the uAPI table");
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/bindings.rs");
    let h = headers();
    let t = build(&h);
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    emit(&t, &out.join("uapi_table.rs"));
    bindings::generate(&h, &out);
}
