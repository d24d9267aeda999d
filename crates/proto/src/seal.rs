//! Sealed frames: on a session bound with a pre-shared key and [`BIND_SEALED`], the body of
//! every frame after the bind is encrypted and authenticated with an AEAD, AES-256-GCM or
//! ChaCha20-Poly1305 (RustCrypto's `aes-gcm` and `chacha20poly1305`; nothing here is
//! cryptography of lowlat's own, only which bytes go where). The header stays readable, since
//! the transports and the engine route by it, and is authenticated as associated data.
//!
//! ```text
//!  header (32, flags TAGGED | SEALED) | AEAD tag (16) | sequence number (8, LE) | ciphertext
//! ```
//!
//! Associated data: the header and the sequence number. Nonce (96 bits): the sequence number
//! (8 bytes, LE), the header's slot (2 bytes, LE), two zero bytes.
//!
//! **Nonces never repeat under one key.** Keys are per session and direction: HKDF of the
//! pre-shared key with the client's nonce, the server's nonce (the cookie's MAC, fresh for every
//! bind) and the token (`crate::auth::Psk::seal_keys`), so a new bind, a rebind after a restart or
//! a second session never meets an old key. Under a key, every frame sent takes the sender's next
//! sequence number, retransmissions included (a retransmitted fragment is sealed anew, never
//! resent as the same bytes under another header). The client's slots share one counter (a
//! [`Sealer`] and its clones draw from it), however often a slot's engine is made anew, and the
//! slot number is in the nonce as well; the server counts per session. A 64-bit counter does not
//! wrap within a session's life.
//!
//! Receivers need no window of sequence numbers: replays are refused by the call numbers the
//! engines already check, and the sequence number only makes the nonce.
//!
//! [`BIND_SEALED`]: crate::wire::BIND_SEALED

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::Aes256Gcm;
use chacha20poly1305::ChaCha20Poly1305;

use crate::auth::{self, FrameKey};
use crate::wire::{flags, Header, HEADER_LEN, TAG_LEN};

/// Bytes of the sequence number a sealed frame carries after its tag.
pub const SEQ_LEN: usize = 8;
/// Bytes before a sealed frame's ciphertext: header, tag, sequence number.
pub const SEALED_HEAD_LEN: usize = HEADER_LEN + TAG_LEN + SEQ_LEN;

/// Bytes before a body in a frame of a session: the header, the tag when keyed, the sequence
/// number as well when sealed.
pub fn head_len(keyed: bool, sealed: bool) -> usize {
    if sealed {
        SEALED_HEAD_LEN
    } else if keyed {
        HEADER_LEN + TAG_LEN
    } else {
        HEADER_LEN
    }
}

/// Which AEAD a sealed session uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CipherKind {
    /// AES-256-GCM (fast where the CPU has AES and carry-less multiply instructions).
    Aes256Gcm,
    /// ChaCha20-Poly1305 (fast everywhere else).
    ChaCha20Poly1305,
}

impl CipherKind {
    /// AES-256-GCM where this CPU has AES-NI and PCLMULQDQ, else ChaCha20-Poly1305: what a
    /// client asks for (the server takes the client's choice; both are correct everywhere).
    pub fn preferred() -> CipherKind {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq") {
                return CipherKind::Aes256Gcm;
            }
        }
        CipherKind::ChaCha20Poly1305
    }

    /// The name a person reads.
    pub fn name(self) -> &'static str {
        match self {
            CipherKind::Aes256Gcm => "AES-256-GCM",
            CipherKind::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        }
    }
}

#[derive(Clone)]
enum Cipher {
    Aes(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
}

impl Cipher {
    fn new(kind: CipherKind, key: &[u8; 32]) -> Cipher {
        match kind {
            CipherKind::Aes256Gcm => Cipher::Aes(Box::new(Aes256Gcm::new(key.into()))),
            CipherKind::ChaCha20Poly1305 => Cipher::ChaCha(Box::new(ChaCha20Poly1305::new(key.into()))),
        }
    }

    fn seal(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        // Encryption fails only for messages beyond 2^36 bytes (GCM's limit), far beyond any frame.
        let tag = match self {
            Cipher::Aes(c) => c.encrypt_in_place_detached(nonce.into(), aad, buf),
            Cipher::ChaCha(c) => c.encrypt_in_place_detached(nonce.into(), aad, buf),
        }
        .expect("a frame is far below the AEAD's length limit");
        tag.into()
    }

