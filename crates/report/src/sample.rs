//! Illustrative results for tests and for previewing the page: shaped like a real run on a
//! 2-CPU virtual machine (the figures follow the floor table in DESIGN.md) but invented, and
//! marked as such in the machine notes. Never written into a real `results.json`.

use crate::model::*;

/// The note that marks sample data on the page.
pub const SAMPLE_NOTE: &str = "SAMPLE DATA for tests and previews: these are not measurements";

/// (transport, raw p50, raw p99, rpc p50, rpc p99) at 32 bytes, µs.
const LADDER: &[(&str, f64, f64, f64, f64)] = &[
    ("shm-spin", 0.45, 0.9, 0.95, 1.8),
    ("shm-block", 13.0, 29.0, 14.1, 31.0),
    ("xdp-floor", 2.9, 4.6, 0.0, 0.0),
    ("xdp", 3.5, 5.4, 4.4, 7.0),
    ("eth", 5.5, 8.2, 6.6, 10.1),
    ("udp", 4.6, 7.0, 5.9, 9.4),
    ("unix", 5.4, 7.0, 0.0, 0.0),
    ("tcp", 6.8, 11.0, 8.1, 13.5),
    ("onc+udp", 4.6, 7.0, 7.9, 12.0),
    ("onc+tcp", 6.8, 11.0, 10.2, 16.8),
];

/// Points of a plausible latency CDF with the given median and p99 (log-logistic shape).
fn cdf_points(p50: f64, p99: f64) -> Vec<CdfPoint> {
    let spread = (p99 / p50).ln() / (99.0f64).ln();
    [0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999]
        .iter()
        .map(|&f: &f64| CdfPoint { latency_ns: p50 * ((f / (1.0 - f)).ln() * spread).exp() * 1000.0, fraction: f })
        .collect()
}

fn lat(p50_us: f64, p99_us: f64) -> Option<Latency> {
    (p50_us > 0.0).then_some(Latency { p50_ns: p50_us * 1000.0, p99_ns: p99_us * 1000.0 })
}

