//! `lowlat lab`: the whole laboratory on this machine, with no configuration. It starts and stops
//! its own servers (child processes pinned to their own CPU), creates and removes network
//! namespaces when run as root, and writes `results.json`, the HdrHistogram logs and
//! `report.html`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use lowlat::{ClientConfig, SpinPolicy};
use lowlat_report::{
    model_response_ns, Accounting, BenchLine, BusyRow, BusyServer, CdfPoint, CdfSeries, ColdRow, LadderRow, Latency,
    LoadPoint, LoadSeries, Machine, PeerRow, Results, SizePoint, SizeSeries, ThreadsRow, FORMAT_VERSION,
};

use crate::bench::{self, BenchSpec};
use crate::interface::LabClient;
use crate::ladder::Placement;
use crate::stats::{new_histogram, us, Summary};
use crate::{account, procs, workload};

/// How much of everything to measure.
#[derive(Clone, Copy, Debug)]
struct Scale {
    calls: u64,
    threads_calls: u64,
    load_seconds: f64,
    cold_repeats: u32,
    peer_calls: u64,
    sweep: &'static [usize],
}

const QUICK: Scale = Scale {
    calls: 5_000,
    threads_calls: 4_000,
    load_seconds: 0.25,
    cold_repeats: 3,
    peer_calls: 2_000,
    sweep: &[32, 1024, 16384],
};
const FULL: Scale = Scale {
    calls: 50_000,
    threads_calls: 40_000,
    load_seconds: 1.5,
    cold_repeats: 15,
    peer_calls: 10_000,
    sweep: &[32, 256, 1024, 4096, 16384, 65536],
};

/// The lab's own state: where servers run, the executable that runs them, what was recorded.
struct Lab {
    exe: PathBuf,
    place: Placement,
    scale: Scale,
    seq: u32,
    progress: ProgressBar,
    /// Histograms to write as logs: (file stem, histogram).
    histograms: Vec<(String, Histogram<u64>)>,
    /// Servers and callers bind with this pre-shared key (`lab --psk-file`).
    psk: Option<(PathBuf, lowlat::Psk)>,
}

fn lat(s: &Summary) -> Latency {
    Latency { p50_ns: s.p50_ns as f64, p99_ns: s.p99_ns as f64 }
}

impl Lab {
    fn step(&self, what: &str) {
        self.progress.set_message(what.to_string());
        self.progress.inc(1);
    }

    /// A bind URI for `scheme` on this host, fresh each time (shm needs a new path).
    fn bind_uri(&mut self, scheme: &str) -> String {
        self.seq += 1;
        match scheme {
            "shm" => format!("shm:///tmp/lowlat-lab-{}-{}.sock", std::process::id(), self.seq),
            "unix" => format!("unix:///tmp/lowlat-lab-{}-{}.unix", std::process::id(), self.seq),
            s => format!("{s}://127.0.0.1:0"),
        }
    }

    /// `--psk-file FILE` for a server, when the lab runs with a key.
    fn psk_args(&self) -> Vec<String> {
        self.psk.iter().flat_map(|(p, _)| ["--psk-file".to_string(), p.display().to_string()]).collect()
    }

    fn spawn(&self, args: &[String]) -> Result<procs::ServerProcess, String> {
        let mut a = args.to_vec();
        if let Some(c) = self.place.server_cpu {
            a.push("--cpu".into());
            a.push(c.to_string());
        }
        procs::spawn(&self.exe, &a, Duration::from_secs(10)).map_err(|e| e.to_string())
    }

    /// `lowlat serve` for the lab interface on a fresh address of `scheme`.
    fn rpc_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(procs::ServerProcess, String), String> {
        let bind = self.bind_uri(scheme);
        let mut args = vec!["serve".into(), bind, "--spin-us".into(), spin.to_string()];
        args.extend(self.psk_args());
        let p = self.spawn(&args)?;
        let uri = p.uris.first().cloned().ok_or("the server printed no URI")?;
        Ok((p, uri))
    }

    /// `lowlat pingpong --serve` on a fresh address of `scheme`.
    fn raw_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(procs::ServerProcess, String), String> {
        let bind = self.bind_uri(scheme);
        let p = self.spawn(&["pingpong".into(), "--serve".into(), bind, "--spin-us".into(), spin.to_string()])?;
        let uri = p.uris.first().cloned().ok_or("the ping-pong server printed no URI")?;
        Ok((p, uri))
    }

