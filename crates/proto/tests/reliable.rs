//! A reliable session (shared memory, TCP) between a client slot and a server engine, frames
//! handed over directly: the one-frame fast paths, the client's (`take_whole_result`) and the
//! server's (`take_whole_call`), must accept exactly the results and calls the other side sends
//! whole, and leave every other frame to `handle`, which still serves it. And over datagrams,
//! what a call's first fragment claims commits no memory its sender has not sent.

use std::time::{Duration, Instant};

use lowlat_proto::wire::{BindRequest, ByteOrder, BIND_RELIABLE, PROTOCOL_VERSION};
use lowlat_proto::*;

const PROGRAM: u32 = 0x2000_4C4C;
const PEER: u8 = 1;

type Frames = Vec<Vec<u8>>;

fn frame(h: &[u8], b: &[u8]) -> Vec<u8> {
    [h, b].concat()
}

/// A server engine and a bound slot of a session with the given reliability.
fn bound(reliable: bool) -> (ServerEngine<u8>, ClientSlot) {
    let mut server = ServerEngine::new(ServerEngineConfig {
        programs: vec![ProgramVersions { program: PROGRAM, low: 1, high: 1 }],
        seed: 11,
        reliable,
        ..ServerEngineConfig::default()
    });
    let req = BindRequest {
        program: PROGRAM,
        version: 1,
        proto_min: PROTOCOL_VERSION,
        proto_max: PROTOCOL_VERSION,
        byte_order: ByteOrder::host(),
        flags: if reliable { BIND_RELIABLE } else { 0 },
        max_message: 1 << 20,
        max_frame: if reliable { u32::MAX } else { 1472 },
        slots: 2,
        window: 8,
        nonce: 99,
    };
    let now = Instant::now();
    let cfg = ClientEngineConfig::default();
    let mut binder = Binder::new(req, &cfg, now, now + Duration::from_secs(1));
    let mut to_server = Frames::new();
    binder.start(now, &mut |h, b| to_server.push(frame(h, b)));
    // Over datagrams the server asks for a cookie first: one round more.
    let rounds = if reliable { 1 } else { 2 };
    for round in 1..=rounds {
        let mut to_client = Frames::new();
        for f in std::mem::take(&mut to_server) {
            assert!(server.handle(PEER, &f, || now, &mut |_, h, b| to_client.push(frame(h, b))).is_none());
        }
        assert_eq!(to_client.len(), 1);
        let got = binder.handle(&to_client[0], now, &mut |h, b| to_server.push(frame(h, b)));
        if round < rounds {
            assert!(got.is_none(), "a cookie round");
            continue;
        }
        let bound = got.expect("an answer").expect("a session");
        assert_eq!(bound.session.reliable, reliable);
        return (server, ClientSlot::new(bound.session, 1, cfg));
    }
    unreachable!()
}

/// Sends a call from `slot` and has the server answer it with `result` (through `finish`, or
/// placed in the transport's memory through `finish_placed` if `placed`); returns the frames
/// the server sent.
fn answer(server: &mut ServerEngine<u8>, slot: &mut ClientSlot, result: &[u8], placed: bool) -> Frames {
    let now = Instant::now();
    slot.args_buf().extend_from_slice(b"arguments");
    let mut calls = Frames::new();
    slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
    let mut replies = Frames::new();
    for f in &calls {
        let mut out = |_: &u8, h: &[u8], b: &[u8]| replies.push(frame(h, b));
        let Some(call) = server.handle(PEER, f, || now, &mut out) else { continue };
        assert_eq!((call.proc_no, call.args), (5, &b"arguments"[..]));
        let key = call.key;
        if placed {
            let mut head = [0u8; HEADER_LEN];
            assert!(server.finish_placed(key, Status::Ok, result.len(), &mut head), "placed on a reliable session");
            replies.push(frame(&head, result));
        } else {
            call.reply.extend_from_slice(result);
            assert!(server.finish(key, Status::Ok, &mut out));
        }
    }
    replies
}

