//! The async server trait generated from idl/examples/everything.x (`Options::async_service`,
//! checked in as generated/everything_async.rs): an async implementation served over udp, shm
//! and onc+udp (`program_async`, `program_xdr_async`), called by the generated client from a
//! tokio runtime, many calls at once; a slow procedure holds up no fast one on its endpoint;
//! application and decode errors reach the caller as from the sync trait. The generated module,
//! its version module and `lowlat` are glob-imported side by side without a warning.

#![deny(warnings)]

#[allow(dead_code)]
mod everything {
    include!("generated/everything_async.rs");
}

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use everything::everything_v1::*;
use everything::Color::*;
use everything::*;
use lowlat::*;

type Done<T> = std::result::Result<T, ProcError>;

/// GREET of this name takes this long.
const SLOW: &str = "slow";
const SLOW_TAKES: Duration = Duration::from_millis(300);
/// LOOKUP of this key fails with an application message.
const MISSING: &str = "missing";

/// LOOKUP's rule (as tests/c/everything_peer.c's), and its one failure.
fn lookup_rule(key: &str, hint: Color) -> Done<everything::Result> {
    match hint {
        _ if key == MISSING => Err(ProcError::failed(format!("no key {key:?}"))),
        Red => Ok(everything::Result::Code(key.len() as i32)),
        Green | Blue => Ok(everything::Result::Label(hint, key.to_string())),
        other => Ok(everything::Result::Default(other)),
    }
}

/// The async implementation: ROUNDTRIP, CONCAT and LOOKUP wait on a tokio timer first (so
/// their futures are pending when first polled), GREET of [`SLOW`] for [`SLOW_TAKES`].
struct AsyncPeer {
    rt: tokio::runtime::Handle,
    /// Calls begun, as the serving threads saw them.
    started: AtomicUsize,
}

impl AsyncPeer {
    /// A timer made in the runtime's context: the serving thread that polls it is not tokio's.
    fn sleep(&self, d: Duration) -> tokio::time::Sleep {
        let _in = self.rt.enter();
        tokio::time::sleep(d)
    }
}

impl EverythingV1AsyncService for AsyncPeer {
    async fn ping(self: Arc<Self>, _: CallContext) -> Done<()> {
        Ok(())
    }
    async fn roundtrip(self: Arc<Self>, _: CallContext, arg: Everything) -> Done<Everything> {
        self.sleep(Duration::from_millis(1)).await;
        Ok(arg)
    }
    async fn add(self: Arc<Self>, _: CallContext, a: i32, b: i32) -> Done<i32> {
        Ok(a.wrapping_add(b))
    }
    async fn concat(self: Arc<Self>, _: CallContext, mut a: Vec<u8>, b: Vec<u8>) -> Done<Vec<u8>> {
        self.sleep(Duration::from_millis(1)).await;
        a.extend_from_slice(&b);
        Ok(a)
    }
    async fn greet(self: Arc<Self>, _: CallContext, who: String) -> Done<String> {
        self.started.fetch_add(1, Ordering::SeqCst);
        if who == SLOW {
            // Spawned onto the runtime, the other way to reach tokio from the serving thread (the
            // timer is made inside the task, where the runtime's context is).
            self.rt
                .spawn(async { tokio::time::sleep(SLOW_TAKES).await })
                .await
                .map_err(|e| ProcError::failed(e.to_string()))?;
        }
        Ok(format!("hello, {who}"))
    }
    async fn lookup(self: Arc<Self>, _: CallContext, key: String, hint: Color) -> Done<everything::Result> {
        self.sleep(Duration::from_millis(1)).await;
        lookup_rule(&key, hint)
    }
}

/// The same procedures through the blocking trait, to compare errors with.
struct SyncPeer;

impl EverythingV1Service for SyncPeer {
    fn ping(&self, _: &CallContext) -> Done<()> {
        Ok(())
    }
    fn roundtrip(&self, _: &CallContext, arg: Everything) -> Done<Everything> {
        Ok(arg)
    }
    fn add(&self, _: &CallContext, a: i32, b: i32) -> Done<i32> {
        Ok(a.wrapping_add(b))
    }
    fn concat(&self, _: &CallContext, a: &[u8], b: &[u8], out: &mut OutBuf<'_>) -> Done<()> {
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        Ok(())
    }
    fn greet(&self, _: &CallContext, who: &str) -> Done<String> {
        Ok(format!("hello, {who}"))
    }
    fn lookup(&self, _: &CallContext, key: &str, hint: Color) -> Done<everything::Result> {
        lookup_rule(key, hint)
    }
}

/// A server on udp, shm and onc+udp, and the directory of its socket (removed when dropped).
struct Served {
    server: Option<Server>,
    uris: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

fn serve(native: Program, xdr: Program) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let shm = format!("shm://{}", dir.path().join("s").display());
    let cfg = ServerConfig { onc_register: false, ..ServerConfig::default() };
    let server = Server::builder()
        .program(native)
        .program(xdr)
        .config(cfg)
        .serve(&["udp://127.0.0.1:0", shm.as_str(), "onc+udp://127.0.0.1:0"])
        .unwrap();
    let uris = server.local_uris();
    assert_eq!(uris.len(), 3);
    Served { server: Some(server), uris, _dir: dir }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap()
}

