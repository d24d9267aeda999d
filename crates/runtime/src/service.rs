//! Programs and procedures a server serves, and how a call reaches one.
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
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use lowlat_codec::OutBuf;
use lowlat_proto::{ByteOrder, CallKey, ErrorCode, ProgramVersions, Status};

/// Why a procedure failed. The variants with a message send it to the caller over lowlat's
/// protocol ([`Error::GarbageArgs`](crate::Error::GarbageArgs)'s `detail`,
/// [`Error::ServerError`](crate::Error::ServerError)'s `message`; at most
/// [`MAX_ERROR_MESSAGE`](lowlat_proto::MAX_ERROR_MESSAGE) bytes of it, cut between characters).
/// ONC RPC has no place for a message: there the caller gets GARBAGE_ARGS or SYSTEM_ERR, and the
/// server writes the message to its standard error.
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
    fn code_and_message(&self) -> (ErrorCode, &str) {
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
}

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
        self.procs[i] = Some(Procedure { name, body, long_running });
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
                reply.extend_from_slice(&block_on(h(*ctx, args.to_vec()))?);
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

/// The programs of one server, looked up per call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Services {
    programs: Vec<Program>,
}

/// Where a call goes.
pub(crate) enum Route<'a> {
    Inline(&'a Procedure),
    Worker(&'a Procedure),
    /// An async procedure (its name, its body): its future, polled on the receiving thread
    /// (`crate::async_calls`).
    Async(&'static str, &'a AsyncHandler),
    Missing,
}

impl Route<'_> {
    /// The name of the procedure the call goes to, when there is one.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Route::Inline(p) | Route::Worker(p) => Some(p.name),
            Route::Async(name, _) => Some(name),
            Route::Missing => None,
        }
    }
}

impl Services {
    pub fn add(&mut self, p: Program) {
        self.programs.retain(|q| !(q.program == p.program && q.version == p.version && q.xdr == p.xdr));
        self.programs.push(p);
    }

    /// Programs with their version ranges, for the binding handshake.
    pub fn versions(&self) -> Vec<ProgramVersions> {
        let mut out: Vec<ProgramVersions> = Vec::new();
        for p in &self.programs {
            match out.iter_mut().find(|v| v.program == p.program) {
                Some(v) => {
                    v.low = v.low.min(p.version);
                    v.high = v.high.max(p.version);
                }
                None => out.push(ProgramVersions { program: p.program, low: p.version, high: p.version }),
            }
        }
        out
    }

    /// Which of the programs serves `program`, `version` over lowlat's protocol: a native one
    /// before an XDR one.
    fn program_index(&self, program: u32, version: u32) -> Option<usize> {
        let serves = |p: &Program| p.program == program && p.version == version;
        self.programs.iter().position(|p| serves(p) && !p.xdr).or_else(|| self.programs.iter().position(serves))
    }

    /// The XDR programs, served over ONC RPC.
    pub fn xdr_programs(&self) -> impl Iterator<Item = &Program> {
        self.programs.iter().filter(|p| p.xdr)
    }

    /// Where an ONC RPC call goes (XDR programs only).
    pub fn xdr_route(&self, program: u32, version: u32, proc_no: u32) -> Route<'_> {
        match self.xdr_programs().find(|p| p.program == program && p.version == version) {
            Some(p) => Self::route_in(p, proc_no),
            None => Route::Missing,
        }
    }

    fn route_in(p: &Program, proc_no: u32) -> Route<'_> {
        match p.procs.get(proc_no as usize) {
            // Async procedures block nothing, so they need no worker.
            Some(Some(Procedure { name, body: Body::Async(h), .. })) => Route::Async(name, &**h),
            Some(Some(pr)) if pr.long_running => Route::Worker(pr),
            Some(Some(pr)) => Route::Inline(pr),
            _ => Route::Missing,
        }
    }
}

/// Which program serves each session, so that a call finds its procedure by two indexings
/// (session, procedure) instead of a search of the programs: a session's program and version
/// are fixed at bind time. Grows (allocates) only when a session of a higher index first calls.
#[derive(Default)]
pub(crate) struct RouteCache {
    /// Per session index: the token it belongs to (0: none; a token is never 0) and the program.
    by_session: Vec<(u64, usize)>,
}

