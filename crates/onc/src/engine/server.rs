//! The server side: [`ServerEngine`], everything an ONC RPC server decides before and after a
//! procedure runs.
//!
//! A call is parsed (one that cannot be answered is dropped; one with a bad RPC version or
//! credential is denied), looked up in the duplicate-request cache when the transport can
//! duplicate messages (a retransmission of a finished call gets the reply already sent, one of a
//! running call is dropped: a procedure runs once per call), checked against the credential policy
//! (AUTH_TOOWEAK) and the programs served (PROG_UNAVAIL, PROG_MISMATCH with the range served).
//! What passes is handed out as an [`IncomingCall`]; whether the procedure exists (PROC_UNAVAIL)
//! is the caller's to say, through the status it finishes the call with.
//!
//! Contract, as for every engine in lowlat: feed each message received with
//! [`ServerEngine::handle`]; when it returns an [`IncomingCall`], run the procedure (it reads
//! `args` and appends its results to `results`), then call [`ServerEngine::finish`]. A procedure
//! run elsewhere (a worker pool) copies the arguments, and its results come back through
//! [`ServerEngine::finish_with`]. Send what the `out` callback is given: (peer, header, body), as
//! one message. The engine has no timers and reads no clock.

use std::hash::Hash;

use crate::auth::{AuthStat, CredentialIn};
use crate::drc::{call_hash, DuplicateCache, Lookup};
use crate::msg::{encode_reply, AcceptStatus, Call, RejectStatus, ReplyBody};

/// What a server serves and how strictly.
#[derive(Clone, Debug, Default)]
pub struct ServerEngineConfig {
    /// The (program, version) pairs served.
    pub programs: Vec<(u32, u32)>,
    /// Refuse calls without AUTH_SYS credentials (AUTH_TOOWEAK).
    pub require_auth_sys: bool,
    /// When not empty, refuse AUTH_SYS callers whose uid is not listed (AUTH_TOOWEAK). Implies
    /// `require_auth_sys`.
    pub allowed_uids: Vec<u32>,
    /// Replies remembered for retransmitted calls (the duplicate-request cache); 0 turns it off,
    /// for a transport that never duplicates a message (a stream).
    pub duplicate_cache: usize,
    /// Largest reply the transport carries in one message: a larger result is answered
    /// SYSTEM_ERR rather than not at all.
    pub max_reply: usize,
    /// Keys the cache's hashing (give it real randomness: peers choose the keys).
    pub seed: u64,
}

/// Identifies a call in progress, to finish it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallKey<A> {
    /// The caller's transport address: the reply goes there.
    pub from: A,
    /// The call's transaction id, as the caller chose it.
    pub xid: u32,
    /// The call's fingerprint in the duplicate-request cache (0 without one).
    hash: u64,
}

/// A call ready to run. `args` lie in the message received; `results` is the engine's reply
/// buffer, emptied.
#[derive(Debug)]
pub struct IncomingCall<'a, A> {
    /// Which call this is: hand it back to [`ServerEngine::finish`] with the outcome.
    pub key: CallKey<A>,
    /// The program number called.
    pub program: u32,
    /// The version of that program.
    pub version: u32,
    /// The procedure number within that version.
    pub procedure: u32,
    /// The caller's credential, where it lies in the message
    /// ([`CredentialIn::auth_sys`] reads it).
    pub cred: CredentialIn<'a>,
    /// The XDR-encoded arguments, as received (not yet validated).
    pub args: &'a [u8],
    /// Where the procedure writes its XDR-encoded results (empty at the start).
    pub results: &'a mut Vec<u8>,
}

/// Counters a person can read to see what the engine answered on its own and what it dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Calls handed out to run.
    pub calls: u64,
    /// Retransmissions answered from the cache or dropped while their call ran.
    pub duplicates: u64,
    /// Calls denied (RPC version, credentials) or refused (program, version) without running.
    pub refused: u64,
    /// Messages dropped as not being calls at all.
    pub malformed: u64,
}

/// The server's protocol state for one transport endpoint. `A` is the transport's peer address.
#[derive(Debug)]
pub struct ServerEngine<A: Eq + Hash + Copy> {
    cfg: ServerEngineConfig,
    drc: Option<DuplicateCache<A>>,
    head: Vec<u8>,
    results: Vec<u8>,
    /// What the engine did on its own since it was made.
    pub stats: ServerStats,
}

