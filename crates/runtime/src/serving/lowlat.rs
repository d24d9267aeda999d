//! lowlat's own protocol on a serving thread: its engine (`lowlat-proto`'s [`ServerEngine`]) and
//! the procedures behind it, as the serving loop hands them frames.

use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::Instant;

use lowlat_codec::OutBuf;
use lowlat_proto::{CallKey, ErrorCode, ServerEngine, Status, HEADER_LEN};

use super::{serve_loop, Context, Protocol, ABANDONED_REASON, STOPPING_REASON};
use crate::doorbell::Drained;
use crate::driver::{FrameHandler, ServerTransport};
use crate::service::{self, CallContext, Route, RouteCache};
use crate::trace::{self, ServerTrace};
use crate::workers::{Completions, Job};

/// Serves lowlat's protocol over `t` until the endpoint is stopped.
pub(crate) fn serve<T: ServerTransport>(t: T, ctx: &Context) {
    let engine_cfg = lowlat_proto::ServerConfig {
        programs: ctx.services.versions(),
        max_sessions: ctx.config.max_sessions,
        max_slots: ctx.config.max_slots,
        max_message: ctx.config.max_message.min(u32::MAX as usize) as u32,
        max_frame: t.max_frame().min(u32::MAX as usize) as u32,
        window: lowlat_proto::MAX_WINDOW,
        session_idle: ctx.config.session_idle,
        seed: ctx.seed,
    };
    let endpoint = LowlatEndpoint {
        engine: ServerEngine::new(engine_cfg),
        ctx,
        completions: Completions::new(ctx.shared.clone()),
        finished: Vec::new(),
        deferred: None,
        routes: RouteCache::default(),
        in_pool: Vec::new(),
        refusing: false,
        drained: Drained::default(),
    };
    serve_loop(t, endpoint, ctx);
}

/// The engine and the procedures. The engine reads no clock per call (it needs the time only for
/// a bind and its sweep timer), so serving a call found within the spinner's clock-free polls
/// reads none at all.
struct LowlatEndpoint<'c, A> {
    engine: ServerEngine<A>,
    ctx: &'c Context,
    completions: Arc<Completions<CallKey>>,
    /// Taken from `completions` when the doorbell rings (kept, so taking allocates nothing).
    finished: Vec<(CallKey, Status, Vec<u8>)>,
    /// A call finished while the transport had lent its space, whose answer is not there (an
    /// error, a result too large for the space): sent by `flush`, once the space is back, from
    /// the engine's buffer (no copy of a large result).
    deferred: Option<Finished>,
    /// Each session's program, so that a call finds its procedure without a search.
    routes: RouteCache,
    /// The calls on the worker pool, not yet answered.
    in_pool: Vec<CallKey>,
    /// The server is stopping: new calls are answered, not run.
    refusing: bool,
    drained: Drained,
}

/// A call run, not yet answered, with its trace times.
struct Finished {
    key: CallKey,
    status: Status,
    times: [u64; 3],
}

impl<A> LowlatEndpoint<'_, A> {
    fn trace(&self, key: CallKey, [received, dispatched, returned]: [u64; 3]) {
        if self.ctx.config.trace {
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
    }
}

