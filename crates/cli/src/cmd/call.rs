//! `lowlat call`: one call of a lab procedure, or (with --idl) of any procedure of a `.x`
//! interface with JSON in and out.

use std::time::Duration;

use lowlat::{ClientConfig, Psk, SpinPolicy};
use lowlat_lab::interface::{self, LabClient};

use crate::key::KeyArgs;

/// Make one call of a lab procedure and print the result; or, with --idl, of any procedure
/// of any interface, the argument and result as JSON (docs/json-mapping.md).
///
/// Procedures: null; minus A B; maxarg SIZE; maxresult N; echo TEXT; count; spin US (work on
/// the server's worker pool); block US (a sleep on the thread that received the call).
/// With --idl FILE.x: URI PROC [JSON], PROC as NAME, VERSION.NAME or PROGRAM.VERSION.NAME;
/// --list shows every program, version and procedure with its types.
#[derive(clap::Args)]
pub(crate) struct Args {
    #[arg(required_unless_present = "list")]
    uri: Option<String>,
    /// null, minus, maxarg, maxresult, echo, count, spin or block (or a procedure number); with
    /// --idl, a procedure of that interface.
    #[arg(required_unless_present = "list")]
    proc: Option<String>,
    args: Vec<String>,
    /// An interface definition (.x): call any of its procedures with a JSON argument.
    #[arg(long)]
    idl: Option<std::path::PathBuf>,
    /// With --idl: list the programs, versions and procedures, with their types.
    #[arg(long, requires = "idl")]
    list: bool,
    /// Deadline of the call in milliseconds.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    #[arg(long, default_value = "adaptive")]
    spin_us: SpinPolicy,
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { uri, proc, args, idl, list, timeout_ms, spin_us, key } = args;
    let psk = key.load()?;
    match idl {
        Some(idl) => {
            let cfg = ClientConfig {
                spin: spin_us,
                deadline: Duration::from_millis(timeout_ms),
                psk,
                encrypt: key.encrypt,
                ..ClientConfig::default()
            };
            let uri = if list { None } else { uri.as_deref() };
            lowlat_dynamic::cli::run(&idl, uri, proc.as_deref(), &args.join(" "), cfg).map(|out| print!("{out}"))
        }
        None => call_lab(
            uri.as_deref().unwrap_or_default(),
            proc.as_deref().unwrap_or_default(),
            &args,
            timeout_ms,
            spin_us,
            psk,
            key.encrypt,
        ),
    }
}

/// A procedure of the built-in lab interface, by name or number, its arguments given as words.
fn call_lab(
    uri: &str,
    proc: &str,
    args: &[String],
    timeout_ms: u64,
    spin: SpinPolicy,
    psk: Option<Psk>,
    encrypt: bool,
) -> Result<(), String> {
    let cfg =
        ClientConfig { spin, deadline: Duration::from_millis(timeout_ms), psk, encrypt, ..ClientConfig::default() };
    let p = interface::procedure_number(proc).ok_or_else(|| {
        format!("unknown procedure {proc:?}; expected null, minus, maxarg, maxresult, echo, count, spin or block")
    })?;
    let arg =
        |i: usize, what: &str| -> Result<&String, String> { args.get(i).ok_or_else(|| format!("{proc} needs {what}")) };
    let num = |i: usize, what: &str| -> Result<i64, String> {
        let a = arg(i, what)?;
        a.parse::<i64>().map_err(|_| format!("{what}: {a:?} is not a number"))
    };
    let c = LabClient::connect(uri, cfg).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match p {
        interface::NULL => {
            c.null().map_err(|e| e.to_string())?;
            println!("null: ok");
        }
        interface::MINUS => {
            let a = i32::try_from(num(0, "two integers A B")?).map_err(|_| "A does not fit in 32 bits")?;
            let b = i32::try_from(num(1, "two integers A B")?).map_err(|_| "B does not fit in 32 bits")?;
            println!("{}", c.minus(a, b).map_err(|e| e.to_string())?);
        }
        interface::MAXARG => {
            let n = usize::try_from(num(0, "a size in bytes")?).map_err(|_| "size must not be negative")?;
            c.maxarg(&vec![0x5a; n]).map_err(|e| e.to_string())?;
            println!("maxarg: sent {n} bytes");
        }
        interface::MAXRESULT => {
            let n = u32::try_from(num(0, "a size in bytes")?).map_err(|_| "size must be 0 to 4294967295")?;
            c.maxresult(n, &mut out).map_err(|e| e.to_string())?;
            println!("maxresult: received {} bytes", out.len());
        }
        interface::ECHO => {
            let text = args.join(" ");
            c.echo(text.as_bytes(), &mut out).map_err(|e| e.to_string())?;
            println!("{}", String::from_utf8_lossy(&out));
        }
        interface::COUNT => println!("{}", c.count().map_err(|e| e.to_string())?),
        interface::SPIN | interface::BLOCK => {
            let us = u32::try_from(num(0, "microseconds")?).map_err(|_| "microseconds must be 0 to 4294967295")?;
            let (name, done) = if p == interface::SPIN { ("spin", c.spin(us)) } else { ("block", c.block(us)) };
            done.map_err(|e| e.to_string())?;
            println!("{name}: {us} us");
        }
        other => {
            // A procedure the lab interface lacks: the server's answer tells the user so.
            let r: Result<(), _> = c.client().call(other, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(()));
            r.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
