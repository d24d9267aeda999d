//! The reactor of async calls: one process-wide thread, started on first use, that waits in
//! epoll on the descriptors parked calls wait for (a slot's socket; over shared memory, the
//! result eventfd the server rings for a parked client and the liveness socket) and on their
//! deadlines, and wakes each call's [`Waker`] when one turns readable or its time comes.
//!
//! It runs no futures and needs no executor: any executor's wakers work (tokio's, a hand-rolled
//! `block_on`). A call spins for its budget before it parks, so the reactor is on the path only of
//! replies slower than the spin budget.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use lowlat_sys::{Epoll, EventFd};

use crate::driver::{ClientChannel, WakeOn};

/// A call parked in the reactor; dropping it (the call was polled again, finished or was
/// dropped) forgets its waker.
pub(crate) struct Parking {
    token: u64,
}

impl Drop for Parking {
    fn drop(&mut self) {
        let mut st = reactor().state();
        // Its deadline, if any, stays in the heap, stale: skipped when it comes up.
        st.wakers.remove(&self.token);
        st.compact();
    }
}

struct Reactor {
    epoll: Epoll,
    /// Rung when a deadline earlier than every other is added, so the thread's wait shortens.
    bell: EventFd,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The next token (0 is the bell's).
    next: u64,
    /// Parked calls by token: their waker.
    wakers: HashMap<u64, Waker>,
    /// Deadlines, earliest first, with their token. An entry whose token is no longer parked
    /// (woken by its descriptor, or forgotten) is stale and skipped: removed lazily, so that
    /// parking and unparking allocate nothing once the heap has grown (a tree allocated and freed
    /// a node for about every seventh call).
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl State {
    /// The earliest deadline still parked, stale entries before it dropped.
    fn first_timer(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, token))) = self.timers.peek() {
            if self.wakers.contains_key(&token) {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    /// Drops stale deadlines once they outnumber the live ones (tokens are never reused, so a
    /// token not parked is stale), in place: the heap stays within twice the calls parked.
    fn compact(&mut self) {
        if self.timers.len() > 2 * self.wakers.len() + 64 {
            let wakers = &self.wakers;
            self.timers.retain(|Reverse((_, token))| wakers.contains_key(token));
        }
    }
}

impl Reactor {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut woken: Vec<Waker> = Vec::new();
        loop {
            let timeout = self.state().first_timer().map(|at| at.saturating_duration_since(Instant::now()));
            let got = match self.epoll.wait(&mut events, timeout) {
                Ok(got) => got,
                Err(_) => {
                    // Nothing recoverable is expected here (EBADF, EINVAL); waiting a moment
                    // keeps deadlines served rather than spinning on the error.
                    std::thread::sleep(Duration::from_millis(1));
                    &events[..0]
                }
            };
            {
                let mut st = self.state();
                for ev in got {
                    let token = ev.u64;
                    if token == 0 {
                        self.bell.drain();
                    } else if let Some(w) = st.wakers.remove(&token) {
                        woken.push(w);
                    }
                }
                let now = Instant::now();
                while let Some(&Reverse((at, token))) = st.timers.peek() {
                    if at > now {
                        break;
                    }
                    st.timers.pop();
                    if let Some(w) = st.wakers.remove(&token) {
                        woken.push(w);
                    }
                }
                st.compact();
            }
            // Woken outside the lock: a waker may run its task here (a simple executor), which
            // may park again.
            for w in woken.drain(..) {
                w.wake();
            }
        }
    }
}

/// The reactor thread's id, once it runs (0 before).
static THREAD: AtomicI32 = AtomicI32::new(0);

/// Lets the reactor thread run only on `cpus` (starting it, if no async call has yet). Errors
/// when a CPU does not exist or none is allowed.
pub(crate) fn pin(cpus: &[usize]) -> io::Result<()> {
    reactor();
    // Its thread notes its id first thing; a start that takes this long is not going to end.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match THREAD.load(Ordering::Acquire) {
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(100)),
            0 => return Err(io::Error::new(io::ErrorKind::TimedOut, "the reactor thread did not start")),
            tid => return lowlat_sys::process::pin_thread(tid, cpus),
        }
    }
}

fn reactor() -> &'static Reactor {
    static REACTOR: OnceLock<&'static Reactor> = OnceLock::new();
    REACTOR.get_or_init(|| {
        let r: &'static Reactor = Box::leak(Box::new(Reactor {
            epoll: Epoll::new().expect("lowlat reactor: epoll_create1"),
            bell: EventFd::new().expect("lowlat reactor: eventfd"),
            state: Mutex::new(State { next: 1, ..State::default() }),
        }));
        r.epoll.add(r.bell.as_raw_fd(), libc::EPOLLIN as u32, 0).expect("lowlat reactor: watch its bell");
        std::thread::Builder::new()
            .name("lowlat-reactor".into())
            .spawn(move || {
                // Termination signals are the application's to take, never the reactor's.
                let _ = lowlat_sys::block_server_signals();
                THREAD.store(lowlat_sys::process::thread_id(), Ordering::Release);
                r.run()
            })
            .expect("lowlat reactor: spawn its thread");
        r
    })
}