    /// `lowlat pingpong --serve --floor`: the machine's floor for `scheme`'s path.
    fn floor_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(procs::ServerProcess, String), String> {
        let bind = self.bind_uri(scheme);
        let args = ["pingpong", "--serve", "--floor", &bind, "--spin-us", &spin.to_string()].map(String::from);
        let p = self.spawn(&args)?;
        let uri = p.uris.first().cloned().ok_or("the floor server printed no URI")?;
        Ok((p, uri))
    }

    fn pin_client(&self) {
        if let Some(c) = self.place.client_cpu {
            let _ = lowlat_sys::pin_to_cpu(c);
        }
    }

    fn spec(&self, uri: &str, proc: &str, size: usize, calls: u64, spin: SpinPolicy) -> BenchSpec {
        BenchSpec {
            uri: uri.to_string(),
            proc: proc.into(),
            size,
            calls,
            warmup: (calls / 10).clamp(100, 5_000),
            spin,
            cpu: self.place.client_cpu,
            psk: self.psk.as_ref().map(|(_, k)| k.clone()),
            ..BenchSpec::default()
        }
    }

    fn raw(&mut self, scheme: &str, size: usize, spin: SpinPolicy) -> Result<Summary, String> {
        let (_srv, uri) = self.raw_server(scheme, spin)?;
        self.pin_client();
        let calls = self.scale.calls;
        let (s, h) = bench::run_raw(&uri, size, calls, (calls / 10).max(100), spin, Default::default(), None)
            .map_err(|e| e.to_string())?;
        self.histograms.push((format!("raw-{scheme}-{}-{size}", spin_name(spin)), h));
        Ok(s)
    }

    fn floor(&mut self, scheme: &str, size: usize, spin: SpinPolicy) -> Result<Summary, String> {
        let (_srv, uri) = self.floor_server(scheme, spin)?;
        self.pin_client();
        let calls = self.scale.calls;
        let opts = crate::pingpong::RawOptions { floor: true, ..Default::default() };
        let (s, h) =
            bench::run_raw(&uri, size, calls, (calls / 10).max(100), spin, opts, None).map_err(|e| e.to_string())?;
        self.histograms.push((format!("floor-{scheme}-{}-{size}", spin_name(spin)), h));
        Ok(s)
    }

    fn rpc(&mut self, scheme: &str, size: usize, spin: SpinPolicy) -> Result<(Summary, Histogram<u64>), String> {
        let (_srv, uri) = self.rpc_server(scheme, spin)?;
        let (proc, psize) = if size <= 32 { ("null", 0) } else { ("echo", size) };
        let r =
            bench::run_histogram(&self.spec(&uri, proc, psize, self.scale.calls, spin)).map_err(|e| e.to_string())?;
        self.histograms.push((format!("rpc-{scheme}-{}-{size}", spin_name(spin)), r.1.clone()));
        Ok(r)
    }
}

fn spin_name(s: SpinPolicy) -> &'static str {
    crate::ladder::mode_name(s)
}

fn cdf(transport: &str, h: &Histogram<u64>) -> CdfSeries {
    let qs = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1.0];
    CdfSeries {
        transport: transport.into(),
        proc: "null".into(),
        size: 32,
        points: qs.iter().map(|&q| CdfPoint { latency_ns: h.value_at_quantile(q) as f64, fraction: q }).collect(),
    }
}

/// The ladder's rows on this host: (row name, scheme for raw, scheme for RPC, spin, whether
/// lowlat's transport needs more than the machine's floor for the path, which is then measured
/// too: shared memory's rings, UDP's unconnected server socket).
const LOCAL_RUNGS: [(&str, &str, &str, SpinPolicy, bool); 9] = [
    ("udp", "udp", "udp", SpinPolicy::Forever, true),
    ("udp-block", "udp", "udp", SpinPolicy::Block, true),
    ("tcp", "tcp", "tcp", SpinPolicy::Forever, false),
    ("tcp-block", "tcp", "tcp", SpinPolicy::Block, false),
    ("unix", "unix", "", SpinPolicy::Forever, false),
    ("shm-spin", "shm", "shm", SpinPolicy::Forever, true),
    ("shm-block", "shm", "shm", SpinPolicy::Block, false),
    ("onc+udp", "udp", "onc+udp", SpinPolicy::Forever, false),
    ("onc+tcp", "tcp", "onc+tcp", SpinPolicy::Forever, false),
];