impl RouteCache {
    #[inline]
    pub fn route<'s>(
        &mut self,
        services: &'s Services,
        key: CallKey,
        program: u32,
        version: u32,
        proc_no: u32,
    ) -> Route<'s> {
        match self.by_session.get(key.session()) {
            Some(&(token, i)) if token == key.token => Services::route_in(&services.programs[i], proc_no),
            _ => self.learn(services, key, program, version, proc_no),
        }
    }

    #[cold]
    fn learn<'s>(
        &mut self,
        services: &'s Services,
        key: CallKey,
        program: u32,
        version: u32,
        proc_no: u32,
    ) -> Route<'s> {
        let Some(i) = services.program_index(program, version) else { return Route::Missing };
        let at = key.session();
        if at >= self.by_session.len() {
            self.by_session.resize(at + 1, (0, 0));
        }
        self.by_session[at] = (key.token, i);
        Services::route_in(&services.programs[i], proc_no)
    }
}

/// Runs a procedure, turning its failure or panic into a status for the client; on failure
/// `reply` holds, instead of a result, the reason for the caller (or nothing), as the protocol
/// engines take it.
pub(crate) fn run(proc: &Procedure, ctx: &CallContext, args: &[u8], reply: &mut OutBuf<'_>) -> Status {
    let Body::Sync(handler) = &proc.body else {
        // Routed to `crate::async_calls`, never here; answered as a failure rather than run
        // blocking.
        return failed(reply, (ErrorCode::ServerError, "an async procedure was run as a blocking one"));
    };
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, args, reply))) {
        Ok(Ok(())) => Status::Ok,
        Ok(Err(e)) => failed(reply, e.code_and_message()),
        Err(_) => failed(reply, (ErrorCode::ServerError, PANICKED)),
    }
}

/// What a procedure that panicked answers.
pub(crate) const PANICKED: &str = "the procedure panicked";

/// An async procedure's outcome as a status and the bytes that go with it (the result, or the
/// reason for the caller), as [`run`] leaves them.
pub(crate) fn async_outcome(r: std::thread::Result<Result<Vec<u8>, ProcError>>) -> (Status, Vec<u8>) {
    let (code, message) = match &r {
        Ok(Ok(_)) => return (Status::Ok, r.ok().and_then(Result::ok).unwrap_or_default()),
        Ok(Err(e)) => e.code_and_message(),
        Err(_) => (ErrorCode::ServerError, PANICKED),
    };
    (Status::Error(code), message.as_bytes().to_vec())
}

/// Runs `f` to its end on this thread, which sleeps while it is pending.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unparker(std::thread::Thread);
    impl std::task::Wake for Unparker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unparker(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cold]
#[inline(never)]
fn failed(reply: &mut OutBuf<'_>, (code, message): (ErrorCode, &str)) -> Status {
    reply.clear();
    reply.extend_from_slice(message.as_bytes());
    Status::Error(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(number: u32, name: &'static str) -> Program {
        Program::new(number, 1).procedure(1, name, |_, _, _| Ok(()))
    }

    fn name(r: Route<'_>) -> Option<&'static str> {
        r.name()
    }

    #[test]
    fn a_session_index_reused_by_another_program_is_routed_afresh() {
        let mut services = Services::default();
        services.add(program(10, "ten"));
        services.add(program(20, "twenty"));
        let mut cache = RouteCache::default();
        // Session index 3 (bits 32..48 of the token), bound to program 10.
        let first = CallKey { token: 0x0001_0003_0000_00aa, slot: 0, call_no: 1 };
        assert_eq!(first.session(), 3);
        assert_eq!(name(cache.route(&services, first, 10, 1, 1)), Some("ten"));
        assert_eq!(name(cache.route(&services, first, 10, 1, 1)), Some("ten"), "from the cache");
        assert_eq!(name(cache.route(&services, first, 10, 1, 2)), None, "no such procedure");
        // The session ended; a new one at the same index serves program 20.
        let second = CallKey { token: 0x0001_0003_0000_00bb, ..first };
        assert_eq!(name(cache.route(&services, second, 20, 1, 1)), Some("twenty"));
        // A program the server does not have is missing, and nothing is remembered for it.
        let third = CallKey { token: 0x0001_0007_0000_00cc, ..first };
        assert_eq!(name(cache.route(&services, third, 30, 1, 1)), None);
        assert_eq!(name(cache.route(&services, second, 20, 1, 1)), Some("twenty"));
    }
}
