//! Section 2, a busy server: the ladder again while the server's CPU runs a workload.

use std::fmt::Write as _;

use crate::html::cells::{empty, lat_cells, note_cell, opt_num, size_label, skip_row};
use crate::model::BusyServer;
use crate::svg::{esc, fmt_num};

pub(super) fn busy(out: &mut String, b: &BusyServer) {
    let _ = write!(
        out,
        "<p>The ladder again, while the server's CPU also runs a CPU-bound workload ({}). The server \
         must now be woken or scheduled before it can answer, as it would be on a loaded machine. \
         <b>Slowdown</b> is how much longer the workload takes while calls arrive (1.00 = not at \
         all){}.</p>",
        esc(&b.workload),
        b.workload_alone_ns
            .map(|ns| format!("; alone, one unit of it takes {} ms", fmt_num(ns / 1e6)))
            .unwrap_or_default()
    );
    if b.rows.is_empty() {
        return empty(out, "busy-server measurements");
    }
    out.push_str(
        r#"<table><tr><th class="l">transport</th><th>size</th><th>raw p50</th><th>raw p99</th><th>RPC p50</th><th>RPC p99</th><th>round trips/s</th><th>workload slowdown</th><th class="l">note</th></tr>"#,
    );
    for row in &b.rows {
        let lead = [esc(&row.transport), size_label(row.size)];
        if row.raw.is_none() && row.rpc.is_none() {
            skip_row(out, &lead, 1, 7, row.skipped.as_deref().unwrap_or("not measured"));
            continue;
        }
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td>{}</td>{}{}<td>{}</td><td>{}</td>{}</tr>"#,
            lead[0],
            lead[1],
            lat_cells(row.raw),
            lat_cells(row.rpc),
            opt_num(row.round_trips_per_s),
            row.workload_slowdown.map_or_else(|| "–".to_owned(), |s| format!("{s:.2}×")),
            note_cell(&row.skipped)
        );
    }
    out.push_str("</table>");
}
