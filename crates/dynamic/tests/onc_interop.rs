//! ONC RPC interoperation with rpcgen + libtirpc for idl/examples/everything.x (every XDR
//! construct), both ways, over UDP and TCP. The C side is built here at test time.

mod support;

use std::process::Command;
use std::time::Duration;

use lowlat::{Client, Server, ServerConfig};
use lowlat_codec::Error as CodecError;
use support::everything::{everything_v1 as v1, everything_v2 as v2, *};

fn lowlat_server_with(cfg: ServerConfig) -> Server {
    support::serve_everything(&["onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"], cfg)
}

fn lowlat_server() -> Server {
    lowlat_server_with(ServerConfig::default())
}

fn run_c_client(peer: &std::path::Path, uri: &str, extra: &[&str]) -> (bool, String) {
    let (transport, addr) = uri.split_once("://").unwrap();
    let transport = transport.trim_start_matches("onc+");
    let port = addr.rsplit_once(':').unwrap().1;
    let mut args = vec!["call", transport, port];
    args.extend_from_slice(extra);
    let (ok, out, err) = support::run_bounded(Command::new(peer).args(&args), Duration::from_secs(20));
    (ok && out.trim() == "ok", format!("{out}{err}"))
}

#[test]
fn rpcgen_auth_sys_credentials_reach_the_lowlat_server() {
    need_c_tools!("rpcgen_auth_sys_credentials_reach_the_lowlat_server");
    let dir = tempfile::tempdir().unwrap();
    let peer = support::build_peer(dir.path());
    let me = lowlat::AuthSys::current().uid;
    // Only this uid: libtirpc's AUTH_SYS (authsys_create_default) is parsed and admitted...
    let server = lowlat_server_with(ServerConfig { onc_allowed_uids: vec![me], ..ServerConfig::default() });
    for uri in server.local_uris() {
        let (ok, out) = run_c_client(&peer, &uri, &["sys"]);
        assert!(ok, "rpcgen client with AUTH_SYS over {uri}: {out}");
        // ...and AUTH_NONE is refused, which libtirpc reports as an authentication error.
        let (ok, out) = run_c_client(&peer, &uri, &[]);
        assert!(!ok && out.contains("Authentication error"), "AUTH_NONE over {uri}: {out}");
    }
    server.shutdown();
    // Another uid only: the rpcgen client is refused as too weak.
    let server =
        lowlat_server_with(ServerConfig { onc_allowed_uids: vec![me.wrapping_add(1)], ..ServerConfig::default() });
    for uri in server.local_uris() {
        let (ok, out) = run_c_client(&peer, &uri, &["sys"]);
        assert!(!ok && out.contains("Authentication error"), "{uri}: {out}");
    }
    server.shutdown();
}

#[test]
fn rpcgen_client_calls_lowlat_server() {
    need_c_tools!("rpcgen_client_calls_lowlat_server");
    let dir = tempfile::tempdir().unwrap();
    let peer = support::build_peer(dir.path());
    let server = lowlat_server();
    for uri in server.local_uris() {
        let (ok, out) = run_c_client(&peer, &uri, &[]);
        assert!(ok, "rpcgen client over {uri}: {out}");
    }
    server.shutdown();
}

fn check_everything(c: &Client, what: &str) {
    for (i, e) in [support::value_a(), support::value_b(0), support::value_b(1)].iter().enumerate() {
        let back: Everything = c
            .call(
                v1::ROUNDTRIP,
                |b| v1::encode_roundtrip_args_xdr(b, e).map_err(CodecError::from),
                |r| v1::decode_roundtrip_result_xdr(r).map_err(CodecError::from),
            )
            .unwrap();
        // Field by field (derived PartialEq compares every field; -0.0 == 0.0 is checked by bits).
        assert_eq!(&back, e, "{what}: ROUNDTRIP value {i}");
        assert_eq!(back.prim.f.to_bits(), e.prim.f.to_bits(), "{what}: float bits");
        assert_eq!(back.prim.d.to_bits(), e.prim.d.to_bits(), "{what}: double bits");
    }
    c.call(
        v1::PING,
        |_| Ok::<_, CodecError>(()),
        |r| {
            assert!(r.is_empty());
            Ok::<_, CodecError>(())
        },
    )
    .unwrap();
    let sum = c
        .call(
            v1::ADD,
            |b| v1::encode_add_args_xdr(b, 7, -3).map_err(CodecError::from),
            |r| v1::decode_add_result_xdr(r).map_err(CodecError::from),
        )
        .unwrap();
    assert_eq!(sum, 4, "{what}: ADD");
    let cat = c
        .call(
            v1::CONCAT,
            |b| v1::encode_concat_args_xdr(b, b"ab", b"xyz").map_err(CodecError::from),
            |r| v1::decode_concat_result_xdr(r).map(|s| s.to_vec()).map_err(CodecError::from),
        )
        .unwrap();
    assert_eq!(cat, b"abxyz", "{what}: CONCAT");
    let g = c
        .call(
            v1::GREET,
            |b| v1::encode_greet_args_xdr(b, "bob").map_err(CodecError::from),
            |r| v1::decode_greet_result_xdr(r).map(str::to_string).map_err(CodecError::from),
        )
        .unwrap();
    assert_eq!(g, "hello, bob", "{what}: GREET");
    for (key, hint) in [("key", Color::Blue), ("four", Color::Red), ("g", Color::Green), ("x", Color::Infra)] {
        let r = c
            .call(
                v1::LOOKUP,
                |b| v1::encode_lookup_args_xdr(b, key, hint).map_err(CodecError::from),
                |r| v1::decode_lookup_result_xdr(r).map_err(CodecError::from),
            )
            .unwrap();
        assert_eq!(r, support::lookup(key, hint), "{what}: LOOKUP {key} {hint:?}");
    }
}

