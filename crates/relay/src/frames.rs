//! The relay over raw Ethernet frames, for eth:// and xdp://: two interfaces (each the relay's
//! end of a veth pair, in a namespace of its own between the client's and the server's), every
//! frame that arrives on one sent out of the other, whole, through an [`Injector`]. It bridges
//! what it does not read: lowlat's frames, ARP, anything; a corrupted frame reaches its receiver,
//! whose checksum must catch it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat_sys::{poll_set, PacketSocket};

use crate::faults::{Faults, Injector, Stats};

/// Larger than any frame a veth carries at the MTUs the tests use (jumbo included).
const MAX_FRAME: usize = 65_536;

/// What the frame relay did, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameReport {
    /// Frames that arrived on the first interface, sent out of the second.
    pub first_to_second: Stats,
    /// Frames that arrived on the second interface, sent out of the first.
    pub second_to_first: Stats,
}

/// Which interface a frame goes out of.
#[derive(Clone, Copy)]
enum Out {
    First,
    Second,
}

/// A relay between two interfaces.
pub struct FrameRelay {
    sockets: [PacketSocket; 2],
    toward_second: Injector<Out>,
    toward_first: Injector<Out>,
}

impl FrameRelay {
    /// Relays between interfaces `first` and `second` (of the calling thread's namespace).
    pub fn open(first: &str, second: &str, faults: Faults) -> io::Result<FrameRelay> {
        Ok(FrameRelay {
            sockets: [PacketSocket::open(first)?, PacketSocket::open(second)?],
            toward_second: Injector::new(faults, 1),
            toward_first: Injector::new(faults, 2),
        })
    }

    /// Relays until `stop` is set; returns what it did.
    pub fn run(mut self, stop: &AtomicBool) -> io::Result<FrameReport> {
        use std::os::fd::AsRawFd;
        let mut buf = vec![0u8; MAX_FRAME];
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            self.flush(now);
            let next =
                [self.toward_second.poll_timeout(), self.toward_first.poll_timeout()].into_iter().flatten().min();
            // Wake at least every 50 ms to notice `stop`.
            let wait = next.map_or(Duration::from_millis(50), |t| t.saturating_duration_since(now));
            let mut pfds =
                self.sockets.each_ref().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            if poll_set(&mut pfds, Some(wait.min(Duration::from_millis(50))))? == 0 {
                continue;
            }
            for (i, p) in pfds.iter().enumerate() {
                if p.revents != 0 {
                    self.relay_arrivals(i, &mut buf)?;
                }
            }
        }
        // Whatever is still held goes out now, as a network drains when nothing more comes in.
        self.flush(Instant::now() + Duration::from_secs(3600));
        Ok(FrameReport { first_to_second: self.toward_second.stats, second_to_first: self.toward_first.stats })
    }

    fn relay_arrivals(&mut self, from: usize, buf: &mut [u8]) -> io::Result<()> {
        while let Some(n) = self.sockets[from].try_recv(buf)? {
            let Self { sockets, toward_second, toward_first } = self;
            let (injector, out) = if from == 0 { (toward_second, Out::Second) } else { (toward_first, Out::First) };
            injector.arrive(buf[..n].to_vec(), out, Instant::now(), &mut |f, to| send(sockets, f, to));
        }
        Ok(())
    }

    /// Sends what the injectors hold that is due.
    fn flush(&mut self, now: Instant) {
        let Self { sockets, toward_second, toward_first } = self;
        toward_second.handle_timeout(now, &mut |f, to| send(sockets, f, to));
        toward_first.handle_timeout(now, &mut |f, to| send(sockets, f, to));
    }
}

/// Sends a frame out of its interface (a full transmit queue loses it, as a network would).
fn send(sockets: &[PacketSocket; 2], frame: &[u8], to: &Out) {
    let _ = sockets[match to {
        Out::First => 0,
        Out::Second => 1,
    }]
    .send(frame);
}
