// SPDX-License-Identifier: GPL-2.0

//! `uapi_layout`: the uAPI bindings follow the headers, and nobody copies the headers by hand.
//!
//! 1. Layout. A C program (`gaudi_verbs::uapi::layout::C_PROGRAM`, which `build.rs` writes)
//!    built with the system's C compiler (`$CC`, else `cc`) prints `sizeof` and `offsetof` of
//!    every field of every structure of the headers: the driver's `gaudi-abi.h`,
//!    `gaudi_user_ioctl_verbs.h`, `gaudi_user_ioctl_cmds.h`, and the core's headers the library
//!    uses. The bindings (`size_of`, and each field's offset and size) and the header parser
//!    of `build.rs` (the fuzzer's table) must agree with it; every disagreement is printed.
//!    Every structure of the driver's headers (a plain search of their text for `struct NAME
//!    {`, and every `gaudi_ib_*` of the bindings) must be in the table, laid out by the
//!    parser, and in the bindings with every field.
//! 2. No hand copies. The sources of the test library (`tools/testing/gaudi-verbs/src`), the
//!    emulator (`tools/testing/gaudi-emu/src`) and the driver (`drivers/infiniband/hw/gaudi`)
//!    must not define a struct named after a structure of the driver's headers, a
//!    `#[repr(C)]` struct whose comments name one (`struct gaudi_ib_...`), or a struct with
//!    the same fields as one; invoke `uapi_struct!`; compute ids as `NS_DRIVER + n`,
//!    `NS + n` or `UVERBS_ID_DRIVER_NS + n`, or set one to the namespace's first id; define a
//!    constant named as one of the headers' (`GAUDI_IB_...`); or make an id of the headers with
//!    `driver_ns_id()`. Any of these fails the test.
//!
//! The other tests of this file show each check catching a mutation.

