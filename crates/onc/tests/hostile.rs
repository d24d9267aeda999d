//! Random and damaged bytes never panic the parsers; the rpcbind client falls back from
//! GETADDR (versions 4 and 3) to PMAPPROC_GETPORT (version 2) when rpcbind lacks them.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use lowlat_onc::msg::{encode_accepted, CallHeader};
use lowlat_onc::rpcbind::{Netid, Rpcbind, Via};
use lowlat_onc::{AcceptStatus, AuthSys, Call, Credential, RecordReader, Reply};

/// A small deterministic generator (no dependency needed for this).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn random_and_mutated_messages_never_panic() {
    let mut g = Lcg(7);
    let mut valid = Vec::new();
    CallHeader { xid: 1, program: 2, version: 3, procedure: 4 }
        .encode(&Credential::Sys(AuthSys::new(1, b"host", 2, 3, &[4, 5])), &mut valid);
    valid.extend_from_slice(&[0, 0, 0, 9]);
    for i in 0..20_000 {
        let msg: Vec<u8> = if i % 2 == 0 {
            (0..g.next() % 128).map(|_| g.next() as u8).collect()
        } else {
            let mut m = valid.clone();
            for _ in 0..1 + g.next() % 4 {
                let at = (g.next() as usize) % m.len();
                m[at] = g.next() as u8;
            }
            m.truncate((g.next() as usize) % (m.len() + 1));
            m
        };
        let _ = Call::parse(&msg);
        let _ = Reply::parse(&msg);
        let mut r = RecordReader::new(256);
        r.buffer(msg.len())[..msg.len()].copy_from_slice(&msg);
        r.filled(msg.len());
        while let Ok(Some(_)) = r.next_record() {}
    }
}

#[test]
fn getaddr_falls_back_to_portmapper_getport() {
    // A fake portmapper that speaks only version 2.
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let addr = sock.local_addr().unwrap();
    let fake = std::thread::spawn(move || {
        let mut versions = Vec::new();
        let mut buf = [0u8; 1024];
        for _ in 0..3 {
            let Ok((n, from)) = sock.recv_from(&mut buf) else { break };
            let call = Call::parse(&buf[..n]).unwrap();
            versions.push(call.header.version);
            let mut out = Vec::new();
            if call.header.version == 2 {
                assert_eq!(call.header.procedure, 3, "PMAPPROC_GETPORT");
                // mapping { prog, vers, prot, port }: the protocol is UDP (17).
                assert_eq!(&call.args[8..12], &17u32.to_be_bytes());
                encode_accepted(call.header.xid, AcceptStatus::Success, &mut out);
                out.extend_from_slice(&4242u32.to_be_bytes());
            } else {
                encode_accepted(call.header.xid, AcceptStatus::ProgMismatch { low: 2, high: 2 }, &mut out);
            }
            sock.send_to(&out, from).unwrap();
        }
        versions
    });
    let rb = Rpcbind { via: Via::Udp(addr), addr, timeout: Duration::from_secs(2) };
    let got = rb.getaddr(0x2000_0001, 1, Netid::Udp).unwrap();
    assert_eq!(got, Some(SocketAddr::from(([127, 0, 0, 1], 4242))));
    assert_eq!(fake.join().unwrap(), [4, 3, 2]);
}
