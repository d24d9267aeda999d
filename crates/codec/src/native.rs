//! lowlat's native encoding: the server's byte order, no padding (see the crate documentation).

use crate::cursor::{collect_array, Cursor};
use crate::out::Sink;
use crate::{DecodeError, EncodeError};

/// The byte order native payloads travel in: the server's, agreed when the client binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first (x86-64, most ARM64 systems).
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// This machine's order: what a server encodes and decodes in.
    pub const fn host() -> ByteOrder {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
}

/// A type with a native encoding. Generated code implements it for every struct, union and enum.
pub trait Native: Sized {
    /// Appends the encoding of `self` in the writer's byte order.
    fn encode_native<B: Sink + ?Sized>(&self, w: &mut NativeWriter<'_, B>) -> Result<(), EncodeError>;
    /// Reads one value in the reader's byte order.
    fn decode_native(r: &mut NativeReader<'_>) -> Result<Self, DecodeError>;
}

/// Appends the native encoding of `value` to `buf` in `order`.
pub fn to_native<T: Native, B: Sink + ?Sized>(value: &T, buf: &mut B, order: ByteOrder) -> Result<(), EncodeError> {
    value.encode_native(&mut NativeWriter::new(buf, order))
}

/// Decodes a value that must fill `buf` exactly.
pub fn from_native<T: Native>(buf: &[u8], order: ByteOrder) -> Result<T, DecodeError> {
    let mut r = NativeReader::new(buf, order);
    let v = T::decode_native(&mut r)?;
    r.finish()?;
    Ok(v)
}

macro_rules! put {
    ($self:ident, $v:expr) => {{
        let v = $v;
        let bytes = match $self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        };
        $self.buf.extend_from_slice(&bytes);
    }};
}

macro_rules! get {
    ($self:ident, $t:ty) => {{
        const N: usize = std::mem::size_of::<$t>();
        $self.c.take_array::<N>().map(|b| match $self.order {
            ByteOrder::Little => <$t>::from_le_bytes(b),
            ByteOrder::Big => <$t>::from_be_bytes(b),
        })
    }};
}

/// Appends native items to a caller-owned buffer.
#[derive(Debug)]
pub struct NativeWriter<'a, B: Sink + ?Sized = Vec<u8>> {
    buf: &'a mut B,
    order: ByteOrder,
}

