//! Async calls and async procedures: futures from `Client::call_async` awaited on a tokio
//! runtime over every kind of channel (udp, tcp, shm, ONC RPC), many at once on a few slots,
//! with deadlines and dropped futures; procedures whose futures await a tokio timer; a graceful
//! stop with such calls pending.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::{CallOptions, Client, ClientConfig, Error, ProcError, Program, Server, ServerConfig};

const PROG: u32 = 0x2000_a51c;
/// Echoes its argument at once (an ordinary procedure).
const ECHO: u32 = 1;
/// Async: waits the milliseconds its first four bytes say (little-endian) on a tokio timer, then
/// echoes the rest.
const LATER: u32 = 2;
/// Async: fails with its argument as the reason, after a timer.
const FAIL: u32 = 3;
/// Async: panics (ready at once).
const PANIC: u32 = 4;

/// The procedures; `started` counts LATER calls begun.
fn program(rt: tokio::runtime::Handle, started: Arc<AtomicUsize>, xdr: bool) -> Program {
    let rt2 = rt.clone();
    let p = Program::new(PROG, 1)
        .procedure(ECHO, "ECHO", |_, a, r| {
            r.extend_from_slice(a);
            Ok(())
        })
        .procedure_async(LATER, "LATER", move |_ctx, args| {
            started.fetch_add(1, Ordering::SeqCst);
            // The serving thread is not tokio's: the timer is made in the runtime's context
            // (polling it needs none).
            let sleep = {
                let _in = rt.enter();
                let ms = args.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
                tokio::time::sleep(Duration::from_millis(ms.into()))
            };
            async move {
                sleep.await;
                Ok(args.get(4..).unwrap_or_default().to_vec())
            }
        })
        .procedure_async(FAIL, "FAIL", move |_, args| {
            let sleep = {
                let _in = rt2.enter();
                tokio::time::sleep(Duration::from_millis(5))
            };
            async move {
                sleep.await;
                Err(ProcError::failed(String::from_utf8_lossy(&args).into_owned()))
            }
        })
        .procedure_async(PANIC, "PANIC", |_, _| async { panic!("on purpose") });
    if xdr {
        p.xdr()
    } else {
        p
    }
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server on udp, tcp, shm and onc+udp, its URIs, and the runtime its procedures' timers use.
struct Fixture {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    uris: Vec<String>,
    started: Arc<AtomicUsize>,
    _dir: Dir,
}

fn serve(tag: &str) -> Fixture {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let dir = std::env::temp_dir().join(format!("lowlat-async-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm = format!("shm://{}", dir.join("s").display());
    let started = Arc::new(AtomicUsize::new(0));
    let server = Server::builder()
        .program(program(rt.handle().clone(), started.clone(), false))
        .program(program(rt.handle().clone(), started.clone(), true))
        .config(ServerConfig { onc_register: false, ..ServerConfig::default() })
        .serve(&["udp://127.0.0.1:0", "tcp://127.0.0.1:0", shm.as_str(), "onc+udp://127.0.0.1:0"])
        .unwrap();
    let uris = server.local_uris();
    Fixture { rt, server: Some(server), uris, started, _dir: Dir(dir) }
}

fn later_args(ms: u32, payload: &[u8]) -> Vec<u8> {
    [&ms.to_le_bytes()[..], payload].concat()
}

async fn call(c: &Client, proc_no: u32, arg: Vec<u8>, options: CallOptions) -> Result<Vec<u8>, Error> {
    c.call_with_async(
        proc_no,
        &options,
        move |out| {
            out.extend_from_slice(&arg);
            Ok::<_, lowlat::DecodeError>(())
        },
        |r| Ok(r.to_vec()),
    )
    .await
}

fn call_blocking(c: &Client, proc_no: u32, arg: &[u8]) -> Result<Vec<u8>, Error> {
    let encode = |out: &mut lowlat::OutBuf<'_>| {
        out.extend_from_slice(arg);
        Ok::<_, lowlat::DecodeError>(())
    };
    c.call(proc_no, encode, |r| Ok(r.to_vec()))
}

fn connect(uri: &str, slots: u16) -> Arc<Client> {
    Arc::new(Client::connect_with(uri, PROG, 1, ClientConfig { slots, ..ClientConfig::default() }).unwrap())
}

/// 64 futures at once on a client with 4 slots, half answered at once and half by an async
/// procedure after a timer, on every channel: every one gets its own answer.
#[test]
fn many_async_calls_at_once_on_few_slots_over_every_channel() {
    let f = serve("many");
    for uri in &f.uris {
        let c = connect(uri, 4);
        let answers = f.rt.block_on(async {
            let tasks: Vec<_> = (0..64u32)
                .map(|i| {
                    let c = c.clone();
                    tokio::spawn(async move {
                        let payload = vec![i as u8; 4 + (i as usize % 7) * 4];
                        let (proc_no, arg) =
                            if i % 2 == 0 { (ECHO, payload.clone()) } else { (LATER, later_args(i % 5, &payload)) };
                        (payload, call(&c, proc_no, arg, CallOptions::new()).await)
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for t in tasks {
                answers.push(tokio::time::timeout(Duration::from_secs(20), t).await.expect("a call hung").unwrap());
            }
            answers
        });
        for (i, (want, got)) in answers.into_iter().enumerate() {
            assert_eq!(got.unwrap_or_else(|e| panic!("{uri}: call {i}: {e}")), want, "{uri}: call {i}");
        }
        // The blocking path still works beside them, on the same slots.
        assert_eq!(call_blocking(&c, ECHO, b"sync").unwrap(), b"sync");
    }
}

/// Blocking code with many calls in flight and no executor: made one after another (each sent
/// as it is made) and collected with `lowlat::wait_all`, 8 calls of 100 ms each overlap on the
/// server (they take well under 8 x 100 ms), each with its own answer; `InFlight` keeps a
/// window of them going and reports each as it completes.
#[test]
fn blocking_code_keeps_many_calls_in_flight() {
    let f = serve("in-flight");
    for uri in &f.uris {
        let c = connect(uri, 8);
        let began = Instant::now();
        let calls = (0..8u8).map(|i| {
            let arg = later_args(100, &[i; 4]);
            c.call_async(
                LATER,
                move |out| {
                    out.extend_from_slice(&arg);
                    Ok::<_, lowlat::DecodeError>(())
                },
                |r| Ok(r.to_vec()),
            )
        });
        let answers = lowlat::wait_all(calls);
        let took = began.elapsed();
        for (i, a) in answers.into_iter().enumerate() {
            assert_eq!(a.unwrap_or_else(|e| panic!("{uri}: call {i}: {e}")), vec![i as u8; 4], "{uri}");
        }
        assert!(took < Duration::from_millis(600), "{uri}: 8 calls of 100 ms took {took:?}: they did not overlap");

        // A window of 4 kept full over 40 calls, added in turn by `push` and `push_with`: every
        // answer reported once, at its place.
        let mut set = lowlat::InFlight::new(4);
        let mut at_place = [0u32; 4];
        let (mut made, mut answered) = (0u32, Vec::new());
        let echo = |n: u32| {
            c.call_async(
                ECHO,
                move |out| {
                    out.extend_from_slice(&n.to_le_bytes());
                    Ok::<_, lowlat::DecodeError>(())
                },
                |r| Ok(r.to_vec()),
            )
        };
        while answered.len() < 40 {
            while made < 40 && !set.is_full() {
                let n = made;
                let place = if n % 2 == 0 {
                    set.push(echo(n)).ok().expect("a free place")
                } else {
                    set.push_with(|| echo(n)).expect("a free place")
                };
                at_place[place] = n;
                made += 1;
            }
            // A full set makes no call.
            if set.is_full() {
                assert!(set.push_with(|| panic!("{uri}: a call made for a full set")).is_none());
            }
            let done = set.wait(Some(Duration::from_secs(10)), |place, r| {
                let r = r.unwrap_or_else(|e| panic!("{uri}: {e}"));
                assert_eq!(r, at_place[place].to_le_bytes(), "{uri}: the answer at place {place}");
                answered.push(at_place[place]);
            });
            assert!(done > 0, "{uri}: no call completed within 10 s");
        }
        answered.sort_unstable();
        assert_eq!(answered, (0..40).collect::<Vec<_>>(), "{uri}");
        assert!(set.is_empty());
    }
}

/// A call whose result comes after its deadline fails with `Timeout` at the deadline, without
/// holding the executor; the slot then serves the next call, whose answer is its own.
#[test]
fn an_async_call_fails_at_its_deadline_and_its_slot_serves_the_next() {
    let f = serve("deadline");
    for uri in &f.uris {
        let c = connect(uri, 1);
        f.rt.block_on(async {
            let t = Instant::now();
            let e = call(&c, LATER, later_args(1500, b"late"), CallOptions::new().deadline(Duration::from_millis(60)))
                .await
                .unwrap_err();
            assert!(matches!(e, Error::Timeout { .. }), "{uri}: {e}");
            assert!(t.elapsed() < Duration::from_millis(1200), "{uri}: the deadline passed unnoticed");
            let got = call(&c, ECHO, b"next".to_vec(), CallOptions::new()).await;
            assert_eq!(got.unwrap(), b"next", "{uri}");
        });
    }
}

/// A future dropped with its call in flight gives its slot back: on a client with one slot,
/// the next call goes through at once and gets its own answer, not the dropped call's.
#[test]
fn a_dropped_async_call_leaves_its_slot_reusable() {
    let f = serve("dropped");
    for uri in &f.uris {
        let c = connect(uri, 1);
        f.rt.block_on(async {
            let slow = call(&c, LATER, later_args(300, b"dropped"), CallOptions::new());
            assert!(tokio::time::timeout(Duration::from_millis(30), slow).await.is_err(), "{uri}: finished early");
            let t = Instant::now();
            let got = call(&c, ECHO, b"mine".to_vec(), CallOptions::new()).await;
            assert_eq!(got.unwrap(), b"mine", "{uri}");
            // Twice: the dropped call's late reply must not be taken for a later call's.
            tokio::time::sleep(Duration::from_millis(350)).await;
            let got = call(&c, ECHO, b"again".to_vec(), CallOptions::new()).await;
            assert_eq!(got.unwrap(), b"again", "{uri}");
            assert!(t.elapsed() < Duration::from_secs(5), "{uri}");
        });
    }
}

/// An async procedure's failure reaches the caller with its reason (lowlat's protocol), and a
/// panic in its future is answered as a server error, not a dead serving thread.
#[test]
fn async_procedures_fail_and_panic_as_blocking_ones_do() {
    let f = serve("fail");
    let uri = &f.uris[0];
    let c = connect(uri, 2);
    f.rt.block_on(async {
        let e = call(&c, FAIL, b"no such item".to_vec(), CallOptions::new()).await.unwrap_err();
        assert!(matches!(&e, Error::ServerError { message: Some(m), .. } if m == "no such item"), "{e}");
        let e = call(&c, PANIC, Vec::new(), CallOptions::new()).await.unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
        assert_eq!(call(&c, ECHO, b"alive".to_vec(), CallOptions::new()).await.unwrap(), b"alive");
    });
    // The blocking client reaches async procedures too.
    assert_eq!(call_blocking(&c, LATER, &later_args(5, b"blk")).unwrap(), b"blk");
}

/// A graceful stop waits for async procedures' pending calls as for any call in progress: they
/// complete, their callers get their results, and the stop counts them.
#[test]
fn a_graceful_stop_waits_for_pending_async_procedures() {
    let mut f = serve("stop");
    let uri = f.uris[0].clone();
    let c = connect(&uri, 4);
    let callers: Vec<_> = (0..3u8)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || call_blocking(&c, LATER, &later_args(200, &[i; 4])))
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(5);
    while f.started.load(Ordering::SeqCst) < 3 {
        assert!(Instant::now() < until, "the calls never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let drained = f.server.take().unwrap().shutdown();
    assert!(drained.completed >= 3, "{drained:?}");
    assert_eq!(drained.abandoned, 0, "{drained:?}");
    for (i, t) in callers.into_iter().enumerate() {
        assert_eq!(t.join().unwrap().unwrap(), vec![i as u8; 4]);
    }
}

/// A call's future is small (an application may hold thousands): the rare error found as the
/// call is sent is boxed, not carried inline (552 bytes before, 392 after, for closures that
/// capture nothing: a call over several servers, inline, sets the size).
#[test]
fn a_call_future_is_small() {
    let f = serve("future-size");
    let c = connect(&f.uris[0], 8);
    let call = c.call_async(ECHO, |_| Ok::<_, lowlat::DecodeError>(()), |r| Ok(r.len()));
    let size = std::mem::size_of_val(&call);
    eprintln!("call future: {size} bytes");
    assert!(size <= 400, "a call future of {size} bytes");
    assert_eq!(lowlat::wait_all([call]).pop().unwrap().unwrap(), 0);
}
