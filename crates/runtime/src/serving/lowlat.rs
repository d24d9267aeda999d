//! lowlat's own protocol on a serving thread: its engine (`lowlat-proto`'s [`ServerEngine`]) and
//! the procedures behind it, as the serving loop hands them frames.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_codec::OutBuf;
use lowlat_proto::wire::HeaderView;
use lowlat_proto::{CallKey, ErrorCode, Kind, ProgramVersions, ServerEngine, Shard, Status, HEADER_LEN};

use super::dispatch::{Dispatched, Dispatcher, Refusing};
use super::routes::Services;
use super::routes::{Route, RouteCache};
use super::{serve_loop, Context, Protocol, ABANDONED_REASON};
use crate::doorbell::{Drained, EndpointThreads};
use crate::driver::{FrameHandler, ServerTransport};
use crate::program::{Body, CallContext, Procedure};
use crate::stats::{self, EndpointStats};
use crate::trace::{self, ServerTrace};

/// Serves lowlat's protocol over `t` until the endpoint is stopped.
pub(crate) fn serve<T: ServerTransport>(t: T, ctx: &Context) {
    let endpoint = endpoint(&t, ctx);
    serve_loop(t, endpoint, ctx);
}

/// lowlat's engine and procedures for `t`.
pub(crate) fn endpoint<'c, T: ServerTransport>(t: &T, ctx: &'c Context) -> impl Protocol<'c, T::Addr> + Send {
    let cfg = &ctx.config;
    let mut programs = ctx.services.versions();
    if !programs.iter().any(|p| p.program == stats::PROGRAM) {
        programs.push(ProgramVersions { program: stats::PROGRAM, low: 1, high: 1 });
    }
    let engine_cfg = lowlat_proto::ServerEngineConfig {
        programs,
        max_sessions: cfg.max_sessions,
        max_slots: cfg.max_slots,
        max_message: cfg.max_message.min(u32::MAX as usize) as u32,
        max_frame: t.max_frame().min(u32::MAX as usize) as u32,
        window: lowlat_proto::MAX_WINDOW,
        session_idle: cfg.session_idle,
        unused_idle: cfg.unused_session_idle,
        max_sessions_per_source: cfg.max_sessions_per_source,
        reliable: t.reliable(),
        // Shared memory is private to processes whose credentials were checked: no key there.
        psk: if t.private() { None } else { cfg.psk.clone() },
        // Refused at start with shm:// or without a key (`ServerBuilder::serve`).
        require_sealed: cfg.encrypt && !t.private(),
        seed: ctx.seed,
        secret: ctx.secret,
        shard: ctx.shard,
        census: ctx.census.clone(),
        ..lowlat_proto::ServerEngineConfig::default()
    };
    LowlatEndpoint {
        engine: ServerEngine::with_source(engine_cfg, T::source),
        ctx,
        dispatcher: Dispatcher::new(ctx),
        deferred: None,
        routes: RouteCache::default(),
        own: EndpointStats::default(),
        sent: Sent::default(),
        hands_over: t.hands_over(),
        hand_to: None,
        lent_times: VecDeque::new(),
    }
}

/// The stats program's procedure: run on the worker pool, it asks the endpoint's serving threads
/// (this one free meanwhile) for their counters and their transports', as `Server::stats` does.
pub(crate) fn stats_procedure(endpoint: &Arc<EndpointThreads>, services: &Services) -> Procedure {
    let shared = endpoint.clone();
    let procedures = services.procedure_names();
    Procedure {
        name: "STATS",
        body: Body::Sync(Arc::new(move |_, _, out| {
            let snap = shared.snapshot(Duration::from_secs(2));
            let mut text = snap.counters.to_text();
            crate::metrics::times_to_text(&crate::metrics::named_times(&procedures, &snap.times), &mut text);
            out.extend_from_slice(text.as_bytes());
            Ok(())
        })),
        long_running: true,
        id: crate::program::UNTIMED,
    }
}

