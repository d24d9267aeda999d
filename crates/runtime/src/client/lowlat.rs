//! A client of lowlat's own protocol: its slots (each with its own channel and engine) and what
//! they share (the endpoint, the configuration, the session). The call path is `call`, the
//! session and its rebinding `session`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lowlat_proto::{ByteOrder, ClientSlot, Session};
use lowlat_wait::Spinner;

use super::pool::SlotPool;
use super::session::{bind, SessionState};
use crate::driver::{self, SlotChannel};
use crate::stats::ClientStats;
use crate::{ClientConfig, Endpoint, Error};
use lowlat_proto::Bound;

pub(super) struct Slot {
    pub index: u16,
    /// The session epoch this slot's engine was built for.
    pub epoch: u64,
    /// The connection generation this slot's channel was opened in.
    pub conn_gen: u64,
    pub engine: Option<ClientSlot>,
    pub chan: Option<SlotChannel>,
    pub buf: Vec<u8>,
    /// Frames the engine sends while a received one is read (each after its length).
    pub outbox: Vec<u8>,
    pub spinner: Spinner,
    /// The counters of engines this slot had before its current one (rebinds replace it).
    pub earlier: ClientStats,
}

pub(super) struct Shared {
    pub uri: Arc<str>,
    pub endpoint: Endpoint,
    pub program: u32,
    pub version: u32,
    pub cfg: ClientConfig,
    /// [`SessionState::epoch`], readable without the lock: a slot whose engine was built in another
    /// epoch goes to the slow path of [`Lowlat::prepare`].
    pub epoch: AtomicU64,
    pub binding: Mutex<SessionState>,
    /// The current session's `server_order`, which every generated call asks for: kept outside
    /// the lock so that asking costs a load, not a lock shared by all calling threads.
    pub server_big_endian: AtomicBool,
    /// The call slots (`super::pool`).
    pub slots: SlotPool<Slot>,
    /// Binds made.
    pub binds: AtomicU64,
}

/// A client of lowlat's own protocol.
#[derive(Clone)]
pub(super) struct Lowlat {
    pub shared: Arc<Shared>,
}

impl std::fmt::Debug for Lowlat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", &self.shared.uri)
            .field("program", &self.shared.program)
            .field("version", &self.shared.version)
            .finish()
    }
}

impl Lowlat {
    pub fn connect_with(
        uri: &str,
        endpoint: Endpoint,
        program: u32,
        version: u32,
        cfg: ClientConfig,
    ) -> Result<Lowlat, Error> {
        let mut chan = driver::open_channel(&endpoint, uri, &cfg)?;
        let mut buf = Vec::new();
        let Bound { session, keys, seal } = bind(uri, program, version, &cfg, chan.as_dyn(), &mut buf)?;
        let mut slots: Vec<Slot> = (0..session.slots)
            .map(|i| Slot {
                index: i,
                epoch: 0,
                conn_gen: 0,
                engine: None,
                chan: None,
                buf: Vec::new(),
                outbox: Vec::new(),
                spinner: crate::marks::spinner(cfg.spin).awaiting_answers(),
                earlier: ClientStats::default(),
            })
            .collect();
        slots[0].chan = Some(chan);
        slots[0].buf = buf;
        let reliable = session.reliable;
        let shared = Arc::new(Shared {
            uri: uri.into(),
            endpoint,
            program,
            version,
            cfg,
            epoch: AtomicU64::new(0),
            server_big_endian: AtomicBool::new(session.server_order == ByteOrder::Big),
            binding: Mutex::new(SessionState { epoch: 0, session, keys, seal, stale: false, conn_gen: 0 }),
            slots: SlotPool::new(slots, |i| i == 0),
            binds: AtomicU64::new(1),
        });
        if !reliable {
            super::acks::spawn_acknowledger(Arc::downgrade(&shared), shared.cfg.pin_cpus.clone());
        }
        Ok(Lowlat { shared })
    }

    pub fn uri(&self) -> &str {
        &self.shared.uri
    }

    /// The session currently bound.
    pub fn session(&self) -> Session {
        self.binding().session
    }

    pub fn stats(&self) -> ClientStats {
        let mut total = ClientStats { binds: self.shared.binds.load(Ordering::Relaxed), ..ClientStats::default() };
        for g in self.shared.slots.hold_each() {
            total = total.plus(&g.earlier).plus(&g.engine.as_ref().map(engine_stats).unwrap_or_default());
        }
        total
    }

    /// The current session's byte order for bodies, without taking the session's lock.
    pub fn server_order(&self) -> ByteOrder {
        if self.shared.server_big_endian.load(Ordering::Relaxed) {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
}

/// A slot engine's counters.
pub(super) fn engine_stats(e: &ClientSlot) -> ClientStats {
    ClientStats {
        calls: e.calls,
        retransmissions: e.retransmissions,
        mac_failures: e.mac_failures,
        ignored: e.ignored,
        ..ClientStats::default()
    }
}
