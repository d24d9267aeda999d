//! lowlat's wire format: one fixed 32-byte header before every message body, and the small
//! fixed payloads of the binding handshake and fragment acknowledgements.
//!
//! On a session authenticated with a pre-shared key every frame carries a 16-byte tag right
//! after the header (flag [`flags::TAGGED`]): a MAC of the header and the body under the
//! session's key for that direction (`crate::auth`). The header's lengths count the message,
//! never the tag.
//!
//! The header is little-endian on the wire (the byte order of every machine lowlat runs on today,
//! so neither side converts it). Message bodies travel in the server's byte order, announced at
//! bind time; only a client of the other order converts (Thekkath & Levy §3.1).
//!
//! Every parser here checks lengths once and then cannot panic; unknown kinds and codes decode to
//! an `Unknown` variant instead of failing, so a newer peer's frame is reported, not fatal.
//!
//! ```text
//!  0      2    3    4     5    6      8              16        20          24          28        32
//!  +------+----+----+-----+----+------+--------------+---------+-----------+-----------+---------+
//!  |"Ll"  |ver |kind|flags|rsvd| slot | session token| call no | proc/code | total len | offset  |
//!  +------+----+----+-----+----+------+--------------+---------+-----------+-----------+---------+
//!  [ tag (16 bytes), when flags has TAGGED ] [ sequence number (8), when flags has SEALED ] [ body ]
//! ```
//!
//! On a sealed session (`crate::seal`) the tag is an AEAD's and the body is ciphertext.
//!
//! Binding (protocol version 2): the client sends `Bind` ([`BindRequest`]). Where the server must
//! first see that the client receives at its address (datagram transports), or needs a nonce of
//! its own (a pre-shared key), it answers `BindRetry` with a [`Cookie`] and keeps nothing; the
//! client sends the bind again with the cookie after the request ([`BIND_COOKIE`]) and, holding
//! a key ([`BIND_KEYED`]), a proof of it after the cookie. Only then does the server make a
//! session and answer `BindOk` (tagged, on a keyed session) or `BindRefused`. A `BindRetry` is
//! never larger than the bind it answers.

/// Size of the fixed header that precedes every body.
pub const HEADER_LEN: usize = 32;
/// First two bytes of every lowlat frame.
pub const MAGIC: [u8; 2] = *b"Ll";
/// The protocol version this engine speaks (2: the cookie round and keyed sessions; a version 1
/// client is refused with [`Refusal::ProtocolMismatch`], which it understands).
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
    /// Client asks for a session (payload: [`BindRequest`]).
    Bind,
    /// Server grants a session (payload: [`BindGrant`]; token in the header).
    BindOk,
    /// Server refuses a session (payload: [`BindRefusal`]).
    BindRefused,
    /// A call, or one fragment of it.
    Call,
    /// A result, or one fragment of it.
    Result,
    /// Client acknowledges a result explicitly (an idle slot's result, after a short delay).
    Ack,
    /// Server: the call arrived and is still running; keep waiting.
    Working,
    /// Server: the call failed (code in the proc field: [`ErrorCode`]; body: an
    /// [`ErrorMessage`], empty when the server gives no reason).
    Error,
    /// Fragment acknowledgement (cumulative count in `offset`, bitmap of the next 64 in the body).
    FragAck,
    /// Client asks what became of a call whose fragments were all acknowledged.
    Probe,
    /// Server: bind again with this cookie (payload: [`Cookie`]); it keeps nothing meanwhile.
    BindRetry,
    /// Server: a frame of this session came from an address its slot has not proven; answer
    /// from there with a [`Kind::PathResponse`] carrying this header's challenge (the call number,
    /// procedure, length and offset fields: [`PathChallenge`]) before anything more is answered
    /// there. Header only, so never larger than the frame it answers.
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

/// Why a call failed on the server (carried in the proc field of an `Error` frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The program has no procedure with this number.
    UnknownProcedure,
    /// The procedure could not decode its arguments.
    GarbageArgs,
    /// The procedure failed.
    ServerError,
    /// The session token is not (or no longer) known to the server; the frame's offset field
    /// carries the server's generation, so a restarted server can be told from an expired session.
    UnknownSession,
    /// The message is larger than the session's maximum.
    TooLarge,
    /// The server shed the call under overload without running it.
    Busy,
    /// A code this version does not know.
    Unknown(u32),
}

