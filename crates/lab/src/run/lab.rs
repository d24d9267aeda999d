//! The lab's process manager: the servers an experiment asks for (this executable, run as `lowlat
//! serve` or `lowlat pingpong --serve` on a fresh address and pinned to the server's CPU), the
//! caller's CPU and key, the progress bar, and the histograms recorded on the way. Experiments
//! ask it for a server and a measurement, so none of them spawns a process itself.
//!
//! With `lab --remote`, the servers of network transports run on the other host instead,
//! started there by its agent ([`crate::agent`]); this is the one place that decides where a
//! server runs and how the caller reaches it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use lowlat::SpinPolicy;
use lowlat_report::Latency;

use crate::agent::client::reachable;
use crate::agent::{AgentClient, RemoteProcess, Role, Scheme};
use crate::bench::{self, BenchSpec};
use crate::ladder::Placement;
use crate::latency::Summary;
use crate::procs;

/// How much of everything to measure.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scale {
    pub(crate) calls: u64,
    pub(crate) threads_calls: u64,
    /// Seconds each run of the threads section aims at (its counts sized from one caller's
    /// rate): callers that outnumber the CPUs take turns by the scheduler's slices (ms), so a
    /// run far shorter would time the turns, not the calls.
    pub(crate) threads_seconds: f64,
    /// Rounds of the threads section (see its module).
    pub(crate) threads_rounds: u32,
    pub(crate) load_seconds: f64,
    /// Seconds each closed-loop run of the saturation section aims at (its counts are sized
    /// from the rate the run before measured).
    pub(crate) saturation_seconds: f64,
    pub(crate) cold_repeats: u32,
    pub(crate) peer_calls: u64,
    pub(crate) sweep: &'static [usize],
    /// Whether the accounting counts instructions too (callgrind: seconds per transport).
    pub(crate) count_instructions: bool,
}

pub(crate) const QUICK: Scale = Scale {
    calls: 5_000,
    threads_calls: 4_000,
    threads_seconds: 0.1,
    threads_rounds: 3,
    load_seconds: 0.25,
    saturation_seconds: 0.1,
    cold_repeats: 3,
    peer_calls: 2_000,
    sweep: &[32, 1024, 16384],
    count_instructions: false,
};
pub(crate) const FULL: Scale = Scale {
    calls: 50_000,
    threads_calls: 40_000,
    threads_seconds: 0.3,
    threads_rounds: 3,
    load_seconds: 1.5,
    saturation_seconds: 1.0,
    cold_repeats: 15,
    peer_calls: 10_000,
    sweep: &[32, 256, 1024, 4096, 16384, 65536],
    count_instructions: true,
};

/// The lab's own state: where servers run, the executable that runs them, what was recorded.
pub(crate) struct Lab {
    pub(crate) exe: PathBuf,
    pub(crate) place: Placement,
    pub(crate) scale: Scale,
    seq: u32,
    pub(crate) progress: ProgressBar,
    /// Histograms to write as logs: (file stem, histogram).
    pub(crate) histograms: Vec<(String, Histogram<u64>)>,
    /// Servers and callers bind with this pre-shared key (`lab --psk-file`).
    pub(crate) psk: Option<(PathBuf, lowlat::Psk)>,
    /// The other host of `lab --remote`, where network transports' servers run.
    pub(crate) remote: Option<RemoteEnd>,
}

/// The other host of `lab --remote`: its agent, and how this machine reaches it.
pub(crate) struct RemoteEnd {
    pub(crate) agent: AgentClient,
    /// The agent's address, which replaces a wildcard in the URIs its servers print.
    pub(crate) ip: IpAddr,
    /// This machine's interface toward the agent (for eth:// and xdp:// callers).
    pub(crate) iface: Option<String>,
    /// The MAC of the agent's interface toward this machine.
    pub(crate) peer_mac: Option<String>,
}

impl RemoteEnd {
    /// How a caller here reaches what a server there printed.
    fn client_uri(&self, scheme: Scheme, printed: &str) -> Result<String, String> {
        if !scheme.is_ethernet() {
            return Ok(reachable(printed, self.ip));
        }
        match (&self.iface, &self.peer_mac) {
            (Some(i), Some(m)) => Ok(format!("{}://{i}/{m}", scheme.as_str())),
            _ => Err(format!(
                "{}:// across hosts needs this machine's interface toward the agent and the agent's MAC; \
                 one is unknown",
                scheme.as_str()
            )),
        }
    }
}

