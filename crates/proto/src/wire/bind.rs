//! The body of a `Bind` frame: the client's request ([`BindRequest`]), then, from the second
//! bind on, the server's [`Cookie`] (also the body of the `BindRetry` that handed it out) and,
//! holding a pre-shared key, the proof of it ([`Bind`]). The server's answers are in
//! `bind_answer`. Every byte pattern long enough is a request: the server checks the values,
//! and nothing here can panic once the length is checked.

use super::{u16_at, u32_at, u64_at, WireError, TAG_LEN};

/// Where each field lies (byte ranges of each payload).
mod field {
    /// [`BindRequest`](super::BindRequest): the fields in declaration order.
    pub mod request {
        use core::ops::Range;
        pub const PROGRAM: Range<usize> = 0..4;
        pub const VERSION: Range<usize> = 4..8;
        pub const PROTO_MIN: usize = 8;
        pub const PROTO_MAX: usize = 9;
        pub const BYTE_ORDER: usize = 10;
        pub const FLAGS: usize = 11;
        pub const MAX_MESSAGE: Range<usize> = 12..16;
        pub const MAX_FRAME: Range<usize> = 16..20;
        pub const SLOTS: Range<usize> = 20..22;
        pub const WINDOW: Range<usize> = 22..24;
        pub const NONCE: Range<usize> = 24..32;
    }
    /// [`Cookie`](super::Cookie).
    pub mod cookie {
        use core::ops::Range;
        pub const EPOCH: Range<usize> = 0..4;
        pub const MAC: Range<usize> = 4..4 + crate::wire::TAG_LEN;
    }
}
use field::{cookie, request};

/// Byte order of a peer's message bodies: the encoding library's own type (one `ByteOrder` in
/// the workspace), carried in a bind as one byte (0 little-endian, 1 big-endian; any other value
/// reads as little-endian).
pub use lowlat_codec::ByteOrder;

pub(super) fn order_to_u8(o: ByteOrder) -> u8 {
    match o {
        ByteOrder::Little => 0,
        ByteOrder::Big => 1,
    }
}

pub(super) fn order_from_u8(b: u8) -> ByteOrder {
    if b == 1 {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    }
}

/// Bind flag: the client's transport is a reliable stream (TCP, shared memory). Information only:
/// the server goes by its own transport, never by what a client says of it.
pub const BIND_RELIABLE: u8 = 1;
/// Bind flag: a [`Cookie`] follows the request.
pub const BIND_COOKIE: u8 = 2;
/// Bind flag: the client holds a pre-shared key; with a cookie, a proof of the key
/// ([`TAG_LEN`] bytes) follows the cookie.
pub const BIND_KEYED: u8 = 4;
/// Bind flag (with [`BIND_KEYED`]): the client asks that every frame after the bind be
/// encrypted (`crate::seal`), with AES-256-GCM when [`BIND_SEAL_AES`] is set too, else
/// ChaCha20-Poly1305. The flags are under the proof of the key, so no one on the path can take
/// them away.
pub const BIND_SEALED: u8 = 8;
/// Bind flag (with [`BIND_SEALED`]): the client's cipher is AES-256-GCM (its CPU has AES
/// instructions); without it, ChaCha20-Poly1305.
pub const BIND_SEAL_AES: u8 = 16;

/// The body of a `Bind` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindRequest {
    /// The program to bind to (bytes 0..4).
    pub program: u32,
    /// Its version (bytes 4..8).
    pub version: u32,
    /// Lowest protocol version the client speaks (byte 8).
    pub proto_min: u8,
    /// Highest protocol version the client speaks (byte 9).
    pub proto_max: u8,
    /// The client machine's byte order (byte 10); bodies travel in the server's, which a client
    /// of the other order converts to.
    pub byte_order: ByteOrder,
    /// `BIND_*` bits (byte 11).
    pub flags: u8,
    /// Largest message (arguments or result) the client wants to exchange.
    pub max_message: u32,
    /// Largest frame (header + body) the client's transport carries.
    pub max_frame: u32,
    /// Call slots wanted.
    pub slots: u16,
    /// Fragments in flight wanted.
    pub window: u16,
    /// Random per-bind value, so a retransmitted `Bind` gets the same session.
    pub nonce: u64,
}

impl BindRequest {
    /// Bytes of the request.
    pub const LEN: usize = 32;
    /// Where its nonce lies in the body: what a steering program spreads binds by.
    pub const NONCE: core::ops::Range<usize> = field::request::NONCE;

