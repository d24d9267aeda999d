//! The transport conformance suite (`tests/suite/mod.rs`), one line per transport. A new
//! transport adds one line here.

mod common;
mod suite;

use suite::{Caps, Transport};

#[global_allocator]
static ALLOC: lowlat_testkit::CountingAlloc = lowlat_testkit::CountingAlloc::new();

/// The shm transport's default ring size.
const SHM_RING: usize = 64 << 10;

const LOOPBACK: Caps = Caps { root: false, reliable: false, xdr: false, ring: None, silent: false };
const NAMESPACES: Caps = Caps { root: true, silent: true, ..LOOPBACK };

conformance!(udp, Transport { scheme: "udp", listen: "udp://127.0.0.1:0", client: None, caps: LOOPBACK, threads: 1 });
conformance!(
    tcp,
    Transport {
        scheme: "tcp",
        listen: "tcp://127.0.0.1:0",
        client: None,
        caps: Caps { reliable: true, ..LOOPBACK },
        threads: 1
    }
);
conformance!(
    shm,
    Transport {
        scheme: "shm",
        listen: "shm://{dir}/s",
        client: None,
        caps: Caps { reliable: true, ring: Some(SHM_RING), ..LOOPBACK },
        threads: 1,
    }
);
conformance!(
    eth,
    Transport { scheme: "eth", listen: "eth://{a}", client: Some("eth://{b}/{a.mac}"), caps: NAMESPACES, threads: 1 }
);
conformance!(
    xdp,
    Transport { scheme: "xdp", listen: "xdp://{a}", client: Some("xdp://{b}/{a.mac}"), caps: NAMESPACES, threads: 1 }
);
conformance!(
    onc_udp,
    Transport {
        scheme: "onc+udp",
        listen: "onc+udp://127.0.0.1:0",
        client: None,
        caps: Caps { xdr: true, ..LOOPBACK },
        threads: 1,
    }
);
conformance!(
    onc_tcp,
    Transport {
        scheme: "onc+tcp",
        listen: "onc+tcp://127.0.0.1:0",
        client: None,
        caps: Caps { xdr: true, reliable: true, ..LOOPBACK },
        threads: 1,
    }
);

// Four serving threads per endpoint, where the transport serves with more than one.
conformance!(
    udp_4_threads,
    Transport { scheme: "udp", listen: "udp://127.0.0.1:0", client: None, caps: LOOPBACK, threads: 4 }
);
conformance!(
    onc_udp_4_threads,
    Transport {
        scheme: "onc+udp",
        listen: "onc+udp://127.0.0.1:0",
        client: None,
        caps: Caps { xdr: true, ..LOOPBACK },
        threads: 4,
    }
);
conformance!(
    shm_4_threads,
    Transport {
        scheme: "shm",
        listen: "shm://{dir}/s",
        client: None,
        caps: Caps { reliable: true, ring: Some(SHM_RING), ..LOOPBACK },
        threads: 4,
    }
);
conformance!(
    tcp_4_threads,
    Transport {
        scheme: "tcp",
        listen: "tcp://127.0.0.1:0",
        client: None,
        caps: Caps { reliable: true, ..LOOPBACK },
        threads: 4,
    }
);
conformance!(
    onc_tcp_4_threads,
    Transport {
        scheme: "onc+tcp",
        listen: "onc+tcp://127.0.0.1:0",
        client: None,
        caps: Caps { xdr: true, reliable: true, ..LOOPBACK },
        threads: 4,
    }
);
conformance!(
    eth_4_threads,
    Transport { scheme: "eth", listen: "eth://{a}", client: Some("eth://{b}/{a.mac}"), caps: NAMESPACES, threads: 4 }
);
