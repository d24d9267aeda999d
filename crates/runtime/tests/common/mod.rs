//! The lab's procedures, mirrored for the runtime's own tests (the runtime may not depend on the
//! lab crate), in both encodings a lowlat server speaks: lowlat's native encoding (bodies in the
//! server's byte order; a single opaque argument or result is the whole body) and XDR (served
//! over ONC RPC). Each test binary uses a part of this module.
#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lowlat::{Client, DecodeError, Error, ProcError, Program, Server};
use lowlat_proto::wire::{BindRefusal, Header, HeaderView, Kind, Refusal};

pub const PROG: u32 = 0x2000_4C4C;
pub const NULL: u32 = 0;
pub const MINUS: u32 = 1;
pub const MAXARG: u32 = 2;
pub const MAXRESULT: u32 = 3;
pub const ECHO: u32 = 4;
pub const COUNT: u32 = 5;
pub const SPIN: u32 = 6;

/// How bodies are encoded on a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// lowlat's own: integers in the server's byte order (this machine's, in these tests), a
    /// lone opaque argument or result as the whole body.
    Native,
    /// XDR (RFC 4506): big-endian integers, opaque data after its length, padded to 4 bytes.
    Xdr,
}

impl Encoding {
    /// The encoding of a binding.
    pub fn of(c: &Client) -> Encoding {
        if c.is_onc() {
            Encoding::Xdr
        } else {
            Encoding::Native
        }
    }

    fn u32_to(self, v: u32) -> [u8; 4] {
        match self {
            Encoding::Native => v.to_ne_bytes(),
            Encoding::Xdr => v.to_be_bytes(),
        }
    }

    fn u64_to(self, v: u64) -> [u8; 8] {
        match self {
            Encoding::Native => v.to_ne_bytes(),
            Encoding::Xdr => v.to_be_bytes(),
        }
    }

    fn u64_from(self, b: [u8; 8]) -> u64 {
        match self {
            Encoding::Native => u64::from_ne_bytes(b),
            Encoding::Xdr => u64::from_be_bytes(b),
        }
    }

    fn u32_from(self, b: [u8; 4]) -> u32 {
        match self {
            Encoding::Native => u32::from_ne_bytes(b),
            Encoding::Xdr => u32::from_be_bytes(b),
        }
    }

    /// Appends `data` as the encoding's variable-length opaque.
    pub fn put_opaque(self, data: &[u8], out: &mut impl Extend<u8>) {
        if self == Encoding::Xdr {
            out.extend((data.len() as u32).to_be_bytes());
        }
        out.extend(data.iter().copied());
        if self == Encoding::Xdr {
            out.extend(std::iter::repeat_n(0, (4 - data.len() % 4) % 4));
        }
    }

    /// The opaque that is the whole of `body`.
    pub fn get_opaque(self, body: &[u8]) -> Option<&[u8]> {
        match self {
            Encoding::Native => Some(body),
            Encoding::Xdr => {
                let (len, rest) = body.split_first_chunk::<4>()?;
                let n = u32::from_be_bytes(*len) as usize;
                (rest.len() == n.next_multiple_of(4)).then(|| &rest[..n])
            }
        }
    }

    /// Bytes an opaque of `n` bytes takes in this encoding.
    pub fn opaque_len(self, n: usize) -> usize {
        match self {
            Encoding::Native => n,
            Encoding::Xdr => 4 + n.next_multiple_of(4),
        }
    }
}

/// The lab's procedures as the lab serves them, in `enc`.
pub fn lab_program_in(enc: Encoding) -> Program {
    lab_program_counting(enc).0
}

