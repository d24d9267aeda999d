//! The ONC RPC language (RFC 5531 §12, RFC 4506 §6): parser, checker and code generators.
//!
//! Pure: reads text, returns text. Never depends on the runtime, the codec or any I/O beyond
//! reading the file it is asked to compile (writing files is `lowlat-build`'s and the CLI's job).
//!
//! Stages stay apart: [`parse`] (text to [`ast::Spec`]), [`check`] (names, constants, unions,
//! recursion), [`generate`] (a pure function from a checked spec to files). [`compile_file`] runs
//! all three for `lowlat gen FILE.x --lang rust --out DIR`.
//!
//! # Rust mapping
//! | `.x` | Rust |
//! |---|---|
//! | `int`, `unsigned int`, `hyper`, `unsigned hyper`, `float`, `double`, `bool` | `i32`, `u32`, `i64`, `u64`, `f32`, `f64`, `bool` |
//! | `enum` | `#[repr(i32)]` enum (unknown values are a decode error) |
//! | `struct` | struct with public fields (snake_case) |
//! | `union switch` | enum with one variant per case label, plus `Default(discriminant, value)` |
//! | `T x[N]`, `T x<N>` | `[T; N]`, `Vec<T>` |
//! | `opaque x[N]`, `opaque x<N>` | `[u8; N]`, `Vec<u8>` (borrowed `&[u8]` in server arguments) |
//! | `string x<N>` | `String`, validated UTF-8 (borrowed `&str` in server arguments) |
//! | `T *x` | `Option<Box<T>>` |
//! | `typedef` | `type` alias (limits are checked where it is used) |
//! | `const` | `pub const NAME: i64` |
//! | `program`/`version` | a module per version: constants, per-procedure codecs, `Client`, `Server`, `program()` |
//!
//! Strings are `String` because Rust callers want text; a peer sending bytes that are not UTF-8
//! gets a decode error, never a panic.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ast;
mod check;
mod diag;
mod lexer;
mod names;
mod parser;
mod rust;

use std::path::Path;

pub use check::{Checked, TypeDef};
pub use diag::{Diagnostic, IdlError, Pos, Source};
pub use rust::Options;

/// An output language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust stubs for lowlat's runtime.
    Rust,
}

impl std::str::FromStr for Lang {
    type Err = IdlError;
    fn from_str(s: &str) -> Result<Self, IdlError> {
        match s {
            "rust" | "rs" => Ok(Lang::Rust),
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

/// Generates the files for a checked spec. Pure: the caller decides where they go.
pub fn generate(checked: &Checked, src: &Source, lang: Lang, opts: &Options) -> Result<Vec<GeneratedFile>, IdlError> {
    match lang {
        Lang::Rust => {
            let contents = rust::generate(checked, src, opts).map_err(IdlError::Invalid)?;
            Ok(vec![GeneratedFile { name: format!("{}.rs", file_stem(&src.name)), contents }])
        }
    }
}

/// Parses, checks and generates from a text in memory.
pub fn compile_str(src: &Source, lang: Lang, opts: &Options) -> Result<Vec<GeneratedFile>, IdlError> {
    let spec = parse(src)?;
    let checked = check(src, spec)?;
    generate(&checked, src, lang, opts)
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
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).map_err(|source| IdlError::Io { path: path.display().to_string(), source })?;
    let src = Source::new(path.display().to_string(), text);
    Ok(compile_str(&src, lang, opts)?.into_iter().map(|f| (f.name, f.contents)).collect())
}

/// `dir/lab.x` -> `lab`, with characters unfit for a Rust file name replaced.
fn file_stem(name: &str) -> String {
    let base = Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or("idl");
    base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}
