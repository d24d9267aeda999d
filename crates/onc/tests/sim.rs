//! The ONC RPC engine over a simulated network in virtual time: loss, duplication, reordering and
//! delay, hundreds of calls from several client slots, some of them to a procedure that runs
//! elsewhere for a while (so retransmissions meet a call still running). Every call must return
//! the right result once or fail by its deadline, and the server must run each call (each xid of
//! each slot) at most once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lowlat_onc::engine::{CallError, CallKey, ClientSlot, ClientSlotConfig, Outcome, ServerEngine, ServerEngineConfig};
use lowlat_onc::{AcceptStatus, Credential};
use lowlat_testkit::simnet::{assert_at_most_once, Faults, SimNet};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PROG: u32 = 0x2000_7703;
const PROC_FAST: u32 = 1;
const PROC_SLOW: u32 = 2;
const DEADLINE: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Dest {
    Server(u16),
    Client(u16),
}

/// Arguments: the call's id (8 bytes) and filler. Results: the id and a pattern of its own.
fn make_args(id: u64, len: usize) -> Vec<u8> {
    let mut a = id.to_be_bytes().to_vec();
    a.extend((0..len).map(|i| (i as u64 ^ id) as u8));
    a
}

fn expected_result(id: u64) -> Vec<u8> {
    let mut r = id.to_be_bytes().to_vec();
    r.extend((0..(id % 300) as usize).map(|i| (i as u64).wrapping_mul(31).wrapping_add(id) as u8));
    r
}

fn run_procedure(args: &[u8], results: &mut Vec<u8>) -> u64 {
    let id = u64::from_be_bytes(args[..8].try_into().unwrap());
    for (i, b) in args[8..].iter().enumerate() {
        assert_eq!(*b, (i as u64 ^ id) as u8, "argument byte {i} of call {id} corrupted");
    }
    results.extend_from_slice(&expected_result(id));
    id
}

struct Sim {
    now: Instant,
    net: SimNet<Dest>,
    server: ServerEngine<u16>,
    /// Executions per call id, and per (slot, xid).
    executions: HashMap<u64, u32>,
    executed_xids: HashMap<(u16, u32), u32>,
    slow_pending: Vec<(Instant, CallKey<u16>, Vec<u8>)>,
}

impl Sim {
    fn new(seed: u64, faults: Faults, cache: usize) -> Sim {
        let cfg = ServerEngineConfig {
            programs: vec![(PROG, 1)],
            duplicate_cache: cache,
            max_reply: 65_507,
            ..ServerEngineConfig::default()
        };
        Sim {
            now: Instant::now(),
            net: SimNet::new(seed, faults),
            server: ServerEngine::new(cfg),
            executions: HashMap::new(),
            executed_xids: HashMap::new(),
            slow_pending: Vec::new(),
        }
    }

    fn executed(&mut self, from: u16, xid: u32, id: u64) {
        *self.executions.entry(id).or_default() += 1;
        *self.executed_xids.entry((from, xid)).or_default() += 1;
    }

    fn deliver_to_server(&mut self, from: u16, msg: &[u8]) {
        let now = self.now;
        let net = &mut self.net;
        let mut out = |to: &u16, h: &[u8], b: &[u8]| net.send(now, Dest::Client(*to), h, b);
        let Some(call) = self.server.handle(from, msg, &mut out) else { return };
        let key = call.key;
        if call.procedure == PROC_SLOW {
            self.slow_pending.push((now + Duration::from_millis(150), key, call.args.to_vec()));
            return;
        }
        let id = run_procedure(call.args, call.results);
        self.server.finish(key, AcceptStatus::Success, &mut out);
        self.executed(from, key.xid, id);
    }