fn serve_async(rt: &tokio::runtime::Runtime) -> (Served, Arc<AsyncPeer>) {
    let peer = Arc::new(AsyncPeer { rt: rt.handle().clone(), started: AtomicUsize::new(0) });
    (serve(program_async(peer.clone()), program_xdr_async(peer.clone())), peer)
}

fn connect(uri: &str) -> Arc<EverythingV1Client> {
    let config = ClientConfig { slots: 8, ..ClientConfig::default() };
    Arc::new(EverythingV1Client::connect_with(uri, config).unwrap_or_else(|e| panic!("{uri}: {e}")))
}

/// A value of every construct; `i` varies the optional data, the union arms and the lengths.
fn value(i: u32) -> Everything {
    let n = i as usize % 4;
    let list = (0..n as i32).rev().fold(None, |next, value| Some(Box::new(Node { value, next })));
    Everything {
        prim: Primitives {
            i: -(i as i32),
            u: i,
            ushort_like: 2,
            h: -3,
            uh: 4,
            f: 0.5,
            d: -0.25,
            b: i.is_multiple_of(2),
            c: Blue,
        },
        h: [i as u8; 16],
        data: vec![i as u8; n * 5],
        fixed_bytes: *b"abc",
        var_bytes: vec![1; n],
        who: "ann".repeat(n),
        note: format!("note {i}"),
        four: [1, 2, 3, NEG],
        many: vec![i; n],
        corners: [Point { x: 1, y: 2 }, Point { x: 3, y: 4 }],
        inners: vec![Inner { corner: Point { x: 0, y: -1 }, kind: Shape::Triangle, tag: vec![7; n] }; n],
        maybe_point: (i % 2 == 1).then(|| Box::new(Point { x: 9, y: 10 })),
        list,
        r: match i % 3 {
            0 => everything::Result::Code(-42),
            1 => everything::Result::Label(Green, "green".into()),
            _ => everything::Result::Default(Infra),
        },
        bi: match i % 4 {
            0 => ByInt::P(Point { x: 11, y: -12 }),
            1 => ByInt::V2,
            2 => ByInt::Big(-(1 << 62)),
            _ => ByInt::Default(99, vec![1, 2, 3]),
        },
        mt: if i.is_multiple_of(2) { MaybeText::T("t".into()) } else { MaybeText::False },
        bu: if i.is_multiple_of(2) { ByUint::D(3.25) } else { ByUint::Cs(vec![100, 200]) },
        names: vec!["a".into(); n.min(3)],
        hypers: [-1, 1 << 40],
        flags: vec![true; n],
    }
}

/// Call `i` of a mix of every procedure, checked against what it must answer.
async fn call_and_check(c: &EverythingV1Client, i: u32) -> std::result::Result<(), String> {
    let wrong = |what: &str, e: Error| format!("call {i} ({what}): {e}");
    match i % 5 {
        0 => {
            let v = value(i);
            let got = c.roundtrip_async(&v).await.map_err(|e| wrong("ROUNDTRIP", e))?;
            (got == v).then_some(()).ok_or(format!("call {i}: ROUNDTRIP changed the value"))
        }
        1 => {
            let got = c.add_async(i as i32, -7).await.map_err(|e| wrong("ADD", e))?;
            (got == i as i32 - 7).then_some(()).ok_or(format!("call {i}: ADD gave {got}"))
        }
        2 => {
            let (a, b) = (vec![i as u8; i as usize % 9], b"xyz".to_vec());
            let got = c.concat_async(&a, &b).await.map_err(|e| wrong("CONCAT", e))?;
            (got == [a, b].concat()).then_some(()).ok_or(format!("call {i}: CONCAT gave {got:?}"))
        }
        3 => {
            let who = format!("n{i}");
            let got = c.greet_async(&who).await.map_err(|e| wrong("GREET", e))?;
            (got == format!("hello, {who}")).then_some(()).ok_or(format!("call {i}: GREET gave {got:?}"))
        }
        _ => {
            let hint = [Red, Green, Blue, Infra][(i / 5) as usize % 4];
            let got = c.lookup_async("key", hint).await.map_err(|e| wrong("LOOKUP", e))?;
            let want = lookup_rule("key", hint).unwrap();
            (got == want).then_some(()).ok_or(format!("call {i}: LOOKUP gave {got:?}, not {want:?}"))
        }
    }
}

