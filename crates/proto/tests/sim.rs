//! The protocol engine over a simulated network in virtual time: loss, duplication, reordering
//! and delay, thousands of calls of random sizes (many multi-fragment). Every call must return the
//! right result exactly once or fail with a timeout, and the server must run each call at most once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lowlat_proto::wire::{BindRequest, ByteOrder, PROTOCOL_VERSION};
use lowlat_proto::*;
use lowlat_testkit::simnet::{assert_at_most_once, Faults, SimNet};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PROGRAM: u32 = 0x2000_4C4C;
const FRAME: u32 = 1472;
const PROC_FAST: u32 = 0;
const PROC_SLOW: u32 = 1;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Dest {
    Server(u16),
    Client(u16),
}

/// Arguments: call id (8) + wanted result length (4) + filler. Result: id + a pattern.
fn make_args(id: u64, result_len: u32, arg_len: usize) -> Vec<u8> {
    let mut a = Vec::with_capacity(12 + arg_len);
    a.extend_from_slice(&id.to_le_bytes());
    a.extend_from_slice(&result_len.to_le_bytes());
    a.extend((0..arg_len).map(|i| (i as u64 ^ id) as u8));
    a
}

fn expected_result(id: u64, result_len: u32) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend((0..result_len).map(|i| (i as u64).wrapping_mul(31).wrapping_add(id) as u8));
    r
}

fn run_procedure(args: &[u8], reply: &mut Vec<u8>) -> u64 {
    let id = u64::from_le_bytes(args[0..8].try_into().unwrap());
    let len = u32::from_le_bytes(args[8..12].try_into().unwrap());
    // The filler must have arrived intact.
    for (i, b) in args[12..].iter().enumerate() {
        assert_eq!(*b, (i as u64 ^ id) as u8, "argument byte {i} of call {id} corrupted");
    }
    reply.extend_from_slice(&expected_result(id, len));
    id
}

struct Sim {
    now: Instant,
    net: SimNet<Dest>,
    server: ServerEngine<u16>,
    executions: HashMap<u64, u32>,
    slow_pending: Vec<(Instant, CallKey, Vec<u8>)>,
}

impl Sim {
    fn new(seed: u64, faults: Faults, cfg: ServerEngineConfig) -> Sim {
        Sim {
            now: Instant::now(),
            net: SimNet::new(seed, faults),
            server: ServerEngine::new(cfg),
            executions: HashMap::new(),
            slow_pending: Vec::new(),
        }
    }

    fn server_cfg() -> ServerEngineConfig {
        ServerEngineConfig {
            programs: vec![ProgramVersions { program: PROGRAM, low: 1, high: 2 }],
            max_frame: FRAME,
            max_message: 4 << 20,
            window: 32,
            seed: 7,
            ..ServerEngineConfig::default()
        }
    }

    fn deliver_to_server(&mut self, from: u16, frame: &[u8]) {
        let now = self.now;
        let net = &mut self.net;
        let mut out = |to: &u16, h: &[u8], b: &[u8]| net.send(now, Dest::Client(*to), h, b);
        if let Some(call) = self.server.handle(from, frame, || now, &mut out) {
            if call.proc_no == PROC_SLOW {
                let args = call.args.to_vec();
                let key = call.key;
                self.slow_pending.push((now + Duration::from_millis(30), key, args));
                return;
            }
            let id = run_procedure(call.args, call.reply);
            *self.executions.entry(id).or_default() += 1;
            let key = call.key;
            self.server.finish(key, Status::Ok, &mut out);
        }
    }

    fn run_slow_due(&mut self) {
        let now = self.now;
        let due: Vec<_> = self.slow_pending.iter().filter(|p| p.0 <= now).cloned().collect();
        self.slow_pending.retain(|p| p.0 > now);
        for (_, key, args) in due {
            let mut reply = Vec::new();
            let id = run_procedure(&args, &mut reply);
            *self.executions.entry(id).or_default() += 1;
            let net = &mut self.net;
            let mut out = |to: &u16, h: &[u8], b: &[u8]| net.send(now, Dest::Client(*to), h, b);
            self.server.finish_with(key, Status::Ok, &reply, &mut out);
        }
    }

    fn bind(&mut self, version: u32, nonce: u64, addr: u16) -> Result<Session, BindError> {
        self.bind_with(version, nonce, addr, None).map(|b| b.session)
    }

