//! What every generated item is called: ONC RPC names turned into idiomatic Rust names, and the
//! plan of names for one interface, checked so that no two items (nor glob imports of the
//! generated modules beside `lowlat`'s) can clash.
//!
//! Choices, each made so that a name says one thing:
//! - a union's variant is named after its arm's field (`case RED: int code;` -> `Code(i32)`),
//!   never after the case constant, which is already an enumeration's variant; a `void` case is
//!   named after its label (the enumeration's variant name, `V2` for the literal 2);
//! - the client, the view with per-call options and the server traits carry the version's name
//!   (`LabVersClient`, `LabVersClientWith`, `LabVersService`, `LabVersAsyncService`), so none is
//!   `lowlat::Client` or `lowlat::Server` under glob imports, nor one another;
//! - with [`Options::strip_enum_prefix`](super::Options), the words every member of an
//!   enumeration begins with are dropped (`LAB_OK`, `LAB_DIV_BY_ZERO` -> `Ok`, `DivByZero`).

use std::collections::HashMap;

use crate::diag::{Diagnostic, Pos};
use crate::model::{Discriminant, Model, Type};

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
    "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
];
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate"];

pub(crate) fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = if i > 0 { chars[i - 1] } else { '_' };
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
        // A boundary at lower->Upper ("fooBar") and at the last capital of an acronym ("XDRType").
        if c.is_ascii_uppercase()
            && !cur.is_empty()
            && (prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower))
        {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn escape(s: String) -> String {
    if NOT_RAW.contains(&s.as_str()) {
        format!("{s}_")
    } else if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

/// `lab_args` -> `LabArgs`, `XDR_TYPE` -> `XdrType`.
pub fn camel(s: &str) -> String {
    let mut out = String::new();
    for w in words(s) {
        let mut cs = w.chars();
        if let Some(f) = cs.next() {
            out.push(f.to_ascii_uppercase());
            out.extend(cs.map(|c| c.to_ascii_lowercase()));
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'X');
    }
    escape(out)
}

/// `fooBar` -> `foo_bar`, `MINUS` -> `minus`.
pub fn snake(s: &str) -> String {
    let out = words(s).iter().map(|w| w.to_ascii_lowercase()).collect::<Vec<_>>().join("_");
    if out.is_empty() {
        return "x".into();
    }
    escape(out)
}

/// `maxLen` -> `MAX_LEN`.
pub fn screaming(s: &str) -> String {
    let out = words(s).iter().map(|w| w.to_ascii_uppercase()).collect::<Vec<_>>().join("_");
    if out.is_empty() {
        return "X".into();
    }
    out
}

/// Locals and parameters of generated procedure code that user argument names must not shadow.
const LOCALS: &[&str] =
    &["buf", "order", "w", "r", "body", "result", "ctx", "out", "s", "args", "reply", "start", "v", "server"];

/// Names the generated code takes from the prelude without a path.
const PRELUDE: &[&str] = &["Ok", "Err", "Some", "None"];

/// Methods of a generated client that procedures must not take.
const CLIENT_METHODS: &[&str] = &["connect", "connect_with", "from_client", "client", "with"];

/// `LAB_OK`, `LAB_DIV_BY_ZERO` -> `OK`, `DIV_BY_ZERO`: the leading words all members share
/// dropped, as long as each keeps a word and none then starts with a digit.
pub fn strip_common_prefix(members: &[&str]) -> Vec<String> {
    let split: Vec<Vec<String>> = members.iter().map(|m| words(m)).collect();
    let mut k = split.iter().map(|w| w.len().saturating_sub(1)).min().unwrap_or(0);
    while k > 0 {
        let first = &split[0][..k];
        let shared = split.iter().all(|w| w[..k].iter().zip(first).all(|(a, b)| a.eq_ignore_ascii_case(b)));
        let fit = split.iter().all(|w| !w[k].starts_with(|c: char| c.is_ascii_digit()));
        if shared && fit {
            break;
        }
        k -= 1;
    }
    split.iter().map(|w| w[k..].join("_")).collect()
}

/// The name of a void case: its label's enumeration variant or constant, or `V<n>`.
fn case_variant(label: Option<&str>, value: i64, enum_variant: Option<&str>) -> String {
    match (enum_variant, label) {
        (Some(v), _) => v.to_string(),
        (None, Some(n)) => camel(n),
        (None, None) if value < 0 => format!("VNeg{}", value.unsigned_abs()),
        (None, None) => format!("V{value}"),
    }
}

/// How a union's arm is represented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArmNames {
    /// An arm with data: one variant named after its field, holding the discriminant too when
    /// several cases share the arm.
    Data(String),
    /// A `void` arm: a variant per case label.
    Void(Vec<String>),
}

/// Names of one version's module.
#[derive(Clone, Debug)]
pub struct VersionNames {
    /// `lab_vers`
    pub module: String,
    /// `LabVersClient`
    pub client: String,
    /// `LabVersClientWith`
    pub client_with: String,
    /// `LabVersService`
    pub service: String,
    /// `LabVersAsyncService`
    pub async_service: String,
    /// Per procedure.
    pub procs: Vec<ProcNames>,
}

/// Names of one procedure.
#[derive(Clone, Debug)]
pub struct ProcNames {
    /// `minus`: the client's and the trait's method, the stem of the codec functions.
    pub method: String,
    /// `MINUS`: the procedure number's constant.
    pub konst: String,
    /// The arguments' parameter names.
    pub args: Vec<String>,
}

/// Every Rust name of one interface.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Per constant.
    pub consts: Vec<String>,
    /// Per typedef.
    pub typedefs: Vec<String>,
    /// Per enumeration: its name and its variants.
    pub enums: Vec<(String, Vec<String>)>,
    /// Per struct: its name and its fields.
    pub structs: Vec<(String, Vec<String>)>,
    /// Per union: its name and its arms.
    pub unions: Vec<(String, Vec<ArmNames>)>,
    /// Per program, per version.
    pub versions: Vec<Vec<VersionNames>>,
}

