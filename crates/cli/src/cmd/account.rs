//! `lowlat account`: where the time of a null call goes, from servers it starts itself.

use lowlat::SpinPolicy;

/// Where the time of a null call goes, part by part, and whether the parts predict the whole.
///
/// Starts its own servers on this host at URI (port 0 picks a free port; a socket path gets
/// `.1`, `.2`, `.3` for the others), pinned when there are two CPUs: a traced one, a plain one
/// for the untraced call, lowlat's ping-pong server and, for shm:// and udp://, the machine's
/// floor. They are measured in turn, in 9 rounds (after one that warms them up), each server
/// suspended while the others run: the floor, the traced call, the untraced call and the
/// ping-pong, the in-process parts, the floor again. Each round's parts are set against its
/// own whole, and the model check is the median of the rounds; the untraced call is set against
/// the floor, layer by layer, over the rounds whose floor held still. Then the null call's
/// instructions on each side, part by part, where valgrind and lowlat's counting build are
/// there (see `lowlat instructions`).
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
