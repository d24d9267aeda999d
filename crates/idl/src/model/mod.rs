//! The resolved model of an interface: what every generator and the dynamic client read.
//!
//! [`Model::resolve`] turns a checked spec into definitions whose every name is resolved: a type
//! name becomes a link to its definition (an id, indexing the model: `model[id]`), every constant
//! expression a number (with the constant it was written as, so a C generator can print the
//! name), and every procedure argument gets the name the generated code uses. Typedefs stay as
//! named wrappers ([`Type::Typedef`]) around what they stand for: C code declares members by
//! their typedef names, while the Rust generator and the dynamic codec look through them with
//! [`Type::resolved`]. A name that resolves to nothing is an error with its `file:line:column`,
//! never some type.
//!
//! Ids are only handed out by the model that owns them, so indexing a model with its own ids
//! cannot fail.

mod resolve;

use std::ops::Index;
use std::path::Path;

use crate::check::Checked;
use crate::diag::{Diagnostic, IdlError, Pos, Source};

macro_rules! ids {
    ($($(#[$doc:meta])* $id:ident => $field:ident: $def:ty;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $id(usize);

        impl $id {
            /// The position of the definition in its list in the model (`Model::
            #[doc = stringify!($field)]
            /// `).
            pub fn index(self) -> usize {
                self.0
            }
        }

        impl Index<$id> for Model {
            type Output = $def;
            fn index(&self, id: $id) -> &$def {
                &self.$field[id.0]
            }
        }
    )*};
}

ids! {
    /// A constant of a [`Model`].
    ConstId => consts: Const;
    /// A typedef of a [`Model`].
    TypedefId => typedefs: Typedef;
    /// An enumeration of a [`Model`].
    EnumId => enums: Enum;
    /// A struct of a [`Model`].
    StructId => structs: Struct;
    /// A union of a [`Model`].
    UnionId => unions: Union;
    /// A program of a [`Model`].
    ProgramId => programs: Program;
}

/// A resolved interface definition.
#[derive(Clone, Debug)]
pub struct Model {
    /// The text it was resolved from (its name for messages and `@generated` headers, its lines
    /// for diagnostics).
    pub source: Source,
    /// Every definition in source order (hoisted inline types just before their user).
    pub items: Vec<Item>,
    /// `const NAME = value;`
    pub consts: Vec<Const>,
    /// `typedef declaration;`
    pub typedefs: Vec<Typedef>,
    /// `enum NAME { ... };`
    pub enums: Vec<Enum>,
    /// `struct NAME { ... };`
    pub structs: Vec<Struct>,
    /// `union NAME switch (...) { ... };`
    pub unions: Vec<Union>,
    /// `program NAME { ... } = number;`
    pub programs: Vec<Program>,
}

/// One definition, in source order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// A constant.
    Const(ConstId),
    /// A typedef.
    Typedef(TypedefId),
    /// An enumeration.
    Enum(EnumId),
    /// A struct.
    Struct(StructId),
    /// A union.
    Union(UnionId),
    /// A program.
    Program(ProgramId),
}

/// A resolved type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `int`: 32-bit signed.
    Int,
    /// `unsigned int`: 32-bit unsigned.
    UInt,
    /// `hyper`: 64-bit signed.
    Hyper,
    /// `unsigned hyper`: 64-bit unsigned.
    UHyper,
    /// `float`: IEEE 754 single precision.
    Float,
    /// `double`: IEEE 754 double precision.
    Double,
    /// `bool`: 32 bits on the wire, 0 or 1.
    Bool,
    /// An enumeration (32 bits on the wire).
    Enum(EnumId),
    /// A struct.
    Struct(StructId),
    /// A union.
    Union(UnionId),
    /// A typedef name and the type it stands for (itself resolved).
    Typedef(TypedefId, Box<Type>),
    /// `opaque x[N]`: exactly N bytes.
    FixedOpaque(Size),
    /// `opaque x<N>` (`None`: `opaque x<>`, no bound but the encoding's).
    VarOpaque(Option<Size>),
    /// `string x<N>` (`None`: `string x<>`).
    String(Option<Size>),
    /// `T x[N]`: exactly N elements.
    FixedArray(Box<Type>, Size),
    /// `T x<N>` (`None`: `T x<>`).
    VarArray(Box<Type>, Option<Size>),
    /// `T *x`: optional data (present or not).
    Optional(Box<Type>),
}

