//! Compiles `.x` interface definitions to Rust from `build.rs`, in the manner of prost-build.
//! Depends only on `lowlat-idl`; must never depend on the runtime (it runs at build time).
//!
//! In `build.rs`, inside `fn main`:
//! ```no_run
//! lowlat_build::compile("idl/lab.x").unwrap();
//! ```
//! and in the crate, where the stubs should live:
//! ```ignore
//! mod lab {
//!     include!(concat!(env!("OUT_DIR"), "/lab.rs"));
//! }
//! ```
//! The generated code refers to `::lowlat` (client, server) and `::lowlat::codec` (encodings),
//! so the crate needs `lowlat` as a dependency. Files are written to `OUT_DIR` only when their
//! contents change, so an unchanged interface never triggers a rebuild.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::{Path, PathBuf};

pub use lowlat_idl::{Diagnostic, IdlError};

/// Why stubs could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither [`Builder::out_dir`] nor the `OUT_DIR` environment variable (set by Cargo for
    /// build scripts) says where to write.
    #[error("no output directory: call Builder::out_dir or run from a build script (OUT_DIR unset)")]
    NoOutDir,
    /// The interface definition is malformed (the message shows each position with a caret).
    #[error("{0}")]
    Idl(#[from] IdlError),
    /// A generated file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Compiles one `.x` file into `OUT_DIR` with the default options.
pub fn compile(path: impl AsRef<Path>) -> Result<(), Error> {
    Builder::new().compile(&[path]).map(|_| ())
}

/// Options for compiling interface definitions.
#[derive(Debug, Clone)]
pub struct Builder {
    out_dir: Option<PathBuf>,
    options: lowlat_idl::Options,
    rerun: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// Defaults: write to `OUT_DIR`, refer to `::lowlat` and `::lowlat::codec`, generate client
    /// and server, and tell Cargo to rerun when a `.x` file changes.
    pub fn new() -> Self {
        Builder { out_dir: None, options: lowlat_idl::Options::default(), rerun: true }
    }

    /// Writes into `dir` instead of `OUT_DIR`.
    /// ```no_run
    /// lowlat_build::Builder::new().out_dir("src/generated").compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// The path generated code uses for the codec crate (default `::lowlat::codec`); e.g.
    /// `::lowlat_codec` for a crate that depends on `lowlat-codec` but not on the runtime.
    /// ```no_run
    /// lowlat_build::Builder::new().codec_path("::lowlat_codec").types_only().compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn codec_path(mut self, path: impl Into<String>) -> Self {
        self.options.codec_path = path.into();
        self
    }

    /// The path generated code uses for the runtime (default `::lowlat`).
    /// ```no_run
    /// lowlat_build::Builder::new().runtime_path("crate::rt").compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn runtime_path(mut self, path: impl Into<String>) -> Self {
        self.options.runtime_path = Some(path.into());
        self
    }

    /// Registers a procedure (by its `.x` name) as long-running: it runs on the server's worker
    /// pool instead of the thread that received the call.
    /// ```no_run
    /// lowlat_build::Builder::new().long_running("SLOW_ECHO").compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn long_running(mut self, procedure: impl Into<String>) -> Self {
        self.options.long_running.push(procedure.into());
        self
    }

    /// Generates types and codecs only: no client, no server, no runtime dependency.
    /// ```no_run
    /// lowlat_build::Builder::new().types_only().compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn types_only(mut self) -> Self {
        self.options.runtime_path = None;
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for each input (default true; turn off when not
    /// running inside a build script).
    /// ```no_run
    /// lowlat_build::Builder::new().emit_rerun_if_changed(false).compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn emit_rerun_if_changed(mut self, on: bool) -> Self {
        self.rerun = on;
        self
    }

    /// Compiles each file; returns the paths of the generated files (written only if changed).
    pub fn compile(&self, files: &[impl AsRef<Path>]) -> Result<Vec<PathBuf>, Error> {
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or(Error::NoOutDir)?,
        };
        let mut written = Vec::new();
        for f in files {
            let f = f.as_ref();
            if self.rerun {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            for (name, contents) in lowlat_idl::compile_file_with(f, lowlat_idl::Lang::Rust, &self.options)? {
                let path = out_dir.join(name);
                write_if_changed(&path, &contents)?;
                written.push(path);
            }
        }
        Ok(written)
    }
}

