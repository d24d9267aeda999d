//! The runtime over `shm://`, what only shared memory does: callers write their arguments
//! straight into the call ring, and procedures their results straight into the caller's result
//! ring. (What every transport does is in the conformance suite, `tests/suite/mod.rs`.)

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lowlat::{Client, DecodeError, Error, Program, Server};

mod common;
use common::{bytes, PROG};

/// Echoes its argument, then one byte: 1 if the result was still being written straight into the
/// result ring. Refuses (after writing) an argument starting with 0xFF.
const WHERE: u32 = 10;
/// The shm transport's default ring size.
const RING: usize = 64 << 10;

fn program() -> Program {
    common::lab_program().procedure(WHERE, "WHERE", |_, a, r| {
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
        assert!(matches!(&refused, Err(Error::GarbageArgs { call, .. }) if call.proc_no == WHERE), "{refused:?}");
    }
    server.shutdown();
}

/// Arguments are encoded straight into the call ring's free space: those that fit stay there
/// (the encoder finds its bytes in place); those that outgrow it, however far the encoder got,
/// move to the slot's buffer and go the general way (streamed when larger than the ring),
/// whole. An encoder that fails after writing into the ring sends nothing, and the next call
/// goes as ever.
#[test]
fn arguments_are_written_straight_into_the_call_ring() {
    let (_dir, server, uri) = serve("args-in-place");
    let client = Client::connect(&uri, PROG, 1).unwrap();
    // The arguments written 1000 bytes at a time; whether they were still in the ring at the end.
    let call = |arg: &[u8]| {
        let mut in_ring = false;
        let encode = |b: &mut lowlat::OutBuf<'_>| {
            for chunk in arg.chunks(1000) {
                b.extend_from_slice(chunk);
            }
            in_ring = b.placed().is_some();
            Ok(())
        };
        let r = client.call::<_, DecodeError>(WHERE, encode, |r| Ok(r.to_vec())).unwrap();
        (r, in_ring)
    };
    // A record holds the ring less its 8-byte header; a call, 32 bytes of header and its
    // arguments.
    let whole_record = RING - 8 - 32;
    for round in 0..3 {
        for n in [0, 1, 1440, RING / 4, whole_record, whole_record + 1, RING * 2] {
            let arg: Vec<u8> = (0..n).map(|i| (i % 251) as u8 ^ round).collect();
            let (r, in_ring) = call(&arg);
            assert!(r.len() == n + 1 && r[..n] == arg[..], "round {round}: {n} bytes came back changed");
            // At least half the ring is lent (the consumer index is re-read below that).
            if n <= RING / 2 - 64 {
                assert!(in_ring, "round {round}: {n} bytes of arguments were not written in the ring");
            }
            if n > whole_record {
                assert!(!in_ring, "round {round}: {n} bytes cannot go in one record");
            }
        }
        let failing = |b: &mut lowlat::OutBuf<'_>| {
            b.extend_from_slice(&[0x55; 100]);
            Err(DecodeError::new("arguments refused by their encoder", 100))
        };
        let e = client.call::<(), DecodeError>(WHERE, failing, |_| Ok(())).unwrap_err();
        assert!(matches!(&e, Error::Encode { call, .. } if call.proc_no == WHERE), "{e:?}");
        assert_eq!(bytes(WHERE, &client, b"next").unwrap(), b"next\x01", "round {round}: the call after");
    }
    server.shutdown();
}