#[test]
fn whole_results_are_taken_by_their_header() {
    let (mut server, mut slot) = bound(true);
    for (i, len) in [0usize, 1, 100, 4096, 70_000].into_iter().enumerate() {
        let result: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
        let replies = answer(&mut server, &mut slot, &result, i % 2 == 1);
        assert_eq!(replies.len(), 1, "a reliable session's result goes in one frame");
        assert_eq!(slot.take_whole_result(&replies[0]), Some(&result[..]), "result of {len} bytes");
        assert!(!slot.is_active(), "the call is complete");
        assert_eq!(slot.poll_timeout(), None, "no timer is left running");
        // The same frame again is stale, on either path.
        assert_eq!(slot.take_whole_result(&replies[0]), None);
        let nothing_sent = &mut |_: &[u8], _: &[u8]| panic!("the engine sent something");
        assert_eq!(slot.handle(&replies[0], Instant::now, nothing_sent), None);
    }
}

#[test]
fn other_frames_are_left_to_handle() {
    let (mut server, mut slot) = bound(true);
    let good = answer(&mut server, &mut slot, b"result", false).remove(0);
    // Each alteration of the one header the fast path accepts: handle must see these.
    let altered = |at: usize, byte: u8| {
        let mut f = good.clone();
        f[at] = byte;
        f
    };
    let flags_cleared = altered(4, 0);
    let other_slot = altered(6, 0);
    let other_token = altered(8, good[8] ^ 1);
    let earlier_call = altered(16, good[16].wrapping_sub(1));
    let longer_than_sent = altered(24, good[24] + 1);
    let offset = altered(28, 6);
    let truncated = good[..HEADER_LEN - 1].to_vec();
    for f in [&flags_cleared, &other_slot, &other_token, &earlier_call, &longer_than_sent, &offset, &truncated] {
        assert_eq!(slot.take_whole_result(f), None, "{f:?}");
        assert!(slot.is_active());
    }
    // `handle` still completes the call from a result it can read (here: flags cleared).
    let nothing_sent = &mut |_: &[u8], _: &[u8]| panic!("the engine sent something");
    assert_eq!(slot.handle(&flags_cleared, Instant::now, nothing_sent), Some(Outcome::Reply(&b"result"[..])));

    // An error is not a result: handle reports it.
    let now = Instant::now();
    slot.args_buf().clear();
    let mut calls = Frames::new();
    slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
    let mut replies = Frames::new();
    let call = server.handle(PEER, &calls[0], || now, &mut |_, h, b| replies.push(frame(h, b))).unwrap();
    let key = call.key;
    server.finish(key, Status::Error(ErrorCode::UnknownProcedure), &mut |_, h, b| replies.push(frame(h, b)));
    assert_eq!(slot.take_whole_result(&replies[0]), None);
    assert_eq!(
        slot.handle(&replies[0], Instant::now, nothing_sent),
        Some(Outcome::Remote { code: ErrorCode::UnknownProcedure, message: Ok("") })
    );
}

