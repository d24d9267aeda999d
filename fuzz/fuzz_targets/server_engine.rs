//! The server engine fed whatever peers send. The first byte chooses the endpoint: over a
//! reliable transport or datagrams (bit 0), with a pre-shared key or without (bit 1). Honest
//! clients bind first (through the cookie round where there is one), then the input is a
//! sequence of frames from four peers, each optionally given a live session's token and, on a
//! keyed endpoint, sealed with that session's client key (so the fuzzer reaches calls,
//! fragments, acknowledgements and probes behind the tags), with time moving on. The engine
//! never panics, never holds more sessions than allowed, keeps its buffers within
//! sessions x slots x message size, sends every failed call's reason (here: whatever bytes
//! the fuzzer gives) as bounded UTF-8, and over datagrams never answers peers 2 and 3 (who
//! cannot prove their addresses: the challenges' MACs are the server's) with more bytes than
//! they sent. Bits 1 and
//! 2 of the first byte together make the sessions sealed (frames encrypted).
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use lowlat_proto::auth;
use lowlat_proto::seal::SealKeys;
use lowlat_proto::wire::{flags, BindRequest, ByteOrder, ErrorMessage, Header, Kind, BIND_RELIABLE, PROTOCOL_VERSION};
use lowlat_proto::{
    Binder, CipherKind, ClientEngineConfig, ErrorCode, FrameKeys, ProgramVersions, Psk, ServerEngineConfig, ServerEngine,
    Status, HEADER_LEN,
};

const MAX_SESSIONS: usize = 4;
const MAX_SLOTS: u16 = 4;
const MAX_MESSAGE: u32 = 16 << 10;

