//! `lowlat serve` answers lowlat and ONC RPC callers of the lab interface at once, and
//! `lowlat call --idl` calls any procedure with JSON (issue 6).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use lowlat::ClientConfig;
use lowlat_lab::interface::LabClient;
use lowlat_lab::procs;

const EXE: &str = env!("CARGO_BIN_EXE_lowlat");

fn lowlat(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(EXE).args(args).stdin(Stdio::null()).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn lab_x() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/lab.x").display().to_string()
}

#[test]
fn serve_lowlat_and_onc_at_once() {
    let args: Vec<String> =
        ["serve", "udp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"].map(String::from).to_vec();
    let server = procs::spawn(EXE.as_ref(), &args, Duration::from_secs(10)).unwrap();
    assert_eq!(server.uris.len(), 3, "{:?}", server.uris);
    for uri in &server.uris {
        let (ok, out, err) = lowlat(&["call", uri, "minus", "50", "8"]);
        assert!(ok && out.trim() == "42", "{uri}: {out}{err}");
        // The lab client speaks XDR over ONC RPC and native bodies over lowlat.
        let c = LabClient::connect(uri, ClientConfig::default()).unwrap();
        let mut out = Vec::new();
        c.echo(&[7u8; 1440], &mut out).unwrap();
        assert_eq!(out, vec![7u8; 1440], "{uri}");
        c.maxresult(5, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4], "{uri}");
        // The dynamic client, from the interface definition.
        let (ok, out, err) = lowlat(&["call", "--idl", &lab_x(), uri, "MINUS", "[10, 3]"]);
        assert!(ok && out.trim() == "7", "{uri}: {out}{err}");
        let (ok, out, err) = lowlat(&["call", "--idl", &lab_x(), uri, "ECHO", "\"aGVsbG8=\""]);
        assert!(ok && out.trim() == "\"aGVsbG8=\"", "{uri}: {out}{err}");
        let (ok, _, err) = lowlat(&["call", "--idl", &lab_x(), uri, "MINUS", "[10, 1e20]"]);
        assert!(!ok && err.contains("argument.b"), "{uri}: {err}");
    }
}

#[test]
fn call_idl_lists_the_interface() {
    let (ok, out, err) = lowlat(&["call", "--idl", &lab_x(), "--list"]);
    assert!(ok, "{err}");
    assert!(out.contains("program LAB_PROG 0x20004c4c"), "{out}");
    assert!(out.contains("1 MINUS(int a, int b) -> int"), "{out}");
    assert!(out.contains("4 ECHO(opaque<> data) -> opaque<>"), "{out}");
    let (ok, _, err) = lowlat(&["call", "--idl", &lab_x(), "udp://127.0.0.1:9", "NOPE"]);
    assert!(!ok && err.contains("no procedure \"NOPE\""), "{err}");
}