/// A procedure's reason for failing reaches the caller intact, on either kind of session; one
/// too long for a frame is cut between characters; a malformed one is reported as such, never
/// taken for text.
#[test]
fn an_errors_reason_reaches_the_client() {
    for reliable in [true, false] {
        let (mut server, mut slot) = bound(reliable);
        let now = Instant::now();
        let mut fail = |slot: &mut ClientSlot, code: ErrorCode, reason: &[u8]| -> Frames {
            let mut calls = Frames::new();
            slot.args_buf().clear();
            slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
            let mut replies = Frames::new();
            let call = server.handle(PEER, &calls[0], || now, &mut |_, h, b| replies.push(frame(h, b))).unwrap();
            let key = call.key;
            call.reply.extend_from_slice(reason);
            server.finish(key, Status::Error(code), &mut |_, h, b| replies.push(frame(h, b)));
            replies
        };
        let replies = fail(&mut slot, ErrorCode::ServerError, "insufficient funds: 3 < 5 €".as_bytes());
        let nothing = &mut |_: &[u8], _: &[u8]| {};
        assert_eq!(
            slot.handle(&replies[0], Instant::now, nothing),
            Some(Outcome::Remote { code: ErrorCode::ServerError, message: Ok("insufficient funds: 3 < 5 €") }),
            "reliable {reliable}"
        );
        // Longer than an error frame carries: cut to the limit, between characters.
        let long = "é".repeat(MAX_ERROR_MESSAGE);
        let replies = fail(&mut slot, ErrorCode::GarbageArgs, long.as_bytes());
        let (h, body) = Header::parse(&replies[0]).unwrap();
        assert_eq!((h.kind, h.total_len as usize), (Kind::Error, body.len()));
        assert_eq!(body, &long.as_bytes()[..MAX_ERROR_MESSAGE]);
        match slot.handle(&replies[0], Instant::now, nothing) {
            Some(Outcome::Remote { code: ErrorCode::GarbageArgs, message: Ok(m) }) => {
                assert_eq!(m, "é".repeat(MAX_ERROR_MESSAGE / 2))
            }
            other => panic!("{other:?}"),
        }
        // A peer's reason that is not UTF-8 is reported as malformed.
        let mut replies = fail(&mut slot, ErrorCode::ServerError, b"ok");
        replies[0].truncate(HEADER_LEN);
        replies[0].extend_from_slice(&[0x6f, 0xff]);
        assert_eq!(
            slot.handle(&replies[0], Instant::now, nothing),
            Some(Outcome::Remote {
                code: ErrorCode::ServerError,
                message: Err(wire::WireError::MessageNotUtf8 { valid_up_to: 1 })
            })
        );
    }
}

#[test]
fn an_unreliable_session_never_takes_the_fast_path() {
    let (mut server, mut slot) = bound(false);
    let replies = answer(&mut server, &mut slot, b"result", false);
    assert_eq!(replies.len(), 1);
    assert_eq!(slot.take_whole_result(&replies[0]), None, "retransmission timers need `handle`");
    let nothing_sent = &mut |_: &[u8], _: &[u8]| panic!("the engine sent something");
    assert_eq!(slot.handle(&replies[0], Instant::now, nothing_sent), Some(Outcome::Reply(&b"result"[..])));
}

/// A call given up by the caller (its channel failed) frees the slot: the next call goes out
/// under a new number, and a late result for the abandoned one completes nothing.
#[test]
fn an_abandoned_call_frees_the_slot_and_its_late_result_is_stale() {
    for reliable in [true, false] {
        let (mut server, mut slot) = bound(reliable);
        let now = Instant::now();
        slot.args_buf().extend_from_slice(b"arguments");
        let mut calls = Frames::new();
        slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
        let abandoned = slot.call_no();
        slot.abandon();
        assert!(!slot.is_active(), "reliable {reliable}");
        assert_eq!(slot.poll_timeout(), None, "nothing to retransmit or acknowledge");
        // The server still answers the abandoned call.
        let mut late = Frames::new();
        for f in &calls {
            let mut out = |_: &u8, h: &[u8], b: &[u8]| late.push(frame(h, b));
            if let Some(call) = server.handle(PEER, f, || now, &mut out) {
                let key = call.key;
                call.reply.extend_from_slice(b"too late");
                assert!(server.finish(key, Status::Ok, &mut out));
            }
        }
        assert!(!late.is_empty());
        // The next call is sent (no panic: the slot is free) and completes with its own result.
        let replies = answer(&mut server, &mut slot, b"on time", false);
        assert_ne!(slot.call_no(), abandoned);
        let nothing = &mut |_: &[u8], _: &[u8]| {};
        for f in &late {
            assert_eq!(slot.take_whole_result(f), None);
            assert_eq!(slot.handle(f, Instant::now, nothing), None, "reliable {reliable}");
        }
        let got = replies.iter().find_map(|f| match slot.handle(f, Instant::now, nothing) {
            Some(Outcome::Reply(b)) => Some(b.to_vec()),
            _ => None,
        });
        assert_eq!(got.as_deref(), Some(&b"on time"[..]), "reliable {reliable}");
    }
}