/// Where the duplicate-request cache and the header buffer meet a reply: borrowed apart from the
/// results buffer, which may hold the body being sent.
struct Replier<'e, A: Eq + Hash + Copy> {
    drc: &'e mut Option<DuplicateCache<A>>,
    head: &'e mut Vec<u8>,
    max_reply: usize,
}

impl<A: Eq + Hash + Copy> Replier<'_, A> {
    /// Sends the reply to `key` (results only after SUCCESS) and remembers it for
    /// retransmissions.
    fn send(&mut self, key: CallKey<A>, body: ReplyBody, results: &[u8], out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let mut body = body;
        let mut results = if body == ReplyBody::Accepted(AcceptStatus::Success) { results } else { &[] };
        self.head.clear();
        encode_reply(key.xid, body, self.head);
        if self.head.len() + results.len() > self.max_reply {
            // No message can carry the results: say so rather than stay silent.
            body = ReplyBody::Accepted(AcceptStatus::SystemErr);
            results = &[];
            self.head.clear();
            encode_reply(key.xid, body, self.head);
        }
        out(&key.from, self.head, results);
        if let Some(drc) = self.drc.as_mut() {
            drc.complete(key.xid, key.from, key.hash, self.head, results);
        }
    }
}

impl<A: Eq + Hash + Copy> ServerEngine<A> {
    /// An engine with `cfg`'s limits (and a duplicate-request cache if `cfg` asks for one).
    pub fn new(cfg: ServerEngineConfig) -> ServerEngine<A> {
        ServerEngine {
            drc: (cfg.duplicate_cache > 0).then(|| DuplicateCache::new(cfg.duplicate_cache, cfg.seed)),
            head: Vec::with_capacity(64),
            results: Vec::new(),
            cfg,
            stats: ServerStats::default(),
        }
    }

