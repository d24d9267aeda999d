//! `lowlat workload` (hidden): the busy-server workload, run by `lowlat lab` on the server's CPU.

use std::time::Duration;

use crate::measure::pin;

/// The busy-server workload (a tiled matrix multiplication) for SECONDS; prints units done.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long)]
    cpu: Option<usize>,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { seconds, cpu } = args;
    pin(cpu)?;
    println!("ready");
    let (units, ns) = lowlat_lab::workload::run_for(Duration::from_secs_f64(seconds.max(0.01)));
    println!("{}", serde_json::json!({ "units": units, "ns_per_unit": ns }));
    Ok(())
}
