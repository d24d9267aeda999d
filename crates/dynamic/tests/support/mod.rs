//! Shared by the interop tests (here and crates/idl/tests/c_interop.rs): the generated stubs of
//! everything.x, a lowlat server of the same program with the semantics of
//! tests/c/everything_peer.c, the C peer built at test time, and the values both sides build.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::sync::Arc;

use lowlat::{CallContext, OutBuf, ProcError, Program, Server, ServerConfig};

#[allow(dead_code, clippy::all)]
pub mod everything {
    include!("../../../idl/tests/generated/everything.rs");
}

use everything::*;

/// Why the C side cannot be built here, if it cannot.
pub fn missing_tools() -> Option<String> {
    let ok = |cmd: &str, arg: &str| {
        Command::new(cmd).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    };
    if !ok("rpcgen", "--version") {
        return Some("rpcgen not found (package rpcsvc-proto)".into());
    }
    if !ok("cc", "--version") {
        return Some("no C compiler (cc)".into());
    }
    if !Path::new("/usr/include/tirpc/rpc/rpc.h").exists() {
        return Some("libtirpc headers not found (package libtirpc-dev)".into());
    }
    None
}

/// Skips (with the reason printed) when the C tools are missing, except under CI.
#[macro_export]
macro_rules! need_c_tools {
    ($name:expr) => {
        if let Some(why) = support::missing_tools() {
            assert!(std::env::var_os("CI").is_none(), "{} cannot run in CI: {why}", $name);
            eprintln!("SKIPPED {}: {why}; run scripts/deps/idl.sh", $name);
            return;
        }
    };
}

/// Runs `cmd` to completion; panics with its error output if it fails.
pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Builds tests/c/everything_peer.c against rpcgen's output in `dir`.
pub fn build_peer(dir: &Path) -> PathBuf {
    // The workspace's root, from whichever crate's tests include this module.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::copy(root.join("idl/examples/everything.x"), dir.join("everything.x")).unwrap();
    std::fs::copy(root.join("crates/dynamic/tests/c/everything_peer.c"), dir.join("everything_peer.c")).unwrap();
    for (flag, out) in
        [("-h", "everything.h"), ("-c", "everything_xdr.c"), ("-l", "everything_clnt.c"), ("-m", "everything_svc.c")]
    {
        run(Command::new("rpcgen").current_dir(dir).args(["-N", flag, "everything.x", "-o", out]));
    }
    run(Command::new("cc").current_dir(dir).args([
        "-O1",
        "-w",
        "-I/usr/include/tirpc",
        "-I.",
        "everything_peer.c",
        "everything_xdr.c",
        "everything_clnt.c",
        "everything_svc.c",
        "-ltirpc",
        "-o",
        "everything_peer",
    ]));
    dir.join("everything_peer")
}

/// A running C server; killed (by its PID, through the handle) when dropped.
pub struct CServer {
    child: Child,
    pub port: u16,
}

impl CServer {
    pub fn start(peer: &Path, transport: &str) -> CServer {
        let mut child = Command::new(peer)
            .args(["serve", transport])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the C server did not say its port within 10 s");
            }
        };
        let port = line.trim().parse().unwrap_or_else(|_| panic!("C server said {line:?}"));
        CServer { child, port }
    }
}