impl ErrorCode {
    /// The code's value on the wire (the header's proc field, bytes 20..24).
    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::UnknownProcedure => 1,
            ErrorCode::GarbageArgs => 2,
            ErrorCode::ServerError => 3,
            ErrorCode::UnknownSession => 4,
            ErrorCode::TooLarge => 5,
            ErrorCode::Busy => 6,
            ErrorCode::Unknown(c) => c,
        }
    }

    /// The code that `c` names; a value this version does not know is `Unknown(c)`.
    pub fn from_u32(c: u32) -> ErrorCode {
        match c {
            1 => ErrorCode::UnknownProcedure,
            2 => ErrorCode::GarbageArgs,
            3 => ErrorCode::ServerError,
            4 => ErrorCode::UnknownSession,
            5 => ErrorCode::TooLarge,
            6 => ErrorCode::Busy,
            c => ErrorCode::Unknown(c),
        }
    }
}

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
    /// Procedure number on calls; [`ErrorCode`] on errors; unused otherwise.
    pub proc_or_code: u32,
    /// Length of the whole message this frame is part of.
    pub total_len: u32,
    /// Byte offset of this fragment in the message (on `FragAck`: the cumulative fragment count;
    /// on an `UnknownSession` error: the server generation).
    pub offset: u32,
}

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

