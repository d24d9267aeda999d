//! The readers of generated stubs: the types and procedure codecs lowlat-idl generates for
//! `idl/examples/everything.x` (every construct of the language), fed arbitrary bytes in XDR and
//! in the native encoding (both byte orders). Decoding never panics and allocates no more than
//! the input can justify (libFuzzer's allocation limit catches a length taken on trust); what
//! decodes encodes back to the same bytes, but for padding: XDR's padding is zero when lowlat
//! writes it, and, like glibc's XDR routines, lowlat reads past whatever a sender put there.
//! The native encoding re-encodes to bytes that decode and re-encode to themselves.
#![no_main]

#[allow(dead_code, clippy::all)]
mod everything {
    include!("../../crates/idl/tests/generated/everything.rs");
}

use everything::{everything_v1 as v1, Everything};
use libfuzzer_sys::fuzz_target;
use lowlat_codec::{from_native, from_xdr, to_native, to_xdr, ByteOrder};

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = from_xdr::<Everything>(data) {
        let mut again = Vec::new();
        to_xdr(&v, &mut again).expect("a decoded value encodes");
        same_but_padding(&again, data);
    }
    for order in [ByteOrder::Little, ByteOrder::Big] {
        if let Ok(v) = from_native::<Everything>(data, order) {
            let mut again = Vec::new();
            to_native(&v, &mut again, order).expect("a decoded value encodes");
            let v2 = from_native::<Everything>(&again, order).expect("re-encoded bytes decode");
            let mut third = Vec::new();
            to_native(&v2, &mut third, order).expect("a decoded value encodes");
            // Bytes, not values: a NaN is not equal to itself, its bits are.
            assert_eq!(third, again, "the native encoding re-encodes to itself");
        }
        let _ = v1::decode_lookup_args_native(data, order);
        let _ = v1::decode_lookup_result_native(data, order);
        let _ = v1::decode_concat_args_native(data, order);
        let _ = v1::decode_greet_args_native(data, order);
    }
    let _ = v1::decode_lookup_args_xdr(data);
    let _ = v1::decode_concat_args_xdr(data);
    if let Ok(r) = v1::decode_lookup_result_xdr(data) {
        let mut again = Vec::new();
        v1::encode_lookup_result_xdr(&mut again, &r).expect("a decoded result encodes");
        same_but_padding(&again, data);
    }
    if let Ok(who) = v1::decode_greet_args_xdr(data) {
        let mut again = Vec::new();
        v1::encode_greet_args_xdr(&mut again, who).expect("a decoded string encodes");
        same_but_padding(&again, data);
    }
});

/// `encoded` (lowlat's XDR of what `input` decoded to) is `input` but where `encoded` has a
/// zero: the padding a sender may fill with anything.
fn same_but_padding(encoded: &[u8], input: &[u8]) {
    assert_eq!(encoded.len(), input.len(), "XDR re-encodes to as many bytes");
    for (i, (e, d)) in encoded.iter().zip(input).enumerate() {
        assert!(e == d || *e == 0, "byte {i}: {d} decoded, {e} re-encoded\n{encoded:?}\n{input:?}");
    }
}
