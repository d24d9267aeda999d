//! ONC RPC v2 serving (`onc+udp://`, `onc+tcp://`): the server's XDR programs ([`Program::xdr`])
//! answered to rpcgen/libtirpc clients, from the same process that serves lowlat's own protocol.
//!
//! One thread per endpoint receives, runs the procedure (inline, or on the worker pool when it is
//! long-running, its result coming back through the endpoint's doorbell) and replies. Over UDP a
//! duplicate-request cache answers retransmissions from the reply already sent. The endpoint
//! registers its programs with this machine's rpcbind when one runs, and unregisters them when it
//! stops cleanly.
//!
//! [`Program::xdr`]: crate::Program::xdr

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat_onc::auth::AuthStat;
use lowlat_onc::drc::call_hash;
use lowlat_onc::msg::{encode_accepted, encode_denied};
use lowlat_onc::rpcbind::{Netid, Rpcbind};
use lowlat_onc::{AcceptStatus, Call, Credential, DuplicateCache, Lookup, RecordReader, RejectStatus};
use lowlat_proto::{ErrorCode, Status};
use lowlat_transport::sys::{poll_readable, poll_set};
use lowlat_transport::udp::{resolve, UdpEndpoint, MAX_DATAGRAM};
use lowlat_transport::Spinner;

use crate::server::{EndpointShared, Job, ReplyTo};
use crate::service::{self, CallContext, Route, Services};
use crate::{Endpoint, Error, ServerConfig};

/// What the serving thread needs to answer calls, whatever the transport.
struct Dispatch {
    services: Arc<Services>,
    config: ServerConfig,
    shared: Arc<EndpointShared>,
    workers: SyncSender<Job>,
}

/// A reply a worker finished, waiting for the serving thread to send it.
struct Done<A> {
    to: A,
    xid: u32,
    hash: u64,
    status: Status,
    body: Vec<u8>,
}

type Completions<A> = Arc<Mutex<Vec<Done<A>>>>;

/// How a call was handled.
enum Handled {
    /// `head` (and then `body`) hold the reply.
    Reply,
    /// Nothing to send (not a call, or a retransmission still running).
    Nothing,
    /// Handed to a worker; the reply comes through the completions.
    Deferred,
}

fn accept_status(s: Status) -> AcceptStatus {
    match s {
        Status::Ok => AcceptStatus::Success,
        Status::Error(ErrorCode::GarbageArgs) => AcceptStatus::GarbageArgs,
        // ONC RPC has no "busy": a shed call is a system error the caller may retry.
        Status::Error(_) => AcceptStatus::SystemErr,
    }
}

impl Dispatch {
    /// Handles one call message. The reply's header goes to `head` (after what it holds, so a
    /// TCP record mark can precede it), the results to `body`.
    fn handle<A: Copy + Send + 'static>(
        &self,
        msg: &[u8],
        from: A,
        hash: u64,
        head: &mut Vec<u8>,
        body: &mut Vec<u8>,
        done: &Completions<A>,
    ) -> Handled {
        body.clear();
        let call = match Call::parse(msg) {
            Ok(c) => c,
            Err(e) => {
                return match RejectStatus::for_error(&e) {
                    Some((xid, why)) => {
                        encode_denied(xid, why, head);
                        Handled::Reply
                    }
                    None => Handled::Nothing,
                }
            }
        };
        let h = call.header;
        let auth = match call.cred {
            Credential::Sys(a) => Some(a),
            Credential::None => None,
        };
        let cfg = &self.config;
        let must_auth = cfg.onc_require_auth_sys || !cfg.onc_allowed_uids.is_empty();
        let refused = match auth {
            None => must_auth,
            Some(a) => !cfg.onc_allowed_uids.is_empty() && !cfg.onc_allowed_uids.contains(&a.uid),
        };
        if refused {
            encode_denied(h.xid, RejectStatus::AuthError(AuthStat::TooWeak), head);
            return Handled::Reply;
        }
        let mut low_high: Option<(u32, u32)> = None;
        let mut found = None;
        for p in self.services.xdr_programs().filter(|p| p.number() == h.program) {
            if p.version() == h.version {
                found = Some(p);
                break;
            }
            let (l, hi) = low_high.unwrap_or((p.version(), p.version()));
            low_high = Some((l.min(p.version()), hi.max(p.version())));
        }
        let Some(program) = found else {
            let s = match low_high {
                Some((low, high)) => AcceptStatus::ProgMismatch { low, high },
                None => AcceptStatus::ProgUnavail,
            };
            encode_accepted(h.xid, s, head);
            return Handled::Reply;
        };
        let ctx = CallContext {
            program: h.program,
            version: h.version,
            proc_no: h.procedure,
            client_order: lowlat_proto::ByteOrder::Big,
            auth,
        };
        let status = match Services::route_in(program, h.procedure) {
            Route::Missing => {
                encode_accepted(h.xid, AcceptStatus::ProcUnavail, head);
                return Handled::Reply;
            }
            Route::Inline(p) => service::run(p, &ctx, call.args, &mut body.into()),
            Route::Worker(p) => {
                let done = done.clone();
                let shared = self.shared.clone();
                let xid = h.xid;
                let job = Job {
                    proc: p.clone(),
                    ctx,
                    args: call.args.to_vec(),
                    reply_to: ReplyTo::Other(Box::new(move |status, body| {
                        done.lock().unwrap_or_else(|p| p.into_inner()).push(Done { to: from, xid, hash, status, body });
                        shared.doorbell.ring();
                    })),
                };
                match self.workers.try_send(job) {
                    Ok(()) => return Handled::Deferred,
                    Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Status::Error(ErrorCode::Busy),
                }
            }
        };
        let s = accept_status(status);
        if s != AcceptStatus::Success {
            body.clear();
        }
        encode_accepted(h.xid, s, head);
        Handled::Reply
    }
}

