//! One call slot of a bound client ([`ClientSlot`]): what it holds between calls (the
//! session, its keys, the header template of its calls, the arguments kept for sending again,
//! its timers and counters), how it is made, and what a caller may read of it. Sending and
//! receiving are in `send` and `receive`.
//!
//! A slot carries one call at a time. Its call number increases with every call; a new call
//! acknowledges the previous result (implicit acknowledgement), and an idle slot acknowledges
//! its last result explicitly after a short delay.

use core::time::Duration;
use std::time::Instant;

use super::{ClientEngineConfig, Session};
use crate::auth::FrameKeys;
use crate::frag::{FragReceiver, FragSender};
use crate::rtt::RttEstimator;
use crate::seal::{Opener, SealKeys, Sealer};
use crate::wire::{Header, Kind};

/// One call slot of a bound client: its [`SlotState`], and on a sealed session what opens the
/// frames it receives. (The opened plaintext lies in the opener while the state, a field apart,
/// reads it: so `handle` can return a result that borrows it.)
#[derive(Debug)]
pub struct ClientSlot {
    pub(super) state: SlotState,
    pub(super) opener: Option<Opener>,
}

impl core::ops::Deref for ClientSlot {
    type Target = SlotState;
    fn deref(&self) -> &SlotState {
        &self.state
    }
}

impl core::ops::DerefMut for ClientSlot {
    fn deref_mut(&mut self) -> &mut SlotState {
        &mut self.state
    }
}

/// Everything of a call slot but the opener of sealed frames: the calls' state, timers and
/// counters. Reached through [`ClientSlot`].
#[derive(Debug)]
pub struct SlotState {
    pub(super) session: Session,
    pub(super) keys: Option<FrameKeys>,
    /// On a sealed session: seals what this slot sends (its counter shared by the session's slots).
    pub(super) sealer: Option<Sealer>,
    pub(super) cfg: ClientEngineConfig,
    pub(super) template: Header,
    pub(super) rtt: RttEstimator,
    pub(super) args: Vec<u8>,
    /// The current call's arguments were written where they are read, not into `args`
    /// ([`place_call`](SlotState::place_call)).
    pub(super) placed: bool,
    pub(super) tx: FragSender,
    pub(super) rx: FragReceiver,
    pub(super) rx_started: bool,
    pub(super) active: bool,
    pub(super) started: Instant,
    pub(super) deadline: Instant,
    pub(super) rto_at: Option<Instant>,
    pub(super) retries: u32,
    pub(super) heard: bool,
    pub(super) working: bool,
    pub(super) ack_due: Option<Instant>,
    /// Frames that made no sense for this slot (stale, malformed); for diagnostics.
    pub ignored: u64,
    /// Retransmissions sent (fragments, probes and stalled acknowledgements).
    pub retransmissions: u64,
    /// Frames of this slot's calls whose tag was missing or wrong (ignored).
    pub mac_failures: u64,
    /// Calls sent.
    pub calls: u64,
    /// Path challenges answered (the server saw this slot from a new address).
    pub challenges_answered: u64,
}

impl ClientSlot {
    /// The slot `slot` of `session`, idle, with `cfg`'s timers (unkeyed: see
    /// [`with_keys`](Self::with_keys)).
    pub fn new(session: Session, slot: u16, cfg: ClientEngineConfig) -> ClientSlot {
        let mut template = Header::new(Kind::Call);
        template.slot = slot;
        template.token = session.token;
        let now = Instant::now();
        let state = SlotState {
            session,
            keys: None,
            sealer: None,
            cfg,
            template,
            rtt: RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            args: Vec::new(),
            placed: false,
            tx: FragSender::default(),
            rx: FragReceiver::default(),
            rx_started: false,
            active: false,
            started: now,
            deadline: now,
            rto_at: None,
            retries: 0,
            heard: false,
            working: false,
            ack_due: None,
            ignored: 0,
            retransmissions: 0,
            mac_failures: 0,
            calls: 0,
            challenges_answered: 0,
        };
        ClientSlot { state, opener: None }
    }

    /// The slot of a keyed session, with the keys the bind gave (`None`: unkeyed).
    pub fn with_keys(mut self, keys: Option<FrameKeys>) -> ClientSlot {
        self.state.session.keyed = keys.is_some();
        self.state.keys = keys;
        self
    }

