//! The shared-memory ring's consumer over memory a hostile producer filled: the ring's data
//! area (both halves of its double mapping) and its control block are the fuzzer's bytes. The
//! consumer never panics, never reads outside the region (the region is an allocation of
//! exactly its size, so the address sanitizer sees any read past it), never hands out a message
//! longer than its limit, and stops: one lap of the ring at most.
#![no_main]

use std::sync::atomic::{AtomicU32, Ordering};

use libfuzzer_sys::fuzz_target;
use lowlat_shm::ring::{CacheLine, Consumer, RingControl, RingRef, LINE, MIN_RING};

/// A cache line of the data area: the area is a whole number of aligned lines, as a mapping is.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; LINE]);

fuzz_target!(|data: &[u8]| {
    let Some((&[size_pick, limit_pick, t0, t1, t2, t3], bytes)) = data.split_first_chunk::<6>().map(|(h, t)| (h, t))
    else {
        return;
    };
    let size = MIN_RING << (size_pick % 2);
    let max_message = [64, 1000, 4096, 1 << 20][limit_pick as usize % 4];
    let line = |v| CacheLine { v: AtomicU32::new(v) };
    let ctl = Box::new(RingControl { tail: line(u32::from_le_bytes([t0, t1, t2, t3])), consumer_sleeping: line(0), producer_sleeping: line(0) });
    // The first half from the fuzzer (repeated to fill it), the second its alias.
    let mut area = vec![Line([0; LINE]); 2 * size / LINE];
    let flat: &mut [u8] = {
        let len = area.len() * LINE;
        // SAFETY: `area` is `len` initialised bytes of plain data; the slice borrows it mutably.
        unsafe { std::slice::from_raw_parts_mut(area.as_mut_ptr().cast::<u8>(), len) }
    };
    if !bytes.is_empty() {
        for (i, b) in flat[..size].iter_mut().enumerate() {
            *b = bytes[i % bytes.len()];
        }
    }
    let (first, second) = flat.split_at_mut(size);
    second.copy_from_slice(first);
    let ctl_ptr = &*ctl as *const RingControl as *mut RingControl;
    // SAFETY: `ctl` is a 64-byte-aligned RingControl and `area` 2 * size 64-byte-aligned bytes
    // whose halves are equal (the alias a double mapping would give); both outlive `consumer`,
    // dropped at the end of this closure first. `size` is a power of two within the limits.
    let ring = unsafe { RingRef::new(ctl_ptr, area.as_mut_ptr().cast::<u8>(), size) };
    let mut consumer = Consumer::new(ring, max_message);
    // Every record is at least a line: a lap of the ring holds at most size / LINE of them.
    for _ in 0..=size / LINE + 1 {
        match consumer.poll() {
            Ok(true) => {
                let m = consumer.message();
                assert!(m.len() <= max_message, "a message of {} bytes past the limit {max_message}", m.len());
                std::hint::black_box(m.iter().fold(0u8, |a, b| a ^ b));
                consumer.release();
            }
            Ok(false) | Err(_) => {
                drop(consumer);
                assert!(ctl.tail.v.load(Ordering::Relaxed) as usize <= u32::MAX as usize);
                return;
            }
        }
    }
    panic!("the consumer went on past a lap of the ring");
});