    /// Binds from `addr`, with a key or without, through every round the server asks for.
    fn bind_with(&mut self, version: u32, nonce: u64, addr: u16, psk: Option<Psk>) -> Result<Bound, BindError> {
        let req = BindRequest {
            program: PROGRAM,
            version,
            proto_min: PROTOCOL_VERSION,
            proto_max: PROTOCOL_VERSION,
            byte_order: ByteOrder::host(),
            flags: 0,
            max_message: 4 << 20,
            max_frame: FRAME,
            slots: 4,
            window: 32,
            nonce,
        };
        let cfg = ClientEngineConfig::default();
        let mut b = Binder::new(req, &cfg, self.now, self.now + Duration::from_secs(5)).with_key(psk);
        let now = self.now;
        b.start(now, &mut |h, body| self.net.send(now, Dest::Server(addr), h, body));
        loop {
            let next_net = self.net.next_delivery();
            let t = b.poll_timeout().unwrap();
            if next_net.is_some_and(|n| n <= t) {
                let (at, dest, frame) = self.net.pop().unwrap();
                self.now = at;
                match dest {
                    Dest::Server(from) => self.deliver_to_server(from, &frame),
                    Dest::Client(_) => {
                        let now = self.now;
                        let net = &mut self.net;
                        if let Some(r) =
                            b.handle(&frame, now, &mut |h, body| net.send(now, Dest::Server(addr), h, body))
                        {
                            return r;
                        }
                    }
                }
            } else {
                self.now = t;
                let now = self.now;
                if let Some(e) = b.handle_timeout(now, &mut |h, body| self.net.send(now, Dest::Server(addr), h, body)) {
                    return Err(e);
                }
            }
        }
    }
}

struct Planned {
    id: u64,
    proc_no: u32,
    args: Vec<u8>,
    result_len: u32,
}

#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    timeouts: u64,
}

fn run_workload(seed: u64, faults: Faults, calls_per_slot: usize, slots: u16, big: bool) -> (Tally, Sim) {
    run_keyed_workload(seed, faults, calls_per_slot, slots, big, None)
}

/// [`run_workload`] on a session bound with `psk` (every frame tagged) when there is one.
fn run_keyed_workload(
    seed: u64,
    faults: Faults,
    calls_per_slot: usize,
    slots: u16,
    big: bool,
    psk: Option<Psk>,
) -> (Tally, Sim) {
    let mut sim = Sim::new(seed, faults, ServerEngineConfig { psk: psk.clone(), ..Sim::server_cfg() });
    let bound = sim.bind_with(1, 99, 0, psk).expect("bind");
    let session = bound.session;
    assert_eq!(session.slots, 4);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xABCD);
    let cfg = ClientEngineConfig::default();
    let mut clients: Vec<ClientSlot> =
        (0..slots).map(|s| ClientSlot::new(session, s, cfg).with_keys(bound.keys.clone())).collect();
    let mut plans: Vec<Vec<Planned>> = (0..slots)
        .map(|s| {
            (0..calls_per_slot)
                .map(|i| {
                    let id = (s as u64) << 32 | i as u64;
                    let pick = rng.gen_range(0..100);
                    let (arg_len, result_len) = match pick {
                        0..=59 => (rng.gen_range(0..100), rng.gen_range(0..100)),
                        60..=84 => (rng.gen_range(1300..1500), rng.gen_range(1300..1500)),
                        _ if big => (rng.gen_range(0..40_000), rng.gen_range(0..40_000)),
                        _ => (rng.gen_range(0..3000), rng.gen_range(0..3000)),
                    };
                    let proc_no = if rng.gen_range(0..50) == 0 { PROC_SLOW } else { PROC_FAST };
                    Planned { id, proc_no, args: make_args(id, result_len, arg_len), result_len }
                })
                .rev()
                .collect()
        })
        .collect();
    let mut current: Vec<Option<Planned>> = (0..slots).map(|_| None).collect();
    let mut delivered: HashMap<u64, u32> = HashMap::new();
    let mut tally = Tally::default();
    let deadline = Duration::from_secs(3);
    loop {
        // Start calls on idle slots.
        for s in 0..slots as usize {
            if current[s].is_none() {
                if let Some(p) = plans[s].pop() {
                    let c = &mut clients[s];
                    c.args_buf().extend_from_slice(&p.args);
                    let now = sim.now;
                    let net = &mut sim.net;
                    c.start(p.proc_no, now, now + deadline, &mut |h, b| net.send(now, Dest::Server(s as u16), h, b))
                        .unwrap();
                    current[s] = Some(p);
                }
            }
        }
        // Next event: a delivery, a client timer, a slow procedure finishing, a server timer.
        let mut t: Option<Instant> = sim.net.next_delivery();
        let mut consider = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        for c in &clients {
            consider(c.poll_timeout());
        }
        for p in &sim.slow_pending {
            consider(Some(p.0));
        }
        consider(sim.server.poll_timeout());
        let Some(t) = t else { break };
        if current.iter().all(Option::is_none) && plans.iter().all(Vec::is_empty) && sim.net.is_empty() {
            break;
        }
        sim.now = sim.now.max(t);
        let now = sim.now;
        sim.run_slow_due();
        sim.server.handle_timeout(now);
        // Deliveries due now.
        while let Some((dest, frame)) = sim.net.pop_due(now) {
            match dest {
                Dest::Server(from) => sim.deliver_to_server(from, &frame),
                Dest::Client(s) => {
                    let s = s as usize;
                    let net = &mut sim.net;
                    let outcome =
                        clients[s].handle(&frame, || now, &mut |h, b| net.send(now, Dest::Server(s as u16), h, b));
                    match outcome {
                        Some(Outcome::Reply(body)) => {
                            let p = current[s].take().expect("a reply for an idle slot");
                            assert_eq!(
                                body,
                                expected_result(p.id, p.result_len).as_slice(),
                                "wrong result for call {}",
                                p.id
                            );
                            *delivered.entry(p.id).or_default() += 1;
                            tally.ok += 1;
                        }
                        Some(Outcome::Failed(e)) => panic!("call failed unexpectedly: {e:?}"),
                        Some(e @ Outcome::Remote { .. }) => panic!("the server refused a call: {e:?}"),
                        None => {}
                    }
                }
            }
        }
        // Client timers.
        for s in 0..slots as usize {
            if clients[s].poll_timeout().is_some_and(|x| x <= now) {
                let net = &mut sim.net;
                if let Some(e) = clients[s].handle_timeout(now, &mut |h, b| net.send(now, Dest::Server(s as u16), h, b))
                {
                    assert!(matches!(e, CallError::Timeout { .. }), "{e:?}");
                    current[s].take().expect("timeout of an idle slot");
                    tally.timeouts += 1;
                }
            }
        }
    }
    assert_at_most_once(&delivered, &sim.executions);
    (tally, sim)
}

