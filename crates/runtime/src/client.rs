//! The client: a binding to one program and version at one endpoint, shared by any number of
//! threads.
//!
//! A binding has K call slots; each slot owns its own channel to the server (a connected UDP
//! socket, a TCP connection, ...) and its own protocol state, so a calling thread claims a free
//! slot and then touches nothing shared until it releases it: no lock is waited on and nothing is
//! allocated on the call path once the slot's buffers have grown to the messages in use.
//! A call encodes its arguments straight into the slot's send buffer and decodes its result where
//! it lies in the receive buffer (Firefly's VAR IN / VAR OUT; eRPC's message buffers).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use lowlat_codec::OutBuf;
use lowlat_proto::seal::SealKeys;
use lowlat_proto::wire::{BindRequest, Header, Kind as HeaderKind, PROTOCOL_VERSION};
use lowlat_proto::{
    BindError, Binder, Bound, ByteOrder, CallError, CipherKind, ClientSlot, ErrorCode, Execution, FrameKeys, Outcome,
    Refusal, Session, WireError, HEADER_LEN,
};
use lowlat_transport::Spinner;
use spin::mutex::{SpinMutex, SpinMutexGuard};

use crate::driver::{self, ClientChannel, SlotChannel};

mod call_async;
use crate::error::KeyMismatch;
use crate::onc_client::OncClient;
use crate::stats::ClientStats;
use crate::trace::{self, ClientTrace};
pub(crate) use crate::waiting::{Stop, Waited};
use crate::{CallOptions, CallSite, ClientConfig, Endpoint, Error};

struct Slot {
    index: u16,
    /// The session epoch this slot's engine was built for.
    epoch: u64,
    /// The connection generation this slot's channel was opened in.
    conn_gen: u64,
    engine: Option<ClientSlot>,
    chan: Option<SlotChannel>,
    buf: Vec<u8>,
    /// Frames the engine sends while a received one is read (each after its length).
    outbox: Vec<u8>,
    spinner: Spinner,
    /// The counters of engines this slot had before its current one (rebinds replace it).
    earlier: ClientStats,
}

/// A claimed slot.
type SlotGuard<'a> = SpinMutexGuard<'a, Slot>;

/// Takes `slot` for a look that does not call (its counters, an async call's own lent slot),
/// waiting for a call that holds it to end: by spinning briefly, then sleeping, since that call
/// may take as long as its deadline.
fn hold(slot: &SpinMutex<Slot>) -> SlotGuard<'_> {
    let mut tries = 0u32;
    loop {
        if let Some(g) = slot.try_lock() {
            return g;
        }
        tries += 1;
        if tries < 128 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// What [`Lowlat::await_placed`] found.
enum Placed<R> {
    /// The whole result, decoded (or the decoder's error).
    Done(Result<R, Error>),
    /// A frame of `len` bytes that is not a whole result, received and not yet handled.
    Frame(usize),
    /// Nothing within the clock-free polls, or a broken channel.
    NotYet,
}

/// Moments of a traced call, filled in as it goes.
#[derive(Default)]
struct Marks {
    begin: u64,
    encoded: u64,
    sent: u64,
    received: u64,
}

/// A slot's engine, buffers and waiting state, lent to one exchange.
struct SlotIo<'a> {
    engine: &'a mut ClientSlot,
    buf: &'a mut Vec<u8>,
    outbox: &'a mut Vec<u8>,
    spinner: &'a mut Spinner,
}

struct Shared {
    uri: Arc<str>,
    endpoint: Endpoint,
    program: u32,
    version: u32,
    cfg: ClientConfig,
    /// [`Binding::epoch`], readable without the lock: a slot whose engine was built in another
    /// epoch goes to the slow path of [`Lowlat::prepare`].
    epoch: AtomicU64,
    binding: Mutex<Binding>,
    /// The current session's `server_order`, which every generated call asks for: kept outside
    /// the lock so that asking costs a load, not a lock shared by all calling threads.
    server_big_endian: AtomicBool,
    /// Each claimed with one locked instruction and given back with a plain store (a standard
    /// mutex's release is a second locked instruction: ~5 ns more per call here). A call only
    /// tries slots (a thread that finds every slot busy waits on `free`); a look that does not
    /// call waits for one with [`hold`].
    slots: Box<[SpinMutex<Slot>]>,
    /// Whether each slot has its channel open (set once, never cleared).
    opened: Box<[AtomicBool]>,
    /// Whether each slot is lent to an async call (read and written under the slot's lock): its
    /// call is in flight while no thread holds the lock, so whoever locks it next must not
    /// take it.
    lent: Box<[AtomicBool]>,
    /// Threads and async calls waiting for a free slot.
    waiters: AtomicUsize,
    /// The async calls among them, woken when a slot is released.
    slot_wakers: Mutex<Vec<std::task::Waker>>,
    /// The acknowledger is looking at the slots (it holds one at a time).
    acknowledging: AtomicBool,
    free: Condvar,
    free_lock: Mutex<()>,
    /// Binds made.
    binds: AtomicU64,
}

/// A binding to a program at an endpoint. `Send + Sync`: share it between threads by reference
/// or `Arc`; calls from several threads proceed in parallel on separate slots.
///
/// Speaks lowlat's own protocol, or ONC RPC v2 for `onc+udp://` and `onc+tcp://` endpoints
/// (bodies are then XDR: use the generated `*_xdr` codecs).
///
/// Every call error names the endpoint and the procedure ([`CallSite`]), by name once the
/// client has been told names ([`name_procedures`](Self::name_procedures); generated clients
/// do so).
pub struct Client {
    kind: Kind,
    /// Procedure names by number, for errors.
    names: Arc<[(u32, Arc<str>)]>,
}

enum Kind {
    Lowlat(Lowlat),
    Onc(Box<OncClient>),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Lowlat(c) => c.fmt(f),
            Kind::Onc(c) => c.fmt(f),
        }
    }
}

impl Client {
    /// Binds to `program` `version` at `uri` with default settings.
    pub fn connect(uri: &str, program: u32, version: u32) -> Result<Client, Error> {
        Client::connect_with(uri, program, version, ClientConfig::default())
    }

    /// Binds with the given settings.
    pub fn connect_with(uri: &str, program: u32, version: u32, cfg: ClientConfig) -> Result<Client, Error> {
        let endpoint: Endpoint = uri.parse()?;
        let kind = match endpoint {
            Endpoint::OncUdp { .. } | Endpoint::OncTcp { .. } if cfg.encrypt => {
                return Err(Error::Encryption {
                    uri: uri.to_string(),
                    reason: "ONC RPC carries no pre-shared key, so it cannot be encrypted (use udp:// or tcp://)"
                        .into(),
                });
            }
            Endpoint::OncUdp { .. } | Endpoint::OncTcp { .. } => {
                Kind::Onc(Box::new(OncClient::connect(uri, &endpoint, program, version, cfg)?))
            }
            _ => Kind::Lowlat(Lowlat::connect_with(uri, endpoint, program, version, cfg)?),
        };
        Ok(Client { kind, names: Arc::new([]) })
    }

