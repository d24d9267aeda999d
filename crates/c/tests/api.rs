//! liblowlat's interface from C (tests/c/api.c) against a Rust server over udp, tcp and shm:
//! results copied out, the documented codes and messages for bad input (NULL pointers, bad
//! UTF-8, an unknown procedure, a server that is not running, an oversized argument, a result
//! buffer too small, a missed deadline) and one client shared by several threads.

extern crate runtime as lowlat;

mod support;

use std::time::Duration;

use lowlat::Server;

/// Program 0x20000099 as api.c expects it.
fn serve(uri: &str) -> Server {
    serve_with(uri, lowlat::ServerConfig::default())
}

fn serve_with(uri: &str, cfg: lowlat::ServerConfig) -> Server {
    Server::builder().program(support::api_program()).config(cfg).serve(&[uri]).unwrap()
}

fn api_against(live: &str, dead: &str) {
    if support::skip("api", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = support::gcc(dir.path(), &["api.c"], "api", &[]);
    let server = serve(live);
    let uri = server.local_uris()[0].clone();
    let (code, out, err) =
        support::run_bounded(std::process::Command::new(&prog).args([&uri, dead]), Duration::from_secs(60));
    server.shutdown();
    assert_eq!(code, Some(0), "api {uri} {dead}:\n{out}{err}");
    assert_eq!(out, "ok\n");
}

#[test]
fn api_over_udp() {
    api_against("udp://127.0.0.1:0", &format!("udp://127.0.0.1:{}", support::dead_port()));
}

#[test]
fn api_over_tcp() {
    api_against("tcp://127.0.0.1:0", &format!("tcp://127.0.0.1:{}", support::dead_port()));
}

/// The same through a client over two servers, one of them not running: the C interface takes
/// the list as it takes one URI, and every call goes to the server that answers.
#[test]
fn api_over_a_list_whose_first_server_is_down() {
    let dead = format!("udp://127.0.0.1:{}", support::dead_port());
    api_against_list("udp://127.0.0.1:0", &dead);
}

fn api_against_list(live: &str, dead: &str) {
    if support::skip("api", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = support::gcc(dir.path(), &["api.c"], "api", &[]);
    let server = serve(live);
    let list = format!("{dead},{}", server.local_uris()[0]);
    let (code, out, err) =
        support::run_bounded(std::process::Command::new(&prog).args([&list, dead]), Duration::from_secs(60));
    server.shutdown();
    assert_eq!(code, Some(0), "api {list} {dead}:\n{out}{err}");
    assert_eq!(out, "ok\n");
}

#[test]
fn api_over_shm() {
    let dir = tempfile::tempdir().unwrap();
    api_against(&support::shm_uri(dir.path(), "live.sock"), &support::shm_uri(dir.path(), "nobody.sock"));
}

/// `lowlat_client_options`' key file and encryption (keyed.c), against a server that holds the
/// key and encrypts every session.
#[test]
fn keyed_and_encrypted_clients_from_c() {
    if support::skip("keyed", support::missing_gcc()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, b"thirty-two bytes of a shared key").unwrap();
    let prog = support::gcc(dir.path(), &["keyed.c"], "keyed", &[]);
    let cfg =
        lowlat::ServerConfig { psk: Some(lowlat::read_psk_file(&key).unwrap()), encrypt: true, ..Default::default() };
    let server = serve_with("udp://127.0.0.1:0", cfg);
    let uri = server.local_uris()[0].clone();
    let (code, out, err) =
        support::run_bounded(std::process::Command::new(&prog).arg(&uri).arg(&key), Duration::from_secs(60));
    server.shutdown();
    assert_eq!(code, Some(0), "keyed {uri}:\n{out}{err}");
    assert_eq!(out, "ok\n");
}
