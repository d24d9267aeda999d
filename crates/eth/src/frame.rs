//! The layout of lowlat's Ethernet frames, checked before anything in them is used.
//!
//! ```text
//! [0..6]   destination MAC        [6..12] source MAC       [12..14] EtherType 0x88B5 (big endian)
//! [14]     kind (DATA, DISCOVER, DISCOVER_REPLY, PING)     [15] flags (bit 0: CRC32C present)
//! [16..18] payload length, u16 little endian
//! [18..18+len]          payload: for DATA, lowlat's 32-byte header and the message body
//! [18+len..22+len]      CRC32C (little endian) of bytes 14..18+len, when flag bit 0 is set
//! ```
//!
//! The 4-byte shim carries the payload length because real NICs pad frames shorter than 60 bytes:
//! without it, neither the payload's end nor the checksum could be found. Parsing never panics: a
//! frame that is short, of another EtherType, of an unknown kind, or whose checksum is wrong is
//! rejected with a [`Reject`] reason, which the sockets count.

use crate::Mac;

/// lowlat's EtherType: IEEE 802 "local experimental EtherType 1", free for private protocols.
pub const ETHERTYPE: u16 = 0x88B5;
/// Ethernet header plus lowlat's shim.
pub const HEADER_LEN: usize = 18;
/// The Ethernet header alone: two MACs and the EtherType.
pub const ETH_HEADER_LEN: usize = 14;
/// Bytes of the CRC32C after the payload, when [`FLAG_CRC`] is set.
pub const CRC_LEN: usize = 4;
/// Frames on the wire are at least this long (without FCS); shorter ones get padded by NICs.
pub const MIN_FRAME: usize = 60;

/// Flag bit (byte 15): a CRC32C of bytes 14..18+len follows the payload.
pub const FLAG_CRC: u8 = 1;

mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const TYPE: Range<usize> = 12..14;
    pub const KIND: usize = 14;
    pub const FLAGS: usize = 15;
    pub const LEN: Range<usize> = 16..18;
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameType {
    /// lowlat protocol bytes (header + body) or a raw ping-pong payload echoed by user code.
    Data,
    /// A client looking for a server on this link (broadcast).
    Discover,
    /// A server's answer to [`FrameType::Discover`].
    DiscoverReply,
    /// A ping-pong frame that lowlat's XDP floor program answers inside the driver.
    Ping,
}

impl FrameType {
    /// The kind's byte (byte 14 of the frame).
    pub fn to_u8(self) -> u8 {
        match self {
            FrameType::Data => 1,
            FrameType::Discover => 2,
            FrameType::DiscoverReply => 3,
            FrameType::Ping => 4,
        }
    }
    /// The kind that byte `v` names; `None` for a kind this version does not know.
    pub fn from_u8(v: u8) -> Option<FrameType> {
        Some(match v {
            1 => FrameType::Data,
            2 => FrameType::Discover,
            3 => FrameType::DiscoverReply,
            4 => FrameType::Ping,
            _ => return None,
        })
    }
}

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Shorter than the header, or than the length it declares (truncated).
    Short,
    /// Not lowlat's EtherType.
    NotOurs,
    /// Unknown kind byte.
    UnknownKind,
    /// The receiver requires checksums and the frame has none.
    MissingCrc,
    /// The checksum does not match: corrupted on the way.
    BadCrc,
}

/// A validated frame: its kind, sender and where the payload lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// What the frame carries.
    pub kind: FrameType,
    /// The sender's MAC (bytes 6..12).
    pub src: Mac,
    /// The addressee's MAC (bytes 0..6), as sent (parsing does not check it).
    pub dst: Mac,
    /// Payload start is always [`HEADER_LEN`]; this is its length.
    pub len: usize,
}

