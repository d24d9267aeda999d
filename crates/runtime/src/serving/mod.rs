//! Serving one endpoint: each of its threads runs a protocol's engine over a transport of its
//! own and, by default, the procedures themselves (dispatch from the receiving thread);
//! long-running procedures go to the worker pool (`crate::workers`) and their results come back
//! through the thread's doorbell (an eventfd) that wakes it.
//!
//! An endpoint of several threads (`ServerConfig::threads`) is sharded, as eRPC and Seastar
//! shard: each thread has its own transport (over udp a socket in one `SO_REUSEPORT` group),
//! its own engine making sessions in its own range of tokens (`lowlat_proto::Shard`), and over
//! udp the kernel steers each datagram to the thread holding its session by the token in its header (a classic-BPF
//! program on the group, made in `crate::driver::udp`); a bind, which has no
//! session yet, goes by the hash of its addresses, and the thread that answers it makes the
//! session in its own range. Nothing is shared on the call path: the threads share only the
//! secret (a cookie one issued, another accepts), the census of sessions (the endpoint's limits,
//! touched by binds and sweeps) and the worker pool. ONC RPC's datagrams, which name no
//! session, go by the hash of their addresses: a client's retransmission reaches the thread
//! whose duplicate cache holds its call. Over eth the threads' sockets form a `PACKET_FANOUT`
//! group steered by the same rule (binds by their nonce). Over the stream transports (tcp,
//! shm) there is no kernel steering: the threads' servers form a group, connections are admitted by the threads
//! in turn, and a thread that reads a frame of a session another holds
//! (`FrameHandler::elsewhere`) hands the connection, frame unread, to that thread, once per
//! connection.
//!
//! With several threads, each thread's state is a seat ([`seats`]): an inline procedure runs
//! with its thread's seat lent, and a procedure that blocks past a millisecond has its seat
//! taken by a free thread (a spare, one per endpoint), so it stalls only its own call; an
//! endpoint of one thread runs procedures where they arrive, with nothing lent, and one that
//! blocks stalls every session. Procedures known to be slow belong on the worker pool
//! (`long_running`).
//!
//! The loop ([`serve_loop`]) is the same for every transport and protocol: spin, then block;
//! hand each frame to the [`Protocol`]; send what the workers finished when the doorbell rings;
//! run the protocol's timer; drain, then end, when the server stops. The protocols: lowlat's own
//! ([`lowlat`]) and ONC RPC ([`onc`]).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat_wait::{SpinPolicy, Spinner};

use self::dispatch::Refusing;
use self::routes::Services;
use self::workers::Job;
use lowlat_proto::{Census, Shard, Status};

use crate::doorbell::{Drained, EndpointShared, EndpointThreads, DRAINING, RUNNING, SHEDDING};
use crate::driver::{Bind, FrameHandler, Polled, ServerTransport};
use crate::stats::EndpointStats;
use crate::{Error, ServerConfig};

pub(crate) mod async_calls;
pub(crate) mod dispatch;
pub(crate) mod lowlat;
pub(crate) mod onc;
pub(crate) mod routes;
pub(crate) mod seats;
pub(crate) mod timing;
pub(crate) mod workers;

/// What a serving thread is given.
pub(crate) struct Context {
    pub services: Arc<Services>,
    pub config: ServerConfig,
    /// This thread's doorbell, state and board.
    pub shared: Arc<EndpointShared>,
    /// Every thread of the endpoint (this one's among them): what the stats program reads.
    pub endpoint: Arc<EndpointThreads>,
    /// Which of the endpoint's threads this is.
    pub shard: Shard,
    /// The sessions alive across the endpoint's threads, when there are several.
    pub census: Option<Arc<Census>>,
    pub workers: SyncSender<Job>,
    /// The seed of the endpoint engine's randomness (session tokens, cache hashing), from the
    /// kernel.
    pub seed: u64,
    /// The server's secret: cookie keys and the random bits of session tokens.
    pub secret: [u8; 32],
    /// Told once the endpoint has set itself up and is about to serve (`Server::serve` waits
    /// for it, so that nothing of a thread's start-up happens after it returns).
    pub ready: SyncSender<()>,
    /// The stats program's procedure (answered by every endpoint of lowlat's protocol).
    pub stats_proc: crate::program::Procedure,
}

