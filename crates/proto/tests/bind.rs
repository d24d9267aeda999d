//! Binding against strangers, frames handed over directly: the stateless cookie round, the
//! pre-shared key (proof at bind, a tag on every frame), the limits on sessions (unused ones
//! expire, a full table reclaims idle ones, one source holds a bounded share), and the typed
//! refusals a client gets at once.

use std::time::{Duration, Instant};

use lowlat_proto::wire::{
    flags, BindRefusal, BindRequest, ByteOrder, Cookie, BIND_COOKIE, BIND_RELIABLE, PROTOCOL_VERSION,
};
use lowlat_proto::*;

const PROGRAM: u32 = 0x2000_4C4C;

type Frames = Vec<Vec<u8>>;

fn frame(h: &[u8], b: &[u8]) -> Vec<u8> {
    [h, b].concat()
}

fn server(cfg: ServerEngineConfig) -> ServerEngine<u16> {
    ServerEngine::new(ServerEngineConfig {
        programs: vec![ProgramVersions { program: PROGRAM, low: 1, high: 1 }],
        seed: 21,
        secret: [0x42; 32],
        ..cfg
    })
}

fn request(nonce: u64) -> BindRequest {
    BindRequest {
        program: PROGRAM,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::host(),
        flags: 0,
        max_message: 1 << 20,
        max_frame: 1472,
        slots: 2,
        window: 8,
        nonce,
    }
}

/// Feeds `frames` from `from`; returns what the server sent back (calls are left running).
fn deliver(s: &mut ServerEngine<u16>, from: u16, frames: &[Vec<u8>], now: Instant) -> Frames {
    let mut back = Frames::new();
    for f in frames {
        let _ = s.handle(from, f, || now, &mut |_, h, b| back.push(frame(h, b)));
    }
    back
}

/// What driving a bind came to: the outcome if one came within five rounds, the rounds it took,
/// the server's answers, and the binder (for its deadline).
struct Driven {
    outcome: Option<Result<Bound, BindError>>,
    rounds: usize,
    answers: Frames,
    binder: Binder,
}

/// Runs `binder` against the server from `from` through every round the server asks for (five
/// at most).
fn drive(s: &mut ServerEngine<u16>, from: u16, mut binder: Binder, now: Instant) -> Driven {
    let mut to_server = Frames::new();
    let mut answers = Frames::new();
    binder.start(now, &mut |h, b| to_server.push(frame(h, b)));
    for rounds in 1..=5 {
        for r in deliver(s, from, &std::mem::take(&mut to_server), now) {
            let outcome = binder.handle(&r, now, &mut |h, b| to_server.push(frame(h, b)));
            answers.push(r);
            if outcome.is_some() {
                return Driven { outcome, rounds, answers, binder };
            }
        }
    }
    Driven { outcome: None, rounds: 5, answers, binder }
}

fn binder(req: BindRequest, psk: Option<Psk>, now: Instant) -> Binder {
    Binder::new(req, &ClientEngineConfig::default(), now, now + Duration::from_secs(1)).with_key(psk)
}

/// Binds from `from` with `nonce` (and `psk`) through every round the server asks for; returns
/// the outcome and the rounds it took.
fn bind_from(
    s: &mut ServerEngine<u16>,
    from: u16,
    req: BindRequest,
    psk: Option<Psk>,
    now: Instant,
) -> (Result<Bound, BindError>, usize) {
    let d = drive(s, from, binder(req, psk, now), now);
    (d.outcome.expect("no outcome within five rounds"), d.rounds)
}

fn bind(s: &mut ServerEngine<u16>, from: u16, nonce: u64, psk: Option<Psk>, now: Instant) -> Result<Bound, BindError> {
    bind_from(s, from, request(nonce), psk, now).0
}

/// Sends one call of `args` on `slot`; returns the frames it sent.
fn call(slot: &mut ClientSlot, args: &[u8], now: Instant) -> Frames {
    slot.args_buf().extend_from_slice(args);
    let mut sent = Frames::new();
    slot.start(1, now, now + Duration::from_secs(1), &mut |h, b| sent.push(frame(h, b))).unwrap();
    sent
}

/// Delivers a call's frames; runs it (the result is its arguments reversed) and returns the
/// replies and how many times the procedure ran.
fn serve(s: &mut ServerEngine<u16>, from: u16, frames: &[Vec<u8>], now: Instant) -> (Frames, usize) {
    let mut back = Frames::new();
    let mut ran = 0;
    for f in frames {
        let mut out = |_: &u16, h: &[u8], b: &[u8]| back.push(frame(h, b));
        if let Some(c) = s.handle(from, f, || now, &mut out) {
            let key = c.key;
            let r: Vec<u8> = c.args.iter().rev().copied().collect();
            c.reply.extend_from_slice(&r);
            ran += 1;
            assert!(s.finish(key, Status::Ok, &mut out));
        }
    }
    (back, ran)
}

