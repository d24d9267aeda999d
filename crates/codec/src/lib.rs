//! The encoding primitives that lowlat's generated stubs call, and nothing else: no I/O, no
//! protocol, no allocation beyond what a decoded value owns. Depends on nothing but `thiserror`
//! and must never depend on the runtime or the generator.
//!
//! Two encodings share one shape ([`Xdr`] / [`Native`]: a writer appending to a caller-owned
//! [`Sink`] (a `Vec<u8>`, or the [`OutBuf`] a procedure's result goes into, which over shared
//! memory lies in the result ring), a reader over a borrowed slice). Readers never panic: every read is bounds-checked,
//! every declared maximum is enforced, counts are checked against the bytes left before anything
//! is allocated, and nesting of optional data is limited ([`DEFAULT_MAX_DEPTH`]).
//!
//! # XDR ([`XdrWriter`], [`XdrReader`])
//! Exactly RFC 4506: big-endian, every item a multiple of four bytes, zero padding on write
//! (padding is skipped unchecked on read, as libtirpc does), `bool` and optional-data flags as
//! four-byte 0/1, counts and lengths as `unsigned int`.
//!
//! # lowlat's native encoding ([`NativeWriter`], [`NativeReader`])
//! Used by lowlat's own protocol, where the client learns the server's byte order at bind time.
//! * Integers, floats and enumerations: their natural width, in the **server's** byte order. The
//!   server therefore never converts; a client on a machine of the other order does.
//! * `bool` and the presence flag of optional data: one byte, 0 or 1.
//! * Variable-length opaque data, strings and arrays: a `u32` length (bytes, or elements), then
//!   the contents. Strings carry no terminator and must be UTF-8.
//! * Fixed-length opaque data and fixed arrays: just the contents.
//! * Unions: the discriminant in its own encoding (four bytes, or one for `bool`), then the arm.
//! * No padding and no alignment: every value is read with an unaligned load, which costs
//!   nothing extra on x86-64 and ARM64, while padding would cost bytes on every message.
//! * A procedure whose only argument (or whose result) is a variable-length opaque or string
//!   sends it as the whole message body, without a length: its length is the body's length
//!   ([`NativeWriter::put_body_opaque`]). `MAXARG(1440 bytes)` is exactly 1440 bytes on the wire.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cursor;
mod error;
mod native;
mod out;
mod xdr;

pub use cursor::DEFAULT_MAX_DEPTH;
pub use error::{DecodeError, EncodeError, Error, FieldPath, Segment};
pub use native::{from_native, to_native, ByteOrder, Native, NativeReader, NativeWriter};
pub use out::{OutBuf, Sink};
pub use xdr::{from_xdr, to_xdr, xdr_pad, Xdr, XdrReader, XdrWriter};

#[cfg(test)]
mod tests;
