//! Futexes on words shared between processes: the sleeping side of the shared-memory tripwire.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use crate::timespec;

/// Sleeps while `*word == expected`, for at most `timeout`. Returns on wake-up, timeout, signal
/// or when the word already differs; the caller re-reads the word in every case.
///
/// The word lives in a `MAP_SHARED` mapping used by two processes, so the futex is a shared
/// (non-private) one.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = timespec(timeout);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; the kernel only reads
    // it. `ts` outlives the call. The remaining arguments are unused by FUTEX_WAIT.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter sleeping on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access memory beyond it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn futex_wait_times_out_and_wakes() {
        let w = std::sync::Arc::new(AtomicU32::new(0));
        let t = std::time::Instant::now();
        futex_wait(&w, 0, Duration::from_millis(2));
        assert!(t.elapsed() >= Duration::from_millis(2));
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            w2.store(1, Ordering::SeqCst);
            futex_wake(&w2);
        });
        let t = std::time::Instant::now();
        while w.load(Ordering::SeqCst) == 0 {
            futex_wait(&w, 0, Duration::from_secs(5));
        }
        assert!(t.elapsed() < Duration::from_secs(4));
        h.join().unwrap();
    }
}
