//! A small blocking rpcbind client: where is program P version V (RPCBPROC_GETADDR in rpcbind
//! versions 4 and 3, falling back to PMAPPROC_GETPORT in portmapper version 2), and registration
//! (SET / UNSET in every version rpcbind accepts).
//!
//! It talks UDP (TCP to ask about TCP services; the Unix socket to register) to port 111 with a
//! short deadline, so a missing rpcbind costs a bounded wait.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::auth::Credential;
use crate::msg::{AcceptStatus, CallHeader, Reply, ReplyBody};
use crate::record::{frame_record, RecordReader};
use crate::xdr::{put_opaque, put_u32, Reader};
use crate::Error;

/// rpcbind's (and the portmapper's) program number.
pub const PROGRAM: u32 = 100000;
/// rpcbind's well-known port, on UDP and TCP.
pub const PORT: u16 = 111;
const SET: u32 = 1;
const UNSET: u32 = 2;
const GETADDR: u32 = 3; // GETPORT in version 2
const IPPROTO_TCP: u32 = 6;
const IPPROTO_UDP: u32 = 17;

/// The transports ONC RPC names (`netid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Netid {
    /// Datagrams (`udp`, or `udp6` over IPv6).
    Udp,
    /// A stream with record marking (`tcp`, or `tcp6` over IPv6).
    Tcp,
}

impl Netid {
    fn name(self, v6: bool) -> &'static str {
        match (self, v6) {
            (Netid::Udp, false) => "udp",
            (Netid::Tcp, false) => "tcp",
            (Netid::Udp, true) => "udp6",
            (Netid::Tcp, true) => "tcp6",
        }
    }
    fn protocol(self) -> u32 {
        match self {
            Netid::Udp => IPPROTO_UDP,
            Netid::Tcp => IPPROTO_TCP,
        }
    }
}

/// The universal address of `a` (RFC 5665: `h1.h2.h3.h4.p1.p2`).
pub fn universal_address(a: SocketAddr) -> String {
    format!("{}.{}.{}", a.ip(), a.port() >> 8, a.port() & 0xff)
}

/// Parses a universal address.
pub fn parse_universal_address(s: &str) -> Option<SocketAddr> {
    let (rest, lo) = s.rsplit_once('.')?;
    let (ip, hi) = rest.rsplit_once('.')?;
    let port = hi.parse::<u8>().ok()? as u16 * 256 + lo.parse::<u8>().ok()? as u16;
    Some(SocketAddr::new(ip.parse::<IpAddr>().ok()?, port))
}

/// One blocking UDP call with retransmission every 250 ms until `timeout`. Returns the results
/// of a successful reply.
pub fn udp_call(
    to: SocketAddr,
    header: CallHeader,
    args: &[u8],
    timeout: Duration,
) -> Result<Result<Vec<u8>, ReplyBody>, Error> {
    let io = |op: &str| {
        let op = format!("{op} {to}");
        move |source| Error::Io { op, source }
    };
    let bind: SocketAddr = if to.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let sock = UdpSocket::bind(bind).map_err(io("bind a socket to call"))?;
    sock.connect(to).map_err(io("connect to"))?;
    let mut msg = Vec::with_capacity(64 + args.len());
    header.encode(&Credential::None, &mut msg);
    msg.extend_from_slice(args);
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65536];
    loop {
        sock.send(&msg).map_err(io("send to"))?;
        let resend = Instant::now() + Duration::from_millis(250);
        loop {
            let now = Instant::now();
            let until = resend.min(deadline);
            if now >= until {
                break;
            }
            sock.set_read_timeout(Some(until - now)).map_err(io("set timeout"))?;
            match sock.recv(&mut buf) {
                Ok(n) => {
                    let Ok(r) = Reply::parse(&buf[..n]) else { continue };
                    if r.xid != header.xid {
                        continue;
                    }
                    return Ok(match r.body {
                        ReplyBody::Accepted(AcceptStatus::Success) => Ok(r.results.to_vec()),
                        b => Err(b),
                    });
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(io("receive from")(e)),
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::Rpcbind { addr: to.to_string(), reason: format!("no answer within {timeout:?}") });
        }
    }
}

fn xid() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    t ^ std::process::id().rotate_left(16)
}

/// One blocking call over a Unix stream socket (record marking), as libtirpc registers: rpcbind
/// then knows the caller's uid and accepts SET and UNSET from it.
pub fn local_call(
    path: &Path,
    header: CallHeader,
    args: &[u8],
    timeout: Duration,
) -> Result<Result<Vec<u8>, ReplyBody>, Error> {
    let name = path.display().to_string();
    let s = UnixStream::connect(path).map_err(|source| Error::Io { op: format!("connect to {name}"), source })?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|source| Error::Io { op: format!("set timeouts on {name}"), source })?;
    stream_call(s, &name, header, args)
}

