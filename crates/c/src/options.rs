//! What a C caller may set beyond the defaults: the encodings bodies travel in, how a thread
//! waits (spin, then block), and a client's options.

use std::ffi::c_int;
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
#[derive(Clone, Copy, Debug, Default)]
pub struct lowlat_client_options {
    /// Deadline of a call made without one, in nanoseconds (default 10 s).
    pub deadline_ns: u64,
    /// How long connecting may take, in nanoseconds (default 5 s).
    pub bind_timeout_ns: u64,
    /// How a call waits for its result: one of the `LOWLAT_SPIN_*` values.
    pub spin: c_int,
    /// The spin budget of `LOWLAT_SPIN_BUDGET`, in microseconds.
    pub spin_us: u32,
    /// Calls that may be outstanding at once; threads beyond these wait (default 8).
    pub slots: u16,
}

impl lowlat_client_options {
    /// The Rust client's configuration these options stand for.
    pub(crate) fn config(&self) -> Result<runtime::ClientConfig, Failure> {
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
