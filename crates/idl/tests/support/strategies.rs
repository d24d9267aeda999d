//! proptest strategies for the types generated from idl/examples/everything.x.
// Each test crate that includes this module uses a different subset of it.
#![allow(dead_code)]

use super::everything::{
    Batch, ByInt, ByUint, Color, Everything, Inner, MaybeText, Node, Point, Primitives, Result as XResult, Shape,
};
use proptest::prelude::*;

/// Floats without NaN (NaN != NaN would fail equality, not the codec; bits are tested apart).
pub fn f32s() -> impl Strategy<Value = f32> {
    prop_oneof![any::<i32>().prop_map(|i| i as f32 / 7.0), Just(f32::INFINITY), Just(-0.0f32), Just(f32::MIN_POSITIVE)]
}
pub fn f64s() -> impl Strategy<Value = f64> {
    prop_oneof![any::<i64>().prop_map(|i| i as f64 / 3.0), Just(f64::NEG_INFINITY), Just(f64::MAX), Just(5e-324)]
}
/// Printable ASCII: what C strings carry, so the same values serve the C interop test.
pub fn ascii(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(0x20u8..0x7f, 0..=max).prop_map(|v| String::from_utf8(v).unwrap())
}
pub fn name() -> impl Strategy<Value = String> {
    ascii(32)
}
pub fn text() -> impl Strategy<Value = String> {
    ascii(40)
}
pub fn blob(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..=max)
}
pub fn color() -> impl Strategy<Value = Color> {
    prop_oneof![Just(Color::Red), Just(Color::Green), Just(Color::Blue), Just(Color::Infra)]
}
pub fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![Just(Shape::Circle), Just(Shape::Square), Just(Shape::Triangle)]
}
pub fn point() -> impl Strategy<Value = Point> {
    (any::<i32>(), any::<i32>()).prop_map(|(x, y)| Point { x, y })
}
pub fn node() -> impl Strategy<Value = Node> {
    proptest::collection::vec(any::<i32>(), 1..6).prop_map(|vals| {
        let mut next = None;
        for &value in vals.iter().rev() {
            next = Some(Box::new(Node { value, next }));
        }
        *next.unwrap()
    })
}
pub fn primitives() -> impl Strategy<Value = Primitives> {
    (any::<i32>(), any::<u32>(), any::<u32>(), any::<i64>(), any::<u64>(), f32s(), f64s(), any::<bool>(), color())
        .prop_map(|(i, u, ushort_like, h, uh, f, d, b, c)| Primitives { i, u, ushort_like, h, uh, f, d, b, c })
}
pub fn result() -> impl Strategy<Value = XResult> {
    prop_oneof![
        any::<i32>().prop_map(XResult::Code),
        name().prop_map(|s| XResult::Label(Color::Green, s)),
        name().prop_map(|s| XResult::Label(Color::Blue, s)),
        Just(XResult::Default(Color::Infra)),
    ]
}
pub fn by_int() -> impl Strategy<Value = ByInt> {
    prop_oneof![
        point().prop_map(ByInt::P),
        Just(ByInt::V2),
        any::<i64>().prop_map(ByInt::Big),
        (any::<i32>().prop_filter("not an explicit case", |d| ![1, 2, -5].contains(d)), blob(8))
            .prop_map(|(d, raw)| ByInt::Default(d, raw)),
    ]
}
pub fn maybe_text() -> impl Strategy<Value = MaybeText> {
    prop_oneof![text().prop_map(MaybeText::T), Just(MaybeText::False)]
}
pub fn by_uint() -> impl Strategy<Value = ByUint> {
    prop_oneof![f64s().prop_map(ByUint::D), proptest::collection::vec(any::<u32>(), 0..6).prop_map(ByUint::Cs)]
}
pub fn inner() -> impl Strategy<Value = Inner> {
    (point(), shape(), blob(8)).prop_map(|(corner, kind, tag)| Inner { corner, kind, tag })
}
pub fn everything() -> impl Strategy<Value = Everything> {
    let a = (primitives(), any::<[u8; 16]>(), blob(40), any::<[u8; 3]>(), blob(5), name(), text(), any::<[i32; 4]>());
    let b = (
        proptest::collection::vec(any::<u32>(), 0..8),
        (point(), point()),
        proptest::collection::vec(inner(), 0..=4),
        proptest::option::of(point()),
        proptest::option::of(node()),
        result(),
        by_int(),
        maybe_text(),
    );
    let c = (
        by_uint(),
        proptest::collection::vec(name(), 0..=3),
        any::<[i64; 2]>(),
        proptest::collection::vec(any::<bool>(), 0..9),
    );
    (a, b, c).prop_map(
        |(
            (prim, h, data, fixed_bytes, var_bytes, who, note, four),
            (many, (c0, c1), inners, mp, list, r, bi, mt),
            (bu, names, hypers, flags),
        )| {
            Everything {
                prim,
                h,
                data,
                fixed_bytes,
                var_bytes,
                who,
                note,
                four,
                many,
                corners: [c0, c1],
                inners,
                maybe_point: mp.map(Box::new),
                list: list.map(Box::new),
                r,
                bi,
                mt,
                bu,
                names,
                hypers,
                flags,
            }
        },
    )
}
pub fn batch() -> impl Strategy<Value = Batch> {
    (any::<i64>(), proptest::collection::vec(inner(), 0..=64)).prop_map(|(id, items)| Batch { id, items })
}
