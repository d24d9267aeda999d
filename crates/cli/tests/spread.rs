//! Clients over several servers, with real `lowlat serve` processes: calls spread over three
//! servers while one is killed and restarted and another is told to shed load (SIGUSR1) and to
//! take calls again (SIGUSR2); a server whose worker pool is full (`Busy`) and one refusing
//! every bind, whose calls go to the other.
//!
//! Each server's `COUNT` starts at its own multiple of a billion (`--count-from`), so a value
//! says which server (and which incarnation of the restarted one) ran the call.
//!
//! `LOWLAT_SPREAD_CALLS` sets the number of `COUNT` calls (20,000 by default; the figure
//! is 100,000). The figures are printed: run with `--nocapture`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lowlat::{ClientConfig, Error};
use lowlat_lab::interface::LabClient;
use lowlat_lab::procs::{self, ServerProcess};

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");
/// The distance between the servers' `COUNT` ranges.
const STRIDE: u64 = 1_000_000_000;
const THREADS: usize = 4;

fn serve(uri: &str, count_from: u64, extra: &[&str]) -> ServerProcess {
    let mut args = vec!["serve".to_string(), uri.to_string(), "--count-from".into(), count_from.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    procs::spawn(EXE.as_ref(), &args, Duration::from_secs(10)).expect("the server started")
}

/// An error's kind: its variant's name.
fn kind(e: &Error) -> String {
    let shown = format!("{e:?}");
    shown.split([' ', '{', '(']).next().unwrap_or("?").to_string()
}

/// What the calling threads saw.
#[derive(Default)]
struct Seen {
    values: Vec<u64>,
    /// Failures by kind, and whether they may have executed.
    failures: BTreeMap<(String, bool), u64>,
}

/// The tests of this file each load the machine: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn count_calls_over_three_udp_servers_keep_at_most_once_through_a_restart_and_shed_load() {
    three_servers("udp");
}

#[test]
fn count_calls_over_three_tcp_servers_keep_at_most_once_through_a_restart_and_shed_load() {
    three_servers("tcp");
}

/// Sends `signal` (`USR1`, `USR2`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill").args([format!("-{signal}"), pid.to_string()]).status().unwrap();
    assert!(ok.success(), "kill -{signal} {pid}");
}

/// When something happened to a server, and when it next ran a call.
#[derive(Default)]
struct Return {
    /// When it was back (restarted and ready, or told to take calls again).
    back: Mutex<Option<Instant>>,
    /// When a value from it was first returned after that.
    first_call: Mutex<Option<Instant>>,
}

impl Return {
    /// A value from the server returned now.
    fn served(&self) {
        if self.back.lock().unwrap().is_some() {
            self.first_call.lock().unwrap().get_or_insert_with(Instant::now);
        }
    }

    /// Whether the calling threads should go on for it: back, with no call yet (at most 3 s).
    fn waited_for(&self) -> bool {
        let seen = self.first_call.lock().unwrap().is_some();
        !seen && self.back.lock().unwrap().is_none_or(|t| t.elapsed() < Duration::from_secs(3))
    }

    fn time_to_first_call(&self) -> Option<Duration> {
        let back = (*self.back.lock().unwrap())?;
        self.first_call.lock().unwrap().map(|t| t.saturating_duration_since(back))
    }
}