/// A server that restarted refuses the session of a call's first transmission. Over a reliable
/// session the call went on a channel opened to the new server, so no earlier incarnation can
/// have run it: it is safe to bind again and resend. Over datagrams an earlier copy may have
/// reached the old server: not safe.
#[test]
fn a_restarted_servers_refusal_is_retry_safe_only_on_a_reliable_session() {
    for reliable in [true, false] {
        let (old, mut slot) = bound(reliable);
        let mut new = ServerEngine::new(ServerEngineConfig {
            programs: vec![ProgramVersions { program: PROGRAM, low: 1, high: 1 }],
            seed: 12,
            ..ServerEngineConfig::default()
        });
        assert_ne!(new.generation(), old.generation());
        let now = Instant::now();
        let mut calls = Frames::new();
        slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
        let mut refusals = Frames::new();
        for f in &calls {
            assert!(new.handle(PEER, f, || now, &mut |_, h, b| refusals.push(frame(h, b))).is_none());
        }
        let outcome = slot.handle(&refusals[0], || now, &mut |_, _| {});
        let want = CallError::SessionLost { restarted: true, retry_safe: reliable };
        assert_eq!(outcome, Some(Outcome::Failed(want)), "reliable {reliable}");
    }
}

/// Starts a call of procedure 5 with `args` from `slot`; returns the frames it sent.
fn call_frames(slot: &mut ClientSlot, args: &[u8]) -> Frames {
    let now = Instant::now();
    slot.args_buf().clear();
    slot.args_buf().extend_from_slice(args);
    let mut calls = Frames::new();
    slot.start(5, now, now + Duration::from_secs(1), &mut |h, b| calls.push(frame(h, b))).unwrap();
    calls
}

/// Finishes `key` with `result`; returns what the server sent.
fn finish(server: &mut ServerEngine<u8>, key: CallKey, result: &[u8]) -> Frames {
    let mut replies = Frames::new();
    assert!(server.finish_with(key, Status::Ok, result, &mut |_, h, b| replies.push(frame(h, b))));
    replies
}

#[test]
fn whole_calls_are_taken_by_their_header() {
    let (mut server, mut slot) = bound(true);
    for (i, len) in [0usize, 1, 100, 4096, 70_000].into_iter().enumerate() {
        let args: Vec<u8> = (0..len).map(|k| (k * 3 + i) as u8).collect();
        let calls = call_frames(&mut slot, &args);
        assert_eq!(calls.len(), 1, "a reliable session's call goes in one frame");
        let call = server.take_whole_call(PEER, &calls[0]).expect("a whole call is taken");
        assert_eq!((call.proc_no, call.args), (5, &args[..]), "call of {len} bytes");
        assert_eq!(call.key.slot, 1);
        let key = call.key;
        // The same frame again is a stale repeat: not on the fast path, and not run again.
        assert!(server.take_whole_call(PEER, &calls[0]).is_none(), "a running call is not taken twice");
        let result = vec![i as u8; len / 2];
        let replies = finish(&mut server, key, &result);
        assert_eq!(slot.take_whole_result(&replies[0]), Some(&result[..]));
        assert!(server.take_whole_call(PEER, &calls[0]).is_none(), "a finished call is not taken again");
        let silent = &mut |_: &u8, _: &[u8], _: &[u8]| panic!("a stale repeat was answered");
        assert!(server.handle(PEER, &calls[0], Instant::now, silent).is_none(), "nor run again by handle");
    }
    assert_eq!(server.stats.calls, 5);
}

