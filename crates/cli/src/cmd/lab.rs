//! `lowlat lab`: the laboratory (the work is `lowlat_lab::run_lab`'s).

use std::path::PathBuf;

use crate::key::KeyArgs;

/// The laboratory: every transport's floor beside lowlat's calls, on this machine, or (with
/// --remote) between this machine and another one running `lowlat agent`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The short run (about a minute).
    #[arg(long)]
    quick: bool,
    /// Write results.json here as well.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Measure across the link to HOST[:PORT] (default port 7460), where `lowlat agent` runs:
    /// the ladder's udp, tcp, onc+udp and onc+tcp rungs (eth and xdp when both sides are root)
    /// and the busy server, threads, load, saturation, cold calls and sizes of udp and tcp,
    /// with their servers there and the callers here. Shared memory, Unix sockets, accounting
    /// and the peers stay on this machine, and the report says so; it names both machines and
    /// shows the link's floor (two connected UDP sockets across it).
    #[arg(long, value_name = "HOST[:PORT]", requires = "agent_key")]
    remote: Option<String>,
    /// With --remote: the key file the agent was started with (`lowlat agent --psk-file`).
    /// An agent refuses a laboratory without its key.
    #[arg(long, value_name = "FILE", requires = "remote")]
    agent_key: Option<PathBuf>,
    /// Every lowlat server and caller of the run binds with this key (the raw floors do
    /// not: a floor is the machine's).
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { quick, out, remote, agent_key, key } = args;
    if key.encrypt {
        return Err(
            "--encrypt applies to serve, call, bench and stat; the laboratory measures encryption with scripts/measure-security.sh"
                .into(),
        );
    }
    let remote = match (&remote, &agent_key) {
        (Some(agent), Some(key_file)) => Some(lowlat_lab::RemoteOptions { agent, key_file }),
        _ => None,
    };
    lowlat_lab::run_lab(quick, out.as_deref(), key.psk_file.as_deref(), remote)
}
