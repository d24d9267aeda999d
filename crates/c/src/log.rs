//! `lowlat_log_to_stderr`: lowlat's log events (`tracing`), which a Rust program receives by
//! installing a subscriber of its own, written to a C program's standard error.

use std::ffi::{c_char, c_int};

use crate::error::{guard, Failure, LOWLAT_OK};
use crate::ffi;

/// Writes lowlat's log events to standard error, one line each: a server's complaints (why an
/// ONC RPC procedure failed, connections refused by the TCP limits, rpcbind refusals, a serving
/// thread that stopped), with their endpoint, peer, program, procedure and reason. Without a
/// call to this, nothing is written. `filter` says which, as `RUST_LOG` does
/// (`"lowlat=info"`, `"lowlat::onc=warn,lowlat::tcp=off"`); NULL: the `RUST_LOG` environment
/// variable, or `"lowlat=info"` when it is unset. Call it once, before serving; a second call
/// fails (`LOWLAT_E_INVALID_ARGUMENT`), as does a filter that is not UTF-8.
///
/// # Safety
/// `filter` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lowlat_log_to_stderr(filter: *const c_char) -> c_int {
    guard(|| {
        let directives = if filter.is_null() {
            std::env::var("RUST_LOG").ok().filter(|s| !s.trim().is_empty())
        } else {
            // SAFETY: the caller's contract, as stated above.
            Some(unsafe { ffi::str_arg(filter, "filter")? }.to_string())
        };
        let filter =
            tracing_subscriber::EnvFilter::builder().parse_lossy(directives.as_deref().unwrap_or("lowlat=info"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init()
            .map_err(|e| Failure::invalid(format!("logging is set up already: {e}")))?;
        Ok(LOWLAT_OK.code())
    })
}
