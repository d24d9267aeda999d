//! Programs and procedures a server serves: the public API a service is written against
//! ([`Program`], [`ProcError`], [`CallContext`]). How a call reaches a procedure is the
//! serving side's (`crate::serving::routes`, `crate::serving::dispatch`).
//!
//! A procedure is a function from its argument bytes (a view into the receive buffer) to result
//! bytes appended to the reply buffer. By default it runs on the thread that received the call
//! (Firefly's and eRPC's model: no hand-off, which would cost 3-20 µs); one marked long-running
//! (when the program is built, or at run time: [`Program::mark_long_running`],
//! [`Program::long_running_all`]) runs on the server's worker pool instead, so it cannot hold up
//! other callers.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use lowlat_codec::OutBuf;
use lowlat_proto::{ByteOrder, ErrorCode};

/// Why a procedure failed. The variants with a message send it to the caller over lowlat's
/// protocol ([`Error::GarbageArgs`](crate::Error::GarbageArgs)'s `detail`,
/// [`Error::ServerError`](crate::Error::ServerError)'s `message`; at most
/// [`MAX_ERROR_MESSAGE`](lowlat_proto::MAX_ERROR_MESSAGE) bytes of it, cut between characters).
/// ONC RPC has no place for a message: there the caller gets GARBAGE_ARGS or SYSTEM_ERR, and the
/// server logs the message (a `tracing` event of target `lowlat::onc`, see the crate's front
/// page).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProcError {
    /// The arguments could not be decoded.
    #[error("the arguments could not be decoded")]
    GarbageArgs,
    /// The procedure failed for a reason of its own.
    #[error("the procedure failed")]
    SystemError,
    /// The arguments could not be decoded, and what was wrong with them: generated stubs say
    /// which argument and where ([`ProcError::bad_args`]).
    #[error("the arguments could not be decoded: {0}")]
    BadArgs(String),
    /// The procedure failed, and why, in words for the caller ([`ProcError::failed`]).
    #[error("{0}")]
    Failed(String),
}

impl ProcError {
    /// The procedure failed for the reason `message`, which the caller reads (over lowlat's
    /// protocol): `Err(ProcError::failed(format!("no account {id}")))`.
    pub fn failed(message: impl Into<String>) -> ProcError {
        ProcError::Failed(message.into())
    }

    /// The arguments could not be decoded: what generated stubs answer with the decoder's
    /// error, whose path starts at the argument (``argument `p.items[3].name`: string<16> got
    /// 20 bytes ...``).
    #[cold]
    pub fn bad_args(e: lowlat_codec::DecodeError) -> ProcError {
        ProcError::BadArgs(match e.path() {
            Some(path) => format!("argument `{path}`: {}", e.cause()),
            None => e.to_string(),
        })
    }

    /// The result could not be encoded (a value beyond a bound the interface declares): what
    /// generated stubs answer with the encoder's error.
    #[cold]
    pub fn bad_result(e: lowlat_codec::EncodeError) -> ProcError {
        ProcError::Failed(format!("the result could not be encoded: {e}"))
    }

    /// The code the caller gets, and the message that goes with it (empty: none).
    pub(crate) fn code_and_message(&self) -> (ErrorCode, &str) {
        match self {
            ProcError::GarbageArgs => (ErrorCode::GarbageArgs, ""),
            ProcError::SystemError => (ErrorCode::ServerError, ""),
            ProcError::BadArgs(m) => (ErrorCode::GarbageArgs, m),
            ProcError::Failed(m) => (ErrorCode::ServerError, m),
        }
    }
}

/// What a procedure knows about the call it is serving.
#[derive(Clone, Copy, Debug)]
pub struct CallContext {
    /// The program number called.
    pub program: u32,
    /// The program version called.
    pub version: u32,
    /// The procedure number called.
    pub proc_no: u32,
    /// The byte order of the calling machine (arguments arrive in the server's order).
    pub client_order: ByteOrder,
    /// The caller's AUTH_SYS credentials, for calls over ONC RPC that carried them.
    pub auth: Option<lowlat_onc::AuthSys>,
}

