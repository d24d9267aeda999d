//! ONC RPC v2 on a serving thread (`onc+udp://`, `onc+tcp://`): the server's XDR programs
//! ([`Program::xdr`]) answered to rpcgen/libtirpc clients, from the same process that serves
//! lowlat's own protocol. `lowlat-onc`'s [`ServerEngine`] decides everything but the procedure:
//! over UDP its duplicate-request cache answers retransmissions from the reply already sent.
//!
//! An endpoint registers its programs with this machine's rpcbind when one runs, and unregisters
//! them when it stops cleanly.
//!
//! [`Program::xdr`]: crate::Program::xdr

use std::fmt::Debug;
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_onc::engine::{CallKey, ServerEngine, ServerEngineConfig};
pub(crate) use lowlat_onc::rpcbind::Netid;
use lowlat_onc::rpcbind::Rpcbind;
use lowlat_onc::AcceptStatus;
use lowlat_proto::{ByteOrder, ErrorCode, Status};
use lowlat_transport::udp::MAX_DATAGRAM;
use tracing::Level;

use super::dispatch::{CallSpan, Dispatched, Dispatcher, Refusing};
use super::{serve_loop, Context, Protocol, ABANDONED_REASON};
use crate::doorbell::Drained;
use crate::driver::{FrameHandler, ServerTransport};
use crate::program::CallContext;
use crate::stats::EndpointStats;

/// Serves ONC RPC over `t` (a transport of `netid`) until the endpoint is stopped.
pub(crate) fn serve<T: ServerTransport>(t: T, ctx: &Context, netid: Netid)
where
    T::Addr: Hash,
{
    let endpoint = endpoint(&t, ctx, netid);
    serve_loop(t, endpoint, ctx);
}

/// ONC RPC's engine and procedures for `t` (a transport of `netid`).
pub(crate) fn endpoint<'c, T: ServerTransport>(
    t: &T,
    ctx: &'c Context,
    netid: Netid,
) -> impl Protocol<'c, T::Addr> + Send
where
    T::Addr: Hash,
{
    let datagrams = netid == Netid::Udp;
    let cfg = &ctx.config;
    let engine_cfg = ServerEngineConfig {
        programs: ctx.services.xdr_programs().map(|p| (p.number(), p.version())).collect(),
        require_auth_sys: cfg.onc_require_auth_sys,
        allowed_uids: cfg.onc_allowed_uids.clone(),
        duplicate_cache: if datagrams { cfg.onc_drc_entries } else { 0 },
        max_reply: if datagrams { MAX_DATAGRAM } else { usize::MAX },
        seed: ctx.seed,
    };
    OncEndpoint {
        engine: ServerEngine::new(engine_cfg),
        uri: t.local_uri().into(),
        ctx,
        dispatcher: Dispatcher::new(ctx),
        log: ReasonLog::default(),
        own: OncCounters::default(),
    }
}

/// An ONC RPC endpoint's counters beside its engine's (calls, duplicates answered from the
/// cache, refusals) and its dispatcher's (calls run).
#[derive(Default)]
struct OncCounters {
    busy: u64,
    errors: u64,
}

struct OncEndpoint<'c, A: Eq + Hash + Copy> {
    engine: ServerEngine<A>,
    ctx: &'c Context,
    /// The endpoint, as the log names it.
    uri: Arc<str>,
    dispatcher: Dispatcher<'c, Kept<A>>,
    log: ReasonLog,
    own: OncCounters,
}

/// A call kept while it is away from the serving thread: its key, and what it was (to log a
/// failure's reason). The same call whatever else is kept with it.
#[derive(Clone, Copy)]
struct Kept<A> {
    key: CallKey<A>,
    called: Called,
}

impl<A: PartialEq> PartialEq for Kept<A> {
    fn eq(&self, other: &Kept<A>) -> bool {
        self.key == other.key
    }
}

/// A call as the log names it: its program, version, procedure and the procedure's name (not
/// the whole `CallContext`, whose AUTH_SYS credentials are some 340 bytes to copy a call).
#[derive(Clone, Copy)]
struct Called {
    program: u32,
    version: u32,
    proc_no: u32,
    name: Option<&'static str>,
}

impl<A: Eq + Hash + Copy> CallSpan for Kept<A> {
    fn span(&self, ctx: &CallContext, name: Option<&'static str>) -> tracing::Span {
        crate::spans::onc_call(ctx, name, self.key.xid)
    }
}