fn check_v2(c: &Client, what: &str) {
    let list = Node {
        value: 10,
        next: Some(Box::new(Node { value: 20, next: Some(Box::new(Node { value: 30, next: None })) })),
    };
    let r = c
        .call(
            v2::REVERSE,
            |b| v2::encode_reverse_args_xdr(b, &list).map_err(CodecError::from),
            |r| v2::decode_reverse_result_xdr(r).map_err(CodecError::from),
        )
        .unwrap();
    assert_eq!(r, support::reverse(&list), "{what}: REVERSE");
    assert_eq!(r.value, 30);
}

#[test]
fn lowlat_client_calls_rpcgen_server() {
    need_c_tools!("lowlat_client_calls_rpcgen_server");
    let dir = tempfile::tempdir().unwrap();
    let peer = support::build_peer(dir.path());
    for transport in ["udp", "tcp"] {
        let server = support::CServer::start(&peer, transport);
        let uri = format!("onc+{transport}://127.0.0.1:{}", server.port);
        let c1 = Client::connect(&uri, v1::PROGRAM, 1).unwrap();
        check_everything(&c1, &uri);
        // libtirpc accepts lowlat's AUTH_SYS credentials.
        let sys = lowlat::ClientConfig { onc_auth: Some(lowlat::AuthSys::current()), ..Default::default() };
        check_everything(&Client::connect_with(&uri, v1::PROGRAM, 1, sys).unwrap(), &uri);
        let c2 = Client::connect(&uri, v2::PROGRAM, 2).unwrap();
        check_v2(&c2, &uri);
        // libtirpc's own errors come back typed: no version 9, no procedure 42.
        let c9 = Client::connect(&uri, v1::PROGRAM, 9).unwrap();
        let e = c9.call(0, |_| Ok::<_, CodecError>(()), |_| Ok::<_, CodecError>(())).unwrap_err();
        assert!(matches!(e, lowlat::Error::VersionMismatch { low: 1, high: 2, .. }), "{uri}: {e}");
        let e = c1.call(42, |_| Ok::<_, CodecError>(()), |_| Ok::<_, CodecError>(())).unwrap_err();
        assert!(matches!(&e, lowlat::Error::UnknownProcedure { call } if call.proc_no == 42), "{uri}: {e}");
    }
}

