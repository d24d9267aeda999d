//! `lowlat account`: where the time of a call goes, part by part (Firefly RPC, Tables VI-VIII),
//! and the model check (Lampson): do parts measured on their own predict the whole?
//!
//! The client and a server started here (on this host, so one `CLOCK_MONOTONIC` serves both)
//! note the moments of every call; the server's records come back through the trace program.
//! The parts are consecutive, so they add up to the traced total by construction; the real check
//! is the prediction: the transport's raw ping-pong plus the engine's, the stubs' and the
//! procedure's costs measured in-process, against an untraced run's median.
//!
//! Where the path has a floor (shm, udp), the untraced call is also set against the machine's
//! floor measured in the same run (DESIGN principle 10): the floor, lowlat's transport above it,
//! the RPC code as measured in-process, and the rest of the RPC layer, which no in-process
//! measurement covers.
//!
//! Beside the times, the instructions of a null call on each side, part by part, counted by
//! callgrind with lowlat's counting build (`crate::instructions`) where it and valgrind are
//! there (not in `lab --quick`): what the host's clock cannot move.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use lowlat::trace::{self, ClientTrace, ServerTrace};
use lowlat::{ByteOrder, CallContext, ClientConfig, DecodeError, SpinPolicy};
use lowlat_proto::wire::{BindRequest, BIND_RELIABLE, PROTOCOL_VERSION};
use lowlat_proto::{Binder, ClientSlot, Outcome, ProgramVersions, ServerEngine, Status, HEADER_LEN};
use lowlat_report::Accounting;

use crate::instructions;
use crate::interface::{self, LabClient};
use crate::ladder::Placement;
use crate::latency::median;
use crate::pingpong::{Pinger, RawOptions};
use crate::procs;

/// The parts of a call, in order: consecutive differences of moments that are always ordered.
/// (The end of the client's send system call is not a boundary: on loopback the kernel often
/// delivers the frame, and the server picks it up, before the sender's system call returns.)
pub const PARTS: [&str; 6] = [
    "client stub and marshaling",
    "send, transit to the server and wake-up",
    "dispatch and unmarshaling",
    "procedure",
    "reply send, transit back and client wake-up",
    "client unmarshaling and return",
];

/// The accounted calls: mean nanoseconds of each part over the fastest 99% of the joined
/// records, the mean send system call durations (client, server), and how many were joined.
pub struct Joined {
    /// Mean ns of each part, in the order of [`PARTS`].
    pub parts: [f64; 6],
    /// Mean duration of the client's send system call, ns (overlaps the parts; not one of them).
    pub client_send_ns: f64,
    /// Mean duration of the server's reply send system call, ns (overlaps the parts).
    pub server_send_ns: f64,
    /// Calls averaged: records joined by (token, slot, call number), ordered, fastest 99%.
    pub calls: usize,
}

/// Joins client and server trace records of the same call (by token, slot and call number),
/// drops unmatched and out-of-order records and the slowest 1% by total, and averages the parts.
pub fn join(client: &[ClientTrace], server: &[ServerTrace]) -> Joined {
    let by_key: HashMap<(u64, u16, u32), &ServerTrace> =
        server.iter().map(|s| ((s.token, s.slot, s.call_no), s)).collect();
    let mut rows: Vec<([u64; 7], u64, u64)> = Vec::with_capacity(client.len());
    for c in client {
        let Some(s) = by_key.get(&(c.token, c.slot, c.call_no)) else { continue };
        let moments = [c.begin, c.encoded, s.received, s.dispatched, s.returned, c.received, c.end];
        if moments.windows(2).any(|w| w[1] < w[0]) {
            continue; // cannot happen on one clock; a torn record is left out rather than trusted
        }
        rows.push((moments, c.sent.saturating_sub(c.encoded), s.replied.saturating_sub(s.returned)));
    }
    // Leave out the slowest 1%, as on every side of the model check.
    rows.sort_by_key(|r| r.0[6] - r.0[0]);
    rows.truncate(((rows.len() as f64) * 0.99).ceil() as usize);
    let mut j = Joined { parts: [0.0; 6], client_send_ns: 0.0, server_send_ns: 0.0, calls: rows.len() };
    for (m, cs, ss) in &rows {
        for (i, w) in m.windows(2).enumerate() {
            j.parts[i] += (w[1] - w[0]) as f64;
        }
        j.client_send_ns += *cs as f64;
        j.server_send_ns += *ss as f64;
    }
    if !rows.is_empty() {
        let n = rows.len() as f64;
        j.parts.iter_mut().for_each(|p| *p /= n);
        j.client_send_ns /= n;
        j.server_send_ns /= n;
    }
    j
}

