//! What a C caller may set beyond the defaults: the encodings bodies travel in, how a thread
//! waits (spin, then block), and a client's options.

use std::ffi::{c_char, c_int};
use std::time::Duration;

use runtime::SpinPolicy;

use crate::error::Failure;

/// Bodies in lowlat's native encoding, little-endian (the server's order; over lowlat's own
/// protocol).
pub const LOWLAT_ENCODING_NATIVE_LITTLE: c_int = 1;
/// Bodies in lowlat's native encoding, big-endian (the server's order).
pub const LOWLAT_ENCODING_NATIVE_BIG: c_int = 2;
/// Bodies in XDR (over ONC RPC: `onc+udp://`, `onc+tcp://`).
pub const LOWLAT_ENCODING_XDR: c_int = 3;

/// Wait as lowlat chooses: spin about twice the recently observed wait (capped at 100 µs), or
/// block at once when waits are long. The default (0).
pub const LOWLAT_SPIN_ADAPTIVE: c_int = 0;
/// Spin for `spin_us` microseconds, then block.
pub const LOWLAT_SPIN_BUDGET: c_int = 1;
/// Never block: busy-poll until the answer or the deadline.
pub const LOWLAT_SPIN_FOREVER: c_int = 2;
/// Never spin: block at once.
pub const LOWLAT_SPIN_BLOCK: c_int = 3;

/// The spin policy a mode and budget stand for.
pub(crate) fn spin_policy(mode: c_int, spin_us: u32) -> Result<SpinPolicy, Failure> {
    Ok(match mode {
        LOWLAT_SPIN_ADAPTIVE => SpinPolicy::Adaptive,
        LOWLAT_SPIN_BUDGET => SpinPolicy::Budget(Duration::from_micros(spin_us.into())),
        LOWLAT_SPIN_FOREVER => SpinPolicy::Forever,
        LOWLAT_SPIN_BLOCK => SpinPolicy::Block,
        other => return Err(Failure::invalid(format!("spin mode {other} is none of the LOWLAT_SPIN_* values"))),
    })
}

/// A client's settings. Zero in any field means lowlat's default for it, so
/// `lowlat_client_options o = {0};` is the default set.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct lowlat_client_options {
    /// Deadline of a call made without one, in nanoseconds (default 10 s).
    pub deadline_ns: u64,
    /// How long connecting may take, in nanoseconds (default 5 s).
    pub bind_timeout_ns: u64,
    /// How a call waits for its result: one of the `LOWLAT_SPIN_*` values.
    pub spin: c_int,
    /// The spin budget of `LOWLAT_SPIN_BUDGET`, in microseconds.
    pub spin_us: u32,
    /// Calls that may be outstanding at once; threads beyond these wait (default 64).
    pub slots: u16,
    /// NULL, or the path of a pre-shared key file (as `lowlat serve --psk-file`): binds prove
    /// the key and every frame carries a tag under it (udp, tcp, eth, xdp). Read while
    /// connecting; the string need not outlive the call.
    pub psk_file: *const c_char,
    /// Nonzero (with `psk_file`): encrypt every frame's body as well (AES-256-GCM or
    /// ChaCha20-Poly1305). Refused over shm:// and ONC RPC.
    pub encrypt: c_int,
}

impl Default for lowlat_client_options {
    fn default() -> Self {
        lowlat_client_options {
            deadline_ns: 0,
            bind_timeout_ns: 0,
            spin: 0,
            spin_us: 0,
            slots: 0,
            psk_file: std::ptr::null(),
            encrypt: 0,
        }
    }
}

impl lowlat_client_options {
    /// The Rust client's configuration these options stand for.
    ///
    /// # Safety
    /// `psk_file` is NULL or a NUL-terminated string valid during the call.
    pub(crate) unsafe fn config(&self) -> Result<runtime::ClientConfig, Failure> {
        let mut c = runtime::ClientConfig { spin: spin_policy(self.spin, self.spin_us)?, ..Default::default() };
        if self.deadline_ns > 0 {
            c.deadline = Duration::from_nanos(self.deadline_ns);
        }
        if self.bind_timeout_ns > 0 {
            c.bind_timeout = Duration::from_nanos(self.bind_timeout_ns);
        }
        if self.slots > 0 {
            c.slots = self.slots;
        }
        if !self.psk_file.is_null() {
            // SAFETY: not NULL (checked above), so a NUL-terminated string valid during the
            // call, as this function's contract requires.
            let path = unsafe { crate::ffi::str_arg(self.psk_file, "options->psk_file") }?;
            c.psk = Some(runtime::read_psk_file(path)?);
        }
        c.encrypt = self.encrypt != 0;
        Ok(c)
    }
}

/// Options of one call. Zero in any field means the binding's setting, so a NULL pointer and
/// `lowlat_call_options o = {0};` mean the same.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct lowlat_call_options {
    /// Fail with `LOWLAT_E_TIMEOUT` unless the call completes within this many nanoseconds.
    pub deadline_ns: u64,
}

impl lowlat_call_options {
    pub(crate) fn to_rust(self) -> runtime::CallOptions {
        match self.deadline_ns {
            0 => runtime::CallOptions::new(),
            ns => runtime::CallOptions::new().deadline(Duration::from_nanos(ns)),
        }
    }
}
