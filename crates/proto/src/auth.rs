//! Keys and message authentication: the server's secret (stateless bind cookies, unguessable
//! session tokens), the pre-shared key ([`Psk`]) with the proof of it a bind carries, and the
//! per-session frame keys ([`FrameKeys`]) derived from it.
//!
//! Every primitive comes from RustCrypto's `hmac`, `sha2` and `hkdf` crates: HMAC-SHA256
//! (RFC 2104) and HKDF-SHA256 (RFC 5869). Tags are HMAC-SHA256 truncated to their leftmost 16
//! bytes (RFC 2104 §5 allows truncation to half the hash) and compared in constant time. What
//! this module decides is only which bytes go into which MAC, under which key:
//!
//! | what | key | message |
//! |---|---|---|
//! | bind cookie | HMAC(secret, "cookie" ‖ epoch) | client address (through `Hash`) ‖ client nonce ‖ epoch |
//! | token bits | secret | "token" ‖ counter |
//! | bind proof | HKDF(psk) "bind proof" | bind request (32 bytes) ‖ cookie (20 bytes) |
//! | frame tags | HKDF(psk, salt = client nonce ‖ cookie MAC ‖ token), one key per direction | header (32 bytes) ‖ body |
//! | `UnknownSession` errors | HKDF(psk) "unknown session" | header |
//! | bind answers before a session (`BindRetry`, `BindRefused`) | HKDF(psk) "bind answers" | header ‖ body ‖ client nonce |
//! | path challenge | HMAC(secret, "cookie" ‖ epoch) | "path" ‖ address (through `Hash`) ‖ token ‖ epoch |
//! | sealed frames (`crate::seal`) | HKDF(psk, same salt as frame tags) "seal", one key per direction | AEAD over the body, header ‖ sequence number as associated data |
//!
//! The cookie's MAC is also the server's nonce: fresh per bind, unpredictable without the
//! secret, and carried back by the client, so the server keeps nothing between the two rounds.
//! The session token goes into the frame keys too, so a replayed bind that makes a new session
//! after the first one ended gets other keys, and frames recorded from the old one are refused.
//!
//! A refusal or cookie round comes before the session has keys; under a key the server tags it
//! with a key of its own over the answer and the client's nonce (fresh for every bind), so
//! only a holder of the key can have made it, and only for this bind: one recorded from another
//! bind does not verify.

use core::hash::{Hash, Hasher};
use core::time::Duration;
use std::time::Instant;

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::wire::{flags, Cookie, Header, PathChallenge, HEADER_LEN, TAG_LEN};

type HmacSha256 = Hmac<Sha256>;

/// A truncated MAC.
pub type Tag = [u8; TAG_LEN];

fn keyed(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length (RFC 2104 §2).
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts any key length")
}

fn truncated(m: HmacSha256) -> Tag {
    let full = m.finalize().into_bytes();
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&full[..TAG_LEN]);
    t
}

/// Why a pre-shared key was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PskError {
    /// The key has fewer bytes than [`Psk::MIN_LEN`].
    #[error("a pre-shared key of {len} bytes is too short: use at least {min} random bytes")]
    TooShort {
        /// Bytes given.
        len: usize,
        /// Bytes needed ([`Psk::MIN_LEN`]).
        min: usize,
    },
}

/// A pre-shared key, with the keys derived from it that do not depend on a session.
#[derive(Clone)]
pub struct Psk {
    prk: Hkdf<Sha256>,
    proof: HmacSha256,
    unbound: FrameKey,
    bind_answers: FrameKey,
    len: usize,
}

impl core::fmt::Debug for Psk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Psk(<{} bytes, not shown>)", self.len)
    }
}

impl Psk {
    /// The shortest key accepted: 128 bits.
    pub const MIN_LEN: usize = 16;

    /// A key from its bytes (at least [`MIN_LEN`](Self::MIN_LEN) of them, as random as can be).
    pub fn new(key: &[u8]) -> Result<Psk, PskError> {
        if key.len() < Self::MIN_LEN {
            return Err(PskError::TooShort { len: key.len(), min: Self::MIN_LEN });
        }
        let prk = Hkdf::<Sha256>::new(Some(b"lowlat psk"), key);
        let expand = |label: &[u8]| {
            let mut k = [0u8; 32];
            prk.expand(label, &mut k).expect("32 bytes is a valid HKDF-SHA256 length");
            k
        };
        Ok(Psk {
            proof: keyed(&expand(b"lowlat 2 bind proof")),
            unbound: FrameKey(keyed(&expand(b"lowlat 2 unknown session"))),
            bind_answers: FrameKey(keyed(&expand(b"lowlat 2 bind answers"))),
            prk,
            len: key.len(),
        })
    }