/// The lab's procedures as the lab serves them, in `enc`, and COUNT's counter: NULL, MINUS,
/// MAXARG, MAXRESULT, ECHO, COUNT (increments the counter, returns its new value) and SPIN
/// (`us` microseconds of work, on the worker pool).
pub fn lab_program_counting(enc: Encoding) -> (Program, Arc<AtomicU64>) {
    let counter = Arc::new(AtomicU64::new(0));
    let c = counter.clone();
    let p = Program::new(PROG, 1);
    let p = if enc == Encoding::Xdr { p.xdr() } else { p };
    let p = p
        .procedure(NULL, "NULL", |_, a, _| if a.is_empty() { Ok(()) } else { Err(ProcError::GarbageArgs) })
        .procedure(MINUS, "MINUS", move |_, a, r| {
            let a: [u8; 8] = a.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let x = enc.u32_from([a[0], a[1], a[2], a[3]]) as i32;
            let y = enc.u32_from([a[4], a[5], a[6], a[7]]) as i32;
            r.extend_from_slice(&enc.u32_to(x.wrapping_sub(y) as u32));
            Ok(())
        })
        .procedure(MAXARG, "MAXARG", move |_, a, _| enc.get_opaque(a).map(|_| ()).ok_or(ProcError::GarbageArgs))
        .procedure(MAXRESULT, "MAXRESULT", move |_, a, r| {
            let n: [u8; 4] = a.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let n = enc.u32_from(n) as usize;
            if enc == Encoding::Xdr {
                r.extend_from_slice(&(n as u32).to_be_bytes());
            }
            r.extend((0..n).map(|i| (i % 251) as u8));
            if enc == Encoding::Xdr {
                r.extend(std::iter::repeat_n(0, (4 - n % 4) % 4));
            }
            Ok(())
        })
        .procedure(ECHO, "ECHO", move |_, a, r| {
            let data = enc.get_opaque(a).ok_or(ProcError::GarbageArgs)?;
            enc.put_opaque(data, r);
            Ok(())
        })
        .procedure(COUNT, "COUNT", move |_, a, r| {
            if !a.is_empty() {
                return Err(ProcError::GarbageArgs);
            }
            r.extend_from_slice(&enc.u64_to(c.fetch_add(1, Ordering::SeqCst) + 1));
            Ok(())
        })
        .long_running(SPIN, "SPIN", move |_, a, _| {
            let us: [u8; 4] = a.try_into().map_err(|_| ProcError::GarbageArgs)?;
            let d = Duration::from_micros(enc.u32_from(us).into());
            if d > Duration::from_secs(1) {
                return Err(ProcError::GarbageArgs);
            }
            let end = Instant::now() + d;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
            Ok(())
        });
    (p, counter)
}

/// The lab program in lowlat's native encoding.
pub fn lab_program() -> Program {
    lab_program_in(Encoding::Native)
}

/// One call whose arguments and result are raw bytes.
pub fn bytes(proc_no: u32, c: &Client, arg: &[u8]) -> Result<Vec<u8>, Error> {
    c.call::<_, DecodeError>(
        proc_no,
        |b| {
            b.extend_from_slice(arg);
            Ok(())
        },
        |r| Ok(r.to_vec()),
    )
}

/// The lab's procedures called with typed arguments in the binding's encoding.
pub struct Lab<'a> {
    pub c: &'a Client,
    pub enc: Encoding,
}

