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
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lowlat_onc::engine::{CallError, ClientSlot, ClientSlotConfig, Outcome};
use lowlat_onc::rpcbind::{Netid, Rpcbind};
use lowlat_onc::{AcceptStatus, CallHeader, Credential, RejectStatus, ReplyBody};
use lowlat_proto::{ByteOrder, Execution, Session};
use lowlat_transport::udp::MAX_DATAGRAM;
use lowlat_transport::Spinner;

use crate::driver::{self, ClientChannel};
use crate::{CallSite, ClientConfig, Endpoint, Error};

struct Slot {
    engine: ClientSlot,
    chan: Option<Box<dyn ClientChannel>>,
    buf: Vec<u8>,
    spinner: Spinner,
}

pub(crate) struct OncClient {
    uri: Arc<str>,
    program: u32,
    version: u32,
    cfg: ClientConfig,
    target: SocketAddr,
    tcp: bool,
    slots: Box<[Mutex<Slot>]>,
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
                Ok(Mutex::new(Slot {
                    engine: ClientSlot::new(program, version, &cred, engine_cfg, now),
                    chan: None,
                    buf: Vec::new(),
                    spinner: Spinner::new(cfg.spin),
                }))
            })
            .collect::<Result<_, Error>>()?;
        let c = OncClient { uri: uri.into(), program, version, cfg, target, tcp, slots };
        // Open the first channel now, so a server that is not there shows at connect time (TCP).
        let mut s0 = c.slots[0].lock().unwrap_or_else(|p| p.into_inner());
        s0.chan = Some(driver::open_onc_channel(c.target, c.tcp, &c.uri, &c.cfg)?);
        drop(s0);
        Ok(c)
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
        }
    }

    fn max_message(&self) -> usize {
        if self.tcp {
            self.cfg.max_message
        } else {
            MAX_DATAGRAM
        }
    }

    fn acquire(&self) -> MutexGuard<'_, Slot> {
        for s in self.slots.iter() {
            if let Ok(g) = s.try_lock() {
                return g;
            }
        }
        // Every slot busy: queue on one (spread by thread so waiters do not pile on slot 0).
        let i = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::thread::current().id().hash(&mut h);
            h.finish() as usize % self.slots.len()
        };
        self.slots[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let now = Instant::now();
        let deadline = now + timeout;
        let mut guard = self.acquire();
        let Slot { engine, chan, buf, spinner } = &mut *guard;
        encode(engine.args_buf()).map_err(|e| Error::Encode { call: self.site(proc_no), source: Box::new(e) })?;
        if chan.is_none() {
            *chan = Some(driver::open_onc_channel(self.target, self.tcp, &self.uri, &self.cfg)?);
        }
        let c = chan.as_deref_mut().expect("opened above");
        let r = self.exchange(c, engine, buf, spinner, proc_no, now, deadline, decode);
        if let Err(Error::ConnectionLost { .. } | Error::Timeout { .. }) = r {
            // A connection in an unknown state is not reused (a datagram socket has none).
            if self.tcp {
                *chan = None;
            }
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
        loop {
            let got = spinner.wait_on(engine.poll_timeout(), &mut *chan, |c| c.try_recv(buf), |c, t| c.block(t));
            match got {
                Ok(Some(n)) => match engine.handle(chan.received(buf, n)) {
                    Some(Outcome::Reply(results)) => {
                        return decode(results)
                            .map_err(|e| Error::Decode { call: self.site(proc_no), source: Box::new(e) })
                    }
                    Some(Outcome::Failed(e)) => return Err(self.call_error(proc_no, e)),
                    None => {}
                },
                Ok(None) => {
                    // Only datagrams are sent again, and one that cannot go is as good as lost:
                    // the next may.
                    let mut out = |h: &[u8], b: &[u8]| {
                        let _ = chan.send(h, b);
                    };
                    if let Some(e) = engine.handle_timeout(Instant::now(), &mut out) {
                        return Err(self.call_error(proc_no, e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    if let Some(e) = engine.handle_refused() {
                        return Err(self.call_error(proc_no, e));
                    }
                }
                Err(e) => {
                    engine.abandon();
                    return Err(self.lost(proc_no, e));
                }
            }
        }
    }

    /// Where a call of `proc_no` goes, as errors name it.
    #[cold]
    pub fn site(&self, proc_no: u32) -> CallSite {
        CallSite { uri: self.uri.clone(), program: self.program, version: self.version, proc_no, name: None }
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