    /// The proof of the key a bind carries: over the request and the server's cookie, so it is
    /// fresh for every cookie and cannot be made in advance.
    pub fn prove(&self, request: &[u8], cookie: &Cookie) -> Tag {
        let mut m = self.proof.clone();
        m.update(request);
        m.update(&cookie.emit());
        truncated(m)
    }

    /// Whether `proof` is [`prove`](Self::prove)'s for this request and cookie (in constant time).
    pub fn check_proof(&self, request: &[u8], cookie: &Cookie, proof: &[u8]) -> bool {
        let mut m = self.proof.clone();
        m.update(request);
        m.update(&cookie.emit());
        m.verify_truncated_left(proof).is_ok()
    }

    /// One key per direction for the session `token`, bound with `client_nonce` and the
    /// server's nonce, for `purpose`: (client to server, server to client).
    fn directions(&self, purpose: &[u8], client_nonce: u64, server_nonce: &Tag, token: u64) -> ([u8; 32], [u8; 32]) {
        let mut info = [0u8; 8 + TAG_LEN + 8 + 1];
        info[..8].copy_from_slice(&client_nonce.to_le_bytes());
        info[8..8 + TAG_LEN].copy_from_slice(server_nonce);
        info[8 + TAG_LEN..8 + TAG_LEN + 8].copy_from_slice(&token.to_le_bytes());
        let mut key = |direction: u8| {
            info[8 + TAG_LEN + 8] = direction;
            let mut k = [0u8; 32];
            self.prk.expand_multi_info(&[purpose, &info], &mut k).expect("32 bytes is a valid length");
            k
        };
        (key(b'S'), key(b'C'))
    }

    /// The frame keys of the session `token`, bound with `client_nonce` and the server's nonce
    /// (the cookie's MAC), as `side` uses them.
    pub fn session_keys(&self, client_nonce: u64, server_nonce: &Tag, token: u64, side: Side) -> FrameKeys {
        let (to_server, to_client) = self.directions(b"lowlat 2 frames", client_nonce, server_nonce, token);
        let (to_server, to_client) = (FrameKey(keyed(&to_server)), FrameKey(keyed(&to_client)));
        let unbound = self.unbound.clone();
        match side {
            Side::Client => FrameKeys { send: to_server, recv: to_client, unbound },
            Side::Server => FrameKeys { send: to_client, recv: to_server, unbound },
        }
    }

    /// The AEAD keys of a sealed session (`crate::seal`), from the same inputs as
    /// [`session_keys`](Self::session_keys)': (what this side sends with, what it receives with).
    pub fn seal_keys(&self, client_nonce: u64, server_nonce: &Tag, token: u64, side: Side) -> ([u8; 32], [u8; 32]) {
        let (to_server, to_client) = self.directions(b"lowlat 2 seal", client_nonce, server_nonce, token);
        match side {
            Side::Client => (to_server, to_client),
            Side::Server => (to_client, to_server),
        }
    }

    /// The tag of a bind answer made before any session (a cookie round, a refusal): over the
    /// answer's header and body and the client's full nonce.
    pub fn bind_answer_tag(&self, head: &[u8], body: &[u8], client_nonce: u64) -> Tag {
        self.bind_answers.tag_parts(&[head, body, &client_nonce.to_le_bytes()])
    }

    /// Whether `tag` is [`bind_answer_tag`](Self::bind_answer_tag)'s (in constant time).
    pub fn check_bind_answer(&self, head: &[u8], body: &[u8], client_nonce: u64, tag: &[u8]) -> bool {
        self.bind_answers.verify_parts(&[head, body, &client_nonce.to_le_bytes()], tag)
    }

    /// The key of `UnknownSession` errors: the server has no session keys for a token it does
    /// not know, but it has the key, so a keyed client can still believe such an answer (and
    /// retry a call the server never ran).
    pub fn unbound_key(&self) -> &FrameKey {
        &self.unbound
    }
}

/// Which end of a session a [`FrameKeys`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The end that bound: it sends with the client-to-server key.
    Client,
    /// The end that granted the session: it sends with the server-to-client key.
    Server,
}

/// A MAC key for frames, with HMAC's inner and outer pads hashed once (a tag then costs two
/// SHA-256 compressions for a header-only frame).
#[derive(Clone)]
pub struct FrameKey(HmacSha256);