    /// This client, naming procedures in its errors from `names` (number, name as the
    /// interface definition has it): `MINUS (program 0x20004c4c version 1, procedure 1)`
    /// rather than `procedure 1 of program 0x20004c4c version 1`. Generated modules have the
    /// table (`PROCEDURES`), and their clients pass it.
    pub fn name_procedures(mut self, names: &[(u32, &str)]) -> Client {
        self.names = names.iter().map(|&(n, name)| (n, Arc::from(name))).collect();
        self
    }

    /// Where a call of `proc_no` goes, as errors name it: for the errors of hand-written stubs.
    pub fn call_site(&self, proc_no: u32) -> CallSite {
        let site = match &self.kind {
            Kind::Lowlat(c) => c.site(proc_no),
            Kind::Onc(c) => c.site(proc_no),
        };
        CallSite { name: self.names.iter().find(|(n, _)| *n == proc_no).map(|(_, name)| name.clone()), ..site }
    }

    /// The endpoint, as given to `connect`.
    pub fn uri(&self) -> &str {
        match &self.kind {
            Kind::Lowlat(c) => c.uri(),
            Kind::Onc(c) => c.uri(),
        }
    }

    /// The byte order message bodies travel in (the server's): only the client converts.
    /// Big-endian over ONC RPC (XDR).
    pub fn server_byte_order(&self) -> ByteOrder {
        match &self.kind {
            Kind::Lowlat(c) => c.server_order(),
            Kind::Onc(c) => c.session().server_order,
        }
    }

    /// The session currently bound (over ONC RPC, which has no sessions, a description of the
    /// binding with token 0).
    pub fn session(&self) -> Session {
        match &self.kind {
            Kind::Lowlat(c) => c.session(),
            Kind::Onc(c) => c.session(),
        }
    }

    /// Largest message a call may carry on this binding.
    pub fn max_message(&self) -> usize {
        self.session().max_message as usize
    }

    /// Whether this binding speaks ONC RPC (bodies in XDR).
    pub fn is_onc(&self) -> bool {
        matches!(self.kind, Kind::Onc(_))
    }

    /// What this binding has done: binds, calls, retransmissions, frames that failed their tag
    /// or were ignored (over ONC RPC, which keeps no such counts, all zero). Reading waits for
    /// each slot's call in progress to end.
    pub fn stats(&self) -> ClientStats {
        match &self.kind {
            Kind::Lowlat(c) => c.stats(),
            Kind::Onc(_) => ClientStats::default(),
        }
    }

    /// One call with the default deadline. `encode` appends the arguments to an empty buffer
    /// (over shared memory the call ring's free space, so they are written once; elsewhere a
    /// buffer preallocated per slot); `decode` reads the result where it lies.
    pub fn call<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let r = match &self.kind {
            Kind::Lowlat(c) => c.call(proc_no, encode, decode),
            Kind::Onc(c) => c.call_timeout(proc_no, c.deadline(), encode, decode),
        };
        r.map_err(|e| e.named(&self.names))
    }

    /// One call that fails with [`Error::Timeout`] unless it completes within `timeout`.
    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let r = match &self.kind {
            Kind::Lowlat(c) => c.call_timeout(proc_no, timeout, encode, decode),
            Kind::Onc(c) => c.call_timeout(proc_no, timeout, encode, decode),
        };
        r.map_err(|e| e.named(&self.names))
    }

    /// One call with per-call `options` (what they leave unset comes from the binding's
    /// [`ClientConfig`]): what generated clients' `with(options)` calls through.
    #[inline]
    pub fn call_with<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        options: &CallOptions,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        match options.deadline {
            Some(timeout) => self.call_timeout(proc_no, timeout, encode, decode),
            None => self.call(proc_no, encode, decode),
        }
    }
}

/// Async calls: each call of [`Client`] as a future, usable from any executor (tokio, a
/// hand-rolled `block_on`): it needs no runtime of lowlat's own. A call spins for the binding's
/// spin budget, as a blocking one does, so a fast reply costs what it costs blocking; a slower
/// one parks the future in lowlat's reactor thread (epoll on the slot's socket; over shared
/// memory, an eventfd the server rings for a parked client) and the executor's thread is free
/// meanwhile. Many calls may be in flight at once on one client, one per slot (calls beyond the
/// slots wait for one, within their deadline); a future dropped before it completes gives its
/// slot back at once, its call abandoned (a late reply is ignored). Opening a slot's channel,
/// and binding again after the server restarted, still happen within one poll.
impl Client {
    /// [`call`](Self::call) as a future.
    pub fn call_async<'a, R, E>(
        &'a self,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E> + 'a,
        decode: impl FnOnce(&[u8]) -> Result<R, E> + 'a,
    ) -> impl std::future::Future<Output = Result<R, Error>> + 'a
    where
        R: 'a,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.call_with_async(proc_no, &CallOptions::new(), encode, decode)
    }

    /// [`call_with`](Self::call_with) as a future: what generated clients' `*_async` methods
    /// call through.
    pub fn call_with_async<'a, R, E>(
        &'a self,
        proc_no: u32,
        options: &CallOptions,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E> + 'a,
        decode: impl FnOnce(&[u8]) -> Result<R, E> + 'a,
    ) -> impl std::future::Future<Output = Result<R, Error>> + 'a
    where
        R: 'a,
        E: std::error::Error + Send + Sync + 'static,
    {
        let deadline = options.deadline;
        async move {
            let r = match &self.kind {
                Kind::Lowlat(c) => {
                    let timeout = deadline.unwrap_or(c.shared.cfg.deadline);
                    c.call_async(proc_no, timeout, encode, decode).await
                }
                Kind::Onc(c) => c.call_async(proc_no, deadline.unwrap_or(c.deadline()), encode, decode).await,
            };
            r.map_err(|e| e.named(&self.names))
        }
    }
}

/// When a call began and when it fails, read from the clock only once needed.
struct CallClock {
    begun: Option<Instant>,
    deadline: Option<Instant>,
    timeout: Duration,
}

impl CallClock {
    /// The call's start and deadline, reading the clock if they are not known yet.
    fn fix(&mut self) -> (Instant, Instant) {
        let begun = *self.begun.get_or_insert_with(Instant::now);
        (begun, *self.deadline.get_or_insert(begun + self.timeout))
    }

    /// Tells `engine` when its call began and when it fails, unless `timed` says it knows.
    fn time_once(&mut self, timed: &mut bool, engine: &mut ClientSlot) {
        if !std::mem::replace(timed, true) {
            let (now, deadline) = self.fix();
            engine.time_call(now, deadline);
        }
    }
}

