//! Marks on the call path for counting its instructions under callgrind: in the counting build
//! (feature `callgrind`, which only lowlat's example `count_calls` turns on) a call of
//! [`lowlat_sys::callgrind::mark`]; in every other build nothing at all, so the path users run
//! is the one without them.
//!
//! A thread's instructions are counted from a look that finds a frame (the transport's
//! receive, client and server) to the next look or, on the server if the counting program
//! asks, to its reply out; and, on the client, from the call to its return: a look that finds
//! nothing, that is the waiting, is never counted.

/// A waiter for the call path with `policy`: in the counting build, one whose waits never leave
/// their clock-free polls ([`lowlat_wait::Spinner::never_leaving_clock_free_polls`]), so that a
/// count is the common case's, a peer answering within them.
#[inline(always)]
pub(crate) fn spinner(policy: lowlat_wait::SpinPolicy) -> lowlat_wait::Spinner {
    let s = lowlat_wait::Spinner::new(policy);
    #[cfg(feature = "callgrind")]
    let s = s.never_leaving_clock_free_polls();
    s
}

/// A server's reply is out: where the count of its side of a call ends, if the counting program
/// asked ([`lowlat_sys::callgrind::set_reply_ends_count`]).
#[inline(always)]
pub(crate) fn replied() {
    #[cfg(feature = "callgrind")]
    lowlat_sys::callgrind::replied();
}

/// Counts this thread's instructions from here (`true`), or not (`false`).
#[inline(always)]
pub(crate) fn collect(on: bool) {
    #[cfg(feature = "callgrind")]
    lowlat_sys::callgrind::mark(on);
    #[cfg(not(feature = "callgrind"))]
    let _ = on;
}
