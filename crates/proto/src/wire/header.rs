//! The fixed 32-byte header before every lowlat message body: its layout, its plain fields
//! ([`Header`], parsed and emitted whole) and a checked view of its bytes ([`HeaderView`], for
//! code that wants a field or two of a frame where it lies). This is the one file that knows
//! where the header's fields lie; every other reader goes through these two types, so a change
//! of layout is made here alone.
//!
//! ```text
//!  0      2    3    4     5    6      8              16        20          24          28        32
//!  +------+----+----+-----+----+------+--------------+---------+-----------+-----------+---------+
//!  |"Ll"  |ver |kind|flags|rsvd| slot | session token| call no | proc/code | total len | offset  |
//!  +------+----+----+-----+----+------+--------------+---------+-----------+-----------+---------+
//!  [ tag (16 bytes), when flags has TAGGED ] [ sequence number (8), when flags has SEALED ] [ body ]
//! ```
//!
//! Little-endian, as every machine lowlat runs on today, so neither side converts it. Checked
//! once for length and magic, after which nothing here can panic; a kind this version does not
//! know decodes to [`Kind::Unknown`].

use super::{token, u16_at, u32_at, u64_at, WireError};

/// Size of the fixed header that precedes every body.
pub const HEADER_LEN: usize = 32;
/// First two bytes of every lowlat frame.
pub const MAGIC: [u8; 2] = *b"Ll";
/// The protocol version this engine speaks (2: the cookie round and keyed sessions; a version 1
/// client is refused with [`Refusal::ProtocolMismatch`](super::Refusal::ProtocolMismatch), which
/// it understands).
pub const PROTOCOL_VERSION: u8 = 2;
/// Bytes of the tag a frame of a keyed session carries after its header.
pub const TAG_LEN: usize = 16;

/// Header flag bits.
pub mod flags {
    /// The sender asks for a fragment acknowledgement now (sent on every half-window and on the
    /// last fragment of a burst).
    pub const REQ_ACK: u8 = 1;
    /// This frame is a retransmission (diagnostics only).
    pub const RETRANSMIT: u8 = 2;
    /// On a fragment acknowledgement: the receiver heard nothing for a whole timeout, so every
    /// unacknowledged fragment should be sent again.
    pub const STALLED: u8 = 4;
    /// A [`TAG_LEN`](super::TAG_LEN)-byte tag follows the header (keyed sessions).
    pub const TAGGED: u8 = 8;
    /// With [`TAGGED`]: the tag is an AEAD's, a sequence number follows it, and the body is
    /// encrypted (`crate::seal`).
    pub const SEALED: u8 = 16;
}

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Client asks for a session (payload: [`BindRequest`](super::BindRequest)).
    Bind,
    /// Server grants a session (payload: [`BindGrant`](super::BindGrant); token in the header).
    BindOk,
    /// Server refuses a session (payload: [`BindRefusal`](super::BindRefusal)).
    BindRefused,
    /// A call, or one fragment of it.
    Call,
    /// A result, or one fragment of it.
    Result,
    /// Client acknowledges a result explicitly (an idle slot's result, after a short delay).
    Ack,
    /// Server: the call arrived and is still running; keep waiting.
    Working,
    /// Server: the call failed (code in the proc field: [`ErrorCode`](super::ErrorCode); body: an
    /// [`ErrorMessage`](super::ErrorMessage), empty when the server gives no reason).
    Error,
    /// Fragment acknowledgement (cumulative count in `offset`, bitmap of the next 64 in the body).
    FragAck,
    /// Client asks what became of a call whose fragments were all acknowledged.
    Probe,
    /// Server: bind again with this cookie (payload: [`Cookie`](super::Cookie)); it keeps nothing
    /// meanwhile.
    BindRetry,
    /// Server: a frame of this session came from an address its slot has not proven; answer
    /// from there with a [`Kind::PathResponse`] carrying this header's challenge (the call number,
    /// procedure, length and offset fields: [`PathChallenge`](super::PathChallenge)) before
    /// anything more is answered there. Header only, so never larger than the frame it answers.
    PathChallenge,
    /// Client: the challenge of a [`Kind::PathChallenge`], echoed from the address it reached: the
    /// address is proven, and the session's answers go there from now on.
    PathResponse,
    /// A kind this version does not know.
    Unknown(u8),
}

