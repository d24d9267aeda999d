//! Straight-line encoders, decoders and free functions for every enumeration, struct and union,
//! over `lowlat_codec.h`'s writer and reader (one function serves both encodings: the writer or
//! reader says which).
//!
//! Values are reached through C lvalue expressions (`v->prim.i`, `v->many.val[i0]`,
//! `(*v->next)`). A decoder zeroes its value first and, on failure, frees what it allocated, so
//! what a failed decoder leaves owns nothing.

use super::names::c_name;
use super::Gen;
use crate::model::{max_len, Case, Discriminant, EnumId, Field, StructId, Type, Union, UnionId};

/// The address of the value `lv` names (`&v->x`; `p` for `(*p)`).
pub fn addr(lv: &str) -> String {
    match lv.strip_prefix("(*").and_then(|x| x.strip_suffix(')')) {
        Some(inner) if !inner.contains(['(', ')']) => inner.to_string(),
        _ => format!("&{lv}"),
    }
}

/// The member `field` of the value `lv` names (`v->x.len`; `p->len` for `(*p)`).
pub fn dot(lv: &str, field: &str) -> String {
    match lv.strip_prefix("(*").and_then(|x| x.strip_suffix(')')) {
        Some(inner) if !inner.contains(['(', ')']) => format!("{inner}->{field}"),
        _ => format!("{lv}.{field}"),
    }
}

/// A C string literal of `s`.
pub fn lit(s: &str) -> String {
    format!("{s:?}")
}

