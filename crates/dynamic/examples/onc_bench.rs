//! The ONC RPC measurement of issue 6: serves, or calls, the peers' interface (peers/onc/peer.x:
//! program 0x20000b1e version 1, NULL = 0 and ECHO(opaque<>) = 1) so lowlat can stand in for
//! either side of `peers/onc`'s rpcgen peer.
//!
//! ```text
//! onc_bench serve [--cpu C] [--spin-us S] URI...   onc+udp://, onc+tcp:// (XDR) and lowlat's own
//!                                                  transports (native bodies); prints "ready"
//! onc_bench call URI [--size B] [--calls N] [--cpu C] [--spin-us S]
//!                                                  one JSON line like the peers' clients print
//! ```

use std::time::Instant;

use lowlat::{Client, ClientConfig, ProcError, Program, Server, ServerConfig, SpinPolicy};

const PROG: u32 = 0x2000_0b1e;
const NULL: u32 = 0;
const ECHO: u32 = 1;

fn programs() -> [Program; 2] {
    let xdr =
        Program::new(PROG, 1).xdr().procedure(NULL, "NULL", |_, _, _| Ok(())).procedure(ECHO, "ECHO", |_, a, r| {
            // opaque<>: length, bytes, padding: the argument is already the result.
            let n = a
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or(ProcError::GarbageArgs)?;
            if a.len() != 4 + n + (4 - n % 4) % 4 {
                return Err(ProcError::GarbageArgs);
            }
            r.extend_from_slice(a);
            Ok(())
        });
    // Native: a single opaque is the whole body.
    let native = Program::new(PROG, 1).procedure(NULL, "NULL", |_, _, _| Ok(())).procedure(ECHO, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    [xdr, native]
}

fn flag<T: std::str::FromStr>(args: &mut Vec<String>, name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let v = args.get(i + 1)?.parse().ok();
    args.drain(i..(i + 2).min(args.len()));
    v
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let cpu: Option<usize> = flag(&mut args, "--cpu");
    let spin: SpinPolicy = flag(&mut args, "--spin-us").unwrap_or(SpinPolicy::Adaptive);
    let size: usize = flag(&mut args, "--size").unwrap_or(0);
    let calls: usize = flag(&mut args, "--calls").unwrap_or(10_000);
    match args.first().map(String::as_str) {
        Some("serve") => {
            let [x, n] = programs();
            let cfg = ServerConfig {
                pin_cpus: cpu.into_iter().collect(),
                spin,
                onc_register: false,
                ..ServerConfig::default()
            };
            let server = Server::builder().program(x).program(n).config(cfg).serve(&args[1..]).unwrap();
            for u in server.local_uris() {
                println!("serving {u}");
            }
            println!("ready");
            server.wait();
        }
        Some("call") if args.len() == 2 => {
            if let Some(c) = cpu {
                lowlat_sys::pin_to_cpu(c).unwrap();
            }
            let uri = &args[1];
            let c = Client::connect_with(uri, PROG, 1, ClientConfig { spin, ..ClientConfig::default() }).unwrap();
            let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let onc = c.is_onc();
            let call = || {
                if size == 0 {
                    c.call(NULL, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).unwrap();
                } else {
                    c.call(
                        ECHO,
                        |b| {
                            if onc {
                                b.extend_from_slice(&(data.len() as u32).to_be_bytes());
                                b.extend_from_slice(&data);
                                b.resize(b.len() + (4 - data.len() % 4) % 4, 0);
                            } else {
                                b.extend_from_slice(&data);
                            }
                            Ok::<_, lowlat::DecodeError>(())
                        },
                        |r| {
                            let want = if onc { 4 + size + (4 - size % 4) % 4 } else { size };
                            if r.len() == want {
                                Ok(())
                            } else {
                                Err(lowlat::DecodeError::new("the echo", r.len()))
                            }
                        },
                    )
                    .unwrap();
                }
            };
            for _ in 0..calls / 10 {
                call();
            }
            let mut ns: Vec<u64> = Vec::with_capacity(calls);
            let start = Instant::now();
            for _ in 0..calls {
                let t = Instant::now();
                call();
                ns.push(t.elapsed().as_nanos() as u64);
            }
            let total = start.elapsed().as_secs_f64();
            ns.sort_unstable();
            let p = |q: f64| ns[((ns.len() as f64 * q) as usize).min(ns.len() - 1)];
            println!(
                "{{\"kind\":\"rpc\",\"system\":\"lowlat\",\"transport\":\"{}\",\"proc\":\"{}\",\"size\":{size},\"calls\":{calls},\"threads\":1,\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"mean_ns\":{:.1},\"calls_per_s\":{:.1}}}",
                uri.split("://").next().unwrap_or(""),
                if size == 0 { "null" } else { "echo" },
                p(0.5),
                p(0.9),
                p(0.99),
                p(0.999),
                ns[ns.len() - 1],
                ns.iter().sum::<u64>() as f64 / ns.len() as f64,
                calls as f64 / total
            );
        }
        _ => {
            eprintln!("usage: onc_bench serve [--cpu C] [--spin-us S] URI... | call URI [--size B] [--calls N] [--cpu C] [--spin-us S]");
            std::process::exit(2);
        }
    }
}
