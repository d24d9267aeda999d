//! The key options (`--psk-file`, `--encrypt`) that every subcommand which binds or serves takes.

use std::path::PathBuf;

use clap::Args;
use lowlat::Psk;

/// `--psk-file`, as every command that binds or serves takes it.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct KeyArgs {
    /// A pre-shared key (the file's bytes, less a trailing newline; at least 16): binds must
    /// prove it and every frame carries a tag under it (udp, tcp, eth, xdp; not shm, not ONC
    /// RPC). Both ends need the same file. Make one with `head -c 32 /dev/urandom > FILE`.
    #[arg(long, value_name = "FILE")]
    pub(crate) psk_file: Option<PathBuf>,
    /// With --psk-file (serve, call, bench, stat): encrypt the body of every frame after the
    /// bind as well (AES-256-GCM where the CPU has AES instructions, else ChaCha20-Poly1305).
    /// A server with it refuses clients without it. Not over shm:// or ONC RPC.
    #[arg(long, requires = "psk_file")]
    pub(crate) encrypt: bool,
}

impl KeyArgs {
    pub(crate) fn load(&self) -> Result<Option<Psk>, String> {
        self.psk_file.as_deref().map(lowlat::read_psk_file).transpose().map_err(|e| e.to_string())
    }
}
