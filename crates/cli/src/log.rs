//! The command's logs: lowlat's libraries emit `tracing` events (they never install a
//! subscriber); the command installs one that writes them to standard error, filtered as
//! `RUST_LOG` says (`RUST_LOG=lowlat::onc=debug,lowlat::tcp=off`; unset, every lowlat target at
//! INFO and others at WARN), as text or, with `--log-format json`, one JSON object per line.
//! Standard output stays the command's own (`serving URI`, `ready`, tables, JSON reports).

use tracing_subscriber::EnvFilter;

/// The filter when `RUST_LOG` is unset or empty.
const DEFAULT_FILTER: &str = "warn,lowlat=info";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For people: time, level, target, message and fields.
    #[default]
    Text,
    /// For machines: one JSON object per line (`timestamp`, `level`, `target`, `fields`, and
    /// the spans the event happened in).
    Json,
}

/// Installs the process's subscriber.
pub(crate) fn install(format: LogFormat) {
    let filter = match std::env::var("RUST_LOG") {
        // Directives that do not parse are reported and left out.
        Ok(s) if !s.trim().is_empty() => EnvFilter::builder().parse_lossy(s),
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Another subscriber may be set already only in tests of this crate: not an error.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