struct Planner<'m> {
    m: &'m Model,
    diags: Vec<Diagnostic>,
}

impl Planner<'_> {
    fn err(&mut self, pos: Pos, msg: String) {
        let d = self.m.diag(pos, msg);
        self.diags.push(d);
    }

    /// Reports a name already taken in `seen` (what took it is the map's value).
    fn claim(&mut self, seen: &mut HashMap<String, String>, rust: &str, who: &str, pos: Pos, what: &str) {
        if let Some(other) = seen.insert(rust.to_string(), format!("'{who}'")) {
            self.err(pos, format!("{what}: '{who}' and {other} both become the Rust name `{rust}`; rename one"));
        }
    }
}

/// Names every item of `m` and checks that none clash.
pub fn plan(m: &Model, strip_enum_prefix: bool) -> Result<Names, Vec<Diagnostic>> {
    let mut p = Planner { m, diags: Vec::new() };
    let mut n = Names::default();
    // One namespace for the top level: types, constants and version modules.
    let mut top: HashMap<String, String> = HashMap::new();
    let mut top_level = |p: &mut Planner<'_>, rust: String, name: &str, pos: Pos| {
        if let Some(other) = top.insert(rust.clone(), format!("'{name}'")) {
            p.err(pos, format!("'{name}' and {other} both become the Rust name `{rust}`; rename one"));
        }
        if PRELUDE.contains(&rust.as_str()) {
            p.err(
                pos,
                format!("'{name}' becomes `{rust}`, which the generated code takes from Rust's prelude; rename it"),
            );
        }
        rust
    };
    n.consts = m.consts.iter().map(|c| top_level(&mut p, screaming(&c.name), &c.name, c.pos)).collect();
    n.typedefs = m.typedefs.iter().map(|t| top_level(&mut p, camel(&t.name), &t.name, t.pos)).collect();
    for e in &m.enums {
        let name = top_level(&mut p, camel(&e.name), &e.name, e.pos);
        let raw: Vec<&str> = e.members.iter().map(|m| m.name.as_str()).collect();
        let stems =
            if strip_enum_prefix { strip_common_prefix(&raw) } else { raw.iter().map(|s| s.to_string()).collect() };
        let mut seen = HashMap::new();
        let variants = e
            .members
            .iter()
            .zip(stems)
            .map(|(mem, stem)| {
                let v = camel(&stem);
                p.claim(&mut seen, &v, &mem.name, mem.pos, &format!("enum {}", e.name));
                v
            })
            .collect();
        n.enums.push((name, variants));
    }
    for s in &m.structs {
        let name = top_level(&mut p, camel(&s.name), &s.name, s.pos);
        let mut seen = HashMap::new();
        let fields = s
            .fields
            .iter()
            .map(|f| {
                let r = snake(&f.name);
                p.claim(&mut seen, &r, &f.name, f.pos, &format!("struct {}", s.name));
                r
            })
            .collect();
        n.structs.push((name, fields));
    }
    for u in &m.unions {
        let name = top_level(&mut p, camel(&u.name), &u.name, u.pos);
        let what = format!("union {}", u.name);
        let mut seen = HashMap::new();
        if u.default.is_some() {
            seen.insert("Default".to_string(), "the default arm".to_string());
        }
        let mut arms = Vec::new();
        for a in &u.arms {
            match &a.field {
                Some(f) => {
                    let v = camel(&f.name);
                    p.claim(&mut seen, &v, &f.name, f.pos, &what);
                    arms.push(ArmNames::Data(v));
                }
                None => {
                    let mut vs = Vec::new();
                    for c in &a.cases {
                        let member = match u.switch {
                            Discriminant::Enum(id) => m[id]
                                .members
                                .iter()
                                .position(|mem| i64::from(mem.value) == c.value)
                                .map(|i| n.enums[id.index()].1[i].as_str()),
                            _ => None,
                        };
                        let v = case_variant(c.name.as_deref(), c.value, member);
                        let label = c.name.clone().unwrap_or_else(|| c.value.to_string());
                        p.claim(&mut seen, &v, &format!("case {label}"), c.pos, &what);
                        vs.push(v);
                    }
                    arms.push(ArmNames::Void(vs));
                }
            }
        }
        n.unions.push((name, arms));
    }
    for prog in &m.programs {
        let mut versions = Vec::new();
        for v in &prog.versions {
            let module = top_level(&mut p, snake(&v.name), &v.name, v.pos);
            let stem = camel(&v.name);
            let mut consts: HashMap<String, String> = HashMap::new();
            for reserved in ["PROGRAM", "VERSION", "PROCEDURES"] {
                consts.insert(reserved.into(), format!("the version's own `{reserved}`"));
            }
            let mut methods: HashMap<String, String> = HashMap::new();
            for reserved in CLIENT_METHODS {
                methods.insert(reserved.to_string(), format!("the client's own `{reserved}`"));
            }
            let mut procs = Vec::new();
            for pr in &v.procedures {
                let method = snake(&pr.name);
                let konst = screaming(&pr.name);
                let what = format!("version {}", v.name);
                p.claim(&mut consts, &konst, &pr.name, pr.pos, &what);
                p.claim(&mut methods, &method, &pr.name, pr.pos, &what);
                if pr.result.as_ref().is_some_and(|r| matches!(r.resolved(), Type::VarOpaque(_))) {
                    p.claim(&mut methods, &format!("{method}_into"), &pr.name, pr.pos, &what);
                }
                let mut seen = HashMap::new();
                let args = pr
                    .args
                    .iter()
                    .map(|a| {
                        let s = snake(&a.name);
                        // Argument names live beside the generated code's own locals.
                        let s = if LOCALS.contains(&s.as_str()) { format!("{s}_") } else { s };
                        p.claim(&mut seen, &s, &a.name, pr.pos, &format!("procedure {}", pr.name));
                        s
                    })
                    .collect();
                procs.push(ProcNames { method, konst, args });
            }
            versions.push(VersionNames {
                module,
                client: format!("{stem}Client"),
                client_with: format!("{stem}ClientWith"),
                service: format!("{stem}Service"),
                async_service: format!("{stem}AsyncService"),
                procs,
            });
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
    fn common_enum_prefixes_are_stripped_while_every_member_keeps_a_word() {
        assert_eq!(strip_common_prefix(&["LAB_OK", "LAB_DIV_BY_ZERO"]), ["OK", "DIV_BY_ZERO"]);
        assert_eq!(strip_common_prefix(&["RED", "GREEN"]), ["RED", "GREEN"]);
        assert_eq!(strip_common_prefix(&["A_B_X", "A_B"]), ["B_X", "B"]);
        assert_eq!(
            strip_common_prefix(&["MODE_1", "MODE_2"]),
            ["MODE_1", "MODE_2"],
            "no variant may start with a digit"
        );
        assert_eq!(strip_common_prefix(&["ONLY_ONE"]), ["ONE"]);
    }

    #[test]
    fn conversions() {
        assert_eq!(camel("lab_args"), "LabArgs");
        assert_eq!(camel("XDRType"), "XdrType");
        assert_eq!(camel("LAB_PROG"), "LabProg");
        assert_eq!(camel("self"), "Self_");
        assert_eq!(snake("fooBar"), "foo_bar");
        assert_eq!(snake("MINUS"), "minus");
        assert_eq!(snake("type"), "r#type");
        assert_eq!(snake("self"), "self_");
        assert_eq!(screaming("maxLen"), "MAX_LEN");
    }
}
