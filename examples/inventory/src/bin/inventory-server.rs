//! `inventory-server [--async] URI...`: serves the inventory on every URI given (lowlat's
//! protocol on `udp://`, `tcp://`, `shm://`, ..., ONC RPC on `onc+udp://` and `onc+tcp://`),
//! prints `serving URI` for each (with the port when 0 was asked for) and `ready`, and stops
//! gracefully on SIGTERM, SIGINT or SIGHUP: calls in progress are finished and answered first.
//! `--async`: the async implementation (`AsyncInventory`), its timers on a tokio runtime.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use lowlat::Server;
use lowlat_example_inventory::{async_programs, programs, AsyncInventory, Inventory};

fn main() -> ExitCode {
    // lowlat logs through `tracing` and leaves the subscriber to the program: this one writes
    // lowlat's events (among them the reasons ONC RPC callers cannot be told) to standard error.
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    // Before any thread starts (they inherit the mask), so a stop signal always finds
    // `wait_for_signal` rather than ending the process at once.
    if let Err(e) = Server::block_stop_signals() {
        eprintln!("inventory-server: cannot block termination signals: {e}");
        return ExitCode::FAILURE;
    }
    let mut uris: Vec<String> = std::env::args().skip(1).collect();
    let asynchronous = uris.first().is_some_and(|a| a == "--async");
    if asynchronous {
        uris.remove(0);
    }
    if uris.is_empty() {
        eprintln!("usage: inventory-server [--async] URI...   (e.g. udp://127.0.0.1:7000 onc+udp://127.0.0.1:7001)");
        return ExitCode::from(2);
    }
    let served = if asynchronous { serve_async(&uris) } else { serve(&uris) };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("inventory-server: {e}");
            ExitCode::FAILURE
        }
    }
}

// ANCHOR: serve
fn serve(uris: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let inventory = Arc::new(Inventory::new(Duration::from_millis(300)));
    let [native, xdr] = programs(inventory)?;
    let server = Server::builder().program(native).program(xdr).serve(uris)?;
    Ok(run(server)?)
}

/// The async implementation; the runtime runs its timers and outlives the server.
fn serve_async(uris: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build()?;
    let inventory = Arc::new(AsyncInventory::new(Inventory::new(Duration::from_millis(300)), rt.handle().clone()));
    let [native, xdr] = async_programs(inventory);
    let server = Server::builder().program(native).program(xdr).serve(uris)?;
    Ok(run(server)?)
}

/// Says where it serves, then serves until a stop signal.
fn run(server: Server) -> Result<(), lowlat::Error> {
    for uri in server.local_uris() {
        println!("serving {uri}");
    }
    println!("ready");
    // Until SIGTERM, SIGINT or SIGHUP; then no new call runs, and the ones in progress finish.
    let stop = server.wait_for_signal()?;
    println!(
        "stopped: {} calls finished during the stop, {} refused, {} cut short",
        stop.completed, stop.refused, stop.abandoned
    );
    Ok(())
}
// ANCHOR_END: serve