/// The engine and the procedures. The engine reads no clock per call (it needs the time only for
/// a bind and its sweep timer), so serving a call found within the spinner's clock-free polls
/// reads none at all.
struct LowlatEndpoint<'c, A> {
    engine: ServerEngine<A>,
    ctx: &'c Context,
    dispatcher: Dispatcher<'c, CallKey>,
    /// A call finished while the transport had lent its space, whose answer is not there (an
    /// error, a result too large for the space): sent by `flush`, once the space is back, from
    /// the engine's buffer (no copy of a large result).
    deferred: Option<Finished>,
    /// Each session's program, so that a call finds its procedure without a search.
    routes: RouteCache,
    /// The counters kept here rather than in the engine (plain numbers: one thread).
    own: EndpointStats,
    sent: Sent,
    /// Whether the transport hands connections between the endpoint's threads (tcp, shm).
    hands_over: bool,
    /// The thread the last frame's connection goes to (`FrameHandler::handed_over`).
    hand_to: Option<u16>,
    /// When traced calls kept to run with the seat lent were received and dispatched, until
    /// they are answered (`ServerConfig::trace`).
    lent_times: VecDeque<(CallKey, u64, u64)>,
}

/// Notes when a traced call kept to run with the seat lent was received and dispatched (its
/// trace is recorded when it is answered); nothing to send yet.
fn lent_trace(
    ctx: &Context,
    times: &mut VecDeque<(CallKey, u64, u64)>,
    key: CallKey,
    received: u64,
    dispatched: u64,
) -> usize {
    if ctx.config.trace {
        times.push_back((key, received, dispatched));
    }
    0
}

/// The thread of the endpoint's `shard.count` that holds the session `frame` names, when that
/// is another than `shard`'s (a bind names none; a token past the last thread's range, none).
fn elsewhere(shard: Shard, frame: &[u8]) -> Option<u16> {
    if shard.count == 1 {
        return None;
    }
    let h = HeaderView::new_checked(frame).ok()?;
    if h.kind() == Kind::Bind {
        return None;
    }
    let owner = Shard::owner(h.token(), shard.count);
    (owner != shard.index && owner < shard.count).then_some(owner)
}

/// Frames and bytes sent.
#[derive(Default)]
struct Sent {
    frames: u64,
    bytes: u64,
}

impl Sent {
    /// `out`, counting what goes through it.
    fn counting<'a, A>(&'a mut self, out: &'a mut impl FnMut(&A, &[u8], &[u8])) -> impl FnMut(&A, &[u8], &[u8]) + 'a {
        move |to, h, b| {
            self.frames += 1;
            self.bytes += (h.len() + b.len()) as u64;
            out(to, h, b)
        }
    }
}

/// A call run, not yet answered, with its trace times.
struct Finished {
    key: CallKey,
    status: Status,
    times: [u64; 3],
}

/// Records a traced call's times (nothing when the server does not trace: the check is inlined
/// into every call's path, the recording is not).
#[inline]
fn push_trace(ctx: &Context, key: CallKey, times: [u64; 3]) {
    if ctx.config.trace {
        record_trace(key, times);
    }
}

#[cold]
#[inline(never)]
fn record_trace(key: CallKey, [received, dispatched, returned]: [u64; 3]) {
    trace::push_server_trace(ServerTrace {
        token: key.token,
        slot: key.slot,
        call_no: key.call_no,
        received,
        dispatched,
        returned,
        replied: trace::now_ns(),
    });
}

/// Answers a call that came back to the serving thread (from the worker pool, a future, or a
/// run with the seat lent).
fn answer<A: Copy + Eq + std::hash::Hash + std::fmt::Debug>(
    engine: &mut ServerEngine<A>,
    own: &mut EndpointStats,
    key: CallKey,
    status: Status,
    result: &[u8],
    out: &mut impl FnMut(&A, &[u8], &[u8]),
) {
    count_status(own, status);
    engine.finish_with(key, status, result, out);
}

/// Counts a call's outcome by its error code.
fn count_status(own: &mut EndpointStats, status: Status) {
    let Status::Error(code) = status else { return };
    *match code {
        ErrorCode::UnknownProcedure => &mut own.errors_unknown_procedure,
        ErrorCode::GarbageArgs => &mut own.errors_garbage_args,
        ErrorCode::TooLarge => &mut own.errors_too_large,
        ErrorCode::Busy => &mut own.busy,
        ErrorCode::ServerError | ErrorCode::UnknownSession | ErrorCode::Unknown(_) => &mut own.errors_server_error,
    } += 1;
}

