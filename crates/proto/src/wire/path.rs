//! The path challenge: how a server proves a session's new address receives before it answers
//! there (QUIC's address validation, RFC 9000 §8-9). The challenge rides in the header's own
//! fields, so a [`Kind::PathChallenge`] and its [`Kind::PathResponse`] are bare headers, never
//! larger than the frame they answer, and the server keeps nothing while it waits.

use super::{u32_at, Header, Kind};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch goes in the call number, the MAC in the procedure, length and offset fields,
    /// and a response carries back exactly what the challenge sent.
    #[test]
    fn a_challenge_lies_in_the_header_fields() {
        let c = PathChallenge { epoch: 7, mac: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] };
        let h = c.header(Kind::PathChallenge, 0x1122_3344_5566_7788, 3);
        let b = h.to_bytes();
        assert_eq!((b[3], &b[6..8]), (12, &[3, 0][..]));
        assert_eq!(&b[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[16..20], &[7, 0, 0, 0]);
        assert_eq!(&b[20..32], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let (parsed, body) = Header::parse(&b).unwrap();
        assert!(body.is_empty());
        assert_eq!(PathChallenge::read(&parsed), c);
        let response = c.header(Kind::PathResponse, parsed.token, parsed.slot);
        assert_eq!(PathChallenge::read(&response), c);
    }
}
