//! The inventory as async procedures, for a server that runs on tokio: the generated async
//! server trait implemented over the same shelves, AUDIT awaiting a tokio timer where the
//! blocking implementation sleeps its thread (so it needs no worker pool).

use std::sync::Arc;

use lowlat::{CallContext, ProcError, Program};

use crate::stubs::inventory_v1::{self, InventoryV1AsyncService, InventoryV1Service};
use crate::{Category, Inventory, Item, Shelf, TakeResult};

/// [`Inventory`] served through `InventoryV1AsyncService`, with the runtime its timers use.
#[derive(Debug)]
pub struct AsyncInventory {
    shelves: Inventory,
    rt: tokio::runtime::Handle,
}

impl AsyncInventory {
    /// `shelves` served with async procedures, waiting on timers of the runtime `rt`.
    pub fn new(shelves: Inventory, rt: tokio::runtime::Handle) -> AsyncInventory {
        AsyncInventory { shelves, rt }
    }
}

// ANCHOR: async_service
// The quick procedures are the blocking ones' work, ready at once; AUDIT waits on tokio.
impl InventoryV1AsyncService for AsyncInventory {
    async fn null(self: Arc<Self>, ctx: CallContext) -> Result<(), ProcError> {
        self.shelves.null(&ctx)
    }

    async fn add(self: Arc<Self>, ctx: CallContext, it: Item) -> Result<u32, ProcError> {
        self.shelves.add(&ctx, it)
    }

    async fn take(self: Arc<Self>, ctx: CallContext, name: String, count: u32) -> Result<TakeResult, ProcError> {
        self.shelves.take(&ctx, &name, count)
    }

    async fn list(self: Arc<Self>, ctx: CallContext, kind: Category) -> Result<Shelf, ProcError> {
        self.shelves.list(&ctx, kind)
    }

    async fn audit(self: Arc<Self>, _: CallContext) -> Result<u32, ProcError> {
        // The serving thread that polls this future is not tokio's: the timer is made in a task
        // on the runtime, and the serving thread answers other calls until it fires.
        let takes = self.shelves.audit_takes;
        self.rt
            .spawn(async move { tokio::time::sleep(takes).await })
            .await
            .map_err(|e| ProcError::failed(e.to_string()))?;
        Ok(self.shelves.total())
    }
}

/// The programs to serve, in both encodings; nothing needs marking long-running.
pub fn async_programs(inventory: Arc<AsyncInventory>) -> [Program; 2] {
    [inventory_v1::program_async(inventory.clone()), inventory_v1::program_xdr_async(inventory)]
}
// ANCHOR_END: async_service
