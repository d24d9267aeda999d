//! The C stubs `lowlat gen --lang c` makes of idl/examples/everything.x, built with
//! `gcc -std=c11 -Wall -Wextra -Werror`: the generated C client against the Rust server (and an
//! rpcgen/libtirpc one), the generated C server under the generated Rust client, every procedure
//! and every field, over udp, tcp, shm and onc+udp; and valgrind memcheck over both.

extern crate runtime as lowlat;

#[path = "../../dynamic/tests/support/mod.rs"]
mod interop;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use interop::everything::{everything_v1, everything_v2, Color, Node};
use lowlat::ServerConfig;

const LIMIT: Duration = Duration::from_secs(120);

/// The generated stubs and `main` compiled in `dir`.
fn build(dir: &Path, main: &str, out: &str) -> PathBuf {
    support::generate_everything(dir);
    support::gcc(dir, &[main, "everything.c"], out, &[])
}

fn run_client(cmd: &mut Command, what: &str) {
    let (code, out, err) = support::run_bounded(cmd, LIMIT);
    assert_eq!(code, Some(0), "{what}:\n{out}{err}");
    assert_eq!(out, "ok\n", "{what}: {err}");
}

/// A lowlat server of everything.x (native and XDR) on udp, tcp, shm and onc+udp.
fn rust_server(dir: &Path) -> lowlat::Server {
    let shm = support::shm_uri(dir, "everything.sock");
    interop::serve_everything(
        &["udp://127.0.0.1:0", "tcp://127.0.0.1:0", &shm, "onc+udp://127.0.0.1:0"],
        ServerConfig::default(),
    )
}

#[test]
fn generated_c_client_against_the_rust_server_on_every_scheme() {
    if support::skip("generated_c_client_against_the_rust_server_on_every_scheme", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "everything_client.c", "everything_client");
    let server = rust_server(dir.path());
    let uris = server.local_uris();
    assert_eq!(uris.len(), 4);
    for uri in &uris {
        run_client(Command::new(&prog).arg(uri), &format!("everything_client {uri}"));
    }
    server.shutdown();
}

#[test]
fn generated_c_client_against_an_rpcgen_server_over_onc_udp() {
    if support::skip("generated_c_client_against_an_rpcgen_server_over_onc_udp", interop::missing_tools()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "everything_client.c", "everything_client");
    let peer_dir = dir.path().join("rpcgen");
    std::fs::create_dir(&peer_dir).unwrap();
    let peer = interop::build_peer(&peer_dir);
    let rpcgen = interop::CServer::start(&peer, "udp");
    let uri = format!("onc+udp://127.0.0.1:{}", rpcgen.port);
    run_client(Command::new(&prog).arg(&uri), &format!("everything_client {uri} (rpcgen)"));
}

/// Every procedure of both versions through the generated Rust client, every field compared.
fn call_everything(uri: &str) {
    use everything_v1::EverythingV1Client;
    use everything_v2::EverythingV2Client;
    let c = EverythingV1Client::connect(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    c.ping().unwrap();
    for v in [interop::value_a(), interop::value_b(0), interop::value_b(1)] {
        assert_eq!(c.roundtrip(&v).unwrap(), v, "{uri}: ROUNDTRIP");
    }
    assert_eq!(c.add(i32::MAX, 1).unwrap(), i32::MIN, "{uri}: ADD");
    assert_eq!(c.concat(b"ab", b"xyz").unwrap(), b"abxyz", "{uri}: CONCAT");
    assert_eq!(c.concat(b"", b"").unwrap(), b"", "{uri}: CONCAT of nothing");
    assert_eq!(c.greet("world").unwrap(), "hello, world", "{uri}: GREET");
    for hint in [Color::Red, Color::Green, Color::Blue, Color::Infra] {
        assert_eq!(c.lookup("some key", hint).unwrap(), interop::lookup("some key", hint), "{uri}: LOOKUP {hint:?}");
    }
    // The C procedure's failure and the C dispatcher's refusal of bad arguments reach the caller.
    let e = c.greet("fail").unwrap_err();
    assert!(matches!(e, lowlat::Error::ServerError { .. }), "{uri}: GREET(fail): {e}");
    let one_byte = |b: &mut lowlat::OutBuf<'_>| {
        b.push(1);
        Ok::<_, lowlat::DecodeError>(())
    };
    let garbage = c.client().call(everything_v1::ADD, one_byte, |_| Ok(()));
    assert!(matches!(garbage, Err(lowlat::Error::GarbageArgs { .. })), "{uri}: ADD(1 byte): {garbage:?}");
    let v2 = EverythingV2Client::connect(uri).unwrap();
    v2.ping().unwrap();
    let list =
        Node { value: 1, next: Some(Box::new(Node { value: 2, next: Some(Box::new(Node { value: 3, next: None })) })) };
    assert_eq!(v2.reverse(&list).unwrap(), interop::reverse(&list), "{uri}: REVERSE");
}

/// everything_server with `prefix` before it (valgrind, or nothing) on every scheme.
fn c_server(prefix: Option<Command>, dir: &Path, prog: &Path) -> support::CServer {
    let shm = support::shm_uri(dir, "c-server.sock");
    let uris = ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", shm.as_str(), "onc+udp://127.0.0.1:0"];
    let cmd = match prefix {
        Some(mut p) => {
            p.arg(prog).args(uris);
            p
        }
        None => {
            let mut c = Command::new(prog);
            c.args(uris);
            c
        }
    };
    support::CServer::start(cmd, LIMIT)
}

#[test]
fn generated_c_server_under_the_generated_rust_client_on_every_scheme() {
    if support::skip("generated_c_server_under_the_generated_rust_client_on_every_scheme", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "everything_server.c", "everything_server");
    let server = c_server(None, dir.path(), &prog);
    assert_eq!(server.uris.len(), 4, "{:?}", server.uris);
    assert!(server.uris.iter().all(|u| !u.ends_with(":0")), "real ports: {:?}", server.uris);
    for uri in server.uris.clone() {
        call_everything(&uri);
    }
    let (code, err) = server.stop(LIMIT);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn valgrind_finds_nothing_wrong_in_the_generated_c_client() {
    let test = "valgrind_finds_nothing_wrong_in_the_generated_c_client";
    if support::skip(test, support::missing_gcc()) {
        return;
    }
    if let Err(why) = support::valgrind() {
        support::skip(test, Some(why));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "everything_client.c", "everything_client");
    let server = rust_server(dir.path());
    let uris = server.local_uris();
    // udp and tcp (and shm: the rings and the futex tripwires), each a separate run.
    for uri in &uris[..3] {
        let mut v = support::valgrind().unwrap();
        run_client(v.arg(&prog).arg(uri), &format!("valgrind everything_client {uri}"));
    }
    server.shutdown();
}

#[test]
fn valgrind_finds_nothing_wrong_in_the_generated_c_server() {
    let test = "valgrind_finds_nothing_wrong_in_the_generated_c_server";
    if support::skip(test, support::missing_gcc()) {
        return;
    }
    let valgrind = match support::valgrind() {
        Ok(v) => v,
        Err(why) => {
            support::skip(test, Some(why));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path(), "everything_server.c", "everything_server");
    let server = c_server(Some(valgrind), dir.path(), &prog);
    for uri in server.uris.clone() {
        call_everything(&uri);
    }
    let (code, err) = server.stop(LIMIT);
    assert_eq!(code, Some(0), "valgrind everything_server:\n{err}");
}