/// A complete, realistic-looking [`Results`] with some skipped rows.
pub fn sample_results() -> Results {
    let mut ladder = Vec::new();
    for &(t, rp50, rp99, cp50, cp99) in LADDER {
        for (size, grow) in [(32u32, 1.0), (1024, 1.18)] {
            let mut row = LadderRow::new(t, size, lat(rp50 * grow, rp99 * grow), lat(cp50 * grow, cp99 * grow));
            // The machine's floor where lowlat's transport needs more (a ring, an unconnected
            // socket).
            if t == "shm-spin" || t == "udp" {
                row = row.with_floor(lat(rp50 * grow * 0.6, rp99 * grow * 0.7));
            }
            if cp50 == 0.0 {
                row.skipped = Some("no RPC over this mechanism: it is a floor only".into());
            }
            ladder.push(row);
        }
    }
    ladder.push(LadderRow::skipped("eth-root", 32, "needs root to create a veth pair in a network namespace"));

    let busy_rows = ["shm-spin", "shm-block", "udp", "tcp"]
        .iter()
        .enumerate()
        .map(|(i, t)| BusyRow {
            transport: (*t).to_owned(),
            size: 32,
            raw: lat(20.0 + 15.0 * i as f64, 900.0 + 300.0 * i as f64),
            rpc: lat(24.0 + 16.0 * i as f64, 1100.0 + 320.0 * i as f64),
            round_trips_per_s: Some(9000.0 / (1.0 + i as f64)),
            workload_slowdown: Some(1.04 + 0.07 * i as f64),
            skipped: None,
        })
        .collect();

    let mut threads = Vec::new();
    for (ti, t) in ["shm-spin", "udp", "tcp", "onc+udp"].iter().enumerate() {
        for (proc, size) in [("null", 0u32), ("maxresult", 1440)] {
            for unpinned in [false, true] {
                for n in [1u32, 2, 4, 8, 16] {
                    let base = [900_000.0, 160_000.0, 120_000.0, 110_000.0][ti] * if size > 0 { 0.7 } else { 1.0 };
                    let spread = if unpinned { 0.9 } else { 1.0 };
                    let at = |n: u32| base * spread * (f64::from(n).min(2.0) * 0.9 + 0.1) / (1.0 + 0.02 * f64::from(n));
                    let cps = at(n);
                    threads.push(ThreadsRow {
                        transport: (*t).to_owned(),
                        proc: proc.to_owned(),
                        size,
                        threads: n,
                        unpinned,
                        calls_per_s: Some(cps),
                        mbit_per_s: Some(cps * f64::from(size) * 8.0 / 1e6),
                        rounds: 3,
                        of_one_caller_by_round: Some(cps / at(1)),
                        skipped: None,
                    });
                }
            }
        }
    }
    threads.push(ThreadsRow {
        transport: "xdp".into(),
        proc: "null".into(),
        size: 0,
        threads: 1,
        unpinned: false,
        calls_per_s: None,
        mbit_per_s: None,
        rounds: 1,
        of_one_caller_by_round: None,
        skipped: Some("AF_XDP needs root".into()),
    });

    let load = [("udp", 5.9), ("shm-spin", 0.95)]
        .iter()
        .map(|&(t, s_us)| {
            let s = s_us * 1000.0;
            let points = [0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 0.95]
                .iter()
                .map(|&u| {
                    let model = model_response_ns(s, u);
                    LoadPoint {
                        offered_fraction: u,
                        offered_calls_per_s: u * 1e9 / s,
                        achieved_calls_per_s: u * 1e9 / s * (1.0 - 0.01 * u),
                        p50_ns: model * 0.9,
                        p99_ns: model * (3.0 + 4.0 * u),
                        p999_ns: model * (6.0 + 12.0 * u),
                        model_ns: model,
                        sent_calls_per_s: Some(u * 1e9 / s),
                        max_lag_ns: Some(if u < 0.95 { 4_000.0 } else { 180_000.0 }),
                        late_fraction: Some(if u < 0.95 { 0.001 } else { 0.04 }),
                        floor_late_fraction: Some(0.004),
                        floor_max_lag_ns: Some(45_000.0),
                        sustained: Some(u < 0.95),
                        busy: Some(0),
                        failed: Some(0),
                    }
                })
                .collect();
            LoadSeries {
                transport: t.to_owned(),
                proc: "null".into(),
                size: 32,
                capacity_calls_per_s: Some(1e9 / s),
                service_ns: Some(s),
                points,
                skipped: None,
            }
        })
        .collect();

    // (transport, s µs, calls/s at W = 1, 4, 16, 64, floor exchanges/s at the same W or none).
    type SatSample = (&'static str, f64, [f64; 4], Option<[f64; 4]>);
    let sat: [SatSample; 3] = [
        ("shm", 0.21, [1.2e6, 1.6e6, 1.6e6, 1.55e6], Some([4.7e6, 8.8e6, 16.3e6, 15.9e6])),
        ("udp", 9.7, [103e3, 174e3, 184e3, 178e3], Some([112e3, 230e3, 255e3, 258e3])),
        ("tcp", 15.0, [65e3, 96e3, 111e3, 110e3], None),
    ];
    let saturation = sat
        .iter()
        .map(|&(t, s_us, calls, floor)| {
            let s = s_us * 1000.0;
            let rows: Vec<SaturationRow> = [1u32, 4, 16, 64]
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    let f = floor.map(|f| f[i]);
                    SaturationRow {
                        in_flight: w,
                        calls_per_s: Some(calls[i]),
                        p50_ns: Some(f64::from(w) * 1e9 / calls[i]),
                        p99_ns: Some(3.0 * f64::from(w) * 1e9 / calls[i]),
                        server_cpu_ns_per_call: Some(0.9e9 / calls[i]),
                        floor_exchanges_per_s: f,
                        floor_server_cpu_ns_per_exchange: f.map(|f| 0.9e9 / f),
                        floor_client_cpu_ns_per_exchange: f.map(|f| 0.95e9 / f),
                        over_floor: SaturationRow::over(Some(calls[i]), f),
                        skipped: None,
                    }
                })
                .collect();
            let top = calls.iter().copied().fold(0.0, f64::max);
            let points = [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95]
                .iter()
                .map(|&u| {
                    let model = model_response_ns(s, u);
                    LoadPoint {
                        offered_fraction: u,
                        offered_calls_per_s: u * top,
                        achieved_calls_per_s: u * top * 0.99,
                        p50_ns: model * (1.1 + 2.0 * u),
                        p99_ns: model * (4.0 + 8.0 * u),
                        p999_ns: model * (8.0 + 16.0 * u),
                        model_ns: model,
                        sent_calls_per_s: Some(u * top),
                        max_lag_ns: Some(if u < 0.9 { 6_000.0 } else { 250_000.0 }),
                        late_fraction: Some(if u < 0.9 { 0.002 } else { 0.08 }),
                        floor_late_fraction: Some(0.005),
                        floor_max_lag_ns: Some(60_000.0),
                        sustained: Some(u < 0.9),
                        busy: Some(0),
                        failed: Some(0),
                    }
                })
                .collect();
            let (floor, no_floor) = match floor {
                Some(_) => (Some("the simplest pipelined exchange of the path".to_owned()), None),
                None => (None, Some("no throughput floor for a byte stream".to_owned())),
            };
            SaturationSeries {
                transport: t.to_owned(),
                proc: "null".into(),
                size: 0,
                floor,
                no_floor,
                floor_size: 32,
                service_ns: Some(s),
                saturated_calls_per_s: Some(top),
                saturated_in_flight: Some(16),
                rows,
                points,
                skipped: None,
                seconds: 4.2,
            }
        })
        .collect();

    let mut cold = Vec::new();
    for (t, warm) in [("shm-spin", 0.95), ("shm-block", 14.1), ("udp", 5.9), ("tcp", 8.1)] {
        for (idle, f) in [(1u32, 2.5), (10, 4.0), (100, 6.5)] {
            cold.push(ColdRow {
                transport: t.to_owned(),
                idle_ms: idle,
                first_call_ns: Some(warm * 1000.0 * f + 20_000.0),
                warm_p50_ns: Some(warm * 1000.0),
                repeats: 20,
                skipped: None,
            });
        }
    }
    cold.push(ColdRow {
        transport: "xdp".into(),
        idle_ms: 1,
        first_call_ns: None,
        warm_p50_ns: None,
        repeats: 0,
        skipped: Some("AF_XDP needs root".into()),
    });

    let peer = |system: &str, transport: &str, proc: &str, size: u32, p50: f64, p99: f64| PeerRow {
        system: system.into(),
        transport: transport.into(),
        proc: proc.into(),
        size,
        p50_ns: Some(p50 * 1000.0),
        p99_ns: Some(p99 * 1000.0),
        calls_per_s: Some(1e6 / (p50 * 1.05)),
        skipped: None,
    };
    let peers = vec![
        peer("lowlat", "udp", "null", 0, 5.9, 9.4),
        peer("lowlat", "udp", "echo", 1440, 7.2, 11.0),
        peer("grpc", "tcp", "null", 0, 104.0, 158.0),
        peer("grpc", "tcp", "echo", 1440, 113.0, 152.0),
        peer("zeromq", "tcp", "null", 0, 59.0, 90.0),
        peer("zeromq", "tcp", "echo", 1440, 61.5, 103.0),
        peer("zeromq", "ipc", "null", 0, 54.0, 139.0),
        peer("zeromq", "ipc", "echo", 1440, 58.4, 191.0),
        peer("rpcgen", "udp", "null", 0, 27.0, 46.5),
        peer("rpcgen", "udp", "echo", 1440, 29.1, 48.4),
        peer("rpcgen", "tcp", "null", 0, 31.5, 53.0),
        PeerRow::skipped("rpcgen", "tcp", "echo", 1440, "server did not answer within 5 s"),
        peer("lowlat", "shm", "null", 0, 0.31, 0.52),
        peer("iceoryx2", "shm", "null", 0, 0.42, 0.71),
        peer("iceoryx2", "shm", "echo", 1440, 0.66, 1.1),
    ];

    let parts = [
        "client stub and marshaling",
        "send",
        "transit to server",
        "server wake-up",
        "dispatch and unmarshaling",
        "procedure",
        "reply marshaling and send",
        "transit back",
        "client wake-up and unmarshaling",
    ];
    let accounting = [
        ("udp", 5900.0, [120.0, 900.0, 1500.0, 300.0, 90.0, 10.0, 950.0, 1500.0, 530.0], 5650.0),
        ("tcp", 8100.0, [120.0, 1300.0, 2100.0, 500.0, 90.0, 10.0, 1350.0, 2100.0, 530.0], 6900.0),
        ("shm-spin", 950.0, [60.0, 40.0, 260.0, 30.0, 70.0, 10.0, 90.0, 260.0, 130.0], 900.0),
    ]
    .iter()
    .map(|(t, total, ns, raw_rtt)| {
        let named: Vec<(&str, f64)> = parts.iter().copied().zip(ns.iter().copied()).collect();
        let predicted = [("raw ping-pong", *raw_rtt), ("marshaling (both ways)", 210.0), ("dispatch", 90.0)];
        let mut a = Accounting::from_parts(t, 100_000, &named, *total, &predicted);
        a.timestamp_overhead_ns = Some(3.0);
        if t.starts_with("shm") {
            let gap = [("floor", 110.0), ("transport", 10.0), ("rpc code", 30.0), ("rpc rest", *total - 150.0)];
            a.floor_gap = Accounting::from_parts(t, 0, &gap, *total, &[]).parts;
        }
        a
    })
    .collect();

    let cdf = LADDER
        .iter()
        .filter(|l| l.3 > 0.0)
        .map(|&(t, _, _, p50, p99)| CdfSeries {
            transport: t.into(),
            proc: "null".into(),
            size: 32,
            points: cdf_points(p50, p99),
        })
        .collect();

    let sizes = [32u32, 128, 512, 1024, 1440, 4096, 16384, 65536];
    let mut size_sweep = Vec::new();
    for (t, base, per_kib) in [("shm-spin", 0.95, 0.09), ("udp", 5.9, 0.55), ("tcp", 8.1, 0.6)] {
        for (kind, k) in [("rpc", 1.0), ("raw", 0.8)] {
            size_sweep.push(SizeSeries {
                transport: t.into(),
                kind: kind.into(),
                points: sizes
                    .iter()
                    .map(|&s| {
                        let p50 = (base + per_kib * f64::from(s) / 1024.0) * k * 1000.0;
                        SizePoint { size: s, p50_ns: p50, p99_ns: p50 * 1.7 }
                    })
                    .collect(),
            });
        }
    }

    Results {
        format_version: FORMAT_VERSION,
        machine: Machine {
            cpu_model: "Intel(R) Xeon(R) Processor @ 2.60GHz".into(),
            cores: 2,
            kernel: "6.1.0-sample".into(),
            date: "2026-11-23T09:30:00Z".into(),
            hostname: Some("sample-host".into()),
            notes: vec![SAMPLE_NOTE.into(), "client on CPU 1, server on CPU 0".into()],
            nic: None,
        },
        quick: true,
        ladder,
        busy_server: BusyServer {
            workload: "tiled 256×256 f64 matrix multiplication".into(),
            workload_alone_ns: Some(18_500_000.0),
            rows: busy_rows,
        },
        threads,
        load,
        saturation,
        cold,
        peers,
        accounting,
        cdf,
        size_sweep,
        remote: None,
    }
}