/// Starts serving `endpoint` on a new thread; returns the URI served (with the real port) and
/// the thread.
pub(crate) fn start(
    endpoint: &Endpoint,
    uri: &str,
    services: Arc<Services>,
    config: ServerConfig,
    shared: Arc<EndpointShared>,
    workers: SyncSender<Job>,
) -> Result<(String, JoinHandle<()>), Error> {
    let (host, port, tcp) = match endpoint {
        Endpoint::OncUdp { host, port } => (host, port, false),
        Endpoint::OncTcp { host, port } => (host, port, true),
        _ => unreachable!("driver::onc::start is called for onc+ endpoints only"),
    };
    let addr = resolve(&format!("{host}:{}", port.unwrap_or(0)))
        .map_err(|e| Error::InvalidUri { uri: uri.to_string(), reason: e.to_string() })?;
    let d = Dispatch { services, config, shared, workers };
    let scheme = if tcp { "onc+tcp" } else { "onc+udp" };
    if tcp {
        let listener = TcpListener::bind(addr).map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        listener.set_nonblocking(true).map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        let local = listener.local_addr().map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        let reg = Registration::register(&d, Netid::Tcp, local);
        let h = spawn(scheme, move || {
            serve_tcp(listener, &d);
            reg.unregister();
        })?;
        Ok((format!("{scheme}://{local}"), h))
    } else {
        let ep = UdpEndpoint::bind(addr).map_err(|e| Error::io(format!("{uri}: serve"), e))?;
        let local = ep.local_addr();
        let reg = Registration::register(&d, Netid::Udp, local);
        let h = spawn(scheme, move || {
            serve_udp(ep, &d);
            reg.unregister();
        })?;
        Ok((format!("{scheme}://{local}"), h))
    }
}

fn spawn(scheme: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name(format!("lowlat-{scheme}"))
        .spawn(f)
        .map_err(|e| Error::io("spawn serving thread", e))
}

/// The (program, version) pairs an endpoint registered with rpcbind.
struct Registration {
    rpcbind: Option<Rpcbind>,
    done: Vec<(u32, u32)>,
}

const OWNER: &str = "lowlat";

