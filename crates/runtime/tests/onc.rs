//! ONC RPC between lowlat's own client and server: both transports, every reply status produced
//! by the server and recognised by the client, credentials, the duplicate-request cache, record
//! fragments and the maximum record size. (Interoperation with rpcgen/libtirpc and rpcbind is in
//! crates/dynamic/tests.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lowlat::{AuthSys, Client, ClientConfig, Error, ProcError, Program, Server, ServerConfig};
use lowlat_onc::auth::AuthStat;
use lowlat_onc::msg::{encode_denied, CallHeader};
use lowlat_onc::{AcceptStatus, Credential, RejectStatus, Reply, ReplyBody};

const PROG: u32 = 0x2000_7701;

fn be_u32(b: &[u8]) -> Result<u32, ProcError> {
    b.try_into().map(u32::from_be_bytes).map_err(|_| ProcError::GarbageArgs)
}

/// Version 2 of a test program with XDR bodies: 0 NULL, 1 INC(unsigned) -> unsigned, 2 COUNT()
/// -> unsigned (not idempotent: counts its executions), 3 FAIL (a system error), 4 WHO() ->
/// the caller's uid, 5 ECHO(opaque<>) -> opaque<>, 6 SLOW_INC (long-running), 7 BIG() -> 70,000
/// bytes (more than a datagram).
fn program(count: Arc<AtomicU32>) -> Program {
    Program::new(PROG, 2)
        .xdr()
        .procedure(0, "NULL", |_, _, _| Ok(()))
        .procedure(1, "INC", |_, a, r| {
            r.extend_from_slice(&(be_u32(a)? + 1).to_be_bytes());
            Ok(())
        })
        .procedure(2, "COUNT", move |_, _, r| {
            r.extend_from_slice(&(count.fetch_add(1, Ordering::SeqCst) + 1).to_be_bytes());
            Ok(())
        })
        .procedure(3, "FAIL", |_, _, _| Err(ProcError::SystemError))
        .procedure(4, "WHO", |ctx, _, r| {
            let uid = ctx.auth.map_or(u32::MAX, |a| a.uid);
            r.extend_from_slice(&uid.to_be_bytes());
            Ok(())
        })
        .procedure(5, "ECHO", |_, a, r| {
            r.extend_from_slice(a);
            Ok(())
        })
        .procedure(7, "BIG", |_, _, r| {
            r.resize(70_000, 0);
            Ok(())
        })
        .long_running(6, "SLOW_INC", |_, a, r| {
            std::thread::sleep(Duration::from_millis(5));
            r.extend_from_slice(&(be_u32(a)? + 1).to_be_bytes());
            Ok(())
        })
}

fn no_rpcbind() -> ServerConfig {
    ServerConfig { onc_register: false, ..ServerConfig::default() }
}

fn serve(cfg: ServerConfig) -> (Server, Arc<AtomicU32>) {
    let count = Arc::new(AtomicU32::new(0));
    let server = Server::builder()
        .program(program(count.clone()))
        .config(cfg)
        .serve(&["onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    (server, count)
}

fn u32_of(r: &[u8]) -> Result<u32, lowlat::DecodeError> {
    r.try_into().map(u32::from_be_bytes).map_err(|_| lowlat::DecodeError::new("u32", r.len()))
}

fn inc(c: &Client, n: u32) -> Result<u32, Error> {
    c.call(1, put(&n.to_be_bytes()), u32_of)
}

fn put(bytes: &[u8]) -> impl FnOnce(&mut lowlat::OutBuf<'_>) -> Result<(), lowlat::DecodeError> + '_ {
    move |a| {
        a.extend_from_slice(bytes);
        Ok(())
    }
}

fn nothing(_: &mut lowlat::OutBuf<'_>) -> Result<(), lowlat::DecodeError> {
    Ok(())
}

#[test]
fn calls_over_udp_and_tcp() {
    let (server, _) = serve(no_rpcbind());
    for uri in server.local_uris() {
        let c = Client::connect(&uri, PROG, 2).unwrap();
        assert!(c.is_onc());
        assert_eq!(inc(&c, 41).unwrap(), 42, "{uri}");
        c.call(0, nothing, |r| if r.is_empty() { Ok(()) } else { Err(lowlat::DecodeError::new("nothing", r.len())) })
            .unwrap();
        // A long-running procedure goes through the worker pool and back.
        let n = c.call(6, put(&9u32.to_be_bytes()), u32_of).unwrap();
        assert_eq!(n, 10, "{uri}");
        // Threads share the binding.
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let c = &c;
                s.spawn(move || {
                    for i in 0..50 {
                        assert_eq!(inc(c, t * 1000 + i).unwrap(), t * 1000 + i + 1);
                    }
                });
            }
        });
    }
    server.shutdown();
}