impl Type {
    /// The type with typedef names looked through (at the top level only: the elements of an
    /// array keep theirs).
    pub fn resolved(&self) -> &Type {
        let mut t = self;
        while let Type::Typedef(_, inner) = t {
            t = inner;
        }
        t
    }
}

/// A size or bound: its value, and the constant it was written as, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Size {
    /// The number of bytes or elements.
    pub value: u32,
    /// The constant named where it was written (`name<MAXNAME>`), if it was not a literal.
    pub constant: Option<ConstId>,
}

/// The largest length a variable-length type allows: its bound, or `u32::MAX` (the most the
/// four-byte length of XDR and the native encoding can say) when it has none.
pub fn max_len(bound: Option<Size>) -> u32 {
    bound.map_or(u32::MAX, |s| s.value)
}

/// How a constant is used in the interface, so a generator can give it the type its uses want.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConstUses {
    /// As the size or bound of opaque data, a string or an array.
    pub size: bool,
    /// As a signed 32-bit value: an enumeration member's value, a case of an `int` union.
    pub int: bool,
    /// As an unsigned 32-bit value: a case of an `unsigned int` union, a program, version or
    /// procedure number.
    pub unsigned: bool,
}

/// `const NAME = value;`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Const {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// Its value (constants defined by other constants are followed).
    pub value: i128,
    /// What the interface uses it for.
    pub uses: ConstUses,
}

/// `typedef declaration;`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Typedef {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// The type it stands for.
    pub ty: Type,
}

/// `enum NAME { ... };`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// Its members in order.
    pub members: Vec<EnumMember>,
}

/// A member of an enumeration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumMember {
    /// The name as written (a constant of the whole interface).
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// Its value (an omitted value follows the previous member's).
    pub value: i32,
}

impl Enum {
    /// The member with this value, if any.
    pub fn member(&self, value: i64) -> Option<&EnumMember> {
        self.members.iter().find(|m| i64::from(m.value) == value)
    }
}

/// A named, typed declaration: a struct member, a union arm or discriminant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The name as written.
    pub name: String,
    /// Where it is declared.
    pub pos: Pos,
    /// Its type.
    pub ty: Type,
}

/// `struct NAME { ... };`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Struct {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// Its members in order.
    pub fields: Vec<Field>,
}

/// What a union switches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Discriminant {
    /// `int`
    Int,
    /// `unsigned int`
    UInt,
    /// `bool`
    Bool,
    /// An enumeration.
    Enum(EnumId),
}

/// `union NAME switch (disc) { ... };`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Union {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// The discriminant's declaration (its type as written, maybe a typedef name).
    pub discriminant: Field,
    /// What the discriminant is, typedefs looked through.
    pub switch: Discriminant,
    /// The `case` arms in order.
    pub arms: Vec<Arm>,
    /// The `default:` arm, if any.
    pub default: Option<DefaultArm>,
}

/// One arm of a union: its case labels and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arm {
    /// The labels selecting it (at least one).
    pub cases: Vec<Case>,
    /// Its data; `None` for `void`.
    pub field: Option<Field>,
}

/// A case label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The discriminant's value (for `bool`, 0 or 1).
    pub value: i64,
    /// The constant or enumeration member it was written as, if not a literal.
    pub name: Option<String>,
    /// Where it is written.
    pub pos: Pos,
}

/// A union's `default:` arm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultArm {
    /// Where `default` is written.
    pub pos: Pos,
    /// Its data; `None` for `void`.
    pub field: Option<Field>,
}

/// What a discriminant value selects in a union.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected<'a> {
    /// A `case` arm (its field: `None` for `void`).
    Case(&'a Arm),
    /// The `default:` arm (its field: `None` for `void`).
    Default(Option<&'a Field>),
    /// Nothing: the value is not a case and there is no default (a decode error).
    Nothing,
}

impl Union {
    /// The arm a discriminant value selects.
    pub fn select(&self, value: i64) -> Selected<'_> {
        if let Some(arm) = self.arms.iter().find(|a| a.cases.iter().any(|c| c.value == value)) {
            return Selected::Case(arm);
        }
        match &self.default {
            Some(d) => Selected::Default(d.field.as_ref()),
            None => Selected::Nothing,
        }
    }
}