impl core::fmt::Debug for FrameKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FrameKey(<not shown>)")
    }
}

impl FrameKey {
    /// The tag of a frame made of `head` (the 32-byte header) and `body`.
    #[inline]
    pub fn tag(&self, head: &[u8], body: &[u8]) -> Tag {
        let mut m = self.0.clone();
        m.update(head);
        m.update(body);
        truncated(m)
    }

    /// Whether `tag` is the tag of `head` and `body` (in constant time).
    #[inline]
    pub fn verify(&self, head: &[u8], body: &[u8], tag: &[u8]) -> bool {
        let mut m = self.0.clone();
        m.update(head);
        m.update(body);
        tag.len() == TAG_LEN && m.verify_truncated_left(tag).is_ok()
    }

    fn tag_parts(&self, parts: &[&[u8]]) -> Tag {
        let mut m = self.0.clone();
        parts.iter().for_each(|p| m.update(p));
        truncated(m)
    }

    fn verify_parts(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = self.0.clone();
        parts.iter().for_each(|p| m.update(p));
        tag.len() == TAG_LEN && m.verify_truncated_left(tag).is_ok()
    }
}

/// A header followed by its frame's tag: what a keyed session sends before a body.
pub struct Sealed([u8; HEADER_LEN + TAG_LEN]);

impl Sealed {
    /// The header (with [`flags::TAGGED`] set) and the tag: the bytes to send before the body.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// `h`, flagged [`flags::TAGGED`], followed by the tag under `key` of it and `body`.
#[inline]
pub fn seal(key: &FrameKey, mut h: Header, body: &[u8]) -> Sealed {
    h.flags |= flags::TAGGED;
    let mut out = [0u8; HEADER_LEN + TAG_LEN];
    let head = h.to_bytes();
    out[..HEADER_LEN].copy_from_slice(&head);
    out[HEADER_LEN..].copy_from_slice(&key.tag(&head, body));
    Sealed(out)
}

/// The body of a received frame (`frame` whole, `after_header` all of it past the header) when
/// it is flagged [`flags::TAGGED`] and its tag verifies under `key`; `None` for an untagged,
/// short, altered or forged frame.
#[inline]
pub fn open<'a>(key: &FrameKey, frame: &[u8], after_header: &'a [u8]) -> Option<&'a [u8]> {
    let head = frame.get(..HEADER_LEN)?;
    if head[4] & flags::TAGGED == 0 {
        return None;
    }
    let (tag, body) = after_header.split_at_checked(TAG_LEN)?;
    key.verify(head, body, tag).then_some(body)
}

/// The frame keys of one end of a session: what it sends, what it receives, and the key's own
/// for `UnknownSession` errors ([`Psk::unbound_key`]).
#[derive(Clone, Debug)]
pub struct FrameKeys {
    /// Tags the frames this end sends.
    pub send: FrameKey,
    /// Verifies the frames this end receives.
    pub recv: FrameKey,
    /// Tags and verifies `UnknownSession` errors, which no session's keys can cover.
    pub unbound: FrameKey,
}

/// A MAC fed through [`Hasher`], so that any `Hash` address goes into a cookie.
struct MacHasher(HmacSha256);

impl Hasher for MacHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        0 // never asked: the MAC is finalised instead
    }
}

/// The address, a 64-bit value (a bind's nonce, a session's token) and the epoch, into a MAC
/// begun under the epoch's key: the shape of cookies and path challenges.
fn mac_tail<A: Hash>(mut h: MacHasher, addr: &A, value: u64, epoch: u32) -> HmacSha256 {
    addr.hash(&mut h);
    h.0.update(&value.to_le_bytes());
    h.0.update(&epoch.to_le_bytes());
    h.0
}

/// The server's secret: stateless bind cookies under keys that rotate every `period` (a cookie
/// is good in the period it was made and the next, so it expires after at most two), and the
/// random bits of session tokens. Keys come from the secret and time from the caller: nothing
/// here reads a clock or draws randomness of its own.
#[derive(Clone, Debug)]
pub struct ServerSecret {
    secret: HmacSha256Debug,
    period: Duration,
    origin: Option<Instant>,
    /// The keys of the last two epochs used.
    keys: [Option<(u32, HmacSha256Debug)>; 2],
}

/// An HMAC state whose `Debug` shows nothing of its key.
#[derive(Clone)]
struct HmacSha256Debug(HmacSha256);

impl core::fmt::Debug for HmacSha256Debug {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("<key not shown>")
    }
}

