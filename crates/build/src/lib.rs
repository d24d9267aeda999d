//! Compiles `.x` interface definitions (the ONC RPC language, RFC 5531) to Rust from
//! `build.rs`, in the manner of prost-build. Depends only on `lowlat-idl`; must never depend on
//! the runtime (it runs at build time).
//!
//! # From an interface to a working build
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
//! so the crate needs `lowlat` as a dependency (and `lowlat-build` as a build dependency). Files
//! are written to `OUT_DIR` only when their contents change, so an unchanged interface never
//! triggers a rebuild. [`Builder`] sets the options.
//!
//! # The generated API
//!
//! For an interface such as `idl/lab.x`:
//! ```text
//! typedef opaque lab_buf<>;
//! program LAB_PROG {
//!     version LAB_VERS {
//!         void NULL(void) = 0;
//!         int MINUS(int a, int b) = 1;
//!         lab_buf ECHO(lab_buf data) = 4;
//!     } = 1;
//! } = 0x20004C4C;
//! ```
//! the file holds a Rust item per type and constant at its top level (`LabBuf`), and a module
//! per program version, named after the version in snake case (`lab_vers`), with:
//!
//! | item | what it is |
//! |---|---|
//! | `PROGRAM`, `VERSION`, `NULL`, `MINUS`, `ECHO` | the program, version and procedure numbers (`u32`) |
//! | `LabVersClient` | the typed client, named after the version: `connect(uri)`, `connect_with(uri, lowlat::ClientConfig)`, `from_client(lowlat::Client)`, `client()`, and a method per procedure named after it in snake case: `minus(a, b) -> Result<i32, lowlat::Error>`; a procedure returning variable-length opaque data also gets `echo_into(data, &mut Vec<u8>)`, which reuses the buffer |
//! | `LabVersClient::minus_async(a, b)`, ... | every method's async twin, named with `_async` (`echo_into_async` too): a plain `fn` that sends the call when it is made and returns its future (`Unpin`), which any executor can await (tokio, `lowlat::wait_all`, ...; lowlat runs none of its own); see "Async calls" on the `lowlat` crate's front page |
//! | `LabVersClient::with(lowlat::CallOptions)` | the same methods (and their async twins) on a `LabVersClientWith`, each call made with per-call options: `client.with(CallOptions::new().deadline(d)).minus(5, 7)` fails with `lowlat::Error::Timeout` unless it completes within `d`; `.minus_async(5, 7).await` likewise |
//! | `LabVersService` | the server trait: a method per procedure, taking a `&lowlat::CallContext` and the arguments, returning `Result<_, lowlat::ProcError>` |
//! | `program(Arc<S: LabVersService>)` | the `lowlat::Program` that dispatches calls over lowlat's own protocol (native bodies) to the implementation |
//! | `program_xdr(Arc<S: LabVersService>)` | the same implementation for ONC RPC callers (XDR bodies: rpcgen/libtirpc clients, `onc+udp://`, `onc+tcp://`); serve both from one server |
//! | `LabVersAsyncService`, `program_async`, `program_xdr_async` | with [`Builder::async_service`] only: the same server side with async procedures (see "Async procedures" below) |
//! | `encode_minus_args_xdr`, `decode_minus_result_native`, ... | each procedure's argument and result codecs in both encodings, for calls through `lowlat::Client::call` by hand |
//!
//! The client is right on every scheme it accepts: over `onc+udp://` and `onc+tcp://` it sends
//! and reads XDR, elsewhere lowlat's native encoding in the server's byte order. It is
//! `Send + Sync`: share one between threads.
//!
//! ```ignore
//! use std::sync::Arc;
//! use lab::lab_vers::{self, LabVersClient, LabVersService};
//! use lowlat::{CallContext, CallOptions, OutBuf, ProcError, Server};
//!
//! struct Lab;
//! impl LabVersService for Lab {
//!     fn null(&self, _: &CallContext) -> Result<(), ProcError> { Ok(()) }
//!     fn minus(&self, _: &CallContext, a: i32, b: i32) -> Result<i32, ProcError> { Ok(a.wrapping_sub(b)) }
//!     fn echo(&self, _: &CallContext, data: &[u8], out: &mut OutBuf<'_>) -> Result<(), ProcError> {
//!         out.extend_from_slice(data);
//!         Ok(())
//!     }
//! }
//!
//! let lab = Arc::new(Lab);
//! let server = Server::builder()
//!     .program(lab_vers::program(lab.clone()))
//!     .program(lab_vers::program_xdr(lab))
//!     .serve(&["udp://127.0.0.1:7000", "onc+udp://127.0.0.1:7001"])?;
//! for uri in ["udp://127.0.0.1:7000", "onc+udp://127.0.0.1:7001"] {
//!     let client = LabVersClient::connect(uri)?;
//!     assert_eq!(client.minus(5, 7)?, -2);
//!     let quick = client.with(CallOptions::new().deadline(std::time::Duration::from_millis(50)));
//!     assert_eq!(quick.echo(b"hi")?, b"hi");
//! }
//! ```
//! (`crates/idl/tests/lab_runtime.rs` runs code of this shape on every scheme, blocking and
//! async.) From an async function the same client is awaited:
//! `client.minus_async(5, 7).await?`, `client.with(options).echo_async(b"hi").await?`.
//!
//! A procedure runs on the thread that received its call: the fast path, but a slow procedure
//! holds up the calls behind it on that endpoint. [`Builder::long_running`] registers it to run
//! on the server's worker pool instead.
//!
//! # Async procedures
//!
//! With [`Builder::async_service`] (off by default), each version module also holds an async
//! server trait and the programs that serve it, beside the blocking ones:
//!
//! | item | what it is |
//! |---|---|
//! | `LabVersAsyncService` | the async server trait: a method per procedure, `fn minus(self: Arc<Self>, ctx: lowlat::CallContext, a: i32, b: i32) -> impl Future<Output = Result<i32, lowlat::ProcError>> + Send + 'static`, implemented as an `async fn`; arguments are owned (`String`, `Vec<u8>`, not views) and a variable-length opaque result is returned as a `Vec<u8>` |
//! | `program_async(Arc<S: LabVersAsyncService>)` | the `lowlat::Program` serving it over lowlat's own protocol, every procedure registered with `lowlat::Program::procedure_async` |
//! | `program_xdr_async(Arc<S: LabVersAsyncService>)` | the same implementation for ONC RPC callers |
//!
//! ```ignore
//! use std::sync::Arc;
//! use lab::lab_vers::{self, LabVersAsyncService};
//! use lowlat::{CallContext, ProcError};
//!
//! struct Lab { rt: tokio::runtime::Handle }
//! impl LabVersAsyncService for Lab {
//!     async fn null(self: Arc<Self>, _: CallContext) -> Result<(), ProcError> { Ok(()) }
//!     async fn minus(self: Arc<Self>, _: CallContext, a: i32, b: i32) -> Result<i32, ProcError> {
//!         // Work that needs tokio runs on its runtime; the JoinHandle is awaited here.
//!         self.rt.spawn(async move { a.wrapping_sub(b) }).await.map_err(|e| ProcError::failed(e.to_string()))
//!     }
//!     async fn echo(self: Arc<Self>, _: CallContext, data: Vec<u8>) -> Result<Vec<u8>, ProcError> { Ok(data) }
//! }
//! let lab = Arc::new(Lab { rt: tokio::runtime::Handle::current() });
//! let server = lowlat::Server::builder()
//!     .program(lab_vers::program_async(lab.clone()))
//!     .program(lab_vers::program_xdr_async(lab))
//!     .serve(&["udp://127.0.0.1:7000", "onc+udp://127.0.0.1:7001"])?;
//! ```
//! A call's future is polled first on the thread that received the call: answered at once if
//! it is ready, otherwise set aside while that thread serves other calls, and polled again there
//! when its waker fires, so a procedure awaiting a timer or another service holds up no other
//! call. No executor is needed, but the future must not block that thread, and since the thread
//! is not a tokio worker, what needs a tokio runtime's context when it is made (a timer, a
//! socket) is made inside `Handle::enter` or in a task spawned onto the runtime. Arguments are
//! decoded before the future starts (a decode error is the same typed error, naming the field,
//! as from the blocking trait) and the result is encoded when it ends. [`Builder::long_running`]
//! does not apply to async procedures: they never hold up their thread.
//!
//! Why this shape: the future outlives the message its call arrived in, so it owns what it uses
//! (`self` as an `Arc`, the context, the arguments); a bare `async fn` in a public trait cannot
//! promise `Send`, which the server needs, while `-> impl Future + Send` (stable since Rust
//! 1.75) can and still lets implementations write `async fn`; `#[async_trait]` would box every
//! future once more and add a dependency. `crates/idl/tests/async_service.rs` serves an async
//! implementation on udp, shm and onc+udp; `examples/inventory` has an async server.
//!
//! # How `.x` types map to Rust
//!
//! | `.x` | Rust |
//! |---|---|
//! | `int`, `unsigned int`, `hyper`, `unsigned hyper` | `i32`, `u32`, `i64`, `u64` |
//! | `float`, `double`, `bool` | `f32`, `f64`, `bool` |
//! | `enum color { RED = 0, ... }` | `#[repr(i32)] enum Color { Red = 0, ... }` with `Color::from_i32`; a value with no member is a decode error. [`Builder::strip_enum_prefix`] drops the words all members begin with (`LAB_OK` -> `Ok`) |
//! | `struct point { int x; ... }` | `struct Point { pub x: i32, ... }`: public snake_case fields; derives `Clone`, `Debug`, `PartialEq` (and `Eq` when it holds no floating point) |
//! | `union result switch (color which)` | `enum Result`, a variant per arm named after the arm's field: `case RED: int code;` -> `Code(i32)`; an arm several cases share also holds the discriminant: `case GREEN: case BLUE: string label<>;` -> `Label(Color, String)` (encoding it with another case is an error); a `void` case is named after its label: `case FALSE: void;` -> `False`, `case 2: void;` -> `V2`; `default:` -> `Default(discriminant, value)`, or `Default(discriminant)` when void |
//! | `T *x` (optional data) | `Option<Box<T>>` |
//! | `T x[N]`, `T x<N>` | `[T; N]`, `Vec<T>` (the bound is checked when encoding and decoding) |
//! | `opaque x[N]`, `opaque x<N>` | `[u8; N]`, `Vec<u8>` |
//! | `string x<N>` | `String` (a peer's bytes that are not UTF-8 are a decode error, never a panic) |
//! | `typedef T name` | `type Name = T` (fields and arguments are written with `T`) |
//! | `const MAXNAME = 32;` | `pub const MAXNAME`, typed by its use: `usize` when it is a size or bound (it compares with `len()` and sizes arrays), `i32` when an enumeration value or a case of an `int` union, `u32` when a case of an `unsigned int` union or a program, version or procedure number; otherwise the narrowest of `i32`, `i64`, `u64` |
//! | `program P { version V { ... } = 1; } = N;` | `pub mod v` as above |
//!
//! Procedure arguments are named as the `.x` file names them (`int MINUS(int a, int b)`, an
//! rpcgen extension), else `arg` for a lone argument and `arg1`, `arg2`, ... for several. The
//! client takes numbers, `bool`s and enumerations by value, opaque data as `&[u8]`, strings as
//! `&str`, variable-length arrays as `&[T]` and anything else by reference, and returns owned
//! values. The server trait receives opaque data and strings as views into the received
//! message (`&[u8]`, `&str`), other arguments owned; a procedure returning variable-length
//! opaque data appends it to an `out: &mut lowlat::OutBuf` (over shared memory, the result
//! ring itself). Each generated doc comment gives the `.x` declaration it comes from.
//!
//! # Names
//!
//! Types are `CamelCase`, fields, methods and modules `snake_case`, constants
//! `SCREAMING_CASE`; Rust keywords get `r#`. No two generated names clash: two `.x` names that
//! would become one Rust name are an error at their position, and glob imports of a generated
//! module, its version modules and `lowlat` side by side compile without warnings (the client
//! and the server traits carry the version's name, so none is `lowlat::Client` nor
//! `lowlat::Server`; union variants are named after arms, not after the enumeration members
//! that label them). A `.x` type named like a prelude type (`union result` -> `Result`) shadows
//! it where the module is glob-imported: write `std::result::Result` there.

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

    /// Drops the leading words that all members of an enumeration share from its variants'
    /// names, as prost does (`LAB_OK`, `LAB_DIV_BY_ZERO` -> `LabStatus::Ok`,
    /// `LabStatus::DivByZero`); each member keeps at least one word, and none may then begin
    /// with a digit.
    /// ```no_run
    /// lowlat_build::Builder::new().strip_enum_prefix().compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn strip_enum_prefix(mut self) -> Self {
        self.options.strip_enum_prefix = true;
        self
    }

    /// Also generates, per program version, the async server trait (`LabVersAsyncService`: a
    /// method per procedure returning a `Send + 'static` future, written as an `async fn`) and
    /// `program_async`, `program_xdr_async` to serve an implementation of it; see "Async
    /// procedures" on this crate's front page. Off by default: without it nothing generated
    /// changes.
    /// ```no_run
    /// lowlat_build::Builder::new().async_service().compile(&["idl/lab.x"]).unwrap();
    /// ```
    pub fn async_service(mut self) -> Self {
        self.options.async_service = true;
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
        assert!(!text.contains("pub trait"), "types only must have no server trait");
    }

    #[test]
    fn enum_prefixes_are_stripped_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("div.x");
        std::fs::write(
            &x,
            "enum lab_status { LAB_OK = 0, LAB_DIV_BY_ZERO = 1 };\n\
             union lab_div_result switch (lab_status status) { case LAB_OK: int quotient; case LAB_DIV_BY_ZERO: void; };\n",
        )
        .unwrap();
        let b = Builder::new().out_dir(dir.path()).emit_rerun_if_changed(false);
        let text = std::fs::read_to_string(&b.clone().compile(&[&x]).unwrap()[0]).unwrap();
        assert!(text.contains("    LabOk = 0,") && text.contains("    LabDivByZero = 1,"), "{text}");
        // The union's variants: its arm by the arm's name, its void case by the member's.
        assert!(text.contains("    Quotient(i32),") && text.contains("    LabDivByZero,"), "{text}");
        let text = std::fs::read_to_string(&b.strip_enum_prefix().compile(&[&x]).unwrap()[0]).unwrap();
        assert!(text.contains("    Ok = 0,") && text.contains("    DivByZero = 1,"), "{text}");
        assert!(text.contains("LabStatus::DivByZero => Ok(Self::DivByZero),"), "{text}");
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