/// The session a client's slots call in, and what is known to be wrong with it.
struct Binding {
    /// Bumped whenever the slots must rebuild their engines: a new session, or this one found
    /// unusable (`stale`).
    epoch: u64,
    session: Session,
    /// The session's frame keys, when it is keyed.
    keys: Option<FrameKeys>,
    /// The session's sealing keys, when it is sealed (every slot's sealer shares one counter).
    seal: Option<SealKeys>,
    /// The server no longer has this session (it restarted, forgot it, or a connection to it
    /// broke): the next slot to prepare binds again before calling.
    stale: bool,
    /// Bumped when a channel to the server broke: every slot's channel opened before then is
    /// replaced (the other connections to a dead server are broken too, they just do not know
    /// it yet), so that a call after the server's return is not lost on a dead connection.
    conn_gen: u64,
}

/// A binding over lowlat's own protocol.
#[derive(Clone)]
struct Lowlat {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Lowlat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", &self.shared.uri)
            .field("program", &self.shared.program)
            .field("version", &self.shared.version)
            .finish()
    }
}

fn bind_error(uri: &str, program: u32, version: u32, e: BindError) -> Error {
    let uri = uri.to_string();
    match e {
        BindError::Refused(Refusal::UnknownProgram { program }) => Error::UnknownProgram { uri, program },
        BindError::Refused(Refusal::VersionMismatch { low, high }) => {
            Error::VersionMismatch { uri, program, requested: version, low, high }
        }
        BindError::Refused(Refusal::TooManySessions) => Error::TooManySessions { uri },
        BindError::Refused(Refusal::ProtocolMismatch { low, high }) => {
            Error::ProtocolMismatch { uri, ours: PROTOCOL_VERSION, low, high }
        }
        BindError::Refused(Refusal::Malformed) => {
            Error::BindRefused { uri, reason: "the server found the bind request malformed".into() }
        }
        BindError::Refused(Refusal::SourceLimit) => Error::SourceLimit { uri },
        BindError::Refused(Refusal::KeyRequired) => Error::KeyMismatch { uri, reason: KeyMismatch::ServerRequiresKey },
        BindError::Refused(Refusal::KeyNotExpected) => Error::KeyMismatch { uri, reason: KeyMismatch::ServerHasNoKey },
        BindError::Refused(Refusal::BadKey) => Error::KeyMismatch { uri, reason: KeyMismatch::KeysDiffer },
        BindError::Refused(Refusal::Unknown(c)) => Error::BindRefused { uri, reason: format!("reason code {c}") },
        BindError::Malformed(what) => {
            Error::BindRefused { uri, reason: format!("the server's answer had a bad {what}") }
        }
        BindError::Refused(Refusal::EncryptionRequired) => Error::Encryption {
            uri,
            reason: "the server encrypts every session and this client asked for none (give it --encrypt)".into(),
        },
        BindError::Refused(Refusal::EncryptionUnavailable) => Error::Encryption {
            uri,
            reason: "the server refused to encrypt: encryption needs a pre-shared key at both ends (--psk-file)".into(),
        },
        BindError::Timeout { after } => Error::BindTimeout { uri, after },
        BindError::Unauthenticated { refusal, after } => Error::UnauthenticatedRefusal {
            // The claim in the server's words, without the endpoint again.
            claim: refusal.map(|r| {
                let e = bind_error(&uri, program, version, BindError::Refused(r));
                e.to_string().trim_start_matches(&format!("{uri}: ")).to_string()
            }),
            uri,
            after,
        },
    }
}

/// Runs the handshake over `chan` (with the cookie round a datagram server asks for, and the
/// key, except over a private channel).
fn bind(
    shared_uri: &str,
    program: u32,
    version: u32,
    cfg: &ClientConfig,
    chan: &mut dyn ClientChannel,
    buf: &mut Vec<u8>,
) -> Result<Bound, Error> {
    let reliable = chan.reliable();
    let req = BindRequest {
        program,
        version,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::native(),
        flags: if reliable { lowlat_proto::wire::BIND_RELIABLE } else { 0 },
        max_message: cfg.max_message.min(u32::MAX as usize) as u32,
        max_frame: chan.max_frame().min(u32::MAX as usize) as u32,
        slots: cfg.slots.max(1),
        window: cfg.window.clamp(2, lowlat_proto::MAX_WINDOW),
        nonce: crate::server::random_seed()?,
    };
    let now = Instant::now();
    let psk = if chan.private() { None } else { cfg.psk.clone() };
    if cfg.encrypt && chan.private() {
        return Err(Error::Encryption {
            uri: shared_uri.to_string(),
            reason: "encryption is refused over shm://: the peer shares the memory the frames lie in, so there is no path to hide them from (use udp://, tcp://, eth:// or xdp://)".into(),
        });
    }
    if cfg.encrypt && psk.is_none() {
        return Err(Error::Encryption {
            uri: shared_uri.to_string(),
            reason: "encryption needs a pre-shared key (--psk-file): the frames' keys come from it".into(),
        });
    }
    let seal = cfg.encrypt.then(CipherKind::preferred);
    let mut binder = Binder::new(req, &cfg.engine, now, now + cfg.bind_timeout).with_key(psk).with_seal(seal);
    let mut send_err = None;
    binder.start(now, &mut |h: &[u8], b: &[u8]| {
        if let Err(e) = chan.send(h, b) {
            send_err.get_or_insert(e);
        }
    });
    if let Some(e) = send_err {
        return Err(bind_io_error(shared_uri, "send bind request", e));
    }
    let mut spinner = Spinner::new(cfg.spin);
    loop {
        let got = spinner.wait_on(binder.poll_timeout(), &mut *chan, |c| c.try_recv(buf), |c, t| c.block(t));
        match got {
            Ok(Some(n)) => {
                // The cookie round's answer waits until the frame has been read (it may lie in
                // the channel's own memory).
                let mut again: Option<Vec<u8>> = None;
                let got = binder.handle(chan.received(buf, n), Instant::now(), &mut |h: &[u8], b: &[u8]| {
                    again = Some([h, b].concat())
                });
                if let Some(f) = again {
                    if let Err(e) = chan.send(&f[..HEADER_LEN], &f[HEADER_LEN..]) {
                        return Err(bind_io_error(shared_uri, "send bind request", e));
                    }
                }
                if let Some(r) = got {
                    return r.map_err(|e| bind_error(shared_uri, program, version, e));
                }
            }
            Ok(None) => {
                let mut send_err = None;
                let r = binder.handle_timeout(Instant::now(), &mut |h: &[u8], b: &[u8]| {
                    if let Err(e) = chan.send(h, b) {
                        send_err.get_or_insert(e);
                    }
                });
                if let Some(e) = r {
                    return Err(bind_error(shared_uri, program, version, e));
                }
            }
            // A server that answered with what this client could not verify (another key's
            // server, which then closes the unbound connection) is not "not running".
            Err(e) => match binder.unauthenticated(Instant::now()) {
                Some(u) => return Err(bind_error(shared_uri, program, version, u)),
                None => return Err(bind_io_error(shared_uri, "bind", e)),
            },
        }
    }
}