/// Waits until `done` reaches `n` calls (at most 60 s).
fn until_calls(done: &AtomicU64, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn three_servers(scheme: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let any_port = format!("{scheme}://127.0.0.1:0");
    let calls: u64 = std::env::var("LOWLAT_SPREAD_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut a = serve(&any_port, 0, &[]);
    let a_uri = a.uris[0].clone();
    let b = serve(&any_port, STRIDE, &[]);
    let c = serve(&any_port, 3 * STRIDE, &[]);

    let list = format!("{a_uri},{},{}", b.uris[0], c.uris[0]);
    let cfg = ClientConfig {
        deadline: Duration::from_secs(2),
        bind_timeout: Duration::from_secs(1),
        ..ClientConfig::default()
    };
    let client = Arc::new(LabClient::connect(&list, cfg).expect("the servers answer"));

    let done = Arc::new(AtomicU64::new(0));
    // A restarted, and C taking calls again after shedding load.
    let (a_back, c_back) = (Arc::new(Return::default()), Arc::new(Return::default()));
    let began = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (client, done, a_back, c_back) = (client.clone(), done.clone(), a_back.clone(), c_back.clone());
            std::thread::spawn(move || {
                let mut seen = Seen::default();
                loop {
                    let n = done.fetch_add(1, Ordering::Relaxed);
                    // The calls asked for, and on until A and C have had a call since they came
                    // back (bounded: 3 s after each came back).
                    if n >= calls && !a_back.waited_for() && !c_back.waited_for() {
                        break;
                    }
                    match client.count() {
                        Ok(v) => {
                            match v / STRIDE {
                                2 => a_back.served(),
                                3 => c_back.served(),
                                _ => {}
                            }
                            seen.values.push(v);
                        }
                        Err(e) => *seen.failures.entry((kind(&e), e.may_have_executed())).or_default() += 1,
                    }
                }
                seen
            })
        })
        .collect();

    // A killed a fifth of the way through, and started again on the same port.
    until_calls(&done, calls / 5);
    a.kill();
    let killed_at = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let a2 = serve(&a_uri, 2 * STRIDE, &[]);
    *a_back.back.lock().unwrap() = Some(Instant::now());
    // C told to shed load two fifths of the way through, and to take calls again at three
    // fifths (at least 200 ms later).
    until_calls(&done, 2 * calls / 5);
    signal(c.pid(), "USR1");
    let shed_at = Instant::now();
    until_calls(&done, 3 * calls / 5);
    std::thread::sleep(Duration::from_millis(200).saturating_sub(shed_at.elapsed()));
    signal(c.pid(), "USR2");
    *c_back.back.lock().unwrap() = Some(Instant::now());
    let shed_for = shed_at.elapsed();

    let mut seen = Seen::default();
    for w in workers {
        let s = w.join().expect("a calling thread");
        seen.values.extend(s.values);
        for (k, n) in s.failures {
            *seen.failures.entry(k).or_default() += n;
        }
    }
    let elapsed = began.elapsed();
    let per_server = client.client().server_stats();

    // What each server ran, from its counter: one more COUNT each.
    let ran_by =
        |uri: &str, start: u64| LabClient::connect(uri, ClientConfig::default()).unwrap().count().unwrap() - 1 - start;
    let (ran_b, ran_a2, ran_c) =
        (ran_by(&b.uris[0], STRIDE), ran_by(&a2.uris[0], 2 * STRIDE), ran_by(&c.uris[0], 3 * STRIDE));

    let mut values = seen.values.clone();
    values.sort_unstable();
    let total = values.len() as u64;
    let dup = values.windows(2).find(|w| w[0] == w[1]);
    assert!(dup.is_none(), "a server returned COUNT value {:?} twice", dup);
    let range = |k: u64| values.iter().filter(|v| (k * STRIDE..(k + 1) * STRIDE).contains(v)).count() as u64;
    let (ok_a1, ok_b, ok_a2, ok_c) = (range(0), range(1), range(2), range(3));
    // The killed incarnation ran at least every value up to the largest it returned.
    let ran_a1_at_least = values.iter().filter(|v| **v < STRIDE).max().copied().unwrap_or(0);
    let maybe: u64 = seen.failures.iter().filter(|((_, m), _)| *m).map(|(_, n)| n).sum();
    let not_run: u64 = seen.failures.iter().filter(|((_, m), _)| !*m).map(|(_, n)| n).sum();
    let (a_first, c_first) = (a_back.time_to_first_call(), c_back.time_to_first_call());

    eprintln!(
        "{scheme}: {} calls from {THREADS} threads in {:.2} s: {total} succeeded, {maybe} failed and may have executed, \
         {not_run} failed certainly not executed; failures by kind: {:?}",
        total + maybe + not_run,
        elapsed.as_secs_f64(),
        seen.failures
    );
    eprintln!(
        "executions: A before its kill >= {ran_a1_at_least} ({ok_a1} returned), A restarted {ran_a2} ({ok_a2} returned), \
         B {ran_b} ({ok_b} returned), C {ran_c} ({ok_c} returned)"
    );
    eprintln!(
        "A killed {:.0} ms after the start, back (ready) {:.0} ms after its kill; its first call {a_first:?} after it was back",
        killed_at.duration_since(began).as_secs_f64() * 1e3,
        a_back.back.lock().unwrap().unwrap().duration_since(killed_at).as_secs_f64() * 1e3,
    );
    eprintln!(
        "C shed load from {:.0} ms after the start for {:.0} ms; its first call {c_first:?} after it took calls again",
        shed_at.duration_since(began).as_secs_f64() * 1e3,
        shed_for.as_secs_f64() * 1e3,
    );
    for s in &per_server {
        eprintln!(
            "  {}: up {}, calls {}, refused {}, failed (may have executed) {}, moved {}, left out {} times, last error {:?}",
            s.uri, s.up, s.calls, s.refused, s.failed_maybe_executed, s.moved, s.left_out, s.last_error
        );
    }

    // Every call returned a value or a typed error saying whether it may have run; each value
    // came from the server whose range it is in, once; and the executions the servers counted
    // are the successes plus at most the failures that may have executed.
    let ran = ran_a1_at_least + ran_a2 + ran_b + ran_c;
    assert!(ran >= total, "servers ran {ran} calls, fewer than the {total} that succeeded");
    assert!(
        ran <= total + maybe,
        "servers ran {ran} calls: more than the {total} successes plus the {maybe} failures that may have executed"
    );
    for (k, n) in [(ran_b, ok_b), (ran_a2, ok_a2), (ran_c, ok_c), (ran_a1_at_least, ok_a1)] {
        assert!(k >= n, "a server returned {n} values but ran {k}");
    }
    // Spread: every server served calls.
    assert!(ok_a1 > 0 && ok_b > 0 && ok_c > 0, "A {ok_a1}, B {ok_b}, C {ok_c}");
    let a_first = a_first.expect("the restarted server had no call within 3 s of its return");
    assert!(a_first < Duration::from_secs(1), "the restarted server's first call came {a_first:?} after its return");
    // C's shed calls (answered Busy, not run) went to the others: none failed for it.
    let c_stats = per_server.iter().find(|s| s.uri == c.uris[0]).unwrap();
    assert!(c_stats.refused >= 1 && c_stats.moved >= 1 && c_stats.left_out >= 1, "{c_stats:?}");
    assert!(c_stats.last_error.as_deref().is_some_and(|e| e.contains("shedding load")), "{c_stats:?}");
    assert!(!seen.failures.keys().any(|(k, _)| k == "Busy"), "a shed call failed: {:?}", seen.failures);
    let c_first = c_first.expect("the server that shed load had no call within 3 s of taking calls again");
    assert!(c_first < Duration::from_secs(1), "its first call came {c_first:?} after it took calls again");
    // No failure is of a kind that says the call itself was wrong.
    for (k, _) in seen.failures.keys() {
        assert!(!matches!(k.as_str(), "Decode" | "ServerError" | "GarbageArgs" | "Encode"), "failure of kind {k}");
    }
    drop(a2);
}