    fn run_slow_due(&mut self) {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = self.slow_pending.drain(..).partition(|p| p.0 <= now);
        self.slow_pending = later;
        for (_, key, args) in due {
            let mut results = Vec::new();
            let id = run_procedure(&args, &mut results);
            self.executed(key.from, key.xid, id);
            let net = &mut self.net;
            let mut out = |to: &u16, h: &[u8], b: &[u8]| net.send(now, Dest::Client(*to), h, b);
            self.server.finish_with(key, AcceptStatus::Success, &results, &mut out);
        }
    }
}

#[derive(Default, Debug)]
struct Tally {
    ok: u64,
    timeouts: u64,
    retransmissions: u64,
}

struct Planned {
    id: u64,
    procedure: u32,
    args: Vec<u8>,
}

fn run_workload(seed: u64, faults: Faults, calls_per_slot: usize, slots: u16, reliable: bool) -> (Tally, Sim) {
    let mut sim = Sim::new(seed, faults, if reliable { 0 } else { 1024 });
    let mut rng = StdRng::seed_from_u64(seed ^ 0xABCD);
    let mut clients: Vec<ClientSlot> = (0..slots)
        .map(|s| {
            let cfg = ClientSlotConfig {
                reliable,
                first_retry: Duration::from_millis(20),
                max_retry: Duration::from_millis(400),
                seed: seed << 8 | s as u64,
                ..ClientSlotConfig::default()
            };
            ClientSlot::new(PROG, 1, &Credential::None, cfg, sim.now)
        })
        .collect();
    let mut plans: Vec<Vec<Planned>> = (0..slots)
        .map(|s| {
            (0..calls_per_slot)
                .map(|i| {
                    let id = (s as u64) << 32 | i as u64;
                    let procedure = if rng.gen_range(0..20) == 0 { PROC_SLOW } else { PROC_FAST };
                    Planned { id, procedure, args: make_args(id, rng.gen_range(0..1400)) }
                })
                .rev()
                .collect()
        })
        .collect();
    let mut current: Vec<Option<(Planned, Instant)>> = (0..slots).map(|_| None).collect();
    let mut delivered: HashMap<u64, u32> = HashMap::new();
    let mut tally = Tally::default();
    loop {
        // Start calls on idle slots.
        for s in 0..slots as usize {
            if current[s].is_none() {
                if let Some(p) = plans[s].pop() {
                    let c = &mut clients[s];
                    c.args_buf().extend_from_slice(&p.args);
                    let now = sim.now;
                    let net = &mut sim.net;
                    c.start(p.procedure, now, now + DEADLINE, &mut |h, b| net.send(now, Dest::Server(s as u16), h, b))
                        .unwrap();
                    current[s] = Some((p, now + DEADLINE));
                }
            }
        }
        if current.iter().all(Option::is_none) && sim.net.is_empty() && sim.slow_pending.is_empty() {
            break;
        }
        // Next event: a delivery, a client timer, a slow procedure finishing. The clock jumps.
        let next = [
            sim.net.next_delivery(),
            clients.iter().filter_map(ClientSlot::poll_timeout).min(),
            sim.slow_pending.iter().map(|p| p.0).min(),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("something is pending");
        sim.now = sim.now.max(next);
        let now = sim.now;
        sim.run_slow_due();
        while let Some((dest, msg)) = sim.net.pop_due(now) {
            match dest {
                Dest::Server(from) => sim.deliver_to_server(from, &msg),
                Dest::Client(s) => {
                    let s = s as usize;
                    match clients[s].handle(&msg) {
                        Some(Outcome::Reply(results)) => {
                            let (p, deadline) = current[s].take().expect("a reply for an idle slot");
                            assert!(now <= deadline, "call {} completed after its deadline", p.id);
                            assert_eq!(results, expected_result(p.id).as_slice(), "wrong result for call {}", p.id);
                            *delivered.entry(p.id).or_default() += 1;
                            tally.ok += 1;
                        }
                        Some(Outcome::Failed(e)) => panic!("call failed unexpectedly: {e:?}"),
                        None => {}
                    }
                }
            }
        }
        for s in 0..slots as usize {
            if clients[s].poll_timeout().is_some_and(|t| t <= now) {
                let net = &mut sim.net;
                if let Some(e) = clients[s].handle_timeout(now, &mut |h, b| net.send(now, Dest::Server(s as u16), h, b))
                {
                    let (p, deadline) = current[s].take().expect("a timeout of an idle slot");
                    assert!(matches!(e, CallError::Timeout { sent: true, after } if after == DEADLINE), "{e:?}");
                    assert_eq!(now, deadline, "call {} failed other than at its deadline", p.id);
                    assert!(e.may_have_executed());
                    tally.timeouts += 1;
                }
            }
        }
    }
    assert_at_most_once(&delivered, &sim.executions);
    for (xid, n) in &sim.executed_xids {
        assert!(*n <= 1, "xid {xid:?} executed {n} times");
    }
    tally.retransmissions = clients.iter().map(|c| c.retransmissions).sum();
    (tally, sim)
}

#[test]
fn clean_network_every_call_succeeds_once_without_retransmission() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 50, jitter_us: 0 };
    let (tally, sim) = run_workload(1, faults, 200, 4, false);
    assert_eq!((tally.ok, tally.timeouts), (800, 0));
    // Only the slow procedure (150 ms, past the first retries) draws retransmissions, which the
    // cache drops while it runs.
    assert!(sim.server.stats.duplicates <= tally.retransmissions);
    assert_eq!(sim.server.stats.calls, 800);
}