/// Parks a call until one of `fds` turns readable or `deadline` passes, whichever first; then
/// wakes `waker` (once). Level-triggered: a descriptor readable already wakes it at once, so
/// nothing that arrived before parking is missed.
pub(crate) fn park(fds: &[RawFd], deadline: Option<Instant>, waker: &Waker) -> io::Result<Parking> {
    let r = reactor();
    let mut st = r.state();
    let token = st.next;
    st.next += 1;
    st.wakers.insert(token, waker.clone());
    let parking = Parking { token };
    let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
    for &fd in fds {
        // A descriptor parked before is still in the set, disarmed (one-shot): re-armed here,
        // for the new token.
        let added = match r.epoll.add(fd, events, token) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => r.epoll.modify(fd, events, token),
            other => other,
        };
        if let Err(e) = added {
            drop(st);
            return Err(e);
        }
    }
    if let Some(at) = deadline {
        // Against a stale first entry too: the thread then wakes at it, which is sooner.
        let earliest = st.timers.peek().is_none_or(|&Reverse((first, _))| at < first);
        st.timers.push(Reverse((at, token)));
        if earliest {
            r.bell.ring();
        }
    }
    Ok(parking)
}

/// Parks an async call whose spin on `chan` found no frame, until the channel may have one or
/// `timeout` (its engine's next timer) passes; `None` when a frame may be there already (poll
/// again at once). `check_peer`: the call was woken and found nothing, so first look at whether
/// the peer is gone (a dead peer makes a liveness descriptor readable for good).
pub(crate) fn park_on<C: ClientChannel + ?Sized>(
    chan: &mut C,
    timeout: Option<Duration>,
    check_peer: bool,
    waker: &Waker,
) -> io::Result<Option<Parking>> {
    if check_peer {
        chan.unpark(true)?;
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    let parked = match chan.park()? {
        WakeOn::Now => return Ok(None),
        WakeOn::Readable([a, b]) => match (a, b) {
            (Some(a), Some(b)) => park(&[a, b], deadline, waker),
            (Some(fd), None) | (None, Some(fd)) => park(&[fd], deadline, waker),
            (None, None) => park(&[], deadline, waker),
        },
        WakeOn::After(d) => {
            let at = Instant::now() + d;
            park(&[], Some(deadline.map_or(at, |t| t.min(at))), waker)
        }
    };
    match parked {
        Ok(p) => Ok(Some(p)),
        Err(e) => {
            let _ = chan.unpark(false);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn wait_for(what: &str, f: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn stale_deadlines_are_skipped_and_do_not_pile_up() {
        let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        let mut st = State::default();
        let t0 = Instant::now();
        for token in 1..=1000u64 {
            st.wakers.insert(token, waker.clone());
            st.timers.push(Reverse((t0 + Duration::from_millis(token), token)));
        }
        // Token 1 woken by its descriptor: its deadline is stale, the next one comes first.
        st.wakers.remove(&1);
        assert_eq!(st.first_timer(), Some(t0 + Duration::from_millis(2)));
        // All but the last forgotten: the heap is compacted to what is still parked.
        for token in 2..1000u64 {
            st.wakers.remove(&token);
            st.compact();
        }
        assert!(st.timers.len() <= 2 + 64, "{} deadlines kept for 1 parked call", st.timers.len());
        assert_eq!(st.first_timer(), Some(t0 + Duration::from_millis(1000)));
        st.wakers.remove(&1000);
        assert_eq!(st.first_timer(), None);
    }

    #[test]
    fn a_parked_call_wakes_on_its_descriptor_or_its_deadline_and_not_once_forgotten() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let fd = EventFd::new().unwrap();

        // A readable descriptor wakes, once.
        let p = park(&[fd.as_raw_fd()], None, &waker).unwrap();
        fd.ring();
        wait_for("the descriptor's wake-up", || count.0.load(Ordering::SeqCst) == 1);
        drop(p);

        // Already readable when parked (level-triggered): wakes at once, nothing is missed.
        let p = park(&[fd.as_raw_fd()], None, &waker).unwrap();
        wait_for("the wake-up of a descriptor readable already", || count.0.load(Ordering::SeqCst) == 2);
        drop(p);
        fd.drain();

        // A deadline wakes.
        let p = park(&[fd.as_raw_fd()], Some(Instant::now() + Duration::from_millis(20)), &waker).unwrap();
        wait_for("the deadline's wake-up", || count.0.load(Ordering::SeqCst) == 3);
        drop(p);

        // Forgotten before its descriptor or deadline: never wakes.
        let p = park(&[fd.as_raw_fd()], Some(Instant::now() + Duration::from_millis(20)), &waker).unwrap();
        drop(p);
        fd.ring();
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(count.0.load(Ordering::SeqCst), 3, "a forgotten parking woke its waker");
    }
}
