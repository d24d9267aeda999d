//! Raw ping-pong: the same message exchange as an RPC, with no RPC layer, over lowlat's own
//! transport; and, with `floor` ([`RawOptions`]), the machine's floor for the path: the simplest
//! exchange the hardware or the OS allows, where lowlat's transport needs more (shared memory:
//! one message each way through cache lines, no ring; UDP: two connected sockets; raw Ethernet:
//! the XDP echo program). The lab reports RPC as a ratio over both.
//!
//! Both sides of a transport's raw exchange wait exactly as RPC does (the shared [`Spinner`]),
//! so a ratio compares protocol cost, not waiting strategy. The shared-memory floor always
//! spins: it is what the hardware allows.
//! With a pre-shared key (udp://, tcp://) each message carries the 16-byte tag a keyed lowlat
//! session puts on every frame, made and checked under the same keys: the floor of an
//! authenticated exchange.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lowlat::Endpoint;
use lowlat_sys::poll_readable;
use lowlat_transport::tcp::{TcpChannel, TcpEndpoint, TcpEvent};
use lowlat_transport::udp::{resolve, UdpChannel, UdpEndpoint, MAX_DATAGRAM};
use lowlat_wait::{SpinPolicy, Spinner};

pub mod pipelined;

use crate::latency::new_histogram;
use crate::raw::cpu_report;

/// Why a ping-pong could not run.
#[derive(Debug, thiserror::Error)]
pub enum PingPongError {
    /// The URI did not parse.
    #[error(transparent)]
    Uri(#[from] lowlat_addr::UriError),
    /// A socket operation failed.
    #[error("{op}: {source}")]
    Io {
        /// The operation that failed (e.g. "connect").
        op: String,
        /// The underlying error.
        source: io::Error,
    },
    /// No echo arrived within this time.
    #[error("no answer within {0:?}: is `lowlat pingpong --serve` running there?")]
    Timeout(Duration),
    /// The transport scheme has no raw ping-pong.
    #[error("there is no raw ping-pong over {0}: the floor under ONC RPC is the ping-pong of udp:// or tcp://")]
    Unsupported(String),
    /// A raw-Ethernet (eth:// or xdp://) operation failed.
    #[error(transparent)]
    Eth(#[from] lowlat_eth::Error),
    /// `--floor` was asked for a scheme that has no floor.
    #[error("there is no --floor for {0}: the floor exists for shm://, udp://, eth:// and xdp://")]
    NoFloor(String),
    /// A pre-shared key was given for a scheme other than udp:// or tcp://.
    #[error("the raw ping-pong tags messages with a pre-shared key over udp:// and tcp:// only, not {0}")]
    KeyUnsupported(String),
    /// A received message's tag failed to verify under the pre-shared key.
    #[error("a message's tag did not verify: do both ends have the same pre-shared key?")]
    BadTag,
    /// A pipelined run was asked for a window it cannot keep.
    #[error("--in-flight {asked}: a pipelined run keeps 1 to {max} messages in flight")]
    InFlight {
        /// The window asked for.
        asked: usize,
        /// The largest window.
        max: usize,
    },
    /// A message size the exchange cannot carry.
    #[error("--size {size}: {why}")]
    Size {
        /// The size asked for.
        size: usize,
        /// Why it cannot be.
        why: &'static str,
    },
    /// An echo that is not the message sent: altered, duplicated, or never sent.
    #[error("echo mismatch: {0}")]
    Mismatch(String),
}

pub use pipelined::{run_pipelined, PipelineOptions, Throughput, MAX_IN_FLIGHT};

/// The frame keys of a raw ping-pong at `uri` with a pre-shared key (as one side of a
/// session); only udp:// and tcp:// messages carry tags.
fn raw_keys(
    uri: &str,
    psk: Option<&lowlat::Psk>,
    side: lowlat_proto::auth::Side,
) -> Result<Option<lowlat_proto::FrameKeys>, PingPongError> {
    let Some(k) = psk else { return Ok(None) };
    if !(uri.starts_with("udp://") || uri.starts_with("tcp://")) {
        return Err(PingPongError::KeyUnsupported(uri.to_string()));
    }
    Ok(Some(k.session_keys(0, &[0; lowlat_proto::TAG_LEN], 0, side)))
}

/// The message `m` (a tag at its end) if its tag verifies under `keys` (always, without keys).
fn untag<'a>(keys: &Option<lowlat_proto::FrameKeys>, m: &'a [u8]) -> Result<&'a [u8], PingPongError> {
    let Some(k) = keys else { return Ok(m) };
    let (body, tag) = m.split_at_checked(m.len().wrapping_sub(lowlat_proto::TAG_LEN)).ok_or(PingPongError::BadTag)?;
    if k.recv.verify(body, &[], tag) {
        Ok(body)
    } else {
        Err(PingPongError::BadTag)
    }
}

