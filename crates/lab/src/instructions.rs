//! Instructions per call, client and server apart, part by part, counted by callgrind: the
//! figure that does not move with the host (a slower clock makes every instruction count, but
//! the count stays the same for the same build).
//!
//! The counting program is lowlat's example `count_calls`, built with the `callgrind` feature
//! (`cargo build --release -p lowlat-lab --features callgrind --example count_calls`): the
//! laboratory's generated client calling the laboratory's service in the same process, both
//! busy-polling, with marks on the call path so that callgrind collects a thread's instructions
//! only from the call to its return on the client and from the look that finds a call to its
//! reply out on the server (and, counted apart, on to the server's next look: the bookkeeping
//! after the reply); a look that finds nothing, the waiting, is never counted. In that
//! build a wait never leaves its clock-free polls (under valgrind the threads take turns, and
//! the answer would take longer than a fast peer's): the count is the common case's, a reply
//! found within them. [`count`] runs it under valgrind, reads callgrind's output files (one per
//! thread) and sorts every instruction into a [`Part`] by the source file it was compiled from
//! (inlined code keeps its file) or, for the standard library's and libc's code, by the
//! function it ran in.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lowlat_report::{InstructionPart, Instructions};
use lowlat_testkit::testhosts::TestHosts;

/// What a count failed on.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    /// valgrind is not installed (scripts/deps/c.sh installs it).
    #[error("valgrind is not installed (scripts/install-deps.sh installs it)")]
    NoValgrind,
    /// The counting build is missing.
    #[error(
        "the counting build is missing ({0}): cargo build --release -p lowlat-lab --features callgrind --example count_calls"
    )]
    NoCountingBuild(PathBuf),
    /// The counting program or valgrind failed.
    #[error("counting {what}: {why}")]
    Run {
        /// Scheme and procedure.
        what: String,
        /// What went wrong.
        why: String,
    },
    /// callgrind's output could not be read.
    #[error("callgrind's output {file}: {why}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

/// The parts a call's instructions are sorted into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// Client: the generated client, `lowlat::Client`'s call path, the codec (marshaling).
    Stub,
    /// The protocol engine (lowlat-proto; lowlat-onc for ONC RPC).
    Engine,
    /// Rings, sockets and their system call wrappers, lowlat's adapters over them, and the
    /// frames' end-to-end CRC32C (udp, eth, xdp).
    Transport,
    /// Server: the serving loop, routes, dispatch, per-call timing and counters.
    Dispatch,
    /// Server: the generated server stub (unmarshaling, marshaling) and the procedure.
    Procedure,
    /// The spinner's bookkeeping and clock reads.
    Clock,
    /// Standard library and libc code that none of the above names (copies, say).
    Other,
}

impl Part {
    /// Every part, in the order tables show them.
    pub const ALL: [Part; 7] =
        [Part::Stub, Part::Engine, Part::Transport, Part::Dispatch, Part::Procedure, Part::Clock, Part::Other];

    /// Its name in tables and results.json.
    pub fn name(self) -> &'static str {
        match self {
            Part::Stub => "stub (generated client, lowlat::Client, marshaling)",
            Part::Engine => "engine (lowlat-proto, lowlat-onc)",
            Part::Transport => "transport (rings, sockets, adapters)",
            Part::Dispatch => "dispatch (serving loop, routes, counters)",
            Part::Procedure => "server stub and procedure",
            Part::Clock => "clock reads and spinner",
            Part::Other => "other library code",
        }
    }
}

/// Which side of the call a thread ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The calling thread.
    Client,
    /// The serving thread.
    Server,
}

/// The part of an instruction compiled from `file` and run in function `func` on `side`, or
/// `None` for the marks' own instructions.
pub fn part_of(file: &str, func: &str, side: Side) -> Option<Part> {
    if func.starts_with(lowlat_sys::callgrind::MARKS_MODULE) {
        return None;
    }
    let in_crate = |c: &str| file.contains(&format!("/crates/{c}/"));
    let caller_side = if side == Side::Client { Part::Stub } else { Part::Procedure };
    let part = if in_crate("proto") || in_crate("onc") {
        Part::Engine
    } else if file.ends_with("/crates/sys/src/clock.rs") || in_crate("wait") {
        Part::Clock
    } else if in_crate("shm")
        || in_crate("transport")
        || file.contains("/crc32c-")
        || in_crate("eth")
        || in_crate("sys")
        || file.contains("/crates/runtime/src/driver/")
    {
        Part::Transport
    } else if file.contains("/crates/runtime/src/client/") {
        Part::Stub
    } else if in_crate("runtime") {
        if side == Side::Client {
            Part::Stub
        } else {
            Part::Dispatch
        }
    } else if in_crate("codec") || in_crate("lab") || file.ends_with("/lab.rs") {
        // Marshaling, the generated stubs (built into OUT_DIR/lab.rs), the laboratory's
        // client wrapper and service, the counting program's loop.
        caller_side
    } else {
        // The standard library's code inlined into a function, or libc's: by the function.
        part_of_function(func, side)
    };
    Some(part)
}