fn kind(f: &[u8]) -> Kind {
    Header::parse(f).unwrap().0.kind
}

fn psk(b: u8) -> Psk {
    Psk::new(&[b; 32]).unwrap()
}

#[test]
fn a_first_bind_gets_a_cookie_and_leaves_no_state() {
    let mut s = server(ServerEngineConfig::default());
    let now = Instant::now();
    let bind = frame(&Header { call_no: 5, ..Header::new(Kind::Bind) }.to_bytes(), &request(5).emit());
    for peer in 0..1000u16 {
        let back = deliver(&mut s, peer, std::slice::from_ref(&bind), now);
        assert_eq!(back.len(), 1);
        assert_eq!(kind(&back[0]), Kind::BindRetry);
        assert!(back[0].len() < bind.len(), "a retry is smaller than the bind it answers");
        assert_eq!(Header::parse(&back[0]).unwrap().0.call_no, 5);
    }
    assert_eq!(s.session_count(), 0);
    assert_eq!(s.buffered_bytes(), 0);
    assert_eq!((s.stats.cookies_issued, s.stats.binds_granted), (1000, 0));
    // The honest client answers the round and is bound: one round trip more than before.
    let (got, rounds) = bind_from(&mut s, 7, request(9), None, now);
    assert!(got.is_ok(), "{got:?}");
    assert_eq!(rounds, 2);
    assert_eq!(s.session_count(), 1);
}

#[test]
fn only_a_valid_cookie_from_its_own_address_makes_a_session() {
    let mut s = server(ServerEngineConfig { cookie_period: Duration::from_secs(60), ..ServerEngineConfig::default() });
    let t0 = Instant::now();
    let first = frame(&Header::new(Kind::Bind).to_bytes(), &request(3).emit());
    let retry = deliver(&mut s, 1, &[first], t0).remove(0);
    let cookie = Cookie::parse(&retry[HEADER_LEN..]).unwrap();
    let with_cookie = |c: Cookie| {
        let mut req = request(3);
        req.flags = BIND_COOKIE;
        frame(&Header::new(Kind::Bind).to_bytes(), &[&req.emit()[..], &c.emit()].concat())
    };
    // Another address (a spoofer who saw the cookie go by), a forged MAC, an expired cookie:
    // each gets a fresh cookie, never a session.
    let mut forged = cookie;
    forged.mac[0] ^= 0x80;
    for (from, c, at) in [(2, cookie, t0), (1, forged, t0), (1, cookie, t0 + Duration::from_secs(120))] {
        let back = deliver(&mut s, from, &[with_cookie(c)], at);
        assert_eq!(kind(&back[0]), Kind::BindRetry);
        assert_eq!(s.session_count(), 0);
    }
    assert_eq!(s.stats.cookies_rejected, 3);
    // The real one, late in the next period, and its retransmission: one session.
    let late = t0 + Duration::from_secs(100);
    let ok = deliver(&mut s, 1, &[with_cookie(cookie), with_cookie(cookie)], late);
    assert_eq!(ok.iter().map(|f| kind(f)).collect::<Vec<_>>(), [Kind::BindOk, Kind::BindOk]);
    assert_eq!(Header::parse(&ok[0]).unwrap().0.token, Header::parse(&ok[1]).unwrap().0.token);
    assert_eq!((s.session_count(), s.stats.binds_granted, s.stats.binds_repeated), (1, 1, 1));
}

