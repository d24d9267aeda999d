//! The client: a binding to one program and version at one endpoint, shared by any number of
//! threads.
//!
//! A binding has K call slots; each slot owns its own channel to the server (a connected UDP
//! socket, a TCP connection, ...) and its own protocol state, so a calling thread claims a free
//! slot and then touches nothing shared until it releases it: no lock is waited on and nothing is
//! allocated on the call path once the slot's buffers have grown to the messages in use.
//! A call encodes its arguments straight into the slot's send buffer and decodes its result where
//! it lies in the receive buffer (Firefly's VAR IN / VAR OUT; eRPC's message buffers).

mod acks;
mod call;
mod call_async;
mod errors;
mod lowlat;
pub(crate) mod onc;
mod pacing;
pub(crate) mod pool;
mod session;
pub(crate) mod spread;
mod spread_async;

use std::sync::Arc;
use std::time::Duration;

use lowlat_codec::OutBuf;
use lowlat_proto::{ByteOrder, Session};

use self::lowlat::Lowlat;
use self::onc::OncClient;
use self::spread::{ServerStats, Spread};
use crate::stats::ClientStats;
use crate::{CallOptions, CallSite, ClientConfig, Endpoint, Error};

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
    /// Each call in a `tracing` span ([`ClientConfig::spans`]).
    spans: bool,
    /// Procedures a client over several servers may send to another server after they may
    /// have run on one ([`Client::idempotent`]); read only when a call failed.
    idempotent: Arc<[u32]>,
}

enum Kind {
    Lowlat(Lowlat),
    Onc(Box<OncClient>),
    /// Several servers, each member an ordinary single-server client (`spread`).
    Spread(Box<Spread>),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Lowlat(c) => c.fmt(f),
            Kind::Onc(c) => c.fmt(f),
            Kind::Spread(c) => c.fmt(f),
        }
    }
}

impl Client {
    /// Binds to `program` `version` at `uri` with default settings.
    pub fn connect(uri: &str, program: u32, version: u32) -> Result<Client, Error> {
        Client::connect_with(uri, program, version, ClientConfig::default())
    }

    /// Binds with the given settings.
    ///
    /// `uri` may name several servers: endpoints separated by commas (an element without a
    /// scheme takes the previous one's: `udp://10.0.0.1:7000,10.0.0.2:7000`), and a host name
    /// the system resolver (`/etc/hosts`, DNS) gives several addresses stands for one server
    /// per address. Calls are then spread over the servers that answer, a server that fails is
    /// left out for a while, and a call that certainly did not run on one goes to the next (see
    /// [`idempotent`](Self::idempotent) for calls that may have run). Connecting fails only
    /// when no server can be bound: with the error of one that answered and refused (an
    /// unknown program, a key), else [`Error::NoServer`] listing what each said.
    pub fn connect_with(uri: &str, program: u32, version: u32, cfg: ClientConfig) -> Result<Client, Error> {
        if !cfg.pin_cpus.is_empty() {
            crate::reactor::pin(&cfg.pin_cpus)
                .map_err(|e| Error::io(format!("{uri}: pin lowlat's threads to CPUs {:?}", cfg.pin_cpus), e))?;
        }
        if let Some(members) = Client::members(uri)? {
            let spans = cfg.spans;
            let spread = Spread::connect(uri, members, program, version, cfg)?;
            return Ok(Client {
                kind: Kind::Spread(Box::new(spread)),
                names: Arc::new([]),
                spans,
                idempotent: Arc::new([]),
            });
        }
        Client::connect_single(uri, program, version, cfg)
    }

    /// The servers `uri` names when it names more than one.
    fn members(uri: &str) -> Result<Option<Vec<String>>, Error> {
        // An IP address and port, the common case, is today's single server without a look at
        // the resolver.
        let literal = || {
            let (_, rest) = uri.split_once("://")?;
            rest.parse::<std::net::SocketAddr>().ok()
        };
        if !uri.contains(',')
            && (literal().is_some() || uri.starts_with("shm:") || uri.starts_with("eth:") || uri.starts_with("xdp:"))
        {
            return Ok(None);
        }
        let members = spread::expand(uri, spread::system_resolve)?;
        Ok((members.len() > 1).then_some(members))
    }

