//! ONC RPC v2 on a serving thread (`onc+udp://`, `onc+tcp://`): the server's XDR programs
//! ([`Program::xdr`]) answered to rpcgen/libtirpc clients, from the same process that serves
//! lowlat's own protocol. `lowlat-onc`'s [`ServerEngine`] decides everything but the procedure:
//! over UDP its duplicate-request cache answers retransmissions from the reply already sent.
//!
//! An endpoint registers its programs with this machine's rpcbind when one runs, and unregisters
//! them when it stops cleanly.
//!
//! [`Program::xdr`]: crate::Program::xdr

use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_onc::engine::{CallKey, ServerEngine, ServerEngineConfig};
pub(crate) use lowlat_onc::rpcbind::Netid;
use lowlat_onc::rpcbind::Rpcbind;
use lowlat_onc::AcceptStatus;
use lowlat_proto::{ByteOrder, ErrorCode, Status};
use lowlat_transport::udp::MAX_DATAGRAM;

use super::{serve_loop, Context, Protocol, ABANDONED_REASON, STOPPING_REASON};
use crate::async_calls::AsyncCalls;
use crate::doorbell::Drained;
use crate::driver::{FrameHandler, ServerTransport};
use crate::service::{self, CallContext, Route};
use crate::stats::EndpointStats;
use crate::workers::{Completions, Job};
use crate::CallSite;

/// Serves ONC RPC over `t` (a transport of `netid`) until the endpoint is stopped.
pub(crate) fn serve<T: ServerTransport>(t: T, ctx: &Context, netid: Netid)
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
    let endpoint = OncEndpoint {
        engine: ServerEngine::new(engine_cfg),
        uri: t.local_uri().into(),
        ctx,
        completions: Completions::new(ctx.shared.clone()),
        async_calls: AsyncCalls::new(ctx.shared.clone()),
        finished: Vec::new(),
        log: ReasonLog::default(),
        in_pool: Vec::new(),
        refusing: false,
        drained: Drained::default(),
        own: OncCounters::default(),
    };
    serve_loop(t, endpoint, ctx);
}

/// An ONC RPC endpoint's counters: its engine's (calls, duplicates answered from the cache,
/// refusals) and its dispatch's.
#[derive(Default)]
struct OncCounters {
    executed: u64,
    busy: u64,
    errors: u64,
}

struct OncEndpoint<'c, A: Eq + Hash + Copy> {
    engine: ServerEngine<A>,
    ctx: &'c Context,
    /// The endpoint, as the log names it.
    uri: Arc<str>,
    /// Finished by the workers, with what each call was (to log a failure's reason).
    completions: Arc<Completions<(CallKey<A>, Called)>>,
    /// Async procedures' calls whose futures are pending (answered through `completions`).
    async_calls: AsyncCalls,
    /// Taken from `completions` when the doorbell rings (kept, so taking allocates nothing).
    finished: Vec<Finished<A>>,
    log: ReasonLog,
    /// The calls on the worker pool or pending in `async_calls`, not yet answered.
    in_pool: Vec<(CallKey<A>, Called)>,
    /// The server is stopping: new calls are answered, not run.
    refusing: bool,
    drained: Drained,
    own: OncCounters,
}

/// A call the workers or an async procedure finished: the call, its status and its result.
type Finished<A> = ((CallKey<A>, Called), Status, Vec<u8>);

/// A call as the log names it: its context and its procedure's name.
#[derive(Clone, Copy)]
struct Called {
    ctx: CallContext,
    name: Option<&'static str>,
}

/// Where the reasons of failed calls go over ONC RPC, which cannot carry them: the server's
/// standard error, at most [`ReasonLog::PER_SECOND`] lines a second (a peer sending garbage
/// must not make the serving thread wait on a terminal), the rest counted.
#[derive(Default)]
struct ReasonLog {
    window: Option<Instant>,
    written: u32,
    dropped: u64,
}

impl ReasonLog {
    const PER_SECOND: u32 = 10;