/// The tag to send after `m` (nothing, without keys).
fn tag(keys: &Option<lowlat_proto::FrameKeys>, m: &[u8]) -> Trailer {
    Trailer(keys.as_ref().map(|k| k.send.tag(m, &[])))
}

/// The bytes sent after a message: its tag, or none. On the stack, as on lowlat's call path: a
/// baseline that allocated per message would flatter the RPC beside it.
struct Trailer(Option<lowlat_proto::auth::Tag>);

impl std::ops::Deref for Trailer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_ref().map_or(&[], |t| &t[..])
    }
}

/// The raw-Ethernet endpoint `uri` names, if it is one.
fn eth_endpoint(uri: &str) -> Result<Option<Endpoint>, PingPongError> {
    if uri.starts_with("eth://") || uri.starts_with("xdp://") {
        Ok(Some(uri.parse::<Endpoint>()?))
    } else {
        Ok(None)
    }
}

/// Ping-pong over eth:// or xdp:// (in the calling thread's network namespace): DATA frames to a
/// user-level echo server, or with `floor` PING frames to the XDP echo program. Without a MAC in
/// the URI the server is found by discovery (the XDP floor does not answer it: give the MAC).
fn eth_run(
    ep: &Endpoint,
    size: usize,
    calls: u64,
    warmup: u64,
    spin: SpinPolicy,
    eth: RawOptions,
) -> Result<(Histogram<u64>, Duration), PingPongError> {
    let opts = lowlat_eth::OpenOptions { rx_ring: true, checksum: eth.checksum, ..Default::default() };
    let mut sock = lowlat_eth::socket::open(ep, opts)?;
    let peer = match ep.ethernet().and_then(|(_, peer)| peer) {
        Some(m) => m,
        None => sock.discover(20, Duration::from_millis(50))?,
    };
    let cfg = crate::raw::eth_pingpong::RunConfig {
        size,
        rounds: calls as usize,
        warmup: warmup as usize,
        spin,
        kind: if eth.floor { lowlat_eth::frame::FrameType::Ping } else { lowlat_eth::frame::FrameType::Data },
        timeout: Duration::from_secs(5),
    };
    let rounds = crate::raw::eth_pingpong::run(sock.as_mut(), peer, &cfg)?;
    let mut h = new_histogram();
    let mut wall = 0u64;
    for ns in rounds {
        let _ = h.record(ns);
        wall += ns;
    }
    Ok((h, Duration::from_nanos(wall)))
}

/// How a raw ping-pong runs beyond its URI, size and waiting.
#[derive(Clone, Copy, Debug)]
pub struct RawOptions {
    /// The machine's floor instead of lowlat's transport: shm://, one message each way through
    /// cache lines (the server must be a `--floor` one); udp://, against a server on a connected
    /// socket (the client's is always connected); eth:// and xdp://, PING frames to the XDP echo
    /// program (the interrupt-level floor).
    pub floor: bool,
    /// eth:// and xdp:// only: append and require the end-to-end CRC32C (both ends must agree).
    pub checksum: bool,
}

impl Default for RawOptions {
    fn default() -> Self {
        RawOptions { floor: false, checksum: true }
    }
}

/// The error of a failed `op`, made only when it failed: the exchange loops map every send and
/// receive through this, and must allocate nothing while they succeed.
fn io_err(op: impl Into<String>) -> impl FnOnce(io::Error) -> PingPongError {
    move |source| PingPongError::Io { op: op.into(), source }
}

/// An echo loop, run until its flag is set.
type EchoLoop = Box<dyn FnOnce(&AtomicBool) -> Result<(), PingPongError> + Send>;

/// A running echo server for raw ping-pong.
pub struct PingPongServer {
    /// The URI the server is bound to, for clients to use (the actual port or MAC, not `:0`).
    pub local_uri: String,
    run: EchoLoop,
}

