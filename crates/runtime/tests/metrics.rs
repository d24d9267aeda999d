//! Metrics where operators look: a server's `/metrics` over HTTP (counters per endpoint, the
//! calls' sampled durations per procedure), and a client's counters in a program's own
//! Prometheus registry.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::{lab_program, Lab, MINUS, PROG};
use lowlat::metrics::{openmetrics_text, parse_times, register_client, EndpointMetrics};
use lowlat::{Client, Server};

/// `GET path`: the status line and the body.
fn get(addr: std::net::SocketAddr, path: &str, accept: Option<&str>) -> (String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample `name{labels...}` in `text` whose labels include all of `having`.
fn sample(text: &str, name: &str, having: &[&str]) -> Option<u64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| having.iter().all(|h| l.contains(h)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn a_server_serves_its_counters_and_call_times_per_endpoint() {
    let server = Server::builder()
        .program(lab_program())
        .metrics("127.0.0.1:0".parse().unwrap())
        .serve(&["udp://127.0.0.1:0", "tcp://127.0.0.1:0"])
        .unwrap();
    let addr = server.metrics_addr().expect("metrics asked for");
    let [udp, tcp] = [0, 1].map(|i| server.local_uris()[i].clone());
    let c = Client::connect(&udp, PROG, 1).unwrap();
    let lab = Lab::new(&c);
    for i in 0..640 {
        assert_eq!(lab.minus(i, 1).unwrap(), i - 1);
    }
    let (status, text) = get(addr, "/metrics", Some("application/openmetrics-text; version=1.0.0"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    let on_udp = format!("endpoint=\"{udp}\"");
    assert_eq!(sample(&text, "lowlat_calls_total", &[&on_udp, "transport=\"udp\""]), Some(640), "{text}");
    assert_eq!(sample(&text, "lowlat_calls_total", &[&format!("endpoint=\"{tcp}\""), "transport=\"tcp\""]), Some(0));
    assert_eq!(sample(&text, "lowlat_sessions_open", &[&on_udp]), Some(1));
    // One call in 64 timed: ten of the 640 MINUS calls.
    let minus = ["procedure=\"MINUS\"", "program=\"0x20004c4c\"", "version=\"1\""];
    let timed = sample(&text, "lowlat_call_duration_seconds_count", &[&[on_udp.as_str()][..], &minus].concat());
    assert_eq!(timed, Some(10), "{text}");
    let inf =
        sample(&text, "lowlat_call_duration_seconds_bucket", &[&["le=\"+Inf\"", on_udp.as_str()][..], &minus].concat());
    assert_eq!(inf, Some(10), "the buckets hold every timed call");
    assert!(text.ends_with("# EOF\n"));
    // Without asking for OpenMetrics: the older text format, which promtool reads.
    let (_, old) = get(addr, "/metrics", None);
    assert!(old.contains("# TYPE lowlat_calls_total counter") && !old.contains("# EOF"), "{old}");
    assert_eq!(get(addr, "/elsewhere", None).0, "HTTP/1.1 404 Not Found");
    drop(c);
    server.shutdown();
    assert!(TcpStream::connect(addr).is_err(), "the metrics thread stopped with the server");
}

#[test]
fn the_stats_program_carries_the_call_times_and_a_client_joins_a_registry() {
    let server = Server::builder().program(lab_program()).serve(&["udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let c = Arc::new(Client::connect(&uri, PROG, 1).unwrap());
    let lab = Lab::new(&c);
    for i in 0..128 {
        lab.minus(i, 2).unwrap();
    }
    // What `lowlat stat --openmetrics` reads: the counters, then the times.
    let stats = Client::connect(&uri, lowlat::stats::PROGRAM, 1).unwrap();
    let text = stats
        .call::<_, lowlat::DecodeError>(
            lowlat::stats::STATS,
            |_| Ok(()),
            |r| Ok(String::from_utf8_lossy(r).into_owned()),
        )
        .unwrap();
    let times = parse_times(&text);
    let minus = times.iter().find(|(p, _)| p.name == "MINUS").expect("MINUS timed");
    assert_eq!((minus.0.program, minus.0.number, minus.1.count), (PROG, MINUS, 2));
    let counters = lowlat::EndpointStats::from_fields(&lowlat::stats::parse_text(&text));
    assert_eq!(counters.calls, 128 + 1, "the reading call counts itself");
    let exposed = openmetrics_text(&[EndpointMetrics { uri: uri.clone(), counters, times }]);
    assert!(exposed.contains("procedure=\"MINUS\""), "{exposed}");

    let mut registry = lowlat::metrics::prometheus_client::registry::Registry::default();
    register_client(&mut registry, c.clone());
    let mut out = String::new();
    lowlat::metrics::prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    assert_eq!(sample(&out, "lowlat_client_calls_total", &[&format!("endpoint=\"{uri}\"")]), Some(128), "{out}");
    assert_eq!(sample(&out, "lowlat_client_binds_total", &[]), Some(1), "{out}");
}