impl Gen<'_> {
    /// Statements appending `lv` (of type `ty`) to the writer `w`; a failure returns -1.
    pub(super) fn enc(&mut self, ty: &Type, lv: &str, what: &str, depth: usize) {
        let w = lit(what);
        match ty {
            Type::Typedef(_, t) => self.enc(t, lv, what, depth),
            Type::Int => self.c(format!("lowlat_put_i32(w, {lv});")),
            Type::UInt => self.c(format!("lowlat_put_u32(w, {lv});")),
            Type::Hyper => self.c(format!("lowlat_put_i64(w, {lv});")),
            Type::UHyper => self.c(format!("lowlat_put_u64(w, {lv});")),
            Type::Float => self.c(format!("lowlat_put_f32(w, {lv});")),
            Type::Double => self.c(format!("lowlat_put_f64(w, {lv});")),
            Type::Bool => self.c(format!("lowlat_put_bool(w, {lv});")),
            Type::Enum(id) => self.c(format!("if ({}_encode(w, {lv})) return -1;", self.names.enums[id.index()])),
            Type::Struct(id) => {
                self.c(format!("if ({}_encode(w, {})) return -1;", self.names.structs[id.index()], addr(lv)))
            }
            Type::Union(id) => {
                self.c(format!("if ({}_encode(w, {})) return -1;", self.names.unions[id.index()], addr(lv)))
            }
            Type::FixedOpaque(n) => self.c(format!("lowlat_put_opaque_fixed(w, {lv}, {});", n.value)),
            Type::VarOpaque(m) => self.c(format!(
                "if (lowlat_put_opaque(w, {}, {}, {}u, {w})) return -1;",
                dot(lv, "val"),
                dot(lv, "len"),
                max_len(*m)
            )),
            Type::String(m) => self.c(format!("if (lowlat_put_string(w, {lv}, {}u, {w})) return -1;", max_len(*m))),
            Type::FixedArray(e, n) => {
                let i = format!("i{depth}");
                self.open_c(format!("for (size_t {i} = 0; {i} < {}; {i}++) {{", n.value));
                self.enc(e, &format!("{lv}[{i}]"), &format!("{what}[]"), depth + 1);
                self.close_c("}");
            }
            Type::VarArray(e, m) => {
                let i = format!("i{depth}");
                let (len, val) = (dot(lv, "len"), dot(lv, "val"));
                self.c(format!("if (lowlat_put_count(w, {len}, {val}, {}u, {w})) return -1;", max_len(*m)));
                self.open_c(format!("for (uint32_t {i} = 0; {i} < {len}; {i}++) {{"));
                self.enc(e, &format!("{val}[{i}]"), &format!("{what}[]"), depth + 1);
                self.close_c("}");
            }
            Type::Optional(e) => {
                self.c(format!("lowlat_put_bool(w, {lv} != NULL);"));
                self.open_c(format!("if ({lv} != NULL) {{"));
                self.enc(e, &format!("(*{lv})"), &format!("{what}*"), depth + 1);
                self.close_c("}");
            }
        }
    }

    /// Statements reading `lv` (of type `ty`, zeroed) from the reader `r`; a failure jumps to
    /// `fail`.
    pub(super) fn dec(&mut self, ty: &Type, lv: &str, what: &str, depth: usize) {
        let w = lit(what);
        let get = |f: &str| format!("if (lowlat_get_{f}(r, {})) goto fail;", addr(lv));
        match ty {
            Type::Typedef(_, t) => self.dec(t, lv, what, depth),
            Type::Int => self.c(get("i32")),
            Type::UInt => self.c(get("u32")),
            Type::Hyper => self.c(get("i64")),
            Type::UHyper => self.c(get("u64")),
            Type::Float => self.c(get("f32")),
            Type::Double => self.c(get("f64")),
            Type::Bool => self.c(get("bool")),
            Type::Enum(id) => {
                self.c(format!("if ({}_decode(r, {})) goto fail;", self.names.enums[id.index()], addr(lv)))
            }
            Type::Struct(id) => {
                self.c(format!("if ({}_decode(r, {})) goto fail;", self.names.structs[id.index()], addr(lv)))
            }
            Type::Union(id) => {
                self.c(format!("if ({}_decode(r, {})) goto fail;", self.names.unions[id.index()], addr(lv)))
            }
            Type::FixedOpaque(n) => self.c(format!("if (lowlat_get_opaque_fixed(r, {lv}, {})) goto fail;", n.value)),
            Type::VarOpaque(m) => self.c(format!(
                "if (lowlat_get_opaque(r, {}u, {w}, &{}, &{})) goto fail;",
                max_len(*m),
                dot(lv, "len"),
                dot(lv, "val")
            )),
            Type::String(m) => {
                self.c(format!("if (lowlat_get_string(r, {}u, {w}, {})) goto fail;", max_len(*m), addr(lv)))
            }
            Type::FixedArray(e, n) => {
                let i = format!("i{depth}");
                self.open_c(format!("for (size_t {i} = 0; {i} < {}; {i}++) {{", n.value));
                self.dec(e, &format!("{lv}[{i}]"), &format!("{what}[]"), depth + 1);
                self.close_c("}");
            }
            Type::VarArray(e, m) => {
                let (i, n, p) = (format!("i{depth}"), format!("n{depth}"), format!("p{depth}"));
                self.open_c("{");
                self.c(format!("uint32_t {n};"));
                self.c(format!("void *{p};"));
                let (len, val) = (dot(lv, "len"), dot(lv, "val"));
                self.c(format!(
                    "if (lowlat_get_count(r, {}u, {w}, &{n}) || lowlat_alloc_array(r, {n}, sizeof *{val}, &{p})) goto fail;",
                    max_len(*m)
                ));
                self.c(format!("{val} = {p};"));
                self.c(format!("{len} = {n};"));
                self.open_c(format!("for (uint32_t {i} = 0; {i} < {n}; {i}++) {{"));
                self.dec(e, &format!("{val}[{i}]"), &format!("{what}[]"), depth + 1);
                self.close_c("}");
                self.close_c("}");
            }
            Type::Optional(e) => {
                let (b, p) = (format!("b{depth}"), format!("p{depth}"));
                self.open_c("{");
                self.c(format!("bool {b};"));
                self.c(format!("if (lowlat_get_bool(r, &{b})) goto fail;"));
                self.open_c(format!("if ({b}) {{"));
                self.c(format!("void *{p};"));
                self.c(format!("if (lowlat_enter(r) || lowlat_alloc_array(r, 1, sizeof *{lv}, &{p})) goto fail;"));
                self.c(format!("{lv} = {p};"));
                self.dec(e, &format!("(*{lv})"), &format!("{what}*"), depth + 1);
                self.c("lowlat_leave(r);");
                self.close_c("}");
                self.close_c("}");
            }
        }
    }

    /// Statements freeing what `lv` (of type `ty`) owns and zeroing its pointers; nothing for a
    /// type that owns no memory.
    pub(super) fn free(&mut self, ty: &Type, lv: &str, depth: usize) {
        if !self.owns.ty(ty) {
            return;
        }
        match ty {
            Type::Typedef(_, t) => self.free(t, lv, depth),
            Type::Struct(id) => self.c(format!("{}_free({});", self.names.structs[id.index()], addr(lv))),
            Type::Union(id) => self.c(format!("{}_free({});", self.names.unions[id.index()], addr(lv))),
            Type::VarOpaque(_) => {
                let (len, val) = (dot(lv, "len"), dot(lv, "val"));
                self.c(format!("free({val});"));
                self.c(format!("{val} = NULL;"));
                self.c(format!("{len} = 0;"));
            }
            Type::String(_) => {
                self.c(format!("free({lv});"));
                self.c(format!("{lv} = NULL;"));
            }
            Type::FixedArray(e, n) => {
                let i = format!("i{depth}");
                self.open_c(format!("for (size_t {i} = 0; {i} < {}; {i}++) {{", n.value));
                self.free(e, &format!("{lv}[{i}]"), depth + 1);
                self.close_c("}");
            }
            Type::VarArray(e, _) => {
                let (len, val) = (dot(lv, "len"), dot(lv, "val"));
                if self.owns.ty(e) {
                    let i = format!("i{depth}");
                    self.open_c(format!("for (uint32_t {i} = 0; {i} < {len}; {i}++) {{"));
                    self.free(e, &format!("{val}[{i}]"), depth + 1);
                    self.close_c("}");
                }
                self.c(format!("free({val});"));
                self.c(format!("{val} = NULL;"));
                self.c(format!("{len} = 0;"));
            }
            Type::Optional(e) => {
                self.open_c(format!("if ({lv} != NULL) {{"));
                self.free(e, &format!("(*{lv})"), depth + 1);
                self.c(format!("free({lv});"));
                self.c(format!("{lv} = NULL;"));
                self.close_c("}");
            }
            _ => {}
        }
    }

    /// The label of a case in a C `switch` on the union's discriminant.
    pub(super) fn case_label(&self, u: &Union, c: &Case) -> String {
        match u.switch {
            Discriminant::Enum(id) => match self.m[id].member(c.value) {
                Some(mem) => c_name(&mem.name),
                None => c.value.to_string(),
            },
            Discriminant::Bool => if c.value != 0 { "1" } else { "0" }.into(),
            Discriminant::UInt => format!("{}u", c.value),
            Discriminant::Int => match &c.name {
                Some(n) => c_name(n),
                None => c.value.to_string(),
            },
        }
    }

    pub(super) fn enum_codecs(&mut self, id: EnumId) {
        let e = &self.m[id];
        let name = self.names.enums[id.index()].clone();
        // One label per value: two members may share one.
        let mut labels: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for mem in &e.members {
            if seen.insert(mem.value) {
                labels.push(format!("case {}:", c_name(&mem.name)));
            }
        }
        let cases = labels.join(" ");
        self.c("");
        self.open_c(format!("int {name}_encode(lowlat_writer *w, {name} v) {{"));
        self.open_c("switch (v) {");
        self.c(cases.clone());
        self.c("    lowlat_put_i32(w, (int32_t)v);");
        self.c("    return 0;");
        self.c("default:");
        self.c(format!("    return lowlat_bad_enum_w(w, {}, (int32_t)v);", lit(&e.name)));
        self.close_c("}");
        self.close_c("}");
        self.c("");
        self.open_c(format!("int {name}_decode(lowlat_reader *r, {name} *v) {{"));
        self.c("size_t offset = r->pos;");
        self.c("int32_t x;");
        self.c("if (lowlat_get_i32(r, &x)) return -1;");
        self.open_c("switch (x) {");
        self.c(cases);
        self.c(format!("    *v = ({name})x;"));
        self.c("    return 0;");
        self.c("default:");
        self.c(format!("    return lowlat_bad_enum_r(r, {}, x, offset);", lit(&e.name)));
        self.close_c("}");
        self.close_c("}");
    }

    /// The end of a decoder: success, and the failure path that frees what was decoded.
    fn dec_tail(&mut self, free: Option<&str>) {
        self.c("return 0;");
        self.label("fail");
        if let Some(f) = free {
            self.c(format!("{f}(v);"));
        }
        self.c("memset(v, 0, sizeof *v);");
        self.c("return -1;");
    }

    pub(super) fn struct_codecs(&mut self, id: StructId) {
        let m = self.m;
        let s = &m[id];
        let name = self.names.structs[id.index()].clone();
        let fields = self.names.fields[id.index()].clone();
        let what = |f: &Field| format!("{}.{}: {}", s.name, f.name, m.spelling(&f.ty));
        self.c("");
        self.open_c(format!("int {name}_encode(lowlat_writer *w, const {name} *v) {{"));
        for (f, c) in s.fields.iter().zip(&fields) {
            self.enc(&f.ty, &format!("v->{c}"), &what(f), 0);
        }
        self.c("return 0;");
        self.close_c("}");
        self.c("");
        self.open_c(format!("int {name}_decode(lowlat_reader *r, {name} *v) {{"));
        self.c("memset(v, 0, sizeof *v);");
        for (f, c) in s.fields.iter().zip(&fields) {
            self.dec(&f.ty, &format!("v->{c}"), &what(f), 0);
        }
        let owns = self.owns.structs[id.index()];
        self.dec_tail(owns.then_some(format!("{name}_free")).as_deref());
        self.close_c("}");
        if owns {
            self.c("");
            self.open_c(format!("void {name}_free({name} *v) {{"));
            self.c("if (v == NULL) return;");
            for (f, c) in s.fields.iter().zip(&fields) {
                self.free(&f.ty, &format!("v->{c}"), 0);
            }
            self.close_c("}");
        }
    }

    /// A `switch` over a union's discriminant: `arm` writes the statements of each arm with data
    /// (the member's lvalue, its field), `no_arm` the `default:` of a union without a default
    /// arm.
    fn union_switch(&mut self, id: UnionId, mut arm: impl FnMut(&mut Self, &str, &Field), no_arm: &[String]) {
        let m = self.m;
        let u = &m[id];
        let (disc, member) = self.names.union_members[id.index()].clone();
        let lv = |f: &Field| format!("v->{member}.{}", c_name(&f.name));
        self.open_c(match u.switch {
            Discriminant::Bool => format!("switch ((int)v->{disc}) {{"),
            _ => format!("switch (v->{disc}) {{"),
        });
        for a in &u.arms {
            let labels: Vec<String> = a.cases.iter().map(|c| format!("case {}:", self.case_label(u, c))).collect();
            self.c(labels.join(" "));
            self.indent += 1;
            if let Some(f) = &a.field {
                arm(self, &lv(f), f);
            }
            self.c("break;");
            self.indent -= 1;
        }
        self.c("default:");
        self.indent += 1;
        match u.default.as_ref().map(|d| d.field.as_ref()) {
            Some(Some(f)) => {
                arm(self, &lv(f), f);
                self.c("break;");
            }
            Some(None) => self.c("break;"),
            None => no_arm.iter().for_each(|l| self.c(l)),
        }
        self.indent -= 1;
        self.close_c("}");
    }

    pub(super) fn union_codecs(&mut self, id: UnionId) {
        let m = self.m;
        let u = &m[id];
        let name = self.names.unions[id.index()].clone();
        let disc = self.names.union_members[id.index()].0.clone();
        let what = |f: &Field| format!("{}.{}: {}", u.name, f.name, m.spelling(&f.ty));
        let (type_name, as_ll) = (lit(&u.name), format!("(long long)v->{disc}"));

        self.c("");
        self.open_c(format!("int {name}_encode(lowlat_writer *w, const {name} *v) {{"));
        match u.switch {
            Discriminant::Int => self.c(format!("lowlat_put_i32(w, v->{disc});")),
            Discriminant::UInt => self.c(format!("lowlat_put_u32(w, v->{disc});")),
            Discriminant::Bool => self.c(format!("lowlat_put_bool(w, v->{disc});")),
            Discriminant::Enum(e) => {
                self.c(format!("if ({}_encode(w, v->{disc})) return -1;", self.names.enums[e.index()]))
            }
        }
        let no_arm = [format!("return lowlat_bad_discriminant_w(w, {type_name}, {as_ll});")];
        self.union_switch(id, |g, lv, f| g.enc(&f.ty, lv, &what(f), 0), &no_arm);
        self.c("return 0;");
        self.close_c("}");

        self.c("");
        self.open_c(format!("int {name}_decode(lowlat_reader *r, {name} *v) {{"));
        self.c("memset(v, 0, sizeof *v);");
        if u.default.is_none() {
            self.c("size_t offset = r->pos;");
        }
        match u.switch {
            Discriminant::Int => self.c(format!("if (lowlat_get_i32(r, &v->{disc})) goto fail;")),
            Discriminant::UInt => self.c(format!("if (lowlat_get_u32(r, &v->{disc})) goto fail;")),
            Discriminant::Bool => self.c(format!("if (lowlat_get_bool(r, &v->{disc})) goto fail;")),
            Discriminant::Enum(e) => {
                self.c(format!("if ({}_decode(r, &v->{disc})) goto fail;", self.names.enums[e.index()]))
            }
        }
        let no_arm = [format!("lowlat_bad_discriminant_r(r, {type_name}, {as_ll}, offset);"), "goto fail;".into()];
        self.union_switch(id, |g, lv, f| g.dec(&f.ty, lv, &what(f), 0), &no_arm);
        let owns = self.owns.unions[id.index()];
        self.dec_tail(owns.then_some(format!("{name}_free")).as_deref());
        self.close_c("}");

        // Free: each arm that owns memory; the others, and any other value, own nothing.
        if owns {
            self.c("");
            self.open_c(format!("void {name}_free({name} *v) {{"));
            self.c("if (v == NULL) return;");
            self.union_switch(id, |g, lv, f| g.free(&f.ty, lv, 0), &["break;".into()]);
            self.close_c("}");
        }
    }
}
