//! Helpers shared by lowlat's test suites, and nothing else: a dev-dependency of the crates
//! that ship, and a dependency of the laboratory (`lowlat-lab`) alone, whose runs build test
//! hosts too. It depends on no lowlat crate but the two at the bottom, `lowlat-sys` and
//! `lowlat-addr` (so the tests of every crate above them can use it), and must never depend on
//! a transport, the protocol or the runtime.
//!
//! [`CountingAlloc`]: a global allocator that counts allocations while asked to, for the tests
//! that prove a steady-state call allocates nothing. [`simnet`]: a simulated network in virtual
//! time, for the protocol engines' tests. [`testhosts`]: two network namespaces joined by a
//! veth pair, for the raw Ethernet transports' tests and the laboratory's ladder.

#![warn(missing_docs)]

pub mod simnet;
pub mod testhosts;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Forwards to the system allocator and counts allocations (and reallocations) made by any
/// thread while [`count`](Self::count) runs, except the process's main thread when `count` runs
/// on another: there the test harness records its tests at moments of its own (a test thread
/// starting, a wait for results), which a loaded machine can delay into a test's counting. Tests
/// run on threads of their own, and so does everything they start. Install it in a test binary:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: lowlat_testkit::CountingAlloc = lowlat_testkit::CountingAlloc::new();
/// ```
pub struct CountingAlloc {
    allocations: AtomicU64,
    counting: AtomicBool,
    /// Whether the main thread's allocations are left out (`count` runs on another thread).
    skip_main: AtomicBool,
    /// Print a backtrace of each counted allocation (`LOWLAT_ALLOC_TRACE` set in the environment).
    trace: AtomicBool,
}

impl CountingAlloc {
    /// An allocator that is not counting yet; `const` so that it can be a `static`
    /// `#[global_allocator]`.
    pub const fn new() -> CountingAlloc {
        CountingAlloc {
            allocations: AtomicU64::new(0),
            counting: AtomicBool::new(false),
            skip_main: AtomicBool::new(false),
            trace: AtomicBool::new(false),
        }
    }

    /// Runs `f` and returns its value with the allocations made meanwhile, by every thread of
    /// the process (a server running in the same process included) but the test harness's.
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
        self.skip_main.store(!on_main_thread(), Ordering::SeqCst);
        self.trace.store(std::env::var_os("LOWLAT_ALLOC_TRACE").is_some(), Ordering::SeqCst);
        self.allocations.store(0, Ordering::SeqCst);
        self.counting.store(true, Ordering::SeqCst);
        let r = f();
        self.counting.store(false, Ordering::SeqCst);
        (r, self.allocations.load(Ordering::SeqCst))
    }

    fn note(&self) {
        if !self.counting.load(Ordering::Relaxed) {
            return;
        }
        if self.skip_main.load(Ordering::Relaxed) && on_main_thread() {
            return;
        }
        if !self.trace.load(Ordering::Relaxed) {
            self.allocations.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Capturing and printing the trace allocates too: those are neither counted nor traced.
        if TRACING.with(|t| t.replace(true)) {
            return;
        }
        self.allocations.fetch_add(1, Ordering::Relaxed);
        eprintln!("counted allocation at:\n{}", std::backtrace::Backtrace::force_capture());
        TRACING.with(|t| t.set(false));
    }
}

thread_local! {
    /// This thread is printing where a counted allocation was made.
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this thread is the process's main thread, once asked (a constant initialiser
    /// and no destructor: readable from an allocator, at any point of a thread's life).
    static ON_MAIN_THREAD: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread is the process's main thread, without allocating.
fn on_main_thread() -> bool {
    ON_MAIN_THREAD.with(|known| {
        known.get().unwrap_or_else(|| {
            #[allow(unsafe_code)]
            // SAFETY: gettid and getpid take no arguments, touch no memory and cannot fail.
            let main = unsafe { libc::gettid() == libc::getpid() };
            known.set(Some(main));
            main
        })
    })
}

impl Default for CountingAlloc {
    fn default() -> Self {
        CountingAlloc::new()
    }
}

#[allow(unsafe_code)] // a global allocator is unsafe to implement
                      // SAFETY: forwards every request to the system allocator unchanged, with the caller's own
                      // arguments, so `System`'s guarantees are the caller's; the counting touches only atomics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        self.note();
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        self.note();
        System.realloc(p, l, n)
    }
}