impl<'a> Lab<'a> {
    pub fn new(c: &'a Client) -> Lab<'a> {
        Lab { c, enc: Encoding::of(c) }
    }

    pub fn null(&self) -> Result<(), Error> {
        bytes(NULL, self.c, &[]).and_then(|r| expect_len(self.c, NULL, &r, 0))
    }

    pub fn minus(&self, a: i32, b: i32) -> Result<i32, Error> {
        let mut arg = self.enc.u32_to(a as u32).to_vec();
        arg.extend_from_slice(&self.enc.u32_to(b as u32));
        let r = bytes(MINUS, self.c, &arg)?;
        expect_len(self.c, MINUS, &r, 4)?;
        Ok(self.enc.u32_from([r[0], r[1], r[2], r[3]]) as i32)
    }

    pub fn maxarg(&self, data: &[u8]) -> Result<(), Error> {
        let mut arg = Vec::with_capacity(self.enc.opaque_len(data.len()));
        self.enc.put_opaque(data, &mut arg);
        bytes(MAXARG, self.c, &arg).and_then(|r| expect_len(self.c, MAXARG, &r, 0))
    }

    pub fn maxresult(&self, n: u32) -> Result<Vec<u8>, Error> {
        let r = bytes(MAXRESULT, self.c, &self.enc.u32_to(n))?;
        self.opaque(MAXRESULT, &r)
    }

    /// Increments the server's counter; its new value.
    pub fn count(&self) -> Result<u64, Error> {
        let enc = self.enc;
        self.c.call::<_, DecodeError>(
            COUNT,
            |_| Ok(()),
            |r| r.try_into().map(|b| enc.u64_from(b)).map_err(|_| DecodeError::new("unsigned hyper", r.len())),
        )
    }

    /// Keeps a server worker busy for `us` microseconds.
    pub fn spin(&self, us: u32) -> Result<(), Error> {
        bytes(SPIN, self.c, &self.enc.u32_to(us)).and_then(|r| expect_len(self.c, SPIN, &r, 0))
    }

    pub fn echo(&self, data: &[u8]) -> Result<Vec<u8>, Error> {
        let mut arg = Vec::with_capacity(self.enc.opaque_len(data.len()));
        self.enc.put_opaque(data, &mut arg);
        let r = bytes(ECHO, self.c, &arg)?;
        self.opaque(ECHO, &r)
    }

    /// [`echo`](Self::echo) made as a future (as the generated `*_async` methods make calls)
    /// and run to its end on this thread.
    pub fn echo_async(&self, data: &[u8]) -> Result<Vec<u8>, Error> {
        let mut arg = Vec::with_capacity(self.enc.opaque_len(data.len()));
        self.enc.put_opaque(data, &mut arg);
        let encode = |b: &mut lowlat::OutBuf<'_>| {
            b.extend_from_slice(&arg);
            Ok::<_, DecodeError>(())
        };
        let r = lowlat::wait(self.c.call_async(ECHO, encode, |r: &[u8]| Ok(r.to_vec())))?;
        self.opaque(ECHO, &r)
    }

    fn opaque(&self, proc_no: u32, r: &[u8]) -> Result<Vec<u8>, Error> {
        match self.enc.get_opaque(r) {
            Some(d) => Ok(d.to_vec()),
            None => Err(Error::Decode {
                call: self.c.call_site(proc_no),
                source: Box::new(DecodeError::new("opaque<>", r.len())),
            }),
        }
    }

    /// What each of several calling threads checks, `t` telling its data apart from the
    /// others': NULL, MINUS, COUNT (increasing: other threads count too), SPIN, then ECHO,
    /// MAXARG and MAXRESULT at each of `sizes`, every result checked.
    pub fn check(&self, t: u8, sizes: &[usize]) {
        self.null().unwrap();
        assert_eq!(self.minus(7, 10 + t as i32).unwrap(), -3 - t as i32);
        let n = self.count().unwrap();
        assert!(self.count().unwrap() > n, "COUNT counts");
        self.spin(1).unwrap();
        for &n in sizes {
            let msg: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_add(t)).collect();
            assert!(self.echo(&msg).unwrap() == msg, "ECHO {n}");
            self.maxarg(&msg).unwrap_or_else(|e| panic!("MAXARG {n}: {e}"));
            let r = self.maxresult(n as u32).unwrap();
            assert!(r.len() == n && r.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "MAXRESULT {n}");
        }
    }
}

fn expect_len(c: &Client, proc_no: u32, r: &[u8], n: usize) -> Result<(), Error> {
    if r.len() == n {
        Ok(())
    } else {
        let source = Box::new(DecodeError::new("a result of the expected size", r.len()));
        Err(Error::Decode { call: c.call_site(proc_no), source })
    }
}

/// [`Lab::check`] over a binding in lowlat's native encoding.
pub fn check_lab_procedures(c: &Client, t: u8, sizes: &[usize]) {
    Lab::new(c).check(t, sizes)
}