fn ladder(lab: &mut Lab, results: &mut Results) {
    for (name, raw_scheme, rpc_scheme, spin, has_floor) in LOCAL_RUNGS {
        for size in [32usize, 1024] {
            lab.step(&format!("ladder: {name} {size} B"));
            let floor = has_floor.then(|| lab.floor(raw_scheme, size, spin));
            let raw = lab.raw(raw_scheme, size, spin);
            let rpc = if rpc_scheme.is_empty() {
                Err("no RPC over this baseline".to_string())
            } else {
                lab.rpc(rpc_scheme, size, spin)
            };
            let mut row =
                LadderRow::new(name, size as u32, raw.as_ref().ok().map(lat), rpc.as_ref().ok().map(|r| lat(&r.0)))
                    .with_floor(floor.as_ref().and_then(|f| f.as_ref().ok()).map(lat));
            let floor_err = floor.as_ref().and_then(|f| f.as_ref().err()).map(|e| format!("floor: {e}"));
            let why: Vec<String> =
                [raw.as_ref().err().cloned(), rpc.as_ref().err().cloned(), floor_err].into_iter().flatten().collect();
            if !why.is_empty() {
                row.skipped = Some(why.join("; "));
            }
            if size == 32 {
                if let Ok((_, h)) = &rpc {
                    results.cdf.push(cdf(name, h));
                }
            }
            results.ladder.push(row);
        }
    }
    raw_ethernet_rungs(lab, results);
}

/// eth, xdp and the XDP floor across a veth pair between two namespaces (root only).
fn raw_ethernet_rungs(lab: &mut Lab, results: &mut Results) {
    use lowlat_eth::ladder::{across, Pinning, Responder, Side};
    use lowlat_eth::pingpong::RunConfig;
    use lowlat_eth::testhosts::{check_root, TestHosts};
    let names = ["eth", "xdp", "xdp-floor"];
    if let Err(why) = check_root() {
        for n in names {
            for size in [32, 1024] {
                results.ladder.push(LadderRow::skipped(n, size, &format!("skipped: {why}")));
            }
        }
        return;
    }
    let hosts = match TestHosts::new() {
        Ok(h) => h,
        Err(e) => {
            for n in names {
                results.ladder.push(LadderRow::skipped(n, 32, &format!("could not create the test namespaces: {e}")));
            }
            return;
        }
    };
    let pin = Pinning { server: lab.place.server_cpu, client: lab.place.client_cpu };
    for (name, responder, side) in [
        ("eth", Responder::User(Side::Eth(Default::default())), Side::Eth(Default::default())),
        ("xdp", Responder::User(Side::Xdp(Default::default())), Side::Xdp(Default::default())),
        ("xdp-floor", Responder::XdpFloor, Side::Xdp(Default::default())),
    ] {
        for size in [32usize, 1024] {
            lab.step(&format!("ladder: {name} {size} B"));
            let cfg = RunConfig {
                size: size.max(8),
                rounds: lab.scale.calls as usize,
                warmup: (lab.scale.calls / 10) as usize,
                spin: SpinPolicy::Forever,
                ..Default::default()
            };
            let raw = across(&hosts, responder, side, &cfg, pin).map_err(|e| e.to_string()).map(|v| {
                let mut h = new_histogram();
                for x in v {
                    let _ = h.record(x);
                }
                Latency { p50_ns: h.value_at_quantile(0.5) as f64, p99_ns: h.value_at_quantile(0.99) as f64 }
            });
            let rpc = if name == "xdp-floor" {
                Err("the floor answers in the driver: there is no RPC on it".to_string())
            } else {
                eth_rpc(lab, &hosts, name, size, &hosts.a.mac.to_string())
            };
            let mut row = LadderRow::new(name, size as u32, raw.as_ref().ok().copied(), rpc.as_ref().ok().copied());
            let why: Vec<String> = [raw.err(), rpc.err()].into_iter().flatten().collect();
            if !why.is_empty() {
                row.skipped = Some(why.join("; "));
            }
            results.ladder.push(row);
        }
    }
}

