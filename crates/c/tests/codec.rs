//! The generated C encoders and decoders of idl/examples/everything.x against lowlat's Rust
//! codecs, byte for byte in all three encodings (XDR, native little- and big-endian), and under
//! AddressSanitizer and UndefinedBehaviorSanitizer against every truncation, random corruption
//! and hand-made hostile input.

extern crate runtime as lowlat;

#[path = "../../dynamic/tests/support/mod.rs"]
mod interop;
#[path = "../../idl/tests/support/strategies.rs"]
mod strategies;
mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use interop::everything;
use interop::everything::Everything;
use lowlat_codec::{from_native, from_xdr, to_native, to_xdr, ByteOrder};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

const SANITIZE: &[&str] = &["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];

fn build(dir: &std::path::Path) -> std::path::PathBuf {
    support::generate_everything(dir);
    support::gcc(dir, &["codec.c", "everything.c"], "codec", SANITIZE)
}

fn encode(v: &Everything, encoding: &str) -> Vec<u8> {
    let mut b = Vec::new();
    match encoding {
        "xdr" => to_xdr(v, &mut b).unwrap(),
        "le" => to_native(v, &mut b, ByteOrder::Little).unwrap(),
        _ => to_native(v, &mut b, ByteOrder::Big).unwrap(),
    }
    b
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn c_encodings_of_values_built_in_c_are_the_rust_encodings() {
    if support::skip("c_encodings_of_values_built_in_c_are_the_rust_encodings", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let (code, out, err) = support::run_bounded(Command::new(&prog).arg("encode"), Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let values = [("a", interop::value_a()), ("b0", interop::value_b(0)), ("b1", interop::value_b(1))];
    let mut lines = out.lines();
    for (name, v) in &values {
        for encoding in ["xdr", "le", "be"] {
            let line = lines.next().unwrap_or_else(|| panic!("no line for {name} {encoding}"));
            assert_eq!(line, format!("{name} {encoding} {}", hex(&encode(v, encoding))), "value {name} in {encoding}");
        }
    }
    assert_eq!(lines.next(), None);
}

#[test]
fn c_decoders_read_what_rust_encodes_and_encode_it_back_byte_for_byte() {
    if support::skip("c_decoders_read_what_rust_encodes_and_encode_it_back_byte_for_byte", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let mut runner = TestRunner::deterministic();
    let strategy = strategies::everything();
    let values: Vec<Everything> = (0..200).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect();
    for encoding in ["xdr", "le", "be"] {
        let mut input = Vec::new();
        for v in &values {
            let b = encode(v, encoding);
            input.extend_from_slice(&(b.len() as u32).to_be_bytes());
            input.extend_from_slice(&b);
        }
        let mut child = Command::new(&prog)
            .args(["reencode", encoding])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        // Bounded: the child reads a finite input and ends; a hang shows as the test's timeout.
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(out.status.success(), "codec reencode {encoding}: {}", String::from_utf8_lossy(&out.stderr));
        let mut rest = &out.stdout[..];
        for (i, v) in values.iter().enumerate() {
            let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let back = &rest[4..4 + n];
            assert_eq!(back, encode(v, encoding), "value {i} in {encoding} came back different: {v:?}");
            let decoded: Everything = match encoding {
                "xdr" => from_xdr(back).unwrap(),
                "le" => from_native(back, ByteOrder::Little).unwrap(),
                _ => from_native(back, ByteOrder::Big).unwrap(),
            };
            assert_eq!(&decoded, v);
            rest = &rest[4 + n..];
        }
        assert!(rest.is_empty());
    }
    let _ = everything::MAXNAME;
}

#[test]
fn c_decoders_refuse_truncated_corrupt_and_hostile_input_within_bounds() {
    if support::skip("c_decoders_refuse_truncated_corrupt_and_hostile_input_within_bounds", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let (code, out, err) = support::run_bounded(Command::new(&prog).arg("hostile"), Duration::from_secs(300));
    assert_eq!(code, Some(0), "codec hostile:\n{out}{err}");
    assert_eq!(out, "ok\n", "{err}");
}
