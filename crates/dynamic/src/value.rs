//! JSON values to and from XDR and lowlat's native encoding, by the rules of the generated code
//! (`lowlat-codec`'s writers and readers), with errors naming the path of the offending value.

use base64::Engine;
use lowlat_codec::{ByteOrder, NativeReader, NativeWriter, XdrReader, XdrWriter};
use serde_json::{Map, Number, Value as Json};

use crate::types::{Ty, Types};
use crate::Error;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Optional data nested deeper than this is refused (a linked list of 10,000 nodes is fine).
const MAX_DEPTH: usize = 10_000;

/// The two encodings, behind one interface for the walker.
pub enum Writer<'b> {
    Xdr(XdrWriter<'b>),
    Native(NativeWriter<'b>),
}

impl Writer<'_> {
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

/// Encodes and decodes JSON values of one spec's types.
pub struct Codec<'a> {
    pub types: Types<'a>,
}

impl Codec<'_> {
    /// Appends `v` as a value of type `ty`. `body`: the value is a procedure's whole argument list
    /// or result and may use the native encoding's length-less body form.
    pub fn encode(&self, ty: &Ty, v: &Json, path: &str, w: &mut Writer<'_>, body: bool) -> Result<(), Error> {
        self.enc(ty, v, path, w, body, 0)
    }

    fn enc(&self, ty: &Ty, v: &Json, path: &str, w: &mut Writer<'_>, body: bool, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(bad(path, "optional data nested too deeply"));
        }
        match ty {
            Ty::Void => match v {
                Json::Null => Ok(()),
                other => Err(bad(path, format!("expected null (void), got {}", kind(other)))),
            },
            Ty::I32 => {
                w.i32(in_range(integer(v, path, "an int", false)?, i32::MIN as i128, i32::MAX as i128, path, "int")?
                    as i32);
                Ok(())
            }
            Ty::U32 => {
                w.u32(
                    in_range(integer(v, path, "an unsigned int", false)?, 0, u32::MAX as i128, path, "unsigned int")?
                        as u32,
                );
                Ok(())
            }
            Ty::I64 => {
                w.i64(in_range(integer(v, path, "a hyper", true)?, i64::MIN as i128, i64::MAX as i128, path, "hyper")?
                    as i64);
                Ok(())
            }
            Ty::U64 => {
                w.u64(in_range(
                    integer(v, path, "an unsigned hyper", true)?,
                    0,
                    u64::MAX as i128,
                    path,
                    "unsigned hyper",
                )? as u64);
                Ok(())
            }
            Ty::F32 | Ty::F64 => {
                let f = v.as_f64().ok_or_else(|| bad(path, format!("expected a number, got {}", kind(v))))?;
                if *ty == Ty::F32 {
                    if f.is_finite() && f.abs() > f32::MAX as f64 {
                        return Err(bad(path, format!("{f} is out of range for float")));
                    }
                    w.f32(f as f32);
                } else {
                    w.f64(f);
                }
                Ok(())
            }
            Ty::Bool => match v {
                Json::Bool(b) => {
                    w.bool(*b);
                    Ok(())
                }
                other => Err(bad(path, format!("expected true or false, got {}", kind(other)))),
            },
            Ty::Enum(name) => {
                w.i32(self.enum_value(name, v, path)?);
                Ok(())
            }
            Ty::OpaqueFixed(n) => {
                let b = self.bytes(v, path)?;
                if b.len() != *n as usize {
                    return Err(bad(path, format!("opaque[{n}] needs exactly {n} bytes, got {}", b.len())));
                }
                w.fixed(&b);
                Ok(())
            }
            Ty::OpaqueVar(m) => {
                let b = self.bytes(v, path)?;
                if b.len() > *m as usize {
                    return Err(bad(path, format!("opaque longer than {m} ({} bytes)", b.len())));
                }
                if body && w.is_native() {
                    w.body(&b)
                } else {
                    w.var(&b)
                }
                Ok(())
            }
            Ty::Str(m) => {
                let s = v.as_str().ok_or_else(|| bad(path, format!("expected a string, got {}", kind(v))))?;
                if s.len() > *m as usize {
                    return Err(bad(path, format!("string longer than {m} ({} bytes)", s.len())));
                }
                if body && w.is_native() {
                    w.body(s.as_bytes())
                } else {
                    w.var(s.as_bytes())
                }
                Ok(())
            }
            Ty::ArrFixed(e, n) => {
                let a = v.as_array().ok_or_else(|| bad(path, format!("expected an array, got {}", kind(v))))?;
                if a.len() != *n as usize {
                    return Err(bad(path, format!("{} needs exactly {n} elements, got {}", ty.text(), a.len())));
                }
                for (i, x) in a.iter().enumerate() {
                    self.enc(e, x, &format!("{path}[{i}]"), w, false, depth)?;
                }
                Ok(())
            }
            Ty::ArrVar(e, m) => {
                let a = v.as_array().ok_or_else(|| bad(path, format!("expected an array, got {}", kind(v))))?;
                if a.len() > *m as usize {
                    return Err(bad(path, format!("more than {m} elements ({})", a.len())));
                }
                w.u32(a.len() as u32);
                for (i, x) in a.iter().enumerate() {
                    self.enc(e, x, &format!("{path}[{i}]"), w, false, depth)?;
                }
                Ok(())
            }
            Ty::Opt(e) => match v {
                Json::Null => {
                    w.bool(false);
                    Ok(())
                }
                x => {
                    w.bool(true);
                    self.enc(e, x, path, w, false, depth + 1)
                }
            },
            Ty::Struct(name) => {
                let obj =
                    v.as_object().ok_or_else(|| bad(path, format!("expected an object ({name}), got {}", kind(v))))?;
                let fields = self.types.fields(name);
                if let Some(k) = obj.keys().find(|k| !fields.iter().any(|f| &f.name.name == *k)) {
                    return Err(bad(path, format!("{name} has no field {k:?}")));
                }
                for f in fields {
                    let t = self.types.of_decl(&f.kind);
                    self.enc(&t, field(obj, &f.name.name, path)?, &format!("{path}.{}", f.name.name), w, false, depth)?;
                }
                Ok(())
            }
            Ty::Union(name) => self.enc_union(name, v, path, w, depth),
        }
    }

    fn enum_value(&self, name: &str, v: &Json, path: &str) -> Result<i32, Error> {
        let members = self.types.members(name);
        match v {
            Json::String(s) => members.iter().find(|(n, _)| n == s).map(|(_, v)| *v).ok_or_else(|| {
                let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
                bad(path, format!("unknown {name} name {s:?} (one of {})", names.join(", ")))
            }),
            Json::Number(_) => {
                let n = integer(v, path, name, false)?;
                members
                    .iter()
                    .find(|(_, m)| *m as i128 == n)
                    .map(|(_, m)| *m)
                    .ok_or_else(|| bad(path, format!("{n} is not a value of {name}")))
            }
            other => Err(bad(path, format!("expected a {name} name, got {}", kind(other)))),
        }
    }

    fn bytes(&self, v: &Json, path: &str) -> Result<Vec<u8>, Error> {
        let s = v.as_str().ok_or_else(|| bad(path, format!("expected base64 text, got {}", kind(v))))?;
        B64.decode(s).map_err(|e| bad(path, format!("not standard padded base64: {e}")))
    }

    /// The discriminant's type and its value in `v` (as i128 for label matching).
    fn enc_union(&self, name: &str, v: &Json, path: &str, w: &mut Writer<'_>, depth: usize) -> Result<(), Error> {
        let u = self.types.union(name).ok_or_else(|| bad(path, format!("{name} is not a union")))?;
        let obj = v.as_object().ok_or_else(|| bad(path, format!("expected an object ({name}), got {}", kind(v))))?;
        let dname = &u.disc.name.name;
        let dty = self.types.of_decl(&u.disc.kind);
        let dpath = format!("{path}.{dname}");
        let dv = field(obj, dname, path)?;
        let d: i128 = match &dty {
            Ty::Enum(e) => self.enum_value(e, dv, &dpath)? as i128,
            Ty::Bool => match dv {
                Json::Bool(b) => *b as i128,
                other => return Err(bad(&dpath, format!("expected true or false, got {}", kind(other)))),
            },
            Ty::U32 => {
                in_range(integer(dv, &dpath, "an unsigned int", false)?, 0, u32::MAX as i128, &dpath, "unsigned int")?
            }
            _ => in_range(integer(dv, &dpath, "an int", false)?, i32::MIN as i128, i32::MAX as i128, &dpath, "int")?,
        };
        self.enc(&dty, dv, &dpath, w, false, depth)?;
        let arm = self
            .arm(u, d)
            .ok_or_else(|| bad(&dpath, format!("{d} selects no arm of {name} (and it has no default)")))?;
        match arm {
            None => {
                if let Some(k) = obj.keys().find(|k| *k != dname) {
                    return Err(bad(path, format!("this arm of {name} is void; unexpected field {k:?}")));
                }
                Ok(())
            }
            Some(decl) => {
                let an = &decl.name.name;
                if let Some(k) = obj.keys().find(|k| *k != dname && *k != an) {
                    return Err(bad(path, format!("unexpected field {k:?} (this arm of {name} is {an:?})")));
                }
                let t = self.types.of_decl(&decl.kind);
                self.enc(&t, field(obj, an, path)?, &format!("{path}.{an}"), w, false, depth)
            }
        }
    }

    /// The arm a discriminant selects: `Some(None)` for a void arm, `None` for no arm at all.
    fn arm<'u>(&self, u: &'u lowlat_idl::ast::UnionDef, d: i128) -> Option<Option<&'u lowlat_idl::ast::Decl>> {
        for a in &u.arms {
            if a.labels.iter().any(|l| self.label(l) == d) {
                return Some(a.decl.as_ref());
            }
        }
        u.default.as_ref().map(|(_, decl)| decl.as_ref())
    }

    fn label(&self, l: &lowlat_idl::ast::Value) -> i128 {
        let v = self.types.c.value(l);
        // TRUE and FALSE are labels of bool discriminants.
        match l {
            lowlat_idl::ast::Value::Name(i) if i.name == "TRUE" => 1,
            lowlat_idl::ast::Value::Name(i) if i.name == "FALSE" => 0,
            _ => v,
        }
    }

    /// Reads a value of type `ty`.
    pub fn decode(&self, ty: &Ty, r: &mut Reader<'_>, path: &str, body: bool) -> Result<Json, Error> {
        self.dec(ty, r, path, body, 0)
    }

    fn dec(&self, ty: &Ty, r: &mut Reader<'_>, path: &str, body: bool, depth: usize) -> Result<Json, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::Decode { path: path.to_string(), reason: "optional data nested too deeply".into() });
        }
        Ok(match ty {
            Ty::Void => Json::Null,
            Ty::I32 => Json::from(rd!(r, path, get_i32)?),
            Ty::U32 => Json::from(rd!(r, path, get_u32)?),
            Ty::I64 => Json::String(rd!(r, path, get_i64)?.to_string()),
            Ty::U64 => Json::String(rd!(r, path, get_u64)?.to_string()),
            Ty::F32 => Number::from_f64(rd!(r, path, get_f32)? as f64).map_or(Json::Null, Json::Number),
            Ty::F64 => Number::from_f64(rd!(r, path, get_f64)?).map_or(Json::Null, Json::Number),
            Ty::Bool => Json::Bool(rd!(r, path, get_bool)?),
            Ty::Enum(name) => {
                let v = rd!(r, path, get_i32)?;
                match self.types.members(name).into_iter().find(|(_, m)| *m == v) {
                    Some((n, _)) => Json::String(n),
                    None => {
                        return Err(Error::Decode {
                            path: path.to_string(),
                            reason: format!("{v} is not a value of {name}"),
                        })
                    }
                }
            }
            Ty::OpaqueFixed(n) => Json::String(B64.encode(rd!(r, path, get_opaque_fixed, *n as usize)?)),
            Ty::OpaqueVar(m) => {
                let b = match r {
                    Reader::Native(n) if body => n.get_body_opaque(*m, "opaque").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_opaque_var, *m, "opaque")?,
                };
                Json::String(B64.encode(b))
            }
            Ty::Str(m) => {
                let s = match r {
                    Reader::Native(n) if body => n.get_body_string(*m, "string").map_err(|e| derr(path, e))?,
                    _ => rd!(r, path, get_string, *m, "string")?,
                };
                Json::String(s.to_string())
            }
            Ty::ArrFixed(e, n) => {
                let mut a = Vec::with_capacity((*n as usize).min(4096));
                for i in 0..*n {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth)?);
                }
                Json::Array(a)
            }
            Ty::ArrVar(e, m) => {
                let n = rd!(r, path, get_count, *m, "array")?;
                let mut a = Vec::with_capacity(n.min(4096));
                for i in 0..n {
                    a.push(self.dec(e, r, &format!("{path}[{i}]"), false, depth)?);
                }
                Json::Array(a)
            }
            Ty::Opt(e) => {
                if rd!(r, path, get_bool)? {
                    self.dec(e, r, path, false, depth + 1)?
                } else {
                    Json::Null
                }
            }
            Ty::Struct(name) => {
                let mut obj = Map::new();
                for f in self.types.fields(name) {
                    let t = self.types.of_decl(&f.kind);
                    let v = self.dec(&t, r, &format!("{path}.{}", f.name.name), false, depth)?;
                    obj.insert(f.name.name.clone(), v);
                }
                Json::Object(obj)
            }
            Ty::Union(name) => {
                let u = self
                    .types
                    .union(name)
                    .ok_or_else(|| Error::Decode { path: path.into(), reason: format!("{name} is not a union") })?;
                let dname = &u.disc.name.name;
                let dty = self.types.of_decl(&u.disc.kind);
                let dpath = format!("{path}.{dname}");
                let dv = self.dec(&dty, r, &dpath, false, depth)?;
                let d: i128 = match (&dty, &dv) {
                    (Ty::Enum(e), Json::String(s)) => {
                        self.types.members(e).into_iter().find(|(n, _)| n == s).map_or(0, |(_, v)| v as i128)
                    }
                    (_, Json::Bool(b)) => *b as i128,
                    (_, v) => v.as_i64().map_or(0, |n| n as i128),
                };
                let mut obj = Map::new();
                obj.insert(dname.clone(), dv);
                match self.arm(u, d) {
                    None => return Err(Error::Decode { path: dpath, reason: format!("{d} selects no arm of {name}") }),
                    Some(None) => {}
                    Some(Some(decl)) => {
                        let t = self.types.of_decl(&decl.kind);
                        let v = self.dec(&t, r, &format!("{path}.{}", decl.name.name), false, depth)?;
                        obj.insert(decl.name.name.clone(), v);
                    }
                }
                Json::Object(obj)
            }
        })
    }

    /// Encodes a procedure's argument list: `args` is the JSON given for it (see the crate doc).
    pub fn encode_args(
        &self,
        args: &[(String, Ty)],
        v: &Json,
        out: &mut Vec<u8>,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        let mut w = match order {
            Some(o) => Writer::Native(NativeWriter::new(out, o)),
            None => Writer::Xdr(XdrWriter::new(out)),
        };
        match args.len() {
            0 => match v {
                Json::Null => Ok(()),
                other => Err(bad("argument", format!("the procedure takes no argument (void); got {}", kind(other)))),
            },
            1 => self.encode(&args[0].1, v, "argument", &mut w, true),
            n => {
                let values: Vec<(&str, &Json)> = match v {
                    Json::Array(a) if a.len() == n => {
                        args.iter().zip(a).map(|((name, _), x)| (name.as_str(), x)).collect()
                    }
                    Json::Array(a) => return Err(bad("argument", format!("expected {n} arguments, got {}", a.len()))),
                    Json::Object(o) => {
                        if let Some(k) = o.keys().find(|k| !args.iter().any(|(a, _)| a == *k)) {
                            return Err(bad("argument", format!("no argument named {k:?}")));
                        }
                        let mut vals = Vec::new();
                        for (name, _) in args {
                            vals.push((name.as_str(), field(o, name, "argument")?));
                        }
                        vals
                    }
                    other => {
                        return Err(bad(
                            "argument",
                            format!("expected an array or object of {n} arguments, got {}", kind(other)),
                        ))
                    }
                };
                for ((name, ty), (_, x)) in args.iter().zip(values) {
                    self.encode(ty, x, &format!("argument.{name}"), &mut w, false)?;
                }
                Ok(())
            }
        }
    }

    /// Decodes a procedure's result body (`None` type: void, JSON null).
    pub fn decode_result(&self, ty: Option<&Ty>, body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        let mut r = match order {
            Some(o) => Reader::Native(NativeReader::new(body, o)),
            None => Reader::Xdr(XdrReader::new(body)),
        };
        let v = match ty {
            None => Json::Null,
            Some(t) => self.decode(t, &mut r, "result", true)?,
        };
        r.finish("result")?;
        Ok(v)
    }

    /// Decodes an argument list (as a server would): the JSON `encode_args` accepts.
    pub fn decode_args(&self, args: &[(String, Ty)], body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        let mut r = match order {
            Some(o) => Reader::Native(NativeReader::new(body, o)),
            None => Reader::Xdr(XdrReader::new(body)),
        };
        let v = match args.len() {
            0 => Json::Null,
            1 => self.decode(&args[0].1, &mut r, "argument", true)?,
            _ => {
                let mut obj = Map::new();
                for (name, ty) in args {
                    obj.insert(name.clone(), self.decode(ty, &mut r, &format!("argument.{name}"), false)?);
                }
                Json::Object(obj)
            }
        };
        r.finish("argument")?;
        Ok(v)
    }
}