impl Kind {
    /// The kind's byte on the wire (byte 3 of the header).
    pub fn to_u8(self) -> u8 {
        match self {
            Kind::Bind => 1,
            Kind::BindOk => 2,
            Kind::BindRefused => 3,
            Kind::Call => 4,
            Kind::Result => 5,
            Kind::Ack => 6,
            Kind::Working => 7,
            Kind::Error => 8,
            Kind::FragAck => 9,
            Kind::Probe => 10,
            Kind::BindRetry => 11,
            Kind::PathChallenge => 12,
            Kind::PathResponse => 13,
            Kind::Unknown(k) => k,
        }
    }

    /// The kind that byte `k` names; a byte this version does not know is `Unknown(k)`.
    pub fn from_u8(k: u8) -> Kind {
        match k {
            1 => Kind::Bind,
            2 => Kind::BindOk,
            3 => Kind::BindRefused,
            4 => Kind::Call,
            5 => Kind::Result,
            6 => Kind::Ack,
            7 => Kind::Working,
            8 => Kind::Error,
            9 => Kind::FragAck,
            10 => Kind::Probe,
            11 => Kind::BindRetry,
            12 => Kind::PathChallenge,
            13 => Kind::PathResponse,
            k => Kind::Unknown(k),
        }
    }
}

/// The fixed header, as plain fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender's protocol version (byte 2).
    pub version: u8,
    /// What the frame is (byte 3).
    pub kind: Kind,
    /// [`flags`] bits (byte 4).
    pub flags: u8,
    /// The call slot within the session (bytes 6..8); 0 outside calls.
    pub slot: u16,
    /// The session token the server granted (bytes 8..16); 0 before the session exists.
    pub token: u64,
    /// The call's number, advanced by one for each call on its slot (bytes 16..20), so a result
    /// of an earlier call on the slot is told from this one's. On the binding frames: the low 32
    /// bits of the bind's nonce, which the answer echoes.
    pub call_no: u32,
    /// Procedure number on calls; [`ErrorCode`](super::ErrorCode) on errors; unused otherwise.
    pub proc_or_code: u32,
    /// Length of the whole message this frame is part of.
    pub total_len: u32,
    /// Byte offset of this fragment in the message (on `FragAck`: the cumulative fragment count;
    /// on an `UnknownSession` error: the server generation).
    pub offset: u32,
}

/// Where each field lies (byte ranges of the header).
mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = 3;
    pub const FLAGS: usize = 4;
    pub const SLOT: Range<usize> = 6..8;
    pub const TOKEN: Range<usize> = 8..16;
    pub const CALL_NO: Range<usize> = 16..20;
    pub const PROC: Range<usize> = 20..24;
    pub const TOTAL: Range<usize> = 24..28;
    pub const OFFSET: Range<usize> = 28..32;
}

impl Header {
    /// A header with the given kind and every other field zero.
    pub const fn new(kind: Kind) -> Header {
        Header {
            version: PROTOCOL_VERSION,
            kind,
            flags: 0,
            slot: 0,
            token: 0,
            call_no: 0,
            proc_or_code: 0,
            total_len: 0,
            offset: 0,
        }
    }

    /// Splits a frame into its header and body.
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(Header, &[u8]), WireError> {
        let view = HeaderView::new_checked(frame)?;
        Ok((view.to_header(), view.body()))
    }

    /// The header's 32 bytes as four little-endian words, worked out in registers: compared a
    /// word at a time, a header never makes a round trip through a buffer of bytes (a load that
    /// spans several smaller stores waits for them to reach the cache).
    #[inline]
    fn words(&self) -> [u64; 4] {
        let fixed = u64::from(u16::from_le_bytes(MAGIC))
            | u64::from(self.version) << 16
            | u64::from(self.kind.to_u8()) << 24
            | u64::from(self.flags) << 32;
        [
            fixed | u64::from(self.slot) << 48,
            self.token,
            u64::from(self.call_no) | u64::from(self.proc_or_code) << 32,
            u64::from(self.total_len) | u64::from(self.offset) << 32,
        ]
    }

