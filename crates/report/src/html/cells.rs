//! The pieces every section builds with: figures as text, table cells and rows, a figure with its
//! caption, and the note for a section with nothing measured.

use std::fmt::Write as _;

use crate::model::Latency;
use crate::svg::{esc, fmt_num};

/// Nanoseconds as microseconds for tables and axes.
pub(super) fn us(ns: f64) -> String {
    fmt_num(ns / 1000.0)
}

pub(super) fn opt_us(ns: Option<f64>) -> String {
    ns.map_or_else(|| "–".to_owned(), us)
}

pub(super) fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), fmt_num)
}

pub(super) fn size_label(size: u32) -> String {
    if size >= 1024 && size.checked_rem(1024) == Some(0) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

pub(super) fn swatch(color: &str) -> String {
    format!(r#"<span class="swatch" style="background:{color}"></span>"#)
}

pub(super) fn empty(out: &mut String, what: &str) {
    let _ = write!(out, r#"<p class="empty">No {} in this run.</p>"#, esc(what));
}

pub(super) fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = write!(out, "<figure>{svg}<figcaption>{caption}</figcaption></figure>");
}

/// A table row for something not measured: its identifying cells (the first `left` of them
/// left-aligned, like the column heads), then the reason across the remaining `span` columns.
pub(super) fn skip_row(out: &mut String, lead: &[String], left: usize, span: usize, reason: &str) {
    out.push_str(r#"<tr class="skip">"#);
    for (i, l) in lead.iter().enumerate() {
        let class = if i < left { r#" class="l""# } else { "" };
        let _ = write!(out, "<td{class}>{l}</td>");
    }
    let _ = write!(out, r#"<td class="skipnote" colspan="{span}">skipped: {}</td></tr>"#, esc(reason));
}

pub(super) fn lat_cells(l: Option<Latency>) -> String {
    match l {
        Some(l) => format!("<td>{}</td><td>{}</td>", us(l.p50_ns), us(l.p99_ns)),
        None => "<td>–</td><td>–</td>".to_owned(),
    }
}

pub(super) fn note_cell(skipped: &Option<String>) -> String {
    match skipped {
        Some(s) => format!(r#"<td class="skipnote muted">{}</td>"#, esc(s)),
        None => "<td></td>".to_owned(),
    }
}