/// Every procedure of both versions through the generated typed clients, every field of every
/// result checked; `uri` may be any scheme (XDR over ONC RPC, native bodies elsewhere).
fn check_generated_clients(uri: &str) {
    let c1 = v1::EverythingV1Client::connect(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    for (i, e) in [support::value_a(), support::value_b(0), support::value_b(1)].iter().enumerate() {
        let back = c1.roundtrip(e).unwrap_or_else(|err| panic!("{uri}: ROUNDTRIP value {i}: {err}"));
        assert_eq!(&back, e, "{uri}: ROUNDTRIP value {i}");
        assert_eq!(back.prim.f.to_bits(), e.prim.f.to_bits(), "{uri}: float bits");
        assert_eq!(back.prim.d.to_bits(), e.prim.d.to_bits(), "{uri}: double bits");
    }
    c1.ping().unwrap();
    assert_eq!(c1.add(7, -3).unwrap(), 4, "{uri}: ADD");
    assert_eq!(c1.add(i32::MAX, 1).unwrap(), i32::MIN, "{uri}: ADD wraps");
    assert_eq!(c1.concat(b"ab", b"xyz").unwrap(), b"abxyz", "{uri}: CONCAT");
    let mut out = b"stale".to_vec();
    c1.concat_into(b"", b"", &mut out).unwrap();
    assert!(out.is_empty(), "{uri}: CONCAT of nothing");
    c1.concat_into(&[7; 1000], b"!", &mut out).unwrap();
    assert_eq!((out.len(), out[999], out[1000]), (1001, 7, b'!'), "{uri}: CONCAT into a buffer");
    assert_eq!(c1.greet("bob").unwrap(), "hello, bob", "{uri}: GREET");
    for (key, hint) in [("key", Color::Blue), ("four", Color::Red), ("g", Color::Green), ("x", Color::Infra)] {
        assert_eq!(c1.lookup(key, hint).unwrap(), support::lookup(key, hint), "{uri}: LOOKUP {key} {hint:?}");
    }
    // A value the declaration refuses is refused before anything is sent.
    let e = c1.lookup(&"k".repeat(33), Color::Red).unwrap_err();
    assert!(matches!(e, lowlat::Error::Encode { .. }), "{uri}: {e}");
    let c2 = v2::EverythingV2Client::connect(uri).unwrap();
    c2.ping().unwrap();
    let list = Node {
        value: 10,
        next: Some(Box::new(Node { value: 20, next: Some(Box::new(Node { value: 30, next: None })) })),
    };
    assert_eq!(c2.reverse(&list).unwrap(), support::reverse(&list), "{uri}: REVERSE");
}

#[test]
fn generated_client_calls_rpcgen_server_over_onc_udp_and_tcp() {
    need_c_tools!("generated_client_calls_rpcgen_server_over_onc_udp_and_tcp");
    let dir = tempfile::tempdir().unwrap();
    let peer = support::build_peer(dir.path());
    for transport in ["udp", "tcp"] {
        let server = support::CServer::start(&peer, transport);
        check_generated_clients(&format!("onc+{transport}://127.0.0.1:{}", server.port));
    }
}

#[test]
fn generated_client_calls_generated_server_on_every_scheme() {
    let uris = ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"];
    let server = support::serve_everything(&uris, ServerConfig::default());
    for uri in server.local_uris() {
        check_generated_clients(&uri);
    }
    server.shutdown();
}

#[test]
fn lowlat_client_calls_lowlat_server_with_the_same_program() {
    let server = lowlat_server();
    for uri in server.local_uris() {
        check_everything(&Client::connect(&uri, v1::PROGRAM, 1).unwrap(), &uri);
        check_v2(&Client::connect(&uri, v2::PROGRAM, 2).unwrap(), &uri);
    }
    server.shutdown();
}

/// EVERYTHING_PROG's rules on JSON values (those of support::Peer): what a dynamic server runs.
fn everything_in_json(proc: &str, mut args: Vec<serde_json::Value>) -> serde_json::Value {
    use base64::Engine;
    use serde_json::{json, Value as Json};
    let b64 = base64::engine::general_purpose::STANDARD;
    let bytes = |v: &Json| b64.decode(v.as_str().unwrap()).unwrap();
    match proc {
        "PING" => Json::Null,
        "ROUNDTRIP" => args.remove(0),
        "ADD" => json!((args[0].as_i64().unwrap() as i32).wrapping_add(args[1].as_i64().unwrap() as i32)),
        "CONCAT" => json!(b64.encode([bytes(&args[0]), bytes(&args[1])].concat())),
        "GREET" => json!(format!("hello, {}", args[0].as_str().unwrap())),
        "LOOKUP" => {
            let key = args[0].as_str().unwrap();
            match args[1].as_str().unwrap() {
                "RED" => json!({"which": "RED", "code": key.len()}),
                hint @ ("GREEN" | "BLUE") => json!({"which": hint, "label": key}),
                other => json!({"which": other}),
            }
        }
        "REVERSE" => {
            let (mut node, mut out) = (&args[0], Json::Null);
            while !node.is_null() {
                out = json!({"value": node["value"], "next": out});
                node = &node["next"];
            }
            out
        }
        other => panic!("no rule for {other}"),
    }
}

/// A server built by `Interface::server_programs` (what the Python server is), here with JSON
/// handlers, answers the generated clients on every scheme: the dynamic codec is byte-exact on
/// the server's side too, in both encodings.
#[test]
fn generated_clients_call_a_dynamic_server_on_every_scheme() {
    use std::sync::Arc;

    use lowlat_dynamic::{DynamicHandler, Interface, JsonBuild};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../idl/examples/everything.x");
    let iface = Arc::new(Interface::load(path).unwrap());
    let mut builder = Server::builder().config(ServerConfig { onc_register: false, ..ServerConfig::default() });
    for version in ["1", "2"] {
        let chosen = iface.select(None, Some(version)).unwrap();
        let procs: Vec<_> = chosen
            .procedures
            .iter()
            .map(|t| {
                let (iface, target) = (iface.clone(), t.clone());
                let handler: Arc<DynamicHandler> = Arc::new(move |_ctx, order, args, reply| {
                    let values = iface
                        .decode_args_with(&target, args, order, &mut JsonBuild)
                        .map_err(|_| lowlat::ProcError::GarbageArgs)?;
                    let result = everything_in_json(&target.proc.name, values);
                    iface.encode_result_into(&target, &result, reply, order).map_err(|_| lowlat::ProcError::SystemError)
                });
                (t.clone(), handler, false)
            })
            .collect();
        let [native, xdr] = iface.server_programs(chosen.program, chosen.version, &procs);
        builder = builder.program(native).program(xdr);
    }
    let uris = ["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"];
    let server = builder.serve(&uris).unwrap();
    for uri in server.local_uris() {
        check_generated_clients(&uri);
    }
    server.shutdown();
}