/// One blocking call over TCP (rpcbind answers GETADDR for the transport a question came on, so
/// where a TCP service listens is asked over TCP).
pub fn tcp_call(
    to: SocketAddr,
    header: CallHeader,
    args: &[u8],
    timeout: Duration,
) -> Result<Result<Vec<u8>, ReplyBody>, Error> {
    let name = to.to_string();
    let s = TcpStream::connect_timeout(&to, timeout)
        .map_err(|source| Error::Io { op: format!("connect to {name}"), source })?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|source| Error::Io { op: format!("set timeouts on {name}"), source })?;
    stream_call(s, &name, header, args)
}

fn stream_call<S: Read + Write>(
    mut s: S,
    name: &str,
    header: CallHeader,
    args: &[u8],
) -> Result<Result<Vec<u8>, ReplyBody>, Error> {
    let io = |op: &str| {
        let op = format!("{op} {name}");
        move |source| Error::Io { op, source }
    };
    let mut msg = Vec::with_capacity(64 + args.len());
    header.encode(&Credential::None, &mut msg);
    msg.extend_from_slice(args);
    let mut wire = Vec::with_capacity(msg.len() + 4);
    frame_record(&msg, 1 << 20, &mut wire);
    s.write_all(&wire).map_err(io("send to"))?;
    let mut rr = RecordReader::new(1 << 20);
    loop {
        let buf = rr.buffer(4096);
        let n = s.read(buf).map_err(io("receive from"))?;
        if n == 0 {
            return Err(Error::Rpcbind { addr: name.to_string(), reason: "closed the connection".into() });
        }
        rr.filled(n);
        let rec = rr.next_record().map_err(|e| Error::Rpcbind { addr: name.to_string(), reason: e.to_string() })?;
        if let Some(rec) = rec {
            let r = Reply::parse(rec)?;
            if r.xid != header.xid {
                continue;
            }
            return Ok(match r.body {
                ReplyBody::Accepted(AcceptStatus::Success) => Ok(r.results.to_vec()),
                b => Err(b),
            });
        }
    }
}

/// Where rpcbind is reached.
#[derive(Clone, Debug)]
pub enum Via {
    /// rpcbind's UDP port at this address.
    Udp(SocketAddr),
    /// rpcbind's TCP port at this address.
    Tcp(SocketAddr),
    /// rpcbind's Unix socket at this path (registrations go this way).
    Local(PathBuf),
}

/// A client of one rpcbind.
#[derive(Clone, Debug)]
pub struct Rpcbind {
    /// How this client reaches rpcbind.
    pub via: Via,
    /// The host whose services are asked about (for addresses rpcbind gives as wildcards).
    pub addr: SocketAddr,
    /// The deadline of each exchange with rpcbind.
    pub timeout: Duration,
}

/// The sockets rpcbind listens on for local callers.
pub const LOCAL_SOCKETS: [&str; 2] = ["/run/rpcbind.sock", "/var/run/rpcbind.sock"];

impl Rpcbind {
    /// rpcbind on `host` (port 111), over UDP.
    pub fn at(host: IpAddr) -> Rpcbind {
        let addr = SocketAddr::new(host, PORT);
        Rpcbind { via: Via::Udp(addr), addr, timeout: Duration::from_secs(2) }
    }

    /// This machine's rpcbind: over its Unix socket when there is one (needed to register),
    /// else over UDP to 127.0.0.1.
    pub fn local() -> Rpcbind {
        let mut r = Rpcbind::at(IpAddr::from([127, 0, 0, 1]));
        if let Some(p) = LOCAL_SOCKETS.iter().find(|p| Path::new(p).exists()) {
            r.via = Via::Local(PathBuf::from(p));
        }
        r
    }

    fn call(&self, version: u32, procedure: u32, args: &[u8]) -> Result<Result<Vec<u8>, ReplyBody>, Error> {
        let h = CallHeader { xid: xid(), program: PROGRAM, version, procedure };
        match &self.via {
            Via::Udp(a) => udp_call(*a, h, args, self.timeout),
            Via::Tcp(a) => tcp_call(*a, h, args, self.timeout),
            Via::Local(p) => local_call(p, h, args, self.timeout),
        }
    }

    fn err(&self, reason: String) -> Error {
        Error::Rpcbind { addr: self.addr.to_string(), reason }
    }

    /// Whether rpcbind answers at all (a NULL call).
    pub fn is_running(&self) -> bool {
        let probe = Rpcbind { timeout: Duration::from_millis(300), ..self.clone() };
        matches!(probe.call(2, 0, &[]), Ok(Ok(_)))
    }

    fn rpcb(prog: u32, vers: u32, netid: &str, uaddr: &str, owner: &str) -> Vec<u8> {
        let mut a = Vec::new();
        put_u32(&mut a, prog);
        put_u32(&mut a, vers);
        put_opaque(&mut a, netid.as_bytes());
        put_opaque(&mut a, uaddr.as_bytes());
        put_opaque(&mut a, owner.as_bytes());
        a
    }

    fn mapping(prog: u32, vers: u32, prot: u32, port: u32) -> Vec<u8> {
        let mut a = Vec::new();
        for v in [prog, vers, prot, port] {
            put_u32(&mut a, v);
        }
        a
    }