/// `program NAME { versions } = number;`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// The program number.
    pub number: u32,
    /// Its versions in order.
    pub versions: Vec<Version>,
}

/// `version NAME { procedures } = number;`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// The version number.
    pub number: u32,
    /// Its procedures in order.
    pub procedures: Vec<Procedure>,
}

/// `result NAME(args) = number;`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Procedure {
    /// The name as written.
    pub name: String,
    /// Where it is defined.
    pub pos: Pos,
    /// The procedure number.
    pub number: u32,
    /// Its arguments in order; empty for `void`.
    pub args: Vec<Arg>,
    /// Its result; `None` for `void`.
    pub result: Option<Type>,
}

/// An argument of a procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The name as written, or, for an unnamed argument, `arg` when it is the only one and
    /// `argN` (from 1) when there are several.
    pub name: String,
    /// Whether the `.x` file names it (an rpcgen extension).
    pub named: bool,
    /// Its type.
    pub ty: Type,
}

impl Model {
    /// Parses, checks and resolves a text.
    pub fn from_source(src: &Source) -> Result<Model, IdlError> {
        let checked = crate::check(src, crate::parse(src)?)?;
        Model::resolve(&checked, src).map_err(IdlError::Invalid)
    }

    /// Reads, parses, checks and resolves a `.x` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Model, IdlError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| IdlError::Io { path: path.display().to_string(), source })?;
        Model::from_source(&Source::new(path.display().to_string(), text))
    }

    /// Resolves a checked spec. The checker has already refused undefined names, so an error
    /// here means a name the checker let through; it is reported, never guessed at.
    pub fn resolve(checked: &Checked, src: &Source) -> Result<Model, Vec<Diagnostic>> {
        resolve::resolve(checked, src)
    }

    /// How a type reads in the `.x` language, typedefs looked through (`string<32>`,
    /// `point*`, `int[4]`), for messages and listings.
    pub fn spelling(&self, ty: &Type) -> String {
        fn bound(b: Option<Size>) -> String {
            b.map(|s| s.value.to_string()).unwrap_or_default()
        }
        match ty {
            Type::Int => "int".into(),
            Type::UInt => "unsigned int".into(),
            Type::Hyper => "hyper".into(),
            Type::UHyper => "unsigned hyper".into(),
            Type::Float => "float".into(),
            Type::Double => "double".into(),
            Type::Bool => "bool".into(),
            Type::Enum(id) => self[*id].name.clone(),
            Type::Struct(id) => self[*id].name.clone(),
            Type::Union(id) => self[*id].name.clone(),
            Type::Typedef(_, t) => self.spelling(t),
            Type::FixedOpaque(n) => format!("opaque[{}]", n.value),
            Type::VarOpaque(m) => format!("opaque<{}>", bound(*m)),
            Type::String(m) => format!("string<{}>", bound(*m)),
            Type::FixedArray(e, n) => format!("{}[{}]", self.spelling(e), n.value),
            Type::VarArray(e, m) => format!("{}<{}>", self.spelling(e), bound(*m)),
            Type::Optional(e) => format!("{}*", self.spelling(e)),
        }
    }

    /// `NAME(type a, type b) -> type`, as `.x` types.
    pub fn signature(&self, p: &Procedure) -> String {
        let args = if p.args.is_empty() {
            "void".to_string()
        } else {
            p.args.iter().map(|a| format!("{} {}", self.spelling(&a.ty), a.name)).collect::<Vec<_>>().join(", ")
        };
        let result = p.result.as_ref().map_or_else(|| "void".to_string(), |t| self.spelling(t));
        format!("{}({args}) -> {result}", p.name)
    }

    /// A diagnostic at `pos` in this model's source.
    pub fn diag(&self, pos: Pos, message: impl Into<String>) -> Diagnostic {
        self.source.diag(pos, message)
    }
}
