//! The results model, its schema and the rendered page, checked from the outside.

use std::path::{Path, PathBuf};

use lowlat_report::sample::{sample_results, SAMPLE_NOTE};
use lowlat_report::schema::{self, SchemaError};
use lowlat_report::*;
use serde_json::{json, Value};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn schema_file_matches_the_types() {
    let path = repo_root().join("docs/results.schema.json");
    let generated = schema::generated_schema();
    if std::env::var_os("LOWLAT_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the schema");
    }
    let on_disk = std::fs::read_to_string(&path).expect("read docs/results.schema.json");
    assert!(
        on_disk == generated,
        "docs/results.schema.json is stale: rerun this test with LOWLAT_BLESS=1 and commit it"
    );
    // The copy compiled into the crate is the same file.
    assert!(schema::SCHEMA_FILE == on_disk, "rebuild: the compiled-in schema is older than the file");
}

#[test]
fn sample_results_validate_against_the_schema() {
    let doc: Value = serde_json::from_str(&sample_results().to_json()).unwrap();
    schema::validate(&doc).unwrap();
}

fn expect_invalid(doc: &Value, needle: &str) {
    match schema::validate(doc) {
        Err(SchemaError::Invalid(errors)) => assert!(
            errors.iter().any(|e| e.contains(needle)),
            "expected an error mentioning {needle:?}, got {errors:?}"
        ),
        other => panic!("expected the document to be invalid ({needle}), got {other:?}"),
    }
}

#[test]
fn schema_rejects_what_the_types_reject() {
    let good: Value = serde_json::from_str(&sample_results().to_json()).unwrap();

    let mut missing = good.clone();
    missing["machine"].as_object_mut().unwrap().remove("kernel");
    expect_invalid(&missing, "kernel");
    assert!(serde_json::from_value::<Results>(missing).is_err());

    let mut wrong_type = good.clone();
    wrong_type["machine"]["cores"] = json!("two");
    expect_invalid(&wrong_type, "cores");
    assert!(serde_json::from_value::<Results>(wrong_type).is_err());

    let mut extra = good.clone();
    extra["ladder"][0]["colour"] = json!("red");
    expect_invalid(&extra, "colour");
    assert!(serde_json::from_value::<Results>(extra).is_err());

    let mut negative = good.clone();
    negative["threads"][0]["threads"] = json!(-1);
    expect_invalid(&negative, "threads");
    assert!(serde_json::from_value::<Results>(negative).is_err());

    let mut bad_latency = good.clone();
    bad_latency["ladder"][0]["raw"] = json!({"p50_ns": 1.0});
    expect_invalid(&bad_latency, "p99_ns");
    assert!(serde_json::from_value::<Results>(bad_latency).is_err());
}

#[test]
fn validator_refuses_schemas_it_does_not_understand() {
    let schema = json!({"type": "string", "pattern": "^a"});
    assert!(matches!(schema::validate_against(&schema, &json!("abc")), Err(SchemaError::Unsupported { .. })));
    let cyclic = json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    assert!(matches!(schema::validate_against(&cyclic, &json!(1)), Err(SchemaError::Unsupported { .. })));
}

#[test]
fn results_round_trip_through_json() {
    let r = sample_results();
    let back = Results::from_json(&r.to_json()).unwrap();
    assert_eq!(back, r);

    let mut other = r.clone();
    other.format_version = FORMAT_VERSION + 1;
    assert!(matches!(Results::from_json(&other.to_json()), Err(ResultsError::Version { .. })));
    assert!(matches!(Results::from_json("{\"format_version\":"), Err(ResultsError::Json(_))));
}

#[test]
fn accounting_arithmetic() {
    let a = Accounting::from_parts(
        "udp",
        1000,
        &[("send", 1000.0), ("transit", 3000.0)],
        4000.0,
        &[("raw", 3000.0), ("stub", 500.0)],
    );
    assert_eq!(a.parts[0].percent, 25.0);
    assert_eq!(a.parts[1].percent, 75.0);
    assert_eq!(a.predicted_total_ns, Some(3500.0));
    assert_eq!(a.difference_percent, Some(12.5));
    assert!(a.flagged);

    let close = Accounting::from_parts("udp", 10, &[("all", 1000.0)], 1000.0, &[("raw", 950.0)]);
    assert_eq!(close.difference_percent, Some(5.0));
    assert!(!close.flagged);

    let over = Accounting::from_parts("udp", 10, &[("all", 1000.0)], 1000.0, &[("raw", 1200.0)]);
    assert_eq!(over.difference_percent, Some(-20.0));
    assert!(over.flagged, "a prediction above the measurement is as wrong as one below");

    let no_model = Accounting::from_parts("udp", 10, &[("all", 1000.0)], 1000.0, &[]);
    assert_eq!(no_model.difference_percent, None);
    assert!(!no_model.flagged);
}

