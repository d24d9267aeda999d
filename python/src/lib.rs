//! The `lowlat` Python package's extension module, `lowlat._lowlat`: clients and servers of any
//! `.x` interface with Python values, lowlat's benchmark and its results file.
//!
//! It is a thin layer over `lowlat-dynamic` (which interprets an interface's resolved model with
//! the generated code's codecs: no second type model here), the `lowlat` runtime, the lab's
//! benchmark and the report's results model; the Python mapping of values is in `values.rs`,
//! the exception classes in `lowlat/errors.py`. The GIL is released whenever lowlat waits: while
//! a call is in flight, while binding, while a benchmark runs, while a server stops.
//!
//! Nothing in the workspace depends on this crate; it must never be a dependency of the runtime
//! or of any crate a Rust program links.

mod client;
mod errors;
mod server;
mod values;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lowlat::SpinPolicy;
use lowlat_dynamic::{Interface, Selected};
use lowlat_lab::bench::{self as lab_bench, BenchSpec};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A program or version (or a spin policy) given by name or by number.
#[derive(FromPyObject)]
pub enum Choice {
    /// By number (a Python int).
    Number(u64),
    /// By name (a Python str), as the interface definition spells it.
    Name(String),
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Number(n) => write!(f, "{n}"),
            Choice::Name(s) => f.write_str(s),
        }
    }
}

/// Loads and checks `idl` and chooses the version to serve or call.
pub fn open_interface(
    py: Python<'_>,
    idl: &Path,
    program: Option<Choice>,
    version: Option<Choice>,
) -> PyResult<(Arc<Interface>, Selected)> {
    let chosen = Interface::load(idl).and_then(|i| {
        let v = i.select(program.map(|c| c.to_string()).as_deref(), version.map(|c| c.to_string()).as_deref())?;
        Ok((Arc::new(i), v))
    });
    chosen.map_err(|e| errors::dynamic_error(py, e))
}

/// Seconds from Python as a duration, refusing what is not one.
pub fn duration(seconds: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| PyValueError::new_err(format!("{what}: {seconds} is not a positive number of seconds")))
}

/// A JSON text as Python values, through Python's own `json` module.
fn from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// Runs `lowlat bench` against a server of the built-in lab interface (`lowlat serve URI`) and
/// returns what `lowlat bench --json` prints, as a dict. The calls are made by lowlat's Rust
/// client, with the GIL released: the figures are the Rust client's.
#[pyfunction]
#[pyo3(signature = (uri, proc="null", calls=10_000, size=0, *, threads=1, warmup=1_000, spin=None, deadline=10.0))]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "bench")]
fn run_bench<'py>(
    py: Python<'py>,
    uri: String,
    proc: &str,
    calls: u64,
    size: usize,
    threads: usize,
    warmup: u64,
    spin: Option<Choice>,
    deadline: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let spin = match spin {
        Some(s) => s.to_string().parse().map_err(|e| PyValueError::new_err(format!("spin: {e}")))?,
        None => SpinPolicy::Adaptive,
    };
    if lowlat_lab::interface::procedure_number(proc).is_none_or(|p| p > lowlat_lab::interface::ECHO) {
        return Err(PyValueError::new_err(format!(
            "unknown lab procedure {proc:?}; expected null, minus, maxarg, maxresult or echo"
        )));
    }
    if threads == 0 {
        return Err(PyValueError::new_err("threads: at least one"));
    }
    let spec = BenchSpec {
        uri,
        proc: proc.to_ascii_lowercase(),
        size,
        calls,
        warmup,
        threads,
        spin,
        deadline: duration(deadline, "deadline")?,
        ..BenchSpec::default()
    };
    let summary = py.detach(|| lab_bench::run(&spec)).map_err(|e| errors::call_error(py, e))?;
    from_json(py, &summary.to_json())
}

/// Reads a `results.json` written by `lowlat lab`, checked against lowlat's results model, as a
/// dict.
#[pyfunction]
fn load_results<'py>(py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let text = std::fs::read_to_string(&path)
        .map_err(|e| PyErr::from(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
    let results = lowlat_report::Results::from_json(&text)
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    from_json(py, &results.to_json())
}

#[pymodule]
fn _lowlat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<server::Server>()?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(load_results, m)?)?;
    m.add_function(wrap_pyfunction!(server::_stop_all_servers, m)?)?;
    Ok(())
}
