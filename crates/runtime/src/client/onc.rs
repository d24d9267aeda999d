//! The client side of ONC RPC v2 (`onc+udp://HOST[:PORT]`, `onc+tcp://HOST[:PORT]`), behind
//! [`crate::Client`]: any rpcgen/libtirpc server (or a lowlat one) of a program defined in a `.x`
//! file, with XDR bodies.
//!
//! Like lowlat's own client, a binding has slots, each with its own channel (`crate::driver`: a
//! connected UDP socket, or a TCP connection with record marking) and its own engine
//! (`lowlat-onc`'s [`ClientSlot`]: xids, retransmission, deadline), so threads sharing the
//! binding never wait on one another's socket. This file only moves messages between the two and
//! turns outcomes into [`Error`]s. Without a port, rpcbind on the host says where the program
//! listens.

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use lowlat_codec::OutBuf;
use lowlat_onc::engine::{CallError, ClientSlot, ClientSlotConfig, Outcome};
use lowlat_onc::rpcbind::{Netid, Rpcbind};
use lowlat_onc::{AcceptStatus, CallHeader, Credential, RejectStatus, ReplyBody};
use lowlat_proto::{ByteOrder, Execution, Session};
use lowlat_transport::udp::MAX_DATAGRAM;
use lowlat_wait::{SpinPolicy, Spinner};

use super::pacing::{claim_or_park, Pacing, SlotWait};
use super::pool::{InLine, SlotPool};
use crate::driver::{self, ClientChannel};
use crate::reactor::{self, Parking};
use crate::waiting::{Stop, Waited};
use crate::{CallSite, ClientConfig, Endpoint, Error};

struct Slot {
    engine: ClientSlot,
    chan: Option<Box<dyn ClientChannel>>,
    /// The connection generation `chan` was opened in (see [`OncClient::conn_gen`]).
    gen: u64,
    buf: Vec<u8>,
    spinner: Spinner,
}

/// An async call's place in line for a slot, left when the call is dropped.
struct Waiting<'a> {
    slots: &'a SlotPool<Slot>,
    line: InLine,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.slots.leave_line(&mut self.line);
    }
}

/// A slot lent to an async call: given back when dropped, its call abandoned unless it
/// `finished` (the future was dropped with the call in flight).
struct Lent<'a> {
    client: &'a OncClient,
    slot: usize,
    finished: bool,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let c = self.client;
        c.slots.unparked(self.slot);
        let mut g = c.slots.hold(self.slot);
        if !self.finished {
            g.engine.abandon();
            if let Some(chan) = g.chan.as_mut() {
                let _ = chan.unpark(false);
            }
            // A connection with a reply still to come for the abandoned call is not reused.
            if c.tcp {
                g.chan = None;
            }
        }
        c.slots.give_back(g);
    }
}

/// One async call over ONC RPC ([`OncClient::call_async`]).
pub(crate) struct OncCall<'a, R, E, Enc, Dec> {
    client: &'a OncClient,
    proc_no: u32,
    timeout: Duration,
    /// When it was made (its engine's clock starts there, as a blocking call's does).
    begun: Instant,
    deadline: Instant,
    encode: Option<Enc>,
    decode: Option<Dec>,
    /// The slot lent to this call, once it has sent.
    lent: Option<Lent<'a>>,
    /// Why the call failed as it was sent at once, told by the first poll (boxed: rare, and the
    /// future is the smaller for it).
    failed: Option<Box<Error>>,
    /// Looks once per poll, never spins (`super::pacing`).
    look: Spinner,
    pacing: Pacing,
    parking: Option<Parking>,
    waiting: Waiting<'a>,
    _result: PhantomData<fn() -> (R, E)>,
}

// Nothing in the call points into itself (the closures are only called): it may move between
// polls.
impl<R, E, Enc, Dec> Unpin for OncCall<'_, R, E, Enc, Dec> {}

impl<R, E, Enc, Dec> OncCall<'_, R, E, Enc, Dec> {
    /// The decoder, if no reply used it (a client over several servers gives it to the call
    /// that replaces this one).
    pub(crate) fn take_decode(&mut self) -> Option<Dec> {
        self.decode.take()
    }
}

