//! `lowlat lab`: the laboratory (the work is `lowlat_lab::run_lab`'s).

use std::path::PathBuf;

use crate::key::KeyArgs;

/// The laboratory: every transport's floor beside lowlat's calls, on this machine.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The short run (about a minute).
    #[arg(long)]
    quick: bool,
    /// Write results.json here as well.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Every lowlat server and caller of the run binds with this key (the raw floors do
    /// not: a floor is the machine's).
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { quick, out, key } = args;
    if key.encrypt {
        return Err(
            "--encrypt applies to serve, call, bench and stat; the laboratory measures encryption with scripts/measure-security.sh"
                .into(),
        );
    }
    lowlat_lab::run_lab(quick, out.as_deref(), key.psk_file.as_deref())
}
