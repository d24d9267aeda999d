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
    /// A value that had not the size it must have: what hand-written decoders say (generated
    /// ones say precisely which of the other kinds it was).
    #[error("expected {expected}, got {got} bytes")]
    WrongSize {
        /// What the bytes should have been, e.g. `u32`.
        expected: &'static str,
        /// How many bytes there were.
        got: usize,
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
    /// An error inside a value, with the way to it from the value decoded: `result.items[3].name`.
    /// Generated decoders add the path as the error passes up through each argument, field and
    /// element ([`XdrReader::field`](crate::XdrReader::field),
    /// [`XdrReader::element`](crate::XdrReader::element)); of the readers' own errors, only those
    /// of `get_array` carry one (the element's index).
    #[error("{path}: {cause}")]
    At {
        /// Where, from the outermost value in.
        path: FieldPath,
        /// What went wrong there (never itself an `At`).
        cause: Box<DecodeError>,
    },
}

impl DecodeError {
    /// The error of a value of `got` bytes that should have been `expected`: for hand-written
    /// decoders ([`DecodeError::WrongSize`]).
    #[cold]
    pub fn new(expected: &'static str, got: usize) -> DecodeError {
        DecodeError::WrongSize { expected, got }
    }

    /// This error, found inside the field (or argument) `name`. Only ever called once decoding
    /// has failed, so a successful decode never pays for the path.
    #[cold]
    #[inline(never)]
    pub fn in_field(self, name: &'static str) -> DecodeError {
        self.within(Segment::Field(name))
    }

    /// This error, found inside element `index` of an array.
    #[cold]
    #[inline(never)]
    pub fn at_index(self, index: usize) -> DecodeError {
        self.within(Segment::Index(index))
    }

    fn within(self, outer: Segment) -> DecodeError {
        match self {
            DecodeError::At { mut path, cause } => {
                path.inner_first.push(outer);
                DecodeError::At { path, cause }
            }
            cause => DecodeError::At { path: FieldPath { inner_first: vec![outer] }, cause: Box::new(cause) },
        }
    }

    /// What went wrong, without the path.
    pub fn cause(&self) -> &DecodeError {
        match self {
            DecodeError::At { cause, .. } => cause,
            e => e,
        }
    }

    /// Where it went wrong, when a generated decoder said.
    pub fn path(&self) -> Option<&FieldPath> {
        match self {
            DecodeError::At { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// A struct field, a union arm's field or a procedure's argument (`result` for its result).
    Field(&'static str),
    /// An element of an array.
    Index(usize),
}

/// The way from a decoded value to the item inside it that failed, written `result.items[3].name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    /// Built as the error passes outwards, so the innermost step comes first.
    inner_first: Vec<Segment>,
}

/// Steps shown at either end of a path longer than twice this (a hostile linked list nests a
/// thousand levels); the middle is counted, not shown.
const SHOWN_AT_EACH_END: usize = 8;

impl FieldPath {
    /// The steps, from the outermost value in.
    pub fn segments(&self) -> impl Iterator<Item = Segment> + '_ {
        self.inner_first.iter().rev().copied()
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.inner_first.len();
        for (i, s) in self.segments().enumerate() {
            if n > 2 * SHOWN_AT_EACH_END && i >= SHOWN_AT_EACH_END && i < n - SHOWN_AT_EACH_END {
                if i == SHOWN_AT_EACH_END {
                    write!(f, "[...{} more...]", n - 2 * SHOWN_AT_EACH_END)?;
                }
                continue;
            }
            match s {
                Segment::Field(name) if i == 0 => f.write_str(name)?,
                Segment::Field(name) => write!(f, ".{name}")?,
                Segment::Index(k) => write!(f, "[{k}]")?,
            }
        }
        Ok(())
    }
}

/// Either half, for callers (such as `lowlat::Client::call`) that take one error type for both
/// and say themselves which half failed ("encoding the arguments", "decoding the result").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Encoding failed.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Decoding failed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}
