//! `report.html`: one self-contained page (inline CSS and SVG, no scripts, nothing fetched) that
//! explains each section of the laboratory in words, then shows its table and plots.

use std::fmt::Write as _;

use crate::model::{
    Accounting, BusyServer, CdfSeries, ColdRow, LadderRow, Latency, LoadSeries, Part, PeerRow, Results, SizeSeries,
    ThreadsRow, ACCOUNTING_FLAG_PERCENT,
};
use crate::svg::{self, esc, fmt_num, Axis, Bar, LinePlot, Scale, Series, Stack, Style};

/// Colours that stay distinguishable next to each other and in grey print; more than the names a
/// report holds (13 transports and variants), so no two share a colour.
const PALETTE: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    "#393b79", "#637939", "#843c39", "#5254a3", "#e6550d", "#31a354", "#d6616b", "#3182bd",
];

/// Gives each name (a transport, a system, a part) the same colour everywhere on the page.
struct Palette {
    names: Vec<String>,
}

impl Palette {
    fn new() -> Self {
        Palette { names: Vec::new() }
    }

    fn add(&mut self, name: &str) {
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_owned());
        }
    }

    fn color(&self, name: &str) -> String {
        let i = self.names.iter().position(|n| n == name).unwrap_or(self.names.len());
        PALETTE[i % PALETTE.len()].to_owned()
    }
}

