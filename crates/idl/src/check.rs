//! The checker: names defined once and used as what they are, constants resolved and in range,
//! union discriminants and labels valid, recursion only through optional data (or
//! variable-length arrays, whose elements live on the heap), program/version/procedure numbers
//! unique. Every error names its position; as many as possible are reported at once.

use std::collections::{HashMap, HashSet};

use crate::ast::*;
use crate::diag::{Diagnostic, Pos, Source};

/// A spec that passed the checker, with its symbol table: what [`Model::resolve`] reads.
///
/// [`Model::resolve`]: crate::Model::resolve
#[derive(Debug, Clone)]
pub struct Checked {
    /// The checked definitions.
    pub spec: Spec,
    values: HashMap<String, i128>,
}

impl Checked {
    /// The value of a named constant or enumeration member (`TRUE` and `FALSE` included).
    pub(crate) fn named_value(&self, name: &str) -> Option<i128> {
        self.values.get(name).copied()
    }

    /// A spec that skipped the checker, for testing what later stages do with one.
    #[cfg(test)]
    pub(crate) fn unchecked(spec: Spec) -> Checked {
        Checked { spec, values: HashMap::new() }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NameKind {
    Value,
    Type,
    Program,
}

struct Checker<'a> {
    src: &'a Source,
    spec: &'a Spec,
    diags: Vec<Diagnostic>,
    names: HashMap<String, (NameKind, Pos)>,
    consts: HashMap<String, &'a Value>,
    values: HashMap<String, i128>,
    types: HashMap<String, usize>,
}

/// Checks a parsed spec.
pub fn check(src: &Source, spec: Spec) -> Result<Checked, Vec<Diagnostic>> {
    let values = {
        let mut c = Checker {
            src,
            spec: &spec,
            diags: Vec::new(),
            names: HashMap::new(),
            consts: HashMap::new(),
            values: HashMap::new(),
            types: HashMap::new(),
        };
        c.run();
        if !c.diags.is_empty() {
            c.diags.sort_by_key(|d| d.pos);
            return Err(c.diags);
        }
        c.values
    };
    Ok(Checked { spec, values })
}

fn range_name(ty: &TypeSpec) -> &'static str {
    match ty {
        TypeSpec::UInt => "unsigned int",
        TypeSpec::Bool => "bool",
        _ => "int",
    }
}

