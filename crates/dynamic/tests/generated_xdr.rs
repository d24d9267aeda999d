//! The generator's `program_xdr()`: a generated server answers ONC RPC callers with XDR bodies
//! beside `program()` for lowlat's own protocol, from one process (idl/lab.x, as checked in).

use std::sync::Arc;

use lowlat::{CallContext, Client, ProcError, Server, ServerConfig};
use lowlat_codec::Error as CodecError;

#[allow(dead_code, clippy::all)]
mod lab {
    include!("../../idl/tests/generated/lab.rs");
}

use lab::lab_vers;

struct Lab;

const COUNT_VALUE: u64 = 0x0102_0304_0506_0708;

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
        out.extend((0..n).map(|i| i as u8));
        Ok(())
    }
    fn echo(&self, _: &CallContext, data: &[u8], out: &mut lowlat::OutBuf<'_>) -> Result<(), ProcError> {
        out.extend_from_slice(data);
        Ok(())
    }
    /// A value whose eight bytes all differ, so a half swapped or truncated shows.
    fn count(&self, _: &CallContext) -> Result<u64, ProcError> {
        Ok(COUNT_VALUE)
    }
    fn spin(&self, _: &CallContext, _: u32) -> Result<(), ProcError> {
        Ok(())
    }
    fn block(&self, _: &CallContext, _: u32) -> Result<(), ProcError> {
        Ok(())
    }
}

#[test]
fn generated_program_serves_both_protocols() {
    let s = Arc::new(Lab);
    let server = Server::builder()
        .program(lab_vers::program(s.clone()))
        .program(lab_vers::program_xdr(s))
        .config(ServerConfig { onc_register: false, ..ServerConfig::default() })
        .serve(&["udp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    for uri in server.local_uris() {
        if uri.starts_with("udp://") {
            let c = lab_vers::LabVersClient::connect(&uri).unwrap();
            assert_eq!(c.minus(10, 3).unwrap(), 7);
            assert_eq!(c.echo(b"abc").unwrap(), b"abc");
            assert_eq!(c.count().unwrap(), COUNT_VALUE);
            continue;
        }
        let c = Client::connect(&uri, lab_vers::PROGRAM, lab_vers::VERSION).unwrap();
        let m = c
            .call(
                lab_vers::MINUS,
                |b| lab_vers::encode_minus_args_xdr(b, 10, 3).map_err(CodecError::from),
                |r| lab_vers::decode_minus_result_xdr(r).map_err(CodecError::from),
            )
            .unwrap();
        assert_eq!(m, 7, "{uri}");
        // An unsigned hyper: eight big-endian bytes.
        let n = c
            .call(
                lab_vers::COUNT,
                |_| Ok::<_, CodecError>(()),
                |r| {
                    assert_eq!(r, COUNT_VALUE.to_be_bytes(), "{uri}");
                    lab_vers::decode_count_result_xdr(r).map_err(CodecError::from)
                },
            )
            .unwrap();
        assert_eq!(n, COUNT_VALUE, "{uri}");
        for n in [0u32, 1, 5, 1440] {
            let got = c
                .call(
                    lab_vers::MAXRESULT,
                    |b| lab_vers::encode_maxresult_args_xdr(b, n).map_err(CodecError::from),
                    |r| lab_vers::decode_maxresult_result_xdr(r).map(<[u8]>::to_vec).map_err(CodecError::from),
                )
                .unwrap();
            assert_eq!(got, (0..n).map(|i| i as u8).collect::<Vec<_>>(), "{uri} MAXRESULT {n}");
        }
        let e = c
            .call(
                lab_vers::ECHO,
                |b| lab_vers::encode_echo_args_xdr(b, b"hello").map_err(CodecError::from),
                |r| lab_vers::decode_echo_result_xdr(r).map(<[u8]>::to_vec).map_err(CodecError::from),
            )
            .unwrap();
        assert_eq!(e, b"hello");
        // Bodies that are not XDR of the arguments: GARBAGE_ARGS from the generated dispatcher.
        let err = c
            .call(
                lab_vers::MINUS,
                |b| {
                    b.push(1);
                    Ok::<_, CodecError>(())
                },
                |_| Ok::<_, CodecError>(()),
            )
            .unwrap_err();
        assert!(matches!(err, lowlat::Error::GarbageArgs { .. }), "{uri}: {err}");
    }
    server.shutdown();
}