impl<'a, B: Sink + ?Sized> NativeWriter<'a, B> {
    /// Writes after whatever `buf` already holds, in `order`.
    pub fn new(buf: &'a mut B, order: ByteOrder) -> Self {
        NativeWriter { buf, order }
    }
    /// The byte order being written.
    pub fn order(&self) -> ByteOrder {
        self.order
    }
    /// The underlying buffer.
    pub fn buf(&mut self) -> &mut B {
        self.buf
    }
    /// `unsigned int`.
    #[inline]
    pub fn put_u32(&mut self, v: u32) {
        put!(self, v)
    }
    /// `int` and enumerations.
    #[inline]
    pub fn put_i32(&mut self, v: i32) {
        put!(self, v)
    }
    /// `unsigned hyper`.
    #[inline]
    pub fn put_u64(&mut self, v: u64) {
        put!(self, v)
    }
    /// `hyper`.
    #[inline]
    pub fn put_i64(&mut self, v: i64) {
        put!(self, v)
    }
    /// `float`.
    #[inline]
    pub fn put_f32(&mut self, v: f32) {
        put!(self, v.to_bits())
    }
    /// `double`.
    #[inline]
    pub fn put_f64(&mut self, v: f64) {
        put!(self, v.to_bits())
    }
    /// `bool` and optional-data flags: one byte.
    #[inline]
    pub fn put_bool(&mut self, v: bool) {
        self.buf.push(v as u8);
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
    /// Fixed-length opaque data: just the bytes.
    #[inline]
    pub fn put_opaque_fixed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
    /// Variable-length opaque data: length, then bytes.
    #[inline]
    pub fn put_opaque_var(&mut self, bytes: &[u8], max: u32, what: &'static str) -> Result<(), EncodeError> {
        if bytes.len() > max as usize {
            return Err(EncodeError::TooLong { what, max, got: bytes.len() });
        }
        self.put_u32(bytes.len() as u32);
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
    /// A string: length, then UTF-8 bytes.
    #[inline]
    pub fn put_string(&mut self, s: &str, max: u32, what: &'static str) -> Result<(), EncodeError> {
        self.put_opaque_var(s.as_bytes(), max, what)
    }
    /// A whole message body that is one variable-length opaque: its length is the body's length,
    /// so nothing but the bytes is written.
    #[inline]
    pub fn put_body_opaque(&mut self, bytes: &[u8], max: u32, what: &'static str) -> Result<(), EncodeError> {
        if bytes.len() > max as usize {
            return Err(EncodeError::TooLong { what, max, got: bytes.len() });
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
}

/// Reads native items from a byte slice; never panics, whatever the bytes.
#[derive(Debug, Clone)]
pub struct NativeReader<'a> {
    c: Cursor<'a>,
    order: ByteOrder,
}

impl<'a> NativeReader<'a> {
    /// Reads from the start of `buf`, in `order`.
    pub fn new(buf: &'a [u8], order: ByteOrder) -> Self {
        NativeReader { c: Cursor::new(buf), order }
    }
    /// Changes how deeply optional data may nest (default [`crate::DEFAULT_MAX_DEPTH`]).
    pub fn with_max_depth(mut self, max_depth: u32) -> Self {
        self.c.set_max_depth(max_depth);
        self
    }
    /// The byte order being read.
    pub fn order(&self) -> ByteOrder {
        self.order
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
        get!(self, u32)
    }
    /// `int` and enumerations.
    #[inline]
    pub fn get_i32(&mut self) -> Result<i32, DecodeError> {
        get!(self, i32)
    }
    /// `unsigned hyper`.
    #[inline]
    pub fn get_u64(&mut self) -> Result<u64, DecodeError> {
        get!(self, u64)
    }
    /// `hyper`.
    #[inline]
    pub fn get_i64(&mut self) -> Result<i64, DecodeError> {
        get!(self, i64)
    }
    /// `float`.
    #[inline]
    pub fn get_f32(&mut self) -> Result<f32, DecodeError> {
        get!(self, u32).map(f32::from_bits)
    }
    /// `double`.
    #[inline]
    pub fn get_f64(&mut self) -> Result<f64, DecodeError> {
        get!(self, u64).map(f64::from_bits)
    }
    /// `bool` and optional-data flags: one byte, exactly 0 or 1.
    #[inline]
    pub fn get_bool(&mut self) -> Result<bool, DecodeError> {
        let offset = self.pos();
        match self.c.take_array::<1>()?[0] {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::BadBool { value: value.into(), offset }),
        }
    }
    /// The element count of a variable-length array. Every native item takes at least one byte,
    /// so counts above the remaining length are rejected before anything is allocated.
    #[inline]
    pub fn get_count(&mut self, max: u32, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos();
        let got = self.get_u32()?;
        if got > max {
            return Err(DecodeError::TooManyElements { what, max, got, offset });
        }
        let needed = got as usize;
        if needed > self.remaining() {
            return Err(DecodeError::Truncated { needed, offset: self.pos(), have: self.remaining() });
        }
        Ok(needed)
    }
    /// `n` bytes of fixed-length opaque data, borrowed from the input.
    #[inline]
    pub fn get_opaque_fixed(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.c.take(n)
    }
    /// Fixed-length opaque data copied into an array.
    #[inline]
    pub fn get_opaque_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.c.take_array::<N>()
    }
    /// Variable-length opaque data, borrowed from the input.
    #[inline]
    pub fn get_opaque_var(&mut self, max: u32, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let offset = self.pos();
        let got = self.get_u32()?;
        if got > max {
            return Err(DecodeError::TooLong { what, max, got, offset });
        }
        self.c.take(got as usize)
    }
    /// A string, borrowed from the input and checked to be UTF-8.
    #[inline]
    pub fn get_string(&mut self, max: u32, what: &'static str) -> Result<&'a str, DecodeError> {
        let offset = self.pos() + 4;
        let bytes = self.get_opaque_var(max, what)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 { what, offset })
    }
    /// A whole message body that is one variable-length opaque (see
    /// [`NativeWriter::put_body_opaque`]): everything left.
    #[inline]
    pub fn get_body_opaque(&mut self, max: u32, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let offset = self.pos();
        let n = self.remaining();
        if n > max as usize {
            let got = u32::try_from(n).unwrap_or(u32::MAX);
            return Err(DecodeError::TooLong { what, max, got, offset });
        }
        self.c.take(n)
    }
    /// A whole message body that is one string.
    #[inline]
    pub fn get_body_string(&mut self, max: u32, what: &'static str) -> Result<&'a str, DecodeError> {
        let offset = self.pos();
        let bytes = self.get_body_opaque(max, what)?;
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
        impl Native for $t {
            #[inline]
            fn encode_native<B: Sink + ?Sized>(&self, w: &mut NativeWriter<'_, B>) -> Result<(), EncodeError> {
                w.$put(*self);
                Ok(())
            }
            #[inline]
            fn decode_native(r: &mut NativeReader<'_>) -> Result<Self, DecodeError> {
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