/// A server of the lab's: a child process here, or one the agent started on the other host.
/// Dropping it stops it either way.
pub(crate) enum Served {
    Here(procs::ServerProcess),
    There(RemoteProcess),
}

impl Served {
    /// The URIs it printed, as it printed them.
    fn uris(&self) -> &[String] {
        match self {
            Served::Here(p) => &p.uris,
            Served::There(p) => &p.uris,
        }
    }

    /// The next line it prints, waiting at most `timeout`.
    pub(crate) fn next_line(&self, timeout: Duration) -> Option<String> {
        match self {
            Served::Here(p) => p.next_line(timeout),
            Served::There(p) => p.next_line(timeout),
        }
    }
}

/// A summary's median and p99, as the report records a latency.
pub(crate) fn lat(s: &Summary) -> Latency {
    Latency { p50_ns: s.p50_ns as f64, p99_ns: s.p99_ns as f64 }
}

impl Lab {
    pub(crate) fn new(
        exe: PathBuf,
        place: Placement,
        scale: Scale,
        progress: ProgressBar,
        psk: Option<(PathBuf, lowlat::Psk)>,
        remote: Option<RemoteEnd>,
    ) -> Lab {
        Lab { exe, place, scale, seq: 0, progress, histograms: Vec::new(), psk, remote }
    }

    /// Whether a server of `scheme` runs on the other host: a network transport, with
    /// `lab --remote`.
    pub(crate) fn across(&self, scheme: &str) -> bool {
        self.remote.is_some() && Scheme::parse(scheme).is_some()
    }

    /// Starts a server of `scheme`: on the other host as `role` when [`across`](Self::across)
    /// (and `there`), else here with the arguments `args` makes of a fresh bind URI. Returns it
    /// and the URI a caller here reaches it at.
    fn start(
        &mut self,
        scheme: &str,
        there: bool,
        role: impl FnOnce(Scheme) -> Role,
        args: impl FnOnce(String) -> Vec<String>,
        what: &str,
    ) -> Result<(Served, String), String> {
        if let (true, Some(r), Some(s)) = (there, &self.remote, Scheme::parse(scheme)) {
            let p = r.agent.spawn(role(s)).map_err(|e| e.to_string())?;
            let printed = p.uris.first().ok_or(format!("the {what} on the other host printed no URI"))?;
            let uri = r.client_uri(s, printed)?;
            return Ok((Served::There(p), uri));
        }
        let bind = self.bind_uri(scheme);
        let p = Served::Here(self.spawn(&args(bind))?);
        let uri = p.uris().first().cloned().ok_or(format!("the {what} printed no URI"))?;
        Ok((p, uri))
    }

    /// The busy-server workload for `seconds`, on the other host when `there` and the lab has
    /// one, pinned to the servers' CPU.
    pub(crate) fn workload(&mut self, seconds: f64, there: bool) -> Result<Served, String> {
        if let (true, Some(r)) = (there, &self.remote) {
            return r.agent.spawn(Role::Workload { seconds }).map(Served::There).map_err(|e| e.to_string());
        }
        self.spawn(&["workload".into(), "--seconds".into(), format!("{seconds}")]).map(Served::Here)
    }

    pub(crate) fn step(&self, what: &str) {
        self.progress.set_message(what.to_string());
        self.progress.inc(1);
    }

    /// A bind URI for `scheme` on this host, fresh each time (shm needs a new path).
    pub(crate) fn bind_uri(&mut self, scheme: &str) -> String {
        self.seq += 1;
        match scheme {
            "shm" => format!("shm:///tmp/lowlat-lab-{}-{}.sock", std::process::id(), self.seq),
            "unix" => format!("unix:///tmp/lowlat-lab-{}-{}.unix", std::process::id(), self.seq),
            s => format!("{s}://127.0.0.1:0"),
        }
    }

