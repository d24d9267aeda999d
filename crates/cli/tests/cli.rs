//! The `lowlat` command as a user runs it: help, serve and call, bench's JSON, and a server
//! killed with SIGKILL in the middle of calls.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lowlat::{ClientConfig, Error};
use lowlat_lab::interface::LabClient;
use lowlat_lab::procs;

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

fn lowlat(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(EXE).args(args).stdin(Stdio::null()).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn serve(uri: &str) -> procs::ServerProcess {
    procs::spawn(EXE.as_ref(), &["serve".into(), uri.into()], Duration::from_secs(10)).unwrap()
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["serve", "call", "bench", "pingpong", "account", "gen", "lab", "relay", "stat"] {
        let (ok, out, _) = lowlat(&[sub, "--help"]);
        assert!(ok && out.contains("Usage"), "{sub} --help: {out}");
    }
    let (ok, out, _) = lowlat(&["--help"]);
    assert!(ok && out.contains("bench") && out.contains("pingpong"), "{out}");
}

#[test]
fn serve_and_call_from_the_command_line() {
    let server = serve("udp://127.0.0.1:0");
    let uri = server.uris[0].clone();
    let (ok, out, err) = lowlat(&["call", &uri, "minus", "5", "7"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "-2");
    let (ok, out, _) = lowlat(&["call", &uri, "echo", "hello", "world"]);
    assert!(ok);
    assert_eq!(out.trim(), "hello world");
    let (ok, _, err) = lowlat(&["call", &uri, "minus", "5"]);
    assert!(!ok && err.contains("two integers"), "{err}");
    let (ok, _, err) = lowlat(&["call", &uri, "42"]);
    assert!(
        !ok && err.contains(&format!(
            "{uri}: procedure 42 of program 0x20004c4c version 1: the server has no such procedure"
        )),
        "{err}"
    );
    let (ok, _, err) = lowlat(&["call", "udp://nowhere", "null"]);
    assert!(!ok && err.contains("HOST:PORT"), "{err}");
    let (ok, _, err) = lowlat(&["bench", &uri, "--spin-us", "soon"]);
    assert!(!ok && err.contains("adaptive"), "{err}");
}

#[test]
fn bench_and_pingpong_print_the_documented_json() {
    let server = serve("tcp://127.0.0.1:0");
    let uri = server.uris[0].clone();
    let (ok, out, err) =
        lowlat(&["bench", &uri, "--proc", "echo", "--size", "100", "--calls", "2000", "--threads", "2", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for field in [
        "kind",
        "transport",
        "proc",
        "size",
        "calls",
        "threads",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p999_ns",
        "max_ns",
        "mean_ns",
        "calls_per_s",
    ] {
        assert!(v.get(field).is_some(), "missing {field} in {out}");
    }
    assert_eq!(v["kind"], "rpc");
    assert_eq!(v["transport"], "tcp");
    assert_eq!(v["calls"], 2000);
    assert!(v["p50_ns"].as_u64().unwrap() <= v["p99_ns"].as_u64().unwrap());
    let pp = procs::spawn(
        EXE.as_ref(),
        &["pingpong".into(), "--serve".into(), "udp://127.0.0.1:0".into()],
        Duration::from_secs(10),
    )
    .unwrap();
    let (ok, out, err) = lowlat(&["pingpong", &pp.uris[0], "--calls", "2000", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["kind"], "raw");
    assert_eq!(v["size"], 32);
}

#[test]
fn the_machines_floor_for_shared_memory_and_udp() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("floor.sock");
    let floor = |uri: String| {
        procs::spawn(
            EXE.as_ref(),
            &["pingpong".into(), "--serve".into(), "--floor".into(), uri],
            Duration::from_secs(10),
        )
        .unwrap()
    };
    let shm = floor(format!("shm://{}", sock.display()));
    for size in ["32", "1024"] {
        let (ok, out, err) =
            lowlat(&["pingpong", "--floor", &shm.uris[0], "--size", size, "--calls", "2000", "--json"]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!((v["kind"].as_str(), v["proc"].as_str()), (Some("raw"), Some("floor")));
        assert_eq!(v["spin"], "forever", "the floor always spins");
        assert_eq!(v["size"].to_string(), size);
        assert_eq!(v["calls"], 2000);
    }
    // Its messages end in an 8-byte sequence word: other sizes are refused, clearly.
    let (ok, _, err) = lowlat(&["pingpong", "--floor", &shm.uris[0], "--size", "30", "--calls", "10"]);
    assert!(!ok && err.contains("multiple of 8"), "{err}");
    drop(shm);
    assert!(!sock.exists(), "the floor server left {} behind", sock.display());
    // UDP's floor: two connected sockets.
    let udp = floor("udp://127.0.0.1:0".into());
    let (ok, out, err) = lowlat(&["pingpong", "--floor", &udp.uris[0], "--calls", "2000", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["transport"].as_str(), v["proc"].as_str(), v["calls"].as_u64()),
        (Some("udp"), Some("floor"), Some(2000))
    );
}

#[test]
fn server_killed_mid_call_gives_a_clear_error_within_the_deadline() {
    for scheme in ["udp", "tcp"] {
        let server = serve(&format!("{scheme}://127.0.0.1:0"));
        let uri = server.uris[0].clone();
        let c = LabClient::connect(&uri, ClientConfig { deadline: Duration::from_secs(2), ..ClientConfig::default() })
            .unwrap();
        let pid = server.pid();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY-free: plain kill(2) of the child we started, by PID.
            Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
        });
        let data = vec![1u8; 200_000];
        let mut out = Vec::new();
        let started = Instant::now();
        let err = loop {
            let t = Instant::now();
            if let Err(e) = c.echo(&data, &mut out) {
                assert!(t.elapsed() < Duration::from_millis(2500), "{scheme}: error after {:?}", t.elapsed());
                break e;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "{scheme}: calls kept succeeding");
        };
        killer.join().unwrap();
        assert!(
            matches!(err, Error::ConnectionLost { .. } | Error::Timeout { .. }),
            "{scheme}: unexpected error {err}"
        );
        assert!(err.may_have_executed(), "{scheme}: {err}");
        drop(server);
    }
}

#[test]
fn gen_writes_rust_and_c_stubs_and_reports_errors_with_position() {
    let dir = std::env::temp_dir().join(format!("lowlat-gen-{}", std::process::id()));
    let x = concat!(env!("CARGO_MANIFEST_DIR"), "/../../idl/lab.x");
    let (ok, out, err) = lowlat(&["gen", x, "--lang", "rust", "--out", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("wrote"), "{out}");
    let text = std::fs::read_to_string(dir.join("lab.rs")).unwrap();
    assert!(text.contains("pub mod lab_vers") && text.contains("@generated"), "{}", &text[..200]);
    let (ok, out, err) = lowlat(&["gen", x, "--lang", "c", "--out", dir.to_str().unwrap()]);
    assert!(ok && out.contains("lab.h") && out.contains("lab.c"), "{out}{err}");
    let header = std::fs::read_to_string(dir.join("lab.h")).unwrap();
    assert!(header.contains("int lab_vers_minus(const lowlat_client *client"), "{header}");
    assert!(std::fs::read_to_string(dir.join("lab.c")).unwrap().contains("#include \"lab.h\""));
    let bad = dir.join("bad.x");
    std::fs::write(&bad, "struct s { int a; \n").unwrap();
    let (ok, _, err) = lowlat(&["gen", bad.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert!(!ok && err.contains("bad.x:"), "{err}");
    let (ok, _, err) = lowlat(&["gen", x, "--lang", "cobol", "--out", dir.to_str().unwrap()]);
    assert!(!ok && err.contains("cobol"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn account_reports_positive_parts_and_honest_arithmetic() {
    let shm = format!("shm:///tmp/lowlat-account-test-{}.sock", std::process::id());
    for uri in ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", shm.as_str()] {
        let (ok, out, err) = lowlat(&["account", uri, "--calls", "3000", "--json"]);
        assert!(ok, "{uri}: {err}");
        let a: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let parts = a["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 6, "{out}");
        let sum: f64 = parts.iter().map(|p| p["ns"].as_f64().unwrap()).sum();
        for p in parts {
            assert!(p["ns"].as_f64().unwrap() > 0.0, "{uri}: part not positive: {p}");
        }
        let measured = a["measured_total_ns"].as_f64().unwrap();
        assert!((sum - measured).abs() < 1.0, "{uri}: parts {sum} do not add up to {measured}");
        let pct: f64 = parts.iter().map(|p| p["percent"].as_f64().unwrap()).sum();
        assert!((pct - 100.0).abs() < 0.01, "{uri}: percentages add up to {pct}");
        let predicted: f64 = a["predicted_parts"].as_array().unwrap().iter().map(|p| p["ns"].as_f64().unwrap()).sum();
        assert!((predicted - a["predicted_total_ns"].as_f64().unwrap()).abs() < 1.0);
        // The check is made round by round (each round's parts against its own whole), and
        // its result is the median of the rounds.
        let mut rounds: Vec<f64> =
            a["round_differences_percent"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap()).collect();
        assert_eq!(rounds.len(), 9, "{uri}: {out}");
        rounds.sort_by(f64::total_cmp);
        let diff = rounds[rounds.len() / 2];
        assert!((diff - a["difference_percent"].as_f64().unwrap()).abs() < 1e-6, "{uri}: {out}");
        assert_eq!(a["flagged"].as_bool().unwrap(), diff.abs() > 10.0, "{uri}: flag must follow the difference");
        // Where the path has a floor, the untraced call is set against it, measured in the same
        // run: four parts from the floor up, adding up to the untraced call.
        let gap = a["floor_gap"].as_array().map(Vec::as_slice).unwrap_or_default();
        if uri.starts_with("tcp") {
            assert!(gap.is_empty(), "tcp has no floor: {out}");
            continue;
        }
        // Unless the floor moved under every attempt (the host moved the CPUs): then it says so
        // and sets nothing against it.
        if let Some(why) = a["floor_unsteady"].as_str() {
            assert!(gap.is_empty() && why.contains("the floor moved"), "{uri}: {out}");
            continue;
        }
        assert_eq!(gap.len(), 4, "{uri}: {out}");
        assert!(gap[0]["ns"].as_f64().unwrap() > 0.0, "{uri}: the floor takes time: {out}");
        // The gap is made of the rounds whose floor held still: all of them, here, or it says how
        // many it left out.
        let call: f64 = gap.iter().map(|p| p["ns"].as_f64().unwrap()).sum();
        let untraced = measured - a["timestamp_overhead_ns"].as_f64().unwrap();
        if a["floor_rounds_left_out"].as_u64().unwrap() == 0 {
            assert!((call - untraced).abs() < 1.0, "{uri}: the parts {call} are not the untraced call {untraced}");
        }
        let pct: f64 = gap.iter().map(|p| p["percent"].as_f64().unwrap()).sum();
        assert!((pct - 100.0).abs() < 0.01, "{uri}: the floor's parts are not shares of the call: {pct}");
    }
}

#[test]
fn servers_stopped_by_sigterm_remove_their_socket_files() {
    let dir = tempfile::tempdir().unwrap();
    let rpc = dir.path().join("rpc.sock");
    let raw = dir.path().join("raw.sock");
    let server = serve(&format!("shm://{}", rpc.display()));
    let pingpong = procs::spawn(
        EXE.as_ref(),
        &["pingpong".into(), "--serve".into(), format!("shm://{}", raw.display())],
        Duration::from_secs(10),
    )
    .unwrap();
    assert!(rpc.exists() && raw.exists());
    // Dropping a ServerProcess sends SIGTERM first (SIGKILL only after 2 s).
    let t = Instant::now();
    drop(server);
    drop(pingpong);
    assert!(t.elapsed() < Duration::from_secs(2), "a server ignored SIGTERM");
    assert!(!rpc.exists(), "lowlat serve left {} behind", rpc.display());
    assert!(!raw.exists(), "lowlat pingpong --serve left {} behind", raw.display());
}

/// A client whose server is killed (SIGKILL) and started again on the same address goes on
/// with the same `Client`: calls made while the server is down fail with typed errors (never a
/// panic), and the first call after its return rebinds. `LOWLAT_RESTART_CYCLES` sets the cycles
/// per transport (3 by default; `scripts/soak.sh` runs 100).
#[test]
fn a_client_outlives_its_servers_kill_and_restart() {
    let cycles: usize = std::env::var("LOWLAT_RESTART_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let shm = format!("shm://{}", dir.path().join("s").display());
    for listen in ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", shm.as_str()] {
        let mut server = serve(listen);
        let uri = server.uris[0].clone();
        let cfg = ClientConfig {
            deadline: Duration::from_millis(500),
            bind_timeout: Duration::from_millis(500),
            ..ClientConfig::default()
        };
        let c = LabClient::connect(&uri, cfg).unwrap();
        let mut back_after = Vec::new();
        for cycle in 0..cycles {
            for _ in 0..10 {
                c.null().unwrap_or_else(|e| panic!("{uri}, cycle {cycle}: {e}"));
            }
            server.kill();
            let e = c.null().unwrap_err();
            assert!(
                matches!(e, Error::ConnectionLost { .. } | Error::ServerNotRunning { .. } | Error::Timeout { .. }),
                "{uri}, cycle {cycle}, server dead: {e}"
            );
            server = serve(&uri);
            let back = Instant::now();
            let mut errors = Vec::new();
            while let Err(e) = c.null() {
                errors.push(e.to_string());
                assert!(errors.len() < 3, "{uri}, cycle {cycle}: not served again: {errors:?}");
            }
            back_after.push(back.elapsed());
        }
        back_after.sort();
        eprintln!(
            "{uri}: {cycles} kill -9 and restart cycles; from the server's return to the first successful call: \
             median {:?}, max {:?}",
            back_after[back_after.len() / 2],
            back_after[back_after.len() - 1]
        );
    }
}

/// `lowlat relay` between a client and a server: calls go through it (and through its faults:
/// lowlat retransmits what it drops), and at exit it says what it did.
#[test]
fn relay_carries_calls_through_faults_and_reports_what_it_did() {
    let server = serve("udp://127.0.0.1:0");
    let relay = procs::spawn(
        EXE.as_ref(),
        &[
            "relay".into(),
            "udp://127.0.0.1:0".into(),
            server.uris[0].clone(),
            "--drop".into(),
            "10%".into(),
            "--dup".into(),
            "0.1".into(),
            "--reorder".into(),
            "5%".into(),
            "--delay".into(),
            "0-300us".into(),
            "--seed".into(),
            "7".into(),
            "--json".into(),
        ],
        Duration::from_secs(10),
    )
    .unwrap();
    let c = LabClient::connect(&relay.uris[0], ClientConfig::default()).unwrap();
    for i in 0..300 {
        assert_eq!(c.minus(i, 1).unwrap(), i - 1);
    }
    let lines = relay.stop(Duration::from_secs(5));
    let json = lines.iter().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no report: {lines:?}"));
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["seed"], 7);
    let up = &v["to_target"];
    let get = |d: &serde_json::Value, k: &str| d[k].as_u64().unwrap();
    assert!(get(up, "received") >= 300 && get(up, "dropped") > 0 && get(up, "duplicated") > 0, "{v}");
    assert_eq!(get(up, "sent"), get(up, "received") - get(up, "dropped") + get(up, "duplicated"), "{v}");
    let (ok, _, err) = lowlat(&["relay", "tcp://127.0.0.1:0", "udp://127.0.0.1:1"]);
    assert!(!ok && err.contains("datagrams"), "{err}");
    let (ok, _, err) = lowlat(&["relay", "udp://127.0.0.1:0", "udp://127.0.0.1:1", "--drop", "150%"]);
    assert!(!ok && err.contains("between 0 and 1"), "{err}");
}

/// Runs `lowlat ARGS` and parses its standard output as one JSON object.
fn json_of(args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = lowlat(args);
    assert!(ok, "lowlat {args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// After a known sequence (a binding whose every datagram to the server the relay sends twice,
/// twenty calls on it, a bind for a program the server lacks), `lowlat stat --json` reports
/// exactly those numbers, its own binding and call included; `--watch` prints rates.
#[test]
fn stat_reports_exactly_what_the_server_did() {
    let server = serve("udp://127.0.0.1:0");
    let uri = server.uris[0].clone();
    let target = uri.trim_start_matches("udp://").parse().unwrap();
    let every_datagram_twice = lowlat_relay::Faults { dup: "100%".parse().unwrap(), seed: 1, ..Default::default() };
    let relay = lowlat_relay::RelayThread::start("127.0.0.1:0".parse().unwrap(), target, every_datagram_twice).unwrap();
    // No retransmission and no separate acknowledgement within the test: every frame the server
    // counts is one this test caused.
    let engine = lowlat_proto::ClientEngineConfig {
        initial_rto: Duration::from_secs(2),
        min_rto: Duration::from_secs(1),
        ack_delay: Duration::from_secs(30),
        ..lowlat_proto::ClientEngineConfig::default()
    };
    let cfg = ClientConfig { slots: 1, engine, ..ClientConfig::default() };
    let c = LabClient::connect(&format!("udp://{}", relay.addr()), cfg.clone()).unwrap();
    for i in 0..20 {
        assert_eq!(c.minus(i, 1).unwrap(), i - 1);
    }
    let e = lowlat::Client::connect_with(&uri, 0x2000_0BAD, 1, cfg).unwrap_err();
    assert!(matches!(e, Error::UnknownProgram { .. }), "{e}");
    let v = json_of(&["stat", &uri, "--json"]);
    let want = [
        ("sessions_open", 2),
        ("binds_granted", 2),
        // The relayed bind's second copy, answered with the session the first one made.
        ("binds_repeated", 1),
        ("binds_refused", 1),
        ("refused_unknown_program", 1),
        // Two copies of the relayed first bind, and `stat`'s own.
        ("cookies_issued", 3),
        ("calls", 21),
        ("executed", 21),
        ("duplicates", 20),
        ("retransmits_received", 0),
        ("busy", 0),
        ("mac_failures", 0),
    ];
    for (k, n) in want {
        assert_eq!(v[k], n, "{k} in {v}");
    }
    assert_eq!(v["uri"], uri.as_str());
    let (ok, out, err) = lowlat(&["stat", &uri, "--watch", "--count", "2", "--json"]);
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{out}");
    // Each second, the watcher's own call: one a second, and the two bindings still open.
    assert!(lines.iter().all(|l| l["calls"].as_f64().unwrap() > 0.5 && l["sessions_open"] == 3.0), "{out}");
    drop(relay);
}

/// `serve --psk-file`: the right key works from `call`, `bench` and `stat`; a missing one is
/// refused at once, and a wrong one, whose refusal the client cannot verify, at the bind's
/// deadline as an unauthenticated refusal quoting it; `call --encrypt` is granted an encrypted session.
#[test]
fn a_pre_shared_key_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let other = dir.path().join("other");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(&other, "fedcba9876543210fedcba9876543210\n").unwrap();
    let (k, o) = (key.to_str().unwrap(), other.to_str().unwrap());
    let server = procs::spawn(
        EXE.as_ref(),
        &["serve".into(), "udp://127.0.0.1:0".into(), "tcp://127.0.0.1:0".into(), "--psk-file".into(), k.into()],
        Duration::from_secs(10),
    )
    .unwrap();
    for uri in &server.uris {
        let (ok, out, err) = lowlat(&["call", uri, "minus", "5", "7", "--psk-file", k]);
        assert!(ok && out.trim() == "-2", "{uri}: {err}");
        let v = json_of(&["bench", uri, "--calls", "500", "--json", "--psk-file", k]);
        assert_eq!(v["errors"], 0, "{v}");
        let begun = Instant::now();
        let (ok, _, err) = lowlat(&["call", uri, "null"]);
        assert!(!ok && err.contains("requires a pre-shared key"), "{uri}: {err}");
        assert!(begun.elapsed() < Duration::from_secs(3), "refused at once: {:?}", begun.elapsed());
        let (ok, _, err) = lowlat(&["call", uri, "null", "--psk-file", o]);
        assert!(!ok && err.contains("unauthenticated refusal") && err.contains("keys differ"), "{uri}: {err}");
        let v = json_of(&["stat", uri, "--json", "--psk-file", k]);
        assert_eq!(v["refused_key_required"].as_u64(), Some(1), "{v}");
        assert!(v["refused_bad_key"].as_u64() >= Some(1), "{v}");
        // Encrypted from the command line: granted (the server need not require it) and echoed.
        let (ok, out, err) = lowlat(&["call", uri, "echo", "sealed", "--psk-file", k, "--encrypt"]);
        assert!(ok && out.trim() == "sealed", "{uri}: {err}");
    }
    std::fs::write(dir.path().join("short"), "too short").unwrap();
    let (ok, _, err) =
        lowlat(&["call", &server.uris[0], "null", "--psk-file", dir.path().join("short").to_str().unwrap()]);
    assert!(!ok && err.contains("too short"), "{err}");
    // A raw ping-pong with the key: messages tagged both ways.
    let pp = procs::spawn(
        EXE.as_ref(),
        &["pingpong".into(), "--serve".into(), "udp://127.0.0.1:0".into(), "--psk-file".into(), k.into()],
        Duration::from_secs(10),
    )
    .unwrap();
    let v = json_of(&["pingpong", &pp.uris[0], "--calls", "500", "--json", "--psk-file", k]);
    assert_eq!(v["calls"], 500);
    let (ok, _, err) = lowlat(&["pingpong", "shm:///tmp/nowhere", "--psk-file", k]);
    assert!(!ok && err.contains("udp:// and tcp:// only"), "{err}");
}

/// `serve --onc-uid`: ONC RPC callers with other uids, or without AUTH_SYS, are refused with
/// AUTH_ERROR / AUTH_TOOWEAK; the listed uid is served.
#[test]
fn the_onc_credential_policy_from_the_command_line() {
    let server = procs::spawn(
        EXE.as_ref(),
        &["serve".into(), "onc+udp://127.0.0.1:0".into(), "--onc-uid".into(), "4242".into()],
        Duration::from_secs(10),
    )
    .unwrap();
    let uri = server.uris[0].clone();
    let as_uid = |uid: Option<u32>| {
        let auth = uid.map(|u| lowlat::AuthSys::new(1, b"test", u, u, &[]));
        let cfg = ClientConfig { onc_auth: auth, ..ClientConfig::default() };
        LabClient::connect(&uri, cfg).and_then(|c| c.null())
    };
    as_uid(Some(4242)).unwrap();
    for uid in [None, Some(0), Some(1000)] {
        let e = as_uid(uid).unwrap_err();
        assert!(matches!(e, Error::AuthError { reason: lowlat::AuthStat::TooWeak, .. }), "uid {uid:?}: {e}");
    }
}
