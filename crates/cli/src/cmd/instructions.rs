//! `lowlat instructions`: instructions per call, client and server apart, part by part.

use lowlat_lab::instructions;

/// Instructions per call of NULL and MINUS, client and server apart, part by part, counted by
/// callgrind (the same on any host for the same build, where times move with the clock).
///
/// Runs lowlat's counting build (the example `count_calls`, built with `cargo build --release
/// -p lowlat-lab --features callgrind --example count_calls`; found beside this executable in
/// `examples/`, or at $LOWLAT_COUNT_CALLS) under `valgrind --tool=callgrind`: the laboratory's
/// generated client calling its service in one process, both sides busy-polling. A look that
/// finds nothing (the waiting) is never counted; the client's count runs from the call to its
/// return, the server's from the look that finds the call to its reply out (and, shown apart,
/// on to its next look: the bookkeeping after the reply).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Transports, comma-separated: shm, udp, tcp, onc+udp, onc+tcp; eth and xdp as root, counted
    /// across a veth pair between two network namespaces made for the count and deleted after.
    #[arg(long, default_value = "shm,udp,tcp", value_delimiter = ',')]
    schemes: Vec<String>,
    /// Procedures, comma-separated: null, minus.
    #[arg(long, default_value = "null,minus", value_delimiter = ',')]
    procs: Vec<String>,
    /// Calls counted per transport and procedure (after a warm-up of as many, at most 100).
    #[arg(long, default_value_t = 400)]
    calls: u64,
    /// Also list the N costliest source files and functions of each side (per call), where a
    /// part's instructions come from.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Print one JSON object per transport: {"transport", "instructions": [...]} (the
    /// results.json `accounting` entry's `instructions`).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let bin = instructions::counting_binary(&exe);
    for scheme in &args.schemes {
        let mut counts = Vec::new();
        for p in &args.procs {
            counts.push(instructions::count(&bin, scheme, p, args.calls).map_err(|e| e.to_string())?);
            if let Some(n) = args.top {
                let (client, server) =
                    instructions::count_by_function(&bin, scheme, p, args.calls, instructions::Window::ToNextLook)
                        .map_err(|e| e.to_string())?;
                use instructions::Side;
                println!(
                    "{p} over {scheme}, client, per call:\n{}",
                    instructions::top(&client, Side::Client, args.calls, n)
                );
                println!(
                    "{p} over {scheme}, server, per call:\n{}",
                    instructions::top(&server, Side::Server, args.calls, n)
                );
            }
        }
        if args.json {
            let line = serde_json::json!({ "transport": scheme, "instructions": counts });
            println!("{line}");
        } else {
            println!("{}", instructions::table(scheme, &counts));
        }
    }
    Ok(())
}