/// A server that refuses every bind (it requires a key this client does not hold) is left out
/// for the calls' whole run, saying why; the other takes them all.
#[test]
fn a_server_refusing_every_bind_is_left_out() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let key = std::env::temp_dir().join(format!("lowlat-spread-{}.key", std::process::id()));
    std::fs::write(&key, b"0123456789abcdef0123456789abcdef").unwrap();
    let keyed = serve("udp://127.0.0.1:0", 0, &["--psk-file", key.to_str().unwrap()]);
    let with_key = ClientConfig { psk: Some(lowlat::read_psk_file(&key).unwrap()), ..ClientConfig::default() };
    let _ = std::fs::remove_file(&key);
    let open = serve("udp://127.0.0.1:0", STRIDE, &[]);
    let list = format!("{},{}", keyed.uris[0], open.uris[0]);
    let client = LabClient::connect(&list, ClientConfig::default()).unwrap();
    let began = Instant::now();
    // Past two back-offs: the refusing server is probed again, and refuses again.
    while began.elapsed() < Duration::from_millis(100) {
        assert_eq!(client.count().unwrap() / STRIDE, 1);
    }
    let stats = client.client().server_stats();
    let refusing = &stats[0];
    assert!(refusing.left_out >= 2 && !refusing.up && refusing.refused >= 2, "{refusing:?}");
    assert!(refusing.last_error.as_deref().is_some_and(|e| e.contains("pre-shared key")), "{refusing:?}");
    // COUNT returns the calls run, this one included.
    let ran = LabClient::connect(&keyed.uris[0], with_key).unwrap().count().unwrap() - 1;
    assert_eq!(ran, 0, "the server that refused every bind ran calls");
}

