//! The data model of `results.json`: every figure `lowlat lab` measures, with the machine it ran on.
//!
//! Times are nanoseconds as `f64` (so averages need no rounding); rates are per second. A row that
//! could not be measured keeps its identifying fields, leaves the figures out and says why in
//! `skipped`. `docs/results.schema.json` is generated from these types (see [`crate::schema`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The version of this format; bumped when a field changes meaning or disappears.
pub const FORMAT_VERSION: u32 = 1;

/// Everything one run of `lowlat lab` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// Format version of this file ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The machine the figures were measured on.
    pub machine: Machine,
    /// True for `lowlat lab --quick`: fewer calls per figure, so tails are less certain.
    pub quick: bool,
    /// Raw ping-pong against null RPC per transport: what the RPC layer adds to the transport's
    /// floor.
    pub ladder: Vec<LadderRow>,
    /// The ladder again with a CPU-bound workload on the server's CPU.
    pub busy_server: BusyServer,
    /// Throughput with 1 to 16 closed-loop caller threads, pinned to one CPU and not.
    pub threads: Vec<ThreadsRow>,
    /// Open-loop latency against offered load, beside the queueing model r = s/(1-u).
    pub load: Vec<LoadSeries>,
    /// Calls per second with W calls in flight against the machine's throughput floor, the
    /// server's CPU per call, and latency against offered load up to the saturated rate.
    /// Absent from files written before the section existed.
    #[serde(default)]
    pub saturation: Vec<SaturationSeries>,
    /// The first call after a period of idleness.
    pub cold: Vec<ColdRow>,
    /// Other RPC systems measured on the same machine in the same run.
    pub peers: Vec<PeerRow>,
    /// Where the time of one call goes, part by part, and the model check.
    pub accounting: Vec<Accounting>,
    /// Latency distributions (cumulative) of null calls per transport.
    pub cdf: Vec<CdfSeries>,
    /// Round-trip time as the message grows, per transport.
    pub size_sweep: Vec<SizeSeries>,
    /// The second host of `lowlat lab --remote`, and the link to it; absent for a run on one
    /// machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteHost>,
}

/// The far end of a run across two hosts (`lowlat lab --remote HOST`): the machine its agent
/// described, the link's own floor, and what stayed on this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteHost {
    /// The agent's address as the run reached it (`HOST:PORT`).
    pub agent: String,
    /// The machine the servers ran on, as its agent described it.
    pub machine: Machine,
    /// The link's own floor: two connected UDP sockets exchanging 32 bytes across it, the
    /// simplest exchange the link allows between two processes (absent if it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_floor: Option<Latency>,
    /// Transports measured on this machine alone, because they have no meaning across hosts
    /// (shared memory, Unix sockets), and the sections that stayed here.
    pub local_only: Vec<String>,
}

/// A description of the machine, enough to tell two results files apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// CPU model name, as `/proc/cpuinfo` gives it.
    pub cpu_model: String,
    /// Number of CPUs the run could use.
    pub cores: u32,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// When the run started, RFC 3339 in UTC (e.g. `2026-11-23T09:30:00Z`).
    pub date: String,
    /// Host name, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Anything about the setup a reader should know (pinning, root or not, virtualisation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The network interface toward the other host of a run across two hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<Nic>,
}

/// A network interface as its machine describes it; a fact it could not read is absent (and
/// shown as unknown), never an error.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// The interface's name (`eth0`, `ens5`, a veth end).
    pub name: String,
    /// Its hardware address, `aa:bb:cc:dd:ee:ff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Its IPv4 address, the one the other host reaches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The driver's name (`virtio_net`, `mlx5_core`, `veth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Link speed in Mbit/s, as `/sys/class/net/IF/speed` gives it (virtual links have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u32>,
    /// Interrupt coalescing as `ethtool -c` reads it (e.g. `rx 8 us/32 frames, tx 0 us/1
    /// frame, adaptive rx off`), where the driver tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalescing: Option<String>,
    /// The MTU, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