/// Builds the 18 header bytes of a frame.
pub fn header(dst: Mac, src: Mac, kind: FrameType, crc: bool, len: u16) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[field::DST].copy_from_slice(&dst.0);
    h[field::SRC].copy_from_slice(&src.0);
    h[field::TYPE].copy_from_slice(&ETHERTYPE.to_be_bytes());
    h[field::KIND] = kind.to_u8();
    h[field::FLAGS] = if crc { FLAG_CRC } else { 0 };
    h[field::LEN].copy_from_slice(&len.to_le_bytes());
    h
}

/// Writes a whole frame into the start of `out`: the header, `head`, `body` and (with `crc`) the
/// CRC32C over the shim and payload, computed in one pass over the copy (each separate pass
/// costs the checksum's fixed ~100 instructions again); its length, or `None` when `out` is
/// too short.
#[inline(always)]
pub fn write(
    dst: Mac,
    src: Mac,
    kind: FrameType,
    crc: bool,
    head: &[u8],
    body: &[u8],
    out: &mut [u8],
) -> Option<usize> {
    let len = head.len() + body.len();
    let end = HEADER_LEN + len;
    let out = out.get_mut(..end + if crc { CRC_LEN } else { 0 })?;
    out[..HEADER_LEN].copy_from_slice(&header(dst, src, kind, crc, u16::try_from(len).ok()?));
    out[HEADER_LEN..HEADER_LEN + head.len()].copy_from_slice(head);
    out[HEADER_LEN + head.len()..end].copy_from_slice(body);
    if crc {
        let c = crc32c::crc32c(&out[ETH_HEADER_LEN..end]);
        out[end..].copy_from_slice(&c.to_le_bytes());
    }
    Some(out.len())
}

/// The CRC32C a sender appends: over the shim, then each payload part in order.
pub fn checksum(shim: &[u8], parts: &[&[u8]]) -> u32 {
    let mut c = crc32c::crc32c(shim);
    for p in parts {
        c = crc32c::crc32c_append(c, p);
    }
    c
}

/// Validates a received frame (Ethernet header first). `require_crc` rejects frames without a
/// checksum, so a flipped flag bit cannot switch the check off.
pub fn parse(frame: &[u8], require_crc: bool) -> Result<Parsed, Reject> {
    if frame.len() < HEADER_LEN {
        return Err(Reject::Short);
    }
    if frame[field::TYPE] != ETHERTYPE.to_be_bytes() {
        return Err(Reject::NotOurs);
    }
    let kind = FrameType::from_u8(frame[field::KIND]).ok_or(Reject::UnknownKind)?;
    let len = u16::from_le_bytes([frame[16], frame[17]]) as usize;
    let has_crc = frame[field::FLAGS] & FLAG_CRC != 0;
    let end = HEADER_LEN + len;
    let need = if has_crc { end + CRC_LEN } else { end };
    if frame.len() < need {
        return Err(Reject::Short);
    }
    if has_crc {
        let want = u32::from_le_bytes([frame[end], frame[end + 1], frame[end + 2], frame[end + 3]]);
        if crc32c::crc32c(&frame[ETH_HEADER_LEN..end]) != want {
            return Err(Reject::BadCrc);
        }
    } else if require_crc {
        return Err(Reject::MissingCrc);
    }
    let mut src = [0u8; 6];
    src.copy_from_slice(&frame[field::SRC]);
    let mut dst = [0u8; 6];
    dst.copy_from_slice(&frame[field::DST]);
    Ok(Parsed { kind, src: Mac(src), dst: Mac(dst), len })
}

/// The discovery message: a magic distinct from lowlat's header magic `Ll` + version, and a
/// nonce so that a client only believes answers to its own question.
pub mod discovery {
    /// First four bytes of a client's question.
    pub const REQUEST: [u8; 4] = *b"lDs?";
    /// First four bytes of a server's answer.
    pub const REPLY: [u8; 4] = *b"lDs!";
    /// Bytes of a discovery message: magic, then the nonce (u64 little-endian).
    pub const LEN: usize = 12;