/// A protocol as the serving loop drives it: frames in (as a [`FrameHandler`]), the results the
/// workers finished, a timer, peers whose connections closed, and a graceful stop.
pub(crate) trait Protocol<'s, A>: FrameHandler<A> {
    /// How the protocol names a call to its dispatcher.
    type Key: Clone + PartialEq + Send + dispatch::CallSpan + 'static;
    /// The protocol's dispatcher.
    fn dispatcher(&mut self) -> &mut dispatch::Dispatcher<'s, Self::Key>;
    /// Answers a call run with the seat lent (`Dispatcher::take_lent`), there.
    fn answer_lent(&mut self, key: Self::Key, status: Status, result: &[u8], out: &mut impl FnMut(&A, &[u8], &[u8]));
    /// Sends the results the workers finished (the doorbell rang).
    fn complete(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8]));
    /// From now on, runs no new call (each is answered `Busy`, saying why), or with
    /// [`Refusing::No`] runs them again.
    fn refuse_new_calls(&mut self, why: Refusing);
    /// Calls on the worker pool, not yet answered.
    fn in_pool(&self) -> usize;
    /// Answers every call still on the worker pool that it may have executed (the stop's time
    /// ran out); returns how many there were.
    fn abandon(&mut self, out: &mut impl FnMut(&A, &[u8], &[u8])) -> u64;
    /// What the drain did so far (calls completed since it began, calls refused).
    fn drained(&self) -> Drained;
    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    /// A peer's connection closed (stream transports).
    fn forget_peer(&mut self, _peer: &A) {}
    /// Adds the protocol's counters (engine, dispatch, bytes).
    fn count(&self, into: &mut EndpointStats);
    /// The sampled calls' durations, per procedure id.
    fn times(&self) -> &[timing::ProcedureTimes];
}

/// The endpoint's counters now: the protocol's and the transport's (on the serving thread).
pub(crate) fn counters<'s, T: ServerTransport, P: Protocol<'s, T::Addr>>(t: &T, protocol: &P) -> EndpointStats {
    let mut c = EndpointStats::default();
    protocol.count(&mut c);
    t.count(&mut c);
    // Read here, on the serving thread: its own clock.
    c.serving_cpu_ns = lowlat_sys::process::thread_cpu_time().as_nanos() as u64;
    c
}

/// Serves a bound transport, one per serving thread of the endpoint (each named `thread`, with
/// its context: as many contexts as transports), with lowlat's protocol or with ONC RPC,
/// registered with rpcbind first when asked. Gives the URI clients should use (the real port
/// when 0 was asked for) and the threads.
pub(crate) struct Start {
    pub thread: String,
    pub contexts: Vec<Context>,
}

impl Bind for Start {
    type Out = Result<(String, Vec<JoinHandle<()>>), Error>;

    fn lowlat<T: ServerTransport + Send + 'static>(self, ts: Vec<T>) -> Self::Out {
        let local = ts[0].local_uri();
        if ts.len() == 1 {
            return Ok((
                local,
                spawn_each(&self.thread, ts.into_iter().zip(self.contexts), |t, ctx| lowlat::serve(t, &ctx))?,
            ));
        }
        let name = self.thread.clone();
        let threads = spawn_group(&self.thread, ts, self.contexts, move |ts, contexts, started| {
            serve_group(&name, ts, contexts, lowlat::endpoint, started)
        })?;
        Ok((local, threads))
    }

    fn onc<T: ServerTransport + Send + 'static>(self, ts: Vec<T>, netid: onc::Netid, at: SocketAddr) -> Self::Out {
        let local = ts[0].local_uri();
        // Registered once for the endpoint; unregistered by the first of its threads to end (of
        // several, by the thread that waits for them).
        let registration = Arc::new(Mutex::new(Some(onc::Registration::register(&self.contexts[0], netid, at))));
        if ts.len() > 1 {
            let name = self.thread.clone();
            let threads = spawn_group(&self.thread, ts, self.contexts, move |ts, contexts, started| {
                serve_group(&name, ts, contexts, |t, ctx| onc::endpoint(t, ctx, netid), started);
                if let Some(r) = registration.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    r.unregister();
                }
            })?;
            return Ok((local, threads));
        }
        let serve = move |t, ctx: Context| {
            onc::serve(t, &ctx, netid);
            if let Some(r) = registration.lock().unwrap_or_else(|p| p.into_inner()).take() {
                r.unregister();
            }
        };
        Ok((local, spawn_each(&self.thread, ts.into_iter().zip(self.contexts), serve)?))
    }
}

