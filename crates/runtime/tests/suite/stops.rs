//! Servers that stop, go away and come back: a graceful stop with calls in flight, a server not
//! (or no longer) there, a restart the same client rides over, and a session the server forgot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Error, Execution, ServerConfig};

use super::*;
use crate::common::{bytes, settle, Lab, PROG};

/// A graceful stop with calls in flight: every call in progress (on the worker pool here)
/// completes and is answered, calls made meanwhile get a typed error that says they did not
/// run, and the stop ends; one whose time runs out answers what is still running "may have
/// executed", at once, and nothing hangs.
pub fn graceful_stop_with_calls_in_flight(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let cfg =
        ClientConfig { deadline: Duration::from_secs(3), bind_timeout: Duration::from_secs(1), ..Default::default() };
    let client = {
        let (uri, cfg) = (uri.clone(), cfg.clone());
        Arc::new(env.on_client(10, move || Client::connect_with(&uri, PROG, 1, cfg).unwrap()))
    };
    let slow = |i: u8| {
        let c = client.clone();
        env.on_client(1, move || std::thread::spawn(move || bytes(SLOW_ECHO, &c, &[i; 10])))
    };
    let in_flight: Vec<_> = (0..3).map(slow).collect();
    std::thread::sleep(SLOW_FOR / 3);
    let begun = Instant::now();
    let drained = server.shutdown();
    let took = begun.elapsed();
    for (i, h) in in_flight.into_iter().enumerate() {
        assert_eq!(join(h, 10, "a call in flight").unwrap(), [i as u8; 10], "call {i} completed");
    }
    assert_eq!((drained.completed, drained.abandoned, drained.threads_left), (3, 0, 0), "{drained:?}");
    assert!(took < SLOW_FOR + Duration::from_secs(1), "the stop took {took:?}");
    // The server is gone: a new call fails with a typed error, within its deadline.
    let c = client.clone();
    let e = env.on_client(10, move || Lab::new(&c).echo(b"after").unwrap_err());
    assert!(is_server_gone(&e), "{e}");

    // Out of time: the call still running is answered at once, "may have executed".
    let (server, uri) = env.serve(ServerConfig::default());
    let c = Arc::new(env.on_client(10, move || Client::connect_with(&uri, PROG, 1, cfg).unwrap()));
    let drowsy = {
        let c = c.clone();
        env.on_client(1, move || std::thread::spawn(move || (Instant::now(), bytes(DROWSY, &c, &[]))))
    };
    std::thread::sleep(DROWSY_FOR / 4);
    let drained = server.shutdown_within(Duration::from_millis(20));
    let (sent, r) = join(drowsy, 10, "the call cut short");
    let e = r.unwrap_err();
    assert!(matches!(e, Error::ServerError { .. }), "{e}");
    assert!(e.may_have_executed(), "{e}");
    if !t.caps.xdr {
        assert!(e.to_string().ends_with("the server stopped before the call finished, so it may have executed"), "{e}");
    }
    assert!(sent.elapsed() < DROWSY_FOR, "answered when the stop's time ran out, not when the call ended");
    assert_eq!((drained.abandoned, drained.threads_left), (1, 1), "{drained:?}");
}

/// A server told to shed load answers every new call at once without running it — over
/// lowlat's protocol `Busy`, saying so, certainly not executed; over ONC RPC (no "busy")
/// SYSTEM_ERR — keeps its sessions, and runs calls again when told to.
pub fn shedding_load_runs_no_call_until_told_to_run_them(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let client =
        Arc::new(env.on_client(10, move || Client::connect_with(&uri, PROG, 1, ClientConfig::default()).unwrap()));
    let minus = |c: &Arc<Client>| {
        let c = c.clone();
        env.on_client(10, move || Lab::new(&c).minus(7, 5))
    };
    assert_eq!(minus(&client).unwrap(), 2);
    let before = settle(&server, |_| true);
    server.shed_load(true);
    // The serving thread takes the word at its next turn: a call it was already looking for
    // when told may still run.
    let raced = u64::from(minus(&client).is_ok());
    for _ in 0..3 {
        let e = minus(&client).unwrap_err();
        if t.caps.xdr {
            assert!(matches!(e, Error::ServerError { .. }), "{e}");
        } else {
            assert!(matches!(e, Error::Busy { .. }) && !e.may_have_executed(), "{e}");
            assert!(e.to_string().contains("the server is shedding load"), "{e}");
        }
    }
    server.shed_load(false);
    assert_eq!(minus(&client).unwrap(), 2);
    let after = settle(&server, |s| s.busy >= before.busy + 3);
    assert_eq!((after.busy - before.busy + raced, after.executed - before.executed), (4, 1 + raced), "{after:?}");
    if !t.caps.xdr {
        assert_eq!(client.stats().binds, 1, "the session outlived the shedding");
    }
    server.shutdown();
}

