//! The machine's floor for UDP, one server side for latency and throughput alike: a socket that
//! connects to the first client it hears, then echoes with `recvmmsg`/`sendmmsg`, every datagram
//! queued at a look (up to [`BATCH`]) received in one system call and their echoes sent in one
//! (DESIGN principle 13). With one datagram queued it is one `recvmmsg` and one `sendmmsg` of
//! one, the cost of `recv` and `send`. Answers [`super::cpu_report::ASK`]. After
//! [`IDLE`] without a datagram it disconnects and waits for the next first client.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat_sys::mmsg::Batch;
use lowlat_sys::poll_readable;
use lowlat_wait::{SpinPolicy, Spinner};

use super::cpu_report;

/// Datagrams received (and echoed) per system call at most.
pub const BATCH: usize = 32;
/// A silence after which the echo serves whichever client comes next.
pub const IDLE: Duration = Duration::from_millis(100);
/// Bytes of a batch slot: the largest datagram echoed whole (a longer one comes back cut).
pub const SLOT: usize = 2048;

/// Echoes on `sock` (bound, non-blocking) until `stop` is set, waiting as `spin` says between
/// datagrams. A send that finds the socket buffer full drops the rest of its batch, as a full
/// buffer drops datagrams anyway.
pub fn echo(sock: &UdpSocket, spin: SpinPolicy, stop: &AtomicBool) -> io::Result<()> {
    let mut batch = Batch::new(BATCH, SLOT);
    let mut spinner = Spinner::new(spin);
    let fd = sock.as_raw_fd();
    let mut connected = false;
    while !stop.load(Ordering::Relaxed) {
        if !connected {
            let mut first = [0u8; SLOT];
            match sock.recv_from(&mut first) {
                Ok((n, from)) => {
                    sock.connect(from)?;
                    connected = true;
                    let m = &first[..n];
                    match cpu_report::answer(m) {
                        Some(a) => sock.send(&a)?,
                        None => sock.send(m)?,
                    };
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    poll_readable(&[fd], Some(Duration::from_millis(100)))?;
                }
                Err(e) => return Err(e),
            }
            continue;
        }
        let got = spinner.wait_on(
            Some(Instant::now() + IDLE),
            &mut batch,
            |b| match b.recv(fd) {
                Ok(0) => Ok(None),
                Ok(n) => Ok(Some(n)),
                // The client went away (an ICMP error on the connected socket): wait for the next.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
                Err(e) => Err(e),
            },
            |_, t| poll_readable(&[fd], t).map(|_| ()),
        )?;
        let Some(n) = got else {
            lowlat_sys::socket::disconnect(fd)?;
            connected = false;
            continue;
        };
        for i in 0..n {
            if let Some(a) = cpu_report::answer(batch.get(i)) {
                batch.slot_mut(i)[..a.len()].copy_from_slice(&a);
                batch.set_len(i, a.len());
            }
        }
        let mut sent = 0;
        while sent < n {
            match batch.send(fd, sent..n) {
                Ok(0) => break,
                Ok(k) => sent += k,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