/// Runs `serve` with each transport and its context on a new thread named `name`; if one
/// cannot start, stops and joins those that did.
fn spawn_each<T: Send + 'static>(
    name: &str,
    each: impl Iterator<Item = (T, Context)>,
    serve: impl Fn(T, Context) + Clone + Send + 'static,
) -> Result<Vec<JoinHandle<()>>, Error> {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    for (t, ctx) in each {
        let endpoint = ctx.endpoint.clone();
        let serve = serve.clone();
        match spawn(name.to_string(), move || serve(t, ctx)) {
            Ok(h) => threads.push(h),
            Err(e) => {
                endpoint.stop();
                threads.into_iter().for_each(|h| drop(h.join()));
                return Err(e);
            }
        }
    }
    Ok(threads)
}

/// Runs `serve` on a new thread named `name`.
fn spawn(name: String, serve: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            // Termination signals go to the application's threads, never to a serving one
            // (`Server::wait_for_signal` takes them synchronously).
            let _ = lowlat_sys::block_server_signals();
            serve();
        })
        .map_err(|e| Error::io("spawn serving thread", e))
}

/// The reason a call that arrives while the server drains is not run.
pub(crate) const STOPPING_REASON: &str = "the server is stopping";
/// The reason a call that arrives while the server sheds load is not run.
pub(crate) const SHEDDING_REASON: &str = "the server is shedding load";
/// The reason given for a call still on the worker pool when a stop's time runs out.
pub(crate) const ABANDONED_REASON: &str = "the server stopped before the call finished, so it may have executed";

enum Ready<A> {
    Served,
    Closed(A),
    Doorbell,
}

/// Under a flood, the timer is looked at once every this many frames served back to back (a
/// clock read amortised to nothing per call).
const TIMER_EVERY: u32 = 64;

/// How long a draining endpoint waits for a frame before it counts as quiet: with no call left
/// on the worker pool, a quiet endpoint has drained.
const DRAIN_QUIET: Duration = Duration::from_millis(2);

/// The serving loop of an endpoint of one thread: receive, run, reply; spin, then block. Once
/// asked to drain (`EndpointShared::drain`) it runs no new call, and ends when the worker pool
/// holds none of its calls and nothing more arrives; asked to stop, it answers what the pool
/// still holds and ends at once.
pub(crate) fn serve_loop<'s, T: ServerTransport, P: Protocol<'s, T::Addr>>(t: T, protocol: P, ctx: &'s Context) {
    pin(ctx);
    let mut seat = ServingSeat::new(t, protocol, ctx);
    // The channel has room for every endpoint's word, so this never blocks; the server may have
    // stopped waiting (its bounded wait ran out), which is not an error.
    let _ = ctx.ready.try_send(());
    while seat.turn() != seats::Turned::Ended {}
}

/// Pins the calling thread as `ServerConfig::pin_cpus` says for the serving thread `ctx` is.
fn pin(ctx: &Context) {
    let pins = &ctx.config.pin_cpus;
    if !pins.is_empty() {
        let _ = lowlat_sys::pin_to_cpu(pins[usize::from(ctx.shard.index) % pins.len()]);
    }
}

/// Serves an endpoint of several threads (one per transport and context) with the protocol
/// `make` makes for each, from the calling thread, which returns when every serving thread
/// has: each serving thread's state is a seat a free thread takes when a procedure blocks it,
/// and a spare thread is that free thread until one of the others is ([`seats`]). `started`
/// is told whether every thread started (if not, the endpoint was stopped).
fn serve_group<'s, T, P>(
    name: &str,
    ts: Vec<T>,
    contexts: &'s [Context],
    make: impl Fn(&T, &'s Context) -> P,
    started: SyncSender<Result<(), Error>>,
) where
    T: ServerTransport,
    P: Protocol<'s, T::Addr> + Send,
{
    let each = ts.into_iter().zip(contexts).map(|(t, ctx)| {
        let protocol = make(&t, ctx);
        ServingSeat { quiet_after: Some(seats::QUIET), ..ServingSeat::new(t, protocol, ctx) }
    });
    let seats = seats::Seats::new(each.collect(), contexts[0].config.pin_cpus.clone());
    let seats = &seats;
    std::thread::scope(|scope| {
        let mut result = Ok(());
        for (i, ctx) in contexts.iter().enumerate() {
            let spawned = result.is_ok().then(|| {
                std::thread::Builder::new().name(name.to_string()).spawn_scoped(scope, move || {
                    let _ = lowlat_sys::block_server_signals();
                    pin(ctx);
                    let _ = ctx.ready.try_send(());
                    seats.home(i);
                })
            });
            match spawned {
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    result = Err(Error::io("spawn serving thread", e));
                    seats.abandon(i);
                }
                None => seats.abandon(i),
            }
        }
        if result.is_ok() {
            let spare = std::thread::Builder::new().name("lowlat-spare".to_string()).spawn_scoped(scope, move || {
                let _ = lowlat_sys::block_server_signals();
                seats.spare();
            });
            result = spare.map(drop).map_err(|e| Error::io("spawn serving thread", e));
        }
        if result.is_err() {
            contexts[0].endpoint.stop();
        }
        let _ = started.send(result);
    });
}

