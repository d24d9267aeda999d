//! The stubs generated from idl/lab.x plugged into the runtime: a generated server trait
//! implementation serves, a generated client calls every procedure at edge sizes, and per-call
//! options (a deadline) cut a slow call short on every scheme.

#[allow(dead_code)]
mod lab {
    include!("generated/lab.rs");
}

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lab::lab_vers::{self, LabVersClient, LabVersService};
use lowlat::{CallContext, CallOptions, ProcError, ServerConfig};

struct Lab;

impl LabVersService for Lab {
    fn null(&self, _: &CallContext) -> Result<(), ProcError> {
        Ok(())
    }
    fn minus(&self, _: &CallContext, a: i32, b: i32) -> Result<i32, ProcError> {
        Ok(a.wrapping_sub(b))
    }
    fn maxarg(&self, _: &CallContext, data: &[u8]) -> Result<(), ProcError> {
        // A recognisable failure, so the test can tell the argument arrived intact.
        if data.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8) {
            Ok(())
        } else {
            Err(ProcError::SystemError)
        }
    }
    fn maxresult(&self, _: &CallContext, n: u32, out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        out.extend((0..n as usize).map(|i| (i % 251) as u8));
        Ok(())
    }
    fn echo(&self, _: &CallContext, data: &[u8], out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        out.extend_from_slice(data);
        Ok(())
    }
    fn count(&self, _: &CallContext) -> Result<u64, ProcError> {
        Ok(COUNTER.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn spin(&self, _: &CallContext, us: u32) -> Result<(), ProcError> {
        std::thread::sleep(Duration::from_micros(us.into()));
        Ok(())
    }
    fn block(&self, _: &CallContext, us: u32) -> Result<(), ProcError> {
        std::thread::sleep(Duration::from_micros(us.into()));
        Ok(())
    }
}

/// COUNT's counter (one for the test binary: the tests only look at its increments).
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn exercise(uri: &str) {
    let server = lowlat::Server::builder().program(lab_vers::program(Arc::new(Lab))).serve(&[uri]).unwrap();
    let uri = server.local_uris()[0].clone();
    let c = LabVersClient::connect(&uri).unwrap();
    c.null().unwrap();
    assert_eq!(c.minus(10, 3).unwrap(), 7);
    // An unsigned hyper result, and a call that runs once per call.
    let n = c.count().unwrap();
    assert!(c.count().unwrap() > n);
    c.spin(10).unwrap();
    assert_eq!(c.minus(i32::MIN, 1).unwrap(), i32::MAX);
    for n in [0, 1, 1440, 4000] {
        c.maxarg(&pattern(n)).unwrap();
        assert_eq!(c.maxresult(n as u32).unwrap(), pattern(n));
        assert_eq!(c.echo(&pattern(n)).unwrap(), pattern(n));
    }
    let mut out = Vec::with_capacity(1440);
    c.echo_into(&pattern(1440), &mut out).unwrap();
    assert_eq!(out, pattern(1440));
    c.maxresult_into(7, &mut out).unwrap();
    assert_eq!(out, pattern(7));
    // A wrong argument body is the server's GarbageArgs, through the untyped client, and the
    // generated stub says which argument it could not decode, and why.
    let e = c
        .client()
        .call::<(), lowlat_codec::Error>(
            lab_vers::MINUS,
            |b| {
                b.extend_from_slice(&[1, 2, 3, 4]);
                Ok(())
            },
            |_| Ok(()),
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{uri}: MINUS (program 0x20004c4c version 1, procedure 1): the server could not decode the \
             arguments: argument `b`: truncated: needed 4 bytes at offset 4, have 0"
        )
    );
    assert!(!e.may_have_executed());
    drop(c);
    server.shutdown();
}

/// A result that does not decode is reported by the generated client with the path to what
/// failed, the endpoint and the procedure by name.
#[test]
fn a_result_that_does_not_decode_is_named_by_its_path() {
    let server = lowlat::Server::builder()
        .program(lowlat::Program::new(lab_vers::PROGRAM, lab_vers::VERSION).procedure(
            lab_vers::MINUS,
            "MINUS",
            |_, _, reply| {
                reply.extend_from_slice(&[7, 7]);
                Ok(())
            },
        ))
        .serve(&["udp://127.0.0.1:0"])
        .unwrap();
    let uri = server.local_uris()[0].clone();
    let e = LabVersClient::connect(&uri).unwrap().minus(1, 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{uri}: MINUS (program 0x20004c4c version 1, procedure 1): decoding the result: result: truncated: \
             needed 4 bytes at offset 0, have 2"
        )
    );
    server.shutdown();
}