    /// Logs why the call `c` at `uri` failed with `status`, when there is a reason.
    #[cold]
    #[inline(never)]
    fn note(&mut self, uri: &Arc<str>, c: Called, status: Status, reason: &[u8]) {
        if reason.is_empty() {
            return;
        }
        let now = Instant::now();
        if self.window.is_none_or(|w| now.duration_since(w) >= Duration::from_secs(1)) {
            if self.dropped > 0 {
                eprintln!("lowlat: {} more reasons of failed ONC RPC calls not shown", self.dropped);
            }
            *self = ReasonLog { window: Some(now), written: 0, dropped: 0 };
        }
        if self.written >= Self::PER_SECOND {
            self.dropped += 1;
            return;
        }
        self.written += 1;
        let site = CallSite {
            uri: uri.clone(),
            program: c.ctx.program,
            version: c.ctx.version,
            proc_no: c.ctx.proc_no,
            name: c.name.map(Arc::from),
        };
        let what = match status {
            Status::Error(ErrorCode::GarbageArgs) => ": could not decode the arguments",
            Status::Error(ErrorCode::Busy) => " was not run",
            _ => " failed",
        };
        eprintln!("lowlat: {site}{what}: {}", String::from_utf8_lossy(reason));
    }
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

impl<A: Eq + Hash + Copy + Send + 'static> FrameHandler<A> for OncEndpoint<'_, A> {
    fn handle<O: FnMut(&A, &[u8], &[u8])>(&mut self, from: A, msg: &[u8], _lent: &mut [u8], out: &mut O) -> usize {
        let Some(call) = self.engine.handle(from, msg, out) else { return 0 };
        let key = call.key;
        let ctx = CallContext {
            program: call.program,
            version: call.version,
            proc_no: call.procedure,
            client_order: ByteOrder::Big,
            auth: call.auth,
        };
        let route = self.ctx.services.xdr_route(call.program, call.version, call.procedure);
        let called = Called { ctx, name: route.name() };
        let status = match route {
            _ if self.refusing => {
                self.drained.refused += 1;
                let status = Status::Error(ErrorCode::Busy);
                self.log.note(&self.uri, called, status, STOPPING_REASON.as_bytes());
                status
            }
            Route::Missing => Status::Error(ErrorCode::UnknownProcedure),
            Route::Inline(p) => {
                self.own.executed += 1;
                let status = service::run(p, &ctx, call.args, &mut (&mut *call.results).into());
                if status != Status::Ok {
                    self.log.note(&self.uri, called, status, call.results);
                }
                status
            }
            Route::Async(_, handler) => {
                self.own.executed += 1;
                let completions = &self.completions;
                match self.async_calls.start(handler(ctx, call.args.to_vec()), || completions.reply_to((key, called))) {
                    Some((status, result)) => {
                        call.results.extend_from_slice(&result);
                        if status != Status::Ok {
                            self.log.note(&self.uri, called, status, call.results);
                        }
                        status
                    }
                    None => {
                        self.in_pool.push((key, called));
                        return 0;
                    }
                }
            }
            Route::Worker(p) => {
                let reply_to = self.completions.reply_to((key, called));
                let job = Job { proc: p.clone(), ctx, args: call.args.to_vec(), reply_to };
                match self.ctx.workers.try_send(job) {
                    Ok(()) => {
                        self.own.executed += 1;
                        self.in_pool.push((key, called));
                        return 0;
                    }
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Status::Error(ErrorCode::Busy),
                }
            }
        };
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

impl<A: Eq + Hash + Copy + Send + 'static> Protocol<A> for OncEndpoint<'_, A> {
    fn complete(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        self.async_calls.poll_woken();
        self.completions.take(&mut self.finished);
        for ((key, called), status, result) in self.finished.drain(..) {
            if let Some(i) = self.in_pool.iter().position(|(k, _)| *k == key) {
                self.in_pool.swap_remove(i);
                self.drained.completed += u64::from(self.refusing);
            }
            if status != Status::Ok {
                self.own.errors += 1;
                self.log.note(&self.uri, called, status, &result);
            }
            // Over TCP the connection may have closed meanwhile: the transport drops the reply.
            self.engine.finish_with(key, accept_status(status), &result, out);
        }
    }

    fn refuse_new_calls(&mut self) {
        self.refusing = true;
    }

    fn in_pool(&self) -> usize {
        self.in_pool.len()
    }

    fn abandon(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) -> u64 {
        self.async_calls.drop_all();
        let n = self.in_pool.len() as u64;
        for (key, called) in std::mem::take(&mut self.in_pool) {
            let status = Status::Error(ErrorCode::ServerError);
            self.log.note(&self.uri, called, status, ABANDONED_REASON.as_bytes());
            self.engine.finish_with(key, accept_status(status), &[], out);
        }
        n
    }

    fn drained(&self) -> Drained {
        self.drained
    }

    fn count(&self, into: &mut EndpointStats) {
        let e = &self.engine.stats;
        into.calls += e.calls;
        into.duplicates += e.duplicates;
        into.binds_refused += e.refused;
        into.malformed += e.malformed;
        into.executed += self.own.executed;
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
                Ok(false) => eprintln!(
                    "lowlat: rpcbind refused to register program {:#x} version {} on {at} (already registered elsewhere?)",
                    p.number(),
                    p.version()
                ),
                Err(e) => eprintln!("lowlat: registering with rpcbind: {e}"),
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
