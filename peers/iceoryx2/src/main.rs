//! The iceoryx2 peer: lowlat's null call and 1440-byte echo as iceoryx2 request-response between
//! two processes, both sides busy-waiting (no listener, no wake-ups), so it stands beside
//! lowlat's busy-polling shm:// in the lab's peers table.
//!
//! The command line is every peer's (peers/peer_common.h):
//!   iceoryx2_peer --serve ADDR [--cpu C]
//!   iceoryx2_peer --connect ADDR --calls N --size B [--warmup W] [--cpu C]
//! ADDR is `iox2://NAME`; the server offers two services under it: NAME/null (an 8-byte request
//! and response, the null call) and NAME/echo1440 (1440 bytes each way). Size 0 is the null call,
//! 1440 the echo; the client checks every answer and prints one JSON line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

/// The echo payload the peers section uses beside the null call.
const ECHO: usize = 1440;

struct Args {
    serve: Option<String>,
    connect: Option<String>,
    calls: usize,
    warmup: Option<usize>,
    size: usize,
    cpu: Option<usize>,
}

fn usage() -> String {
    "usage: iceoryx2_peer --serve iox2://NAME [--cpu C]\n       iceoryx2_peer --connect iox2://NAME --calls N --size 0|1440 [--warmup W] [--cpu C]".into()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { serve: None, connect: None, calls: 10_000, warmup: None, size: 0, cpu: None };
    let mut it = std::env::args().skip(1);
    while let Some(opt) = it.next() {
        if opt == "--help" || opt == "-h" {
            return Err(usage());
        }
        let val = it.next().ok_or_else(|| format!("{opt} needs a value\n{}", usage()))?;
        let count = |v: &str| v.parse::<usize>().map_err(|_| format!("{opt} wants a count, got {v}"));
        match opt.as_str() {
            "--serve" => a.serve = Some(val),
            "--connect" => a.connect = Some(val),
            "--calls" => {
                a.calls = count(&val)?;
                if a.calls == 0 {
                    return Err("--calls wants a positive count, got 0".into());
                }
            }
            "--warmup" => a.warmup = Some(count(&val)?),
            "--size" => a.size = count(&val)?,
            "--cpu" => a.cpu = Some(count(&val)?),
            _ => return Err(format!("unknown option {opt}\n{}", usage())),
        }
    }
    if a.serve.is_some() == a.connect.is_some() {
        return Err(format!("give exactly one of --serve and --connect\n{}", usage()));
    }
    if a.size != 0 && a.size != ECHO {
        return Err(format!("--size must be 0 (null call) or {ECHO} (echo), got {}", a.size));
    }
    Ok(a)
}

fn pin(cpu: Option<usize>) -> Result<(), String> {
    let Some(cpu) = cpu else { return Ok(()) };
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it; sched_setaffinity
    // reads `size_of` bytes of it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(format!("cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn service_name(addr: &str, which: &str) -> Result<ServiceName, String> {
    let name = addr.strip_prefix("iox2://").ok_or_else(|| format!("expected iox2://NAME, got {addr}"))?;
    ServiceName::new(&format!("{name}/{which}")).map_err(|e| format!("service name {name}/{which}: {e:?}"))
}

type Boxed = Box<dyn std::error::Error>;

fn serve(node: &Node<ipc::Service>, addr: &str) -> Result<(), Boxed> {
    let null = node
        .service_builder(&service_name(addr, "null")?)
        .request_response::<u64, u64>()
        .open_or_create()?
        .server_builder()
        .create()?;
    let echo = node
        .service_builder(&service_name(addr, "echo1440")?)
        .request_response::<[u8; ECHO], [u8; ECHO]>()
        .open_or_create()?
        .server_builder()
        .create()?;
    println!("ready");
    let mut idle = 0u32;
    loop {
        let mut served = false;
        if let Some(request) = null.receive()? {
            request.send_copy(*request)?;
            served = true;
        }
        if let Some(request) = echo.receive()? {
            request.send_copy(*request)?;
            served = true;
        }
        if served {
            idle = 0;
            continue;
        }
        std::hint::spin_loop();
        idle = idle.wrapping_add(1);
        // Now and then, see whether a termination signal asked us to stop.
        if idle & 4095 == 0 && node.wait(Duration::ZERO).is_err() {
            return Ok(());
        }
    }
}