    /// A client of exactly one server.
    fn connect_single(uri: &str, program: u32, version: u32, cfg: ClientConfig) -> Result<Client, Error> {
        let endpoint: Endpoint = uri.parse()?;
        let spans = cfg.spans;
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
        Ok(Client { kind, names: Arc::new([]), spans, idempotent: Arc::new([]) })
    }

    /// This client, sending a call of one of `procs` to another server after it may have run
    /// on one (a call that certainly did not run always goes to the next server): for
    /// procedures whose running twice does no harm. Only a client over several servers sends
    /// calls elsewhere; a call's [`CallOptions::idempotent`] overrides this. Generated clients
    /// have the same method.
    pub fn idempotent(mut self, procs: &[u32]) -> Client {
        self.idempotent = procs.into();
        self
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
            Kind::Spread(c) => c.site(proc_no),
        };
        CallSite { name: self.names.iter().find(|(n, _)| *n == proc_no).map(|(_, name)| name.clone()), ..site }
    }

    /// The endpoint, as given to `connect`.
    pub fn uri(&self) -> &str {
        match &self.kind {
            Kind::Lowlat(c) => c.uri(),
            Kind::Onc(c) => c.uri(),
            Kind::Spread(c) => c.uri(),
        }
    }

    /// The byte order message bodies travel in (the server's): only the client converts.
    /// Big-endian over ONC RPC (XDR).
    pub fn server_byte_order(&self) -> ByteOrder {
        match &self.kind {
            Kind::Lowlat(c) => c.server_order(),
            Kind::Onc(c) => c.session().server_order,
            Kind::Spread(c) => c.server_order(),
        }
    }

    /// The session currently bound (over ONC RPC, which has no sessions, a description of the
    /// binding with token 0; over several servers, the first connected server's).
    pub fn session(&self) -> Session {
        match &self.kind {
            Kind::Lowlat(c) => c.session(),
            Kind::Onc(c) => c.session(),
            Kind::Spread(c) => c.session(),
        }
    }

    /// Largest message a call may carry on this binding.
    pub fn max_message(&self) -> usize {
        self.session().max_message as usize
    }

    /// Whether this binding speaks ONC RPC (bodies in XDR).
    pub fn is_onc(&self) -> bool {
        match &self.kind {
            Kind::Onc(_) => true,
            Kind::Lowlat(_) => false,
            Kind::Spread(c) => c.is_onc(),
        }
    }

    /// What this binding has done: binds, calls, retransmissions, frames that failed their tag
    /// or were ignored (over ONC RPC, which keeps no such counts, all zero). Reading waits for
    /// each slot's call in progress to end. Over several servers, the sum of their bindings';
    /// [`server_stats`](Self::server_stats) has each server's.
    pub fn stats(&self) -> ClientStats {
        match &self.kind {
            Kind::Lowlat(c) => c.stats(),
            Kind::Onc(_) => ClientStats::default(),
            Kind::Spread(c) => c.stats(),
        }
    }

    /// Each server's counters: calls sent to it, refused, failed, moved to another server,
    /// times left out, what it last said. A single-server client has one entry, with the
    /// binding's counters only.
    pub fn server_stats(&self) -> Vec<ServerStats> {
        match &self.kind {
            Kind::Spread(c) => c.server_stats(),
            _ => vec![ServerStats { uri: self.uri().into(), up: true, client: self.stats(), ..ServerStats::default() }],
        }
    }

    /// One call with the default deadline. `encode` appends the arguments to an empty buffer
    /// (over shared memory the call ring's free space, so they are written once; elsewhere a
    /// buffer preallocated per slot); `decode` reads the result where it lies.
    #[inline]
    pub fn call<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        if self.spans {
            return self.call_in_span(proc_no, None, encode, decode);
        }
        self.call_by(proc_no, None, encode, decode)
    }

    /// One call that fails with [`Error::Timeout`] unless it completes within `timeout`.
    #[inline]
    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        if self.spans {
            return self.call_in_span(proc_no, Some(timeout), encode, decode);
        }
        self.call_by(proc_no, Some(timeout), encode, decode)
    }

    /// A call within `timeout`, or the binding's deadline.
    #[inline(always)]
    fn call_by<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Option<Duration>,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let r = match &self.kind {
            Kind::Spread(c) => c.call(proc_no, timeout, &self.idempotent, encode, decode),
            _ => self.call_leaf(proc_no, timeout, encode, decode),
        };
        r.map_err(|e| e.named(&self.names))
    }

    /// A call on one server: this client's, or a spread's member's (never itself a spread,
    /// which keeps the generic call path from recursing).
    #[inline(always)]
    fn call_leaf<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Option<Duration>,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        match &self.kind {
            Kind::Lowlat(c) => c.call_timeout(proc_no, timeout.unwrap_or(c.shared.cfg.deadline), encode, decode),
            Kind::Onc(c) => c.call_timeout(proc_no, timeout.unwrap_or(c.deadline()), encode, decode),
            Kind::Spread(c) => Err(c.nested()),
        }
    }

    /// [`call_by`](Self::call_by) inside the call's span ([`ClientConfig::spans`]).
    #[cold]
    #[inline(never)]
    fn call_in_span<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Option<Duration>,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let _entered = self.span(proc_no).entered();
        self.call_by(proc_no, timeout, encode, decode)
    }

    /// The span of a call of `proc_no` (its ids are recorded as the call ends).
    fn span(&self, proc_no: u32) -> tracing::Span {
        let site = self.call_site(proc_no);
        crate::spans::client_call(site.program, site.version, proc_no, site.name.as_deref())
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
        if let (Kind::Spread(c), Some(idempotent)) = (&self.kind, options.idempotent) {
            return self.spread_call_with(c.as_ref(), proc_no, options.deadline, idempotent, encode, decode);
        }
        match options.deadline {
            Some(timeout) => self.call_timeout(proc_no, timeout, encode, decode),
            None => self.call(proc_no, encode, decode),
        }
    }

    /// [`call_with`](Self::call_with) over several servers with the call's own idempotent
    /// mark.
    #[cold]
    #[inline(never)]
    fn spread_call_with<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        spread: &Spread,
        proc_no: u32,
        timeout: Option<Duration>,
        idempotent: bool,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let _entered = self.spans.then(|| self.span(proc_no).entered());
        let idempotent: &[u32] = if idempotent { &[proc_no] } else { &[] };
        spread.call(proc_no, timeout, idempotent, encode, decode).map_err(|e| e.named(&self.names))
    }
}

