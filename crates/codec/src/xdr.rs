//! XDR (RFC 4506): big-endian, every item a multiple of four bytes, padding bytes zero.

use crate::cursor::{collect_array, Cursor};
use crate::out::Sink;
use crate::{DecodeError, EncodeError};

/// Bytes of padding that bring `len` up to a multiple of four.
#[inline]
pub const fn xdr_pad(len: usize) -> usize {
    (4 - (len & 3)) & 3
}

/// A type with an XDR encoding. Generated code implements it for every struct, union and enum.
pub trait Xdr: Sized {
    /// Appends the encoding of `self`.
    fn encode_xdr<B: Sink + ?Sized>(&self, w: &mut XdrWriter<'_, B>) -> Result<(), EncodeError>;
    /// Reads one value from the current position.
    fn decode_xdr(r: &mut XdrReader<'_>) -> Result<Self, DecodeError>;
}

/// Appends the XDR encoding of `value` to `buf`.
pub fn to_xdr<T: Xdr, B: Sink + ?Sized>(value: &T, buf: &mut B) -> Result<(), EncodeError> {
    value.encode_xdr(&mut XdrWriter::new(buf))
}

/// Decodes a value that must fill `buf` exactly.
pub fn from_xdr<T: Xdr>(buf: &[u8]) -> Result<T, DecodeError> {
    let mut r = XdrReader::new(buf);
    let v = T::decode_xdr(&mut r)?;
    r.finish()?;
    Ok(v)
}

/// Appends XDR items to a caller-owned buffer (so a preallocated slot buffer is reused).
#[derive(Debug)]
pub struct XdrWriter<'a, B: Sink + ?Sized = Vec<u8>> {
    buf: &'a mut B,
}

impl<'a, B: Sink + ?Sized> XdrWriter<'a, B> {
    /// Writes after whatever `buf` already holds.
    pub fn new(buf: &'a mut B) -> Self {
        XdrWriter { buf }
    }

    /// The underlying buffer.
    pub fn buf(&mut self) -> &mut B {
        self.buf
    }

    /// `unsigned int`.
    #[inline]
    pub fn put_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    /// `int` and enumerations.
    #[inline]
    pub fn put_i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    /// `unsigned hyper`.
    #[inline]
    pub fn put_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    /// `hyper`.
    #[inline]
    pub fn put_i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    /// `float` (IEEE single precision).
    #[inline]
    pub fn put_f32(&mut self, v: f32) {
        self.put_u32(v.to_bits());
    }
    /// `double` (IEEE double precision).
    #[inline]
    pub fn put_f64(&mut self, v: f64) {
        self.put_u64(v.to_bits());
    }
    /// `bool` and the presence flag of optional data.
    #[inline]
    pub fn put_bool(&mut self, v: bool) {
        self.put_u32(v as u32);
    }

    /// The element count of a variable-length array, checked against its maximum.
    #[inline]
    pub fn put_count(&mut self, len: usize, max: u32, what: &'static str) -> Result<(), EncodeError> {
        if len > max as usize {
            return Err(EncodeError::TooManyElements { what, max, got: len });
        }
        self.put_u32(len as u32);
        Ok(())
    }

    /// Fixed-length opaque data: the bytes, then zero padding.
    #[inline]
    pub fn put_opaque_fixed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.buf.extend_from_slice(&[0u8; 3][..xdr_pad(bytes.len())]);
    }

    /// Variable-length opaque data: length, bytes, zero padding.
    #[inline]
    pub fn put_opaque_var(&mut self, bytes: &[u8], max: u32, what: &'static str) -> Result<(), EncodeError> {
        if bytes.len() > max as usize {
            return Err(EncodeError::TooLong { what, max, got: bytes.len() });
        }
        self.put_u32(bytes.len() as u32);
        self.put_opaque_fixed(bytes);
        Ok(())
    }

    /// A string: encoded like variable-length opaque data, with no terminator.
    #[inline]
    pub fn put_string(&mut self, s: &str, max: u32, what: &'static str) -> Result<(), EncodeError> {
        self.put_opaque_var(s.as_bytes(), max, what)
    }
}

/// Reads XDR items from a byte slice; never panics, whatever the bytes.
///
/// Padding bytes are skipped without being checked, as libtirpc does, so peers that leave garbage
/// in them still interoperate.
#[derive(Debug, Clone)]
pub struct XdrReader<'a> {
    c: Cursor<'a>,
}

