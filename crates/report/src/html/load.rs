//! Section 4, load: latency against offered load beside the queueing model, per transport. The
//! figure and table of one series of open-loop points ([`latency_against_load`]) are also the
//! saturation section's.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, opt_num, opt_us, size_label, us};
use crate::model::{model_response_ns, LoadPoint, LoadSeries};
use crate::svg::{esc, fmt_num, Axis, LinePlot, Scale, Series, Style};

pub(super) fn load(out: &mut String, series: &[LoadSeries]) {
    out.push_str(
        "<p>Requests are sent on a fixed schedule at a fraction of the measured capacity, whether \
         or not earlier ones have been answered, and each latency is counted from the moment its \
         request <i>should</i> have been sent, so a stall cannot hide the requests queued behind it \
         (no coordinated omission). The dashed line is the prediction of a single-server queue from \
         Lampson's handout, <b>r = s/(1−u)</b>: the service time s (1 ÷ capacity) stretched by the \
         utilisation u. Latency rising sooner than the model means the system saturates before its \
         nominal capacity.</p>",
    );
    if series.is_empty() {
        return empty(out, "load measurements");
    }
    for s in series {
        let _ = write!(out, "<h3>{} · {} {}</h3>", esc(&s.transport), esc(&s.proc.to_uppercase()), size_label(s.size));
        if let Some(reason) = &s.skipped {
            let _ = write!(out, r#"<p class="empty">skipped: {}</p>"#, esc(reason));
        }
        latency_against_load(
            out,
            &format!("{}: latency against offered load", s.transport),
            "offered load (% of capacity)",
            &s.points,
            s.service_ns,
            &format!(
                "Capacity {} calls/s; service time s = {} µs.",
                opt_num(s.capacity_calls_per_s),
                opt_us(s.service_ns)
            ),
        );
    }
}

/// Colours of the measured p50, p99, p99.9 and of the model.
const COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#d62728", "#52606d"];

/// The plot of `points`' latencies (p50, p99, p99.9) against their offered load u, with the
/// model r = s/(1−u) beside them (a curve from u = 0 when the service time s is known, else
/// through the points' own `model_ns`), then their table. Nothing for no points.
pub(super) fn latency_against_load(
    out: &mut String,
    title: &str,
    x_label: &str,
    points: &[LoadPoint],
    service_ns: Option<f64>,
    caption: &str,
) {
    if points.is_empty() {
        return;
    }
    let pct = |u: f64| u * 100.0;
    let mut lines: Vec<Series> = [("p50", 0usize), ("p99", 1), ("p99.9", 2)]
        .iter()
        .map(|&(name, i)| Series {
            name: format!("measured {name}"),
            color: COLORS[i].into(),
            points: points
                .iter()
                .map(|p| {
                    let v = [p.p50_ns, p.p99_ns, p.p999_ns][i];
                    (pct(p.offered_fraction), v / 1000.0)
                })
                .collect(),
            style: Style::LineMarkers,
        })
        .collect();
    // The model as a curve up to the highest load offered (it is infinite at u = 1).
    let top = points.iter().map(|p| p.offered_fraction).fold(0.0, f64::max).min(0.99);
    let model: Vec<(f64, f64)> = match service_ns {
        Some(s) if s.is_finite() && s > 0.0 => {
            let steps = 60;
            (0..=steps)
                .map(|i| top * f64::from(i) / f64::from(steps))
                .map(|u| (pct(u), model_response_ns(s, u) / 1000.0))
                .collect()
        }
        _ => points.iter().map(|p| (pct(p.offered_fraction), p.model_ns / 1000.0)).collect(),
    };
    lines.push(Series { name: "model s/(1−u)".into(), color: COLORS[3].into(), points: model, style: Style::Dashed });
    let x = Axis { label: x_label.into(), scale: Scale::Linear, min: 0.0, max: 100.0 };
    let y = Axis::fit(
        "latency (µs, log scale)",
        Scale::Log,
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
        false,
    );
    figure(out, &LinePlot { title: title.into(), x, y, series: lines }.render(), caption);
    out.push_str(
        r#"<table><tr><th>offered load</th><th>offered calls/s</th><th>achieved calls/s</th><th>p50</th><th>p99</th><th>p99.9</th><th>model r</th><th>generator</th></tr>"#,
    );
    for p in points {
        // A point whose generator fell behind measured its own backlog too: say so.
        let mut generator = match (p.sustained, p.max_lag_ns) {
            (Some(false), lag) => format!("not sustained (lag up to {})", lag.map_or("?".into(), us)),
            (Some(true), Some(lag)) => format!("on schedule (lag up to {})", us(lag)),
            _ => "-".into(),
        };
        if let (Some(late), Some(floor)) = (p.late_fraction, p.floor_late_fraction) {
            let _ =
                write!(generator, "; {:.1}% of sends late, the machine's floor {:.1}%", 100.0 * late, 100.0 * floor);
        }
        if let Some(lag) = p.floor_max_lag_ns {
            let _ = write!(generator, " (its latest send {})", us(lag));
        }
        let _ = write!(
            out,
            "<tr><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            fmt_num(pct(p.offered_fraction)),
            fmt_num(p.offered_calls_per_s),
            fmt_num(p.achieved_calls_per_s),
            us(p.p50_ns),
            us(p.p99_ns),
            us(p.p999_ns),
            us(p.model_ns),
            generator
        );
    }
    out.push_str("</table>");
}
