//! The dynamic JSON client: byte-exact with the generated codecs in both encodings, errors that
//! name the offending field, and every procedure of everything.x called on the rpcgen C server
//! (and on a lowlat server over lowlat's own UDP protocol).

#[path = "../../idl/tests/support/strategies.rs"]
mod strategies;
mod support;

use std::path::PathBuf;

use lowlat::Client;
use lowlat_codec::ByteOrder;
use lowlat_dynamic::{Interface, Target};
use proptest::prelude::*;
use serde_json::{json, Value as Json};
use support::everything;
use support::everything::{everything_v1 as v1, *};

fn interface() -> Interface {
    Interface::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/examples/everything.x")).unwrap()
}

fn values() -> Vec<Everything> {
    vec![support::value_a(), support::value_b(0), support::value_b(1)]
}

/// JSON of a value, through the generated XDR encoder and the dynamic decoder.
fn json_of(i: &Interface, t: &Target, e: &Everything) -> Json {
    let mut b = Vec::new();
    v1::encode_roundtrip_args_xdr(&mut b, e).unwrap();
    i.decode_args(t, &b, None).unwrap()
}

#[test]
fn byte_exact_with_generated_codecs_in_both_encodings() {
    let i = interface();
    let t = i.find("roundtrip").unwrap();
    for e in values() {
        let j = json_of(&i, &t, &e);
        let mut xdr = Vec::new();
        v1::encode_roundtrip_args_xdr(&mut xdr, &e).unwrap();
        assert_eq!(i.encode_args(&t, &j, None).unwrap(), xdr, "XDR of {j}");
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut native = Vec::new();
            v1::encode_roundtrip_args_native(&mut native, order, &e).unwrap();
            assert_eq!(i.encode_args(&t, &j, Some(order)).unwrap(), native, "native {order:?}");
            assert_eq!(i.decode_args(&t, &native, Some(order)).unwrap(), j);
        }
    }
    // Several arguments, and a single opaque argument (a whole native body, no length).
    let add = i.find("ADD").unwrap();
    let mut b = Vec::new();
    v1::encode_add_args_native(&mut b, ByteOrder::Little, 7, -3).unwrap();
    assert_eq!(i.encode_args(&add, &json!([7, -3]), Some(ByteOrder::Little)).unwrap(), b);
    assert_eq!(i.encode_args(&add, &json!({"arg1": 7, "arg2": -3}), Some(ByteOrder::Little)).unwrap(), b);
    let greet = i.find("GREET").unwrap();
    let mut b = Vec::new();
    v1::encode_greet_args_native(&mut b, ByteOrder::Little, "bob").unwrap();
    assert_eq!(b, b"bob");
    assert_eq!(i.encode_args(&greet, &json!("bob"), Some(ByteOrder::Little)).unwrap(), b);
    let mut b = Vec::new();
    v1::encode_greet_args_xdr(&mut b, "bob").unwrap();
    assert_eq!(i.encode_args(&greet, &json!("bob"), None).unwrap(), b);
}

/// Floats whose decimal text every JSON parser reads back exactly, and none that JSON cannot
/// hold (the float mapping itself is tested apart).
fn tame(mut e: Everything) -> Everything {
    let f64_ = |d: f64| if d.is_finite() { (d % 1e12).trunc() } else { 0.0 };
    e.prim.f = f64_(e.prim.f as f64 % 1e6) as f32;
    e.prim.d = f64_(e.prim.d);
    if let ByUint::D(d) = &mut e.bu {
        *d = f64_(*d);
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One model, two readers: for every construct of everything.x, the generated codecs and
    /// the dynamic client (which read the same resolved model) agree value for value and byte for
    /// byte, in both encodings.
    #[test]
    fn generated_and_dynamic_codecs_agree_on_every_construct(e in strategies::everything().prop_map(tame)) {
        let i = interface();
        let t = i.find("ROUNDTRIP").unwrap();
        let mut xdr = Vec::new();
        v1::encode_roundtrip_args_xdr(&mut xdr, &e).unwrap();
        let j = i.decode_args(&t, &xdr, None).unwrap();
        prop_assert_eq!(i.encode_args(&t, &j, None).unwrap(), xdr);
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut native = Vec::new();
            v1::encode_roundtrip_args_native(&mut native, order, &e).unwrap();
            prop_assert_eq!(&i.decode_args(&t, &native, Some(order)).unwrap(), &j);
            prop_assert_eq!(i.encode_args(&t, &j, Some(order)).unwrap(), native);
        }
    }
}

#[test]
fn an_unresolved_name_is_refused_at_its_position() {
    let e =
        Interface::from_text("bad.x", "struct s { int a; };\nprogram P { version V { s F(widget) = 1; } = 1; } = 7;")
            .err()
            .expect("an undefined type is refused");
    assert!(e.to_string().starts_with("bad.x:2:29: error: undefined type 'widget'"), "{e}");
}