#[test]
fn ladder_row_derives_ratio_and_difference() {
    let raw = Latency { p50_ns: 4000.0, p99_ns: 7000.0 };
    let rpc = Latency { p50_ns: 6000.0, p99_ns: 9000.0 };
    let row = LadderRow::new("udp", 32, Some(raw), Some(rpc));
    assert_eq!(row.ratio_p50, Some(1.5));
    assert_eq!(row.diff_p50_ns, Some(2000.0));
    let half = LadderRow::new("unix", 32, Some(raw), None);
    assert_eq!((half.ratio_p50, half.diff_p50_ns), (None, None));
    // Against the machine's floor, where lowlat's transport needs more than it.
    let floor = Latency { p50_ns: 2000.0, p99_ns: 3000.0 };
    let row = row.with_floor(Some(floor));
    assert_eq!((row.raw_over_floor_p50, row.rpc_over_floor_p50), (Some(2.0), Some(3.0)));
    assert_eq!(row.ratio_p50, Some(1.5), "the raw ratio stays");
    assert_eq!(half.with_floor(Some(floor)).rpc_over_floor_p50, None);
    assert_eq!(model_response_ns(1000.0, 0.5), 2000.0);
    assert!(model_response_ns(1000.0, 1.0).is_infinite());
}

#[test]
fn bench_lines_parse_and_are_checked() {
    let good = r#"{"kind":"rpc","system":"grpc","transport":"tcp","proc":"null","size":0,"calls":100,"threads":1,"p50_ns":1000,"p90_ns":1200,"p99_ns":1500,"p999_ns":2000,"max_ns":2500,"mean_ns":1100.5,"calls_per_s":900.0}"#;
    let b = BenchLine::parse(good).unwrap();
    let row = PeerRow::from(&b);
    assert_eq!((row.system.as_str(), row.p50_ns, row.calls_per_s), ("grpc", Some(1000.0), Some(900.0)));

    let unordered = good.replace("\"p99_ns\":1500", "\"p99_ns\":900");
    assert!(matches!(BenchLine::parse(&unordered), Err(BenchLineError::Inconsistent(_))));
    let zero = good.replace("\"calls\":100", "\"calls\":0");
    assert!(matches!(BenchLine::parse(&zero), Err(BenchLineError::Inconsistent(_))));
    assert!(matches!(BenchLine::parse("ready"), Err(BenchLineError::Json(_))));
}

/// Section ids and headings a reader (and `lowlat lab`'s own test) looks for.
const SECTIONS: &[(&str, &str)] = &[
    ("ladder", "The ladder"),
    ("busy", "A busy server"),
    ("threads", "Threads"),
    ("load", "Load"),
    ("saturation", "Saturation"),
    ("cold", "Cold calls"),
    ("peers", "Peers"),
    ("accounting", "Accounting"),
];

