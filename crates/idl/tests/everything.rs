//! Generated code for idl/examples/everything.x: round trips of every construct in both
//! encodings, limits, and decoding of damaged input (errors, never panics).

#[allow(dead_code)]
mod everything {
    include!("generated/everything.rs");
}

#[path = "support/strategies.rs"]
mod strategies;

use everything::{
    everything_v1, Batch, ByInt, ByUint, Color, Everything, Inner, MaybeText, Node, Point, Result as XResult, Shape,
};
use lowlat_codec::{from_native, from_xdr, to_native, to_xdr, ByteOrder, DecodeError, EncodeError};
use proptest::prelude::*;
use strategies::*;

const ORDERS: [ByteOrder; 2] = [ByteOrder::Little, ByteOrder::Big];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn everything_round_trips_in_both_encodings(v in everything()) {
        let mut x = Vec::new();
        to_xdr(&v, &mut x).unwrap();
        prop_assert_eq!(x.len() % 4, 0);
        prop_assert_eq!(from_xdr::<Everything>(&x).unwrap(), v.clone());
        for order in ORDERS {
            let mut n = Vec::new();
            to_native(&v, &mut n, order).unwrap();
            prop_assert!(n.len() < x.len(), "native should be smaller than XDR: {} vs {}", n.len(), x.len());
            prop_assert_eq!(from_native::<Everything>(&n, order).unwrap(), v.clone());
        }
    }

    #[test]
    fn each_construct_round_trips(p in primitives(), r in result(), b in by_int(), m in maybe_text(),
                                  u in by_uint(), i in inner(), l in node(), bt in batch()) {
        fn both<T: lowlat_codec::Xdr + lowlat_codec::Native + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
            let mut x = Vec::new();
            to_xdr(v, &mut x).unwrap();
            prop_assert_eq!(&from_xdr::<T>(&x).unwrap(), v);
            for order in ORDERS {
                let mut n = Vec::new();
                to_native(v, &mut n, order).unwrap();
                prop_assert_eq!(&from_native::<T>(&n, order).unwrap(), v);
            }
            Ok(())
        }
        both(&p)?; both(&r)?; both(&b)?; both(&m)?; both(&u)?; both(&i)?; both(&l)?; both(&bt)?;
    }

    #[test]
    fn procedure_codecs_round_trip(a: i32, b: i32, x in blob(64), y in blob(64), who in text(), key in name(), hint in color()) {
        use everything_v1::*;
        let mut buf = Vec::new();
        encode_add_args_xdr(&mut buf, a, b).unwrap();
        prop_assert_eq!(decode_add_args_xdr(&buf).unwrap(), (a, b));
        buf.clear();
        encode_concat_args_xdr(&mut buf, &x, &y).unwrap();
        prop_assert_eq!(decode_concat_args_xdr(&buf).unwrap(), (&x[..], &y[..]));
        buf.clear();
        encode_lookup_args_xdr(&mut buf, &key, hint).unwrap();
        prop_assert_eq!(decode_lookup_args_xdr(&buf).unwrap(), (&key[..], hint));
        for order in ORDERS {
            buf.clear();
            encode_add_args_native(&mut buf, order, a, b).unwrap();
            prop_assert_eq!(buf.len(), 8);
            prop_assert_eq!(decode_add_args_native(&buf, order).unwrap(), (a, b));
            // A single opaque or string result is the whole body: no length.
            buf.clear();
            encode_concat_result_native(&mut buf, order, &x).unwrap();
            prop_assert_eq!(&buf, &x);
            prop_assert_eq!(decode_concat_result_native(&buf, order).unwrap(), &x[..]);
            buf.clear();
            encode_greet_args_native(&mut buf, order, &who).unwrap();
            prop_assert_eq!(buf.len(), who.len());
            prop_assert_eq!(decode_greet_args_native(&buf, order).unwrap(), &who[..]);
            // Two opaques: each has its length.
            buf.clear();
            encode_concat_args_native(&mut buf, order, &x, &y).unwrap();
            prop_assert_eq!(buf.len(), 8 + x.len() + y.len());
            prop_assert_eq!(decode_concat_args_native(&buf, order).unwrap(), (&x[..], &y[..]));
        }
    }

    /// Truncations, byte flips and insertions of valid encodings: decoding returns (an error or a
    /// value), never panics; every strict prefix is an error.
    #[test]
    fn damaged_input_is_an_error_not_a_panic(v in everything(), cut in any::<prop::sample::Index>(),
                                             flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                                             junk in prop::collection::vec(any::<u8>(), 1..16)) {
        let mut x = Vec::new();
        to_xdr(&v, &mut x).unwrap();
        let at = cut.index(x.len());
        prop_assert!(from_xdr::<Everything>(&x[..at]).is_err());
        let mut extended = x.clone();
        extended.extend_from_slice(&junk);
        let is_trailing = matches!(from_xdr::<Everything>(&extended), Err(DecodeError::TrailingBytes { .. }));
        prop_assert!(is_trailing);
        let mut m = x.clone();
        for (i, b) in &flips {
            let i = i.index(m.len());
            m[i] ^= b | 1;
        }
        let _ = from_xdr::<Everything>(&m);
        let mut ins = x.clone();
        ins.splice(at..at, junk.iter().copied());
        let _ = from_xdr::<Everything>(&ins);
        for order in ORDERS {
            let mut n = Vec::new();
            to_native(&v, &mut n, order).unwrap();
            let at = cut.index(n.len());
            prop_assert!(from_native::<Everything>(&n[..at], order).is_err());
            for (i, b) in &flips {
                let i = i.index(n.len());
                n[i] ^= b | 1;
            }
            let _ = from_native::<Everything>(&n, order);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = from_xdr::<Everything>(&bytes);
        let _ = from_xdr::<Node>(&bytes);
        let _ = from_xdr::<ByInt>(&bytes);
        for order in ORDERS {
            let _ = from_native::<Everything>(&bytes, order);
            let _ = from_native::<ByUint>(&bytes, order);
            let _ = everything_v1::decode_lookup_args_native(&bytes, order);
            let _ = everything_v1::decode_concat_args_native(&bytes, order);
        }
    }
}

