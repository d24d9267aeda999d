//! The ladder's raw Ethernet rungs: eth://, xdp:// and the XDP floor (answered in the driver),
//! between two network namespaces joined by a veth pair, which only root may create; with
//! `lab --remote`, across the link to the other host instead (its agent's interface toward
//! this machine, root on both sides).

use std::time::Duration;

use lowlat::SpinPolicy;
use lowlat_report::{LadderRow, Latency, Results};

use crate::bench::{self, BenchSpec};
use crate::latency::new_histogram;
use crate::procs;
use crate::run::lab::{lat, Lab};

/// Progress steps: one per rung (eth, xdp, xdp-floor) and size.
pub(crate) const STEPS: u64 = 3 * 2;

/// The rungs: (row, scheme of the far end, whether it is the driver's floor).
const RUNGS: [(&str, &str, bool); 3] = [("eth", "eth", false), ("xdp", "xdp", false), ("xdp-floor", "xdp", true)];

/// eth, xdp and the XDP floor across a veth pair between two namespaces (root only), or across
/// the link to the other host.
pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    if lab.remote.is_some() {
        return across_link(lab, results);
    }
    use crate::raw::eth_hosts::{across, Pinning, Responder, Side};
    use crate::raw::eth_pingpong::RunConfig;
    use lowlat_testkit::testhosts::{check_root, TestHosts};
    let names = ["eth", "xdp", "xdp-floor"];
    if let Err(why) = check_root() {
        for n in names {
            for size in [32, 1024] {
                results.ladder.push(LadderRow::skipped(n, size, &format!("skipped: {why}")));
            }
        }
        return;
    }
    let hosts = match TestHosts::new() {
        Ok(h) => h,
        Err(e) => {
            for n in names {
                results.ladder.push(LadderRow::skipped(n, 32, &format!("could not create the test namespaces: {e}")));
            }
            return;
        }
    };
    let pin = Pinning { server: lab.place.server_cpu, client: lab.place.client_cpu };
    for (name, responder, side) in [
        ("eth", Responder::User(Side::Eth(Default::default())), Side::Eth(Default::default())),
        ("xdp", Responder::User(Side::Xdp(Default::default())), Side::Xdp(Default::default())),
        ("xdp-floor", Responder::XdpFloor, Side::Xdp(Default::default())),
    ] {
        for size in [32usize, 1024] {
            lab.step(&format!("ladder: {name} {size} B"));
            let cfg = RunConfig {
                size: size.max(8),
                rounds: lab.scale.calls as usize,
                warmup: (lab.scale.calls / 10) as usize,
                spin: SpinPolicy::Forever,
                ..Default::default()
            };
            let raw = across(&hosts, responder, side, &cfg, pin).map_err(|e| e.to_string()).map(|v| {
                let mut h = new_histogram();
                for x in v {
                    let _ = h.record(x);
                }
                Latency { p50_ns: h.value_at_quantile(0.5) as f64, p99_ns: h.value_at_quantile(0.99) as f64 }
            });
            let rpc = if name == "xdp-floor" {
                Err("the floor answers in the driver: there is no RPC on it".to_string())
            } else {
                eth_rpc(lab, &hosts, name, size, &hosts.a.mac.to_string())
            };
            let mut row = LadderRow::new(name, size as u32, raw.as_ref().ok().copied(), rpc.as_ref().ok().copied());
            let why: Vec<String> = [raw.err(), rpc.err()].into_iter().flatten().collect();
            if !why.is_empty() {
                row.skipped = Some(why.join("; "));
            }
            results.ladder.push(row);
        }
    }
}

/// The rungs across the link: every far end started by the agent on its interface toward this
/// machine, the caller here on this machine's.
fn across_link(lab: &mut Lab, results: &mut Results) {
    let spin = SpinPolicy::Forever;
    for (name, scheme, floor) in RUNGS {
        for size in [32usize, 1024] {
            lab.step(&format!("ladder: {name} {size} B, across the link"));
            let raw = if floor { lab.floor(scheme, size.max(8), spin) } else { lab.raw(scheme, size.max(8), spin) };
            let rpc = if floor {
                Err("the floor answers in the driver: there is no RPC on it".to_string())
            } else {
                lab.rpc(scheme, size, spin).map(|(s, _)| s)
            };
            let mut row = LadderRow::new(name, size as u32, raw.as_ref().ok().map(lat), rpc.as_ref().ok().map(lat))
                .across_link(true);
            let why: Vec<String> = [raw.err(), rpc.err()].into_iter().flatten().collect();
            if !why.is_empty() {
                row.skipped = Some(why.join("; "));
            }
            results.ladder.push(row);
        }
    }
}

/// RPC over eth:// or xdp://: `lowlat serve` in namespace a, the calls from a thread in b.
fn eth_rpc(
    lab: &Lab,
    hosts: &lowlat_testkit::testhosts::TestHosts,
    scheme: &str,
    size: usize,
    server_mac: &str,
) -> Result<Latency, String> {
    let mut cmd = hosts.a.command(&lab.exe);
    cmd.args(["serve", &format!("{scheme}://{}", hosts.a.iface), "--spin-us", "forever"]);
    cmd.args(lab.psk_args());
    if let Some(c) = lab.place.server_cpu {
        cmd.args(["--cpu", &c.to_string()]);
    }
    let _srv = procs::spawn_command(cmd, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let (proc, psize) = if size <= 32 { ("null", 0) } else { ("echo", size) };
    let spec = BenchSpec {
        uri: format!("{scheme}://{}/{server_mac}", hosts.b.iface),
        ..lab.spec("", proc, psize, lab.scale.calls, SpinPolicy::Forever)
    };
    let s = hosts.b.spawn(move || bench::run(&spec)).join().map_err(|_| "benchmark thread panicked".to_string())?;
    let s = s.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    Ok(lat(&s))
}
