//! `lowlat account`: where the time of a null call goes, from servers it starts itself.

use lowlat::SpinPolicy;

/// Where the time of a null call goes, part by part, and whether the parts predict the whole.
///
/// Starts its own servers on this host at URI, one after the other (port 0 picks a free
/// port), pinned when there are two CPUs: a traced one, a plain one for the untraced call,
/// lowlat's ping-pong server and, for shm:// and udp://, the machine's floor, which the
/// untraced call is then set against, layer by layer. The floor is measured before and
/// after the untraced call and the ping-pong; while the two disagree (a virtual machine's
/// host moved its CPUs) the three are measured again, up to three times, and then no
/// comparison is made. Then the null call's instructions on each side, part by part, where
/// valgrind and lowlat's counting build are there (see `lowlat instructions`).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Transport and address to serve on, e.g. udp://127.0.0.1:0, tcp://127.0.0.1:0, shm:///tmp/acct.sock
    uri: String,
    #[arg(long, default_value_t = 20_000)]
    calls: u64,
    #[arg(long, default_value = "adaptive")]
    spin_us: SpinPolicy,
    /// Print the accounting as JSON (the results.json `accounting` entry).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { uri, calls, spin_us, json } = args;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let (a, client_send, server_send) =
        lowlat_lab::account::account(&exe, &uri, calls, spin_us, &lowlat_lab::ladder::Placement::detect(), true)?;
    if json {
        println!("{}", serde_json::to_string(&a).expect("plain data"));
    } else {
        print!("{}", lowlat_lab::account::table(&a, client_send, server_send));
    }
    Ok(())
}