/// In-process costs of one null call's protocol work, with no I/O: (client engine, server
/// engine) in nanoseconds per call, medians over batches. Each timed interval also holds one
/// clock read, which is taken off (the client's time is two intervals, the server's one).
/// `reliable`: a session over a transport that delivers in order (no retransmission timers).
/// `in_place`: the call's frame is completed where it lies, as over shared memory (arguments
/// encoded into the call ring, the engine giving only the header: `ClientSlot::place_call`),
/// rather than sent from the slot's buffer; a reliable, unkeyed session only.
/// `psk`: a keyed session, every frame tagged and checked.
pub fn engine_costs(calls: u32, reliable: bool, in_place: bool, psk: Option<&lowlat::Psk>) -> (f64, f64) {
    assert!(!in_place || (reliable && psk.is_none()), "only a reliable, unkeyed call is completed in place");
    let now = Instant::now();
    let mut server: ServerEngine<u32> = ServerEngine::new(lowlat_proto::ServerEngineConfig {
        programs: vec![ProgramVersions { program: interface::PROGRAM, low: 1, high: 1 }],
        max_frame: 65_507,
        reliable,
        psk: psk.cloned(),
        ..Default::default()
    });
    let req = BindRequest {
        program: interface::PROGRAM,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::host(),
        flags: if reliable { BIND_RELIABLE } else { 0 },
        max_message: 4 << 20,
        max_frame: 65_507,
        slots: 1,
        window: 32,
        nonce: 1,
    };
    let cfg = lowlat_proto::ClientEngineConfig::default();
    let mut binder = Binder::new(req, &cfg, now, now + Duration::from_secs(1)).with_key(psk.cloned());
    let mut frame = Vec::with_capacity(256);
    let put = |f: &mut Vec<u8>, h: &[u8], b: &[u8]| {
        f.clear();
        f.extend_from_slice(h);
        f.extend_from_slice(b);
    };
    binder.start(now, &mut |h, b| put(&mut frame, h, b));
    let mut reply = Vec::with_capacity(256);
    // A round, or two where the server asks for a cookie.
    let bound = loop {
        let _ = server.handle(1, &frame, || now, &mut |_, h, b| put(&mut reply, h, b));
        if let Some(b) = binder.handle(&reply, now, &mut |h, b| put(&mut frame, h, b)) {
            break b.expect("bound");
        }
    };
    let mut slot = ClientSlot::new(bound.session, 0, cfg).with_keys(bound.keys);
    let deadline = now + Duration::from_secs(3600);
    let (mut client_ns, mut server_ns) = (Vec::new(), Vec::new());
    const BATCH: u32 = 1000;
    for _ in 0..(calls / BATCH).max(1) {
        let (mut c, mut s) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..BATCH {
            let t0 = Instant::now();
            if in_place {
                let mut head = [0u8; HEADER_LEN];
                assert!(slot.place_call(interface::NULL, 0, &mut head), "a reliable session's null call goes whole");
                put(&mut frame, &head, &[]);
            } else {
                slot.args_buf();
                slot.start(interface::NULL, t0, deadline, &mut |h, b| put(&mut frame, h, b)).expect("fits");
            }
            let t1 = Instant::now();
            // As the runtime does: a reliable channel's whole frames are recognised by their
            // headers first, everything else decoded.
            let mut out = |_: &u32, h: &[u8], b: &[u8]| put(&mut reply, h, b);
            let call = match server.take_whole_call(1, &frame) {
                Some(call) => Some(call.key),
                None => server.handle(1, &frame, || t1, &mut out).map(|call| call.key),
            };
            if let Some(key) = call {
                server.finish(key, Status::Ok, &mut out);
            }
            let t2 = Instant::now();
            let done = slot.take_whole_result(&reply).is_some()
                || matches!(slot.handle(&reply, || t2, &mut |_, _| {}), Some(Outcome::Reply(_)));
            let t3 = Instant::now();
            assert!(done, "the engine answered a null call");
            c += (t1 - t0) + (t3 - t2);
            s += t2 - t1;
        }
        client_ns.push(c.as_nanos() as f64 / BATCH as f64);
        server_ns.push(s.as_nanos() as f64 / BATCH as f64);
    }
    let clock = instant_cost(100_000);
    ((median(&mut client_ns) - 2.0 * clock).max(0.0), (median(&mut server_ns) - clock).max(0.0))
}