impl<'a> Checker<'a> {
    fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        let d = self.src.diag(pos, msg);
        self.diags.push(d);
    }

    fn define(&mut self, id: &Ident, kind: NameKind) -> bool {
        if let Some((_, p)) = self.names.get(&id.name) {
            let msg = if p.line == 0 {
                format!("'{}' is predefined", id.name)
            } else {
                format!("'{}' is already defined at line {}, column {}", id.name, p.line, p.column)
            };
            self.err(id.pos, msg);
            return false;
        }
        self.names.insert(id.name.clone(), (kind, id.pos));
        true
    }

    fn run(&mut self) {
        for b in ["TRUE", "FALSE"] {
            self.names.insert(b.into(), (NameKind::Value, Pos::default()));
        }
        self.values.insert("TRUE".into(), 1);
        self.values.insert("FALSE".into(), 0);
        let spec = self.spec;
        for (i, def) in spec.defs.iter().enumerate() {
            match def {
                Def::Const(n, v) => {
                    if self.define(n, NameKind::Value) {
                        self.consts.insert(n.name.clone(), v);
                    }
                }
                Def::Enum(n, members) => {
                    if self.define(n, NameKind::Type) {
                        self.types.insert(n.name.clone(), i);
                    }
                    for m in members {
                        self.define(&m.name, NameKind::Value);
                    }
                }
                Def::Typedef(_) | Def::Struct(..) | Def::Union(_) => {
                    let n = def.name();
                    if self.define(n, NameKind::Type) {
                        self.types.insert(n.name.clone(), i);
                    }
                }
                Def::Program(p) => {
                    self.define(&p.name, NameKind::Program);
                    for v in &p.versions {
                        self.define(&v.name, NameKind::Program);
                    }
                }
            }
        }
        // Constants first (they may refer to each other), then enumerations in order, because
        // an omitted enum value follows the previous member.
        let names: Vec<(String, &Value)> = self.consts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (name, v) in names {
            let mut seen = HashSet::new();
            seen.insert(name.clone());
            if let Some(x) = self.eval(v, &mut seen) {
                self.values.insert(name, x);
            }
        }
        for def in &spec.defs {
            if let Def::Enum(n, members) = def {
                self.check_enum(n, members);
            }
        }
        for def in &spec.defs {
            match def {
                Def::Const(..) | Def::Enum(..) => {}
                Def::Typedef(d) => self.check_decl(d),
                Def::Struct(n, fields) => {
                    let mut seen: HashMap<&str, Pos> = HashMap::new();
                    for f in fields {
                        if let Some(p) = seen.insert(&f.name.name, f.name.pos) {
                            self.err(
                                f.name.pos,
                                format!(
                                    "struct {}: member '{}' already declared at line {}",
                                    n.name, f.name.name, p.line
                                ),
                            );
                        }
                        self.check_decl(f);
                    }
                }
                Def::Union(u) => self.check_union(u),
                Def::Program(p) => self.check_program(p),
            }
        }
        self.check_recursion();
    }

    /// Resolves a constant expression, following named constants and reporting cycles.
    fn eval(&mut self, v: &Value, seen: &mut HashSet<String>) -> Option<i128> {
        match v {
            Value::Lit(n, _) => Some(*n),
            Value::Name(id) => {
                if let Some(x) = self.values.get(&id.name) {
                    return Some(*x);
                }
                if let Some(inner) = self.consts.get(&id.name).copied() {
                    if !seen.insert(id.name.clone()) {
                        self.err(id.pos, format!("constant '{}' is defined in terms of itself", id.name));
                        return None;
                    }
                    let x = self.eval(inner, seen)?;
                    self.values.insert(id.name.clone(), x);
                    return Some(x);
                }
                match self.names.get(&id.name) {
                    Some((NameKind::Value, _)) => None, // an enum member not resolved yet: reported there
                    Some((NameKind::Type, _)) => {
                        self.err(id.pos, format!("'{}' is a type, not a constant", id.name));
                        None
                    }
                    Some((NameKind::Program, _)) => {
                        self.err(id.pos, format!("'{}' is a program or version, not a constant", id.name));
                        None
                    }
                    None => {
                        self.err(id.pos, format!("undefined constant '{}'", id.name));
                        None
                    }
                }
            }
        }
    }

    fn value(&mut self, v: &Value) -> Option<i128> {
        self.eval(v, &mut HashSet::new())
    }

    fn check_enum(&mut self, n: &Ident, members: &[EnumMember]) {
        let mut next: i128 = 0;
        let mut used: HashMap<i128, String> = HashMap::new();
        for m in members {
            let v = match &m.value {
                Some(v) => match self.value(v) {
                    Some(x) => x,
                    None => continue,
                },
                None => next,
            };
            let pos = m.value.as_ref().map_or(m.name.pos, Value::pos);
            if i32::try_from(v).is_err() {
                self.err(pos, format!("enum {}: value {v} of '{}' does not fit in a 32-bit int", n.name, m.name.name));
                continue;
            }
            if let Some(other) = used.get(&v) {
                self.err(pos, format!("enum {}: '{}' has value {v}, already used by '{other}'", n.name, m.name.name));
            }
            used.insert(v, m.name.name.clone());
            self.values.entry(m.name.name.clone()).or_insert(v);
            next = v + 1;
        }
    }

    fn check_type(&mut self, t: &TypeRef) {
        if let TypeSpec::Named(id) = &t.spec {
            match self.names.get(&id.name) {
                Some((NameKind::Type, _)) => {}
                Some(_) => self.err(id.pos, format!("'{}' is not a type", id.name)),
                None => self.err(id.pos, format!("undefined type '{}'", id.name)),
            }
        }
    }

    fn check_size(&mut self, v: &Value, fixed: bool) {
        let Some(x) = self.value(v) else { return };
        if fixed && x < 1 {
            self.err(v.pos(), format!("a fixed size must be at least 1, got {x}"));
        } else if !(0..=u32::MAX as i128).contains(&x) {
            self.err(v.pos(), format!("size {x} is out of range (0 to 4294967295)"));
        }
    }

    fn check_decl(&mut self, d: &Decl) {
        match &d.kind {
            DeclKind::Scalar(t) | DeclKind::Optional(t) => self.check_type(t),
            DeclKind::FixedArray(t, n) => {
                self.check_type(t);
                self.check_size(n, true);
            }
            DeclKind::VarArray(t, n) => {
                self.check_type(t);
                if let Some(n) = n {
                    self.check_size(n, false);
                }
            }
            DeclKind::FixedOpaque(n) => self.check_size(n, true),
            DeclKind::VarOpaque(n) | DeclKind::String(n) => {
                if let Some(n) = n {
                    self.check_size(n, false);
                }
            }
        }
    }

    fn spec_of(&self, t: &'a TypeRef) -> Option<&'a TypeSpec> {
        let mut spec = &t.spec;
        for _ in 0..64 {
            let TypeSpec::Named(n) = spec else {
                return Some(spec);
            };
            match &self.spec.defs[*self.types.get(&n.name)?] {
                Def::Typedef(Decl { kind: DeclKind::Scalar(inner), .. }) => spec = &inner.spec,
                Def::Typedef(_) => return None,
                _ => return Some(spec),
            }
        }
        None
    }

    fn check_union(&mut self, u: &UnionDef) {
        let uname = &u.name.name;
        let DeclKind::Scalar(dt) = &u.disc.kind else {
            self.err(
                u.disc.name.pos,
                format!("union {uname}: the discriminant must be int, unsigned int, bool or an enum"),
            );
            return;
        };
        self.check_type(dt);
        let base = self.spec_of(dt).cloned();
        let enum_members: Option<Vec<String>> = match &base {
            Some(TypeSpec::Int | TypeSpec::UInt | TypeSpec::Bool) => None,
            Some(TypeSpec::Named(n))
                if matches!(self.types.get(&n.name).map(|&i| &self.spec.defs[i]), Some(Def::Enum(..))) =>
            {
                match &self.spec.defs[self.types[&n.name]] {
                    Def::Enum(_, m) => Some(m.iter().map(|m| m.name.name.clone()).collect()),
                    _ => None,
                }
            }
            Some(_) => {
                self.err(dt.pos, format!("union {uname}: the discriminant must be int, unsigned int, bool or an enum"));
                return;
            }
            None => return, // undefined type already reported
        };
        let mut seen: HashMap<i128, Pos> = HashMap::new();
        let mut arm_names: HashMap<String, Pos> = HashMap::new();
        for arm in &u.arms {
            for label in &arm.labels {
                if let Some(members) = &enum_members {
                    match label {
                        Value::Name(id) if members.contains(&id.name) => {}
                        _ => {
                            let shown = match label {
                                Value::Name(id) => id.name.clone(),
                                Value::Lit(n, _) => n.to_string(),
                            };
                            self.err(
                                label.pos(),
                                format!("union {uname}: case {shown} is not a member of the discriminant's enum"),
                            );
                            continue;
                        }
                    }
                }
                let Some(v) = self.value(label) else { continue };
                let ok = match &base {
                    Some(TypeSpec::UInt) => (0..=u32::MAX as i128).contains(&v),
                    Some(TypeSpec::Bool) => v == 0 || v == 1,
                    _ => i32::try_from(v).is_ok(),
                };
                if !ok {
                    let range = range_name(base.as_ref().unwrap_or(&TypeSpec::Int));
                    self.err(
                        label.pos(),
                        format!("union {uname}: case {v} is out of range for a {range} discriminant"),
                    );
                    continue;
                }
                if let Some(p) = seen.insert(v, label.pos()) {
                    self.err(label.pos(), format!("union {uname}: case {v} already used at line {}", p.line));
                }
            }
            if let Some(d) = &arm.decl {
                self.check_decl(d);
                if let Some(p) = arm_names.insert(d.name.name.clone(), d.name.pos) {
                    self.err(
                        d.name.pos,
                        format!("union {uname}: arm '{}' already declared at line {}", d.name.name, p.line),
                    );
                }
            }
        }
        if let Some((_, Some(d))) = &u.default {
            self.check_decl(d);
        }
    }

    fn check_program(&mut self, p: &ProgramDef) {
        self.check_number(&p.number, "program");
        let mut vnums: HashMap<i128, Pos> = HashMap::new();
        for v in &p.versions {
            if let Some(n) = self.check_number(&v.number, "version") {
                if let Some(prev) = vnums.insert(n, v.number.pos()) {
                    self.err(
                        v.number.pos(),
                        format!("program {}: version number {n} already used at line {}", p.name.name, prev.line),
                    );
                }
            }
            let mut pnums: HashMap<i128, Pos> = HashMap::new();
            let mut pnames: HashMap<&str, Pos> = HashMap::new();
            for pr in &v.procs {
                if let Some(prev) = pnames.insert(&pr.name.name, pr.name.pos) {
                    self.err(
                        pr.name.pos,
                        format!(
                            "version {}: procedure '{}' already defined at line {}",
                            v.name.name, pr.name.name, prev.line
                        ),
                    );
                }
                if let Some(n) = self.check_number(&pr.number, "procedure") {
                    if let Some(prev) = pnums.insert(n, pr.number.pos()) {
                        self.err(
                            pr.number.pos(),
                            format!("version {}: procedure number {n} already used at line {}", v.name.name, prev.line),
                        );
                    }
                }
                if let Some(r) = &pr.result {
                    self.check_type(r);
                }
                let mut anames: HashMap<&str, Pos> = HashMap::new();
                for a in &pr.args {
                    self.check_type(&a.ty);
                    if let Some(n) = &a.name {
                        if anames.insert(&n.name, n.pos).is_some() {
                            self.err(n.pos, format!("procedure {}: argument '{}' named twice", pr.name.name, n.name));
                        }
                    }
                }
            }
        }
    }

    fn check_number(&mut self, v: &Value, what: &str) -> Option<i128> {
        let n = self.value(v)?;
        if !(0..=u32::MAX as i128).contains(&n) {
            self.err(v.pos(), format!("{what} number {n} is out of range (0 to 4294967295)"));
            return None;
        }
        Some(n)
    }

    /// Types a definition contains by value (`by_value`) and, for typedefs, every type it names.
    fn edges(&self, def: &Def) -> Vec<(String, Pos, bool)> {
        fn decl_edge(d: &Decl, out: &mut Vec<(String, Pos, bool)>) {
            let (t, by_value) = match &d.kind {
                DeclKind::Scalar(t) | DeclKind::FixedArray(t, _) => (t, true),
                DeclKind::VarArray(t, _) | DeclKind::Optional(t) => (t, false),
                _ => return,
            };
            if let TypeSpec::Named(n) = &t.spec {
                out.push((n.name.clone(), n.pos, by_value));
            }
        }
        let mut out = Vec::new();
        match def {
            Def::Typedef(d) => decl_edge(d, &mut out),
            Def::Struct(_, f) => f.iter().for_each(|d| decl_edge(d, &mut out)),
            Def::Union(u) => {
                u.arms.iter().filter_map(|a| a.decl.as_ref()).for_each(|d| decl_edge(d, &mut out));
                if let Some((_, Some(d))) = &u.default {
                    decl_edge(d, &mut out);
                }
            }
            _ => {}
        }
        out
    }

    fn check_recursion(&mut self) {
        // Two graphs: types held by value (a cycle there has infinite size), and typedef-to-typedef
        // references of any kind (a Rust type alias cannot refer to itself).
        let mut by_value: HashMap<String, Vec<(String, Pos)>> = HashMap::new();
        let mut alias: HashMap<String, Vec<(String, Pos)>> = HashMap::new();
        for def in &self.spec.defs {
            let name = def.name().name.clone();
            let is_typedef = matches!(def, Def::Typedef(_));
            for (to, pos, bv) in self.edges(def) {
                if bv {
                    by_value.entry(name.clone()).or_default().push((to.clone(), pos));
                }
                let to_typedef = matches!(self.types.get(&to).map(|&i| &self.spec.defs[i]), Some(Def::Typedef(_)));
                if is_typedef && to_typedef {
                    alias.entry(name.clone()).or_default().push((to, pos));
                }
            }
        }
        let mut reported = HashSet::new();
        for (graph, why) in [
            (&by_value, "contains itself by value; recursion must go through optional data ('*')"),
            (&alias, "is a typedef that refers to itself; recursion must go through a struct or union"),
        ] {
            for def in &self.spec.defs {
                let start = &def.name().name;
                if let Some((path, pos)) = find_cycle(graph, start) {
                    if reported.insert(start.clone()) {
                        self.err(pos, format!("recursive type '{start}' ({}) {why}", path.join(" -> ")));
                    }
                }
            }
        }
    }
}

/// A path from `start` back to itself, with the position of the first edge.
fn find_cycle(graph: &HashMap<String, Vec<(String, Pos)>>, start: &str) -> Option<(Vec<String>, Pos)> {
    fn dfs(
        g: &HashMap<String, Vec<(String, Pos)>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut HashSet<String>,
    ) -> bool {
        for (to, _) in g.get(at).map(Vec::as_slice).unwrap_or(&[]) {
            if to == start {
                path.push(to.clone());
                return true;
            }
            if seen.insert(to.clone()) {
                path.push(to.clone());
                if dfs(g, start, to, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let first = graph.get(start)?;
    let mut path = vec![start.to_string()];
    let mut seen = HashSet::new();
    if dfs(graph, start, start, &mut path, &mut seen) {
        let second = &path[1];
        let pos = first.iter().find(|(t, _)| t == second).map_or(Pos::default(), |(_, p)| *p);
        return Some((path, pos));
    }
    None
}
