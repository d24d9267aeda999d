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

use crate::bench::{self, BenchSpec};
use crate::instructions;
use crate::interface::{self, LabClient};
use crate::ladder::Placement;
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
                let head = slot.place_call(interface::NULL, 0).expect("a reliable session's null call goes whole");
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn spawn_server(exe: &Path, args: &[&str], place: &Placement) -> Result<procs::ServerProcess, String> {
    let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Some(c) = place.server_cpu {
        a.push("--cpu".into());
        a.push(c.to_string());
    }
    procs::spawn(exe, &a, Duration::from_secs(10)).map_err(|e| e.to_string())
}

/// Accounts null calls over the transport of `bind_uri` (e.g. `udp://127.0.0.1:0`), starting the
/// servers it needs from the `lowlat` executable `exe`.
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
    let spin_s = spin.to_string();
    if let Some(c) = place.client_cpu {
        let _ = lowlat_sys::pin_to_cpu(c);
    }
    let warmup = (calls / 10).max(200);
    // The traced calls first.
    let srv = spawn_server(exe, &["serve", bind_uri, "--trace", "--spin-us", &spin_s], place)?;
    let uri = srv.uris.first().cloned().ok_or("the server printed no URI")?;
    let cfg = ClientConfig { spin, trace: true, ..ClientConfig::default() };
    let client = LabClient::connect(&uri, cfg.clone()).map_err(|e| e.to_string())?;
    let tracer = lowlat::Client::connect_with(&uri, interface::TRACE_PROGRAM, 1, ClientConfig { trace: false, ..cfg })
        .map_err(|e| format!("{e} (is the server running with --trace?)"))?;
    for _ in 0..warmup {
        client.null().map_err(|e| e.to_string())?;
    }
    drain(&tracer)?;
    let mut client_traces = Vec::with_capacity(calls as usize);
    for _ in 0..calls {
        client.null().map_err(|e| e.to_string())?;
        client_traces.push(trace::last_client_trace());
    }
    let server_traces = drain(&tracer)?;
    drop(srv);
    let joined = join(&client_traces, &server_traces);
    if joined.calls == 0 {
        return Err("no client record matched a server record".into());
    }
    let traced_total: f64 = joined.parts.iter().sum();
    // Then the three the floor gap compares, back to back: the untraced call (against a server
    // that does not trace either: the call as users make it), the transport's raw ping-pong and
    // the floor. On a virtual machine the host may move the two CPUs closer together or further
    // apart at any moment, which moves every figure several times over, so the floor is measured
    // before and after the other two, and the three again while the two floors disagree.
    let raw_bind = bind_uri.to_string();
    let mut unsteady = None;
    let mut attempt = 0;
    // An attempt after the first starts from the floor the one before it ended with.
    let mut last_floor = None;
    let (untraced, raw, floor) = loop {
        attempt += 1;
        let before = match last_floor.take() {
            Some(f) => Some(f),
            None => floor_exchange(exe, &scheme, &raw_bind, calls, warmup, spin, place)?,
        };
        let plain = spawn_server(exe, &["serve", bind_uri, "--spin-us", &spin_s], place)?;
        let plain_uri = plain.uris.first().cloned().ok_or("the server printed no URI")?;
        let untraced = bench::run(&BenchSpec {
            uri: plain_uri,
            proc: "null".into(),
            calls,
            warmup,
            spin,
            cpu: place.client_cpu,
            ..BenchSpec::default()
        })
        .map_err(|e| e.to_string())?;
        drop(plain);
        let pp = spawn_server(exe, &["pingpong", "--serve", &raw_bind, "--spin-us", &spin_s], place)?;
        let pp_uri = pp.uris.first().cloned().ok_or("the ping-pong server printed no URI")?;
        let (raw, _) = bench::run_raw(&pp_uri, HEADER_LEN, calls, warmup, spin, Default::default(), None)
            .map_err(|e| e.to_string())?;
        drop(pp);
        let after = floor_exchange(exe, &scheme, &raw_bind, calls, warmup, spin, place)?;
        let (Some(before), Some(after)) = (before, after) else { break (untraced, raw, None) };
        let (a, b) = (before.mean99_ns as f64, after.mean99_ns as f64);
        last_floor = Some(after);
        if floor_steady(a, b) {
            break (untraced, raw, Some((a + b) / 2.0));
        }
        if attempt == FLOOR_ATTEMPTS {
            unsteady = Some(format!(
                "the floor moved during each of {FLOOR_ATTEMPTS} attempts (last: {:.3} µs before, {:.3} µs after): \
                 the host moved the CPUs; run again",
                a / 1000.0,
                b / 1000.0
            ));
            break (untraced, raw, None);
        }
    };
    let reliable = matches!(scheme.as_str(), "tcp" | "shm");
    let (client_engine, server_engine) = engine_costs(100_000, reliable, scheme == "shm", None);
    let (marshal, procedure) = stub_and_procedure_costs(1_000_000);
    // Nine timestamps per traced call, but two of them (the client's after sending, the
    // server's after replying) are taken while the message travels and delay nothing; of the
    // first and last, only the part after and the part before the sample count: six in all.
    let clock = clock_read_cost(1_000_000) * 6.0;
    let named: Vec<(&str, f64)> = PARTS.iter().copied().zip(joined.parts).collect();
    // Means of the fastest 99% throughout, so that parts add and noise does not swamp them.
    let predicted = [
        ("raw ping-pong of the transport (32 bytes)", raw.mean99_ns as f64),
        ("client protocol engine (in-process)", client_engine),
        ("server protocol engine (in-process)", server_engine),
        ("stubs: marshaling and unmarshaling", marshal),
        ("procedure (NULL)", procedure),
        ("6 clock reads on the call's path (tracing)", clock),
    ];
    let mut a = Accounting::from_parts(&scheme, joined.calls as u64, &named, traced_total, &predicted);
    a.timestamp_overhead_ns = Some(traced_total - untraced.mean99_ns as f64);
    a.floor_unsteady = unsteady;
    if let Some(floor) = floor {
        let in_process = client_engine + server_engine + marshal + procedure;
        let (raw, call) = (raw.mean99_ns as f64, untraced.mean99_ns as f64);
        let gap = [
            (FLOOR_GAP[0], floor),
            (FLOOR_GAP[1], raw - floor),
            (FLOOR_GAP[2], in_process),
            (FLOOR_GAP[3], call - raw - in_process),
        ];
        a.floor_gap = Accounting::from_parts(&scheme, 0, &gap, call, &[]).parts;
    }
    if count_instructions {
        match instructions::count(&instructions::counting_binary(exe), &scheme, "null", INSTRUCTION_CALLS) {
            Ok(n) => a.instructions = vec![n],
            Err(e) => a.instructions_skipped = Some(e.to_string()),
        }
    } else {
        a.instructions_skipped = Some("not counted in lab --quick (lowlat instructions counts them)".into());
    }
    Ok((a, joined.client_send_ns, joined.server_send_ns))
}

