//! What went wrong while encoding or decoding, and where.

/// A value could not be encoded: it breaks a limit declared in the interface definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A variable-length opaque or string is longer than its declared maximum.
    #[error("{what} got {got} bytes")]
    TooLong {
        /// The declaration, e.g. `Packet.data: opaque<16>`.
        what: &'static str,
        /// The declared maximum.
        max: u32,
        /// The length offered.
        got: usize,
    },
    /// A variable-length array has more elements than its declared maximum.
    #[error("{what} got {got} elements")]
    TooManyElements {
        /// The declaration, e.g. `Tree.kids: node<32>`.
        what: &'static str,
        /// The declared maximum.
        max: u32,
        /// The number of elements offered.
        got: usize,
    },
    /// A union's default arm was given a discriminant that an explicit case owns, so the bytes
    /// would decode as that case instead.
    #[error("union {type_name}: discriminant {value} belongs to an explicit case, not the default arm")]
    DefaultArmTakesExplicitCase {
        /// The union's name in the interface definition.
        type_name: &'static str,
        /// The discriminant offered.
        value: i64,
    },
    /// A union arm that several cases share was given a discriminant that is not one of them,
    /// so the bytes would decode as another arm.
    #[error("union {type_name}: discriminant {value} is not a case of arm '{arm}'")]
    NotACaseOfArm {
        /// The union's name in the interface definition.
        type_name: &'static str,
        /// The arm's name in the interface definition.
        arm: &'static str,
        /// The discriminant offered.
        value: i64,
    },
}

/// Bytes could not be decoded. Every variant says what was expected and at which byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the value did.
    #[error("truncated: needed {needed} bytes at offset {offset}, have {have}")]
    Truncated {
        /// Bytes the next item needs.
        needed: usize,
        /// Where the item starts.
        offset: usize,
        /// Bytes left from there.
        have: usize,
    },
    /// A variable-length opaque or string is longer than its declared maximum.
    #[error("{what} got {got} bytes (at offset {offset})")]
    TooLong {
        /// The declaration, e.g. `Packet.data: opaque<16>`.
        what: &'static str,
        /// The declared maximum.
        max: u32,
        /// The length found on the wire.
        got: u32,
        /// Where the length field starts.
        offset: usize,
    },
    /// A variable-length array has more elements than its declared maximum.
    #[error("{what} got {got} elements (at offset {offset})")]
    TooManyElements {
        /// The declaration.
        what: &'static str,
        /// The declared maximum.
        max: u32,
        /// The count found on the wire.
        got: u32,
        /// Where the count field starts.
        offset: usize,
    },
    /// A boolean (or an optional-data flag) is neither 0 nor 1.
    #[error("bool at offset {offset} is {value}, not 0 or 1")]
    BadBool {
        /// The value found.
        value: u32,
        /// Where it starts.
        offset: usize,
    },
    /// An enumeration value names no member.
    #[error("enum {type_name}: no member has value {value} (at offset {offset})")]
    BadEnum {
        /// The enumeration's name in the interface definition.
        type_name: &'static str,
        /// The value found.
        value: i32,
        /// Where it starts.
        offset: usize,
    },
    /// A union discriminant selects no arm and the union has no default arm.
    #[error("union {type_name}: no arm for discriminant {value} (at offset {offset})")]
    BadDiscriminant {
        /// The union's name in the interface definition.
        type_name: &'static str,
        /// The discriminant found.
        value: i64,
        /// Where it starts.
        offset: usize,
    },
    /// A string is not valid UTF-8.
    #[error("{what}: not valid UTF-8 (string at offset {offset})")]
    InvalidUtf8 {
        /// The declaration.
        what: &'static str,
        /// Where the string's bytes start.
        offset: usize,
    },
    /// The value ended before the input did.
    #[error("{count} bytes left over after the value ended at offset {offset}")]
    TrailingBytes {
        /// Bytes left over.
        count: usize,
        /// Where the value ended.
        offset: usize,
    },
    /// Optional data nested deeper than the reader allows (a hostile linked list would otherwise
    /// exhaust the stack).
    #[error("optional data nested deeper than {max_depth} levels (at offset {offset})")]
    TooDeep {
        /// The reader's limit.
        max_depth: u32,
        /// Where the next level starts.
        offset: usize,
    },
}

/// Either half, for callers (such as `lowlat::Client::call`) that take one error type for both.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Encoding failed.
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
    /// Decoding failed.
    #[error("decode: {0}")]
    Decode(#[from] DecodeError),
}
