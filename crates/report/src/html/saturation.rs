//! Section 5, saturation: calls per second with W calls in flight against the machine's
//! throughput floor, the server's CPU per call, and latency against offered load up to the
//! saturated rate beside r = s/(1−u) (the load section's figure).

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, opt_num, opt_us, skip_row, swatch};
use crate::html::load::latency_against_load;
use crate::html::palette::Palette;
use crate::model::SaturationSeries;
use crate::svg::{esc, Axis, LinePlot, Scale, Series, Style};

pub(super) fn saturation(out: &mut String, series: &[SaturationSeries], pal: &Palette) {
    out.push_str(
        "<p>One caller thread keeps <b>W</b> null calls in flight (a new call as soon as one \
         completes) against one serving thread, both polling, beside the machine's <b>throughput \
         floor</b> at the same W: the simplest pipelined exchange the machine allows on the path, \
         W messages ahead, measured in the same run (DESIGN principle 13). <b>×floor</b> is \
         lowlat's calls per second over the floor's exchanges per second. The server's CPU per call \
         is read from its serving thread's own clock (Riddoch's per-request cost); a polling server \
         counts its idle polls too, so below saturation it is the time per call, not the work. \
         Then requests are offered open loop at fractions <b>u</b> of the saturated rate (the most \
         calls per second of any W), latency counted from each request's scheduled time, beside \
         Lampson's <b>r = s/(1−u)</b> with s the median of single calls made one at a time (the \
         W = 1 row). The saturated rate is not 1/s (calls in flight overlap; a busy host stretches \
         the mean far past the median), so the curve is the single-server queue's estimate at the \
         same u, drawn for comparison: measured latency far above it means the callers or the \
         server queued more than that queue would (a point marked not sustained measured its \
         generator's backlog too).</p>",
    );
    if series.is_empty() {
        return empty(out, "saturation measurements");
    }
    table(out, series, pal);
    throughput_plot(out, series, pal);
    for s in series {
        let _ = write!(out, "<h3>{} · {} to saturation</h3>", esc(&s.transport), esc(&s.proc.to_uppercase()));
        if let Some(reason) = &s.skipped {
            let _ = write!(out, r#"<p class="empty">skipped: {}</p>"#, esc(reason));
        }
        let w = s.saturated_in_flight.map_or_else(|| "–".to_owned(), |w| w.to_string());
        latency_against_load(
            out,
            &format!("{}: latency against offered load up to saturation", s.transport),
            "offered load (% of the saturated rate)",
            &s.points,
            s.service_ns,
            &format!(
                "Saturated rate {} calls/s (W = {w}); s = {} µs, the median of one call at a time. \
                 The series took {:.1} s to measure.",
                opt_num(s.saturated_calls_per_s),
                opt_us(s.service_ns),
                s.seconds
            ),
        );
    }
}

/// Every transport's rows in one table, with what each floor is (or why there is none) below.
fn table(out: &mut String, series: &[SaturationSeries], pal: &Palette) {
    out.push_str(
        r#"<table><tr><th class="l">transport</th><th>W</th><th>calls/s</th><th>p50</th><th>p99</th><th>×floor</th><th>server CPU ns/call</th><th>floor exchanges/s</th><th>floor CPU ns/exchange (server)</th><th>(client)</th></tr>"#,
    );
    for s in series {
        if s.rows.is_empty() {
            let reason = s.skipped.as_deref().unwrap_or("nothing measured");
            skip_row(out, &[format!("{}{}", swatch(&pal.color(&s.transport)), esc(&s.transport))], 1, 9, reason);
            continue;
        }
        for r in &s.rows {
            let _ = write!(
                out,
                r#"<tr><td class="l">{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                swatch(&pal.color(&s.transport)),
                esc(&s.transport),
                r.in_flight,
                opt_num(r.calls_per_s),
                opt_us(r.p50_ns),
                opt_us(r.p99_ns),
                r.over_floor.map_or_else(|| "–".to_owned(), |x| format!("{x:.2}×")),
                opt_num(r.server_cpu_ns_per_call),
                opt_num(r.floor_exchanges_per_s),
                opt_num(r.floor_server_cpu_ns_per_exchange),
                opt_num(r.floor_client_cpu_ns_per_exchange),
            );
            if let Some(reason) = &r.skipped {
                let _ = write!(
                    out,
                    r#"<tr class="skip"><td class="l"></td><td class="skipnote" colspan="9">W = {}: {}</td></tr>"#,
                    r.in_flight,
                    esc(reason)
                );
            }
        }
    }
    out.push_str("</table>");
    for s in series {
        let what = match (&s.floor, &s.no_floor) {
            (Some(f), _) => format!("floor: {f}, {} bytes each way", s.floor_size),
            (None, Some(why)) => why.clone(),
            (None, None) => "no floor measured".into(),
        };
        let _ = write!(out, r#"<p class="muted">{}: {}</p>"#, esc(&s.transport), esc(&what));
    }
}

/// Calls per second against W per transport, each floor dashed in its transport's colour.
fn throughput_plot(out: &mut String, series: &[SaturationSeries], pal: &Palette) {
    let mut lines = Vec::new();
    for s in series {
        let color = pal.color(&s.transport);
        let rpc: Vec<(f64, f64)> =
            s.rows.iter().filter_map(|r| Some((f64::from(r.in_flight), r.calls_per_s?))).collect();
        let floor: Vec<(f64, f64)> =
            s.rows.iter().filter_map(|r| Some((f64::from(r.in_flight), r.floor_exchanges_per_s?))).collect();
        if !rpc.is_empty() {
            lines.push(Series {
                name: format!("{} calls", s.transport),
                color: color.clone(),
                points: rpc,
                style: Style::LineMarkers,
            });
        }
        if !floor.is_empty() {
            lines.push(Series { name: format!("{} floor", s.transport), color, points: floor, style: Style::Dashed });
        }
    }
    if lines.is_empty() {
        return;
    }
    let x = Axis::fit(
        "calls in flight W (log scale)",
        Scale::Log,
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)),
        false,
    );
    let y = Axis::fit(
        "calls or exchanges per second (log scale)",
        Scale::Log,
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
        false,
    );
    let plot = LinePlot { title: "Throughput against calls in flight, beside the floor".into(), x, y, series: lines };
    figure(
        out,
        &plot.render(),
        "Solid: lowlat's null calls per second from one caller thread; dashed: the machine's floor \
         at the same W, where the path has one. The gap between a pair is what lowlat's calls cost \
         beyond the simplest exchange.",
    );
}
