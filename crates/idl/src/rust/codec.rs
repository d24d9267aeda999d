//! Straight-line codecs in both encodings: `Xdr` and `Native` impls for every enumeration,
//! struct and union, and per-procedure functions that encode and decode whole argument lists
//! and results (a single opaque or string is the whole native body, without a length).

use super::names::{ArmNames, ProcNames};
use super::types::{borrows, is_copy_scalar};
use super::Gen;
use crate::model::{max_len, Case, Discriminant, EnumId, Procedure, StructId, Type, UnionId};

/// One of the two encodings.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Enc {
    Xdr,
    Native,
}

impl Enc {
    pub(super) const BOTH: [Enc; 2] = [Enc::Xdr, Enc::Native];

    pub(super) fn name(self) -> &'static str {
        match self {
            Enc::Xdr => "xdr",
            Enc::Native => "native",
        }
    }

    fn trait_name(self) -> &'static str {
        match self {
            Enc::Xdr => "Xdr",
            Enc::Native => "Native",
        }
    }

    fn writer(self) -> &'static str {
        match self {
            Enc::Xdr => "XdrWriter",
            Enc::Native => "NativeWriter",
        }
    }

    fn reader(self) -> &'static str {
        match self {
            Enc::Xdr => "XdrReader",
            Enc::Native => "NativeReader",
        }
    }
}

/// A value to encode: a place of type `T`, or an expression of type `&T`.
#[derive(Clone)]
enum Ex {
    Place(String),
    Ref(String),
}

impl Ex {
    fn by_ref(&self) -> String {
        match self {
            Ex::Place(p) => format!("&{p}"),
            Ex::Ref(r) => r.clone(),
        }
    }

    fn by_val(&self) -> String {
        match self {
            Ex::Place(p) => p.clone(),
            Ex::Ref(r) => format!("*{r}"),
        }
    }

    fn recv(&self) -> String {
        match self {
            Ex::Place(p) | Ex::Ref(p) => p.clone(),
        }
    }
}

/// The zero value of a plain number type, as Rust source.
fn zero(ty: &Type) -> Option<&'static str> {
    match ty.resolved() {
        Type::Int | Type::UInt | Type::Hyper | Type::UHyper => Some("0"),
        Type::Float | Type::Double => Some("0.0"),
        Type::Bool => Some("false"),
        _ => None,
    }
}

/// A function argument decoding one item from `r`: the decoder's path itself when the
/// expression is `path(r)?`, otherwise a closure returning `Result`.
fn closure_arg(inner: &str) -> String {
    if let Some(path) = inner.strip_suffix("(r)?") {
        if path.starts_with('<') && !path.contains('(') {
            return path.to_string();
        }
    }
    match inner.strip_suffix('?') {
        Some(call) if !has_question_mark_outside_parentheses(call) => format!("|r| {call}"),
        _ => format!("|r| Ok({inner})"),
    }
}