#[test]
fn a_reliable_transport_binds_in_one_round_unless_keyed() {
    let now = Instant::now();
    let mut tcp = server(ServerEngineConfig { reliable: true, ..ServerEngineConfig::default() });
    let mut req = request(1);
    req.flags = BIND_RELIABLE;
    req.max_frame = u32::MAX;
    let (got, rounds) = bind_from(&mut tcp, 1, req, None, now);
    assert!(got.unwrap().session.reliable);
    assert_eq!(rounds, 1);
    // A key needs the server's nonce: the cookie round brings it.
    let mut keyed = server(ServerEngineConfig { reliable: true, psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let (got, rounds) = bind_from(&mut keyed, 1, req, Some(psk(1)), now);
    assert!(got.unwrap().session.keyed);
    assert_eq!(rounds, 2);
    // Over datagrams the server decides from its own transport, whatever the client claims.
    let mut udp = server(ServerEngineConfig::default());
    let (got, rounds) = bind_from(&mut udp, 1, req, None, now);
    assert_eq!(rounds, 2);
    assert!(got.is_ok());
}

#[test]
fn old_clients_are_refused_with_a_protocol_mismatch_they_understand() {
    let mut s = server(ServerEngineConfig::default());
    let mut req = request(1);
    (req.proto_min, req.proto_max) = (1, 1);
    let back = deliver(&mut s, 1, &[frame(&Header::new(Kind::Bind).to_bytes(), &req.emit())], Instant::now());
    assert_eq!(kind(&back[0]), Kind::BindRefused);
    let r = BindRefusal::parse(&back[0][HEADER_LEN..]).unwrap().0;
    assert_eq!(r, Refusal::ProtocolMismatch { low: 2, high: 2 });
    assert_eq!(s.stats.refused.protocol, 1);
}

/// Drives a bind from `from` to its end: every round the server asks for, then, if no answer
/// could be believed, the client's deadline. Returns the outcome and the server's answers.
fn bind_to_the_end(
    s: &mut ServerEngine<u16>,
    from: u16,
    req: BindRequest,
    psk: Option<Psk>,
    now: Instant,
) -> (Result<Bound, BindError>, Frames) {
    let mut d = drive(s, from, binder(req, psk, now), now);
    let outcome = d.outcome.unwrap_or_else(|| {
        let end = now + Duration::from_secs(1);
        Err(d.binder.handle_timeout(end, &mut |_, _| {}).expect("the deadline passed"))
    });
    (outcome, d.answers)
}

#[test]
fn key_mismatches_are_reported_but_only_a_refusal_under_the_key_is_believed() {
    let now = Instant::now();
    let mut keyed = server(ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() });
    // No key: refused on the first bind, before any cookie round (the client has nothing to
    // check a tag with, and nothing to lose by believing it).
    let refused = |(r, rounds): (Result<Bound, BindError>, usize)| (r.unwrap_err(), rounds);
    assert_eq!(refused(bind_from(&mut keyed, 1, request(1), None, now)), (BindError::Refused(Refusal::KeyRequired), 1));
    // Another key: the server's answers are tagged under its key, which the client cannot
    // check. The cookie is answered all the same (it grants nothing), so the server sees the
    // wrong proof and counts it; its refusal is not believed, and the client tries until its
    // deadline and then says what it was told.
    let (got, answers) = bind_to_the_end(&mut keyed, 1, request(2), Some(psk(2)), now);
    let after = Duration::from_secs(1);
    assert_eq!(got.unwrap_err(), BindError::Unauthenticated { refusal: Some(Refusal::BadKey), after });
    assert!(answers.iter().any(|a| kind(a) == Kind::BindRefused));
    assert_eq!(keyed.session_count(), 0);
    assert!(keyed.stats.refused.bad_key >= 1);
    // A key where the server has none: an untagged refusal, likewise.
    let mut open = server(ServerEngineConfig::default());
    let (got, _) = bind_to_the_end(&mut open, 1, request(3), Some(psk(1)), now);
    assert_eq!(got.unwrap_err(), BindError::Unauthenticated { refusal: Some(Refusal::KeyNotExpected), after });
    let r = keyed.stats.refused;
    assert_eq!((r.key_required, r.total()), (1, 1 + r.bad_key));
    // The right key: bound, keyed.
    assert!(bind(&mut keyed, 1, 4, Some(psk(1)), now).unwrap().session.keyed);
}

#[test]
fn a_forged_refusal_does_not_stop_a_keyed_bind() {
    let now = Instant::now();
    let mut s = server(ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let mut binder = binder(request(8), Some(psk(1)), now);
    let mut to_server = Frames::new();
    binder.start(now, &mut |h, b| to_server.push(frame(h, b)));
    // An attacker on the path answers first: an untagged "the two keys differ", then one with
    // a tag made without the key, then the server's own refusal of another bind (tagged, but
    // over another nonce).
    let mut forged = Header::new(Kind::BindRefused);
    forged.call_no = 8;
    let untagged = frame(&forged.to_bytes(), &BindRefusal(Refusal::BadKey).emit());
    let mut bad_tag = forged;
    bad_tag.flags = flags::TAGGED;
    let bad_tag = frame(&bad_tag.to_bytes(), &[&[7u8; TAG_LEN][..], &BindRefusal(Refusal::BadKey).emit()].concat());
    let mut other = request(8);
    other.program = 99; // refused, tagged, for a bind with the same low nonce bits but another nonce
    other.nonce = 8 | 1 << 40;
    let other_refusal =
        deliver(&mut s, 1, &[frame(&Header { call_no: 8, ..Header::new(Kind::Bind) }.to_bytes(), &other.emit())], now);
    assert_eq!(kind(&other_refusal[0]), Kind::BindRefused);
    for f in [untagged, bad_tag, other_refusal[0].clone()] {
        assert!(binder.handle(&f, now, &mut |_, _| {}).is_none(), "not believed");
    }
    assert_eq!(binder.mac_failures, 3);
    // The real exchange goes on and binds.
    for _ in 0..3 {
        let replies = deliver(&mut s, 1, &std::mem::take(&mut to_server), now);
        for r in &replies {
            if let Some(outcome) = binder.handle(r, now, &mut |h, b| to_server.push(frame(h, b))) {
                assert!(outcome.unwrap().session.keyed);
                return;
            }
        }
    }
    panic!("the honest bind did not complete");
}

/// Every frame a stranger can send from an address the server has not proven (binds of every
/// shape, calls, probes, acknowledgements, path responses, for known and unknown sessions) is
/// answered with at most as many bytes as it had.
#[test]
fn no_answer_to_an_unproven_address_is_larger_than_what_it_sent() {
    let now = Instant::now();
    for psk_ in [None, Some(psk(1))] {
        let mut s = server(ServerEngineConfig { psk: psk_.clone(), ..ServerEngineConfig::default() });
        let bound = bind(&mut s, 1, 1, psk_.clone(), now).unwrap();
        let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys.clone());
        let honest = call(&mut slot, &[5u8; 1000], now);
        let (result, ran) = serve(&mut s, 1, &honest, now);
        assert_eq!((ran, result.len()), (1, 1));
        let mut strangers: Frames = Vec::new();
        let bind_head = Header { call_no: 3, ..Header::new(Kind::Bind) }.to_bytes();
        let mut keyed_req = request(3);
        keyed_req.flags = if psk_.is_some() { lowlat_proto::wire::BIND_KEYED } else { 0 };
        for cut in [0, 4, 31, 32] {
            strangers.push(frame(&bind_head, &keyed_req.emit()[..cut]));
        }
        let mut unknown_program = keyed_req;
        unknown_program.program = 1;
        strangers.push(frame(&bind_head, &unknown_program.emit()));
        strangers.push(frame(&bind_head, &keyed_req.emit()));
        // The honest call replayed (whose result is kept), cut short, or with another token.
        strangers.extend(honest.iter().cloned());
        strangers.push(honest[0][..36].to_vec());
        for kind_ in [Kind::Call, Kind::Probe, Kind::Ack, Kind::FragAck, Kind::PathResponse, Kind::Result] {
            let mut h = Header::parse(&honest[0]).unwrap().0;
            h.kind = kind_;
            strangers.push(h.to_bytes().to_vec());
            h.token ^= 1 << 40;
            strangers.push(frame(&h.to_bytes(), &[0u8; 4]));
        }
        let calls_before = s.stats.calls;
        for f in &strangers {
            for back in deliver(&mut s, 66, std::slice::from_ref(f), now) {
                assert!(
                    back.len() <= f.len(),
                    "{:?}: {} bytes answered with {}",
                    Header::parse(f).map(|h| h.0.kind),
                    f.len(),
                    back.len()
                );
                assert_ne!(kind(&back), Kind::Result, "no kept result to an unproven address");
            }
        }
        assert_eq!(s.stats.calls, calls_before, "nothing ran");
        assert!(s.stats.unproven > 0 && s.stats.path_challenges > 0, "{:?}", s.stats);
    }
}

/// A recorded call sent again from another address: the kept result never goes there (only a
/// challenge of the frame's size), and the session's own client is untouched.
#[test]
fn a_replayed_call_from_another_address_reflects_nothing() {
    let now = Instant::now();
    let mut s = server(ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let bound = bind(&mut s, 1, 1, Some(psk(1)), now).unwrap();
    let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys.clone());
    let recorded = call(&mut slot, b"big", now);
    let (back, ran) = serve(&mut s, 1, &recorded, now);
    assert_eq!(ran, 1);
    let (mut sent, mut answered) = (0, 0);
    for _ in 0..10 {
        for f in &recorded {
            sent += f.len();
            answered += deliver(&mut s, 77, std::slice::from_ref(f), now).iter().map(Vec::len).sum::<usize>();
        }
    }
    assert!(answered <= sent, "{answered} bytes for {sent}");
    assert_eq!(s.stats.path_challenges, 10);
    // The client at its proven address still gets its result again.
    let again = deliver(&mut s, 1, &recorded, now);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0], back[0]);
}