/// 200 calls at once per scheme, from tokio tasks through one shared generated client, to an
/// async implementation whose futures are pending at first for three procedures in five:
/// every answer is the right one, on lowlat's protocol (udp, shm) and ONC RPC (onc+udp).
#[test]
fn an_async_implementation_answers_many_calls_at_once_over_udp_shm_and_onc_udp() {
    let rt = runtime();
    let (served, peer) = serve_async(&rt);
    for uri in &served.uris {
        let c = connect(uri);
        let failures = rt.block_on(async {
            let tasks: Vec<_> = (0..200u32)
                .map(|i| {
                    let c = c.clone();
                    tokio::spawn(async move { call_and_check(&c, i).await })
                })
                .collect();
            let mut failures = Vec::new();
            for t in tasks {
                let outcome = tokio::time::timeout(Duration::from_secs(30), t).await.expect("a call hung").unwrap();
                failures.extend(outcome.err());
            }
            failures
        });
        assert!(failures.is_empty(), "{uri}: {failures:#?}");
        // The blocking methods of the same client call the same async procedures.
        assert_eq!(c.lookup("abc", Red).unwrap(), everything::Result::Code(3), "{uri}");
        c.ping().unwrap();
    }
    assert_eq!(peer.started.load(Ordering::SeqCst), 3 * 40, "every GREET ran once");
}

/// On one endpoint (one client, one server socket or ring), a GREET that sleeps 300 ms on a
/// tokio timer is set aside while the serving thread answers an ADD made after it: the ADD's
/// answer arrives while the slow call is still pending, and then the slow call's own.
#[test]
fn a_slow_async_procedure_holds_up_no_fast_call_on_its_endpoint() {
    let rt = runtime();
    let (served, peer) = serve_async(&rt);
    for uri in &served.uris {
        let c = connect(uri);
        let before = peer.started.load(Ordering::SeqCst);
        rt.block_on(async {
            let slow = tokio::spawn({
                let c = c.clone();
                async move { c.greet_async(SLOW).await }
            });
            // The slow call has reached its procedure before the fast one is made.
            let t = std::time::Instant::now();
            while peer.started.load(Ordering::SeqCst) == before {
                assert!(t.elapsed() < Duration::from_secs(10), "{uri}: the slow call never started");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert_eq!(c.add_async(2, 3).await.unwrap(), 5, "{uri}");
            assert!(!slow.is_finished(), "{uri}: the fast call waited for the slow one");
            let slow = tokio::time::timeout(Duration::from_secs(10), slow).await.expect("the slow call hung");
            assert_eq!(slow.unwrap().unwrap(), "hello, slow", "{uri}");
        });
    }
}

/// The arguments of GREET("hello") in the encoding `c` speaks, with one byte of the string made
/// invalid UTF-8: a decode error the server finds in argument `who`.
fn bad_greet_args(c: &EverythingV1Client) -> Vec<u8> {
    let mut body = Vec::new();
    if c.client().is_onc() {
        encode_greet_args_xdr(&mut body, "hello").unwrap();
    } else {
        let order = match c.client().server_byte_order() {
            ByteOrder::Little => lowlat::codec::ByteOrder::Little,
            ByteOrder::Big => lowlat::codec::ByteOrder::Big,
        };
        encode_greet_args_native(&mut body, order, "hello").unwrap();
    }
    let at = body.windows(5).position(|w| w == b"hello").expect("the string is in the body");
    body[at] = 0xff;
    body
}

/// What a caller can tell of an error: its kind and the server's words, without the endpoint
/// (which differs between the two servers compared).
fn seen(e: &Error) -> String {
    match e {
        Error::GarbageArgs { detail, .. } => format!("garbage args: {detail:?}"),
        Error::ServerError { message, .. } => format!("server error: {message:?}"),
        other => format!("unexpected: {other}"),
    }
}

/// LOOKUP of a missing key fails with a message, and GREET's argument that is not UTF-8 is a
/// decode error naming the argument; from the async implementation the caller reads the same
/// as from the sync one, on each scheme (no message over ONC RPC, which has no place for it).
#[test]
fn application_and_decode_errors_of_async_procedures_reach_the_caller_as_from_sync_ones() {
    let rt = runtime();
    let (served_async, _) = serve_async(&rt);
    let sync = Arc::new(SyncPeer);
    let served_sync = serve(program(sync.clone()), program_xdr(sync));
    for (uri_async, uri_sync) in served_async.uris.iter().zip(&served_sync.uris) {
        let (ca, cs) = (connect(uri_async), connect(uri_sync));
        let from_async = rt.block_on(ca.lookup_async(MISSING, Red)).unwrap_err();
        let from_sync = cs.lookup(MISSING, Red).unwrap_err();
        assert_eq!(seen(&from_async), seen(&from_sync), "{uri_async}: {from_async}");
        let bad = |c: &EverythingV1Client| {
            let encode = |out: &mut OutBuf<'_>| {
                out.extend_from_slice(&bad_greet_args(c));
                std::result::Result::<(), DecodeError>::Ok(())
            };
            c.client().call(GREET, encode, |r| Ok(r.to_vec())).unwrap_err()
        };
        let (from_async, from_sync) = (bad(&ca), bad(&cs));
        assert_eq!(seen(&from_async), seen(&from_sync), "{uri_async}: {from_async}");
        if ca.client().is_onc() {
            assert_eq!(seen(&from_async), "garbage args: None", "{uri_async}");
        } else {
            assert_eq!(
                seen(&ca.lookup(MISSING, Green).unwrap_err()),
                "server error: Some(\"no key \\\"missing\\\"\")",
                "{uri_async}"
            );
            assert!(seen(&from_async).contains("argument `who`"), "{uri_async}: {from_async}");
        }
    }
}