    fn replier(&mut self) -> Replier<'_, A> {
        Replier { drc: &mut self.drc, head: &mut self.head, max_reply: self.cfg.max_reply }
    }

    /// Whether the credential policy refuses a caller with `cred` (read only when the policy
    /// names users).
    fn refuses(&self, cred: CredentialIn<'_>) -> bool {
        let allowed = &self.cfg.allowed_uids;
        match cred {
            CredentialIn::None => self.cfg.require_auth_sys || !allowed.is_empty(),
            CredentialIn::Sys(_) if allowed.is_empty() => false,
            CredentialIn::Sys(_) => !cred.auth_sys().is_some_and(|a| allowed.contains(&a.uid)),
        }
    }

    /// Why `program` `version` is not served, if it is not.
    fn unserved(&self, program: u32, version: u32) -> Option<AcceptStatus> {
        let mut range: Option<(u32, u32)> = None;
        for &(_, v) in self.cfg.programs.iter().filter(|(p, _)| *p == program) {
            if v == version {
                return None;
            }
            let (low, high) = range.unwrap_or((v, v));
            range = Some((low.min(v), high.max(v)));
        }
        Some(match range {
            Some((low, high)) => AcceptStatus::ProgMismatch { low, high },
            None => AcceptStatus::ProgUnavail,
        })
    }

    /// Feeds one message received from `from`; answers it at once through `out` when the engine
    /// can, or hands the call out to run.
    pub fn handle<'a>(
        &'a mut self,
        from: A,
        msg: &'a [u8],
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> Option<IncomingCall<'a, A>> {
        let call = match Call::parse(msg) {
            Ok(c) => c,
            Err(e) => {
                match RejectStatus::for_error(&e) {
                    // Deterministic: a retransmission gets the same denial, with no need to cache it.
                    Some((xid, why)) => {
                        self.stats.refused += 1;
                        self.head.clear();
                        encode_reply(xid, ReplyBody::Denied(why), &mut self.head);
                        out(&from, &self.head, &[]);
                    }
                    None => self.stats.malformed += 1,
                }
                return None;
            }
        };
        let h = call.header;
        let mut key = CallKey { from, xid: h.xid, hash: 0 };
        if let Some(drc) = self.drc.as_mut() {
            key.hash = call_hash(msg);
            match drc.check(h.xid, from, key.hash) {
                Lookup::New => {}
                Lookup::Replay(reply) => {
                    self.stats.duplicates += 1;
                    out(&from, reply, &[]);
                    return None;
                }
                Lookup::InProgress => {
                    self.stats.duplicates += 1;
                    return None;
                }
            }
        }
        let refusal = if self.refuses(call.cred) {
            Some(ReplyBody::Denied(RejectStatus::AuthError(AuthStat::TooWeak)))
        } else {
            self.unserved(h.program, h.version).map(ReplyBody::Accepted)
        };
        if let Some(body) = refusal {
            self.stats.refused += 1;
            self.replier().send(key, body, &[], out);
            return None;
        }
        self.stats.calls += 1;
        self.results.clear();
        Some(IncomingCall {
            key,
            program: h.program,
            version: h.version,
            procedure: h.procedure,
            cred: call.cred,
            args: call.args,
            results: &mut self.results,
        })
    }

    /// Completes the call handed out last, whose procedure appended its results to the
    /// `results` buffer it was given (sent only after SUCCESS).
    pub fn finish(&mut self, key: CallKey<A>, status: AcceptStatus, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let mut replier = Replier { drc: &mut self.drc, head: &mut self.head, max_reply: self.cfg.max_reply };
        replier.send(key, ReplyBody::Accepted(status), &self.results, out);
    }

    /// Completes a call whose procedure ran elsewhere, with its `results`.
    pub fn finish_with(
        &mut self,
        key: CallKey<A>,
        status: AcceptStatus,
        results: &[u8],
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        self.replier().send(key, ReplyBody::Accepted(status), results, out);
    }

    /// Replies remembered for retransmissions now.
    pub fn cached_replies(&self) -> usize {
        self.drc.as_ref().map_or(0, DuplicateCache::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AuthSys, Credential};
    use crate::msg::{CallHeader, Reply};

    const PROG: u32 = 0x2000_0001;

    fn engine(cfg: ServerEngineConfig) -> ServerEngine<u16> {
        ServerEngine::new(ServerEngineConfig { programs: vec![(PROG, 2), (PROG, 4)], max_reply: 1000, ..cfg })
    }

    fn call(xid: u32, program: u32, version: u32, cred: Credential, args: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        CallHeader { xid, program, version, procedure: 1 }.encode(&cred, &mut b);
        b.extend_from_slice(args);
        b
    }

    /// Feeds `msg`; returns what was sent and whether a call was handed out (finished with
    /// SUCCESS and `results` when it was).
    fn exchange(e: &mut ServerEngine<u16>, msg: &[u8], results: &[u8]) -> (Vec<Vec<u8>>, bool) {
        let mut sent = Vec::new();
        let mut out = |to: &u16, h: &[u8], b: &[u8]| {
            assert_eq!(*to, 9);
            sent.push([h, b].concat());
        };
        let ran = match e.handle(9, msg, &mut out) {
            Some(c) => {
                c.results.extend_from_slice(results);
                let key = c.key;
                e.finish(key, AcceptStatus::Success, &mut out);
                true
            }
            None => false,
        };
        (sent, ran)
    }

    fn body_of(reply: &[u8]) -> ReplyBody {
        Reply::parse(reply).unwrap().body
    }

    #[test]
    fn unserved_programs_and_versions_are_answered_with_the_range() {
        let mut e = engine(ServerEngineConfig::default());
        let (sent, ran) = exchange(&mut e, &call(1, PROG, 3, Credential::None, &[]), b"");
        assert!(!ran);
        assert_eq!(body_of(&sent[0]), ReplyBody::Accepted(AcceptStatus::ProgMismatch { low: 2, high: 4 }));
        let (sent, _) = exchange(&mut e, &call(2, PROG + 1, 2, Credential::None, &[]), b"");
        assert_eq!(body_of(&sent[0]), ReplyBody::Accepted(AcceptStatus::ProgUnavail));
        let (sent, ran) = exchange(&mut e, &call(3, PROG, 4, Credential::None, &[]), b"result");
        assert!(ran);
        assert_eq!(Reply::parse(&sent[0]).unwrap().results, b"result");
        assert_eq!(e.stats, ServerStats { calls: 1, refused: 2, ..ServerStats::default() });
    }

    #[test]
    fn credential_policy_denies_with_tooweak() {
        let sys = |uid| Credential::Sys(AuthSys::new(1, b"host", uid, 1, &[]));
        let mut strict = engine(ServerEngineConfig { allowed_uids: vec![1000], ..Default::default() });
        for (cred, admitted) in [(Credential::None, false), (sys(1000), true), (sys(0), false)] {
            let (sent, ran) = exchange(&mut strict, &call(1, PROG, 2, cred, &[]), b"");
            assert_eq!(ran, admitted, "{cred:?}");
            if !admitted {
                assert_eq!(body_of(&sent[0]), ReplyBody::Denied(RejectStatus::AuthError(AuthStat::TooWeak)));
            }
        }
        let mut sys_only = engine(ServerEngineConfig { require_auth_sys: true, ..Default::default() });
        assert!(!exchange(&mut sys_only, &call(1, PROG, 2, Credential::None, &[]), b"").1);
        assert!(exchange(&mut sys_only, &call(2, PROG, 2, sys(5), &[]), b"").1);
        // Credentials reach the procedure.
        let msg = call(3, PROG, 2, sys(77), &[]);
        let got = sys_only.handle(9, &msg, &mut |_: &u16, _: &[u8], _: &[u8]| {}).unwrap();
        assert_eq!(got.cred.auth_sys().map(|a| a.uid), Some(77));
    }

    #[test]
    fn malformed_messages_are_dropped_and_bad_versions_denied() {
        let mut e = engine(ServerEngineConfig::default());
        let (sent, ran) = exchange(&mut e, b"not a call", b"");
        assert!(sent.is_empty() && !ran);
        let mut v3 = call(5, PROG, 2, Credential::None, &[]);
        v3[8..12].copy_from_slice(&3u32.to_be_bytes());
        let (sent, _) = exchange(&mut e, &v3, b"");
        assert_eq!(body_of(&sent[0]), ReplyBody::Denied(RejectStatus::RpcMismatch { low: 2, high: 2 }));
        assert_eq!((e.stats.malformed, e.stats.refused), (1, 1));
    }

    #[test]
    fn results_no_message_can_carry_become_system_err() {
        let mut e = engine(ServerEngineConfig::default());
        let (sent, _) = exchange(&mut e, &call(1, PROG, 2, Credential::None, &[]), &[0u8; 1000]);
        let r = Reply::parse(&sent[0]).unwrap();
        assert_eq!((r.body, r.results.len()), (ReplyBody::Accepted(AcceptStatus::SystemErr), 0));
    }

    #[test]
    fn the_cache_replays_finished_calls_and_drops_running_ones() {
        let mut e = engine(ServerEngineConfig { duplicate_cache: 2, ..Default::default() });
        let first = call(1, PROG, 2, Credential::None, b"args");
        let (sent, ran) = exchange(&mut e, &first, b"once");
        assert!(ran);
        // The retransmission gets the same reply, byte for byte, without running.
        let (again, ran) = exchange(&mut e, &first, b"twice");
        assert!(!ran);
        assert_eq!(again, sent);
        // The same xid with other arguments is another call.
        assert!(exchange(&mut e, &call(1, PROG, 2, Credential::None, b"other"), b"").1);
        // A call running elsewhere: its copies are dropped until it finishes.
        let slow = call(2, PROG, 2, Credential::None, &[]);
        let mut log = Vec::new();
        let key = e.handle(9, &slow, &mut |_: &u16, h: &[u8], b: &[u8]| log.push([h, b].concat())).unwrap().key;
        assert!(e.handle(9, &slow, &mut |_: &u16, _: &[u8], _: &[u8]| panic!("answered")).is_none());
        e.finish_with(key, AcceptStatus::Success, b"late", &mut |_: &u16, h: &[u8], b: &[u8]| {
            log.push([h, b].concat())
        });
        let (replayed, ran) = exchange(&mut e, &slow, b"");
        assert!(!ran);
        assert_eq!(replayed, log);
        assert_eq!(Reply::parse(&log[0]).unwrap().results, b"late");
        assert_eq!(e.stats.duplicates, 3);
        // Bounded: a third call pushes the oldest reply out, so that call's copy runs again.
        assert!(exchange(&mut e, &call(3, PROG, 2, Credential::None, &[]), b"").1);
        assert_eq!(e.cached_replies(), 2);
        assert!(exchange(&mut e, &call(1, PROG, 2, Credential::None, b"other"), b"").1, "forgotten, so run again");
        // Refusals are cached too: a retransmitted refused call gets the same answer.
        let refused = call(4, PROG + 1, 2, Credential::None, &[]);
        let (sent, _) = exchange(&mut e, &refused, b"");
        assert_eq!(exchange(&mut e, &refused, b"").0, sent);
        assert_eq!(e.stats.duplicates, 4);
    }

    #[test]
    fn without_a_cache_every_copy_runs() {
        let mut e = engine(ServerEngineConfig::default());
        let msg = call(1, PROG, 2, Credential::None, &[]);
        assert!(exchange(&mut e, &msg, b"").1);
        assert!(exchange(&mut e, &msg, b"").1);
        assert_eq!(e.cached_replies(), 0);
    }
}
