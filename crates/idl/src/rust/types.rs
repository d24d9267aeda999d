//! `.x` types as Rust types, and the Rust definitions of constants, typedefs, enumerations,
//! structs and unions (their codecs are [`codec`](super::codec)'s).

use super::names::ArmNames;
use super::Gen;
use crate::model::{ConstId, ConstUses, Discriminant, EnumId, Model, StructId, Type, TypedefId, UnionId};

/// A plain number, `bool` or enumeration: passed by value, `Copy`.
pub(super) fn is_copy_scalar(ty: &Type) -> bool {
    matches!(
        ty.resolved(),
        Type::Int | Type::UInt | Type::Hyper | Type::UHyper | Type::Float | Type::Double | Type::Bool | Type::Enum(_)
    )
}

/// Opaque data or a string: received as a view (`&[u8]`, `&str`) into the message.
pub(super) fn borrows(ty: &Type) -> bool {
    matches!(ty.resolved(), Type::VarOpaque(_) | Type::String(_))
}

/// The Rust type of a constant, from what the interface uses it for: `usize` for sizes (so it
/// compares with `len()` and sizes arrays), `i32` for enumeration values and `int` cases, `u32`
/// for `unsigned int` cases and program numbers; otherwise (no use, or mixed ones) the narrowest
/// of `i32`, `u32`, `i64` and `u64` that holds the value, preferring signed types.
pub(super) fn const_type(uses: ConstUses, value: i128) -> Option<&'static str> {
    let fits = |t: &str| match t {
        "usize" => u32::try_from(value).is_ok(),
        "i32" => i32::try_from(value).is_ok(),
        "u32" => u32::try_from(value).is_ok(),
        "i64" => i64::try_from(value).is_ok(),
        _ => u64::try_from(value).is_ok(),
    };
    let by_use = match (uses.size, uses.int, uses.unsigned) {
        (true, false, false) => Some("usize"),
        (false, true, false) => Some("i32"),
        (false, false, true) | (true, false, true) => Some("u32"),
        _ => None,
    };
    by_use.filter(|t| fits(t)).or_else(|| ["i32", "i64", "u64"].into_iter().find(|t| fits(t)))
}

/// Which structs and unions hold no floating point (transitively), so they can derive `Eq`.
pub(super) struct EqTable {
    pub structs: Vec<bool>,
    pub unions: Vec<bool>,
}

impl EqTable {
    /// The greatest fixed point: everything is `Eq` until it is seen to hold a float or a type
    /// that is not (a cycle through optional data adds no member types).
    pub fn new(m: &Model) -> EqTable {
        let mut t = EqTable { structs: vec![true; m.structs.len()], unions: vec![true; m.unions.len()] };
        loop {
            let mut changed = false;
            for (i, s) in m.structs.iter().enumerate() {
                let ok = s.fields.iter().all(|f| t.eq(&f.ty));
                changed |= t.structs[i] != ok;
                t.structs[i] = ok;
            }
            for (i, u) in m.unions.iter().enumerate() {
                let fields = u.arms.iter().filter_map(|a| a.field.as_ref());
                let ok = fields.chain(u.default.as_ref().and_then(|d| d.field.as_ref())).all(|f| t.eq(&f.ty));
                changed |= t.unions[i] != ok;
                t.unions[i] = ok;
            }
            if !changed {
                return t;
            }
        }
    }

    fn eq(&self, ty: &Type) -> bool {
        match ty.resolved() {
            Type::Float | Type::Double => false,
            Type::Struct(id) => self.structs[id.index()],
            Type::Union(id) => self.unions[id.index()],
            Type::FixedArray(e, _) | Type::VarArray(e, _) | Type::Optional(e) => self.eq(e),
            _ => true,
        }
    }
}