use gaudi_verbs::table;
use gaudi_verbs::uapi::layout;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Whether the driver (drivers/infiniband/hw/gaudi/*.rs) takes its uAPI from generated
/// bindings (the kernel's `uapi` crate): its hand copies fail the test as the library's and
/// the emulator's do.
const DRIVER_CONVERTED: bool = true;

// ---------------------------------------------------------------------------------------------
// Layout.

/// What the C compiler says: structure sizes, and (offset, size) of each field.
#[derive(Clone, Debug, Default)]
struct CLayout {
    sizes: BTreeMap<String, u64>,
    fields: BTreeMap<(String, String), (u64, u64)>,
}

/// A structure as the table has it, the bindings' functions run.
#[derive(Clone, Debug)]
struct Layout {
    name: String,
    header: String,
    driver: bool,
    /// As the parser has it.
    size: u64,
    /// In the bindings.
    rust_size: Option<u64>,
    fields: Vec<FieldLayout>,
}

#[derive(Clone, Debug)]
struct FieldLayout {
    path: String,
    /// Offset and (element) size as the parser has them.
    parser: (u64, u64),
    /// In the bindings.
    rust: Option<(u64, u64)>,
}

fn table_layouts() -> Vec<Layout> {
    layout::STRUCTS
        .iter()
        .map(|r| Layout {
            name: r.name.into(),
            header: r.header.into(),
            driver: r.driver,
            size: r.size,
            rust_size: r.rust_size.map(|s| s as u64),
            fields: r
                .fields
                .iter()
                .map(|f| FieldLayout {
                    path: f.path.into(),
                    parser: (f.offset, f.size),
                    rust: f.rust.map(|g| {
                        let (o, s) = g();
                        (o as u64, s as u64)
                    }),
                })
                .collect(),
        })
        .collect()
}

/// Build and run the C program; what it printed.
fn run_c_program() -> CLayout {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("uapi_layout");
    std::fs::create_dir_all(&dir).expect("a directory for the C program");
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, layout::C_PROGRAM).expect("write the C program");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-O0", "-o"])
        .arg(&exe)
        .arg(format!("-I{}", layout::C_INCLUDE))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("uapi_layout: cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "uapi_layout: `{cc}` failed on {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().expect("run the C program");
    assert!(out.status.success(), "uapi_layout: the C program failed");
    parse_c_output(&String::from_utf8_lossy(&out.stdout))
}

fn parse_c_output(text: &str) -> CLayout {
    let mut c = CLayout::default();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        let num = |s: &str| s.parse::<u64>().expect("a number");
        match w.as_slice() {
            ["S", name, size] => {
                c.sizes.insert(name.to_string(), num(size));
            }
            ["F", name, path, offset, size] => {
                c.fields.insert(
                    (name.to_string(), path.to_string()),
                    (num(offset), num(size)),
                );
            }
            _ => panic!("uapi_layout: the C program printed {l:?}"),
        }
    }
    c
}

/// The C compiler's layout, once for all the tests.
fn c_layout() -> &'static CLayout {
    static C: OnceLock<CLayout> = OnceLock::new();
    C.get_or_init(run_c_program)
}

/// Every disagreement between the C compiler, the bindings and the parser.
fn compare(c: &CLayout, table: &[Layout]) -> Vec<String> {
    let mut bad = Vec::new();
    for s in table {
        let Some(&csize) = c.sizes.get(&s.name) else {
            bad.push(format!("struct {}: not in the C program's output", s.name));
            continue;
        };
        if s.size != csize {
            bad.push(format!(
                "struct {} ({}): size {} in C, {} as the header parser has it",
                s.name, s.header, csize, s.size
            ));
        }
        match s.rust_size {
            Some(r) if r != csize => bad.push(format!(
                "struct {} ({}): size {} in C, {} in the bindings",
                s.name, s.header, csize, r
            )),
            None if s.driver => bad.push(format!(
                "struct {} ({}): not in the bindings",
                s.name, s.header
            )),
            _ => {}
        }
        for f in &s.fields {
            let Some(&(co, cs)) = c.fields.get(&(s.name.clone(), f.path.clone())) else {
                bad.push(format!(
                    "{}.{}: not in the C program's output",
                    s.name, f.path
                ));
                continue;
            };
            if f.parser != (co, cs) {
                bad.push(format!(
                    "{}.{} ({}): offset {co}, size {cs} in C; offset {}, size {} as the header \
                     parser has it",
                    s.name, f.path, s.header, f.parser.0, f.parser.1
                ));
            }
            match f.rust {
                Some((ro, rs)) if (ro, rs) != (co, cs) => bad.push(format!(
                    "{}.{} ({}): offset {co}, size {cs} in C; offset {ro}, size {rs} in the \
                     bindings",
                    s.name, f.path, s.header
                )),
                None if s.driver => bad.push(format!(
                    "{}.{} ({}): not reached in the bindings",
                    s.name, f.path, s.header
                )),
                _ => {}
            }
        }
        if s.driver && s.fields.is_empty() {
            bad.push(format!("struct {} ({}): no fields", s.name, s.header));
        }
    }
    bad
}

/// The structures and unions a header's text defines (`struct NAME {`), comments removed.
fn defined_in(text: &str) -> Vec<String> {
    let text = strip_c_comments(text);
    let toks: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '{'))
        .flat_map(|t| {
            // `{` as a token of its own.
            let mut v = Vec::new();
            let mut rest = t;
            while let Some(k) = rest.find('{') {
                if k > 0 {
                    v.push(&rest[..k]);
                }
                v.push("{");
                rest = &rest[k + 1..];
            }
            if !rest.is_empty() {
                v.push(rest);
            }
            v
        })
        .filter(|t| !t.is_empty())
        .collect();
    toks.windows(3)
        .filter(|w| (w[0] == "struct" || w[0] == "union") && w[2] == "{")
        .map(|w| w[1].to_string())
        .collect()
}

fn strip_c_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(k) = rest.find("/*") {
        out.push_str(&rest[..k]);
        rest = rest[k + 2..]
            .find("*/")
            .map_or("", |e| &rest[k + 2 + e + 2..]);
    }
    out.push_str(rest);
    out
}

