//! Section 7, peers: other RPC systems on this machine, as a bar chart and a table.

use std::fmt::Write as _;

use crate::html::cells::{empty, figure, opt_num, opt_us, size_label, skip_row, swatch};
use crate::html::palette::Palette;
use crate::model::PeerRow;
use crate::svg::{self, esc, Bar};

pub(super) fn peers(out: &mut String, rows: &[PeerRow]) {
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