#[test]
fn lossy_duplicating_reordering_network_keeps_at_most_once() {
    let faults = Faults { loss: 0.15, dup: 0.10, base_delay_us: 100, jitter_us: 3000 };
    for seed in [2, 3, 4] {
        let (tally, sim) = run_workload(seed, faults, 150, 4, false);
        assert_eq!(tally.ok + tally.timeouts, 600, "seed {seed}");
        // With 15% loss each way and a 2 s deadline nearly everything gets through.
        assert!(tally.ok >= 590, "seed {seed}: {tally:?}");
        assert!(tally.retransmissions > 0 && sim.server.stats.duplicates > 0, "seed {seed}: {tally:?}");
        assert!(sim.server.cached_replies() <= 1024);
    }
}

#[test]
fn heavy_loss_fails_by_the_deadline_not_with_wrong_answers() {
    let faults = Faults { loss: 0.6, dup: 0.2, base_delay_us: 100, jitter_us: 2000 };
    let (tally, _) = run_workload(5, faults, 60, 4, false);
    assert_eq!(tally.ok + tally.timeouts, 240);
    assert!(tally.ok > 0 && tally.timeouts > 0, "{tally:?}");
}

#[test]
fn a_stream_needs_no_cache_and_no_retransmission() {
    let faults = Faults { loss: 0.0, dup: 0.0, base_delay_us: 30, jitter_us: 0 };
    let (tally, sim) = run_workload(6, faults, 200, 4, true);
    assert_eq!((tally.ok, tally.timeouts, tally.retransmissions), (800, 0, 0));
    assert_eq!(sim.server.cached_replies(), 0);
}

#[test]
fn a_server_that_is_not_there_refuses_every_call_as_never_executed() {
    // Every message to the server is refused (an ICMP port-unreachable on a connected socket).
    let t0 = Instant::now();
    let mut c = ClientSlot::new(PROG, 1, &Credential::None, ClientSlotConfig::default(), t0);
    for i in 0..100u64 {
        c.args_buf().extend_from_slice(&make_args(i, 4));
        let mut sent = 0;
        c.start(PROC_FAST, t0, t0 + DEADLINE, &mut |_, _| sent += 1).unwrap();
        assert_eq!(sent, 1);
        let e = c.handle_refused().expect("the call fails at once");
        assert!(matches!(e, CallError::Refused { may_have_executed: false }), "{e:?}");
        assert_eq!(c.poll_timeout(), None, "nothing left to wait for");
    }
}
