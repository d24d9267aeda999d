//! What a call's wait for its outcome comes to, shared by lowlat's client and ONC RPC's, blocking
//! and async.

use std::time::Duration;

use crate::Error;

/// Why a wait for a frame stopped without one.
pub(crate) enum Stop {
    Io(std::io::Error),
    /// An async call's spin found nothing: it parks in the reactor, for at most this long.
    Park(Option<Duration>),
}

/// What waiting for a call's outcome came to.
pub(crate) enum Waited<R> {
    Done(Result<R, Error>),
    /// An async call parks, for at most this long (its engine's next timer).
    Park(Option<Duration>),
}