#[test]
fn large_messages_and_record_fragments_over_tcp() {
    let (server, _) = serve(ServerConfig { max_message: 1 << 20, ..no_rpcbind() });
    let tcp = server.local_uris().into_iter().find(|u| u.starts_with("onc+tcp")).unwrap();
    // The client splits its call into 1000-byte fragments; the server reassembles.
    let cfg = ClientConfig { onc_max_fragment: 1000, ..ClientConfig::default() };
    let c = Client::connect_with(&tcp, PROG, 2, cfg).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let back = c.call(5, put(&data), |r| Ok(r.to_vec())).unwrap();
    assert_eq!(back, data);
    // Above the server's maximum record: the server drops the connection.
    let big = vec![0u8; (1 << 20) + 1];
    let e = c.call(5, put(&big), |r| Ok(r.len())).unwrap_err();
    assert!(matches!(e, Error::ConnectionLost { .. }), "{e}");
    // The binding reconnects for the next call.
    assert_eq!(inc(&c, 1).unwrap(), 2);
    // Arguments above the binding's own maximum are refused before anything is sent.
    let cfg = ClientConfig { max_message: 1000, ..ClientConfig::default() };
    let small = Client::connect_with(&tcp, PROG, 2, cfg).unwrap();
    let e = small.call(5, put(&[3; 1001]), |r| Ok(r.len())).unwrap_err();
    assert!(matches!(e, Error::TooLarge { size: Some(1001), max: 1000, .. }), "{e}");
    assert!(!e.may_have_executed());
    assert_eq!(small.call(5, put(&[3; 1000]), |r| Ok(r.len())).unwrap(), 1000);
    server.shutdown();
}

#[test]
fn udp_size_limits_are_errors_not_silence() {
    let (server, _) = serve(no_rpcbind());
    let udp = server.local_uris().into_iter().find(|u| u.starts_with("onc+udp")).unwrap();
    let c = Client::connect(&udp, PROG, 2).unwrap();
    let big = vec![1u8; 70_000];
    let e = c.call(5, put(&big), |r| Ok(r.len())).unwrap_err();
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");
    assert!(!e.may_have_executed());
    // A result no datagram can carry: SYSTEM_ERR, not silence.
    let e = c.call(7, nothing, |r| Ok(r.len())).unwrap_err();
    assert!(matches!(&e, Error::ServerError { call, .. } if call.proc_no == 7), "{e}");
    // Over TCP the same result arrives.
    let tcp = server.local_uris().into_iter().find(|u| u.starts_with("onc+tcp")).unwrap();
    let n = Client::connect(&tcp, PROG, 2).unwrap().call(7, nothing, |r| Ok(r.len())).unwrap();
    assert_eq!(n, 70_000);
    server.shutdown();
}