/// The part of library code by the function it ran in (for code inlined from the standard
/// library, the lowlat function it was inlined into).
fn part_of_function(func: &str, side: Side) -> Part {
    let has = |s: &str| func.contains(s);
    if has("Timespec") || has("clock_gettime") || has("Instant") || has("lowlat_wait::") {
        Part::Clock
    } else if has("lowlat_proto::") || has("lowlat_onc::") {
        Part::Engine
    } else if has("lowlat_shm::")
        || has("lowlat_eth::")
        || has("lowlat_transport::")
        || func.starts_with("crc32c::")
        || has("lowlat_sys::")
        || has("lowlat::driver::")
        || [
            "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "sendto", "recvfrom", "send", "recv", "write", "read",
            "syscall", "poll",
        ]
        .iter()
        .any(|w| func == *w || func.starts_with(&format!("{w}@")) || func.starts_with(&format!("__libc_{w}")))
        // What libc's socket calls do around the system call (they are cancellation points).
        || func.starts_with("__pthread_enable_asynccancel")
        || func.starts_with("__pthread_disable_asynccancel")
    {
        Part::Transport
    } else if has("lowlat::serving::")
        || has("LowlatEndpoint")
        || has("lowlat::program::")
        // A serving thread's entry, where its loop may be inlined whole.
        || (side == Side::Server && has("__rust_begin_short_backtrace"))
    {
        Part::Dispatch
    } else if has("lowlat::client::") {
        Part::Stub
    } else if has("lowlat_lab::") || has("lab_vers::") || has("count_calls::") {
        if side == Side::Client {
            Part::Stub
        } else {
            Part::Procedure
        }
    } else {
        Part::Other
    }
}

/// Instructions by (source file, function).
pub type Costs = HashMap<(String, String), u64>;

/// Self cost (instructions, the first event) by (source file, function) of one callgrind
/// output file, and its `totals:` line. Calls' inclusive costs are skipped: each instruction is
/// counted once, where it ran.
pub fn self_costs(text: &str) -> Result<(Costs, u64), String> {
    let mut files: HashMap<String, String> = HashMap::new();
    let mut funcs: HashMap<String, String> = HashMap::new();
    // "(id) name" defines id; "(id)" refers to it; a bare name is itself.
    fn name(table: &mut HashMap<String, String>, v: &str) -> String {
        let v = v.trim();
        match v.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((id, rest)) if rest.trim().is_empty() => table.get(id).cloned().unwrap_or_default(),
            Some((id, rest)) => {
                table.insert(id.to_string(), rest.trim().to_string());
                rest.trim().to_string()
            }
            None => v.to_string(),
        }
    }
    let mut positions = 1usize;
    let (mut fl, mut fi, mut func) = (String::new(), None::<String>, String::new());
    let mut skip_next = false;
    let mut costs = Costs::new();
    let mut totals = None;
    for (n, line) in text.lines().enumerate() {
        let bad = |why: &str| format!("line {}: {why}: {line}", n + 1);
        let Some(first) = line.chars().next() else { continue };
        if first.is_ascii_digit() || first == '+' || first == '-' || first == '*' {
            if std::mem::take(&mut skip_next) {
                continue;
            }
            let mut cols = line.split_ascii_whitespace().skip(positions);
            let ir: u64 = match cols.next() {
                Some(c) => c.parse().map_err(|_| bad("not a count"))?,
                None => 0,
            };
            let file = fi.clone().unwrap_or_else(|| fl.clone());
            *costs.entry((file, func.clone())).or_default() += ir;
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else { continue };
        match key {
            "fl" => {
                fl = name(&mut files, value);
                fi = None;
            }
            "fi" | "fe" => fi = Some(name(&mut files, value)),
            "fn" => {
                func = name(&mut funcs, value);
                fi = None;
            }
            "cfi" | "cfl" => {
                name(&mut files, value);
            }
            "cfn" => {
                name(&mut funcs, value);
            }
            "calls" => skip_next = true,
            "positions" => positions = value.split_ascii_whitespace().count().max(1),
            "totals" | "summary" => {
                totals = Some(value.split_ascii_whitespace().next().unwrap_or("0").parse().map_err(|_| bad("totals"))?)
            }
            _ => {}
        }
    }
    Ok((costs, totals.ok_or("no totals line")?))
}