const CSS: &str = r#"
:root{color-scheme:light}
body{margin:0;background:#f5f7fa;color:#1f2933;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1000px;margin:0 auto;padding:24px 32px 64px;background:#fff;box-shadow:0 0 0 1px #e4e7eb}
h1{font-size:28px;margin:8px 0 4px}
h2{font-size:21px;margin:40px 0 6px;padding-top:12px;border-top:2px solid #e4e7eb}
h3{font-size:16px;margin:22px 0 6px}
p{margin:6px 0 10px;max-width:880px}
.lede{color:#3e4c59;font-size:16px}
.muted{color:#7b8794}
nav ol{columns:2;margin:8px 0 0;padding-left:22px}
nav a{color:#1f5fa8;text-decoration:none}
table{border-collapse:collapse;margin:10px 0 14px;font-size:13.5px;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e4e7eb;text-align:right;white-space:nowrap}
th{background:#f0f4f8;font-weight:600;color:#323f4b}
td.l,th.l{text-align:left}
tr.skip td{color:#7b8794;font-style:italic}
td.skipnote{white-space:normal;text-align:left;max-width:420px}
table.machine td,table.machine th{text-align:left;border:none;padding:2px 14px 2px 0;background:none}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:baseline}
.flag{display:inline-block;padding:0 6px;border-radius:8px;background:#fde8e8;color:#9b1c1c;font-weight:600;font-size:12px}
.ok{display:inline-block;padding:0 6px;border-radius:8px;background:#e3f9e5;color:#1f6f43;font-weight:600;font-size:12px}
figure{margin:12px 0 18px}
figcaption{color:#52606d;font-size:13px;max-width:880px}
.empty{padding:10px 14px;background:#f5f7fa;border-left:3px solid #9aa5b1;color:#52606d}
footer{margin-top:40px;color:#7b8794;font-size:13px}
"#;

/// Nanoseconds as microseconds for tables and axes.
fn us(ns: f64) -> String {
    fmt_num(ns / 1000.0)
}

fn opt_us(ns: Option<f64>) -> String {
    ns.map_or_else(|| "–".to_owned(), us)
}

fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), fmt_num)
}

fn size_label(size: u32) -> String {
    if size >= 1024 && size.checked_rem(1024) == Some(0) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

fn swatch(color: &str) -> String {
    format!(r#"<span class="swatch" style="background:{color}"></span>"#)
}

fn empty(out: &mut String, what: &str) {
    let _ = write!(out, r#"<p class="empty">No {} in this run.</p>"#, esc(what));
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = write!(out, "<figure>{svg}<figcaption>{caption}</figcaption></figure>");
}

/// Renders the whole report as one HTML document.
pub fn render_html(r: &Results) -> String {
    let mut pal = Palette::new();
    for name in r
        .ladder
        .iter()
        .map(|x| &x.transport)
        .chain(r.cdf.iter().map(|x| &x.transport))
        .chain(r.size_sweep.iter().map(|x| &x.transport))
        .chain(r.threads.iter().map(|x| &x.transport))
        .chain(r.load.iter().map(|x| &x.transport))
        .chain(r.cold.iter().map(|x| &x.transport))
        .chain(r.accounting.iter().map(|x| &x.transport))
    {
        pal.add(name);
    }
    let mut out = String::with_capacity(64 * 1024);
    let m = &r.machine;
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>lowlat laboratory · {date}</title><style>{CSS}</style></head><body><main>"#,
        date = esc(&m.date)
    );
    header(&mut out, r);
    let _ = write!(out, r#"<section id="ladder"><h2>1. The ladder: each transport's floor, and RPC on top</h2>"#);
    ladder(&mut out, &r.ladder, &pal);
    cdf(&mut out, &r.cdf, &pal);
    size_sweep(&mut out, &r.size_sweep, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="busy"><h2>2. A busy server</h2>"#);
    busy(&mut out, &r.busy_server);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="threads"><h2>3. Threads: throughput with 1 to 8 callers</h2>"#);
    threads(&mut out, &r.threads, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="load"><h2>4. Load: latency against offered load</h2>"#);
    load(&mut out, &r.load);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="cold"><h2>5. Cold calls: the first call after idleness</h2>"#);
    cold(&mut out, &r.cold, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="peers"><h2>6. Peers: other RPC systems on this machine</h2>"#);
    peers(&mut out, &r.peers);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="accounting"><h2>7. Accounting: where the time of a call goes</h2>"#);
    accounting(&mut out, &r.accounting);
    out.push_str("</section>");
    let _ = write!(
        out,
        "<footer>Written by <code>lowlat lab</code>; every figure is also in <code>results.json</code> \
         (format version {}). Times vary ±30% between runs on a virtual machine: compare figures \
         within one report, as ratios.</footer></main></body></html>",
        r.format_version
    );
    out.push('\n');
    out
}

fn header(out: &mut String, r: &Results) {
    let m = &r.machine;
    let _ = write!(
        out,
        r#"<header><h1>lowlat laboratory report</h1><p class="lede">How fast a remote procedure call can be on this machine, how close lowlat comes to the floor each transport allows, and where the time goes. All times are round trips in <b>microseconds (µs)</b> measured by the caller; <b>p50</b> is the median, <b>p99</b> the time 99 calls in 100 beat.</p><table class="machine"><tr><th>CPU</th><td>{cpu}</td></tr><tr><th>Cores</th><td>{cores}</td></tr><tr><th>Kernel</th><td>{kernel}</td></tr><tr><th>Date</th><td>{date}</td></tr>"#,
        cpu = esc(&m.cpu_model),
        cores = m.cores,
        kernel = esc(&m.kernel),
        date = esc(&m.date)
    );
    if let Some(h) = &m.hostname {
        let _ = write!(out, "<tr><th>Host</th><td>{}</td></tr>", esc(h));
    }
    let _ = write!(
        out,
        "<tr><th>Run</th><td>{}</td></tr>",
        if r.quick { "quick (fewer calls per figure: tails are less certain)" } else { "full" }
    );
    for n in &m.notes {
        let _ = write!(out, "<tr><th>Note</th><td>{}</td></tr>", esc(n));
    }
    out.push_str(
        r##"</table><nav><b>Contents</b><ol><li><a href="#ladder">The ladder</a></li><li><a href="#busy">A busy server</a></li><li><a href="#threads">Threads</a></li><li><a href="#load">Load</a></li><li><a href="#cold">Cold calls</a></li><li><a href="#peers">Peers</a></li><li><a href="#accounting">Accounting</a></li></ol></nav></header>"##,
    );
}

/// A table row for something not measured: its identifying cells (the first `left` of them
/// left-aligned, like the column heads), then the reason across the remaining `span` columns.
fn skip_row(out: &mut String, lead: &[String], left: usize, span: usize, reason: &str) {
    out.push_str(r#"<tr class="skip">"#);
    for (i, l) in lead.iter().enumerate() {
        let class = if i < left { r#" class="l""# } else { "" };
        let _ = write!(out, "<td{class}>{l}</td>");
    }
    let _ = write!(out, r#"<td class="skipnote" colspan="{span}">skipped: {}</td></tr>"#, esc(reason));
}

fn lat_cells(l: Option<Latency>) -> String {
    match l {
        Some(l) => format!("<td>{}</td><td>{}</td>", us(l.p50_ns), us(l.p99_ns)),
        None => "<td>–</td><td>–</td>".to_owned(),
    }
}

fn note_cell(skipped: &Option<String>) -> String {
    match skipped {
        Some(s) => format!(r#"<td class="skipnote muted">{}</td>"#, esc(s)),
        None => "<td></td>".to_owned(),
    }
}

fn ladder(out: &mut String, rows: &[LadderRow], pal: &Palette) {
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
    for row in rows {
        let lead = [format!("{}{}", swatch(&pal.color(&row.transport)), esc(&row.transport)), size_label(row.size)];
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

fn cdf(out: &mut String, series: &[CdfSeries], pal: &Palette) {
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

fn size_sweep(out: &mut String, series: &[SizeSeries], pal: &Palette) {
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

fn busy(out: &mut String, b: &BusyServer) {
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

/// Reads one figure of a threads row.
type Getter = fn(&ThreadsRow) -> Option<f64>;

fn threads(out: &mut String, rows: &[ThreadsRow], pal: &Palette) {
    out.push_str(
        "<p>Calls per second with 1 to 8 caller threads, each waiting for its answer before the \
         next call (closed loop), as in Firefly's Table I. <b>NULL</b> has no arguments and no \
         result; <b>MAXRESULT(1440)</b> returns 1440 bytes, one full Ethernet packet, so its \
         Mbit/s is the useful data rate. With 2 CPUs, more threads help only while callers spend \
         time waiting rather than computing.</p>",
    );
    if rows.is_empty() {
        return empty(out, "thread measurements");
    }
    let mut counts: Vec<u32> = rows.iter().map(|r| r.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut keys: Vec<(String, String, u32)> = Vec::new();
    for r in rows {
        let k = (r.transport.clone(), r.proc.clone(), r.size);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    out.push_str(r#"<table><tr><th class="l">transport</th><th class="l">procedure</th><th class="l">figure</th>"#);
    for c in &counts {
        let _ = write!(out, "<th>{c} thr</th>");
    }
    out.push_str("</tr>");
    for (t, p, s) in &keys {
        let find = |c: u32| rows.iter().find(|r| &r.transport == t && &r.proc == p && r.size == *s && r.threads == c);
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
                esc(t),
                esc(&proc_label),
                fname
            );
            for &c in &counts {
                let _ = write!(out, "<td>{}</td>", opt_num(find(c).and_then(get)));
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
            .filter(|(_, _, s)| (*s == 0) == proc_is_null)
            .map(|(t, p, s)| {
                let mut pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| &r.transport == t && &r.proc == p && r.size == *s)
                    .filter_map(|r| {
                        let v = if proc_is_null { r.calls_per_s } else { r.mbit_per_s };
                        Some((f64::from(r.threads), v?))
                    })
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { name: t.clone(), color: pal.color(t), points: pts, style: Style::LineMarkers }
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

fn load(out: &mut String, series: &[LoadSeries]) {
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
    let colors = ["#1f77b4", "#ff7f0e", "#d62728", "#52606d"];
    for s in series {
        let _ = write!(out, "<h3>{} · {} {}</h3>", esc(&s.transport), esc(&s.proc.to_uppercase()), size_label(s.size));
        if let Some(reason) = &s.skipped {
            let _ = write!(out, r#"<p class="empty">skipped: {}</p>"#, esc(reason));
        }
        if s.points.is_empty() {
            continue;
        }
        let pct = |u: f64| u * 100.0;
        let mut lines: Vec<Series> = [("p50", 0usize), ("p99", 1), ("p99.9", 2)]
            .iter()
            .map(|&(name, i)| Series {
                name: format!("measured {name}"),
                color: colors[i].into(),
                points: s
                    .points
                    .iter()
                    .map(|p| {
                        let v = [p.p50_ns, p.p99_ns, p.p999_ns][i];
                        (pct(p.offered_fraction), v / 1000.0)
                    })
                    .collect(),
                style: Style::LineMarkers,
            })
            .collect();
        lines.push(Series {
            name: "model s/(1−u)".into(),
            color: colors[3].into(),
            points: s.points.iter().map(|p| (pct(p.offered_fraction), p.model_ns / 1000.0)).collect(),
            style: Style::Dashed,
        });
        let x = Axis { label: "offered load (% of capacity)".into(), scale: Scale::Linear, min: 0.0, max: 100.0 };
        let y = Axis::fit(
            "latency (µs, log scale)",
            Scale::Log,
            lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
            false,
        );
        let title = format!("{}: latency against offered load", s.transport);
        figure(
            out,
            &LinePlot { title, x, y, series: lines }.render(),
            &format!(
                "Capacity {} calls/s; service time s = {} µs.",
                opt_num(s.capacity_calls_per_s),
                opt_us(s.service_ns)
            ),
        );
        out.push_str(
            r#"<table><tr><th>offered load</th><th>offered calls/s</th><th>achieved calls/s</th><th>p50</th><th>p99</th><th>p99.9</th><th>model r</th><th>generator</th></tr>"#,
        );
        for p in &s.points {
            // A point whose generator fell behind measured its own backlog too: say so.
            let generator = match (p.sustained, p.max_lag_ns) {
                (Some(false), lag) => format!("not sustained (lag up to {})", lag.map_or("?".into(), us)),
                (Some(true), Some(lag)) => format!("on schedule (lag up to {})", us(lag)),
                _ => "-".into(),
            };
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
}

fn cold(out: &mut String, rows: &[ColdRow], pal: &Palette) {
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

fn peers(out: &mut String, rows: &[PeerRow]) {
    out.push_str(
        "<p>The same null call and 1440-byte echo made with RPC systems people would otherwise use, \
         built from Debian's packages and run on this machine in the same run: <b>gRPC</b> (C++, \
         synchronous, HTTP/2 over TCP), <b>ZeroMQ</b> REQ/REP (over TCP and over a Unix-domain \
         socket, \"ipc\"), and <b>rpcgen/libtirpc</b> ONC RPC (UDP and TCP); and, for shared \
         memory, <b>iceoryx2</b> request-response (Rust, from crates.io; an 8-byte request and \
         response for the null call, both sides busy-waiting; lowlat's rows use its adaptive \
         waiting, which spins throughout a closed loop). One caller, closed loop, client and server pinned to \
         different CPUs.</p>",
    );
    if rows.is_empty() {
        return empty(out, "peer measurements");
    }
    let mut pal = Palette::new();
    for r in rows {
        pal.add(&r.system);
    }
    let label = |r: &PeerRow| {
        if r.proc == "null" || r.size == 0 {
            format!("{} · {} · null", r.system, r.transport)
        } else {
            format!("{} · {} · {} {}", r.system, r.transport, r.proc, size_label(r.size))
        }
    };
    let mut measured: Vec<&PeerRow> = rows.iter().filter(|r| r.p50_ns.is_some()).collect();
    measured.sort_by(|a, b| {
        (a.size > 0, a.p50_ns.unwrap_or(0.0))
            .partial_cmp(&(b.size > 0, b.p50_ns.unwrap_or(0.0)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    if !measured.is_empty() {
        let bars: Vec<Bar> = measured
            .iter()
            .map(|r| Bar {
                label: label(r),
                value: r.p50_ns.unwrap_or(0.0) / 1000.0,
                whisker: r.p99_ns.map(|v| v / 1000.0),
                color: pal.color(&r.system),
            })
            .collect();
        figure(
            out,
            &svg::bar_chart(
                "Peers: median round trip (bar) and p99 (whisker)",
                "round trip (µs)",
                &bars,
                "; bar = p50, whisker end = p99",
            ),
            "Shorter is faster. Null calls first, then echoes, each sorted from fastest to slowest; \
             the number after each bar is its median.",
        );
    }
    out.push_str(
        r#"<table><tr><th class="l">system</th><th class="l">transport</th><th class="l">procedure</th><th>p50</th><th>p99</th><th>calls/s</th></tr>"#,
    );
    for r in rows {
        let proc = if r.size > 0 { format!("{} {}", r.proc, size_label(r.size)) } else { r.proc.clone() };
        let lead = [format!("{}{}", swatch(&pal.color(&r.system)), esc(&r.system)), esc(&r.transport), esc(&proc)];
        if r.p50_ns.is_none() {
            skip_row(out, &lead, 3, 3, r.skipped.as_deref().unwrap_or("not measured"));
            continue;
        }
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            lead[0],
            lead[1],
            lead[2],
            opt_us(r.p50_ns),
            opt_us(r.p99_ns),
            opt_num(r.calls_per_s)
        );
    }
    out.push_str("</table>");
}

fn accounting(out: &mut String, rows: &[Accounting]) {
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
        if let Some(o) = a.timestamp_overhead_ns {
            let _ = write!(
                out,
                r#"<p class="muted">What accounting adds to a call (traced minus untraced): {} µs.</p>"#,
                us(o)
            );
        }
        floor_gap(out, a);
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
    use super::*;

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
    fn every_transport_of_a_full_run_gets_its_own_colour() {
        let mut pal = Palette::new();
        let names = [
            "udp",
            "udp-block",
            "tcp",
            "tcp-block",
            "unix",
            "shm-spin",
            "shm-block",
            "onc+udp",
            "onc+tcp",
            "eth",
            "xdp",
            "xdp-floor",
            "shm",
        ];
        for n in names {
            pal.add(n);
        }
        let mut colours: Vec<String> = names.iter().map(|n| pal.color(n)).collect();
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), names.len());
    }
}