impl PingPongServer {
    /// Binds the echo server (so its address is known) without serving yet. `checksum`: eth://
    /// and xdp:// only, as [`RawOptions::checksum`]. `psk`: udp:// and tcp:// only, messages are
    /// tagged (and a message whose tag fails stops the server with an error).
    pub fn bind(
        uri: &str,
        spin: SpinPolicy,
        checksum: bool,
        psk: Option<&lowlat::Psk>,
    ) -> Result<PingPongServer, PingPongError> {
        let keys = raw_keys(uri, psk, lowlat_proto::auth::Side::Server)?;
        if let Some(path) = uri.strip_prefix("unix://") {
            return unix_server(path, spin);
        }
        if let Some(ep) = eth_endpoint(uri)? {
            let opts = lowlat_eth::OpenOptions { rx_ring: true, answer_discovery: true, checksum };
            let mut sock = lowlat_eth::socket::open(&ep, opts)?;
            let local_uri = format!("{}://{}/{}", ep.scheme(), sock.iface().name, sock.mac());
            return Ok(PingPongServer {
                local_uri,
                run: Box::new(move |stop| {
                    crate::raw::eth_pingpong::serve(sock.as_mut(), spin, stop)?;
                    Ok(())
                }),
            });
        }
        let ep: Endpoint = uri.parse()?;
        match ep {
            Endpoint::Udp { host_port } => {
                let addr = resolve(&host_port).map_err(io_err(uri))?;
                let mut sock = UdpEndpoint::bind(addr).map_err(io_err(format!("bind {uri}")))?;
                let local_uri = format!("udp://{}", sock.local_addr());
                Ok(PingPongServer {
                    local_uri,
                    run: Box::new(move |stop| {
                        let mut buf = vec![0u8; MAX_DATAGRAM];
                        let mut spinner = Spinner::new(spin);
                        while !stop.load(Ordering::Relaxed) {
                            let got = spinner
                                .wait_on(
                                    Some(Instant::now() + Duration::from_millis(100)),
                                    &mut (&mut sock, &mut buf),
                                    |(sock, b)| sock.try_recv_from(b),
                                    |(sock, _), t| poll_readable(&[sock.as_raw_fd()], t).map(|_| ()),
                                )
                                .map_err(io_err("receive"))?;
                            if let Some((n, from)) = got {
                                let m = untag(&keys, &buf[..n])?;
                                let report = cpu_report::answer(m);
                                let m = report.as_ref().map_or(m, |a| &a[..]);
                                sock.send_to(&from, m, &tag(&keys, m)).map_err(io_err("send"))?;
                            }
                        }
                        Ok(())
                    }),
                })
            }
            Endpoint::Tcp { host_port } => {
                let addr = resolve(&host_port).map_err(io_err(uri))?;
                let mut ep = TcpEndpoint::bind(addr, 16 << 20).map_err(io_err(format!("bind {uri}")))?;
                let local_uri = format!("tcp://{}", ep.local_addr());
                Ok(PingPongServer {
                    local_uri,
                    run: Box::new(move |stop| {
                        let mut buf = Vec::new();
                        let mut spinner = Spinner::new(spin);
                        while !stop.load(Ordering::Relaxed) {
                            let got = spinner
                                .wait_on(
                                    Some(Instant::now() + Duration::from_millis(100)),
                                    &mut ep,
                                    |ep| ep.try_next(&mut buf),
                                    |ep, t| ep.block(t),
                                )
                                .map_err(io_err("receive"))?;
                            if let Some(TcpEvent::Frame(id)) = got {
                                let m = untag(&keys, &buf)?;
                                let report = cpu_report::answer(m);
                                let m = report.as_ref().map_or(m, |a| &a[..]);
                                ep.send(&id, m, &tag(&keys, m));
                            }
                        }
                        Ok(())
                    }),
                })
            }
            Endpoint::Shm { path } => {
                let cfg = lowlat_shm::ShmServerConfig { spin, ..Default::default() };
                let mut server = lowlat_shm::ShmServer::bind(&path, cfg).map_err(|e| PingPongError::Io {
                    op: format!("bind {uri}"),
                    source: io::Error::other(e.to_string()),
                })?;
                Ok(PingPongServer {
                    local_uri: format!("shm://{}", path.display()),
                    run: Box::new(move |stop| {
                        server.run(&mut crate::raw::shm_pingpong::echo, stop).map_err(|e| PingPongError::Io {
                            op: "serve".into(),
                            source: io::Error::other(e.to_string()),
                        })
                    }),
                })
            }
            other => Err(PingPongError::Unsupported(other.scheme().to_string())),
        }
    }