/// RPC over eth:// or xdp://: `lowlat serve` in namespace a, the calls from a thread in b.
fn eth_rpc(
    lab: &Lab,
    hosts: &lowlat_eth::testhosts::TestHosts,
    scheme: &str,
    size: usize,
    server_mac: &str,
) -> Result<Latency, String> {
    let mut cmd = hosts.a.command(&lab.exe);
    cmd.args(["serve", &format!("{scheme}://{}", hosts.a.iface), "--spin-us", "forever"]);
    cmd.args(lab.psk_args());
    if let Some(c) = lab.place.server_cpu {
        cmd.args(["--cpu", &c.to_string()]);
    }
    let _srv = procs::spawn_command(cmd, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let (proc, psize) = if size <= 32 { ("null", 0) } else { ("echo", size) };
    let spec = BenchSpec {
        uri: format!("{scheme}://{}/{server_mac}", hosts.b.iface),
        ..lab.spec("", proc, psize, lab.scale.calls, SpinPolicy::Forever)
    };
    let s = hosts.b.spawn(move || bench::run(&spec)).join().map_err(|_| "benchmark thread panicked".to_string())?;
    let s = s.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    Ok(lat(&s))
}

fn busy_server(lab: &mut Lab, results: &mut Results) {
    let alone_s = if lab.scale.calls < 10_000 { 0.5 } else { 2.0 };
    let alone = workload_run(lab, alone_s, None);
    results.busy_server.workload_alone_ns = alone.as_ref().ok().copied();
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("busy server: {scheme}"));
        let row = busy_row(lab, scheme, alone.as_ref().ok().copied());
        results.busy_server.rows.push(row.unwrap_or_else(|e| BusyRow {
            transport: scheme.into(),
            size: 32,
            raw: None,
            rpc: None,
            round_trips_per_s: None,
            workload_slowdown: None,
            skipped: Some(e),
        }));
    }
}

/// Runs the workload on the server's CPU for `seconds`, concurrently with `during`; returns ns
/// per unit.
fn workload_run(lab: &mut Lab, seconds: f64, during: Option<&mut dyn FnMut(&mut Lab)>) -> Result<f64, String> {
    let w = lab.spawn(&["workload".into(), "--seconds".into(), format!("{seconds}")])?;
    if let Some(f) = during {
        f(lab);
    }
    let line = w.next_line(Duration::from_secs_f64(seconds + 30.0)).ok_or("the workload printed no result")?;
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("workload output {line:?}: {e}"))?;
    v["ns_per_unit"].as_f64().ok_or_else(|| "workload output lacks ns_per_unit".to_string())
}

fn busy_row(lab: &mut Lab, scheme: &str, alone: Option<f64>) -> Result<BusyRow, String> {
    let seconds = if lab.scale.calls < 10_000 { 1.0 } else { 4.0 };
    let mut raw = Err(String::new());
    let mut rpc = Err(String::new());
    let spin = SpinPolicy::Adaptive;
    let calls = lab.scale.calls / 2;
    let mut during = |lab: &mut Lab| {
        raw = lab.raw(scheme, 32, spin);
        rpc = (|| {
            let (_srv, uri) = lab.rpc_server(scheme, spin)?;
            bench::run(&lab.spec(&uri, "null", 0, calls, spin)).map_err(|e| e.to_string())
        })();
    };
    let loaded = workload_run(lab, seconds, Some(&mut during))?;
    let raw = raw?;
    let rpc = rpc?;
    Ok(BusyRow {
        transport: scheme.into(),
        size: 32,
        raw: Some(lat(&raw)),
        rpc: Some(lat(&rpc)),
        round_trips_per_s: Some(rpc.calls_per_s),
        workload_slowdown: alone.map(|a| loaded / a),
        skipped: None,
    })
}

fn threads(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        for (proc, size) in [("null", 0usize), ("maxresult", 1440)] {
            lab.step(&format!("threads: {scheme} {proc}"));
            let server = lab.rpc_server(scheme, SpinPolicy::Adaptive);
            for t in [1usize, 2, 4, 8] {
                let r = server.as_ref().map_err(|e| e.clone()).and_then(|(_, uri)| {
                    let spec = BenchSpec {
                        threads: t,
                        ..lab.spec(uri, proc, size, lab.scale.threads_calls, SpinPolicy::Adaptive)
                    };
                    bench::run(&spec).map_err(|e| e.to_string())
                });
                results.threads.push(ThreadsRow {
                    transport: scheme.into(),
                    proc: proc.into(),
                    size: size as u32,
                    threads: t as u32,
                    calls_per_s: r.as_ref().ok().map(|s| s.calls_per_s),
                    mbit_per_s: r.as_ref().ok().map(|s| s.mbit_s),
                    skipped: r.err(),
                });
            }
        }
    }
}