/// Where no server listens, binding (or, over ONC RPC over UDP, the first call) fails with
/// `ServerNotRunning` at once (on a silent transport, `BindTimeout` once its timeout passes), and
/// the call is known not to have executed.
pub fn server_not_running_is_said_at_once(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let uri = env.nobody_uri();
    env.on_client(10, move || {
        let bind_timeout = Duration::from_millis(500);
        let cfg = ClientConfig { bind_timeout, ..ClientConfig::default() };
        let begun = Instant::now();
        let e = Client::connect_with(&uri, PROG, 1, cfg).and_then(|c| bytes(0, &c, &[])).unwrap_err();
        let took = begun.elapsed();
        if t.caps.silent {
            assert!(matches!(e, Error::BindTimeout { .. }), "{e}");
            assert!(took >= bind_timeout && took < bind_timeout * 2, "{uri}: took {took:?}");
        } else {
            assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
            assert!(took < bind_timeout, "{uri}: took {took:?}");
        }
        assert!(!e.may_have_executed(), "{e}");
    });
}

/// Whether `e` is one of the errors a call may end with when its server goes away (or, over
/// lowlat's protocol, is going: a call that arrives while it stops is not run, and it says so).
pub(crate) fn is_server_gone(e: &Error) -> bool {
    matches!(
        e,
        Error::ConnectionLost { .. }
            | Error::ServerNotRunning { .. }
            | Error::Timeout { .. }
            | Error::SessionLost { .. }
            | Error::ServerRestarted { .. }
            | Error::BindTimeout { .. }
    ) || matches!(e, Error::Busy { message: Some(m), .. } if m == "the server is stopping")
        || matches!(e, Error::ServerError { message: None, call } if call.uri.starts_with("onc+"))
}