/// Where the reasons of failed calls go over ONC RPC, which cannot carry them: a `tracing`
/// event (target `lowlat::onc`, level WARN), at most [`ReasonLog::PER_SECOND`] a second (a peer
/// sending garbage must not make the serving thread wait on a slow subscriber), the rest
/// counted and reported as one event when the next second's first is.
#[derive(Default)]
struct ReasonLog {
    window: Option<Instant>,
    written: u32,
    dropped: u64,
}

impl ReasonLog {
    const PER_SECOND: u32 = 10;

    /// Logs why the call `c` from `peer` at `uri` failed with `status`, when there is a reason
    /// and a subscriber wants it.
    #[cold]
    #[inline(never)]
    fn note(&mut self, uri: &Arc<str>, peer: &dyn Debug, c: Called, status: Status, reason: &[u8]) {
        if reason.is_empty() || !tracing::enabled!(target: "lowlat::onc", Level::WARN) {
            return;
        }
        let now = Instant::now();
        if self.window.is_none_or(|w| now.duration_since(w) >= Duration::from_secs(1)) {
            if self.dropped > 0 {
                tracing::warn!(
                    target: "lowlat::onc",
                    endpoint = &**uri,
                    suppressed = self.dropped,
                    "reasons of failed ONC RPC calls not shown (at most {} a second)",
                    Self::PER_SECOND,
                );
            }
            *self = ReasonLog { window: Some(now), written: 0, dropped: 0 };
        }
        if self.written >= Self::PER_SECOND {
            self.dropped += 1;
            return;
        }
        self.written += 1;
        let outcome = match status {
            Status::Error(ErrorCode::GarbageArgs) => "could not decode the arguments",
            Status::Error(ErrorCode::Busy) => "was not run",
            _ => "failed",
        };
        tracing::warn!(
            target: "lowlat::onc",
            endpoint = &**uri,
            peer = ?peer,
            program = c.program,
            version = c.version,
            procedure = c.proc_no,
            name = c.name,
            outcome,
            reason = %String::from_utf8_lossy(reason),
            "ONC RPC call failed",
        );
    }
}

/// Answers a call that came back to the serving thread (from the worker pool, a future, or a
/// run with the seat lent), logging a failure's reason.
#[allow(clippy::too_many_arguments)]
fn answer<A: Eq + Hash + Copy + Debug>(
    engine: &mut ServerEngine<A>,
    log: &mut ReasonLog,
    own: &mut OncCounters,
    uri: &Arc<str>,
    Kept { key, called }: Kept<A>,
    status: Status,
    result: &[u8],
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    if status != Status::Ok {
        own.errors += 1;
        log.note(uri, &key.from, called, status, result);
    }
    // Over TCP the connection may have closed meanwhile: the transport drops the reply.
    engine.finish_with(key, accept_status(status), result, out);
}

/// The ONC RPC status of a procedure's outcome.
fn accept_status(s: Status) -> AcceptStatus {
    match s {
        Status::Ok => AcceptStatus::Success,
        Status::Error(ErrorCode::GarbageArgs) => AcceptStatus::GarbageArgs,
        Status::Error(ErrorCode::UnknownProcedure) => AcceptStatus::ProcUnavail,
        // ONC RPC has no "busy": a shed call is a system error the caller may retry.
        Status::Error(_) => AcceptStatus::SystemErr,
    }
}

impl<A: Eq + Hash + Copy + Send + Debug + 'static> FrameHandler<A> for OncEndpoint<'_, A> {
    fn handle<O: FnMut(&A, &[u8], &[u8])>(&mut self, from: A, msg: &[u8], _lent: &mut [u8], out: &mut O) -> usize {
        let Some(call) = self.engine.handle(from, msg, out) else { return 0 };
        let key = call.key;
        let ctx = CallContext {
            program: call.program,
            version: call.version,
            proc_no: call.procedure,
            client_order: ByteOrder::Big,
            auth: call.cred.auth_sys(),
        };
        let route = self.ctx.services.xdr_route(call.program, call.version, call.procedure);
        let called =
            Called { program: call.program, version: call.version, proc_no: call.procedure, name: route.name() };
        let reply = &mut (&mut *call.results).into();
        let started = if self.dispatcher.sample() { crate::trace::now_ns() } else { 0 };
        let status = match self.dispatcher.dispatch(route, Kept { key, called }, ctx, call.args, reply, started) {
            Dispatched::Answered(status) => status,
            Dispatched::Away | Dispatched::Lent => return 0,
        };
        if status != Status::Ok {
            // ONC RPC carries no reason: it goes to the log.
            self.log.note(&self.uri, &key.from, called, status, call.results);
        }
        match status {
            Status::Error(ErrorCode::Busy) => self.own.busy += 1,
            Status::Error(_) => self.own.errors += 1,
            Status::Ok => {}
        }
        self.engine.finish(key, accept_status(status), out);
        0
    }

