//! The built-in `lab` interface: the procedures of the source papers' experiments.
//!
//! Program 0x20004C4C ("LL" in the ONC RPC user range), version 1:
//!
//! | number | procedure | arguments | result |
//! |---|---|---|---|
//! | 0 | `NULL` | none | none |
//! | 1 | `MINUS` | `int a, int b` | `int a - b` |
//! | 2 | `MAXARG` | `opaque buf<>` | none |
//! | 3 | `MAXRESULT` | `unsigned n` | `opaque<n>` (n bytes) |
//! | 4 | `ECHO` | `opaque buf<>` | `opaque<>` (the same bytes) |
//! | 5 | `COUNT` | none | `unsigned hyper`: a server-wide counter, incremented (not idempotent) |
//! | 6 | `SPIN` | `unsigned us` | none, after `us` microseconds' work on the worker pool |
//! | 7 | `BLOCK` | `unsigned us` | none, after sleeping `us` microseconds on the thread that received it |
//!
//! The stubs are generated from `idl/lab.x` at build time. Bodies use lowlat's native encoding
//! (the server's byte order; a single opaque argument or result is the whole body, so
//! `MAXARG(1440)` puts exactly 1440 bytes on the wire).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat::codec::Sink;
use lowlat::{CallContext, Client, ClientConfig, Error, OutBuf, ProcError, Program};

/// The stubs generated from `idl/lab.x` by `lowlat-build` (see build.rs).
#[allow(clippy::all, dead_code)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/lab.rs"));
}

pub use generated::lab_vers;

/// The lab program number, 0x20004C4C.
pub const PROGRAM: u32 = lab_vers::PROGRAM;
/// The lab program's version, 1.
pub const VERSION: u32 = lab_vers::VERSION;

/// Procedure 0, `NULL`: no arguments, no result.
pub const NULL: u32 = lab_vers::NULL;
/// Procedure 1, `MINUS(int a, int b) -> int`: `a - b`.
pub const MINUS: u32 = lab_vers::MINUS;
/// Procedure 2, `MAXARG(opaque buf<>)`: takes the bytes, returns nothing.
pub const MAXARG: u32 = lab_vers::MAXARG;
/// Procedure 3, `MAXRESULT(unsigned n) -> opaque<n>`: returns `n` bytes.
pub const MAXRESULT: u32 = lab_vers::MAXRESULT;
/// Procedure 4, `ECHO(opaque buf<>) -> opaque<>`: returns the same bytes.
pub const ECHO: u32 = lab_vers::ECHO;
/// Procedure 5, `COUNT() -> unsigned hyper`: increments and returns a server-wide counter
/// (not idempotent).
pub const COUNT: u32 = lab_vers::COUNT;
/// Procedure 6, `SPIN(unsigned us)`: occupies a server worker for `us` µs (at most
/// [`SPIN_MAX`]), returns nothing.
pub const SPIN: u32 = lab_vers::SPIN;

/// Procedure 7, `BLOCK(unsigned us)`: sleeps `us` µs (at most [`SPIN_MAX`]) on the thread that
/// received the call, returns nothing: the inline procedure that blocks, whose cost to the
/// other calls that thread serves is what a server's threading is judged by.
pub const BLOCK: u32 = lab_vers::BLOCK;

/// The longest `SPIN` (and `BLOCK`) the server accepts: a longer one is `GarbageArgs` (a thread
/// held for seconds is a denial of service, not a measurement).
pub const SPIN_MAX: Duration = Duration::from_secs(1);

/// Procedure names by number, as the command line accepts them.
pub const PROCEDURES: [(&str, u32); 8] = [
    ("null", NULL),
    ("minus", MINUS),
    ("maxarg", MAXARG),
    ("maxresult", MAXRESULT),
    ("echo", ECHO),
    ("count", COUNT),
    ("spin", SPIN),
    ("block", BLOCK),
];