fn u16_at(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[r]);
    u16::from_le_bytes(a)
}
fn u32_at(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_le_bytes(a)
}
fn u64_at(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
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
    pub fn parse(frame: &[u8]) -> Result<(Header, &[u8]), WireError> {
        if frame.len() < HEADER_LEN {
            return Err(WireError::Truncated { len: frame.len() });
        }
        if frame[field::MAGIC] != MAGIC {
            return Err(WireError::BadMagic { found: [frame[0], frame[1]] });
        }
        let h = Header {
            version: frame[field::VERSION],
            kind: Kind::from_u8(frame[field::KIND]),
            flags: frame[field::FLAGS],
            slot: u16_at(frame, field::SLOT),
            token: u64_at(frame, field::TOKEN),
            call_no: u32_at(frame, field::CALL_NO),
            proc_or_code: u32_at(frame, field::PROC),
            total_len: u32_at(frame, field::TOTAL),
            offset: u32_at(frame, field::OFFSET),
        };
        Ok((h, &frame[HEADER_LEN..]))
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

    /// Writes the header's 32 bytes.
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        out[field::MAGIC].copy_from_slice(&MAGIC);
        out[field::VERSION] = self.version;
        out[field::KIND] = self.kind.to_u8();
        out[field::FLAGS] = self.flags;
        out[5] = 0;
        out[field::SLOT].copy_from_slice(&self.slot.to_le_bytes());
        out[field::TOKEN].copy_from_slice(&self.token.to_le_bytes());
        out[field::CALL_NO].copy_from_slice(&self.call_no.to_le_bytes());
        out[field::PROC].copy_from_slice(&self.proc_or_code.to_le_bytes());
        out[field::TOTAL].copy_from_slice(&self.total_len.to_le_bytes());
        out[field::OFFSET].copy_from_slice(&self.offset.to_le_bytes());
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

/// The challenge of a [`Kind::PathChallenge`], echoed by its [`Kind::PathResponse`]: a coarse
/// time (the server's key epoch, in the call number's field) and a MAC of the address it was
/// sent to, the session and the epoch under the server's secret (in the procedure, length and
/// offset fields), so that both frames are a bare header and the server keeps nothing while it
/// waits for the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathChallenge {
    /// The server's key epoch when it made the challenge (good in that epoch and the next).
    pub epoch: u32,
    /// The MAC (bytes 20..32 of the header).
    pub mac: [u8; PathChallenge::MAC_LEN],
}

impl PathChallenge {
    /// Bytes of the MAC: 96 bits, so an address that does not receive the challenge cannot
    /// guess it.
    pub const MAC_LEN: usize = 12;

    /// The header of a frame of `kind` (a challenge or its response) for `slot` of the session
    /// `token` that carries this challenge.
    pub fn header(&self, kind: Kind, token: u64, slot: u16) -> Header {
        let word = |i: usize| u32_at(&self.mac, i..i + 4);
        let mut h = Header::new(kind);
        h.token = token;
        h.slot = slot;
        h.call_no = self.epoch;
        h.proc_or_code = word(0);
        h.total_len = word(4);
        h.offset = word(8);
        h
    }

    /// The challenge `h` carries (any header: the receiver checks the MAC).
    pub fn read(h: &Header) -> PathChallenge {
        let mut mac = [0u8; Self::MAC_LEN];
        mac[0..4].copy_from_slice(&h.proc_or_code.to_le_bytes());
        mac[4..8].copy_from_slice(&h.total_len.to_le_bytes());
        mac[8..12].copy_from_slice(&h.offset.to_le_bytes());
        PathChallenge { epoch: h.call_no, mac }
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

/// Longest [`ErrorMessage`] an `Error` frame carries, in bytes: a reason fits one frame of any
/// transport (a UDP datagram holds 1440 bytes of body), so an error never needs fragments.
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// The body of an `Error` frame: why the call failed, in the server's words (what the procedure
/// said, or which argument could not be decoded and where). UTF-8, at most
/// [`MAX_ERROR_MESSAGE`] bytes; empty when the server says nothing more than the code (and from
/// servers older than the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorMessage<'a>(pub &'a str);

impl<'a> ErrorMessage<'a> {
    /// The message of an `Error` frame's body, checked: not longer than the limit, and UTF-8.
    pub fn parse(body: &'a [u8]) -> Result<ErrorMessage<'a>, WireError> {
        if body.len() > MAX_ERROR_MESSAGE {
            return Err(WireError::MessageTooLong { len: body.len() });
        }
        match core::str::from_utf8(body) {
            Ok(s) => Ok(ErrorMessage(s)),
            Err(e) => Err(WireError::MessageNotUtf8 { valid_up_to: e.valid_up_to() }),
        }
    }

    /// The message to send for `text`: its longest UTF-8 prefix of at most `max` bytes (and
    /// never more than [`MAX_ERROR_MESSAGE`]), cut between characters.
    pub fn fit(text: &'a [u8], max: usize) -> ErrorMessage<'a> {
        let cut = &text[..text.len().min(max).min(MAX_ERROR_MESSAGE)];
        match core::str::from_utf8(cut) {
            Ok(s) => ErrorMessage(s),
            Err(e) => ErrorMessage(core::str::from_utf8(&cut[..e.valid_up_to()]).unwrap_or_default()),
        }
    }

    /// The bytes of the frame's body.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0.as_bytes()
    }
}

/// Byte order of a peer's message bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Least significant byte first (0 in a bind's byte-order byte).
    Little,
    /// Most significant byte first (1 there; any other value reads as little-endian).
    Big,
}

impl ByteOrder {
    /// The order of the machine this code runs on.
    pub const fn native() -> ByteOrder {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
    fn to_u8(self) -> u8 {
        match self {
            ByteOrder::Little => 0,
            ByteOrder::Big => 1,
        }
    }
    fn from_u8(b: u8) -> ByteOrder {
        if b == 1 {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
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

    /// The request's 32 bytes, little-endian: the fields in declaration order.
    pub fn emit(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&self.program.to_le_bytes());
        b[4..8].copy_from_slice(&self.version.to_le_bytes());
        b[8] = self.proto_min;
        b[9] = self.proto_max;
        b[10] = self.byte_order.to_u8();
        b[11] = self.flags;
        b[12..16].copy_from_slice(&self.max_message.to_le_bytes());
        b[16..20].copy_from_slice(&self.max_frame.to_le_bytes());
        b[20..22].copy_from_slice(&self.slots.to_le_bytes());
        b[22..24].copy_from_slice(&self.window.to_le_bytes());
        b[24..32].copy_from_slice(&self.nonce.to_le_bytes());
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
            program: u32_at(b, 0..4),
            version: u32_at(b, 4..8),
            proto_min: b[8],
            proto_max: b[9],
            byte_order: ByteOrder::from_u8(b[10]),
            flags: b[11],
            max_message: u32_at(b, 12..16),
            max_frame: u32_at(b, 16..20),
            slots: u16_at(b, 20..22),
            window: u16_at(b, 22..24),
            nonce: u64_at(b, 24..32),
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
        b[0..4].copy_from_slice(&self.epoch.to_le_bytes());
        b[4..].copy_from_slice(&self.mac);
        b
    }

    /// Reads a cookie from the start of `b`; shorter than [`LEN`](Self::LEN) is
    /// [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<Cookie, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "cookie", len: b.len(), need: Self::LEN });
        }
        let mut mac = [0u8; TAG_LEN];
        mac.copy_from_slice(&b[4..Self::LEN]);
        Ok(Cookie { epoch: u32_at(b, 0..4), mac })
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

/// The body of a `BindOk` frame (the session token is in the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindGrant {
    /// Call slots granted (bytes 0..2): at most the slots asked for.
    pub slots: u16,
    /// Fragments in flight granted per message (bytes 2..4).
    pub window: u16,
    /// The order of the server's bodies (byte 4); a client of the other order converts.
    pub byte_order: ByteOrder,
    /// Largest message either side may send in this session, in bytes (bytes 8..12).
    pub max_message: u32,
    /// Largest frame, header included, in bytes (bytes 12..16).
    pub max_frame: u32,
    /// The server's generation (also the top 16 bits of the token).
    pub generation: u16,
    /// The session's frames are encrypted (byte 5: [`BIND_SEALED`], as the client asked).
    pub sealed: bool,
}

impl BindGrant {
    /// Bytes of the grant.
    pub const LEN: usize = 16;

    /// The grant's 16 bytes, little-endian (byte 5: [`BIND_SEALED`] or zero).
    pub fn emit(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..2].copy_from_slice(&self.slots.to_le_bytes());
        b[2..4].copy_from_slice(&self.window.to_le_bytes());
        b[4] = self.byte_order.to_u8();
        b[5] = if self.sealed { BIND_SEALED } else { 0 };
        b[6..8].copy_from_slice(&self.generation.to_le_bytes());
        b[8..12].copy_from_slice(&self.max_message.to_le_bytes());
        b[12..16].copy_from_slice(&self.max_frame.to_le_bytes());
        b
    }

    /// Reads a grant from the start of `b`; shorter than [`LEN`](Self::LEN) is
    /// [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<BindGrant, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "bind grant", len: b.len(), need: Self::LEN });
        }
        Ok(BindGrant {
            slots: u16_at(b, 0..2),
            window: u16_at(b, 2..4),
            byte_order: ByteOrder::from_u8(b[4]),
            sealed: b[5] & BIND_SEALED != 0,
            generation: u16_at(b, 6..8),
            max_message: u32_at(b, 8..12),
            max_frame: u32_at(b, 12..16),
        })
    }
}

/// Why the server refused a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The server does not serve this program.
    UnknownProgram {
        /// The program asked for.
        program: u32,
    },
    /// The server serves the program, but only versions `low..=high`.
    VersionMismatch {
        /// Lowest version served.
        low: u32,
        /// Highest version served.
        high: u32,
    },
    /// The server's session table is full.
    TooManySessions,
    /// The server speaks protocol versions `low..=high` only.
    ProtocolMismatch {
        /// Lowest protocol version the server speaks.
        low: u8,
        /// Highest protocol version the server speaks.
        high: u8,
    },
    /// The bind request was malformed.
    Malformed,
    /// The server requires a pre-shared key; the client has none.
    KeyRequired,
    /// The client has a pre-shared key; the server has none.
    KeyNotExpected,
    /// The client's proof of the pre-shared key is wrong: the two keys differ.
    BadKey,
    /// The client's source address holds as many sessions as the server allows one source.
    SourceLimit,
    /// The server encrypts every session; the client did not ask to.
    EncryptionRequired,
    /// The client asked for encryption without a pre-shared key (the keys come from it), or
    /// over a transport whose peer shares the memory the frames lie in.
    EncryptionUnavailable,
    /// A reason this version does not know.
    Unknown(u32),
}