/// What of the driver's headers the table, the parser or the bindings miss. `headers`: the
/// text of each of the driver's headers, by file name.
fn coverage(
    table: &[Layout],
    not_laid_out: &[(&str, &str, bool)],
    bindings: &[&str],
    headers: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut bad = Vec::new();
    let names: BTreeSet<&str> = table.iter().map(|s| s.name.as_str()).collect();
    for (name, header, driver) in not_laid_out {
        if *driver {
            bad.push(format!(
                "struct {name} ({header}): the header parser of build.rs cannot lay it out; its \
                 layout is unchecked"
            ));
        }
    }
    for (file, text) in headers {
        for name in defined_in(text) {
            if !names.contains(name.as_str()) {
                bad.push(format!("struct {name} ({file}): not in the layout table"));
            }
        }
    }
    for b in bindings.iter().filter(|b| b.starts_with("gaudi_ib_")) {
        if !names.contains(b) {
            bad.push(format!(
                "struct {b} of the bindings: not in the layout table"
            ));
        }
    }
    bad
}

fn driver_headers() -> BTreeMap<String, String> {
    layout::HEADERS
        .iter()
        .filter(|(_, driver)| *driver)
        .map(|(path, _)| {
            let p = Path::new(path);
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{path}: {e}")),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Hand copies.

/// What the scan knows of the driver's headers.
struct Uapi {
    /// Each structure with its members' names, in order.
    structs: Vec<(String, Vec<String>)>,
    /// The ids of the driver's namespace the headers have.
    ids: BTreeSet<u16>,
    /// The names of the headers' constants (enum entries, `#define`s): `GAUDI_IB_...`.
    consts: BTreeSet<String>,
}

fn uapi() -> Uapi {
    let structs = layout::STRUCTS
        .iter()
        .filter(|s| s.driver)
        .map(|s| {
            let mut members: Vec<String> = Vec::new();
            for f in s.fields {
                let m: String = f
                    .path
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if members.last() != Some(&m) {
                    members.push(m);
                }
            }
            (s.name.to_string(), members)
        })
        .collect();
    let mut ids = BTreeSet::new();
    for o in table::OBJECTS.iter().filter(|o| o.driver) {
        ids.insert(o.id);
    }
    for m in table::METHODS.iter() {
        if m.driver {
            ids.insert(m.id);
        }
        for a in m
            .attrs
            .iter()
            .filter(|a| a.id >= gaudi_verbs::uapi::UVERBS_ID_DRIVER_NS)
        {
            ids.insert(a.id);
        }
    }
    let consts = driver_headers()
        .values()
        .flat_map(|t| {
            t.split(|c: char| !is_ident(c))
                .filter(|w| w.starts_with("GAUDI_IB_"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    Uapi {
        structs,
        ids,
        consts,
    }
}

/// A hand copy: where, and what.
#[derive(Debug)]
struct Finding {
    file: String,
    line: usize,
    what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// `name` lower case without underscores (`GaudiIbPortInfo`, `gaudi_ib_port_info`).
fn squash(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Each line's code, without its `//` comment (string literals are not told apart: the
/// sources scanned have no `//` in theirs where it matters).
fn code_of(line: &str) -> &str {
    line.find("//").map_or(line, |k| &line[..k])
}

/// Positions of `word` as a whole identifier in `s`.
fn word_at(s: &str, word: &str) -> Vec<usize> {
    s.match_indices(word)
        .filter(|(k, _)| {
            let before = s[..*k].chars().next_back();
            let after = s[k + word.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
        .map(|(k, _)| k)
        .collect()
}

/// The field names of the struct whose body begins at line `at`, column `col` (its `{`).
fn struct_fields(lines: &[&str], at: usize, col: usize) -> Vec<String> {
    let mut body = String::new();
    let mut depth = 0;
    let mut prev = ' ';
    'outer: for (k, l) in lines.iter().enumerate().skip(at) {
        let code = code_of(l);
        let start = if k == at { col } else { 0 };
        for c in code[start.min(code.len())..].chars() {
            let arrow = prev == '-' && c == '>';
            prev = c;
            if arrow {
                body.push(c);
                continue;
            }
            match c {
                '{' | '(' | '[' | '<' => {
                    depth += 1;
                    if depth == 1 {
                        continue;
                    }
                }
                '}' | ')' | ']' | '>' => {
                    depth -= 1;
                    if depth == 0 {
                        break 'outer;
                    }
                }
                _ => {}
            }
            if depth == 1 && c == ',' {
                body.push('\n');
            } else if depth >= 1 {
                body.push(c);
            }
        }
        body.push(' ');
    }
    body.lines()
        .filter_map(|f| {
            let mut f = f.trim();
            while f.starts_with("#[") {
                f = f.find(']').map_or("", |e| f[e + 1..].trim_start());
            }
            for vis in ["pub(crate)", "pub(super)", "pub"] {
                if let Some(r) = f.strip_prefix(vis) {
                    f = r.trim_start();
                }
            }
            let name = ident(f);
            (!name.is_empty() && f[name.len()..].trim_start().starts_with(':'))
                .then(|| name.to_string())
        })
        .collect()
}

/// The comments and attributes right above line `k`.
fn above(lines: &[&str], k: usize) -> String {
    let mut above = String::new();
    let mut j = k;
    while j > 0 {
        let t = lines[j - 1].trim_start();
        if t.starts_with("//") || t.starts_with("#[") || t.starts_with("#!") {
            above.push_str(t);
            above.push('\n');
            j -= 1;
        } else {
            break;
        }
    }
    above
}

/// The hand copies of the driver's uAPI in `text`, the source file `file`.
fn scan(file: &str, text: &str, u: &Uapi) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut add = |line: usize, what: String| {
        found.push(Finding {
            file: file.to_string(),
            line: line + 1,
            what,
        })
    };
    // Inside a `uapi_struct!` invocation: its structures are `#[repr(C)]`.
    let mut in_macro = false;
    let mut macro_depth = 0i32;
    for (k, l) in lines.iter().enumerate() {
        let code = code_of(l);
        if !word_at(code, "uapi_struct").is_empty() && code.contains("uapi_struct!") {
            add(k, "`uapi_struct!`: a hand-written uAPI structure".into());
            in_macro = true;
            macro_depth = 0;
        }
        if in_macro {
            macro_depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        }

        // Ids computed from the namespace.
        for ns in ["NS_DRIVER", "NS", "UVERBS_ID_DRIVER_NS"] {
            for at in word_at(code, ns) {
                let after = code[at + ns.len()..].trim_start();
                if after.starts_with('+') {
                    add(k, format!("an id computed as `{ns} + n`"));
                }
            }
        }
        {
            let t = code.trim_start();
            let rest = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .unwrap_or(t);
            if let Some(decl) = rest.strip_prefix("const ") {
                let name = ident(decl);
                let value = decl
                    .split_once('=')
                    .map(|(_, v)| v.trim().trim_end_matches(';').trim());
                let last = value.map(|v| v.rsplit("::").next().unwrap_or(v));
                if matches!(last, Some("NS_DRIVER" | "NS" | "UVERBS_ID_DRIVER_NS"))
                    && !matches!(name, "NS_DRIVER" | "NS" | "UVERBS_ID_DRIVER_NS")
                {
                    add(k, format!("`{name}`: an id set to the namespace's first"));
                }
                if name.starts_with("GAUDI_IB_") {
                    add(
                        k,
                        format!("`{name}`: a constant of the headers, defined again"),
                    );
                }
                // Its comment names a constant of the headers its value does not use.
                let doc = above(&lines, k);
                for c in doc
                    .split(|c: char| !is_ident(c))
                    .filter(|w| u.consts.contains(*w))
                    .collect::<BTreeSet<_>>()
                {
                    if value.is_some_and(|v| word_at(v, c).is_empty()) && name != c {
                        add(k, format!("`{name}`: a copy of {c} (its comment names it)"));
                    }
                }
            }
        }
        for at in word_at(code, "driver_ns_id") {
            let arg = code[at + "driver_ns_id".len()..].trim_start();
            let Some(arg) = arg.strip_prefix('(') else {
                continue;
            };
            let n: String = arg.chars().take_while(|c| c.is_ascii_digit()).collect();
            let id = n
                .parse::<u16>()
                .ok()
                .map(|n| gaudi_verbs::uapi::UVERBS_ID_DRIVER_NS | n);
            if id.is_some_and(|id| u.ids.contains(&id)) {
                add(
                    k,
                    format!(
                        "`driver_ns_id({n})`: an id of the headers ({:#x}), made by hand",
                        id.unwrap()
                    ),
                );
            }
        }

        // Structure definitions.
        let mut trimmed = code.trim_start();
        // Attributes on the line of the definition.
        let mut attrs = String::new();
        while trimmed.starts_with("#[") {
            let Some(e) = trimmed.find(']') else { break };
            attrs.push_str(&trimmed[..=e]);
            trimmed = trimmed[e + 1..].trim_start();
        }
        let decl = [
            "pub(crate) struct ",
            "pub(super) struct ",
            "pub struct ",
            "struct ",
        ]
        .iter()
        .find_map(|p| trimmed.strip_prefix(p));
        if let Some(decl) = decl {
            let name = ident(decl);
            let col = code.len() - trimmed.len() + (trimmed.len() - decl.len()) + name.len();
            let above = above(&lines, k) + &attrs;
            let repr_c = above.contains("repr(C") || (in_macro && macro_depth > 0);
            let brace = lines[k..]
                .iter()
                .enumerate()
                .find_map(|(d, l)| {
                    let c = code_of(l);
                    let from = if d == 0 { col.min(c.len()) } else { 0 };
                    let rest = &c[from..];
                    let brace = rest.find('{');
                    let other = rest.find([';', '(']);
                    match (brace, other) {
                        (Some(b), o) if o.is_none_or(|o| o > b) => Some(Some((k + d, from + b))),
                        // A tuple or unit struct: no brace before its `(` or `;`.
                        (_, Some(_)) => Some(None),
                        _ => None,
                    }
                })
                .flatten();
            let fields = brace.map_or(Vec::new(), |(line, col)| struct_fields(&lines, line, col));
            for (c_name, members) in &u.structs {
                if squash(name) == squash(c_name) {
                    add(k, format!("struct `{name}`: named after struct {c_name}"));
                }
                let mentions = word_at(&above, c_name)
                    .iter()
                    .any(|at| above[..*at].trim_end().ends_with("struct"));
                if repr_c && mentions {
                    add(
                        k,
                        format!("struct `{name}`: a #[repr(C)] copy of struct {c_name} (its comment names it)"),
                    );
                }
                if fields.len() >= 2 && &fields == members {
                    add(
                        k,
                        format!("struct `{name}`: the fields of struct {c_name}, copied"),
                    );
                }
            }
        }
        if in_macro && macro_depth <= 0 && code.contains('}') {
            in_macro = false;
        }
    }
    found
}

/// The `.rs` files under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The repository: from the package directory cargo names when it runs the test (a test binary
/// reused from a build of another checkout must not read that checkout).
fn repo() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    dir.join("../../..")
}

/// The findings in the `.rs` files of `dir` (relative to the repository).
fn scan_dir(dir: &str, u: &Uapi) -> (usize, Vec<Finding>) {
    let files = rust_files(&repo().join(dir));
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
        found.extend(scan(&name, &text, u));
    }
    (files.len(), found)
}

// ---------------------------------------------------------------------------------------------

/// The structures of the driver's headers whose size is not a multiple of 8 bytes.
fn not_multiple_of_8(table: &[Layout]) -> Vec<String> {
    table
        .iter()
        .filter(|s| s.driver && s.size % 8 != 0)
        .map(|s| format!("struct {} ({}): {} bytes", s.name, s.header, s.size))
        .collect()
}

#[test]
fn uapi_layout_catches_an_unpadded_structure() {
    let mut table = table_layouts();
    assert!(not_multiple_of_8(&table).is_empty());
    let s = table
        .iter_mut()
        .find(|s| s.driver)
        .expect("a structure of the driver's headers");
    s.size += 4;
    let name = s.name.clone();
    let found = not_multiple_of_8(&table);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(&format!("struct {name} ")),
        "{found:?}"
    );
}

#[test]
fn uapi_layout() {
    let mut failures = Vec::new();

    // Layout.
    let table = table_layouts();
    let mut bad = compare(c_layout(), &table);
    bad.extend(coverage(
        &table,
        layout::NOT_LAID_OUT,
        layout::BINDINGS,
        &driver_headers(),
    ));
    let ours: Vec<&Layout> = table.iter().filter(|s| s.driver).collect();
    println!(
        "layout: {} structures of the driver's headers ({} fields) and {} of the core's, \
         checked against the C compiler: {} disagreements",
        ours.len(),
        ours.iter().map(|s| s.fields.len()).sum::<usize>(),
        table.len() - ours.len(),
        bad.len()
    );
    for b in &bad {
        println!("  {b}");
    }
    failures.extend(bad);

    // The uAPI rule of the driver's headers (as efa-abi.h): every structure is a multiple of
    // 8 bytes, padded explicitly.
    let unpadded = not_multiple_of_8(&table);
    println!(
        "structures of the driver's headers not a multiple of 8 bytes: {}",
        unpadded.len()
    );
    for u in &unpadded {
        println!("  {u}");
    }
    failures.extend(unpadded);

    // Hand copies.
    let u = uapi();
    for (dir, hard) in [
        ("tools/testing/gaudi-verbs/src", true),
        ("tools/testing/gaudi-emu/src", true),
        ("drivers/infiniband/hw/gaudi", DRIVER_CONVERTED),
    ] {
        let (files, found) = scan_dir(dir, &u);
        assert!(files > 0, "no sources in {dir}");
        let note = if hard {
            ""
        } else {
            " (reported only: DRIVER_CONVERTED is false)"
        };
        println!(
            "hand copies of the uAPI in {dir} ({files} files): {}{note}",
            found.len()
        );
        for f in &found {
            println!("  {f}");
        }
        if hard {
            failures.extend(found.iter().map(|f| f.to_string()));
        }
    }

    assert!(
        failures.is_empty(),
        "{} problems (above): the uAPI headers and their users disagree",
        failures.len()
    );
}

/// A changed offset, size or structure size, in the table or in the C compiler's layout (a
/// header changed), is caught and named.
#[test]
fn uapi_layout_catches_a_changed_layout() {
    let c = c_layout();
    let table = table_layouts();
    assert!(compare(c, &table).is_empty(), "the unchanged layouts agree");
    let at = |t: &[Layout], s: &str, f: &str| {
        let si = t.iter().position(|x| x.name == s).expect(s);
        let fi = t[si].fields.iter().position(|x| x.path == f).expect(f);
        (si, fi)
    };

    // The parser's offset of a field of the table.
    let mut t = table.clone();
    let (si, fi) = at(&t, "gaudi_ib_qp_set_modify", "dmac");
    t[si].fields[fi].parser.0 += 1;
    let bad = compare(c, &t);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("gaudi_ib_qp_set_modify.dmac") && bad[0].contains("parser"));

    // The bindings' offset and size.
    let mut t = table.clone();
    let (si, fi) = at(&t, "gaudi_ib_port_info", "speed_mbps");
    t[si].fields[fi].rust = Some((20, 4));
    let (sj, fj) = at(&t, "gaudi_ib_hbm_alloc", "length");
    t[sj].fields[fj].rust = Some((8, 4));
    let bad = compare(c, &t);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad
        .iter()
        .any(|b| b.contains("gaudi_ib_port_info.speed_mbps")));
    assert!(bad.iter().any(|b| b.contains("gaudi_ib_hbm_alloc.length")));

    // A structure's size in the bindings; a field the bindings do not reach.
    let mut t = table.clone();
    let s = t.iter_mut().find(|s| s.name == "gaudi_ib_mr_info").unwrap();
    s.rust_size = Some(48);
    s.fields[0].rust = None;
    let bad = compare(c, &t);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad
        .iter()
        .any(|b| b.contains("gaudi_ib_mr_info") && b.contains("size 40 in C")));
    assert!(bad
        .iter()
        .any(|b| b.contains("gaudi_ib_mr_info.comp_mask") && b.contains("not reached")));

    // The header changed under the bindings: the C compiler's layout differs.
    let mut c2 = c.clone();
    *c2.fields
        .get_mut(&("gaudi_ib_alloc_ucontext_resp".into(), "max_msg".into()))
        .unwrap() = (44, 8);
    *c2.sizes.get_mut("gaudi_ib_device_info").unwrap() = 32;
    let bad = compare(&c2, &table);
    // The parser and the bindings each disagree with it.
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(bad
        .iter()
        .any(|b| b.contains("gaudi_ib_alloc_ucontext_resp.max_msg")));
    assert!(bad
        .iter()
        .any(|b| b.contains("struct gaudi_ib_device_info")));

    // A core structure too.
    let mut t = table.clone();
    let (si, fi) = at(&t, "ib_uverbs_attr", "data");
    t[si].fields[fi].rust = Some((0, 8));
    assert_eq!(compare(c, &t).len(), 1);
}

/// A structure of the driver's headers the table, the parser or the bindings miss is caught.
#[test]
fn uapi_layout_catches_a_missing_structure() {
    let table = table_layouts();
    let headers = driver_headers();
    assert!(coverage(&table, layout::NOT_LAID_OUT, layout::BINDINGS, &headers).is_empty());

    // Dropped from the table.
    let t: Vec<Layout> = table
        .iter()
        .filter(|s| s.name != "gaudi_ib_qp_set_qp_info")
        .cloned()
        .collect();
    let bad = coverage(&t, layout::NOT_LAID_OUT, layout::BINDINGS, &headers);
    assert!(
        bad.iter().any(
            |b| b.contains("gaudi_ib_qp_set_qp_info") && b.contains("gaudi_user_ioctl_verbs.h")
        ),
        "{bad:?}"
    );
    assert!(bad
        .iter()
        .any(|b| b.contains("gaudi_ib_qp_set_qp_info of the bindings")));

    // A new structure in a header.
    let mut h = headers.clone();
    h.get_mut("gaudi-abi.h").unwrap().push_str(
        "\nstruct gaudi_ib_new_thing {\n\t__u32 a;\n};\n/* struct gaudi_ib_not_this { */\n",
    );
    let bad = coverage(&table, layout::NOT_LAID_OUT, layout::BINDINGS, &h);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("gaudi_ib_new_thing"));

    // One the parser cannot lay out.
    let bad = coverage(
        &table,
        &[("gaudi_ib_odd", "gaudi-abi.h", true)],
        layout::BINDINGS,
        &headers,
    );
    assert_eq!(bad.len(), 1, "{bad:?}");

    // And the C program must have printed every structure of the table.
    let mut c = c_layout().clone();
    c.sizes.remove("gaudi_ib_hbm_export");
    assert!(compare(&c, &table)
        .iter()
        .any(|b| b.contains("gaudi_ib_hbm_export: not in the C program")));
}

/// Hand copies injected into a clean source of the library are caught, each named.
#[test]
fn uapi_layout_catches_hand_copies() {
    let u = uapi();
    let path = repo().join("tools/testing/gaudi-verbs/src/dv.rs");
    let clean = std::fs::read_to_string(&path).expect("dv.rs");
    assert!(scan("dv.rs", &clean, &u).is_empty(), "the library is clean");

    let inject = |snippet: &str, want: &[&str]| {
        let text = format!("{clean}\n{snippet}\n");
        let found = scan("dv.rs", &text, &u);
        let first = clean.lines().count() + 2;
        assert!(!found.is_empty(), "not caught: {snippet}");
        for w in want {
            assert!(
                found.iter().any(|f| f.what.contains(w) && f.line >= first),
                "{snippet}: no finding with {w:?}: {found:?}"
            );
        }
        found.len()
    };

    // A #[repr(C)] copy whose comment names the header's structure.
    inject(
        "/// `struct gaudi_ib_port_info`.\n#[repr(C)]\n#[derive(Clone, Copy)]\npub struct PortReply {\n    pub comp_mask: u32,\n    pub port: u32,\n}",
        &["a #[repr(C)] copy of struct gaudi_ib_port_info"],
    );
    // The same fields, under another name and without a word about it.
    inject(
        "#[repr(C)]\nstruct Exp {\n    comp_mask: u32,\n    flags: u32,\n}",
        &["the fields of struct gaudi_ib_hbm_export"],
    );
    // On one line, with an array.
    inject(
        "#[repr(C)] struct Q { comp_mask: u32, state: u32, sq_psn: u32, rq_psn: [u8; 4] }",
        &["the fields of struct gaudi_ib_qp_set_qp_info"],
    );
    // Named after one.
    inject(
        "pub struct GaudiIbQpSetCreate;",
        &["named after struct gaudi_ib_qp_set_create"],
    );
    // The driver's macro.
    inject(
        "kernel::rdma::uapi_struct! {\n    /// `struct gaudi_ib_hbm_alloc`.\n    struct Alloc {\n        comp_mask: u32,\n        reserved: u32,\n        length: u64,\n    }\n}",
        &[
            "uapi_struct!",
            "a #[repr(C)] copy of struct gaudi_ib_hbm_alloc",
            "the fields of struct gaudi_ib_hbm_alloc",
        ],
    );
    // Ids.
    inject(
        "const METHOD_HBM_EXPORT: u16 = NS_DRIVER + 2;",
        &["`NS_DRIVER + n`"],
    );
    inject("const ATTR: u16 = NS + 1;", &["`NS + n`"]);
    inject(
        "const ATTR_CREATE_HANDLE: u16 = uverbs::NS_DRIVER;",
        &["an id set to the namespace's first"],
    );
    inject(
        "pub const GAUDI_IB_QP_SET_CREATE_INDEX: u32 = 1;",
        &["a constant of the headers, defined again"],
    );
    inject(
        "fn f() -> u16 { crate::uapi::driver_ns_id(2) }",
        &["`driver_ns_id(2)`: an id of the headers"],
    );
    inject(
        "fn f() -> u16 { UVERBS_ID_DRIVER_NS + 3 }",
        &["`UVERBS_ID_DRIVER_NS + n`"],
    );
    // A flag copied, its comment naming it.
    inject(
        "/// `GAUDI_IB_PORT_LINK_UP`.\npub const PORT_LINK_UP: u32 = 1;",
        &["a copy of GAUDI_IB_PORT_LINK_UP"],
    );

    // Not hand copies: ids the headers do not have, a comment, a structure of other fields.
    let text = format!(
        "{clean}\nconst UNKNOWN: u16 = driver_ns_id(9);\n// NS_DRIVER + 1 was the old way\n\
         /// Where `struct gaudi_ib_modify_qp` sends to.\nstruct Path {{\n    dmac: [u8; 6],\n}}\n\
         /// `GAUDI_IB_PORT_LINK_UP`, as the header has it.\n\
         const UP: u32 = uapi::GAUDI_IB_PORT_LINK_UP;\n"
    );
    assert!(scan("dv.rs", &text, &u).is_empty());
}