impl<R, E, Enc, Dec> std::future::Future for OncCall<'_, R, E, Enc, Dec>
where
    E: std::error::Error + Send + Sync + 'static,
    Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
    Dec: FnOnce(&[u8]) -> Result<R, E>,
{
    type Output = Result<R, Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let c = this.client;
        let (proc_no, deadline) = (this.proc_no, this.deadline);
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Err(*e));
        }
        let was_parked = this.parking.take().is_some();
        let i = match &this.lent {
            Some(l) => l.slot,
            None => {
                let g = match claim_or_park(&c.slots, cx.waker(), &mut this.waiting.line, deadline) {
                    Ok(SlotWait::Claimed(g)) => g,
                    Ok(SlotWait::Parked(p)) => {
                        this.parking = Some(p);
                        return Poll::Pending;
                    }
                    Ok(SlotWait::TimedOut) => return Poll::Ready(Err(c.no_slot(proc_no, this.timeout))),
                    Err(e) => return Poll::Ready(Err(e)),
                };
                let encode = this.encode.take().expect("encoded once");
                match c.send_lent(g, proc_no, encode, this.begun, deadline) {
                    Ok(l) => this.lent.insert(l).slot,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        };
        let mut g = c.slots.hold(i);
        if was_parked {
            c.slots.unparked(i);
        }
        let Slot { engine, chan, buf, spinner, .. } = &mut *g;
        let ch = chan.as_deref_mut().expect("opened to send");
        let mut check_peer = was_parked;
        let r = loop {
            let block = |_: &mut dyn ClientChannel, t| Err(Stop::Park(t));
            match c.await_outcome(ch, engine, buf, &mut this.look, proc_no, &mut this.decode, block) {
                Waited::Done(r) => break r,
                Waited::Park(_) if this.pacing.keep_polling(c.slots.returned(), spinner) => {
                    // Polled again once the executor has run its other tasks.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Waited::Park(t) => match reactor::park_on(ch, t, std::mem::take(&mut check_peer), cx.waker()) {
                    Ok(None) => continue,
                    Ok(Some(p)) => {
                        this.parking = Some(p);
                        c.slots.parked(i, cx.waker());
                        return Poll::Pending;
                    }
                    Err(e) => {
                        engine.abandon();
                        break Err(c.lost(proc_no, e));
                    }
                },
            }
        };
        if let Err(e) = &r {
            c.after_failure(e, chan);
        }
        drop(g);
        if let Some(mut l) = this.lent.take() {
            l.finished = true;
        }
        c.slots.wake_parked(i, |s| s.chan.as_mut().is_some_and(|ch| ch.ready()));
        Poll::Ready(r)
    }
}

pub(crate) struct OncClient {
    uri: Arc<str>,
    program: u32,
    version: u32,
    cfg: ClientConfig,
    target: SocketAddr,
    tcp: bool,
    /// The call slots (`super::pool`), each with its channel opened when first used.
    slots: SlotPool<Slot>,
    /// Moves on whenever a call finds the server gone (over TCP): every connection opened
    /// before then is replaced before it is used. A slot idle while its server was killed
    /// holds a connection the dead server accepted and the kernel closed; a call sent on it
    /// would be lost after the server came back, with no way to say whether it ran.
    conn_gen: AtomicU64,
}

impl std::fmt::Debug for OncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", &self.uri)
            .field("target", &self.target)
            .field("program", &self.program)
            .field("version", &self.version)
            .finish()
    }
}

