//! The session token's layout: the server's generation, the session's index in its table and
//! random bits, in one `u64` that every frame of the session carries (header bytes 8..16).
//!
//! ```text
//!  63          48 47          32 31                          0
//!  +-------------+--------------+----------------------------+
//!  | generation  | session index|  random (server's secret)  |
//!  +-------------+--------------+----------------------------+
//! ```
//!
//! The index finds a session without hashing (Firefly §4.2.5); the random bits make a token
//! unguessable; the generation tells a restarted server from an expired session. Kept apart so
//! that the server, which makes tokens, and a transport, which sorts connections by session,
//! read the same bits.

/// The token of session `session` of a server of `generation`, with `random` bits.
#[inline]
pub const fn new(generation: u16, session: u16, random: u32) -> u64 {
    (generation as u64) << 48 | (session as u64) << 32 | random as u64
}

/// The index of the session a token names in its server's table.
#[inline]
pub const fn session(token: u64) -> u16 {
    (token >> 32) as u16
}

/// The generation of the server that made the token.
#[inline]
pub const fn generation(token: u64) -> u16 {
    (token >> 48) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_keeps_its_parts_apart() {
        let t = new(0xBEEF, 0x0102, 0xA1B2_C3D4);
        assert_eq!(t, 0xBEEF_0102_A1B2_C3D4);
        assert_eq!((generation(t), session(t)), (0xBEEF, 0x0102));
        assert_eq!(t.to_le_bytes(), [0xD4, 0xC3, 0xB2, 0xA1, 0x02, 0x01, 0xEF, 0xBE]);
    }
}
