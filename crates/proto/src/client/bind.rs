//! The binding handshake of one client ([`Binder`]): it sends the bind, answers the server's
//! cookie round at once (the same request again, with the cookie and, holding a pre-shared key,
//! the proof of it), retransmits on its own timer over datagrams, and believes under a key only
//! answers tagged over its nonce. What it yields, the [`Session`] and its keys ([`Bound`]), is
//! all a call slot needs.

use core::time::Duration;
use std::time::Instant;

use super::ClientEngineConfig;
use crate::auth::{self, FrameKeys, Psk, Side};
use crate::rtt::RttEstimator;
use crate::seal::{head_len, CipherKind, SealKeys};
use crate::wire::{
    flags, Bind, BindGrant, BindRefusal, BindRequest, ByteOrder, Cookie, Header, Kind, Refusal, BIND_KEYED,
    BIND_RELIABLE, BIND_SEALED, BIND_SEAL_AES, HEADER_LEN, PROTOCOL_VERSION, TAG_LEN,
};
use crate::MAX_WINDOW;

/// What the client learnt from binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The token the server granted; every frame of the session carries it.
    pub token: u64,
    /// Call slots granted: calls that may be in flight at once.
    pub slots: u16,
    /// Fragments in flight granted per message.
    pub window: u16,
    /// The order the server's bodies travel in (arguments are encoded in it too).
    pub server_order: ByteOrder,
    /// Largest message, arguments or result, in bytes.
    pub max_message: u32,
    /// Largest frame, header (and tag) included, in bytes.
    pub max_frame: u32,
    /// The server's generation when it granted the session.
    pub generation: u16,
    /// The transport is a reliable stream (TCP, shared memory), as the bind said: nothing is
    /// retransmitted.
    pub reliable: bool,
    /// Frames carry tags under keys from a pre-shared key.
    pub keyed: bool,
    /// Frames after the bind are sealed (encrypted, `crate::seal`).
    pub sealed: bool,
}

impl Session {
    /// Body bytes per fragment (a frame less its header and, keyed, its tag, and sealed, its
    /// sequence number).
    pub fn frag_size(&self) -> u32 {
        self.max_frame - head_len(self.keyed, self.sealed) as u32
    }
}

/// A session the server granted, with its frame keys when it is keyed.
#[derive(Clone, Debug)]
pub struct Bound {
    /// What was granted.
    pub session: Session,
    /// The session's frame keys (`None`: unkeyed).
    pub keys: Option<FrameKeys>,
    /// The session's sealing keys (`None`: not sealed); give them to every slot
    /// ([`ClientSlot::with_seal`](super::ClientSlot::with_seal)).
    pub seal: Option<SealKeys>,
}

/// Why a binding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// The server refused the binding, for this reason.
    Refused(Refusal),
    /// No grant or refusal came by the deadline.
    Timeout {
        /// How long the bind was tried.
        after: Duration,
    },
    /// The server's answer made no sense (named field).
    Malformed(&'static str),
    /// Nothing the client could believe came by the deadline, but answers that carried no
    /// valid tag under the client's key did: a server holding another key or none, or someone
    /// on the path. `refusal`: the last such refusal's claim (`None`: only cookie rounds).
    Unauthenticated {
        /// What the last unauthenticated refusal said.
        refusal: Option<Refusal>,
        /// How long the bind was tried.
        after: Duration,
    },
}

/// Cookie rounds a bind goes through before the client gives up: the server asks for one, and
/// again only when the cookie expired on the way (a server that refuses every cookie is broken).
const MAX_COOKIE_ROUNDS: u32 = 4;

/// The binding handshake of one client.
#[derive(Debug)]
pub struct Binder {
    req: BindRequest,
    psk: Option<Psk>,
    cookie: Option<Cookie>,
    cookie_rounds: u32,
    started: Instant,
    deadline: Instant,
    next_at: Option<Instant>,
    retries: u32,
    rtt: RttEstimator,
    seal: Option<CipherKind>,
    /// The last answer whose tag did not verify under the client's key: `Some(None)` a cookie
    /// round, `Some(Some(r))` a refusal.
    unauthenticated: Option<Option<Refusal>>,
    /// Grants, cookie rounds and refusals whose tag did not verify (ignored: a forged or
    /// altered answer, or a server with another key or none).
    pub mac_failures: u64,
}