#[test]
fn calls_a_server_sheds_with_busy_go_to_the_other() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // One worker and a one-call queue: a third SPIN at once is answered Busy.
    let shedding = serve("udp://127.0.0.1:0", 0, &["--workers", "1", "--worker-queue", "1"]);
    let roomy = serve("udp://127.0.0.1:0", STRIDE, &[]);
    let list = format!("{},{}", shedding.uris[0], roomy.uris[0]);
    let client = Arc::new(LabClient::connect(&list, ClientConfig::default()).unwrap());
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            std::thread::spawn(move || (0..20).map(|_| client.spin(2_000)).filter(Result::is_err).count())
        })
        .collect();
    let failed: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let per_server = client.client().server_stats();
    eprintln!("{per_server:#?}");
    assert_eq!(failed, 0, "every call should have gone to a server with room");
    let shed = &per_server[0];
    assert!(shed.refused > 0 && shed.moved > 0, "the shedding server refused nothing: {shed:?}");
    assert!(shed.last_error.as_deref().is_some_and(|e| e.contains("was not run")), "{shed:?}");
}

#[test]
fn a_list_with_no_server_up_says_what_each_said() {
    let cfg = ClientConfig { bind_timeout: Duration::from_millis(500), ..ClientConfig::default() };
    let e = LabClient::connect("udp://127.0.0.1:1,127.0.0.1:2", cfg.clone()).unwrap_err();
    assert!(matches!(e, Error::NoServer { .. }), "{e}");
    let shown = e.to_string();
    assert!(shown.contains("udp://127.0.0.1:1:") && shown.contains("udp://127.0.0.1:2:"), "{shown}");
    assert!(!e.may_have_executed());
}

/// How a call is marked idempotent, or not.
#[derive(Clone, Copy, Debug)]
enum Mark {
    No,
    PerCall,
    PerProcedure,
}

/// A call killed with its server may have run: it goes to the other server only when marked
/// idempotent. Made from a thread of its own, whose first pick is the first server; through the
/// generated client, blocking or async.
fn killed_during_a_call(mark: Mark, async_call: bool) -> (Result<(), Error>, Vec<lowlat::ServerStats>) {
    use lowlat_lab::interface::lab_vers::{LabVersClient, SPIN};
    let mut first = serve("udp://127.0.0.1:0", 0, &[]);
    let second = serve("udp://127.0.0.1:0", STRIDE, &[]);
    let list = format!("{},{}", first.uris[0], second.uris[0]);
    let caller = std::thread::spawn(move || {
        let client = LabVersClient::connect(&list).unwrap();
        let client = if let Mark::PerProcedure = mark { client.idempotent(&[SPIN]) } else { client };
        let per_call = lowlat::CallOptions::new().idempotent(true);
        let r = match (mark, async_call) {
            (Mark::PerCall, false) => client.with(per_call).spin(800_000),
            (_, false) => client.spin(800_000),
            (Mark::PerCall, true) => lowlat::wait_all([client.with(per_call).spin_async(800_000)]).remove(0),
            (_, true) => lowlat::wait_all([client.spin_async(800_000)]).remove(0),
        };
        (r, client.client().server_stats())
    });
    std::thread::sleep(Duration::from_millis(300));
    first.kill();
    caller.join().unwrap()
}

