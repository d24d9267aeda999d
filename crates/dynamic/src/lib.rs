//! Call any procedure of any interface defined in a `.x` file, with the argument given as JSON
//! and the result returned as JSON, over ONC RPC (XDR bodies) or lowlat's own transports (native
//! bodies) — what `grpcurl` is for gRPC. `lowlat call --idl FILE.x URI PROC [JSON]` is built on
//! it.
//!
//! It interprets the resolved model of the interface from `lowlat-idl` (the very model the code
//! generators read) with `lowlat-codec`'s writers and readers, so the bytes are exactly those of
//! the generated stubs. The JSON mapping is in docs/json-mapping.md; in short: structs are
//! objects by field name, enums their names (numbers accepted on input), unions an object with
//! the discriminant under its declared name and the arm under the arm's name, optional data
//! `null` or the value, opaque data standard padded base64, 64-bit integers decimal strings
//! (strings or numbers on input), `void` `null`. A procedure with several arguments takes a JSON
//! array, or an object keyed by argument name (`argN` for unnamed ones). A value that does not
//! fit is refused with the path to it, e.g.
//! `argument.items[3].name: string longer than 16`.
//!
//! Depends on the runtime, the IDL front end and the codec. Used by the `lowlat` command
//! (`lowlat call --idl`, through [`cli`]) and by the Python package, whose clients and servers of
//! any `.x` interface are this crate's [`Interface`], [`Target`] and [`DynamicHandler`] with
//! Python values behind [`value::Build`]. It must never depend on the laboratory, the report or
//! the command line: the Python package ships it to users' programs, which need none of them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
mod codec;
mod json;
pub mod value;

use std::path::Path;
use std::sync::Arc;

use lowlat::{CallContext, Client, OutBuf, ProcError, Program};
use lowlat_codec::{ByteOrder, Sink};
use lowlat_idl::model::Procedure;
use lowlat_idl::{Model, Source};
use serde_json::Value as Json;

use codec::Codec;
pub use json::JsonBuild;
use value::{Build, Given};