/// Busy-waits for the answer to `pending` (at most five seconds) and returns it.
fn answer<T: std::fmt::Debug + ZeroCopySend + Copy>(
    pending: &iceoryx2::pending_response::PendingResponse<ipc::Service, T, (), T, ()>,
) -> Result<T, Boxed> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(response) = pending.receive()? {
            return Ok(*response);
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins & 4095 == 0 && start.elapsed() > Duration::from_secs(5) {
            return Err("no response within 5 s".into());
        }
    }
}

fn connect(node: &Node<ipc::Service>, a: &Args, addr: &str) -> Result<(), Boxed> {
    let warmup = a.warmup.unwrap_or((a.calls / 10).min(1000));
    let mut samples = Vec::with_capacity(a.calls);
    let mut began = Instant::now();
    if a.size == 0 {
        let client = node
            .service_builder(&service_name(addr, "null")?)
            .request_response::<u64, u64>()
            .open()?
            .client_builder()
            .create()?;
        for i in 0..warmup + a.calls {
            if i == warmup {
                began = Instant::now();
            }
            let t = Instant::now();
            let pending = client.send_copy(i as u64)?;
            let got = answer(&pending)?;
            let took = t.elapsed();
            if got != i as u64 {
                return Err(format!("call {i} answered {got}").into());
            }
            if i >= warmup {
                samples.push(took.as_nanos() as u64);
            }
        }
    } else {
        let client = node
            .service_builder(&service_name(addr, "echo1440")?)
            .request_response::<[u8; ECHO], [u8; ECHO]>()
            .open()?
            .client_builder()
            .create()?;
        let mut payload = [0u8; ECHO];
        for (k, b) in payload.iter_mut().enumerate() {
            *b = k as u8;
        }
        for i in 0..warmup + a.calls {
            if i == warmup {
                began = Instant::now();
            }
            payload[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let t = Instant::now();
            let pending = client.send_copy(payload)?;
            let got = answer(&pending)?;
            let took = t.elapsed();
            if got != payload {
                return Err(format!("echo {i} came back altered").into());
            }
            if i >= warmup {
                samples.push(took.as_nanos() as u64);
            }
        }
    }
    report(a, &mut samples, began.elapsed());
    Ok(())
}

/// The one JSON line every peer client prints (peer_common.h's `peer_report`).
fn report(a: &Args, samples: &mut [u64], elapsed: Duration) {
    samples.sort_unstable();
    let n = samples.len();
    let pct = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    let mean = samples.iter().sum::<u64>() as f64 / n as f64;
    println!(
        "{{\"kind\":\"rpc\",\"system\":\"iceoryx2\",\"transport\":\"shm\",\"proc\":\"{}\",\"size\":{},\"calls\":{n},\
         \"threads\":1,\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"max_ns\":{},\"mean_ns\":{mean:.1},\
         \"calls_per_s\":{:.1}}}",
        if a.size == 0 { "null" } else { "echo" },
        a.size,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(0.999),
        samples[n - 1],
        n as f64 / elapsed.as_secs_f64().max(1e-9),
    );
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("iceoryx2_peer: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = pin(a.cpu) {
        eprintln!("iceoryx2_peer: {e}");
        return ExitCode::FAILURE;
    }
    set_log_level(LogLevel::Error);
    let node = match NodeBuilder::new().create::<ipc::Service>() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("iceoryx2_peer: cannot create a node: {e:?}");
            return ExitCode::FAILURE;
        }
    };
    let r = match (&a.serve, &a.connect) {
        (Some(addr), _) => serve(&node, addr),
        (_, Some(addr)) => connect(&node, &a, addr),
        _ => unreachable!("checked by parse_args"),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iceoryx2_peer: {e}");
            ExitCode::FAILURE
        }
    }
}