    /// The machine's floor for the path of `uri` (see [`RawOptions::floor`]): for shm://, an
    /// echoer of one message each way through cache lines, or of rings of one-line records for a
    /// pipelined client; for udp://, an echo server that connects its socket to the first client
    /// it hears and echoes with `recvmmsg`/`sendmmsg` ([`crate::raw::udp_floor`]); for eth:// and xdp://, lowlat's XDP echo
    /// program attached to the interface, which answers PING frames in the driver's receive path
    /// (no user-level server runs; the program stays attached until `stop` is set).
    pub fn bind_floor(uri: &str, spin: SpinPolicy) -> Result<PingPongServer, PingPongError> {
        if let Some((iface, _)) = eth_endpoint(uri)?.as_ref().and_then(Endpoint::ethernet) {
            let floor = crate::raw::eth_pingpong::Floor::attach(iface, None)?;
            let mac = lowlat_eth::ifinfo::IfInfo::get(iface)?.mac;
            return Ok(PingPongServer {
                local_uri: format!("xdp://{iface}/{mac}"),
                run: Box::new(move |stop| {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    drop(floor);
                    Ok(())
                }),
            });
        }
        match uri.parse::<Endpoint>()? {
            Endpoint::Shm { path } => {
                // Bound now, so that a client may connect as soon as the server says it is ready.
                let floor = crate::raw::shm_floor::FloorServer::bind(&path).map_err(|e| PingPongError::Io {
                    op: format!("bind {uri}"),
                    source: io::Error::other(e.to_string()),
                })?;
                Ok(PingPongServer {
                    local_uri: format!("shm://{}", path.display()),
                    run: Box::new(move |stop| {
                        floor.serve(stop).map_err(|e| PingPongError::Io {
                            op: "serve the floor".into(),
                            source: io::Error::other(e.to_string()),
                        })
                    }),
                })
            }
            Endpoint::Udp { host_port } => {
                let addr = resolve(&host_port).map_err(io_err(uri))?;
                let sock = std::net::UdpSocket::bind(addr).map_err(io_err(format!("bind {uri}")))?;
                sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
                let local_uri = format!("udp://{}", sock.local_addr().map_err(io_err("local address"))?);
                Ok(PingPongServer {
                    local_uri,
                    run: Box::new(move |stop| crate::raw::udp_floor::echo(&sock, spin, stop).map_err(io_err("echo"))),
                })
            }
            _ => Err(PingPongError::NoFloor(uri.to_string())),
        }
    }
    /// Echoes until `stop` is set.
    pub fn run(self, stop: &AtomicBool) -> Result<(), PingPongError> {
        (self.run)(stop)
    }
}

/// A non-blocking operation's result: `None` when it would have blocked.
fn ready<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// A raw ping-pong client, connected: its exchanges may be measured in several runs (rounds
/// interleaved with other measurements, as `lowlat account` makes them) on one connection.
pub struct Pinger {
    link: Link,
    /// Waits as RPC's client does, learning the echo's pace across round trips.
    spinner: Spinner,
    keys: Option<lowlat_proto::FrameKeys>,
    /// The message sent each round trip.
    msg: Vec<u8>,
    /// Where the echo is received.
    buf: Vec<u8>,
}

/// The connection of a [`Pinger`].
enum Link {
    Udp(UdpChannel),
    Tcp(TcpChannel),
    Unix(std::os::unix::net::UnixStream),
    Shm(Box<lowlat_shm::ShmChannel>),
    ShmFloor(Box<crate::raw::shm_floor::FloorClient>),
    /// eth:// and xdp:// open their socket for each run.
    Eth(Endpoint, RawOptions),
}

/// How long one round trip may take.
const ROUND_TIMEOUT: Duration = Duration::from_secs(5);

