//! The ONC RPC language (RFC 5531 §12, RFC 4506 §6): parser, checker, the resolved model of an
//! interface, and code generators.
//!
//! Pure: reads text, returns text. Never depends on the runtime, the codec or any I/O beyond
//! reading the file it is asked to compile (writing files is `lowlat-build`'s and the CLI's job).
//!
//! Stages stay apart: [`parse`] (text to [`ast::Spec`]), [`check`] (names, constants, unions,
//! recursion), [`Model::resolve`] (every name resolved: the one model of the interface that
//! every generator and `lowlat-dynamic` read), [`generate`] (a pure function from a model to
//! files: Rust, C over liblowlat, or the Lua tables with which lowlat's Wireshark dissector
//! reads the interface's bodies). [`compile_file`] runs them all for
//! `lowlat gen FILE.x --lang rust|c|wireshark --out DIR`;
//! [`Model::from_source`] runs the first three.
//!
//! The Rust code generated (module and item names, and how each `.x` construct maps to Rust) is
//! documented on `lowlat-build`'s front page, where users of generated code look; the C code's
//! mapping is in the `c` generator's `types` module, and each generated header states the
//! ownership of every pointer it declares.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ast;
mod c;
mod check;
mod diag;
mod lexer;
pub mod model;
mod parser;
mod rust;
mod wireshark;

use std::path::Path;

pub use check::Checked;
pub use diag::{Diagnostic, IdlError, Pos, Source};
pub use model::Model;
pub use rust::Options;

/// An output language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust stubs for lowlat's runtime.
    Rust,
    /// C stubs over liblowlat: a header and a source file.
    C,
    /// A Lua file that lets lowlat's Wireshark dissector (`wireshark/lowlat.lua`) read the
    /// interface's argument and result bodies.
    Wireshark,
}

impl std::str::FromStr for Lang {
    type Err = IdlError;
    fn from_str(s: &str) -> Result<Self, IdlError> {
        match s {
            "rust" | "rs" => Ok(Lang::Rust),
            "c" => Ok(Lang::C),
            "wireshark" | "lua" => Ok(Lang::Wireshark),
            other => Err(IdlError::UnsupportedLanguage(other.to_string())),
        }
    }
}

/// One generated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// File name (no directory), e.g. `lab.rs`.
    pub name: String,
    /// Its contents.
    pub contents: String,
}

/// Parses a `.x` text.
pub fn parse(src: &Source) -> Result<ast::Spec, IdlError> {
    parser::parse(src).map_err(|d| IdlError::Invalid(vec![d]))
}

/// Checks a parsed spec; reports every problem found.
pub fn check(src: &Source, spec: ast::Spec) -> Result<Checked, IdlError> {
    check::check(src, spec).map_err(IdlError::Invalid)
}

/// Generates the files for a resolved interface. Pure: the caller decides where they go.
pub fn generate(model: &Model, lang: Lang, opts: &Options) -> Result<Vec<GeneratedFile>, IdlError> {
    match lang {
        Lang::Rust => {
            let contents = rust::generate(model, opts).map_err(IdlError::Invalid)?;
            Ok(vec![GeneratedFile { name: format!("{}.rs", file_stem(&model.source.name)), contents }])
        }
        Lang::C => {
            let stem = file_stem(&model.source.name);
            let files = c::generate(model, &stem, opts).map_err(IdlError::Invalid)?;
            Ok(vec![
                GeneratedFile { name: format!("{stem}.h"), contents: files.header },
                GeneratedFile { name: format!("{stem}.c"), contents: files.source },
            ])
        }
        Lang::Wireshark => {
            let stem = file_stem(&model.source.name);
            let contents = wireshark::generate(model, &stem);
            Ok(vec![GeneratedFile { name: format!("{stem}.lua"), contents }])
        }
    }
}

/// Parses, checks, resolves and generates from a text in memory.
pub fn compile_str(src: &Source, lang: Lang, opts: &Options) -> Result<Vec<GeneratedFile>, IdlError> {
    generate(&Model::from_source(src)?, lang, opts)
}

/// Reads, parses, checks and generates one `.x` file with default options (code that refers to
/// the runtime as `::lowlat`). Returns `(file name, contents)` pairs; writes nothing.
pub fn compile_file(path: impl AsRef<Path>, lang: Lang) -> Result<Vec<(String, String)>, IdlError> {
    compile_file_with(path, lang, &Options::default())
}

/// [`compile_file`] with explicit options.
pub fn compile_file_with(
    path: impl AsRef<Path>,
    lang: Lang,
    opts: &Options,
) -> Result<Vec<(String, String)>, IdlError> {
    Ok(generate(&Model::from_file(path)?, lang, opts)?.into_iter().map(|f| (f.name, f.contents)).collect())
}

/// `dir/lab.x` -> `lab`, with characters unfit for a Rust file name replaced.
fn file_stem(name: &str) -> String {
    let base = Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or("idl");
    base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}