fn load(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("load: {scheme}"));
        let spin = SpinPolicy::Adaptive;
        let series = (|| -> Result<LoadSeries, String> {
            let (_srv, uri) = lab.rpc_server(scheme, spin)?;
            let cap = bench::run(&lab.spec(&uri, "null", 0, lab.scale.calls, spin)).map_err(|e| e.to_string())?;
            let capacity = cap.calls_per_s;
            let service_ns = 1e9 / capacity;
            let mut points = Vec::new();
            for u in [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95] {
                let rate = capacity * u;
                let calls = ((rate * lab.scale.load_seconds) as u64).clamp(200, 200_000);
                let spec = BenchSpec { rate: Some(rate), ..lab.spec(&uri, "null", 0, calls, spin) };
                let (s, run) = bench::run_open(&spec).map_err(|e| e.to_string())?;
                points.push(LoadPoint {
                    offered_fraction: u,
                    offered_calls_per_s: rate,
                    achieved_calls_per_s: s.calls_per_s,
                    p50_ns: s.p50_ns as f64,
                    p99_ns: s.p99_ns as f64,
                    p999_ns: s.p999_ns as f64,
                    model_ns: model_response_ns(service_ns, u),
                    sent_calls_per_s: Some(run.sent_per_s),
                    max_lag_ns: Some(run.max_lag_ns() as f64),
                    late_fraction: Some(run.late_fraction()),
                    sustained: Some(run.sustained()),
                    busy: Some(run.busy),
                    failed: Some(run.failed),
                });
            }
            Ok(LoadSeries {
                transport: scheme.into(),
                proc: "null".into(),
                size: 0,
                capacity_calls_per_s: Some(capacity),
                service_ns: Some(service_ns),
                points,
                skipped: None,
            })
        })();
        results.load.push(series.unwrap_or_else(|e| LoadSeries {
            transport: scheme.into(),
            proc: "null".into(),
            size: 0,
            capacity_calls_per_s: None,
            service_ns: None,
            points: Vec::new(),
            skipped: Some(e),
        }));
    }
}