    /// Writes the header's 32 bytes, a word at a time (as [`matches`](Self::matches) reads
    /// them): four stores, where a field at a time took eleven, and a reader of whole words
    /// never waits for several narrower stores to reach the cache.
    #[inline]
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        for (dst, w) in out.chunks_exact_mut(8).zip(self.words()) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
    }

    /// Whether `head` holds exactly this header's 32 bytes (compared a word at a time).
    #[inline]
    pub fn matches(&self, head: &[u8; HEADER_LEN]) -> bool {
        let mut same = true;
        for (w, src) in self.words().iter().zip(head.chunks_exact(8)) {
            same &= u64::from_le_bytes(src.try_into().expect("8 bytes")) == *w;
        }
        same
    }

    /// The header as bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        self.emit(&mut b);
        b
    }

    /// The header of a call sent whole in one frame on a reliable session (the client's way of
    /// sending nearly every call there), which the server recognises byte for byte instead of
    /// decoding it.
    pub const fn whole_call(token: u64, slot: u16, call_no: u32, proc_no: u32, len: u32) -> Header {
        Header {
            version: PROTOCOL_VERSION,
            kind: Kind::Call,
            flags: flags::REQ_ACK,
            slot,
            token,
            call_no,
            proc_or_code: proc_no,
            total_len: len,
            offset: 0,
        }
    }

    /// Reads `head` as [`whole_call`](Self::whole_call)'s header of a `len`-byte body, if it is
    /// one: every field the call's sender fixes is compared (magic, version, kind, flags, the
    /// reserved byte, the length, no offset) in a few word comparisons, and the fields that name
    /// the call are returned for the receiver to check against its own state. `None` for any
    /// other header. No decode: the server's one-frame fast path.
    #[inline]
    pub fn read_whole_call(head: &[u8; HEADER_LEN], len: u32) -> Option<WholeCall> {
        const FIXED: [u8; 6] = [MAGIC[0], MAGIC[1], PROTOCOL_VERSION, 4, flags::REQ_ACK, 0];
        let sized = u64::from(len).to_le_bytes();
        if head[..6] != FIXED || head[field::TOTAL.start..] != sized {
            return None;
        }
        Some(WholeCall {
            slot: u16_at(head, field::SLOT),
            token: u64_at(head, field::TOKEN),
            call_no: u32_at(head, field::CALL_NO),
            proc_no: u32_at(head, field::PROC),
        })
    }

    /// The header of a result sent whole in one frame on a reliable session (the server's
    /// answer to nearly every call there), which the client recognises byte for byte instead of
    /// decoding it.
    pub const fn whole_result(token: u64, slot: u16, call_no: u32, len: u32) -> Header {
        Header {
            version: PROTOCOL_VERSION,
            kind: Kind::Result,
            flags: flags::REQ_ACK,
            slot,
            token,
            call_no,
            proc_or_code: 0,
            total_len: len,
            offset: 0,
        }
    }
}

/// The fields naming a call sent whole, as [`Header::read_whole_call`] found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WholeCall {
    /// The call slot.
    pub slot: u16,
    /// The session token.
    pub token: u64,
    /// The call's number on its slot.
    pub call_no: u32,
    /// The procedure called.
    pub proc_no: u32,
}

/// A frame's header read where it lies: checked once by [`new_checked`](Self::new_checked)
/// (long enough, lowlat's magic), after which no accessor can panic. For code that wants a
/// field or two without decoding the rest (a router reading the slot, a stream watching for a
/// grant); [`Header::parse`] reads through it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderView<'a> {
    head: &'a [u8; HEADER_LEN],
    body: &'a [u8],
}

impl<'a> HeaderView<'a> {
    /// The bytes of the slot field, for code that cannot call a parser (a kernel filter).
    pub const SLOT: core::ops::Range<usize> = field::SLOT;
    /// The bytes of the session token, for code that cannot call a parser (a fault injector
    /// that damages a frame where it still parses).
    pub const TOKEN: core::ops::Range<usize> = field::TOKEN;
    /// Where the kind lies in a frame (byte 3).
    pub const KIND: usize = field::KIND;