impl Binder {
    /// A handshake for `req`, retransmitted (on unreliable transports) with the RTO of `cfg`
    /// until `deadline`; call [`start`](Self::start) to send the first bind.
    pub fn new(req: BindRequest, cfg: &ClientEngineConfig, now: Instant, deadline: Instant) -> Binder {
        Binder {
            req,
            psk: None,
            cookie: None,
            cookie_rounds: 0,
            started: now,
            deadline,
            next_at: None,
            retries: 0,
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            seal: None,
            unauthenticated: None,
            mac_failures: 0,
        }
    }

    /// Asks for a sealed session with `cipher` (`None`: not sealed). Needs a key
    /// ([`with_key`](Self::with_key)): the server refuses a sealed bind without one.
    pub fn with_seal(mut self, cipher: Option<CipherKind>) -> Binder {
        self.req.flags &= !(BIND_SEALED | BIND_SEAL_AES);
        if let Some(c) = cipher {
            self.req.flags |= BIND_SEALED | if c == CipherKind::Aes256Gcm { BIND_SEAL_AES } else { 0 };
        }
        self.seal = cipher;
        self
    }

    /// The payload of a cookie round or refusal (past its tag, if it has one), and whether the
    /// client can believe it: without a key, always; under a key, only if it is tagged over this
    /// bind's nonce ([`Psk::bind_answer_tag`]). An answer it cannot believe is noted.
    fn read_answer<'a>(&mut self, frame: &'a [u8], h: &Header, body: &'a [u8]) -> Option<(&'a [u8], bool)> {
        let tagged = h.flags & flags::TAGGED != 0;
        let (tag, payload) = if tagged { body.split_at_checked(TAG_LEN)? } else { (&[][..], body) };
        let believed = match &self.psk {
            None => true,
            Some(psk) => tagged && psk.check_bind_answer(&frame[..HEADER_LEN], payload, self.req.nonce, tag),
        };
        if !believed {
            self.mac_failures += 1;
            self.unauthenticated = Some(match h.kind {
                Kind::BindRefused => BindRefusal::parse(payload).ok().map(|r| r.0),
                _ => None,
            });
        }
        Some((payload, believed))
    }

    /// Binds with a pre-shared key (`None`: without one).
    pub fn with_key(mut self, psk: Option<Psk>) -> Binder {
        self.req.flags &= !BIND_KEYED;
        if psk.is_some() {
            self.req.flags |= BIND_KEYED;
        }
        self.psk = psk;
        self
    }

    fn send(&self, out: &mut impl FnMut(&[u8], &[u8])) {
        let mut h = Header::new(Kind::Bind);
        h.call_no = self.req.nonce as u32;
        h.version = PROTOCOL_VERSION;
        let mut body = [0u8; Bind::MAX_LEN];
        let mut n = Bind { request: self.req, cookie: self.cookie, proof: None }.emit(&mut body);
        if let (Some(psk), Some(cookie)) = (&self.psk, &self.cookie) {
            // Over the request as sent (its flags say a cookie follows).
            let proof = psk.prove(&body[..BindRequest::LEN], cookie);
            body[n..n + TAG_LEN].copy_from_slice(&proof);
            n += TAG_LEN;
        }
        if self.psk.is_some() {
            // Padded (with zeros the server does not read) to the longest bind, as QUIC pads its
            // Initial: the server answers an unproven address with no more than it sent, and its
            // tagged cookie round is longer than a bare request.
            n = Bind::MAX_LEN;
        }
        out(&h.to_bytes(), &body[..n]);
    }

    /// Sends the first bind at `now` (and arms its retransmission on an unreliable transport).
    pub fn start(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) {
        self.send(out);
        if self.req.flags & BIND_RELIABLE == 0 {
            self.next_at = Some(now + self.rtt.rto());
        }
    }

    /// Feeds a frame that arrived at `now`; returns the outcome once the server has answered
    /// this bind. A cookie round is answered at once through `out`.
    pub fn handle(
        &mut self,
        frame: &[u8],
        now: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Result<Bound, BindError>> {
        let (h, body) = Header::parse(frame).ok()?;
        if h.call_no != self.req.nonce as u32 {
            return None;
        }
        match h.kind {
            Kind::BindRetry => {
                // A copy of a round already answered, or anything that is no cookie: ignored
                // (the retransmission timer stands). Under a key a cookie round the client
                // cannot verify (another key's server, or a forgery) is still answered: a
                // cookie grants nothing, the server checks it, and so a server with another
                // key gets the proof and says so in its counters (`bad_key`). Only verified
                // rounds count towards the limit, so forgeries cannot exhaust it.
                let (payload, believed) = self.read_answer(frame, &h, body)?;
                let cookie = Cookie::parse(payload).ok()?;
                if self.cookie == Some(cookie) {
                    return None;
                }
                self.cookie_rounds += u32::from(believed);
                if self.cookie_rounds > MAX_COOKIE_ROUNDS {
                    return Some(Err(BindError::Malformed("cookie (the server refused every one it gave)")));
                }
                self.cookie = Some(cookie);
                self.send(out);
                if self.next_at.is_some() {
                    self.next_at = Some(now + self.rtt.rto());
                }
                None
            }
            Kind::BindOk => {
                let mut keys = None;
                let mut body = body;
                if let Some(psk) = &self.psk {
                    let server_nonce = self.cookie.map_or([0; TAG_LEN], |c| c.mac);
                    let k = psk.session_keys(self.req.nonce, &server_nonce, h.token, Side::Client);
                    // Only a server with the key can tag the grant: anything else is ignored.
                    let Some(b) = auth::open(&k.recv, frame, body) else {
                        self.mac_failures += 1;
                        return None;
                    };
                    body = b;
                    keys = Some(k);
                }
                let g = match BindGrant::parse(body) {
                    Ok(g) => g,
                    Err(_) => return Some(Err(BindError::Malformed("bind grant"))),
                };
                if g.slots == 0 || g.slots > self.req.slots.max(1) {
                    return Some(Err(BindError::Malformed("slots granted")));
                }
                if g.max_frame as usize <= HEADER_LEN + TAG_LEN || g.max_frame > self.req.max_frame {
                    return Some(Err(BindError::Malformed("frame size granted")));
                }
                if g.window < 2 || g.window > MAX_WINDOW {
                    return Some(Err(BindError::Malformed("window granted")));
                }
                if g.sealed != self.seal.is_some() {
                    return Some(Err(BindError::Malformed("sealing granted (not as asked)")));
                }
                let seal = match (&self.psk, self.seal) {
                    (Some(psk), Some(kind)) => {
                        let server_nonce = self.cookie.map_or([0; TAG_LEN], |c| c.mac);
                        Some(SealKeys::new(kind, &psk.seal_keys(self.req.nonce, &server_nonce, h.token, Side::Client)))
                    }
                    _ => None,
                };
                let session = Session {
                    token: h.token,
                    slots: g.slots,
                    window: g.window,
                    server_order: g.byte_order,
                    max_message: g.max_message.min(self.req.max_message),
                    max_frame: g.max_frame,
                    generation: g.generation,
                    reliable: self.req.flags & BIND_RELIABLE != 0,
                    keyed: keys.is_some(),
                    sealed: seal.is_some(),
                };
                Some(Ok(Bound { session, keys, seal }))
            }
            Kind::BindRefused => {
                // Under a key an unauthenticated refusal is noted, not believed: the bind goes
                // on until its deadline.
                let (payload, believed) = self.read_answer(frame, &h, body)?;
                if !believed {
                    return None;
                }
                Some(match BindRefusal::parse(payload) {
                    Ok(r) => Err(BindError::Refused(r.0)),
                    Err(_) => Err(BindError::Malformed("bind refusal")),
                })
            }
            _ => None,
        }
    }

    /// [`BindError::Unauthenticated`] if answers this client could not verify have come (for a
    /// caller whose channel failed before the deadline: a stream the server closed).
    pub fn unauthenticated(&self, now: Instant) -> Option<BindError> {
        self.unauthenticated.map(|refusal| BindError::Unauthenticated { refusal, after: now - self.started })
    }

    /// When [`handle_timeout`](Self::handle_timeout) wants to be called: the next retransmission
    /// or the deadline. Never `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        Some(self.next_at.map_or(self.deadline, |t| t.min(self.deadline)))
    }

    /// Retransmits the bind if due at `now`; `Some` once the deadline has passed: the binding
    /// failed.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) -> Option<BindError> {
        if now >= self.deadline {
            return Some(self.unauthenticated(now).unwrap_or(BindError::Timeout { after: now - self.started }));
        }
        if let Some(t) = self.next_at {
            if now >= t {
                self.retries += 1;
                self.send(out);
                self.next_at = Some(now + self.rtt.backed_off(self.retries));
            }
        }
        None
    }
}
