//! From a checked spec to the [`Model`]: ids handed out first (definitions may refer to names
//! defined after them), then every type, constant expression and case resolved, noting what
//! each constant is used as. Typedefs are resolved once each, on first use; a name that
//! resolves to nothing, or a typedef met again while it is being resolved, is a diagnostic.

use std::collections::HashMap;

use super::*;
use crate::ast::{Decl, DeclKind, Def, TypeSpec, UnionDef, Value};

/// Resolves a checked spec.
pub(super) fn resolve(checked: &Checked, src: &Source) -> Result<Model, Vec<Diagnostic>> {
    Resolver::new(checked, src).run()
}

/// What a type name stands for while resolving.
#[derive(Clone, Copy)]
enum Named {
    Typedef(TypedefId),
    Enum(EnumId),
    Struct(StructId),
    Union(UnionId),
}

/// What a constant expression is used as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Size,
    Int,
    Unsigned,
    /// A `bool` case or an enumeration case: written as `TRUE`/`FALSE` or a member name.
    Label,
}

struct Resolver<'a> {
    c: &'a Checked,
    src: &'a Source,
    diags: Vec<Diagnostic>,
    types: HashMap<&'a str, Named>,
    typedef_decls: Vec<&'a Decl>,
    const_ids: HashMap<&'a str, ConstId>,
    /// Typedefs resolved so far, and those being resolved (a cycle is reported, not followed).
    typedef_types: Vec<Option<Type>>,
    resolving: Vec<bool>,
    consts: Vec<Const>,
}

impl<'a> Resolver<'a> {
    fn new(c: &'a Checked, src: &'a Source) -> Self {
        Resolver {
            c,
            src,
            diags: Vec::new(),
            types: HashMap::new(),
            typedef_decls: Vec::new(),
            const_ids: HashMap::new(),
            typedef_types: Vec::new(),
            resolving: Vec::new(),
            consts: Vec::new(),
        }
    }

    fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        let d = self.src.diag(pos, msg);
        self.diags.push(d);
    }

    fn run(mut self) -> Result<Model, Vec<Diagnostic>> {
        let defs: &'a [Def] = &self.c.spec.defs;
        // Ids first: definitions may refer to names defined after them.
        let (mut enums, mut structs, mut unions, mut programs) = (0, 0, 0, 0);
        let mut items = Vec::with_capacity(defs.len());
        for def in defs {
            let item = match def {
                Def::Const(n, _) => {
                    let id = ConstId(self.consts.len());
                    let value = match self.c.named_value(&n.name) {
                        Some(v) => v,
                        None => {
                            self.err(n.pos, format!("constant '{}' has no value", n.name));
                            0
                        }
                    };
                    self.consts.push(Const { name: n.name.clone(), pos: n.pos, value, uses: ConstUses::default() });
                    self.const_ids.insert(&n.name, id);
                    Item::Const(id)
                }
                Def::Typedef(d) => {
                    let id = TypedefId(self.typedef_decls.len());
                    self.typedef_decls.push(d);
                    self.types.insert(&d.name.name, Named::Typedef(id));
                    Item::Typedef(id)
                }
                Def::Enum(n, _) => {
                    enums += 1;
                    self.types.insert(&n.name, Named::Enum(EnumId(enums - 1)));
                    Item::Enum(EnumId(enums - 1))
                }
                Def::Struct(n, _) => {
                    structs += 1;
                    self.types.insert(&n.name, Named::Struct(StructId(structs - 1)));
                    Item::Struct(StructId(structs - 1))
                }
                Def::Union(u) => {
                    unions += 1;
                    self.types.insert(&u.name.name, Named::Union(UnionId(unions - 1)));
                    Item::Union(UnionId(unions - 1))
                }
                Def::Program(_) => {
                    programs += 1;
                    Item::Program(ProgramId(programs - 1))
                }
            };
            items.push(item);
        }
        let n = self.typedef_decls.len();
        self.typedef_types = vec![None; n];
        self.resolving = vec![false; n];

        let mut typedefs = Vec::with_capacity(n);
        for i in 0..n {
            let d = self.typedef_decls[i];
            if let Some(ty) = self.typedef_type(TypedefId(i)) {
                typedefs.push(Typedef { name: d.name.name.clone(), pos: d.name.pos, ty });
            }
        }
        let (mut enum_defs, mut struct_defs, mut union_defs, mut program_defs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for def in defs {
            match def {
                Def::Enum(n, members) => {
                    let mut out = Vec::with_capacity(members.len());
                    for m in members {
                        // Marks constants used as member values.
                        if let Some(v) = &m.value {
                            self.value(v, Use::Int);
                        }
                        match self.c.named_value(&m.name.name).and_then(|v| i32::try_from(v).ok()) {
                            Some(value) => out.push(EnumMember { name: m.name.name.clone(), pos: m.name.pos, value }),
                            None => {
                                self.err(m.name.pos, format!("enum {}: member '{}' has no value", n.name, m.name.name))
                            }
                        }
                    }
                    enum_defs.push(Enum { name: n.name.clone(), pos: n.pos, members: out });
                }
                Def::Struct(n, fields) => {
                    let fields = fields.iter().filter_map(|f| self.field(f)).collect();
                    struct_defs.push(Struct { name: n.name.clone(), pos: n.pos, fields });
                }
                Def::Union(u) => {
                    if let Some(u) = self.union(u) {
                        union_defs.push(u);
                    }
                }
                Def::Program(p) => {
                    let number = self.number(&p.number);
                    let mut versions = Vec::new();
                    for v in &p.versions {
                        let number = self.number(&v.number);
                        let procedures = v
                            .procs
                            .iter()
                            .map(|pr| {
                                let number = self.number(&pr.number);
                                let args = pr
                                    .args
                                    .iter()
                                    .enumerate()
                                    .filter_map(|(i, a)| {
                                        let ty = self.spec(&a.ty.spec)?;
                                        let (name, named) = match &a.name {
                                            Some(n) => (n.name.clone(), true),
                                            None if pr.args.len() == 1 => ("arg".to_string(), false),
                                            None => (format!("arg{}", i + 1), false),
                                        };
                                        Some(Arg { name, named, ty })
                                    })
                                    .collect();
                                let result = pr.result.as_ref().and_then(|r| self.spec(&r.spec));
                                Procedure { name: pr.name.name.clone(), pos: pr.name.pos, number, args, result }
                            })
                            .collect();
                        versions.push(Version { name: v.name.name.clone(), pos: v.name.pos, number, procedures });
                    }
                    program_defs.push(Program { name: p.name.name.clone(), pos: p.name.pos, number, versions });
                }
                Def::Const(..) | Def::Typedef(_) => {}
            }
        }
        if !self.diags.is_empty() {
            self.diags.sort_by_key(|d| d.pos);
            return Err(self.diags);
        }
        Ok(Model {
            source: self.src.clone(),
            items,
            consts: self.consts,
            typedefs,
            enums: enum_defs,
            structs: struct_defs,
            unions: union_defs,
            programs: program_defs,
        })
    }

    /// The value of a constant expression, noting what a named constant is used as.
    fn value(&mut self, v: &Value, used: Use) -> Option<i128> {
        match v {
            Value::Lit(n, _) => Some(*n),
            Value::Name(id) => {
                if let Some(&cid) = self.const_ids.get(id.name.as_str()) {
                    let uses = &mut self.consts[cid.0].uses;
                    match used {
                        Use::Size => uses.size = true,
                        Use::Int => uses.int = true,
                        Use::Unsigned => uses.unsigned = true,
                        Use::Label => {}
                    }
                    return Some(self.consts[cid.0].value);
                }
                match self.c.named_value(&id.name) {
                    Some(x) => Some(x),
                    None => {
                        self.err(id.pos, format!("undefined constant '{}'", id.name));
                        None
                    }
                }
            }
        }
    }

    fn size(&mut self, v: &Value) -> Option<Size> {
        let x = self.value(v, Use::Size)?;
        let Ok(value) = u32::try_from(x) else {
            self.err(v.pos(), format!("size {x} is out of range (0 to 4294967295)"));
            return None;
        };
        let constant = match v {
            Value::Name(id) => self.const_ids.get(id.name.as_str()).copied(),
            Value::Lit(..) => None,
        };
        Some(Size { value, constant })
    }

    fn bound(&mut self, v: &Option<Value>) -> Option<Option<Size>> {
        match v {
            None => Some(None),
            Some(v) => self.size(v).map(Some),
        }
    }

    fn number(&mut self, v: &Value) -> u32 {
        let x = self.value(v, Use::Unsigned);
        match x.map(u32::try_from) {
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                self.err(v.pos(), format!("number {} is out of range (0 to 4294967295)", x.unwrap_or_default()));
                0
            }
            None => 0,
        }
    }

    fn spec(&mut self, t: &TypeSpec) -> Option<Type> {
        Some(match t {
            TypeSpec::Int => Type::Int,
            TypeSpec::UInt => Type::UInt,
            TypeSpec::Hyper => Type::Hyper,
            TypeSpec::UHyper => Type::UHyper,
            TypeSpec::Float => Type::Float,
            TypeSpec::Double => Type::Double,
            TypeSpec::Bool => Type::Bool,
            TypeSpec::Named(n) => match self.types.get(n.name.as_str()).copied() {
                Some(Named::Enum(id)) => Type::Enum(id),
                Some(Named::Struct(id)) => Type::Struct(id),
                Some(Named::Union(id)) => Type::Union(id),
                Some(Named::Typedef(id)) => Type::Typedef(id, Box::new(self.typedef_type(id)?)),
                None => {
                    self.err(n.pos, format!("undefined type '{}'", n.name));
                    return None;
                }
            },
        })
    }

    fn typedef_type(&mut self, id: TypedefId) -> Option<Type> {
        let decl = self.typedef_decls[id.0];
        if let Some(t) = &self.typedef_types[id.0] {
            return Some(t.clone());
        }
        if std::mem::replace(&mut self.resolving[id.0], true) {
            self.err(decl.name.pos, format!("typedef '{}' refers to itself", decl.name.name));
            return None;
        }
        let t = self.decl(&decl.kind);
        self.resolving[id.0] = false;
        self.typedef_types[id.0] = t.clone();
        t
    }

    fn decl(&mut self, k: &DeclKind) -> Option<Type> {
        Some(match k {
            DeclKind::Scalar(t) => self.spec(&t.spec)?,
            DeclKind::FixedArray(t, n) => {
                let e = self.spec(&t.spec);
                Type::FixedArray(Box::new(e?), self.size(n)?)
            }
            DeclKind::VarArray(t, m) => {
                let e = self.spec(&t.spec);
                Type::VarArray(Box::new(e?), self.bound(m)?)
            }
            DeclKind::FixedOpaque(n) => Type::FixedOpaque(self.size(n)?),
            DeclKind::VarOpaque(m) => Type::VarOpaque(self.bound(m)?),
            DeclKind::String(m) => Type::String(self.bound(m)?),
            DeclKind::Optional(t) => Type::Optional(Box::new(self.spec(&t.spec)?)),
        })
    }

    fn field(&mut self, d: &Decl) -> Option<Field> {
        let ty = self.decl(&d.kind)?;
        Some(Field { name: d.name.name.clone(), pos: d.name.pos, ty })
    }

    fn union(&mut self, u: &UnionDef) -> Option<Union> {
        let discriminant = self.field(&u.disc);
        let switch = match discriminant.as_ref().map(|d| d.ty.resolved()) {
            Some(Type::Int) => Discriminant::Int,
            Some(Type::UInt) => Discriminant::UInt,
            Some(Type::Bool) => Discriminant::Bool,
            Some(Type::Enum(id)) => Discriminant::Enum(*id),
            Some(_) => {
                self.err(
                    u.disc.name.pos,
                    format!("union {}: the discriminant must be int, unsigned int, bool or an enum", u.name.name),
                );
                return None;
            }
            None => return None,
        };
        let used = match switch {
            Discriminant::Int => Use::Int,
            Discriminant::UInt => Use::Unsigned,
            Discriminant::Bool | Discriminant::Enum(_) => Use::Label,
        };
        let mut arms = Vec::with_capacity(u.arms.len());
        for a in &u.arms {
            let mut cases = Vec::with_capacity(a.labels.len());
            for l in &a.labels {
                let Some(v) = self.value(l, used) else { continue };
                let Ok(value) = i64::try_from(v) else {
                    self.err(l.pos(), format!("union {}: case {v} is out of range", u.name.name));
                    continue;
                };
                let name = match l {
                    Value::Name(id) => Some(id.name.clone()),
                    Value::Lit(..) => None,
                };
                cases.push(Case { value, name, pos: l.pos() });
            }
            let field = match &a.decl {
                Some(d) => Some(self.field(d)?),
                None => None,
            };
            arms.push(Arm { cases, field });
        }
        let default = match &u.default {
            None => None,
            Some((pos, d)) => Some(DefaultArm {
                pos: *pos,
                field: match d {
                    Some(d) => Some(self.field(d)?),
                    None => None,
                },
            }),
        };
        Some(Union { name: u.name.name.clone(), pos: u.name.pos, discriminant: discriminant?, switch, arms, default })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> Model {
        let src = Source::new("m.x", text);
        let spec = crate::parser::parse(&src).unwrap();
        let checked = crate::check::check(&src, spec).unwrap();
        Model::resolve(&checked, &src).unwrap()
    }

    #[test]
    fn an_unresolved_name_is_an_error_with_its_position_never_a_type() {
        // The checker would refuse this; the resolver on its own must too, not guess.
        let src =
            Source::new("m.x", "struct s {\n  int a;\n  widget w;\n};\nunion u switch (int d) { case 1: gadget g; };");
        let spec = crate::parser::parse(&src).unwrap();
        let unchecked = Checked::unchecked(spec);
        let d = Model::resolve(&unchecked, &src).unwrap_err();
        let shown: Vec<String> = d.iter().map(|d| d.to_string().lines().next().unwrap_or("").to_string()).collect();
        assert_eq!(
            shown,
            ["m.x:3:3: error: undefined type 'widget'", "m.x:5:34: error: undefined type 'gadget'"],
            "{d:?}"
        );
    }

    #[test]
    fn typedefs_stay_named_and_resolve_to_what_they_stand_for() {
        let m =
            model("const N = 4;\ntypedef opaque blob<N>;\ntypedef blob blobs<>;\nstruct s { blobs b; blob c[N]; };");
        let blob =
            Type::Typedef(TypedefId(0), Box::new(Type::VarOpaque(Some(Size { value: 4, constant: Some(ConstId(0)) }))));
        assert_eq!(m.typedefs[1].ty, Type::VarArray(Box::new(blob.clone()), None));
        let s = &m.structs[0];
        assert_eq!(s.fields[0].ty, Type::Typedef(TypedefId(1), Box::new(Type::VarArray(Box::new(blob.clone()), None))));
        assert_eq!(
            s.fields[1].ty.resolved(),
            &Type::FixedArray(Box::new(blob), Size { value: 4, constant: Some(ConstId(0)) })
        );
        assert_eq!(m.spelling(&s.fields[0].ty), "opaque<4><>");
        assert_eq!(m.consts[0].uses, ConstUses { size: true, int: false, unsigned: false });
    }

    #[test]
    fn constants_record_their_uses() {
        let m = model(
            "const A = 1;\nconst B = 2;\nconst C = 3;\nconst D = 4;\nenum e { X = A };\nunion u switch (unsigned int d) { case B: int x; };\nstruct s { opaque o[C]; };\nprogram P { version V { void F(void) = B; } = 1; } = 7;",
        );
        let uses: Vec<ConstUses> = m.consts.iter().map(|c| c.uses).collect();
        assert_eq!(
            uses,
            [
                ConstUses { int: true, ..Default::default() },
                ConstUses { unsigned: true, ..Default::default() },
                ConstUses { size: true, ..Default::default() },
                ConstUses::default(),
            ]
        );
    }

    #[test]
    fn unions_keep_cases_arm_names_and_their_default() {
        let m = model(
            "enum c { RED = 0, GREEN = 1, BLUE = 2 };\nunion r switch (c which) { case RED: int code; case GREEN: case BLUE: string label<>; default: void; };\nunion b switch (bool present) { case TRUE: int x; case FALSE: void; };",
        );
        let r = &m.unions[0];
        assert_eq!(r.switch, Discriminant::Enum(EnumId(0)));
        assert_eq!(r.discriminant.name, "which");
        assert_eq!(r.arms[1].field.as_ref().map(|f| f.name.as_str()), Some("label"));
        let cases: Vec<(i64, Option<&str>)> = r.arms[1].cases.iter().map(|c| (c.value, c.name.as_deref())).collect();
        assert_eq!(cases, [(1, Some("GREEN")), (2, Some("BLUE"))]);
        assert!(matches!(r.select(2), Selected::Case(a) if a.field.as_ref().unwrap().name == "label"));
        assert_eq!(r.select(7), Selected::Default(None));
        let b = &m.unions[1];
        assert_eq!(b.switch, Discriminant::Bool);
        assert_eq!(b.arms[0].cases[0].value, 1);
        assert_eq!(b.select(5), Selected::Nothing);
    }
}
