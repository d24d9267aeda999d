//! lowlat's logs and spans reach a user's own `tracing` subscriber: a failed ONC RPC call's
//! reason (which ONC RPC cannot carry) as a WARN event of `lowlat::onc` with its fields, at most
//! ten a second with the rest counted; and, when asked for, a span per call on the client and
//! on the server (inline, on a worker, async) with the call's program, procedure, session, slot
//! and call number, the procedure's own events inside it.
//!
//! The subscriber is the process's global one (serving threads are not the test's), installed
//! once; each test picks its own events out by endpoint or program.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use lowlat::{Client, ClientConfig, ProcError, Program, Server, ServerConfig};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Fields by name, their values as text.
type Fields = BTreeMap<String, String>;

/// An event as the subscriber saw it, with the span it happened in.
#[derive(Clone, Debug)]
struct Logged {
    level: Level,
    target: String,
    fields: Fields,
    span: Option<Closed>,
}

/// A span with its fields as they were when it closed (or when an event was seen in it).
#[derive(Clone, Debug)]
struct Closed {
    name: String,
    target: String,
    fields: Fields,
}

#[derive(Default)]
struct Captured {
    events: Mutex<Vec<Logged>>,
    spans: Mutex<Vec<Closed>>,
}

struct Capture(Arc<Captured>);

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0.insert(f.name().into(), v.to_string());
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.0.insert(f.name().into(), v.to_string());
    }
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.0.insert(f.name().into(), format!("{v:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Collect(&mut fields));
        let span = ctx.span(id).expect("a new span");
        let meta = span.metadata();
        span.extensions_mut().insert(Closed { name: meta.name().into(), target: meta.target().into(), fields });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a live span");
        if let Some(c) = span.extensions_mut().get_mut::<Closed>() {
            values.record(&mut Collect(&mut c.fields));
        };
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        let span = ctx.event_span(event).and_then(|s| s.extensions().get::<Closed>().cloned());
        let meta = event.metadata();
        let logged = Logged { level: *meta.level(), target: meta.target().into(), fields, span };
        self.0.events.lock().unwrap().push(logged);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).expect("a closing span");
        if let Some(c) = span.extensions().get::<Closed>() {
            self.0.spans.lock().unwrap().push(c.clone());
        };
    }
}

/// The process's capturing subscriber, installed at the first call.
fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Arc<Captured>> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let c = Arc::new(Captured::default());
        let subscriber = tracing_subscriber::registry().with(Capture(c.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        c
    })
}

impl Captured {
    fn events(&self, pick: impl Fn(&Logged) -> bool) -> Vec<Logged> {
        self.events.lock().unwrap().iter().filter(|e| pick(e)).cloned().collect()
    }

    fn spans(&self, pick: impl Fn(&Closed) -> bool) -> Vec<Closed> {
        self.spans.lock().unwrap().iter().filter(|s| pick(s)).cloned().collect()
    }
}

fn field<'a>(fields: &'a Fields, name: &str) -> &'a str {
    fields.get(name).map_or("<absent>", String::as_str)
}

fn no_rpcbind() -> ServerConfig {
    ServerConfig { onc_register: false, ..ServerConfig::default() }
}

fn call(c: &Client, proc_no: u32) -> Result<Vec<u8>, lowlat::Error> {
    let args = |a: &mut lowlat::OutBuf<'_>| {
        a.extend_from_slice(&[1, 2, 3, 4]);
        Ok::<_, lowlat::DecodeError>(())
    };
    c.call(proc_no, args, |r| Ok(r.to_vec()))
}

