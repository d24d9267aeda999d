//! Many calls in flight from one C thread (tests/c/batch.c: `lowlat_batch_submit` and
//! `lowlat_batch_poll`) against a Rust server over udp, tcp and shm: 64 calls submitted before
//! any is polled, each result its request's; failures reported per call; calls that overlap on
//! the server's worker pool; misuse answered with codes; and valgrind memcheck over udp and shm.

extern crate runtime as lowlat;

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lowlat::Server;

/// Program 0x20000099 (`support::api_program`), its long-running NAP on 4 workers.
fn serve(uri: &str) -> Server {
    let cfg = lowlat::ServerConfig { workers: 4, ..Default::default() };
    Server::builder().program(support::api_program()).config(cfg).serve(&[uri]).unwrap()
}

/// Runs batch.c (under `prefix`, e.g. valgrind) against a server at `uri`.
fn batch_against(dir: &Path, prog: &Path, uri: &str, prefix: Option<Command>) {
    let server = serve(uri);
    let uri = server.local_uris()[0].clone();
    let mut cmd = match prefix {
        // Under valgrind, time says nothing about overlap.
        Some(mut p) => {
            p.arg(prog).arg(&uri).arg("0");
            p
        }
        None => {
            let mut c = Command::new(prog);
            c.arg(&uri);
            c
        }
    };
    let (code, out, err) = support::run_bounded(cmd.current_dir(dir), Duration::from_secs(120));
    server.shutdown();
    assert_eq!(code, Some(0), "batch {uri}:\n{out}{err}");
    assert_eq!(out, "ok\n");
}

fn built(test: &str) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if support::skip(test, support::missing_gcc()) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = support::gcc(dir.path(), &["batch.c"], "batch", &[]);
    Some((dir, prog))
}

#[test]
fn batch_over_udp() {
    let Some((dir, prog)) = built("batch_over_udp") else { return };
    batch_against(dir.path(), &prog, "udp://127.0.0.1:0", None);
}

#[test]
fn batch_over_tcp() {
    let Some((dir, prog)) = built("batch_over_tcp") else { return };
    batch_against(dir.path(), &prog, "tcp://127.0.0.1:0", None);
}

#[test]
fn batch_over_shm() {
    let Some((dir, prog)) = built("batch_over_shm") else { return };
    let uri = support::shm_uri(dir.path(), "batch.sock");
    batch_against(dir.path(), &prog, &uri, None);
}

/// No leak and no bad access: results written into the callers' buffers, messages kept by the
/// batch, calls abandoned by freeing a busy batch.
#[test]
fn valgrind_finds_nothing_wrong_in_a_batch() {
    let test = "valgrind_finds_nothing_wrong_in_a_batch";
    let Some((dir, prog)) = built(test) else { return };
    if let Err(why) = support::valgrind() {
        support::skip(test, Some(why));
        return;
    }
    let shm = support::shm_uri(dir.path(), "valgrind.sock");
    for uri in ["udp://127.0.0.1:0", shm.as_str()] {
        batch_against(dir.path(), &prog, uri, Some(support::valgrind().unwrap()));
    }
}