/// Binds from `peer` as an honest client (sealed if `sealed`); returns the token and the
/// client's keys.
fn bind(
    engine: &mut ServerEngine<u8>,
    peer: u8,
    reliable: bool,
    psk: Option<Psk>,
    sealed: bool,
    now: Instant,
) -> (u64, Option<FrameKeys>, Option<SealKeys>) {
    let req = BindRequest {
        program: 7,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::host(),
        flags: if reliable { BIND_RELIABLE } else { 0 },
        max_message: MAX_MESSAGE,
        max_frame: if reliable { u32::MAX } else { 1472 },
        slots: MAX_SLOTS,
        window: 8,
        nonce: peer as u64,
    };
    let cfg = ClientEngineConfig::default();
    let seal = sealed.then_some(CipherKind::ChaCha20Poly1305);
    let mut binder = Binder::new(req, &cfg, now, now + Duration::from_secs(1)).with_key(psk).with_seal(seal);
    let mut to_server = Vec::new();
    binder.start(now, &mut |h, b| to_server.push([h, b].concat()));
    for _ in 0..3 {
        let mut to_client = Vec::new();
        for f in std::mem::take(&mut to_server) {
            engine.handle(peer, &f, || now, &mut |_, h, b| to_client.push([h, b].concat()));
        }
        for f in to_client {
            if let Some(Ok(b)) = binder.handle(&f, now, &mut |h, b| to_server.push([h, b].concat())) {
                return (b.session.token, b.keys, b.seal);
            }
        }
    }
    panic!("an honest bind failed");
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let (reliable, keyed, sealed) = (mode & 1 != 0, mode & 2 != 0, mode & 6 == 6);
    let psk = keyed.then(|| Psk::new(b"the fuzzer's pre-shared key").unwrap());
    let mut engine: ServerEngine<u8> = ServerEngine::new(ServerEngineConfig {
        programs: vec![ProgramVersions { program: 7, low: 1, high: 2 }],
        max_sessions: MAX_SESSIONS,
        max_slots: MAX_SLOTS,
        max_message: MAX_MESSAGE,
        max_frame: 1472,
        window: 8,
        session_idle: Duration::from_millis(500),
        unused_idle: Duration::from_millis(300),
        max_sessions_per_source: 3,
        reliable,
        psk: psk.clone(),
        seed: 1,
        ..ServerEngineConfig::default()
    });
    let mut now = Instant::now();
    let mut sessions =
        [bind(&mut engine, 0, reliable, psk.clone(), sealed, now), bind(&mut engine, 1, reliable, psk, sealed, now)];
    let mut sent = 0usize;
    // Each frame: op, peer, length (2 bytes), then that many bytes.
    while let &[op, peer, l0, l1, ref tail @ ..] = rest {
        let len = (u16::from_le_bytes([l0, l1]) as usize).min(tail.len());
        let mut frame = tail[..len].to_vec();
        rest = &tail[len..];
        let peer = peer % 4;
        let (token, keys, seal) = &mut sessions[(op >> 1) as usize & 1];
        if op & 1 != 0 && frame.len() >= HEADER_LEN {
            frame[8..16].copy_from_slice(&token.to_le_bytes());
        }
        if op & 0x20 != 0 {
            // Sealed as the session's client would: a valid tag (or AEAD) over whatever the
            // header says.
            if let (Some(k), Ok((h, body))) = (keys, Header::parse(&frame)) {
                frame = match seal {
                    Some(s) => {
                        let (head, ct) = s.send.seal(h, body);
                        [&head[..], ct].concat()
                    }
                    None => [auth::seal(&k.send, h, body).as_bytes(), body].concat(),
                };
            }
        }
        // Over datagrams (a stream's handshake proves its address).
        let limit = if peer >= 2 && !reliable { frame.len() } else { usize::MAX };
        now += Duration::from_millis((op >> 2) as u64 % 8);
        let mut out = |to: &u8, head: &[u8], b: &[u8]| {
            assert!(*to != peer || head.len() + b.len() <= limit, "amplification towards an unproven address");
            let (h, _) = Header::parse(head).expect("the engine sends well-formed headers");
            if h.kind == Kind::Error && h.flags & flags::SEALED == 0 {
                assert!(ErrorMessage::parse(b).is_ok(), "an error's reason is bounded UTF-8");
                assert_eq!(h.total_len as usize, b.len());
            }
            sent += b.len();
        };
        if let Some(call) = engine.handle(peer, &frame, || now, &mut out) {
            let key = call.key;
            assert!(call.args.len() <= MAX_MESSAGE as usize);
            let n = (call.args.len() * (op as usize % 3)).min(MAX_MESSAGE as usize + 1);
            call.reply.resize(n, 0xAB);
            match op >> 6 {
                0 => {
                    engine.finish(key, Status::Ok, &mut out);
                }
                1 => {
                    let mut head = [0u8; HEADER_LEN];
                    if engine.finish_placed(key, Status::Ok, n.min(64), &mut head) {
                        // The header written names the call it answers, as a whole result.
                        let (h, _) = Header::parse(&head).expect("a placed result's header parses");
                        assert_eq!(
                            (h.kind, h.token, h.slot, h.call_no, h.total_len as usize),
                            (Kind::Result, key.token, key.slot, key.call_no, n.min(64))
                        );
                    } else {
                        engine.finish(key, Status::Ok, &mut out);
                    }
                }
                2 if op & 0x20 != 0 => {
                    engine.finish_with(key, Status::Error(ErrorCode::ServerError), &frame, &mut out);
                }
                2 => {
                    engine.finish_with(key, Status::Ok, &frame, &mut out);
                }
                _ => {}
            }
        }
        if engine.poll_timeout().is_some_and(|t| t <= now) {
            engine.handle_timeout(now);
        }
        assert!(engine.session_count() <= MAX_SESSIONS);
        // Results kept until acknowledged and calls being reassembled, per slot: bounded.
        let bound = MAX_SESSIONS * MAX_SLOTS as usize * 2 * (MAX_MESSAGE as usize + 1) + 256 * 1024;
        assert!(engine.buffered_bytes() <= bound, "{} bytes buffered", engine.buffered_bytes());
    }
    let _ = sent;
});
