//! JSON values to and from XDR and lowlat's native encoding, by the rules of the generated code
//! (`lowlat-codec`'s writers and readers), with errors naming the path of the offending value.

use base64::Engine;
use lowlat_codec::{ByteOrder, NativeReader, NativeWriter, XdrReader, XdrWriter};
use serde_json::{Map, Number, Value as Json};

use lowlat_idl::model::{max_len, Arg, Discriminant, Field, Selected, Type, Union};
use lowlat_idl::Model;

use crate::Error;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Optional data nested deeper than this is refused (a linked list of 10,000 nodes is fine).
const MAX_DEPTH: usize = 10_000;

/// The two encodings, behind one interface for the walker.
pub enum Writer<'b> {
    Xdr(XdrWriter<'b>),
    Native(NativeWriter<'b>),
}

impl<'b> Writer<'b> {
    /// XDR when `order` is `None`, else the native encoding in that byte order.
    fn new(out: &'b mut Vec<u8>, order: Option<ByteOrder>) -> Writer<'b> {
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

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// An integer from a JSON number, or from a string of decimal digits.
fn integer(v: &Json, path: &str, what: &str, strings: bool) -> Result<i128, Error> {
    match v {
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ok(i as i128)
            } else if let Some(u) = n.as_u64() {
                Ok(u as i128)
            } else {
                Err(bad(path, format!("{n} is not an integer ({what})")))
            }
        }
        Json::String(s) if strings => {
            s.trim().parse::<i128>().map_err(|_| bad(path, format!("{s:?} is not a decimal integer ({what})")))
        }
        other => Err(bad(path, format!("expected {what}, got {}", kind(other)))),
    }
}

fn in_range(n: i128, lo: i128, hi: i128, path: &str, what: &str) -> Result<i128, Error> {
    if n < lo || n > hi {
        return Err(bad(path, format!("{n} is out of range for {what} ({lo} to {hi})")));
    }
    Ok(n)
}

fn field<'j>(obj: &'j Map<String, Json>, name: &str, path: &str) -> Result<&'j Json, Error> {
    obj.get(name).ok_or_else(|| bad(path, format!("missing field {name:?}")))
}

/// Encodes and decodes JSON values of one interface's types.
pub struct Codec<'a> {
    pub m: &'a Model,
}