/// Async calls: each call of [`Client`] as a future, usable from any executor (tokio, a
/// hand-rolled `block_on`, [`crate::wait_all`]): it needs no runtime of lowlat's own. A call is
/// sent when it is made, if a slot is free (else as soon as one is): calls made one after another
/// are in flight together before any is awaited. Each poll looks once for the reply; finding
/// none, the future asks to be polled again (its executor runs its other tasks first, so tasks
/// take turns and their calls overlap) while the binding's spin budget has not run out since
/// the client's last completed call, and otherwise parks in lowlat's reactor thread (epoll on
/// the slot's socket; over shared memory, an eventfd the server rings for a parked client),
/// leaving the executor's thread free. Many calls may be in flight at once on one client, one
/// per slot ([`ClientConfig::slots`]; calls beyond them wait for a slot to be given back, within
/// their deadline); a future dropped before it completes gives its slot back at once, its call
/// abandoned (it may have executed; a late reply is ignored). Opening a slot's channel, and
/// binding again after the server restarted, still happen within one poll.
impl Client {
    /// [`call`](Self::call) as a future.
    pub fn call_async<'a, R, E>(
        &'a self,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E> + 'a,
        decode: impl FnOnce(&[u8]) -> Result<R, E> + 'a,
    ) -> impl std::future::Future<Output = Result<R, Error>> + Unpin + 'a
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
    ) -> impl std::future::Future<Output = Result<R, Error>> + Unpin + 'a
    where
        R: 'a,
        E: std::error::Error + Send + Sync + 'static,
    {
        let deadline = options.deadline;
        let span = if self.spans { self.span(proc_no) } else { tracing::Span::none() };
        // Sent now, in the call's span.
        let started = span.in_scope(|| match &self.kind {
            Kind::Spread(c) => {
                let idempotent = options.idempotent.unwrap_or_else(|| self.idempotent.contains(&proc_no));
                Started::Spread(c.call_async(proc_no, deadline, idempotent, encode, decode))
            }
            _ => Started::One(self.one_server_async(proc_no, deadline, encode, decode)),
        });
        AsyncCall { started, names: &self.names, span }
    }

    /// An async call on this client's one server (a spread's member's, never a spread's).
    pub(crate) fn one_server_async<'a, R, E, Enc, Dec>(
        &'a self,
        proc_no: u32,
        deadline: Option<Duration>,
        encode: Enc,
        decode: Dec,
    ) -> OneServerCall<'a, R, E, Enc, Dec>
    where
        E: std::error::Error + Send + Sync + 'static,
        Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        Dec: FnOnce(&[u8]) -> Result<R, E>,
    {
        match &self.kind {
            Kind::Lowlat(c) => {
                OneServer::Lowlat(c.call_async(proc_no, deadline.unwrap_or(c.shared.cfg.deadline), encode, decode))
            }
            Kind::Onc(c) => OneServer::Onc(c.call_async(proc_no, deadline.unwrap_or(c.deadline()), encode, decode)),
            Kind::Spread(c) => OneServer::Failed(Some(c.nested())),
        }
    }
}