    /// The request's 32 bytes, little-endian: the fields in declaration order.
    pub fn emit(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[request::PROGRAM].copy_from_slice(&self.program.to_le_bytes());
        b[request::VERSION].copy_from_slice(&self.version.to_le_bytes());
        b[request::PROTO_MIN] = self.proto_min;
        b[request::PROTO_MAX] = self.proto_max;
        b[request::BYTE_ORDER] = order_to_u8(self.byte_order);
        b[request::FLAGS] = self.flags;
        b[request::MAX_MESSAGE].copy_from_slice(&self.max_message.to_le_bytes());
        b[request::MAX_FRAME].copy_from_slice(&self.max_frame.to_le_bytes());
        b[request::SLOTS].copy_from_slice(&self.slots.to_le_bytes());
        b[request::WINDOW].copy_from_slice(&self.window.to_le_bytes());
        b[request::NONCE].copy_from_slice(&self.nonce.to_le_bytes());
        b
    }

    /// Reads a request from the start of `b` (longer is allowed: a cookie may follow); shorter
    /// than [`LEN`](Self::LEN) is [`WireError::ShortPayload`]. Every byte pattern is a request: the
    /// server checks the values.
    pub fn parse(b: &[u8]) -> Result<BindRequest, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "bind", len: b.len(), need: Self::LEN });
        }
        Ok(BindRequest {
            program: u32_at(b, request::PROGRAM),
            version: u32_at(b, request::VERSION),
            proto_min: b[request::PROTO_MIN],
            proto_max: b[request::PROTO_MAX],
            byte_order: order_from_u8(b[request::BYTE_ORDER]),
            flags: b[request::FLAGS],
            max_message: u32_at(b, request::MAX_MESSAGE),
            max_frame: u32_at(b, request::MAX_FRAME),
            slots: u16_at(b, request::SLOTS),
            window: u16_at(b, request::WINDOW),
            nonce: u64_at(b, request::NONCE),
        })
    }
}

/// The body of a `BindRetry` frame, returned by the client after its next bind request: a coarse
/// time (the server's key epoch) and a MAC that binds the client's address and nonce to it. The
/// MAC is the server's nonce for a keyed session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie {
    /// The server's key epoch when it made the cookie (bytes 0..4): good in that epoch and the
    /// next.
    pub epoch: u32,
    /// MAC of the client's address, its nonce and the epoch under the server's secret
    /// (bytes 4..20).
    pub mac: [u8; TAG_LEN],
}

impl Cookie {
    /// Bytes of the cookie.
    pub const LEN: usize = 4 + TAG_LEN;

    /// The cookie's bytes: epoch (little-endian), then MAC.
    pub fn emit(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[cookie::EPOCH].copy_from_slice(&self.epoch.to_le_bytes());
        b[cookie::MAC].copy_from_slice(&self.mac);
        b
    }

    /// Reads a cookie from the start of `b`; shorter than [`LEN`](Self::LEN) is
    /// [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<Cookie, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "cookie", len: b.len(), need: Self::LEN });
        }
        let mut mac = [0u8; TAG_LEN];
        mac.copy_from_slice(&b[cookie::MAC]);
        Ok(Cookie { epoch: u32_at(b, cookie::EPOCH), mac })
    }
}

/// The whole body of a `Bind` frame: the request, then (as its flags say) the server's cookie
/// and the proof of the pre-shared key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bind {
    /// The request proper.
    pub request: BindRequest,
    /// The server's cookie, returned (second bind onwards).
    pub cookie: Option<Cookie>,
    /// A MAC under the pre-shared key that proves the client holds it (keyed sessions, with a
    /// cookie only).
    pub proof: Option<[u8; TAG_LEN]>,
}

impl Bind {
    /// The longest body: request, cookie and proof.
    pub const MAX_LEN: usize = BindRequest::LEN + Cookie::LEN + TAG_LEN;

    /// Writes the body into `out`; returns its length. The flags written are the request's,
    /// with [`BIND_COOKIE`] set exactly when there is a cookie.
    pub fn emit(&self, out: &mut [u8; Self::MAX_LEN]) -> usize {
        let mut request = self.request;
        request.flags &= !BIND_COOKIE;
        if self.cookie.is_some() {
            request.flags |= BIND_COOKIE;
        }
        out[..BindRequest::LEN].copy_from_slice(&request.emit());
        let mut n = BindRequest::LEN;
        if let Some(c) = &self.cookie {
            out[n..n + Cookie::LEN].copy_from_slice(&c.emit());
            n += Cookie::LEN;
            if let Some(p) = &self.proof {
                out[n..n + TAG_LEN].copy_from_slice(p);
                n += TAG_LEN;
            }
        }
        n
    }