/// An I/O error while binding, before any call was sent: a server that refused the connection,
/// or reset or closed it before answering the bind (it died, or was killed, meanwhile), is not
/// running there.
fn bind_io_error(shared_uri: &str, op: &str, e: std::io::Error) -> Error {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
            Error::ServerNotRunning { uri: shared_uri.to_string(), detail: e.to_string() }
        }
        _ => Error::io(format!("{shared_uri}: {op}"), e),
    }
}

impl Lowlat {
    fn connect_with(
        uri: &str,
        endpoint: Endpoint,
        program: u32,
        version: u32,
        cfg: ClientConfig,
    ) -> Result<Lowlat, Error> {
        let mut chan = driver::open_channel(&endpoint, uri, &cfg)?;
        let mut buf = Vec::new();
        let Bound { session, keys, seal } = bind(uri, program, version, &cfg, chan.as_dyn(), &mut buf)?;
        let slots: Box<[SpinMutex<Slot>]> = (0..session.slots)
            .map(|i| {
                SpinMutex::new(Slot {
                    index: i,
                    epoch: 0,
                    conn_gen: 0,
                    engine: None,
                    chan: None,
                    buf: Vec::new(),
                    outbox: Vec::new(),
                    spinner: Spinner::new(cfg.spin),
                    earlier: ClientStats::default(),
                })
            })
            .collect();
        {
            let mut s0 = slots[0].lock();
            s0.chan = Some(chan);
            s0.buf = buf;
        }
        let reliable = session.reliable;
        let shared = Arc::new(Shared {
            uri: uri.into(),
            endpoint,
            program,
            version,
            cfg,
            epoch: AtomicU64::new(0),
            server_big_endian: AtomicBool::new(session.server_order == ByteOrder::Big),
            binding: Mutex::new(Binding { epoch: 0, session, keys, seal, stale: false, conn_gen: 0 }),
            opened: (0..slots.len()).map(|i| AtomicBool::new(i == 0)).collect(),
            lent: (0..slots.len()).map(|_| AtomicBool::new(false)).collect(),
            slot_wakers: Mutex::new(Vec::new()),
            slots,
            waiters: AtomicUsize::new(0),
            acknowledging: AtomicBool::new(false),
            free: Condvar::new(),
            free_lock: Mutex::new(()),
            binds: AtomicU64::new(1),
        });
        if !reliable {
            spawn_acknowledger(Arc::downgrade(&shared));
        }
        Ok(Lowlat { shared })
    }

    pub fn uri(&self) -> &str {
        &self.shared.uri
    }

    /// The session currently bound.
    pub fn session(&self) -> Session {
        self.binding().session
    }

    fn stats(&self) -> ClientStats {
        let mut total = ClientStats { binds: self.shared.binds.load(Ordering::Relaxed), ..ClientStats::default() };
        for slot in self.shared.slots.iter() {
            let g = hold(slot);
            total = total.plus(&g.earlier).plus(&g.engine.as_ref().map(engine_stats).unwrap_or_default());
        }
        total
    }

    fn binding(&self) -> MutexGuard<'_, Binding> {
        self.shared.binding.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current session's byte order for bodies, without taking the session's lock.
    pub fn server_order(&self) -> ByteOrder {
        if self.shared.server_big_endian.load(Ordering::Relaxed) {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    /// One call with the default deadline. `encode` appends the arguments to an empty buffer
    /// (over shared memory the call ring's free space, so they are written once; elsewhere a
    /// buffer preallocated per slot); `decode` reads the result where it lies.
    pub fn call<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        self.call_timeout(proc_no, self.shared.cfg.deadline, encode, decode)
    }

    /// One call that fails with [`Error::Timeout`] unless it completes within `timeout`.
    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let trace = self.shared.cfg.trace;
        let mut marks = Marks { begin: if trace { trace::now_ns() } else { 0 }, ..Marks::default() };
        let mut clock = CallClock { begun: None, deadline: None, timeout };
        let mut guard = self.acquire(&mut clock, proc_no)?;
        self.prepare(&mut guard)?;
        let sent = encode_args(&mut guard, proc_no, encode, trace.then_some(&mut marks.encoded))
            .map_err(|e| Error::Encode { call: self.site(proc_no), source: Box::new(e) })?;
        let mut decode = Some(decode);
        let placed = if sent && !trace { self.await_placed(&mut guard, proc_no, &mut decode) } else { Placed::NotYet };
        let r = match placed {
            // Returned at once, so that the `Ok` is written once, where the caller reads it: kept
            // in `r` (88 bytes), it was copied by wide loads right after the few bytes written
            // for it, loads that wait for those stores to reach the cache. With the result's
            // header compared a word at a time (`Header::matches`), 24 ns off a shared-memory
            // null call where the two CPUs are close (mean 168 -> 142 ns). Not traced
            // (`await_placed` ran), and nothing to recover from.
            Placed::Done(Ok(v)) => {
                drop(guard);
                self.release_notify();
                return Ok(v);
            }
            Placed::Done(r) => r,
            waiting => {
                let pending = if let Placed::Frame(n) = waiting { Some(n) } else { None };
                let marks = trace.then_some(&mut marks);
                match self.run(&mut guard, proc_no, sent, pending, &mut clock, &mut decode, marks) {
                    Err(e @ Error::SessionLost { execution: Execution::NotSent, .. }) => {
                        self.rebind_and_rerun(&mut guard, proc_no, &mut clock, &mut decode, e)
                    }
                    r => r,
                }
            }
        };
        if let Err(e) = &r {
            self.recover(&mut guard, e);
        }
        if trace && r.is_ok() {
            let e = guard.engine.as_ref().expect("prepared");
            trace::set_client_trace(ClientTrace {
                token: e.session().token,
                slot: e.slot(),
                call_no: e.call_no(),
                begin: marks.begin,
                encoded: marks.encoded,
                sent: marks.sent,
                received: marks.received,
                end: trace::now_ns(),
            });
        }
        drop(guard);
        self.release_notify();
        r
    }