/// Two points of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// Median round trip, ns.
    pub p50_ns: f64,
    /// 99th percentile round trip, ns.
    pub p99_ns: f64,
}

/// One rung of the ladder: a transport at one message size, raw and with RPC on top, and, where
/// lowlat's transport needs more than the simplest exchange the machine allows, that floor too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LadderRow {
    /// Transport name as in URIs (`udp`, `tcp`, `unix`, `eth`, `xdp`, `xdp-floor`, `shm-spin`,
    /// `shm-block`, `onc+udp`, `onc+tcp`).
    pub transport: String,
    /// Message size in bytes (32 or 1024).
    pub size: u32,
    /// The machine's floor for this path, where lowlat's transport needs more than the simplest
    /// exchange the hardware or the OS allows: shared memory, one message each way through
    /// cache lines with its sequence word written last (no ring); UDP, two connected sockets.
    /// Absent where `raw` is itself the simplest exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Latency>,
    /// Raw ping-pong of lowlat's transport with no RPC layer (shared memory: its rings; UDP: a
    /// server on one unconnected socket, as lowlat's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Latency>,
    /// Null RPC (size 32: NULL; larger: ECHO of that many bytes) over the same transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc: Option<Latency>,
    /// rpc.p50 / raw.p50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_p50: Option<f64>,
    /// rpc.p50 - raw.p50, ns: the RPC layer's own cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_p50_ns: Option<f64>,
    /// raw.p50 / floor.p50: what lowlat's transport adds to the machine's floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_over_floor_p50: Option<f64>,
    /// rpc.p50 / floor.p50: the whole call against the machine's floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_over_floor_p50: Option<f64>,
    /// Why some figures are missing (e.g. "needs root"), if any are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Measured across the link to the other host of `lowlat lab --remote` (the server there,
    /// the caller here); false for a row measured on this machine alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub across_link: bool,
}

fn ratio(num: Option<Latency>, den: Option<Latency>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d.p50_ns > 0.0 => Some(n.p50_ns / d.p50_ns),
        _ => None,
    }
}

impl LadderRow {
    /// A row with the ratio and difference filled in from whichever figures are present.
    pub fn new(transport: &str, size: u32, raw: Option<Latency>, rpc: Option<Latency>) -> Self {
        LadderRow {
            transport: transport.to_owned(),
            size,
            floor: None,
            raw,
            rpc,
            ratio_p50: ratio(rpc, raw),
            diff_p50_ns: match (raw, rpc) {
                (Some(r), Some(c)) if r.p50_ns > 0.0 => Some(c.p50_ns - r.p50_ns),
                _ => None,
            },
            raw_over_floor_p50: None,
            rpc_over_floor_p50: None,
            skipped: None,
            across_link: false,
        }
    }

    /// The row as measured across the link to the other host (or not).
    pub fn across_link(mut self, across: bool) -> Self {
        self.across_link = across;
        self
    }

    /// The row with the machine's floor for its path, and the ratios against it.
    pub fn with_floor(mut self, floor: Option<Latency>) -> Self {
        self.floor = floor;
        self.raw_over_floor_p50 = ratio(self.raw, floor);
        self.rpc_over_floor_p50 = ratio(self.rpc, floor);
        self
    }

    /// A row that could not be measured at all.
    pub fn skipped(transport: &str, size: u32, reason: &str) -> Self {
        LadderRow { skipped: Some(reason.to_owned()), ..LadderRow::new(transport, size, None, None) }
    }
}

/// The ladder with a CPU-bound workload sharing the server's CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BusyServer {
    /// What the workload is (e.g. "tiled 256x256 f64 matrix multiplication").
    pub workload: String,
    /// Time of one workload unit with nothing else running, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_alone_ns: Option<f64>,
    /// One row per transport and size.
    pub rows: Vec<BusyRow>,
}