fn cold(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("cold calls: {scheme}"));
        let rows = (|| -> Result<Vec<ColdRow>, String> {
            let (_srv, uri) = lab.rpc_server(scheme, SpinPolicy::Adaptive)?;
            lab.pin_client();
            let cfg = ClientConfig { psk: lab.psk.as_ref().map(|(_, k)| k.clone()), ..ClientConfig::default() };
            let c = LabClient::connect(&uri, cfg).map_err(|e| e.to_string())?;
            let mut warm = Vec::new();
            for _ in 0..2000 {
                let t = Instant::now();
                c.null().map_err(|e| e.to_string())?;
                warm.push(t.elapsed().as_nanos() as f64);
            }
            let warm_p50 = median(&mut warm);
            let mut rows = Vec::new();
            for idle_ms in [1u32, 10, 100] {
                let mut firsts = Vec::new();
                for _ in 0..lab.scale.cold_repeats {
                    std::thread::sleep(Duration::from_millis(idle_ms as u64));
                    let t = Instant::now();
                    c.null().map_err(|e| e.to_string())?;
                    firsts.push(t.elapsed().as_nanos() as f64);
                }
                rows.push(ColdRow {
                    transport: scheme.into(),
                    idle_ms,
                    first_call_ns: Some(median(&mut firsts)),
                    warm_p50_ns: Some(warm_p50),
                    repeats: lab.scale.cold_repeats,
                    skipped: None,
                });
            }
            Ok(rows)
        })();
        match rows {
            Ok(r) => results.cold.extend(r),
            Err(e) => results.cold.push(ColdRow {
                transport: scheme.into(),
                idle_ms: 1,
                first_call_ns: None,
                warm_p50_ns: None,
                repeats: 0,
                skipped: Some(e),
            }),
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The repository's peers/ folder, found from the executable (target/release/lowlat) or
/// `LOWLAT_PEERS_DIR`.
fn peers_dir(exe: &Path) -> Option<PathBuf> {
    if let Ok(d) = std::env::var("LOWLAT_PEERS_DIR") {
        return Some(PathBuf::from(d));
    }
    exe.ancestors().map(|a| a.join("peers")).find(|p| p.join("build.sh").is_file())
}

fn peers(lab: &mut Lab, results: &mut Results, out: &Path) {
    lab.step("peers: building");
    let Some(dir) = peers_dir(&lab.exe) else {
        results.peers.push(PeerRow::skipped(
            "peers",
            "-",
            "-",
            0,
            "peers/ not found next to the lowlat executable; set LOWLAT_PEERS_DIR",
        ));
        return;
    };
    let build_dir = out.join("peers-build");
    let built = std::process::Command::new("bash")
        .arg(dir.join("build.sh"))
        .arg(&build_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if let Ok(text) = std::fs::read_to_string(build_dir.join("skipped.txt")) {
        if let Ok(skipped) = lowlat_report::peers::parse_skipped(&text) {
            for (name, reason) in skipped {
                results.peers.extend(lowlat_report::peers::skipped_rows(&name, &reason));
            }
        }
    }
    if !built.is_ok_and(|s| s.success()) {
        results.peers.push(PeerRow::skipped("peers", "-", "-", 0, "peers/build.sh failed"));
        return;
    }
    lab.step("peers: running");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(dir.join("run.sh")).arg(&build_dir).args(["--calls", &lab.scale.peer_calls.to_string()]);
    if let (Some(s), Some(c)) = (lab.place.server_cpu, lab.place.client_cpu) {
        cmd.args(["--server-cpu", &s.to_string(), "--client-cpu", &c.to_string()]);
    }
    match cmd.stderr(std::process::Stdio::null()).output() {
        Ok(o) => {
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if let Ok(b) = BenchLine::parse(line) {
                    results.peers.push(PeerRow::from(&b));
                }
            }
        }
        Err(e) => results.peers.push(PeerRow::skipped("peers", "-", "-", 0, &format!("peers/run.sh: {e}"))),
    }
    // lowlat itself, the same two calls, for the side-by-side.
    for scheme in ["udp", "tcp", "shm", "onc+udp", "onc+tcp"] {
        for (proc, size) in [("null", 0usize), ("echo", 1440)] {
            let r = lab.rpc_server(scheme, SpinPolicy::Adaptive).and_then(|(_srv, uri)| {
                bench::run(&lab.spec(&uri, proc, size, lab.scale.peer_calls, SpinPolicy::Adaptive))
                    .map_err(|e| e.to_string())
            });
            results.peers.push(match r {
                Ok(s) => PeerRow {
                    system: "lowlat".into(),
                    transport: scheme.into(),
                    proc: proc.into(),
                    size: size as u32,
                    p50_ns: Some(s.p50_ns as f64),
                    p99_ns: Some(s.p99_ns as f64),
                    calls_per_s: Some(s.calls_per_s),
                    skipped: None,
                },
                Err(e) => PeerRow::skipped("lowlat", scheme, proc, size as u32, &e),
            });
        }
    }
}

fn accounting(lab: &mut Lab, results: &mut Results) -> Vec<(f64, f64)> {
    let mut sends = Vec::new();
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("accounting: {scheme}"));
        let bind = lab.bind_uri(scheme);
        match account::account(&lab.exe, &bind, lab.scale.calls, SpinPolicy::Adaptive, &lab.place) {
            Ok((a, c, s)) => {
                results.accounting.push(a);
                sends.push((c, s));
            }
            Err(e) => results
                .accounting
                .push(Accounting { skipped: Some(e), ..Accounting::from_parts(scheme, 0, &[], 0.0, &[]) }),
        }
    }
    sends
}

fn size_sweep(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("sizes: {scheme}"));
        let spin = SpinPolicy::Forever;
        let mut raw_points = Vec::new();
        let mut rpc_points = Vec::new();
        let sizes = lab.scale.sweep;
        let calls = (lab.scale.calls / 5).max(500);
        if let Ok((_srv, uri)) = lab.raw_server(scheme, spin) {
            for &size in sizes {
                if scheme == "udp" && size > 65_000 {
                    continue;
                }
                if let Ok((h, _)) = crate::pingpong::run(&uri, size, calls, calls / 10, spin, Default::default(), None)
                {
                    raw_points.push(SizePoint {
                        size: size as u32,
                        p50_ns: h.value_at_quantile(0.5) as f64,
                        p99_ns: h.value_at_quantile(0.99) as f64,
                    });
                }
            }
        }
        if let Ok((_srv, uri)) = lab.rpc_server(scheme, spin) {
            for &size in sizes {
                if let Ok(s) = bench::run(&lab.spec(&uri, "echo", size, calls, spin)) {
                    rpc_points.push(SizePoint { size: size as u32, p50_ns: s.p50_ns as f64, p99_ns: s.p99_ns as f64 });
                }
            }
        }
        results.size_sweep.push(SizeSeries { transport: scheme.into(), kind: "raw".into(), points: raw_points });
        results.size_sweep.push(SizeSeries { transport: scheme.into(), kind: "rpc".into(), points: rpc_points });
    }
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| us(x as u64))
}

