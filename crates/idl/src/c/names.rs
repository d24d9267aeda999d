//! What every generated C item is called, planned and checked for clashes before anything is
//! written.
//!
//! C has one namespace for types, functions and constants, so the choices keep the `.x` names
//! (as rpcgen does: a C programmer knows `point`, `RED`, `MAXNAME`) and derive the rest from
//! them: `point_encode`, `point_decode`, `point_free`; per program version, `everything_v1_add`
//! (the client function), `EVERYTHING_V1_ADD` (the procedure number), `everything_v1_service`
//! and `everything_v1_register`. A name that is a C keyword gets a trailing underscore; two
//! items that would still share a name are an error naming both.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Pos};
use crate::model::Model;
use crate::rust::names::words;

const KEYWORDS: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float",
    "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true", "false",
    "NULL", "asm", "typeof",
];

/// Locals and parameters of generated functions that `.x` names must not shadow.
const LOCALS: &[&str] =
    &["client", "options", "result", "args", "codec", "server", "service", "user", "call", "status"];

/// Parameters and locals of generated functions that a type named alike would be hidden by
/// (`int T_decode(lowlat_reader *r, T *v)` cannot name a type `r`).
const TYPE_CLASHES: &[&str] = &[
    "r", "w", "v", "x", "value", "offset", "client", "options", "server", "service", "user", "call", "args", "codec",
    "status", "s", "body", "len", "out", "encoding", "why", "rc",
];

/// A `.x` name as a C identifier: itself, or with `_` after it when it is a C keyword.
pub fn c_name(s: &str) -> String {
    if KEYWORDS.contains(&s) {
        format!("{s}_")
    } else {
        s.to_string()
    }
}

/// A parameter name: as [`c_name`], and kept clear of the generated functions' locals.
pub fn param_name(s: &str) -> String {
    let n = c_name(s);
    if LOCALS.contains(&n.as_str()) {
        format!("{n}_")
    } else {
        n
    }
}

/// `EVERYTHING_V1` -> `everything_v1`, `fooBar` -> `foo_bar`.
pub fn lower(s: &str) -> String {
    let out = words(s).iter().map(|w| w.to_ascii_lowercase()).collect::<Vec<_>>().join("_");
    c_name(if out.is_empty() { "x" } else { &out })
}

/// `ping` -> `PING`.
pub fn upper(s: &str) -> String {
    words(s).iter().map(|w| w.to_ascii_uppercase()).collect::<Vec<_>>().join("_")
}

/// Names of one program version.
#[derive(Clone, Debug)]
pub struct VersionNames {
    /// `everything_v1`: the prefix of its functions and types.
    pub prefix: String,
    /// `EVERYTHING_V1`: the version number's constant.
    pub konst: String,
    /// Per procedure: (`everything_v1_add`, `EVERYTHING_V1_ADD`, `add` (the service member),
    /// the parameter names).
    pub procs: Vec<ProcNames>,
}

/// Names of one procedure.
#[derive(Clone, Debug)]
pub struct ProcNames {
    /// The client function, and the stem of the procedure's static helpers.
    pub function: String,
    /// The procedure number's constant.
    pub konst: String,
    /// The member of the version's service struct.
    pub member: String,
    /// The parameters' names.
    pub params: Vec<String>,
}

/// Every C name of one interface.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Per typedef, enumeration, struct and union (indexed as in the model).
    pub typedefs: Vec<String>,
    pub enums: Vec<String>,
    pub structs: Vec<String>,
    pub unions: Vec<String>,
    /// Per struct, its members.
    pub fields: Vec<Vec<String>>,
    /// Per union: the discriminant's member, the arms' C union member (`result_u`), and per arm
    /// (then the default arm) its member, if it has data.
    pub union_members: Vec<(String, String)>,
    /// Per program: its number's constant.
    pub programs: Vec<String>,
    /// Per program, per version.
    pub versions: Vec<Vec<VersionNames>>,
}

struct Planner<'m> {
    m: &'m Model,
    top: HashMap<String, String>,
    diags: Vec<Diagnostic>,
}

impl Planner<'_> {
    /// Takes a top-level name for `who`; a clash is reported at `pos`.
    fn take(&mut self, name: &str, who: &str, pos: Pos) {
        if let Some(other) = self.top.insert(name.to_string(), who.to_string()) {
            let d = self.m.diag(pos, format!("{who} and {other} both become the C name `{name}`; rename one"));
            self.diags.push(d);
        }
    }

    /// A type's name and its codec functions (`_free` only where it owns memory).
    fn take_type(&mut self, name: &str, who: &str, pos: Pos, functions: bool, free: bool) {
        self.take(name, who, pos);
        if TYPE_CLASHES.contains(&name) {
            let d =
                self.m.diag(pos, format!("{who}: `{name}` names a variable of the generated C code; rename the type"));
            self.diags.push(d);
        }
        if functions {
            for f in ["encode", "decode"] {
                self.take(&format!("{name}_{f}"), &format!("the {f}r of {who}"), pos);
            }
        }
        if free {
            self.take(&format!("{name}_free"), &format!("the free function of {who}"), pos);
        }
    }
}

