//! Section 3, threads: calls/s and Mbit/s with 1 to 16 callers, pinned to one CPU and not, as a
//! table (with each count's rate against one caller's) and plots.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, opt_num, swatch};
use crate::html::palette::Palette;
use crate::model::ThreadsRow;
use crate::svg::{esc, Axis, LinePlot, Scale, Series, Style};

/// Reads one figure of a threads row.
type Getter = fn(&ThreadsRow) -> Option<f64>;

pub(super) fn threads(out: &mut String, rows: &[ThreadsRow], pal: &Palette) {
    out.push_str(
        "<p>Calls per second with 1 to 16 caller threads, each waiting for its answer before the \
         next call (closed loop), as in Firefly's Table I: all pinned to the lab's client CPU, \
         then <i>unpinned</i>, left to the scheduler. <b>NULL</b> has no arguments and no \
         result; <b>MAXRESULT(1440)</b> returns 1440 bytes, one full Ethernet packet, so its \
         Mbit/s is the useful data rate. <b>x of 1</b> is each count's rate against one \
         caller's: callers that outnumber the CPUs should keep it at 0.9 or more. With 2 CPUs, \
         more threads help only while callers spend time waiting rather than computing.</p>",
    );
    if rows.is_empty() {
        return empty(out, "thread measurements");
    }
    let rounds = rows.iter().map(|r| r.rounds).max().unwrap_or(1);
    if rounds > 1 {
        let _ = write!(
            out,
            "<p>Measured in {rounds} rounds, each count of callers once a round, in turn: the \
             figures are medians over the rounds, and <b>x of 1</b> the median of each round's \
             rate against one caller's in the same round, so that a host whose speed drifts moves \
             both alike.</p>"
        );
    }
    let mut counts: Vec<u32> = rows.iter().map(|r| r.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut keys: Vec<(String, String, u32, bool)> = Vec::new();
    for r in rows {
        let k = (r.transport.clone(), r.proc.clone(), r.size, r.unpinned);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let label = |t: &str, unpinned: bool| if unpinned { format!("{t}, unpinned") } else { t.to_owned() };
    out.push_str(r#"<table><tr><th class="l">transport</th><th class="l">procedure</th><th class="l">figure</th>"#);
    for c in &counts {
        let _ = write!(out, "<th>{c} thr</th>");
    }
    out.push_str("</tr>");
    for (t, p, s, unpinned) in &keys {
        let find = |c: u32| {
            rows.iter().find(|r| {
                &r.transport == t && &r.proc == p && r.size == *s && r.unpinned == *unpinned && r.threads == c
            })
        };
        let one = find(1).and_then(|r| r.calls_per_s);
        let reasons: Vec<&str> = counts.iter().filter_map(|&c| find(c)?.skipped.as_deref()).collect();
        let proc_label = if *s > 0 { format!("{}({s})", p.to_uppercase()) } else { p.to_uppercase() };
        let figures: &[(&str, Getter)] = if *s > 0 {
            &[("calls/s", |r| r.calls_per_s), ("Mbit/s", |r| r.mbit_per_s)]
        } else {
            &[("calls/s", |r| r.calls_per_s)]
        };
        for (fname, get) in figures {
            let _ = write!(
                out,
                r#"<tr><td class="l">{}{}</td><td class="l">{}</td><td class="l">{}</td>"#,
                swatch(&pal.color(t)),
                esc(&label(t, *unpinned)),
                esc(&proc_label),
                fname
            );
            for &c in &counts {
                let _ = write!(out, "<td>{}</td>", opt_num(find(c).and_then(get)));
            }
            out.push_str("</tr>");
        }
        if one.is_some_and(|x| x > 0.0) {
            let _ = write!(out, r#"<tr><td class="l"></td><td class="l"></td><td class="l">x of 1</td>"#);
            for &c in &counts {
                let ratio = find(c).and_then(|r| r.of_one_caller(rows));
                let _ = write!(out, "<td>{}</td>", ratio.map_or("-".into(), |x| format!("{x:.2}")));
            }
            out.push_str("</tr>");
        }
        if let Some(reason) = reasons.first() {
            let _ = write!(
                out,
                r#"<tr class="skip"><td class="l"></td><td class="skipnote" colspan="{}">skipped: {}</td></tr>"#,
                counts.len() + 2,
                esc(reason)
            );
        }
    }
    out.push_str("</table>");
    for (proc_is_null, title, ylabel) in [
        (true, "NULL calls per second against caller threads", "calls per second"),
        (false, "MAXRESULT(1440) data rate against caller threads", "Mbit/s of results"),
    ] {
        let series: Vec<Series> = keys
            .iter()
            .filter(|(_, _, s, _)| (*s == 0) == proc_is_null)
            .map(|(t, p, s, unpinned)| {
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| &r.transport == t && &r.proc == p && r.size == *s && r.unpinned == *unpinned)
                    .filter_map(|r| {
                        let v = if proc_is_null { r.calls_per_s } else { r.mbit_per_s };
                        Some((f64::from(r.threads), v?))
                    })
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let style = if *unpinned { Style::Dashed } else { Style::LineMarkers };
                Series { name: label(t, *unpinned), color: pal.color(t), points: pts, style }
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let x =
            Axis::fit("caller threads", Scale::Linear, series.iter().flat_map(|s| s.points.iter().map(|p| p.0)), true);
        let values: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).collect();
        // When one transport is ten times faster than the rest, a log scale keeps them all visible.
        let lo = values.iter().copied().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(0.0, f64::max);
        let (scale, label) = if hi > 20.0 * lo {
            (Scale::Log, format!("{ylabel} (log scale)"))
        } else {
            (Scale::Linear, ylabel.to_owned())
        };
        let y = Axis::fit(&label, scale, values, scale == Scale::Linear);
        let plot = LinePlot { title: title.into(), x, y, series };
        figure(
            out,
            &plot.render(),
            "A line that keeps rising uses the extra threads; a flat line has hit a bottleneck \
             (a CPU, a lock, or the transport itself).",
        );
    }
}
