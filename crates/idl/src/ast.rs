//! The syntax tree of a `.x` file, as written (names unresolved). Anonymous inline types are
//! hoisted by the parser into named definitions called `<outer>_<field>`.

use crate::diag::Pos;

/// A name and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Its position.
    pub pos: Pos,
}

/// A constant: a literal or the name of a constant or enumeration member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A literal (already negated if written with `-`).
    Lit(i128, Pos),
    /// A name to resolve.
    Name(Ident),
}

impl Value {
    /// Where the value was written.
    pub fn pos(&self) -> Pos {
        match self {
            Value::Lit(_, p) => *p,
            Value::Name(i) => i.pos,
        }
    }
}

/// A type specifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSpec {
    /// `int`
    Int,
    /// `unsigned int` (or `unsigned`)
    UInt,
    /// `hyper`
    Hyper,
    /// `unsigned hyper`
    UHyper,
    /// `float`
    Float,
    /// `double`
    Double,
    /// `bool`
    Bool,
    /// A defined type (`name`, `struct name`, ...).
    Named(Ident),
}

/// A type specifier and its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeRef {
    /// The type.
    pub spec: TypeSpec,
    /// Where it was written.
    pub pos: Pos,
}

/// The shape of a declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclKind {
    /// `T x`
    Scalar(TypeRef),
    /// `T x[N]`
    FixedArray(TypeRef, Value),
    /// `T x<N>` / `T x<>`
    VarArray(TypeRef, Option<Value>),
    /// `opaque x[N]`
    FixedOpaque(Value),
    /// `opaque x<N>` / `opaque x<>`
    VarOpaque(Option<Value>),
    /// `string x<N>` / `string x<>`
    String(Option<Value>),
    /// `T *x`
    Optional(TypeRef),
}

/// A named declaration (a struct member, union arm, typedef or discriminant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    /// The declared name.
    pub name: Ident,
    /// Its type and shape.
    pub kind: DeclKind,
}

/// One `case` group of a union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arm {
    /// The case labels sharing this arm.
    pub labels: Vec<Value>,
    /// The arm's data; `None` for `void`.
    pub decl: Option<Decl>,
}

/// `union name switch (disc) { ... }`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnionDef {
    /// The union's name.
    pub name: Ident,
    /// The discriminant declaration.
    pub disc: Decl,
    /// The `case` arms, in order.
    pub arms: Vec<Arm>,
    /// The `default` arm: its position and data (`None` for `void`).
    pub default: Option<(Pos, Option<Decl>)>,
}

/// One argument of a procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Its type.
    pub ty: TypeRef,
    /// Its name, if written (an rpcgen extension).
    pub name: Option<Ident>,
}

/// `result NAME(args) = number;`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcDef {
    /// The procedure's name.
    pub name: Ident,
    /// Its number.
    pub number: Value,
    /// The result type; `None` for `void`.
    pub result: Option<TypeRef>,
    /// The arguments; empty for `void`.
    pub args: Vec<Arg>,
}

/// `version NAME { procedures } = number;`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionDef {
    /// The version's name.
    pub name: Ident,
    /// Its number.
    pub number: Value,
    /// Its procedures.
    pub procs: Vec<ProcDef>,
}

/// `program NAME { versions } = number;`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramDef {
    /// The program's name.
    pub name: Ident,
    /// Its number.
    pub number: Value,
    /// Its versions.
    pub versions: Vec<VersionDef>,
}

/// An enumeration member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumMember {
    /// The member's name.
    pub name: Ident,
    /// Its value; omitted values (an rpcgen extension) follow the previous one.
    pub value: Option<Value>,
}

/// A top-level definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Def {
    /// `const NAME = value;`
    Const(Ident, Value),
    /// `typedef declaration;`
    Typedef(Decl),
    /// `enum NAME { ... };`
    Enum(Ident, Vec<EnumMember>),
    /// `struct NAME { ... };`
    Struct(Ident, Vec<Decl>),
    /// `union NAME switch (...) { ... };`
    Union(Box<UnionDef>),
    /// `program NAME { ... } = number;`
    Program(ProgramDef),
}

impl Def {
    /// The defined name.
    pub fn name(&self) -> &Ident {
        match self {
            Def::Const(n, _) | Def::Enum(n, _) | Def::Struct(n, _) => n,
            Def::Typedef(d) => &d.name,
            Def::Union(u) => &u.name,
            Def::Program(p) => &p.name,
        }
    }
}

/// A parsed `.x` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Definitions in source order (hoisted inline types come just before their user).
    pub defs: Vec<Def>,
}