    /// Reads a bind body: a cookie only when [`BIND_COOKIE`] is set, a proof only when
    /// [`BIND_KEYED`] is set as well.
    pub fn parse(b: &[u8]) -> Result<Bind, WireError> {
        let request = BindRequest::parse(b)?;
        let rest = &b[BindRequest::LEN..];
        let mut bind = Bind { request, cookie: None, proof: None };
        if request.flags & BIND_COOKIE != 0 {
            bind.cookie = Some(Cookie::parse(rest)?);
            if request.flags & BIND_KEYED != 0 {
                let p = rest.get(Cookie::LEN..Cookie::LEN + TAG_LEN).ok_or(WireError::ShortPayload {
                    what: "bind proof",
                    len: rest.len().saturating_sub(Cookie::LEN),
                    need: TAG_LEN,
                })?;
                let mut proof = [0u8; TAG_LEN];
                proof.copy_from_slice(p);
                bind.proof = Some(proof);
            }
        }
        Ok(bind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_cookies_round_trip() {
        let r = BindRequest {
            program: 7,
            version: 2,
            proto_min: 1,
            proto_max: 1,
            byte_order: ByteOrder::Big,
            flags: BIND_RELIABLE,
            max_message: 4 << 20,
            max_frame: 1472,
            slots: 8,
            window: 32,
            nonce: 42,
        };
        assert_eq!(BindRequest::parse(&r.emit()).unwrap(), r);
        assert!(matches!(BindRequest::parse(&[0; 10]), Err(WireError::ShortPayload { need: 32, .. })));
        let cookie = Cookie { epoch: 7, mac: [0xC0; TAG_LEN] };
        assert_eq!(Cookie::parse(&cookie.emit()), Ok(cookie));
    }

    /// The request's and the cookie's bytes, fixed.
    #[test]
    fn requests_and_cookies_have_fixed_layouts() {
        #[rustfmt::skip]
        let bytes = [
            7, 0, 0, 0, 2, 0, 0, 0, // program, version
            1, 2, 1, BIND_KEYED, // protocol versions, byte order (big), flags
            0, 0, 0x40, 0, 0xC0, 0x05, 0, 0, // max message, max frame
            8, 0, 32, 0, // slots, window
            42, 0, 0, 0, 0, 0, 0, 0x80, // nonce
        ];
        let r = BindRequest {
            program: 7,
            version: 2,
            proto_min: 1,
            proto_max: 2,
            byte_order: ByteOrder::Big,
            flags: BIND_KEYED,
            max_message: 4 << 20,
            max_frame: 1472,
            slots: 8,
            window: 32,
            nonce: 42 | 1 << 63,
        };
        assert_eq!(r.emit(), bytes);
        assert_eq!(BindRequest::parse(&bytes), Ok(r));
        let mut other_order = bytes;
        other_order[10] = 7;
        assert_eq!(BindRequest::parse(&other_order).unwrap().byte_order, ByteOrder::Little, "anything but 1");
        let cookie = Cookie { epoch: 0x0102_0304, mac: [9; TAG_LEN] };
        let mut want = [9u8; Cookie::LEN];
        want[..4].copy_from_slice(&[4, 3, 2, 1]);
        assert_eq!(cookie.emit(), want);
        assert!(matches!(
            Cookie::parse(&want[..19]),
            Err(WireError::ShortPayload { what: "cookie", len: 19, need: 20 })
        ));
    }

    /// A bind body carries a cookie only when its flags say so, and a proof only after a
    /// cookie; missing bytes are reported, not read past.
    #[test]
    fn bind_bodies_carry_cookie_and_proof_as_flagged() {
        let request = BindRequest {
            program: 7,
            version: 1,
            proto_min: 2,
            proto_max: 2,
            byte_order: ByteOrder::Little,
            flags: BIND_KEYED,
            max_message: 1000,
            max_frame: 1472,
            slots: 2,
            window: 8,
            nonce: 5,
        };
        let mut out = [0u8; Bind::MAX_LEN];
        let first = Bind { request, cookie: None, proof: None };
        let n = first.emit(&mut out);
        assert_eq!(n, BindRequest::LEN, "no cookie yet, so no proof either");
        assert_eq!(Bind::parse(&out[..n]), Ok(first));
        let cookie = Cookie { epoch: 1, mac: [3; TAG_LEN] };
        let second = Bind { request, cookie: Some(cookie), proof: Some([4; TAG_LEN]) };
        let n = second.emit(&mut out);
        assert_eq!(n, Bind::MAX_LEN);
        let parsed = Bind::parse(&out[..n]).unwrap();
        assert_eq!((parsed.cookie, parsed.proof), (Some(cookie), Some([4; TAG_LEN])));
        assert_eq!(parsed.request.flags, BIND_KEYED | BIND_COOKIE);
        assert!(matches!(Bind::parse(&out[..n - 1]), Err(WireError::ShortPayload { what: "bind proof", .. })));
        assert!(matches!(Bind::parse(&out[..40]), Err(WireError::ShortPayload { what: "cookie", .. })));
        const { assert!(Cookie::LEN < BindRequest::LEN, "a retry is smaller than the bind it answers") };
    }
}
