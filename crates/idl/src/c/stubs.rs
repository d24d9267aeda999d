//! Per program version: the procedure numbers, typed client functions over
//! `lowlat_client_invoke`, and a service struct of C procedures with the function that registers
//! them with a `lowlat_server` in both encodings (lowlat's native one, and XDR for ONC RPC).
//!
//! A procedure's arguments travel as one message: each in turn, except that in the native
//! encoding a procedure whose only argument (or whose result) is opaque data or a string sends
//! it as the whole body, without a length (as the Rust stubs do).

use super::codec::{addr, dot, lit};
use super::names::{ProcNames, VersionNames};
use super::types::{is_scalar, is_string};
use super::Gen;
use crate::model::{max_len, Procedure, ProgramId, Type};

/// A procedure with its names.
struct Proc<'m> {
    p: &'m Procedure,
    n: ProcNames,
}

impl Proc<'_> {
    /// `(C parameter name, type)` of each argument.
    fn args(&self) -> Vec<(String, Type)> {
        self.n.params.iter().cloned().zip(self.p.args.iter().map(|a| a.ty.clone())).collect()
    }

    /// Whether the native encoding sends this one value as the whole body.
    fn body(vals: &[(String, Type)]) -> bool {
        vals.len() == 1 && matches!(vals[0].1.resolved(), Type::VarOpaque(_) | Type::String(_))
    }
}