#[test]
fn every_accepted_status_is_recognised() {
    let (server, _) = serve(no_rpcbind());
    for uri in server.local_uris() {
        // PROG_UNAVAIL
        let c = Client::connect(&uri, PROG + 1, 2).unwrap();
        let e = inc(&c, 1).unwrap_err();
        assert!(matches!(e, Error::UnknownProgram { program, .. } if program == PROG + 1), "{uri}: {e}");
        assert!(e.to_string().contains("does not serve program"), "{e}");
        // PROG_MISMATCH with the range served
        let c = Client::connect(&uri, PROG, 7).unwrap();
        let e = inc(&c, 1).unwrap_err();
        assert!(matches!(e, Error::VersionMismatch { low: 2, high: 2, requested: 7, .. }), "{uri}: {e}");
        assert!(e.to_string().contains("versions 2 to 2"), "{e}");
        let c = Client::connect(&uri, PROG, 2).unwrap();
        // PROC_UNAVAIL
        let e = c.call(99, nothing, |_| Ok(())).unwrap_err();
        assert!(matches!(&e, Error::UnknownProcedure { call } if call.proc_no == 99), "{uri}: {e}");
        // GARBAGE_ARGS: INC with two bytes
        let e = c.call(1, put(&[1, 2]), |_| Ok(())).unwrap_err();
        assert!(matches!(&e, Error::GarbageArgs { call, .. } if call.proc_no == 1), "{uri}: {e}");
        // SYSTEM_ERR
        let e = c.call(3, nothing, |_| Ok(())).unwrap_err();
        assert!(matches!(&e, Error::ServerError { call, .. } if call.proc_no == 3), "{uri}: {e}");
        // And the binding still works.
        assert_eq!(inc(&c, 1).unwrap(), 2);
    }
    server.shutdown();
}

#[test]
fn auth_sys_reaches_the_procedure_and_uids_are_enforced() {
    // With several threads the credentials travel with a call run lent (`serving::seats`).
    for threads in [1, 2] {
        auth_sys_reaches_the_procedure(threads);
    }
}

fn auth_sys_reaches_the_procedure(threads: usize) {
    let cfg = ServerConfig { onc_allowed_uids: vec![1234], threads, ..no_rpcbind() };
    let (server, _) = serve(cfg);
    for uri in server.local_uris() {
        let who = |c: &Client| c.call(4, nothing, u32_of);
        let ok = ClientConfig { onc_auth: Some(AuthSys::new(1, b"here", 1234, 5, &[5, 6])), ..ClientConfig::default() };
        let c = Client::connect_with(&uri, PROG, 2, ok).unwrap();
        for _ in 0..3 {
            assert_eq!(who(&c).unwrap(), 1234, "{uri}, {threads} threads");
        }
        let other = ClientConfig { onc_auth: Some(AuthSys::new(1, b"here", 99, 5, &[])), ..ClientConfig::default() };
        let e = who(&Client::connect_with(&uri, PROG, 2, other).unwrap()).unwrap_err();
        assert!(matches!(e, Error::AuthError { reason: AuthStat::TooWeak, .. }), "{uri}: {e}");
        assert!(!e.may_have_executed());
        // AUTH_NONE when AUTH_SYS is required.
        let e = who(&Client::connect(&uri, PROG, 2).unwrap()).unwrap_err();
        assert!(matches!(e, Error::AuthError { reason: AuthStat::TooWeak, .. }), "{uri}: {e}");
        assert!(e.to_string().contains("AUTH_TOOWEAK"), "{e}");
    }
    server.shutdown();
    // Without a requirement, AUTH_NONE callers are served and see no credentials.
    let (server, _) = serve(no_rpcbind());
    let c = Client::connect(&server.local_uris()[0], PROG, 2).unwrap();
    assert_eq!(c.call(4, nothing, u32_of).unwrap(), u32::MAX);
    server.shutdown();
}

fn udp_addr(server: &Server) -> SocketAddr {
    let u = server.local_uris().into_iter().find(|u| u.starts_with("onc+udp")).unwrap();
    u.trim_start_matches("onc+udp://").parse().unwrap()
}