/// The body of a `BindRefused` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindRefusal(pub Refusal);

impl BindRefusal {
    /// Bytes of the refusal: a code and two arguments, u32 little-endian each.
    pub const LEN: usize = 12;

    /// The refusal's 12 bytes: code, then the two arguments (zero where the reason has none).
    pub fn emit(&self) -> [u8; Self::LEN] {
        let (code, a, b) = match self.0 {
            Refusal::UnknownProgram { program } => (1, program, 0),
            Refusal::VersionMismatch { low, high } => (2, low, high),
            Refusal::TooManySessions => (3, 0, 0),
            Refusal::ProtocolMismatch { low, high } => (4, low as u32, high as u32),
            Refusal::Malformed => (5, 0, 0),
            Refusal::KeyRequired => (6, 0, 0),
            Refusal::KeyNotExpected => (7, 0, 0),
            Refusal::BadKey => (8, 0, 0),
            Refusal::SourceLimit => (9, 0, 0),
            Refusal::EncryptionRequired => (10, 0, 0),
            Refusal::EncryptionUnavailable => (11, 0, 0),
            Refusal::Unknown(c) => (c, 0, 0),
        };
        let mut out = [0u8; Self::LEN];
        out[0..4].copy_from_slice(&u32::to_le_bytes(code));
        out[4..8].copy_from_slice(&a.to_le_bytes());
        out[8..12].copy_from_slice(&b.to_le_bytes());
        out
    }