/// One transport at one size while the server's CPU also runs the workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BusyRow {
    /// Transport name, as in [`LadderRow::transport`].
    pub transport: String,
    /// Message size in bytes.
    pub size: u32,
    /// Raw ping-pong under load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Latency>,
    /// Null RPC under load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc: Option<Latency>,
    /// RPC round trips per second completed while the workload ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips_per_s: Option<f64>,
    /// Workload time with the calls running divided by its time alone (1.0 = unaffected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_slowdown: Option<f64>,
    /// Why figures are missing, if any are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Closed-loop throughput of one transport, procedure and number of caller threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThreadsRow {
    /// Transport name.
    pub transport: String,
    /// Procedure: `null` or `maxresult`.
    pub proc: String,
    /// Bytes of result per call (0 for NULL, 1440 for MAXRESULT(1440)).
    pub size: u32,
    /// Caller threads, each with its own binding.
    pub threads: u32,
    /// The callers were left to the scheduler; otherwise all were pinned to the lab's client
    /// CPU (results written before this field existed: pinned).
    #[serde(default)]
    pub unpinned: bool,
    /// Completed calls per second, all threads together (the median over the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_s: Option<f64>,
    /// Payload bits per second / 10^6 (calls_per_s * size * 8 / 10^6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbit_per_s: Option<f64>,
    /// Rounds measured: each round ran every count of callers once, in turn, so that a ratio
    /// to one caller compares runs made moments apart (results written before this field
    /// existed: one).
    #[serde(default = "one_round")]
    pub rounds: u32,
    /// The median over the rounds of this row's calls/s against one caller's in the same round
    /// (absent: [`ThreadsRow::of_one_caller`] divides the medians).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_one_caller_by_round: Option<f64>,
    /// Why figures are missing, if any are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

fn one_round() -> u32 {
    1
}

impl ThreadsRow {
    /// This row's calls/s against one caller's (Firefly's Table I read across): the median of
    /// the rounds' ratios where it was measured in rounds, else against the row of `rows` that
    /// measured the same with one caller, when both have a rate.
    pub fn of_one_caller(&self, rows: &[ThreadsRow]) -> Option<f64> {
        if self.of_one_caller_by_round.is_some() {
            return self.of_one_caller_by_round;
        }
        let one = rows
            .iter()
            .find(|o| {
                (&o.transport, &o.proc, o.size, o.unpinned, o.threads)
                    == (&self.transport, &self.proc, self.size, self.unpinned, 1)
            })?
            .calls_per_s
            .filter(|one| *one > 0.0)?;
        self.calls_per_s.map(|x| x / one)
    }
}

/// Open-loop latency of one transport at increasing offered load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSeries {
    /// Transport name.
    pub transport: String,
    /// Procedure called (usually `null`).
    pub proc: String,
    /// Message size in bytes.
    pub size: u32,
    /// Measured capacity: closed-loop calls per second with one caller; offered load is a
    /// fraction of this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_calls_per_s: Option<f64>,
    /// Service time s used by the model (1 / capacity), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ns: Option<f64>,
    /// One point per offered load, in increasing order.
    pub points: Vec<LoadPoint>,
    /// Why the series is missing or short, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Latency at one offered load, measured from each request's scheduled send time (free of
/// coordinated omission).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadPoint {
    /// Offered load as a fraction of capacity (utilisation u, 0..1).
    pub offered_fraction: f64,
    /// Requests per second sent on the schedule.
    pub offered_calls_per_s: f64,
    /// Replies per second actually received.
    pub achieved_calls_per_s: f64,
    /// Median latency, ns.
    pub p50_ns: f64,
    /// 99th percentile latency, ns.
    pub p99_ns: f64,
    /// 99.9th percentile latency, ns.
    pub p999_ns: f64,
    /// The model's mean response time r = s/(1-u), ns.
    pub model_ns: f64,
    /// Requests per second the generator actually sent (below `offered_calls_per_s` when it fell
    /// behind its schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_calls_per_s: Option<f64>,
    /// The latest any request was sent after its scheduled time, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_ns: Option<f64>,
    /// Fraction of requests sent more than 10 µs after their scheduled time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_fraction: Option<f64>,
    /// The machine's floor for that fraction, measured beside the point: the same schedule's
    /// send times waited for by a thread that makes no request, placed as the generator's
    /// (what the host's own stalls made late, whatever the generator does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_late_fraction: Option<f64>,
    /// The latest send of the machine's floor for the same schedule, ns behind its time (beside
    /// `max_lag_ns`: a lag the host's own stalls reach too is not the generator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_max_lag_ns: Option<f64>,
    /// False when the generator could not keep its schedule (over 1% of sends late by more
    /// than 10 µs): the latencies then include its own backlog, and the point is not the load it
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<bool>,
    /// Requests the server shed with `Busy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<u64>,
    /// Requests that failed otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
}

