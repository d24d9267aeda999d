//! The `Error` frame: why a call failed, as a code in the header's procedure field
//! ([`ErrorCode`]) and, in the body, the server's reason in its own words ([`ErrorMessage`]),
//! bounded so that an error always fits one frame and never needs fragments.

use super::WireError;

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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The codes' values on the wire, fixed: a peer of another version reads the same ones.
    #[test]
    fn error_codes_have_fixed_values() {
        let codes = [
            ErrorCode::UnknownProcedure,
            ErrorCode::GarbageArgs,
            ErrorCode::ServerError,
            ErrorCode::UnknownSession,
            ErrorCode::TooLarge,
            ErrorCode::Busy,
        ];
        for (value, code) in (1..).zip(codes) {
            assert_eq!((code.to_u32(), ErrorCode::from_u32(value)), (value, code));
        }
        assert_eq!(ErrorCode::Unknown(77).to_u32(), 77);
    }
}