    /// Reads a refusal from the start of `b`; an unknown code is [`Refusal::Unknown`], shorter
    /// than [`LEN`](Self::LEN) is [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<BindRefusal, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "bind refusal", len: b.len(), need: Self::LEN });
        }
        let (code, x, y) = (u32_at(b, 0..4), u32_at(b, 4..8), u32_at(b, 8..12));
        Ok(BindRefusal(match code {
            1 => Refusal::UnknownProgram { program: x },
            2 => Refusal::VersionMismatch { low: x, high: y },
            3 => Refusal::TooManySessions,
            4 => Refusal::ProtocolMismatch { low: x.min(255) as u8, high: y.min(255) as u8 },
            5 => Refusal::Malformed,
            6 => Refusal::KeyRequired,
            7 => Refusal::KeyNotExpected,
            8 => Refusal::BadKey,
            9 => Refusal::SourceLimit,
            10 => Refusal::EncryptionRequired,
            11 => Refusal::EncryptionUnavailable,
            c => Refusal::Unknown(c),
        }))
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

    #[test]
    fn unknown_codes_decode_instead_of_failing() {
        let mut b = Header::new(Kind::Ack).to_bytes();
        b[3] = 200;
        assert_eq!(Header::parse(&b).unwrap().0.kind, Kind::Unknown(200));
        assert_eq!(ErrorCode::from_u32(77), ErrorCode::Unknown(77));
        assert_eq!(BindRefusal::parse(&[99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap().0, Refusal::Unknown(99));
    }

    #[test]
    fn error_messages_are_bounded_utf8() {
        assert_eq!(ErrorMessage::parse(b""), Ok(ErrorMessage("")));
        let text = "insufficient funds: 3 < 5";
        assert_eq!(ErrorMessage::parse(text.as_bytes()), Ok(ErrorMessage(text)));
        assert_eq!(ErrorMessage::parse(&[b'a', 0xc3, 0x28]), Err(WireError::MessageNotUtf8 { valid_up_to: 1 }));
        let long = vec![b'x'; MAX_ERROR_MESSAGE + 1];
        assert_eq!(ErrorMessage::parse(&long), Err(WireError::MessageTooLong { len: MAX_ERROR_MESSAGE + 1 }));
        assert!(ErrorMessage::parse(&long[1..]).is_ok(), "exactly the limit");
        // Cut to fit, between characters: "é" is two bytes.
        assert_eq!(ErrorMessage::fit("café au lait".as_bytes(), 4), ErrorMessage("caf"));
        assert_eq!(ErrorMessage::fit("café".as_bytes(), 5), ErrorMessage("café"));
        assert_eq!(ErrorMessage::fit(&long, usize::MAX).0.len(), MAX_ERROR_MESSAGE);
        assert_eq!(ErrorMessage::fit(&[0xff, b'a'], 10), ErrorMessage(""), "never sends what is not UTF-8");
        let e = WireError::MessageTooLong { len: 2000 }.to_string();
        assert!(e.contains("2000 bytes") && e.contains("1024"), "{e}");
    }

    #[test]
    fn payloads_round_trip() {
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
        let g = BindGrant {
            slots: 8,
            window: 16,
            byte_order: ByteOrder::Little,
            max_message: 99,
            max_frame: 1000,
            generation: 0xBEEF,
            sealed: false,
        };
        assert_eq!(BindGrant::parse(&g.emit()).unwrap(), g);
        let sealed = BindGrant { sealed: true, ..g };
        assert_eq!(BindGrant::parse(&sealed.emit()).unwrap(), sealed);
        for refusal in [
            Refusal::EncryptionRequired,
            Refusal::EncryptionUnavailable,
            Refusal::UnknownProgram { program: 5 },
            Refusal::VersionMismatch { low: 1, high: 3 },
            Refusal::TooManySessions,
            Refusal::ProtocolMismatch { low: 1, high: 1 },
            Refusal::Malformed,
            Refusal::KeyRequired,
            Refusal::KeyNotExpected,
            Refusal::BadKey,
            Refusal::SourceLimit,
        ] {
            assert_eq!(BindRefusal::parse(&BindRefusal(refusal).emit()).unwrap().0, refusal);
        }
        assert!(matches!(BindRequest::parse(&[0; 10]), Err(WireError::ShortPayload { need: 32, .. })));
        let cookie = Cookie { epoch: 7, mac: [0xC0; TAG_LEN] };
        assert_eq!(Cookie::parse(&cookie.emit()), Ok(cookie));
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