#[test]
fn a_call_that_may_have_run_goes_to_another_server_only_when_idempotent() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for async_call in [false, true] {
        let (r, stats) = killed_during_a_call(Mark::No, async_call);
        let e = r.expect_err("the call's server was killed during it");
        assert!(e.may_have_executed(), "async {async_call}: {e}");
        assert!(e.to_string().contains(&stats[0].uri), "the error names the server: {e}");
        assert_eq!((stats[0].calls, stats[1].calls), (1, 0), "async {async_call}: {stats:#?}");

        for mark in [Mark::PerCall, Mark::PerProcedure] {
            let (r, stats) = killed_during_a_call(mark, async_call);
            r.unwrap_or_else(|e| panic!("{mark:?}, async {async_call}: not sent again to the other server: {e}"));
            assert_eq!((stats[0].calls, stats[1].calls), (1, 1), "{mark:?}, async {async_call}: {stats:#?}");
            assert_eq!(stats[0].failed_maybe_executed, 1, "{mark:?}, async {async_call}: {stats:#?}");
        }
    }
}

/// Async calls, many in flight from one thread, go on to another server when one refuses them
/// (it sheds load); the server that refused takes calls again once told to.
#[test]
fn async_calls_a_server_refuses_go_to_the_other() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let shedding = serve("udp://127.0.0.1:0", 0, &[]);
    let other = serve("udp://127.0.0.1:0", STRIDE, &[]);
    let list = format!("{},{}", shedding.uris[0], other.uris[0]);
    let client = lowlat_lab::interface::lab_vers::LabVersClient::connect(&list).unwrap();
    let window = |n: usize| -> Vec<u64> {
        let mut set = lowlat::InFlight::new(16);
        let (mut made, mut values) = (0, Vec::new());
        while values.len() < n {
            while made < n && !set.is_full() {
                let _ = set.push(client.count_async());
                made += 1;
            }
            set.wait(Some(Duration::from_secs(10)), |_, r| values.push(r.expect("an async call failed")));
        }
        values
    };
    // Both serve.
    let before: Vec<u64> = window(400);
    assert!(before.iter().any(|v| v / STRIDE == 0), "the first server served none: {before:?}");
    signal(shedding.pid(), "USR1");
    std::thread::sleep(Duration::from_millis(100));
    let during = window(400);
    let stats = client.client().server_stats();
    assert!(during.iter().all(|v| v / STRIDE == 1), "a server shedding load ran calls");
    assert!(stats[0].moved >= 1 && stats[0].refused >= 1, "{stats:#?}");
    assert!(stats[0].last_error.as_deref().is_some_and(|e| e.contains("shedding load")), "{stats:#?}");
    signal(shedding.pid(), "USR2");
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(3) && !window(50).iter().any(|v| v / STRIDE == 0) {}
    assert!(began.elapsed() < Duration::from_secs(1), "no call on the server that took calls again within a second");
}

