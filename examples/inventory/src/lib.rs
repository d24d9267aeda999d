//! lowlat's example project: a small stock-keeping service, from its interface definition to a
//! server that speaks both protocols and a client on every scheme.
//!
//! - `inventory.x`: the interface (a struct, an enumeration, a union, optional data, strings).
//! - `build.rs`: `lowlat_build::compile("inventory.x")`, which writes the stubs into `OUT_DIR`;
//!   [`stubs`] includes them.
//! - [`Inventory`]: the implementation of the generated server trait, written once and served
//!   over lowlat's protocol and ONC RPC ([`programs`]).
//! - [`AsyncInventory`] (`src/async_service.rs`): the same shelves behind the generated async
//!   server trait, for a server on tokio ([`async_programs`]).
//! - `src/bin/inventory-server.rs`: serves it on the URIs it is given until SIGTERM or SIGINT,
//!   then stops gracefully; `--async` serves the async implementation.
//! - `src/bin/inventory-client.rs`: a session of calls over any scheme (udp, tcp, shm, onc+udp,
//!   ...), through the generated client.
//!
//! `docs/onc-example.md` walks through these files; `tests/` runs the binaries end to end.
//! Depends on `lowlat` alone (and `lowlat-build` at build time), as a user's crate would.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lowlat::{CallContext, ProcError, Program};

mod async_service;
pub use async_service::{async_programs, AsyncInventory};

// ANCHOR: stubs
/// The stubs generated from `inventory.x`: its types at the top (`Item`, `Category`, `Shelf`,
/// `TakeResult`, ...) and the module `inventory_v1` (numbers, codecs, the client
/// `InventoryV1Client`, the server trait `InventoryV1Service`, `program` and `program_xdr`, and
/// the async server trait `InventoryV1AsyncService` with `program_async` and
/// `program_xdr_async`).
pub mod stubs {
    include!(concat!(env!("OUT_DIR"), "/inventory.rs"));
}
// ANCHOR_END: stubs

pub use stubs::inventory_v1::{self, InventoryV1Client, InventoryV1Service};
pub use stubs::{Category, Item, Shelf, TakeResult};

/// The shelves: items by name. Procedures run on the serving threads of several endpoints (and
/// AUDIT on the worker pool), so the state is behind a lock.
#[derive(Debug)]
pub struct Inventory {
    items: Mutex<BTreeMap<String, Item>>,
    audit_takes: Duration,
}

impl Inventory {
    /// Empty shelves, whose AUDIT takes `audit_takes` (it is slow on purpose: a procedure to
    /// mark long-running).
    pub fn new(audit_takes: Duration) -> Inventory {
        Inventory { items: Mutex::new(BTreeMap::new()), audit_takes }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Item>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many things there are in all (what AUDIT finds, when it is done being slow).
    fn total(&self) -> u32 {
        self.items().values().map(|i| i.count).fold(0, u32::saturating_add)
    }
}

// ANCHOR: service
impl InventoryV1Service for Inventory {
    fn null(&self, _: &CallContext) -> Result<(), ProcError> {
        Ok(())
    }

    fn add(&self, _: &CallContext, it: Item) -> Result<u32, ProcError> {
        if it.count == 0 {
            // The caller reads this reason in its error (over lowlat's protocol).
            return Err(ProcError::failed(format!("nothing to add: {} came with a count of 0", it.name)));
        }
        let mut items = self.items();
        let Some(have) = items.get_mut(&it.name) else {
            let count = it.count;
            items.insert(it.name.clone(), it);
            return Ok(count);
        };
        if have.kind != it.kind {
            return Err(ProcError::failed(format!("{} is stocked as {:?}, not {:?}", it.name, have.kind, it.kind)));
        }
        have.count = have.count.checked_add(it.count).ok_or_else(|| ProcError::failed("too many to count"))?;
        if it.note.is_some() {
            have.note = it.note;
        }
        Ok(have.count)
    }

    fn take(&self, _: &CallContext, name: &str, count: u32) -> Result<TakeResult, ProcError> {
        Ok(match self.items().get_mut(name) {
            None => TakeResult::Unknown,
            Some(have) if have.count < count => TakeResult::Available(have.count),
            Some(have) => {
                have.count -= count;
                TakeResult::Left(have.count)
            }
        })
    }

    fn list(&self, _: &CallContext, kind: Category) -> Result<Shelf, ProcError> {
        let items = self.items().values().filter(|i| i.kind == kind).take(stubs::MAX_ITEMS).cloned().collect();
        Ok(Shelf { items })
    }

    fn audit(&self, _: &CallContext) -> Result<u32, ProcError> {
        std::thread::sleep(self.audit_takes);
        Ok(self.total())
    }
}
// ANCHOR_END: service

// ANCHOR: programs
/// The programs to serve: one implementation in both encodings, lowlat's native one for its own
/// transports and XDR for ONC RPC callers (rpcgen/libtirpc clients too). AUDIT is slow, so it is
/// marked long-running here, at run time: it runs on the server's worker pool, and never holds
/// up the calls behind it.
pub fn programs(inventory: Arc<Inventory>) -> Result<[Program; 2], lowlat::Error> {
    Ok([
        inventory_v1::program(inventory.clone()).mark_long_running("AUDIT")?,
        inventory_v1::program_xdr(inventory).mark_long_running("AUDIT")?,
    ])
}
// ANCHOR_END: programs