/// A client whose address changed (NAT rebinding): its next call is challenged, it answers and
/// sends the call again at once, and the call runs once, answered at the new address.
#[test]
fn a_migrated_client_proves_its_new_address_and_goes_on() {
    for key in [None, Some(psk(1))] {
        let now = Instant::now();
        let mut s = server(ServerEngineConfig { psk: key.clone(), ..ServerEngineConfig::default() });
        let bound = bind(&mut s, 1, 1, key.clone(), now).unwrap();
        let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys.clone());
        let nothing = &mut |_: &[u8], _: &[u8]| {};
        let (back, ran) = serve(&mut s, 1, &call(&mut slot, b"one", now), now);
        assert_eq!(ran, 1);
        assert_eq!(slot.handle(&back[0], || now, nothing), Some(Outcome::Reply(&b"eno"[..])));
        let sent = call(&mut slot, b"two", now);
        let (challenge, ran) = serve(&mut s, 2, &sent, now);
        assert_eq!((ran, challenge.len()), (0, 1));
        assert_eq!(kind(&challenge[0]), Kind::PathChallenge);
        let mut answer = Frames::new();
        assert_eq!(slot.handle(&challenge[0], || now, &mut |h, b| answer.push(frame(h, b))), None);
        assert_eq!(answer.len(), 2, "the response, and the call again");
        assert_eq!(kind(&answer[0]), Kind::PathResponse);
        let (back, ran) = serve(&mut s, 2, &answer, now);
        assert_eq!(ran, 1, "the call ran once, at the new address");
        assert_eq!(slot.handle(&back[0], || now, nothing), Some(Outcome::Reply(&b"owt"[..])));
        assert_eq!(s.stats.paths_validated, 1);
        // A response forged for a third address proves nothing.
        let (_, ran) = serve(&mut s, 3, &answer[..1], now);
        assert_eq!((ran, s.stats.path_failures), (0, 1));
    }
}