/// Leaves the file (and its modification time) alone when it already holds `contents`.
fn write_if_changed(path: &Path, contents: &str) -> Result<(), Error> {
    if std::fs::read(path).is_ok_and(|old| old == contents.as_bytes()) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
    }
    std::fs::write(path, contents).map_err(|source| Error::Write { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        "struct pair { int a; int b; };\nprogram P { version V { pair SWAP(pair) = 1; } = 1; } = 0x20000099;\n";

    #[test]
    fn writes_generated_file_once_and_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("pair.x");
        std::fs::write(&x, GOOD).unwrap();
        let b = Builder::new().out_dir(dir.path().join("out")).emit_rerun_if_changed(false);
        let files = b.compile(&[&x]).unwrap();
        assert_eq!(files, [dir.path().join("out/pair.rs")]);
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(text.starts_with("// @generated by lowlat-idl"), "{text}");
        assert!(text.contains("pub struct Pair"), "{text}");
        assert!(text.contains("::lowlat::codec::Xdr"), "{text}");

        // Same input: the file is not rewritten (an old timestamp survives).
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::options().write(true).open(&files[0]).unwrap().set_modified(old).unwrap();
        b.compile(&[&x]).unwrap();
        assert_eq!(std::fs::metadata(&files[0]).unwrap().modified().unwrap(), old);

        // Changed input: rewritten.
        std::fs::write(&x, GOOD.replace("int b;", "int b; int c;")).unwrap();
        b.compile(&[&x]).unwrap();
        assert_ne!(std::fs::metadata(&files[0]).unwrap().modified().unwrap(), old);
        assert!(std::fs::read_to_string(&files[0]).unwrap().contains("pub c: i32"));
    }

    #[test]
    fn options_change_the_paths_in_generated_code() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("pair.x");
        std::fs::write(&x, GOOD).unwrap();
        let files = Builder::new()
            .out_dir(dir.path())
            .codec_path("::lowlat_codec")
            .types_only()
            .emit_rerun_if_changed(false)
            .compile(&[&x])
            .unwrap();
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(text.contains("::lowlat_codec::Xdr"));
        assert!(!text.contains("::lowlat::"), "types only must not mention the runtime");
        assert!(!text.contains("pub trait Server"));
    }

    #[test]
    fn long_running_procedures_go_to_the_worker_pool() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("pair.x");
        std::fs::write(&x, GOOD).unwrap();
        let files = Builder::new()
            .out_dir(dir.path())
            .long_running("SWAP")
            .emit_rerun_if_changed(false)
            .compile(&[&x])
            .unwrap();
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert!(text.contains(".long_running(SWAP, \"SWAP\""), "{text}");
        assert!(!text.contains(".procedure(SWAP"));
    }

    #[test]
    fn bad_definitions_and_missing_out_dir_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("bad.x");
        std::fs::write(&x, "struct s { widget w; };").unwrap();
        let e = Builder::new().out_dir(dir.path()).emit_rerun_if_changed(false).compile(&[&x]).unwrap_err();
        assert!(e.to_string().contains("bad.x:1:12: error: undefined type 'widget'"), "{e}");
        assert!(!dir.path().join("bad.rs").exists());
        if std::env::var_os("OUT_DIR").is_none() {
            let e = Builder::new().emit_rerun_if_changed(false).compile(&[&x]).unwrap_err();
            assert!(matches!(e, Error::NoOutDir), "{e}");
        }
    }
}