impl Drop for CServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd`, killing it (by PID) after `limit`; returns (success, stdout, stderr).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = child.wait_with_output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    match status {
        Some(s) => (s.success(), o, e),
        None => (false, o, format!("{e}\n(killed after {limit:?})")),
    }
}

/// LOOKUP's rule (see everything_peer.c).
pub fn lookup(key: &str, hint: Color) -> everything::Result {
    match hint {
        Color::Red => everything::Result::Code(key.len() as i32),
        Color::Green | Color::Blue => everything::Result::Label(hint, key.to_string()),
        other => everything::Result::Default(other),
    }
}

pub fn reverse(n: &Node) -> Node {
    let mut values = Vec::new();
    let mut p = Some(n);
    while let Some(x) = p {
        values.push(x.value);
        p = x.next.as_deref();
    }
    let mut out: Option<Box<Node>> = None;
    for v in values {
        out = Some(Box::new(Node { value: v, next: out }));
    }
    *out.expect("a list has a first node")
}

/// EVERYTHING_PROG's procedures with the semantics of everything_peer.c, through the generated
/// server traits.
pub struct Peer;

type Done<T> = std::result::Result<T, ProcError>;

impl everything_v1::EverythingV1Service for Peer {
    fn ping(&self, _: &CallContext) -> Done<()> {
        Ok(())
    }
    fn roundtrip(&self, _: &CallContext, arg: Everything) -> Done<Everything> {
        Ok(arg)
    }
    fn add(&self, _: &CallContext, a: i32, b: i32) -> Done<i32> {
        Ok(a.wrapping_add(b))
    }
    fn concat(&self, _: &CallContext, a: &[u8], b: &[u8], out: &mut OutBuf<'_>) -> Done<()> {
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        Ok(())
    }
    fn greet(&self, _: &CallContext, who: &str) -> Done<String> {
        Ok(format!("hello, {who}"))
    }
    fn lookup(&self, _: &CallContext, key: &str, hint: Color) -> Done<everything::Result> {
        Ok(lookup(key, hint))
    }
}

impl everything_v2::EverythingV2Service for Peer {
    fn ping(&self, _: &CallContext) -> Done<()> {
        Ok(())
    }
    fn reverse(&self, _: &CallContext, arg: Node) -> Done<Node> {
        Ok(reverse(&arg))
    }
}

/// Versions 1 and 2 of EVERYTHING_PROG with XDR bodies, for ONC RPC callers.
pub fn programs_xdr() -> [Program; 2] {
    let peer = Arc::new(Peer);
    [everything_v1::program_xdr(peer.clone()), everything_v2::program_xdr(peer)]
}

/// The same with native bodies, for lowlat's own transports.
pub fn programs_native() -> [Program; 2] {
    let peer = Arc::new(Peer);
    [everything_v1::program(peer.clone()), everything_v2::program(peer)]
}

/// A lowlat server of both versions on `uris`, with native and XDR bodies (so on every scheme),
/// not registered with rpcbind.
pub fn serve_everything(uris: &[&str], cfg: ServerConfig) -> Server {
    let [n1, n2] = programs_native();
    let [x1, x2] = programs_xdr();
    Server::builder()
        .program(n1)
        .program(n2)
        .program(x1)
        .program(x2)
        .config(ServerConfig { onc_register: false, ..cfg })
        .serve(uris)
        .unwrap()
}

/// The value interop.c and everything_peer.c build as `value_a`.
pub fn value_a() -> Everything {
    let list =
        Node { value: 1, next: Some(Box::new(Node { value: 2, next: Some(Box::new(Node { value: 3, next: None })) })) };
    Everything {
        prim: Primitives {
            i: -7,
            u: 4_000_000_000,
            ushort_like: 65535,
            h: -1_234_567_890_123,
            uh: 18_000_000_000_000_000_000,
            f: 1.5,
            d: -2.25,
            b: true,
            c: Color::Infra,
        },
        h: std::array::from_fn(|i| i as u8),
        data: vec![1, 2, 3, 4, 5],
        fixed_bytes: *b"xyz",
        var_bytes: vec![0xff, 0],
        who: "alice".into(),
        note: String::new(),
        four: [1, -2, 3, -4],
        many: vec![7, 8, 9],
        corners: [Point { x: 1, y: 2 }, Point { x: 3, y: 4 }],
        inners: vec![
            Inner { corner: Point { x: 5, y: 6 }, kind: Shape::Square, tag: vec![] },
            Inner { corner: Point { x: -1, y: -1 }, kind: Shape::Triangle, tag: b"abcdefgh".to_vec() },
        ],
        maybe_point: Some(Box::new(Point { x: 9, y: 10 })),
        list: Some(Box::new(list)),
        r: everything::Result::Label(Color::Green, "green".into()),
        bi: ByInt::Default(99, vec![1, 2, 3]),
        mt: MaybeText::T("hello".into()),
        bu: ByUint::Cs(vec![100, 200]),
        names: vec!["a".into(), "bc".into()],
        hypers: [-1, 1 << 40],
        flags: vec![true, false, true],
    }
}

/// The other union arms and no optional data.
pub fn value_b(variant: u32) -> Everything {
    let mut e = value_a();
    e.maybe_point = None;
    e.list = None;
    e.prim.b = false;
    e.prim.c = Color::Red;
    e.prim.f = -0.0;
    e.prim.d = 1e300;
    e.r = everything::Result::Code(-42);
    e.bi = if variant == 0 { ByInt::P(Point { x: 11, y: -12 }) } else { ByInt::Big(-(1 << 62)) };
    e.mt = MaybeText::False;
    e.bu = ByUint::D(3.25);
    e.data = vec![];
    e.var_bytes = b"12345".to_vec();
    e.who = String::new();
    e.note = "a note with spaces".into();
    e.names = vec![];
    e.flags = vec![];
    e.many = vec![];
    e.inners = vec![];
    e
}