/// Replays of an old call from a forged address every 25 s keep nothing alive: the session
/// goes when its idle time is up, as an untouched one does.
#[test]
fn replays_do_not_keep_a_session_alive() {
    let t0 = Instant::now();
    let idle = Duration::from_secs(120);
    let mut s = server(ServerEngineConfig { session_idle: idle, psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let bound = bind(&mut s, 1, 1, Some(psk(1)), t0).unwrap();
    let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys.clone());
    let recorded = call(&mut slot, b"x", t0);
    assert_eq!(serve(&mut s, 1, &recorded, t0).1, 1);
    let mut t = t0;
    while s.session_count() > 0 && t < t0 + Duration::from_secs(400) {
        t += Duration::from_secs(25);
        deliver(&mut s, 9, &recorded, t); // from a forged address
        deliver(&mut s, 1, &recorded, t); // and from the client's own: a duplicate
        s.handle_timeout(t);
    }
    assert_eq!(s.session_count(), 0, "replays kept the session alive for {:?}", t - t0);
    assert!(t - t0 <= idle * 3 / 2 + Duration::from_secs(25), "gone after {:?}", t - t0);
    assert!(s.stats.duplicates > 0 && s.stats.unproven > 0);
}

/// A sealed session: bodies on the wire differ from the plaintext, calls and results go
/// through, a server that requires sealing refuses an unsealed bind, and sealing without a key
/// is refused.
#[test]
fn sealed_sessions_hide_bodies_and_are_refused_where_they_cannot_be() {
    let now = Instant::now();
    for cipher in [CipherKind::Aes256Gcm, CipherKind::ChaCha20Poly1305] {
        let mut s =
            server(ServerEngineConfig { psk: Some(psk(1)), require_sealed: true, ..ServerEngineConfig::default() });
        let bind_sealed = |s: &mut ServerEngine<u16>, seal: Option<CipherKind>, key: Option<Psk>| {
            drive(s, 1, binder(request(5), key, now).with_seal(seal), now).outcome.expect("an outcome")
        };
        assert_eq!(
            bind_sealed(&mut s, None, Some(psk(1))).unwrap_err(),
            BindError::Refused(Refusal::EncryptionRequired)
        );
        let bound = bind_sealed(&mut s, Some(cipher), Some(psk(1))).unwrap();
        assert!(bound.session.sealed && bound.seal.is_some());
        let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default())
            .with_keys(bound.keys.clone())
            .with_seal(bound.seal.clone());
        let secret = b"attack at dawn, bring 1440 bytes";
        let sent = call(&mut slot, secret, now);
        assert!(!sent[0].windows(secret.len()).any(|w| w == secret), "the body is not in clear");
        assert_eq!(sent[0].len(), SEALED_HEAD_LEN + secret.len());
        let (back, ran) = serve(&mut s, 1, &sent, now);
        assert_eq!(ran, 1);
        let reversed: Vec<u8> = secret.iter().rev().copied().collect();
        assert!(!back[0].windows(reversed.len()).any(|w| w == &reversed[..]));
        let nothing = &mut |_: &[u8], _: &[u8]| {};
        assert_eq!(slot.handle(&back[0], || now, nothing), Some(Outcome::Reply(&reversed[..])));
        // A tagged but unsealed result on a sealed session is not taken.
        let sent = call(&mut slot, b"y", now);
        let (mut back, _) = serve(&mut s, 1, &sent, now);
        back[0][HEADER_LEN + TAG_LEN] ^= 1;
        assert_eq!(slot.handle(&back[0], || now, nothing), None);
        assert_eq!(slot.mac_failures, 1);
    }
    let mut open = server(ServerEngineConfig::default());
    let mut req = request(6);
    req.flags = lowlat_proto::wire::BIND_SEALED;
    let back =
        deliver(&mut open, 1, &[frame(&Header { call_no: 6, ..Header::new(Kind::Bind) }.to_bytes(), &req.emit())], now);
    assert_eq!(BindRefusal::parse(&back[0][HEADER_LEN..]).unwrap().0, Refusal::EncryptionUnavailable);
}