    /// The header of `frame`: [`WireError::Truncated`] if it is shorter than a header,
    /// [`WireError::BadMagic`] if it is not lowlat's.
    #[inline]
    pub fn new_checked(frame: &'a [u8]) -> Result<HeaderView<'a>, WireError> {
        let Some((head, body)) = frame.split_first_chunk::<HEADER_LEN>() else {
            return Err(WireError::Truncated { len: frame.len() });
        };
        if head[field::MAGIC] != MAGIC {
            return Err(WireError::BadMagic { found: [head[0], head[1]] });
        }
        Ok(HeaderView { head, body })
    }

    /// The slot of a frame that begins as lowlat's, reading only the magic and the slot (its
    /// first 8 bytes); `None` for anything else. For a router that hands frames to their slot
    /// before anything else is checked: a frame too short for a header still reaches its slot,
    /// whose engine counts it.
    #[inline]
    pub fn slot_of(frame: &[u8]) -> Option<u16> {
        let start = frame.get(..field::SLOT.end)?;
        (start[field::MAGIC] == MAGIC).then(|| u16_at(start, field::SLOT))
    }

    /// The sender's protocol version.
    #[inline]
    pub fn version(&self) -> u8 {
        self.head[field::VERSION]
    }

    /// What the frame is.
    #[inline]
    pub fn kind(&self) -> Kind {
        Kind::from_u8(self.head[field::KIND])
    }

    /// The [`flags`] bits.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.head[field::FLAGS]
    }

    /// The call slot within the session.
    #[inline]
    pub fn slot(&self) -> u16 {
        u16_at(self.head, field::SLOT)
    }

    /// The session token.
    #[inline]
    pub fn token(&self) -> u64 {
        u64_at(self.head, field::TOKEN)
    }

    /// The index of the session the token names among its server's ([`token::session`]).
    #[inline]
    pub fn session(&self) -> u16 {
        token::session(self.token())
    }

    /// The call's number on its slot (on the binding frames: the low bits of the nonce).
    #[inline]
    pub fn call_no(&self) -> u32 {
        u32_at(self.head, field::CALL_NO)
    }

    /// The procedure number on calls, the [`ErrorCode`](super::ErrorCode) on errors.
    #[inline]
    pub fn proc_or_code(&self) -> u32 {
        u32_at(self.head, field::PROC)
    }

    /// Length of the whole message this frame is part of.
    #[inline]
    pub fn total_len(&self) -> u32 {
        u32_at(self.head, field::TOTAL)
    }

    /// Byte offset of this fragment in the message (see [`Header::offset`]).
    #[inline]
    pub fn offset(&self) -> u32 {
        u32_at(self.head, field::OFFSET)
    }

