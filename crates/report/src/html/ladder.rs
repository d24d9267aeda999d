//! Section 1, the ladder: each transport's floor, raw ping-pong and RPC in a table, then the
//! latency distributions and the round trip against message size.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, lat_cells, note_cell, opt_us, size_label, skip_row, swatch};
use crate::html::palette::Palette;
use crate::model::{CdfSeries, LadderRow, SizeSeries};
use crate::svg::{esc, fmt_num, Axis, LinePlot, Scale, Series, Style};

pub(super) fn ladder(out: &mut String, rows: &[LadderRow], pal: &Palette) {
    out.push_str(
        "<p>Each transport first exchanges messages with no RPC layer at all (<b>raw</b> ping-pong \
         over lowlat's own transport), then makes the same exchange as a call through lowlat \
         (<b>RPC</b>: NULL for the small size, ECHO for the larger). Where lowlat's transport \
         needs more than the simplest exchange the machine allows, that simplest exchange is \
         measured too, as the <b>floor</b>: for shared memory, one message each way through \
         cache lines with its sequence word written last (no ring, no wake-ups); for UDP, two \
         connected sockets (lowlat's server answers from one unconnected socket). The ratios show \
         what the RPC layer adds on top of its transport, and what transport and RPC together \
         add to the machine's floor. One caller, one server, pinned to different CPUs where \
         possible.</p>",
    );
    if rows.is_empty() {
        return empty(out, "ladder measurements");
    }
    out.push_str(
        r#"<table><tr><th class="l">transport</th><th>size</th><th>floor p50</th><th>floor p99</th><th>raw p50</th><th>raw p99</th><th>RPC p50</th><th>RPC p99</th><th>RPC ÷ raw</th><th>raw ÷ floor</th><th>RPC ÷ floor</th><th>RPC − raw (µs)</th><th class="l">note</th></tr>"#,
    );
    let times = |x: Option<f64>| x.map_or_else(|| "–".to_owned(), |x| format!("{}×", fmt_num(x)));
    if rows.iter().any(|r| r.across_link) {
        out.push_str(
            "<p>Rows marked <b>↔ link</b> were measured across the link: the server on the other \
             host, the caller here (the <b>floor</b> of udp ↔ link is the link's own). The others \
             stayed on this machine: shared memory and Unix sockets have no meaning across hosts.</p>",
        );
    }
    for row in rows {
        let place = if row.across_link { r#" <span class="muted">↔ link</span>"# } else { "" };
        let lead =
            [format!("{}{}{place}", swatch(&pal.color(&row.transport)), esc(&row.transport)), size_label(row.size)];
        if row.floor.is_none() && row.raw.is_none() && row.rpc.is_none() {
            skip_row(out, &lead, 1, 11, row.skipped.as_deref().unwrap_or("not measured"));
            continue;
        }
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td>{}</td>{}{}{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>"#,
            lead[0],
            lead[1],
            lat_cells(row.floor),
            lat_cells(row.raw),
            lat_cells(row.rpc),
            times(row.ratio_p50),
            times(row.raw_over_floor_p50),
            times(row.rpc_over_floor_p50),
            opt_us(row.diff_p50_ns),
            note_cell(&row.skipped)
        );
    }
    out.push_str("</table>");
}

pub(super) fn cdf(out: &mut String, series: &[CdfSeries], pal: &Palette) {
    out.push_str("<h3>Latency distributions</h3>");
    if series.is_empty() {
        return empty(out, "latency distributions");
    }
    let x = Axis::fit(
        "round trip (µs, log scale)",
        Scale::Log,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.latency_ns / 1000.0)),
        false,
    );
    let y = Axis { label: "fraction of calls at or below".into(), scale: Scale::Linear, min: 0.0, max: 1.0 };
    let plot = LinePlot {
        title: "Latency CDF of null calls, per transport".into(),
        x,
        y,
        series: series
            .iter()
            .map(|s| Series {
                name: format!("{} ({} {})", s.transport, s.proc, size_label(s.size)),
                color: pal.color(&s.transport),
                points: s.points.iter().map(|p| (p.latency_ns / 1000.0, p.fraction)).collect(),
                style: Style::Line,
            })
            .collect(),
    };
    figure(
        out,
        &plot.render(),
        "Each curve climbs from 0 to 1 as more of the calls are counted. A curve further left is \
         faster; a steep curve is predictable; a curve that flattens before reaching 1 has a tail of \
         slow calls (read the p99 where it crosses 0.99).",
    );
}

pub(super) fn size_sweep(out: &mut String, series: &[SizeSeries], pal: &Palette) {
    out.push_str("<h3>Round trip against message size</h3>");
    if series.is_empty() {
        return empty(out, "message-size measurements");
    }
    let x = Axis::fit(
        "message size (bytes, log scale)",
        Scale::Log,
        series.iter().flat_map(|s| s.points.iter().map(|p| f64::from(p.size.max(1)))),
        false,
    );
    let y = Axis::fit(
        "round trip p50 (µs)",
        Scale::Linear,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.p50_ns / 1000.0)),
        true,
    );
    let plot = LinePlot {
        title: "Median round trip as the message grows".into(),
        x,
        y,
        series: series
            .iter()
            .map(|s| Series {
                name: format!("{} {}", s.transport, s.kind),
                color: pal.color(&s.transport),
                points: s.points.iter().map(|p| (f64::from(p.size.max(1)), p.p50_ns / 1000.0)).collect(),
                style: if s.kind == "raw" { Style::Dashed } else { Style::LineMarkers },
            })
            .collect(),
    };
    figure(
        out,
        &plot.render(),
        "Solid lines with dots: ECHO calls through lowlat, the same size both ways. Dashed: raw \
         ping-pong of the transport. The slope is the cost per byte (copying and, on networks, \
         serialisation); where the line starts is the fixed cost of a round trip.",
    );
}
