//! The runtime over `shm://`, what only shared memory does: procedures write their results
//! straight into the caller's result ring. (What every transport does is in the conformance
//! suite, `tests/suite/mod.rs`.)

use std::path::PathBuf;

use lowlat::{Client, Error, Program, Server};

mod common;
use common::{bytes, PROG};

/// Echoes its argument, then one byte: 1 if the result was still being written straight into the
/// result ring. Refuses (after writing) an argument starting with 0xFF.
const WHERE: u32 = 10;
/// The shm transport's default ring size.
const RING: usize = 64 << 10;

fn program() -> Program {
    common::lab_program().procedure(WHERE, "WHERE", |_, a, r| {
        r.extend_from_slice(a);
        if a.first() == Some(&0xFF) {
            return Err(lowlat::ProcError::GarbageArgs);
        }
        let in_ring = r.placed().is_some();
        r.push(in_ring as u8);
        Ok(())
    })
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn serve(tag: &str) -> (Dir, Server, String) {
    let dir = std::env::temp_dir().join(format!("lowlat-rt-shm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let uri = format!("shm://{}", dir.join("s").display());
    let server = Server::builder().program(program()).serve(&[&uri]).unwrap();
    (Dir(dir), server, uri)
}

/// A result that fits the result ring's free space is written there by the procedure itself
/// (no copy); a larger one moves to a buffer and is streamed, whole; one written and then
/// refused sends the error, never the bytes.
#[test]
fn results_are_written_straight_into_the_result_ring() {
    let (_dir, server, uri) = serve("in-place");
    let client = Client::connect(&uri, PROG, 1).unwrap();
    for _ in 0..3 {
        for n in [0, 1, 1440, RING / 4] {
            let arg: Vec<u8> = (0..n).map(|i| (i % 13) as u8).collect();
            let r = bytes(WHERE, &client, &arg).unwrap();
            assert_eq!(r.len(), n + 1);
            assert!(r[..n] == arg[..], "{n} bytes");
            assert_eq!(r[n], 1, "a {n}-byte result was not written in the ring");
        }
        let big: Vec<u8> = (0..RING * 2).map(|i| (i % 13) as u8).collect();
        let r = bytes(WHERE, &client, &big).unwrap();
        assert!(r.len() == big.len() + 1 && r[..big.len()] == big[..] && r[big.len()] == 0);
        let refused = bytes(WHERE, &client, &[0xFF; 100]);
        assert!(matches!(&refused, Err(Error::GarbageArgs { call, .. }) if call.proc_no == WHERE), "{refused:?}");
    }
    server.shutdown();
}