/// Nanoseconds one `Instant::now` takes.
fn instant_cost(n: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(Instant::now());
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// The null stubs' encode and decode, and the NULL procedure, run in-process: (marshaling,
/// procedure) in nanoseconds per call.
pub fn stub_and_procedure_costs(calls: u32) -> (f64, f64) {
    let program = interface::program();
    let ctx = CallContext {
        program: interface::PROGRAM,
        version: 1,
        proc_no: interface::NULL,
        client_order: ByteOrder::host(),
        auth: None,
    };
    let mut args = Vec::with_capacity(64);
    let mut reply = Vec::with_capacity(64);
    let t = Instant::now();
    let order = lowlat::codec::ByteOrder::Little;
    for _ in 0..calls {
        args.clear();
        // What the generated NULL stub does: encode nothing, check the result body is empty.
        let r = lowlat::codec::NativeReader::new(std::hint::black_box(&reply), order).finish();
        let _ = std::hint::black_box(r);
    }
    let marshal = t.elapsed().as_nanos() as f64 / calls as f64;
    let t = Instant::now();
    for _ in 0..calls {
        reply.clear();
        program
            .invoke(interface::NULL, &ctx, std::hint::black_box(&args), &mut (&mut reply).into())
            .expect("NULL runs");
    }
    let procedure = t.elapsed().as_nanos() as f64 / calls as f64;
    (marshal, procedure)
}

fn spawn_server(exe: &Path, args: &[&str], place: &Placement) -> Result<procs::ServerProcess, String> {
    let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Some(c) = place.server_cpu {
        a.push("--cpu".into());
        a.push(c.to_string());
    }
    procs::spawn(exe, &a, Duration::from_secs(10)).map_err(|e| e.to_string())
}

/// Rounds the model check and the floor gap are measured in (odd: the check is their median).
pub const ROUNDS: u64 = 9;

/// The servers and clients of an accounting, started once and measured in turn: each server is
/// suspended while the others are measured, so that none takes CPU from them however it waits
/// (the shared-memory floor's echoer spins for as long as its client is connected).
struct Ends {
    traced: (procs::ServerProcess, LabClient, lowlat::Client),
    plain: (procs::ServerProcess, LabClient),
    raw: (procs::ServerProcess, Pinger),
    /// The machine's floor, where the path has one (shm, udp).
    floor: Option<(procs::ServerProcess, Pinger)>,
}

/// What one round measured, in ns: means of the fastest 99%.
struct Round {
    traced: Joined,
    untraced: f64,
    raw: f64,
    /// The floor before the round's three calls, and after them.
    floor: Option<(f64, f64)>,
    client_engine: f64,
    server_engine: f64,
    marshal: f64,
    procedure: f64,
    /// Six clock reads.
    clock: f64,
}

/// The parts the model check predicts the traced call from, each measured on its own, in the
/// order of [`Round::predicted`].
const PREDICTED: [&str; 6] = [
    "raw ping-pong of the transport (32 bytes)",
    "client protocol engine (in-process)",
    "server protocol engine (in-process)",
    "stubs: marshaling and unmarshaling",
    "procedure (NULL)",
    "6 clock reads on the call's path (tracing)",
];

impl Round {
    /// The parts measured on their own, ns, in the order of [`PREDICTED`].
    fn predicted(&self) -> [f64; 6] {
        [self.raw, self.client_engine, self.server_engine, self.marshal, self.procedure, self.clock]
    }

    /// (measured - predicted) / measured, in percent.
    fn difference_percent(&self) -> f64 {
        let traced: f64 = self.traced.parts.iter().sum();
        let predicted: f64 = self.predicted().iter().sum();
        (traced - predicted) / traced.max(1.0) * 100.0
    }
}

/// How long, at least, a server just let go on is warmed up before it is measured: over shared
/// memory a warm-up of a hundred calls lasts some 40 µs, too little for a process that was
/// suspended to have its caches and its waiting back.
const WARM_UP: Duration = Duration::from_millis(2);

/// Makes `calls` round trips with `one`, and more until [`WARM_UP`] has passed.
fn warm_up(calls: u64, mut one: impl FnMut() -> Result<(), String>) -> Result<(), String> {
    let began = Instant::now();
    let mut made = 0;
    while made < calls || began.elapsed() < WARM_UP {
        one()?;
        made += 1;
    }
    Ok(())
}

/// Runs `f` while `server` is let go on, suspending it again after.
fn while_running<T>(server: &procs::ServerProcess, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    server.resume().map_err(|e| format!("resuming a server: {e}"))?;
    let r = f();
    server.suspend().map_err(|e| format!("suspending a server: {e}"))?;
    r
}

/// The address the accounting's server number `n` (0-3: the four run at once) binds to, from
/// the one given: a socket path with `.n` after it; a port other than 0 counted on by `n`.
fn nth_bind(bind_uri: &str, n: u16) -> String {
    if n == 0 {
        return bind_uri.to_string();
    }
    if bind_uri.starts_with("shm://") || bind_uri.starts_with("unix://") {
        return format!("{bind_uri}.{n}");
    }
    match bind_uri.rsplit_once(':').map(|(head, port)| (head, port.parse::<u16>())) {
        Some((head, Ok(port))) if port != 0 => format!("{head}:{}", port.saturating_add(n)),
        _ => bind_uri.to_string(),
    }
}

impl Ends {
    fn start(exe: &Path, bind_uri: &str, scheme: &str, spin: SpinPolicy, place: &Placement) -> Result<Ends, String> {
        let spin_s = spin.to_string();
        let binds: [String; 4] = std::array::from_fn(|n| nth_bind(bind_uri, n as u16));
        let first_uri = |p: &procs::ServerProcess| p.uris.first().cloned().ok_or("a server printed no URI");
        let srv = spawn_server(exe, &["serve", &binds[0], "--trace", "--spin-us", &spin_s], place)?;
        let uri = first_uri(&srv)?;
        let cfg = ClientConfig { spin, trace: true, ..ClientConfig::default() };
        let client = LabClient::connect(&uri, cfg.clone()).map_err(|e| e.to_string())?;
        let tracer =
            lowlat::Client::connect_with(&uri, interface::TRACE_PROGRAM, 1, ClientConfig { trace: false, ..cfg })
                .map_err(|e| format!("{e} (is the server running with --trace?)"))?;
        srv.suspend().map_err(|e| e.to_string())?;
        let traced = (srv, client, tracer);
        // The untraced call as users make it: against a server that does not trace either.
        let srv = spawn_server(exe, &["serve", &binds[1], "--spin-us", &spin_s], place)?;
        let client = LabClient::connect(&first_uri(&srv)?, ClientConfig { spin, ..ClientConfig::default() })
            .map_err(|e| e.to_string())?;
        srv.suspend().map_err(|e| e.to_string())?;
        let plain = (srv, client);
        let srv = spawn_server(exe, &["pingpong", "--serve", &binds[2], "--spin-us", &spin_s], place)?;
        let pinger = Pinger::connect(&first_uri(&srv)?, HEADER_LEN, spin, RawOptions::default(), None)
            .map_err(|e| e.to_string())?;
        srv.suspend().map_err(|e| e.to_string())?;
        let raw = (srv, pinger);
        let floor = if matches!(scheme, "shm" | "udp") {
            let srv = spawn_server(exe, &["pingpong", "--serve", "--floor", &binds[3], "--spin-us", &spin_s], place)?;
            let opts = RawOptions { floor: true, ..Default::default() };
            let pinger = Pinger::connect(&first_uri(&srv)?, HEADER_LEN, spin, opts, None)
                .map_err(|e| format!("the floor: {e}"))?;
            srv.suspend().map_err(|e| e.to_string())?;
            Some((srv, pinger))
        } else {
            None
        };
        Ok(Ends { traced, plain, raw, floor })
    }

    /// Traced calls: warm-up, then `calls` whose client and server records are joined.
    fn traced(&mut self, calls: u64, warmup: u64) -> Result<Joined, String> {
        let (srv, client, tracer) = &mut self.traced;
        while_running(srv, || {
            warm_up(warmup, || client.null().map(drop).map_err(|e| e.to_string()))?;
            drain(tracer)?;
            let mut client_traces = Vec::with_capacity(calls as usize);
            for _ in 0..calls {
                client.null().map_err(|e| e.to_string())?;
                client_traces.push(trace::last_client_trace());
            }
            let joined = join(&client_traces, &drain(tracer)?);
            if joined.calls == 0 {
                return Err("no client record matched a server record".into());
            }
            Ok(joined)
        })
    }

    /// The untraced call, as `lowlat bench` times it: mean ns of the fastest 99%.
    fn untraced(&mut self, calls: u64, warmup: u64) -> Result<f64, String> {
        let (srv, client) = &mut self.plain;
        while_running(srv, || {
            warm_up(warmup, || client.null().map(drop).map_err(|e| e.to_string()))?;
            let mut h = crate::latency::new_histogram();
            for _ in 0..calls {
                let t0 = Instant::now();
                client.null().map_err(|e| e.to_string())?;
                let _ = h.record(t0.elapsed().as_nanos() as u64);
            }
            Ok(crate::latency::trimmed_mean(&h, 0.99))
        })
    }

    /// The transport's raw ping-pong (`floor`: the machine's floor instead, if the path has
    /// one): mean ns of the fastest 99%.
    fn raw(&mut self, floor: bool, calls: u64, warmup: u64) -> Result<Option<f64>, String> {
        let (srv, pinger) = match (floor, &mut self.floor) {
            (false, _) => (&self.raw.0, &mut self.raw.1),
            (true, Some((srv, pinger))) => (&*srv, pinger),
            (true, None) => return Ok(None),
        };
        while_running(srv, || {
            warm_up(warmup, || pinger.exchange(0, 1).map(drop).map_err(|e| e.to_string()))?;
            let (h, _) = pinger.exchange(calls, 0).map_err(|e| e.to_string())?;
            Ok(Some(crate::latency::trimmed_mean(&h, 0.99)))
        })
    }
}

/// Accounts null calls over the transport of `bind_uri` (e.g. `udp://127.0.0.1:0`), starting the
/// servers it needs from the `lowlat` executable `exe`.
///
/// The calls are made in [`ROUNDS`] rounds, each of which measures everything the model check
/// and the floor gap compare, in turn: the floor, then the traced call, the untraced call and
/// the raw ping-pong (in an order that turns from round to round), the in-process parts, and
/// the floor again. On a virtual machine the host may change the pace of the two CPUs, or move
/// them closer together or further apart, at any moment, which moves every figure; measured in
/// turn, the parts and the whole move together. Each round's parts are set against its own
/// whole, and the check is the median of the rounds; rounds whose two floors disagree are left
/// out of the floor gap.
/// Returns the accounting and the mean durations of the client's and the server's send system
/// calls (which overlap the transit, so they are not parts of their own).
pub fn account(
    exe: &Path,
    bind_uri: &str,
    calls: u64,
    spin: SpinPolicy,
    place: &Placement,
    count_instructions: bool,
) -> Result<(Accounting, f64, f64), String> {
    let scheme = bind_uri.split("://").next().unwrap_or("?").to_string();
    if let Some(c) = place.client_cpu {
        let _ = lowlat_sys::pin_to_cpu(c);
    }
    let per_round = (calls / ROUNDS).max(200);
    // Every server has been suspended since its last turn: its caches are cold again.
    let warmup = (per_round / 5).max(100);
    let mut ends = Ends::start(exe, bind_uri, &scheme, spin, place)?;
    let reliable = matches!(scheme.as_str(), "tcp" | "shm");
    let mut rounds: Vec<Round> = Vec::with_capacity(ROUNDS as usize);
    let mut floor_before = ends.raw(true, per_round, warmup)?;
    // Round 0 warms every end up (each process's code, caches and waiting) and is not counted.
    for r in 0..=ROUNDS {
        let (mut traced, mut untraced, mut raw) = (None, 0.0, 0.0);
        for turn in 0..3 {
            match (r + turn) % 3 {
                0 => traced = Some(ends.traced(per_round, warmup)?),
                1 => untraced = ends.untraced(per_round, warmup)?,
                _ => raw = ends.raw(false, per_round, warmup)?.unwrap_or(0.0),
            }
        }
        let (client_engine, server_engine) = engine_costs(20_000, reliable, scheme == "shm", None);
        let (marshal, procedure) = stub_and_procedure_costs(200_000);
        // Nine timestamps per traced call, but two of them (the client's after sending, the
        // server's after replying) are taken while the message travels and delay nothing; of
        // the first and last, only the part after and the part before the sample count: six.
        let clock = clock_read_cost(200_000) * 6.0;
        let floor_after = ends.raw(true, per_round, warmup)?;
        let round = Round {
            traced: traced.expect("every round makes traced calls"),
            untraced,
            raw,
            floor: floor_before.zip(floor_after),
            client_engine,
            server_engine,
            marshal,
            procedure,
            clock,
        };
        if r > 0 {
            rounds.push(round);
        }
        floor_before = floor_after;
    }
    drop(ends);
    Ok(summarise(exe, &scheme, &rounds, count_instructions))
}

/// The accounting of `rounds`: each part the mean over the rounds, the model check the median
/// of the rounds' own checks, the floor gap from the rounds whose floor held still.
fn summarise(exe: &Path, scheme: &str, rounds: &[Round], count_instructions: bool) -> (Accounting, f64, f64) {
    let n = rounds.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Round) -> f64| rounds.iter().map(f).sum::<f64>() / n;
    let parts: Vec<f64> = (0..PARTS.len()).map(|i| mean(&|r| r.traced.parts[i])).collect();
    let named: Vec<(&str, f64)> = PARTS.iter().copied().zip(parts.iter().copied()).collect();
    let traced_total: f64 = parts.iter().sum();
    let predicted: Vec<(&str, f64)> =
        PREDICTED.iter().enumerate().map(|(i, name)| (*name, mean(&|r| r.predicted()[i]))).collect();
    let calls: u64 = rounds.iter().map(|r| r.traced.calls as u64).sum();
    let mut a = Accounting::from_parts(scheme, calls, &named, traced_total, &predicted);
    a.round_differences_percent = rounds.iter().map(Round::difference_percent).collect();
    let mut sorted = a.round_differences_percent.clone();
    let d = median(&mut sorted);
    a.difference_percent = Some(d);
    a.flagged = d.abs() > lowlat_report::ACCOUNTING_FLAG_PERCENT;
    a.timestamp_overhead_ns = Some(traced_total - mean(&|r| r.untraced));
    let steady: Vec<&Round> =
        rounds.iter().filter(|r| r.floor.is_some_and(|(before, after)| floor_steady(before, after))).collect();
    let has_floor = rounds.iter().any(|r| r.floor.is_some());
    if has_floor && steady.is_empty() {
        a.floor_unsteady =
            Some(format!("the floor moved during each of {} rounds: the host moved the CPUs; run again", rounds.len()));
    } else if !steady.is_empty() {
        a.floor_rounds_left_out = (rounds.len() - steady.len()) as u32;
        let k = steady.len() as f64;
        let over = |f: &dyn Fn(&Round) -> f64| steady.iter().map(|r| f(r)).sum::<f64>() / k;
        let floor = over(&|r| r.floor.map_or(0.0, |(b, e)| (b + e) / 2.0));
        let raw = over(&|r| r.raw);
        let call = over(&|r| r.untraced);
        let in_process = over(&|r| r.client_engine + r.server_engine + r.marshal + r.procedure);
        let gap = [
            (FLOOR_GAP[0], floor),
            (FLOOR_GAP[1], raw - floor),
            (FLOOR_GAP[2], in_process),
            (FLOOR_GAP[3], call - raw - in_process),
        ];
        a.floor_gap = Accounting::from_parts(scheme, 0, &gap, call, &[]).parts;
    }
    if count_instructions {
        match instructions::count(&instructions::counting_binary(exe), scheme, "null", INSTRUCTION_CALLS) {
            Ok(n) => a.instructions = vec![n],
            Err(e) => a.instructions_skipped = Some(e.to_string()),
        }
    } else {
        a.instructions_skipped = Some("not counted in lab --quick (lowlat instructions counts them)".into());
    }
    (a, mean(&|r| r.traced.client_send_ns), mean(&|r| r.traced.server_send_ns))
}