#[test]
fn generated_lab_stubs_over_shm() {
    let dir = std::env::temp_dir().join(format!("lowlat-idl-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _guard = Dir(dir.clone());
    exercise(&format!("shm://{}", dir.join("s").display()));
}

#[test]
fn generated_lab_stubs_over_udp() {
    exercise("udp://127.0.0.1:0");
}

/// NULL takes `SLOW`; the other procedures are the lab's.
struct Slow;

const SLOW: Duration = Duration::from_millis(200);

impl LabVersService for Slow {
    fn null(&self, _: &CallContext) -> Result<(), ProcError> {
        std::thread::sleep(SLOW);
        Ok(())
    }
    fn minus(&self, c: &CallContext, a: i32, b: i32) -> Result<i32, ProcError> {
        Lab.minus(c, a, b)
    }
    fn maxarg(&self, c: &CallContext, data: &[u8]) -> Result<(), ProcError> {
        Lab.maxarg(c, data)
    }
    fn maxresult(&self, c: &CallContext, n: u32, out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        Lab.maxresult(c, n, out)
    }
    fn echo(&self, c: &CallContext, data: &[u8], out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        Lab.echo(c, data, out)
    }
    fn count(&self, c: &CallContext) -> Result<u64, ProcError> {
        Lab.count(c)
    }
    fn spin(&self, c: &CallContext, us: u32) -> Result<(), ProcError> {
        Lab.spin(c, us)
    }
    fn block(&self, c: &CallContext, us: u32) -> Result<(), ProcError> {
        Lab.block(c, us)
    }
}

#[test]
fn a_per_call_deadline_cuts_a_slow_call_short_on_every_scheme() {
    let s = Arc::new(Slow);
    let server = lowlat::Server::builder()
        .program(lab_vers::program(s.clone()))
        .program(lab_vers::program_xdr(s))
        .config(ServerConfig { onc_register: false, ..ServerConfig::default() })
        .serve(&["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    for uri in server.local_uris() {
        let c = LabVersClient::connect(&uri).unwrap();
        let short = c.with(CallOptions::new().deadline(Duration::from_millis(20)));
        let e = short.null().unwrap_err();
        assert!(matches!(&e, lowlat::Error::Timeout { call, .. } if call.proc_no == lab_vers::NULL), "{uri}: {e}");
        // The options are per call: the same client, with the binding's 10 s deadline, waits the
        // slow call out, and so does a per-call deadline longer than the call.
        c.null().unwrap_or_else(|e| panic!("{uri}: {e}"));
        c.with(CallOptions::new().deadline(Duration::from_secs(5))).null().unwrap();
        // A view with options calls every procedure, in the encoding of the scheme.
        assert_eq!(short.minus(10, 3).unwrap(), 7, "{uri}");
        assert_eq!(short.echo(b"abc").unwrap(), b"abc", "{uri}");
    }
    server.shutdown();
}

/// Every generated method has an async twin (`minus_async`, `echo_into_async`, and on the
/// options view too) whose futures, awaited on tokio, give what the blocking methods give, on
/// every scheme (XDR over ONC RPC), many at once on one client.
#[test]
fn generated_async_methods_on_every_scheme() {
    let dir = std::env::temp_dir().join(format!("lowlat-idl-lab-async-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _guard = Dir(dir.clone());
    let shm = format!("shm://{}", dir.join("s").display());
    let s = Arc::new(Slow);
    let server = lowlat::Server::builder()
        .program(lab_vers::program(s.clone()))
        .program(lab_vers::program_xdr(s))
        .config(ServerConfig { onc_register: false, ..ServerConfig::default() })
        .serve(&["udp://127.0.0.1:0", "tcp://127.0.0.1:0", &shm, "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    for uri in server.local_uris() {
        let c = Arc::new(LabVersClient::connect(&uri).unwrap());
        rt.block_on(async {
            assert_eq!(c.minus_async(10, 3).await.unwrap(), 7, "{uri}");
            c.maxarg_async(&pattern(1440)).await.unwrap();
            assert_eq!(c.maxresult_async(100).await.unwrap(), pattern(100), "{uri}");
            let mut out = Vec::new();
            c.echo_into_async(&pattern(33), &mut out).await.unwrap();
            assert_eq!(out, pattern(33), "{uri}");
            let e = c.with(CallOptions::new().deadline(Duration::from_millis(20))).null_async().await.unwrap_err();
            assert!(matches!(&e, lowlat::Error::Timeout { call, .. } if call.proc_no == lab_vers::NULL), "{uri}: {e}");
            let calls: Vec<_> = (0..32i32)
                .map(|i| {
                    let c = c.clone();
                    tokio::spawn(async move { (i, c.minus_async(i, 1).await) })
                })
                .collect();
            for t in calls {
                let (i, r) = tokio::time::timeout(Duration::from_secs(20), t).await.expect("a call hung").unwrap();
                assert_eq!(r.unwrap(), i - 1, "{uri}");
            }
        });
    }
    server.shutdown();
}
