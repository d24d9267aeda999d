//! The reactor of async calls: one process-wide thread, started on first use, that waits in
//! epoll on the descriptors parked calls wait for (a slot's socket; over shared memory, the
//! result eventfd the server rings for a parked client and the liveness socket) and on their
//! deadlines, and wakes each call's [`Waker`] when one turns readable or its time comes.
//!
//! It runs no futures and needs no executor: any executor's wakers work (tokio's, a hand-rolled
//! `block_on`). A call spins for its budget before it parks, so the reactor is on the path only of
//! replies slower than the spin budget.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
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
        if let Some((_, Some(at))) = st.wakers.remove(&self.token) {
            st.timers.remove(&(at, self.token));
        }
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
    /// Parked calls by token: their waker and deadline.
    wakers: HashMap<u64, (Waker, Option<Instant>)>,
    timers: BTreeSet<(Instant, u64)>,
}

impl Reactor {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut woken: Vec<Waker> = Vec::new();
        loop {
            let timeout = self.state().timers.first().map(|(at, _)| at.saturating_duration_since(Instant::now()));
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
                    } else if let Some((w, at)) = st.wakers.remove(&token) {
                        if let Some(at) = at {
                            st.timers.remove(&(at, token));
                        }
                        woken.push(w);
                    }
                }
                let now = Instant::now();
                while let Some(&(at, token)) = st.timers.first() {
                    if at > now {
                        break;
                    }
                    st.timers.pop_first();
                    if let Some((w, _)) = st.wakers.remove(&token) {
                        woken.push(w);
                    }
                }
            }
            // Woken outside the lock: a waker may run its task here (a simple executor), which
            // may park again.
            for w in woken.drain(..) {
                w.wake();
            }
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
    st.wakers.insert(token, (waker.clone(), deadline));
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
        let earliest = st.timers.first().is_none_or(|&(first, _)| at < first);
        st.timers.insert((at, token));
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