#[test]
fn keyed_frames_cannot_be_forged_altered_or_replayed() {
    let now = Instant::now();
    let mut s = server(ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let bound = bind(&mut s, 1, 1, Some(psk(1)), now).unwrap();
    let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys.clone());
    let sent = call(&mut slot, b"abc", now);
    assert_eq!(sent[0].len(), HEADER_LEN + TAG_LEN + 3, "header, tag, body");
    assert_ne!(Header::parse(&sent[0]).unwrap().0.flags & flags::TAGGED, 0);

    // Altered in flight (a byte of the body, of the header, of the tag), or sent without the
    // tag: dropped, counted, never run.
    for at in [HEADER_LEN + TAG_LEN + 1, 20, HEADER_LEN + 2] {
        let mut f = sent[0].clone();
        f[at] ^= 1;
        assert_eq!(serve(&mut s, 1, &[f], now), (Frames::new(), 0), "byte {at}");
    }
    let mut untagged = sent[0].clone();
    untagged.drain(HEADER_LEN..HEADER_LEN + TAG_LEN);
    untagged[4] &= !flags::TAGGED;
    assert_eq!(serve(&mut s, 1, &[untagged], now).1, 0);
    assert_eq!(s.stats.mac_failures, 4);
    assert_eq!(s.stats.calls, 0);

    // The real frame runs once; its replay gets the saved result and runs nothing.
    let (back, ran) = serve(&mut s, 1, &sent, now);
    assert_eq!(ran, 1);
    let nothing = &mut |_: &[u8], _: &[u8]| {};
    assert_eq!(slot.handle(&back[0], || now, nothing), Some(Outcome::Reply(&b"cba"[..])));
    let (again, ran) = serve(&mut s, 1, &sent, now);
    assert_eq!((ran, s.stats.duplicates), (0, 1));
    assert_eq!(slot.handle(&again[0], || now, nothing), None, "stale for the client too");

    // A result altered on the way back is ignored by the client (its retransmission recovers).
    let sent = call(&mut slot, b"xyz", now);
    let (mut back, _) = serve(&mut s, 1, &sent, now);
    back[0][HEADER_LEN + TAG_LEN] ^= 0xFF;
    assert_eq!(slot.handle(&back[0], || now, nothing), None);
    assert_eq!(slot.mac_failures, 1);
    assert!(slot.is_active());

    // A session made by a replayed bind after the first ended has other keys: frames
    // recorded from the first are refused.
    let mut s2 = server(ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() });
    let first = bind(&mut s2, 1, 7, Some(psk(1)), now).unwrap();
    let mut old = ClientSlot::new(first.session, 0, ClientEngineConfig::default()).with_keys(first.keys);
    let recorded = call(&mut old, b"once", now);
    assert_eq!(serve(&mut s2, 1, &recorded, now).1, 1);
    s2.handle_timeout(now + Duration::from_secs(200));
    s2.handle_timeout(now + Duration::from_secs(400));
    assert_eq!(s2.session_count(), 0);
    let later = now + Duration::from_secs(400);
    let again = bind(&mut s2, 1, 7, Some(psk(1)), later).unwrap();
    assert_eq!(again.session.token >> 32, first.session.token >> 32, "the same table entry");
    let mut replay = recorded[0].clone();
    replay[8..16].copy_from_slice(&again.session.token.to_le_bytes());
    assert_eq!(serve(&mut s2, 1, &[replay], later).1, 0);
    assert_eq!(s2.stats.mac_failures, 1);
}

#[test]
fn a_keyed_client_believes_the_servers_unknown_session_answer() {
    let now = Instant::now();
    let cfg = ServerEngineConfig { psk: Some(psk(1)), ..ServerEngineConfig::default() };
    let mut s = server(cfg.clone());
    let bound = bind(&mut s, 1, 1, Some(psk(1)), now).unwrap();
    let mut slot = ClientSlot::new(bound.session, 0, ClientEngineConfig::default()).with_keys(bound.keys);
    // The same server incarnation forgot the session: refused on the first transmission, so
    // the call is known not to have run.
    s.forget_peer(&1);
    let mut fresh = server(cfg);
    let sent = call(&mut slot, b"a", now);
    let back = deliver(&mut fresh, 1, &sent, now);
    assert_eq!(kind(&back[0]), Kind::Error);
    let nothing = &mut |_: &[u8], _: &[u8]| {};
    let got = slot.handle(&back[0], || now, nothing);
    assert_eq!(got, Some(Outcome::Failed(CallError::SessionLost { restarted: false, retry_safe: true })));
    // Forged without the key: ignored.
    let sent = call(&mut slot, b"b", now);
    let mut forged = deliver(&mut fresh, 1, &sent, now).remove(0);
    forged[HEADER_LEN] ^= 1;
    assert_eq!(slot.handle(&forged, || now, nothing), None);
}