/// Response time predicted by Lampson's single-server queue: r = s/(1-u). Infinite at u >= 1.
pub fn model_response_ns(service_ns: f64, utilisation: f64) -> f64 {
    if utilisation >= 1.0 {
        f64::INFINITY
    } else {
        service_ns / (1.0 - utilisation)
    }
}

/// One transport driven to saturation (DESIGN principle 13): lowlat's calls per second with W
/// calls in flight from one caller thread beside the machine's throughput floor at the same W,
/// the server's CPU per call at each (Riddoch's per-request cost), and open-loop latency
/// against offered load up to the saturated rate, beside r = s/(1-u).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaturationSeries {
    /// Transport name.
    pub transport: String,
    /// Procedure called (`null`).
    pub proc: String,
    /// Bytes of argument and result per call (0 for the null call).
    pub size: u32,
    /// The floor's exchange, in words (the simplest pipelined exchange the machine allows on
    /// this path); absent where there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<String>,
    /// Why there is no floor for this transport, where there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_floor: Option<String>,
    /// Bytes of each floor message.
    pub floor_size: u32,
    /// One row per W, in increasing order.
    pub rows: Vec<SaturationRow>,
    /// The unloaded service time s: the median of single calls, one at a time (the W = 1
    /// row's p50), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ns: Option<f64>,
    /// The saturated rate: the most calls per second of any row; offered load is a fraction
    /// of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_calls_per_s: Option<f64>,
    /// The W of the row with the saturated rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_in_flight: Option<u32>,
    /// Open-loop latency at fractions u of the saturated rate, in increasing order; each
    /// point's `model_ns` is r = s/(1-u) with s = `service_ns`.
    pub points: Vec<LoadPoint>,
    /// Why the series is missing or short, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Seconds the series took to measure, servers started and stopped included.
    pub seconds: f64,
}

/// One W of a [`SaturationSeries`]: lowlat's closed loop keeping W calls in flight, and the
/// machine's floor exchange kept W ahead, measured in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaturationRow {
    /// Calls (and floor messages) kept in flight from one thread.
    pub in_flight: u32,
    /// lowlat's completed calls per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_s: Option<f64>,
    /// Median call latency in the closed loop (from a call's making to its completion), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<f64>,
    /// 99th percentile of the same, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
    /// The server's serving-thread CPU ns per call, from its own clock (a polling server's idle
    /// polls between calls included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_ns_per_call: Option<f64>,
    /// The floor's exchanges per second at the same W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_exchanges_per_s: Option<f64>,
    /// The floor server's CPU ns per exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_server_cpu_ns_per_exchange: Option<f64>,
    /// The floor client's CPU ns per exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_client_cpu_ns_per_exchange: Option<f64>,
    /// lowlat's calls per second over the floor's exchanges per second ([`SaturationRow::over`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_floor: Option<f64>,
    /// Why figures are missing, if any are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl SaturationRow {
    /// `a / b` when both are known and the quotient is a finite number (a floor of 0/s gives
    /// none rather than infinity, which `results.json` could not hold).
    pub fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
        let q = a? / b?;
        q.is_finite().then_some(q)
    }
}

impl SaturationSeries {
    /// The row of the saturated rate: the one with the most calls per second.
    pub fn saturated(&self) -> Option<&SaturationRow> {
        self.rows
            .iter()
            .filter(|r| r.calls_per_s.is_some_and(f64::is_finite))
            .max_by(|a, b| a.calls_per_s.unwrap_or(0.0).total_cmp(&b.calls_per_s.unwrap_or(0.0)))
    }
}