    /// The message `magic` ‖ `nonce`.
    pub fn encode(magic: [u8; 4], nonce: u64) -> [u8; LEN] {
        let mut m = [0u8; LEN];
        m[..4].copy_from_slice(&magic);
        m[4..].copy_from_slice(&nonce.to_le_bytes());
        m
    }

    /// The nonce of a message with the given magic, or None.
    pub fn decode(magic: [u8; 4], payload: &[u8]) -> Option<u64> {
        if payload.len() != LEN || payload[..4] != magic {
            return None;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&payload[4..]);
        Some(u64::from_le_bytes(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(kind: FrameType, crc: bool, payload: &[u8]) -> Vec<u8> {
        let h = header(Mac([1; 6]), Mac([2; 6]), kind, crc, payload.len() as u16);
        let mut f = h.to_vec();
        f.extend_from_slice(payload);
        if crc {
            f.extend_from_slice(&checksum(&h[14..], &[payload]).to_le_bytes());
        }
        f
    }

    #[test]
    fn a_frame_written_whole_is_the_gathered_frame_and_too_small_a_buffer_is_refused() {
        for crc in [true, false] {
            let (head, body) = (&b"0123456789abcdef0123456789abcdef"[..], &b"body"[..]);
            let mut out = [0xEEu8; 96];
            let n = write(Mac([1; 6]), Mac([2; 6]), FrameType::Data, crc, head, body, &mut out).unwrap();
            assert_eq!(&out[..n], &build(FrameType::Data, crc, &[head, body].concat())[..]);
            assert_eq!(parse(&out[..n], crc).map(|p| p.len), Ok(head.len() + body.len()));
            assert_eq!(write(Mac([1; 6]), Mac([2; 6]), FrameType::Data, crc, head, body, &mut out[..n - 1]), None);
        }
    }

    #[test]
    fn round_trips_with_and_without_crc_and_padding() {
        for crc in [false, true] {
            let mut f = build(FrameType::Data, crc, b"hello");
            f.resize(MIN_FRAME, 0); // NIC padding must not matter
            let p = parse(&f, crc).unwrap();
            assert_eq!((p.kind, p.src, p.dst, p.len), (FrameType::Data, Mac([2; 6]), Mac([1; 6]), 5));
            assert_eq!(&f[HEADER_LEN..HEADER_LEN + p.len], b"hello");
        }
    }

    #[test]
    fn rejects_bad_frames() {
        let good = build(FrameType::Data, true, b"0123456789");
        assert_eq!(parse(&good[..10], true), Err(Reject::Short));
        assert_eq!(parse(&good[..good.len() - 1], true), Err(Reject::Short));
        let mut f = good.clone();
        f[12] = 0x08;
        assert_eq!(parse(&f, true), Err(Reject::NotOurs));
        let mut f = good.clone();
        f[14] = 99;
        assert_eq!(parse(&f, true), Err(Reject::UnknownKind));
        for i in 14..good.len() {
            let mut f = good.clone();
            f[i] ^= 0x10;
            assert!(parse(&f, true).is_err(), "flip at {i} accepted");
        }
        let plain = build(FrameType::Data, false, b"x");
        assert_eq!(parse(&plain, true), Err(Reject::MissingCrc));
        let mut f = good.clone();
        f[16] = 0xff; // length beyond the frame
        assert_eq!(parse(&f, false), Err(Reject::Short));
    }

    #[test]
    fn discovery_messages() {
        let m = discovery::encode(discovery::REQUEST, 42);
        assert_eq!(discovery::decode(discovery::REQUEST, &m), Some(42));
        assert_eq!(discovery::decode(discovery::REPLY, &m), None);
        assert_eq!(discovery::decode(discovery::REQUEST, &m[..11]), None);
        // Never mistaken for lowlat's header.
        assert_ne!(m[..2], lowlat_proto::wire::MAGIC);
    }
}