#[test]
fn json_follows_the_documented_mapping() {
    let i = interface();
    let t = i.find("ROUNDTRIP").unwrap();
    let j = json_of(&i, &t, &support::value_a());
    assert_eq!(j["prim"]["h"], json!("-1234567890123"), "hyper as a decimal string");
    assert_eq!(j["prim"]["uh"], json!("18000000000000000000"));
    assert_eq!(j["prim"]["c"], json!("INFRA"), "enum by name");
    assert_eq!(j["prim"]["b"], json!(true));
    assert_eq!(j["data"], json!("AQIDBAU="), "opaque as padded base64");
    assert_eq!(j["maybe_point"], json!({"x": 9, "y": 10}));
    assert_eq!(j["r"], json!({"which": "GREEN", "label": "green"}), "union: discriminant and arm by name");
    assert_eq!(j["mt"], json!({"present": true, "t": "hello"}));
    assert_eq!(j["bi"], json!({"kind": 99, "raw": "AQID"}), "default arm");
    assert_eq!(j["list"]["next"]["next"], json!({"value": 3, "next": null}), "optional data: null");
    let b = json_of(&i, &t, &support::value_b(0));
    assert_eq!(b["mt"], json!({"present": false}), "void arm: the discriminant alone");
    // Numbers accepted for enums and 64-bit integers on input.
    let mut k = j.clone();
    k["prim"]["c"] = json!(-1);
    k["prim"]["h"] = json!(-1234567890123i64);
    assert_eq!(i.encode_args(&t, &k, None).unwrap(), i.encode_args(&t, &j, None).unwrap());
}

fn refused(i: &Interface, t: &Target, v: &Json) -> String {
    i.encode_args(t, v, None).unwrap_err().to_string()
}

#[test]
fn values_that_do_not_fit_are_refused_with_their_path() {
    let i = interface();
    let t = i.find("ROUNDTRIP").unwrap();
    let good = json_of(&i, &t, &support::value_a());
    let with = |f: &dyn Fn(&mut Json)| {
        let mut v = good.clone();
        f(&mut v);
        v
    };
    let cases: Vec<(Json, &str)> = vec![
        (with(&|v| v["who"] = json!("x".repeat(33))), "argument.who: string longer than 32"),
        (with(&|v| v["inners"][1]["tag"] = json!("AAAAAAAAAAAA")), "argument.inners[1].tag: opaque longer than 8"),
        (with(&|v| v["prim"]["i"] = json!(1u64 << 40)), "argument.prim.i: 1099511627776 is out of range for int"),
        (with(&|v| v["prim"]["u"] = json!(-1)), "argument.prim.u: -1 is out of range for unsigned int"),
        (with(&|v| v["prim"]["c"] = json!("PURPLE")), "argument.prim.c: unknown color name \"PURPLE\""),
        (with(&|v| v["prim"]["c"] = json!(7)), "argument.prim.c: 7 is not a value of color"),
        (
            with(&|v| _ = v["corners"][0].as_object_mut().unwrap().remove("y")),
            "argument.corners[0]: missing field \"y\"",
        ),
        (with(&|v| v["four"] = json!([1, 2, 3])), "argument.four: int[4] needs exactly 4 elements, got 3"),
        (with(&|v| v["h"] = json!("not base64!")), "argument.h: not standard padded base64"),
        (with(&|v| v["r"] = json!({"which": "RED", "label": "x"})), "argument.r: unexpected field \"label\""),
        (with(&|v| v["names"] = json!(["a", "b", "c", "d"])), "argument.names: more than 3 elements (4)"),
        (with(&|v| v["prim"]["h"] = json!("12x")), "argument.prim.h: \"12x\" is not a decimal integer"),
        (with(&|v| v["extra"] = json!(1)), "argument: everything has no field \"extra\""),
    ];
    for (v, want) in cases {
        let got = refused(&i, &t, &v);
        assert!(got.starts_with(want), "wanted {want:?}, got {got:?}");
    }
    let add = i.find("ADD").unwrap();
    assert!(refused(&i, &add, &json!([1])).contains("expected 2 arguments"));
    assert!(refused(&i, &add, &json!({"arg1": 1})).contains("missing field \"arg2\""));
    let ping = i.find("EVERYTHING_V1.PING").unwrap();
    assert!(refused(&i, &ping, &json!(1)).contains("no argument"));
    assert!(matches!(i.find("PING"), Err(lowlat_dynamic::Error::Ambiguous { .. })));
    assert!(matches!(i.find("NOPE"), Err(lowlat_dynamic::Error::UnknownProcedure { .. })));
}

