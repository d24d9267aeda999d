//! The Rust generator: types, straight-line XDR and native codecs, per-procedure codecs, and
//! (with a runtime path) a typed client and a server trait for each program version.
//!
//! Everything generated refers to the codec and runtime through the configured paths only, uses
//! fully qualified names, and needs no `use` at the include site.

use std::collections::{HashMap, HashSet};

use crate::ast::*;
use crate::check::{Checked, TypeDef};
use crate::diag::{Diagnostic, Source};
use crate::names::{camel, screaming, snake};

/// Options of the Rust generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Path of the codec crate in generated code. Default `::lowlat::codec`.
    pub codec_path: String,
    /// Path of the runtime crate; `None` generates types and codecs only (no client, no server).
    /// Default `Some("::lowlat")`.
    pub runtime_path: Option<String>,
    /// Procedures (by their `.x` name) registered with `Program::long_running`, so they run on
    /// the server's worker pool instead of the receiving thread. Default: none.
    pub long_running: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            codec_path: "::lowlat::codec".into(),
            runtime_path: Some("::lowlat".into()),
            long_running: Vec::new(),
        }
    }
}

/// A type after typedefs are expanded.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    Bool,
    Enum(String),
    Struct(String),
    Union(String),
    OpaqueFixed(u32),
    OpaqueVar(u32),
    Str(u32),
    ArrFixed(Box<Ty>, u32),
    ArrVar(Box<Ty>, u32),
    Opt(Box<Ty>),
}