impl<'c, A: Copy + Eq + std::hash::Hash + std::fmt::Debug> FrameHandler<A> for LowlatEndpoint<'c, A> {
    #[inline]
    fn handed_over(&mut self) -> Option<u16> {
        self.hand_to.take()
    }

    fn handle<O: FnMut(&A, &[u8], &[u8])>(&mut self, from: A, frame: &[u8], lent: &mut [u8], out: &mut O) -> usize {
        let LowlatEndpoint { engine, ctx, dispatcher, deferred, routes, own, sent, hand_to, hands_over, lent_times } =
            self;
        let ctx: &'c Context = ctx;
        let tracing = ctx.config.trace;
        let now_ns = || if tracing { trace::now_ns() } else { 0 };
        let received = now_ns();
        own.frames_in += 1;
        own.bytes_in += frame.len() as u64;
        let out = &mut sent.counting(out);
        // A call sent whole over a reliable channel is recognised by its header; anything else
        // goes through the engine's general decode.
        let call = match engine.take_whole_call(from, frame) {
            Some(call) => call,
            None => {
                // Not a call of a session here: perhaps of another thread's, whose connection
                // this thread took (a frame the engine would refuse as of an unknown session).
                if *hands_over {
                    *hand_to = elsewhere(ctx.shard, frame);
                    if hand_to.is_some() {
                        return 0;
                    }
                }
                match engine.handle(from, frame, Instant::now, out) {
                    Some(call) => call,
                    None => return 0,
                }
            }
        };
        let key = call.key;
        // One call in `timing::SAMPLE_EVERY` is timed, from here to its answer.
        let started = if dispatcher.sample() { trace::now_ns() } else { 0 };
        let dispatched = now_ns();
        let cctx = CallContext {
            program: call.program,
            version: call.version,
            proc_no: call.proc_no,
            client_order: call.client_order,
            auth: None,
        };
        let route = match routes.route(&ctx.services, key, call.program, call.version, call.proc_no) {
            Route::Missing if call.program == stats::PROGRAM && call.proc_no == stats::STATS => {
                Route::Worker(&ctx.stats_proc)
            }
            r => r,
        };
        // The answer is written where the transport lends room for it after the header (a
        // shared-memory result ring: sent from where it lies), or else into the engine's buffer.
        let lent_len = lent.len();
        let (status, placed) = if let Some((head, body)) = lent.split_first_chunk_mut::<HEADER_LEN>() {
            let mut reply = OutBuf::in_region(body, call.reply);
            match dispatcher.dispatch(route, key, cctx, call.args, &mut reply, started) {
                Dispatched::Answered(status) => (status, reply.placed().map(|n| (head, n))),
                Dispatched::Away => return 0,
                Dispatched::Lent => return lent_trace(ctx, lent_times, key, received, dispatched),
            }
        } else {
            match dispatcher.dispatch(route, key, cctx, call.args, &mut call.reply.into(), started) {
                Dispatched::Answered(status) => (status, None),
                Dispatched::Away => return 0,
                Dispatched::Lent => return lent_trace(ctx, lent_times, key, received, dispatched),
            }
        };
        count_status(own, status);
        let times = [received, dispatched, now_ns()];
        match placed {
            Some((head, n)) => {
                if engine.finish_placed(key, status, n, head) {
                    // Sent by the transport from where it lies: counted here.
                    own.frames_out += 1;
                    own.bytes_out += (HEADER_LEN + n) as u64;
                    push_trace(ctx, key, times);
                    return HEADER_LEN + n;
                }
                engine.finish_with(key, status, &lent[HEADER_LEN..HEADER_LEN + n], out);
            }
            None if lent_len > 0 => {
                *deferred = Some(Finished { key, status, times });
                return 0;
            }
            None => {
                engine.finish(key, status, out);
            }
        }
        push_trace(ctx, key, times);
        0
    }

    fn flush<O: FnMut(&A, &[u8], &[u8])>(&mut self, out: &mut O) {
        if let Some(f) = self.deferred.take() {
            self.engine.finish(f.key, f.status, &mut self.sent.counting(out));
            push_trace(self.ctx, f.key, f.times);
        }
    }
}

