//! The runtime over `shm://`: the lab's procedures (mirrored here: the runtime may not depend on
//! the lab) at edge sizes from many threads, long-running procedures on the worker pool, the
//! caller's deadline in every waiting mode, and a clear error when the server goes away.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Program, Server, ServerConfig};

mod common;
use common::{bytes, check_lab_procedures, ECHO, NULL, PROG};

const SLOW_ECHO: u32 = 5;
/// Answers after `DROWSY_FOR`, long past the deadline the test sets.
const DROWSY: u32 = 6;
const DROWSY_FOR: Duration = Duration::from_millis(400);
/// Echoes its argument, then one byte: 1 if the result was still being written straight into the
/// result ring. Refuses (after writing) an argument starting with 0xFF.
const WHERE: u32 = 7;
/// The shm transport's default ring size.
const RING: usize = 64 << 10;

fn program() -> Program {
    common::lab_program()
        .long_running(SLOW_ECHO, "SLOW_ECHO", |_, a, r| {
            std::thread::sleep(Duration::from_millis(2));
            r.extend_from_slice(a);
            Ok(())
        })
        .long_running(DROWSY, "DROWSY", |_, _, _| {
            std::thread::sleep(DROWSY_FOR);
            Ok(())
        })
        .procedure(WHERE, "WHERE", |_, a, r| {
            r.extend_from_slice(a);
            if a.first() == Some(&0xFF) {
                return Err(lowlat::ProcError::GarbageArgs);
            }
            let in_ring = r.placed().is_some();
            r.push(in_ring as u8);
            Ok(())
        })
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve(tag: &str) -> (Dir, Server, String) {
    let dir = std::env::temp_dir().join(format!("lowlat-rt-shm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let uri = format!("shm://{}", dir.join("s").display());
    let server = Server::builder().program(program()).serve(&[&uri]).unwrap();
    (Dir(dir), server, uri)
}

#[test]
fn lab_procedures_at_edge_sizes_from_many_threads() {
    let (_dir, server, uri) = serve("edges");
    assert_eq!(server.local_uris(), vec![uri.clone()]);
    let cfg = ClientConfig { slots: 4, ..ClientConfig::default() };
    let client = std::sync::Arc::new(Client::connect_with(&uri, PROG, 1, cfg).unwrap());
    let sizes = [0, 1, RING - 1, RING, RING + 1, 1 << 20];
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                check_lab_procedures(&c, t, &sizes);
                // Long-running procedures go to the worker pool and come back over shm.
                assert_eq!(bytes(SLOW_ECHO, &c, b"slow").unwrap(), b"slow");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    server.shutdown();
}

/// A result that fits the result ring's free space is written there by the procedure itself
/// (no copy); a larger one moves to a buffer and is streamed, whole; one written and then
/// refused sends the error, never the bytes.
#[test]
fn results_are_written_straight_into_the_result_ring() {
    let (_dir, server, uri) = serve("in-place");
    let client = Client::connect(&uri, PROG, 1).unwrap();
    for _ in 0..3 {
        for n in [0, 1, 1440, RING / 4] {
            let arg: Vec<u8> = (0..n).map(|i| (i % 13) as u8).collect();
            let r = bytes(WHERE, &client, &arg).unwrap();
            assert_eq!(r.len(), n + 1);
            assert!(r[..n] == arg[..], "{n} bytes");
            assert_eq!(r[n], 1, "a {n}-byte result was not written in the ring");
        }
        let big: Vec<u8> = (0..RING * 2).map(|i| (i % 13) as u8).collect();
        let r = bytes(WHERE, &client, &big).unwrap();
        assert!(r.len() == big.len() + 1 && r[..big.len()] == big[..] && r[big.len()] == 0);
        let refused = bytes(WHERE, &client, &[0xFF; 100]);
        assert!(matches!(refused, Err(Error::GarbageArgs { proc_no: WHERE })), "{refused:?}");
    }
    server.shutdown();
}

/// The client reads the clock only once a reply is slow to come (not within its first polls),
/// so the deadline must still hold in every waiting mode; the late reply is then ignored and
/// the binding goes on working.
#[test]
fn deadline_holds_in_every_waiting_mode() {
    use lowlat::SpinPolicy;
    let (_dir, server, uri) = serve("deadline");
    for spin in [SpinPolicy::Forever, SpinPolicy::Adaptive, SpinPolicy::Block, SpinPolicy::from_micros(20)] {
        let deadline = Duration::from_millis(100);
        let cfg = ClientConfig { deadline, spin, slots: 1, ..ClientConfig::default() };
        let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
        assert!(bytes(NULL, &client, &[]).unwrap().is_empty());
        let t = Instant::now();
        let e = bytes(DROWSY, &client, &[]).unwrap_err();
        let took = t.elapsed();
        assert!(matches!(e, Error::Timeout { .. }), "{spin}: {e}");
        assert!(took >= deadline && took < DROWSY_FOR - Duration::from_millis(50), "{spin}: timed out after {took:?}");
        // The same slot calls again while the late answer is still to come, then after it came.
        assert_eq!(bytes(ECHO, &client, b"after").unwrap(), b"after", "{spin}");
        std::thread::sleep(DROWSY_FOR);
        assert_eq!(bytes(ECHO, &client, b"later").unwrap(), b"later", "{spin}");
    }
    server.shutdown();
}

#[test]
fn server_shutdown_fails_calls_clearly() {
    let (_dir, server, uri) = serve("gone");
    let cfg = ClientConfig { deadline: Duration::from_secs(3), ..ClientConfig::default() };
    let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
    assert_eq!(bytes(ECHO, &client, b"hi").unwrap(), b"hi");
    server.shutdown();
    let t = Instant::now();
    let e = bytes(ECHO, &client, b"hi").unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "took {:?}: {e}", t.elapsed());
    assert!(matches!(e, Error::ConnectionLost { .. } | Error::ServerNotRunning { .. }), "{e}");
}

#[test]
fn missing_server_is_reported() {
    let e = Client::connect("shm:///nonexistent/lowlat/s", PROG, 1).unwrap_err();
    assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
    let _ = ServerConfig::default();
}