#[test]
fn sessions_that_never_call_expire_within_seconds() {
    let t0 = Instant::now();
    let mut s = server(ServerEngineConfig { unused_idle: Duration::from_secs(5), ..ServerEngineConfig::default() });
    let idle = bind(&mut s, 1, 1, None, t0).unwrap();
    let busy = bind(&mut s, 2, 2, None, t0).unwrap();
    let mut slot = ClientSlot::new(busy.session, 0, ClientEngineConfig::default());
    assert_eq!(serve(&mut s, 2, &call(&mut slot, b"x", t0), t0).1, 1);
    let mut t = t0;
    while t < t0 + Duration::from_millis(6250) {
        t = s.poll_timeout().unwrap();
        s.handle_timeout(t);
        if t < t0 + Duration::from_secs(5) {
            assert_eq!(s.session_count(), 2, "gone before its time, at {:?}", t - t0);
        }
    }
    assert_eq!(s.session_count(), 1, "the unused session went within 1.25 times its limit");
    assert_eq!(s.stats.sessions_expired, 1);
    let sent = call(&mut ClientSlot::new(idle.session, 0, ClientEngineConfig::default()), b"y", t);
    assert_eq!(serve(&mut s, 1, &sent, t).1, 0);
    assert_eq!(s.stats.unknown_session, 1);
}

#[test]
fn a_full_table_reclaims_idle_sessions_never_called_first() {
    let t0 = Instant::now();
    let mut s = server(ServerEngineConfig { max_sessions: 3, ..ServerEngineConfig::default() });
    // A session that called, one that never did, one with a call running.
    let called = bind(&mut s, 1, 1, None, t0).unwrap();
    let mut c = ClientSlot::new(called.session, 0, ClientEngineConfig::default());
    serve(&mut s, 1, &call(&mut c, b"done", t0), t0);
    let never = bind(&mut s, 2, 2, None, t0).unwrap();
    let running = bind(&mut s, 3, 3, None, t0).unwrap();
    let mut r = ClientSlot::new(running.session, 0, ClientEngineConfig::default());
    let sent = call(&mut r, b"slow", t0);
    let key = s.handle(3, &sent[0], || t0, &mut |_, _, _| {}).expect("a call").key;

    // Whether the server still knows `session` (a probe of an unknown one is answered with an
    // error; of a known one from this address with a path challenge).
    let known = |s: &mut ServerEngine<u16>, session: &Bound| {
        let probe = Header { token: session.session.token, ..Header::new(Kind::Probe) };
        deliver(s, 9, &[probe.to_bytes().to_vec()], t0).iter().all(|f| kind(f) != Kind::Error)
    };
    assert!(bind(&mut s, 4, 4, None, t0).is_ok());
    assert_eq!(s.stats.sessions_reclaimed, 1);
    assert!(!known(&mut s, &never), "the never-called session went first");
    assert!(known(&mut s, &called) && known(&mut s, &running));
    let fourth = bind(&mut s, 5, 5, None, t0).unwrap();
    assert!(known(&mut s, &called), "a session that called outranks one that never did");
    assert!(known(&mut s, &fourth));
    // Now every idle session has called: the one quiet longest goes, never the running one.
    let mut f = ClientSlot::new(fourth.session, 0, ClientEngineConfig::default());
    serve(&mut s, 5, &call(&mut f, b"hi", t0), t0);
    assert!(bind(&mut s, 6, 6, None, t0).is_ok());
    assert_eq!(s.stats.sessions_reclaimed, 3);
    assert!(known(&mut s, &running));
    assert!(s.finish_with(key, Status::Ok, b"", &mut |_, _, _| {}), "the running call was kept");
    let mut all_busy = server(ServerEngineConfig { max_sessions: 1, ..ServerEngineConfig::default() });
    let b = bind(&mut all_busy, 1, 1, None, t0).unwrap();
    let sent = call(&mut ClientSlot::new(b.session, 0, ClientEngineConfig::default()), b"z", t0);
    assert!(all_busy.handle(1, &sent[0], || t0, &mut |_, _, _| {}).is_some());
    assert_eq!(bind(&mut all_busy, 2, 2, None, t0).unwrap_err(), BindError::Refused(Refusal::TooManySessions));
    assert_eq!(all_busy.stats.refused.full, 1);
}