/// A procedure's body.
pub type Handler = dyn Fn(&CallContext, &[u8], &mut OutBuf<'_>) -> Result<(), ProcError> + Send + Sync;

/// The future of an async procedure's call: its result bytes, or why it failed.
pub type ProcFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, ProcError>> + Send>>;

/// An async procedure's body: the call's future, from its context and its arguments (owned: the
/// future may outlive the frame they arrived in).
pub type AsyncHandler = dyn Fn(CallContext, Vec<u8>) -> ProcFuture + Send + Sync;

#[derive(Clone)]
pub(crate) enum Body {
    Sync(Arc<Handler>),
    Async(Arc<AsyncHandler>),
}

#[derive(Clone)]
pub(crate) struct Procedure {
    pub name: &'static str,
    pub body: Body,
    pub long_running: bool,
    /// Its index among the server's procedures, for its call times (`serving::timing`); given
    /// when the program is added to a server, [`UNTIMED`] until then.
    pub id: usize,
}

/// The [`Procedure::id`] of a procedure whose calls are not timed (not a server's, or built in).
pub(crate) const UNTIMED: usize = usize::MAX;

/// One version of one program: its procedures by number.
#[derive(Clone)]
pub struct Program {
    pub(crate) program: u32,
    pub(crate) version: u32,
    pub(crate) procs: Vec<Option<Procedure>>,
    /// Bodies are XDR (served over ONC RPC) rather than lowlat's native encoding.
    pub(crate) xdr: bool,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> =
            self.procs.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i, p.name))).collect();
        f.debug_struct("Program")
            .field("program", &self.program)
            .field("version", &self.version)
            .field("procs", &names)
            .finish()
    }
}

impl Program {
    /// A program version with no procedures yet.
    pub fn new(program: u32, version: u32) -> Program {
        Program { program, version, procs: Vec::new(), xdr: false }
    }

    /// Marks the procedures as reading and writing XDR bodies: the program is then served to
    /// ONC RPC callers (`onc+udp://`, `onc+tcp://`). A server may hold both encodings of one
    /// program and version; lowlat callers get the native one when there is one.
    pub fn xdr(mut self) -> Program {
        self.xdr = true;
        self
    }

    /// Whether bodies are XDR.
    pub fn is_xdr(&self) -> bool {
        self.xdr
    }

    /// The program number.
    pub fn number(&self) -> u32 {
        self.program
    }

    /// The program version.
    pub fn version(&self) -> u32 {
        self.version
    }

    fn add(mut self, proc_no: u32, name: &'static str, long_running: bool, body: Body) -> Program {
        let i = proc_no as usize;
        assert!(i < 1 << 16, "procedure numbers above 65535 are not supported");
        if self.procs.len() <= i {
            self.procs.resize(i + 1, None);
        }
        self.procs[i] = Some(Procedure { name, body, long_running, id: UNTIMED });
        self
    }

