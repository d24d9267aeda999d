//! Section 6, cold calls: the first call after idleness beside a warm one.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, note_cell, opt_us, swatch};
use crate::html::palette::Palette;
use crate::model::ColdRow;
use crate::svg::{esc, fmt_num, Axis, LinePlot, Scale, Series, Style};

pub(super) fn cold(out: &mut String, rows: &[ColdRow], pal: &Palette) {
    out.push_str(
        "<p>The round trip of the first call after the client and server have been idle for a \
         while, beside the median of back-to-back (warm) calls. Idleness lets CPUs drop into sleep \
         states, caches and branch predictors go cold, and spinning waiters give up and block, so \
         the first call pays for waking everything up again.</p>",
    );
    if rows.is_empty() {
        return empty(out, "cold-call measurements");
    }
    let mut idles: Vec<u32> = rows.iter().map(|r| r.idle_ms).collect();
    idles.sort_unstable();
    idles.dedup();
    let mut transports: Vec<&str> = Vec::new();
    for r in rows {
        if !transports.contains(&r.transport.as_str()) {
            transports.push(&r.transport);
        }
    }
    out.push_str(r#"<table><tr><th class="l">transport</th><th>warm p50</th>"#);
    for i in &idles {
        let _ = write!(out, "<th>after {i} ms idle</th>");
    }
    out.push_str(r#"<th class="l">note</th></tr>"#);
    for t in transports {
        let mine: Vec<&ColdRow> = rows.iter().filter(|r| r.transport == t).collect();
        let warm = mine.iter().find_map(|r| r.warm_p50_ns);
        let _ = write!(out, r#"<tr><td class="l">{}{}</td><td>{}</td>"#, swatch(&pal.color(t)), esc(t), opt_us(warm));
        for &i in &idles {
            let cell = mine.iter().find(|r| r.idle_ms == i).and_then(|r| r.first_call_ns);
            let ratio = match (cell, warm) {
                (Some(c), Some(w)) if w > 0.0 => {
                    format!(r#" <span class="muted">({}×)</span>"#, fmt_num(c / w))
                }
                _ => String::new(),
            };
            let _ = write!(out, "<td>{}{}</td>", opt_us(cell), ratio);
        }
        let reason = mine.iter().find_map(|r| r.skipped.clone());
        let _ = write!(out, "{}</tr>", note_cell(&reason));
    }
    out.push_str(
        "</table><p class=\"muted\">Times in µs; in brackets, the first call as a multiple of a warm one.</p>",
    );
    let mut series = Vec::new();
    for t in rows.iter().map(|r| r.transport.as_str()) {
        if series.iter().any(|s: &Series| s.name == t) {
            continue;
        }
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.transport == t && r.idle_ms > 0)
            .filter_map(|r| Some((f64::from(r.idle_ms), r.first_call_ns? / 1000.0)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !pts.is_empty() {
            series.push(Series { name: t.to_owned(), color: pal.color(t), points: pts, style: Style::LineMarkers });
        }
    }
    if !series.is_empty() {
        let x = Axis::fit(
            "idle time before the call (ms, log scale)",
            Scale::Log,
            series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            false,
        );
        let y = Axis::fit(
            "first call round trip (µs)",
            Scale::Linear,
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            true,
        );
        let plot = LinePlot { title: "The first call after idleness".into(), x, y, series };
        figure(out, &plot.render(), "A rising line means longer idleness costs more on the next call: deeper CPU sleep states, colder caches, or a waiter that has stopped spinning and must be woken.");
    }
}
