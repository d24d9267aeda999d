//! The dispatcher of one endpoint, the same for every protocol: runs a call the protocol engine
//! handed over where its route says (inline on the serving thread, as a future polled there, or
//! on the worker pool), and keeps track of the calls that left the serving thread until their
//! results come back (through the endpoint's [`Completions`], which ring its doorbell), are
//! refused because the server is stopping, or are abandoned when the stop's time runs out.
//!
//! Firefly's and eRPC's model: a procedure runs where its call arrived, with no hand-off (a
//! thread wake-up costs 3-100 µs); only procedures known to be slow (`long_running`) pay for one.
//! The protocol (`super::lowlat`, `super::onc`) keeps what only it knows: how calls are keyed,
//! how an outcome is encoded, what is counted and logged.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use lowlat_codec::OutBuf;
use lowlat_proto::{ErrorCode, Status};
use tracing::Span;

use super::async_calls::AsyncCalls;
use super::routes::Route;
use super::timing::CallTimes;
use super::workers::{Completions, Finished, Job};
use super::{Context, SHEDDING_REASON, STOPPING_REASON};
use crate::doorbell::Drained;
use crate::program::{Body, CallContext, ProcError, Procedure};

/// Whether a dispatcher answers new calls without running them, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusing {
    /// New calls run.
    No,
    /// The server was told to shed load.
    ShedLoad,
    /// The server is stopping (drained calls are counted).
    Stopping,
}

/// What became of a call handed to [`Dispatcher::dispatch`].
pub(crate) enum Dispatched {
    /// Answered on this thread: the status, with the result (or the reason for the caller) in
    /// the reply buffer.
    Answered(Status),
    /// Left the serving thread (worker pool, pending future): its result comes back through
    /// [`Dispatcher::complete`].
    Away,
    /// On an endpoint of several threads, an inline call kept to run once the transport is
    /// done with its frame, with the thread's seat lent ([`Dispatcher::take_lent`]); answered
    /// through the protocol's `answer_lent`.
    Lent,
}

/// A protocol's name for a call, as its span ([`ServerConfig::spans`]) names it.
///
/// [`ServerConfig::spans`]: crate::ServerConfig::spans
pub(crate) trait CallSpan {
    /// The span the call's procedure runs in.
    fn span(&self, ctx: &CallContext, name: Option<&'static str>) -> Span;
}

impl CallSpan for lowlat_proto::CallKey {
    fn span(&self, ctx: &CallContext, name: Option<&'static str>) -> Span {
        crate::spans::server_call(ctx, name, self.token, self.slot, self.call_no)
    }
}

/// Routes calls and keeps the ones that left the serving thread, keyed by `K` (the protocol's
/// name for a call, with whatever it needs to answer it later); `'s`: the server's procedures.
pub(crate) struct Dispatcher<'s, K> {
    workers: SyncSender<Job>,
    completions: Arc<Completions<K>>,
    /// Async procedures' calls whose futures are pending (answered through `completions`).
    async_calls: AsyncCalls,
    /// Taken from `completions` when the doorbell rings (kept, so taking allocates nothing).
    finished: Finished<K>,
    /// The calls on the worker pool or pending in `async_calls`, not yet answered.
    away: Vec<Away<K>>,
    /// The sampled calls' durations, per procedure.
    pub times: CallTimes,
    /// Whether new calls are answered without running them, and why.
    refusing: Refusing,
    drained: Drained,
    /// Calls run (inline, as a future, or by a worker).
    pub executed: u64,
    /// Each procedure runs in a span ([`ServerConfig::spans`](crate::ServerConfig::spans)).
    spans: bool,
    /// On an endpoint of several threads, inline calls are not run where they are dispatched
    /// but kept here, their arguments copied, and run by the serving loop with its seat lent
    /// (`super::seats`): then a procedure that blocks holds up no other session.
    lending: bool,
    lent: VecDeque<LentCall<'s, K>>,
    /// The arguments of the calls in `lent`, one after the other.
    lent_args: Vec<u8>,
    /// Boxes for the AUTH_SYS credentials of calls in `lent`, kept for the next ones (the
    /// boxes themselves go out with the calls and come back, so that none is allocated twice).
    #[allow(clippy::vec_box)]
    auth_boxes: Vec<Box<lowlat_onc::AuthSys>>,
}