impl Codec<'_> {
    /// Appends `v` as a value of type `ty`. `body`: the value is a procedure's whole argument list
    /// or result and may use the native encoding's length-less body form.
    pub fn encode(&self, ty: &Type, v: &Json, path: &str, w: &mut Writer<'_>, body: bool) -> Result<(), Error> {
        self.enc(ty, v, path, w, body, 0)
    }

    fn enc(&self, ty: &Type, v: &Json, path: &str, w: &mut Writer<'_>, body: bool, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(bad(path, "optional data nested too deeply"));
        }
        match ty {
            Type::Typedef(_, t) => self.enc(t, v, path, w, body, depth),
            Type::Int => {
                w.i32(in_range(integer(v, path, "an int", false)?, i32::MIN as i128, i32::MAX as i128, path, "int")?
                    as i32);
                Ok(())
            }
            Type::UInt => {
                w.u32(
                    in_range(integer(v, path, "an unsigned int", false)?, 0, u32::MAX as i128, path, "unsigned int")?
                        as u32,
                );
                Ok(())
            }
            Type::Hyper => {
                w.i64(in_range(integer(v, path, "a hyper", true)?, i64::MIN as i128, i64::MAX as i128, path, "hyper")?
                    as i64);
                Ok(())
            }
            Type::UHyper => {
                w.u64(in_range(
                    integer(v, path, "an unsigned hyper", true)?,
                    0,
                    u64::MAX as i128,
                    path,
                    "unsigned hyper",
                )? as u64);
                Ok(())
            }
            Type::Float | Type::Double => {
                let f = v.as_f64().ok_or_else(|| bad(path, format!("expected a number, got {}", kind(v))))?;
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
            Type::Bool => match v {
                Json::Bool(b) => {
                    w.bool(*b);
                    Ok(())
                }
                other => Err(bad(path, format!("expected true or false, got {}", kind(other)))),
            },
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
                let s = v.as_str().ok_or_else(|| bad(path, format!("expected a string, got {}", kind(v))))?;
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
                let a = v.as_array().ok_or_else(|| bad(path, format!("expected an array, got {}", kind(v))))?;
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
                let a = v.as_array().ok_or_else(|| bad(path, format!("expected an array, got {}", kind(v))))?;
                if a.len() > m as usize {
                    return Err(bad(path, format!("more than {m} elements ({})", a.len())));
                }
                w.u32(a.len() as u32);
                for (i, x) in a.iter().enumerate() {
                    self.enc(e, x, &format!("{path}[{i}]"), w, false, depth)?;
                }
                Ok(())
            }
            Type::Optional(e) => match v {
                Json::Null => {
                    w.bool(false);
                    Ok(())
                }
                x => {
                    w.bool(true);
                    self.enc(e, x, path, w, false, depth + 1)
                }
            },
            Type::Struct(id) => {
                let s = &self.m[*id];
                let name = &s.name;
                let obj =
                    v.as_object().ok_or_else(|| bad(path, format!("expected an object ({name}), got {}", kind(v))))?;
                if let Some(k) = obj.keys().find(|k| !s.fields.iter().any(|f| &f.name == *k)) {
                    return Err(bad(path, format!("{name} has no field {k:?}")));
                }
                for f in &s.fields {
                    self.enc(&f.ty, field(obj, &f.name, path)?, &format!("{path}.{}", f.name), w, false, depth)?;
                }
                Ok(())
            }
            Type::Union(id) => self.enc_union(&self.m[*id], v, path, w, depth),
        }
    }

    fn enum_value(&self, e: &lowlat_idl::model::Enum, v: &Json, path: &str) -> Result<i32, Error> {
        let name = &e.name;
        match v {
            Json::String(s) => e.members.iter().find(|m| &m.name == s).map(|m| m.value).ok_or_else(|| {
                let names: Vec<&str> = e.members.iter().map(|m| m.name.as_str()).collect();
                bad(path, format!("unknown {name} name {s:?} (one of {})", names.join(", ")))
            }),
            Json::Number(_) => {
                let n = integer(v, path, name, false)?;
                e.members
                    .iter()
                    .find(|m| m.value as i128 == n)
                    .map(|m| m.value)
                    .ok_or_else(|| bad(path, format!("{n} is not a value of {name}")))
            }
            other => Err(bad(path, format!("expected a {name} name, got {}", kind(other)))),
        }
    }

    fn bytes(&self, v: &Json, path: &str) -> Result<Vec<u8>, Error> {
        let s = v.as_str().ok_or_else(|| bad(path, format!("expected base64 text, got {}", kind(v))))?;
        B64.decode(s).map_err(|e| bad(path, format!("not standard padded base64: {e}")))
    }

    /// The union's discriminant and then the arm it selects.
    fn enc_union(&self, u: &Union, v: &Json, path: &str, w: &mut Writer<'_>, depth: usize) -> Result<(), Error> {
        let name = &u.name;
        let obj = v.as_object().ok_or_else(|| bad(path, format!("expected an object ({name}), got {}", kind(v))))?;
        let dname = &u.discriminant.name;
        let dpath = format!("{path}.{dname}");
        let dv = field(obj, dname, path)?;
        let d: i64 = match u.switch {
            Discriminant::Enum(e) => self.enum_value(&self.m[e], dv, &dpath)?.into(),
            Discriminant::Bool => match dv {
                Json::Bool(b) => i64::from(*b),
                other => return Err(bad(&dpath, format!("expected true or false, got {}", kind(other)))),
            },
            Discriminant::UInt => {
                in_range(integer(dv, &dpath, "an unsigned int", false)?, 0, u32::MAX as i128, &dpath, "unsigned int")?
                    as i64
            }
            Discriminant::Int => {
                in_range(integer(dv, &dpath, "an int", false)?, i32::MIN as i128, i32::MAX as i128, &dpath, "int")?
                    as i64
            }
        };
        self.enc(&u.discriminant.ty, dv, &dpath, w, false, depth)?;
        let arm: Option<&Field> = match u.select(d) {
            Selected::Case(a) => a.field.as_ref(),
            Selected::Default(f) => f,
            Selected::Nothing => {
                return Err(bad(&dpath, format!("{d} selects no arm of {name} (and it has no default)")));
            }
        };
        match arm {
            None => {
                if let Some(k) = obj.keys().find(|k| *k != dname) {
                    return Err(bad(path, format!("this arm of {name} is void; unexpected field {k:?}")));
                }
                Ok(())
            }
            Some(f) => {
                let an = &f.name;
                if let Some(k) = obj.keys().find(|k| *k != dname && *k != an) {
                    return Err(bad(path, format!("unexpected field {k:?} (this arm of {name} is {an:?})")));
                }
                self.enc(&f.ty, field(obj, an, path)?, &format!("{path}.{an}"), w, false, depth)
            }
        }
    }

    /// Reads a value of type `ty`.
    pub fn decode(&self, ty: &Type, r: &mut Reader<'_>, path: &str, body: bool) -> Result<Json, Error> {
        self.dec(ty, r, path, body, 0)
    }

    fn dec(&self, ty: &Type, r: &mut Reader<'_>, path: &str, body: bool, depth: usize) -> Result<Json, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::Decode { path: path.to_string(), reason: "optional data nested too deeply".into() });
        }
        Ok(match ty {
            Type::Typedef(_, t) => self.dec(t, r, path, body, depth)?,
            Type::Int => Json::from(rd!(r, path, get_i32)?),
            Type::UInt => Json::from(rd!(r, path, get_u32)?),
            Type::Hyper => Json::String(rd!(r, path, get_i64)?.to_string()),
            Type::UHyper => Json::String(rd!(r, path, get_u64)?.to_string()),
            Type::Float => Number::from_f64(rd!(r, path, get_f32)? as f64).map_or(Json::Null, Json::Number),
            Type::Double => Number::from_f64(rd!(r, path, get_f64)?).map_or(Json::Null, Json::Number),
            Type::Bool => Json::Bool(rd!(r, path, get_bool)?),
            Type::Enum(id) => {
                let e = &self.m[*id];
                let v = rd!(r, path, get_i32)?;
                match e.member(v.into()) {
                    Some(m) => Json::String(m.name.clone()),
                    None => {
                        return Err(Error::Decode {
                            path: path.to_string(),
                            reason: format!("{v} is not a value of {}", e.name),
                        })
                    }
                }
            }
            Type::FixedOpaque(n) => Json::String(B64.encode(rd!(r, path, get_opaque_fixed, n.value as usize)?)),
            Type::VarOpaque(m) => {
                let m = max_len(*m);
                let b = match r {
                    Reader::Native(n) if body => n.get_body_opaque(m, "opaque").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_opaque_var, m, "opaque")?,
                };
                Json::String(B64.encode(b))
            }
            Type::String(m) => {
                let m = max_len(*m);
                let s = match r {
                    Reader::Native(n) if body => n.get_body_string(m, "string").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_string, m, "string")?,
                };
                Json::String(s.to_string())
            }
            Type::FixedArray(e, n) => {
                let mut a = Vec::with_capacity((n.value as usize).min(4096));
                for i in 0..n.value {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth)?);
                }
                Json::Array(a)
            }
            Type::VarArray(e, m) => {
                let n = rd!(r, path, get_count, max_len(*m), "array")?;
                let mut a = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth)?);
                }
                Json::Array(a)
            }
            Type::Optional(e) => {
                if rd!(r, path, get_bool)? {
                    self.dec(e, r, path, false, depth + 1)?
                } else {
                    Json::Null
                }
            }
            Type::Struct(id) => {
                let mut obj = Map::new();
                for f in &self.m[*id].fields {
                    let v = self.dec(&f.ty, r, &format!("{path}.{}", f.name), false, depth)?;
                    obj.insert(f.name.clone(), v);
                }
                Json::Object(obj)
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
                    Discriminant::Int | Discriminant::UInt => Json::from(d),
                    Discriminant::Bool => Json::Bool(d != 0),
                    Discriminant::Enum(e) => match self.m[e].member(d) {
                        Some(m) => Json::String(m.name.clone()),
                        None => {
                            return Err(Error::Decode {
                                path: dpath,
                                reason: format!("{d} is not a value of {}", self.m[e].name),
                            })
                        }
                    },
                };
                let mut obj = Map::new();
                obj.insert(dname.clone(), dv);
                let arm = match u.select(d) {
                    Selected::Case(a) => a.field.as_ref(),
                    Selected::Default(f) => f,
                    Selected::Nothing => {
                        return Err(Error::Decode { path: dpath, reason: format!("{d} selects no arm of {}", u.name) })
                    }
                };
                if let Some(f) = arm {
                    let v = self.dec(&f.ty, r, &format!("{path}.{}", f.name), false, depth)?;
                    obj.insert(f.name.clone(), v);
                }
                Json::Object(obj)
            }
        })
    }

    /// Encodes a procedure's argument list: `args` is the JSON given for it (see the crate doc).
    pub fn encode_args(
        &self,
        args: &[Arg],
        v: &Json,
        out: &mut Vec<u8>,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        let mut w = Writer::new(out, order);
        match args {
            [] => match v {
                Json::Null => Ok(()),
                other => Err(bad("argument", format!("the procedure takes no argument (void); got {}", kind(other)))),
            },
            [one] => self.encode(&one.ty, v, "argument", &mut w, true),
            _ => {
                let n = args.len();
                let values: Vec<&Json> = match v {
                    Json::Array(a) if a.len() == n => a.iter().collect(),
                    Json::Array(a) => return Err(bad("argument", format!("expected {n} arguments, got {}", a.len()))),
                    Json::Object(o) => {
                        if let Some(k) = o.keys().find(|k| !args.iter().any(|a| &a.name == *k)) {
                            return Err(bad("argument", format!("no argument named {k:?}")));
                        }
                        args.iter().map(|a| field(o, &a.name, "argument")).collect::<Result<_, _>>()?
                    }
                    other => {
                        return Err(bad(
                            "argument",
                            format!("expected an array or object of {n} arguments, got {}", kind(other)),
                        ))
                    }
                };
                for (a, x) in args.iter().zip(values) {
                    self.encode(&a.ty, x, &format!("argument.{}", a.name), &mut w, false)?;
                }
                Ok(())
            }
        }
    }

    /// Encodes a procedure's result (`None` type: void, JSON null), as a server would.
    pub fn encode_result(
        &self,
        ty: Option<&Type>,
        v: &Json,
        out: &mut Vec<u8>,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        let mut w = Writer::new(out, order);
        match (ty, v) {
            (None, Json::Null) => Ok(()),
            (None, other) => Err(bad("result", format!("the procedure returns nothing (void); got {}", kind(other)))),
            (Some(t), v) => self.encode(t, v, "result", &mut w, true),
        }
    }

    /// Decodes a procedure's result body (`None` type: void, JSON null).
    pub fn decode_result(&self, ty: Option<&Type>, body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        let mut r = Reader::new(body, order);
        let v = match ty {
            None => Json::Null,
            Some(t) => self.decode(t, &mut r, "result", true)?,
        };
        r.finish("result")?;
        Ok(v)
    }

    /// Decodes an argument list (as a server would): the JSON `encode_args` accepts.
    pub fn decode_args(&self, args: &[Arg], body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        let mut r = Reader::new(body, order);
        let v = match args {
            [] => Json::Null,
            [one] => self.decode(&one.ty, &mut r, "argument", true)?,
            _ => {
                let mut obj = Map::new();
                for a in args {
                    obj.insert(a.name.clone(), self.decode(&a.ty, &mut r, &format!("argument.{}", a.name), false)?);
                }
                Json::Object(obj)
            }
        };
        r.finish("argument")?;
        Ok(v)
    }
}