fn exchange(sock: &UdpSocket, msg: &[u8]) -> Vec<u8> {
    sock.send(msg).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = sock.recv(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn crafted_calls_get_denials() {
    let (server, _) = serve(no_rpcbind());
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.connect(udp_addr(&server)).unwrap();
    let mut call = Vec::new();
    CallHeader { xid: 77, program: PROG, version: 2, procedure: 0 }.encode(&Credential::None, &mut call);
    // RPC version 3.
    let mut v3 = call.clone();
    v3[8..12].copy_from_slice(&3u32.to_be_bytes());
    let r = exchange(&sock, &v3);
    let r = Reply::parse(&r).unwrap();
    assert_eq!((r.xid, r.body), (77, ReplyBody::Denied(RejectStatus::RpcMismatch { low: 2, high: 2 })));
    // An AUTH_SYS credential with nothing in it.
    let mut bad = call.clone();
    bad[0..4].copy_from_slice(&78u32.to_be_bytes());
    bad[24..28].copy_from_slice(&1u32.to_be_bytes());
    let r = exchange(&sock, &bad);
    assert_eq!(Reply::parse(&r).unwrap().body, ReplyBody::Denied(RejectStatus::AuthError(AuthStat::BadCred)));
    // A flavour lowlat does not take (AUTH_DH = 3).
    let mut dh = call.clone();
    dh[0..4].copy_from_slice(&79u32.to_be_bytes());
    dh[24..28].copy_from_slice(&3u32.to_be_bytes());
    let r = exchange(&sock, &dh);
    assert_eq!(Reply::parse(&r).unwrap().body, ReplyBody::Denied(RejectStatus::AuthError(AuthStat::RejectedCred)));
    // Garbage that is not a call is dropped, and the server goes on.
    sock.send(b"hello").unwrap();
    let r = exchange(&sock, &call);
    assert_eq!(Reply::parse(&r).unwrap().body, ReplyBody::Accepted(AcceptStatus::Success));
    server.shutdown();
}

/// A one-shot fake ONC RPC server answering every call with `body`.
fn fake_server(body: ReplyBody) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let Ok((n, from)) = sock.recv_from(&mut buf) else { return };
        let xid = lowlat_onc::msg::peek_xid(&buf[..n]).unwrap();
        let mut out = Vec::new();
        match body {
            ReplyBody::Denied(d) => encode_denied(xid, d, &mut out),
            ReplyBody::Accepted(a) => lowlat_onc::msg::encode_accepted(xid, a, &mut out),
        }
        sock.send_to(&out, from).unwrap();
    });
    (addr, h)
}

#[test]
fn client_recognises_denials() {
    for (body, check) in [
        (
            ReplyBody::Denied(RejectStatus::RpcMismatch { low: 3, high: 4 }),
            Box::new(|e: &Error| matches!(e, Error::RpcMismatch { low: 3, high: 4, .. }))
                as Box<dyn Fn(&Error) -> bool>,
        ),
        (
            ReplyBody::Denied(RejectStatus::AuthError(AuthStat::RejectedCred)),
            Box::new(|e: &Error| matches!(e, Error::AuthError { reason: AuthStat::RejectedCred, .. })),
        ),
        (
            ReplyBody::Denied(RejectStatus::AuthError(AuthStat::BadCred)),
            Box::new(|e: &Error| matches!(e, Error::AuthError { reason: AuthStat::BadCred, .. })),
        ),
    ] {
        let (addr, h) = fake_server(body);
        let c = Client::connect(&format!("onc+udp://{addr}"), PROG, 2).unwrap();
        let e = inc(&c, 1).unwrap_err();
        assert!(check(&e), "{body:?}: {e}");
        assert!(!e.to_string().is_empty());
        h.join().unwrap();
    }
}

#[test]
fn retransmitted_call_runs_once() {
    let (server, count) = serve(no_rpcbind());
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.connect(udp_addr(&server)).unwrap();
    let mut call = Vec::new();
    CallHeader { xid: 500, program: PROG, version: 2, procedure: 2 }.encode(&Credential::None, &mut call);
    let first = exchange(&sock, &call);
    let again = exchange(&sock, &call);
    assert_eq!(first, again, "the retransmission got the cached reply");
    assert_eq!(count.load(Ordering::SeqCst), 1, "COUNT ran once for two copies of one call");
    // A new xid is a new call.
    call[0..4].copy_from_slice(&501u32.to_be_bytes());
    let r = exchange(&sock, &call);
    assert_eq!(Reply::parse(&r).unwrap().results, &2u32.to_be_bytes());
    assert_eq!(count.load(Ordering::SeqCst), 2);
    server.shutdown();
}