    fn open(&self, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &[u8; TAG_LEN]) -> bool {
        match self {
            Cipher::Aes(c) => c.decrypt_in_place_detached(nonce.into(), aad, buf, tag.into()).is_ok(),
            Cipher::ChaCha(c) => c.decrypt_in_place_detached(nonce.into(), aad, buf, tag.into()).is_ok(),
        }
    }
}

fn nonce(seq: u64, slot: u16) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..8].copy_from_slice(&seq.to_le_bytes());
    n[8..10].copy_from_slice(&slot.to_le_bytes());
    n
}

fn aad(head: &[u8], seq: &[u8]) -> [u8; HEADER_LEN + SEQ_LEN] {
    let mut a = [0u8; HEADER_LEN + SEQ_LEN];
    a[..HEADER_LEN].copy_from_slice(head);
    a[HEADER_LEN..].copy_from_slice(seq);
    a
}

/// One direction's sealing: the key, the next sequence number, and a buffer for the ciphertext
/// (grown to the largest body once, then reused: sealing allocates nothing in steady state).
///
/// A sealer and its clones draw sequence numbers from one counter, so the slots of a session,
/// however often a slot's engine is made anew, never seal two frames with one nonce.
#[derive(Clone)]
pub struct Sealer {
    cipher: Cipher,
    next: Arc<AtomicU64>,
    buf: Vec<u8>,
}

impl core::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Sealer(<key not shown>, next {})", self.sealed())
    }
}

impl Sealer {
    /// A sealer under `key` with `kind`, starting at sequence number 0.
    pub fn new(kind: CipherKind, key: &[u8; 32]) -> Sealer {
        Sealer { cipher: Cipher::new(kind, key), next: Arc::new(AtomicU64::new(0)), buf: Vec::new() }
    }

    /// Frames sealed so far (the next sequence number).
    pub fn sealed(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Seals `body` under `h` (flagged [`flags::TAGGED`] and [`flags::SEALED`]): returns the
    /// bytes to send before the ciphertext, and the ciphertext.
    pub fn seal(&mut self, mut h: Header, body: &[u8]) -> ([u8; SEALED_HEAD_LEN], &[u8]) {
        h.flags |= flags::TAGGED | flags::SEALED;
        // Uniqueness is all that is asked of the number: no other memory is ordered by it.
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let mut head = [0u8; SEALED_HEAD_LEN];
        let header = h.to_bytes();
        head[..HEADER_LEN].copy_from_slice(&header);
        let seq_bytes = seq.to_le_bytes();
        head[HEADER_LEN + TAG_LEN..].copy_from_slice(&seq_bytes);
        self.buf.clear();
        self.buf.extend_from_slice(body);
        let tag = self.cipher.seal(&nonce(seq, h.slot), &aad(&header, &seq_bytes), &mut self.buf);
        head[HEADER_LEN..HEADER_LEN + TAG_LEN].copy_from_slice(&tag);
        (head, &self.buf)
    }
}

/// One direction's opening: the key, and a buffer the plaintext is decrypted into (reused).
#[derive(Clone)]
pub struct Opener {
    cipher: Cipher,
    buf: Vec<u8>,
}

impl core::fmt::Debug for Opener {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Opener(<key not shown>)")
    }
}

impl Opener {
    /// An opener under `key` with `kind`.
    pub fn new(kind: CipherKind, key: &[u8; 32]) -> Opener {
        Opener { cipher: Cipher::new(kind, key), buf: Vec::new() }
    }

    /// The plaintext of a sealed `frame` (whole, header first), or `None` when it is not flagged
    /// sealed, too short, or altered, forged or sealed under another key.
    pub fn open(&mut self, frame: &[u8]) -> Option<&[u8]> {
        let head = frame.get(..HEADER_LEN)?;
        if head[4] & flags::SEALED == 0 || head[4] & flags::TAGGED == 0 {
            return None;
        }
        let tag: [u8; TAG_LEN] = frame.get(HEADER_LEN..HEADER_LEN + TAG_LEN)?.try_into().ok()?;
        let seq_bytes = frame.get(HEADER_LEN + TAG_LEN..SEALED_HEAD_LEN)?;
        let seq = u64::from_le_bytes(seq_bytes.try_into().ok()?);
        let slot = u16::from_le_bytes([head[6], head[7]]);
        self.buf.clear();
        self.buf.extend_from_slice(&frame[SEALED_HEAD_LEN..]);
        self.cipher.open(&nonce(seq, slot), &aad(head, seq_bytes), &mut self.buf, &tag).then_some(&self.buf[..])
    }
}