#[test]
fn clean_network_every_call_succeeds_once() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 20, jitter_us: 0 };
    let (tally, sim) = run_workload(1, faults, 300, 4, true);
    assert_eq!(tally.ok, 1200);
    assert_eq!(tally.timeouts, 0);
    // Only the slow procedures (1 in 50, running 30 ms) and the tails of multi-fragment calls see
    // retransmissions on a clean network: no storms.
    assert!(sim.server.stats.duplicates < tally.ok / 10, "{} duplicates", sim.server.stats.duplicates);
}

#[test]
fn lossy_duplicating_reordering_network_keeps_at_most_once() {
    let faults = Faults { loss: 0.10, dup: 0.05, base_delay_us: 50, jitter_us: 200 };
    for seed in [2, 3, 4] {
        let (tally, sim) = run_workload(seed, faults, 600, 4, seed == 2);
        assert_eq!(tally.ok + tally.timeouts, 2400);
        // With 10% loss and a 3 s deadline nearly everything gets through.
        assert!(tally.ok >= 2350, "seed {seed}: {tally:?}");
        assert!(sim.server.stats.duplicates > 0, "the network should have produced duplicates");
        // State is bounded: one session, results of at most one call per slot.
        assert_eq!(sim.server.session_count(), 1);
        assert!(sim.server.buffered_bytes() < 4 * 2 * 256 * 1024, "{}", sim.server.buffered_bytes());
    }
}

/// Every frame tagged (fragments, acknowledgements, probes, results): the same guarantees, and
/// no frame of the honest peers ever fails its tag.
#[test]
fn keyed_sessions_keep_at_most_once_on_a_faulty_network() {
    let faults = Faults { loss: 0.10, dup: 0.05, base_delay_us: 50, jitter_us: 200 };
    let psk = Psk::new(b"a key of thirty-two bytes, shared").unwrap();
    let (tally, sim) = run_keyed_workload(6, faults, 300, 4, true, Some(psk));
    assert_eq!(tally.ok + tally.timeouts, 1200);
    assert!(tally.ok >= 1170, "{tally:?}");
    assert_eq!(sim.server.stats.mac_failures, 0);
    assert!(sim.server.stats.duplicates > 0 && sim.server.stats.retransmits_received > 0);
}

#[test]
fn heavy_loss_fails_with_timeouts_not_wrong_answers() {
    let faults = Faults { loss: 0.45, dup: 0.1, base_delay_us: 50, jitter_us: 300 };
    let (tally, _sim) = run_workload(5, faults, 150, 4, false);
    assert_eq!(tally.ok + tally.timeouts, 600);
    assert!(tally.ok > 0);
}

