//! Recursive-descent parser for RFC 5531 §12 / RFC 4506 §6.3, plus the rpcgen extensions people
//! rely on: procedures with several (optionally named) arguments, `unsigned` alone, omitted enum
//! values, `struct name` references, and constants defined by other constants.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos, Source};
use crate::lexer::{lex, Tok, Token};

const RESERVED: &[&str] = &[
    "bool",
    "case",
    "const",
    "default",
    "double",
    "quadruple",
    "enum",
    "float",
    "hyper",
    "int",
    "opaque",
    "string",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "program",
    "version",
];

/// Parses one `.x` text.
pub fn parse(src: &Source) -> Result<Spec, Diagnostic> {
    let toks = lex(src)?;
    let mut p = Parser { src, toks, i: 0, hoisted: Vec::new() };
    let mut defs = Vec::new();
    while p.peek() != &Tok::Eof {
        let d = p.definition()?;
        defs.append(&mut p.hoisted);
        defs.push(d);
    }
    Ok(Spec { defs })
}

struct Parser<'s> {
    src: &'s Source,
    toks: Vec<Token>,
    i: usize,
    hoisted: Vec<Def>,
}

/// An inline `enum {..}`, `struct {..}` or `union switch..` waiting for the name of its declaration.
enum Inline {
    Enum(Vec<EnumMember>),
    Struct(Vec<Decl>),
    Union(Box<UnionDef>),
}