impl Pinger {
    /// Connects to an echo server at `uri` (see [`RawOptions`]) for messages of `size` bytes.
    pub fn connect(
        uri: &str,
        size: usize,
        spin: SpinPolicy,
        opts: RawOptions,
        psk: Option<&lowlat::Psk>,
    ) -> Result<Pinger, PingPongError> {
        let keys = raw_keys(uri, psk, lowlat_proto::auth::Side::Client)?;
        let mut msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let buf = vec![0u8; MAX_DATAGRAM.max(size)];
        let link = if let Some(ep) = eth_endpoint(uri)? {
            Link::Eth(ep, opts)
        } else if let Some(path) = uri.strip_prefix("unix://") {
            if opts.floor {
                return Err(PingPongError::NoFloor(uri.to_string()));
            }
            let s = std::os::unix::net::UnixStream::connect(path).map_err(io_err(format!("connect {uri}")))?;
            s.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
            // A stream has no empty message: at least one byte goes each way.
            msg.resize(size.max(1), 0);
            Link::Unix(s)
        } else {
            let shm_err = |e: lowlat_shm::ShmError| PingPongError::Io {
                op: format!("ping-pong {uri}"),
                source: io::Error::other(e.to_string()),
            };
            match uri.parse::<Endpoint>()? {
                Endpoint::Shm { path } if opts.floor => Link::ShmFloor(Box::new(
                    crate::raw::shm_floor::FloorClient::connect(&path, size, ROUND_TIMEOUT).map_err(shm_err)?,
                )),
                Endpoint::Shm { path } => {
                    let cfg = lowlat_shm::ChannelConfig { spin, ..Default::default() };
                    Link::Shm(Box::new(lowlat_shm::ShmChannel::connect(&path, cfg).map_err(shm_err)?))
                }
                Endpoint::Udp { host_port } => {
                    let addr = resolve(&host_port).map_err(io_err(uri))?;
                    Link::Udp(UdpChannel::connect(addr).map_err(io_err(format!("connect {uri}")))?)
                }
                Endpoint::Tcp { .. } if opts.floor => return Err(PingPongError::NoFloor(uri.to_string())),
                Endpoint::Tcp { host_port } => {
                    let addr = resolve(&host_port).map_err(io_err(uri))?;
                    Link::Tcp(
                        TcpChannel::connect(addr, 16 << 20, ROUND_TIMEOUT).map_err(io_err(format!("connect {uri}")))?,
                    )
                }
                other => return Err(PingPongError::Unsupported(other.scheme().to_string())),
            }
        };
        Ok(Pinger { link, spinner: Spinner::new(spin), keys, msg, buf })
    }

    /// Makes `warmup + calls` round trips; returns the histogram of the measured ones and the
    /// wall time they took.
    pub fn exchange(&mut self, calls: u64, warmup: u64) -> Result<(Histogram<u64>, Duration), PingPongError> {
        if let Link::Eth(ep, opts) = &self.link {
            return eth_run(ep, self.msg.len(), calls, warmup, self.spinner.policy(), *opts);
        }
        let mut h = new_histogram();
        let mut measured_start = Instant::now();
        for i in 0..warmup + calls {
            if i == warmup {
                measured_start = Instant::now();
            }
            let took = self.round_trip()?;
            if i >= warmup {
                let _ = h.record(took.as_nanos() as u64);
            }
        }
        Ok((h, measured_start.elapsed()))
    }

    /// One round trip, checked; its latency.
    fn round_trip(&mut self) -> Result<Duration, PingPongError> {
        let Pinger { link, spinner, keys, msg, buf } = self;
        let shm_err = |e: lowlat_shm::ShmError| PingPongError::Io {
            op: "ping-pong over shared memory".into(),
            source: io::Error::other(e.to_string()),
        };
        let t0 = Instant::now();
        let deadline = Some(t0 + ROUND_TIMEOUT);
        let got = match link {
            Link::Shm(ch) => return crate::raw::shm_pingpong::round_trip(ch, msg, ROUND_TIMEOUT).map_err(shm_err),
            Link::ShmFloor(c) => return c.round(ROUND_TIMEOUT).map_err(shm_err),
            Link::Unix(s) => {
                unix_round(s, msg, buf, spinner, t0 + ROUND_TIMEOUT)?;
                return Ok(t0.elapsed());
            }
            Link::Eth(..) => return Err(PingPongError::Unsupported("a single eth:// round trip".into())),
            Link::Udp(ch) => {
                ch.send(msg, &tag(keys, msg)).map_err(io_err("send"))?;
                spinner
                    .wait_on(deadline, buf, |b| ch.try_recv(b), |_, t| poll_readable(&[ch.as_raw_fd()], t).map(|_| ()))
                    .map_err(io_err("receive"))?
            }
            Link::Tcp(ch) => {
                ch.send(msg, &tag(keys, msg)).map_err(io_err("send"))?;
                spinner
                    .wait_on(
                        deadline,
                        ch,
                        |ch| ch.try_recv(buf).map(|o| o.map(|()| buf.len())),
                        |ch, t| poll_readable(&[ch.as_raw_fd()], t).map(|_| ()),
                    )
                    .map_err(io_err("receive"))?
            }
        };
        let Some(n) = got else {
            return Err(PingPongError::Timeout(ROUND_TIMEOUT));
        };
        untag(keys, &buf[..n])?;
        Ok(t0.elapsed())
    }
}