/// Both directions of one end of a sealed session.
#[derive(Clone, Debug)]
pub struct SealKeys {
    /// Seals what this end sends.
    pub send: Sealer,
    /// Opens what this end receives.
    pub recv: Opener,
}

impl SealKeys {
    /// The two directions from the keys [`Psk::seal_keys`](crate::auth::Psk::seal_keys) derived
    /// for this end: (send, receive).
    pub fn new(kind: CipherKind, keys: &([u8; 32], [u8; 32])) -> SealKeys {
        SealKeys { send: Sealer::new(kind, &keys.0), recv: Opener::new(kind, &keys.1) }
    }
}

/// How one end of a session protects a frame it sends: not at all, with a tag, or sealed.
pub(crate) enum Guard<'a> {
    /// An unkeyed session.
    Plain,
    /// A keyed session: a tag under this key after the header.
    Tag(&'a FrameKey),
    /// A sealed session.
    Seal(&'a mut Sealer),
}

impl<'a> Guard<'a> {
    /// The guard of a session with these keys (`None`: unkeyed) and this sealer (`None`: not
    /// sealed).
    pub(crate) fn of(tag: Option<&'a FrameKey>, seal: Option<&'a mut Sealer>) -> Guard<'a> {
        match (seal, tag) {
            (Some(s), _) => Guard::Seal(s),
            (None, Some(k)) => Guard::Tag(k),
            (None, None) => Guard::Plain,
        }
    }

    /// Sends `h` then `body` through `out` as this session protects them.
    #[inline]
    pub(crate) fn emit(&mut self, h: Header, body: &[u8], out: &mut impl FnMut(&[u8], &[u8])) {
        match self {
            Guard::Plain => out(&h.to_bytes(), body),
            Guard::Tag(k) => out(auth::seal(k, h, body).as_bytes(), body),
            Guard::Seal(s) => {
                let (head, ct) = s.seal(h, body);
                out(&head, ct)
            }
        }
    }

    /// Bytes this guard puts before a body.
    pub(crate) fn head_len(&self) -> usize {
        head_len(!matches!(self, Guard::Plain), matches!(self, Guard::Seal(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Kind;

    fn frame(head: &[u8], body: &[u8]) -> Vec<u8> {
        [head, body].concat()
    }

    #[test]
    fn sealed_bodies_differ_from_the_plaintext_and_open_only_under_the_key() {
        for kind in [CipherKind::Aes256Gcm, CipherKind::ChaCha20Poly1305] {
            let (k, other) = ([3u8; 32], [4u8; 32]);
            let mut s = Sealer::new(kind, &k);
            let mut h = Header::new(Kind::Call);
            h.slot = 5;
            h.total_len = 11;
            let (head, ct) = s.seal(h, b"hello world");
            let ct = ct.to_vec();
            assert_ne!(ct, b"hello world", "{kind:?}");
            let f = frame(&head, &ct);
            assert_eq!(Opener::new(kind, &k).open(&f), Some(&b"hello world"[..]));
            assert_eq!(Opener::new(kind, &other).open(&f), None, "another key");
            // Every byte is covered: header, tag, sequence number, ciphertext.
            for at in 0..f.len() {
                let mut bad = f.clone();
                bad[at] ^= 0x40;
                assert_eq!(Opener::new(kind, &k).open(&bad), None, "{kind:?}: byte {at} altered");
            }
            assert_eq!(Opener::new(kind, &k).open(&f[..SEALED_HEAD_LEN - 1]), None, "cut short");
            // The same body again takes the next number: another ciphertext.
            let (head2, ct2) = s.seal(h, b"hello world");
            assert_ne!((head, ct), (head2, ct2.to_vec()));
            assert_eq!(s.sealed(), 2);
            // A clone (another slot's engine) goes on from the same counter.
            let mut clone = s.clone();
            let (head3, _) = clone.seal(h, b"x");
            assert_eq!(head3[HEADER_LEN + TAG_LEN..], 2u64.to_le_bytes());
            assert_eq!(s.sealed(), 3);
        }
    }

    #[test]
    fn an_unsealed_frame_is_not_opened() {
        let k = [9u8; 32];
        let h = Header::new(Kind::Result).to_bytes();
        let f = frame(&h, &[0u8; 40]);
        assert_eq!(Opener::new(CipherKind::ChaCha20Poly1305, &k).open(&f), None);
    }
}
