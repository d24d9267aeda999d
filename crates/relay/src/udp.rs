//! The relay over UDP: clients send to the relay's address; each client gets a socket of its
//! own, connected to the target, so the target's answers come back on it and go to that client.
//! Both directions pass through an [`Injector`].

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_sys::poll_set;

use crate::faults::{Faults, Injector, Stats};

/// Clients served at once; the one idle longest is forgotten to make room for a new one.
pub const MAX_CLIENTS: usize = 1024;
/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65_536;

/// Where a datagram goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dest {
    /// To the target, on this client's socket.
    Up(SocketAddr),
    /// Back to this client, from the relay's listening socket.
    Down(SocketAddr),
}

struct Upstream {
    sock: UdpSocket,
    last: Instant,
}

/// What the relay did, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Datagrams from clients to the target.
    pub to_target: Stats,
    /// Datagrams from the target back to clients.
    pub to_clients: Stats,
    /// Clients seen in all.
    pub clients: u64,
}

/// A running UDP relay.
pub struct UdpRelay {
    listen: UdpSocket,
    target: SocketAddr,
    clients: HashMap<SocketAddr, Upstream>,
    up: Injector<Dest>,
    down: Injector<Dest>,
    seen: u64,
}

impl UdpRelay {
    /// Listens on `listen` and relays to `target`.
    pub fn bind(listen: SocketAddr, target: SocketAddr, faults: Faults) -> io::Result<UdpRelay> {
        let sock = UdpSocket::bind(listen)?;
        sock.set_nonblocking(true)?;
        Ok(UdpRelay {
            listen: sock,
            target,
            clients: HashMap::new(),
            up: Injector::new(faults, 1),
            down: Injector::new(faults, 2),
            seen: 0,
        })
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listen.local_addr()
    }

    /// Relays until `stop` is set; returns what it did.
    pub fn run(mut self, stop: &AtomicBool) -> io::Result<Report> {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut pfds: Vec<libc::pollfd> = Vec::new();
        let mut order: Vec<SocketAddr> = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            self.flush(now);
            let next = [self.up.poll_timeout(), self.down.poll_timeout()].into_iter().flatten().min();
            // Wake at least every 50 ms to notice `stop`.
            let wait = next.map_or(Duration::from_millis(50), |t| t.saturating_duration_since(now));
            pfds.clear();
            order.clear();
            pfds.push(libc::pollfd { fd: self.listen.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            for (addr, u) in &self.clients {
                pfds.push(libc::pollfd { fd: u.sock.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                order.push(*addr);
            }
            if poll_set(&mut pfds, Some(wait.min(Duration::from_millis(50))))? == 0 {
                continue;
            }
            if pfds[0].revents != 0 {
                self.relay_client_datagrams(&mut buf)?;
            }
            for (p, addr) in pfds[1..].iter().zip(&order) {
                if p.revents != 0 {
                    self.relay_target_datagrams(*addr, &mut buf);
                }
            }
        }
        // Whatever is still held goes out now, as a network drains when nothing more comes in.
        self.flush(Instant::now() + Duration::from_secs(3600));
        Ok(Report { to_target: self.up.stats, to_clients: self.down.stats, clients: self.seen })
    }

    fn relay_client_datagrams(&mut self, buf: &mut [u8]) -> io::Result<()> {
        loop {
            let (n, from) = match self.listen.recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // An ICMP error for a datagram sent to a client that has gone: nothing to do.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if !self.clients.contains_key(&from) {
                self.admit(from, now)?;
            }
            if let Some(u) = self.clients.get_mut(&from) {
                u.last = now;
            }
            let Self { up, listen, clients, .. } = self;
            up.arrive(buf[..n].to_vec(), Dest::Up(from), now, &mut |d, to| send(listen, clients, d, to));
        }
    }

    fn admit(&mut self, client: SocketAddr, now: Instant) -> io::Result<()> {
        if self.clients.len() >= MAX_CLIENTS {
            if let Some(oldest) = self.clients.iter().min_by_key(|(_, u)| u.last).map(|(a, _)| *a) {
                self.clients.remove(&oldest);
            }
        }
        let any: SocketAddr = if self.target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let sock = UdpSocket::bind(any)?;
        sock.connect(self.target)?;
        sock.set_nonblocking(true)?;
        self.clients.insert(client, Upstream { sock, last: now });
        self.seen += 1;
        Ok(())
    }

    fn relay_target_datagrams(&mut self, client: SocketAddr, buf: &mut [u8]) {
        loop {
            let Some(u) = self.clients.get(&client) else { return };
            let n = match u.sock.recv(buf) {
                Ok(n) => n,
                // Nothing more, or the target refused an earlier datagram (ICMP): as a network
                // would, say nothing to the client.
                Err(_) => return,
            };
            let now = Instant::now();
            let Self { down, listen, clients, .. } = self;
            down.arrive(buf[..n].to_vec(), Dest::Down(client), now, &mut |d, to| send(listen, clients, d, to));
        }
    }

    /// Sends what the injectors hold that is due.
    fn flush(&mut self, now: Instant) {
        let Self { up, down, listen, clients, .. } = self;
        up.handle_timeout(now, &mut |d, to| send(listen, clients, d, to));
        down.handle_timeout(now, &mut |d, to| send(listen, clients, d, to));
    }
}

/// Sends a datagram where it goes (a full socket buffer loses it, as a network would).
fn send(listen: &UdpSocket, clients: &HashMap<SocketAddr, Upstream>, data: &[u8], to: &Dest) {
    match to {
        Dest::Up(client) => {
            if let Some(u) = clients.get(client) {
                let _ = u.sock.send(data);
            }
        }
        Dest::Down(client) => {
            let _ = listen.send_to(data, client);
        }
    }
}

/// A relay running on a thread of its own, for tests and tools in the same process.
pub struct RelayThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<io::Result<Report>>>,
    addr: SocketAddr,
}

impl RelayThread {
    /// Binds `listen` (port 0: any free port, see [`addr`](Self::addr)) and relays between it and
    /// `target` on a thread of its own until stopped or dropped.
    pub fn start(listen: SocketAddr, target: SocketAddr, faults: Faults) -> io::Result<RelayThread> {
        let relay = UdpRelay::bind(listen, target, faults)?;
        let addr = relay.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new().name("lowlat-relay".into()).spawn(move || relay.run(&flag))?;
        Ok(RelayThread { stop, handle: Some(handle), addr })
    }

    /// The address clients send to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the relay; returns what it did.
    pub fn stop(mut self) -> io::Result<Report> {
        self.stop.store(true, Ordering::Release);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the relay thread panicked")),
            None => Err(io::Error::other("the relay was already stopped")),
        }
    }
}

impl Drop for RelayThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
