//! Encode + decode cost of generated stubs, XDR against lowlat's native encoding: the lab
//! procedures' arguments and results, a 1440-byte opaque, and a nested struct with a variable
//! array of 32 structs. Also: an opaque result written straight into the reply buffer against one
//! returned as a `Vec` and copied in.
//!
//! `cargo bench -p lowlat-idl --bench codec`

// criterion_main! defines a `pub fn main` without documentation.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use lowlat_codec::{ByteOrder, NativeReader, NativeWriter, XdrReader, XdrWriter};

#[allow(dead_code)]
mod lab {
    include!("../tests/generated/lab_codec.rs");
}
#[allow(dead_code)]
mod everything {
    include!("../tests/generated/everything.rs");
}

use everything::{Batch, Inner, Point, Shape};
use lab::lab_vers::*;

const HOST: ByteOrder = ByteOrder::host();

fn batch() -> Batch {
    Batch {
        id: 7,
        items: (0..32)
            .map(|i| Inner { corner: Point { x: i, y: -i }, kind: Shape::Square, tag: vec![i as u8; 5] })
            .collect(),
    }
}

fn lab_procs(c: &mut Criterion) {
    let mut buf = Vec::with_capacity(8192);
    let data = vec![0x5au8; 1440];

    let mut g = c.benchmark_group("minus args+result");
    g.bench_function("xdr", |b| {
        b.iter(|| {
            buf.clear();
            encode_minus_args_xdr(&mut buf, black_box(10), black_box(3)).unwrap();
            let (x, y) = decode_minus_args_xdr(black_box(&buf)).unwrap();
            buf.clear();
            encode_minus_result_xdr(&mut buf, x - y).unwrap();
            decode_minus_result_xdr(black_box(&buf)).unwrap()
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            buf.clear();
            encode_minus_args_native(&mut buf, HOST, black_box(10), black_box(3)).unwrap();
            let (x, y) = decode_minus_args_native(black_box(&buf), HOST).unwrap();
            buf.clear();
            encode_minus_result_native(&mut buf, HOST, x - y).unwrap();
            decode_minus_result_native(black_box(&buf), HOST).unwrap()
        })
    });
    g.bench_function("native, client of the other byte order", |b| {
        let other = if HOST == ByteOrder::Little { ByteOrder::Big } else { ByteOrder::Little };
        b.iter(|| {
            buf.clear();
            encode_minus_args_native(&mut buf, other, black_box(10), black_box(3)).unwrap();
            let (x, y) = decode_minus_args_native(black_box(&buf), other).unwrap();
            buf.clear();
            encode_minus_result_native(&mut buf, other, x - y).unwrap();
            decode_minus_result_native(black_box(&buf), other).unwrap()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("maxarg 1440 (opaque args)");
    g.bench_function("xdr", |b| {
        b.iter(|| {
            buf.clear();
            encode_maxarg_args_xdr(&mut buf, black_box(&data)).unwrap();
            decode_maxarg_args_xdr(black_box(&buf)).unwrap().len()
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            buf.clear();
            encode_maxarg_args_native(&mut buf, HOST, black_box(&data)).unwrap();
            decode_maxarg_args_native(black_box(&buf), HOST).unwrap().len()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("maxresult 1440 (args+result)");
    g.bench_function("xdr", |b| {
        b.iter(|| {
            buf.clear();
            encode_maxresult_args_xdr(&mut buf, black_box(1440)).unwrap();
            let n = decode_maxresult_args_xdr(black_box(&buf)).unwrap();
            buf.clear();
            encode_maxresult_result_xdr(&mut buf, &data[..n as usize]).unwrap();
            decode_maxresult_result_xdr(black_box(&buf)).unwrap().len()
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            buf.clear();
            encode_maxresult_args_native(&mut buf, HOST, black_box(1440)).unwrap();
            let n = decode_maxresult_args_native(black_box(&buf), HOST).unwrap();
            buf.clear();
            encode_maxresult_result_native(&mut buf, HOST, &data[..n as usize]).unwrap();
            decode_maxresult_result_native(black_box(&buf), HOST).unwrap().len()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("echo 1440 (args+result, client copies out)");
    let mut out = Vec::with_capacity(2048);
    g.bench_function("xdr", |b| {
        b.iter(|| {
            buf.clear();
            encode_echo_args_xdr(&mut buf, black_box(&data)).unwrap();
            let a = decode_echo_args_xdr(black_box(&buf)).unwrap();
            out.clear();
            encode_echo_result_xdr(&mut out, a).unwrap();
            decode_echo_result_xdr(black_box(&out)).unwrap().len()
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            buf.clear();
            encode_echo_args_native(&mut buf, HOST, black_box(&data)).unwrap();
            let a = decode_echo_args_native(black_box(&buf), HOST).unwrap();
            out.clear();
            encode_echo_result_native(&mut out, HOST, a).unwrap();
            decode_echo_result_native(black_box(&out), HOST).unwrap().len()
        })
    });
    g.finish();
}

fn nested(c: &mut Criterion) {
    let v = batch();
    let mut buf = Vec::with_capacity(8192);
    let mut g = c.benchmark_group("batch of 32 nested structs");
    g.bench_function("xdr", |b| {
        b.iter(|| {
            buf.clear();
            lowlat_codec::Xdr::encode_xdr(black_box(&v), &mut XdrWriter::new(&mut buf)).unwrap();
            let d: Batch = lowlat_codec::Xdr::decode_xdr(&mut XdrReader::new(black_box(&buf))).unwrap();
            d.items.len()
        })
    });
    g.bench_function("native", |b| {
        b.iter(|| {
            buf.clear();
            lowlat_codec::Native::encode_native(black_box(&v), &mut NativeWriter::new(&mut buf, HOST)).unwrap();
            let d: Batch = lowlat_codec::Native::decode_native(&mut NativeReader::new(black_box(&buf), HOST)).unwrap();
            d.items.len()
        })
    });
    g.finish();
}

/// The server side of MAXRESULT(1440): the generated stub lets the procedure append its bytes to
/// the reply buffer; the alternative returns a fresh `Vec` that the stub copies in.
fn opaque_result(c: &mut Criterion) {
    let mut reply = Vec::with_capacity(8192);
    let mut g = c.benchmark_group("opaque result 1440, server side");
    g.bench_function("written into the reply buffer", |b| {
        b.iter(|| {
            reply.clear();
            let n = black_box(1440usize);
            reply.resize(n, 0x5a);
            reply.len()
        })
    });
    g.bench_function("returned as Vec, copied in", |b| {
        b.iter(|| {
            reply.clear();
            let n = black_box(1440usize);
            let v = vec![0x5au8; n];
            encode_maxresult_result_native(&mut reply, HOST, &v).unwrap();
            reply.len()
        })
    });
    g.bench_function("echo: argument view written into the reply", |b| {
        let args = vec![7u8; 1440];
        b.iter(|| {
            reply.clear();
            let a = decode_echo_args_native(black_box(&args), HOST).unwrap();
            reply.extend_from_slice(a);
            reply.len()
        })
    });
    g.bench_function("echo: argument copied to a Vec, returned, copied in", |b| {
        let args = vec![7u8; 1440];
        b.iter(|| {
            reply.clear();
            let a = decode_echo_args_native(black_box(&args), HOST).unwrap().to_vec();
            encode_echo_result_native(&mut reply, HOST, &a).unwrap();
            reply.len()
        })
    });
    g.finish();
}

/// Whether alignment would pay: 256 `u64`s read from an 8-byte-aligned offset and from offset 1.
fn alignment(c: &mut Criterion) {
    let buf = vec![1u8; 256 * 8 + 8];
    let mut g = c.benchmark_group("native: 256 u64 reads");
    for (name, off) in [("aligned", 0usize), ("unaligned (offset 1)", 1)] {
        let base = buf.as_ptr().align_offset(8) + off;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut r = NativeReader::new(black_box(&buf[base..base + 256 * 8]), HOST);
                let mut sum = 0u64;
                for _ in 0..256 {
                    sum = sum.wrapping_add(r.get_u64().unwrap());
                }
                sum
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)).sample_size(30);
    targets = lab_procs, nested, opaque_result, alignment
}
criterion_main!(benches);