    /// The server (same incarnation) never saw this session (`refused`): binds again and sends
    /// the call once more; it cannot run twice. Off the fast path, hence out of line.
    #[cold]
    #[inline(never)]
    fn rebind_and_rerun<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        refused: Error,
    ) -> Result<R, Error> {
        // Taken before anything else is sent: arguments written into a call ring are read back
        // from there. Where they cannot be, the call is not sent again (it did not run).
        let Some(args) = sent_args(slot) else {
            return Err(refused);
        };
        self.invalidate(slot, false);
        self.prepare(slot)?;
        slot.engine.as_mut().expect("prepared").args_buf().extend_from_slice(&args);
        clock.begun = None; // the same deadline, but a fresh start for the new round trip
        self.run(slot, proc_no, false, None, clock, decode, None)
    }

    /// After a failed call: frees the slot's engine for the next call and, when the failure
    /// says the session or the connection is gone, makes the next call rebind (over a new
    /// channel if this one broke), so that a server that comes back is usable without a new
    /// `Client`.
    #[cold]
    #[inline(never)]
    fn recover(&self, slot: &mut Slot, e: &Error) {
        if let Some(engine) = slot.engine.as_mut() {
            engine.abandon();
        }
        match e {
            Error::ConnectionLost { .. } => {
                slot.chan = None;
                self.invalidate(slot, true);
            }
            Error::ServerRestarted { .. } | Error::SessionLost { .. } => self.invalidate(slot, false),
            _ => {}
        }
    }

    /// Marks the session this slot called in as unusable (once, whichever slot finds out
    /// first): every slot rebuilds its engine, and the first to prepare binds again.
    /// `lost_connection`: a channel broke, so every channel opened so far is replaced too.
    fn invalidate(&self, slot: &Slot, lost_connection: bool) {
        let mut b = self.binding();
        if lost_connection {
            b.conn_gen = b.conn_gen.max(slot.conn_gen + 1);
        }
        if b.epoch == slot.epoch && !b.stale {
            b.stale = true;
            b.epoch += 1;
            self.shared.epoch.store(b.epoch, Ordering::Release);
        }
    }

    /// Claims a free slot: the first open one that is not busy, else [`acquire_slow`].
    #[inline]
    fn acquire(&self, clock: &mut CallClock, proc_no: u32) -> Result<SlotGuard<'_>, Error> {
        match self.try_claim(true) {
            Some(g) => Ok(g),
            None => self.acquire_slow(clock, proc_no),
        }
    }

    /// The first slot not busy now, among the open ones only if `open_only`.
    #[inline]
    fn try_claim(&self, open_only: bool) -> Option<SlotGuard<'_>> {
        let s = &self.shared;
        let slots = s.slots.iter().zip(s.opened.iter()).zip(s.lent.iter());
        slots
            .filter(|((_, opened), _)| !open_only || opened.load(Ordering::Relaxed))
            // Lent to an async call: looked at under the lock, which orders it after the lend.
            .find_map(|((slot, _), lent)| slot.try_lock().filter(|_| !lent.load(Ordering::Relaxed)))
    }

    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, clock: &mut CallClock, proc_no: u32) -> Result<SlotGuard<'_>, Error> {
        // A slot with an open channel is worth a short wait: it is usually busy only for the
        // moment the acknowledger looks at it (however long that takes: it may be sending, or be
        // descheduled), and a fresh slot costs a socket, a server slot and allocations. Threads
        // that find every open slot busy for longer, with the acknowledger away, open new ones.
        const PATIENCE: u32 = 256;
        let mut round = 0;
        loop {
            let acknowledging = self.shared.acknowledging.load(Ordering::Acquire);
            let patient = round < PATIENCE || acknowledging;
            if let Some(g) = self.try_claim(patient) {
                return Ok(g);
            }
            if patient {
                round += 1;
                if acknowledging {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            // Every slot is busy: wait for one to be released (bounded by the call's deadline,
            // which starts running now).
            let now = Instant::now();
            let deadline = clock.fix().1;
            if now >= deadline {
                let call = self.site(proc_no);
                return Err(Error::Timeout { call, after: Duration::ZERO, execution: Execution::NotSent });
            }
            self.shared.waiters.fetch_add(1, Ordering::SeqCst);
            let g = self.shared.free_lock.lock().unwrap_or_else(|p| p.into_inner());
            let wait = (deadline - now).min(Duration::from_millis(5));
            let _ = self.shared.free.wait_timeout(g, wait);
            self.shared.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[inline]
    fn release_notify(&self) {
        if self.shared.waiters.load(Ordering::SeqCst) > 0 {
            self.notify_free();
        }
    }

    #[cold]
    fn notify_free(&self) {
        {
            let _g = self.shared.free_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.free.notify_one();
        }
        let wakers = std::mem::take(&mut *self.shared.slot_wakers.lock().unwrap_or_else(|p| p.into_inner()));
        self.shared.waiters.fetch_sub(wakers.len(), Ordering::SeqCst);
        for w in wakers {
            w.wake();
        }
    }

    /// Makes sure the slot has a channel and an engine for the current session.
    #[inline]
    fn prepare(&self, slot: &mut Slot) -> Result<(), Error> {
        let epoch = self.shared.epoch.load(Ordering::Acquire);
        if slot.engine.is_some() && slot.epoch == epoch {
            return Ok(());
        }
        self.prepare_slow(slot)
    }

    #[cold]
    #[inline(never)]
    fn prepare_slow(&self, slot: &mut Slot) -> Result<(), Error> {
        let mut b = self.binding();
        if slot.conn_gen != b.conn_gen {
            slot.chan = None;
        }
        if slot.chan.is_none() {
            let opened = driver::open_channel(&self.shared.endpoint, &self.shared.uri, &self.shared.cfg);
            if let Err(Error::ServerNotRunning { .. }) = &opened {
                // The server is gone: a channel another slot opened while it was going may be
                // one it accepted and then closed, so none opened so far is used again.
                b.conn_gen += 1;
            }
            slot.chan = Some(opened?);
            slot.conn_gen = b.conn_gen;
            self.shared.opened[slot.index as usize].store(true, Ordering::Relaxed);
        }
        if b.stale {
            let chan = slot.chan.as_mut().expect("opened above");
            let s = bind(
                &self.shared.uri,
                self.shared.program,
                self.shared.version,
                &self.shared.cfg,
                chan.as_dyn(),
                &mut slot.buf,
            )
            .inspect_err(|_| {
                // A channel that failed to bind may be half-way through a handshake.
                slot.chan = None;
            })?;
            self.shared.binds.fetch_add(1, Ordering::Relaxed);
            b.session = s.session;
            b.keys = s.keys;
            b.seal = s.seal;
            b.stale = false;
            b.epoch += 1;
            self.shared.server_big_endian.store(b.session.server_order == ByteOrder::Big, Ordering::Relaxed);
            self.shared.epoch.store(b.epoch, Ordering::Release);
        }
        if let Some(old) = slot.engine.as_ref() {
            slot.earlier = slot.earlier.plus(&engine_stats(old));
        }
        slot.engine = Some(
            ClientSlot::new(b.session, slot.index, self.shared.cfg.engine)
                .with_keys(b.keys.clone())
                .with_seal(b.seal.clone()),
        );
        slot.epoch = b.epoch;
        Ok(())
    }

    /// A call written in place into a shared-memory call ring (`encode_args` sent it) is nearly
    /// always answered, within the spinner's clock-free polls, by a whole result in the result
    /// ring: waited for here, on the ring itself, with none of [`run`](Self::run)'s general
    /// machinery (engine state machine, clock, outbox, errors carried through its layers): ~140
    /// instructions and ~10 ns less per null call where the two CPUs are far apart. Anything else
    /// is left to `run`: no answer yet (its wait then starts with clock-free polls of its own), a
    /// frame of another kind (received: `Frame`, handled there first), a broken ring (met again
    /// there).
    #[inline(always)]
    fn await_placed<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
    ) -> Placed<R> {
        let Slot { engine: Some(engine), chan: Some(SlotChannel::Shm(chan)), buf, spinner, .. } = slot else {
            return Placed::NotYet;
        };
        let mut polls = spinner.clock_free_polls();
        loop {
            match chan.try_recv(buf) {
                Ok(Some(n)) => {
                    let Some(r) = self.decode_whole(engine, chan.received(buf, n), proc_no, decode) else {
                        return Placed::Frame(n);
                    };
                    // As the spinner records an answer within its clock-free polls.
                    spinner.observe(Duration::ZERO);
                    return Placed::Done(r);
                }
                Ok(None) if polls > 0 => {
                    polls -= 1;
                    std::hint::spin_loop();
                }
                Ok(None) | Err(_) => return Placed::NotYet,
            }
        }
    }

    /// The call's outcome if `frame` is its whole result, recognised by its header alone (the
    /// engine declines on any other session or frame): its body decoded where it lies.
    #[inline(always)]
    fn decode_whole<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        engine: &mut ClientSlot,
        frame: &[u8],
        proc_no: u32,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
    ) -> Option<Result<R, Error>> {
        let body = engine.take_whole_result(frame)?;
        let decode = decode.take().expect("one reply per call");
        Some(decode(body).map_err(|e| self.decode_error(proc_no, e)))
    }

    /// Sends the call, unless `sent` says it went as it was encoded, and waits for its outcome;
    /// `pending`: a frame already received for it (by [`await_placed`](Self::await_placed)),
    /// handled before anything else.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn run<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        sent: bool,
        pending: Option<usize>,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        marks: Option<&mut Marks>,
    ) -> Result<R, Error> {
        let Slot { engine, chan, buf, outbox, spinner, .. } = slot;
        let io = SlotIo { engine: engine.as_mut().expect("prepared"), buf, outbox, spinner };
        match chan.as_mut().expect("prepared") {
            SlotChannel::Shm(c) => self.exchange(&mut **c, io, proc_no, sent, pending, clock, decode, marks),
            SlotChannel::Other(c) => self.exchange(&mut **c, io, proc_no, sent, pending, clock, decode, marks),
        }
    }

    /// [`run`](Self::run) for one kind of channel.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn exchange<R, E: std::error::Error + Send + Sync + 'static, C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        io: SlotIo<'_>,
        proc_no: u32,
        sent: bool,
        pending: Option<usize>,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        mut marks: Option<&mut Marks>,
    ) -> Result<R, Error> {
        // Whether the engine knows when the call began and when it fails.
        let mut timed = false;
        self.send_call(chan, io.engine, proc_no, sent, clock, &mut timed)?;
        if let Some(m) = marks.as_deref_mut() {
            m.sent = trace::now_ns();
        }
        let block = |c: &mut C, t: Option<Duration>| c.block(t).map_err(Stop::Io);
        match self.await_outcome(chan, io, proc_no, pending, clock, &mut timed, decode, marks, block) {
            Waited::Done(r) => r,
            Waited::Park(_) => unreachable!("a wait whose block never parks returned to park"),
        }
    }

    /// Sends the call whose arguments are in `engine`'s buffer, unless `sent` says it went as it
    /// was encoded (written in place in a shared-memory call ring).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn send_call<C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        engine: &mut ClientSlot,
        proc_no: u32,
        sent: bool,
        clock: &mut CallClock,
        timed: &mut bool,
    ) -> Result<(), Error> {
        let mut send_err: Option<std::io::Error> = None;
        // Over a reliable channel nothing is retransmitted and the clock serves only the
        // deadline, so it is read after the call is sent, and only once the reply has not come
        // within the spinner's clock-free polls: a read costs ~30 ns in a VM, and on shared
        // memory the reply often comes sooner. Elsewhere the start must precede the send, as it
        // times the round trip for retransmission.
        let reliable = chan.reliable();
        if !reliable {
            clock.fix();
        }
        if !sent {
            engine
                .send_call(proc_no, &mut |h: &[u8], b: &[u8]| {
                    if let Err(e) = chan.send(h, b) {
                        send_err.get_or_insert(e);
                    }
                })
                .map_err(|e| self.call_error(proc_no, e))?;
        }
        if !reliable {
            clock.time_once(timed, engine);
        }
        match send_err {
            Some(e) => Err(self.lost(proc_no, Execution::Unknown, e)),
            None => Ok(()),
        }
    }

    /// Waits for the outcome of the call sent: spins, then `block`s (a blocking call sleeps in
    /// it; an async one returns [`Stop::Park`] from it, and this returns [`Waited::Park`]).
    /// `pending`: the length of a frame already received, handled first.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn await_outcome<R, E: std::error::Error + Send + Sync + 'static, C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        io: SlotIo<'_>,
        proc_no: u32,
        mut pending: Option<usize>,
        clock: &mut CallClock,
        timed: &mut bool,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        mut marks: Option<&mut Marks>,
        mut block: impl FnMut(&mut C, Option<Duration>) -> Result<(), Stop>,
    ) -> Waited<R> {
        let SlotIo { engine, buf, outbox, spinner } = io;
        let mut send_err: Option<std::io::Error> = None;
        loop {
            let deadline = || {
                clock.time_once(timed, engine);
                engine.poll_timeout()
            };
            let got = match pending.take() {
                Some(n) => Ok(Some(n)),
                None => spinner.wait_on_lazy(deadline, &mut *chan, |c| c.try_recv(buf).map_err(Stop::Io), &mut block),
            };
            if let (Some(m), Ok(Some(_))) = (marks.as_deref_mut(), &got) {
                m.received = trace::now_ns();
            }
            match got {
                Ok(Some(n)) => {
                    // Nearly every reply over a reliable channel.
                    if let Some(r) = self.decode_whole(engine, chan.received(buf, n), proc_no, decode) {
                        return Waited::Done(r);
                    }
                    // The frame may lie in the transport's own memory (a shared-memory ring), so
                    // what the engine sends in answer waits in the outbox until it is read.
                    outbox.clear();
                    let mut out = |h: &[u8], b: &[u8]| queue_frame(outbox, h, b);
                    // The engine asks for the arrival time only to time retransmissions.
                    let arrived = || spinner.ready_at().unwrap_or_else(Instant::now);
                    let outcome = match engine.handle(chan.received(buf, n), arrived, &mut out) {
                        Some(Outcome::Reply(body)) => {
                            let decode = decode.take().expect("one reply per call");
                            Some(decode(body).map_err(|e| self.decode_error(proc_no, e)))
                        }
                        Some(Outcome::Failed(e)) => Some(Err(self.call_error(proc_no, e))),
                        Some(Outcome::Remote { code, message }) => Some(Err(self.remote_error(proc_no, code, message))),
                        None => None,
                    };
                    if !outbox.is_empty() {
                        send_outbox(chan, outbox, &mut send_err);
                    }
                    if let Some(r) = outcome {
                        return Waited::Done(r);
                    }
                }
                Ok(None) => {
                    let mut out = |h: &[u8], b: &[u8]| {
                        if let Err(e) = chan.send(h, b) {
                            send_err.get_or_insert(e);
                        }
                    };
                    if let Some(e) = engine.handle_timeout(Instant::now(), &mut out) {
                        return Waited::Done(Err(self.call_error(proc_no, e)));
                    }
                }
                Err(Stop::Io(e)) => return Waited::Done(Err(self.lost(proc_no, Execution::Unknown, e))),
                Err(Stop::Park(t)) => return Waited::Park(t),
            }
            if let Some(e) = send_err.take() {
                if chan.reliable() {
                    return Waited::Done(Err(self.lost(proc_no, Execution::Unknown, e)));
                }
            }
        }
    }

    /// Where a call of `proc_no` goes, as errors name it (without the procedure's name, which
    /// [`Client`] adds).
    #[cold]
    fn site(&self, proc_no: u32) -> CallSite {
        let s = &self.shared;
        CallSite { uri: s.uri.clone(), program: s.program, version: s.version, proc_no, name: None }
    }

    #[cold]
    fn lost(&self, proc_no: u32, execution: Execution, source: std::io::Error) -> Error {
        Error::ConnectionLost { call: self.site(proc_no), execution, source }
    }

    #[cold]
    fn decode_error<E: std::error::Error + Send + Sync + 'static>(&self, proc_no: u32, e: E) -> Error {
        Error::Decode { call: self.site(proc_no), source: Box::new(e) }
    }

    #[cold]
    fn call_error(&self, proc_no: u32, e: CallError) -> Error {
        let call = self.site(proc_no);
        match e {
            CallError::Timeout { after, execution } => Error::Timeout { call, after, execution },
            CallError::TooLarge { size, max } => Error::TooLarge { call, size: Some(size), max: max as usize },
            CallError::SessionLost { restarted: true, retry_safe: false } => Error::ServerRestarted { call },
            CallError::SessionLost { retry_safe, .. } => {
                Error::SessionLost { call, execution: if retry_safe { Execution::NotSent } else { Execution::Unknown } }
            }
        }
    }

    /// The server's own error, with its reason when it gave one.
    #[cold]
    fn remote_error(&self, proc_no: u32, code: ErrorCode, message: Result<&str, WireError>) -> Error {
        let call = self.site(proc_no);
        let message = match message {
            Ok("") => None,
            Ok(m) => Some(m.to_string()),
            Err(e) => Some(format!("(the server's reason was unreadable: {e})")),
        };
        match code {
            ErrorCode::UnknownProcedure => Error::UnknownProcedure { call },
            ErrorCode::GarbageArgs => Error::GarbageArgs { call, detail: message },
            ErrorCode::ServerError => Error::ServerError { call, message },
            ErrorCode::Busy => Error::Busy { call, message },
            ErrorCode::TooLarge => Error::TooLarge { call, size: None, max: self.session().max_message as usize },
            ErrorCode::UnknownSession => Error::SessionLost { call, execution: Execution::Unknown },
            ErrorCode::Unknown(code) => Error::UnknownRemoteError { call, code, message },
        }
    }
}