impl ServerSecret {
    /// A secret of 32 random bytes whose cookie keys rotate every `period` (at least 1 ms), the
    /// first epoch starting at the first time the secret is used.
    pub fn new(secret: &[u8; 32], period: Duration) -> ServerSecret {
        ServerSecret {
            secret: HmacSha256Debug(keyed(secret)),
            period: period.max(Duration::from_millis(1)),
            origin: None,
            keys: [None, None],
        }
    }

    /// The epoch `now` falls in, counted from the first time the secret was used.
    fn epoch(&mut self, now: Instant) -> u32 {
        let origin = *self.origin.get_or_insert(now);
        let n = now.saturating_duration_since(origin).as_nanos() / self.period.as_nanos().max(1);
        n.min(u32::MAX as u128) as u32
    }

    fn cookie_key(&mut self, epoch: u32) -> HmacSha256 {
        if let Some((_, k)) = self.keys.iter().flatten().find(|(e, _)| *e == epoch) {
            return k.0.clone();
        }
        let mut m = self.secret.0.clone();
        m.update(b"cookie");
        m.update(&epoch.to_le_bytes());
        let k = keyed(&m.finalize().into_bytes());
        // Keep the newer of the two cached epochs and this one.
        let older = match (&self.keys[0], &self.keys[1]) {
            (Some((a, _)), Some((b, _))) => usize::from(b < a),
            (None, _) => 0,
            _ => 1,
        };
        self.keys[older] = Some((epoch, HmacSha256Debug(k.clone())));
        k
    }

    fn cookie_mac<A: Hash>(&mut self, from: &A, nonce: u64, epoch: u32) -> HmacSha256 {
        let h = MacHasher(self.cookie_key(epoch));
        mac_tail(h, from, nonce, epoch)
    }

    /// A cookie binding the client at `from` and its bind `nonce` to the current epoch.
    pub fn issue_cookie<A: Hash>(&mut self, from: &A, nonce: u64, now: Instant) -> Cookie {
        let epoch = self.epoch(now);
        Cookie { epoch, mac: truncated(self.cookie_mac(from, nonce, epoch)) }
    }

    /// Whether something made in `epoch` is still good at `now`: in this epoch or the one before.
    fn current(&mut self, epoch: u32, now: Instant) -> bool {
        let now = self.epoch(now);
        epoch == now || epoch.wrapping_add(1) == now
    }

    /// Whether `cookie` was issued to `from` for `nonce` in this epoch or the one before.
    pub fn check_cookie<A: Hash>(&mut self, from: &A, nonce: u64, cookie: &Cookie, now: Instant) -> bool {
        self.current(cookie.epoch, now)
            && self.cookie_mac(from, nonce, cookie.epoch).verify_truncated_left(&cookie.mac).is_ok()
    }

    fn path_mac<A: Hash>(&mut self, to: &A, token: u64, epoch: u32) -> HmacSha256 {
        // "path" first: a path challenge is never a cookie for a nonce equal to the token.
        let mut h = MacHasher(self.cookie_key(epoch));
        h.0.update(b"path");
        mac_tail(h, to, token, epoch)
    }

    /// A challenge that only a receiver at `to` can answer, for the session `token`.
    pub fn path_challenge<A: Hash>(&mut self, to: &A, token: u64, now: Instant) -> PathChallenge {
        let epoch = self.epoch(now);
        let full = self.path_mac(to, token, epoch).finalize().into_bytes();
        let mut mac = [0u8; PathChallenge::MAC_LEN];
        mac.copy_from_slice(&full[..PathChallenge::MAC_LEN]);
        PathChallenge { epoch, mac }
    }

    /// Whether `c` is a challenge made for `from` and `token` in this epoch or the one before.
    pub fn check_path<A: Hash>(&mut self, from: &A, token: u64, c: &PathChallenge, now: Instant) -> bool {
        self.current(c.epoch, now) && self.path_mac(from, token, c.epoch).verify_truncated_left(&c.mac).is_ok()
    }

