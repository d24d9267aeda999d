//! Hostile clients (scribbling over their whole segment, stopping half way through a message,
//! never consuming results) break only their own connections: an honest client of the same server
//! thread keeps getting correct echoes throughout.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use lowlat_shm::ring::RingError;
use lowlat_shm::{ChannelConfig, Layout, ShmChannel, ShmServerConfig};

const RING: usize = 4096;
const STALL: Duration = Duration::from_millis(50);

/// Writes random bytes over the segment (shared memory: the one unsafe operation of this test), half the time shaped like plausible indices and record
/// headers (a stamp naming a nearby position, a small length, a known kind) so that the server's
/// deeper checks get exercised too.
#[allow(unsafe_code)]
fn scribble(ch: &ShmChannel, rng: &mut Rng) {
    for (base, len) in ch.segment().regions() {
        let words = len / 8;
        for _ in 0..words / 8 {
            let i = (rng.next() as usize) % words;
            let r = rng.next();
            let position = ((r >> 8) as u32 % (4 * RING as u32)) & !63;
            let v: u64 = match r % 4 {
                0 => r,
                1 => u64::from(position),
                2 => u64::from(!position) | ((r >> 40) % 200) << 32 | (1 + (r >> 16) % 3) << 62,
                _ => (r >> 20) % 64,
            };
            // SAFETY: `i < words`, so the 8-byte write lies inside this region of our own
            // mapping (shared with the server, which must cope with any bytes there).
            unsafe { std::ptr::write_volatile(base.cast::<u64>().add(i), v) };
        }
    }
}

#[test]
fn hostile_clients_cannot_hurt_an_honest_one() {
    let dir = Scratch::new("hostile");
    let path = dir.path("s");
    let cfg = ShmServerConfig {
        layout: Layout { call_ring: RING, result_ring: RING },
        stall_limit: STALL,
        max_message: 256 << 10,
        ..ShmServerConfig::default()
    };
    let server = EchoServer::start(&path, cfg);
    let stop = Arc::new(AtomicBool::new(false));

    // The honest client: every echo must be exact, every call answered in time.
    let honest = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
            let (mut n, mut worst) = (0u32, Duration::ZERO);
            while !stop.load(Ordering::Relaxed) {
                let msg = pattern(1 + (n as usize * 37) % 6000, n as u8);
                let t = Instant::now();
                let got = ch.call(&[&msg], t + Duration::from_secs(5)).expect("honest call failed");
                assert!(got == &msg[..], "honest echo {n} corrupted");
                worst = worst.max(t.elapsed());
                n += 1;
            }
            (n, worst)
        })
    };

    let connections = Arc::new(AtomicUsize::new(0));
    // Scribblers: a fresh connection every ~100 ms, garbage written for its whole life, with sends
    // (which ring the doorbell when the server sleeps) so the server looks at the garbage.
    let scribbler = {
        let (path, stop, connections) = (path.clone(), stop.clone(), connections.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            while !stop.load(Ordering::Relaxed) {
                let mut ch = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
                connections.fetch_add(1, Ordering::Relaxed);
                let until = Instant::now() + Duration::from_millis(100);
                while Instant::now() < until {
                    scribble(&ch, &mut rng);
                    let _ = ch.send(&[b"junk"], Instant::now() + Duration::from_millis(1));
                }
            }
        })
    };

    // A client that stops half way through a streamed message, then sends a whole message in
    // the middle of it (a protocol violation the server must detect).
    let mut truncated = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    let big = vec![5u8; 100_000];
    let r = truncated.raw_calls().send(&[&big], usize::MAX, |_, _| -> Result<(), RingError> {
        Err(RingError::Corrupt { what: "test: stop streaming here" })
    });
    assert!(r.is_err(), "the ring must have filled before the message ended");
    // A client that never reads its results: its result ring fills, the server keeps its
    // replies (serving the others) for at most STALL, then drops it.
    let mut hoarder = ShmChannel::connect(&path, ChannelConfig::default()).unwrap();
    for _ in 0..200 {
        if hoarder.send(&[&[1u8; 100]], Instant::now() + Duration::from_millis(200)).is_err() {
            break;
        }
    }

    std::thread::sleep(Duration::from_millis(2000));
    let r = truncated.raw_calls().send(&[b"whole"], usize::MAX, |_, _| -> Result<(), RingError> {
        Err(RingError::Corrupt { what: "test: no room" })
    });
    drop(r);
    stop.store(true, Ordering::SeqCst);
    scribbler.join().unwrap();
    let (calls, worst) = honest.join().unwrap();
    let scribbled = connections.load(Ordering::Relaxed);
    // Every scribbled connection and the hoarder get closed; the truncated one is closed once it
    // breaks the streaming protocol.
    server.wait_for("hostile connections closed", |c| c.closed.load(Ordering::SeqCst) >= scribbled + 2);
    eprintln!("honest client: {calls} correct echoes, worst {worst:?}; {scribbled} scribbled connections closed");
    assert!(calls > 200, "honest client made only {calls} calls");
    assert!(worst < Duration::from_secs(2), "honest client delayed by {worst:?}");
    drop(truncated);
    drop(hoarder);
    server.wait_for("all hostile connections gone", |c| c.live.load(Ordering::SeqCst) == 0);
    // The connections whose rings were broken are counted as such (the hoarder's stall is not);
    // the honest one never was.
    let corrupt = server.stop();
    assert!(corrupt >= 1 && corrupt <= scribbled as u64 + 1, "{corrupt} of {scribbled} scribbled connections");
}