/// One thread's instructions per call by part.
fn parts_per_call(costs: &Costs, side: Side, calls: u64) -> Vec<InstructionPart> {
    let mut sums: HashMap<Part, u64> = HashMap::new();
    for ((file, func), &ir) in costs {
        if let Some(p) = part_of(file, func, side) {
            *sums.entry(p).or_default() += ir;
        }
    }
    Part::ALL
        .iter()
        .filter_map(|p| {
            let ir = *sums.get(p)?;
            (ir > 0).then(|| InstructionPart { name: p.name().to_string(), per_call: ir as f64 / calls as f64 })
        })
        .collect()
}

/// Where the counting build lies: `LOWLAT_COUNT_CALLS`, else beside the `lowlat` executable
/// (`target/<profile>/examples/count_calls`).
pub fn counting_binary(exe: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("LOWLAT_COUNT_CALLS") {
        return PathBuf::from(p);
    }
    exe.parent().unwrap_or(Path::new(".")).join("examples").join("count_calls")
}

/// The most calls a count makes before counting: enough to open the channel, grow the buffers
/// and settle the spinners (the count per call is then the same from the first counted call).
pub const WARMUP: u64 = 100;

/// How long one count may take (a few hundred calls under callgrind take seconds; a hung
/// program is stopped).
const COUNT_TIMEOUT: Duration = Duration::from_secs(300);

/// Counts `calls` calls of `procedure` (`null` or `minus`) over `scheme` (shm, udp, tcp,
/// onc+udp, onc+tcp; eth and xdp as root, across a veth pair made for the count) with the
/// counting build `bin`, under callgrind, after a warm-up of as many calls (at most [`WARMUP`])
/// that is not counted.
pub fn count(bin: &Path, scheme: &str, procedure: &str, calls: u64) -> Result<Instructions, CountError> {
    let (client, server) = count_by_function(bin, scheme, procedure, calls, Window::ToReply)?;
    let (client, server) = (parts_per_call(&client, Side::Client, calls), parts_per_call(&server, Side::Server, calls));
    let (_, to_next_look) = count_by_function(bin, scheme, procedure, calls, Window::ToNextLook)?;
    let to_next_look: f64 = parts_per_call(&to_next_look, Side::Server, calls).iter().map(|p| p.per_call).sum();
    let total = |p: &[InstructionPart]| p.iter().map(|p| p.per_call).sum();
    let server_total: f64 = total(&server);
    Ok(Instructions {
        procedure: procedure.to_uppercase(),
        calls,
        client_total: total(&client),
        client,
        server_total,
        server,
        server_after_reply: (to_next_look - server_total).max(0.0),
    })
}

/// Where the server's count of a call ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// When its reply is out: the call's path (the issue's "from reading the call to publishing
    /// its reply").
    ToReply,
    /// When it next looks for a call: the bookkeeping after the reply too.
    ToNextLook,
}