impl<A: Copy + Eq + std::fmt::Debug> FrameHandler<A> for LowlatEndpoint<'_, A> {
    fn handle<O: FnMut(&A, &[u8], &[u8])>(&mut self, from: A, frame: &[u8], lent: &mut [u8], out: &mut O) -> usize {
        let ctx = self.ctx;
        let now_ns = || if ctx.config.trace { trace::now_ns() } else { 0 };
        let received = now_ns();
        let engine = &mut self.engine;
        let out = &mut |to: &A, h: &[u8; HEADER_LEN], b: &[u8]| out(to, h, b);
        // A call sent whole over a reliable channel is recognised by its header; anything else
        // goes through the engine's general decode.
        let call = match engine.take_whole_call(from, frame) {
            Some(call) => call,
            None => match engine.handle(from, frame, Instant::now, out) {
                Some(call) => call,
                None => return 0,
            },
        };
        let key = call.key;
        let dispatched = now_ns();
        let cctx = CallContext {
            program: call.program,
            version: call.version,
            proc_no: call.proc_no,
            client_order: call.client_order,
            auth: None,
        };
        // Bytes of the result the procedure wrote into `lent`, after room for the header.
        let mut placed = None;
        let status = match self.routes.route(&ctx.services, key, call.program, call.version, call.proc_no) {
            _ if self.refusing => {
                self.drained.refused += 1;
                call.reply.extend_from_slice(STOPPING_REASON.as_bytes());
                Status::Error(ErrorCode::Busy)
            }
            Route::Missing => Status::Error(ErrorCode::UnknownProcedure),
            Route::Inline(p) if lent.len() >= HEADER_LEN => {
                let mut reply = OutBuf::in_region(&mut lent[HEADER_LEN..], call.reply);
                let status = service::run(p, &cctx, call.args, &mut reply);
                placed = reply.placed();
                status
            }
            Route::Inline(p) => service::run(p, &cctx, call.args, &mut call.reply.into()),
            Route::Worker(p) => {
                let job = Job {
                    proc: p.clone(),
                    ctx: cctx,
                    args: call.args.to_vec(),
                    reply_to: self.completions.reply_to(key),
                };
                match ctx.workers.try_send(job) {
                    Ok(()) => {
                        self.in_pool.push(key);
                        return 0;
                    }
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Status::Error(ErrorCode::Busy),
                }
            }
        };
        let times = [received, dispatched, now_ns()];
        match placed {
            Some(n) => match engine.finish_placed(key, status, n) {
                Some(head) => {
                    lent[..HEADER_LEN].copy_from_slice(&head);
                    self.trace(key, times);
                    return HEADER_LEN + n;
                }
                None => {
                    engine.finish_with(key, status, &lent[HEADER_LEN..HEADER_LEN + n], out);
                }
            },
            None if !lent.is_empty() => {
                self.deferred = Some(Finished { key, status, times });
                return 0;
            }
            None => {
                engine.finish(key, status, out);
            }
        }
        self.trace(key, times);
        0
    }

    fn flush<O: FnMut(&A, &[u8], &[u8])>(&mut self, out: &mut O) {
        if let Some(f) = self.deferred.take() {
            self.engine.finish(f.key, f.status, &mut |to: &A, h: &[u8; HEADER_LEN], b: &[u8]| out(to, h, b));
            self.trace(f.key, f.times);
        }
    }
}

impl<A: Copy + Eq + std::fmt::Debug> Protocol<A> for LowlatEndpoint<'_, A> {
    fn complete(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        self.completions.take(&mut self.finished);
        let out = &mut |to: &A, h: &[u8; HEADER_LEN], b: &[u8]| out(to, h, b);
        for (key, status, reply) in self.finished.drain(..) {
            if let Some(i) = self.in_pool.iter().position(|k| *k == key) {
                self.in_pool.swap_remove(i);
                self.drained.completed += u64::from(self.refusing);
            }
            self.engine.finish_with(key, status, &reply, out);
        }
    }

    fn refuse_new_calls(&mut self) {
        self.refusing = true;
    }

    fn in_pool(&self) -> usize {
        self.in_pool.len()
    }

    fn abandon(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) -> u64 {
        let out = &mut |to: &A, h: &[u8; HEADER_LEN], b: &[u8]| out(to, h, b);
        let n = self.in_pool.len() as u64;
        for key in self.in_pool.drain(..) {
            self.engine.finish_with(key, Status::Error(ErrorCode::ServerError), ABANDONED_REASON.as_bytes(), out);
        }
        n
    }

    fn drained(&self) -> Drained {
        self.drained
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
}