type PResult<T> = Result<T, Diagnostic>;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }
    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.i + n).min(self.toks.len() - 1)].tok
    }
    fn pos(&self) -> Pos {
        self.toks[self.i].pos
    }
    fn next(&mut self) -> Token {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }
    fn err<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(self.src.diag(self.pos(), msg))
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.next();
            true
        } else {
            false
        }
    }
    fn is_punct(&self, c: char) -> bool {
        self.peek() == &Tok::Punct(c)
    }
    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.next();
            true
        } else {
            false
        }
    }
    fn expect_punct(&mut self, c: char, context: &str) -> PResult<()> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.err(format!("expected '{c}' {context}, found {}", self.peek().describe()))
        }
    }
    fn expect_kw(&mut self, kw: &str, context: &str) -> PResult<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.err(format!("expected '{kw}' {context}, found {}", self.peek().describe()))
        }
    }
    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(s) if RESERVED.contains(&s.as_str()) => {
                self.err(format!("'{s}' is a reserved word and cannot be used as {what}"))
            }
            Tok::Ident(name) => {
                let pos = self.next().pos;
                Ok(Ident { name, pos })
            }
            t => self.err(format!("expected {what}, found {}", t.describe())),
        }
    }

    fn definition(&mut self) -> PResult<Def> {
        let Tok::Ident(kw) = self.peek().clone() else {
            return self.err(format!("expected a definition, found {}", self.peek().describe()));
        };
        let def = match kw.as_str() {
            "const" => {
                self.next();
                let name = self.ident("a constant name")?;
                self.expect_punct('=', "after the constant's name")?;
                let v = self.value()?;
                Def::Const(name, v)
            }
            "typedef" => {
                self.next();
                let d = self.declaration("the typedef")?;
                Def::Typedef(d)
            }
            "enum" => {
                self.next();
                let name = self.ident("an enum name")?;
                Def::Enum(name, self.enum_body()?)
            }
            "struct" => {
                self.next();
                let name = self.ident("a struct name")?;
                let ctx = name.name.clone();
                Def::Struct(name, self.struct_body(&ctx)?)
            }
            "union" => {
                self.next();
                let name = self.ident("a union name")?;
                let ctx = name.name.clone();
                let (disc, arms, default) = self.union_body(&ctx)?;
                Def::Union(Box::new(UnionDef { name, disc, arms, default }))
            }
            "program" => {
                self.next();
                Def::Program(self.program()?)
            }
            _ => {
                return self.err(format!(
                    "expected a definition (const, typedef, enum, struct, union or program), found '{kw}'"
                ))
            }
        };
        self.expect_punct(';', "at the end of the definition")?;
        Ok(def)
    }

    fn value(&mut self) -> PResult<Value> {
        let pos = self.pos();
        let neg = self.eat_punct('-');
        match self.peek().clone() {
            Tok::Num(n) => {
                self.next();
                let v = n as i128;
                Ok(Value::Lit(if neg { -v } else { v }, pos))
            }
            Tok::Ident(_) if !neg => Ok(Value::Name(self.ident("a constant")?)),
            t => self.err(format!("expected a number or a constant name, found {}", t.describe())),
        }
    }

    fn enum_body(&mut self) -> PResult<Vec<EnumMember>> {
        self.expect_punct('{', "to open the enum")?;
        let mut members = Vec::new();
        loop {
            let name = self.ident("an enum member name")?;
            let value = if self.eat_punct('=') { Some(self.value()?) } else { None };
            members.push(EnumMember { name, value });
            if self.eat_punct('}') {
                return Ok(members);
            }
            self.expect_punct(',', "or '}' after the enum member")?;
        }
    }

    fn struct_body(&mut self, ctx: &str) -> PResult<Vec<Decl>> {
        self.expect_punct('{', "to open the struct")?;
        let mut fields = Vec::new();
        loop {
            if self.is_kw("void") {
                return self.err("a struct member cannot be void");
            }
            fields.push(self.declaration(ctx)?);
            self.expect_punct(';', "after the struct member")?;
            if self.eat_punct('}') {
                return Ok(fields);
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn union_body(&mut self, ctx: &str) -> PResult<(Decl, Vec<Arm>, Option<(Pos, Option<Decl>)>)> {
        self.expect_kw("switch", "after the union's name")?;
        self.expect_punct('(', "after 'switch'")?;
        let disc = self.declaration(ctx)?;
        self.expect_punct(')', "after the discriminant")?;
        self.expect_punct('{', "to open the union")?;
        let mut arms = Vec::new();
        let mut default = None;
        loop {
            if self.eat_kw("case") {
                let mut labels = vec![self.value()?];
                self.expect_punct(':', "after the case label")?;
                while self.eat_kw("case") {
                    labels.push(self.value()?);
                    self.expect_punct(':', "after the case label")?;
                }
                let decl = self.arm_decl(ctx)?;
                arms.push(Arm { labels, decl });
            } else if self.is_kw("default") {
                if default.is_some() {
                    return self.err("a union has at most one default arm");
                }
                let pos = self.next().pos;
                self.expect_punct(':', "after 'default'")?;
                default = Some((pos, self.arm_decl(ctx)?));
                if !self.is_punct('}') {
                    return self.err("the default arm must come last");
                }
            } else if self.is_punct('}') {
                if arms.is_empty() {
                    return self.err("a union needs at least one 'case' arm");
                }
                self.next();
                return Ok((disc, arms, default));
            } else {
                return self.err(format!("expected 'case', 'default' or '}}', found {}", self.peek().describe()));
            }
        }
    }

    fn arm_decl(&mut self, ctx: &str) -> PResult<Option<Decl>> {
        let d = if self.eat_kw("void") { None } else { Some(self.declaration(ctx)?) };
        self.expect_punct(';', "after the union arm")?;
        Ok(d)
    }

    /// A type specifier; inline bodies are returned for the caller to name and hoist.
    fn type_spec(&mut self) -> PResult<(TypeRef, Option<Inline>)> {
        let pos = self.pos();
        let Tok::Ident(kw) = self.peek().clone() else {
            return self.err(format!("expected a type, found {}", self.peek().describe()));
        };
        let simple = |spec| Ok((TypeRef { spec, pos }, None));
        match kw.as_str() {
            "int" => {
                self.next();
                simple(TypeSpec::Int)
            }
            "hyper" => {
                self.next();
                simple(TypeSpec::Hyper)
            }
            "unsigned" => {
                self.next();
                if self.eat_kw("int") {
                    simple(TypeSpec::UInt)
                } else if self.eat_kw("hyper") {
                    simple(TypeSpec::UHyper)
                } else {
                    simple(TypeSpec::UInt)
                }
            }
            "float" => {
                self.next();
                simple(TypeSpec::Float)
            }
            "double" => {
                self.next();
                simple(TypeSpec::Double)
            }
            "bool" => {
                self.next();
                simple(TypeSpec::Bool)
            }
            "quadruple" => self.err("'quadruple' (128-bit floating point) is not supported"),
            "void" => self.err("'void' is only allowed as a union arm, a procedure argument or a result"),
            "opaque" | "string" => self.err(format!("'{kw}' must be declared with a name and a size, e.g. `{kw} data<16>`, and cannot be used as a type here (use a typedef)")),
            "enum" | "struct" | "union" => {
                self.next();
                if let Tok::Ident(_) = self.peek() {
                    if !(kw == "union" && self.is_kw("switch")) {
                        let name = self.ident("a type name")?;
                        return Ok((TypeRef { spec: TypeSpec::Named(name), pos }, None));
                    }
                }
                let inline = match kw.as_str() {
                    "enum" => Inline::Enum(self.enum_body()?),
                    // The hoisted name is not known yet; nested inline types inside use a
                    // provisional context and are renamed with it.
                    "struct" => Inline::Struct(self.struct_body("anon")?),
                    _ => {
                        let (disc, arms, default) = self.union_body("anon")?;
                        let name = Ident { name: String::new(), pos };
                        Inline::Union(Box::new(UnionDef { name, disc, arms, default }))
                    }
                };
                Ok((TypeRef { spec: TypeSpec::Int, pos }, Some(inline)))
            }
            _ => {
                let name = self.ident("a type")?;
                Ok((TypeRef { spec: TypeSpec::Named(name), pos }, None))
            }
        }
    }

    fn declaration(&mut self, ctx: &str) -> PResult<Decl> {
        if self.eat_kw("opaque") {
            let name = self.ident("a name for the opaque data")?;
            let kind = if self.eat_punct('[') {
                let v = self.value()?;
                self.expect_punct(']', "after the size")?;
                DeclKind::FixedOpaque(v)
            } else if self.eat_punct('<') {
                let v = self.opt_max()?;
                DeclKind::VarOpaque(v)
            } else {
                return self.err("opaque data needs a size: `[N]` (fixed) or `<N>` / `<>` (variable)");
            };
            return Ok(Decl { name, kind });
        }
        if self.eat_kw("string") {
            let name = self.ident("a name for the string")?;
            if !self.eat_punct('<') {
                return self.err("a string needs a maximum size: `<N>` or `<>`");
            }
            let v = self.opt_max()?;
            return Ok(Decl { name, kind: DeclKind::String(v) });
        }
        let (mut ty, inline) = self.type_spec()?;
        if self.eat_punct('*') {
            let name = self.ident("a name for the optional data")?;
            self.hoist(&mut ty, inline, ctx, &name);
            return Ok(Decl { name, kind: DeclKind::Optional(ty) });
        }
        let name = self.ident("a name")?;
        self.hoist(&mut ty, inline, ctx, &name);
        let kind = if self.eat_punct('[') {
            let v = self.value()?;
            self.expect_punct(']', "after the array size")?;
            DeclKind::FixedArray(ty, v)
        } else if self.eat_punct('<') {
            DeclKind::VarArray(ty, self.opt_max()?)
        } else {
            DeclKind::Scalar(ty)
        };
        Ok(Decl { name, kind })
    }

    fn hoist(&mut self, ty: &mut TypeRef, inline: Option<Inline>, ctx: &str, field: &Ident) {
        let Some(inline) = inline else { return };
        let name = Ident { name: format!("{ctx}_{}", field.name), pos: ty.pos };
        let def = match inline {
            Inline::Enum(m) => Def::Enum(name.clone(), m),
            Inline::Struct(f) => Def::Struct(name.clone(), f),
            Inline::Union(mut u) => {
                u.name = name.clone();
                Def::Union(u)
            }
        };
        self.hoisted.push(def);
        ty.spec = TypeSpec::Named(name);
    }

    fn opt_max(&mut self) -> PResult<Option<Value>> {
        if self.eat_punct('>') {
            return Ok(None);
        }
        let v = self.value()?;
        self.expect_punct('>', "after the maximum size")?;
        Ok(Some(v))
    }

    fn program(&mut self) -> PResult<ProgramDef> {
        let name = self.ident("a program name")?;
        self.expect_punct('{', "to open the program")?;
        let mut versions = Vec::new();
        loop {
            self.expect_kw("version", "in the program")?;
            let vname = self.ident("a version name")?;
            self.expect_punct('{', "to open the version")?;
            let mut procs = Vec::new();
            loop {
                procs.push(self.procedure()?);
                if self.eat_punct('}') {
                    break;
                }
            }
            self.expect_punct('=', "after the version's body")?;
            let number = self.value()?;
            self.expect_punct(';', "after the version number")?;
            versions.push(VersionDef { name: vname, number, procs });
            if self.eat_punct('}') {
                break;
            }
        }
        self.expect_punct('=', "after the program's body")?;
        let number = self.value()?;
        Ok(ProgramDef { name, number, versions })
    }

    fn proc_type(&mut self, what: &str) -> PResult<TypeRef> {
        let (ty, inline) = self.type_spec()?;
        if inline.is_some() {
            return Err(self.src.diag(ty.pos, format!("{what} cannot be an inline type definition; define it first")));
        }
        Ok(ty)
    }

    fn procedure(&mut self) -> PResult<ProcDef> {
        let result = if self.eat_kw("void") { None } else { Some(self.proc_type("a procedure's result")?) };
        let name = self.ident("a procedure name")?;
        self.expect_punct('(', "after the procedure's name")?;
        let mut args = Vec::new();
        if self.is_kw("void") && self.peek_at(1) == &Tok::Punct(')') {
            self.next();
        } else {
            loop {
                if self.is_kw("void") {
                    return self.err("'void' must be the only argument");
                }
                let ty = self.proc_type("an argument")?;
                let name =
                    if matches!(self.peek(), Tok::Ident(_)) { Some(self.ident("an argument name")?) } else { None };
                args.push(Arg { ty, name });
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct(')', "after the arguments")?;
        self.expect_punct('=', "after the procedure's arguments")?;
        let number = self.value()?;
        self.expect_punct(';', "after the procedure number")?;
        Ok(ProcDef { name, number, result, args })
    }
}