/// The procedure number for a name (case-insensitive) or a number.
pub fn procedure_number(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    PROCEDURES.iter().find(|(n, _)| *n == lower).map(|(_, p)| *p).or_else(|| name.parse().ok())
}

/// The byte that `MAXRESULT` puts at offset `i`.
pub fn maxresult_byte(i: usize) -> u8 {
    (i % 251) as u8
}

/// Appends `n` bytes of the `MAXRESULT` pattern, a chunk at a time.
fn append_pattern(out: &mut impl Sink, n: usize) {
    // A whole number of periods, so every chunk starts at a period boundary.
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let p = PATTERN.get_or_init(|| (0..251 * 261).map(maxresult_byte).collect());
    let mut left = n;
    while left > 0 {
        let k = left.min(p.len());
        out.extend_from_slice(&p[..k]);
        left -= k;
    }
}

/// A client of the lab interface: the generated client (native bodies over lowlat's transports,
/// XDR over ONC RPC), with results copied into buffers the caller reuses (so benchmarks
/// allocate nothing per call).
#[derive(Debug)]
pub struct LabClient {
    stub: lab_vers::LabVersClient,
}

impl LabClient {
    /// Binds to the lab program at `uri` with `cfg`.
    pub fn connect(uri: &str, cfg: ClientConfig) -> Result<LabClient, Error> {
        Ok(LabClient { stub: lab_vers::LabVersClient::connect_with(uri, cfg)? })
    }

    /// The underlying lowlat client.
    pub fn client(&self) -> &Client {
        self.stub.client()
    }

    /// Calls `NULL`.
    pub fn null(&self) -> Result<(), Error> {
        self.stub.null()
    }

    /// Calls `MINUS`: returns `a - b`.
    pub fn minus(&self, a: i32, b: i32) -> Result<i32, Error> {
        self.stub.minus(a, b)
    }

    /// Calls `MAXARG` with `data` as the argument (exactly `data.len()` bytes of body).
    pub fn maxarg(&self, data: &[u8]) -> Result<(), Error> {
        self.stub.maxarg(data)
    }

    /// Asks for `n` bytes; they are copied into `out` (whose capacity is reused).
    pub fn maxresult(&self, n: u32, out: &mut Vec<u8>) -> Result<(), Error> {
        self.stub.maxresult_into(n, out)?;
        self.check_maxresult(n, out)
    }

    /// A `MAXRESULT` result must hold exactly the bytes asked for.
    fn check_maxresult(&self, n: u32, got: &[u8]) -> Result<(), Error> {
        if got.len() != n as usize {
            return Err(Error::Decode {
                call: self.client().call_site(MAXRESULT),
                source: Box::new(lowlat::DecodeError::new("as many bytes as asked for", got.len())),
            });
        }
        Ok(())
    }

    /// Sends `data` and receives it back into `out`.
    pub fn echo(&self, data: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        self.stub.echo_into(data, out)
    }

    /// Increments the server's counter; returns its new value.
    pub fn count(&self) -> Result<u64, Error> {
        self.stub.count()
    }

    /// Keeps a server worker busy for `us` microseconds.
    pub fn spin(&self, us: u32) -> Result<(), Error> {
        self.stub.spin(us)
    }

    /// Sleeps `us` microseconds on the server thread that receives the call.
    pub fn block(&self, us: u32) -> Result<(), Error> {
        self.stub.block(us)
    }

