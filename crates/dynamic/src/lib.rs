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
//! Depends on the runtime, the IDL front end and the codec; nothing depends on it but the CLI.

#![forbid(unsafe_code)]

pub mod cli;
mod value;

use std::path::Path;

use lowlat::Client;
use lowlat_idl::model::{Procedure, Program};
use lowlat_idl::{Model, Source};
use serde_json::Value as Json;

use value::Codec;

/// What went wrong loading an interface, finding a procedure or converting a value.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Idl(#[from] lowlat_idl::IdlError),
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("no procedure {name:?} in the interface; it has: {known}")]
    UnknownProcedure { name: String, known: String },
    #[error("procedure {name:?} is ambiguous; say which: {choices}")]
    Ambiguous { name: String, choices: String },
    #[error("the argument is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{path}: {reason}")]
    Value { path: String, reason: String },
    #[error("decoding {path}: {reason}")]
    Decode { path: String, reason: String },
    #[error("{0}")]
    Call(#[from] lowlat::Error),
}

/// A procedure found by name, with its program and version numbers.
#[derive(Clone, Debug)]
pub struct Target {
    pub program: u32,
    pub version: u32,
    pub program_name: String,
    pub version_name: String,
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
    pub fn programs(&self) -> &[Program] {
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

    /// Encodes `arg` for `t`'s procedure: XDR when `order` is `None`, else lowlat's native
    /// encoding in that byte order (the server's).
    pub fn encode_args(
        &self,
        t: &Target,
        arg: &Json,
        order: Option<lowlat_codec::ByteOrder>,
    ) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.codec().encode_args(&t.proc.args, arg, &mut out, order)?;
        Ok(out)
    }

    /// Decodes `t`'s result from a body.
    pub fn decode_result(
        &self,
        t: &Target,
        body: &[u8],
        order: Option<lowlat_codec::ByteOrder>,
    ) -> Result<Json, Error> {
        self.codec().decode_result(t.proc.result.as_ref(), body, order)
    }

    /// Decodes `t`'s arguments from a body (what a server sees), as the JSON `encode_args` takes.
    pub fn decode_args(&self, t: &Target, body: &[u8], order: Option<lowlat_codec::ByteOrder>) -> Result<Json, Error> {
        self.codec().decode_args(&t.proc.args, body, order)
    }

    /// Encodes a result (as a server would).
    pub fn encode_result(
        &self,
        t: &Target,
        v: &Json,
        order: Option<lowlat_codec::ByteOrder>,
    ) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.codec().encode_result(t.proc.result.as_ref(), v, &mut out, order)?;
        Ok(out)
    }

    /// One call of `t` through `client` (bound to `t.program` and `t.version`): XDR bodies over
    /// ONC RPC, native ones over lowlat's transports.
    pub fn call(&self, client: &Client, t: &Target, arg: &Json) -> Result<Json, Error> {
        let order = (!client.is_onc()).then(|| codec_order(client.server_byte_order()));
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
}

fn codec_order(o: lowlat::ByteOrder) -> lowlat_codec::ByteOrder {
    match o {
        lowlat::ByteOrder::Little => lowlat_codec::ByteOrder::Little,
        lowlat::ByteOrder::Big => lowlat_codec::ByteOrder::Big,
    }
}
