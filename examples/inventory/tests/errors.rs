//! What does not decode is named by its path, on the side that found it: the server says which
//! argument, and where in it; the client says where in the result. Both messages name the
//! endpoint and the procedure.

use std::sync::Arc;
use std::time::Duration;

use lowlat::{Client, Error, Program, Server};
use lowlat_example_inventory::{inventory_v1, programs, Category, Inventory, InventoryV1Client};

/// An item in lowlat's native encoding (little- or big-endian), its name given as raw bytes, so
/// that it can break the interface's bound of 16.
fn native_item(out: &mut lowlat::OutBuf<'_>, little: bool, name: &[u8], count: u32) {
    let u32_ = |v: u32| if little { v.to_le_bytes() } else { v.to_be_bytes() };
    out.extend_from_slice(&u32_(name.len() as u32));
    out.extend_from_slice(name);
    out.extend_from_slice(&u32_(Category::Tool as u32));
    out.extend_from_slice(&u32_(count));
    out.push(0); // no note
}

#[test]
fn the_server_names_the_argument_it_could_not_decode() {
    let [native, _] = programs(Arc::new(Inventory::new(Duration::ZERO))).unwrap();
    let server = Server::builder().program(native).serve(&["udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let client = Client::connect(&uri, inventory_v1::PROGRAM, inventory_v1::VERSION)
        .unwrap()
        .name_procedures(inventory_v1::PROCEDURES);
    let little = client.server_byte_order() == lowlat::ByteOrder::Little;
    let e = client
        .call::<(), lowlat::DecodeError>(
            inventory_v1::ADD,
            |b| {
                native_item(b, little, b"a name of twenty b", 1);
                Ok(())
            },
            |_| Ok(()),
        )
        .unwrap_err();
    assert!(matches!(&e, Error::GarbageArgs { detail: Some(_), .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "{uri}: ADD (program 0x20494e56 version 1, procedure 1): the server could not decode the arguments: \
             argument `it.name`: string<16> got 18 bytes (at offset 0)"
        )
    );
    assert!(!e.may_have_executed(), "{e}");
    server.shutdown();
}

#[test]
fn the_client_names_where_in_the_result_it_could_not_decode() {
    // A LIST whose fourth item's name breaks the bound of 16.
    let server = Server::builder()
        .program(Program::new(inventory_v1::PROGRAM, inventory_v1::VERSION).procedure(
            inventory_v1::LIST,
            "LIST",
            |_, _, reply| {
                // A server writes in its own byte order.
                let little = cfg!(target_endian = "little");
                reply.extend_from_slice(&if little { 4u32.to_le_bytes() } else { 4u32.to_be_bytes() });
                for name in [&b"saw"[..], b"drill", b"level", b"a very long name indeed"] {
                    native_item(reply, little, name, 1);
                }
                Ok(())
            },
        ))
        .serve(&["udp://127.0.0.1:0"])
        .unwrap();
    let uri = server.local_uris()[0].clone();
    let e = InventoryV1Client::connect(&uri).unwrap().list(Category::Tool).unwrap_err();
    assert!(matches!(&e, Error::Decode { .. }), "{e}");
    // After the count (4 bytes), three items of 4 + name + 9 bytes: the fourth name's length
    // is at 4 + 16 + 18 + 18.
    assert_eq!(
        e.to_string(),
        format!(
            "{uri}: LIST (program 0x20494e56 version 1, procedure 3): decoding the result: \
             result.items[3].name: string<16> got 23 bytes (at offset 56)"
        )
    );
    server.shutdown();
}