impl Gen<'_> {
    /// How a client passes an argument: scalars by value, strings as `const char *`, anything
    /// else by `const` pointer.
    fn client_param(&self, ty: &Type, name: &str) -> String {
        if is_scalar(ty) {
            format!("{} {name}", self.type_name(ty))
        } else if is_string(ty) {
            format!("const char *{name}")
        } else {
            format!("const {} *{name}", self.type_name(ty))
        }
    }

    /// How a procedure is handed an argument: scalars by value, strings as `char *`, anything
    /// else by pointer (lent; it may move members out, leaving them zeroed).
    fn service_param(&self, ty: &Type, name: &str) -> String {
        if is_scalar(ty) || is_string(ty) {
            self.decl(ty, name)
        } else {
            format!("{} *{name}", self.type_name(ty))
        }
    }

    /// The result parameter: a pointer to the result's type.
    fn result_param(&self, ty: &Type) -> String {
        format!("{} *result", self.type_name(ty))
    }

    pub(super) fn version_header(&mut self, pid: ProgramId, vi: usize) {
        let m = self.m;
        let prog = &m[pid];
        let v = &prog.versions[vi];
        let vn = self.names.versions[pid.index()][vi].clone();
        self.h("");
        self.h(format!(
            "/* ---- program {} ({:#x}), version {} ({}) ---- */",
            prog.name, prog.number, v.name, v.number
        ));
        self.h("");
        if vi == 0 {
            self.h(format!("#define {} {:#x}u", self.names.programs[pid.index()], prog.number));
        }
        self.h(format!("#define {} {}u", vn.konst, v.number));
        for (pr, n) in v.procedures.iter().zip(&vn.procs) {
            self.h(format!("#define {} {}u /* {} */", n.konst, pr.number, m.signature(pr)));
        }
        self.h("");
        self.h("/*");
        self.h(" * Client functions: each calls one procedure through `client` (any scheme: XDR over onc+udp://");
        self.h(" * and onc+tcp://, lowlat's native encoding elsewhere). `options` is NULL or the call's options.");
        self.h(" * Arguments are read during the call only. On success a result is written to *result, which");
        self.h(" * then owns what it points to (free it with its type's _free function, where it has one);");
        self.h(" * `result` may be NULL to ignore it. They return LOWLAT_OK or a LOWLAT_E_* code (see");
        self.h(" * lowlat_last_error()); on failure *result holds nothing to free.");
        self.h(" */");
        for (pr, n) in v.procedures.iter().zip(&vn.procs) {
            let proc_ = Proc { p: pr, n: n.clone() };
            self.h(format!("/* {} */", m.signature(pr)));
            self.h(format!("{};", self.client_signature(&proc_)));
        }
        self.h("");
        self.h(format!("/* The procedures of version {}, implemented by a server. `user` is passed to each.", v.name));
        self.h(" * Each returns LOWLAT_PROC_OK, LOWLAT_PROC_GARBAGE_ARGS or LOWLAT_PROC_FAILED. Arguments are");
        self.h(" * lent for the call (freed after it: copy what must outlive it, or move a member out and");
        self.h(" * leave it zeroed). *result starts zeroed; what the procedure puts there must own its");
        self.h(" * memory (malloc'd): it is freed with the type's _free function once the reply is encoded.");
        self.h(" * A NULL member is a procedure the server does not have. Procedures run on the thread that");
        self.h(" * received the call, several at once on a server with several endpoints. */");
        self.h(format!("typedef struct {}_service {{", vn.prefix));
        self.h("    void *user;");
        for (pr, n) in v.procedures.iter().zip(&vn.procs) {
            let proc_ = Proc { p: pr, n: n.clone() };
            self.h(format!("    /* {} */", m.signature(pr)));
            self.h(format!("    {};", self.service_member(&proc_)));
        }
        self.h(format!("}} {}_service;", vn.prefix));
        self.h("");
        self.h("/* Adds the procedures of `service` (not NULL) to `server` in both encodings: lowlat's native");
        self.h(" * one for its own transports and XDR for ONC RPC callers. `service` must stay valid while the");
        self.h(" * server serves. Returns LOWLAT_OK or the first failure's code. */");
        self.h(format!("int {}_register(lowlat_server *server, const {}_service *service);", vn.prefix, vn.prefix));
    }

    fn client_signature(&self, pr: &Proc<'_>) -> String {
        let mut params = vec!["const lowlat_client *client".to_string(), "const lowlat_call_options *options".into()];
        params.extend(pr.args().iter().map(|(n, t)| self.client_param(t, n)));
        if let Some(t) = &pr.p.result {
            params.push(self.result_param(t));
        }
        format!("int {}({})", pr.n.function, params.join(", "))
    }

    fn service_member(&self, pr: &Proc<'_>) -> String {
        let mut params = vec!["void *user".to_string(), "const lowlat_call *call".into()];
        params.extend(pr.args().iter().map(|(n, t)| self.service_param(t, n)));
        if let Some(t) = &pr.p.result {
            params.push(self.result_param(t));
        }
        format!("int (*{})({})", pr.n.member, params.join(", "))
    }

    pub(super) fn version_source(&mut self, pid: ProgramId, vi: usize) {
        let m = self.m;
        let v = &m[pid].versions[vi];
        let vn: VersionNames = self.names.versions[pid.index()][vi].clone();
        let procs: Vec<Proc<'_>> = v.procedures.iter().zip(&vn.procs).map(|(p, n)| Proc { p, n: n.clone() }).collect();
        self.c("");
        self.c(format!("/* ---- version {} ---- */", v.name));
        for pr in &procs {
            self.proc_codecs(pr);
            self.client_function(pr);
            self.dispatch(pr, &vn);
        }
        self.c("");
        self.open_c(format!(
            "int {}_register(lowlat_server *server, const {}_service *service) {{",
            vn.prefix, vn.prefix
        ));
        self.c("int rc;");
        self.c("if (service == NULL) return LOWLAT_E_INVALID_ARGUMENT;");
        let prog = self.names.programs[pid.index()].clone();
        for pr in &procs {
            let flags = if self.opts.long_running.contains(&pr.p.name) { "LOWLAT_PROCEDURE_LONG_RUNNING" } else { "0" };
            let xflags = if flags == "0" {
                "LOWLAT_PROCEDURE_XDR".to_string()
            } else {
                format!("LOWLAT_PROCEDURE_XDR | {flags}")
            };
            self.open_c(format!("if (service->{} != NULL) {{", pr.n.member));
            for (f, which) in [(flags.to_string(), "native"), (xflags, "xdr")] {
                self.c(format!(
                    "rc = lowlat_server_add_procedure(server, {prog}, {}, {}, {}, {f}, {}_{which}, (void *)service);",
                    vn.konst,
                    pr.n.konst,
                    lit(&pr.p.name),
                    pr.n.function
                ));
                self.c("if (rc != LOWLAT_OK) return rc;");
            }
            self.close_c("}");
        }
        self.c("return LOWLAT_OK;");
        self.close_c("}");
    }

    /// The procedure's argument and result codecs (static): `<fn>_call` holds what a client
    /// passes, `<fn>_args` what a server decodes.
    fn proc_codecs(&mut self, pr: &Proc<'_>) {
        let f = pr.n.function.clone();
        let args = pr.args();
        let label = |side: &str, t: &Type| format!("{} {side}: {}", pr.p.name, self.m.spelling(t));
        if !args.is_empty() {
            self.c("");
            self.open_c(format!("struct {f}_call {{"));
            for (n, t) in &args {
                self.c(format!("{};", self.client_param(t, n)));
            }
            self.close_c("};");
            self.c("");
            self.open_c(format!("struct {f}_args {{"));
            for (n, t) in &args {
                self.c(format!("{};", self.decl(t, n)));
            }
            self.close_c("};");
            // Encoder of the caller's arguments.
            self.c("");
            self.open_c(format!("static int {f}_encode_args(lowlat_writer *w, const void *value) {{"));
            self.c(format!("const struct {f}_call *v = (const struct {f}_call *)value;"));
            let body = Proc::body(&args);
            for (n, t) in &args {
                let lv = if is_scalar(t) || is_string(t) { format!("v->{n}") } else { format!("(*v->{n})") };
                self.enc_value(t, &lv, &label("args", t), body);
            }
            self.c("return 0;");
            self.close_c("}");
            // Decoder into the server's arguments, and their free.
            let owns = args.iter().any(|(_, t)| self.owns.ty(t));
            if owns {
                self.c("");
                self.open_c(format!("static void {f}_free_args(struct {f}_args *v) {{"));
                for (n, t) in &args {
                    self.free(t, &format!("v->{n}"), 0);
                }
                self.close_c("}");
            }
            self.c("");
            self.open_c(format!("static int {f}_decode_args(lowlat_reader *r, void *value) {{"));
            self.c(format!("struct {f}_args *v = (struct {f}_args *)value;"));
            self.c("memset(v, 0, sizeof *v);");
            for (n, t) in &args {
                self.dec_value(t, &format!("v->{n}"), &label("args", t), body);
            }
            self.c("if (lowlat_finish(r)) goto fail;");
            self.c("return 0;");
            self.label("fail");
            if owns {
                self.c(format!("{f}_free_args(v);"));
            }
            self.c("memset(v, 0, sizeof *v);");
            self.c("return -1;");
            self.close_c("}");
        }
        if let Some(t) = &pr.p.result {
            let vals = vec![("result".to_string(), t.clone())];
            let body = Proc::body(&vals);
            let ty = self.type_name(t);
            self.c("");
            self.open_c(format!("static int {f}_encode_result(lowlat_writer *w, const void *value) {{"));
            self.c(format!("{ty} const *v = ({ty} const *)value;"));
            self.enc_value(t, "(*v)", &label("result", t), body);
            self.c("return 0;");
            self.close_c("}");
            self.c("");
            self.open_c(format!("static int {f}_decode_result(lowlat_reader *r, void *value) {{"));
            self.c(format!("{ty} *v = ({ty} *)value;"));
            self.c("memset(v, 0, sizeof *v);");
            self.dec_value(t, "(*v)", &label("result", t), body);
            self.c("if (lowlat_finish(r)) goto fail;");
            self.c("return 0;");
            self.label("fail");
            self.free(t, "(*v)", 0);
            self.c("memset(v, 0, sizeof *v);");
            self.c("return -1;");
            self.close_c("}");
        }
    }

    /// Encodes one argument or result; `body`: it is the whole message (see the module doc).
    fn enc_value(&mut self, t: &Type, lv: &str, what: &str, body: bool) {
        match (t.resolved(), body) {
            (Type::VarOpaque(m), true) => self.c(format!(
                "if (lowlat_put_body_opaque(w, {}, {}, {}u, {})) return -1;",
                dot(lv, "val"),
                dot(lv, "len"),
                max_len(*m),
                lit(what)
            )),
            (Type::String(m), true) => {
                self.c(format!("if (lowlat_put_body_string(w, {lv}, {}u, {})) return -1;", max_len(*m), lit(what)))
            }
            _ => self.enc(t, lv, what, 0),
        }
    }

    /// Decodes one argument or result (see [`enc_value`](Self::enc_value)).
    fn dec_value(&mut self, t: &Type, lv: &str, what: &str, body: bool) {
        match (t.resolved(), body) {
            (Type::VarOpaque(m), true) => self.c(format!(
                "if (lowlat_get_body_opaque(r, {}u, {}, &{}, &{})) goto fail;",
                max_len(*m),
                lit(what),
                dot(lv, "len"),
                dot(lv, "val")
            )),
            (Type::String(m), true) => self.c(format!(
                "if (lowlat_get_body_string(r, {}u, {}, {})) goto fail;",
                max_len(*m),
                lit(what),
                addr(lv)
            )),
            _ => self.dec(t, lv, what, 0),
        }
    }

    /// A client function: its arguments and result lent to `lowlat_client_invoke` with their
    /// codecs (none for no arguments; a procedure without a result passes no decoder, so lowlat
    /// refuses a non-empty one).
    fn client_function(&mut self, pr: &Proc<'_>) {
        let f = pr.n.function.clone();
        let args = pr.args();
        self.c("");
        self.open_c(format!("{} {{", self.client_signature(pr)));
        if args.is_empty() && pr.p.result.is_none() {
            self.c(format!("return lowlat_client_invoke(client, {}, options, NULL, NULL, NULL, NULL);", pr.n.konst));
            self.close_c("}");
            return;
        }
        // Only the fields used are set: `why` is written on failure only.
        self.c("lowlat_call_codec codec;");
        let encode = if args.is_empty() {
            "NULL"
        } else {
            let names: Vec<&str> = args.iter().map(|(n, _)| n.as_str()).collect();
            self.c(format!("struct {f}_call args = {{ {} }};", names.join(", ")));
            self.c(format!("codec.encode = {f}_encode_args;"));
            self.c("codec.args = &args;");
            "lowlat_call_encode"
        };
        let decode = if pr.p.result.is_some() {
            self.c(format!("codec.decode = {f}_decode_result;"));
            self.c("codec.result = result;");
            "result != NULL ? lowlat_call_decode : lowlat_call_ignore"
        } else {
            "NULL"
        };
        self.c(format!(
            "return lowlat_client_invoke(client, {}, options, {encode}, &codec, {decode}, &codec);",
            pr.n.konst
        ));
        self.close_c("}");
    }

    /// The server side: decode the arguments, call the procedure, encode its result, free both;
    /// one entry point per encoding.
    fn dispatch(&mut self, pr: &Proc<'_>, vn: &VersionNames) {
        let f = pr.n.function.clone();
        let args = pr.args();
        let owns_args = args.iter().any(|(_, t)| self.owns.ty(t));
        self.c("");
        self.open_c(format!(
            "static int {f}_serve(const {}_service *s, const lowlat_call *call, const uint8_t *body, size_t len, lowlat_out *out, int encoding) {{",
            vn.prefix
        ));
        self.c("lowlat_reader r;");
        self.c("lowlat_reader_init(&r, body, len, encoding);");
        let mut call_args = vec!["s->user".to_string(), "call".into()];
        if args.is_empty() {
            self.c("if (lowlat_finish(&r)) return LOWLAT_PROC_GARBAGE_ARGS;");
        } else {
            self.c(format!("struct {f}_args args;"));
            self.c(format!("if ({f}_decode_args(&r, &args)) return LOWLAT_PROC_GARBAGE_ARGS;"));
            for (n, t) in &args {
                call_args.push(if is_scalar(t) || is_string(t) { format!("args.{n}") } else { format!("&args.{n}") });
            }
        }
        match &pr.p.result {
            Some(t) => {
                self.c(format!("{};", self.decl(t, "result")));
                self.c("memset(&result, 0, sizeof result);");
                call_args.push("&result".into());
                self.c(format!("int status = s->{}({});", pr.n.member, call_args.join(", ")));
                self.open_c("if (status == LOWLAT_PROC_OK) {");
                self.c("char why[LOWLAT_WHY_LEN];");
                self.c(format!("status = lowlat_encode_result(out, encoding, {f}_encode_result, &result, why);"));
                self.close_c("}");
                self.free(t, "result", 0);
            }
            None => {
                self.c("(void)out;");
                self.c(format!("int status = s->{}({});", pr.n.member, call_args.join(", ")));
            }
        }
        if owns_args {
            self.c(format!("{f}_free_args(&args);"));
        }
        self.c("return status;");
        self.close_c("}");
        for (which, enc) in [("native", "lowlat_host_encoding()"), ("xdr", "LOWLAT_ENCODING_XDR")] {
            self.c("");
            self.open_c(format!(
                "static int {f}_{which}(void *user, const lowlat_call *call, const uint8_t *body, size_t len, lowlat_out *out) {{"
            ));
            self.c(format!("return {f}_serve((const {}_service *)user, call, body, len, out, {enc});", vn.prefix));
            self.close_c("}");
        }
    }
}
