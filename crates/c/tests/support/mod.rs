//! What the C tests share: liblowlat built for them, C programs compiled against it (with the
//! stubs `lowlat gen --lang c` makes of idl/examples/everything.x), and processes run with
//! bounded waits and stopped by their PID.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

/// The workspace's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where liblowlat.so and liblowlat.a are: built once per test binary, with the profile and
/// into the target directory of the tests themselves. (`cargo test` builds no cdylib or
/// staticlib of the crate under test, so the tests ask cargo for them; the build lock is free
/// while tests run.)
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile_dir =
            exe.parent().and_then(Path::parent).expect("tests run from target/PROFILE/deps").to_path_buf();
        let target = profile_dir.parent().expect("a target directory").to_path_buf();
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(p) => p.to_string(),
            None => panic!("no profile directory in {}", exe.display()),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--quiet", "-p", "lowlat-c", "--profile", &profile, "--target-dir"])
            .arg(&target)
            .output()
            .expect("cargo runs");
        assert!(out.status.success(), "building liblowlat failed:\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(profile_dir.join("liblowlat.so").exists() && profile_dir.join("liblowlat.a").exists());
        profile_dir
    })
}

/// The directory of lowlat.h and lowlat_codec.h.
pub fn include_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// Why C programs cannot be built here, if they cannot.
pub fn missing_gcc() -> Option<String> {
    let ok = Command::new("gcc").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    (!ok.is_ok_and(|s| s.success())).then(|| "gcc not found (scripts/deps/base.sh installs it)".to_string())
}

/// Skips (with the reason printed) when `why` is some, except under CI, where it fails.
pub fn skip(test: &str, why: Option<String>) -> bool {
    match why {
        None => false,
        Some(why) => {
            assert!(std::env::var_os("CI").is_none(), "{test} cannot run in CI: {why}");
            eprintln!("SKIPPED {test}: {why}");
            true
        }
    }
}

/// Writes the C stubs of idl/examples/everything.x into `dir`.
pub fn generate_everything(dir: &Path) {
    let files = lowlat_idl::compile_file(root().join("idl/examples/everything.x"), lowlat_idl::Lang::C).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// Compiles `sources` (in `dir`, or tests/c/) with gcc at its strictest into `dir/out`, linked
/// with liblowlat.so (found at run time through the rpath). `extra` are more gcc arguments.
pub fn gcc(dir: &Path, sources: &[&str], out: &str, extra: &[&str]) -> PathBuf {
    let tests_c = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let lib = lib_dir();
    let mut cmd = Command::new("gcc");
    cmd.current_dir(dir).args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-D_POSIX_C_SOURCE=200809L"]);
    cmd.arg("-I").arg(include_dir()).arg("-I").arg(dir).arg("-I").arg(&tests_c);
    for s in sources {
        let local = dir.join(s);
        cmd.arg(if local.exists() { local } else { tests_c.join(s) });
    }
    cmd.args(extra);
    cmd.arg("-L").arg(lib).arg("-llowlat").arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lpthread");
    cmd.arg("-o").arg(dir.join(out));
    let o = cmd.output().expect("gcc runs");
    assert!(o.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    dir.join(out)
}

/// The valgrind command that fails (exit 99) on any memory error or leak lowlat could cause, or
/// why valgrind cannot run here.
pub fn valgrind() -> Result<Command, String> {
    let ok = Command::new("valgrind").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !ok.is_ok_and(|s| s.success()) {
        return Err("valgrind not found (scripts/deps/c.sh installs it)".into());
    }
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=memcheck",
        "--error-exitcode=99",
        "--leak-check=full",
        // Still-reachable blocks (the Rust runtime's thread-locals, interned procedure names)
        // are not leaks.
        "--errors-for-leak-kinds=definite,indirect",
        "--show-leak-kinds=definite,indirect",
        "--track-origins=yes",
        "-q",
    ]);
    Ok(cmd)
}

/// Runs `cmd` to completion within `limit` (killed by its PID after it); returns (exit code,
/// stdout, stderr).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, String) {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    let killed = loop {
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = child.wait_with_output().unwrap();
    let (o, mut e) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    if killed {
        e.push_str(&format!("\n(killed after {limit:?})"));
    }
    (if killed { None } else { out.status.code() }, o, e)
}

/// A C server process: its URIs (read from its first lines, up to "ready"); stopped by closing
/// its stdin, killed by its PID if it does not end by itself.
pub struct CServer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub uris: Vec<String>,
}

impl CServer {
    pub fn start(mut cmd: Command, limit: Duration) -> CServer {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let ready = line == "ready";
                if tx.send(line).is_err() || ready {
                    break;
                }
            }
        });
        let deadline = Instant::now() + limit;
        let mut uris = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l == "ready" => break,
                Ok(l) => uris.push(l),
                Err(_) => {
                    let _ = child.kill();
                    let out = child.wait_with_output().unwrap();
                    panic!("the C server was not ready within {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
                }
            }
        }
        CServer { child, stdin, uris }
    }

    /// Closes stdin and waits (at most `limit`) for the server to stop; returns its exit code
    /// and error output.
    pub fn stop(mut self, limit: Duration) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return (status.code(), err);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return (None, format!("(killed: did not stop within {limit:?})"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for CServer {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Program 0x20000099 version 1, served to api.c, keyed.c and batch.c: ECHO (1) returns its
/// argument, SLOW (2) sleeps 300 ms, FAIL (3) fails, MINUS (4) takes two int32s in the host's
/// order, NAP (5) sleeps 50 ms on the worker pool.
pub fn api_program() -> runtime::Program {
    use runtime::ProcError;
    runtime::Program::new(0x2000_0099, 1)
        .procedure(1, "ECHO", |_, args, reply| {
            reply.extend_from_slice(args);
            Ok(())
        })
        .procedure(2, "SLOW", |_, _, _| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(())
        })
        .procedure(3, "FAIL", |_, _, _| Err(ProcError::SystemError))
        .procedure(4, "MINUS", |_, args, reply| {
            let (a, b) = args.split_at_checked(4).ok_or(ProcError::GarbageArgs)?;
            let a = i32::from_ne_bytes(a.try_into().map_err(|_| ProcError::GarbageArgs)?);
            let b = i32::from_ne_bytes(b.try_into().map_err(|_| ProcError::GarbageArgs)?);
            reply.extend_from_slice(&(a - b).to_ne_bytes());
            Ok(())
        })
        .long_running(5, "NAP", |_, _, _| {
            std::thread::sleep(Duration::from_millis(50));
            Ok(())
        })
}

/// A socket path in `dir` for shm://.
pub fn shm_uri(dir: &Path, name: &str) -> String {
    format!("shm://{}", dir.join(name).display())
}

/// A UDP or TCP port nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    drop(s);
    port
}