/// The server logs why an ONC RPC procedure failed (the caller sees only SYSTEM_ERR): one
/// WARN event of `lowlat::onc`, its endpoint, peer, program, version, procedure and reason
/// as fields, not formatted into the message.
#[test]
fn a_failed_onc_call_is_logged_with_its_fields() {
    let logs = captured();
    const PROG: u32 = 0x2000_7710;
    let program = Program::new(PROG, 3).xdr().procedure(4, "TAKE", |_, _, _| Err(ProcError::failed("shelf empty")));
    let server = Server::builder().program(program).config(no_rpcbind()).serve(&["onc+udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let c = Client::connect(&uri, PROG, 3).unwrap();
    assert!(call(&c, 4).is_err(), "the procedure fails");
    // Logged before the reply was sent.
    let got = logs.events(|e| e.fields.get("endpoint") == Some(&uri));
    assert_eq!(got.len(), 1, "one event: {got:?}");
    let e = &got[0];
    assert_eq!((e.level, e.target.as_str()), (Level::WARN, "lowlat::onc"));
    let f = &e.fields;
    assert_eq!(field(f, "program"), PROG.to_string());
    assert_eq!(field(f, "version"), "3");
    assert_eq!(field(f, "procedure"), "4");
    assert_eq!(field(f, "name"), "TAKE");
    assert_eq!(field(f, "outcome"), "failed");
    assert_eq!(field(f, "reason"), "shelf empty");
    assert!(field(f, "peer").contains("127.0.0.1"), "the caller's address: {f:?}");
    assert!(!field(f, "message").contains("shelf empty"), "the reason is a field, not in the message: {f:?}");
    server.shutdown();
}

/// A flood of failing calls is logged at most ten times a second; the rest are counted, and the
/// count is logged with the next second's first event.
#[test]
fn repeated_onc_failures_are_rate_limited() {
    let logs = captured();
    const PROG: u32 = 0x2000_7711;
    let program = Program::new(PROG, 1).xdr().procedure(1, "FAIL", |_, _, _| Err(ProcError::failed("no")));
    let server = Server::builder().program(program).config(no_rpcbind()).serve(&["onc+udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let c = Client::connect(&uri, PROG, 1).unwrap();
    for _ in 0..25 {
        assert!(call(&c, 1).is_err());
    }
    std::thread::sleep(Duration::from_millis(1100));
    assert!(call(&c, 1).is_err());
    let ours = logs.events(|e| e.fields.get("endpoint") == Some(&uri));
    let reasons = ours.iter().filter(|e| e.fields.contains_key("reason")).count() as u64;
    let suppressed: Vec<u64> =
        ours.iter().filter_map(|e| e.fields.get("suppressed")).map(|n| n.parse().unwrap()).collect();
    assert!(!suppressed.is_empty(), "the calls not logged are counted: {ours:?}");
    assert_eq!(reasons + suppressed.iter().sum::<u64>(), 26, "every failure logged or counted: {ours:?}");
    assert!(reasons <= 20, "at most ten a second: {reasons} logged");
    assert!(ours.iter().all(|e| e.level == Level::WARN && e.target == "lowlat::onc"));
    server.shutdown();
}

/// With spans on at both ends, each call has a client span and a server span (target, name
/// `call`) naming the same session, slot and call number, whether the procedure runs inline, on
/// a worker or as a future; an event the procedure emits is inside the server's span.
#[test]
fn spans_carry_the_call_when_asked() {
    let logs = captured();
    const PROG: u32 = 0x2000_7712;
    let inside = |what: &'static str| tracing::info!(target: "test::procedure", what, "inside the procedure");
    let program = Program::new(PROG, 1)
        .procedure(1, "ECHO", move |_, a, r| {
            inside("inline");
            r.extend_from_slice(a);
            Ok(())
        })
        .long_running(2, "SLOW", move |_, a, r| {
            inside("worker");
            r.extend_from_slice(a);
            Ok(())
        })
        .procedure_async(3, "LATER", move |_, a| async move {
            inside("async");
            Ok(a)
        })
        .procedure(4, "PLAIN", |_, a, r| {
            r.extend_from_slice(a);
            Ok(())
        });
    let dir = tempfile::tempdir().unwrap();
    let shm = format!("shm://{}", dir.path().join("s").display());
    let cfg = ServerConfig { spans: true, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0", shm.as_str()]).unwrap();
    let names = [(1, "ECHO"), (2, "SLOW"), (3, "LATER"), (4, "PLAIN")];
    for uri in server.local_uris() {
        let c = Client::connect_with(&uri, PROG, 1, ClientConfig { spans: true, ..ClientConfig::default() })
            .unwrap()
            .name_procedures(&names);
        for (proc_no, _) in names {
            assert_eq!(call(&c, proc_no).unwrap(), [1, 2, 3, 4]);
        }
        let token = c.session().token.to_string();
        // A client span closes as its call returns; a server span once the answer is sent
        // (on a worker, after the reply went back): wait for the last.
        let ours = |s: &Closed| s.name == "call" && field(&s.fields, "token") == token;
        for _ in 0..200 {
            if logs.spans(ours).len() >= 8 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let spans = logs.spans(ours);
        for (proc_no, name) in names {
            let of = |target: &str| {
                let found: Vec<&Closed> = spans
                    .iter()
                    .filter(|s| s.target == target && field(&s.fields, "procedure") == proc_no.to_string())
                    .collect();
                assert_eq!(found.len(), 1, "{uri} {name}: one {target} span in {spans:?}");
                found[0].fields.clone()
            };
            let (client, server) = (of("lowlat::client"), of("lowlat::server"));
            for f in [&client, &server] {
                assert_eq!(field(f, "program"), PROG.to_string());
                assert_eq!(field(f, "version"), "1");
                assert_eq!(field(f, "name"), name);
            }
            for id in ["token", "slot", "call_no"] {
                assert_eq!(field(&client, id), field(&server, id), "{uri} {name}: the same {id}");
            }
        }
        // The procedures' own events happened inside their calls' spans.
        for (what, name) in [("inline", "ECHO"), ("worker", "SLOW"), ("async", "LATER")] {
            let seen = logs.events(|e| {
                e.target == "test::procedure"
                    && field(&e.fields, "what") == what
                    && e.span.as_ref().is_some_and(|s| field(&s.fields, "token") == token)
            });
            assert_eq!(seen.len(), 1, "{uri}: the {what} procedure's event, in its span");
            let span = seen[0].span.as_ref().unwrap();
            assert_eq!((span.target.as_str(), field(&span.fields, "name")), ("lowlat::server", name));
        }
    }

    // Off (the default) at both ends: no span.
    let server = Server::builder().program(Program::new(PROG, 2).procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    }));
    let server = server.serve(&["udp://127.0.0.1:0"]).unwrap();
    let c = Client::connect(&server.local_uris()[0], PROG, 2).unwrap();
    call(&c, 1).unwrap();
    let token = c.session().token.to_string();
    server.shutdown();
    assert!(logs.spans(|s| field(&s.fields, "token") == token).is_empty(), "no span without spans on");
}

/// Over ONC RPC, the server's span names the call by its xid.
#[test]
fn onc_spans_carry_the_xid() {
    let logs = captured();
    const PROG: u32 = 0x2000_7713;
    let program = Program::new(PROG, 1).xdr().procedure(1, "ECHO", |_, a, r| {
        tracing::info!(target: "test::onc_procedure", "inside");
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { spans: true, ..no_rpcbind() };
    let server = Server::builder().program(program).config(cfg).serve(&["onc+tcp://127.0.0.1:0"]).unwrap();
    let c = Client::connect(&server.local_uris()[0], PROG, 1).unwrap();
    call(&c, 1).unwrap();
    server.shutdown();
    let seen = logs.events(|e| e.target == "test::onc_procedure");
    assert_eq!(seen.len(), 1);
    let span = seen[0].span.as_ref().expect("inside the call's span");
    assert_eq!((span.target.as_str(), span.name.as_str()), ("lowlat::onc", "call"));
    assert_eq!(field(&span.fields, "program"), PROG.to_string());
    assert_eq!(field(&span.fields, "procedure"), "1");
    assert_eq!(field(&span.fields, "name"), "ECHO");
    assert!(field(&span.fields, "xid").parse::<u32>().is_ok(), "{span:?}");
}

/// An async call's span is the same as a blocking one's: entered at every poll, its ids
/// recorded as it completes.
#[test]
fn async_calls_have_spans_too() {
    let logs = captured();
    const PROG: u32 = 0x2000_7714;
    let program = Program::new(PROG, 1).procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { spans: true, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&["udp://127.0.0.1:0"]).unwrap();
    let c = Client::connect_with(&server.local_uris()[0], PROG, 1, ClientConfig { spans: true, ..Default::default() })
        .unwrap()
        .name_procedures(&[(1, "ECHO")]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let args = |a: &mut lowlat::OutBuf<'_>| {
        a.extend_from_slice(b"async");
        Ok::<_, lowlat::DecodeError>(())
    };
    let got = rt.block_on(c.call_async(1, args, |r| Ok(r.to_vec()))).unwrap();
    assert_eq!(got, b"async");
    let token = c.session().token.to_string();
    server.shutdown();
    let spans = logs.spans(|s| field(&s.fields, "token") == token);
    let client: Vec<&Closed> = spans.iter().filter(|s| s.target == "lowlat::client").collect();
    let server: Vec<&Closed> = spans.iter().filter(|s| s.target == "lowlat::server").collect();
    assert_eq!((client.len(), server.len()), (1, 1), "{spans:?}");
    assert_eq!(field(&client[0].fields, "name"), "ECHO");
    for id in ["slot", "call_no"] {
        assert_eq!(field(&client[0].fields, id), field(&server[0].fields, id), "the same {id}");
    }
}
