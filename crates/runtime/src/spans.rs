//! Spans per call, for a user's `tracing` pipeline (OpenTelemetry, say), when
//! [`ClientConfig::spans`](crate::ClientConfig::spans) or
//! [`ServerConfig::spans`](crate::ServerConfig::spans) asks for them.
//!
//! A client's span (target `lowlat::client`, name `call`) covers a call from its start to its
//! return; a server's (target `lowlat::server` or `lowlat::onc`, name `call`) covers the running
//! of the procedure: on the serving thread, on a worker (the span goes with the job), or as many
//! polls of an async procedure's future as it takes. Both are at level INFO: they exist only
//! when the configuration asks, so a subscriber's usual filter keeps them.
//!
//! | field       | client                         | server, lowlat's protocol | server, ONC RPC |
//! |-------------|--------------------------------|---------------------------|-----------------|
//! | `program`   | yes                            | yes                       | yes             |
//! | `version`   | yes                            | yes                       | yes             |
//! | `procedure` | the number                     | the number                | the number      |
//! | `name`      | when the client was told names | when the program has one  | the same        |
//! | `token`     | the session's, once known      | yes                       | (no sessions)   |
//! | `slot`      | the call slot, once known      | yes                       | (none)          |
//! | `call_no`   | the slot's call number         | yes                       | (none)          |
//! | `xid`       | (none)                         | (none)                    | the caller's    |
//!
//! A client's token, slot and call number are recorded as the call ends (over ONC RPC they stay
//! empty). With spans off, the call path does nothing of this: the configuration's flag is
//! looked at once per call, a branch not taken.

use tracing::field::Empty;
use tracing::Span;

use crate::program::CallContext;

/// A client call's span, its session, slot and call number still empty.
#[cold]
pub(crate) fn client_call(program: u32, version: u32, procedure: u32, name: Option<&str>) -> Span {
    tracing::info_span!(
        target: "lowlat::client",
        "call",
        program,
        version,
        procedure,
        name,
        token = Empty,
        slot = Empty,
        call_no = Empty,
    )
}

/// Records, in the current span (a client call's, entered by `Client`), the session, slot and
/// call number the call went out with.
#[cold]
#[inline(never)]
pub(crate) fn record_client_ids(token: u64, slot: u16, call_no: u32) {
    let span = Span::current();
    span.record("token", token);
    span.record("slot", slot);
    span.record("call_no", call_no);
}

/// A call's span on the server, over lowlat's protocol.
#[cold]
pub(crate) fn server_call(ctx: &CallContext, name: Option<&str>, token: u64, slot: u16, call_no: u32) -> Span {
    tracing::info_span!(
        target: "lowlat::server",
        "call",
        program = ctx.program,
        version = ctx.version,
        procedure = ctx.proc_no,
        name,
        token,
        slot,
        call_no,
    )
}

/// A call's span on the server, over ONC RPC.
#[cold]
pub(crate) fn onc_call(ctx: &CallContext, name: Option<&str>, xid: u32) -> Span {
    tracing::info_span!(
        target: "lowlat::onc",
        "call",
        program = ctx.program,
        version = ctx.version,
        procedure = ctx.proc_no,
        name,
        xid,
    )
}