/// Starts [`serve_group`] on a thread of its own; returns it once every serving thread started.
fn spawn_group<T: ServerTransport + 'static>(
    name: &str,
    ts: Vec<T>,
    contexts: Vec<Context>,
    serve: impl FnOnce(Vec<T>, &[Context], SyncSender<Result<(), Error>>) + Send + 'static,
) -> Result<Vec<JoinHandle<()>>, Error> {
    let (started, start) = std::sync::mpsc::sync_channel(1);
    let group = spawn(name.to_string(), move || serve(ts, &contexts, started))?;
    match start.recv() {
        Ok(Ok(())) => Ok(vec![group]),
        Ok(Err(e)) => {
            let _ = group.join();
            Err(e)
        }
        Err(_) => {
            let _ = group.join();
            Err(Error::io("spawn serving thread", io::Error::other("the endpoint's first thread ended at start")))
        }
    }
}

/// What the serving loop keeps: its transport, its protocol, and where it is in its life; on an
/// endpoint of several threads, a seat the threads take turns holding ([`seats`]).
struct ServingSeat<'s, T, P> {
    t: T,
    protocol: P,
    ctx: &'s Context,
    buf: Vec<u8>,
    spinner: Spinner,
    /// The wait while the pool is full.
    saturated: Spinner,
    pool_capacity: usize,
    draining: bool,
    /// The state the loop last took into account (`EndpointShared::state`).
    serving_in: u8,
    /// Frames served back to back since the timer was last looked at: the wait checks its
    /// deadline only when nothing is ready, so under a flood that always has a frame queued the
    /// timer (session sweeps) would never run; every TIMER_EVERY frames it is looked at anyway.
    served_running: u32,
    /// On an endpoint of several threads, a wait that finds nothing ends after this long, so
    /// that its thread looks at the other seats (`seats::Seats::look`) even when idle.
    quiet_after: Option<Duration>,
}

