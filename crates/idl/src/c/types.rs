//! `.x` types as C types: declarations, the order definitions must come in, and which types own
//! memory (so have a free function).
//!
//! | `.x` | C |
//! |---|---|
//! | `int`, `unsigned int`, `hyper`, `unsigned hyper` | `int32_t`, `uint32_t`, `int64_t`, `uint64_t` |
//! | `float`, `double`, `bool` | `float`, `double`, `bool` |
//! | `enum e {...}` | `typedef enum e {...} e;` |
//! | `struct s {...}` | `typedef struct s s;` then `struct s {...};` |
//! | `union u switch (d which) {...}` | `struct u { d which; union { arms } u_u; };` |
//! | `opaque x[N]` | `uint8_t x[N]` |
//! | `opaque x<N>` | `struct { uint32_t len; uint8_t *val; } x` |
//! | `string x<N>` | `char *x` (NUL-terminated UTF-8) |
//! | `T x[N]` | `T x[N]` |
//! | `T x<N>` | `struct { uint32_t len; T *val; } x` |
//! | `T *x` | `T *x` (NULL: absent) |

use super::Gen;
use crate::model::{Item, Model, Type};

/// Which typedefs, structs and unions own memory: hold opaque data, strings, variable-length
/// arrays or optional data, directly or through their members.
pub struct Owns {
    pub typedefs: Vec<bool>,
    pub structs: Vec<bool>,
    pub unions: Vec<bool>,
}

impl Owns {
    /// The least fixed point: nothing owns memory until a member is seen to.
    pub fn new(m: &Model) -> Owns {
        let mut o = Owns {
            typedefs: vec![false; m.typedefs.len()],
            structs: vec![false; m.structs.len()],
            unions: vec![false; m.unions.len()],
        };
        loop {
            let mut changed = false;
            for (i, t) in m.typedefs.iter().enumerate() {
                let v = o.ty(&t.ty);
                changed |= o.typedefs[i] != v;
                o.typedefs[i] = v;
            }
            for (i, s) in m.structs.iter().enumerate() {
                let v = s.fields.iter().any(|f| o.ty(&f.ty));
                changed |= o.structs[i] != v;
                o.structs[i] = v;
            }
            for (i, u) in m.unions.iter().enumerate() {
                let fields = u.arms.iter().filter_map(|a| a.field.as_ref());
                let v = fields.chain(u.default.as_ref().and_then(|d| d.field.as_ref())).any(|f| o.ty(&f.ty));
                changed |= o.unions[i] != v;
                o.unions[i] = v;
            }
            if !changed {
                return o;
            }
        }
    }

    /// Whether a value of `ty` owns memory.
    pub fn ty(&self, ty: &Type) -> bool {
        match ty {
            Type::VarOpaque(_) | Type::String(_) | Type::VarArray(..) | Type::Optional(_) => true,
            Type::Typedef(id, _) => self.typedefs[id.index()],
            Type::Struct(id) => self.structs[id.index()],
            Type::Union(id) => self.unions[id.index()],
            Type::FixedArray(e, _) => self.ty(e),
            _ => false,
        }
    }
}

/// A plain number, `bool` or enumeration: passed by value.
pub fn is_scalar(ty: &Type) -> bool {
    matches!(
        ty.resolved(),
        Type::Int | Type::UInt | Type::Hyper | Type::UHyper | Type::Float | Type::Double | Type::Bool | Type::Enum(_)
    )
}

/// A string, by name or not: a `char *`.
pub fn is_string(ty: &Type) -> bool {
    matches!(ty.resolved(), Type::String(_))
}