#[test]
fn declared_maximums_are_enforced_on_encode() {
    let b = Batch { id: 1, items: vec![Inner { corner: Point { x: 0, y: 0 }, kind: Shape::Square, tag: vec![] }; 65] };
    let e = to_native(&b, &mut Vec::new(), ByteOrder::Big).unwrap_err();
    assert_eq!(e.to_string(), "batch.items: inner<64> got 65 elements");

    let i = Inner { corner: Point { x: 0, y: 0 }, kind: Shape::Circle, tag: vec![0; 9] };
    let e = to_xdr(&i, &mut Vec::new()).unwrap_err();
    assert_eq!(e.to_string(), "inner.tag: opaque<8> got 9 bytes");
    let e = to_native(&i, &mut Vec::new(), ByteOrder::Little).unwrap_err();
    assert!(matches!(e, EncodeError::TooLong { max: 8, got: 9, .. }), "{e}");

    let mut buf = Vec::new();
    let e = everything_v1::encode_lookup_args_xdr(&mut buf, &"x".repeat(33), Color::Red).unwrap_err();
    assert_eq!(e.to_string(), "LOOKUP args: string<32> got 33 bytes");
}

#[test]
fn declared_maximums_are_enforced_on_decode() {
    // inner: point (8 bytes), shape CIRCLE, then tag with length 9.
    let mut x = vec![0u8; 8];
    x.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 9]);
    x.extend_from_slice(&[0; 12]);
    let e = from_xdr::<Inner>(&x).unwrap_err();
    assert_eq!(e.to_string(), "tag: opaque<8> got 9 bytes (at offset 12)");
    assert!(matches!(e.cause(), DecodeError::TooLong { max: 8, got: 9, offset: 12, .. }), "{e}");

    // Deeper in: the path says which element of which field. A batch of two inners, the
    // second's tag too long: id (8 bytes), count (4), the first inner (16), then the second.
    let mut b = vec![0u8; 8];
    b.extend_from_slice(&[0, 0, 0, 2]);
    b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]);
    b.extend_from_slice(&x);
    let e = from_xdr::<Batch>(&b).unwrap_err();
    assert_eq!(e.to_string(), "items[1].tag: opaque<8> got 9 bytes (at offset 40)");
    // The same in the native encoding (no padding, four-byte lengths and counts in the order given).
    let e = from_native::<Batch>(&b, ByteOrder::Big).unwrap_err();
    assert!(e.to_string().starts_with("items[1].tag: opaque<8> got 9 bytes"), "{e}");
}