/// The additive parts of an untraced null call above the machine's floor (see
/// `Accounting::floor_gap`).
pub const FLOOR_GAP: [&str; 4] = [
    "the machine's floor (the simplest exchange, 32 bytes)",
    "lowlat's transport above the floor (its raw ping-pong)",
    "RPC layer: its code as measured in-process",
    "RPC layer: the rest (not seen in-process)",
];

/// How many times the floor gap's three measurements are made while the floor moves under them.
const FLOOR_ATTEMPTS: u32 = 3;

/// Whether two measurements of the floor (mean ns) agree well enough for what lies between them
/// to be set against it: within a placement of the CPUs the floor varies by up to a third; a
/// move takes it several times over.
fn floor_steady(a: f64, b: f64) -> bool {
    a.max(b) <= 1.5 * a.min(b).max(1.0)
}

/// The machine's floor for the path of `bind_uri`, measured now, where it has one (shm: one
/// cache line each way; udp: two connected sockets).
fn floor_exchange(
    exe: &Path,
    scheme: &str,
    bind_uri: &str,
    calls: u64,
    warmup: u64,
    spin: SpinPolicy,
    place: &Placement,
) -> Result<Option<crate::latency::Summary>, String> {
    if !matches!(scheme, "shm" | "udp") {
        return Ok(None);
    }
    let spin_s = spin.to_string();
    let srv = spawn_server(exe, &["pingpong", "--serve", "--floor", bind_uri, "--spin-us", &spin_s], place)?;
    let uri = srv.uris.first().cloned().ok_or("the floor server printed no URI")?;
    let opts = crate::pingpong::RawOptions { floor: true, ..Default::default() };
    let (floor, _) =
        bench::run_raw(&uri, HEADER_LEN, calls, warmup, spin, opts, None).map_err(|e| format!("the floor: {e}"))?;
    Ok(Some(floor))
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
        "Where the time of a null call over {} goes ({} calls, means of the fastest 99%):\n",
        a.transport, a.calls
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
    if let Some(o) = a.timestamp_overhead_ns {
        s.push_str(&format!(
            "  accounting on costs {:+.3} µs per call (traced minus untraced, fastest 99%)\n",
            o / 1000.0
        ));
    }
    if let Some((call, ratio)) = a.over_floor() {
        s.push_str("\nThe untraced call above the machine's floor, measured in this run (parts add up to it)\n");
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
    fn the_table_says_why_a_moving_floor_was_not_compared() {
        let mut a = Accounting::from_parts("shm", 10, &[("a", 1.0)], 1.0, &[]);
        a.floor_unsteady = Some("the floor moved during each of 3 attempts".into());
        let t = table(&a, 0.0, 0.0);
        assert!(t.contains("No comparison with the machine's floor: the floor moved"), "{t}");
        assert!(!t.contains("above the machine's floor"), "{t}");
    }
}
