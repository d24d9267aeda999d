//! Helpers shared by lowlat's test suites, and nothing else: a dev-dependency only, never a
//! dependency of a crate that ships. It depends on no other lowlat crate (so any crate's tests
//! can use it).
//!
//! [`CountingAlloc`]: a global allocator that counts allocations while asked to, for the tests
//! that prove a steady-state call allocates nothing. [`simnet`]: a simulated network in virtual
//! time, for the protocol engines' tests.

#![warn(missing_docs)]

pub mod simnet;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Forwards to the system allocator and counts allocations (and reallocations) made by any
/// thread while [`count`](Self::count) runs. Install it in a test binary:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: lowlat_testkit::CountingAlloc = lowlat_testkit::CountingAlloc::new();
/// ```
pub struct CountingAlloc {
    allocations: AtomicU64,
    counting: AtomicBool,
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
            trace: AtomicBool::new(false),
        }
    }

    /// Runs `f` and returns its value with the allocations made meanwhile, by every thread of
    /// the process (a server running in the same process included).
    pub fn count<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
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