    /// A call of lab procedure `proc` as a future (as [`crate::bench`] makes them: `arg` the
    /// argument of MAXARG and ECHO, `size` the bytes MAXRESULT asks for and SPIN's and BLOCK's
    /// microseconds), sent as it is made; results are checked and dropped. One future type
    /// whichever the procedure, `Unpin`: a window of calls keeps it without boxing.
    pub fn call_async<'a>(
        &'a self,
        proc: u32,
        arg: &'a [u8],
        size: usize,
    ) -> impl std::future::Future<Output = Result<(), Error>> + Unpin + 'a {
        let s = &self.stub;
        match proc {
            NULL => AnyCall::Null(s.null_async()),
            MINUS => AnyCall::Minus(s.minus_async(7, 5)),
            MAXARG => AnyCall::Maxarg(s.maxarg_async(arg)),
            MAXRESULT => AnyCall::Maxresult(s.maxresult_async(size as u32), self, size as u32),
            COUNT => AnyCall::Count(s.count_async()),
            SPIN => AnyCall::Spin(s.spin_async(size.try_into().unwrap_or(u32::MAX))),
            BLOCK => AnyCall::Block(s.block_async(size.try_into().unwrap_or(u32::MAX))),
            _ => AnyCall::Echo(s.echo_async(arg)),
        }
    }
}

/// [`LabClient::call_async`]'s future: one generated call, its result checked and dropped.
enum AnyCall<'a, A, B, C, D, E, F, G, H> {
    Null(A),
    Minus(B),
    Maxarg(C),
    Maxresult(D, &'a LabClient, u32),
    Echo(E),
    Count(F),
    Spin(G),
    Block(H),
}

impl<A, B, C, D, E, F, G, H> std::future::Future for AnyCall<'_, A, B, C, D, E, F, G, H>
where
    A: std::future::Future<Output = Result<(), Error>> + Unpin,
    B: std::future::Future<Output = Result<i32, Error>> + Unpin,
    C: std::future::Future<Output = Result<(), Error>> + Unpin,
    D: std::future::Future<Output = Result<Vec<u8>, Error>> + Unpin,
    E: std::future::Future<Output = Result<Vec<u8>, Error>> + Unpin,
    F: std::future::Future<Output = Result<u64, Error>> + Unpin,
    G: std::future::Future<Output = Result<(), Error>> + Unpin,
    H: std::future::Future<Output = Result<(), Error>> + Unpin,
{
    type Output = Result<(), Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::pin::Pin;
        match &mut *self {
            AnyCall::Null(f) => Pin::new(f).poll(cx),
            AnyCall::Minus(f) => Pin::new(f).poll(cx).map(|r| r.map(drop)),
            AnyCall::Maxarg(f) => Pin::new(f).poll(cx),
            AnyCall::Maxresult(f, c, n) => {
                let (c, n) = (*c, *n);
                Pin::new(f).poll(cx).map(|r| r.and_then(|out| c.check_maxresult(n, &out)))
            }
            AnyCall::Echo(f) => Pin::new(f).poll(cx).map(|r| r.map(drop)),
            AnyCall::Count(f) => Pin::new(f).poll(cx).map(|r| r.map(drop)),
            AnyCall::Spin(f) => Pin::new(f).poll(cx),
            AnyCall::Block(f) => Pin::new(f).poll(cx),
        }
    }
}

/// The lab procedures' implementation; its counter is `COUNT`'s.
#[derive(Default)]
struct Lab {
    count: AtomicU64,
}

impl lab_vers::LabVersService for Lab {
    fn null(&self, _: &CallContext) -> Result<(), ProcError> {
        Ok(())
    }

    fn minus(&self, _: &CallContext, a: i32, b: i32) -> Result<i32, ProcError> {
        Ok(a.wrapping_sub(b))
    }

    fn maxarg(&self, _: &CallContext, _data: &[u8]) -> Result<(), ProcError> {
        Ok(())
    }

    fn maxresult(&self, _: &CallContext, n: u32, out: &mut OutBuf<'_>) -> Result<(), ProcError> {
        // Larger than any session allows: the engine answers TooLarge; don't build it.
        if n > 1 << 30 {
            return Err(ProcError::GarbageArgs);
        }
        // Said up front, a result too large for the ring's free space is built once, elsewhere.
        out.reserve(n as usize);
        append_pattern(out, n as usize);
        Ok(())
    }

