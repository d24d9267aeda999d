//! Host values (JSON, Python, ...: see `crate::value`) to and from XDR and lowlat's native
//! encoding, by the rules of the generated code (`lowlat-codec`'s writers and readers), with
//! errors naming the path of the offending value.

use std::borrow::Cow;

use lowlat_codec::{ByteOrder, NativeReader, NativeWriter, Sink, XdrReader, XdrWriter};

use lowlat_idl::model::{max_len, Arg, Discriminant, Field, Selected, Type, Union};
use lowlat_idl::Model;

use crate::value::{Build, Entries, Given};
use crate::Error;

/// Optional data nested deeper than this is refused (a linked list of 10,000 nodes is fine).
const MAX_DEPTH: usize = 10_000;

/// The two encodings, behind one interface for the walker.
pub enum Writer<'b, S: Sink + ?Sized> {
    Xdr(XdrWriter<'b, S>),
    Native(NativeWriter<'b, S>),
}

impl<'b, S: Sink + ?Sized> Writer<'b, S> {
    /// XDR when `order` is `None`, else the native encoding in that byte order.
    fn new(out: &'b mut S, order: Option<ByteOrder>) -> Writer<'b, S> {
        match order {
            Some(o) => Writer::Native(NativeWriter::new(out, o)),
            None => Writer::Xdr(XdrWriter::new(out)),
        }
    }

    fn u32(&mut self, v: u32) {
        match self {
            Writer::Xdr(w) => w.put_u32(v),
            Writer::Native(w) => w.put_u32(v),
        }
    }
    fn i32(&mut self, v: i32) {
        match self {
            Writer::Xdr(w) => w.put_i32(v),
            Writer::Native(w) => w.put_i32(v),
        }
    }
    fn u64(&mut self, v: u64) {
        match self {
            Writer::Xdr(w) => w.put_u64(v),
            Writer::Native(w) => w.put_u64(v),
        }
    }
    fn i64(&mut self, v: i64) {
        match self {
            Writer::Xdr(w) => w.put_i64(v),
            Writer::Native(w) => w.put_i64(v),
        }
    }
    fn f32(&mut self, v: f32) {
        match self {
            Writer::Xdr(w) => w.put_f32(v),
            Writer::Native(w) => w.put_f32(v),
        }
    }
    fn f64(&mut self, v: f64) {
        match self {
            Writer::Xdr(w) => w.put_f64(v),
            Writer::Native(w) => w.put_f64(v),
        }
    }
    fn bool(&mut self, v: bool) {
        match self {
            Writer::Xdr(w) => w.put_bool(v),
            Writer::Native(w) => w.put_bool(v),
        }
    }
    fn fixed(&mut self, b: &[u8]) {
        match self {
            Writer::Xdr(w) => w.put_opaque_fixed(b),
            Writer::Native(w) => w.put_opaque_fixed(b),
        }
    }
    /// Length then bytes (limits were checked by the caller, with the path).
    fn var(&mut self, b: &[u8]) {
        let r = match self {
            Writer::Xdr(w) => w.put_opaque_var(b, u32::MAX, "opaque"),
            Writer::Native(w) => w.put_opaque_var(b, u32::MAX, "opaque"),
        };
        debug_assert!(r.is_ok());
    }
    fn body(&mut self, b: &[u8]) {
        match self {
            Writer::Xdr(w) => {
                let _ = w.put_opaque_var(b, u32::MAX, "opaque");
            }
            Writer::Native(w) => {
                let _ = w.put_body_opaque(b, u32::MAX, "opaque");
            }
        }
    }
    fn is_native(&self) -> bool {
        matches!(self, Writer::Native(_))
    }
}

/// A reader over either encoding.
pub enum Reader<'b> {
    Xdr(XdrReader<'b>),
    Native(NativeReader<'b>),
}

macro_rules! rd {
    ($self:ident, $path:expr, $m:ident $(, $a:expr)*) => {
        match $self {
            Reader::Xdr(r) => r.$m($($a),*),
            Reader::Native(r) => r.$m($($a),*),
        }
        .map_err(|e| Error::Decode { path: $path.to_string(), reason: e.to_string() })
    };
}

impl<'b> Reader<'b> {
    /// XDR when `order` is `None`, else the native encoding in that byte order.
    fn new(body: &'b [u8], order: Option<ByteOrder>) -> Reader<'b> {
        match order {
            Some(o) => Reader::Native(NativeReader::new(body, o)),
            None => Reader::Xdr(XdrReader::new(body)),
        }
    }

    fn finish(&self, path: &str) -> Result<(), Error> {
        rd!(self, path, finish)
    }
}

fn derr(path: &str, e: lowlat_codec::DecodeError) -> Error {
    Error::Decode { path: path.to_string(), reason: e.to_string() }
}

fn bad(path: &str, reason: impl Into<String>) -> Error {
    Error::Value { path: path.to_string(), reason: reason.into() }
}

fn in_range(n: i128, lo: i128, hi: i128, path: &str, what: &str) -> Result<i128, Error> {
    if n < lo || n > hi {
        return Err(bad(path, format!("{n} is out of range for {what} ({lo} to {hi})")));
    }
    Ok(n)
}

/// An integer of the type described by `what` (`name` in range messages), within `lo..=hi`.
fn integer<V: Given>(v: &V, path: &str, what: &str, name: &str, wide: bool, lo: i128, hi: i128) -> Result<i128, Error> {
    match v.integer(what, wide) {
        Some(Ok(n)) => in_range(n, lo, hi, path, name),
        Some(Err(reason)) => Err(bad(path, reason)),
        None => Err(bad(path, format!("expected {what}, got {}", v.kind()))),
    }
}

/// The entries of a struct or union value (`name`: the type's).
fn entries<'v, V: Given>(v: &'v V, path: &str, name: &str) -> Result<Entries<'v, V>, Error> {
    match v.entries() {
        Some(r) => r.map_err(|reason| bad(path, reason)),
        None => Err(bad(path, format!("expected {} ({name}), got {}", V::RECORD, v.kind()))),
    }
}

fn elements<V: Given>(v: &V, path: &str) -> Result<Vec<V>, Error> {
    match v.elements() {
        Some(r) => r.map_err(|reason| bad(path, reason)),
        None => Err(bad(path, format!("expected {}, got {}", V::LIST, v.kind()))),
    }
}

/// Takes the entry `name` out of `entries`.
fn take<V>(entries: &mut Entries<'_, V>, name: &str, path: &str) -> Result<V, Error> {
    match entries.iter().position(|(k, _)| k == name) {
        Some(i) => Ok(entries.swap_remove(i).1),
        None => Err(bad(path, format!("missing field {name:?}"))),
    }
}

/// A host's failure to build a value, at `path`.
fn host(path: &str) -> impl FnOnce(String) -> Error + '_ {
    move |reason| Error::Decode { path: path.to_string(), reason }
}

/// Encodes and decodes host values of one interface's types.
pub struct Codec<'a> {
    pub m: &'a Model,
}