/// Waits (5 s at most) until the first endpoint's counters satisfy `done` (datagrams sent are on
/// their way); returns them.
pub fn settle(server: &Server, done: impl Fn(&lowlat::EndpointStats) -> bool) -> lowlat::EndpointStats {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let s = server.stats()[0].1;
        if done(&s) || Instant::now() > end {
            return s;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A forwarder between one client and a server that records what the client sends, can move
/// the client to another source address (a new upstream socket: NAT rebinding), and can answer
/// the client's binds with a forged, untagged refusal before forwarding them.
pub struct OnPath {
    addr: SocketAddr,
    server: SocketAddr,
    up: Arc<Mutex<UdpSocket>>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Set: answer the client's binds with a forged, untagged refusal before forwarding them.
    pub forge_refusals: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn upstream(server: SocketAddr) -> UdpSocket {
    let up = UdpSocket::bind("127.0.0.1:0").unwrap();
    up.connect(server).unwrap();
    up.set_nonblocking(true).unwrap();
    up
}

/// A datagram's CRC32C trailer (the checksum is on by default).
fn with_crc(mut d: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&d);
    d.extend_from_slice(&crc.to_le_bytes());
    d
}

impl OnPath {
    pub fn start(server: SocketAddr) -> OnPath {
        let down = UdpSocket::bind("127.0.0.1:0").unwrap();
        down.set_nonblocking(true).unwrap();
        let addr = down.local_addr().unwrap();
        let up = Arc::new(Mutex::new(upstream(server)));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (forge_refusals, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let thread = {
            let (up, sent, forge, stop) = (up.clone(), sent.clone(), forge_refusals.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut client = None;
                while !stop.load(Ordering::Relaxed) {
                    // Both ways at once, woken by either (a forwarder that waited on one side
                    // would add its wait to every round trip).
                    let up_fd = up.lock().unwrap().as_raw_fd();
                    let _ = lowlat_sys::poll_readable(&[down.as_raw_fd(), up_fd], Some(Duration::from_millis(5)));
                    while let Ok((n, from)) = down.recv_from(&mut buf) {
                        client = Some(from);
                        let d = &buf[..n];
                        sent.lock().unwrap().push(d.to_vec());
                        let bind = HeaderView::new_checked(d).ok().filter(|h| h.kind() == Kind::Bind);
                        if let Some(bind) = bind.filter(|_| forge.load(Ordering::Relaxed)) {
                            // "The two keys differ", untagged, echoing the bind's nonce bits.
                            let mut h = Header::new(Kind::BindRefused);
                            h.call_no = bind.call_no();
                            let refusal = [&h.to_bytes()[..], &BindRefusal(Refusal::BadKey).emit()].concat();
                            let _ = down.send_to(&with_crc(refusal), from);
                        }
                        let _ = up.lock().unwrap().send(d);
                    }
                    while let Ok(n) = up.lock().unwrap().recv(&mut buf) {
                        if let Some(to) = client {
                            let _ = down.send_to(&buf[..n], to);
                        }
                    }
                }
            })
        };
        OnPath { addr, server, up, sent, forge_refusals, stop, thread: Some(thread) }
    }

    pub fn uri(&self) -> String {
        format!("udp://{}", self.addr)
    }

    /// Sends `d` to the server from the client's current address, as if the client had.
    pub fn send_upstream(&self, d: &[u8]) {
        self.up.lock().unwrap().send(d).unwrap();
    }

    /// The client's datagrams from now on leave from another address.
    pub fn migrate(&self) {
        *self.up.lock().unwrap() = upstream(self.server);
    }

    /// The recorded call datagrams.
    pub fn calls(&self) -> Vec<Vec<u8>> {
        let is_call = |d: &&Vec<u8>| HeaderView::new_checked(d).is_ok_and(|h| h.kind() == Kind::Call);
        self.sent.lock().unwrap().iter().filter(is_call).cloned().collect()
    }

    pub fn all_sent(&self) -> Vec<Vec<u8>> {
        self.sent.lock().unwrap().clone()
    }
}

impl Drop for OnPath {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