#[test]
fn bad_enum_and_discriminant_values_are_errors() {
    let e = from_xdr::<Color>(&[0, 0, 0, 7]).unwrap_err();
    assert_eq!(e.to_string(), "enum color: no member has value 7 (at offset 0)");
    // by_uint has no default arm: tag 3 selects nothing.
    let e = from_xdr::<ByUint>(&[0, 0, 0, 3]).unwrap_err();
    assert_eq!(e.to_string(), "union by_uint: no arm for discriminant 3 (at offset 0)");
    // A bool discriminant of 2.
    let e = from_xdr::<MaybeText>(&[0, 0, 0, 2]).unwrap_err();
    assert_eq!(e, DecodeError::BadBool { value: 2, offset: 0 });
}

#[test]
fn default_arm_refuses_an_explicit_case() {
    let e = to_xdr(&ByInt::Default(2, vec![]), &mut Vec::new()).unwrap_err();
    assert_eq!(e, EncodeError::DefaultArmTakesExplicitCase { type_name: "by_int", value: 2 });
    let e = to_xdr(&XResult::Default(Color::Red), &mut Vec::new()).unwrap_err();
    assert!(matches!(e, EncodeError::DefaultArmTakesExplicitCase { .. }));
    let mut x = Vec::new();
    to_xdr(&ByInt::Default(99, vec![1, 2, 3]), &mut x).unwrap();
    assert_eq!(x, [0, 0, 0, 99, 0, 0, 0, 3, 1, 2, 3, 0]);
    assert_eq!(from_xdr::<ByInt>(&x).unwrap(), ByInt::Default(99, vec![1, 2, 3]));
}

#[test]
fn an_arm_of_several_cases_keeps_its_case_and_refuses_another() {
    // `case GREEN: case BLUE: name label;`: one variant named after the arm, with the case.
    let e = to_xdr(&XResult::Label(Color::Red, "x".into()), &mut Vec::new()).unwrap_err();
    assert_eq!(e, EncodeError::NotACaseOfArm { type_name: "result", arm: "label", value: 0 });
    assert_eq!(e.to_string(), "union result: discriminant 0 is not a case of arm 'label'");
    for c in [Color::Green, Color::Blue] {
        let v = XResult::Label(c, "hi".into());
        let mut x = Vec::new();
        to_xdr(&v, &mut x).unwrap();
        assert_eq!(x[..4], (c as i32).to_be_bytes());
        assert_eq!(from_xdr::<XResult>(&x).unwrap(), v);
    }
}

#[test]
fn hostile_linked_list_stops_at_the_depth_limit() {
    // 5000 "present" nodes with no end would recurse 5000 deep; the reader stops at 1000.
    let mut x = Vec::new();
    for i in 0..5000u32 {
        x.extend_from_slice(&i.to_be_bytes());
        x.extend_from_slice(&[0, 0, 0, 1]);
    }
    let e = from_xdr::<Node>(&x).unwrap_err();
    assert!(matches!(e.cause(), DecodeError::TooDeep { max_depth: 1000, .. }), "{e}");
    assert_eq!(e.path().unwrap().segments().count(), 1001, "each level, to the one refused, says it was a `next`");
    assert!(e.to_string().starts_with("next.next.next"), "{e}");
}

#[test]
fn native_encoding_layout() {
    let p = Point { x: 1, y: -1 };
    let mut n = Vec::new();
    to_native(&p, &mut n, ByteOrder::Little).unwrap();
    assert_eq!(n, [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    n.clear();
    to_native(&MaybeText::T("hi".into()), &mut n, ByteOrder::Big).unwrap();
    assert_eq!(n, [1, 0, 0, 0, 2, b'h', b'i']);
}