    /// Everything after the header (a tag, a sequence number and the body, as the flags say).
    #[inline]
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// Every field, decoded.
    #[inline]
    pub fn to_header(&self) -> Header {
        Header {
            version: self.version(),
            kind: self.kind(),
            flags: self.flags(),
            slot: self.slot(),
            token: self.token(),
            call_no: self.call_no(),
            proc_or_code: self.proc_or_code(),
            total_len: self.total_len(),
            offset: self.offset(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_calls_are_read_by_their_fixed_fields() {
        assert_eq!(Kind::Call.to_u8(), 4, "read_whole_call's fixed bytes name a call");
        let h = Header::whole_call(0x0102_0304_0506_0708, 9, 77, 5, 1440);
        let head = h.to_bytes();
        let want = WholeCall { slot: 9, token: 0x0102_0304_0506_0708, call_no: 77, proc_no: 5 };
        assert_eq!(Header::read_whole_call(&head, 1440), Some(want));
        assert_eq!(Header::read_whole_call(&head, 1441), None, "another length");
        // Every byte the sender fixes is compared; the naming fields are the reader's to check.
        for at in (0..6).chain(24..32) {
            let mut bad = head;
            bad[at] ^= 0x10;
            assert_eq!(Header::read_whole_call(&bad, 1440), None, "byte {at} altered");
        }
        for at in 6..24 {
            let mut other = head;
            other[at] ^= 0x10;
            assert!(Header::read_whole_call(&other, 1440).is_some_and(|c| c != want), "byte {at}");
        }
    }

    #[test]
    fn header_round_trips_and_has_fixed_layout() {
        let h = Header {
            version: 1,
            kind: Kind::Call,
            flags: flags::REQ_ACK,
            slot: 0x0102,
            token: 0x1122_3344_5566_7788,
            call_no: 9,
            proc_or_code: 4,
            total_len: 1440,
            offset: 0,
        };
        let b = h.to_bytes();
        assert_eq!(&b[0..8], &[b'L', b'l', 1, 4, 1, 0, 0x02, 0x01]);
        assert_eq!(&b[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        let mut frame = b.to_vec();
        frame.extend_from_slice(b"body");
        let (p, body) = Header::parse(&frame).unwrap();
        assert_eq!(p, h);
        assert_eq!(body, b"body");
    }

    #[test]
    fn a_header_matches_its_own_bytes_and_no_others() {
        let h = Header::whole_result(0x1122_3344_5566_7788, 0x0102, 0x0a0b_0c0d, 1440);
        let b = h.to_bytes();
        assert!(h.matches(&b));
        // Every byte counts: a result for another call, session, slot or length, or any other
        // change, is not this header.
        for i in 0..HEADER_LEN {
            let mut other = b;
            other[i] ^= 0x80;
            assert!(!h.matches(&other), "byte {i} changed");
        }
        assert!(!Header::whole_result(0x1122_3344_5566_7788, 0x0102, 0x0a0b_0c0d, 1441).matches(&b));
    }

    #[test]
    fn header_rejects_short_and_foreign_frames() {
        assert_eq!(Header::parse(&[0u8; 31]), Err(WireError::Truncated { len: 31 }));
        let mut b = Header::new(Kind::Ack).to_bytes();
        b[0] = b'X';
        assert_eq!(Header::parse(&b), Err(WireError::BadMagic { found: [b'X', b'l'] }));
        let e = WireError::Truncated { len: 3 }.to_string();
        assert!(e.contains("3 bytes"), "{e}");
    }

    /// Each accessor reads its own bytes of a fixed frame, and the view agrees with `parse`.
    #[test]
    fn a_view_reads_each_field_where_it_lies() {
        #[rustfmt::skip]
        let frame = [
            b'L', b'l', 2, 9, 0x18, 0, 0x02, 0x01, // magic, version, kind, flags, reserved, slot
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // token
            1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, // call no, proc, total, offset
            0xAA, 0xBB, // body
        ];
        let v = HeaderView::new_checked(&frame).unwrap();
        assert_eq!((v.version(), v.kind(), v.flags(), v.slot()), (2, Kind::FragAck, 0x18, 0x0102));
        assert_eq!((v.token(), v.session()), (0x1122_3344_5566_7788, 0x3344));
        assert_eq!((v.call_no(), v.proc_or_code(), v.total_len(), v.offset()), (1, 2, 3, 4));
        assert_eq!(v.body(), &[0xAA, 0xBB]);
        let (h, body) = Header::parse(&frame).unwrap();
        assert_eq!((h, body), (v.to_header(), v.body()));
        let mut again = [0u8; HEADER_LEN];
        h.emit(&mut again);
        assert_eq!(again, frame[..HEADER_LEN]);
        assert_eq!(HeaderView::new_checked(&frame[..31]), Err(WireError::Truncated { len: 31 }));
        let mut foreign = frame;
        foreign[1] = b'L';
        assert_eq!(HeaderView::new_checked(&foreign), Err(WireError::BadMagic { found: [b'L', b'L'] }));
        assert_eq!(frame[HeaderView::SLOT], [0x02, 0x01]);
        assert_eq!(frame[HeaderView::TOKEN], 0x1122_3344_5566_7788u64.to_le_bytes());
    }

    /// A router's peek needs the magic and the slot only.
    #[test]
    fn slot_of_reads_only_magic_and_slot() {
        let mut h = Header::new(Kind::Result);
        h.slot = 0x0201;
        let b = h.to_bytes();
        assert_eq!(HeaderView::slot_of(&b), Some(0x0201));
        assert_eq!(HeaderView::slot_of(&b[..8]), Some(0x0201), "enough to route");
        assert_eq!(HeaderView::slot_of(&b[..7]), None);
        let mut foreign = b;
        foreign[0] = b'X';
        assert_eq!(HeaderView::slot_of(&foreign), None);
    }
}
