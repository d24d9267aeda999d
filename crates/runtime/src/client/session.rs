//! The session a client's slots call in: the handshake that makes it (with the cookie round a
//! datagram server asks for, and the key), what a refusal means to the caller, and binding
//! again when the session or the connection to it is found gone, so that a server that comes
//! back is usable without a new `Client`.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;
use std::time::Instant;

use lowlat_proto::seal::SealKeys;
use lowlat_proto::wire::{BindRequest, PROTOCOL_VERSION};
use lowlat_proto::{
    BindError, Binder, Bound, ByteOrder, CipherKind, ClientSlot, FrameKeys, Refusal, Session, HEADER_LEN,
};
use lowlat_wait::Spinner;

use super::lowlat::{engine_stats, Lowlat, Slot};
use crate::driver::{self, ClientChannel};
use crate::error::KeyMismatch;
use crate::{ClientConfig, Error};

/// The session a client's slots call in, and what is known to be wrong with it.
pub(super) struct SessionState {
    /// Bumped whenever the slots must rebuild their engines: a new session, or this one found
    /// unusable (`stale`).
    pub epoch: u64,
    pub session: Session,
    /// The session's frame keys, when it is keyed.
    pub keys: Option<FrameKeys>,
    /// The session's sealing keys, when it is sealed (every slot's sealer shares one counter).
    pub seal: Option<SealKeys>,
    /// The server no longer has this session (it restarted, forgot it, or a connection to it
    /// broke): the next slot to prepare binds again before calling.
    pub stale: bool,
    /// Bumped when a channel to the server broke: every slot's channel opened before then is
    /// replaced (the other connections to a dead server are broken too, they just do not know
    /// it yet), so that a call after the server's return is not lost on a dead connection.
    pub conn_gen: u64,
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
pub(super) fn bind(
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
        byte_order: ByteOrder::host(),
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
    pub fn binding(&self) -> MutexGuard<'_, SessionState> {
        self.shared.binding.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a failed call: frees the slot's engine for the next call and, when the failure
    /// says the session or the connection is gone, makes the next call rebind (over a new
    /// channel if this one broke), so that a server that comes back is usable without a new
    /// `Client`.
    #[cold]
    #[inline(never)]
    pub(super) fn recover(&self, slot: &mut Slot, e: &Error) {
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
    pub(super) fn invalidate(&self, slot: &Slot, lost_connection: bool) {
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

    /// Makes sure the slot has a channel and an engine for the current session.
    #[inline]
    pub(super) fn prepare(&self, slot: &mut Slot) -> Result<(), Error> {
        let epoch = self.shared.epoch.load(Ordering::Acquire);
        if slot.engine.is_some() && slot.epoch == epoch {
            return Ok(());
        }
        self.prepare_slow(slot)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn prepare_slow(&self, slot: &mut Slot) -> Result<(), Error> {
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
            self.shared.slots.mark_opened(slot.index as usize);
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
}