impl OncClient {
    pub fn connect(
        uri: &str,
        endpoint: &Endpoint,
        program: u32,
        version: u32,
        cfg: ClientConfig,
    ) -> Result<OncClient, Error> {
        let (host, port, tcp) = match endpoint {
            Endpoint::OncUdp { host, port } => (host, *port, false),
            Endpoint::OncTcp { host, port } => (host, *port, true),
            _ => return Err(Error::InvalidUri { uri: uri.to_string(), reason: "not an onc+ URI".into() }),
        };
        let target = match port {
            Some(p) => driver::resolve(uri, &format!("{host}:{p}"))?,
            None => {
                let ip = driver::resolve(uri, &format!("{host}:{}", lowlat_onc::rpcbind::PORT))?.ip();
                let netid = if tcp { Netid::Tcp } else { Netid::Udp };
                let not_there = |detail: String| Error::NotRegistered {
                    uri: uri.to_string(),
                    host: ip.to_string(),
                    program,
                    version,
                    detail,
                };
                match Rpcbind::at(ip).getaddr(program, version, netid) {
                    Ok(Some(a)) => a,
                    Ok(None) => return Err(not_there("not registered".into())),
                    Err(e) => return Err(not_there(e.to_string())),
                }
            }
        };
        let cred = match cfg.onc_auth {
            Some(a) => Credential::Sys(a),
            None => Credential::None,
        };
        let engine_cfg = ClientSlotConfig {
            reliable: tcp,
            // A datagram bounds the whole message; over TCP the binding's maximum bounds the
            // arguments (the server's bounds its records).
            max_message: if tcp { cfg.max_message + CallHeader::encoded_len(&cred) } else { MAX_DATAGRAM },
            ..ClientSlotConfig::default()
        };
        let now = Instant::now();
        let slots = (0..cfg.slots.max(1))
            .map(|_| {
                let engine_cfg = ClientSlotConfig { seed: crate::server::random_seed()?, ..engine_cfg };
                Ok(Slot {
                    engine: ClientSlot::new(program, version, &cred, engine_cfg, now),
                    chan: None,
                    gen: 0,
                    buf: Vec::new(),
                    spinner: crate::marks::spinner(cfg.spin).awaiting_answers(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        // Every slot counts as open: a channel is a socket or a connection, opened when first
        // used, with no bind to make.
        let slots = SlotPool::new(slots, |_| true);
        let c = OncClient { uri: uri.into(), program, version, cfg, target, tcp, slots, conn_gen: AtomicU64::new(0) };
        // Open the first channel now, so a server that is not there shows at connect time (TCP).
        let mut s0 = c.slots.hold(0);
        let Slot { chan, gen, .. } = &mut *s0;
        c.channel(chan, gen)?;
        drop(s0);
        Ok(c)
    }

    /// The slot's channel, opened (again) if it has none or one from before the server was
    /// last found gone.
    fn channel<'s>(
        &self,
        chan: &'s mut Option<Box<dyn ClientChannel>>,
        gen: &mut u64,
    ) -> Result<&'s mut dyn ClientChannel, Error> {
        let now = self.conn_gen.load(Ordering::Acquire);
        if *gen != now {
            *chan = None;
        }
        if chan.is_none() {
            *gen = now;
            let opened = driver::open_onc_channel(self.target, self.tcp, &self.uri, &self.cfg);
            *chan = Some(opened.inspect_err(|e| self.after_failure(e, &mut None))?);
        }
        Ok(chan.as_deref_mut().expect("opened above"))
    }

    /// After a call failed with `e`: a connection in an unknown state is not reused (a datagram
    /// socket has none), and a server found gone retires every connection opened so far.
    #[cold]
    fn after_failure(&self, e: &Error, chan: &mut Option<Box<dyn ClientChannel>>) {
        if !self.tcp {
            return;
        }
        match e {
            Error::ConnectionLost { .. } | Error::ServerNotRunning { .. } => {
                self.conn_gen.fetch_add(1, Ordering::AcqRel);
                *chan = None;
            }
            Error::Timeout { .. } => *chan = None,
            _ => {}
        }
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub fn deadline(&self) -> Duration {
        self.cfg.deadline
    }

    pub fn session(&self) -> Session {
        Session {
            token: 0,
            slots: self.slots.len() as u16,
            window: 1,
            server_order: ByteOrder::Big,
            max_message: self.max_message() as u32,
            max_frame: if self.tcp { self.cfg.onc_max_fragment as u32 } else { MAX_DATAGRAM as u32 },
            generation: 0,
            reliable: self.tcp,
            keyed: false,
            sealed: false,
        }
    }

    fn max_message(&self) -> usize {
        if self.tcp {
            self.cfg.max_message
        } else {
            MAX_DATAGRAM
        }
    }

    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let now = Instant::now();
        let deadline = now + timeout;
        let Some(mut guard) = self.slots.claim(|| deadline) else {
            return Err(self.no_slot(proc_no, timeout));
        };
        let Slot { engine, chan, gen, buf, spinner } = &mut *guard;
        encode(&mut OutBuf::from(engine.args_buf()))
            .map_err(|e| Error::Encode { call: self.site(proc_no), source: Box::new(e) })?;
        let c = self.channel(chan, gen)?;
        let r = self.exchange(c, engine, buf, spinner, proc_no, now, deadline, decode);
        if let Err(e) = &r {
            self.after_failure(e, chan);
        }
        r
    }

    /// Sends the call and waits for its outcome.
    #[allow(clippy::too_many_arguments)]
    fn exchange<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        chan: &mut dyn ClientChannel,
        engine: &mut ClientSlot,
        buf: &mut Vec<u8>,
        spinner: &mut Spinner,
        proc_no: u32,
        now: Instant,
        deadline: Instant,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        self.send_call(chan, engine, proc_no, now, deadline)?;
        let block = |c: &mut dyn ClientChannel, t: Option<Duration>| c.block(t).map_err(Stop::Io);
        match self.await_outcome(chan, engine, buf, spinner, proc_no, &mut Some(decode), block) {
            Waited::Done(r) => r,
            Waited::Park(_) => unreachable!("a wait whose block never parks returned to park"),
        }
    }

    /// Sends the call whose arguments are in `engine`'s buffer.
    fn send_call(
        &self,
        chan: &mut dyn ClientChannel,
        engine: &mut ClientSlot,
        proc_no: u32,
        now: Instant,
        deadline: Instant,
    ) -> Result<(), Error> {
        let mut send_err = None;
        let mut out = |h: &[u8], b: &[u8]| {
            let sent = match chan.send(h, b) {
                // An error an earlier datagram drew (ICMP), reported by this send instead of
                // sending: the message did not go, so send it now.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => chan.send(h, b),
                r => r,
            };
            if let Err(e) = sent {
                send_err.get_or_insert(e);
            }
        };
        engine.start(proc_no, now, deadline, &mut out).map_err(|e| self.call_error(proc_no, e))?;
        if let Some(e) = send_err {
            engine.abandon();
            return Err(self.lost(proc_no, e));
        }
        Ok(())
    }

    /// Waits for the outcome of the call sent: spins, then `block`s (a blocking call sleeps in
    /// it; an async one returns [`Stop::Park`] from it, and this returns [`Waited::Park`]).
    #[allow(clippy::too_many_arguments)]
    fn await_outcome<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        chan: &mut dyn ClientChannel,
        engine: &mut ClientSlot,
        buf: &mut Vec<u8>,
        spinner: &mut Spinner,
        proc_no: u32,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        mut block: impl FnMut(&mut dyn ClientChannel, Option<Duration>) -> Result<(), Stop>,
    ) -> Waited<R> {
        loop {
            let got = spinner.wait_on(
                engine.poll_timeout(),
                &mut *chan,
                |c| {
                    crate::marks::collect(false);
                    c.try_recv(buf).map_err(Stop::Io)
                },
                |c, t| block(c, t),
            );
            let e = match got {
                Ok(Some(n)) => match engine.handle(chan.received(buf, n)) {
                    Some(Outcome::Reply(results)) => {
                        let decode = decode.take().expect("one reply per call");
                        let r = decode(results)
                            .map_err(|e| Error::Decode { call: self.site(proc_no), source: Box::new(e) });
                        return Waited::Done(r);
                    }
                    Some(Outcome::Failed(e)) => return Waited::Done(Err(self.call_error(proc_no, e))),
                    None => continue,
                },
                Ok(None) => {
                    // Only datagrams are sent again, and one that cannot go is as good as lost:
                    // the next may.
                    let mut out = |h: &[u8], b: &[u8]| {
                        let _ = chan.send(h, b);
                    };
                    match engine.handle_timeout(Instant::now(), &mut out) {
                        Some(e) => return Waited::Done(Err(self.call_error(proc_no, e))),
                        None => continue,
                    }
                }
                Err(Stop::Park(t)) => return Waited::Park(t),
                Err(Stop::Io(e)) => e,
            };
            if e.kind() == io::ErrorKind::ConnectionRefused {
                if let Some(e) = engine.handle_refused() {
                    return Waited::Done(Err(self.call_error(proc_no, e)));
                }
            } else {
                engine.abandon();
                return Waited::Done(Err(self.lost(proc_no, e)));
            }
        }
    }

    /// [`call_timeout`](Self::call_timeout) as a future (see `crate::client`'s async calls):
    /// sent now if a slot is free, else once one is given back (or it fails at its deadline).
    pub(crate) fn call_async<'a, R, E, Enc, Dec>(
        &'a self,
        proc_no: u32,
        timeout: Duration,
        encode: Enc,
        decode: Dec,
    ) -> OncCall<'a, R, E, Enc, Dec>
    where
        E: std::error::Error + Send + Sync + 'static,
        Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        Dec: FnOnce(&[u8]) -> Result<R, E>,
    {
        let now = Instant::now();
        let deadline = now + timeout;
        let mut call = OncCall {
            client: self,
            proc_no,
            timeout,
            begun: now,
            deadline,
            encode: Some(encode),
            decode: Some(decode),
            lent: None,
            failed: None,
            look: Spinner::new(SpinPolicy::Block),
            pacing: Pacing::default(),
            parking: None,
            waiting: Waiting { slots: &self.slots, line: InLine::default() },
            _result: PhantomData,
        };
        if let Some(g) = self.slots.try_claim_now() {
            let encode = call.encode.take().expect("encoded once");
            match self.send_lent(g, proc_no, encode, now, deadline) {
                Ok(l) => call.lent = Some(l),
                Err(e) => call.failed = Some(Box::new(e)),
            }
        }
        call
    }