/// Names every item of `m` and checks that no two share a C name. `owns` says which typedefs,
/// structs and unions own memory (so have a free function).
pub fn plan(m: &Model, owns: &super::types::Owns) -> Result<Names, Vec<Diagnostic>> {
    let mut p = Planner { m, top: HashMap::new(), diags: Vec::new() };
    let mut n = Names::default();
    for c in &m.consts {
        p.take(&c_name(&c.name), &format!("constant '{}'", c.name), c.pos);
    }
    for e in &m.enums {
        let name = c_name(&e.name);
        p.take_type(&name, &format!("enum '{}'", e.name), e.pos, true, false);
        for mem in &e.members {
            p.take(&c_name(&mem.name), &format!("enum member '{}'", mem.name), mem.pos);
        }
        n.enums.push(name);
    }
    for (i, t) in m.typedefs.iter().enumerate() {
        let name = c_name(&t.name);
        p.take_type(&name, &format!("typedef '{}'", t.name), t.pos, false, owns.typedefs[i]);
        n.typedefs.push(name);
    }
    for (i, s) in m.structs.iter().enumerate() {
        let name = c_name(&s.name);
        p.take_type(&name, &format!("struct '{}'", s.name), s.pos, true, owns.structs[i]);
        n.structs.push(name);
        let mut seen = HashMap::new();
        let mut fields = Vec::new();
        for f in &s.fields {
            let c = c_name(&f.name);
            if let Some(other) = seen.insert(c.clone(), f.name.clone()) {
                let d = m.diag(f.pos, format!("struct {}: '{}' and '{other}' both become `{c}`", s.name, f.name));
                p.diags.push(d);
            }
            fields.push(c);
        }
        n.fields.push(fields);
    }
    for (i, u) in m.unions.iter().enumerate() {
        let name = c_name(&u.name);
        p.take_type(&name, &format!("union '{}'", u.name), u.pos, true, owns.unions[i]);
        let disc = c_name(&u.discriminant.name);
        let member = format!("{}_u", u.name);
        if disc == member {
            let d =
                m.diag(u.discriminant.pos, format!("union {}: the discriminant cannot be called `{member}`", u.name));
            p.diags.push(d);
        }
        n.unions.push(name);
        n.union_members.push((disc, member));
    }
    for prog in &m.programs {
        p.take(&c_name(&prog.name), &format!("program '{}'", prog.name), prog.pos);
        n.programs.push(c_name(&prog.name));
        let mut versions = Vec::new();
        for v in &prog.versions {
            let prefix = lower(&v.name);
            let konst = c_name(&v.name);
            p.take(&konst, &format!("version '{}'", v.name), v.pos);
            for (suffix, what) in [("service", "service struct"), ("register", "register function")] {
                p.take(&format!("{prefix}_{suffix}"), &format!("the {what} of version '{}'", v.name), v.pos);
            }
            let mut procs = Vec::new();
            for pr in &v.procedures {
                let function = format!("{prefix}_{}", lower(&pr.name));
                let pk = format!("{}_{}", upper(&v.name), upper(&pr.name));
                p.take(&function, &format!("the client function of procedure '{}'", pr.name), pr.pos);
                p.take(&pk, &format!("the number of procedure '{}'", pr.name), pr.pos);
                let mut seen = HashMap::new();
                let params = pr
                    .args
                    .iter()
                    .map(|a| {
                        let c = param_name(&a.name);
                        if let Some(other) = seen.insert(c.clone(), a.name.clone()) {
                            let d = m.diag(
                                pr.pos,
                                format!(
                                    "procedure {}: arguments '{}' and '{other}' both become `{c}`",
                                    pr.name, a.name
                                ),
                            );
                            p.diags.push(d);
                        }
                        c
                    })
                    .collect();
                procs.push(ProcNames { function, konst: pk, member: lower(&pr.name), params });
            }
            versions.push(VersionNames { prefix, konst, procs });
        }
        n.versions.push(versions);
    }
    if p.diags.is_empty() {
        Ok(n)
    } else {
        p.diags.sort_by_key(|d| d.pos);
        Err(p.diags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_keywords_get_an_underscore_and_names_keep_their_case() {
        assert_eq!(c_name("register"), "register_");
        assert_eq!(c_name("point"), "point");
        assert_eq!(lower("EVERYTHING_V1"), "everything_v1");
        assert_eq!(lower("DEFAULT"), "default_");
        assert_eq!(upper("ping"), "PING");
        assert_eq!(param_name("result"), "result_");
    }

    #[test]
    fn clashes_are_reported_with_both_names() {
        let m = crate::Model::from_source(&crate::Source::new(
            "clash.x",
            "struct point { int x; };\nconst point_encode = 1;\ntypedef int r;\n",
        ))
        .unwrap();
        let owns = crate::c::types::Owns::new(&m);
        let diags = plan(&m, &owns).unwrap_err();
        let text: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        assert!(
            text.iter().any(|t| t.contains("the encoder of struct 'point' and constant 'point_encode'")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.contains("`r` names a variable of the generated C code")), "{text:?}");
    }
}