    /// 32 bits no one can predict without the secret, the `n`th of them.
    pub fn random_bits(&self, n: u64) -> u32 {
        let mut m = self.secret.0.clone();
        m.update(b"token");
        m.update(&n.to_le_bytes());
        let t = truncated(m);
        u32::from_le_bytes([t[0], t[1], t[2], t[3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_bound_to_address_nonce_and_time() {
        let mut s = ServerSecret::new(&[7; 32], Duration::from_secs(60));
        let t0 = Instant::now();
        let c = s.issue_cookie(&1u16, 42, t0);
        assert!(s.check_cookie(&1u16, 42, &c, t0));
        assert!(!s.check_cookie(&2u16, 42, &c, t0), "another address");
        assert!(!s.check_cookie(&1u16, 43, &c, t0), "another nonce");
        let mut forged = c;
        forged.mac[3] ^= 1;
        assert!(!s.check_cookie(&1u16, 42, &forged, t0));
        let mut moved = c;
        moved.epoch += 1;
        assert!(!s.check_cookie(&1u16, 42, &moved, t0 + Duration::from_secs(61)), "the epoch is under the MAC");
        // Good in its epoch and the next; gone after two rotations.
        assert!(s.check_cookie(&1u16, 42, &c, t0 + Duration::from_secs(119)));
        assert!(!s.check_cookie(&1u16, 42, &c, t0 + Duration::from_secs(120)));
        // Another secret knows nothing of it.
        let mut other = ServerSecret::new(&[8; 32], Duration::from_secs(60));
        other.issue_cookie(&0u16, 0, t0);
        assert!(!other.check_cookie(&1u16, 42, &c, t0));
        assert_ne!(s.random_bits(1), s.random_bits(2));
        assert_ne!(s.random_bits(1), other.random_bits(1));
    }

    #[test]
    fn path_challenges_are_bound_to_address_token_and_time_and_are_no_cookies() {
        let mut s = ServerSecret::new(&[7; 32], Duration::from_secs(60));
        let t0 = Instant::now();
        let c = s.path_challenge(&1u16, 42, t0);
        assert!(s.check_path(&1u16, 42, &c, t0));
        assert!(!s.check_path(&2u16, 42, &c, t0), "another address");
        assert!(!s.check_path(&1u16, 43, &c, t0), "another session");
        assert!(s.check_path(&1u16, 42, &c, t0 + Duration::from_secs(119)));
        assert!(!s.check_path(&1u16, 42, &c, t0 + Duration::from_secs(120)), "expired");
        let cookie = s.issue_cookie(&1u16, 42, t0);
        assert_ne!(cookie.mac[..PathChallenge::MAC_LEN], c.mac, "a cookie for nonce = token is no challenge");
    }

    #[test]
    fn bind_answers_are_tagged_over_the_nonce() {
        let psk = Psk::new(b"sixteen byte key").unwrap();
        let t = psk.bind_answer_tag(b"head", b"body", 7);
        assert!(psk.check_bind_answer(b"head", b"body", 7, &t));
        assert!(!psk.check_bind_answer(b"head", b"body", 8, &t), "another bind's");
        assert!(!psk.check_bind_answer(b"head", b"bodY", 7, &t));
        assert!(!Psk::new(b"sixteen byte kez").unwrap().check_bind_answer(b"head", b"body", 7, &t));
    }

    #[test]
    fn proofs_and_frame_tags_need_the_key() {
        let psk = Psk::new(b"sixteen byte key").unwrap();
        let other = Psk::new(b"sixteen byte kez").unwrap();
        assert!(matches!(Psk::new(b"short"), Err(PskError::TooShort { len: 5, min: 16 })));
        let cookie = Cookie { epoch: 3, mac: [9; TAG_LEN] };
        let proof = psk.prove(b"request", &cookie);
        assert!(psk.check_proof(b"request", &cookie, &proof));
        assert!(!other.check_proof(b"request", &cookie, &proof));
        assert!(!psk.check_proof(b"requesT", &cookie, &proof));
        assert!(!psk.check_proof(b"request", &Cookie { epoch: 4, ..cookie }, &proof));

        let client = psk.session_keys(1, &cookie.mac, 77, Side::Client);
        let server = psk.session_keys(1, &cookie.mac, 77, Side::Server);
        let tag = client.send.tag(b"head", b"body");
        assert!(server.recv.verify(b"head", b"body", &tag));
        assert!(!server.recv.verify(b"head", b"bodY", &tag));
        assert!(!server.send.verify(b"head", b"body", &tag), "each direction has its own key");
        assert!(!server.recv.verify(b"head", b"body", &tag[..8]), "a short tag is refused");
        let replayed = psk.session_keys(1, &cookie.mac, 78, Side::Server);
        assert!(!replayed.recv.verify(b"head", b"body", &tag), "another session, other keys");
        let t = psk.unbound_key().tag(b"head", b"");
        assert!(psk.unbound_key().verify(b"head", b"", &t));
        assert!(!other.unbound_key().verify(b"head", b"", &t));
        assert!(!format!("{psk:?}").contains("sixteen"));
    }
}