    /// Lends the slot `g` holds to an async call, encodes the call and sends it (a call that
    /// could not be sent gives the slot back).
    fn send_lent<E: std::error::Error + Send + Sync + 'static>(
        &self,
        mut g: super::pool::Claimed<'_, Slot>,
        proc_no: u32,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        now: Instant,
        deadline: Instant,
    ) -> Result<Lent<'_>, Error> {
        self.slots.lend(&g);
        let slot = g.index();
        let Slot { engine, chan, gen, .. } = &mut *g;
        let sent = (|| {
            encode(&mut OutBuf::from(engine.args_buf()))
                .map_err(|e| Error::Encode { call: self.site(proc_no), source: Box::new(e) })?;
            let c = self.channel(chan, gen)?;
            let sent = self.send_call(c, engine, proc_no, now, deadline);
            if let Err(e) = &sent {
                self.after_failure(e, chan);
            }
            sent
        })();
        drop(g);
        let lent = Lent { client: self, slot, finished: sent.is_err() };
        sent.map(|()| lent)
    }

    /// Where a call of `proc_no` goes, as errors name it.
    #[cold]
    pub fn site(&self, proc_no: u32) -> CallSite {
        CallSite { uri: self.uri.clone(), program: self.program, version: self.version, proc_no, name: None }
    }

    /// Every slot stayed busy until the call's deadline: it was never sent.
    #[cold]
    fn no_slot(&self, proc_no: u32, after: Duration) -> Error {
        Error::Timeout { call: self.site(proc_no), after, execution: Execution::NotSent }
    }

    #[cold]
    fn lost(&self, proc_no: u32, source: io::Error) -> Error {
        Error::ConnectionLost { call: self.site(proc_no), execution: Execution::Unknown, source }
    }

    #[cold]
    fn call_error(&self, proc_no: u32, e: CallError) -> Error {
        let call = self.site(proc_no);
        let uri = self.uri.to_string();
        let (program, version) = (self.program, self.version);
        match e {
            CallError::TooLarge { size, max } => Error::TooLarge { call, size: Some(size), max },
            CallError::Timeout { after, sent } => {
                Error::Timeout { call, after, execution: if sent { Execution::Unknown } else { Execution::NotSent } }
            }
            CallError::Refused { may_have_executed: false } => Error::ServerNotRunning {
                uri,
                detail: format!(
                    "{} refused procedure {proc_no}'s only datagram, so the call never executed",
                    self.target
                ),
            },
            CallError::Refused { may_have_executed: true } => Error::ConnectionLost {
                call,
                execution: Execution::Unknown,
                source: io::Error::new(io::ErrorKind::ConnectionRefused, format!("{} refused a datagram", self.target)),
            },
            CallError::Malformed(e) => Error::MalformedReply { call, detail: e.to_string() },
            // ONC RPC carries no reason with an error: over it, a server's message stays in its log.
            CallError::Rejected(body) => match body {
                ReplyBody::Accepted(s) => match s {
                    AcceptStatus::Success => unreachable!("the engine returns SUCCESS as a reply"),
                    AcceptStatus::ProgUnavail => Error::UnknownProgram { uri, program },
                    AcceptStatus::ProgMismatch { low, high } => {
                        Error::VersionMismatch { uri, program, requested: version, low, high }
                    }
                    AcceptStatus::ProcUnavail => Error::UnknownProcedure { call },
                    AcceptStatus::GarbageArgs => Error::GarbageArgs { call, detail: None },
                    AcceptStatus::SystemErr => Error::ServerError { call, message: None },
                },
                ReplyBody::Denied(RejectStatus::RpcMismatch { low, high }) => Error::RpcMismatch { call, low, high },
                ReplyBody::Denied(RejectStatus::AuthError(reason)) => Error::AuthError { call, reason },
            },
        }
    }
}