    /// `--psk-file FILE` for a server, when the lab runs with a key.
    pub(crate) fn psk_args(&self) -> Vec<String> {
        self.psk.iter().flat_map(|(p, _)| ["--psk-file".to_string(), p.display().to_string()]).collect()
    }

    pub(crate) fn spawn(&self, args: &[String]) -> Result<procs::ServerProcess, String> {
        let mut a = args.to_vec();
        if let Some(c) = self.place.server_cpu {
            a.push("--cpu".into());
            a.push(c.to_string());
        }
        procs::spawn(&self.exe, &a, Duration::from_secs(10)).map_err(|e| e.to_string())
    }

    /// `lowlat serve` for the lab interface on a fresh address of `scheme` (on the other host
    /// for a network transport, with `lab --remote`).
    pub(crate) fn rpc_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(Served, String), String> {
        self.rpc_server_at(scheme, spin, true)
    }

    /// [`rpc_server`](Self::rpc_server), here whatever the scheme unless `there`.
    pub(crate) fn rpc_server_at(
        &mut self,
        scheme: &str,
        spin: SpinPolicy,
        there: bool,
    ) -> Result<(Served, String), String> {
        let keyed = self.psk.is_some();
        let psk = self.psk_args();
        self.start(
            scheme,
            there,
            |s| Role::Rpc { scheme: s, spin: spin.to_string(), keyed },
            |bind| {
                let mut args = vec!["serve".into(), bind, "--spin-us".into(), spin.to_string()];
                args.extend(psk);
                args
            },
            "server",
        )
    }

    /// `lowlat pingpong --serve` on a fresh address of `scheme`.
    pub(crate) fn raw_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(Served, String), String> {
        self.start(
            scheme,
            true,
            |s| Role::Raw { scheme: s, spin: spin.to_string() },
            |bind| vec!["pingpong".into(), "--serve".into(), bind, "--spin-us".into(), spin.to_string()],
            "ping-pong server",
        )
    }

    /// `lowlat pingpong --serve --floor`: the machine's floor for `scheme`'s path (across
    /// hosts, the link's).
    pub(crate) fn floor_server(&mut self, scheme: &str, spin: SpinPolicy) -> Result<(Served, String), String> {
        self.start(
            scheme,
            true,
            |s| Role::Floor { scheme: s, spin: spin.to_string() },
            |bind| ["pingpong", "--serve", "--floor", &bind, "--spin-us", &spin.to_string()].map(String::from).to_vec(),
            "floor server",
        )
    }

    pub(crate) fn pin_client(&self) {
        if let Some(c) = self.place.client_cpu {
            let _ = lowlat_sys::pin_to_cpu(c);
        }
    }

    pub(crate) fn spec(&self, uri: &str, proc: &str, size: usize, calls: u64, spin: SpinPolicy) -> BenchSpec {
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

    pub(crate) fn raw(&mut self, scheme: &str, size: usize, spin: SpinPolicy) -> Result<Summary, String> {
        let (_srv, uri) = self.raw_server(scheme, spin)?;
        self.pin_client();
        let calls = self.scale.calls;
        let (s, h) = bench::run_raw(&uri, size, calls, (calls / 10).max(100), spin, Default::default(), None)
            .map_err(|e| e.to_string())?;
        self.histograms.push((format!("raw-{scheme}-{}-{size}", spin_name(spin)), h));
        Ok(s)
    }

    pub(crate) fn floor(&mut self, scheme: &str, size: usize, spin: SpinPolicy) -> Result<Summary, String> {
        let (_srv, uri) = self.floor_server(scheme, spin)?;
        self.pin_client();
        let calls = self.scale.calls;
        let opts = crate::pingpong::RawOptions { floor: true, ..Default::default() };
        let (s, h) =
            bench::run_raw(&uri, size, calls, (calls / 10).max(100), spin, opts, None).map_err(|e| e.to_string())?;
        self.histograms.push((format!("floor-{scheme}-{}-{size}", spin_name(spin)), h));
        Ok(s)
    }

    pub(crate) fn rpc(
        &mut self,
        scheme: &str,
        size: usize,
        spin: SpinPolicy,
    ) -> Result<(Summary, Histogram<u64>), String> {
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