/// Encodes a call's arguments: over shared memory straight into the call ring, after room for
/// the header, and the call is then sent from there (`Ok(true)`) if it goes as one record (as a
/// server's procedure writes its result into the result ring); otherwise, or when the ring's
/// free space is too small (the encoder spills), into the slot engine's buffer, for
/// [`Lowlat::run`] to send (`Ok(false)`). `encoded`, when tracing: set to the moment the
/// arguments were encoded, before the call is published (so it precedes the server's receipt).
#[inline]
fn encode_args<E>(
    slot: &mut Slot,
    proc_no: u32,
    encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
    mut encoded: Option<&mut u64>,
) -> Result<bool, E> {
    let mut mark = || {
        if let Some(at) = encoded.as_deref_mut() {
            *at = trace::now_ns();
        }
    };
    let engine = slot.engine.as_mut().expect("prepared");
    let Some(SlotChannel::Shm(chan)) = slot.chan.as_mut() else {
        encode(&mut OutBuf::from(engine.args_buf()))?;
        mark();
        return Ok(false);
    };
    let mut encode = Some(encode);
    let mut failed = None;
    let built = chan.send_in_place(|record| {
        let encode = encode.take()?;
        let (head, body) = record.split_at_mut(HEADER_LEN.min(record.len()));
        let mut args = OutBuf::in_region(body, engine.args_buf());
        if let Err(e) = encode(&mut args) {
            failed = Some(e);
            return None;
        }
        mark();
        // Spilled into the engine's buffer: sent from there.
        let len = args.placed()?;
        // No room for the header (a full ring lends nothing), or a call that cannot go as one
        // record: the engine has begun nothing, and the arguments go to its buffer.
        let head: Option<&mut [u8; HEADER_LEN]> = head.try_into().ok();
        match head.and_then(|head| Some((head, engine.place_call(proc_no, len)?))) {
            Some((head, h)) => {
                *head = h;
                Some(HEADER_LEN + len)
            }
            None => {
                engine.args_buf().extend_from_slice(&body[..len]);
                None
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // Not lent at all (a broken channel, reported when the call is sent): encoded as elsewhere.
    if let Some(encode) = encode {
        encode(&mut OutBuf::from(engine.args_buf()))?;
        mark();
    }
    Ok(matches!(built, Ok(Some(_))))
}

/// The arguments of the call `slot` just sent, to send it again: kept by its engine or, written
/// into a shared-memory call ring, read back from there (nothing has been sent since: it is the
/// ring's last record, and its header names this call).
fn sent_args(slot: &Slot) -> Option<Vec<u8>> {
    let engine = slot.engine.as_ref()?;
    if let Some(args) = engine.args() {
        return Some(args.to_vec());
    }
    let Some(SlotChannel::Shm(chan)) = slot.chan.as_ref() else {
        return None;
    };
    let (h, args) = Header::parse(chan.last_sent()?).ok()?;
    let ours = h.kind == HeaderKind::Call && h.call_no == engine.call_no() && h.slot == engine.slot();
    ours.then(|| args.to_vec())
}

/// A slot engine's counters.
fn engine_stats(e: &ClientSlot) -> ClientStats {
    ClientStats {
        calls: e.calls,
        retransmissions: e.retransmissions,
        mac_failures: e.mac_failures,
        ignored: e.ignored,
        ..ClientStats::default()
    }
}

/// Queues a frame in `outbox` after its length, for [`send_outbox`].
fn queue_frame(outbox: &mut Vec<u8>, head: &[u8], body: &[u8]) {
    outbox.extend_from_slice(&((head.len() + body.len()) as u32).to_ne_bytes());
    outbox.extend_from_slice(head);
    outbox.extend_from_slice(body);
}

/// Sends the frames queued in `outbox` (each after its length), keeping the first failure.
fn send_outbox<C: ClientChannel + ?Sized>(chan: &mut C, outbox: &[u8], send_err: &mut Option<std::io::Error>) {
    let mut rest = outbox;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let (frame, next) = tail.split_at(u32::from_ne_bytes(*len) as usize);
        if let Err(e) = chan.send(&frame[..HEADER_LEN], &frame[HEADER_LEN..]) {
            send_err.get_or_insert(e);
        }
        rest = next;
    }
}

/// Acknowledges the last result of idle slots after the engine's delay, so the server can free
/// it. Exits when the client is dropped.
fn spawn_acknowledger(shared: Weak<Shared>) {
    // Under way before the client is: the thread's own start-up (which allocates) never falls
    // among the calls.
    let started = Arc::new(std::sync::Barrier::new(2));
    let running = started.clone();
    let spawned = std::thread::Builder::new().name("lowlat-acks".into()).spawn(move || {
        running.wait();
        loop {
            let delay = match shared.upgrade() {
                None => return,
                Some(s) => {
                    let now = Instant::now();
                    s.acknowledging.store(true, Ordering::Release);
                    for slot in s.slots.iter() {
                        let Some(mut g) = slot.try_lock() else { continue };
                        let Slot { engine, chan, .. } = &mut *g;
                        if let (Some(e), Some(c)) = (engine.as_mut(), chan.as_mut()) {
                            let c = c.as_dyn();
                            if !e.is_active() && e.poll_timeout().is_some_and(|t| t <= now) {
                                e.handle_timeout(now, &mut |h: &[u8], b: &[u8]| {
                                    let _ = c.send(h, b);
                                });
                            }
                        }
                    }
                    s.acknowledging.store(false, Ordering::Release);
                    s.cfg.engine.ack_delay
                }
            };
            std::thread::sleep(delay.max(Duration::from_millis(1)));
        }
    });
    if spawned.is_ok() {
        started.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what is sent; fails every send after the first `ok` ones.
    struct Recording {
        sent: Vec<(Vec<u8>, Vec<u8>)>,
        ok: usize,
        attempts: usize,
    }

    impl ClientChannel for Recording {
        fn send(&mut self, head: &[u8], body: &[u8]) -> std::io::Result<()> {
            self.attempts += 1;
            if self.sent.len() == self.ok {
                return Err(std::io::Error::other(format!("send {} refused", self.attempts)));
            }
            self.sent.push((head.to_vec(), body.to_vec()));
            Ok(())
        }
        fn try_recv(&mut self, _: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
            Ok(None)
        }
        fn block(&mut self, _: Option<Duration>) -> std::io::Result<()> {
            Ok(())
        }
        fn park(&mut self) -> std::io::Result<driver::WakeOn> {
            Ok(driver::WakeOn::Now)
        }
        fn max_frame(&self) -> usize {
            1500
        }
        fn reliable(&self) -> bool {
            false
        }
    }

    /// A look at a slot (its counters) while a call holds it waits for the call to end, and
    /// does not hold it longer.
    #[test]
    fn a_look_at_a_slot_waits_for_the_call_that_holds_it() {
        let slot = SpinMutex::new(Slot {
            index: 0,
            epoch: 7,
            conn_gen: 0,
            engine: None,
            chan: None,
            buf: Vec::new(),
            outbox: Vec::new(),
            spinner: Spinner::new(lowlat_transport::SpinPolicy::Adaptive),
            earlier: ClientStats::default(),
        });
        let released = AtomicBool::new(false);
        std::thread::scope(|s| {
            let mut call = slot.try_lock().expect("free");
            s.spawn(|| {
                let g = hold(&slot);
                assert!(released.load(Ordering::Acquire), "held while the call still had the slot");
                assert_eq!(g.epoch, 8);
            });
            std::thread::sleep(Duration::from_millis(30));
            call.epoch = 8;
            released.store(true, Ordering::Release);
            drop(call);
        });
        assert!(slot.try_lock().is_some(), "the look gave the slot back");
    }

    #[test]
    fn frames_queued_while_reading_go_out_whole_and_in_order() {
        let (h1, h2) = ([1u8; HEADER_LEN], [2u8; HEADER_LEN]);
        let mut outbox = Vec::new();
        queue_frame(&mut outbox, &h1, b"first body");
        queue_frame(&mut outbox, &h2, b"");
        queue_frame(&mut outbox, &h1, &[9u8; 1000]);

        let mut chan = Recording { sent: Vec::new(), ok: usize::MAX, attempts: 0 };
        let mut err = None;
        send_outbox(&mut chan, &outbox, &mut err);
        assert!(err.is_none());
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            vec![(h1.to_vec(), b"first body".to_vec()), (h2.to_vec(), Vec::new()), (h1.to_vec(), vec![9u8; 1000])];
        assert_eq!(chan.sent, want);

        // A failed send is reported, the first failure kept, and the frames after it are still
        // tried.
        let mut chan = Recording { sent: Vec::new(), ok: 1, attempts: 0 };
        send_outbox(&mut chan, &outbox, &mut err);
        assert_eq!((chan.sent.len(), chan.attempts), (1, 3));
        assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("send 2 refused"));
        let mut err = None;
        send_outbox(&mut chan, &[], &mut err);
        assert!(err.is_none() && chan.sent.len() == 1, "an empty outbox sends nothing");

        // A keyed session's header comes with its tag: the frame goes whole (split after the
        // header, as every frame is).
        let tagged = [7u8; HEADER_LEN + lowlat_proto::TAG_LEN];
        let mut outbox = Vec::new();
        queue_frame(&mut outbox, &tagged, b"body");
        queue_frame(&mut outbox, &h2, b"next");
        let mut chan = Recording { sent: Vec::new(), ok: usize::MAX, attempts: 0 };
        send_outbox(&mut chan, &outbox, &mut err);
        let tag_and_body = [&[7u8; lowlat_proto::TAG_LEN][..], b"body"].concat();
        assert_eq!(chan.sent, vec![(vec![7u8; HEADER_LEN], tag_and_body), (h2.to_vec(), b"next".to_vec())]);
    }
}