/// The answers (how many, how many bytes) that can come back to a dispatcher with seats
/// without it allocating.
const LENT_ROOM: (usize, usize) = (64, 64 << 10);

/// An inline call kept to run with the seat lent.
///
/// Kept small, as it is moved in and out of the queue: the call's context without its AUTH_SYS
/// credentials (some 340 bytes), which, when there are any, go in a box the dispatcher reuses.
pub(crate) struct LentCall<'s, K> {
    pub key: K,
    proc: &'s Procedure,
    program: u32,
    version: u32,
    proc_no: u32,
    client_order: lowlat_codec::ByteOrder,
    pub auth: Option<Box<lowlat_onc::AuthSys>>,
    args: Range<usize>,
    /// It runs in a span ([`ServerConfig::spans`](crate::ServerConfig::spans)).
    spans: bool,
}

impl<K: CallSpan> LentCall<'_, K> {
    /// Runs the call, its arguments `args` (copied by [`Dispatcher::take_lent`]), its result
    /// (or the reason it failed) into `reply`.
    pub fn run(&self, args: &[u8], reply: &mut Vec<u8>) -> Status {
        reply.clear();
        let ctx = CallContext {
            program: self.program,
            version: self.version,
            proc_no: self.proc_no,
            client_order: self.client_order,
            auth: self.auth.as_deref().copied(),
        };
        let span = self.spans.then(|| self.key.span(&ctx, Some(self.proc.name)));
        let _entered = span.as_ref().map(Span::enter);
        run(self.proc, &ctx, args, &mut reply.into())
    }
}

/// A call away from the serving thread.
struct Away<K> {
    key: K,
    /// When it was taken, if it is timed (0: not).
    started: u64,
    /// Its procedure's id.
    id: usize,
}