/// Whether `expr` applies `?` outside every parenthesis (a `?` inside them, in a nested
/// closure's body say, leaves the expression's own value a `Result` to return as it is).
fn has_question_mark_outside_parentheses(expr: &str) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    for c in expr.chars() {
        match c {
            '"' => in_string = !in_string,
            _ if in_string => {}
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '?' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

impl Gen<'_> {
    /// Statements appending `ex` (of type `ty`) to the writer `w`.
    fn enc(&mut self, ty: &Type, ex: &Ex, what: &str, e: Enc, depth: usize) {
        let cp = self.cp();
        match ty {
            Type::Typedef(_, t) => self.enc(t, ex, what, e, depth),
            Type::Int => self.line(format!("w.put_i32({});", ex.by_val())),
            Type::UInt => self.line(format!("w.put_u32({});", ex.by_val())),
            Type::Hyper => self.line(format!("w.put_i64({});", ex.by_val())),
            Type::UHyper => self.line(format!("w.put_u64({});", ex.by_val())),
            Type::Float => self.line(format!("w.put_f32({});", ex.by_val())),
            Type::Double => self.line(format!("w.put_f64({});", ex.by_val())),
            Type::Bool => self.line(format!("w.put_bool({});", ex.by_val())),
            t @ (Type::Enum(_) | Type::Struct(_) | Type::Union(_)) => {
                let t = self.rust_ty(t);
                self.line(format!("<{t} as {cp}::{}>::encode_{}({}, w)?;", e.trait_name(), e.name(), ex.by_ref()))
            }
            Type::FixedOpaque(_) => self.line(format!("w.put_opaque_fixed({});", ex.by_ref())),
            Type::VarOpaque(m) => self.line(format!("w.put_opaque_var({}, {}, {what:?})?;", ex.by_ref(), max_len(*m))),
            Type::String(m) => self.line(format!("w.put_string({}, {}, {what:?})?;", ex.by_ref(), max_len(*m))),
            t @ (Type::FixedArray(el, _) | Type::VarArray(el, _)) => {
                if let Type::VarArray(_, m) = t {
                    self.line(format!("w.put_count({}.len(), {}, {what:?})?;", ex.recv(), max_len(*m)));
                }
                let x = format!("x{depth}");
                self.open(format!("for {x} in {}.iter() {{", ex.recv()));
                self.enc(el, &Ex::Ref(x), &format!("{what}[]"), e, depth + 1);
                self.close("}");
            }
            Type::Optional(el) => {
                let x = format!("x{depth}");
                self.open(format!("match {}.as_deref() {{", ex.recv()));
                self.open(format!("Some({x}) => {{"));
                self.line("w.put_bool(true);");
                self.enc(el, &Ex::Ref(x), &format!("{what}*"), e, depth + 1);
                self.close("}");
                self.line("None => w.put_bool(false),");
                self.close("}");
            }
        }
    }

    /// An expression of the owned type, read from the reader `r` (it uses `?`). `what` is the
    /// item's `.x` spelling, for errors; where it lies comes with the error's path (`r.field`,
    /// `r.element`), added by the field, argument or array around it.
    fn dec(&self, ty: &Type, what: &str, e: Enc, depth: usize) -> String {
        let cp = self.cp();
        match ty {
            Type::Typedef(_, t) => self.dec(t, what, e, depth),
            Type::Int => "r.get_i32()?".into(),
            Type::UInt => "r.get_u32()?".into(),
            Type::Hyper => "r.get_i64()?".into(),
            Type::UHyper => "r.get_u64()?".into(),
            Type::Float => "r.get_f32()?".into(),
            Type::Double => "r.get_f64()?".into(),
            Type::Bool => "r.get_bool()?".into(),
            t @ (Type::Enum(_) | Type::Struct(_) | Type::Union(_)) => {
                format!("<{} as {cp}::{}>::decode_{}(r)?", self.rust_ty(t), e.trait_name(), e.name())
            }
            Type::FixedOpaque(n) => format!("r.get_opaque_array::<{}>()?", n.value),
            Type::VarOpaque(m) => format!("r.get_opaque_var({}, {what:?})?.to_vec()", max_len(*m)),
            Type::String(m) => format!("r.get_string({}, {what:?})?.to_owned()", max_len(*m)),
            Type::FixedArray(el, n) => {
                let inner = self.dec(el, &self.m.spelling(el), e, depth + 1);
                match zero(el) {
                    // Arrays of plain numbers fill in place: no allocation.
                    Some(z) => {
                        let (a, i, x) = (format!("a{depth}"), format!("i{depth}"), format!("x{depth}"));
                        format!(
                            "{{ let mut {a} = [{z}; {}]; for ({i}, {x}) in {a}.iter_mut().enumerate() {{ *{x} = r.element({i}, {})?; }} {a} }}",
                            n.value,
                            closure_arg(&inner)
                        )
                    }
                    // The reader says which element failed.
                    None => format!("r.get_array::<_, {}>({})?", n.value, closure_arg(&inner)),
                }
            }
            Type::VarArray(el, m) => {
                let inner = self.dec(el, &self.m.spelling(el), e, depth + 1);
                let (n, v, i) = (format!("n{depth}"), format!("v{depth}"), format!("i{depth}"));
                format!(
                    "{{ let {n} = r.get_count({}, {what:?})?; let mut {v} = ::std::vec::Vec::with_capacity({n}); for {i} in 0..{n} {{ {v}.push(r.element({i}, {})?); }} {v} }}",
                    max_len(*m),
                    closure_arg(&inner)
                )
            }
            Type::Optional(el) => {
                let inner = self.dec(el, &self.m.spelling(el), e, depth + 1);
                format!("r.get_optional({})?", closure_arg(&inner))
            }
        }
    }

    /// An expression reading the field, argument or union arm `name` (its `.x` name) of type
    /// `ty`, whose errors then say they happened there.
    fn dec_field(&self, name: &str, ty: &Type, e: Enc) -> String {
        let inner = self.dec(ty, &self.m.spelling(ty), e, 0);
        format!("r.field({name:?}, {})?", closure_arg(&inner))
    }

    fn impl_open(&mut self, e: Enc, rust: &str) {
        let cp = self.cp();
        self.open(format!("impl {cp}::{} for {rust} {{", e.trait_name()));
    }

    fn enc_fn_open(&mut self, e: Enc) {
        let cp = self.cp();
        self.open(format!(
            "fn encode_{}<B: {cp}::Sink + ?Sized>(&self, w: &mut {cp}::{}<'_, B>) -> ::std::result::Result<(), {cp}::EncodeError> {{",
            e.name(),
            e.writer()
        ));
    }

    fn dec_fn_open(&mut self, e: Enc) {
        let cp = self.cp();
        self.open(format!(
            "fn decode_{}(r: &mut {cp}::{}<'_>) -> ::std::result::Result<Self, {cp}::DecodeError> {{",
            e.name(),
            e.reader()
        ));
    }

    pub(super) fn enum_codecs(&mut self, id: EnumId) {
        let cp = self.cp();
        let rust = self.names.enums[id.index()].0.clone();
        let xname = self.m[id].name.clone();
        for e in Enc::BOTH {
            self.line("");
            self.impl_open(e, &rust);
            self.enc_fn_open(e);
            self.line("w.put_i32(*self as i32);");
            self.line("Ok(())");
            self.close("}");
            self.dec_fn_open(e);
            self.line("let offset = r.pos();");
            self.line("let value = r.get_i32()?;");
            self.line(format!(
                "Self::from_i32(value).ok_or({cp}::DecodeError::BadEnum {{ type_name: {xname:?}, value, offset }})"
            ));
            self.close("}");
            self.close("}");
        }
    }

    pub(super) fn struct_codecs(&mut self, id: StructId) {
        let m = self.m;
        let s = &m[id];
        let (rust, fields) = self.names.structs[id.index()].clone();
        for e in Enc::BOTH {
            self.line("");
            self.impl_open(e, &rust);
            self.enc_fn_open(e);
            for (f, name) in s.fields.iter().zip(&fields) {
                let what = format!("{}.{}: {}", s.name, f.name, m.spelling(&f.ty));
                self.enc(&f.ty, &Ex::Place(format!("self.{name}")), &what, e, 0);
            }
            self.line("Ok(())");
            self.close("}");
            self.dec_fn_open(e);
            self.open("Ok(Self {");
            for (f, name) in s.fields.iter().zip(&fields) {
                let d = self.dec_field(&f.name, &f.ty, e);
                self.line(format!("{name}: {d},"));
            }
            self.close("})");
            self.close("}");
            self.close("}");
        }
    }

    /// The Rust pattern (and expression) a case label stands for.
    fn case_pat(&self, switch: Discriminant, c: &Case) -> String {
        match switch {
            // The checker admits only the enumeration's members as its cases.
            Discriminant::Enum(id) => match self.m[id].members.iter().position(|m| i64::from(m.value) == c.value) {
                Some(i) => format!("{}::{}", self.rust_ty(&Type::Enum(id)), self.names.enums[id.index()].1[i]),
                None => c.value.to_string(),
            },
            Discriminant::Bool => (c.value != 0).to_string(),
            Discriminant::Int | Discriminant::UInt => c.value.to_string(),
        }
    }

    pub(super) fn union_codecs(&mut self, id: UnionId) {
        let m = self.m;
        let u = &m[id];
        let cp = self.cp();
        let (rust, arm_names) = self.names.unions[id.index()].clone();
        let put_disc = |x: &str| match u.switch {
            Discriminant::UInt => format!("w.put_u32({x});"),
            Discriminant::Bool => format!("w.put_bool({x});"),
            Discriminant::Enum(_) => format!("w.put_i32({x} as i32);"),
            Discriminant::Int => format!("w.put_i32({x});"),
        };
        let as_i64 = |x: &str| match u.switch {
            Discriminant::Enum(_) => format!("{x} as i64"),
            _ => format!("i64::from({x})"),
        };
        let all_cases: Vec<String> = u.arms.iter().flat_map(|a| &a.cases).map(|c| self.case_pat(u.switch, c)).collect();
        // Every value of a bool or enumeration discriminant has a case: no default to decode.
        let distinct: std::collections::HashSet<i64> = u.arms.iter().flat_map(|a| &a.cases).map(|c| c.value).collect();
        let all_covered = match u.switch {
            Discriminant::Bool => distinct.len() == 2,
            Discriminant::Enum(eid) => m[eid].members.iter().all(|mem| distinct.contains(&i64::from(mem.value))),
            _ => false,
        };
        for e in Enc::BOTH {
            self.line("");
            self.impl_open(e, &rust);
            self.enc_fn_open(e);
            self.open("match self {");
            for (arm, names) in u.arms.iter().zip(&arm_names) {
                let pats: Vec<String> = arm.cases.iter().map(|c| self.case_pat(u.switch, c)).collect();
                match (names, &arm.field) {
                    (ArmNames::Data(v), Some(f)) => {
                        let what = format!("{}.{}: {}", u.name, f.name, m.spelling(&f.ty));
                        if pats.len() > 1 {
                            self.open(format!("Self::{v}(d, v) => {{"));
                            self.open(format!("if !matches!(*d, {}) {{", pats.join(" | ")));
                            self.line(format!(
                                "return Err({cp}::EncodeError::NotACaseOfArm {{ type_name: {:?}, arm: {:?}, value: {} }});",
                                u.name,
                                f.name,
                                as_i64("*d")
                            ));
                            self.close("}");
                            self.line(put_disc("*d"));
                        } else {
                            self.open(format!("Self::{v}(v) => {{"));
                            self.line(put_disc(&pats[0]));
                        }
                        self.enc(&f.ty, &Ex::Ref("v".into()), &what, e, 0);
                        self.close("}");
                    }
                    (ArmNames::Void(vs), _) => {
                        for (v, pat) in vs.iter().zip(&pats) {
                            self.line(format!("Self::{v} => {},", put_disc(pat).trim_end_matches(';')));
                        }
                    }
                    (ArmNames::Data(_), None) => {}
                }
            }
            if let Some(def) = &u.default {
                let bind = if def.field.is_some() { "Self::Default(d, v)" } else { "Self::Default(d)" };
                self.open(format!("{bind} => {{"));
                self.open(format!("if matches!(*d, {}) {{", all_cases.join(" | ")));
                self.line(format!(
                    "return Err({cp}::EncodeError::DefaultArmTakesExplicitCase {{ type_name: {:?}, value: {} }});",
                    u.name,
                    as_i64("*d")
                ));
                self.close("}");
                self.line(put_disc("*d"));
                if let Some(f) = &def.field {
                    let what = format!("{}.{}: {}", u.name, f.name, m.spelling(&f.ty));
                    self.enc(&f.ty, &Ex::Ref("v".into()), &what, e, 0);
                }
                self.close("}");
            }
            self.close("}");
            self.line("Ok(())");
            self.close("}");

            self.dec_fn_open(e);
            let needs_offset = u.default.is_none() && !all_covered;
            if needs_offset {
                self.line("let offset = r.pos();");
            }
            let get = match u.switch {
                Discriminant::UInt => "r.get_u32()?".to_string(),
                Discriminant::Bool => "r.get_bool()?".to_string(),
                Discriminant::Enum(eid) => self.dec(&Type::Enum(eid), "", e, 0),
                Discriminant::Int => "r.get_i32()?".to_string(),
            };
            self.line(format!("let d = {get};"));
            self.open("match d {");
            for (arm, names) in u.arms.iter().zip(&arm_names) {
                let pats: Vec<String> = arm.cases.iter().map(|c| self.case_pat(u.switch, c)).collect();
                match (names, &arm.field) {
                    (ArmNames::Data(v), Some(f)) => {
                        let dx = self.dec_field(&f.name, &f.ty, e);
                        let with_d = if pats.len() > 1 { "d, " } else { "" };
                        self.line(format!("{} => Ok(Self::{v}({with_d}{dx})),", pats.join(" | ")));
                    }
                    (ArmNames::Void(vs), _) => {
                        for (v, pat) in vs.iter().zip(&pats) {
                            self.line(format!("{pat} => Ok(Self::{v}),"));
                        }
                    }
                    (ArmNames::Data(_), None) => {}
                }
            }
            if !all_covered {
                match u.default.as_ref().map(|d| d.field.as_ref()) {
                    Some(Some(f)) => {
                        let dx = self.dec_field(&f.name, &f.ty, e);
                        self.line(format!("_ => Ok(Self::Default(d, {dx})),"));
                    }
                    Some(None) => self.line("_ => Ok(Self::Default(d)),"),
                    None => self.line(format!(
                        "_ => Err({cp}::DecodeError::BadDiscriminant {{ type_name: {:?}, value: {}, offset }}),",
                        u.name,
                        as_i64("d")
                    )),
                }
            }
            self.close("}");
            self.close("}");
            self.close("}");
        }
    }

    /// A parameter name bound to a value of `ty`: by value for scalars, else a reference.
    fn param_ex(ty: &Type, name: &str) -> Ex {
        if is_copy_scalar(ty) {
            Ex::Place(name.into())
        } else {
            Ex::Ref(name.into())
        }
    }

    /// A decoder of a procedure's argument or result: views for opaque data and strings.
    fn view_dec(&self, ty: &Type, what: &str, e: Enc, body: bool) -> String {
        match (ty.resolved(), body) {
            (Type::VarOpaque(m), true) => format!("r.get_body_opaque({}, {what:?})?", max_len(*m)),
            (Type::String(m), true) => format!("r.get_body_string({}, {what:?})?", max_len(*m)),
            (Type::VarOpaque(m), false) => format!("r.get_opaque_var({}, {what:?})?", max_len(*m)),
            (Type::String(m), false) => format!("r.get_string({}, {what:?})?", max_len(*m)),
            (t, _) => self.dec(t, what, e, 0),
        }
    }

    /// `encode_/decode_{proc}_{args,result}_{xdr,native}`.
    pub(super) fn proc_codecs(&mut self, pr: &Procedure, names: &ProcNames, e: Enc) {
        let cp = self.cp();
        let en = e.name();
        let order_param = if e == Enc::Native { format!(", order: {cp}::ByteOrder") } else { String::new() };
        let order_arg = if e == Enc::Native { ", order" } else { "" };
        let args: Vec<(String, Type)> = names.args.iter().cloned().zip(pr.args.iter().map(|a| a.ty.clone())).collect();
        let result: Vec<(String, Type)> = pr.result.iter().map(|t| ("result".to_string(), t.clone())).collect();
        // The `.x` names, which a decoding error's path starts from.
        let arg_names: Vec<&str> = pr.args.iter().map(|a| a.name.as_str()).collect();
        for (side, vals, xnames) in [("args", args, arg_names), ("result", result, vec!["result"])] {
            if vals.is_empty() {
                continue;
            }
            let body = e == Enc::Native && vals.len() == 1 && borrows(&vals[0].1);
            let label = format!("{} {side}", pr.name);
            // Encoder.
            let params: Vec<String> = vals.iter().map(|(n, t)| format!("{n}: {}", self.param_ty(t))).collect();
            self.line("");
            self.line(format!("/// Appends the {en} encoding of `{}`'s {side}.", pr.name));
            if params.len() + 1 + usize::from(e == Enc::Native) > 7 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.open(format!(
                "pub fn encode_{}_{side}_{en}<B: {cp}::Sink + ?Sized>(buf: &mut B{order_param}, {}) -> ::std::result::Result<(), {cp}::EncodeError> {{",
                names.method,
                params.join(", ")
            ));
            self.line(format!("let w = &mut {cp}::{}::new(buf{order_arg});", e.writer()));
            for (n, t) in &vals {
                let what = format!("{label}: {}", self.m.spelling(t));
                if body {
                    let max = match t.resolved() {
                        Type::VarOpaque(m) | Type::String(m) => max_len(*m),
                        _ => u32::MAX,
                    };
                    let bytes =
                        if matches!(t.resolved(), Type::String(_)) { format!("{n}.as_bytes()") } else { n.clone() };
                    self.line(format!("w.put_body_opaque({bytes}, {max}, {what:?})?;"));
                } else {
                    self.enc(t, &Self::param_ex(t, n), &what, e, 0);
                }
            }
            self.line("Ok(())");
            self.close("}");
            // Decoder: views borrow from `body`, the only reference in, so lifetimes elide.
            let views: Vec<String> = vals.iter().map(|(_, t)| self.view_ty(t)).collect();
            let ret = if views.len() == 1 { views[0].clone() } else { format!("({})", views.join(", ")) };
            self.line("");
            self.line(format!("/// Decodes `{}`'s {side} from a whole {en} message body.", pr.name));
            self.open(format!(
                "pub fn decode_{}_{side}_{en}(body: &[u8]{order_param}) -> ::std::result::Result<{ret}, {cp}::DecodeError> {{",
                names.method
            ));
            self.line(format!("let r = &mut {cp}::{}::new(body{order_arg});", e.reader()));
            for ((n, t), x) in vals.iter().zip(&xnames) {
                let d = self.view_dec(t, &self.m.spelling(t), e, body);
                self.line(format!("let {n} = r.field({x:?}, {})?;", closure_arg(&d)));
            }
            self.line("r.finish()?;");
            let names: Vec<&str> = vals.iter().map(|(n, _)| n.as_str()).collect();
            if names.len() == 1 {
                self.line(format!("Ok({})", names[0]));
            } else {
                self.line(format!("Ok(({}))", names.join(", ")));
            }
            self.close("}");
        }
    }
}
