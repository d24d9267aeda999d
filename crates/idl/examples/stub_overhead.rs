//! Null call and MAXARG(1440) p50 over UDP loopback: hand-written stubs against the stubs
//! generated from idl/lab.x, interleaved in one run so machine noise hits both alike.
//!
//! `cargo run --release -p lowlat-idl --example stub_overhead [CALLS]`

#[allow(dead_code)]
mod lab {
    include!("../tests/generated/lab.rs");
}

use std::sync::Arc;
use std::time::Instant;

use lab::lab_vers;
use lowlat::{CallContext, DecodeError, ProcError, Program};

struct Lab;

impl lab_vers::LabVersService for Lab {
    fn null(&self, _: &CallContext) -> Result<(), ProcError> {
        Ok(())
    }
    fn minus(&self, _: &CallContext, a: i32, b: i32) -> Result<i32, ProcError> {
        Ok(a.wrapping_sub(b))
    }
    fn maxarg(&self, _: &CallContext, _: &[u8]) -> Result<(), ProcError> {
        Ok(())
    }
    fn maxresult(&self, _: &CallContext, n: u32, out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        out.resize(out.len() + n as usize, 0x5a);
        Ok(())
    }
    fn echo(&self, _: &CallContext, data: &[u8], out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        out.extend_from_slice(data);
        Ok(())
    }
    fn count(&self, _: &CallContext) -> Result<u64, ProcError> {
        Ok(1)
    }
    fn spin(&self, _: &CallContext, _: u32) -> Result<(), ProcError> {
        Ok(())
    }
    fn block(&self, _: &CallContext, _: u32) -> Result<(), ProcError> {
        Ok(())
    }
}

fn hand_written() -> Program {
    Program::new(lab_vers::PROGRAM, lab_vers::VERSION)
        .procedure(lab_vers::NULL, "NULL", |_, a, _| if a.is_empty() { Ok(()) } else { Err(ProcError::GarbageArgs) })
        .procedure(lab_vers::MAXARG, "MAXARG", |_, _, _| Ok(()))
}

fn p50(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn time(calls: usize, mut f: impl FnMut()) -> Vec<u64> {
    (0..calls)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as u64
        })
        .collect()
}

fn main() {
    let calls: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5000);
    let hs = lowlat::Server::builder().program(hand_written()).serve(&["udp://127.0.0.1:0"]).unwrap();
    let gs = lowlat::Server::builder().program(lab_vers::program(Arc::new(Lab))).serve(&["udp://127.0.0.1:0"]).unwrap();
    let hc = lowlat::Client::connect(&hs.local_uris()[0], lab_vers::PROGRAM, lab_vers::VERSION).unwrap();
    let gc = lab_vers::LabVersClient::connect(&gs.local_uris()[0]).unwrap();
    let data = vec![0x5au8; 1440];

    let (mut hn, mut gn, mut ha, mut ga) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _round in 0..4 {
        hn.extend(time(calls / 4, || hc.call::<_, DecodeError>(lab_vers::NULL, |_| Ok(()), |_| Ok(())).unwrap()));
        gn.extend(time(calls / 4, || gc.null().unwrap()));
        ha.extend(time(calls / 4, || {
            hc.call::<_, DecodeError>(
                lab_vers::MAXARG,
                |b| {
                    b.extend_from_slice(&data);
                    Ok(())
                },
                |_| Ok(()),
            )
            .unwrap()
        }));
        ga.extend(time(calls / 4, || gc.maxarg(&data).unwrap()));
    }
    println!("calls per case: {}", hn.len());
    println!("NULL         p50: hand-written {} ns, generated {} ns", p50(hn), p50(gn));
    println!("MAXARG(1440) p50: hand-written {} ns, generated {} ns", p50(ha), p50(ga));
    drop((hc, gc));
    hs.shutdown();
    gs.shutdown();
}