fn print_tables(r: &Results, sends: &[(f64, f64)]) {
    println!(
        "\n== The ladder: the machine's floor, lowlat's raw ping-pong and its null call (32 B) / echo (1 KiB), µs =="
    );
    println!("(floor: the simplest exchange the machine allows where lowlat's transport needs more: shm, one");
    println!(" message each way through cache lines, no ring; udp, two connected sockets. raw: lowlat's transport)");
    println!(
        "{:<10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>7} {:>7} {:>9}",
        "transport",
        "bytes",
        "floor p50",
        "floor p99",
        "raw p50",
        "raw p99",
        "rpc p50",
        "rpc p99",
        "rpc/raw",
        "rpc/flr",
        "diff"
    );
    let times = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}x"));
    for row in &r.ladder {
        println!(
            "{:<10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9} | {:>7} {:>7} {:>9}{}",
            row.transport,
            row.size,
            opt_us(row.floor.map(|l| l.p50_ns)),
            opt_us(row.floor.map(|l| l.p99_ns)),
            opt_us(row.raw.map(|l| l.p50_ns)),
            opt_us(row.raw.map(|l| l.p99_ns)),
            opt_us(row.rpc.map(|l| l.p50_ns)),
            opt_us(row.rpc.map(|l| l.p99_ns)),
            times(row.ratio_p50),
            times(row.rpc_over_floor_p50),
            row.diff_p50_ns.map_or("-".into(), |d| format!("{:+.2}", d / 1000.0)),
            row.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
    println!("\n== A busy server: {} on the server's CPU ==", r.busy_server.workload);
    for b in &r.busy_server.rows {
        println!(
            "{:<6} raw p50 {:>8} µs  rpc p50 {:>8} p99 {:>8} µs  {:>9} calls/s  workload slowdown {}{}",
            b.transport,
            opt_us(b.raw.map(|l| l.p50_ns)),
            opt_us(b.rpc.map(|l| l.p50_ns)),
            opt_us(b.rpc.map(|l| l.p99_ns)),
            b.round_trips_per_s.map_or("-".into(), |x| format!("{x:.0}")),
            b.workload_slowdown.map_or("-".into(), |x| format!("{x:.2}x")),
            b.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
    println!("\n== Threads (Firefly Table I): calls/s and Mbit/s ==");
    for t in &r.threads {
        println!(
            "{:<5} {:<10} {:>5} B {} threads: {:>10} calls/s {:>9} Mbit/s{}",
            t.transport,
            t.proc,
            t.size,
            t.threads,
            t.calls_per_s.map_or("-".into(), |x| format!("{x:.0}")),
            t.mbit_per_s.map_or("-".into(), |x| format!("{x:.1}")),
            t.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})")),
        );
    }
    println!(
        "\n== Load (open loop, Poisson arrivals, latency from each call's scheduled time): latency vs offered \
         load, with r = s/(1-u); * = the generator fell behind its schedule ==",
    );
    for l in &r.load {
        println!(
            "{} (capacity {} calls/s):",
            l.transport,
            l.capacity_calls_per_s.map_or("-".into(), |x| format!("{x:.0}"))
        );
        for p in &l.points {
            println!(
                "  u={:.2}  p50 {:>8} p99 {:>8} p99.9 {:>8} µs   model {:>8} µs   lag max {:>8} µs, {:.1}% late{}",
                p.offered_fraction,
                us(p.p50_ns as u64),
                us(p.p99_ns as u64),
                us(p.p999_ns as u64),
                us(p.model_ns as u64),
                p.max_lag_ns.map_or("-".into(), |x| us(x as u64)),
                100.0 * p.late_fraction.unwrap_or(0.0),
                if p.sustained == Some(false) { "  *" } else { "" }
            );
        }
    }
    println!("\n== Cold calls: the first call after idleness (median), µs ==");
    for c in &r.cold {
        println!(
            "{:<5} idle {:>3} ms: first {:>9}  warm p50 {:>8}{}",
            c.transport,
            c.idle_ms,
            opt_us(c.first_call_ns),
            opt_us(c.warm_p50_ns),
            c.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})"))
        );
    }
    println!("\n== Peers: null call and 1440-byte echo, µs ==");
    for p in &r.peers {
        println!(
            "{:<8} {:<8} {:<5} {:>5} B  p50 {:>9}  p99 {:>9}{}",
            p.system,
            p.transport,
            p.proc,
            p.size,
            opt_us(p.p50_ns),
            opt_us(p.p99_ns),
            p.skipped.as_ref().map_or(String::new(), |s| format!("  ({s})"))
        );
    }
    println!();
    for (a, (c, s)) in r.accounting.iter().zip(sends.iter().chain(std::iter::repeat(&(0.0, 0.0)))) {
        match &a.skipped {
            Some(why) => println!("accounting {}: skipped: {why}", a.transport),
            None => println!("{}", account::table(a, *c, *s)),
        }
    }
}