/// [`count`]'s instructions in all (not per call) by source file and function, client and
/// server: where to look when a part is long.
pub fn count_by_function(
    bin: &Path,
    scheme: &str,
    procedure: &str,
    calls: u64,
    window: Window,
) -> Result<(Costs, Costs), CountError> {
    if !bin.is_file() {
        return Err(CountError::NoCountingBuild(bin.to_path_buf()));
    }
    let what = format!("{procedure} over {scheme}");
    let run_err = |why: String| CountError::Run { what: what.clone(), why };
    // eth:// and xdp:// are counted across a veth pair between two namespaces made for the
    // count (root only), deleted when it ends.
    let link = match scheme {
        "eth" | "xdp" => Some(TestHosts::new().map_err(|e| run_err(format!("a veth pair to count over: {e}")))?),
        _ => None,
    };
    let dir = tempfile_dir().map_err(|e| run_err(format!("a temporary directory: {e}")))?;
    let out = dir.join("cg.out");
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=callgrind", "--collect-atstart=no", "--separate-threads=yes"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(bin)
        .args([scheme, procedure, &calls.to_string(), &calls.min(WARMUP).to_string()])
        .env("LOWLAT_COUNT_TO_REPLY", if window == Window::ToReply { "1" } else { "0" });
    if let Some(h) = &link {
        cmd.env("LOWLAT_COUNT_LINK", format!("{} {} {} {} {}", h.a.ns, h.a.iface, h.b.ns, h.b.iface, h.a.mac));
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CountError::NoValgrind
        } else {
            run_err(e.to_string())
        }
    })?;
    let deadline = Instant::now() + COUNT_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| run_err(e.to_string()))? {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
                return Err(run_err(format!("no end within {} s", COUNT_TIMEOUT.as_secs())));
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(run_err(format!("{status}: {}", tail.into_iter().rev().collect::<Vec<_>>().join(" / "))));
    }
    let result = read_threads(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The client's parts (the main thread, callgrind's thread 1) and the server's (the other
/// thread that counted most: the serving thread; the others count nothing).
fn read_threads(dir: &Path) -> Result<(Costs, Costs), CountError> {
    let mut threads = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| CountError::Parse { file: dir.into(), why: e.to_string() })?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(n) = path.to_str().and_then(|p| p.rsplit_once("cg.out-")).and_then(|(_, n)| n.parse::<u32>().ok())
        else {
            continue;
        };
        let text =
            std::fs::read_to_string(&path).map_err(|e| CountError::Parse { file: path.clone(), why: e.to_string() })?;
        let (costs, total) = self_costs(&text).map_err(|why| CountError::Parse { file: path.clone(), why })?;
        threads.push((n, total, costs));
    }
    threads.sort_by_key(|t| t.0);
    let missing = |why: &str| CountError::Parse { file: dir.into(), why: why.into() };
    let client = threads.iter().position(|t| t.0 == 1).ok_or_else(|| missing("no file of thread 1"))?;
    let client = threads.swap_remove(client);
    let server = threads.into_iter().max_by_key(|t| t.1).ok_or_else(|| missing("no serving thread"))?;
    if client.1 == 0 || server.1 == 0 {
        return Err(missing("a side counted nothing: is this the counting build (--features callgrind)?"));
    }
    Ok((client.2, server.2))
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    for i in 0..100u32 {
        let dir = base.join(format!("lowlat-count-{}-{i}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free name"))
}

/// The `n` costliest (file, function) pairs of `costs`, per call, each with its part: lines
/// for a terminal.
pub fn top(costs: &Costs, side: Side, calls: u64, n: usize) -> String {
    let mut v: Vec<_> = costs.iter().filter_map(|(k, &ir)| Some((ir, part_of(&k.0, &k.1, side)?, k))).collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.0));
    let mut s = String::new();
    for (ir, part, (file, func)) in v.into_iter().take(n) {
        let file = file.rsplit_once("/crates/").map_or(file.as_str(), |(_, f)| f);
        let func: String = func.chars().take(90).collect();
        s.push_str(&format!("  {:>7.1}  {:<9} {file}: {func}\n", ir as f64 / calls as f64, format!("{part:?}")));
    }
    s
}