impl<'s, K: Clone + PartialEq + Send + CallSpan + 'static> Dispatcher<'s, K> {
    pub fn new(ctx: &Context) -> Dispatcher<'s, K> {
        let lending = ctx.shard.count > 1;
        // With seats, a call run lent comes back through the completions when its seat was
        // taken meanwhile, which may happen under any load: room made for it now.
        let room = if lending { LENT_ROOM } else { (0, 0) };
        Dispatcher {
            workers: ctx.workers.clone(),
            completions: Completions::new(ctx.shared.clone(), room),
            async_calls: AsyncCalls::new(ctx.shared.clone()),
            finished: Finished::with_capacity(room.0, room.1),
            away: Vec::new(),
            times: CallTimes::new(ctx.services.procedure_count()),
            refusing: Refusing::No,
            drained: Drained::default(),
            executed: 0,
            spans: ctx.config.spans,
            lending,
            lent: VecDeque::new(),
            lent_args: Vec::new(),
            auth_boxes: Vec::new(),
        }
    }

    /// Whether the call just taken is to be timed ([`CallTimes::sample`]): then the caller reads
    /// the clock and gives the moment to [`dispatch`](Self::dispatch).
    #[inline(always)]
    pub fn sample(&mut self) -> bool {
        self.times.sample()
    }

    /// Runs the call `key` where `route` says, with `args`; an answer made here goes into
    /// `reply`. `started`: when the call was taken, if it is timed (0: not).
    #[inline(always)]
    pub fn dispatch(
        &mut self,
        route: Route<'s>,
        key: K,
        ctx: CallContext,
        args: &[u8],
        reply: &mut OutBuf<'_>,
        started: u64,
    ) -> Dispatched {
        let id = route.id();
        let d = if self.spans {
            self.dispatch_in_span(route, key, ctx, args, reply, started)
        } else {
            self.route(route, key, ctx, args, reply, started, None)
        };
        if started != 0 && matches!(d, Dispatched::Answered(_)) && id != crate::program::UNTIMED {
            self.times.record(id, started);
        }
        d
    }

    /// [`dispatch`](Self::dispatch) with the call's span entered, and handed to a worker or a
    /// future that runs the procedure elsewhere or later.
    #[cold]
    #[inline(never)]
    fn dispatch_in_span(
        &mut self,
        route: Route<'s>,
        key: K,
        ctx: CallContext,
        args: &[u8],
        reply: &mut OutBuf<'_>,
        started: u64,
    ) -> Dispatched {
        let span = key.span(&ctx, route.name());
        let _entered = span.enter();
        self.route(route, key, ctx, args, reply, started, Some(&span))
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn route(
        &mut self,
        route: Route<'s>,
        key: K,
        ctx: CallContext,
        args: &[u8],
        reply: &mut OutBuf<'_>,
        started: u64,
        span: Option<&Span>,
    ) -> Dispatched {
        let id = route.id();
        match route {
            _ if self.refusing != Refusing::No => self.refuse(reply),
            Route::Missing => Dispatched::Answered(Status::Error(ErrorCode::UnknownProcedure)),
            Route::Inline(p) if self.lending => {
                self.executed += 1;
                let at = self.lent_args.len();
                self.lent_args.extend_from_slice(args);
                let args = at..self.lent_args.len();
                let auth = ctx.auth.map(|a| match self.auth_boxes.pop() {
                    Some(mut b) => {
                        *b = a;
                        b
                    }
                    None => Box::new(a),
                });
                let CallContext { program, version, proc_no, client_order, .. } = ctx;
                let spans = self.spans;
                let call =
                    LentCall { key: key.clone(), proc: p, program, version, proc_no, client_order, auth, args, spans };
                self.lent.push_back(call);
                self.away.push(Away { key, started, id });
                Dispatched::Lent
            }
            Route::Inline(p) => {
                self.executed += 1;
                Dispatched::Answered(run(p, &ctx, args, reply))
            }
            Route::Async(_, handler) => {
                self.executed += 1;
                let completions = &self.completions;
                let mut future = handler(ctx, args.to_vec());
                if let Some(span) = span {
                    future = Box::pin(tracing::Instrument::instrument(future, span.clone()));
                }
                match self.async_calls.start(future, || completions.reply_to(key.clone())) {
                    Some((status, result)) => {
                        reply.extend_from_slice(&result);
                        Dispatched::Answered(status)
                    }
                    None => {
                        self.away.push(Away { key, started, id });
                        Dispatched::Away
                    }
                }
            }
            Route::Worker(p) => {
                let job = Job {
                    proc: p.clone(),
                    ctx,
                    args: args.to_vec(),
                    reply_to: self.completions.reply_to(key.clone()),
                    span: span.cloned(),
                };
                match self.workers.try_send(job) {
                    Ok(()) => {
                        self.executed += 1;
                        self.away.push(Away { key, started, id });
                        Dispatched::Away
                    }
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                        Dispatched::Answered(Status::Error(ErrorCode::Busy))
                    }
                }
            }
        }
    }

    /// The next inline call kept to run with the seat lent, its arguments copied into `args`
    /// (the caller's own, not the seat's: the seat may be taken while the call runs).
    pub fn take_lent(&mut self, args: &mut Vec<u8>) -> Option<LentCall<'s, K>> {
        let call = self.lent.pop_front()?;
        args.clear();
        args.extend_from_slice(&self.lent_args[call.args.clone()]);
        if self.lent.is_empty() {
            self.lent_args.clear();
        }
        Some(call)
    }

    /// Keeps the box of a lent call's credentials for the next call that has some.
    pub fn recycle(&mut self, auth: Option<Box<lowlat_onc::AuthSys>>) {
        if let Some(b) = auth {
            self.auth_boxes.push(b);
        }
    }

    /// Where the results of calls that left the serving thread go.
    pub fn completions(&self) -> Arc<Completions<K>> {
        self.completions.clone()
    }

    /// A call taken with [`take_lent`](Self::take_lent) ran and is answered here, by `answer`,
    /// with its status and result.
    pub fn lent_done(&mut self, key: K, status: Status, result: &[u8], answer: impl FnOnce(K, Status, &[u8])) {
        let timed = self.away.iter().rposition(|a| a.key == key).map(|i| self.away.swap_remove(i));
        self.drained.completed += u64::from(timed.is_some() && self.refusing == Refusing::Stopping);
        answer(key, status, result);
        if let Some(a) = timed.filter(|a| a.started != 0 && a.id != crate::program::UNTIMED) {
            self.times.record(a.id, a.started);
        }
    }

    /// Hands `answer` every call that came back since the last look (the doorbell rang): the
    /// call, its status and its result (or reason).
    pub fn complete(&mut self, mut answer: impl FnMut(K, Status, &[u8])) {
        self.async_calls.poll_woken();
        self.completions.take(&mut self.finished);
        let Finished { calls, results } = &mut self.finished;
        for (key, status, range) in calls.drain(..) {
            let result = &results[range];
            let mut timed = None;
            if let Some(i) = self.away.iter().position(|a| a.key == key) {
                let a = self.away.swap_remove(i);
                self.drained.completed += u64::from(self.refusing == Refusing::Stopping);
                timed = (a.started != 0 && a.id != crate::program::UNTIMED).then_some((a.id, a.started));
            }
            answer(key, status, result);
            if let Some((id, started)) = timed {
                self.times.record(id, started);
            }
        }
    }

    /// From now on, runs no new call (each is answered `Busy`, saying why), or with
    /// [`Refusing::No`] runs them again.
    pub fn refuse_new_calls(&mut self, why: Refusing) {
        self.refusing = why;
    }

    /// A call that is not run: answered `Busy`, with the reason.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, reply: &mut OutBuf<'_>) -> Dispatched {
        let why = match self.refusing {
            Refusing::Stopping => {
                self.drained.refused += 1;
                STOPPING_REASON
            }
            Refusing::ShedLoad | Refusing::No => SHEDDING_REASON,
        };
        reply.extend_from_slice(why.as_bytes());
        Dispatched::Answered(Status::Error(ErrorCode::Busy))
    }

    /// Calls away from the serving thread, not yet answered.
    pub fn away(&self) -> usize {
        self.away.len()
    }

    /// Drops every call still away (the stop's time ran out), handing each to `answer` (which
    /// tells its caller it may have executed); returns how many there were.
    pub fn abandon(&mut self, mut answer: impl FnMut(K)) -> u64 {
        self.async_calls.drop_all();
        let n = self.away.len() as u64;
        for a in self.away.drain(..) {
            answer(a.key);
        }
        n
    }

    /// What the drain did so far (calls completed since it began, calls refused).
    pub fn drained(&self) -> Drained {
        self.drained
    }
}

