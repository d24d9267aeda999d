//! Section 8, accounting: where the time of a call goes, measured against predicted, and the
//! untraced call above the machine's floor.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, opt_us, swatch, us};
use crate::html::palette::Palette;
use crate::model::{Accounting, Part, ACCOUNTING_FLAG_PERCENT};
use crate::svg::{self, esc, fmt_num, Stack};

pub(super) fn accounting(out: &mut String, rows: &[Accounting]) {
    let _ = write!(
        out,
        "<p>A call split into consecutive parts from timestamps taken on one clock (client and \
         server on this host) and averaged over many calls, as in Firefly's Tables VI–VIII. Then \
         the <b>model check</b>: the total predicted from parts measured independently (the \
         transport's raw ping-pong, marshaling benchmarks, dispatch cost) against the measured \
         total. A difference above {}% is flagged: either a part is missing or wrongly measured, \
         or something contends.</p>",
        fmt_num(ACCOUNTING_FLAG_PERCENT)
    );
    if rows.is_empty() {
        return empty(out, "accounting measurements");
    }
    let mut pal = Palette::new();
    for a in rows {
        for p in a.parts.iter().chain(&a.predicted_parts) {
            pal.add(&p.name);
        }
    }
    let stacks: Vec<Stack> = rows
        .iter()
        .filter(|a| !a.parts.is_empty())
        .flat_map(|a| {
            let mut v = vec![Stack {
                label: format!("{} measured", a.transport),
                segments: a.parts.iter().map(|p| (p.name.clone(), p.ns / 1000.0)).collect(),
            }];
            if !a.predicted_parts.is_empty() {
                v.push(Stack {
                    label: format!("{} predicted", a.transport),
                    segments: a.predicted_parts.iter().map(|p| (p.name.clone(), p.ns / 1000.0)).collect(),
                });
            }
            v
        })
        .collect();
    if !stacks.is_empty() {
        figure(
            out,
            &svg::stacked_bars("Where the time of a null call goes", "mean time (µs)", &stacks, &|name: &str| {
                pal.color(name)
            }),
            "For each transport, the upper bar is the measured call cut into its parts, left to \
             right in the order they happen; the lower bar is the prediction built from separately \
             measured pieces. Equal lengths mean the parts account for the whole.",
        );
    }
    for a in rows {
        let _ = write!(out, "<h3>{}</h3>", esc(&a.transport));
        if let Some(reason) = &a.skipped {
            let _ = write!(out, r#"<p class="empty">skipped: {}</p>"#, esc(reason));
            if a.parts.is_empty() {
                continue;
            }
        }
        let _ = write!(
            out,
            r#"<table><tr><th class="l">part (mean of {} calls)</th><th>µs</th><th>% of total</th></tr>"#,
            fmt_num(a.calls as f64)
        );
        for p in &a.parts {
            part_row(out, &swatch(&pal.color(&p.name)), p);
        }
        let _ = write!(
            out,
            r#"<tr><th class="l">measured total</th><th>{}</th><th>100</th></tr>"#,
            opt_us(a.measured_total_ns)
        );
        for p in &a.predicted_parts {
            let _ = write!(
                out,
                r#"<tr><td class="l muted">predicted: {}</td><td class="muted">{}</td><td></td></tr>"#,
                esc(&p.name),
                us(p.ns)
            );
        }
        let verdict = match a.difference_percent {
            Some(_) if a.flagged => {
                format!(r#"<span class="flag">over {}%: flagged</span>"#, fmt_num(ACCOUNTING_FLAG_PERCENT))
            }
            Some(_) => r#"<span class="ok">within tolerance</span>"#.to_owned(),
            None => String::new(),
        };
        let _ = write!(
            out,
            r#"<tr><th class="l">predicted total</th><th>{}</th><th></th></tr><tr><th class="l">difference (measured − predicted)</th><th>{}</th><th class="l">{}</th></tr></table>"#,
            opt_us(a.predicted_total_ns),
            a.difference_percent.map_or_else(|| "–".to_owned(), |d| format!("{}%", fmt_num(d))),
            verdict
        );
        if !a.round_differences_percent.is_empty() {
            let each: Vec<String> = a.round_differences_percent.iter().map(|d| format!("{}%", fmt_num(*d))).collect();
            let _ = write!(
                out,
                r#"<p class="muted">The difference is the median of {} rounds, each round's parts set against its own whole: {}.</p>"#,
                each.len(),
                each.join(", ")
            );
        }
        if let Some(o) = a.timestamp_overhead_ns {
            let _ = write!(
                out,
                r#"<p class="muted">What accounting adds to a call (traced minus untraced): {} µs.</p>"#,
                us(o)
            );
        }
        floor_gap(out, a);
        instructions(out, a);
    }
}

/// Instructions per call on each side, part by part (callgrind), or why there are none.
fn instructions(out: &mut String, a: &Accounting) {
    if let Some(why) = &a.instructions_skipped {
        let _ = write!(out, r#"<p class="muted">No instruction counts: {}.</p>"#, esc(why));
    }
    for n in &a.instructions {
        let _ = write!(
            out,
            r#"<table><tr><th class="l">instructions per {} call (callgrind, {} calls; waiting not counted)</th><th>client</th><th>server</th></tr>"#,
            esc(&n.procedure),
            fmt_num(n.calls as f64)
        );
        let mut names: Vec<&str> = n.client.iter().map(|p| p.name.as_str()).collect();
        names.extend(n.server.iter().map(|p| p.name.as_str()).filter(|s| !n.client.iter().any(|c| c.name == *s)));
        let of = |side: &[crate::InstructionPart], name: &str| {
            side.iter().find(|p| p.name == name).map_or_else(String::new, |p| fmt_num(p.per_call.round()))
        };
        for name in names {
            let _ = write!(
                out,
                r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td></tr>"#,
                esc(name),
                of(&n.client, name),
                of(&n.server, name)
            );
        }
        let _ = write!(
            out,
            r#"<tr><th class="l">total (client: to its return; server: to its reply)</th><th>{}</th><th>{}</th></tr><tr><td class="l muted">server after its reply, until its next look</td><td></td><td class="muted">{}</td></tr></table>"#,
            fmt_num(n.client_total.round()),
            fmt_num(n.server_total.round()),
            fmt_num(n.server_after_reply.round())
        );
    }
}

/// One part of a call as a table row: `lead` (a swatch, or nothing), its name, µs and share.
fn part_row(out: &mut String, lead: &str, p: &Part) {
    let _ = write!(
        out,
        r#"<tr><td class="l">{}{}</td><td>{}</td><td>{:.1}</td></tr>"#,
        lead,
        esc(&p.name),
        us(p.ns),
        p.percent
    );
}

/// The untraced call above the machine's floor, part by part (where the path has a floor).
fn floor_gap(out: &mut String, a: &Accounting) {
    if let Some(why) = &a.floor_unsteady {
        let _ = write!(out, r#"<p class="muted">No comparison with the machine's floor: {}.</p>"#, esc(why));
    }
    let Some((call, ratio)) = a.over_floor() else { return };
    if a.floor_rounds_left_out > 0 {
        let _ = write!(
            out,
            r#"<p class="muted">{} round(s) left out below: the floor moved between the round's two ends.</p>"#,
            a.floor_rounds_left_out
        );
    }
    let _ = write!(
        out,
        r#"<table><tr><th class="l">the untraced call above the machine's floor (same run)</th><th>µs</th><th>% of the call</th></tr>"#
    );
    for p in &a.floor_gap {
        part_row(out, "", p);
    }
    let _ = write!(
        out,
        r#"<tr><th class="l">the null call ({}× the floor)</th><th>{}</th><th>100</th></tr></table>"#,
        fmt_num(ratio),
        us(call)
    );
}

#[cfg(test)]
mod tests {
    use crate::render_html;

    #[test]
    fn the_report_says_why_a_moving_floor_was_not_compared() {
        let mut r = crate::sample::sample_results();
        let shm = r.accounting.iter_mut().find(|a| a.transport.starts_with("shm")).expect("sample has shm");
        shm.floor_gap.clear();
        shm.floor_unsteady = Some("the floor moved during each of 3 attempts".into());
        let html = render_html(&r);
        assert!(html.contains("No comparison with the machine's floor: the floor moved during each of 3 attempts."));
        assert!(!html.contains("the untraced call above the machine's floor"));
    }

    #[test]
    fn the_report_shows_instructions_per_side_or_why_there_are_none() {
        let mut r = crate::sample::sample_results();
        let part = |name: &str, per_call: f64| crate::InstructionPart { name: name.into(), per_call };
        r.accounting[0].instructions = vec![crate::Instructions {
            procedure: "NULL".into(),
            calls: 60,
            client: vec![part("stub", 215.0), part("engine", 67.0)],
            client_total: 282.0,
            server: vec![part("engine", 126.0), part("dispatch", 159.0)],
            server_total: 285.0,
            server_after_reply: 177.0,
        }];
        r.accounting[1].instructions_skipped = Some("valgrind is not installed".into());
        let html = render_html(&r);
        assert!(html.contains("instructions per NULL call"), "no instructions table");
        // The engine's row has both sides; the stub only the client's.
        assert!(html.contains(r#"<td class="l">engine</td><td>67</td><td>126</td>"#));
        assert!(html.contains(r#"<td class="l">stub</td><td>215</td><td></td>"#));
        assert!(html.contains(r#"<td class="l">dispatch</td><td></td><td>159</td>"#));
        assert!(html.contains("No instruction counts: valgrind is not installed."));
    }
}