    /// Adds a procedure run on the receiving thread.
    pub fn procedure(
        self,
        proc_no: u32,
        name: impl Into<Cow<'static, str>>,
        handler: impl Fn(&CallContext, &[u8], &mut OutBuf<'_>) -> Result<(), ProcError> + Send + Sync + 'static,
    ) -> Program {
        self.add(proc_no, intern(name.into()), false, Body::Sync(Arc::new(handler)))
    }

    /// Adds a procedure run on the worker pool (for calls that take long or block).
    pub fn long_running(
        self,
        proc_no: u32,
        name: impl Into<Cow<'static, str>>,
        handler: impl Fn(&CallContext, &[u8], &mut OutBuf<'_>) -> Result<(), ProcError> + Send + Sync + 'static,
    ) -> Program {
        self.add(proc_no, intern(name.into()), true, Body::Sync(Arc::new(handler)))
    }

    /// Adds an async procedure: `handler` makes the call's future from its context and
    /// arguments, `|ctx, args| async move { ... Ok(result_bytes) }`. The serving thread polls it
    /// at once: a future ready then is answered as an ordinary procedure is; one that is pending
    /// is set aside and the thread serves other calls until the future's waker fires (it rings
    /// the endpoint's doorbell), then polls it again there. No executor is needed: the future
    /// may await anything whose waker it is given (a tokio timer or channel, a lowlat async
    /// call). It must not block the thread it is polled on (the serving thread). A graceful
    /// stop waits for pending calls as for calls in progress.
    pub fn procedure_async<F, Fut>(self, proc_no: u32, name: impl Into<Cow<'static, str>>, handler: F) -> Program
    where
        F: Fn(CallContext, Vec<u8>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, ProcError>> + Send + 'static,
    {
        let body: Arc<AsyncHandler> = Arc::new(move |ctx, args| Box::pin(handler(ctx, args)) as ProcFuture);
        self.add(proc_no, intern(name.into()), false, Body::Async(body))
    }

    /// Runs every procedure of the program on the server's worker pool: for a program whose
    /// procedures take long or block (a procedure otherwise runs on the thread that received
    /// its call, holding up the calls behind it on that endpoint).
    /// `lab_vers::program(server).long_running_all()`.
    pub fn long_running_all(mut self) -> Program {
        for p in self.procs.iter_mut().flatten() {
            p.long_running = true;
        }
        self
    }

    /// Runs the procedure named `name` (as the interface definition names it, e.g. `"SLEEP"`)
    /// on the server's worker pool, at run time: `lab_vers::program(server)
    /// .mark_long_running("SLEEP")?`. Fails, naming the procedures there are, when the program
    /// has none of that name.
    pub fn mark_long_running(mut self, name: &str) -> Result<Program, crate::Error> {
        match self.procs.iter_mut().flatten().find(|p| p.name == name) {
            Some(p) => {
                p.long_running = true;
                Ok(self)
            }
            None => Err(crate::Error::NoSuchProcedure {
                program: self.program,
                version: self.version,
                name: name.to_string(),
                known: self.procedures().map(|(_, n, _)| n).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// Runs procedure `proc_no` on this thread, as a server would (to measure its own cost); an
    /// async one to its end, this thread sleeping while its future is pending.
    pub fn invoke(
        &self,
        proc_no: u32,
        ctx: &CallContext,
        args: &[u8],
        reply: &mut OutBuf<'_>,
    ) -> Result<(), ProcError> {
        match self.procs.get(proc_no as usize) {
            Some(Some(Procedure { body: Body::Sync(h), .. })) => h(ctx, args, reply),
            Some(Some(Procedure { body: Body::Async(h), .. })) => {
                reply.extend_from_slice(&crate::in_flight::wait(h(*ctx, args.to_vec()))?);
                Ok(())
            }
            _ => Err(ProcError::SystemError),
        }
    }

    /// The procedures, as (number, name, long-running).
    pub fn procedures(&self) -> impl Iterator<Item = (u32, &'static str, bool)> + '_ {
        self.procs.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i as u32, p.name, p.long_running)))
    }
}

/// A procedure name that lives as long as the process. Generated code names procedures with
/// literals; a program built at run time from an interface (`lowlat-dynamic`, the Python
/// package) has owned names, kept here once each: a process serves finitely many distinct names,
/// so what is kept is bounded by them, not by how many programs are built.
fn intern(name: Cow<'static, str>) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    match name {
        Cow::Borrowed(s) => s,
        Cow::Owned(s) => {
            let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
            match names.get(s.as_str()) {
                Some(kept) => kept,
                None => {
                    let kept: &'static str = Box::leak(s.into_boxed_str());
                    names.insert(kept);
                    kept
                }
            }
        }
    }
}
