//! A bound client slot fed whatever comes back (results, errors with reasons, fragment acknowledgements,
//! "working" answers, stale and forged frames), each optionally given the live call's token,
//! slot and call number, and on a keyed session optionally sealed with the server's key, so the
//! fuzzer reaches every branch, with timers firing as time moves on. The first byte chooses
//! the session: reliable (bit 0), keyed (bit 1), sealed as well (bits 1 and 2: frames are then
//! sealed with the server's AEAD key instead), and the first call's size. The slot never
//! panics, completes each call at most once, and hands out results no larger than the session
//! allows; path challenges are answered.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use lowlat_proto::auth::{self, Side};
use lowlat_proto::seal::{SealKeys, Sealer};
use lowlat_proto::wire::{ByteOrder, Header};
use lowlat_proto::{CipherKind, ClientEngineConfig, ClientSlot, Outcome, Psk, Session, HEADER_LEN, MAX_ERROR_MESSAGE};

const MAX_MESSAGE: u32 = 16 << 10;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let (reliable, keyed, sealed) = (mode & 1 != 0, mode & 2 != 0, mode & 6 == 6);
    let session = Session {
        token: 0x1234_5678_9abc_def0,
        slots: 2,
        window: 8,
        server_order: ByteOrder::host(),
        max_message: MAX_MESSAGE,
        max_frame: if reliable { u32::MAX } else { 1472 },
        generation: 3,
        reliable,
        keyed: false,
        sealed: false,
    };
    let psk = Psk::new(b"the fuzzer's pre-shared key").unwrap();
    let client_keys = keyed.then(|| psk.session_keys(1, &[2; 16], session.token, Side::Client));
    let server_keys = psk.session_keys(1, &[2; 16], session.token, Side::Server);
    let kind = CipherKind::ChaCha20Poly1305;
    let client_seal = sealed.then(|| SealKeys::new(kind, &psk.seal_keys(1, &[2; 16], session.token, Side::Client)));
    let mut server_sealer = Sealer::new(kind, &psk.seal_keys(1, &[2; 16], session.token, Side::Server).0);
    let mut slot =
        ClientSlot::new(session, 1, ClientEngineConfig::default()).with_keys(client_keys).with_seal(client_seal);
    let mut now = Instant::now();
    let start = |slot: &mut ClientSlot, now: Instant, size: usize| {
        slot.args_buf().resize(size, 0x5A);
        slot.start(9, now, now + Duration::from_secs(1), &mut |_, _| {}).expect("within the size");
    };
    start(&mut slot, now, (mode as usize >> 2) * 97 % (MAX_MESSAGE as usize));
    while let &[op, l0, l1, ref tail @ ..] = rest {
        let len = (u16::from_le_bytes([l0, l1]) as usize).min(tail.len());
        let mut frame = tail[..len].to_vec();
        rest = &tail[len..];
        if op & 1 != 0 && frame.len() >= HEADER_LEN {
            frame[6..8].copy_from_slice(&1u16.to_le_bytes());
            frame[8..16].copy_from_slice(&session.token.to_le_bytes());
            frame[16..20].copy_from_slice(&slot.call_no().to_le_bytes());
        }
        if op & 0x40 != 0 {
            if let Ok((h, body)) = Header::parse(&frame) {
                frame = if sealed {
                    let (head, ct) = server_sealer.seal(h, body);
                    [&head[..], ct].concat()
                } else {
                    [auth::seal(&server_keys.send, h, body).as_bytes(), body].concat()
                };
            }
        }
        now += Duration::from_millis((op >> 1) as u64 % 16);
        let was_active = slot.is_active();
        let mut sent = |h: &[u8], _: &[u8]| assert!(Header::parse(h).is_ok());
        let done = if op & 0x20 != 0 {
            slot.take_whole_result(&frame).map(|b| b.len())
        } else {
            match slot.handle(&frame, || now, &mut sent) {
                Some(Outcome::Reply(b)) => Some(b.len()),
                Some(Outcome::Failed(_)) => Some(0),
                Some(Outcome::Remote { message, .. }) => {
                    // A reason is handed on as text only once checked (a `&str` is UTF-8).
                    if let Ok(m) = message {
                        assert!(m.len() <= MAX_ERROR_MESSAGE);
                    }
                    Some(0)
                }
                None => None,
            }
        };
        if let Some(n) = done {
            assert!(was_active, "a call completed that was not in flight");
            assert!(n <= MAX_MESSAGE as usize);
            assert!(!slot.is_active());
        }
        if slot.poll_timeout().is_some_and(|t| t <= now) && slot.handle_timeout(now, &mut sent).is_some() {
            assert!(!slot.is_active());
        }
        if !slot.is_active() {
            start(&mut slot, now, len * 31 % (MAX_MESSAGE as usize));
        }
    }
});
