//! `report.html`: one self-contained page (inline CSS and SVG, no scripts, nothing fetched) that
//! explains each section of the laboratory in words, then shows its table and plots.
//!
//! This module is the page's frame (style, header, contents, footer); each section is its own
//! module, built from `cells` and coloured by `palette`.

mod accounting;
mod busy;
mod cells;
mod cold;
mod ladder;
mod load;
mod palette;
mod peers;
mod saturation;
mod threads;

use std::fmt::Write as _;

use crate::html::palette::Palette;
use crate::model::{RemoteHost, Results};
use crate::svg::esc;

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
        .chain(r.saturation.iter().map(|x| &x.transport))
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
    ladder::ladder(&mut out, &r.ladder, &pal);
    ladder::cdf(&mut out, &r.cdf, &pal);
    ladder::size_sweep(&mut out, &r.size_sweep, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="busy"><h2>2. A busy server</h2>"#);
    busy::busy(&mut out, &r.busy_server);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="threads"><h2>3. Threads: throughput with 1 to 16 callers</h2>"#);
    threads::threads(&mut out, &r.threads, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="load"><h2>4. Load: latency against offered load</h2>"#);
    load::load(&mut out, &r.load);
    out.push_str("</section>");
    let _ =
        write!(out, r#"<section id="saturation"><h2>5. Saturation: calls in flight against the throughput floor</h2>"#);
    saturation::saturation(&mut out, &r.saturation, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="cold"><h2>6. Cold calls: the first call after idleness</h2>"#);
    cold::cold(&mut out, &r.cold, &pal);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="peers"><h2>7. Peers: other RPC systems on this machine</h2>"#);
    peers::peers(&mut out, &r.peers);
    out.push_str("</section>");
    let _ = write!(out, r#"<section id="accounting"><h2>8. Accounting: where the time of a call goes</h2>"#);
    accounting::accounting(&mut out, &r.accounting);
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

/// The other machine of a run across two hosts, the link's floor, and what stayed here (rows of
/// the machine table, whose first part described this machine: the callers').
fn remote_host(out: &mut String, r: &RemoteHost) {
    let m = &r.machine;
    let _ = write!(
        out,
        r#"<tr><th colspan="2" id="remote">Across two hosts: the callers ran on the machine above, the servers on</th></tr><tr><th>Other host</th><td>{host} (agent {agent})</td></tr><tr><th>Its CPU</th><td>{cpu}, {cores} cores</td></tr><tr><th>Its kernel</th><td>{kernel}</td></tr>"#,
        host = esc(m.hostname.as_deref().unwrap_or("unknown")),
        agent = esc(&r.agent),
        cpu = esc(&m.cpu_model),
        cores = m.cores,
        kernel = esc(&m.kernel),
    );
    if let Some(n) = &m.nic {
        let _ = write!(out, "<tr><th>Its interface</th><td>{}</td></tr>", esc(&n.describe()));
    }
    let floor = r.link_floor.map_or_else(
        || "not measured".to_owned(),
        |l| format!("{} µs p50, {} µs p99", cells::us(l.p50_ns), cells::us(l.p99_ns)),
    );
    let _ = write!(
        out,
        "<tr><th>Link floor</th><td>{} (two connected UDP sockets, 32 bytes each way)</td></tr>",
        esc(&floor)
    );
    for l in &r.local_only {
        let _ = write!(out, "<tr><th>Stays here</th><td>{}</td></tr>", esc(l));
    }
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
    if let Some(n) = &m.nic {
        let _ = write!(out, "<tr><th>Interface</th><td>{}</td></tr>", esc(&n.describe()));
    }
    for n in &m.notes {
        let _ = write!(out, "<tr><th>Note</th><td>{}</td></tr>", esc(n));
    }
    if let Some(remote) = &r.remote {
        remote_host(out, remote);
    }
    out.push_str(
        r##"</table><nav><b>Contents</b><ol><li><a href="#ladder">The ladder</a></li><li><a href="#busy">A busy server</a></li><li><a href="#threads">Threads</a></li><li><a href="#load">Load</a></li><li><a href="#saturation">Saturation</a></li><li><a href="#cold">Cold calls</a></li><li><a href="#peers">Peers</a></li><li><a href="#accounting">Accounting</a></li></ol></nav></header>"##,
    );
}
