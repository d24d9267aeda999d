//! Raw exchanges with no RPC layer: this transport's own exchange, and the blocking baseline it
//! is judged by (the spinning one, the machine's floor, is [`super::shm_floor`]).
//!
//! - [`serve`] / [`run`]: echo over a real connection (rings, tripwires, doorbells), in whatever
//!   spin mode the configs say: `lowlat pingpong shm://PATH`.
//! - [`futex_pingpong`]: two threads handing a word back and forth with FUTEX_WAIT/WAKE only,
//!   the blocking floor the blocking mode is compared to.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_shm::{ChannelConfig, ConnectionId, Reply, ShmChannel, ShmError, ShmServer, ShmServerConfig};
use lowlat_sys as sys;

/// The echo handler: the reply is the request, copied from one ring into the other (or, to
/// [`super::cpu_report::ASK`], the serving thread's CPU time).
pub fn echo(_: ConnectionId, request: &[u8], reply: Reply<'_>) {
    let report = super::cpu_report::answer(request);
    // A failed reply closes the connection; the server reports it through `ShmHandler::closed`.
    let _ = reply.send(&[report.as_ref().map_or(request, |a| &a[..])]);
}

/// Serves echo at `path` until `stop` is set.
pub fn serve(path: &Path, config: ShmServerConfig, stop: &AtomicBool) -> Result<(), ShmError> {
    let mut server = ShmServer::bind(path, config)?;
    server.run(&mut echo, stop)
}

/// Connects to an echo server at `path` and makes `rounds` round trips of `size` bytes, each
/// bounded by `timeout`; returns each round trip's latency.
pub fn run(
    path: &Path,
    config: ChannelConfig,
    size: usize,
    rounds: usize,
    timeout: Duration,
) -> Result<Vec<Duration>, ShmError> {
    let mut ch = ShmChannel::connect(path, config)?;
    let payload: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        out.push(round_trip(&mut ch, &payload, timeout)?);
    }
    Ok(out)
}

/// One round trip of `payload` over a connected channel, bounded by `timeout`; its latency.
#[inline]
pub fn round_trip(ch: &mut ShmChannel, payload: &[u8], timeout: Duration) -> Result<Duration, ShmError> {
    let t = Instant::now();
    // The leanest send there is (the RPC client's): one record written in place.
    ch.send_two_within(payload, &[], timeout)?;
    let got = ch.recv(t + timeout)?;
    // Read what came back, as any receiver of a message must (an RPC reads at least its
    // header): a round trip that never touched the echo would not have delivered it.
    let intact = got == payload;
    let took = t.elapsed();
    if !intact {
        return Err(ShmError::Broken(format!("echo of {} bytes came back altered", payload.len())));
    }
    Ok(took)
}

fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        // Best effort: on a machine without that CPU the numbers are just less stable.
        let _ = lowlat_sys::pin_to_cpu(c);
    }
}

/// Round trips between two threads through one shared word, blocking with futexes only (no
/// spinning): the cost of two sleeps and two wake-ups. `cpus`: (caller, echoer). Returns `None`
/// if the exchange stalls for more than a second (it should never).
pub fn futex_pingpong(rounds: usize, cpus: (Option<usize>, Option<usize>)) -> Option<Vec<Duration>> {
    exchange(rounds, cpus, |word, seen| {
        let start = Instant::now();
        while word.load(Ordering::Acquire) == seen {
            if start.elapsed() > Duration::from_secs(1) {
                return false;
            }
            sys::futex_wait(word, seen, Duration::from_millis(100));
        }
        true
    })
}

/// Caller writes odd numbers, echoer even ones; each waits (with `wait`) for the other's write.
fn exchange(
    rounds: usize,
    cpus: (Option<usize>, Option<usize>),
    wait: fn(&AtomicU32, u32) -> bool,
) -> Option<Vec<Duration>> {
    let word = Arc::new(AtomicU32::new(0));
    let w2 = word.clone();
    let echoer = std::thread::spawn(move || {
        pin(cpus.1);
        let mut v = 0u32;
        for _ in 0..rounds {
            if !wait(&w2, v) {
                return false;
            }
            v = v.wrapping_add(2);
            w2.store(v, Ordering::Release);
            sys::futex_wake(&w2);
        }
        true
    });
    pin(cpus.0);
    let mut out = Vec::with_capacity(rounds);
    let mut v = 0u32;
    let mut ok = true;
    for _ in 0..rounds {
        let t = Instant::now();
        word.store(v.wrapping_add(1), Ordering::Release);
        sys::futex_wake(&word);
        if !wait(&word, v.wrapping_add(1)) {
            ok = false;
            break;
        }
        v = v.wrapping_add(2);
        out.push(t.elapsed());
    }
    if !ok {
        // Unstick the echoer so it can be joined.
        word.store(u32::MAX - 1, Ordering::Release);
        sys::futex_wake(&word);
    }
    let echo_ok = echoer.join().unwrap_or(false);
    (ok && echo_ok).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_complete() {
        let f = futex_pingpong(200, (None, None)).expect("futex ping-pong stalled");
        assert_eq!(f.len(), 200);
    }
}
