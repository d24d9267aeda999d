//! The client side of ONC RPC v2 (`onc+udp://HOST[:PORT]`, `onc+tcp://HOST[:PORT]`), behind
//! [`crate::Client`]: any rpcgen/libtirpc server (or a lowlat one) of a program defined in a `.x`
//! file, with XDR bodies.
//!
//! Like lowlat's own client, a binding has slots, each with its own socket and buffers, so
//! threads sharing the binding never wait on one another's socket. Over UDP a call is sent again,
//! with the same xid, after 100 ms, then 200 ms, ... (at most 2 s apart) until its deadline; the
//! server's duplicate-request cache keeps a retransmitted call from running twice. Over TCP each
//! call is one record (split into fragments above [`ClientConfig::onc_max_fragment`]). Without a
//! port, rpcbind on the host says where the program listens.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lowlat_onc::rpcbind::{Netid, Rpcbind};
use lowlat_onc::{frame_record, AcceptStatus, CallHeader, Credential, RecordReader, RejectStatus, Reply, ReplyBody};
use lowlat_proto::{ByteOrder, Execution, Session};
use lowlat_transport::sys::poll_readable;
use lowlat_transport::udp::{resolve, UdpChannel, MAX_DATAGRAM};
use lowlat_transport::Spinner;

use crate::driver::onc::write_all;
use crate::{ClientConfig, Endpoint, Error};

const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(2);

enum Chan {
    Udp { ch: UdpChannel, buf: Vec<u8> },
    Tcp { stream: TcpStream, records: RecordReader },
}

struct Slot {
    chan: Option<Chan>,
    /// The call header (after a reserved record mark over TCP).
    head: Vec<u8>,
    args: Vec<u8>,
    spinner: Spinner,
}