impl<'a> XdrReader<'a> {
    /// Reads from the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        XdrReader { c: Cursor::new(buf) }
    }
    /// Changes how deeply optional data may nest (default [`crate::DEFAULT_MAX_DEPTH`]).
    pub fn with_max_depth(mut self, max_depth: u32) -> Self {
        self.c.set_max_depth(max_depth);
        self
    }
    /// Bytes consumed so far.
    #[inline]
    pub fn pos(&self) -> usize {
        self.c.pos()
    }
    /// Bytes not yet consumed.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.c.remaining()
    }
    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        self.c.finish()
    }

    /// `unsigned int`.
    #[inline]
    pub fn get_u32(&mut self) -> Result<u32, DecodeError> {
        self.c.take_array::<4>().map(u32::from_be_bytes)
    }
    /// `int` and enumerations.
    #[inline]
    pub fn get_i32(&mut self) -> Result<i32, DecodeError> {
        self.c.take_array::<4>().map(i32::from_be_bytes)
    }
    /// `unsigned hyper`.
    #[inline]
    pub fn get_u64(&mut self) -> Result<u64, DecodeError> {
        self.c.take_array::<8>().map(u64::from_be_bytes)
    }
    /// `hyper`.
    #[inline]
    pub fn get_i64(&mut self) -> Result<i64, DecodeError> {
        self.c.take_array::<8>().map(i64::from_be_bytes)
    }
    /// `float`.
    #[inline]
    pub fn get_f32(&mut self) -> Result<f32, DecodeError> {
        self.get_u32().map(f32::from_bits)
    }
    /// `double`.
    #[inline]
    pub fn get_f64(&mut self) -> Result<f64, DecodeError> {
        self.get_u64().map(f64::from_bits)
    }
    /// `bool` and optional-data flags: exactly 0 or 1.
    #[inline]
    pub fn get_bool(&mut self) -> Result<bool, DecodeError> {
        let offset = self.pos();
        match self.get_u32()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::BadBool { value, offset }),
        }
    }

    /// The element count of a variable-length array. Rejects counts above `max`, and counts that
    /// the remaining bytes cannot hold (every XDR item takes at least four bytes), so a hostile
    /// count never causes a large allocation or a long loop.
    #[inline]
    pub fn get_count(&mut self, max: u32, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos();
        let got = self.get_u32()?;
        if got > max {
            return Err(DecodeError::TooManyElements { what, max, got, offset });
        }
        let needed = got as usize * 4;
        if needed > self.remaining() {
            return Err(DecodeError::Truncated { needed, offset: self.pos(), have: self.remaining() });
        }
        Ok(got as usize)
    }

    /// `n` bytes of fixed-length opaque data (and their padding), borrowed from the input.
    #[inline]
    pub fn get_opaque_fixed(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let offset = self.pos();
        let padded = n + xdr_pad(n);
        let have = self.remaining();
        if padded > have {
            return Err(DecodeError::Truncated { needed: padded, offset, have });
        }
        let s = self.c.take(padded)?;
        Ok(&s[..n])
    }

    /// Fixed-length opaque data copied into an array.
    #[inline]
    pub fn get_opaque_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.get_opaque_fixed(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Variable-length opaque data, borrowed from the input.
    #[inline]
    pub fn get_opaque_var(&mut self, max: u32, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let offset = self.pos();
        let got = self.get_u32()?;
        if got > max {
            return Err(DecodeError::TooLong { what, max, got, offset });
        }
        self.get_opaque_fixed(got as usize)
    }

    /// A string, borrowed from the input and checked to be UTF-8.
    #[inline]
    pub fn get_string(&mut self, max: u32, what: &'static str) -> Result<&'a str, DecodeError> {
        let offset = self.pos() + 4;
        let bytes = self.get_opaque_var(max, what)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 { what, offset })
    }

    /// Reads the field (or argument) `name` with `item`; an error says it was there:
    /// `r.field("name", |r| r.get_string(16, "string<16>"))` fails with
    /// `name: string<16> got 20 bytes ...`. Costs nothing until decoding fails.
    #[inline(always)]
    pub fn field<T>(
        &mut self,
        name: &'static str,
        item: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        item(self).map_err(|e| e.in_field(name))
    }

    /// Reads element `index` of an array with `item`; an error says which element it was.
    #[inline(always)]
    pub fn element<T>(
        &mut self,
        index: usize,
        item: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        item(self).map_err(|e| e.at_index(index))
    }

    /// A fixed-length array of `N` items (an item's error says which element it was).
    pub fn get_array<T, const N: usize>(
        &mut self,
        item: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<[T; N], DecodeError> {
        let offset = self.pos();
        collect_array(self, item, offset)
    }

    /// Decodes optional data: the flag, then (if set) the value one nesting level deeper.
    pub fn get_optional<T>(
        &mut self,
        item: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Box<T>>, DecodeError> {
        if !self.get_bool()? {
            return Ok(None);
        }
        self.c.enter()?;
        let v = item(self);
        self.c.leave();
        Ok(Some(Box::new(v?)))
    }
}

macro_rules! prim {
    ($t:ty, $put:ident, $get:ident) => {
        impl Xdr for $t {
            #[inline]
            fn encode_xdr<B: Sink + ?Sized>(&self, w: &mut XdrWriter<'_, B>) -> Result<(), EncodeError> {
                w.$put(*self);
                Ok(())
            }
            #[inline]
            fn decode_xdr(r: &mut XdrReader<'_>) -> Result<Self, DecodeError> {
                r.$get()
            }
        }
    };
}
prim!(i32, put_i32, get_i32);
prim!(u32, put_u32, get_u32);
prim!(i64, put_i64, get_i64);
prim!(u64, put_u64, get_u64);
prim!(f32, put_f32, get_f32);
prim!(f64, put_f64, get_f64);
prim!(bool, put_bool, get_bool);