    fn echo(&self, _: &CallContext, data: &[u8], out: &mut OutBuf<'_>) -> Result<(), ProcError> {
        out.extend_from_slice(data);
        Ok(())
    }

    fn count(&self, _: &CallContext) -> Result<u64, ProcError> {
        Ok(self.count.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn spin(&self, _: &CallContext, us: u32) -> Result<(), ProcError> {
        let d = at_most_spin_max(us)?;
        // Work, not sleep: the service time holds whatever the scheduler does with sleepers.
        let end = Instant::now() + d;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        Ok(())
    }

    fn block(&self, _: &CallContext, us: u32) -> Result<(), ProcError> {
        std::thread::sleep(at_most_spin_max(us)?);
        Ok(())
    }
}

/// `us` microseconds, refused as garbage beyond [`SPIN_MAX`].
fn at_most_spin_max(us: u32) -> Result<Duration, ProcError> {
    let d = Duration::from_micros(us.into());
    if d > SPIN_MAX {
        return Err(ProcError::GarbageArgs);
    }
    Ok(d)
}

/// `SPIN` runs on the worker pool (a procedure that takes time must not hold up the serving
/// thread), whose bounded queue answers `Busy` beyond capacity.
fn with_spin_on_workers(p: Program) -> Program {
    p.mark_long_running("SPIN").expect("the lab interface has SPIN")
}

/// The server side of the lab interface (with a counter of its own).
pub fn program() -> Program {
    with_spin_on_workers(lab_vers::program(Arc::new(Lab::default())))
}

/// The lab interface with XDR bodies, as ONC RPC callers (rpcgen clients of `idl/lab.x`, and
/// [`LabClient`] over `onc+udp://` or `onc+tcp://`) send them: `MINUS`'s integers big-endian,
/// opaque data with a four-byte big-endian length and padding. A counter of its own.
pub fn program_xdr() -> Program {
    with_spin_on_workers(lab_vers::program_xdr(Arc::new(Lab::default())))
}

/// Both encodings of the lab interface sharing one implementation, so `COUNT` counts every call
/// the server ran, whichever protocol brought it (what `lowlat serve` serves).
pub fn programs() -> [Program; 2] {
    programs_counting_from(0)
}

/// [`programs`] whose `COUNT` returns `start + 1` first: servers started with disjoint starts
/// (`lowlat serve --count-from`) return disjoint values, so a client over several of them can
/// tell which server ran each call.
pub fn programs_counting_from(start: u64) -> [Program; 2] {
    let lab = Arc::new(Lab { count: AtomicU64::new(start) });
    [with_spin_on_workers(lab_vers::program(lab.clone())), with_spin_on_workers(lab_vers::program_xdr(lab))]
}

/// The accounting side program served by `lowlat serve --trace`: program 0x20004C4D version 1,
/// procedure 1 `TAKE(unsigned max) -> opaque<>`, which returns (and forgets) up to `max` of the
/// serving thread's timestamp records ([`lowlat::trace::ServerTrace`], 48 bytes each).
pub const TRACE_PROGRAM: u32 = 0x2000_4C4D;
/// The `TAKE` procedure number of [`TRACE_PROGRAM`].
pub const TRACE_TAKE: u32 = 1;

/// The accounting side program ([`TRACE_PROGRAM`]), serving `TAKE` from the calling server
/// thread's trace records (at most 60,000 records per call, whatever `max` asks).
pub fn trace_program() -> Program {
    Program::new(TRACE_PROGRAM, 1).procedure(TRACE_TAKE, "TAKE", |_, args, reply| {
        let max: [u8; 4] = args.try_into().map_err(|_| ProcError::GarbageArgs)?;
        // Keep the answer well inside the default maximum message.
        let max = (u32::from_ne_bytes(max) as usize).min(60_000);
        for t in lowlat::trace::take_server_traces(max) {
            t.encode(reply);
        }
        Ok(())
    })
}