/// A server that dies between accepting a connection and handing over the binding (it was killed
/// while the client connected) is a server that is not running: the error says so, and that the
/// call was never sent.
#[test]
fn server_dying_during_the_handshake_is_not_running() {
    use std::os::unix::net::UnixListener;
    let dir = Dir(std::env::temp_dir().join(format!("lowlat-rt-shm-handshake-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("s");
    let listener = UnixListener::bind(&path).unwrap();
    let uri = format!("shm://{}", path.display());
    let dying = std::thread::spawn(move || drop(listener.accept().unwrap()));
    let cfg = lowlat::ClientConfig { bind_timeout: std::time::Duration::from_secs(5), ..Default::default() };
    let e = Client::connect_with(&uri, PROG, 1, cfg).and_then(|c| bytes(0, &c, &[])).unwrap_err();
    assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
    assert!(!e.may_have_executed(), "{e}");
    dying.join().unwrap();
}

/// `n` MAXRESULT calls in flight together from this thread, of results a little larger than the
/// result ring (streamed through it while the client reads), made as the generated `*_async`
/// methods make them; their outcomes (the lengths received) and sizes.
fn large_results_in_flight(client: &Client, n: u32, round: u32) -> (Vec<Result<usize, Error>>, Vec<usize>) {
    let sizes: Vec<u32> = (0..n).map(|k| RING as u32 + 1000 * k + round).collect();
    let calls = sizes.iter().map(|&size| {
        let encode = move |b: &mut lowlat::OutBuf<'_>| {
            b.extend_from_slice(&size.to_ne_bytes());
            Ok::<_, DecodeError>(())
        };
        client.call_async(common::MAXRESULT, encode, |r: &[u8]| Ok(r.len()))
    });
    (lowlat::wait_all(calls.collect::<Vec<_>>()), sizes.iter().map(|&n| n as usize).collect())
}

/// A client of `uri` for each spin policy a call may wait with (busy-polling or not), its
/// deadline `deadline`.
fn clients_with_each_spin(uri: &str, deadline: Duration) -> impl Iterator<Item = (lowlat::SpinPolicy, Client)> + '_ {
    [lowlat::SpinPolicy::Adaptive, lowlat::SpinPolicy::Forever].into_iter().map(move |spin| {
        let cfg = lowlat::ClientConfig { deadline, spin, ..Default::default() };
        (spin, Client::connect_with(uri, PROG, 1, cfg).unwrap())
    })
}

/// Results larger than the result ring stream to calls in flight together, each whole.
#[test]
fn results_larger_than_the_ring_stream_to_calls_in_flight_together() {
    let (_dir, server, uri) = serve("streamed-in-flight");
    let cfg = lowlat::ClientConfig { deadline: Duration::from_secs(5), ..Default::default() };
    let client = Client::connect_with(&uri, PROG, 1, cfg).unwrap();
    // Four small calls in flight first open four slots' channels: a channel opened while a
    // result streams to another slot is the next test's case.
    let nulls = (0..4).map(|_| client.call_async(common::NULL, |_| Ok::<_, DecodeError>(()), |_| Ok(())));
    assert!(lowlat::wait_all(nulls.collect::<Vec<_>>()).iter().all(Result::is_ok));
    for round in 0..20 {
        let (outcomes, sizes) = large_results_in_flight(&client, 4, round);
        for (k, r) in outcomes.into_iter().enumerate() {
            let r = r.unwrap_or_else(|e| panic!("round {round}, call {k}: {e}"));
            assert_eq!(r, sizes[k], "round {round}, call {k}");
        }
    }
    server.shutdown();
}

/// A client that opens a slot's channel while a result larger than the ring streams to another
/// of its slots waits for the server's handshake, and does not read that result meanwhile; the
/// serving thread, waiting for room in the result ring, answers the handshake as it waits (it
/// once could not: after its stall limit it dropped the connection, and the call on it waited
/// for its deadline). Every call completes, whole, under either spin policy.
#[test]
fn a_slot_opened_while_a_result_streams_to_another_does_not_stall_it() {
    let (_dir, server, uri) = serve("opened-while-streaming");
    for (spin, client) in clients_with_each_spin(&uri, Duration::from_secs(5)) {
        // A stall would have cost a call its connection (the next test's case).
        let (outcomes, sizes) = large_results_in_flight(&client, 4, 0);
        for (k, r) in outcomes.into_iter().enumerate() {
            let n = r.unwrap_or_else(|e| panic!("{spin:?}: call {k}: {e}"));
            assert_eq!(n, sizes[k], "{spin:?}: call {k}");
        }
    }
    server.shutdown();
}

/// A call whose result the client leaves unread past the server's stall limit (100 ms) loses
/// its connection: the server drops it. Polled then, the call fails at once, saying so, under
/// either spin policy (it once polled on to its deadline, never looking at its peer).
#[test]
fn a_call_whose_connection_the_server_dropped_fails_at_once() {
    let (_dir, server, uri) = serve("dropped");
    for (spin, client) in clients_with_each_spin(&uri, Duration::from_secs(5)) {
        let size = 4 * RING as u32;
        let encode = move |b: &mut lowlat::OutBuf<'_>| {
            b.extend_from_slice(&size.to_ne_bytes());
            Ok::<_, DecodeError>(())
        };
        let call = client.call_async(common::MAXRESULT, encode, |r: &[u8]| Ok(r.len()));
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        match lowlat::wait(call) {
            Err(Error::ConnectionLost { .. }) => {}
            other => panic!("{spin:?}: {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{spin:?}: failed after {:?}", started.elapsed());
    }
    server.shutdown();
}
