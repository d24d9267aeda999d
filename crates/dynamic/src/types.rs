//! Types of a checked `.x` spec, resolved through typedefs: what the dynamic codec walks.

use lowlat_idl::ast::{Decl, DeclKind, Def, TypeRef, TypeSpec, UnionDef, Value};
use lowlat_idl::{Checked, TypeDef};

/// A resolved type (typedefs followed), as the generated code sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    Bool,
    Void,
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
    /// How the type reads in the `.x` language.
    pub fn text(&self) -> String {
        fn max(m: u32) -> String {
            if m == u32::MAX {
                String::new()
            } else {
                m.to_string()
            }
        }
        match self {
            Ty::I32 => "int".into(),
            Ty::U32 => "unsigned int".into(),
            Ty::I64 => "hyper".into(),
            Ty::U64 => "unsigned hyper".into(),
            Ty::F32 => "float".into(),
            Ty::F64 => "double".into(),
            Ty::Bool => "bool".into(),
            Ty::Void => "void".into(),
            Ty::Enum(n) | Ty::Struct(n) | Ty::Union(n) => n.clone(),
            Ty::OpaqueFixed(n) => format!("opaque[{n}]"),
            Ty::OpaqueVar(m) => format!("opaque<{}>", max(*m)),
            Ty::Str(m) => format!("string<{}>", max(*m)),
            Ty::ArrFixed(e, n) => format!("{}[{n}]", e.text()),
            Ty::ArrVar(e, m) => format!("{}<{}>", e.text(), max(*m)),
            Ty::Opt(e) => format!("{}*", e.text()),
        }
    }

    /// Whether the native encoding sends it as a whole body without a length when it is a
    /// procedure's only argument or its result.
    pub fn is_body_bytes(&self) -> bool {
        matches!(self, Ty::OpaqueVar(_) | Ty::Str(_))
    }
}

/// Type resolution over one checked spec.
pub struct Types<'a> {
    pub c: &'a Checked,
}

impl<'a> Types<'a> {
    pub fn size(&self, v: &Value) -> u32 {
        u32::try_from(self.c.value(v)).unwrap_or(0)
    }

    fn max(&self, v: &Option<Value>) -> u32 {
        v.as_ref().map_or(u32::MAX, |v| self.size(v))
    }

    pub fn of_spec(&self, t: &TypeSpec) -> Ty {
        match t {
            TypeSpec::Int => Ty::I32,
            TypeSpec::UInt => Ty::U32,
            TypeSpec::Hyper => Ty::I64,
            TypeSpec::UHyper => Ty::U64,
            TypeSpec::Float => Ty::F32,
            TypeSpec::Double => Ty::F64,
            TypeSpec::Bool => Ty::Bool,
            TypeSpec::Named(n) => match self.c.type_def(&n.name) {
                Some(TypeDef::Typedef(d)) => self.of_decl(&d.kind),
                Some(TypeDef::Enum(..)) => Ty::Enum(n.name.clone()),
                Some(TypeDef::Struct(..)) => Ty::Struct(n.name.clone()),
                Some(TypeDef::Union(..)) => Ty::Union(n.name.clone()),
                None => Ty::Void,
            },
        }
    }

    pub fn of_ref(&self, t: &TypeRef) -> Ty {
        self.of_spec(&t.spec)
    }

    pub fn of_decl(&self, k: &DeclKind) -> Ty {
        match k {
            DeclKind::Scalar(t) => self.of_spec(&t.spec),
            DeclKind::FixedArray(t, n) => Ty::ArrFixed(Box::new(self.of_spec(&t.spec)), self.size(n)),
            DeclKind::VarArray(t, m) => Ty::ArrVar(Box::new(self.of_spec(&t.spec)), self.max(m)),
            DeclKind::FixedOpaque(n) => Ty::OpaqueFixed(self.size(n)),
            DeclKind::VarOpaque(m) => Ty::OpaqueVar(self.max(m)),
            DeclKind::String(m) => Ty::Str(self.max(m)),
            DeclKind::Optional(t) => Ty::Opt(Box::new(self.of_spec(&t.spec))),
        }
    }

    pub fn fields(&self, name: &str) -> &'a [Decl] {
        match self.c.type_def(name) {
            Some(TypeDef::Struct(_, f)) => f,
            _ => &[],
        }
    }

    pub fn union(&self, name: &str) -> Option<&'a UnionDef> {
        match self.c.type_def(name) {
            Some(TypeDef::Union(u)) => Some(u),
            _ => None,
        }
    }

    /// Enumeration members with their values.
    pub fn members(&self, name: &str) -> Vec<(String, i32)> {
        match self.c.type_def(name) {
            Some(TypeDef::Enum(_, m)) => self.c.enum_values(m),
            _ => Vec::new(),
        }
    }

    /// Every program, version and procedure.
    pub fn programs(&self) -> Vec<ProgramInfo> {
        let mut out = Vec::new();
        for d in &self.c.spec.defs {
            let Def::Program(p) = d else { continue };
            let mut versions = Vec::new();
            for v in &p.versions {
                let procs = v
                    .procs
                    .iter()
                    .map(|pr| ProcInfo {
                        name: pr.name.name.clone(),
                        number: self.size(&pr.number),
                        args: pr
                            .args
                            .iter()
                            .enumerate()
                            .map(|(i, a)| {
                                // As the generator names them: `arg` alone, else `argN`.
                                let name = match &a.name {
                                    Some(n) => n.name.clone(),
                                    None if pr.args.len() == 1 => "arg".to_string(),
                                    None => format!("arg{}", i + 1),
                                };
                                (name, self.of_ref(&a.ty))
                            })
                            .collect(),
                        result: pr.result.as_ref().map(|t| self.of_ref(t)),
                    })
                    .collect();
                versions.push(VersionInfo { name: v.name.name.clone(), number: self.size(&v.number), procs });
            }
            out.push(ProgramInfo { name: p.name.name.clone(), number: self.size(&p.number), versions });
        }
        out
    }
}

/// A program of the interface.
#[derive(Clone, Debug)]
pub struct ProgramInfo {
    pub name: String,
    pub number: u32,
    pub versions: Vec<VersionInfo>,
}

/// A version of a program.
#[derive(Clone, Debug)]
pub struct VersionInfo {
    pub name: String,
    pub number: u32,
    pub procs: Vec<ProcInfo>,
}

/// A procedure: its arguments (named as the generator names them when the `.x` file does not:
/// `arg` for a lone argument, `argN` for several) and result
/// (`None` for void).
#[derive(Clone, Debug)]
pub struct ProcInfo {
    pub name: String,
    pub number: u32,
    pub args: Vec<(String, Ty)>,
    pub result: Option<Ty>,
}

impl ProcInfo {
    /// `NAME(type a, type b) -> type`.
    pub fn signature(&self) -> String {
        let args = if self.args.is_empty() {
            "void".to_string()
        } else {
            self.args.iter().map(|(n, t)| format!("{} {n}", t.text())).collect::<Vec<_>>().join(", ")
        };
        let result = self.result.as_ref().map_or_else(|| "void".to_string(), Ty::text);
        format!("{}({args}) -> {result}", self.name)
    }
}