/// The command line takes a list where it takes a URI (`call`, `bench`), host names included;
/// and ONC RPC members may mix udp and tcp (one of three here not running).
#[test]
fn the_command_line_and_onc_rpc_take_lists_and_host_names() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let a = serve("udp://127.0.0.1:0", 0, &[]);
    let b = serve("onc+udp://127.0.0.1:0", STRIDE, &[]);
    let c = serve("onc+tcp://127.0.0.1:0", 2 * STRIDE, &[]);
    let port = |uri: &str| uri.rsplit_once(':').unwrap().1.to_string();
    let dead = format!("udp://localhost:{}", port(&b.uris[0])); // b's UDP port speaks ONC RPC: refused
    let list = format!("{dead},udp://localhost:{}", port(&a.uris[0]));
    let out = std::process::Command::new(EXE).args(["call", &list, "minus", "5", "7"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "-2");
    let out = std::process::Command::new(EXE)
        .args(["bench", &format!("{},{}", a.uris[0], a.uris[0]), "--calls", "300", "--threads", "2", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!((v["calls"].as_u64(), v["errors"].as_u64()), (Some(300), Some(0)), "{v}");

    // ONC RPC: a dead server, b over udp by host name, c over tcp.
    let onc = format!("onc+udp://127.0.0.1:1,onc+udp://localhost:{},{}", port(&b.uris[0]), c.uris[0]);
    let client = LabClient::connect(&onc, ClientConfig::default()).unwrap();
    assert!(client.client().is_onc());
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let onc = onc.clone();
            std::thread::spawn(move || {
                let client = LabClient::connect(&onc, ClientConfig::default()).unwrap();
                (0..50).map(|_| client.count().unwrap() / STRIDE).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut served: Vec<u64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    served.extend((0..10).map(|_| client.count().unwrap() / STRIDE));
    assert!(served.iter().all(|s| [1, 2].contains(s)), "values from b's and c's ranges only: {served:?}");
}

/// A host name the system resolver gives several addresses (here three lines of an
/// `/etc/hosts`, which `ip netns exec` puts in place for processes in a namespace the test
/// creates) stands for one server per address: each refuses in turn (shedding load) and the
/// call goes on to the next; with all three refusing, the error lists every address.
#[test]
fn a_host_name_with_several_addresses_in_etc_hosts_is_one_server_per_address() {
    use lowlat_testkit::testhosts::{root_or_skip, TestHosts};
    if !root_or_skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let hosts = TestHosts::new().unwrap();
    let ns = &hosts.a;
    /// The namespace's `/etc/hosts`, removed with the test.
    struct EtcDir(std::path::PathBuf);
    impl Drop for EtcDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let etc = EtcDir(std::path::Path::new("/etc/netns").join(&ns.ns));
    std::fs::create_dir_all(&etc.0).unwrap();
    std::fs::write(etc.0.join("hosts"), "127.0.0.1 pool.test\n127.0.0.2 pool.test\n127.0.0.3 pool.test\n").unwrap();

    let serve_in = |uri: &str, k: u64| {
        let mut cmd = ns.command(EXE);
        cmd.args(["serve", uri, "--count-from", &(k * STRIDE).to_string()]);
        procs::spawn_command(cmd, Duration::from_secs(10)).expect("the server started")
    };
    let first = serve_in("udp://127.0.0.1:0", 0);
    let port = first.uris[0].rsplit_once(':').unwrap().1.to_string();
    let others: Vec<_> = (2..=3).map(|k| serve_in(&format!("udp://127.0.0.{k}:{port}"), k - 1)).collect();
    let call = || {
        let out = ns.command(EXE).args(["call", &format!("udp://pool.test:{port}"), "count"]).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        match out.status.success() {
            true => Ok(text(&out.stdout).parse::<u64>().expect("a COUNT value")),
            false => Err(text(&out.stderr)),
        }
    };
    // A new process each time: it starts on the first address.
    assert_eq!(call().map(|v| v / STRIDE), Ok(0));
    for (k, server) in [&first, &others[0], &others[1]].into_iter().enumerate() {
        signal(server.pid(), "USR1");
        std::thread::sleep(Duration::from_millis(100));
        let next = call().map(|v| v / STRIDE);
        if k < 2 {
            assert_eq!(next, Ok(k as u64 + 1), "the call did not go on to the next address");
        } else {
            let said = next.expect_err("every address refused");
            for a in 1..=3 {
                let uri = format!("udp://127.0.0.{a}:{port}");
                assert!(said.contains(&uri), "{uri} is not in: {said}");
            }
        }
    }
}