/// The additive parts of an untraced null call above the machine's floor (see
/// `Accounting::floor_gap`).
pub const FLOOR_GAP: [&str; 4] = [
    "the machine's floor (the simplest exchange, 32 bytes)",
    "lowlat's transport above the floor (its raw ping-pong)",
    "RPC layer: its code as measured in-process",
    "RPC layer: the rest (not seen in-process)",
];

/// Whether two measurements of the floor (mean ns) agree well enough for what lies between them
/// to be set against it: within a placement of the CPUs the floor varies by up to a third; a
/// move takes it several times over.
fn floor_steady(a: f64, b: f64) -> bool {
    a.max(b) <= 1.5 * a.min(b).max(1.0)
}

/// Nanoseconds one `trace::now_ns` takes.
pub fn clock_read_cost(n: u32) -> f64 {
    let t = Instant::now();
    let mut x = 0u64;
    for _ in 0..n {
        x = x.wrapping_add(std::hint::black_box(trace::now_ns()));
    }
    std::hint::black_box(x);
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Fetches the server's records, leaving out the fetching calls' own (which are traced too).
fn drain(tracer: &lowlat::Client) -> Result<Vec<ServerTrace>, String> {
    let own = tracer.session().token;
    let mut all = Vec::new();
    loop {
        let batch = tracer
            .call(
                interface::TRACE_TAKE,
                |a| {
                    a.extend_from_slice(&60_000u32.to_ne_bytes());
                    Ok::<_, DecodeError>(())
                },
                |r| Ok(ServerTrace::decode_all(r)),
            )
            .map_err(|e| e.to_string())?;
        let before = all.len();
        all.extend(batch.into_iter().filter(|t| t.token != own));
        if all.len() == before {
            return Ok(all);
        }
    }
}

/// Calls counted under callgrind: the count per call is the same for any number (the warm-up
/// is not counted), and each call under callgrind takes milliseconds.
const INSTRUCTION_CALLS: u64 = 60;

/// The accounting as a terminal table, like Firefly's Tables VI-VIII.
pub fn table(a: &Accounting, client_send_ns: f64, server_send_ns: f64) -> String {
    let mut s = format!(
        "Where the time of a null call over {} goes ({} calls in {} rounds, means of the fastest 99%):\n",
        a.transport,
        a.calls,
        a.round_differences_percent.len().max(1)
    );
    s.push_str(&format!("{:<48} {:>10} {:>8}\n", "part", "µs", "%"));
    for p in &a.parts {
        s.push_str(&format!("{:<48} {:>10.3} {:>7.1}%\n", p.name, p.ns / 1000.0, p.percent));
    }
    let sum: f64 = a.parts.iter().map(|p| p.ns).sum();
    s.push_str(&format!("{:<48} {:>10.3}\n", "total (the parts add up to it)", sum / 1000.0));
    s.push_str(&format!(
        "  (the send system calls, which overlap the transit: client {:.3} µs, server {:.3} µs)\n",
        client_send_ns / 1000.0,
        server_send_ns / 1000.0
    ));
    s.push_str("\nModel check: the whole predicted from parts measured on their own\n");
    for p in &a.predicted_parts {
        s.push_str(&format!("  {:<46} {:>10.3}\n", p.name, p.ns / 1000.0));
    }
    if let (Some(pred), Some(meas), Some(d)) = (a.predicted_total_ns, a.measured_total_ns, a.difference_percent) {
        s.push_str(&format!(
            "  {:<46} {:>10.3}\n  {:<46} {:>10.3}\n  difference: {:+.1}% of the measured{}\n",
            "predicted",
            pred / 1000.0,
            "measured (the traced calls)",
            meas / 1000.0,
            d,
            if a.flagged {
                "  << FLAGGED: above 10%: the parts are wrong or something contends"
            } else {
                "  (within 10%)"
            }
        ));
    }
    if !a.round_differences_percent.is_empty() {
        let each: Vec<String> = a.round_differences_percent.iter().map(|d| format!("{d:+.1}%")).collect();
        s.push_str(&format!(
            "  (the median of {} rounds, each round's parts against its own whole: {})\n",
            each.len(),
            each.join(", ")
        ));
    }
    if let Some(o) = a.timestamp_overhead_ns {
        s.push_str(&format!(
            "  accounting on costs {:+.3} µs per call (traced minus untraced, fastest 99%)\n",
            o / 1000.0
        ));
    }
    if let Some((call, ratio)) = a.over_floor() {
        s.push_str("\nThe untraced call above the machine's floor, measured in this run (parts add up to it)\n");
        if a.floor_rounds_left_out > 0 {
            s.push_str(&format!(
                "  ({} of the rounds left out: the floor moved between the round's two ends)\n",
                a.floor_rounds_left_out
            ));
        }
        for p in &a.floor_gap {
            s.push_str(&format!("  {:<56} {:>+8.3} {:>7.1}%\n", p.name, p.ns / 1000.0, p.percent));
        }
        s.push_str(&format!("  {:<56} {:>8.3}   {:.2}x the floor\n", "the null call (untraced)", call / 1000.0, ratio));
    }
    if let Some(why) = &a.floor_unsteady {
        s.push_str(&format!("\nNo comparison with the machine's floor: {why}\n"));
    }
    if !a.instructions.is_empty() {
        s.push('\n');
        s.push_str(&instructions::table(&a.transport, &a.instructions));
    }
    if let Some(why) = &a.instructions_skipped {
        s.push_str(&format!("\nNo instruction counts: {why}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_that_moved_to_another_placement_is_not_steady() {
        // Within one placement of the CPUs (seen here: 90-121 ns close, 470-490 far).
        assert!(floor_steady(90.0, 121.0));
        assert!(floor_steady(491.0, 471.0));
        // Across a move.
        assert!(!floor_steady(110.0, 480.0));
        assert!(!floor_steady(501.0, 127.0));
        // A floor of zero (an empty measurement) is never steady against a real one.
        assert!(!floor_steady(0.0, 100.0));
    }

    #[test]
    fn the_four_servers_bind_apart() {
        assert_eq!(nth_bind("shm:///tmp/a.sock", 0), "shm:///tmp/a.sock");
        assert_eq!(nth_bind("shm:///tmp/a.sock", 3), "shm:///tmp/a.sock.3");
        assert_eq!(nth_bind("udp://127.0.0.1:0", 2), "udp://127.0.0.1:0");
        assert_eq!(nth_bind("tcp://127.0.0.1:7000", 2), "tcp://127.0.0.1:7002");
        assert_eq!(nth_bind("udp://[::1]:7000", 1), "udp://[::1]:7001");
    }

    #[test]
    fn the_table_says_why_a_moving_floor_was_not_compared() {
        let mut a = Accounting::from_parts("shm", 10, &[("a", 1.0)], 1.0, &[]);
        a.floor_unsteady = Some("the floor moved during each of 3 attempts".into());
        let t = table(&a, 0.0, 0.0);
        assert!(t.contains("No comparison with the machine's floor: the floor moved"), "{t}");
        assert!(!t.contains("above the machine's floor"), "{t}");
    }
}