/// Runs a procedure, turning its failure or panic into a status for the client; on failure
/// `reply` holds, instead of a result, the reason for the caller (or nothing), as the protocol
/// engines take it.
pub(crate) fn run(proc: &Procedure, ctx: &CallContext, args: &[u8], reply: &mut OutBuf<'_>) -> Status {
    let Body::Sync(handler) = &proc.body else {
        // Routed to `super::async_calls`, never here; answered as a failure rather than run
        // blocking.
        return failed(reply, (ErrorCode::ServerError, "an async procedure was run as a blocking one"));
    };
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, args, reply))) {
        Ok(Ok(())) => Status::Ok,
        Ok(Err(e)) => failed(reply, e.code_and_message()),
        Err(_) => failed(reply, (ErrorCode::ServerError, PANICKED)),
    }
}

/// What a procedure that panicked answers.
pub(crate) const PANICKED: &str = "the procedure panicked";

/// An async procedure's outcome as a status and the bytes that go with it (the result, or the
/// reason for the caller), as [`run`] leaves them.
pub(crate) fn async_outcome(r: std::thread::Result<Result<Vec<u8>, ProcError>>) -> (Status, Vec<u8>) {
    let (code, message) = match &r {
        Ok(Ok(_)) => return (Status::Ok, r.ok().and_then(Result::ok).unwrap_or_default()),
        Ok(Err(e)) => e.code_and_message(),
        Err(_) => (ErrorCode::ServerError, PANICKED),
    };
    (Status::Error(code), message.as_bytes().to_vec())
}

#[cold]
#[inline(never)]
fn failed(reply: &mut OutBuf<'_>, (code, message): (ErrorCode, &str)) -> Status {
    reply.clear();
    reply.extend_from_slice(message.as_bytes());
    Status::Error(code)
}
