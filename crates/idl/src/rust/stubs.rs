//! A module per program version: its numbers, its procedures' codecs and, with a runtime path,
//! the typed client (right on every scheme: XDR over ONC RPC, the native encoding elsewhere),
//! its view with per-call options, the server trait and the programs that dispatch to it, and
//! as an option the async server trait and its programs.

use super::codec::Enc;
use super::names::{ProcNames, VersionNames};
use super::types::{borrows, is_copy_scalar};
use super::Gen;
use crate::model::{Procedure, ProgramId, Type, Version};

/// A procedure with its names.
struct Proc<'m> {
    p: &'m Procedure,
    n: ProcNames,
}

impl Proc<'_> {
    /// The pattern binding the decoded arguments: `a`, or `(a, b)`.
    fn args_pattern(&self) -> String {
        match self.n.args.as_slice() {
            [one] => one.clone(),
            names => format!("({})", names.join(", ")),
        }
    }

    fn var_opaque_result(&self) -> bool {
        self.p.result.as_ref().is_some_and(|t| matches!(t.resolved(), Type::VarOpaque(_)))
    }
}

impl Gen<'_> {
    pub(super) fn gen_version(&mut self, pid: ProgramId, vi: usize) {
        let m = self.m;
        let prog = &m[pid];
        let v = &prog.versions[vi];
        let vn = self.names.versions[pid.index()][vi].clone();
        let procs: Vec<Proc<'_>> = v.procedures.iter().zip(&vn.procs).map(|(p, n)| Proc { p, n: n.clone() }).collect();
        self.line(format!("/// Program `{}` ({:#x}), version `{}` ({}).", prog.name, prog.number, v.name, v.number));
        if self.opts.runtime_path.is_some() {
            // Paths from the module's parent, where this comment is resolved.
            let (m, c, s) = (&vn.module, &vn.client, &vn.service);
            self.line("///");
            self.line(format!("/// [`{c}`]({m}::{c}) calls it; a server implements [`{s}`]({m}::{s}) and serves it"));
            self.line(format!(
                "/// with [`program`]({m}::program) (lowlat's protocol) and [`program_xdr`]({m}::program_xdr) (ONC RPC)."
            ));
            if self.opts.async_service {
                let t = &vn.async_service;
                self.line(format!("/// Or it implements [`{t}`]({m}::{t}), whose procedures are async, and serves it"));
                self.line(format!(
                    "/// with [`program_async`]({m}::program_async) and [`program_xdr_async`]({m}::program_xdr_async)."
                ));
            }
        }
        self.open(format!("pub mod {} {{", vn.module));
        self.scope = "super::";
        self.line("/// The program number.");
        self.line(format!("pub const PROGRAM: u32 = {:#x};", prog.number));
        self.line("/// The version number.");
        self.line(format!("pub const VERSION: u32 = {};", v.number));
        for pr in &procs {
            self.line(format!("/// Procedure `{}`.", m.signature(pr.p)));
            self.line(format!("pub const {}: u32 = {};", pr.n.konst, pr.p.number));
        }
        self.line("/// Every procedure's number and `.x` name, for messages that name them.");
        let table: Vec<String> = procs.iter().map(|pr| format!("({}, {:?})", pr.n.konst, pr.p.name)).collect();
        self.line(format!("pub const PROCEDURES: &[(u32, &str)] = &[{}];", table.join(", ")));
        for pr in &procs {
            for e in Enc::BOTH {
                self.proc_codecs(pr.p, &pr.n, e);
            }
        }
        if let Some(rt) = self.opts.runtime_path.clone() {
            self.gen_client(&rt, &procs, prog.name.as_str(), v, &vn);
            self.gen_client_with(&rt, &procs, &vn);
            self.gen_service(&rt, &procs, prog.name.as_str(), v, &vn);
            self.gen_program(&rt, &procs, &vn, Enc::Native);
            self.gen_program(&rt, &procs, &vn, Enc::Xdr);
            if self.opts.async_service {
                self.gen_async_service(&rt, &procs, prog.name.as_str(), v, &vn);
                self.gen_program_async(&rt, &procs, &vn, Enc::Native);
                self.gen_program_async(&rt, &procs, &vn, Enc::Xdr);
            }
        }
        self.scope = "";
        self.close("}");
    }

    fn gen_client(&mut self, rt: &str, procs: &[Proc<'_>], prog: &str, v: &Version, vn: &VersionNames) {
        let (client, with) = (&vn.client, &vn.client_with);
        self.line("");
        self.line(format!(
            "/// A typed client of `{prog}` version `{}`, right on every scheme: lowlat's native",
            v.name
        ));
        self.line("/// encoding over its own transports, XDR over `onc+udp://` and `onc+tcp://`. `Send + Sync`:");
        self.line("/// share it between threads, whose calls then proceed in parallel.");
        self.line("#[derive(Debug)]");
        self.open(format!("pub struct {client} {{"));
        self.line(format!("inner: {rt}::Client,"));
        self.close("}");
        self.line("");
        self.open(format!("impl {client} {{"));
        self.line("/// Connects to a server at `uri` and binds to this program version, with default settings.");
        self.open(format!("pub fn connect(uri: &str) -> ::std::result::Result<Self, {rt}::Error> {{"));
        self.line(format!("Self::connect_with(uri, {rt}::ClientConfig::default())"));
        self.close("}");
        self.line("");
        self.line("/// Connects with `config`: spin policy, slots, the default deadline, ONC RPC credentials, ...");
        self.open(format!(
            "pub fn connect_with(uri: &str, config: {rt}::ClientConfig) -> ::std::result::Result<Self, {rt}::Error> {{"
        ));
        self.line(format!("{rt}::Client::connect_with(uri, PROGRAM, VERSION, config).map(Self::from_client)"));
        self.close("}");
        self.line("");
        self.line("/// Wraps a client already bound to this program version (its errors then name procedures).");
        self.open(format!("pub fn from_client(inner: {rt}::Client) -> Self {{"));
        self.line("Self { inner: inner.name_procedures(PROCEDURES) }");
        self.close("}");
        self.line("");
        self.line("/// This client, over several servers sending a call of one of `procs` (this module's");
        self.line("/// procedure numbers) to another server after it may have run on one: for procedures that");
        self.line("/// do no harm run twice (see `lowlat::Client::idempotent`; a call's own");
        self.line("/// `CallOptions::idempotent` overrides it).");
        self.open("pub fn idempotent(self, procs: &[u32]) -> Self {");
        self.line("Self { inner: self.inner.idempotent(procs) }");
        self.close("}");
        self.line("");
        self.line("/// The untyped client underneath.");
        self.open(format!("pub fn client(&self) -> &{rt}::Client {{"));
        self.line("&self.inner");
        self.close("}");
        self.line("");
        self.line("/// The same procedures, each call made with `options` (a deadline, ...):");
        self.line(format!(
            "/// `client.with({rt}::CallOptions::new().deadline(::std::time::Duration::from_millis(5)))`"
        ));
        self.line("/// then any method.");
        self.open(format!("pub fn with(&self, options: {rt}::CallOptions) -> {with}<'_> {{"));
        self.line(format!("{with} {{ inner: &self.inner, options }}"));
        self.close("}");
        for pr in procs {
            let names = pr.n.args.join(", ");
            self.line("");
            self.open_method(
                rt,
                pr,
                &format!("Calls `{}` with the binding's default options.", self.m.signature(pr.p)),
                false,
            );
            self.line(format!("self.with({rt}::CallOptions::new()).{}({names})", pr.n.method));
            self.close("}");
            self.line("");
            self.open_method_async(rt, pr, &format!("[`{}`](Self::{}) as a future.", pr.n.method, pr.n.method), false);
            self.line(format!("self.with({rt}::CallOptions::new()).{}_async({names})", pr.n.method));
            self.close("}");
            if pr.var_opaque_result() {
                let comma = if names.is_empty() { "" } else { ", " };
                self.line("");
                self.open_method(rt, pr, &Self::into_doc(pr), true);
                self.line(format!("self.with({rt}::CallOptions::new()).{}_into({names}{comma}out)", pr.n.method));
                self.close("}");
                self.line("");
                let doc = format!("[`{0}_into`](Self::{0}_into) as a future.", pr.n.method);
                self.open_method_async(rt, pr, &doc, true);
                self.line(format!("self.with({rt}::CallOptions::new()).{}_into_async({names}{comma}out)", pr.n.method));
                self.close("}");
            }
        }
        self.close("}");
    }

    fn into_doc(pr: &Proc<'_>) -> String {
        format!(
            "Calls `{}`, copying the result into `out` (cleared first) so a reused buffer avoids allocating.",
            pr.p.name
        )
    }

    /// Opens a client method: `method(&self, args..)`, or with `into`,
    /// `method_into(&self, args.., out: &mut Vec<u8>)`.
    fn open_method(&mut self, rt: &str, pr: &Proc<'_>, doc: &str, into: bool) {
        self.open_method_as(rt, pr, doc, into, None)
    }

    /// [`open_method`](Self::open_method) for the method's async twin, `method_async` (or
    /// `method_into_async`).
    fn open_method_async(&mut self, rt: &str, pr: &Proc<'_>, doc: &str, into: bool) {
        self.open_method_as(rt, pr, doc, into, Some("&'f self"))
    }

    /// Opens a client method; `asynchronous`: its async twin, with this receiver. The twin is a
    /// plain `fn` returning the call's future, so that the call is sent when it is made (calls
    /// made one after another are in flight together), and the future is `Unpin` (kept without
    /// boxing); everything it borrows lives for `'f`.
    fn open_method_as(&mut self, rt: &str, pr: &Proc<'_>, doc: &str, into: bool, asynchronous: Option<&str>) {
        let lifetime = |ty: String| match asynchronous {
            Some(_) => ty.replacen('&', "&'f ", 1),
            None => ty,
        };
        let mut params = vec![asynchronous.unwrap_or("&self").to_string()];
        params
            .extend(pr.n.args.iter().zip(&pr.p.args).map(|(n, a)| format!("{n}: {}", lifetime(self.param_ty(&a.ty)))));
        let (name, ret) = if into {
            params.push(format!("out: {}", lifetime("&mut ::std::vec::Vec<u8>".into())));
            (format!("{}_into", pr.n.method), "()".to_string())
        } else {
            (pr.n.method.clone(), pr.p.result.as_ref().map_or_else(|| "()".to_string(), |t| self.rust_ty(t)))
        };
        self.line(format!("/// {doc}"));
        if params.len() > 7 {
            self.line("#[allow(clippy::too_many_arguments)]");
        }
        let result = format!("::std::result::Result<{ret}, {rt}::Error>");
        match asynchronous {
            None => self.open(format!("pub fn {name}({}) -> {result} {{", params.join(", "))),
            Some(receiver) => {
                let bound = if receiver == "&self" { " where 'a: 'f" } else { "" };
                self.open(format!(
                    "pub fn {name}_async<'f>({}) -> impl ::std::future::Future<Output = {result}> + Unpin + 'f{bound} {{",
                    params.join(", ")
                ))
            }
        }
    }

    fn gen_client_with(&mut self, rt: &str, procs: &[Proc<'_>], vn: &VersionNames) {
        let (client, with) = (&vn.client, &vn.client_with);
        self.line("");
        self.line(format!("/// The calls of a [`{client}`], each made with the options given to [`{client}::with`]."));
        self.line("#[derive(Debug)]");
        self.open(format!("pub struct {with}<'a> {{"));
        self.line(format!("inner: &'a {rt}::Client,"));
        self.line(format!("options: {rt}::CallOptions,"));
        self.close("}");
        self.line("");
        self.open(format!("impl<'a> {with}<'a> {{"));
        for (i, pr) in procs.iter().enumerate() {
            let names = &pr.n.args;
            if i > 0 {
                self.line("");
            }
            let conv = match pr.p.result.as_ref().map(Type::resolved) {
                Some(Type::VarOpaque(_)) => ".map(<[u8]>::to_vec)",
                Some(Type::String(_)) => ".map(str::to_owned)",
                _ => "",
            };
            for asynchronous in [false, true] {
                let doc = if asynchronous {
                    format!("[`{0}`](Self::{0}) as a future.", pr.n.method)
                } else {
                    format!("Calls `{}`.", self.m.signature(pr.p))
                };
                if asynchronous {
                    self.line("");
                }
                self.open_method_as(rt, pr, &doc, false, asynchronous.then_some("&self"));
                self.call_branches(pr, names, asynchronous, |g, e| {
                    let dec = g.result_decoder(pr, e);
                    let cp = g.cp();
                    format!("|body| {dec}{conv}.map_err({cp}::Error::from)")
                });
                self.close("}");
            }
            if pr.var_opaque_result() {
                for asynchronous in [false, true] {
                    self.line("");
                    let doc = if asynchronous {
                        format!("[`{0}_into`](Self::{0}_into) as a future.", pr.n.method)
                    } else {
                        Self::into_doc(pr)
                    };
                    self.open_method_as(rt, pr, &doc, true, asynchronous.then_some("&self"));
                    self.call_branches(pr, names, asynchronous, |g, e| {
                        let dec = g.result_decoder(pr, e);
                        let cp = g.cp();
                        format!(
                            "|body| {{ let v = {dec}?; out.clear(); out.extend_from_slice(v); ::std::result::Result::<(), {cp}::Error>::Ok(()) }}"
                        )
                    });
                    self.close("}");
                }
            }
        }
        self.close("}");
    }

    /// The decoding call of a procedure's result in encoding `e`, without the `?` or conversion.
    fn result_decoder(&self, pr: &Proc<'_>, e: Enc) -> String {
        let cp = self.cp();
        match (&pr.p.result, e) {
            (None, Enc::Xdr) => format!("{cp}::XdrReader::new(body).finish()"),
            (None, Enc::Native) => format!("{cp}::NativeReader::new(body, order).finish()"),
            (Some(_), Enc::Xdr) => format!("decode_{}_result_xdr(body)", pr.n.method),
            (Some(_), Enc::Native) => format!("decode_{}_result_native(body, order)", pr.n.method),
        }
    }

    /// The decoding call of a procedure's arguments from `body` in encoding `e` (the native one
    /// in a local `order`), without the error's conversion.
    fn args_decoder(&self, pr: &Proc<'_>, e: Enc, body: &str) -> String {
        let cp = self.cp();
        match (pr.p.args.is_empty(), e) {
            (true, Enc::Xdr) => format!("{cp}::XdrReader::new({body}).finish()"),
            (true, Enc::Native) => format!("{cp}::NativeReader::new({body}, order).finish()"),
            (false, Enc::Xdr) => format!("decode_{}_args_xdr({body})", pr.n.method),
            (false, Enc::Native) => format!("decode_{}_args_native({body}, order)", pr.n.method),
        }
    }

    /// The body of a client method: XDR over ONC RPC, else the native encoding in the server's
    /// byte order; `decoder` gives the result closure for an encoding. `asynchronous`: the
    /// call's future, one type whichever the encoding.
    fn call_branches(
        &mut self,
        pr: &Proc<'_>,
        names: &[String],
        asynchronous: bool,
        decoder: impl Fn(&Self, Enc) -> String,
    ) {
        let cp = self.cp();
        let encoder = |e: Enc| {
            if pr.p.args.is_empty() {
                return format!("|_buf| ::std::result::Result::<(), {cp}::Error>::Ok(())");
            }
            let order = if e == Enc::Native { "order, " } else { "" };
            format!(
                "|buf| encode_{}_args_{}(buf, {order}{}).map_err({cp}::Error::from)",
                pr.n.method,
                e.name(),
                names.join(", ")
            )
        };
        let konst = &pr.n.konst;
        if asynchronous {
            // One future type for both encodings: the closures choose.
            let body = |closure: String| closure.split_once("| ").map(|(_, b)| b.to_string()).unwrap_or(closure);
            let either = |xdr: String, native: String| {
                let (x, n) = (body(xdr), body(native));
                if x == n {
                    x
                } else {
                    format!("if onc {{ {x} }} else {{ {n} }}")
                }
            };
            let enc = either(encoder(Enc::Xdr), encoder(Enc::Native));
            let dec = either(decoder(self, Enc::Xdr), decoder(self, Enc::Native));
            let buf = if pr.p.args.is_empty() { "_buf" } else { "buf" };
            self.line("let onc = self.inner.is_onc();");
            // The server's order: payloads travel in it and only the client converts.
            self.line("let order = self.inner.server_byte_order();");
            self.line(format!(
                "self.inner.call_with_async({konst}, &self.options, move |{buf}| {enc}, move |body| {dec})"
            ));
            return;
        }
        self.open("if self.inner.is_onc() {");
        let (enc, dec) = (encoder(Enc::Xdr), decoder(self, Enc::Xdr));
        self.line(format!("self.inner.call_with({konst}, &self.options, {enc}, {dec})"));
        self.close("} else {");
        self.indent += 1;
        // The server's order: payloads travel in it and only the client converts.
        self.line("let order = self.inner.server_byte_order();");
        let (enc, dec) = (encoder(Enc::Native), decoder(self, Enc::Native));
        self.line(format!("self.inner.call_with({konst}, &self.options, {enc}, {dec})"));
        self.close("}");
    }

    fn gen_service(&mut self, rt: &str, procs: &[Proc<'_>], prog: &str, v: &Version, vn: &VersionNames) {
        self.line("");
        self.line(format!(
            "/// The procedures of `{prog}` version `{}`, implemented by a server and served with",
            v.name
        ));
        self.line("/// [`program`] (lowlat's protocol) and [`program_xdr`] (ONC RPC), from one implementation.");
        self.line("///");
        let long: Vec<&str> =
            procs.iter().filter(|p| self.opts.long_running.contains(&p.p.name)).map(|p| p.p.name.as_str()).collect();
        if long.len() == procs.len() && !procs.is_empty() {
            self.line("/// Every procedure runs on the server's worker pool (registered long-running).");
        } else {
            self.line("/// A procedure runs on the thread that received its call (no hand-off: the fast path), so a");
            self.line("/// slow one holds up the calls behind it on that endpoint. Mark it long-running to run it on");
            self.line(
                "/// the server's worker pool instead: at run time with `program(..).mark_long_running(\"NAME\")`",
            );
            self.line("/// (or `.long_running_all()`), or from `build.rs` with `lowlat_build::Builder::long_running`.");
            if !long.is_empty() {
                self.line(format!("/// Registered long-running: `{}`.", long.join("`, `")));
            }
        }
        self.line("///");
        self.line(format!(
            "/// A method fails with [`{rt}::ProcError`]: `ProcError::failed(message)` sends `message` to a"
        ));
        self.line("/// caller over lowlat's protocol (over ONC RPC, which has no place for it, the caller gets");
        self.line("/// SYSTEM_ERR and the server logs it). Arguments that do not decode never reach a method: the");
        self.line("/// caller is told which argument and where.");
        self.open(format!("pub trait {}: ::std::marker::Send + ::std::marker::Sync + 'static {{", vn.service));
        for pr in procs {
            let mut params = vec!["&self".to_string(), format!("ctx: &{rt}::CallContext")];
            let mut views = Vec::new();
            for (n, a) in pr.n.args.iter().zip(&pr.p.args) {
                params.push(format!("{n}: {}", self.view_ty(&a.ty)));
                if borrows(&a.ty) {
                    views.push(format!("`{n}`"));
                }
            }
            let ret = match &pr.p.result {
                None => "()".to_string(),
                Some(t) if matches!(t.resolved(), Type::VarOpaque(_)) => {
                    params.push(format!("out: &mut {rt}::OutBuf<'_>"));
                    "()".to_string()
                }
                Some(t) => self.rust_ty(t),
            };
            self.line(format!("/// `{}`", self.m.signature(pr.p)));
            if !views.is_empty() {
                self.line("///");
                let (them, are) = if views.len() == 1 { ("it", "is a view") } else { ("them", "are views") };
                self.line(format!(
                    "/// {} {are} into the received message (copy {them} to keep {them} beyond the call).",
                    views.join(" and ")
                ));
            }
            if pr.var_opaque_result() {
                self.line("///");
                self.line(
                    "/// Append the result to `out`: it is the reply buffer (over shared memory, the result ring,",
                );
                self.line("/// so the result is written once, where the client reads it).");
            }
            if params.len() > 7 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.line(format!(
                "fn {}({}) -> ::std::result::Result<{ret}, {rt}::ProcError>;",
                pr.n.method,
                params.join(", ")
            ));
        }
        self.close("}");
    }

    /// `program()` (native bodies, for lowlat's own transports) or `program_xdr()` (XDR bodies,
    /// for ONC RPC callers: `onc+udp://`, `onc+tcp://`).
    fn gen_program(&mut self, rt: &str, procs: &[Proc<'_>], vn: &VersionNames, e: Enc) {
        let cp = self.cp();
        let service = &vn.service;
        let xdr = e == Enc::Xdr;
        self.line("");
        if xdr {
            self.line("/// The program that dispatches ONC RPC calls (XDR bodies) to `server`; serve it beside");
            self.line("/// [`program`] to answer rpcgen/libtirpc clients too.");
            self.open(format!("pub fn program_xdr<S: {service}>(server: ::std::sync::Arc<S>) -> {rt}::Program {{"));
            self.line(format!("{rt}::Program::new(PROGRAM, VERSION).xdr()"));
        } else {
            self.line("/// The program that dispatches calls over lowlat's own protocol (native bodies) to `server`.");
            self.open(format!("pub fn program<S: {service}>(server: ::std::sync::Arc<S>) -> {rt}::Program {{"));
            self.line(format!("{rt}::Program::new(PROGRAM, VERSION)"));
        }
        self.indent += 1;
        for pr in procs {
            let register = if self.opts.long_running.contains(&pr.p.name) { "long_running" } else { "procedure" };
            self.open(format!(".{register}({}, {:?}, {{", pr.n.konst, pr.p.name));
            self.line("let s = ::std::sync::Arc::clone(&server);");
            let reply = if pr.p.result.is_none() { "_reply" } else { "reply" };
            self.open(format!(
                "move |ctx: &{rt}::CallContext, args: &[u8], {reply}: &mut {rt}::OutBuf<'_>| -> ::std::result::Result<(), {rt}::ProcError> {{"
            ));
            let order_arg = if xdr { "" } else { ", order" };
            if !xdr {
                self.line(format!("let order = {cp}::ByteOrder::host();"));
            }
            let names = &pr.n.args;
            let decode = self.args_decoder(pr, e, "args");
            if pr.p.args.is_empty() {
                self.line(format!("{decode}.map_err({rt}::ProcError::bad_args)?;"));
            } else {
                self.line(format!("let {} = {decode}.map_err({rt}::ProcError::bad_args)?;", pr.args_pattern()));
            }
            let call_args = std::iter::once("ctx".to_string()).chain(names.iter().cloned()).collect::<Vec<_>>();
            match pr.p.result.as_ref().map(|t| (t, t.resolved())) {
                None => self.line(format!("s.{}({})", pr.n.method, call_args.join(", "))),
                Some((_, Type::VarOpaque(bound))) => {
                    let max = crate::model::max_len(*bound);
                    if xdr || max < u32::MAX {
                        self.line("let start = reply.len();");
                    }
                    if xdr {
                        // The procedure appends raw bytes; XDR wants a length before them and
                        // padding after.
                        self.line("reply.extend_from_slice(&[0; 4]);");
                    }
                    self.line(format!("s.{}({}, reply)?;", pr.n.method, call_args.join(", ")));
                    let head = if xdr { " - 4" } else { "" };
                    if xdr || max < u32::MAX {
                        self.line(format!("let n = reply.len() - start{head};"));
                    }
                    if max < u32::MAX {
                        self.open(format!("if n > {max} {{"));
                        self.line("reply.truncate(start);");
                        self.line(format!(
                            "return Err({rt}::ProcError::failed(format!(\"the result is {{n}} bytes, more than its maximum of {max}\")));"
                        ));
                        self.close("}");
                    }
                    if xdr {
                        self.line(format!(
                            "let len = u32::try_from(n).map_err(|_| {rt}::ProcError::failed(\"the result is longer than XDR can carry\"))?;"
                        ));
                        self.line("reply[start..start + 4].copy_from_slice(&len.to_be_bytes());");
                        self.line("reply.resize(reply.len() + (4 - n % 4) % 4, 0);");
                    }
                    self.line("Ok(())");
                }
                Some((t, _)) => {
                    self.line(format!("let result = s.{}({})?;", pr.n.method, call_args.join(", ")));
                    let arg = if is_copy_scalar(t) { "result" } else { "&result" };
                    self.line(format!(
                        "encode_{}_result_{}(reply{order_arg}, {arg}).map_err({rt}::ProcError::bad_result)",
                        pr.n.method,
                        e.name()
                    ));
                }
            }
            self.close("}");
            self.close("})");
        }
        self.indent -= 1;
        self.close("}");
    }
}

/// The async server trait and its programs.
///
/// Each method is `fn m(self: Arc<Self>, ctx: CallContext, args..) -> impl Future<Output =
/// Result<R, ProcError>> + Send + 'static` (return-position `impl Trait` in a trait, stable since
/// Rust 1.75), which an implementation may write as `async fn m(self: Arc<Self>, ..) -> Result<R,
/// ProcError>`. Why this shape:
/// - the future outlives the frame the call arrived in (a pending call is set aside while the
///   serving thread serves others), so it owns everything: `self` as an `Arc` (one reference
///   count per call), the context by value, owned arguments (`String`, `Vec<u8>`, not views);
/// - a plain `async fn` in a public trait cannot promise `Send`, which the server needs (the
///   `async_fn_in_trait` lint says as much), while `-> impl Future + Send` does and still lets
///   implementations use `async fn`;
/// - `#[async_trait]` would box every call's future a second time (`procedure_async` boxes it
///   once) and bring a dependency into every user's crate.
///
/// A variable-length opaque result is returned as a `Vec<u8>` rather than appended to an `out`
/// buffer: the reply buffer does not exist while the future is pending.
impl Gen<'_> {
    fn gen_async_service(&mut self, rt: &str, procs: &[Proc<'_>], prog: &str, v: &Version, vn: &VersionNames) {
        let fut = |ret: &str| {
            format!(
                "impl ::std::future::Future<Output = ::std::result::Result<{ret}, {rt}::ProcError>> + ::std::marker::Send + 'static"
            )
        };
        self.line("");
        self.line(format!(
            "/// The procedures of `{prog}` version `{}` as async functions, implemented by a server",
            v.name
        ));
        self.line("/// and served with [`program_async`] (lowlat's protocol) and [`program_xdr_async`] (ONC RPC),");
        self.line(format!("/// from one implementation; the async counterpart of [`{}`].", vn.service));
        self.line("///");
        let has_args = procs.iter().any(|p| !p.p.args.is_empty());
        let views = procs.iter().any(|p| p.p.args.iter().any(|a| borrows(&a.ty)));
        self.line("/// Implement a method as an `async fn` with the parameters it declares:");
        self.line("/// `async fn name(self: Arc<Self>, ctx: CallContext, ..) -> Result<R, ProcError>`.");
        let what =
            if has_args { "`self` as an `Arc`, the context, the arguments" } else { "`self` as an `Arc`, the context" };
        self.line(format!("/// Each call's future owns what it uses ({what}):"));
        self.line("/// it may outlive the message the call arrived in. It must be `Send`.");
        if views {
            self.line("/// Strings and opaque data arrive owned (`String`, `Vec<u8>`), not as views into the message.");
        }
        if procs.iter().any(|p| p.var_opaque_result()) {
            self.line("/// A variable-length opaque result is returned as a `Vec<u8>` (there is no reply buffer to");
            self.line("/// append to while a future is pending).");
        }
        self.line("///");
        self.line("/// The future is polled first on the thread that received the call: answered at once if it");
        self.line("/// is ready, otherwise set aside while that thread serves other calls, and polled again there");
        self.line("/// when its waker fires (no executor is needed, and a slow procedure holds up no other call).");
        self.line("/// It must not block that thread. Since the thread is not a tokio worker, what needs a tokio");
        self.line("/// runtime's context when it is made (a timer, a socket) is made inside `Handle::enter`, or");
        self.line("/// the work is spawned onto the runtime and its `JoinHandle` awaited.");
        self.line("///");
        self.line(format!(
            "/// A method fails with [`{rt}::ProcError`]: `ProcError::failed(message)` sends `message` to a"
        ));
        self.line("/// caller over lowlat's protocol (over ONC RPC, which has no place for it, the caller gets");
        if has_args {
            self.line("/// SYSTEM_ERR and the server logs it). Arguments that do not decode never reach a method: the");
            self.line("/// caller is told which argument and where.");
        } else {
            self.line("/// SYSTEM_ERR and the server logs it).");
        }
        self.open(format!("pub trait {}: ::std::marker::Send + ::std::marker::Sync + 'static {{", vn.async_service));
        for (i, pr) in procs.iter().enumerate() {
            if i > 0 {
                self.line("");
            }
            let mut params = vec!["self: ::std::sync::Arc<Self>".to_string(), format!("ctx: {rt}::CallContext")];
            params.extend(pr.n.args.iter().zip(&pr.p.args).map(|(n, a)| format!("{n}: {}", self.rust_ty(&a.ty))));
            let ret = pr.p.result.as_ref().map_or_else(|| "()".to_string(), |t| self.rust_ty(t));
            self.line(format!("/// `{}`", self.m.signature(pr.p)));
            if params.len() > 7 {
                self.line("#[allow(clippy::too_many_arguments)]");
            }
            self.line(format!("fn {}({}) -> {};", pr.n.method, params.join(", "), fut(&ret)));
        }
        self.close("}");
    }

    /// `program_async()` (native bodies) or `program_xdr_async()` (XDR bodies): every procedure
    /// registered with `Program::procedure_async`, decoding its arguments (into owned values)
    /// before the future starts and encoding its result when it ends.
    fn gen_program_async(&mut self, rt: &str, procs: &[Proc<'_>], vn: &VersionNames, e: Enc) {
        let cp = self.cp();
        let service = &vn.async_service;
        let xdr = e == Enc::Xdr;
        self.line("");
        let (name, new) = if xdr {
            self.line("/// The program that dispatches ONC RPC calls (XDR bodies) to the async `server`; serve it");
            self.line("/// beside [`program_async`] to answer rpcgen/libtirpc clients too.");
            ("program_xdr_async", format!("{rt}::Program::new(PROGRAM, VERSION).xdr()"))
        } else {
            self.line("/// The program that dispatches calls over lowlat's own protocol (native bodies) to the async");
            self.line("/// `server`.");
            ("program_async", format!("{rt}::Program::new(PROGRAM, VERSION)"))
        };
        self.open(format!("pub fn {name}<S: {service}>(server: ::std::sync::Arc<S>) -> {rt}::Program {{"));
        self.line(new);
        self.indent += 1;
        let order_arg = if xdr { "" } else { ", order" };
        for pr in procs {
            self.open(format!(".procedure_async({}, {:?}, {{", pr.n.konst, pr.p.name));
            self.line("let s = ::std::sync::Arc::clone(&server);");
            self.open(format!("move |ctx: {rt}::CallContext, args: ::std::vec::Vec<u8>| {{"));
            if !xdr {
                self.line(format!("let order = {cp}::ByteOrder::host();"));
            }
            let names = &pr.n.args;
            // Decoded here, before the future, so the message's bytes need not live as long;
            // views (strings, opaque data) become owned values.
            let pat = pr.args_pattern();
            let to_owned = if pr.p.args.iter().any(|a| borrows(&a.ty)) {
                let owned: Vec<String> = names
                    .iter()
                    .zip(&pr.p.args)
                    .map(|(n, a)| if borrows(&a.ty) { format!("{n}.to_owned()") } else { n.clone() })
                    .collect();
                let owned = if owned.len() == 1 { owned[0].clone() } else { format!("({})", owned.join(", ")) };
                format!(".map(|{pat}| {owned})")
            } else {
                String::new()
            };
            let decode = self.args_decoder(pr, e, "&args");
            self.line(format!("let args = {decode}{to_owned}.map_err({rt}::ProcError::bad_args);"));
            self.line("let s = ::std::sync::Arc::clone(&s);");
            self.open("async move {");
            let call_args = std::iter::once("ctx".to_string()).chain(names.iter().cloned()).collect::<Vec<_>>();
            if pr.p.args.is_empty() {
                self.line("args?;");
            } else {
                self.line(format!("let {pat} = args?;"));
            }
            match &pr.p.result {
                None => {
                    self.line(format!("s.{}({}).await?;", pr.n.method, call_args.join(", ")));
                    self.line(format!(
                        "::std::result::Result::<::std::vec::Vec<u8>, {rt}::ProcError>::Ok(::std::vec::Vec::new())"
                    ));
                }
                Some(t) => {
                    self.line(format!("let result = s.{}({}).await?;", pr.n.method, call_args.join(", ")));
                    self.line("let mut reply = ::std::vec::Vec::new();");
                    let arg = if is_copy_scalar(t) { "result" } else { "&result" };
                    self.line(format!(
                        "encode_{}_result_{}(&mut reply{order_arg}, {arg}).map_err({rt}::ProcError::bad_result)?;",
                        pr.n.method,
                        e.name()
                    ));
                    self.line(format!("::std::result::Result::<::std::vec::Vec<u8>, {rt}::ProcError>::Ok(reply)"));
                }
            }
            self.close("}");
            self.close("}");
            self.close("})");
        }
        self.indent -= 1;
        self.close("}");
    }
}
