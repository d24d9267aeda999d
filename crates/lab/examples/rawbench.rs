//! Raw ping-pong across a veth pair between two network namespaces: eth:// (plain recv and
//! PACKET_MMAP, checksum on and off), xdp://, the XDP floor, and UDP for comparison.
//!
//! `cargo run --release -p lowlat-lab --example rawbench [ROUNDS]` (as root). Server pinned to
//! CPU 0, client to CPU 1; one JSON object per row on stdout.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lowlat_eth::bpf::XdpMode;
use lowlat_eth::frame::FrameType;
use lowlat_eth::{EthConfig, XdpConfig};
use lowlat_lab::raw::eth_hosts;
use lowlat_lab::raw::eth_pingpong::{self as pingpong, RunConfig, Summary};
use lowlat_sys::pin_to_cpu;
use lowlat_testkit::testhosts::TestHosts;
use lowlat_wait::SpinPolicy;

#[derive(Clone, Copy, Debug)]
enum Side {
    Eth { ring: bool, crc: bool },
    Xdp { mode: Option<XdpMode>, crc: bool },
}

impl Side {
    fn socket(self) -> eth_hosts::Side {
        match self {
            Side::Eth { ring, crc } => {
                eth_hosts::Side::Eth(EthConfig { rx_ring: ring, checksum: crc, ..EthConfig::default() })
            }
            Side::Xdp { mode, crc } => eth_hosts::Side::Xdp(XdpConfig { mode, checksum: crc, ..XdpConfig::default() }),
        }
    }
}

fn row(name: &str, size: usize, spin: SpinPolicy, s: &Summary) {
    println!(
        "{{\"kind\":\"raw\",\"transport\":\"{name}\",\"size\":{size},\"spin\":\"{spin}\",\"calls\":{},\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"mean_ns\":{}}}",
        s.count, s.p50, s.p90, s.p99, s.p999, s.max, s.mean
    );
    eprintln!(
        "{name:<28} {size:>5} B  spin {spin:<8} p50 {:>7.2} µs  p99 {:>7.2} µs",
        s.p50 as f64 / 1e3,
        s.p99 as f64 / 1e3
    );
}

/// One measurement's parameters.
#[derive(Clone, Copy)]
struct Case {
    kind: FrameType,
    size: usize,
    spin: SpinPolicy,
    rounds: usize,
}

fn frames(h: &TestHosts, name: &str, server: Option<Side>, client: Side, case: Case) {
    let Case { kind, size, spin, rounds } = case;
    let responder = match server {
        Some(side) => eth_hosts::Responder::User(side.socket()),
        None => eth_hosts::Responder::XdpFloor,
    };
    let cfg = RunConfig { size, rounds, warmup: rounds / 10, spin, kind, ..RunConfig::default() };
    let pin = eth_hosts::Pinning { server: Some(0), client: Some(1) };
    let mut lat = eth_hosts::across(h, responder, client.socket(), &cfg, pin).unwrap();
    row(name, size, spin, &pingpong::summarize(&mut lat));
}

fn udp(h: &TestHosts, size: usize, rounds: usize) {
    let (a, b) = (h.a.addr, h.b.addr);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let server = h.a.spawn(move || {
        let _ = pin_to_cpu(0);
        let s = UdpSocket::bind((a, 9000)).unwrap();
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        while !st.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                s.send_to(&buf[..n], from).unwrap();
            }
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let lat =
        h.b.spawn(move || {
            let _ = pin_to_cpu(1);
            let c = UdpSocket::bind((b, 0)).unwrap();
            c.connect((a, 9000)).unwrap();
            c.set_nonblocking(true).unwrap();
            let msg = vec![7u8; size];
            let mut buf = [0u8; 2048];
            let mut out = Vec::new();
            for i in 0..rounds + rounds / 10 {
                let t = Instant::now();
                c.send(&msg).unwrap();
                loop {
                    if c.recv(&mut buf).is_ok() {
                        break;
                    }
                    assert!(t.elapsed() < Duration::from_secs(1), "UDP reply lost");
                }
                if i >= rounds / 10 {
                    out.push(t.elapsed().as_nanos() as u64);
                }
            }
            out
        })
        .join()
        .unwrap()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();
    let mut lat = lat;
    row("udp (busy-poll)", size, SpinPolicy::Forever, &pingpong::summarize(&mut lat));
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let h = TestHosts::new().expect("creating test hosts (needs root)");
    let busy = SpinPolicy::Forever;
    let eth = |ring, crc| Side::Eth { ring, crc };
    for size in [32usize, 1024] {
        udp(&h, size, rounds);
        frames(
            &h,
            "eth plain crc",
            Some(eth(false, true)),
            eth(false, true),
            Case { kind: FrameType::Data, size, spin: busy, rounds },
        );
        frames(
            &h,
            "eth plain nocrc",
            Some(eth(false, false)),
            eth(false, false),
            Case { kind: FrameType::Data, size, spin: busy, rounds },
        );
        frames(
            &h,
            "eth mmap crc",
            Some(eth(true, true)),
            eth(true, true),
            Case { kind: FrameType::Data, size, spin: busy, rounds },
        );
        frames(
            &h,
            "eth mmap nocrc",
            Some(eth(true, false)),
            eth(true, false),
            Case { kind: FrameType::Data, size, spin: busy, rounds },
        );
        for (name, mode) in [("xdp generic", Some(XdpMode::Generic)), ("xdp native", Some(XdpMode::Driver))] {
            for crc in [true, false] {
                let x = Side::Xdp { mode, crc };
                frames(
                    &h,
                    &format!("{name} {}", if crc { "crc" } else { "nocrc" }),
                    Some(x),
                    x,
                    Case { kind: FrameType::Data, size, spin: busy, rounds },
                );
            }
        }
        frames(
            &h,
            "xdp floor, eth client",
            None,
            eth(false, true),
            Case { kind: FrameType::Ping, size, spin: busy, rounds },
        );
        frames(
            &h,
            "xdp floor, xdp client",
            None,
            Side::Xdp { mode: None, crc: true },
            Case { kind: FrameType::Ping, size, spin: busy, rounds },
        );
    }
    // Blocking (no spinning) at 32 bytes.
    frames(
        &h,
        "eth plain crc",
        Some(eth(false, true)),
        eth(false, true),
        Case { kind: FrameType::Data, size: 32, spin: SpinPolicy::Block, rounds },
    );
    frames(
        &h,
        "eth mmap crc",
        Some(eth(true, true)),
        eth(true, true),
        Case { kind: FrameType::Data, size: 32, spin: SpinPolicy::Block, rounds },
    );
    frames(
        &h,
        "xdp (default mode) crc",
        Some(Side::Xdp { mode: None, crc: true }),
        Side::Xdp { mode: None, crc: true },
        Case { kind: FrameType::Data, size: 32, spin: SpinPolicy::Block, rounds },
    );
}