/// What went wrong loading an interface, finding a procedure or converting a value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `.x` text does not parse or check (the error carries the diagnostics).
    #[error("{0}")]
    Idl(#[from] lowlat_idl::IdlError),
    /// The `.x` file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file, as given.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// No procedure of the interface has that name.
    #[error("no procedure {name:?} in the interface; it has: {known}")]
    UnknownProcedure {
        /// The name asked for.
        name: String,
        /// Every procedure, as `VERSION.PROC`, comma-separated.
        known: String,
    },
    /// Several procedures have that name (in different versions or programs).
    #[error("procedure {name:?} is ambiguous; say which: {choices}")]
    Ambiguous {
        /// The name asked for.
        name: String,
        /// The candidates, as `VERSION.PROC`, comma-separated.
        choices: String,
    },
    /// The argument text is not JSON.
    #[error("the argument is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A JSON value does not fit the `.x` type it is given for.
    #[error("{path}: {reason}")]
    Value {
        /// Where the value is, e.g. `argument.items[3].name`.
        path: String,
        /// What does not fit, e.g. `string longer than 16`.
        reason: String,
    },
    /// A body does not decode as the `.x` type expected there.
    #[error("decoding {path}: {reason}")]
    Decode {
        /// Where in the value decoding stopped, e.g. `result.items[3]`.
        path: String,
        /// What was wrong with the bytes.
        reason: String,
    },
    /// The call itself failed (transport, deadline, or the server's answer).
    #[error("{0}")]
    Call(#[from] lowlat::Error),
    /// No program or version matches what [`Interface::select`] was given, or several do; the
    /// message lists the choices.
    #[error("{0}")]
    Selection(String),
}

/// A procedure found by name, with its program and version numbers.
#[derive(Clone, Debug)]
pub struct Target {
    /// The program's number.
    pub program: u32,
    /// The version's number.
    pub version: u32,
    /// The program's name in the `.x` file.
    pub program_name: String,
    /// The version's name in the `.x` file.
    pub version_name: String,
    /// The procedure, with its resolved argument and result types.
    pub proc: Procedure,
}

/// A loaded, checked and resolved interface.
pub struct Interface {
    model: Model,
}

impl Interface {
    /// Reads, checks and resolves a `.x` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Interface, Error> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| Error::Read { path: path.display().to_string(), source })?;
        Interface::from_text(&path.display().to_string(), &text)
    }

    /// Checks and resolves a `.x` text.
    pub fn from_text(name: &str, text: &str) -> Result<Interface, Error> {
        let model = Model::from_source(&Source::new(name.to_string(), text.to_string()))?;
        Ok(Interface { model })
    }

    /// The resolved interface.
    pub fn model(&self) -> &Model {
        &self.model
    }

    fn codec(&self) -> Codec<'_> {
        Codec { m: &self.model }
    }

    /// Every program, with its versions and procedures.
    pub fn programs(&self) -> &[lowlat_idl::model::Program] {
        &self.model.programs
    }

    /// The `--list` text: programs, versions and procedures with their types.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        for p in self.programs() {
            out.push_str(&format!("program {} {:#x} ({})\n", p.name, p.number, p.number));
            for v in &p.versions {
                out.push_str(&format!("  version {} {}\n", v.name, v.number));
                for pr in &v.procedures {
                    out.push_str(&format!("    {:>3} {}\n", pr.number, self.model.signature(pr)));
                }
            }
        }
        out
    }

    /// Finds `PROC`, `VERSION.PROC` or `PROGRAM.VERSION.PROC` (names, case-insensitive; versions
    /// also by number).
    pub fn find(&self, name: &str) -> Result<Target, Error> {
        let parts: Vec<&str> = name.split('.').collect();
        let mut found = Vec::new();
        let mut all = Vec::new();
        let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        for p in self.programs() {
            for v in &p.versions {
                for pr in &v.procedures {
                    all.push(format!("{}.{}", v.name, pr.name));
                    let ok = match parts.as_slice() {
                        [pn] => eq(pn, &pr.name),
                        [vn, pn] => (eq(vn, &v.name) || *vn == v.number.to_string()) && eq(pn, &pr.name),
                        [gn, vn, pn] => {
                            eq(gn, &p.name) && (eq(vn, &v.name) || *vn == v.number.to_string()) && eq(pn, &pr.name)
                        }
                        _ => false,
                    };
                    if ok {
                        found.push(Target {
                            program: p.number,
                            version: v.number,
                            program_name: p.name.clone(),
                            version_name: v.name.clone(),
                            proc: pr.clone(),
                        });
                    }
                }
            }
        }
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(Error::UnknownProcedure { name: name.to_string(), known: all.join(", ") }),
            _ => Err(Error::Ambiguous {
                name: name.to_string(),
                choices: found
                    .iter()
                    .map(|t| format!("{}.{}", t.version_name, t.proc.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Chooses a version of a program: `program` and `version` by name (case-insensitive) or
    /// number (decimal or `0x` hexadecimal); either may be left out when the interface has only
    /// one (the error lists the choices otherwise).
    pub fn select(&self, program: Option<&str>, version: Option<&str>) -> Result<Selected, Error> {
        let named = |asked: &str, name: &str, number: u32| {
            asked.eq_ignore_ascii_case(name) || parse_number(asked) == Some(number)
        };
        let list = |items: Vec<String>| items.join(", ");
        let programs = self.programs();
        let p = match program {
            Some(asked) => programs.iter().find(|p| named(asked, &p.name, p.number)).ok_or_else(|| {
                Error::Selection(format!(
                    "no program {asked:?} in the interface; it has: {}",
                    list(programs.iter().map(|p| format!("{} ({:#x})", p.name, p.number)).collect())
                ))
            })?,
            None => match programs {
                [one] => one,
                [] => return Err(Error::Selection("the interface defines no program".into())),
                _ => {
                    return Err(Error::Selection(format!(
                        "the interface has several programs; say which: {}",
                        list(programs.iter().map(|p| format!("{} ({:#x})", p.name, p.number)).collect())
                    )))
                }
            },
        };
        let versions = || list(p.versions.iter().map(|v| format!("{} ({})", v.name, v.number)).collect());
        let v = match version {
            Some(asked) => p.versions.iter().find(|v| named(asked, &v.name, v.number)).ok_or_else(|| {
                Error::Selection(format!("{} has no version {asked:?}; it has: {}", p.name, versions()))
            })?,
            None => match p.versions.as_slice() {
                [one] => one,
                _ => {
                    return Err(Error::Selection(format!("{} has several versions; say which: {}", p.name, versions())))
                }
            },
        };
        let procedures = v
            .procedures
            .iter()
            .map(|pr| Target {
                program: p.number,
                version: v.number,
                program_name: p.name.clone(),
                version_name: v.name.clone(),
                proc: pr.clone(),
            })
            .collect();
        Ok(Selected { program: p.number, version: v.number, name: format!("{}.{}", p.name, v.name), procedures })
    }

    /// Encodes `arg` for `t`'s procedure: XDR when `order` is `None`, else lowlat's native
    /// encoding in that byte order (the server's). `arg`: `&serde_json::Value`, or any host's
    /// value (`value::Given`).
    pub fn encode_args<V: Given>(&self, t: &Target, arg: V, order: Option<ByteOrder>) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.codec().encode_args(&t.proc.args, &arg, &mut out, order)?;
        Ok(out)
    }

    /// Decodes `t`'s result from a body, as JSON.
    pub fn decode_result(&self, t: &Target, body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        self.decode_result_with(t, body, order, &mut JsonBuild)
    }

    /// Decodes `t`'s result from a body, as values `b` builds.
    pub fn decode_result_with<B: Build>(
        &self,
        t: &Target,
        body: &[u8],
        order: Option<ByteOrder>,
        b: &mut B,
    ) -> Result<B::Value, Error> {
        self.codec().decode_result(t.proc.result.as_ref(), body, order, b)
    }

    /// Decodes `t`'s arguments from a body (what a server sees), as the JSON `encode_args` takes:
    /// `null` for none, the value for one, an object keyed by name for several.
    pub fn decode_args(&self, t: &Target, body: &[u8], order: Option<ByteOrder>) -> Result<Json, Error> {
        let mut values = self.decode_args_with(t, body, order, &mut JsonBuild)?;
        Ok(match t.proc.args.as_slice() {
            [] => Json::Null,
            [_] => values.remove(0),
            args => Json::Object(args.iter().map(|a| a.name.clone()).zip(values).collect()),
        })
    }

    /// Decodes `t`'s arguments from a body, one value per argument, as values `b` builds.
    pub fn decode_args_with<B: Build>(
        &self,
        t: &Target,
        body: &[u8],
        order: Option<ByteOrder>,
        b: &mut B,
    ) -> Result<Vec<B::Value>, Error> {
        self.codec().decode_args(&t.proc.args, body, order, b)
    }

    /// Encodes a result (as a server would).
    pub fn encode_result<V: Given>(&self, t: &Target, v: V, order: Option<ByteOrder>) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.encode_result_into(t, v, &mut out, order)?;
        Ok(out)
    }

    /// Appends an encoded result to `out` (a procedure's reply buffer).
    pub fn encode_result_into<V: Given, S: Sink + ?Sized>(
        &self,
        t: &Target,
        v: V,
        out: &mut S,
        order: Option<ByteOrder>,
    ) -> Result<(), Error> {
        self.codec().encode_result(t.proc.result.as_ref(), &v, out, order)
    }

    /// One call of `t` through `client` (bound to `t.program` and `t.version`): XDR bodies over
    /// ONC RPC, native ones over lowlat's transports.
    pub fn call(&self, client: &Client, t: &Target, arg: &Json) -> Result<Json, Error> {
        let order = body_order(client);
        let args = self.encode_args(t, arg, order)?;
        let mut result: Option<Result<Json, Error>> = None;
        client.call(
            t.proc.number,
            |b| {
                b.extend_from_slice(&args);
                Ok::<_, lowlat::DecodeError>(())
            },
            |body| {
                result = Some(self.decode_result(t, body, order));
                Ok(())
            },
        )?;
        result.unwrap_or(Ok(Json::Null))
    }

    /// The two programs that serve `procs` (procedures of one version of this interface, each
    /// with its handler and whether it is long-running): native bodies for lowlat's own
    /// transports and XDR bodies for ONC RPC callers, so a server of both answers on every
    /// scheme. A handler is told the encoding of the bodies it gets (`None`: XDR; else native,
    /// in this machine's order).
    pub fn server_programs(
        &self,
        program: u32,
        version: u32,
        procs: &[(Target, Arc<DynamicHandler>, bool)],
    ) -> [Program; 2] {
        let build = |order: Option<ByteOrder>| {
            let mut p = Program::new(program, version);
            if order.is_none() {
                p = p.xdr();
            }
            for (t, handler, long_running) in procs {
                let handler = handler.clone();
                let run =
                    move |ctx: &CallContext, args: &[u8], reply: &mut OutBuf<'_>| handler(ctx, order, args, reply);
                let name = t.proc.name.clone();
                p = if *long_running {
                    p.long_running(t.proc.number, name, run)
                } else {
                    p.procedure(t.proc.number, name, run)
                };
            }
            p
        };
        [build(Some(ByteOrder::host())), build(None)]
    }
}

/// What a server built by [`Interface::server_programs`] runs for a call of one procedure: the call's
/// context, the encoding of its bodies (`None`: XDR), the argument body and the reply buffer.
pub type DynamicHandler =
    dyn Fn(&CallContext, Option<ByteOrder>, &[u8], &mut OutBuf<'_>) -> Result<(), ProcError> + Send + Sync;

/// A version of a program, chosen by [`Interface::select`], with its procedures.
#[derive(Clone, Debug)]
pub struct Selected {
    /// The program's number.
    pub program: u32,
    /// The version's number.
    pub version: u32,
    /// `PROGRAM.VERSION`, by name.
    pub name: String,
    /// Every procedure of the version, in the order of the `.x` file.
    pub procedures: Vec<Target>,
}

impl Selected {
    /// The procedure named `name` (case-insensitive).
    pub fn find(&self, name: &str) -> Result<&Target, Error> {
        self.procedures.iter().find(|t| t.proc.name.eq_ignore_ascii_case(name)).ok_or_else(|| Error::UnknownProcedure {
            name: name.to_string(),
            known: self.procedures.iter().map(|t| t.proc.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// The encoding of bodies on `client`'s binding: XDR (`None`) over ONC RPC, else native in the
/// server's byte order.
pub fn body_order(client: &Client) -> Option<ByteOrder> {
    (!client.is_onc()).then(|| client.server_byte_order())
}

fn parse_number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}