fn write_outputs(out: &Path, results: &Results, histograms: &[(String, Histogram<u64>)]) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let json = out.join("results.json");
    std::fs::write(&json, results.to_json()).map_err(|e| format!("write {}: {e}", json.display()))?;
    let html = out.join("report.html");
    std::fs::write(&html, lowlat_report::render_html(results)).map_err(|e| format!("write {}: {e}", html.display()))?;
    let logs = out.join("histograms");
    std::fs::create_dir_all(&logs).map_err(|e| format!("create {}: {e}", logs.display()))?;
    for (name, h) in histograms {
        let path = logs.join(format!("{}.hlog", name.replace(['+', '/'], "_")));
        let mut file = std::fs::File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        let mut ser = hdrhistogram::serialization::V2DeflateSerializer::new();
        let mut w = hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder::new()
            .add_comment(&format!("lowlat lab: {name}, round trips in ns"))
            .begin_log_with(&mut file, &mut ser)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        w.write_histogram(
            h,
            Duration::ZERO,
            Duration::from_secs(1),
            hdrhistogram::serialization::interval_log::Tag::new(name),
        )
        .map_err(|e| format!("write {}: {e:?}", path.display()))?;
    }
    println!(
        "wrote {}, {} and {} histogram logs in {}",
        json.display(),
        html.display(),
        histograms.len(),
        logs.display()
    );
    Ok(())
}

/// Runs the laboratory. Without `out`, results go to `lab-out/` in the current directory.
/// Runs the laboratory; with `psk_file`, every lowlat server and caller binds with that key
/// (ONC RPC and the peers do not take one).
pub fn run_lab(quick: bool, out: Option<&Path>, psk_file: Option<&Path>) -> Result<(), String> {
    let psk = match psk_file {
        Some(p) => Some((p.to_path_buf(), lowlat::read_psk_file(p).map_err(|e| e.to_string())?)),
        None => None,
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("lab-out"));
    let place = Placement::detect();
    let scale = if quick { QUICK } else { FULL };
    let steps = (LOCAL_RUNGS.len() as u64 + 3) * 2 + 3 + 6 + 3 + 3 + 2 + 3 + 3;
    let progress = ProgressBar::new(steps);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let mut machine = Machine::detect();
    machine.notes.push(match (place.server_cpu, place.client_cpu) {
        (Some(s), Some(c)) => format!("servers pinned to CPU {s}, callers to CPU {c}"),
        _ => "fewer than two CPUs: nothing pinned".into(),
    });
    if let Err(why) = lowlat_eth::testhosts::check_root() {
        machine.notes.push(format!("raw Ethernet rows skipped: {why}"));
    }
    let mut results = Results {
        format_version: FORMAT_VERSION,
        machine,
        quick,
        ladder: Vec::new(),
        busy_server: BusyServer { workload: workload::description(), workload_alone_ns: None, rows: Vec::new() },
        threads: Vec::new(),
        load: Vec::new(),
        cold: Vec::new(),
        peers: Vec::new(),
        accounting: Vec::new(),
        cdf: Vec::new(),
        size_sweep: Vec::new(),
    };
    let mut lab = Lab { exe, place, scale, seq: 0, progress, histograms: Vec::new(), psk };
    let started = Instant::now();
    ladder(&mut lab, &mut results);
    busy_server(&mut lab, &mut results);
    threads(&mut lab, &mut results);
    load(&mut lab, &mut results);
    cold(&mut lab, &mut results);
    peers(&mut lab, &mut results, &out);
    let sends = accounting(&mut lab, &mut results);
    size_sweep(&mut lab, &mut results);
    lab.progress.finish_and_clear();
    print_tables(&results, &sends);
    println!("the laboratory took {:.0} s", started.elapsed().as_secs_f64());
    write_outputs(&out, &results, &lab.histograms)
}