    /// The slot of a sealed session, with the keys the bind gave ([`Bound::seal`](super::Bound::seal); `None`: not
    /// sealed). The sealer's counter is the session's, shared with its other slots.
    pub fn with_seal(mut self, seal: Option<SealKeys>) -> ClientSlot {
        self.state.session.sealed = seal.is_some();
        let (sealer, opener) = seal.map(|s| (s.send, s.recv)).unzip();
        self.state.sealer = sealer;
        self.opener = opener;
        self
    }
}

impl SlotState {
    /// The session this slot belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// This slot's index in the session.
    pub fn slot(&self) -> u16 {
        self.template.slot
    }

    /// The number of the current (or last) call.
    pub fn call_no(&self) -> u32 {
        self.template.call_no
    }

    /// A call is in flight on this slot: started, and neither completed nor failed yet.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The smoothed round trip measured on this slot.
    pub fn smoothed_rtt(&self) -> Option<Duration> {
        self.rtt.smoothed()
    }

    /// The buffer to encode the next call's arguments into (emptied; capacity kept).
    pub fn args_buf(&mut self) -> &mut Vec<u8> {
        self.args.clear();
        &mut self.args
    }

    /// The arguments of the current (or last) call, for sending it again; `None` when they were
    /// written in place ([`place_call`](Self::place_call)) and not kept here.
    pub fn args(&self) -> Option<&[u8]> {
        (!self.placed).then_some(&self.args[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Side;
    use crate::client::{CallError, Execution, Outcome};
    use crate::wire::{flags, ByteOrder, HEADER_LEN, TAG_LEN};

    fn reliable_slot() -> ClientSlot {
        let session = Session {
            token: 0x1234_5678_9abc,
            slots: 1,
            window: 2,
            server_order: ByteOrder::host(),
            max_message: 1 << 20,
            max_frame: u32::MAX,
            generation: 1,
            reliable: true,
            keyed: false,
            sealed: false,
        };
        ClientSlot::new(session, 0, ClientEngineConfig::default())
    }

    /// The server's answer to the call whose header is `call`.
    fn result_for(call: &[u8], body: &[u8]) -> Vec<u8> {
        let (mut h, _) = Header::parse(call).unwrap();
        h.kind = Kind::Result;
        h.flags = 0;
        h.total_len = body.len() as u32;
        h.offset = 0;
        [&h.to_bytes()[..], body].concat()
    }

    /// A reliable session's call goes in one frame only when it fits one; one that does not goes
    /// in fragments, and the fragment acknowledgements it then gets move its window on.
    #[test]
    fn a_fragmented_call_on_a_reliable_session_follows_its_acknowledgements() {
        let mut slot = reliable_slot();
        slot.session.max_frame = HEADER_LEN as u32 + 100;
        slot.args_buf().extend_from_slice(&[7u8; 1000]);
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        assert_eq!(sent.len(), 2, "the first window of 100-byte fragments");
        let mut ack = Header::parse(&sent[0]).unwrap().0;
        ack.kind = Kind::FragAck;
        ack.flags = 0;
        ack.offset = 2; // both received
        let ack = [&ack.to_bytes()[..], &0u64.to_le_bytes()].concat();
        assert_eq!(slot.handle(&ack, Instant::now, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())), None);
        let offsets: Vec<u32> = sent.iter().map(|f| Header::parse(f).unwrap().0.offset).collect();
        assert_eq!(offsets, [0, 100, 200, 300], "the acknowledgement let the next window go");
    }

    /// A call whose arguments were written where they are read gets the very header `send_call`
    /// would have sent whole, completes as any other, and keeps no copy of its arguments; a call
    /// that cannot go as one untagged frame is declined with nothing changed.
    #[test]
    fn a_placed_call_is_sent_as_send_call_would_send_it() {
        let mut slot = reliable_slot();
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.args_buf().extend_from_slice(b"args");
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        assert_eq!(slot.args(), Some(&b"args"[..]));
        // The server's answer to a call sent whole.
        let whole_result = |call: &[u8], body: &[u8]| {
            let (h, _) = Header::parse(call).unwrap();
            [&Header::whole_result(h.token, h.slot, h.call_no, body.len() as u32).to_bytes()[..], body].concat()
        };
        assert_eq!(slot.take_whole_result(&whole_result(&sent[0], b"r")), Some(&b"r"[..]));

        let mut head = [0u8; HEADER_LEN];
        assert!(slot.place_call(3, 4, &mut head), "a reliable session's small call goes whole");
        let frame = [&head[..], b"args"].concat();
        let (h, body) = Header::parse(&frame).unwrap();
        assert_eq!((h.kind, h.call_no, h.proc_or_code, h.total_len, body), (Kind::Call, 2, 3, 4, &b"args"[..]));
        assert_eq!(head, Header::whole_call(h.token, 0, 2, 3, 4).to_bytes());
        assert!(slot.is_active());
        assert_eq!(slot.args(), None, "written in place, not kept");
        assert_eq!(slot.take_whole_result(&whole_result(&frame, b"done")), Some(&b"done"[..]));
        assert!(!slot.is_active());

        // Larger than a fragment, or than a message; keyed; over datagrams: declined, no call
        // begun.
        slot.session.max_frame = HEADER_LEN as u32 + 100;
        let mut untouched = [7u8; HEADER_LEN];
        assert!(!slot.place_call(3, 101, &mut untouched));
        slot.session.max_frame = u32::MAX;
        assert!(!slot.place_call(3, (1 << 20) + 1, &mut untouched));
        let mut datagrams = reliable_slot();
        datagrams.session.reliable = false;
        assert!(!datagrams.place_call(3, 4, &mut untouched));
        let keys = crate::auth::Psk::new(&[1; 32]).unwrap().session_keys(1, &[2; TAG_LEN], 3, Side::Client);
        let mut keyed = reliable_slot().with_keys(Some(keys));
        assert!(!keyed.place_call(3, 4, &mut untouched));
        assert_eq!(untouched, [7u8; HEADER_LEN], "a declined call writes no header");
        assert!(!slot.is_active() && !datagrams.is_active() && !keyed.is_active());
        assert_eq!(slot.call_no(), 2, "nothing begun");
    }

    /// Over a reliable session the caller may feed the reply before telling the engine when the
    /// call began (it reads the clock only if the reply is slow): the call completes, and a
    /// later call still fails at the deadline it is given.
    #[test]
    fn reliable_reply_before_time_call_completes_the_call() {
        let mut slot = reliable_slot();
        let mut sent: Vec<Vec<u8>> = Vec::new();
        slot.args_buf().extend_from_slice(b"args");
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        // One frame, as the fragment sender would have sent it.
        let (h, body) = Header::parse(&sent[0]).unwrap();
        assert_eq!((h.kind, h.proc_or_code, h.total_len, h.offset, h.flags), (Kind::Call, 3, 4, 0, flags::REQ_ACK));
        assert_eq!(body, b"args");
        let reply = result_for(&sent[0], b"result");
        let nothing_sent = &mut |_: &[u8], _: &[u8]| panic!("the engine sent something");
        let t0 = Instant::now();
        // A fragment acknowledgement makes no sense on a reliable session: ignored, nothing
        // resent.
        let mut ack = Header::parse(&sent[0]).unwrap().0;
        ack.kind = Kind::FragAck;
        ack.offset = 7;
        let ack = [&ack.to_bytes()[..], &u64::MAX.to_le_bytes()].concat();
        assert_eq!(slot.handle(&ack, || t0, nothing_sent), None);
        assert!(slot.is_active());
        assert_eq!(slot.handle(&reply, || t0, nothing_sent), Some(Outcome::Reply(&b"result"[..])));
        assert!(!slot.is_active());
        assert_eq!(slot.poll_timeout(), None, "a reliable session keeps no acknowledgement timer");
        // Fed again, the same reply is stale.
        assert_eq!(slot.handle(&reply, || t0, nothing_sent), None);

        slot.args_buf().clear();
        slot.send_call(3, &mut |h: &[u8], b: &[u8]| sent.push([h, b].concat())).unwrap();
        let deadline = t0 + Duration::from_millis(10);
        slot.time_call(t0, deadline);
        assert_eq!(slot.poll_timeout(), Some(deadline), "no retransmission timer before the deadline");
        assert_eq!(slot.handle_timeout(deadline - Duration::from_millis(1), nothing_sent), None);
        match slot.handle_timeout(deadline, nothing_sent) {
            Some(CallError::Timeout { after, execution: Execution::Unknown }) => {
                assert_eq!(after, Duration::from_millis(10))
            }
            other => panic!("{other:?}"),
        }
        // The first call's reply, arriving now, does not complete anything.
        assert_eq!(slot.handle(&reply, || deadline, nothing_sent), None);
    }
}