impl<'s, T: ServerTransport, P: Protocol<'s, T::Addr>> ServingSeat<'s, T, P> {
    fn new(t: T, protocol: P, ctx: &'s Context) -> Self {
        ServingSeat {
            buf: Vec::with_capacity(t.max_frame().min(1 << 20)),
            t,
            protocol,
            ctx,
            spinner: crate::marks::spinner(ctx.config.spin),
            // While this endpoint's calls fill the worker pool, every call that arrives is
            // answered Busy, and a spin for the next one takes the CPU the workers (and other
            // endpoints) need: with one worker busy and the serving thread spinning adaptively
            // for a flood, a well-behaved client on another endpoint of a two-CPU machine saw
            // its p99 rise 4.5-11.7x; blocking here, 1.4-1.9x. So the loop blocks while the
            // pool is full.
            saturated: Spinner::new(SpinPolicy::Block),
            pool_capacity: ctx.config.workers.max(1) + ctx.config.worker_queue.max(1),
            draining: false,
            serving_in: RUNNING,
            served_running: 0,
            quiet_after: None,
        }
    }

    /// One turn of the loop: a wait, and what it found served.
    #[inline(always)]
    fn turn(&mut self) -> seats::Turned {
        let ServingSeat {
            t,
            protocol,
            ctx,
            buf,
            spinner,
            saturated,
            pool_capacity,
            draining,
            serving_in,
            served_running,
            quiet_after,
        } = self;
        let shared = &ctx.shared;
        // One compare a turn: the state changes rarely (shed, resume, drain, stop).
        let state = shared.state.load(Ordering::Acquire);
        if state != *serving_in {
            match state {
                RUNNING => protocol.refuse_new_calls(Refusing::No),
                SHEDDING => protocol.refuse_new_calls(Refusing::ShedLoad),
                DRAINING => {
                    *draining = true;
                    protocol.refuse_new_calls(Refusing::Stopping);
                    // Answers the workers finished before the drain began go now.
                    protocol.complete(&mut |to, h, b| t.send(to, h, b));
                }
                _ => {
                    let abandoned = protocol.abandon(&mut |to, h, b| t.send(to, h, b));
                    let mut d = protocol.drained();
                    d.abandoned = abandoned;
                    end_drain(shared, d);
                    return seats::Turned::Ended;
                }
            }
            *serving_in = state;
        }
        let timer = protocol.poll_timeout();
        let timer = if *draining {
            let quiet = Instant::now() + DRAIN_QUIET;
            Some(timer.map_or(quiet, |t| t.min(quiet)))
        } else {
            timer
        };
        let waiter = if protocol.in_pool() >= *pool_capacity { saturated } else { spinner };
        let doorbell = shared.doorbell.raw_fd();
        let mut io = (&mut *t, &mut *buf, &mut *protocol);
        // The deadline is worked out only once the wait reads the clock (past its clock-free
        // polls): capped by `quiet_after`, it costs a call found at once nothing.
        let quiet_after = *quiet_after;
        let deadline = move || match quiet_after {
            None => timer,
            Some(q) => {
                let quiet = Instant::now() + q;
                Some(timer.map_or(quiet, |t| t.min(quiet)))
            }
        };
        let got = waiter.wait_on_lazy(
            deadline,
            &mut io,
            |(t, buf, protocol)| {
                // Counted from the moment a look finds a frame (`lowlat_sys::callgrind`).
                crate::marks::collect(false);
                if shared.doorbell.take() {
                    return Ok(Some(Ready::Doorbell));
                }
                Ok::<_, io::Error>(t.serve_next(buf, &mut **protocol)?.map(|r| match r {
                    Polled::Served => Ready::Served,
                    Polled::Closed(a) => Ready::Closed(a),
                }))
            },
            |(t, _, _), timeout| t.block(doorbell, timeout),
        );
        match got {
            Ok(Some(Ready::Served)) => {
                *served_running += 1;
                if *served_running >= TIMER_EVERY {
                    *served_running = 0;
                    let now = Instant::now();
                    if timer.is_some_and(|t| now >= t) {
                        // Housekeeping on a timer (session sweeps), not a call's work: not
                        // counted with the call it happens to follow.
                        crate::marks::collect(false);
                        protocol.handle_timeout(now);
                    }
                }
            }
            Ok(Some(Ready::Closed(peer))) => protocol.forget_peer(&peer),
            Ok(Some(Ready::Doorbell)) => {
                protocol.complete(&mut |to, h, b| t.send(to, h, b));
                if shared.stats.wanted() {
                    shared.stats.publish(counters(t, protocol), protocol.times());
                }
            }
            Ok(None) if *draining && protocol.in_pool() == 0 => {
                end_drain(shared, protocol.drained());
                return seats::Turned::Ended;
            }
            Ok(None) => {
                *served_running = 0;
                let now = Instant::now();
                if quiet_after.is_none() || timer.is_some_and(|t| now >= t) {
                    protocol.handle_timeout(now);
                }
                return seats::Turned::Quiet;
            }
            Err(e) => {
                // The socket itself failed (not a peer): nothing to serve with any more.
                tracing::error!(
                    target: "lowlat::server",
                    endpoint = %t.local_uri(),
                    reason = %e,
                    "serving thread stopped: the endpoint serves no more",
                );
                return seats::Turned::Ended;
            }
        }
        seats::Turned::Served
    }
}

impl<'s, T: ServerTransport, P: Protocol<'s, T::Addr> + Send> seats::Seat for ServingSeat<'s, T, P> {
    type Call = dispatch::LentCall<'s, P::Key>;
    type Away = Arc<workers::Completions<P::Key>>;

    fn turn(&mut self) -> seats::Turned {
        ServingSeat::turn(self)
    }

    fn take_lent(&mut self, scratch: &mut seats::Scratch) -> Option<Self::Call> {
        self.protocol.dispatcher().take_lent(&mut scratch.args)
    }

    fn run_lent(call: &Self::Call, scratch: &mut seats::Scratch) -> Status {
        call.run(&scratch.args, &mut scratch.reply)
    }

    fn answer_lent(&mut self, call: Self::Call, status: Status, result: &[u8]) {
        let ServingSeat { t, protocol, .. } = self;
        protocol.answer_lent(call.key, status, result, &mut |to, h, b| t.send(to, h, b));
        protocol.dispatcher().recycle(call.auth);
        t.answered();
    }

    fn away(&mut self) -> Self::Away {
        self.protocol.dispatcher().completions()
    }

    fn deliver(completions: &Self::Away, call: Self::Call, status: Status, result: &[u8]) {
        completions.deliver(call.key, status, result);
    }
}

fn end_drain(shared: &EndpointShared, d: Drained) {
    shared.drained.lock().unwrap_or_else(|p| p.into_inner()).add(d);
}