/// An async call on one server with these closures.
pub(crate) type OneServerCall<'a, R, E, Enc, Dec> =
    OneServer<call_async::LowlatCall<'a, R, E, Enc, Dec>, onc::OncCall<'a, R, E, Enc, Dec>>;

/// An async call on one server, of either protocol, already sent (or failed before it could
/// be).
pub(crate) enum OneServer<L, O> {
    Lowlat(L),
    Onc(O),
    Failed(Option<Error>),
}

impl<R, L, O> std::future::Future for OneServer<L, O>
where
    L: std::future::Future<Output = Result<R, Error>> + Unpin,
    O: std::future::Future<Output = Result<R, Error>> + Unpin,
{
    type Output = Result<R, Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match &mut *self {
            OneServer::Lowlat(call) => std::pin::Pin::new(call).poll(cx),
            OneServer::Onc(call) => std::pin::Pin::new(call).poll(cx),
            OneServer::Failed(e) => std::task::Poll::Ready(Err(e.take().unwrap_or_else(|| Error::Io {
                op: "a call polled after it completed".into(),
                source: std::io::ErrorKind::Other.into(),
            }))),
        }
    }
}

/// An async call on one server or over several (inline: a box would cost an allocation per
/// call over several servers, which make none once warm).
enum Started<One, Several> {
    One(One),
    Spread(Several),
}

/// [`Client::call_with_async`]'s future: the call, polled in its span, its error naming the
/// procedure.
struct AsyncCall<'a, One, Several> {
    started: Started<One, Several>,
    names: &'a [(u32, Arc<str>)],
    span: tracing::Span,
}

impl<R, One, Several> std::future::Future for AsyncCall<'_, One, Several>
where
    One: std::future::Future<Output = Result<R, Error>> + Unpin,
    Several: std::future::Future<Output = Result<R, Error>> + Unpin,
{
    type Output = Result<R, Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        let _in_span = this.span.enter();
        let polled = match &mut this.started {
            Started::One(call) => std::pin::Pin::new(call).poll(cx),
            Started::Spread(call) => std::pin::Pin::new(call).poll(cx),
        };
        polled.map(|r| r.map_err(|e| e.named(this.names)))
    }
}