/// Counts as a terminal table: a column per procedure and side.
pub fn table(transport: &str, counts: &[Instructions]) -> String {
    let mut s = format!("Instructions per call over {transport} (callgrind; waiting not counted):\n");
    s.push_str(&format!("{:<52}", "part"));
    for c in counts {
        s.push_str(&format!(" {:>9} {:>9}", format!("{} cl", c.procedure), format!("{} sv", c.procedure)));
    }
    s.push('\n');
    for p in Part::ALL {
        let of = |parts: &[InstructionPart]| parts.iter().find(|q| q.name == p.name()).map_or(0.0, |q| q.per_call);
        if counts.iter().all(|c| of(&c.client) == 0.0 && of(&c.server) == 0.0) {
            continue;
        }
        s.push_str(&format!("{:<52}", p.name()));
        for c in counts {
            s.push_str(&format!(" {:>9.0} {:>9.0}", of(&c.client), of(&c.server)));
        }
        s.push('\n');
    }
    s.push_str(&format!("{:<52}", "total (client: to the return; server: to the reply)"));
    for c in counts {
        s.push_str(&format!(" {:>9.0} {:>9.0}", c.client_total, c.server_total));
    }
    s.push('\n');
    s.push_str(&format!("{:<52}", "server after the reply, until its next look"));
    for c in counts {
        s.push_str(&format!(" {:>9} {:>9.0}", "", c.server_after_reply));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_costs_follow_inlined_files_and_skip_calls_inclusive_costs() {
        let out = "\
version: 1
positions: line
events: Ir
fl=(1) /w/crates/runtime/src/client/call.rs
fn=(1) lowlat::client::call::call_timeout
10 5
fi=(2) /w/crates/proto/src/client/send.rs
+2 7
fe=(1)
-1 1
cfl=(3) /w/crates/sys/src/callgrind.rs
cfn=(2) lowlat_sys::callgrind::mark
calls=1 3
11 40
fl=(3)
fn=(2)
3 9
fl=(4) /rustc/x/library/core/src/option.rs
fn=(3) <lowlat::driver::shm::ShmClient as lowlat::driver::ClientChannel>::try_recv
4 2
totals: 64
";
        let (costs, totals) = self_costs(out).unwrap();
        assert_eq!(totals, 64);
        let get = |f: &str, func: &str| costs.get(&(f.to_string(), func.to_string())).copied();
        let call = "lowlat::client::call::call_timeout";
        assert_eq!(get("/w/crates/runtime/src/client/call.rs", call), Some(6));
        assert_eq!(get("/w/crates/proto/src/client/send.rs", call), Some(7));
        assert_eq!(get("/w/crates/sys/src/callgrind.rs", "lowlat_sys::callgrind::mark"), Some(9));
        // The call's inclusive 40 is not a cost of its own.
        assert_eq!(costs.values().sum::<u64>(), 24);
        let parts = parts_per_call(&costs, Side::Client, 2);
        let names: Vec<(&str, f64)> = parts.iter().map(|p| (p.name.as_str(), p.per_call)).collect();
        // The mark's own 9 are left out; option.rs inlined into the shm adapter is transport.
        assert_eq!(names, [(Part::Stub.name(), 3.0), (Part::Engine.name(), 3.5), (Part::Transport.name(), 1.0)]);
    }

    #[test]
    fn parts_by_side() {
        let gen = "/t/release/build/lowlat-lab-1/out/lab.rs";
        assert_eq!(part_of(gen, "x", Side::Client), Some(Part::Stub));
        assert_eq!(part_of(gen, "x", Side::Server), Some(Part::Procedure));
        assert_eq!(part_of("/w/crates/runtime/src/serving/lowlat.rs", "x", Side::Server), Some(Part::Dispatch));
        assert_eq!(part_of("/w/crates/sys/src/clock.rs", "x", Side::Server), Some(Part::Clock));
        assert_eq!(part_of("./io/write.c", "write", Side::Client), Some(Part::Transport));
        assert_eq!(part_of("./string/memmove.S", "__memcpy_avx_unaligned_erms", Side::Client), Some(Part::Other));
        assert_eq!(
            part_of("./nptl/cancellation.c", "__pthread_enable_asynccancel", Side::Server),
            Some(Part::Transport)
        );
        let entry = "std::sys::backtrace::__rust_begin_short_backtrace";
        assert_eq!(part_of("/rustc/1/library/core/src/option.rs", entry, Side::Server), Some(Part::Dispatch));
        assert_eq!(part_of("/rustc/1/library/core/src/option.rs", entry, Side::Client), Some(Part::Other));
        // The frames' checksum is the transport's, in its own crate's file or inlined from std's.
        let crc = "/r/index.crates.io-1/crc32c-0.6.9/src/hw_x86_64.rs";
        assert_eq!(part_of(crc, "crc32c::hw_x86_64::crc32c", Side::Client), Some(Part::Transport));
        let iter = "/rustc/1/library/core/src/slice/iter/macros.rs";
        assert_eq!(part_of(iter, "crc32c::hw_x86_64::crc32c", Side::Server), Some(Part::Transport));
        assert_eq!(part_of("/w/crates/sys/src/callgrind.rs", "lowlat_sys::callgrind::mark", Side::Client), None);
    }
}
