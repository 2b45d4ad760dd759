// SPDX-License-Identifier: GPL-2.0
//! Simple tables of an RST document, as the tests that hold the device
//! model documents and the code together read them. Each test uses part
//! of it.

#![allow(dead_code)]

/// A simple table of the document.
#[derive(Debug)]
pub struct Table {
    /// Title of the section the table is in.
    pub section: String,
    /// The paragraph above the table, its lines joined.
    pub intro: String,
    /// The header row; empty for a table without one.
    pub header: Vec<String>,
    pub rows: Vec<Row>,
}

#[derive(Debug)]
pub struct Row {
    /// Line number, from 1.
    pub line: usize,
    /// Cells, continuation lines joined with a space.
    pub cells: Vec<String>,
}

/// The columns (start, end) of a simple table's border line, if it is one.
fn border(line: &str) -> Option<Vec<(usize, usize)>> {
    let line = line.trim_end();
    if line.is_empty() || !line.starts_with('=') || line.chars().any(|c| c != '=' && c != ' ') {
        return None;
    }
    let mut cols = Vec::new();
    let mut start = None;
    for (i, c) in line.chars().chain(std::iter::once(' ')).enumerate() {
        match (c, start) {
            ('=', None) => start = Some(i),
            (' ', Some(s)) => {
                cols.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    // One column is a section title's overline or underline.
    (cols.len() >= 2).then_some(cols)
}

/// Whether `under` underlines the section title `title`.
fn underlines(title: &str, under: &str) -> bool {
    let under = under.trim_end();
    let Some(c) = under.chars().next() else {
        return false;
    };
    !title.trim().is_empty()
        && border(title).is_none()
        && "=-~^\"'`+*#".contains(c)
        && under.chars().all(|x| x == c)
        && under.len() >= title.trim().len()
}

/// The cells of a table line.
fn cells(line: &[char], cols: &[(usize, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, &(start, _)) in cols.iter().enumerate() {
        let end = cols.get(k + 1).map_or(line.len(), |c| c.0).min(line.len());
        let cell: String = line
            .get(start.min(end)..end)
            .unwrap_or(&[])
            .iter()
            .collect();
        out.push(cell.trim().to_string());
    }
    out
}

/// Every simple table of `text`, or what is wrong with one.
pub fn tables(text: &str, errors: &mut Vec<String>) -> Vec<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let blank = |i: usize| lines.get(i).is_none_or(|l| l.trim().is_empty());
    let mut out = Vec::new();
    let mut section = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines.get(i + 1).is_some_and(|u| underlines(lines[i], u)) {
            section = lines[i].trim().to_string();
            i += 2;
            continue;
        }
        let Some(cols) = border(lines[i]) else {
            i += 1;
            continue;
        };
        // The paragraph above.
        let mut k = i;
        while k > 0 && blank(k - 1) {
            k -= 1;
        }
        let mut intro = Vec::new();
        while k > 0 && !blank(k - 1) {
            k -= 1;
            intro.insert(0, lines[k].trim());
        }
        let mut table = Table {
            section: section.clone(),
            intro: intro.join(" "),
            header: Vec::new(),
            rows: Vec::new(),
        };
        let top = i + 1;
        let mut j = i + 1;
        loop {
            if j >= lines.len() {
                errors.push(format!("doc, line {top}: table without its closing border"));
                break;
            }
            if border(lines[j]).is_some() {
                if blank(j + 1) || !table.header.is_empty() {
                    break;
                }
                // The border below the header.
                let Some(header) = table.rows.pop() else {
                    errors.push(format!("doc, line {}: empty table header", j + 1));
                    break;
                };
                if !table.rows.is_empty() {
                    errors.push(format!("doc, line {top}: header of more than one row"));
                }
                table.header = header.cells;
                table.rows.clear();
                j += 1;
                continue;
            }
            if !blank(j) {
                let line: Vec<char> = lines[j].chars().collect();
                let c = cells(&line, &cols);
                if !c[0].is_empty() {
                    table.rows.push(Row {
                        line: j + 1,
                        cells: c,
                    });
                } else if let Some(last) = table.rows.last_mut() {
                    for (cell, more) in last.cells.iter_mut().zip(c) {
                        if !more.is_empty() {
                            cell.push(' ');
                            cell.push_str(&more);
                        }
                    }
                } else {
                    errors.push(format!(
                        "doc, line {}: continuation line without a row",
                        j + 1
                    ));
                }
            }
            j += 1;
        }
        out.push(table);
        i = j + 1;
    }
    out
}