#[test]
fn one_source_holds_at_most_its_share() {
    let t0 = Instant::now();
    // Peers 0..100 share source 0 (one IP address, many ports); 100.. are sources of their own.
    let mut s = ServerEngine::with_source(
        ServerEngineConfig {
            programs: vec![ProgramVersions { program: PROGRAM, low: 1, high: 1 }],
            max_sessions: 16,
            max_sessions_per_source: 4,
            ..ServerEngineConfig::default()
        },
        |p: &u16| if *p < 100 { 0 } else { *p as u128 },
    );
    // Sessions with a call running cannot be reclaimed: the fifth from the source is refused.
    for p in 0..4u16 {
        let b = bind(&mut s, p, p as u64, None, t0).unwrap();
        let sent = call(&mut ClientSlot::new(b.session, 0, ClientEngineConfig::default()), b"r", t0);
        assert!(s.handle(p, &sent[0], || t0, &mut |_, _, _| {}).is_some());
    }
    assert_eq!(bind(&mut s, 4, 4, None, t0).unwrap_err(), BindError::Refused(Refusal::SourceLimit));
    // Other sources are not held back by it.
    for p in 100..112u16 {
        assert!(bind(&mut s, p, p as u64, None, t0).is_ok(), "source {p}");
    }
    assert_eq!(s.stats.refused.source_limit, 1);
    // A flood of binds that never call, from one source, churns only that source's share.
    let mut flood =
        server(ServerEngineConfig { max_sessions: 64, max_sessions_per_source: 8, ..ServerEngineConfig::default() });
    let honest = bind(&mut flood, 1, 1, None, t0).unwrap();
    let mut slot = ClientSlot::new(honest.session, 0, ClientEngineConfig::default());
    for n in 0..1000u64 {
        assert!(bind(&mut flood, 2, 1000 + n, None, t0).is_ok());
    }
    assert!(flood.session_count() <= 9);
    assert_eq!(serve(&mut flood, 1, &call(&mut slot, b"still here", t0), t0).1, 1);
}

/// An endpoint served by several threads: each engine makes its sessions in its own range of
/// tokens (so a transport can steer by the token alone), a cookie one issued another accepts,
/// frames of one engine's session are unknown to another, and the session limits hold for the
/// endpoint as a whole, through the census the engines share.
#[test]
fn the_engines_of_one_endpoint_share_its_limits_and_split_its_tokens() {
    let t0 = Instant::now();
    let census = std::sync::Arc::new(Census::default());
    let engine = |index: u16| {
        server(ServerEngineConfig {
            max_sessions: 3,
            max_sessions_per_source: 2,
            shard: Shard::new(index, 4),
            census: Some(census.clone()),
            ..ServerEngineConfig::default()
        })
    };
    let (mut a, mut b) = (engine(0), engine(3));
    assert_eq!(a.generation(), b.generation(), "one endpoint, one generation");
    // Sessions with a call running, which no bind may reclaim.
    let busy = |s: &mut ServerEngine<u16>, from: u16| {
        let bound = bind(s, from, from as u64, None, t0).unwrap();
        let sent = call(&mut ClientSlot::new(bound.session, 0, ClientEngineConfig::default()), b"r", t0);
        let key = s.handle(from, &sent[0], || t0, &mut |_, _, _| {}).expect("a call").key;
        (bound.session.token, key)
    };
    let (on_a, _) = busy(&mut a, 1);
    let (on_b, _) = busy(&mut b, 2);
    assert_eq!((Shard::owner(on_a, 4), Shard::owner(on_b, 4)), (0, 3));
    assert_ne!(on_a & 0xffff_ffff, on_b & 0xffff_ffff, "the random bits differ between engines");
    // b does not know a's session.
    let probe = Header { token: on_a, ..Header::new(Kind::Probe) };
    assert_eq!(kind(&deliver(&mut b, 1, &[probe.to_bytes().to_vec()], t0)[0]), Kind::Error);
    // Peers 1 and 3 are sources of their own; a third session fills the endpoint.
    let (third, running) = busy(&mut b, 3);
    assert_eq!(Shard::owner(third, 4), 3);
    assert_eq!(census.live(), 3);
    assert_eq!(bind(&mut a, 4, 4, None, t0).unwrap_err(), BindError::Refused(Refusal::TooManySessions));
    // A cookie issued by one engine is good on another (the shared secret).
    let mut binder = binder(request(5), None, t0);
    let mut to_server = Frames::new();
    binder.start(t0, &mut |h, bd| to_server.push(frame(h, bd)));
    let retry = deliver(&mut a, 5, &to_server, t0);
    assert_eq!(kind(&retry[0]), Kind::BindRetry);
    let mut again = Frames::new();
    assert!(binder.handle(&retry[0], t0, &mut |h, bd| again.push(frame(h, bd))).is_none());
    let answer = deliver(&mut b, 5, &again, t0);
    assert_eq!(kind(&answer[0]), Kind::BindRefused, "the cookie was taken, the endpoint is full");
    assert_eq!(b.stats.cookies_rejected, 0);
    assert_eq!(b.stats.refused.full, 1);
    // A session that goes makes room in the endpoint, whichever engine held it.
    assert!(b.finish_with(running, Status::Ok, b"", &mut |_, _, _| {}));
    let later = t0 + Duration::from_secs(600);
    b.handle_timeout(later);
    b.handle_timeout(later + Duration::from_secs(600));
    assert_eq!(census.live(), 2, "the swept session left the census");
    assert!(bind(&mut a, 6, 6, None, later).is_ok());
}