impl Gen<'_> {
    /// The C name of a type that has one (a primitive or a named type); anonymous types are
    /// spelled by [`decl`](Self::decl).
    pub(super) fn type_name(&self, ty: &Type) -> String {
        match ty {
            Type::Int => "int32_t".into(),
            Type::UInt => "uint32_t".into(),
            Type::Hyper => "int64_t".into(),
            Type::UHyper => "uint64_t".into(),
            Type::Float => "float".into(),
            Type::Double => "double".into(),
            Type::Bool => "bool".into(),
            Type::Enum(id) => self.names.enums[id.index()].clone(),
            Type::Struct(id) => self.names.structs[id.index()].clone(),
            Type::Union(id) => self.names.unions[id.index()].clone(),
            Type::Typedef(id, _) => self.names.typedefs[id.index()].clone(),
            Type::String(_) => "char *".into(),
            // The model admits no anonymous type where a name is needed (procedure arguments
            // and results, array elements): declare it in place.
            other => self.decl(other, ""),
        }
    }

    /// A declaration of `name` with type `ty` (`int32_t x`, `uint8_t h[16]`,
    /// `struct { uint32_t len; point *val; } ps`).
    pub(super) fn decl(&self, ty: &Type, name: &str) -> String {
        let named = |t: String| if name.is_empty() { t } else { format!("{t} {name}") };
        match ty {
            Type::FixedOpaque(n) => format!("uint8_t {name}[{}]", n.value),
            Type::VarOpaque(_) => named("struct { uint32_t len; uint8_t *val; }".into()),
            Type::String(_) => format!("char *{name}"),
            Type::FixedArray(e, n) => self.decl(e, &format!("{name}[{}]", n.value)),
            Type::VarArray(e, _) => named(format!("struct {{ uint32_t len; {}; }}", self.decl(e, "*val"))),
            Type::Optional(e) => self.decl(e, &format!("*{name}")),
            other => named(self.type_name(other)),
        }
    }

    /// Typedefs, enumerations, structs and unions in an order C accepts: each after what it
    /// needs complete (what it holds by value, every typedef and enumeration it names), in
    /// source order otherwise. Structs and unions are declared ahead, so pointers to them need
    /// nothing.
    pub(super) fn type_order(&self) -> Vec<Item> {
        let m = self.m;
        let mut done: Vec<Item> = Vec::new();
        let mut visiting: Vec<Item> = Vec::new();
        for item in &m.items {
            if !matches!(item, Item::Const(_) | Item::Program(_)) {
                self.visit(*item, &mut done, &mut visiting);
            }
        }
        done
    }

    fn visit(&self, item: Item, done: &mut Vec<Item>, visiting: &mut Vec<Item>) {
        if done.contains(&item) || visiting.contains(&item) {
            return;
        }
        visiting.push(item);
        let m = self.m;
        let mut needs = Vec::new();
        match item {
            Item::Typedef(id) => needs_of(&m[id].ty, true, &mut needs),
            Item::Struct(id) => m[id].fields.iter().for_each(|f| needs_of(&f.ty, true, &mut needs)),
            Item::Union(id) => {
                let u = &m[id];
                needs_of(&u.discriminant.ty, true, &mut needs);
                for f in u
                    .arms
                    .iter()
                    .filter_map(|a| a.field.as_ref())
                    .chain(u.default.as_ref().and_then(|d| d.field.as_ref()))
                {
                    needs_of(&f.ty, true, &mut needs);
                }
            }
            _ => {}
        }
        for n in needs {
            self.visit(n, done, visiting);
        }
        visiting.pop();
        done.push(item);
    }

    /// The header's type definitions, in [`type_order`](Self::type_order).
    pub(super) fn type_definitions(&mut self) {
        let m = self.m;
        let forward: Vec<String> = m
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Struct(id) => Some(self.names.structs[id.index()].clone()),
                Item::Union(id) => Some(self.names.unions[id.index()].clone()),
                _ => None,
            })
            .collect();
        if !forward.is_empty() {
            self.h("");
            for f in forward {
                self.h(format!("typedef struct {f} {f};"));
            }
        }
        for item in self.type_order() {
            self.h("");
            match item {
                Item::Typedef(id) => {
                    let t = &m[id];
                    self.h(format!("/* typedef {} {} */", m.spelling(&t.ty), t.name));
                    let d = self.decl(&t.ty, &self.names.typedefs[id.index()]);
                    self.h(format!("typedef {d};"));
                }
                Item::Enum(id) => {
                    let e = &m[id];
                    let name = &self.names.enums[id.index()];
                    let mut lines = vec![format!("typedef enum {name} {{")];
                    for (i, mem) in e.members.iter().enumerate() {
                        let comma = if i + 1 < e.members.len() { "," } else { "" };
                        lines.push(format!("    {} = {}{comma}", super::names::c_name(&mem.name), mem.value));
                    }
                    lines.push(format!("}} {name};"));
                    for l in lines {
                        self.h(l);
                    }
                }
                Item::Struct(id) => {
                    let s = &m[id];
                    let name = self.names.structs[id.index()].clone();
                    self.h(format!("struct {name} {{"));
                    let fields = self.names.fields[id.index()].clone();
                    for (f, c) in s.fields.iter().zip(&fields) {
                        self.h(format!("    {}; /* {} {} */", self.decl(&f.ty, c), m.spelling(&f.ty), f.name));
                    }
                    self.h("};");
                }
                Item::Union(id) => {
                    let u = &m[id];
                    let name = self.names.unions[id.index()].clone();
                    let (disc, member) = self.names.union_members[id.index()].clone();
                    self.h(format!(
                        "/* union {} switch ({} {}): `{disc}` says which arm `{member}` holds */",
                        u.name,
                        m.spelling(&u.discriminant.ty),
                        u.discriminant.name
                    ));
                    self.h(format!("struct {name} {{"));
                    self.h(format!("    {};", self.decl(&u.discriminant.ty, &disc)));
                    let arms: Vec<_> = u
                        .arms
                        .iter()
                        .filter_map(|a| {
                            a.field.as_ref().map(|f| {
                                (
                                    f,
                                    a.cases
                                        .iter()
                                        .map(|c| format!("case {}:", self.case_label(u, c)))
                                        .collect::<Vec<_>>()
                                        .join(" "),
                                )
                            })
                        })
                        .chain(u.default.as_ref().and_then(|d| d.field.as_ref()).map(|f| (f, "default:".to_string())))
                        .collect();
                    if !arms.is_empty() {
                        self.h("    union {");
                        for (f, label) in arms {
                            self.h(format!(
                                "        {}; /* {label} {} */",
                                self.decl(&f.ty, &super::names::c_name(&f.name)),
                                m.spelling(&f.ty)
                            ));
                        }
                        self.h(format!("    }} {member};"));
                    }
                    self.h("};");
                }
                Item::Const(_) | Item::Program(_) => {}
            }
        }
    }
}

/// The definitions `ty` needs before it: what it holds by value (`by_value`), and every typedef
/// and enumeration it names.
fn needs_of(ty: &Type, by_value: bool, out: &mut Vec<Item>) {
    match ty {
        Type::Typedef(id, _) => out.push(Item::Typedef(*id)),
        Type::Enum(id) => out.push(Item::Enum(*id)),
        Type::Struct(id) if by_value => out.push(Item::Struct(*id)),
        Type::Union(id) if by_value => out.push(Item::Union(*id)),
        Type::FixedArray(e, _) => needs_of(e, by_value, out),
        Type::VarArray(e, _) | Type::Optional(e) => needs_of(e, false, out),
        _ => {}
    }
}
