//! The server: one thread per endpoint runs the protocol engine and, by default, the procedures
//! themselves (dispatch from the receiving thread); long-running procedures go to a worker pool
//! and their results come back through a doorbell (an eventfd) that wakes the endpoint's thread.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use lowlat_codec::OutBuf;
use lowlat_proto::{CallKey, ErrorCode, ServerEngine, Status, HEADER_LEN};
use lowlat_transport::Spinner;

use crate::driver::{self, AnyServer, FrameHandler, Polled, ServerTransport};
use crate::service::{self, CallContext, Procedure, Route, RouteCache, Services};
use crate::trace::{self, ServerTrace};
use crate::{Endpoint, Error, Program, ServerConfig};

/// Wakes a serving thread from another thread.
pub(crate) struct Doorbell {
    fd: OwnedFd,
    /// Set before ringing, so the serving thread's spin loop notices without a system call.
    attention: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(Doorbell { fd: unsafe { OwnedFd::from_raw_fd(fd) }, attention: AtomicBool::new(false) })
    }

    pub fn ring(&self) {
        self.attention.store(true, Ordering::Release);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Whether it rang since the last call (and quiets it).
    pub fn take(&self) -> bool {
        // A plain load first: this runs on every poll of a spinning server, and a swap is a
        // locked instruction even when there is nothing to take.
        if !self.attention.load(Ordering::Relaxed) || !self.attention.swap(false, Ordering::Acquire) {
            return false;
        }
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        true
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// State shared between one serving thread and the outside world.
pub(crate) struct EndpointShared {
    pub doorbell: Doorbell,
    pub stop: AtomicBool,
    completions: Mutex<Vec<(CallKey, Status, Vec<u8>)>>,
}

pub(crate) struct Job {
    pub proc: Procedure,
    pub ctx: CallContext,
    pub args: Vec<u8>,
    pub reply_to: ReplyTo,
}

/// Where a worker's result goes.
pub(crate) enum ReplyTo {
    Lowlat {
        key: CallKey,
        back: Arc<EndpointShared>,
    },
    /// Another protocol's serving thread (ONC RPC), which queues the result and rings its doorbell.
    Other(Box<dyn FnOnce(Status, Vec<u8>) + Send>),
}

/// Threads for long-running procedures; a bounded queue in front of them (calls beyond it are
/// answered `Busy` at once rather than queued without limit).
struct Workers {
    queue: SyncSender<Job>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    fn start(n: usize, depth: usize) -> Workers {
        let (tx, rx) = sync_channel::<Job>(depth.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n.max(1))
            .map(|i| {
                let rx: Arc<Mutex<Receiver<Job>>> = rx.clone();
                std::thread::Builder::new()
                    .name(format!("lowlat-worker-{i}"))
                    .spawn(move || loop {
                        let job = match rx.lock().map(|r| r.recv()) {
                            Ok(Ok(job)) => job,
                            _ => return,
                        };
                        let mut reply = Vec::new();
                        let status = service::run(&job.proc, &job.ctx, &job.args, &mut (&mut reply).into());
                        match job.reply_to {
                            ReplyTo::Lowlat { key, back } => {
                                back.completions.lock().unwrap_or_else(|p| p.into_inner()).push((key, status, reply));
                                back.doorbell.ring();
                            }
                            ReplyTo::Other(done) => done(status, reply),
                        }
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        Workers { queue: tx, threads }
    }
}

/// A running server. Dropping it stops it.
pub struct Server {
    endpoints: Vec<(String, Arc<EndpointShared>, Option<JoinHandle<()>>)>,
    workers: Option<Workers>,
}

/// Collects programs and settings, then serves them on URIs.
#[derive(Default)]
pub struct ServerBuilder {
    services: Services,
    config: ServerConfig,
}

impl ServerBuilder {
    pub fn program(mut self, p: Program) -> Self {
        self.services.add(p);
        self
    }

    pub fn config(mut self, c: ServerConfig) -> Self {
        self.config = c;
        self
    }

    /// Starts serving every URI (one thread each). Fails without serving any if one fails.
    pub fn serve<S: AsRef<str>>(self, uris: &[S]) -> Result<Server, Error> {
        let services = Arc::new(self.services);
        let mut server = Server { endpoints: Vec::new(), workers: None };
        let workers = Workers::start(self.config.workers, self.config.worker_queue);
        for uri in uris {
            let uri = uri.as_ref();
            let endpoint: Endpoint = uri.parse()?;
            let shared = Arc::new(EndpointShared {
                doorbell: Doorbell::new().map_err(|e| Error::io("create eventfd", e))?,
                stop: AtomicBool::new(false),
                completions: Mutex::new(Vec::new()),
            });
            if let Endpoint::OncUdp { .. } | Endpoint::OncTcp { .. } = endpoint {
                let (local, handle) = driver::onc::start(
                    &endpoint,
                    uri,
                    services.clone(),
                    self.config.clone(),
                    shared.clone(),
                    workers.queue.clone(),
                )?;
                server.endpoints.push((local, shared, Some(handle)));
                continue;
            }
            let transport = driver::open_server(&endpoint, uri, &self.config, shared.doorbell.raw_fd())?;
            let local = match &transport {
                AnyServer::Udp(t) => t.local_uri(),
                AnyServer::Tcp(t) => t.local_uri(),
                AnyServer::Shm(t) => t.local_uri(),
                AnyServer::Eth(t) => t.local_uri(),
                AnyServer::Xdp(t) => t.local_uri(),
            };
            let ctx = LoopContext {
                services: services.clone(),
                config: self.config.clone(),
                shared: shared.clone(),
                workers: workers.queue.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("lowlat-{}", endpoint.scheme()))
                .spawn(move || match transport {
                    AnyServer::Udp(t) => serve_loop(t, ctx),
                    AnyServer::Tcp(t) => serve_loop(t, ctx),
                    AnyServer::Shm(t) => serve_loop(*t, ctx),
                    AnyServer::Eth(t) => serve_loop(t, ctx),
                    AnyServer::Xdp(t) => serve_loop(*t, ctx),
                })
                .map_err(|e| Error::io("spawn serving thread", e))?;
            server.endpoints.push((local, shared, Some(handle)));
        }
        server.workers = Some(workers);
        Ok(server)
    }
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The URIs served, with real port numbers where 0 was asked for.
    pub fn local_uris(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.0.clone()).collect()
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        for e in self.endpoints.iter_mut() {
            if let Some(h) = e.2.take() {
                let _ = h.join();
            }
        }
    }

    /// Whether every serving thread has ended (a fatal error stopped it).
    pub fn is_finished(&self) -> bool {
        self.endpoints.iter().all(|e| e.2.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// Stops serving and waits for the threads to finish.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        for e in &self.endpoints {
            e.1.stop.store(true, Ordering::Release);
            e.1.doorbell.ring();
        }
        for e in self.endpoints.iter_mut() {
            if let Some(h) = e.2.take() {
                let _ = h.join();
            }
        }
        if let Some(w) = self.workers.take() {
            drop(w.queue);
            for t in w.threads {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_all();
    }
}

struct LoopContext {
    services: Arc<Services>,
    config: ServerConfig,
    shared: Arc<EndpointShared>,
    workers: SyncSender<Job>,
}

fn random_seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writes at most 8 bytes into a live 8-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    // No getrandom: fall back on time and pid (tokens are then guessable; say so nowhere else).
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    t ^ (std::process::id() as u64) << 32
}

enum Ready<A> {
    Served,
    Closed(A),
    Doorbell,
}

/// The engine and the procedures, as the transport hands them frames (`serve_loop`).
struct Dispatch<'a, A> {
    engine: &'a mut ServerEngine<A>,
    ctx: &'a LoopContext,
    /// A call finished while the transport had lent its space, whose answer is not there (an
    /// error, a result too large for the space): sent by `flush`, once the space is back, from
    /// the engine's buffer (no copy of a large result).
    deferred: Option<Finished>,
    routes: &'a mut RouteCache,
}

/// A call run, not yet answered, with its trace times.
struct Finished {
    key: CallKey,
    status: Status,
    times: [u64; 3],
}

impl<A> Dispatch<'_, A> {
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

impl<A: Copy + Eq + std::fmt::Debug> FrameHandler<A> for Dispatch<'_, A> {
    fn handle<O: FnMut(&A, &[u8; HEADER_LEN], &[u8])>(
        &mut self,
        from: A,
        frame: &[u8],
        lent: &mut [u8],
        out: &mut O,
    ) -> usize {
        let ctx = self.ctx;
        let now_ns = || if ctx.config.trace { trace::now_ns() } else { 0 };
        let received = now_ns();
        let engine = &mut *self.engine;
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
                    reply_to: ReplyTo::Lowlat { key, back: ctx.shared.clone() },
                };
                match ctx.workers.try_send(job) {
                    Ok(()) => return 0,
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

    fn flush<O: FnMut(&A, &[u8; HEADER_LEN], &[u8])>(&mut self, out: &mut O) {
        if let Some(f) = self.deferred.take() {
            self.engine.finish(f.key, f.status, out);
            self.trace(f.key, f.times);
        }
    }
}

/// The serving loop of one endpoint: receive, run, reply; spin, then block.
fn serve_loop<T: ServerTransport>(mut t: T, ctx: LoopContext) {
    if let Some(cpu) = ctx.config.pin_cpu {
        let _ = lowlat_transport::sys::pin_to_cpu(cpu);
    }
    let engine_cfg = lowlat_proto::ServerConfig {
        programs: ctx.services.versions(),
        max_sessions: ctx.config.max_sessions,
        max_slots: ctx.config.max_slots,
        max_message: ctx.config.max_message.min(u32::MAX as usize) as u32,
        max_frame: t.max_frame().min(u32::MAX as usize) as u32,
        window: lowlat_proto::MAX_WINDOW,
        session_idle: ctx.config.session_idle,
        seed: random_seed(),
    };
    let mut engine: ServerEngine<T::Addr> = ServerEngine::new(engine_cfg);
    let mut buf: Vec<u8> = Vec::with_capacity(t.max_frame().min(1 << 20));
    let mut spinner = Spinner::new(ctx.config.spin);
    let doorbell = ctx.shared.doorbell.raw_fd();
    let mut finished: Vec<(CallKey, Status, Vec<u8>)> = Vec::new();
    let mut routes = RouteCache::default();
    // The engine reads no clock per call (it needs the time only for a bind and its sweep timer),
    // so serving a call found within the spinner's clock-free polls reads none at all.
    while !ctx.shared.stop.load(Ordering::Acquire) {
        let timer = engine.poll_timeout();
        let shared = &ctx.shared;
        let mut dispatch = Dispatch { engine: &mut engine, ctx: &ctx, deferred: None, routes: &mut routes };
        let mut io = (&mut t, &mut buf, &mut dispatch);
        let got = spinner.wait_on(
            timer,
            &mut io,
            |(t, buf, dispatch)| {
                if shared.doorbell.take() {
                    return Ok(Some(Ready::Doorbell));
                }
                Ok::<_, io::Error>(t.serve_next(buf, &mut **dispatch)?.map(|r| match r {
                    Polled::Served => Ready::Served,
                    Polled::Closed(a) => Ready::Closed(a),
                }))
            },
            |(t, _, _), timeout| t.block(doorbell, timeout),
        );
        match got {
            Ok(Some(Ready::Served)) => {}
            Ok(Some(Ready::Closed(peer))) => engine.forget_peer(&peer),
            Ok(Some(Ready::Doorbell)) => {
                std::mem::swap(&mut finished, &mut ctx.shared.completions.lock().unwrap_or_else(|p| p.into_inner()));
                let mut out = |to: &T::Addr, h: &[u8; HEADER_LEN], b: &[u8]| t.send(to, h, b);
                for (key, status, reply) in finished.drain(..) {
                    engine.finish_with(key, status, &reply, &mut out);
                }
            }
            Ok(None) => engine.handle_timeout(Instant::now()),
            Err(e) => {
                // The socket itself failed (not a peer): nothing to serve with any more.
                eprintln!("lowlat: serving thread stopped: {e}");
                return;
            }
        }
    }
}