#[test]
fn listing_shows_every_procedure_with_types() {
    let l = interface().listing();
    for line in [
        "program EVERYTHING_PROG 0x20004c4d",
        "version EVERYTHING_V1 1",
        "2 ADD(int arg1, int arg2) -> int",
        "3 CONCAT(opaque<> a, opaque<> b) -> opaque<>",
        "5 LOOKUP(string<32> key, color hint) -> result",
        "0 PING(void) -> void",
        "1 REVERSE(node arg) -> node",
    ] {
        assert!(l.contains(line), "{line:?} missing from:\n{l}");
    }
}

/// Calls every procedure through `uri` and checks it got back what it sent.
fn call_everything(i: &Interface, uri: &str) {
    let call = |name: &str, arg: Json| -> Json {
        let t = i.find(name).unwrap();
        let c = Client::connect(uri, t.program, t.version).unwrap();
        i.call(&c, &t, &arg).unwrap_or_else(|e| panic!("{uri} {name}: {e}"))
    };
    let rt = i.find("ROUNDTRIP").unwrap();
    for e in values() {
        let j = json_of(i, &rt, &e);
        assert_eq!(call("ROUNDTRIP", j.clone()), j, "{uri}: ROUNDTRIP");
    }
    assert_eq!(call("EVERYTHING_V1.PING", Json::Null), Json::Null);
    assert_eq!(call("EVERYTHING_V2.PING", Json::Null), Json::Null);
    assert_eq!(call("ADD", json!([7, -3])), json!(4));
    assert_eq!(call("CONCAT", json!({"a": "YWI=", "b": "eHl6"})), json!("YWJ4eXo="));
    assert_eq!(call("GREET", json!("bob")), json!("hello, bob"));
    assert_eq!(call("LOOKUP", json!(["key", "BLUE"])), json!({"which": "BLUE", "label": "key"}));
    assert_eq!(call("LOOKUP", json!(["four", 0])), json!({"which": "RED", "code": 4}));
    assert_eq!(call("LOOKUP", json!(["x", "INFRA"])), json!({"which": "INFRA"}));
    let list = json!({"value": 1, "next": {"value": 2, "next": {"value": 3, "next": null}}});
    assert_eq!(call("REVERSE", list), json!({"value": 3, "next": {"value": 2, "next": {"value": 1, "next": null}}}));
}

#[test]
fn dynamic_client_calls_every_procedure_on_the_rpcgen_server() {
    need_c_tools!("dynamic_client_calls_every_procedure_on_the_rpcgen_server");
    let dir = tempfile::tempdir().unwrap();
    let peer = support::build_peer(dir.path());
    let i = interface();
    for transport in ["udp", "tcp"] {
        let server = support::CServer::start(&peer, transport);
        call_everything(&i, &format!("onc+{transport}://127.0.0.1:{}", server.port));
    }
}

#[test]
fn dynamic_client_over_lowlat_udp_and_onc_from_one_server() {
    let uris = ["udp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"];
    let server = support::serve_everything(&uris, Default::default());
    let i = interface();
    for uri in server.local_uris() {
        call_everything(&i, &uri);
    }
    server.shutdown();
}

#[test]
fn select_chooses_a_version_by_name_or_number_and_lists_the_choices() {
    let i = interface();
    for (program, version) in
        [(None, Some("2")), (Some("EVERYTHING_PROG"), Some("everything_v2")), (Some("0x20004C4D"), Some("2"))]
    {
        let v = i.select(program, version).unwrap();
        assert_eq!((v.program, v.version, v.name.as_str()), (0x2000_4C4D, 2, "EVERYTHING_PROG.EVERYTHING_V2"));
        assert_eq!(v.find("reverse").unwrap().proc.number, 1, "names are case-insensitive");
    }
    let err = |p: Option<&str>, v: Option<&str>| i.select(p, v).unwrap_err().to_string();
    assert_eq!(
        err(None, None),
        "EVERYTHING_PROG has several versions; say which: EVERYTHING_V1 (1), EVERYTHING_V2 (2)"
    );
    assert_eq!(
        err(Some("NOPE"), Some("1")),
        "no program \"NOPE\" in the interface; it has: EVERYTHING_PROG (0x20004c4d)"
    );
    assert!(err(None, Some("3")).starts_with("EVERYTHING_PROG has no version \"3\""));
    let v1 = i.select(None, Some("1")).unwrap();
    assert!(matches!(v1.find("REVERSE"), Err(lowlat_dynamic::Error::UnknownProcedure { .. })));
    let lab = Interface::load(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/lab.x")).unwrap();
    assert_eq!(lab.select(None, None).unwrap().name, "LAB_PROG.LAB_VERS", "the only program and version");
}
