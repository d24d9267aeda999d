//! The server's answers to a bind that it does not merely bounce with a cookie: the grant of
//! a session (body of `BindOk`, [`BindGrant`]) and the reason for a refusal (body of
//! `BindRefused`, [`BindRefusal`]). A refusal code this version does not know decodes to
//! [`Refusal::Unknown`], so a newer server's reason is reported, not fatal.

use super::{u16_at, u32_at, ByteOrder, WireError, BIND_SEALED};

/// Where each field lies (byte ranges of each payload).
mod field {
    /// [`BindGrant`](super::BindGrant).
    pub mod grant {
        use core::ops::Range;
        pub const SLOTS: Range<usize> = 0..2;
        pub const WINDOW: Range<usize> = 2..4;
        pub const BYTE_ORDER: usize = 4;
        pub const FLAGS: usize = 5;
        pub const GENERATION: Range<usize> = 6..8;
        pub const MAX_MESSAGE: Range<usize> = 8..12;
        pub const MAX_FRAME: Range<usize> = 12..16;
    }
    /// [`BindRefusal`](super::BindRefusal): a code and two arguments.
    pub mod refusal {
        use core::ops::Range;
        pub const CODE: Range<usize> = 0..4;
        pub const FIRST: Range<usize> = 4..8;
        pub const SECOND: Range<usize> = 8..12;
    }
}
use field::{grant, refusal};

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
        b[grant::SLOTS].copy_from_slice(&self.slots.to_le_bytes());
        b[grant::WINDOW].copy_from_slice(&self.window.to_le_bytes());
        b[grant::BYTE_ORDER] = super::bind::order_to_u8(self.byte_order);
        b[grant::FLAGS] = if self.sealed { BIND_SEALED } else { 0 };
        b[grant::GENERATION].copy_from_slice(&self.generation.to_le_bytes());
        b[grant::MAX_MESSAGE].copy_from_slice(&self.max_message.to_le_bytes());
        b[grant::MAX_FRAME].copy_from_slice(&self.max_frame.to_le_bytes());
        b
    }

    /// Reads a grant from the start of `b`; shorter than [`LEN`](Self::LEN) is
    /// [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<BindGrant, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "bind grant", len: b.len(), need: Self::LEN });
        }
        Ok(BindGrant {
            slots: u16_at(b, grant::SLOTS),
            window: u16_at(b, grant::WINDOW),
            byte_order: super::bind::order_from_u8(b[grant::BYTE_ORDER]),
            sealed: b[grant::FLAGS] & BIND_SEALED != 0,
            generation: u16_at(b, grant::GENERATION),
            max_message: u32_at(b, grant::MAX_MESSAGE),
            max_frame: u32_at(b, grant::MAX_FRAME),
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
        out[refusal::CODE].copy_from_slice(&u32::to_le_bytes(code));
        out[refusal::FIRST].copy_from_slice(&a.to_le_bytes());
        out[refusal::SECOND].copy_from_slice(&b.to_le_bytes());
        out
    }

    /// Reads a refusal from the start of `b`; an unknown code is [`Refusal::Unknown`], shorter
    /// than [`LEN`](Self::LEN) is [`WireError::ShortPayload`].
    pub fn parse(b: &[u8]) -> Result<BindRefusal, WireError> {
        if b.len() < Self::LEN {
            return Err(WireError::ShortPayload { what: "bind refusal", len: b.len(), need: Self::LEN });
        }
        let (code, x, y) = (u32_at(b, refusal::CODE), u32_at(b, refusal::FIRST), u32_at(b, refusal::SECOND));
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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_and_refusals_round_trip() {
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
    }

    /// The grant's and a refusal's bytes, fixed.
    #[test]
    fn grants_and_refusals_have_fixed_layouts() {
        #[rustfmt::skip]
        let bytes = [
            8, 0, 16, 0, 1, BIND_SEALED, 0xEF, 0xBE, // slots, window, order (big), sealed, generation
            99, 0, 0, 0, 0xE8, 0x03, 0, 0, // max message, max frame
        ];
        let g = BindGrant {
            slots: 8,
            window: 16,
            byte_order: ByteOrder::Big,
            max_message: 99,
            max_frame: 1000,
            generation: 0xBEEF,
            sealed: true,
        };
        assert_eq!(g.emit(), bytes);
        assert_eq!(BindGrant::parse(&bytes), Ok(g));
        assert!(matches!(BindGrant::parse(&bytes[..15]), Err(WireError::ShortPayload { what: "bind grant", .. })));
        let r = BindRefusal(Refusal::VersionMismatch { low: 1, high: 0x0302 });
        assert_eq!(r.emit(), [2, 0, 0, 0, 1, 0, 0, 0, 2, 3, 0, 0]);
        assert_eq!(
            BindRefusal::parse(&[4, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0]).unwrap().0,
            Refusal::ProtocolMismatch { low: 1, high: 255 }
        );
        assert!(matches!(BindRefusal::parse(&[2; 11]), Err(WireError::ShortPayload { what: "bind refusal", .. })));
    }
}
