//! The Wireshark generator, from the resolved [`Model`]: for an interface `NAME.x`, a Lua file
//! `NAME.lua` that lets lowlat's dissector (`wireshark/lowlat.lua` in the repository) read the
//! argument and result bodies of the interface's procedures, in lowlat's native encoding.
//!
//! The generated file is data, not code: a Wireshark protocol `lowlat.NAME` holding one field
//! per place a value can stand (a procedure's argument or result, a struct's member, a union's
//! discriminant or arm), tables describing every struct, union and enumeration, and one entry
//! per program version in the global `_G.lowlat_programs[program][version]`: the procedures by
//! number, each with its name and the types of its arguments and result. The dissector walks
//! those tables over a body (`decode` in lowlat.lua), so the encoding's rules live in one place.
//!
//! Field names: `lowlat.NAME.PROC.ARG` and `lowlat.NAME.PROC.result` (the procedure in lower
//! case), `lowlat.NAME.TYPE.MEMBER` for struct members and union arms; a name met twice gets a
//! suffix (`_v2` for a procedure of a later version, else `_2`, `_3`...). A field's type is that
//! of the value at its place, arrays and optional data looked through: an `int` field for
//! `int x<>`, a `none` field (a subtree) for a struct. A protocol name that `lowlat.lua` uses
//! for its own fields (`lowlat.bind`, `lowlat.token`, ...) gets the prefix `idl_`.
//!
//! Type descriptors, as `lowlat.lua` reads them: `{ k = K }` with K one of `int`, `uint`,
//! `hyper`, `uhyper`, `float`, `double`, `bool`, `enum`; `{ k = "opaque", n = N }` (fixed);
//! `{ k = "varopaque" | "string", max = N }` (`max` absent when unbounded); `{ k = "array", n =
//! N, of = T }`, `{ k = "vararray", max = N, of = T }`, `{ k = "optional", of = T }`; structs
//! `{ k = "struct", name, fields = { {name, ty, field}... } }` and unions `{ k = "union", name,
//! disc = {name, ty, field}, arms = { [value] = {name, ty, field} or false (void) }, default =
//! ... }` (default absent when the union has none, `false` when it is void). Typedefs are
//! looked through.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::model::{Discriminant, Field, Model, Procedure, Type};

/// Names of `lowlat.lua`'s own fields and protocols under `lowlat.`: an interface of one of
/// these names gets the protocol `lowlat.idl_NAME` instead.
const RESERVED: &[&str] = &[
    "magic",
    "version",
    "kind",
    "flags",
    "reserved",
    "slot",
    "token",
    "call_no",
    "nonce_low",
    "proc",
    "error",
    "total_len",
    "offset",
    "fragack",
    "path",
    "tag",
    "seq",
    "ciphertext",
    "body",
    "body_len",
    "fragment",
    "reassembled_len",
    "bind",
    "cookie",
    "grant",
    "refusal",
    "program",
    "program_version",
    "proc_name",
    "call",
    "request_in",
    "response_in",
    "crc32c",
    "tcp",
    "eth",
    "bad_magic",
    "short",
    "length_mismatch",
    "bad_body",
];

/// The Lua file for an interface whose file stem is `stem` (`lab` for `lab.x`).
pub fn generate(m: &Model, stem: &str) -> String {
    let proto = if RESERVED.contains(&stem) { format!("lowlat.idl_{stem}") } else { format!("lowlat.{stem}") };
    let mut g = Gen { m, proto, fields: Vec::new(), taken: HashSet::new(), out: String::new() };
    g.file();
    g.out
}

struct Gen<'a> {
    m: &'a Model,
    proto: String,
    /// The `ProtoField` constructor call of each field, in order (`f[1]` first).
    fields: Vec<String>,
    taken: HashSet<String>,
    out: String,
}

/// A Lua string literal.
fn lua_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\{:03}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The type at a place once arrays, optional data and typedefs are looked through: what its
/// field holds.
fn leaf(ty: &Type) -> &Type {
    match ty {
        Type::Typedef(_, t) | Type::Optional(t) | Type::FixedArray(t, _) | Type::VarArray(t, _) => leaf(t),
        t => t,
    }
}

/// Whether the native encoding sends these values (a procedure's arguments, or its result) as
/// the whole body: one variable-length opaque or string.
fn whole_body(tys: &[&Type]) -> bool {
    tys.len() == 1 && matches!(tys[0].resolved(), Type::VarOpaque(_) | Type::String(_))
}