pub(crate) struct OncClient {
    uri: String,
    program: u32,
    version: u32,
    cfg: ClientConfig,
    target: SocketAddr,
    tcp: bool,
    cred: Credential,
    next_xid: AtomicU32,
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

fn first_xid() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    t ^ std::process::id().rotate_left(13)
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
        let invalid = |e: io::Error| Error::InvalidUri { uri: uri.to_string(), reason: e.to_string() };
        let target = match port {
            Some(p) => resolve(&format!("{host}:{p}")).map_err(invalid)?,
            None => {
                let ip = resolve(&format!("{host}:{}", lowlat_onc::rpcbind::PORT)).map_err(invalid)?.ip();
                let rb = Rpcbind::at(ip);
                let netid = if tcp { Netid::Tcp } else { Netid::Udp };
                let not_there = |detail: String| Error::NotRegistered {
                    uri: uri.to_string(),
                    host: ip.to_string(),
                    program,
                    version,
                    detail,
                };
                match rb.getaddr(program, version, netid) {
                    Ok(Some(a)) => a,
                    Ok(None) => return Err(not_there("not registered".into())),
                    Err(e) => return Err(not_there(e.to_string())),
                }
            }
        };
        let slots = (0..cfg.slots.max(1))
            .map(|_| {
                Mutex::new(Slot {
                    chan: None,
                    head: Vec::with_capacity(512),
                    args: Vec::new(),
                    spinner: Spinner::new(cfg.spin),
                })
            })
            .collect();
        let cred = match cfg.onc_auth {
            Some(a) => Credential::Sys(a),
            None => Credential::None,
        };
        let c = OncClient {
            uri: uri.to_string(),
            program,
            version,
            cfg,
            target,
            tcp,
            cred,
            next_xid: AtomicU32::new(first_xid()),
            slots,
        };
        // Open the first channel now, so a server that is not there shows at connect time (TCP).
        let mut s0 = c.slots[0].lock().unwrap_or_else(|p| p.into_inner());
        s0.chan = Some(c.open()?);
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
        }
    }

    fn max_message(&self) -> usize {
        if self.tcp {
            self.cfg.max_message
        } else {
            MAX_DATAGRAM
        }
    }

    fn open(&self) -> Result<Chan, Error> {
        if self.tcp {
            let stream =
                TcpStream::connect_timeout(&self.target, self.cfg.bind_timeout).map_err(|e| match e.kind() {
                    io::ErrorKind::ConnectionRefused => {
                        Error::ServerNotRunning { uri: self.uri.clone(), detail: e.to_string() }
                    }
                    _ => Error::io(format!("{}: connect", self.uri), e),
                })?;
            let setup = |e| Error::io(format!("{}: set up the connection", self.uri), e);
            stream.set_nodelay(true).map_err(setup)?;
            stream.set_nonblocking(true).map_err(setup)?;
            Ok(Chan::Tcp { stream, records: RecordReader::new(self.cfg.max_message + 512) })
        } else {
            let ch =
                UdpChannel::connect(self.target).map_err(|e| Error::io(format!("{}: open UDP socket", self.uri), e))?;
            Ok(Chan::Udp { ch, buf: vec![0; MAX_DATAGRAM] })
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
        let deadline = Instant::now() + timeout;
        let mut guard = self.acquire();
        let slot = &mut *guard;
        slot.args.clear();
        encode(&mut slot.args).map_err(|e| Error::Encode { proc_no, source: Box::new(e) })?;
        if slot.args.len() > self.max_message() {
            return Err(Error::TooLarge { size: slot.args.len(), max: self.max_message() });
        }
        if slot.chan.is_none() {
            slot.chan = Some(self.open()?);
        }
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        slot.head.clear();
        if self.tcp {
            slot.head.extend_from_slice(&[0; 4]);
        }
        CallHeader { xid, program: self.program, version: self.version, procedure: proc_no }
            .encode(&self.cred, &mut slot.head);
        if !self.tcp && slot.head.len() + slot.args.len() > MAX_DATAGRAM {
            return Err(Error::TooLarge { size: slot.args.len(), max: MAX_DATAGRAM - slot.head.len() });
        }
        let r = match slot.chan.as_mut() {
            Some(Chan::Udp { .. }) => self.call_udp(slot, xid, proc_no, deadline, timeout),
            Some(Chan::Tcp { .. }) => self.call_tcp(slot, xid, proc_no, deadline, timeout),
            None => unreachable!("opened above"),
        };
        let range = match r {
            Ok(range) => range,
            Err(e) => {
                // A connection in an unknown state is not reused.
                if matches!(e, Error::ConnectionLost { .. } | Error::Timeout { .. }) && self.tcp {
                    slot.chan = None;
                }
                return Err(e);
            }
        };
        let msg = match slot.chan.as_ref() {
            Some(Chan::Udp { buf, .. }) => &buf[range.0..range.1],
            Some(Chan::Tcp { records, .. }) => &records.last()[range.0..range.1],
            None => unreachable!("kept above"),
        };
        let reply = Reply::parse(msg).map_err(|e| Error::MalformedReply {
            uri: self.uri.clone(),
            proc_no,
            detail: e.to_string(),
        })?;
        match reply.body {
            ReplyBody::Accepted(AcceptStatus::Success) => {
                decode(reply.results).map_err(|e| Error::Decode { proc_no, source: Box::new(e) })
            }
            b => Err(self.status_error(proc_no, b)),
        }
    }

    fn status_error(&self, proc_no: u32, b: ReplyBody) -> Error {
        let uri = self.uri.clone();
        let (program, version) = (self.program, self.version);
        match b {
            ReplyBody::Accepted(s) => match s {
                AcceptStatus::Success => unreachable!("handled by the caller"),
                AcceptStatus::ProgUnavail => Error::UnknownProgram { uri, program },
                AcceptStatus::ProgMismatch { low, high } => {
                    Error::VersionMismatch { uri, program, requested: version, low, high }
                }
                AcceptStatus::ProcUnavail => Error::UnknownProcedure { program, version, proc_no },
                AcceptStatus::GarbageArgs => Error::GarbageArgs { proc_no },
                AcceptStatus::SystemErr => Error::ServerError { proc_no },
            },
            ReplyBody::Denied(RejectStatus::RpcMismatch { low, high }) => Error::RpcMismatch { uri, low, high },
            ReplyBody::Denied(RejectStatus::AuthError(reason)) => Error::AuthError { uri, proc_no, reason },
        }
    }

    /// Sends and waits for the reply with `xid`, resending on a growing timer. Returns where the
    /// reply lies in the slot's receive buffer.
    fn call_udp(
        &self,
        slot: &mut Slot,
        xid: u32,
        proc_no: u32,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(usize, usize), Error> {
        let Slot { chan, head, args, spinner } = slot;
        let Some(Chan::Udp { ch, buf }) = chan.as_mut() else { unreachable!("a UDP slot") };
        let lost =
            |e| Error::ConnectionLost { uri: self.uri.clone(), proc_no, execution: Execution::Unknown, source: e };
        let mut sent_once = false;
        let mut rto = FIRST_RETRY;
        loop {
            match ch.send(head, args) {
                Ok(()) => sent_once = true,
                // A refused earlier datagram (ICMP) or a full queue: the retry timer covers it.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::WouldBlock) => {}
                Err(e) => return Err(lost(e)),
            }
            let resend = (Instant::now() + rto).min(deadline);
            loop {
                let got = spinner.wait_on(
                    Some(resend),
                    &mut *buf,
                    |buf| match ch.try_recv(buf) {
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
                        r => r,
                    },
                    |_, t| poll_readable(&[ch.as_raw_fd()], t).map(|_| ()),
                );
                match got {
                    Ok(Some(n)) => {
                        if lowlat_onc::msg::peek_xid(&buf[..n]) == Some(xid) {
                            return Ok((0, n));
                        }
                        // A late answer to an earlier call: ignore it.
                    }
                    Ok(None) => break,
                    Err(e) => return Err(lost(e)),
                }
            }
            if Instant::now() >= deadline {
                let execution = if sent_once { Execution::Unknown } else { Execution::NotSent };
                return Err(Error::Timeout { proc_no, after: timeout, execution });
            }
            rto = (rto * 2).min(MAX_RETRY);
        }
    }

    fn call_tcp(
        &self,
        slot: &mut Slot,
        xid: u32,
        proc_no: u32,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(usize, usize), Error> {
        let Slot { chan, head, args, spinner } = slot;
        let Some(Chan::Tcp { stream, records }) = chan.as_mut() else { unreachable!("a TCP slot") };
        let lost =
            |e| Error::ConnectionLost { uri: self.uri.clone(), proc_no, execution: Execution::Unknown, source: e };
        let total = head.len() - 4 + args.len();
        if total <= self.cfg.onc_max_fragment {
            head[..4].copy_from_slice(&((total as u32) | 1 << 31).to_be_bytes());
            write_all(stream, &[head, args], deadline).map_err(lost)?;
        } else {
            let mut msg = Vec::with_capacity(total);
            msg.extend_from_slice(&head[4..]);
            msg.extend_from_slice(args);
            let mut wire = Vec::with_capacity(total + 64);
            frame_record(&msg, self.cfg.onc_max_fragment, &mut wire);
            write_all(stream, &[&wire], deadline).map_err(lost)?;
        }
        loop {
            let mut io = (&mut *stream, &mut *records);
            let got = spinner.wait_on(
                Some(deadline),
                &mut io,
                |(stream, records)| -> io::Result<Option<()>> {
                    loop {
                        if records.next_record().map_err(io::Error::other)?.is_some() {
                            return Ok(Some(()));
                        }
                        let b = records.buffer(64 << 10);
                        match stream.read(b) {
                            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                            Ok(n) => records.filled(n),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                },
                |(stream, _), t| poll_readable(&[stream.as_raw_fd()], t).map(|_| ()),
            );
            match got {
                // Replies come in call order on a connection, one call at a time; one with
                // another xid is a late answer to a call that timed out.
                Ok(Some(())) => {
                    let r = records.last();
                    if lowlat_onc::msg::peek_xid(r) == Some(xid) {
                        return Ok((0, r.len()));
                    }
                }
                Ok(None) => return Err(Error::Timeout { proc_no, after: timeout, execution: Execution::Unknown }),
                Err(e) => return Err(lost(e)),
            }
        }
    }
}
