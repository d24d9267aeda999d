//! The one place lowlat talks to the operating system: safe wrappers over the system calls the
//! other crates need (waiting on descriptors, eventfds, futexes, sealed memfds and their
//! mappings, mappings of kernel rings, descriptors passed over Unix sockets, raw AF_PACKET and
//! AF_XDP sockets, batches of datagrams (recvmmsg/sendmmsg), socket options, bpf(2), network
//! interfaces and namespaces, signals, CPU placement, randomness, the monotonic clock and a
//! thread's CPU clock). Every `unsafe` block here states the invariant it relies on; the callers
//! stay safe, except for [`bpf::bpf`], whose attribute block only its caller can vouch for.
//!
//! This crate depends on `libc` alone and must never depend on another lowlat crate. The only
//! other places with `unsafe` code are those that share memory with another process or the
//! kernel (the shared-memory rings, the AF_PACKET and AF_XDP rings, the laboratory's floor),
//! the bpf(2) attribute blocks of lowlat-eth and the test allocator.

#![allow(unsafe_code)] // the one place that talks to the operating system
#![warn(missing_docs)]

pub mod barrier;
pub mod bpf;
pub mod callgrind;
pub mod cbpf;
pub mod clock;
pub mod event;
pub mod fs;
pub mod futex;
pub mod iface;
pub mod memory;
pub mod mmsg;
pub mod netns;
pub mod packet;
pub mod poll;
pub mod process;
pub mod random;
pub mod socket;
pub mod sockopt;
pub mod unix;

pub use barrier::heavy_barrier;
pub use event::{ring_fd, EventFd};
pub use futex::{futex_wait, futex_wake};
pub use iface::{interface, Interface};
pub use memory::{check_sealed, sealed_memfd, Mapping, RawMapping};
pub use netns::enter_netns;
pub use packet::PacketSocket;
pub use poll::{poll_readable, poll_set, wait_readable, Epoll};
pub use process::{
    available_cpus, block_server_signals, kill, pin_to_cpu, resume, set_timer_slack, suspend, terminate,
    wait_server_signal, wait_termination, ServerSignal,
};
pub use sockopt::{getsockopt, setsockopt};
pub use unix::{effective_uid, hung_up, peer_cred, recv_with_fds, send_with_fds};

use std::io;
use std::time::Duration;

/// A negative return is the call's `errno`.
pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}
