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
}

/// Starts `exe args...` and waits (bounded) for its `ready` line.
pub fn spawn(exe: &Path, args: &[String], timeout: Duration) -> std::io::Result<ServerProcess> {
    let mut child =
        Command::new(exe).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
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
    let mut proc = ServerProcess { child, uris: Vec::new() };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.trim() == "ready" => return Ok(proc),
            Ok(line) => {
                if let Some(uri) = line.trim().strip_prefix("serving ") {
                    proc.uris.push(uri.to_string());
                }
            }
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{} {} did not become ready within {timeout:?}", exe.display(), args.join(" ")),
                ))
            }
        }
    }
}

impl ServerProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