impl Gen<'_> {
    fn line(&mut self, s: impl AsRef<str>) {
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    /// A field for a value of type `ty` at `path` (under the protocol), labelled `label`;
    /// returns its Lua expression (`f[N]`).
    fn field(&mut self, path: &str, label: &str, ty: &Type) -> String {
        let mut abbrev = format!("{}.{path}", self.proto);
        let mut n = 2;
        while !self.taken.insert(abbrev.clone()) {
            abbrev = format!("{}.{path}_{n}", self.proto);
            n += 1;
        }
        let (a, l) = (lua_str(&abbrev), lua_str(label));
        let ctor = match leaf(ty) {
            Type::Int => format!("ProtoField.int32({a}, {l}, base.DEC)"),
            Type::UInt => format!("ProtoField.uint32({a}, {l}, base.DEC)"),
            Type::Hyper => format!("ProtoField.int64({a}, {l}, base.DEC)"),
            Type::UHyper => format!("ProtoField.uint64({a}, {l}, base.DEC)"),
            Type::Float => format!("ProtoField.float({a}, {l})"),
            Type::Double => format!("ProtoField.double({a}, {l})"),
            Type::Bool => format!("ProtoField.bool({a}, {l}, base.NONE)"),
            Type::Enum(id) => format!("ProtoField.int32({a}, {l}, base.DEC, V[{}])", lua_str(&self.m[*id].name)),
            Type::FixedOpaque(_) | Type::VarOpaque(_) => format!("ProtoField.bytes({a}, {l})"),
            Type::String(_) => format!("ProtoField.string({a}, {l}, base.UNICODE)"),
            Type::Struct(_) | Type::Union(_) => format!("ProtoField.none({a}, {l})"),
            Type::Typedef(..) | Type::Optional(_) | Type::FixedArray(..) | Type::VarArray(..) => {
                unreachable!("leaf looks through these")
            }
        };
        self.fields.push(ctor);
        format!("f[{}]", self.fields.len())
    }

    /// The descriptor of `ty` (see the module doc).
    fn ty(&self, ty: &Type) -> String {
        let max = |b: Option<crate::model::Size>| b.map(|s| format!(", max = {}", s.value)).unwrap_or_default();
        match ty {
            Type::Int => "{ k = \"int\" }".into(),
            Type::UInt => "{ k = \"uint\" }".into(),
            Type::Hyper => "{ k = \"hyper\" }".into(),
            Type::UHyper => "{ k = \"uhyper\" }".into(),
            Type::Float => "{ k = \"float\" }".into(),
            Type::Double => "{ k = \"double\" }".into(),
            Type::Bool => "{ k = \"bool\" }".into(),
            Type::Enum(_) => "{ k = \"enum\" }".into(),
            Type::Struct(id) => format!("T[{}]", lua_str(&self.m[*id].name)),
            Type::Union(id) => format!("T[{}]", lua_str(&self.m[*id].name)),
            Type::Typedef(_, t) => self.ty(t),
            Type::FixedOpaque(n) => format!("{{ k = \"opaque\", n = {} }}", n.value),
            Type::VarOpaque(b) => format!("{{ k = \"varopaque\"{} }}", max(*b)),
            Type::String(b) => format!("{{ k = \"string\"{} }}", max(*b)),
            Type::FixedArray(t, n) => format!("{{ k = \"array\", n = {}, of = {} }}", n.value, self.ty(t)),
            Type::VarArray(t, b) => format!("{{ k = \"vararray\"{}, of = {} }}", max(*b), self.ty(t)),
            Type::Optional(t) => format!("{{ k = \"optional\", of = {} }}", self.ty(t)),
        }
    }

    /// `{ name = ..., ty = ..., field = ... }` for a value named `name` at `path`.
    fn value(&mut self, path: &str, name: &str, ty: &Type) -> String {
        let field = self.field(path, name, ty);
        format!("{{ name = {}, ty = {}, field = {field} }}", lua_str(name), self.ty(ty))
    }

    /// A union arm's value, or `false` for `void`.
    fn arm(&mut self, union: &str, f: Option<&Field>) -> String {
        match f {
            Some(f) => self.value(&format!("{union}.{}", f.name), &f.name, &f.ty),
            None => "false".into(),
        }
    }

    fn file(&mut self) {
        let m = self.m;
        let src = m.source.name.rsplit('/').next().unwrap_or(&m.source.name);
        // Everything but the fields' declarations is built first: the fields are named as the
        // places are met, and declared before the tables that use them.
        let mut body = Vec::new();
        for e in &m.enums {
            let members: Vec<String> =
                e.members.iter().map(|mb| format!("[{}] = {}", mb.value, lua_str(&mb.name))).collect();
            body.push(format!("V[{}] = {{ {} }}", lua_str(&e.name), members.join(", ")));
        }
        if !m.structs.is_empty() || !m.unions.is_empty() {
            body.push(String::new());
        }
        for s in &m.structs {
            body.push(format!("T[{}] = {{ k = \"struct\", name = {} }}", lua_str(&s.name), lua_str(&s.name)));
        }
        for u in &m.unions {
            body.push(format!("T[{}] = {{ k = \"union\", name = {} }}", lua_str(&u.name), lua_str(&u.name)));
        }
        for s in &m.structs {
            let members: Vec<String> =
                s.fields.iter().map(|f| self.value(&format!("{}.{}", s.name, f.name), &f.name, &f.ty)).collect();
            body.push(format!("T[{}].fields = {{", lua_str(&s.name)));
            for mb in members {
                body.push(format!("    {mb},"));
            }
            body.push("}".into());
        }
        for u in &m.unions {
            let un = lua_str(&u.name);
            let disc_ty = match u.switch {
                Discriminant::Int => Type::Int,
                Discriminant::UInt => Type::UInt,
                Discriminant::Bool => Type::Bool,
                Discriminant::Enum(id) => Type::Enum(id),
            };
            let disc = self.value(&format!("{}.{}", u.name, u.discriminant.name), &u.discriminant.name, &disc_ty);
            body.push(format!("T[{un}].disc = {disc}"));
            body.push(format!("T[{un}].arms = {{"));
            for a in &u.arms {
                let arm = self.arm(&u.name, a.field.as_ref());
                for c in &a.cases {
                    body.push(format!("    [{}] = {arm},", c.value));
                }
            }
            body.push("}".into());
            if let Some(d) = &u.default {
                let arm = self.arm(&u.name, d.field.as_ref());
                body.push(format!("T[{un}].default = {arm}"));
            }
        }
        for p in &m.programs {
            let several = p.versions.len() > 1;
            for v in &p.versions {
                body.push(String::new());
                body.push(format!("-- {} (0x{:08x}) version {} ({})", p.name, p.number, v.name, v.number));
                body.push(format!("lowlat_programs[0x{:08x}] = lowlat_programs[0x{:08x}] or {{}}", p.number, p.number));
                body.push(format!("lowlat_programs[0x{:08x}][{}] = {{", p.number, v.number));
                body.push(format!(
                    "    interface = {}, program = {}, version = {}, proto = proto,",
                    lua_str(src),
                    lua_str(&p.name),
                    lua_str(&v.name)
                ));
                body.push("    procs = {".into());
                for pr in &v.procedures {
                    let base = if several && v.number != p.versions[0].number {
                        format!("{}_v{}", pr.name.to_lowercase(), v.number)
                    } else {
                        pr.name.to_lowercase()
                    };
                    body.push(self.procedure(pr, &base));
                }
                body.push("    },".into());
                body.push("}".into());
            }
        }

        self.line(format!("-- @generated by lowlat-idl from `{src}`. Do not edit: change the .x file and regenerate."));
        self.line(format!("-- The argument and result bodies of {src}'s procedures, for lowlat's Wireshark dissector"));
        self.line("-- (wireshark/lowlat.lua in lowlat's repository). Load both, in either order:");
        self.line(format!("--   tshark -X lua_script:lowlat.lua -X lua_script:{} ...", src.replace(".x", ".lua")));
        self.line("-- or copy both into Wireshark's personal Lua plugins folder.");
        self.line(format!("-- Fields: {p}.PROCEDURE.ARGUMENT, {p}.PROCEDURE.result, {p}.TYPE.MEMBER.", p = self.proto));
        self.line("");
        self.line(format!(
            "local proto = Proto({}, {})",
            lua_str(&self.proto),
            lua_str(&format!("lowlat interface {src}"))
        ));
        self.line("local T, V, f = {}, {}, {}");
        self.line("-- Shared with lowlat.lua through _G: Wireshark gives each script its own environment.");
        self.line("local lowlat_programs = _G.lowlat_programs or {}");
        self.line("_G.lowlat_programs = lowlat_programs");
        // Enumerations first: the fields of enumerated values name their members.
        let enums = m.enums.len();
        if enums > 0 {
            self.line("");
        }
        for l in body.iter().take(enums).cloned().collect::<Vec<_>>() {
            self.line(l);
        }
        self.line("");
        for (i, c) in self.fields.clone().iter().enumerate() {
            self.line(format!("f[{}] = {c}", i + 1));
        }
        self.line("proto.fields = f");
        for l in body.iter().skip(enums).cloned().collect::<Vec<_>>() {
            self.line(l);
        }
    }

    /// One procedure's entry: `[N] = { name, args, result }`.
    fn procedure(&mut self, pr: &Procedure, base: &str) -> String {
        let mut parts = vec![format!("name = {}", lua_str(&pr.name))];
        if !pr.args.is_empty() {
            let args: Vec<String> =
                pr.args.iter().map(|a| self.value(&format!("{base}.{}", a.name), &a.name, &a.ty)).collect();
            parts.push(format!("args = {{ {} }}", args.join(", ")));
            if whole_body(&pr.args.iter().map(|a| &a.ty).collect::<Vec<_>>()) {
                parts.push("args_body = true".into());
            }
        }
        if let Some(r) = &pr.result {
            let res = self.value(&format!("{base}.result"), "result", r);
            parts.push(format!("result = {{ {res} }}"));
            if whole_body(&[r]) {
                parts.push("result_body = true".into());
            }
        }
        format!("        [{}] = {{ {} }},", pr.number, parts.join(", "))
    }
}