/// The first call after some idleness, per transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ColdRow {
    /// Transport name.
    pub transport: String,
    /// How long the client and server were idle before the call, ms (1, 10 or 100).
    pub idle_ms: u32,
    /// Median over the repeats of the first call's round trip, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_call_ns: Option<f64>,
    /// Median round trip of back-to-back calls on the same binding, for comparison, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_p50_ns: Option<f64>,
    /// How many idle-then-call repeats the median is over.
    #[serde(default)]
    pub repeats: u32,
    /// Why figures are missing, if any are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// One other RPC system (or lowlat itself, for comparison) at one procedure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeerRow {
    /// System name: `grpc`, `zeromq`, `rpcgen`, `iceoryx2` or `lowlat`.
    pub system: String,
    /// Transport: `tcp`, `udp`, `ipc`, ...
    pub transport: String,
    /// `null` or `echo`.
    pub proc: String,
    /// Bytes echoed (0 for null).
    pub size: u32,
    /// Median round trip, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<f64>,
    /// 99th percentile round trip, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<f64>,
    /// Closed-loop calls per second with one caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_s: Option<f64>,
    /// Why the peer was not measured (e.g. its packages did not install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl PeerRow {
    /// A row for a peer that could not be built or run.
    pub fn skipped(system: &str, transport: &str, proc: &str, size: u32, reason: &str) -> Self {
        PeerRow {
            system: system.to_owned(),
            transport: transport.to_owned(),
            proc: proc.to_owned(),
            size,
            p50_ns: None,
            p99_ns: None,
            calls_per_s: None,
            skipped: Some(reason.to_owned()),
        }
    }
}

impl From<&BenchLine> for PeerRow {
    fn from(b: &BenchLine) -> Self {
        PeerRow {
            system: b.system.clone().unwrap_or_else(|| "lowlat".to_owned()),
            transport: b.transport.clone(),
            proc: b.proc.clone(),
            size: b.size,
            p50_ns: Some(b.p50_ns),
            p99_ns: Some(b.p99_ns),
            calls_per_s: Some(b.calls_per_s),
            skipped: None,
        }
    }
}

/// One line of `lowlat bench --json` or of a peer client's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BenchLine {
    /// `rpc` or `raw`.
    pub kind: String,
    /// The system, for peers (`grpc`, `zeromq`, `rpcgen`, `iceoryx2`); absent for lowlat itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Transport.
    pub transport: String,
    /// Procedure.
    pub proc: String,
    /// Bytes of argument (or result).
    pub size: u32,
    /// Calls measured (warm-up excluded).
    pub calls: u64,
    /// Caller threads.
    pub threads: u32,
    /// Percentiles and extremes of the round trips, ns.
    pub p50_ns: f64,
    /// 90th percentile, ns.
    pub p90_ns: f64,
    /// 99th percentile, ns.
    pub p99_ns: f64,
    /// 99.9th percentile, ns.
    pub p999_ns: f64,
    /// Largest round trip, ns.
    pub max_ns: f64,
    /// Mean round trip, ns.
    pub mean_ns: f64,
    /// Calls completed per second.
    pub calls_per_s: f64,
}

/// Why a bench line is unusable.
#[derive(Debug, thiserror::Error)]
pub enum BenchLineError {
    /// Not JSON of the expected shape.
    #[error("bench line is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but its figures contradict each other.
    #[error("bench line is inconsistent: {0}")]
    Inconsistent(&'static str),
}

impl BenchLine {
    /// Parses one output line and checks that its figures are sane (ordered percentiles, positive
    /// times, at least one call).
    pub fn parse(line: &str) -> Result<Self, BenchLineError> {
        let b: BenchLine = serde_json::from_str(line.trim())?;
        b.check()?;
        Ok(b)
    }