#[test]
fn other_call_frames_are_left_to_the_general_path() {
    let (mut server, mut slot) = bound(true);
    // One call first, so that the slot's call numbers are under way.
    let first = call_frames(&mut slot, b"first");
    let key = server.take_whole_call(PEER, &first[0]).unwrap().key;
    let replies = finish(&mut server, key, b"ok");
    assert!(slot.take_whole_result(&replies[0]).is_some());

    let good = call_frames(&mut slot, b"arguments").remove(0);
    let altered = |at: usize, byte: u8| {
        let mut f = good.clone();
        f[at] = byte;
        f
    };
    let bad_magic = altered(0, b'X');
    let other_version = altered(2, good[2] + 1);
    let other_kind = altered(3, 6); // an Ack
    let flags_cleared = altered(4, 0);
    let other_slot = altered(6, 0);
    let other_token = altered(8, good[8] ^ 1);
    let stale_call = altered(16, good[16].wrapping_sub(1));
    let skipped_ahead = altered(16, good[16].wrapping_add(1));
    let longer_than_sent = altered(24, good[24] + 1);
    let offset = altered(28, 8);
    let truncated = good[..HEADER_LEN - 1].to_vec();
    for f in [
        &bad_magic,
        &other_version,
        &other_kind,
        &flags_cleared,
        &other_slot,
        &other_token,
        &stale_call,
        &skipped_ahead,
        &longer_than_sent,
        &offset,
        &truncated,
    ] {
        assert!(server.take_whole_call(PEER, f).is_none(), "{f:?}");
    }
    assert_eq!(server.stats.calls, 1, "nothing was taken");
    // The general path still serves a call it can read (here: a call number ahead of the one
    // expected, which a client may send after giving up on a call).
    let mut out = |_: &u8, _: &[u8], _: &[u8]| {};
    let call = server.handle(PEER, &skipped_ahead, Instant::now, &mut out).expect("handle runs it");
    assert_eq!(call.args, b"arguments");
    let key = call.key;
    let mut replies = Frames::new();
    assert!(server.finish(key, Status::Ok, &mut |_, h, b| replies.push(frame(h, b))));
    // A call larger than the session allows (1 MiB) is answered by handle, not taken.
    let (h, _) = Header::parse(&good).unwrap();
    let len = (1 << 20) + 1;
    let big = frame(&Header::whole_call(h.token, h.slot, h.call_no + 2, 5, len).to_bytes(), &vec![1u8; len as usize]);
    assert!(server.take_whole_call(PEER, &big).is_none());
    let mut errors = Frames::new();
    assert!(server.handle(PEER, &big, Instant::now, &mut |_, h, b| errors.push(frame(h, b))).is_none());
    let (h, _) = Header::parse(&errors[0]).unwrap();
    assert_eq!((h.kind, ErrorCode::from_u32(h.proc_or_code)), (Kind::Error, ErrorCode::TooLarge));
}

#[test]
fn an_unreliable_session_never_takes_the_call_fast_path() {
    let (mut server, mut slot) = bound(false);
    let calls = call_frames(&mut slot, b"arguments");
    assert!(server.take_whole_call(PEER, &calls[0]).is_none(), "retransmitted calls need `handle`");
    let mut out = |_: &u8, _: &[u8], _: &[u8]| {};
    let call = server.handle(PEER, &calls[0], Instant::now, &mut out).expect("handle runs it");
    assert_eq!(call.args, b"arguments");
}

/// A fragment of a call claiming 1 MiB makes the server hold what came, within the sender's
/// window, not the claimed length (which it once zeroed at the first fragment: a datagram per
/// slot of a bound session committed 4 MiB each); a fragment from beyond the window is refused.
#[test]
fn a_call_fragment_commits_no_more_than_the_window() {
    let (mut server, mut slot) = bound(false);
    let calls = call_frames(&mut slot, &vec![7u8; 1 << 20]);
    // The window's fragments go out at once, and no more.
    assert!((2..=8).contains(&calls.len()), "{}", calls.len());
    let mut out = |_: &u8, _: &[u8], _: &[u8]| {};
    assert!(server.handle(PEER, &calls[0], Instant::now, &mut out).is_none());
    let frag = calls[0].len() - HEADER_LEN;
    let held = server.buffered_bytes();
    assert!(held <= 8 * frag, "holds {held} bytes after one fragment");
    // Its second fragment, moved far beyond the window: refused, nothing more held.
    let (mut h, body) = Header::parse(&calls[1]).unwrap();
    h.offset = 600 * frag as u32;
    let malformed = server.stats.malformed;
    assert!(server.handle(PEER, &frame(&h.to_bytes(), body), Instant::now, &mut out).is_none());
    assert_eq!(server.stats.malformed, malformed + 1);
    assert_eq!(server.buffered_bytes(), held);
    // The honest rest still makes the call whole.
    for f in &calls[1..] {
        assert!(server.handle(PEER, f, Instant::now, &mut out).is_none());
    }
    assert!(server.buffered_bytes() <= 8 * frag);
}