impl Codec<'_> {
    /// Appends `v` as a value of type `ty`. `body`: the value is a procedure's whole argument list
    /// or result and may use the native encoding's length-less body form.
    pub fn encode<V: Given, S: Sink + ?Sized>(
        &self,
        ty: &Type,
        v: &V,
        path: &str,
        w: &mut Writer<'_, S>,
        body: bool,
    ) -> Result<(), Error> {
        self.enc(ty, v, path, w, body, 0)
    }

    fn enc<V: Given, S: Sink + ?Sized>(
        &self,
        ty: &Type,
        v: &V,
        path: &str,
        w: &mut Writer<'_, S>,
        body: bool,
        depth: usize,
    ) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(bad(path, "optional data nested too deeply"));
        }
        match ty {
            Type::Typedef(_, t) => self.enc(t, v, path, w, body, depth),
            Type::Int => {
                w.i32(integer(v, path, "an int", "int", false, i32::MIN.into(), i32::MAX.into())? as i32);
                Ok(())
            }
            Type::UInt => {
                w.u32(integer(v, path, "an unsigned int", "unsigned int", false, 0, u32::MAX.into())? as u32);
                Ok(())
            }
            Type::Hyper => {
                w.i64(integer(v, path, "a hyper", "hyper", true, i64::MIN.into(), i64::MAX.into())? as i64);
                Ok(())
            }
            Type::UHyper => {
                w.u64(integer(v, path, "an unsigned hyper", "unsigned hyper", true, 0, u64::MAX.into())? as u64);
                Ok(())
            }
            Type::Float | Type::Double => {
                let f = v.float().ok_or_else(|| bad(path, format!("expected a number, got {}", v.kind())))?;
                if *ty == Type::Float {
                    if f.is_finite() && f.abs() > f32::MAX as f64 {
                        return Err(bad(path, format!("{f} is out of range for float")));
                    }
                    w.f32(f as f32);
                } else {
                    w.f64(f);
                }
                Ok(())
            }
            Type::Bool => {
                let b = v.boolean().ok_or_else(|| bad(path, format!("expected true or false, got {}", v.kind())))?;
                w.bool(b);
                Ok(())
            }
            Type::Enum(id) => {
                w.i32(self.enum_value(&self.m[*id], v, path)?);
                Ok(())
            }
            Type::FixedOpaque(n) => {
                let n = n.value;
                let b = self.bytes(v, path)?;
                if b.len() != n as usize {
                    return Err(bad(path, format!("opaque[{n}] needs exactly {n} bytes, got {}", b.len())));
                }
                w.fixed(&b);
                Ok(())
            }
            Type::VarOpaque(m) => {
                let m = max_len(*m);
                let b = self.bytes(v, path)?;
                if b.len() > m as usize {
                    return Err(bad(path, format!("opaque longer than {m} ({} bytes)", b.len())));
                }
                if body && w.is_native() {
                    w.body(&b)
                } else {
                    w.var(&b)
                }
                Ok(())
            }
            Type::String(m) => {
                let m = max_len(*m);
                let s = match v.text() {
                    Some(r) => r.map_err(|reason| bad(path, reason))?,
                    None => return Err(bad(path, format!("expected a string, got {}", v.kind()))),
                };
                if s.len() > m as usize {
                    return Err(bad(path, format!("string longer than {m} ({} bytes)", s.len())));
                }
                if body && w.is_native() {
                    w.body(s.as_bytes())
                } else {
                    w.var(s.as_bytes())
                }
                Ok(())
            }
            Type::FixedArray(e, n) => {
                let n = n.value;
                let a = elements(v, path)?;
                if a.len() != n as usize {
                    return Err(bad(
                        path,
                        format!("{} needs exactly {n} elements, got {}", self.m.spelling(ty), a.len()),
                    ));
                }
                for (i, x) in a.iter().enumerate() {
                    self.enc(e, x, &format!("{path}[{i}]"), w, false, depth)?;
                }
                Ok(())
            }
            Type::VarArray(e, m) => {
                let m = max_len(*m);
                let a = elements(v, path)?;
                if a.len() > m as usize {
                    return Err(bad(path, format!("more than {m} elements ({})", a.len())));
                }
                w.u32(a.len() as u32);
                for (i, x) in a.iter().enumerate() {
                    self.enc(e, x, &format!("{path}[{i}]"), w, false, depth)?;
                }
                Ok(())
            }
            Type::Optional(e) => {
                if v.is_null() {
                    w.bool(false);
                    Ok(())
                } else {
                    w.bool(true);
                    self.enc(e, v, path, w, false, depth + 1)
                }
            }
            Type::Struct(id) => {
                let s = &self.m[*id];
                let name = &s.name;
                let mut given = entries(v, path, name)?;
                if let Some((k, _)) = given.iter().find(|(k, _)| !s.fields.iter().any(|f| f.name == *k)) {
                    return Err(bad(path, format!("{name} has no field {k:?}")));
                }
                for f in &s.fields {
                    let x = take(&mut given, &f.name, path)?;
                    self.enc(&f.ty, &x, &format!("{path}.{}", f.name), w, false, depth)?;
                }
                Ok(())
            }
            Type::Union(id) => self.enc_union(&self.m[*id], v, path, w, depth),
        }
    }

    fn enum_value<V: Given>(&self, e: &lowlat_idl::model::Enum, v: &V, path: &str) -> Result<i32, Error> {
        let name = &e.name;
        if let Some(s) = v.text() {
            let s = s.map_err(|reason| bad(path, reason))?;
            return e.members.iter().find(|m| m.name == s).map(|m| m.value).ok_or_else(|| {
                let names: Vec<&str> = e.members.iter().map(|m| m.name.as_str()).collect();
                bad(path, format!("unknown {name} name {s:?} (one of {})", names.join(", ")))
            });
        }
        match v.integer(name, false) {
            Some(Ok(n)) => e
                .members
                .iter()
                .find(|m| m.value as i128 == n)
                .map(|m| m.value)
                .ok_or_else(|| bad(path, format!("{n} is not a value of {name}"))),
            Some(Err(reason)) => Err(bad(path, reason)),
            None => Err(bad(path, format!("expected a {name} name, got {}", v.kind()))),
        }
    }

    fn bytes<'v, V: Given>(&self, v: &'v V, path: &str) -> Result<Cow<'v, [u8]>, Error> {
        match v.bytes() {
            Some(r) => r.map_err(|reason| bad(path, reason)),
            None => Err(bad(path, format!("expected {}, got {}", V::BYTES, v.kind()))),
        }
    }

    /// The union's discriminant and then the arm it selects.
    fn enc_union<V: Given, S: Sink + ?Sized>(
        &self,
        u: &Union,
        v: &V,
        path: &str,
        w: &mut Writer<'_, S>,
        depth: usize,
    ) -> Result<(), Error> {
        let name = &u.name;
        let mut given = entries(v, path, name)?;
        let dname = &u.discriminant.name;
        let dpath = format!("{path}.{dname}");
        let dv = take(&mut given, dname, path)?;
        let d: i64 = match u.switch {
            Discriminant::Enum(e) => self.enum_value(&self.m[e], &dv, &dpath)?.into(),
            Discriminant::Bool => match dv.boolean() {
                Some(b) => i64::from(b),
                None => return Err(bad(&dpath, format!("expected true or false, got {}", dv.kind()))),
            },
            Discriminant::UInt => {
                integer(&dv, &dpath, "an unsigned int", "unsigned int", false, 0, u32::MAX.into())? as i64
            }
            Discriminant::Int => integer(&dv, &dpath, "an int", "int", false, i32::MIN.into(), i32::MAX.into())? as i64,
        };
        self.enc(&u.discriminant.ty, &dv, &dpath, w, false, depth)?;
        let arm: Option<&Field> = match u.select(d) {
            Selected::Case(a) => a.field.as_ref(),
            Selected::Default(f) => f,
            Selected::Nothing => {
                return Err(bad(&dpath, format!("{d} selects no arm of {name} (and it has no default)")));
            }
        };
        match arm {
            None => match given.first() {
                Some((k, _)) => Err(bad(path, format!("this arm of {name} is void; unexpected field {k:?}"))),
                None => Ok(()),
            },
            Some(f) => {
                let an = &f.name;
                if let Some((k, _)) = given.iter().find(|(k, _)| k != an) {
                    return Err(bad(path, format!("unexpected field {k:?} (this arm of {name} is {an:?})")));
                }
                let x = take(&mut given, an, path)?;
                self.enc(&f.ty, &x, &format!("{path}.{an}"), w, false, depth)
            }
        }
    }

    /// Reads a value of type `ty`.
    pub fn decode<B: Build>(
        &self,
        ty: &Type,
        r: &mut Reader<'_>,
        path: &str,
        body: bool,
        b: &mut B,
    ) -> Result<B::Value, Error> {
        self.dec(ty, r, path, body, 0, b)
    }

    fn dec<B: Build>(
        &self,
        ty: &Type,
        r: &mut Reader<'_>,
        path: &str,
        body: bool,
        depth: usize,
        b: &mut B,
    ) -> Result<B::Value, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::Decode { path: path.to_string(), reason: "optional data nested too deeply".into() });
        }
        Ok(match ty {
            Type::Typedef(_, t) => self.dec(t, r, path, body, depth, b)?,
            Type::Int => b.int(rd!(r, path, get_i32)?.into()),
            Type::UInt => b.int(rd!(r, path, get_u32)?.into()),
            Type::Hyper => b.hyper(rd!(r, path, get_i64)?),
            Type::UHyper => b.uhyper(rd!(r, path, get_u64)?),
            Type::Float => b.float(rd!(r, path, get_f32)?.into()),
            Type::Double => b.float(rd!(r, path, get_f64)?),
            Type::Bool => b.boolean(rd!(r, path, get_bool)?),
            Type::Enum(id) => {
                let e = &self.m[*id];
                let v = rd!(r, path, get_i32)?;
                match e.member(v.into()) {
                    Some(m) => b.name(&m.name),
                    None => {
                        return Err(Error::Decode {
                            path: path.to_string(),
                            reason: format!("{v} is not a value of {}", e.name),
                        })
                    }
                }
            }
            Type::FixedOpaque(n) => b.bytes(rd!(r, path, get_opaque_fixed, n.value as usize)?).map_err(host(path))?,
            Type::VarOpaque(m) => {
                let m = max_len(*m);
                let bytes = match r {
                    Reader::Native(n) if body => n.get_body_opaque(m, "opaque").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_opaque_var, m, "opaque")?,
                };
                b.bytes(bytes).map_err(host(path))?
            }
            Type::String(m) => {
                let m = max_len(*m);
                let s = match r {
                    Reader::Native(n) if body => n.get_body_string(m, "string").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_string, m, "string")?,
                };
                b.text(s).map_err(host(path))?
            }
            Type::FixedArray(e, n) => {
                let mut a = Vec::with_capacity((n.value as usize).min(4096));
                for i in 0..n.value {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth, b)?);
                }
                b.list(a).map_err(host(path))?
            }
            Type::VarArray(e, m) => {
                let n = rd!(r, path, get_count, max_len(*m), "array")?;
                let mut a = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth, b)?);
                }
                b.list(a).map_err(host(path))?
            }
            Type::Optional(e) => {
                if rd!(r, path, get_bool)? {
                    self.dec(e, r, path, false, depth + 1, b)?
                } else {
                    b.null()
                }
            }
            Type::Struct(id) => {
                let fields = &self.m[*id].fields;
                let mut entries = Vec::with_capacity(fields.len());
                for f in fields {
                    let v = self.dec(&f.ty, r, &format!("{path}.{}", f.name), false, depth, b)?;
                    entries.push((f.name.as_str(), v));
                }
                b.record(entries).map_err(host(path))?
            }
            Type::Union(id) => {
                let u = &self.m[*id];
                let dname = &u.discriminant.name;
                let dpath = format!("{path}.{dname}");
                let d: i64 = match u.switch {
                    Discriminant::Int => rd!(r, &dpath, get_i32)?.into(),
                    Discriminant::UInt => rd!(r, &dpath, get_u32)?.into(),
                    Discriminant::Bool => rd!(r, &dpath, get_bool)?.into(),
                    Discriminant::Enum(_) => rd!(r, &dpath, get_i32)?.into(),
                };
                let dv = match u.switch {
                    Discriminant::Int | Discriminant::UInt => b.int(d),
                    Discriminant::Bool => b.boolean(d != 0),
                    Discriminant::Enum(e) => match self.m[e].member(d) {
                        Some(m) => b.name(&m.name),
                        None => {
                            return Err(Error::Decode {
                                path: dpath,
                                reason: format!("{d} is not a value of {}", self.m[e].name),
                            })
                        }
                    },
                };
                let mut entries = vec![(dname.as_str(), dv)];
                let arm = match u.select(d) {
                    Selected::Case(a) => a.field.as_ref(),
                    Selected::Default(f) => f,
                    Selected::Nothing => {
                        return Err(Error::Decode { path: dpath, reason: format!("{d} selects no arm of {}", u.name) })
                    }
                };
                if let Some(f) = arm {
                    let v = self.dec(&f.ty, r, &format!("{path}.{}", f.name), false, depth, b)?;
                    entries.push((f.name.as_str(), v));
                }
                b.record(entries).map_err(host(path))?
            }
        })
    }

    /// Encodes a procedure's argument list. `v` is the value given for it: nothing (null) for no
    /// argument, the argument itself for one, an array in order or a record keyed by argument
    /// name for several.
    pub fn encode_args<V: Given, S: Sink + ?Sized>(
        &self,
        args: &[Arg],
        v: &V,
        out: &mut S,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        let mut w = Writer::new(out, order);
        match args {
            [] if v.is_null() => Ok(()),
            [] => Err(bad("argument", format!("the procedure takes no argument (void); got {}", v.kind()))),
            [one] => self.encode(&one.ty, v, "argument", &mut w, true),
            _ => {
                let n = args.len();
                let values: Vec<V> = if let Some(a) = v.elements() {
                    let a = a.map_err(|reason| bad("argument", reason))?;
                    if a.len() != n {
                        return Err(bad("argument", format!("expected {n} arguments, got {}", a.len())));
                    }
                    a
                } else if let Some(o) = v.entries() {
                    let mut o = o.map_err(|reason| bad("argument", reason))?;
                    if let Some((k, _)) = o.iter().find(|(k, _)| !args.iter().any(|a| a.name == *k)) {
                        return Err(bad("argument", format!("no argument named {k:?}")));
                    }
                    args.iter().map(|a| take(&mut o, &a.name, "argument")).collect::<Result<_, _>>()?
                } else {
                    return Err(bad(
                        "argument",
                        format!("expected {} or {} of {n} arguments, got {}", V::LIST, V::RECORD, v.kind()),
                    ));
                };
                for (a, x) in args.iter().zip(&values) {
                    self.encode(&a.ty, x, &format!("argument.{}", a.name), &mut w, false)?;
                }
                Ok(())
            }
        }
    }

    /// Encodes a procedure's result (`None` type: void, null), as a server would.
    pub fn encode_result<V: Given, S: Sink + ?Sized>(
        &self,
        ty: Option<&Type>,
        v: &V,
        out: &mut S,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        let mut w = Writer::new(out, order);
        match ty {
            None if v.is_null() => Ok(()),
            None => Err(bad("result", format!("the procedure returns nothing (void); got {}", v.kind()))),
            Some(t) => self.encode(t, v, "result", &mut w, true),
        }
    }

    /// Decodes a procedure's result body (`None` type: void, null).
    pub fn decode_result<B: Build>(
        &self,
        ty: Option<&Type>,
        body: &[u8],
        order: Option<ByteOrder>,
        b: &mut B,
    ) -> Result<B::Value, Error> {
        let mut r = Reader::new(body, order);
        let v = match ty {
            None => b.null(),
            Some(t) => self.decode(t, &mut r, "result", true, b)?,
        };
        r.finish("result")?;
        Ok(v)
    }

    /// Decodes an argument list (as a server would): one value per argument, in order.
    pub fn decode_args<B: Build>(
        &self,
        args: &[Arg],
        body: &[u8],
        order: Option<ByteOrder>,
        b: &mut B,
    ) -> Result<Vec<B::Value>, Error> {
        let mut r = Reader::new(body, order);
        let v = match args {
            [] => Vec::new(),
            [one] => vec![self.decode(&one.ty, &mut r, "argument", true, b)?],
            _ => args
                .iter()
                .map(|a| self.decode(&a.ty, &mut r, &format!("argument.{}", a.name), false, b))
                .collect::<Result<_, _>>()?,
        };
        r.finish("argument")?;
        Ok(v)
    }
}