    fn check(&self) -> Result<(), BenchLineError> {
        let ordered = [self.p50_ns, self.p90_ns, self.p99_ns, self.p999_ns, self.max_ns];
        if self.calls == 0 {
            return Err(BenchLineError::Inconsistent("no calls"));
        }
        if ordered.iter().chain([&self.mean_ns, &self.calls_per_s]).any(|v| !v.is_finite()) {
            return Err(BenchLineError::Inconsistent("a figure is not a finite number"));
        }
        if self.p50_ns <= 0.0 {
            return Err(BenchLineError::Inconsistent("p50 is not positive"));
        }
        if ordered.windows(2).any(|w| w[0] > w[1]) {
            return Err(BenchLineError::Inconsistent("percentiles are not in increasing order"));
        }
        if self.mean_ns <= 0.0 || self.mean_ns > self.max_ns || self.calls_per_s <= 0.0 {
            return Err(BenchLineError::Inconsistent("mean or rate out of range"));
        }
        Ok(())
    }
}

/// Where the time of a call goes on one transport, and whether independently measured parts
/// predict the whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Accounting {
    /// Transport name.
    pub transport: String,
    /// Calls averaged over.
    #[serde(default)]
    pub calls: u64,
    /// The call split into consecutive parts from timestamps on one clock, in call order.
    pub parts: Vec<Part>,
    /// Measured mean round trip with accounting on, ns (the parts add up to this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_total_ns: Option<f64>,
    /// The terms of the prediction, each measured on its own (raw ping-pong, marshaling, dispatch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicted_parts: Vec<Part>,
    /// Sum of the predicted parts, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_total_ns: Option<f64>,
    /// (measured - predicted) / measured * 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference_percent: Option<f64>,
    /// True when |difference_percent| > 10: the parts are wrong or something contends.
    #[serde(default)]
    pub flagged: bool,
    /// The model check made in rounds, each setting its parts against its own whole (the
    /// traced call, the untraced call, the raw ping-pong, the floor and the in-process parts
    /// measured in turn, so that a host that changes pace moves them together): each round's
    /// difference, in the order made. `difference_percent` is then their median.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_differences_percent: Vec<f64>,
    /// Mean round trip with accounting on (client and server taking their timestamps) minus
    /// the same call untraced, ns: what accounting adds to a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_overhead_ns: Option<f64>,
    /// The untraced call against the machine's floor for its path, measured in the same run
    /// (where the path has a floor: shm, udp), in additive parts that sum to the untraced call:
    /// the floor, lowlat's transport above it, the RPC layer's code as measured in-process, and
    /// the rest of the RPC layer. A part is negative where a layer beat what is below it.
    /// `percent` is of the untraced call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub floor_gap: Vec<Part>,
    /// Why `floor_gap` is empty on a path that has a floor: the floor, measured before and after
    /// the calls it is compared with, moved in every attempt (the host moved the two CPUs closer
    /// together or further apart), so no part of the gap could be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_unsteady: Option<String>,
    /// Rounds left out of `floor_gap` because the floor moved between its measurements at
    /// the round's two ends.
    #[serde(default)]
    pub floor_rounds_left_out: u32,
    /// Why the transport was not accounted, if it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Instructions per call on each side, part by part, counted by callgrind (which counts the
    /// same on any host for the same build), for the null call and `MINUS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<Instructions>,
    /// Why no instructions were counted (valgrind or the counting build missing, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_skipped: Option<String>,
}

/// The instructions one call runs, client and server apart, in parts: counted by callgrind
/// from the call to its return on the client and from the look that finds a frame to the next
/// look on the server, with every look that finds nothing (the waiting) left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Instructions {
    /// The procedure called (`NULL`, `MINUS`).
    pub procedure: String,
    /// Calls counted (after a warm-up that is not).
    pub calls: u64,
    /// The client's instructions per call, by part (they add up to `client_total`).
    pub client: Vec<InstructionPart>,
    /// The client's instructions per call.
    pub client_total: f64,
    /// The server's instructions per call from the look that finds the call to its reply out,
    /// by part (they add up to `server_total`).
    pub server: Vec<InstructionPart>,
    /// The server's instructions per call, to its reply out.
    pub server_total: f64,
    /// The server's instructions per call after its reply is out, until it looks for the next
    /// call (bookkeeping off the round trip; over udp the reply itself goes at the next look).
    /// Less exact than the rest: it includes the clock read of every 64th look, and how many
    /// looks a wait takes varies.
    #[serde(default)]
    pub server_after_reply: f64,
}