    fn flush<O: FnMut(&A, &[u8], &[u8])>(&mut self, _out: &mut O) {}
}

impl<'c, A: Eq + Hash + Copy + Send + Debug + 'static> Protocol<'c, A> for OncEndpoint<'c, A> {
    type Key = Kept<A>;

    fn dispatcher(&mut self) -> &mut Dispatcher<'c, Kept<A>> {
        &mut self.dispatcher
    }

    fn answer_lent(&mut self, key: Kept<A>, status: Status, result: &[u8], out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let OncEndpoint { engine, dispatcher, log, own, uri, .. } = self;
        dispatcher.lent_done(key, status, result, |kept, status, result| {
            answer(engine, log, own, uri, kept, status, result, out)
        });
    }

    fn complete(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let OncEndpoint { engine, dispatcher, log, own, uri, .. } = self;
        dispatcher.complete(|kept, status, result| answer(engine, log, own, uri, kept, status, result, out));
    }

    fn refuse_new_calls(&mut self, why: Refusing) {
        self.dispatcher.refuse_new_calls(why);
    }

    fn in_pool(&self) -> usize {
        self.dispatcher.away()
    }

    fn abandon(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) -> u64 {
        let OncEndpoint { engine, dispatcher, log, uri, .. } = self;
        dispatcher.abandon(|Kept { key, called }| {
            let status = Status::Error(ErrorCode::ServerError);
            log.note(uri, &key.from, called, status, ABANDONED_REASON.as_bytes());
            engine.finish_with(key, accept_status(status), &[], out);
        })
    }

    fn drained(&self) -> Drained {
        self.dispatcher.drained()
    }

    fn times(&self) -> &[super::timing::ProcedureTimes] {
        self.dispatcher.times.snapshot()
    }

    fn count(&self, into: &mut EndpointStats) {
        let e = &self.engine.stats;
        into.calls += e.calls;
        into.duplicates += e.duplicates;
        into.binds_refused += e.refused;
        into.malformed += e.malformed;
        into.executed += self.dispatcher.executed;
        into.busy += self.own.busy;
        into.errors_server_error += self.own.errors;
    }
}

/// The (program, version) pairs an endpoint registered with rpcbind.
pub(crate) struct Registration {
    rpcbind: Option<Rpcbind>,
    done: Vec<(u32, u32)>,
}

const OWNER: &str = "lowlat";

impl Registration {
    /// Registers the XDR programs at `at` with this machine's rpcbind, if the configuration asks
    /// and one runs.
    pub fn register(ctx: &Context, netid: Netid, at: SocketAddr) -> Registration {
        let mut r = Registration { rpcbind: None, done: Vec::new() };
        if !ctx.config.onc_register {
            return r;
        }
        let rb = Rpcbind::local();
        if !rb.is_running() {
            return r;
        }
        for p in ctx.services.xdr_programs() {
            match rb.set(p.number(), p.version(), netid, at, OWNER) {
                Ok(true) => r.done.push((p.number(), p.version())),
                Ok(false) => tracing::warn!(
                    target: "lowlat::onc",
                    program = p.number(),
                    version = p.version(),
                    %at,
                    netid = ?netid,
                    "rpcbind refused to register the program (already registered elsewhere?)",
                ),
                Err(e) => tracing::warn!(
                    target: "lowlat::onc",
                    program = p.number(),
                    version = p.version(),
                    %at,
                    reason = %e,
                    "could not register with rpcbind",
                ),
            }
        }
        r.rpcbind = Some(rb);
        r
    }

    pub fn unregister(self) {
        if let Some(rb) = self.rpcbind {
            for (p, v) in self.done {
                let _ = rb.unset(p, v, OWNER);
            }
        }
    }
}
