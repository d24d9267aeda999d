//! What `peers/build.sh OUTDIR` leaves behind, read back for the lab: which peer setups can run
//! (`peers.txt`) and which peers were skipped and why (`skipped.txt`).
//!
//! Running a setup: start `OUTDIR/PROGRAM --serve ADDR [--cpu C]`, wait for the line `ready` on
//! its stdout, run `OUTDIR/PROGRAM --connect ADDR --calls N --size B [--warmup W] [--cpu C]`
//! (size 0 = null call, else echo of B bytes), parse its one stdout line with
//! [`crate::BenchLine::parse`], then stop the server with SIGTERM.

use crate::model::PeerRow;

/// Every peer build.sh knows, with the transports each is run over.
pub const KNOWN_PEERS: &[(&str, &[&str])] =
    &[("grpc", &["tcp"]), ("zeromq", &["tcp", "ipc"]), ("rpcgen", &["udp", "tcp"]), ("iceoryx2", &["shm"])];

/// The echo size the peers section uses beside the null call.
pub const PEER_ECHO_SIZE: u32 = 1440;

/// One runnable peer setup: a line of `peers.txt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSetup {
    /// `grpc`, `zeromq`, `rpcgen` or `iceoryx2`.
    pub system: String,
    /// `tcp`, `udp`, `ipc` or `shm`.
    pub transport: String,
    /// File name of the program inside OUTDIR.
    pub program: String,
    /// Address with `{port}` and/or `{dir}` still to fill in.
    pub address_template: String,
}

impl PeerSetup {
    /// The address for a free loopback port and a private directory (for Unix-domain sockets).
    pub fn address(&self, port: u16, dir: &std::path::Path) -> String {
        self.address_template.replace("{port}", &port.to_string()).replace("{dir}", &dir.display().to_string())
    }
}

/// A malformed line in `peers.txt` or `skipped.txt`.
#[derive(Debug, thiserror::Error)]
#[error("{file} line {line}: {problem}: {text:?}")]
pub struct PeerListError {
    /// Which file.
    pub file: &'static str,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub problem: &'static str,
    /// The line itself.
    pub text: String,
}

/// Reads `peers.txt`: `SYSTEM TRANSPORT PROGRAM ADDRESS` per line.
pub fn parse_peer_list(text: &str) -> Result<Vec<PeerSetup>, PeerListError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |problem| PeerListError { file: "peers.txt", line: i + 1, problem, text: line.to_owned() };
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 4 {
            return Err(err("expected SYSTEM TRANSPORT PROGRAM ADDRESS"));
        }
        if f[2].contains('/') {
            return Err(err("the program must be a plain file name inside OUTDIR"));
        }
        out.push(PeerSetup {
            system: f[0].to_owned(),
            transport: f[1].to_owned(),
            program: f[2].to_owned(),
            address_template: f[3].to_owned(),
        });
    }
    Ok(out)
}

/// Reads `skipped.txt`: `name: reason` per line.
pub fn parse_skipped(text: &str) -> Result<Vec<(String, String)>, PeerListError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match line.split_once(": ") {
            Some((name, reason)) if !name.trim().is_empty() && !reason.trim().is_empty() => {
                out.push((name.trim().to_owned(), reason.trim().to_owned()));
            }
            _ => {
                return Err(PeerListError {
                    file: "skipped.txt",
                    line: i + 1,
                    problem: "expected `name: reason`",
                    text: line.to_owned(),
                })
            }
        }
    }
    Ok(out)
}

/// The rows a skipped peer leaves in the peers section: its null call and echo on each of its
/// transports, all carrying the reason.
pub fn skipped_rows(name: &str, reason: &str) -> Vec<PeerRow> {
    let transports = KNOWN_PEERS.iter().find(|(n, _)| *n == name).map_or(&["?"][..], |(_, t)| *t);
    transports
        .iter()
        .flat_map(|t| {
            [PeerRow::skipped(name, t, "null", 0, reason), PeerRow::skipped(name, t, "echo", PEER_ECHO_SIZE, reason)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_list_parses_and_fills_addresses() {
        let text = "grpc tcp grpc_peer tcp://127.0.0.1:{port}\n\nzeromq ipc zmq_peer ipc://{dir}/z.sock\n";
        let list = parse_peer_list(text).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].address(4000, std::path::Path::new("/x")), "tcp://127.0.0.1:4000");
        assert_eq!(list[1].address(1, std::path::Path::new("/run/d")), "ipc:///run/d/z.sock");
        assert!(parse_peer_list("grpc tcp grpc_peer").is_err());
        assert!(parse_peer_list("grpc tcp ../evil tcp://x").is_err());
    }

    #[test]
    fn skipped_list_parses_into_rows() {
        let skips = parse_skipped("zeromq: libzmq not found\n").unwrap();
        assert_eq!(skips, [("zeromq".to_owned(), "libzmq not found".to_owned())]);
        let rows = skipped_rows(&skips[0].0, &skips[0].1);
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.skipped.as_deref() == Some("libzmq not found")));
        assert!(parse_skipped("no reason here").is_err());
        assert!(parse_skipped("grpc: ").is_err());
    }
}
