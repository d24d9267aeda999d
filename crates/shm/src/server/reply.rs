//! Replies written straight into a connection's result ring, waiting (at most the stall limit) for
//! room when the client is slow to read.

use std::time::Instant;

use lowlat_wait::Spinner;

use super::ShmServerConfig;
use crate::error::ShmError;
use crate::ring::{record_len, Producer, RingError};

/// Writes one reply straight into a connection's result ring.
pub struct Reply<'a> {
    pub(super) results: &'a mut Producer,
    pub(super) cfg: &'a ShmServerConfig,
    pub(super) sock: i32,
    pub(super) failed: &'a mut Option<ShmError>,
    /// Set by [`hand_over`](Self::hand_over).
    pub(super) hand_to: &'a mut Option<usize>,
    /// What the serving thread does while the reply waits for room (`accept::Door`).
    pub(super) meanwhile: &'a mut dyn FnMut(),
}

impl Reply<'_> {
    /// The largest reply [`send_with`](Self::send_with) builds in place.
    pub fn max_inline(&self) -> usize {
        self.results.max_record()
    }

    /// Sends the reply gathered from `parts` (streamed if larger than the ring).
    pub fn send(mut self, parts: &[&[u8]]) -> Result<(), ShmError> {
        let r = send_reply(self.results, self.cfg, self.sock, parts, self.meanwhile);
        self.note(r)
    }

    /// Sends a reply of `len` bytes that `fill` writes where it will be read. Replies larger
    /// than [`max_inline`](Self::max_inline) are built in a buffer and streamed.
    pub fn send_with(mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), ShmError> {
        if len > self.results.max_record() {
            let mut v = vec![0u8; len];
            fill(&mut v);
            return self.send(&[&v]);
        }
        if len > self.cfg.max_message {
            return Err(RingError::TooLarge { len, max: self.cfg.max_message }.into());
        }
        let need = record_len(len);
        let r = (|| {
            if !self.results.has_room(need)? {
                let deadline = Instant::now() + self.cfg.stall_limit;
                let mut spinner = Spinner::new(self.cfg.spin);
                crate::channel::wait_space(self.results, need, &mut spinner, deadline, self.sock, self.meanwhile)
                    .map_err(|e| stall(e, self.cfg))?;
            }
            // Room only grows while we wait (the consumer frees, never takes), so this writes.
            if self.results.try_write_whole(len, fill)? {
                Ok(())
            } else {
                Err(RingError::Corrupt { what: "consumer index lost room already seen" }.into())
            }
        })();
        self.note(r)
    }

    /// Lends the result ring's free space to build a reply of yet unknown length where the
    /// client will read it: `build` returns how many bytes it wrote, sent then, or `None` to
    /// send nothing this way (the `Reply` can still send). Never waits: a reply that does not
    /// fit the space lent is the builder's to send otherwise.
    #[inline]
    pub fn build_in_place(
        &mut self,
        build: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, ShmError> {
        match self.results.write_in_place(self.cfg.max_message, build) {
            Ok(n) => Ok(n),
            Err(e) => self.note(Err(e.into())).map(|()| None),
        }
    }

    /// Leaves the request unread and hands its connection to member `to` of this server's
    /// group ([`ShmServer::bind_group`](super::ShmServer::bind_group)), which serves the request
    /// and the rest of the connection's; here the connection is reported closed. Sends nothing.
    /// Only through [`ShmServer::serve_next`](super::ShmServer::serve_next) (a push-style
    /// handler's request is dropped instead); a member not in the group, or this one, is
    /// ignored and the request consumed as if answered with nothing.
    pub fn hand_over(self, to: usize) {
        *self.hand_to = Some(to);
    }

    fn note(&mut self, r: Result<(), ShmError>) -> Result<(), ShmError> {
        match r {
            Err(ShmError::Ring(RingError::TooLarge { len, max })) => {
                Err(ShmError::Ring(RingError::TooLarge { len, max }))
            }
            Err(e) => {
                let msg = e.to_string();
                *self.failed = Some(e);
                Err(ShmError::Broken(msg))
            }
            Ok(()) => Ok(()),
        }
    }
}

fn stall(e: ShmError, cfg: &ShmServerConfig) -> ShmError {
    match e {
        ShmError::Timeout { .. } => ShmError::Stalled { waited_ms: cfg.stall_limit.as_millis() as u64 },
        e => e,
    }
}

pub(super) fn send_reply(
    results: &mut Producer,
    cfg: &ShmServerConfig,
    sock: i32,
    parts: &[&[u8]],
    meanwhile: &mut dyn FnMut(),
) -> Result<(), ShmError> {
    // The clock is read only if the reply has to wait: not on the fast path.
    let mut deadline = None;
    let mut spinner = Spinner::new(cfg.spin);
    results.send(parts, cfg.max_message, |p, need| {
        let d = *deadline.get_or_insert_with(|| Instant::now() + cfg.stall_limit);
        crate::channel::wait_space(p, need, &mut spinner, d, sock, &mut *meanwhile).map_err(|e| stall(e, cfg))
    })
}