impl Registration {
    fn register(d: &Dispatch, netid: Netid, at: SocketAddr) -> Registration {
        let mut r = Registration { rpcbind: None, done: Vec::new() };
        if !d.config.onc_register {
            return r;
        }
        let rb = Rpcbind::local();
        if !rb.is_running() {
            return r;
        }
        for p in d.services.xdr_programs() {
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

    fn unregister(self) {
        if let Some(rb) = self.rpcbind {
            for (p, v) in self.done {
                let _ = rb.unset(p, v, OWNER);
            }
        }
    }
}

fn pin(d: &Dispatch) {
    if let Some(cpu) = d.config.pin_cpu {
        let _ = lowlat_transport::sys::pin_to_cpu(cpu);
    }
}

fn serve_udp(ep: UdpEndpoint, d: &Dispatch) {
    pin(d);
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut head = Vec::with_capacity(64);
    let mut body = Vec::with_capacity(MAX_DATAGRAM);
    let mut drc: DuplicateCache<SocketAddr> = DuplicateCache::new(d.config.onc_drc_entries);
    let done: Completions<SocketAddr> = Arc::new(Mutex::new(Vec::new()));
    let mut finished: Vec<Done<SocketAddr>> = Vec::new();
    let mut spinner = Spinner::new(d.config.spin);
    let doorbell = d.shared.doorbell.raw_fd();
    let fds = [ep.as_raw_fd(), doorbell];
    while !d.shared.stop.load(Ordering::Acquire) {
        let got = spinner.wait_on(
            None,
            &mut buf,
            |buf| {
                if d.shared.doorbell.take() {
                    return Ok(Some(None));
                }
                Ok::<_, io::Error>(ep.try_recv_from(buf)?.map(Some))
            },
            |_, t| poll_readable(&fds, t).map(|_| ()),
        );
        match got {
            Ok(Some(Some((len, from)))) => {
                let msg = &buf[..len];
                let hash = call_hash(msg);
                let Some(xid) = lowlat_onc::msg::peek_xid(msg) else { continue };
                match drc.check(xid, from, hash) {
                    Lookup::Replay(r) => {
                        let _ = ep.send_to(&from, r, &[]);
                        continue;
                    }
                    Lookup::InProgress => continue,
                    Lookup::New => {}
                }
                head.clear();
                match d.handle(msg, from, hash, &mut head, &mut body, &done) {
                    Handled::Reply => {
                        if head.len() + body.len() > MAX_DATAGRAM {
                            // No datagram can carry the result: say so rather than stay silent.
                            head.clear();
                            body.clear();
                            encode_accepted(xid, AcceptStatus::SystemErr, &mut head);
                        }
                        let _ = ep.send_to(&from, &head, &body);
                        head.extend_from_slice(&body);
                        drc.complete(xid, from, hash, &head);
                    }
                    Handled::Nothing | Handled::Deferred => {}
                }
            }
            Ok(Some(None)) => {
                std::mem::swap(&mut finished, &mut done.lock().unwrap_or_else(|p| p.into_inner()));
                for f in finished.drain(..) {
                    head.clear();
                    let s = accept_status(f.status);
                    encode_accepted(f.xid, s, &mut head);
                    let mut results: &[u8] = if s == AcceptStatus::Success { &f.body } else { &[] };
                    if head.len() + results.len() > MAX_DATAGRAM {
                        head.clear();
                        encode_accepted(f.xid, AcceptStatus::SystemErr, &mut head);
                        results = &[];
                    }
                    let _ = ep.send_to(&f.to, &head, results);
                    head.extend_from_slice(results);
                    drc.complete(f.xid, f.to, f.hash, &head);
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("lowlat: ONC RPC UDP serving thread stopped: {e}");
                return;
            }
        }
    }
}

/// A TCP connection and its record reassembly.
struct Conn {
    stream: TcpStream,
    records: RecordReader,
    /// Bumped when the slot is reused, so a late worker result never goes to a newcomer.
    generation: u32,
}

type ConnAddr = (usize, u32);

/// Writes all of `parts` (at most two) on a non-blocking stream, waiting for room while the
/// peer's window is full, until `deadline`. Shared by the ONC RPC server and client.
pub(crate) fn write_all(stream: &mut TcpStream, parts: &[&[u8]], deadline: Instant) -> io::Result<()> {
    let mut skip = 0usize;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while skip < total {
        // At most two parts (header, results): no allocation per reply.
        debug_assert!(parts.len() <= 2);
        let mut iov = [IoSlice::new(&[]), IoSlice::new(&[])];
        let mut k = 0;
        let mut off = skip;
        for p in parts {
            if off >= p.len() {
                off -= p.len();
                continue;
            }
            if k < iov.len() {
                iov[k] = IoSlice::new(&p[off..]);
                k += 1;
            }
            off = 0;
        }
        match stream.write_vectored(&iov[..k]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => skip += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                poll_fds(&[stream.as_raw_fd()], libc::POLLOUT, Some(deadline - now))?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn serve_tcp(listener: TcpListener, d: &Dispatch) {
    pin(d);
    let max_record = d.config.max_message;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut generation: u32 = 0;
    let mut head: Vec<u8> = Vec::with_capacity(64);
    let mut body: Vec<u8> = Vec::with_capacity(1 << 16);
    let done: Completions<ConnAddr> = Arc::new(Mutex::new(Vec::new()));
    let mut finished: Vec<Done<ConnAddr>> = Vec::new();
    // The listener, the doorbell, then one entry per connection (`owners` maps them back);
    // reused, so waiting allocates nothing.
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    let mut owners: Vec<usize> = Vec::new();
    let mut spinner = Spinner::new(d.config.spin);
    let doorbell = d.shared.doorbell.raw_fd();
    let entry = |fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    while !d.shared.stop.load(Ordering::Acquire) {
        pfds.clear();
        owners.clear();
        pfds.push(entry(listener.as_raw_fd()));
        pfds.push(entry(doorbell));
        for (i, c) in conns.iter().enumerate() {
            if let Some(c) = c {
                pfds.push(entry(c.stream.as_raw_fd()));
                owners.push(i);
            }
        }
        // Which descriptors are ready is left in `pfds` by the poll that found them.
        let got = spinner.wait_on(
            None,
            &mut pfds,
            |pfds| {
                let stop = d.shared.stop.load(Ordering::Relaxed);
                Ok::<_, io::Error>((stop || poll_set(pfds, Some(Duration::ZERO))? > 0).then_some(()))
            },
            |pfds, t| poll_set(pfds, t).map(|_| ()),
        );
        if got.is_err() {
            return;
        }
        if pfds[0].revents == 0 {
            // Nobody is knocking: skip the accept system call.
        } else {
            // Accept newcomers.
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        let _ = stream.set_nodelay(true);
                        generation = generation.wrapping_add(1);
                        let c = Conn { stream, records: RecordReader::new(max_record), generation };
                        match conns.iter_mut().find(|c| c.is_none()) {
                            Some(slot) => *slot = Some(c),
                            None => conns.push(Some(c)),
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // Out of descriptors and the like: serve who is connected, try again later.
                    Err(_) => break,
                }
            }
        }
        if d.shared.doorbell.take() {
            std::mem::swap(&mut finished, &mut done.lock().unwrap_or_else(|p| p.into_inner()));
            for f in finished.drain(..) {
                let Some(Some(c)) = conns.get_mut(f.to.0) else { continue };
                if c.generation != f.to.1 {
                    continue;
                }
                head.clear();
                head.extend_from_slice(&[0; 4]);
                let s = accept_status(f.status);
                encode_accepted(f.xid, s, &mut head);
                let results: &[u8] = if s == AcceptStatus::Success { &f.body } else { &[] };
                if send_record(&mut c.stream, &mut head, results).is_err() {
                    conns[f.to.0] = None;
                }
            }
        }
        for (p, &i) in pfds[2..].iter().zip(&owners) {
            if p.revents == 0 {
                continue;
            }
            let Some(c) = conns[i].as_mut() else { continue };
            if !serve_conn(c, (i, c.generation), d, &mut head, &mut body, &done) {
                conns[i] = None;
            }
        }
    }
}

/// Blocks until one of `fds` has one of `events` (or hung up / in error) or `timeout` passes;
/// any number of descriptors (one per TCP connection). Returns how many are ready.
fn poll_fds(fds: &[RawFd], events: libc::c_short, timeout: Option<Duration>) -> io::Result<usize> {
    const STACK: usize = 32;
    let mut stack = [libc::pollfd { fd: -1, events: 0, revents: 0 }; STACK];
    let mut heap: Vec<libc::pollfd>;
    let pfds: &mut [libc::pollfd] = if fds.len() <= STACK {
        &mut stack[..fds.len()]
    } else {
        heap = vec![libc::pollfd { fd: -1, events: 0, revents: 0 }; fds.len()];
        &mut heap
    };
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = events;
    }
    poll_set(pfds, timeout)
}

/// Sends a reply whose header sits after four reserved bytes in `head`, as one fragment.
fn send_record(stream: &mut TcpStream, head: &mut [u8], body: &[u8]) -> io::Result<()> {
    let n = (head.len() - 4 + body.len()) as u32;
    head[..4].copy_from_slice(&(n | 1 << 31).to_be_bytes());
    write_all(stream, &[head, body], Instant::now() + Duration::from_secs(5))
}

/// Reads what a connection has and answers every complete call. False: drop the connection.
fn serve_conn(
    c: &mut Conn,
    me: ConnAddr,
    d: &Dispatch,
    head: &mut Vec<u8>,
    body: &mut Vec<u8>,
    done: &Completions<ConnAddr>,
) -> bool {
    loop {
        const CHUNK: usize = 64 << 10;
        let buf = c.records.buffer(CHUNK);
        let room = buf.len();
        let drained = match c.stream.read(buf) {
            Ok(0) => return false,
            Ok(n) => {
                c.records.filled(n);
                // A short read took all there was: the next poll says when more comes, so no
                // read just to hear EAGAIN.
                n < room
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
            Err(_) => return false,
        };
        loop {
            let rec = match c.records.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // A record above the maximum: the stream cannot be resynchronised.
                Err(_) => return false,
            };
            head.clear();
            head.extend_from_slice(&[0; 4]);
            let hash = 0;
            match d.handle(rec, me, hash, head, body, done) {
                Handled::Reply => {
                    if send_record(&mut c.stream, head, body).is_err() {
                        return false;
                    }
                }
                Handled::Nothing | Handled::Deferred => {}
            }
        }
        if drained {
            break;
        }
    }
    true
}