/// One part of a call's instructions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstructionPart {
    /// What the part covers (e.g. "engine (lowlat-proto)").
    pub name: String,
    /// Instructions per call.
    pub per_call: f64,
}

/// One part of a call's time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// What the part covers (e.g. "client stub and marshaling").
    pub name: String,
    /// Mean time of the part, ns.
    pub ns: f64,
    /// Share of the total, percent.
    pub percent: f64,
}

/// The model check's threshold: a larger gap between parts and whole is flagged.
pub const ACCOUNTING_FLAG_PERCENT: f64 = 10.0;

impl Accounting {
    /// The untraced call (the sum of [`floor_gap`](Self::floor_gap)'s parts), ns, and its ratio
    /// to the machine's floor (the first part), where the path has a floor.
    pub fn over_floor(&self) -> Option<(f64, f64)> {
        let floor = self.floor_gap.first()?;
        let call: f64 = self.floor_gap.iter().map(|p| p.ns).sum();
        Some((call, call / floor.ns.max(1.0)))
    }

    /// Builds an accounting from measured parts (name, ns) and independently measured prediction
    /// terms, doing the arithmetic: percentages, totals, difference and flag.
    pub fn from_parts(
        transport: &str,
        calls: u64,
        parts: &[(&str, f64)],
        measured_total_ns: f64,
        predicted: &[(&str, f64)],
    ) -> Self {
        let to_parts = |items: &[(&str, f64)], total: f64| -> Vec<Part> {
            items
                .iter()
                .map(|&(name, ns)| Part {
                    name: name.to_owned(),
                    ns,
                    percent: if total > 0.0 { ns / total * 100.0 } else { 0.0 },
                })
                .collect()
        };
        let predicted_total: f64 = predicted.iter().map(|p| p.1).sum();
        let (predicted_total_ns, difference_percent) = if predicted.is_empty() || measured_total_ns <= 0.0 {
            (None, None)
        } else {
            let d = (measured_total_ns - predicted_total) / measured_total_ns * 100.0;
            (Some(predicted_total), Some(d))
        };
        Accounting {
            transport: transport.to_owned(),
            calls,
            parts: to_parts(parts, measured_total_ns),
            measured_total_ns: Some(measured_total_ns),
            predicted_parts: to_parts(predicted, predicted_total),
            predicted_total_ns,
            difference_percent,
            flagged: difference_percent.is_some_and(|d| d.abs() > ACCOUNTING_FLAG_PERCENT),
            round_differences_percent: Vec::new(),
            timestamp_overhead_ns: None,
            floor_gap: Vec::new(),
            floor_unsteady: None,
            floor_rounds_left_out: 0,
            skipped: None,
            instructions: Vec::new(),
            instructions_skipped: None,
        }
    }
}

/// A latency distribution as points of its cumulative distribution function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CdfSeries {
    /// Transport name.
    pub transport: String,
    /// Procedure measured.
    pub proc: String,
    /// Message size in bytes.
    pub size: u32,
    /// Points in increasing latency and fraction.
    pub points: Vec<CdfPoint>,
}

/// The fraction of calls that took at most `latency_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CdfPoint {
    /// Round trip, ns.
    pub latency_ns: f64,
    /// Fraction of calls at or below it, 0..1.
    pub fraction: f64,
}

/// Round trip against message size for one transport.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SizeSeries {
    /// Transport name.
    pub transport: String,
    /// `rpc` (ECHO of the size) or `raw` (ping-pong of the size).
    pub kind: String,
    /// Points in increasing size.
    pub points: Vec<SizePoint>,
}

/// Round trip at one message size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SizePoint {
    /// Message size in bytes.
    pub size: u32,
    /// Median round trip, ns.
    pub p50_ns: f64,
    /// 99th percentile round trip, ns.
    pub p99_ns: f64,
}