impl<'c, A: Copy + Eq + std::hash::Hash + std::fmt::Debug> Protocol<'c, A> for LowlatEndpoint<'c, A> {
    type Key = CallKey;

    fn dispatcher(&mut self) -> &mut Dispatcher<'c, CallKey> {
        &mut self.dispatcher
    }

    fn answer_lent(&mut self, key: CallKey, status: Status, result: &[u8], out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let LowlatEndpoint { engine, dispatcher, own, sent, ctx, lent_times, .. } = self;
        let out = &mut sent.counting(out);
        let returned = if ctx.config.trace { trace::now_ns() } else { 0 };
        dispatcher.lent_done(key, status, result, |key, status, result| answer(engine, own, key, status, result, out));
        let traced = lent_times.iter().position(|(k, _, _)| *k == key).and_then(|i| lent_times.remove(i));
        if let Some((_, received, dispatched)) = traced {
            push_trace(ctx, key, [received, dispatched, returned]);
        }
    }

    fn complete(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let LowlatEndpoint { engine, dispatcher, own, sent, lent_times, .. } = self;
        let out = &mut sent.counting(out);
        dispatcher.complete(|key, status, result| {
            // A traced call whose seat was taken while it ran comes back here: not traced.
            if !lent_times.is_empty() {
                lent_times.retain(|(k, _, _)| *k != key);
            }
            answer(engine, own, key, status, result, out)
        });
    }

    fn refuse_new_calls(&mut self, why: Refusing) {
        self.dispatcher.refuse_new_calls(why);
    }

    fn in_pool(&self) -> usize {
        self.dispatcher.away()
    }

    fn abandon(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) -> u64 {
        let LowlatEndpoint { engine, dispatcher, own, sent, .. } = self;
        let out = &mut sent.counting(out);
        dispatcher.abandon(|key| {
            own.errors_server_error += 1;
            engine.finish_with(key, Status::Error(ErrorCode::ServerError), ABANDONED_REASON.as_bytes(), out);
        })
    }

    fn drained(&self) -> Drained {
        self.dispatcher.drained()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
    }

    fn forget_peer(&mut self, peer: &A) {
        self.engine.forget_peer(peer);
    }

    fn times(&self) -> &[super::timing::ProcedureTimes] {
        self.dispatcher.times.snapshot()
    }

    fn count(&self, into: &mut EndpointStats) {
        let e = &self.engine.stats;
        let own = &self.own;
        let r = &e.refused;
        let mine = EndpointStats {
            sessions_open: self.engine.session_count() as u64,
            sessions_expired: e.sessions_expired,
            sessions_reclaimed: e.sessions_reclaimed,
            sessions_closed: e.sessions_closed,
            binds_granted: e.binds_granted,
            binds_repeated: e.binds_repeated,
            binds_refused: r.total(),
            refused_unknown_program: r.unknown_program,
            refused_version: r.version,
            refused_protocol: r.protocol,
            refused_malformed: r.malformed,
            refused_full: r.full,
            refused_source_limit: r.source_limit,
            refused_key_required: r.key_required,
            refused_key_not_expected: r.key_not_expected,
            refused_bad_key: r.bad_key,
            refused_encryption: r.encryption,
            cookies_issued: e.cookies_issued,
            cookies_rejected: e.cookies_rejected,
            calls: e.calls,
            duplicates: e.duplicates,
            working: e.working,
            stale: e.stale,
            retransmits_received: e.retransmits_received,
            fragments_received: e.fragments_received,
            errors_too_large: own.errors_too_large + e.too_large,
            unknown_session: e.unknown_session,
            malformed: e.malformed,
            mac_failures: e.mac_failures,
            unproven: e.unproven,
            path_challenges: e.path_challenges,
            paths_validated: e.paths_validated,
            path_failures: e.path_failures,
            withheld: e.withheld,
            executed: self.dispatcher.executed,
            frames_out: own.frames_out + self.sent.frames,
            bytes_out: own.bytes_out + self.sent.bytes,
            ..*own
        };
        *into = mine.plus(into);
    }
}