#[test]
fn page_has_every_section_and_plot() {
    let html = render_html(&sample_results());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    for (id, heading) in SECTIONS {
        assert!(html.contains(&format!(r#"<section id="{id}">"#)), "section {id} missing");
        assert!(html.contains(heading), "heading {heading} missing");
    }
    for title in [
        "Latency CDF of null calls",
        "Median round trip as the message grows",
        "NULL calls per second against caller threads",
        "MAXRESULT(1440) data rate against caller threads",
        "latency against offered load",
        "model s/(1−u)",
        "Throughput against calls in flight, beside the floor",
        "latency against offered load up to saturation",
        "Where the time of a null call goes",
        "Peers: median round trip",
        "The first call after idleness",
    ] {
        assert!(html.contains(title), "plot {title:?} missing");
    }
    assert!(html.matches("<svg").count() >= 8);
    assert!(html.contains(SAMPLE_NOTE));
    // Skipped rows say why.
    assert!(html.contains("needs root to create a veth pair"));
    assert!(html.contains("server did not answer within 5 s"));
    // The model check's verdicts are shown.
    assert!(html.contains("flagged"));
    assert!(html.contains("within tolerance"));
    // An open-loop point's generator beside the machine's floor for its schedule.
    assert!(html.contains("0.4% (its latest send 45"), "the floor's latest send is missing");
}

#[test]
fn page_is_self_contained() {
    let html = render_html(&sample_results());
    assert!(!html.contains("<script"));
    assert!(!html.contains("<link"));
    assert!(!html.contains("<img"));
    assert!(!html.contains("@import"));
    assert!(!html.contains("url("));
    // The only URL is the SVG namespace, which browsers never fetch.
    let without_ns = html.replace("http://www.w3.org/2000/svg", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
}

#[test]
fn hostile_names_are_escaped() {
    let mut r = sample_results();
    r.machine.cpu_model = "<script>alert(1)</script>".into();
    r.ladder[0].transport = "<b>udp</b>".into();
    r.peers[0].system = "\"><svg onload=x>".into();
    let html = render_html(&r);
    assert!(!html.contains("<script>"));
    assert!(!html.contains("<b>udp</b>"));
    assert!(!html.contains("<svg onload"));
    assert!(html.contains("&lt;script&gt;"));
}

#[test]
fn empty_results_render_every_section_with_a_note() {
    let r = Results {
        format_version: FORMAT_VERSION,
        machine: Machine {
            cpu_model: "cpu".into(),
            cores: 1,
            kernel: "k".into(),
            date: "2026-01-01T00:00:00Z".into(),
            hostname: None,
            notes: vec![],
            nic: None,
        },
        quick: true,
        ladder: vec![],
        busy_server: BusyServer { workload: "none".into(), workload_alone_ns: None, rows: vec![] },
        threads: vec![],
        load: vec![],
        saturation: vec![],
        cold: vec![],
        peers: vec![],
        accounting: vec![],
        cdf: vec![],
        size_sweep: vec![],
        remote: None,
    };
    let html = render_html(&r);
    for (id, _) in SECTIONS {
        assert!(html.contains(&format!(r#"<section id="{id}">"#)));
    }
    assert!(html.matches(r#"class="empty""#).count() >= 9);
    schema::validate(&serde_json::to_value(&r).unwrap()).unwrap();
}

#[test]
fn degenerate_figures_do_not_break_plots() {
    let mut r = sample_results();
    // A single point, zeros and a flat series must still give finite coordinates.
    r.cdf[0].points.truncate(1);
    r.size_sweep[0].points.iter_mut().for_each(|p| p.p50_ns = 0.0);
    r.peers.iter_mut().for_each(|p| p.p99_ns = p.p50_ns);
    let html = render_html(&r);
    assert!(!html.contains("NaN"));
    assert!(!html.contains("inf\"") && !html.contains("inf,") && !html.contains("inf "));
}

#[test]
fn a_run_across_two_hosts_names_both_machines_and_the_links_floor() {
    let mut r = sample_results();
    r.machine.nic = Some(lowlat_report::Nic { name: "ens5".into(), driver: Some("ena".into()), ..Default::default() });
    let mut there = r.machine.clone();
    there.hostname = Some("far-host".into());
    there.nic = Some(lowlat_report::Nic {
        name: "ens6".into(),
        speed_mbps: Some(25_000),
        coalescing: Some("rx 20 us/0 frames, tx 64 us/0 frames, adaptive rx off, tx off".into()),
        ..Default::default()
    });
    r.remote = Some(lowlat_report::RemoteHost {
        agent: "10.0.0.2:7460".into(),
        machine: there,
        link_floor: Some(Latency { p50_ns: 21_500.0, p99_ns: 30_000.0 }),
        local_only: vec!["shared memory (shm-spin, shm-block) and Unix sockets: same-machine transports".into()],
    });
    let udp = r.ladder.iter_mut().find(|row| row.transport == "udp").unwrap();
    udp.across_link = true;
    let html = render_html(&r);
    for text in [
        "far-host",
        "agent 10.0.0.2:7460",
        "ens5 (unknown): driver ena",
        "ens6 (unknown): driver unknown, link speed 25000 Mbit/s",
        "adaptive rx off",
        "Link floor</th><td>21.5 µs p50, 30 µs p99",
        "↔ link",
        "Stays here</th><td>shared memory",
    ] {
        assert!(html.contains(text), "the report lacks {text:?}");
    }
    let value = serde_json::to_value(&r).unwrap();
    schema::validate(&value).unwrap();
    assert_eq!(lowlat_report::Results::from_json(&r.to_json()).unwrap(), r);
}

/// The text of one section of the page.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!(r#"<section id="{id}">"#)).unwrap_or_else(|| panic!("no section {id}"));
    let len = html[start..].find("</section>").expect("a section ends");
    &html[start..start + len]
}

#[test]
fn saturation_section_has_its_table_its_plots_and_the_model_drawn_from_s() {
    let r = sample_results();
    assert!(!r.saturation.is_empty());
    let html = render_html(&r);
    let sat = section(&html, "saturation");
    for head in ["W", "calls/s", "×floor", "server CPU ns/call", "floor exchanges/s", "floor CPU ns/exchange (server)"]
    {
        assert!(sat.contains(&format!("<th>{head}</th>")), "the table lacks the column {head:?}");
    }
    for s in &r.saturation {
        // One table row per W, and a row's ratio to the floor where there is a floor.
        for row in &s.rows {
            let cells = format!("{}</td><td>{}</td>", lowlat_report::svg::esc(&s.transport), row.in_flight);
            assert!(sat.contains(&cells), "no row for {} W = {}", s.transport, row.in_flight);
            if let Some(x) = row.over_floor {
                assert!(sat.contains(&format!("{x:.2}×")), "{} W = {}: no ratio {x:.2}", s.transport, row.in_flight);
            }
        }
        let title = format!("{}: latency against offered load up to saturation", s.transport);
        assert!(sat.contains(&title), "no plot {title:?}");
    }
    // tcp has no floor, and says so rather than showing one.
    assert!(sat.contains("tcp: no throughput floor for a byte stream"));
    assert!(sat.contains("shm: floor: the simplest pipelined exchange of the path, 32 bytes each way"));
    assert!(sat.contains("Throughput against calls in flight, beside the floor"));
    // Every latency plot draws r = s/(1-u) as a curve from u = 0 to the highest u offered,
    // computed from s: its 61 points rise from s (at u = 0) as the model does.
    let curves: Vec<&str> = sat
        .split("<polyline points=\"")
        .skip(1)
        .map(|p| &p[..p.find("/>").expect("a polyline ends")])
        .filter(|p| p.contains(r##"stroke="#52606d""##) && p.contains("stroke-dasharray"))
        .map(|p| &p[..p.find('"').unwrap()])
        .collect();
    assert_eq!(curves.len(), r.saturation.len(), "one model curve per transport");
    for c in curves {
        let ys: Vec<f64> = c.split(' ').map(|xy| xy.split(',').nth(1).unwrap().parse().unwrap()).collect();
        assert_eq!(ys.len(), 61, "the model is a curve, not the points' values: {c}");
        assert!(ys.windows(2).all(|w| w[1] <= w[0]), "r = s/(1-u) rises with u (y grows upwards): {c}");
        assert!(ys[0] > ys[60], "the curve rises: {c}");
    }
    // A series that could not run says why.
    let mut broken = r.clone();
    broken.saturation[0].points.clear();
    broken.saturation[0].skipped = Some("open loop at u = 0.1: the server did not answer".into());
    broken.saturation[1].rows[2].skipped = Some("the floor's server did not report its CPU time".into());
    let html = render_html(&broken);
    let sat = section(&html, "saturation");
    assert!(sat.contains("skipped: open loop at u = 0.1: the server did not answer"));
    assert!(sat.contains("W = 16: the floor&#39;s server did not report its CPU time"));
    // No saturation measured: the section is there and says so.
    let mut none = r.clone();
    none.saturation.clear();
    let html = render_html(&none);
    assert!(section(&html, "saturation").contains("No saturation measurements in this run."));
}

#[test]
fn saturation_arithmetic() {
    assert_eq!(SaturationRow::over(Some(3.0e6), Some(12.0e6)), Some(0.25));
    assert_eq!(SaturationRow::over(Some(3.0e6), None), None);
    assert_eq!(SaturationRow::over(None, Some(1.0)), None);
    assert_eq!(SaturationRow::over(Some(1.0), Some(0.0)), None, "a floor of 0/s gives no ratio, not infinity");
    let s = &sample_results().saturation[0];
    let best = s.saturated().unwrap();
    assert!(s.rows.iter().all(|r| r.calls_per_s <= best.calls_per_s));
    let mut none = s.clone();
    none.rows.iter_mut().for_each(|r| r.calls_per_s = None);
    assert!(none.saturated().is_none());
}

#[test]
fn results_without_a_saturation_section_still_read() {
    // Files written before the section existed have no "saturation" field.
    let mut doc: Value = serde_json::from_str(&sample_results().to_json()).unwrap();
    doc.as_object_mut().unwrap().remove("saturation");
    schema::validate(&doc).unwrap();
    let r = Results::from_json(&doc.to_string()).unwrap();
    assert!(r.saturation.is_empty());
}
