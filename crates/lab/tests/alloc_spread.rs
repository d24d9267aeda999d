//! A client over several servers allocates nothing per call once warm: picking a server, the
//! per-thread argument buffer, and the call on the member, one call at a time and many in flight
//! (client and servers in this process; its own binary: the counting allocator counts every
//! thread's allocations, so no other test may run beside it).

use lowlat::{ClientConfig, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface::{self, LabClient, MINUS, NULL};
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// `calls` calls of NULL, MINUS and ECHO one after another, then as many kept 16 in flight.
fn calls(c: &LabClient, calls: usize) {
    let mut out = Vec::with_capacity(64);
    for i in 0..calls {
        match i % 3 {
            0 => c.null().unwrap(),
            1 => assert_eq!(c.minus(7, 5).unwrap(), 2),
            _ => c.echo(b"twelve bytes", &mut out).unwrap(),
        }
    }
    let (mut made, mut done) = (0, 0);
    let mut set = lowlat::InFlight::new(16);
    while done < calls {
        while made < calls && !set.is_full() {
            let proc = if made % 2 == 0 { NULL } else { MINUS };
            let _ = set.push(c.call_async(proc, &[], 0));
            made += 1;
        }
        done += set.wait(Some(std::time::Duration::from_secs(10)), |_, r| r.expect("a call in flight failed"));
    }
}

/// 1,500 calls over three servers allocate no more than 300 do (a table's growth at most),
/// where one allocation per call would make it thousands.
#[test]
fn calls_over_three_servers_do_not_allocate_per_call() {
    let dir = std::env::temp_dir().join(format!("lowlat-alloc-spread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm: Vec<String> = (0..3).map(|i| format!("shm://{}", dir.join(format!("s{i}")).display())).collect();
    for listens in [vec!["udp://127.0.0.1:0".to_string(); 3], shm] {
        // The servers block (three spinning servers and the client would share two CPUs); the
        // client busy-polls, as a call that parks registers in the reactor's tables.
        let config = ServerConfig { spin: SpinPolicy::Block, ..Default::default() };
        let servers: Vec<Server> = listens
            .iter()
            .map(|l| Server::builder().program(interface::program()).config(config.clone()).serve(&[l]).unwrap())
            .collect();
        let list = servers.iter().map(|s| s.local_uris()[0].clone()).collect::<Vec<_>>().join(",");
        let c =
            LabClient::connect(&list, ClientConfig { spin: SpinPolicy::Forever, ..ClientConfig::default() }).unwrap();
        calls(&c, 1_500);
        let ((), few) = ALLOC.count(|| calls(&c, 300));
        let ((), many) = ALLOC.count(|| calls(&c, 1_500));
        assert!(many <= few + 8, "{list}: {few} allocations in 300 calls, {many} in 1,500");
        for s in servers {
            s.shutdown();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
