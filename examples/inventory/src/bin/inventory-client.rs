//! `inventory-client URI`: a session of calls to an inventory server at URI, through the
//! generated client, each printed as `PROCEDURE arguments -> what came back`. The same code
//! runs over every scheme: lowlat's native encoding on `udp://`, `tcp://`, `shm://`, ..., XDR
//! on `onc+udp://` and `onc+tcp://`.

use std::process::ExitCode;
use std::time::Duration;

use lowlat::CallOptions;
use lowlat_example_inventory::{Category, InventoryV1Client, Item, TakeResult};

fn main() -> ExitCode {
    let Some(uri) = std::env::args().nth(1) else {
        eprintln!("usage: inventory-client URI   (e.g. udp://127.0.0.1:7000, shm:///tmp/inventory.sock)");
        return ExitCode::from(2);
    };
    // Blocking calls. An async session (the generated client's futures, on tokio: issue 19,
    // item 8) belongs beside this one, as `async_session(&uri)`.
    match session(&uri) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("inventory-client: {e}");
            ExitCode::FAILURE
        }
    }
}

// ANCHOR: session
fn session(uri: &str) -> Result<(), lowlat::Error> {
    let client = InventoryV1Client::connect(uri)?;
    client.null()?;
    println!("NULL -> ok");

    let hammer = Item { name: "hammer".into(), kind: Category::Tool, count: 3, note: Some(Box::new("claw".into())) };
    let stocked = client.add(&hammer)?;
    println!("ADD 3 hammer -> {stocked} in stock");

    match client.take("hammer", stocked + 1)? {
        TakeResult::Left(n) => println!("TAKE {} hammer -> {n} left", stocked + 1),
        TakeResult::Available(n) => println!("TAKE {} hammer -> short: {n} in stock", stocked + 1),
        TakeResult::Unknown => println!("TAKE {} hammer -> unknown item", stocked + 1),
    }
    if let TakeResult::Left(n) = client.take("hammer", 1)? {
        println!("TAKE 1 hammer -> {n} left");
    }
    if let TakeResult::Unknown = client.take("unobtainium", 1)? {
        println!("TAKE 1 unobtainium -> unknown item");
    }

    for item in client.list(Category::Tool)?.items {
        let note = item.note.as_deref().map_or("no note", |n| n.as_str());
        println!("LIST TOOL -> {} ({}, {note})", item.name, item.count);
    }

    // A procedure's own error: over lowlat's protocol its reason comes with it.
    let nothing = Item { name: "nails".into(), kind: Category::Part, count: 0, note: None };
    match client.add(&nothing) {
        Ok(n) => println!("ADD 0 nails -> {n} in stock"),
        Err(e) => println!("ADD 0 nails -> error: {e}"),
    }

    // Per-call options: AUDIT is slow (it runs on the server's worker pool), so allow it 5 s.
    let patient = client.with(CallOptions::new().deadline(Duration::from_secs(5)));
    println!("AUDIT -> {} things in all", patient.audit()?);
    Ok(())
}
// ANCHOR_END: session