#[test]
fn binding_refusals_are_typed() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 10, jitter_us: 0 };
    let mut sim = Sim::new(9, faults, Sim::server_cfg());
    assert_eq!(sim.bind(3, 1, 0), Err(BindError::Refused(Refusal::VersionMismatch { low: 1, high: 2 })));
    let mut cfg = Sim::server_cfg();
    cfg.programs[0].program = 5;
    let mut other = Sim::new(9, faults, cfg);
    assert_eq!(other.bind(1, 1, 0), Err(BindError::Refused(Refusal::UnknownProgram { program: PROGRAM })));
    let mut cfg = Sim::server_cfg();
    cfg.max_sessions = 2;
    let mut full = Sim::new(9, faults, cfg);
    let a = full.bind(1, 1, 0).unwrap();
    // A retransmitted bind (same nonce, same peer) gets the same session, not a new one.
    assert_eq!(full.bind(1, 1, 0).unwrap().token, a.token);
    let b = full.bind(1, 2, 1).unwrap();
    // Tokens carry the generation and differ between sessions.
    assert_ne!(a.token, b.token);
    // A full table gives up an idle session (here the oldest, neither having called) rather
    // than refuse (`tests/bind.rs` has the rest of the policy).
    full.bind(1, 3, 2).unwrap();
    assert_eq!(full.server.stats.sessions_reclaimed, 1);
    assert_eq!((a.token >> 48) as u16, a.generation);
}

#[test]
fn restarted_server_and_expired_session_are_told_apart() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 10, jitter_us: 0 };
    let mut cfg = Sim::server_cfg();
    cfg.session_idle = Duration::from_secs(1);
    let mut sim = Sim::new(11, faults, cfg.clone());
    let session = sim.bind(1, 1, 0).unwrap();
    let mut c = ClientSlot::new(session, 0, ClientEngineConfig::default());
    let call = |sim: &mut Sim, c: &mut ClientSlot| -> Option<CallError> {
        c.args_buf().extend_from_slice(&make_args(1, 4, 0));
        let now = sim.now;
        c.start(PROC_FAST, now, now + Duration::from_secs(1), &mut |h, b| sim.net.send(now, Dest::Server(0), h, b))
            .unwrap();
        while let Some((at, dest, frame)) = sim.net.pop() {
            sim.now = at;
            match dest {
                Dest::Server(f) => sim.deliver_to_server(f, &frame),
                Dest::Client(_) => {
                    let now = sim.now;
                    match c.handle(&frame, || now, &mut |_, _| {}) {
                        Some(Outcome::Failed(e)) => return Some(e),
                        Some(e @ Outcome::Remote { .. }) => panic!("the server refused the call: {e:?}"),
                        Some(Outcome::Reply(_)) => return None,
                        None => {}
                    }
                }
            }
        }
        panic!("no answer");
    };
    // Calls at intervals shorter than the limit keep the session through many sweeps (the
    // server notes activity with a flag, not a clock read per call).
    let sweep_to = |sim: &mut Sim, until: Instant| {
        while let Some(t) = sim.server.poll_timeout().filter(|t| *t <= until) {
            sim.now = t;
            sim.server.handle_timeout(t);
        }
        sim.now = sim.now.max(until);
    };
    for _ in 0..12 {
        let next = sim.now + Duration::from_millis(900);
        sweep_to(&mut sim, next);
        assert_eq!(call(&mut sim, &mut c), None, "a session in use expired");
    }
    assert_eq!(sim.server.stats.sessions_expired, 0);
    // Idle past the limit: the session expires, no sooner than the limit after its last call
    // and within one and a half times it; the same server says so, and the call is safe to retry.
    let last_call = sim.now;
    sweep_to(&mut sim, last_call + Duration::from_millis(999));
    assert_eq!(sim.server.session_count(), 1, "expired before the limit");
    sweep_to(&mut sim, last_call + Duration::from_millis(1500));
    assert_eq!(sim.server.session_count(), 0, "not expired within 1.5 times the limit");
    assert_eq!(call(&mut sim, &mut c), Some(CallError::SessionLost { restarted: false, retry_safe: true }));
    // A new server (new generation) does not know the session either, and says it restarted.
    cfg.seed = 12345;
    sim.server = ServerEngine::new(cfg);
    assert_eq!(call(&mut sim, &mut c), Some(CallError::SessionLost { restarted: true, retry_safe: false }));
}

#[test]
fn oversized_call_gets_typed_error() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 10, jitter_us: 0 };
    let mut cfg = Sim::server_cfg();
    cfg.max_message = 1000;
    let mut sim = Sim::new(13, faults, cfg);
    let session = sim.bind(1, 1, 0).unwrap();
    assert_eq!(session.max_message, 1000);
    let mut c = ClientSlot::new(session, 0, ClientEngineConfig::default());
    c.args_buf().resize(1001, 0);
    let now = sim.now;
    assert_eq!(
        c.start(PROC_FAST, now, now + Duration::from_secs(1), &mut |_, _| {}),
        Err(CallError::TooLarge { size: 1001, max: 1000 })
    );
}
