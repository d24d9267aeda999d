//! `lowlat pingpong` over eth:// and xdp:// between two network namespaces, and the XDP floor
//! (`--floor`: lowlat's XDP program answers in the driver). Needs root, as CI runs.

use std::process::{Command, Stdio};
use std::time::Duration;

use lowlat_lab::procs;
use lowlat_testkit::testhosts::{root_or_skip, TestHosts};

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

/// Runs the ping-pong client in namespace b and returns its JSON line.
fn client(h: &TestHosts, args: &[&str]) -> Result<serde_json::Value, String> {
    let out = h.b.command(EXE).arg("pingpong").args(args).stdin(Stdio::null()).output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap())
}

fn serve(h: &TestHosts, args: &[&str]) -> procs::ServerProcess {
    let mut cmd = h.a.command(EXE);
    cmd.arg("pingpong").arg("--serve").args(args);
    procs::spawn_command(cmd, Duration::from_secs(10)).unwrap()
}

#[test]
fn raw_ethernet_pingpong_and_the_xdp_floor() {
    if !root_or_skip() {
        return;
    }
    let h = TestHosts::new().unwrap();
    let mac = h.a.mac.to_string();
    for scheme in ["eth", "xdp"] {
        let server = serve(&h, &[&format!("{scheme}://{}", h.a.iface)]);
        assert_eq!(server.uris, [format!("{scheme}://{}/{mac}", h.a.iface)]);
        // Without the MAC: discovery finds the server.
        let uri = format!("{scheme}://{}", h.b.iface);
        let j = client(&h, &[&uri, "--calls", "2000", "--size", "1024", "--json"]).unwrap();
        assert_eq!(j["kind"], "raw");
        assert_eq!(j["transport"], scheme);
        assert_eq!(j["calls"], 2000);
        assert!(j["p50_ns"].as_u64().unwrap() > 0);
        drop(server);
    }
    // The floor: no process echoes, so a PING is answered only while the program is attached.
    let floor = serve(&h, &["--floor", &format!("xdp://{}", h.a.iface)]);
    let uri = format!("xdp://{}/{mac}", h.b.iface);
    let j = client(&h, &["--floor", &uri, "--calls", "2000", "--json"]).unwrap();
    assert_eq!(j["calls"], 2000);
    drop(floor);
    let e = client(&h, &["--floor", &uri, "--calls", "10", "--warmup", "0"]).unwrap_err();
    assert!(e.contains("no reply") || e.contains("No reply") || e.contains("answer"), "{e}");
    // A transport without a floor of its own says so.
    let out = Command::new(EXE).args(["pingpong", "--floor", "tcp://127.0.0.1:9"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no --floor for tcp://"), "{err}");
}