    fn boolean(&self, r: Result<Vec<u8>, ReplyBody>) -> Result<bool, Error> {
        match r {
            Ok(b) => Ok(Reader::new(&b).u32("boolean result")? != 0),
            Err(b) => Err(self.err(format!("refused: {b:?}"))),
        }
    }

    /// Asks where `prog` `vers` listens on `netid`: GETADDR v4, then v3, then GETPORT v2.
    /// `Ok(None)`: not registered.
    pub fn getaddr(&self, prog: u32, vers: u32, netid: Netid) -> Result<Option<SocketAddr>, Error> {
        if netid == Netid::Tcp {
            if let Via::Udp(a) = self.via {
                let over_tcp = Rpcbind { via: Via::Tcp(a), ..self.clone() };
                return over_tcp.getaddr_here(prog, vers, netid);
            }
        }
        self.getaddr_here(prog, vers, netid)
    }

    fn getaddr_here(&self, prog: u32, vers: u32, netid: Netid) -> Result<Option<SocketAddr>, Error> {
        let v6 = self.addr.is_ipv6();
        let args = Self::rpcb(prog, vers, netid.name(v6), "", "");
        for version in [4, 3] {
            match self.call(version, GETADDR, &args)? {
                Ok(b) => {
                    let mut r = Reader::new(&b);
                    let s = r.opaque("address", 1024)?;
                    if s.is_empty() {
                        return Ok(None);
                    }
                    let s = std::str::from_utf8(s).map_err(|_| self.err("address is not text".into()))?;
                    let a = parse_universal_address(s)
                        .ok_or_else(|| self.err(format!("{s:?} is not a universal address")))?;
                    // rpcbind may answer with a wildcard address: keep the host we asked.
                    let ip = if a.ip().is_unspecified() { self.addr.ip() } else { a.ip() };
                    return Ok(Some(SocketAddr::new(ip, a.port())));
                }
                Err(ReplyBody::Accepted(AcceptStatus::ProgMismatch { .. })) => continue,
                Err(b) => return Err(self.err(format!("GETADDR v{version} refused: {b:?}"))),
            }
        }
        match self.call(2, GETADDR, &Self::mapping(prog, vers, netid.protocol(), 0))? {
            Ok(b) => {
                let port = Reader::new(&b).u32("port")?;
                Ok((port != 0 && port <= u16::MAX as u32).then(|| SocketAddr::new(self.addr.ip(), port as u16)))
            }
            Err(b) => Err(self.err(format!("GETPORT refused: {b:?}"))),
        }
    }

    /// Registers `prog` `vers` at `at` on `netid` in every rpcbind version that accepts it.
    /// Returns whether any accepted.
    pub fn set(&self, prog: u32, vers: u32, netid: Netid, at: SocketAddr, owner: &str) -> Result<bool, Error> {
        let mut any = false;
        let args = Self::rpcb(prog, vers, netid.name(at.is_ipv6()), &universal_address(at), owner);
        for version in [4, 3] {
            if let Ok(r) = self.call(version, SET, &args) {
                any |= self.boolean(r).unwrap_or(false);
            }
        }
        if at.is_ipv4() && !any {
            // Only when v3/v4 said no: v2 SET of the same mapping would be refused as a duplicate.
            let r = self.call(2, SET, &Self::mapping(prog, vers, netid.protocol(), at.port() as u32))?;
            any |= self.boolean(r)?;
        }
        Ok(any)
    }

    /// Removes every registration of `prog` `vers` (all transports).
    pub fn unset(&self, prog: u32, vers: u32, owner: &str) -> Result<bool, Error> {
        let mut any = false;
        let args = Self::rpcb(prog, vers, "", "", owner);
        for version in [4, 3] {
            if let Ok(r) = self.call(version, UNSET, &args) {
                any |= self.boolean(r).unwrap_or(false);
            }
        }
        if !any {
            let r = self.call(2, UNSET, &Self::mapping(prog, vers, 0, 0))?;
            any |= self.boolean(r)?;
        }
        Ok(any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universal_addresses_round_trip() {
        let a: SocketAddr = "127.0.0.1:2049".parse().unwrap();
        assert_eq!(universal_address(a), "127.0.0.1.8.1");
        assert_eq!(parse_universal_address("127.0.0.1.8.1"), Some(a));
        let b: SocketAddr = "[::1]:111".parse().unwrap();
        assert_eq!(parse_universal_address(&universal_address(b)), Some(b));
        assert_eq!(parse_universal_address("1.2.3.4.300.1"), None);
        assert_eq!(parse_universal_address("junk"), None);
    }

    #[test]
    fn missing_rpcbind_is_a_bounded_error() {
        // A port nobody listens on: ICMP refusal or silence, an error either way, promptly.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        drop(sock);
        let r = Rpcbind { via: Via::Udp(addr), addr, timeout: Duration::from_millis(600) };
        let t = Instant::now();
        assert!(r.getaddr(1, 1, Netid::Udp).is_err());
        assert!(t.elapsed() < Duration::from_secs(3));
    }
}
