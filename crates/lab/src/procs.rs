//! Servers in child processes: the lab runs `lowlat serve` and `lowlat pingpong --serve` as
//! separate processes (pinned to their own CPU), reads the URIs they print, and stops them by PID
//! when done, also when the lab fails half way.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A child process serving something; killed and reaped on drop.
pub struct ServerProcess {
    child: Child,
    /// The URIs it printed (`serving URI` lines), in order.
    pub uris: Vec<String>,
    /// Where it serves its metrics, if it said (`metrics URL`).
    pub metrics: Option<String>,
    lines: mpsc::Receiver<String>,
}

/// Starts `exe args...` and waits (bounded) for its `ready` line.
pub fn spawn(exe: &Path, args: &[String], timeout: Duration) -> std::io::Result<ServerProcess> {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    spawn_command(cmd, timeout)
}

/// Starts a prepared command (e.g. `ip netns exec NS lowlat serve ...`) and waits (bounded) for
/// its `ready` line.
pub fn spawn_command(mut cmd: Command, timeout: Duration) -> std::io::Result<ServerProcess> {
    let what = format!("{cmd:?}");
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut proc = ServerProcess { child, uris: Vec::new(), metrics: None, lines: rx };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match proc.lines.recv_timeout(left) {
            Ok(line) if line.trim() == "ready" => return Ok(proc),
            Ok(line) => {
                if let Some(uri) = line.trim().strip_prefix("serving ") {
                    proc.uris.push(uri.to_string());
                }
                if let Some(url) = line.trim().strip_prefix("metrics ") {
                    proc.metrics = Some(url.to_string());
                }
            }
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{what} did not become ready within {timeout:?}"),
                ))
            }
        }
    }
}

impl ServerProcess {
    /// The process id of the server process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Suspends the server (SIGSTOP): while other measurements run, it takes no CPU from them,
    /// however it waits; its clients stay connected. [`ServerProcess::resume`] lets it go on.
    pub fn suspend(&self) -> std::io::Result<()> {
        lowlat_sys::suspend(self.child.id())
    }

    /// Lets a suspended server go on (SIGCONT).
    pub fn resume(&self) -> std::io::Result<()> {
        lowlat_sys::resume(self.child.id())
    }

    /// The next line the process prints after `ready`, waiting at most `timeout`.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Asks the process to stop (SIGTERM), waits for it (killing it after `timeout`), and
    /// returns the lines it printed since `ready` (or the last `next_line`).
    pub fn stop(mut self, timeout: Duration) -> Vec<String> {
        let _ = lowlat_sys::terminate(self.child.id());
        let _ = lowlat_sys::resume(self.child.id());
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill();
        // Its stdout is closed now: the reader thread ends after passing on every line.
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
            lines.push(line);
        }
        lines
    }

    /// Kills the server with SIGKILL (no clean-up of its own: sockets files stay, rpcbind
    /// keeps its registrations) and reaps it, as a crash would leave things.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    /// Asks the server to stop (SIGTERM: it removes its socket files and withdraws its rpcbind
    /// registrations), and kills it if it has not stopped within two seconds.
    fn drop(&mut self) {
        // Already reaped (killed): its PID may belong to another process now.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if lowlat_sys::terminate(self.child.id()).is_ok() {
            // A suspended server takes the signal only once it goes on.
            let _ = lowlat_sys::resume(self.child.id());
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while std::time::Instant::now() < deadline {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
