//! The acknowledger: a thread per datagram client that acknowledges the last result of idle
//! slots after the engine's delay, so the server can free it. Exits when the client is dropped.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::lowlat::{Shared, Slot};

/// Acknowledges the last result of idle slots after the engine's delay, so the server can free
/// it. Exits when the client is dropped.
pub(super) fn spawn_acknowledger(shared: Weak<Shared>, pins: Vec<usize>) {
    // Under way before the client is: the thread's own start-up (which allocates) never falls
    // among the calls.
    let started = Arc::new(std::sync::Barrier::new(2));
    let running = started.clone();
    let spawned = std::thread::Builder::new().name("lowlat-acks".into()).spawn(move || {
        if !pins.is_empty() {
            // A CPU that does not exist was refused at connect (`reactor::pin`).
            let _ = lowlat_sys::process::pin_thread(0, &pins);
        }
        running.wait();
        loop {
            let delay = match shared.upgrade() {
                None => return,
                Some(s) => {
                    let now = Instant::now();
                    s.slots.sweep(|slot: &mut Slot| {
                        let Slot { engine, chan, .. } = slot;
                        if let (Some(e), Some(c)) = (engine.as_mut(), chan.as_mut()) {
                            let c = c.as_dyn();
                            if !e.is_active() && e.poll_timeout().is_some_and(|t| t <= now) {
                                e.handle_timeout(now, &mut |h: &[u8], b: &[u8]| {
                                    let _ = c.send(h, b);
                                });
                            }
                        }
                    });
                    s.cfg.engine.ack_delay
                }
            };
            std::thread::sleep(delay.max(Duration::from_millis(1)));
        }
    });
    if spawned.is_ok() {
        started.wait();
    }
}