/// Runs `warmup + calls` round trips of `size` bytes against an echo server; returns the
/// histogram of the measured ones and the wall time they took.
pub fn run(
    uri: &str,
    size: usize,
    calls: u64,
    warmup: u64,
    spin: SpinPolicy,
    opts: RawOptions,
    psk: Option<&lowlat::Psk>,
) -> Result<(Histogram<u64>, Duration), PingPongError> {
    Pinger::connect(uri, size, spin, opts, psk)?.exchange(calls, warmup)
}

/// The Unix stream socket baseline (`unix://PATH`): bytes echoed back as they arrive.
fn unix_server(path: &str, spin: SpinPolicy) -> Result<PingPongServer, PingPongError> {
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(io_err(format!("bind unix://{path}")))?;
    listener.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
    let local_uri = format!("unix://{path}");
    let path = path.to_string();
    Ok(PingPongServer {
        local_uri,
        run: Box::new(move |stop| {
            // Every wait is bounded, so that `stop` is seen and the socket file removed.
            let slice = Duration::from_millis(50);
            let mut buf = vec![0u8; 1 << 16];
            let mut spinner = Spinner::new(spin);
            let served = (|| -> Result<(), PingPongError> {
                while !stop.load(Ordering::Relaxed) {
                    let mut s = match listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            poll_readable(&[listener.as_raw_fd()], Some(slice)).map_err(io_err("accept"))?;
                            continue;
                        }
                        Err(e) => return Err(io_err("accept")(e)),
                    };
                    s.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
                    while !stop.load(Ordering::Relaxed) {
                        let got = spinner
                            .wait_on(
                                Some(Instant::now() + slice),
                                &mut s,
                                |s| ready(s.read(&mut buf)),
                                |s, t| poll_readable(&[s.as_raw_fd()], t).map(|_| ()),
                            )
                            .map_err(io_err("receive"))?;
                        match got {
                            None => continue,
                            Some(0) => break,
                            Some(n) => {
                                if write_all_nonblocking(&mut s, &buf[..n]).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                }
                Ok(())
            })();
            let _ = std::fs::remove_file(&path);
            served
        }),
    })
}

/// Writes all of `data` to a non-blocking stream, spinning while its buffer is full (an echo's
/// reply fits the socket buffer, so that is rare), for at most five seconds.
fn write_all_nonblocking(s: &mut impl io::Write, data: &[u8]) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut sent = 0;
    while sent < data.len() {
        match s.write(&data[sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => std::hint::spin_loop(),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One round trip over a Unix stream socket: `msg` written, its echo read into `buf` (as long).
fn unix_round(
    s: &mut std::os::unix::net::UnixStream,
    msg: &[u8],
    buf: &mut [u8],
    spinner: &mut Spinner,
    deadline: Instant,
) -> Result<(), PingPongError> {
    use std::io::Read;
    write_all_nonblocking(s, msg).map_err(io_err("send"))?;
    let mut got = 0;
    while got < msg.len() {
        let n = spinner
            .wait_on(
                Some(deadline),
                &mut *s,
                |s| match ready(s.read(&mut buf[got..msg.len()]))? {
                    Some(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed")),
                    n => Ok(n),
                },
                |s, t| poll_readable(&[s.as_raw_fd()], t).map(|_| ()),
            )
            .map_err(io_err("receive"))?
            .ok_or(PingPongError::Timeout(ROUND_TIMEOUT))?;
        got += n;
    }
    Ok(())
}