impl Gen<'_> {
    /// The owned Rust type (typedefs expanded; user types under the current scope).
    pub(super) fn rust_ty(&self, ty: &Type) -> String {
        match ty {
            Type::Int => "i32".into(),
            Type::UInt => "u32".into(),
            Type::Hyper => "i64".into(),
            Type::UHyper => "u64".into(),
            Type::Float => "f32".into(),
            Type::Double => "f64".into(),
            Type::Bool => "bool".into(),
            Type::Enum(id) => format!("{}{}", self.scope, self.names.enums[id.index()].0),
            Type::Struct(id) => format!("{}{}", self.scope, self.names.structs[id.index()].0),
            Type::Union(id) => format!("{}{}", self.scope, self.names.unions[id.index()].0),
            Type::Typedef(_, t) => self.rust_ty(t),
            Type::FixedOpaque(n) => format!("[u8; {}]", n.value),
            Type::VarOpaque(_) => "::std::vec::Vec<u8>".into(),
            Type::String(_) => "::std::string::String".into(),
            Type::FixedArray(e, n) => format!("[{}; {}]", self.rust_ty(e), n.value),
            Type::VarArray(e, _) => format!("::std::vec::Vec<{}>", self.rust_ty(e)),
            Type::Optional(e) => format!("::std::option::Option<::std::boxed::Box<{}>>", self.rust_ty(e)),
        }
    }

    /// The parameter type a caller passes to encode a value.
    pub(super) fn param_ty(&self, ty: &Type) -> String {
        match ty.resolved() {
            t if is_copy_scalar(t) => self.rust_ty(t),
            Type::VarOpaque(_) => "&[u8]".into(),
            Type::String(_) => "&str".into(),
            Type::VarArray(e, _) => format!("&[{}]", self.rust_ty(e)),
            t => format!("&{}", self.rust_ty(t)),
        }
    }

    /// The decoded ("view") type: opaque data and strings borrow from the message body.
    pub(super) fn view_ty(&self, ty: &Type) -> String {
        match ty.resolved() {
            Type::VarOpaque(_) => "&[u8]".into(),
            Type::String(_) => "&str".into(),
            t => self.rust_ty(t),
        }
    }

    pub(super) fn gen_const(&mut self, id: ConstId) {
        let c = &self.m[id];
        let name = self.names.consts[id.index()].clone();
        let Some(ty) = const_type(c.uses, c.value) else {
            let d = self.m.diag(c.pos, format!("constant '{}' = {} does not fit in 64 bits", c.name, c.value));
            self.diags.push(d);
            return;
        };
        let used: Vec<&str> = [(c.uses.size, "a size"), (c.uses.int, "an int"), (c.uses.unsigned, "an unsigned int")]
            .into_iter()
            .filter_map(|(on, what)| on.then_some(what))
            .collect();
        let note = if used.is_empty() { String::new() } else { format!(" (used as {})", used.join(" and ")) };
        self.line(format!("/// `const {} = {};`{note}", c.name, c.value));
        self.line(format!("pub const {name}: {ty} = {};", c.value));
    }

    pub(super) fn gen_typedef(&mut self, id: TypedefId) {
        let t = &self.m[id];
        self.line(format!("/// `typedef {} {}`", self.m.spelling(&t.ty), t.name));
        let rt = self.rust_ty(&t.ty);
        self.line(format!("pub type {} = {rt};", self.names.typedefs[id.index()]));
    }

    fn derives(&self, eq: bool) -> String {
        format!("#[derive(Clone, Debug, PartialEq{})]", if eq { ", Eq" } else { "" })
    }

    pub(super) fn gen_enum(&mut self, id: EnumId) {
        let e = &self.m[id];
        let (rust, variants) = self.names.enums[id.index()].clone();
        self.line(format!("/// `enum {}`", e.name));
        self.line("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]");
        self.line("#[repr(i32)]");
        self.open(format!("pub enum {rust} {{"));
        for (mem, v) in e.members.iter().zip(&variants) {
            self.line(format!("/// `{} = {}`", mem.name, mem.value));
            self.line(format!("{v} = {},", mem.value));
        }
        self.close("}");
        self.line("");
        self.open(format!("impl {rust} {{"));
        self.line("/// The member with this value, if any.");
        self.open("pub fn from_i32(v: i32) -> ::std::option::Option<Self> {");
        self.open("match v {");
        for (mem, v) in e.members.iter().zip(&variants) {
            self.line(format!("{} => ::std::option::Option::Some(Self::{v}),", mem.value));
        }
        self.line("_ => ::std::option::Option::None,");
        self.close("}");
        self.close("}");
        self.close("}");
    }

    pub(super) fn gen_struct(&mut self, id: StructId) {
        let s = &self.m[id];
        let (rust, fields) = self.names.structs[id.index()].clone();
        self.line(format!("/// `struct {}`", s.name));
        self.line(self.derives(self.eq.structs[id.index()]));
        self.open(format!("pub struct {rust} {{"));
        for (f, name) in s.fields.iter().zip(&fields) {
            self.line(format!("/// `{} {}`", self.m.spelling(&f.ty), f.name));
            let rt = self.rust_ty(&f.ty);
            self.line(format!("pub {name}: {rt},"));
        }
        self.close("}");
    }

    /// The Rust type of a union's discriminant.
    pub(super) fn disc_ty(&self, switch: Discriminant) -> String {
        match switch {
            Discriminant::Int => "i32".into(),
            Discriminant::UInt => "u32".into(),
            Discriminant::Bool => "bool".into(),
            Discriminant::Enum(id) => self.rust_ty(&Type::Enum(id)),
        }
    }

    pub(super) fn gen_union(&mut self, id: UnionId) {
        let u = &self.m[id];
        let (rust, arms) = self.names.unions[id.index()].clone();
        let drust = self.disc_ty(u.switch);
        let d = &u.discriminant;
        self.line(format!("/// `union {} switch ({} {})`", u.name, self.m.spelling(&d.ty), d.name));
        self.line(self.derives(self.eq.unions[id.index()]));
        self.open(format!("pub enum {rust} {{"));
        for (arm, names) in u.arms.iter().zip(&arms) {
            let labels: Vec<String> = arm.cases.iter().map(|c| format!("case {}:", self.case_text(c))).collect();
            match (names, &arm.field) {
                (ArmNames::Data(v), Some(f)) => {
                    let rt = self.rust_ty(&f.ty);
                    let decl = format!("{} {} {};", labels.join(" "), self.m.spelling(&f.ty), f.name);
                    if arm.cases.len() > 1 {
                        self.line(format!("/// `{decl}` (with the discriminant: which case)"));
                        self.line(format!("{v}({drust}, {rt}),"));
                    } else {
                        self.line(format!("/// `{decl}`"));
                        self.line(format!("{v}({rt}),"));
                    }
                }
                (ArmNames::Void(vs), _) => {
                    for (c, v) in arm.cases.iter().zip(vs) {
                        self.line(format!("/// `case {}: void;`", self.case_text(c)));
                        self.line(format!("{v},"));
                    }
                }
                (ArmNames::Data(_), None) => {}
            }
        }
        if let Some(def) = &u.default {
            match &def.field {
                Some(f) => {
                    self.line(format!(
                        "/// `default: {} {};` (with the discriminant, which no case has)",
                        self.m.spelling(&f.ty),
                        f.name
                    ));
                    let rt = self.rust_ty(&f.ty);
                    self.line(format!("Default({drust}, {rt}),"));
                }
                None => {
                    self.line("/// `default: void;` (the discriminant, which no case has)");
                    self.line(format!("Default({drust}),"));
                }
            }
        }
        self.close("}");
    }

    /// A case label as written.
    pub(super) fn case_text(&self, c: &crate::model::Case) -> String {
        c.name.clone().unwrap_or_else(|| c.value.to_string())
    }
}
