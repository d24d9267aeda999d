//! lowlat's wire formats: one fixed 32-byte header before every message body, and the small
//! fixed payloads of the binding handshake, errors and path challenges. One file per format,
//! each of the same shape (smoltcp's): the byte layout in its module doc, field offsets in a
//! small `mod field`, a plain struct with `parse` and `emit`, and tests at the bottom that parse
//! and emit fixed byte arrays. Only these files know where a field lies.
//!
//! - `header`: the header ([`Header`], [`HeaderView`]), its [`Kind`]s and [`flags`].
//! - [`token`]: the session token's parts (generation, session index, random bits).
//! - `bind`: the body of a `Bind` ([`BindRequest`], [`Cookie`], [`Bind`]).
//! - `bind_answer`: the bodies of `BindOk` and `BindRefused` ([`BindGrant`], [`BindRefusal`]).
//! - `error_frame`: an `Error` frame's code and message ([`ErrorCode`], [`ErrorMessage`]).
//! - `path`: the challenge that proves a new address ([`PathChallenge`]).
//!
//! On a session authenticated with a pre-shared key every frame carries a 16-byte tag right
//! after the header (flag [`flags::TAGGED`]): a MAC of the header and the body under the
//! session's key for that direction (`crate::auth`). The header's lengths count the message,
//! never the tag. On a sealed session (`crate::seal`) the tag is an AEAD's and the body is
//! ciphertext.
//!
//! The header is little-endian on the wire (the byte order of every machine lowlat runs on today,
//! so neither side converts it). Message bodies travel in the server's byte order, announced at
//! bind time; only a client of the other order converts (Thekkath & Levy §3.1).
//!
//! Every parser here checks lengths once and then cannot panic; unknown kinds and codes decode to
//! an `Unknown` variant instead of failing, so a newer peer's frame is reported, not fatal.
//!
//! Binding (protocol version 2): the client sends `Bind` ([`BindRequest`]). Where the server must
//! first see that the client receives at its address (datagram transports), or needs a nonce of
//! its own (a pre-shared key), it answers `BindRetry` with a [`Cookie`] and keeps nothing; the
//! client sends the bind again with the cookie after the request ([`BIND_COOKIE`]) and, holding
//! a key ([`BIND_KEYED`]), a proof of it after the cookie. Only then does the server make a
//! session and answer `BindOk` (tagged, on a keyed session) or `BindRefused`. A `BindRetry` is
//! never larger than the bind it answers.

mod bind;
mod bind_answer;
mod error_frame;
mod header;
mod path;
pub mod token;

pub use bind::{
    Bind, BindRequest, ByteOrder, Cookie, BIND_COOKIE, BIND_KEYED, BIND_RELIABLE, BIND_SEALED, BIND_SEAL_AES,
};
pub use bind_answer::{BindGrant, BindRefusal, Refusal};
pub use error_frame::{ErrorCode, ErrorMessage, MAX_ERROR_MESSAGE};
pub use header::{flags, Header, HeaderView, Kind, WholeCall, HEADER_LEN, MAGIC, PROTOCOL_VERSION, TAG_LEN};
pub use path::PathChallenge;

/// Why a frame could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The frame is shorter than a header.
    #[error("frame of {len} bytes is shorter than the {HEADER_LEN}-byte lowlat header")]
    Truncated {
        /// Bytes of the frame.
        len: usize,
    },
    /// The frame does not start with [`MAGIC`]: not lowlat's.
    #[error("not a lowlat frame: magic {found:02x?}, expected {MAGIC:02x?}")]
    BadMagic {
        /// The frame's first two bytes.
        found: [u8; 2],
    },
    /// A binding payload is shorter than its fixed size.
    #[error("{what} payload of {len} bytes is shorter than its {need} bytes")]
    ShortPayload {
        /// Which payload (`"bind"`, `"cookie"`, `"bind grant"`, ...).
        what: &'static str,
        /// Bytes there were.
        len: usize,
        /// Bytes it needs.
        need: usize,
    },
    /// An `Error` frame's message exceeds [`MAX_ERROR_MESSAGE`].
    #[error("error message of {len} bytes is longer than the {MAX_ERROR_MESSAGE} an error frame may carry")]
    MessageTooLong {
        /// Bytes of the message.
        len: usize,
    },
    /// An `Error` frame's message is not UTF-8.
    #[error("error message is not UTF-8 (from byte {valid_up_to} on)")]
    MessageNotUtf8 {
        /// Bytes of valid UTF-8 before the first bad one.
        valid_up_to: usize,
    },
}

// Little-endian readers of a field at a range the caller has checked (every format's `parse`
// checks its length once, first).
#[inline(always)]
fn u16_at(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[r]);
    u16::from_le_bytes(a)
}
#[inline(always)]
fn u32_at(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_le_bytes(a)
}
#[inline(always)]
fn u64_at(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_decode_instead_of_failing() {
        let mut b = Header::new(Kind::Ack).to_bytes();
        b[3] = 200;
        assert_eq!(Header::parse(&b).unwrap().0.kind, Kind::Unknown(200));
        assert_eq!(ErrorCode::from_u32(77), ErrorCode::Unknown(77));
        assert_eq!(BindRefusal::parse(&[99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap().0, Refusal::Unknown(99));
    }
}
