//! Glob imports of a generated module (every construct of idl/examples/everything.x), of its
//! version module, of its enumerations' members and of `lowlat` itself, side by side, compile
//! without a single warning: no generated name clashes with another. Union variants are named
//! after their arms (`Code`), never after the case constants that are already the enumeration's
//! variants (`Red`); the client and the server trait are `EverythingV1Client` and
//! `EverythingV1Service`, not `lowlat::Client` and `lowlat::Server`.

#![deny(warnings)]

#[path = "../../dynamic/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use everything::everything_v1::*;
use everything::Color::*;
use everything::Shape::*;
use everything::*;
use lowlat::*;
use support::everything;

/// Both programs of an implementation of the glob-imported server trait.
fn serve<S: EverythingV1Service>(s: Arc<S>, uris: &[&str]) -> Server {
    let cfg = ServerConfig { onc_register: false, ..ServerConfig::default() };
    Server::builder().program(program(s.clone())).program(program_xdr(s)).config(cfg).serve(uris).unwrap()
}

/// A value of every construct, built from the glob-imported names.
fn value() -> Everything {
    let handle: Handle = [7; 16];
    let quad: Quad = [1, 2, 3, NEG];
    let blob: Blob = vec![0; MAXNAME.min(3)];
    let small: SmallBlob = vec![1; NITEMS];
    let who: Name = "ann".into();
    let note: Text = String::new();
    let many: Counts = vec![ALIAS as u32];
    Everything {
        prim: Primitives { i: SMALL, u: 1, ushort_like: 2, h: 3, uh: 4, f: 0.5, d: 0.25, b: true, c: Blue },
        h: handle,
        data: blob,
        fixed_bytes: *b"abc",
        var_bytes: vec![],
        who,
        note,
        four: quad,
        many,
        corners: [Point { x: 1, y: 2 }, Point { x: 3, y: 4 }],
        inners: vec![Inner { corner: Point { x: 0, y: 0 }, kind: Triangle, tag: small }],
        maybe_point: None,
        list: Some(Box::new(Node { value: 1, next: None })),
        r: everything::Result::Label(Green, "g".into()),
        bi: ByInt::Big(-1),
        mt: MaybeText::T("t".into()),
        bu: ByUint::Cs(vec![]),
        names: vec![],
        hypers: [0, 1],
        flags: vec![false],
    }
}

#[test]
fn glob_imported_stubs_serve_and_call_on_both_protocols() {
    let server = serve(Arc::new(support::Peer), &["udp://127.0.0.1:0", "onc+udp://127.0.0.1:0"]);
    for uri in server.local_uris() {
        let c = EverythingV1Client::connect(&uri).unwrap();
        let v = value();
        assert_eq!(c.roundtrip(&v).unwrap(), v, "{uri}");
        assert_eq!(c.lookup("abc", Red).unwrap(), everything::Result::Code(3), "{uri}");
        assert_eq!(c.with(CallOptions::new()).lookup("x", Infra).unwrap(), everything::Result::Default(Infra));
        assert!(matches!(ByInt::P(Point { x: 0, y: 0 }), ByInt::P(_)) && Circle != Square);
        let _: Batch = Batch { id: 0, items: vec![] };
        let _ = (ByInt::V2, ByInt::Default(9, vec![]), MaybeText::False, ByUint::D(0.0));
        let _: &Client = c.client();
        let _: EverythingV1ClientWith<'_> = c.with(CallOptions::new().deadline(std::time::Duration::from_secs(1)));
        assert_eq!((PROGRAM, VERSION, PING, ROUNDTRIP, ADD, CONCAT, GREET, LOOKUP), (0x20004c4d, 1, 0, 1, 2, 3, 4, 5));
    }
    server.shutdown();
}