/// A server shut down while threads are calling: every call either completes correctly or fails
/// with a typed error within its deadline; nothing hangs or panics.
pub fn server_shut_down_during_calls(t: &'static Transport) {
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    // Threads that have had a call answered: the server goes once all of them have.
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = answered.clone();
    let callers = env.on_client(10, move || {
        let cfg = ClientConfig {
            deadline: Duration::from_secs(2),
            bind_timeout: Duration::from_millis(500),
            ..ClientConfig::default()
        };
        let client = Arc::new(Client::connect_with(&uri, PROG, 1, cfg).unwrap());
        (0..3u8)
            .map(|i| {
                let c = client.clone();
                let answered = seen.clone();
                std::thread::spawn(move || {
                    let lab = Lab::new(&c);
                    let (mut ok, mut failed) = (0u32, 0u32);
                    let end = Instant::now() + Duration::from_secs(8);
                    while failed < 3 && Instant::now() < end {
                        let msg = [i; 100];
                        match lab.echo(&msg) {
                            Ok(r) => {
                                assert_eq!(r, msg);
                                ok += 1;
                                if ok == 1 {
                                    answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                }
                            }
                            Err(e) => {
                                assert!(is_server_gone(&e), "{e}");
                                failed += 1;
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect::<Vec<_>>()
    });
    let end = Instant::now() + Duration::from_secs(10);
    while answered.load(std::sync::atomic::Ordering::SeqCst) < callers.len() {
        assert!(Instant::now() < end, "the calling threads were not all answered within 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Calls in flight now, more to come.
    std::thread::sleep(Duration::from_millis(5));
    server.shutdown();
    for h in callers {
        let (ok, failed) = join(h, 20, "a calling thread");
        assert!(ok > 0, "the thread called before the shutdown");
        assert_eq!(failed, 3, "every thread sees the server gone within its deadlines");
    }
}

/// A server restarted on the same address is used by the same client: the calls sent while it
/// was down fail with typed errors, and within a few calls after its return the client has
/// bound again and is served, on every call slot (not only the one that found the server back:
/// a slot idle meanwhile must not use a channel the old server had).
pub fn restarted_server_is_used_by_the_same_client(t: &'static Transport) {
    const SLOTS: usize = 4;
    let Some(env) = Env::new(t) else { return };
    let (server, uri) = env.serve(ServerConfig::default());
    let listen = if t.client.is_some() { env.listen_uri() } else { uri.clone() };
    let cfg = ClientConfig {
        deadline: Duration::from_secs(1),
        bind_timeout: Duration::from_millis(500),
        slots: SLOTS as u16,
        ..ClientConfig::default()
    };
    let client = Arc::new(env.on_client(10, move || Client::connect_with(&uri, PROG, 1, cfg).unwrap()));
    let call = || {
        let c = client.clone();
        env.on_client(10, move || Lab::new(&c).echo(b"are you there"))
    };
    // Calls that hold every slot at once (each spins 2 ms on the server), so each has a channel.
    let every_slot = || {
        let c = client.clone();
        env.on_client(10, move || {
            let barrier = Arc::new(std::sync::Barrier::new(SLOTS));
            let threads: Vec<_> = (0..SLOTS)
                .map(|_| {
                    let (c, barrier) = (c.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Lab::new(&c).spin(2000)
                    })
                })
                .collect();
            threads.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
        })
    };
    let mut server = Some(server);
    for round in 0..3 {
        assert_eq!(call().unwrap(), b"are you there", "round {round}");
        for r in every_slot() {
            r.unwrap_or_else(|e| panic!("round {round}, every slot: {e}"));
        }
        server.take().expect("serving").shutdown();
        let e = call().unwrap_err();
        assert!(is_server_gone(&e), "round {round}, server down: {e}");
        server = Some(env.serve_at(&listen, ServerConfig::default()).expect("serving again on the same address"));
        let begun = Instant::now();
        let mut errors = Vec::new();
        let answer = loop {
            match call() {
                Ok(r) => break r,
                Err(e) => {
                    assert!(is_server_gone(&e), "round {round}, server back: {e}");
                    errors.push(e.to_string());
                    assert!(errors.len() < 3, "round {round}: not served again: {errors:?}");
                }
            }
        };
        assert_eq!(answer, b"are you there");
        assert!(begun.elapsed() < Duration::from_secs(3), "round {round}: {:?}", begun.elapsed());
        for r in every_slot() {
            r.unwrap_or_else(|e| panic!("round {round}, every slot after the return: {e}"));
        }
        for _ in 0..20 {
            assert_eq!(call().unwrap(), b"are you there", "round {round}");
        }
    }
    server.expect("serving").shutdown();
}

/// A session the server has forgotten (idle too long) refuses the next call before it runs:
/// the client binds again and sends that call once more with its arguments whole (over shm://
/// they were written straight into the call ring, and are read back from there), and the
/// caller sees only the answer; a blocking call and an async one alike. ONC RPC has no
/// sessions.
pub fn a_forgotten_session_is_bound_again_and_the_call_sent_whole(t: &'static Transport) {
    if t.caps.xdr {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let idle = Duration::from_millis(100);
    let (server, uri) =
        env.serve(ServerConfig { session_idle: idle, unused_session_idle: idle, ..ServerConfig::default() });
    env.on_client(30, move || {
        let client = Client::connect(&uri, PROG, 1).unwrap();
        let lab = Lab::new(&client);
        let mut resent_whole = 0;
        for round in 0..3u8 {
            let arg: Vec<u8> = (0..1000u32).map(|i| i as u8 ^ round).collect();
            assert_eq!(lab.echo(&arg).unwrap(), arg, "round {round}");
            let binds = client.stats().binds;
            // Forgotten within one and a half times `idle`.
            std::thread::sleep(idle * 3);
            let again: Vec<u8> = arg.iter().map(|b| b.wrapping_add(1)).collect();
            assert_eq!(lab.echo(&again).unwrap(), again, "round {round}: the call sent again after binding again");
            assert_eq!(client.stats().binds, binds + 1, "round {round}: the forgotten session was bound again");
            // The same for an async call: sent again with its arguments whole (they once went
            // again empty). Its thread sleeps while the call waits, and may wake for the
            // retransmission timer before the refusal is read: the call then fails as it
            // should (it may have run), and this round proves nothing.
            std::thread::sleep(idle * 3);
            let third: Vec<u8> = arg.iter().map(|b| b.wrapping_add(2)).collect();
            match lab.echo_async(&third) {
                Ok(got) => {
                    assert_eq!(got, third, "round {round}: the async call sent again");
                    assert_eq!(client.stats().binds, binds + 2, "round {round}: bound again for the async call");
                    resent_whole += 1;
                }
                Err(Error::SessionLost { execution: Execution::Unknown, .. }) => {}
                Err(e) => panic!("round {round}: the async call: {e}"),
            }
        }
        assert!(resent_whole > 0, "no async call was sent again after its session was forgotten");
    });
    server.shutdown();
}
