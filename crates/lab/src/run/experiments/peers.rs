//! Peers: other RPC systems (built and run by the repository's peers/ scripts) and lowlat making
//! the same null call and 1440-byte echo on this machine. The peers' scripts start their own
//! servers here, so with `lab --remote` lowlat's rows stay here too, to be compared with them.

use std::path::{Path, PathBuf};

use lowlat::SpinPolicy;
use lowlat_report::{BenchLine, PeerRow, Results};

use crate::bench;
use crate::run::lab::Lab;

/// Progress steps: building the peers, then running them.
pub(crate) const STEPS: u64 = 2;

/// The repository's peers/ folder, found from the executable (target/release/lowlat) or
/// `LOWLAT_PEERS_DIR`.
fn peers_dir(exe: &Path) -> Option<PathBuf> {
    if let Ok(d) = std::env::var("LOWLAT_PEERS_DIR") {
        return Some(PathBuf::from(d));
    }
    exe.ancestors().map(|a| a.join("peers")).find(|p| p.join("build.sh").is_file())
}

pub(crate) fn run(lab: &mut Lab, results: &mut Results, out: &Path) {
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
            let r = lab.rpc_server_at(scheme, SpinPolicy::Adaptive, false).and_then(|(_srv, uri)| {
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
