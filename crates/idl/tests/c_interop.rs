//! Byte-exact XDR against rpcgen + libtirpc: a C program built here from rpcgen's output for
//! idl/examples/everything.x encodes values built by hand in C (lowlat must produce the same
//! bytes and decode them to equal values), and re-encodes whatever lowlat sends it (libtirpc
//! must decode lowlat's bytes and produce the very same bytes again).
//!
//! Needs rpcgen, a C compiler and libtirpc headers (scripts/deps/idl.sh installs them). Without
//! them the test says so and passes, except under CI, where it fails.

#[path = "support/strategies.rs"]
mod strategies;
#[path = "../../dynamic/tests/support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_codec::{from_xdr, to_xdr};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use support::everything;
use support::everything::*;
use support::run;

/// Builds the C program; returns its path.
fn build(dir: &Path) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("../../idl/examples/everything.x"), dir.join("everything.x")).unwrap();
    std::fs::copy(root.join("tests/c/interop.c"), dir.join("interop.c")).unwrap();
    run(Command::new("rpcgen").current_dir(dir).args(["-N", "-h", "everything.x", "-o", "everything.h"]));
    run(Command::new("rpcgen").current_dir(dir).args(["-N", "-c", "everything.x", "-o", "everything_xdr.c"]));
    run(Command::new("cc").current_dir(dir).args([
        "-O1",
        "-I/usr/include/tirpc",
        "interop.c",
        "everything_xdr.c",
        "-ltirpc",
        "-o",
        "interop",
    ]));
    dir.join("interop")
}

/// Runs the program with `input` on stdin; kills it (by its PID, through the child handle) if it
/// takes longer than ten seconds.
fn exec(prog: &Path, mode: &str, input: Vec<u8>) -> Vec<u8> {
    let mut child = Command::new(prog)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("interop {mode} took longer than 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    writer.join().unwrap();
    let out = reader.join().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "interop {mode}: {status}: {err}");
    out
}

fn frames(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while b.len() >= 4 {
        let n = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
        v.push(b[4..4 + n].to_vec());
        b = &b[4 + n..];
    }
    assert!(b.is_empty(), "trailing bytes in the C program's output");
    v
}

#[test]
fn xdr_is_byte_exact_with_rpcgen_and_libtirpc() {
    need_c_tools!("xdr_is_byte_exact_with_rpcgen_and_libtirpc");
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());

    // C encodes values built in C: same bytes as lowlat's encoding of the same values, and
    // lowlat decodes them back to those values.
    let c = frames(&exec(&prog, "fixed", Vec::new()));
    assert_eq!(c.len(), 4);
    // `fixed()` in interop.c builds the value everything_peer.c calls `value_a`.
    let want = support::value_a();
    let mut ours = Vec::new();
    to_xdr(&want, &mut ours).unwrap();
    assert_eq!(ours, c[0], "everything: lowlat's XDR differs from libtirpc's");
    assert_eq!(from_xdr::<Everything>(&c[0]).unwrap(), want);
    use everything_v1::*;
    let mut b = Vec::new();
    encode_add_args_xdr(&mut b, 7, -3).unwrap();
    assert_eq!(b, c[1], "ADD arguments");
    assert_eq!(decode_add_args_xdr(&c[1]).unwrap(), (7, -3));
    b.clear();
    encode_concat_args_xdr(&mut b, b"ab", b"xyz").unwrap();
    assert_eq!(b, c[2], "CONCAT arguments");
    b.clear();
    encode_lookup_args_xdr(&mut b, "key", Color::Blue).unwrap();
    assert_eq!(b, c[3], "LOOKUP arguments");
    assert_eq!(decode_lookup_args_xdr(&c[3]).unwrap(), ("key", Color::Blue));

    // lowlat encodes random values; libtirpc decodes and re-encodes each to the same bytes.
    let mut runner = TestRunner::deterministic();
    let strategy = strategies::everything();
    let values: Vec<Everything> = (0..200).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect();
    let mut input = Vec::new();
    let mut sent = Vec::new();
    for v in &values {
        let mut x = Vec::new();
        to_xdr(v, &mut x).unwrap();
        input.extend_from_slice(&(x.len() as u32).to_be_bytes());
        input.extend_from_slice(&x);
        sent.push(x);
    }
    let back = frames(&exec(&prog, "reencode", input));
    assert_eq!(back.len(), values.len());
    for (i, (s, r)) in sent.iter().zip(&back).enumerate() {
        assert_eq!(s, r, "value {i}: libtirpc re-encoded different bytes: {:?}", values[i]);
        assert_eq!(&from_xdr::<Everything>(r).unwrap(), &values[i]);
    }
}