impl Ty {
    fn is_copy_scalar(&self) -> bool {
        matches!(self, Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64 | Ty::F32 | Ty::F64 | Ty::Bool | Ty::Enum(_))
    }
    fn borrows(&self) -> bool {
        matches!(self, Ty::OpaqueVar(_) | Ty::Str(_))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Enc {
    Xdr,
    Native,
}

impl Enc {
    fn name(self) -> &'static str {
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

struct Gen<'a> {
    c: &'a Checked,
    src: &'a Source,
    opts: &'a Options,
    out: String,
    indent: usize,
    diags: Vec<Diagnostic>,
    /// Prefix for user types: empty at top level, `super::` inside a version module.
    scope: &'static str,
    no_float: HashMap<String, bool>,
}

/// Generates one Rust file for a checked spec.
pub fn generate(c: &Checked, src: &Source, opts: &Options) -> Result<String, Vec<Diagnostic>> {
    let mut g =
        Gen { c, src, opts, out: String::new(), indent: 0, diags: Vec::new(), scope: "", no_float: HashMap::new() };
    g.file();
    if g.diags.is_empty() {
        Ok(g.out)
    } else {
        Err(g.diags)
    }
}

fn lit_max(m: u32) -> String {
    if m == u32::MAX {
        String::new()
    } else {
        m.to_string()
    }
}

impl<'a> Gen<'a> {
    fn line(&mut self, s: impl AsRef<str>) {
        let s = s.as_ref();
        if s.is_empty() {
            self.out.push('\n');
            return;
        }
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }
    fn open(&mut self, s: impl AsRef<str>) {
        self.line(s);
        self.indent += 1;
    }
    fn close(&mut self, s: impl AsRef<str>) {
        self.indent = self.indent.saturating_sub(1);
        self.line(s);
    }
    fn cp(&self) -> &str {
        &self.opts.codec_path
    }
    fn err(&mut self, id: &Ident, msg: String) {
        let d = self.src.diag(id.pos, msg);
        self.diags.push(d);
    }

    fn size(&self, v: &Value) -> u32 {
        u32::try_from(self.c.value(v)).unwrap_or(0)
    }
    fn max(&self, v: &Option<Value>) -> u32 {
        v.as_ref().map_or(u32::MAX, |v| self.size(v))
    }

    fn ty_of_spec(&self, t: &TypeSpec) -> Ty {
        match t {
            TypeSpec::Int => Ty::I32,
            TypeSpec::UInt => Ty::U32,
            TypeSpec::Hyper => Ty::I64,
            TypeSpec::UHyper => Ty::U64,
            TypeSpec::Float => Ty::F32,
            TypeSpec::Double => Ty::F64,
            TypeSpec::Bool => Ty::Bool,
            TypeSpec::Named(n) => match self.c.type_def(&n.name) {
                Some(TypeDef::Typedef(d)) => self.ty_of_decl(&d.kind),
                Some(TypeDef::Enum(..)) => Ty::Enum(n.name.clone()),
                Some(TypeDef::Struct(..)) => Ty::Struct(n.name.clone()),
                _ => Ty::Union(n.name.clone()),
            },
        }
    }

    fn ty_of_decl(&self, k: &DeclKind) -> Ty {
        match k {
            DeclKind::Scalar(t) => self.ty_of_spec(&t.spec),
            DeclKind::FixedArray(t, n) => Ty::ArrFixed(Box::new(self.ty_of_spec(&t.spec)), self.size(n)),
            DeclKind::VarArray(t, m) => Ty::ArrVar(Box::new(self.ty_of_spec(&t.spec)), self.max(m)),
            DeclKind::FixedOpaque(n) => Ty::OpaqueFixed(self.size(n)),
            DeclKind::VarOpaque(m) => Ty::OpaqueVar(self.max(m)),
            DeclKind::String(m) => Ty::Str(self.max(m)),
            DeclKind::Optional(t) => Ty::Opt(Box::new(self.ty_of_spec(&t.spec))),
        }
    }

    /// How the type reads in the `.x` language, for error messages.
    fn xdr_text(ty: &Ty) -> String {
        match ty {
            Ty::I32 => "int".into(),
            Ty::U32 => "unsigned int".into(),
            Ty::I64 => "hyper".into(),
            Ty::U64 => "unsigned hyper".into(),
            Ty::F32 => "float".into(),
            Ty::F64 => "double".into(),
            Ty::Bool => "bool".into(),
            Ty::Enum(n) | Ty::Struct(n) | Ty::Union(n) => n.clone(),
            Ty::OpaqueFixed(n) => format!("opaque[{n}]"),
            Ty::OpaqueVar(m) => format!("opaque<{}>", lit_max(*m)),
            Ty::Str(m) => format!("string<{}>", lit_max(*m)),
            Ty::ArrFixed(e, n) => format!("{}[{n}]", Self::xdr_text(e)),
            Ty::ArrVar(e, m) => format!("{}<{}>", Self::xdr_text(e), lit_max(*m)),
            Ty::Opt(e) => format!("{}*", Self::xdr_text(e)),
        }
    }

    fn rust_ty(&self, ty: &Ty) -> String {
        match ty {
            Ty::I32 => "i32".into(),
            Ty::U32 => "u32".into(),
            Ty::I64 => "i64".into(),
            Ty::U64 => "u64".into(),
            Ty::F32 => "f32".into(),
            Ty::F64 => "f64".into(),
            Ty::Bool => "bool".into(),
            Ty::Enum(n) | Ty::Struct(n) | Ty::Union(n) => format!("{}{}", self.scope, camel(n)),
            Ty::OpaqueFixed(n) => format!("[u8; {n}]"),
            Ty::OpaqueVar(_) => "::std::vec::Vec<u8>".into(),
            Ty::Str(_) => "::std::string::String".into(),
            Ty::ArrFixed(e, n) => format!("[{}; {n}]", self.rust_ty(e)),
            Ty::ArrVar(e, _) => format!("::std::vec::Vec<{}>", self.rust_ty(e)),
            Ty::Opt(e) => format!("::std::option::Option<::std::boxed::Box<{}>>", self.rust_ty(e)),
        }
    }

    /// Whether a type (transitively) holds no floating point, so it can derive `Eq`.
    fn eq_ok(&mut self, ty: &Ty, visiting: &mut HashSet<String>) -> bool {
        match ty {
            Ty::F32 | Ty::F64 => false,
            Ty::Struct(n) | Ty::Union(n) => self.named_eq_ok(n, visiting),
            Ty::ArrFixed(e, _) | Ty::ArrVar(e, _) | Ty::Opt(e) => self.eq_ok(e, visiting),
            _ => true,
        }
    }
    fn named_eq_ok(&mut self, name: &str, visiting: &mut HashSet<String>) -> bool {
        if let Some(v) = self.no_float.get(name) {
            return *v;
        }
        if !visiting.insert(name.to_string()) {
            return true; // a cycle adds no new member types
        }
        let decls: Vec<DeclKind> = match self.c.type_def(name) {
            Some(TypeDef::Struct(_, f)) => f.iter().map(|d| d.kind.clone()).collect(),
            Some(TypeDef::Union(u)) => u
                .arms
                .iter()
                .filter_map(|a| a.decl.as_ref())
                .chain(u.default.as_ref().and_then(|d| d.1.as_ref()))
                .map(|d| d.kind.clone())
                .collect(),
            _ => Vec::new(),
        };
        let ok = decls.iter().all(|k| {
            let t = self.ty_of_decl(k);
            self.eq_ok(&t, visiting)
        });
        visiting.remove(name);
        self.no_float.insert(name.to_string(), ok);
        ok
    }

    // ---------------------------------------------------------------- encoding

    fn enc(&mut self, ty: &Ty, ex: &Ex, what: &str, e: Enc, depth: usize) {
        let cp = self.cp().to_string();
        match ty {
            Ty::I32 => self.line(format!("w.put_i32({});", ex.by_val())),
            Ty::U32 => self.line(format!("w.put_u32({});", ex.by_val())),
            Ty::I64 => self.line(format!("w.put_i64({});", ex.by_val())),
            Ty::U64 => self.line(format!("w.put_u64({});", ex.by_val())),
            Ty::F32 => self.line(format!("w.put_f32({});", ex.by_val())),
            Ty::F64 => self.line(format!("w.put_f64({});", ex.by_val())),
            Ty::Bool => self.line(format!("w.put_bool({});", ex.by_val())),
            Ty::Enum(_) | Ty::Struct(_) | Ty::Union(_) => {
                let t = self.rust_ty(ty);
                self.line(format!("<{t} as {cp}::{}>::encode_{}({}, w)?;", e.trait_name(), e.name(), ex.by_ref()))
            }
            Ty::OpaqueFixed(_) => self.line(format!("w.put_opaque_fixed({});", ex.by_ref())),
            Ty::OpaqueVar(m) => self.line(format!("w.put_opaque_var({}, {m}, {what:?})?;", ex.by_ref())),
            Ty::Str(m) => self.line(format!("w.put_string({}, {m}, {what:?})?;", ex.by_ref())),
            Ty::ArrFixed(el, _) | Ty::ArrVar(el, _) => {
                if let Ty::ArrVar(_, m) = ty {
                    self.line(format!("w.put_count({}.len(), {m}, {what:?})?;", ex.recv()));
                }
                let x = format!("x{depth}");
                self.open(format!("for {x} in {}.iter() {{", ex.recv()));
                let inner = format!("{what}[]");
                self.enc(el, &Ex::Ref(x), &inner, e, depth + 1);
                self.close("}");
            }
            Ty::Opt(el) => {
                let x = format!("x{depth}");
                self.open(format!("match {}.as_deref() {{", ex.recv()));
                self.open(format!("Some({x}) => {{"));
                self.line("w.put_bool(true);");
                let inner = format!("{what}*");
                self.enc(el, &Ex::Ref(x), &inner, e, depth + 1);
                self.close("}");
                self.line("None => w.put_bool(false),");
                self.close("}");
            }
        }
    }

    // ---------------------------------------------------------------- decoding

    /// An expression of the owned type (it uses `?`).
    fn dec(&self, ty: &Ty, what: &str, e: Enc, depth: usize) -> String {
        let cp = self.cp();
        match ty {
            Ty::I32 => "r.get_i32()?".into(),
            Ty::U32 => "r.get_u32()?".into(),
            Ty::I64 => "r.get_i64()?".into(),
            Ty::U64 => "r.get_u64()?".into(),
            Ty::F32 => "r.get_f32()?".into(),
            Ty::F64 => "r.get_f64()?".into(),
            Ty::Bool => "r.get_bool()?".into(),
            Ty::Enum(_) | Ty::Struct(_) | Ty::Union(_) => {
                format!("<{} as {cp}::{}>::decode_{}(r)?", self.rust_ty(ty), e.trait_name(), e.name())
            }
            Ty::OpaqueFixed(n) => format!("r.get_opaque_array::<{n}>()?"),
            Ty::OpaqueVar(m) => format!("r.get_opaque_var({m}, {what:?})?.to_vec()"),
            Ty::Str(m) => format!("r.get_string({m}, {what:?})?.to_owned()"),
            Ty::ArrFixed(el, n) if Self::zero(el).is_some() => {
                // Arrays of plain numbers fill in place: no allocation.
                let inner = self.dec(el, &format!("{what}[]"), e, depth + 1);
                let (a, x) = (format!("a{depth}"), format!("x{depth}"));
                format!(
                    "{{ let mut {a} = [{}; {n}]; for {x} in {a}.iter_mut() {{ *{x} = {inner}; }} {a} }}",
                    Self::zero(el).unwrap_or_default()
                )
            }
            Ty::ArrFixed(el, n) => {
                let inner = self.dec(el, &format!("{what}[]"), e, depth + 1);
                format!("r.get_array::<_, {n}>({})?", Self::closure_arg(&inner))
            }
            Ty::ArrVar(el, m) => {
                let inner = self.dec(el, &format!("{what}[]"), e, depth + 1);
                let (n, v) = (format!("n{depth}"), format!("v{depth}"));
                format!(
                    "{{ let {n} = r.get_count({m}, {what:?})?; let mut {v} = ::std::vec::Vec::with_capacity({n}); for _ in 0..{n} {{ {v}.push({inner}); }} {v} }}"
                )
            }
            Ty::Opt(el) => {
                let inner = self.dec(el, &format!("{what}*"), e, depth + 1);
                format!("r.get_optional({})?", Self::closure_arg(&inner))
            }
        }
    }

    /// The zero value of a plain number type, as Rust source.
    fn zero(ty: &Ty) -> Option<&'static str> {
        match ty {
            Ty::I32 | Ty::U32 | Ty::I64 | Ty::U64 => Some("0"),
            Ty::F32 | Ty::F64 => Some("0.0"),
            Ty::Bool => Some("false"),
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
            Some(call) if !call.contains('?') => format!("|r| {call}"),
            _ => format!("|r| Ok({inner})"),
        }
    }

    // ---------------------------------------------------------------- the file

    fn file(&mut self) {
        self.line(format!(
            "// @generated by lowlat-idl from `{}`. Do not edit: change the .x file and rebuild.",
            self.src.name
        ));
        self.check_names();
        if !self.diags.is_empty() {
            return;
        }
        let defs = self.c.spec.defs.clone();
        for def in &defs {
            self.line("");
            match def {
                Def::Const(n, v) => {
                    let x = self.c.value(v);
                    if i64::try_from(x).is_err() {
                        self.err(n, format!("constant '{}' = {x} does not fit in 64 bits", n.name));
                        continue;
                    }
                    self.line(format!("/// `const {} = {x};`", n.name));
                    self.line(format!("pub const {}: i64 = {x};", screaming(&n.name)));
                }
                Def::Typedef(d) => {
                    let ty = self.ty_of_decl(&d.kind);
                    self.line(format!("/// `typedef {} {}`", Self::xdr_text(&ty), d.name.name));
                    let rt = self.rust_ty(&ty);
                    self.line(format!("pub type {} = {rt};", camel(&d.name.name)));
                }
                Def::Enum(n, m) => self.gen_enum(n, m),
                Def::Struct(n, f) => self.gen_struct(n, f),
                Def::Union(u) => self.gen_union(u),
                Def::Program(p) => {
                    for v in &p.versions {
                        self.gen_version(p, v);
                    }
                }
            }
        }
    }

    /// Rust names must stay distinct after case conversion and must not shadow the prelude.
    fn check_names(&mut self) {
        let mut seen: HashMap<String, String> = HashMap::new();
        let defs = self.c.spec.defs.clone();
        for def in &defs {
            let n = def.name();
            let rust = match def {
                Def::Const(..) => screaming(&n.name),
                Def::Program(_) => continue,
                _ => camel(&n.name),
            };
            if let Some(other) = seen.insert(rust.clone(), n.name.clone()) {
                self.err(n, format!("'{}' and '{other}' both become the Rust name `{rust}`; rename one", n.name));
            }
            if let Def::Program(_) = def {
                continue;
            }
        }
        for def in &defs {
            if let Def::Program(p) = def {
                let mut mods: HashMap<String, String> = HashMap::new();
                for v in &p.versions {
                    if let Some(o) = mods.insert(snake(&v.name.name), v.name.name.clone()) {
                        self.err(&v.name, format!("versions '{}' and '{o}' get the same module name", v.name.name));
                    }
                    let mut methods: HashMap<String, String> = HashMap::new();
                    for reserved in ["connect", "from_client", "client", "wire_order"] {
                        methods.insert(reserved.into(), format!("the client's own `{reserved}`"));
                    }
                    for pr in &v.procs {
                        let m = snake(&pr.name.name);
                        let mut names = vec![m.clone()];
                        if pr.result.as_ref().is_some_and(|r| matches!(self.ty_of_spec(&r.spec), Ty::OpaqueVar(_))) {
                            names.push(format!("{m}_into"));
                        }
                        for n in names {
                            if let Some(o) = methods.insert(n.clone(), pr.name.name.clone()) {
                                self.err(
                                    &pr.name,
                                    format!("procedure '{}' becomes method `{n}`, clashing with {o}", pr.name.name),
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    fn derives(&mut self, name: &str, copy: bool) -> String {
        let eq = self.named_eq_ok(name, &mut HashSet::new());
        let mut d = String::from("#[derive(Clone, ");
        if copy {
            d.push_str("Copy, ");
        }
        d.push_str("Debug, PartialEq");
        if eq {
            d.push_str(", Eq");
        }
        d.push_str(")]");
        d
    }

    fn impl_open(&mut self, e: Enc, rust: &str) {
        let cp = self.cp().to_string();
        self.open(format!("impl {cp}::{} for {rust} {{", e.trait_name()));
    }

    fn enc_fn_open(&mut self, e: Enc) {
        let cp = self.cp().to_string();
        let w = if e == Enc::Xdr { "XdrWriter" } else { "NativeWriter" };
        self.open(format!(
            "fn encode_{}<B: {cp}::Sink + ?Sized>(&self, w: &mut {cp}::{w}<'_, B>) -> ::std::result::Result<(), {cp}::EncodeError> {{",
            e.name()
        ));
    }

    fn dec_fn_open(&mut self, e: Enc) {
        let cp = self.cp().to_string();
        let r = if e == Enc::Xdr { "XdrReader" } else { "NativeReader" };
        self.open(format!(
            "fn decode_{}(r: &mut {cp}::{r}<'_>) -> ::std::result::Result<Self, {cp}::DecodeError> {{",
            e.name()
        ));
    }

    fn gen_enum(&mut self, n: &Ident, members: &[EnumMember]) {
        let rust = camel(&n.name);
        let vals = self.c.enum_values(members);
        let mut seen = HashSet::new();
        for m in members {
            if !seen.insert(camel(&m.name.name)) {
                self.err(
                    &m.name,
                    format!("enum {}: two members become the Rust variant `{}`", n.name, camel(&m.name.name)),
                );
            }
        }
        let cp = self.cp().to_string();
        self.line(format!("/// `enum {}`", n.name));
        self.line("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]");
        self.line("#[repr(i32)]");
        self.open(format!("pub enum {rust} {{"));
        for (name, v) in &vals {
            self.line(format!("/// `{name} = {v}`"));
            self.line(format!("{} = {v},", camel(name)));
        }
        self.close("}");
        self.line("");
        self.open(format!("impl {rust} {{"));
        self.line("/// The member with this value, if any.");
        self.open("pub fn from_i32(v: i32) -> ::std::option::Option<Self> {");
        self.open("match v {");
        for (name, v) in &vals {
            self.line(format!("{v} => ::std::option::Option::Some(Self::{}),", camel(name)));
        }
        self.line("_ => ::std::option::Option::None,");
        self.close("}");
        self.close("}");
        self.close("}");
        for e in [Enc::Xdr, Enc::Native] {
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
                "Self::from_i32(value).ok_or({cp}::DecodeError::BadEnum {{ type_name: {:?}, value, offset }})",
                n.name
            ));
            self.close("}");
            self.close("}");
        }
    }

    fn gen_struct(&mut self, n: &Ident, fields: &[Decl]) {
        let rust = camel(&n.name);
        let mut seen = HashSet::new();
        for f in fields {
            if !seen.insert(snake(&f.name.name)) {
                self.err(
                    &f.name,
                    format!("struct {}: two members become the Rust field `{}`", n.name, snake(&f.name.name)),
                );
            }
        }
        let tys: Vec<Ty> = fields.iter().map(|f| self.ty_of_decl(&f.kind)).collect();
        self.line(format!("/// `struct {}`", n.name));
        let d = self.derives(&n.name, false);
        self.line(d);
        self.open(format!("pub struct {rust} {{"));
        for (f, t) in fields.iter().zip(&tys) {
            self.line(format!("/// `{} {}`", Self::xdr_text(t), f.name.name));
            let rt = self.rust_ty(t);
            self.line(format!("pub {}: {rt},", snake(&f.name.name)));
        }
        self.close("}");
        for e in [Enc::Xdr, Enc::Native] {
            self.line("");
            self.impl_open(e, &rust);
            self.enc_fn_open(e);
            for (f, t) in fields.iter().zip(&tys) {
                let what = format!("{}.{}: {}", n.name, f.name.name, Self::xdr_text(t));
                self.enc(t, &Ex::Place(format!("self.{}", snake(&f.name.name))), &what, e, 0);
            }
            self.line("Ok(())");
            self.close("}");
            self.dec_fn_open(e);
            self.open("Ok(Self {");
            for (f, t) in fields.iter().zip(&tys) {
                let what = format!("{}.{}: {}", n.name, f.name.name, Self::xdr_text(t));
                let d = self.dec(t, &what, e, 0);
                self.line(format!("{}: {d},", snake(&f.name.name)));
            }
            self.close("})");
            self.close("}");
            self.close("}");
        }
    }

    fn gen_union(&mut self, u: &UnionDef) {
        let rust = camel(&u.name.name);
        let cp = self.cp().to_string();
        let DeclKind::Scalar(dt) = &u.disc.kind else {
            return;
        };
        let dty = self.ty_of_spec(&dt.spec);
        // One variant per case label: the label says which discriminant the value travels with.
        struct Var {
            name: String,
            label: Value,
            ty: Option<Ty>,
            arm: Option<String>,
        }
        let mut vars = Vec::new();
        let mut seen = HashSet::new();
        for arm in &u.arms {
            let ty = arm.decl.as_ref().map(|d| self.ty_of_decl(&d.kind));
            for label in &arm.labels {
                let name = match label {
                    Value::Name(id) => camel(&id.name),
                    Value::Lit(v, _) if *v < 0 => format!("VNeg{}", -v),
                    Value::Lit(v, _) => format!("V{v}"),
                };
                if !seen.insert(name.clone()) || name == "Default" {
                    let id = match label {
                        Value::Name(id) => id.clone(),
                        Value::Lit(_, pos) => Ident { name: name.clone(), pos: *pos },
                    };
                    self.err(&id, format!("union {}: two cases become the Rust variant `{name}`", u.name.name));
                }
                vars.push(Var {
                    name,
                    label: label.clone(),
                    ty: ty.clone(),
                    arm: arm.decl.as_ref().map(|d| d.name.name.clone()),
                });
            }
        }
        let default_ty =
            u.default.as_ref().map(|(_, d)| d.as_ref().map(|d| (self.ty_of_decl(&d.kind), d.name.name.clone())));
        let drust = self.rust_ty(&dty);
        // The literal (or enum path) a label stands for in Rust patterns.
        let label_pat = |g: &Gen<'_>, l: &Value| -> String {
            match (&dty, l) {
                (Ty::Enum(_), Value::Name(id)) => format!("{drust}::{}", camel(&id.name)),
                (Ty::Bool, l) => (g.c.value(l) != 0).to_string(),
                (_, l) => g.c.value(l).to_string(),
            }
        };
        let all_covered = match &dty {
            Ty::Bool => seen_values(self.c, &vars.iter().map(|v| v.label.clone()).collect::<Vec<_>>()) == 2,
            Ty::Enum(en) => match self.c.type_def(en) {
                Some(TypeDef::Enum(_, m)) => vars.len() >= m.len(),
                _ => false,
            },
            _ => false,
        };
        fn seen_values(c: &Checked, labels: &[Value]) -> usize {
            labels.iter().map(|l| c.value(l)).collect::<HashSet<_>>().len()
        }

        self.line(format!("/// `union {} switch ({} {})`", u.name.name, Self::xdr_text(&dty), u.disc.name.name));
        let d = self.derives(&u.name.name, false);
        self.line(d);
        self.open(format!("pub enum {rust} {{"));
        for v in &vars {
            let doc = match (&v.arm, &v.ty) {
                (Some(a), Some(t)) => format!("/// `case {}: {} {a}`", label_text(&v.label), Self::xdr_text(t)),
                _ => format!("/// `case {}: void`", label_text(&v.label)),
            };
            self.line(doc);
            match &v.ty {
                Some(t) => {
                    let rt = self.rust_ty(t);
                    self.line(format!("{}({rt}),", v.name));
                }
                None => self.line(format!("{},", v.name)),
            }
        }
        if let Some(dt) = &default_ty {
            self.line("/// `default:` the discriminant and the arm's value");
            match dt {
                Some((t, _)) => {
                    let rt = self.rust_ty(t);
                    self.line(format!("Default({drust}, {rt}),"));
                }
                None => self.line(format!("Default({drust}),")),
            }
        }
        self.close("}");
        let put_disc = |label: String| -> String {
            match &dty {
                Ty::U32 => format!("w.put_u32({label});"),
                Ty::Bool => format!("w.put_bool({label});"),
                Ty::Enum(_) => format!("w.put_i32({label} as i32);"),
                _ => format!("w.put_i32({label});"),
            }
        };
        for e in [Enc::Xdr, Enc::Native] {
            self.line("");
            self.impl_open(e, &rust);
            self.enc_fn_open(e);
            self.open("match self {");
            for v in &vars {
                let pat = label_pat(self, &v.label);
                match &v.ty {
                    Some(t) => {
                        self.open(format!("Self::{}(v) => {{", v.name));
                        self.line(put_disc(pat));
                        let what =
                            format!("{}.{}: {}", u.name.name, v.arm.clone().unwrap_or_default(), Self::xdr_text(t));
                        self.enc(t, &Ex::Ref("v".into()), &what, e, 0);
                        self.close("}");
                    }
                    None => self.line(format!("Self::{} => {},", v.name, put_disc(pat).trim_end_matches(';'))),
                }
            }
            if let Some(dt) = &default_ty {
                let bind = if dt.is_some() { "Self::Default(d, v)" } else { "Self::Default(d)" };
                self.open(format!("{bind} => {{"));
                let pats: Vec<String> = vars.iter().map(|v| label_pat(self, &v.label)).collect();
                let as_i64 = match &dty {
                    Ty::Enum(_) => "*d as i64",
                    _ => "i64::from(*d)",
                };
                self.open(format!("if matches!(*d, {}) {{", pats.join(" | ")));
                self.line(format!(
                    "return Err({cp}::EncodeError::DefaultArmTakesExplicitCase {{ type_name: {:?}, value: {as_i64} }});",
                    u.name.name
                ));
                self.close("}");
                self.line(put_disc("*d".into()));
                if let Some((t, arm)) = dt {
                    let what = format!("{}.{arm}: {}", u.name.name, Self::xdr_text(t));
                    self.enc(t, &Ex::Ref("v".into()), &what, e, 0);
                }
                self.close("}");
            }
            self.close("}");
            self.line("Ok(())");
            self.close("}");

            self.dec_fn_open(e);
            let needs_offset = default_ty.is_none() && !all_covered;
            if needs_offset {
                self.line("let offset = r.pos();");
            }
            let get = match &dty {
                Ty::U32 => "r.get_u32()?".to_string(),
                Ty::Bool => "r.get_bool()?".to_string(),
                Ty::Enum(_) => self.dec(&dty, "", e, 0),
                _ => "r.get_i32()?".to_string(),
            };
            self.line(format!("let d = {get};"));
            self.open("match d {");
            for v in &vars {
                let pat = label_pat(self, &v.label);
                match &v.ty {
                    Some(t) => {
                        let what =
                            format!("{}.{}: {}", u.name.name, v.arm.clone().unwrap_or_default(), Self::xdr_text(t));
                        let dx = self.dec(t, &what, e, 0);
                        self.line(format!("{pat} => Ok(Self::{}({dx})),", v.name));
                    }
                    None => self.line(format!("{pat} => Ok(Self::{}),", v.name)),
                }
            }
            if !all_covered {
                match &default_ty {
                    Some(Some((t, arm))) => {
                        let what = format!("{}.{arm}: {}", u.name.name, Self::xdr_text(t));
                        let dx = self.dec(t, &what, e, 0);
                        self.line(format!("_ => Ok(Self::Default(d, {dx})),"));
                    }
                    Some(None) => self.line("_ => Ok(Self::Default(d)),"),
                    None => {
                        let as_i64 = match &dty {
                            Ty::Enum(_) => "d as i64",
                            _ => "i64::from(d)",
                        };
                        self.line(format!(
                            "_ => Err({cp}::DecodeError::BadDiscriminant {{ type_name: {:?}, value: {as_i64}, offset }}),",
                            u.name.name
                        ))
                    }
                }
            }
            self.close("}");
            self.close("}");
            self.close("}");
        }
    }

    // ---------------------------------------------------------------- programs

    fn gen_version(&mut self, p: &ProgramDef, v: &VersionDef) {
        let modname = snake(&v.name.name);
        let prog = self.c.value(&p.number);
        let vers = self.c.value(&v.number);
        self.line(format!("/// Program `{}` ({prog:#x}), version `{}` ({vers}).", p.name.name, v.name.name));
        self.open(format!("pub mod {modname} {{"));
        self.scope = "super::";
        self.line("/// The program number.");
        self.line(format!("pub const PROGRAM: u32 = {prog:#x};"));
        self.line("/// The version number.");
        self.line(format!("pub const VERSION: u32 = {vers};"));
        for pr in &v.procs {
            self.line(format!("/// Procedure `{}`.", pr.name.name));
            self.line(format!("pub const {}: u32 = {};", screaming(&pr.name.name), self.c.value(&pr.number)));
        }
        let procs: Vec<Proc> = v.procs.iter().map(|pr| self.proc_info(pr)).collect();
        for pr in &procs {
            for e in [Enc::Xdr, Enc::Native] {
                self.proc_codecs(pr, e);
            }
        }
        if let Some(rt) = self.opts.runtime_path.clone() {
            self.gen_client(&rt, &procs, &p.name.name, &v.name.name);
            self.gen_server(&rt, &procs, &p.name.name, &v.name.name);
        }
        self.scope = "";
        self.close("}");
    }

    fn proc_info(&self, pr: &ProcDef) -> Proc {
        let args: Vec<(String, Ty)> = pr
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let name = match &a.name {
                    Some(n) => snake(&n.name),
                    None if pr.args.len() == 1 => "arg".into(),
                    None => format!("arg{}", i + 1),
                };
                // Argument names live beside the generated code's own locals.
                let name = if LOCALS.contains(&name.as_str()) { format!("{name}_") } else { name };
                (name, self.ty_of_spec(&a.ty.spec))
            })
            .collect();
        Proc {
            xname: pr.name.name.clone(),
            method: snake(&pr.name.name),
            konst: screaming(&pr.name.name),
            args,
            result: pr.result.as_ref().map(|r| self.ty_of_spec(&r.spec)),
        }
    }

    /// The parameter type a caller passes to encode a value.
    fn param_ty(&self, ty: &Ty) -> String {
        match ty {
            t if t.is_copy_scalar() => self.rust_ty(t),
            Ty::OpaqueVar(_) => "&[u8]".into(),
            Ty::Str(_) => "&str".into(),
            Ty::ArrVar(e, _) => format!("&[{}]", self.rust_ty(e)),
            t => format!("&{}", self.rust_ty(t)),
        }
    }
    fn param_ex(ty: &Ty, name: &str) -> Ex {
        if ty.is_copy_scalar() {
            Ex::Place(name.into())
        } else {
            Ex::Ref(name.into())
        }
    }
    /// The decoded ("view") type: opaque data and strings borrow from the message body.
    fn view_ty(&self, ty: &Ty) -> String {
        match ty {
            Ty::OpaqueVar(_) => "&[u8]".into(),
            Ty::Str(_) => "&str".into(),
            t => self.rust_ty(t),
        }
    }
    fn view_dec(&self, ty: &Ty, what: &str, e: Enc, body: bool) -> String {
        match (ty, body) {
            (Ty::OpaqueVar(m), true) => format!("r.get_body_opaque({m}, {what:?})?"),
            (Ty::Str(m), true) => format!("r.get_body_string({m}, {what:?})?"),
            (Ty::OpaqueVar(m), false) => format!("r.get_opaque_var({m}, {what:?})?"),
            (Ty::Str(m), false) => format!("r.get_string({m}, {what:?})?"),
            (t, _) => self.dec(t, what, e, 0),
        }
    }

    fn proc_codecs(&mut self, pr: &Proc, e: Enc) {
        let cp = self.cp().to_string();
        let en = e.name();
        let (wt, rt) = if e == Enc::Xdr { ("XdrWriter", "XdrReader") } else { ("NativeWriter", "NativeReader") };
        let order_param = if e == Enc::Native { format!(", order: {cp}::ByteOrder") } else { String::new() };
        let order_arg = if e == Enc::Native { ", order" } else { "" };
        let sides: [(&str, Vec<(String, Ty)>); 2] = [
            ("args", pr.args.clone()),
            ("result", pr.result.iter().map(|t| ("result".to_string(), t.clone())).collect()),
        ];
        for (side, vals) in sides {
            if vals.is_empty() {
                continue;
            }
            let body = e == Enc::Native && vals.len() == 1 && vals[0].1.borrows();
            let label = format!("{} {side}", pr.xname);
            // Encoder.
            let params: Vec<String> = vals.iter().map(|(n, t)| format!("{n}: {}", self.param_ty(t))).collect();
            self.line("");
            self.line(format!("/// Appends the {en} encoding of `{}`'s {side}.", pr.xname));
            if params.len() + 1 + usize::from(e == Enc::Native) > 7 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.open(format!(
                "pub fn encode_{}_{side}_{en}<B: {cp}::Sink + ?Sized>(buf: &mut B{order_param}, {}) -> ::std::result::Result<(), {cp}::EncodeError> {{",
                pr.method,
                params.join(", ")
            ));
            self.line(format!("let w = &mut {cp}::{wt}::new(buf{order_arg});"));
            for (n, t) in &vals {
                let what = format!("{label}: {}", Self::xdr_text(t));
                if body {
                    let m = match t {
                        Ty::OpaqueVar(m) | Ty::Str(m) => *m,
                        _ => u32::MAX,
                    };
                    let bytes = if matches!(t, Ty::Str(_)) { format!("{n}.as_bytes()") } else { n.clone() };
                    self.line(format!("w.put_body_opaque({bytes}, {m}, {what:?})?;"));
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
            self.line(format!("/// Decodes `{}`'s {side} from a whole {en} message body.", pr.xname));
            self.open(format!(
                "pub fn decode_{}_{side}_{en}(body: &[u8]{order_param}) -> ::std::result::Result<{ret}, {cp}::DecodeError> {{",
                pr.method
            ));
            self.line(format!("let r = &mut {cp}::{rt}::new(body{order_arg});"));
            let mut names = Vec::new();
            for (n, t) in &vals {
                let what = format!("{label}: {}", Self::xdr_text(t));
                let d = self.view_dec(t, &what, e, body);
                self.line(format!("let {n} = {d};"));
                names.push(n.clone());
            }
            self.line("r.finish()?;");
            if names.len() == 1 {
                self.line(format!("Ok({})", names[0]));
            } else {
                self.line(format!("Ok(({}))", names.join(", ")));
            }
            self.close("}");
        }
    }

    fn gen_client(&mut self, rt: &str, procs: &[Proc], prog: &str, vers: &str) {
        let cp = self.cp().to_string();
        self.line("");
        self.line(format!("/// A typed client for `{prog}` version `{vers}` over lowlat's own protocol."));
        self.open("pub struct Client {");
        self.line(format!("inner: {rt}::Client,"));
        self.close("}");
        self.line("");
        self.open("impl Client {");
        self.line("/// Connects to a server at `uri` and binds to this program version.");
        self.open(format!("pub fn connect(uri: &str) -> ::std::result::Result<Self, {rt}::Error> {{"));
        self.line(format!("{rt}::Client::connect(uri, PROGRAM, VERSION).map(|inner| Self {{ inner }})"));
        self.close("}");
        self.line("");
        self.line("/// Wraps a client already bound to this program version.");
        self.open(format!("pub fn from_client(inner: {rt}::Client) -> Self {{"));
        self.line("Self { inner }");
        self.close("}");
        self.line("");
        self.line("/// The untyped client underneath.");
        self.open(format!("pub fn client(&self) -> &{rt}::Client {{"));
        self.line("&self.inner");
        self.close("}");
        self.line("");
        self.line("// The server's order: payloads travel in it and only the client converts.");
        self.line("#[allow(clippy::needless_match, unreachable_patterns)]");
        self.open(format!("fn wire_order(&self) -> {cp}::ByteOrder {{"));
        self.open("match self.inner.server_byte_order() {");
        self.line(format!("{rt}::ByteOrder::Little => {cp}::ByteOrder::Little,"));
        self.line(format!("{rt}::ByteOrder::Big => {cp}::ByteOrder::Big,"));
        self.close("}");
        self.close("}");
        for pr in procs {
            let params: Vec<String> = pr.args.iter().map(|(n, t)| format!("{n}: {}", self.param_ty(t))).collect();
            let names: Vec<String> = pr.args.iter().map(|(n, _)| n.clone()).collect();
            let enc = if pr.args.is_empty() {
                format!("|_buf| ::std::result::Result::<(), {cp}::Error>::Ok(())")
            } else {
                format!(
                    "|buf| encode_{}_args_native(buf, order, {}).map_err({cp}::Error::from)",
                    pr.method,
                    names.join(", ")
                )
            };
            let (ret, dec) = match &pr.result {
                None => (
                    "()".to_string(),
                    format!("|body| {cp}::NativeReader::new(body, order).finish().map_err({cp}::Error::from)"),
                ),
                Some(t) => {
                    let conv = match t {
                        Ty::OpaqueVar(_) => ".map(<[u8]>::to_vec)",
                        Ty::Str(_) => ".map(str::to_owned)",
                        _ => "",
                    };
                    (
                        self.rust_ty(t),
                        format!(
                            "|body| decode_{}_result_native(body, order){conv}.map_err({cp}::Error::from)",
                            pr.method
                        ),
                    )
                }
            };
            let all_params =
                std::iter::once("&self".to_string()).chain(params.iter().cloned()).collect::<Vec<_>>().join(", ");
            self.line("");
            self.line(format!("/// Calls `{}`.", pr.xname));
            if params.len() > 6 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.open(format!("pub fn {}({all_params}) -> ::std::result::Result<{ret}, {rt}::Error> {{", pr.method));
            self.line("let order = self.wire_order();");
            self.line(format!("self.inner.call({}, {enc}, {dec})", pr.konst));
            self.close("}");
            if let Some(Ty::OpaqueVar(_)) = &pr.result {
                self.line("");
                self.line(format!(
                    "/// Calls `{}`, copying the result into `out` (cleared first) so a reused buffer avoids allocating.",
                    pr.xname
                ));
                if params.len() > 5 {
                    self.line("#[allow(clippy::too_many_arguments)]");
                }
                self.open(format!(
                    "pub fn {}_into({all_params}, out: &mut ::std::vec::Vec<u8>) -> ::std::result::Result<(), {rt}::Error> {{",
                    pr.method
                ));
                self.line("let order = self.wire_order();");
                self.open(format!("self.inner.call({}, {enc}, |body| {{", pr.konst));
                self.line(format!("let v = decode_{}_result_native(body, order)?;", pr.method));
                self.line("out.clear();");
                self.line("out.extend_from_slice(v);");
                self.line(format!("::std::result::Result::<(), {cp}::Error>::Ok(())"));
                self.close("})");
                self.close("}");
            }
        }
        self.close("}");
    }

    fn gen_server(&mut self, rt: &str, procs: &[Proc], prog: &str, vers: &str) {
        self.line("");
        self.line(format!("/// The procedures of `{prog}` version `{vers}`, implemented by a server."));
        self.line("///");
        self.line("/// Opaque and string arguments are views into the receive buffer. A variable-length opaque");
        self.line("/// result is appended by the procedure straight into the reply buffer (`out`), which over");
        self.line("/// shared memory lies in the result ring.");
        self.open("pub trait Server: ::std::marker::Send + ::std::marker::Sync + 'static {");
        for pr in procs {
            let mut params = vec!["&self".to_string(), format!("ctx: &{rt}::CallContext")];
            for (n, t) in &pr.args {
                let v = self.view_ty(t);
                params.push(format!("{n}: {v}"));
            }
            let ret = match &pr.result {
                None => "()".to_string(),
                Some(Ty::OpaqueVar(_)) => {
                    params.push(format!("out: &mut {rt}::OutBuf<'_>"));
                    "()".to_string()
                }
                Some(t) => self.rust_ty(t),
            };
            self.line(format!("/// `{}`", pr.xname));
            if params.len() > 7 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.line(format!(
                "fn {}({}) -> ::std::result::Result<{ret}, {rt}::ProcError>;",
                pr.method,
                params.join(", ")
            ));
        }
        self.close("}");
        self.line("");
        self.gen_program(rt, procs, Enc::Native);
        self.gen_program(rt, procs, Enc::Xdr);
    }

    /// `program()` (native bodies, for lowlat's own transports) or `program_xdr()` (XDR bodies,
    /// for ONC RPC callers: `onc+udp://`, `onc+tcp://`).
    fn gen_program(&mut self, rt: &str, procs: &[Proc], e: Enc) {
        let cp = self.cp().to_string();
        let xdr = e == Enc::Xdr;
        if xdr {
            self.line("");
            self.line("/// The program that dispatches ONC RPC calls (XDR bodies) to `server`; serve it beside");
            self.line("/// [`program`] to answer rpcgen/libtirpc clients too.");
            self.open(format!("pub fn program_xdr<S: Server>(server: ::std::sync::Arc<S>) -> {rt}::Program {{"));
            self.line(format!("{rt}::Program::new(PROGRAM, VERSION).xdr()"));
        } else {
            self.line("/// The program that dispatches calls to `server` (register it with a lowlat server).");
            self.open(format!("pub fn program<S: Server>(server: ::std::sync::Arc<S>) -> {rt}::Program {{"));
            self.line(format!("{rt}::Program::new(PROGRAM, VERSION)"));
        }
        self.indent += 1;
        for pr in procs {
            let register = if self.opts.long_running.contains(&pr.xname) { "long_running" } else { "procedure" };
            self.open(format!(".{register}({}, {:?}, {{", pr.konst, pr.xname));
            self.line("let s = ::std::sync::Arc::clone(&server);");
            let reply = if pr.result.is_none() { "_reply" } else { "reply" };
            self.open(format!(
                "move |ctx: &{rt}::CallContext, args: &[u8], {reply}: &mut {rt}::OutBuf<'_>| -> ::std::result::Result<(), {rt}::ProcError> {{"
            ));
            let order_arg = if xdr { "" } else { ", order" };
            if !xdr {
                self.line(format!("let order = {cp}::ByteOrder::host();"));
            }
            let names: Vec<String> = pr.args.iter().map(|(n, _)| n.clone()).collect();
            if pr.args.is_empty() {
                let reader = if xdr {
                    format!("{cp}::XdrReader::new(args)")
                } else {
                    format!("{cp}::NativeReader::new(args, order)")
                };
                self.line(format!("{reader}.finish().map_err(|_| {rt}::ProcError::GarbageArgs)?;"));
            } else {
                let pat = if names.len() == 1 { names[0].clone() } else { format!("({})", names.join(", ")) };
                self.line(format!(
                    "let {pat} = decode_{}_args_{}(args{order_arg}).map_err(|_| {rt}::ProcError::GarbageArgs)?;",
                    pr.method,
                    e.name()
                ));
            }
            let call_args = std::iter::once("ctx".to_string()).chain(names.iter().cloned()).collect::<Vec<_>>();
            match &pr.result {
                None => {
                    self.line(format!("s.{}({})", pr.method, call_args.join(", ")));
                }
                Some(Ty::OpaqueVar(m)) => {
                    if xdr || *m < u32::MAX {
                        self.line("let start = reply.len();");
                    }
                    if xdr {
                        // The procedure appends raw bytes; XDR wants a length before them and
                        // padding after.
                        self.line("reply.extend_from_slice(&[0; 4]);");
                    }
                    self.line(format!("s.{}({}, reply)?;", pr.method, call_args.join(", ")));
                    let head = if xdr { " - 4" } else { "" };
                    if *m < u32::MAX {
                        self.open(format!("if reply.len() - start{head} > {m} {{"));
                        self.line("reply.truncate(start);");
                        self.line(format!("return Err({rt}::ProcError::SystemError);"));
                        self.close("}");
                    }
                    if xdr {
                        self.line("let n = reply.len() - start - 4;");
                        self.line(format!("let len = u32::try_from(n).map_err(|_| {rt}::ProcError::SystemError)?;"));
                        self.line("reply[start..start + 4].copy_from_slice(&len.to_be_bytes());");
                        self.line("reply.resize(reply.len() + (4 - n % 4) % 4, 0);");
                    }
                    self.line("Ok(())");
                }
                Some(t) => {
                    self.line(format!("let result = s.{}({})?;", pr.method, call_args.join(", ")));
                    let arg = if t.is_copy_scalar() { "result" } else { "&result" };
                    self.line(format!(
                        "encode_{}_result_{}(reply{order_arg}, {arg}).map_err(|_| {rt}::ProcError::SystemError)",
                        pr.method,
                        e.name()
                    ));
                }
            }
            self.close("}");
            self.close("})");
        }
        self.indent -= 1;
        self.close("}");
    }
}

/// Locals and parameters of generated procedure code that user argument names must not shadow.
const LOCALS: &[&str] =
    &["buf", "order", "w", "r", "body", "result", "ctx", "out", "s", "args", "reply", "start", "v", "server"];

struct Proc {
    xname: String,
    method: String,
    konst: String,
    args: Vec<(String, Ty)>,
    result: Option<Ty>,
}

fn label_text(v: &Value) -> String {
    match v {
        Value::Lit(n, _) => n.to_string(),
        Value::Name(i) => i.name.clone(),
    }
}