#[test]
fn client_retransmits_until_answered_and_times_out_by_its_deadline() {
    // A server that ignores the first two copies of a call, then answers: the client resends.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut xids = Vec::new();
        for _ in 0..3 {
            let (n, from) = sock.recv_from(&mut buf).unwrap();
            xids.push(lowlat_onc::msg::peek_xid(&buf[..n]).unwrap());
            if xids.len() == 3 {
                let mut out = Vec::new();
                lowlat_onc::msg::encode_accepted(xids[2], AcceptStatus::Success, &mut out);
                out.extend_from_slice(&5u32.to_be_bytes());
                sock.send_to(&out, from).unwrap();
            }
        }
        xids
    });
    let c = Client::connect(&format!("onc+udp://{addr}"), PROG, 2).unwrap();
    assert_eq!(inc(&c, 1).unwrap(), 5);
    let xids = h.join().unwrap();
    assert!(xids.iter().all(|x| *x == xids[0]), "retransmissions keep the xid: {xids:?}");
    // Nobody answers: the deadline bounds the call.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let c = Client::connect(&format!("onc+udp://{}", silent.local_addr().unwrap()), PROG, 2).unwrap();
    let t = std::time::Instant::now();
    let e = c.call_timeout(1, Duration::from_millis(400), put(&[0; 4]), u32_of).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// Issue 19.4: a port where nothing listens refuses the first datagram (ICMP port-unreachable
/// on the connected socket), so the call fails at once, known never to have run, as lowlat's own
/// `udp://` does; not after the deadline as "may or may not have executed".
#[test]
fn udp_to_a_port_where_nothing_listens_fails_at_once_as_never_executed() {
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let c = Client::connect(&format!("onc+udp://{closed}"), PROG, 2).unwrap();
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let e = c.call_timeout(1, Duration::from_secs(10), put(&[0; 4]), u32_of).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2), "took {:?}: {e}", t.elapsed());
        assert!(matches!(e, Error::ServerNotRunning { .. }), "{e}");
        assert!(!e.may_have_executed(), "{e}");
        assert!(e.to_string().contains("never executed"), "{e}");
    }
    // A server that comes up there afterwards is reached by the same binding.
    let sock = UdpSocket::bind(closed).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        let mut out = Vec::new();
        lowlat_onc::msg::encode_accepted(
            lowlat_onc::msg::peek_xid(&buf[..n]).unwrap(),
            AcceptStatus::Success,
            &mut out,
        );
        out.extend_from_slice(&8u32.to_be_bytes());
        sock.send_to(&out, from).unwrap();
    });
    assert_eq!(inc(&c, 7).unwrap(), 8);
    h.join().unwrap();
}

#[test]
fn raw_tcp_records_in_several_fragments_are_answered() {
    let (server, _) = serve(no_rpcbind());
    let tcp = server.local_uris().into_iter().find(|u| u.starts_with("onc+tcp")).unwrap();
    let mut s = TcpStream::connect(tcp.trim_start_matches("onc+tcp://")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut call = Vec::new();
    CallHeader { xid: 9, program: PROG, version: 2, procedure: 1 }.encode(&Credential::None, &mut call);
    call.extend_from_slice(&10u32.to_be_bytes());
    let mut wire = Vec::new();
    lowlat_onc::frame_record(&call, 7, &mut wire);
    for chunk in wire.chunks(5) {
        s.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut rr = lowlat_onc::RecordReader::new(1 << 16);
    let rec = loop {
        let b = rr.buffer(4096);
        let n = s.read(b).unwrap();
        assert!(n > 0, "server closed");
        rr.filled(n);
        if let Some(r) = rr.next_record().unwrap() {
            break r.to_vec();
        }
    };
    let r = Reply::parse(&rec).unwrap();
    assert_eq!((r.xid, r.body, r.results), (9, ReplyBody::Accepted(AcceptStatus::Success), &11u32.to_be_bytes()[..]));
    server.shutdown();
}
