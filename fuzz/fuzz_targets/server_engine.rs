//! The server engine fed whatever peers send: first an honest client binds (one unreliable and
//! one reliable session), then the input is a sequence of frames from four peers, each
//! optionally given a live session's token (so the fuzzer reaches calls, fragments,
//! acknowledgements and probes), with time moving on. The engine never panics, never holds more
//! sessions than allowed, keeps its buffers within sessions x slots x message size, and sends
//! every failed call's reason (here: whatever bytes the fuzzer gives) as bounded UTF-8.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use lowlat_proto::wire::{BindRequest, ByteOrder, ErrorMessage, Header, Kind, BIND_RELIABLE, PROTOCOL_VERSION};
use lowlat_proto::{ErrorCode, ProgramVersions, ServerConfig, ServerEngine, Status, HEADER_LEN};

const MAX_SESSIONS: usize = 4;
const MAX_SLOTS: u16 = 4;
const MAX_MESSAGE: u32 = 16 << 10;

fn bind(engine: &mut ServerEngine<u8>, peer: u8, reliable: bool, now: Instant) -> u64 {
    let req = BindRequest {
        program: 7,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::native(),
        flags: if reliable { BIND_RELIABLE } else { 0 },
        max_message: MAX_MESSAGE,
        max_frame: if reliable { u32::MAX } else { 1472 },
        slots: MAX_SLOTS,
        window: 8,
        nonce: peer as u64,
    };
    let mut h = Header::new(Kind::Bind);
    h.call_no = peer as u32;
    let frame = [&h.to_bytes()[..], &req.emit()].concat();
    let mut token = 0;
    engine.handle(peer, &frame, || now, &mut |_, h, _| {
        if let Ok((h, _)) = Header::parse(h) {
            token = h.token;
        }
    });
    token
}

fuzz_target!(|data: &[u8]| {
    let mut engine: ServerEngine<u8> = ServerEngine::new(ServerConfig {
        programs: vec![ProgramVersions { program: 7, low: 1, high: 2 }],
        max_sessions: MAX_SESSIONS,
        max_slots: MAX_SLOTS,
        max_message: MAX_MESSAGE,
        max_frame: 1472,
        window: 8,
        session_idle: Duration::from_millis(500),
        seed: 1,
    });
    let mut now = Instant::now();
    let tokens = [bind(&mut engine, 0, false, now), bind(&mut engine, 1, true, now)];
    let mut sent = 0usize;
    let mut rest = data;
    // Each frame: op, peer, length (2 bytes), then that many bytes.
    while let &[op, peer, l0, l1, ref tail @ ..] = rest {
        let len = (u16::from_le_bytes([l0, l1]) as usize).min(tail.len());
        let mut frame = tail[..len].to_vec();
        rest = &tail[len..];
        let peer = peer % 4;
        if op & 1 != 0 && frame.len() >= HEADER_LEN {
            frame[8..16].copy_from_slice(&tokens[(op >> 1) as usize & 1].to_le_bytes());
        }
        now += Duration::from_millis((op >> 2) as u64 % 8);
        let mut out = |_: &u8, h: &[u8; HEADER_LEN], b: &[u8]| {
            let (h, _) = Header::parse(h).expect("the engine sends well-formed headers");
            if h.kind == Kind::Error {
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
                    if engine.finish_placed(key, Status::Ok, n.min(64)).is_none() {
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
