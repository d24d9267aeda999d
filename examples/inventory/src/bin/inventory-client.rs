//! `inventory-client [--async] URI`: a session of calls to an inventory server at URI, through
//! the generated client, each printed as `PROCEDURE arguments -> what came back`. The same code
//! runs over every scheme: lowlat's native encoding on `udp://`, `tcp://`, `shm://`, ..., XDR
//! on `onc+udp://` and `onc+tcp://`. `--async`: the same session through the generated
//! client's futures (`*_async`) on a tokio runtime, with 64 calls at once besides.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lowlat::CallOptions;
use lowlat_example_inventory::{Category, InventoryV1Client, Item, TakeResult};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (asynchronous, uri) = match args.as_slice() {
        [flag, uri] if flag == "--async" => (true, uri),
        [uri] if !uri.starts_with('-') => (false, uri),
        _ => {
            eprintln!("usage: inventory-client [--async] URI   (e.g. udp://127.0.0.1:7000, shm:///tmp/inventory.sock)");
            return ExitCode::from(2);
        }
    };
    let done = if asynchronous {
        // Any executor will do: lowlat's futures need no runtime of their own.
        match tokio::runtime::Builder::new_current_thread().build() {
            Ok(rt) => rt.block_on(async_session(uri)),
            Err(e) => {
                eprintln!("inventory-client: cannot start a tokio runtime: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        session(uri)
    };
    match done {
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

// ANCHOR: async_session
async fn async_session(uri: &str) -> Result<(), lowlat::Error> {
    let client = Arc::new(InventoryV1Client::connect(uri)?);
    client.null_async().await?;
    println!("NULL -> ok");

    let hammer = Item { name: "hammer".into(), kind: Category::Tool, count: 3, note: Some(Box::new("claw".into())) };
    let stocked = client.add_async(&hammer).await?;
    println!("ADD 3 hammer -> {stocked} in stock");

    match client.take_async("hammer", stocked + 1).await? {
        TakeResult::Left(n) => println!("TAKE {} hammer -> {n} left", stocked + 1),
        TakeResult::Available(n) => println!("TAKE {} hammer -> short: {n} in stock", stocked + 1),
        TakeResult::Unknown => println!("TAKE {} hammer -> unknown item", stocked + 1),
    }
    if let TakeResult::Left(n) = client.take_async("hammer", 1).await? {
        println!("TAKE 1 hammer -> {n} left");
    }
    if let TakeResult::Unknown = client.take_async("unobtainium", 1).await? {
        println!("TAKE 1 unobtainium -> unknown item");
    }

    for item in client.list_async(Category::Tool).await?.items {
        let note = item.note.as_deref().map_or("no note", |n| n.as_str());
        println!("LIST TOOL -> {} ({}, {note})", item.name, item.count);
    }

    let nothing = Item { name: "nails".into(), kind: Category::Part, count: 0, note: None };
    match client.add_async(&nothing).await {
        Ok(n) => println!("ADD 0 nails -> {n} in stock"),
        Err(e) => println!("ADD 0 nails -> error: {e}"),
    }

    // Many calls in flight at once on one client: each holds a call slot while it waits, none
    // a thread (calls beyond the slots wait for one).
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let client = client.clone();
        calls.spawn(async move { client.null_async().await });
    }
    while let Some(done) = calls.join_next().await {
        done.expect("a call's task ended without panicking")?;
    }
    println!("NULL x64 at once -> ok");

    let patient = client.with(CallOptions::new().deadline(Duration::from_secs(5)));
    println!("AUDIT -> {} things in all", patient.audit_async().await?);
    Ok(())
}
// ANCHOR_END: async_session
