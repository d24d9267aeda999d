//! `lowlat.Server`: serves the procedures of a `.x` interface with Python functions.
//!
//! lowlat runs a procedure on the thread that received the call (one per endpoint), so a Python
//! procedure runs there too, after taking the GIL: while any other Python thread of the process
//! holds it, the call waits (up to the interpreter's switch interval, 5 ms by default, if that
//! thread is busy in Python code), and the procedures of one server run one at a time whatever
//! the number of endpoints. `long_running=True` sends a procedure to the server's worker pool
//! instead, so a slow one does not hold up the other callers of its endpoint.
//!
//! A procedure that raises (or whose arguments or result do not fit the interface) is logged on
//! the `lowlat` logger and answered as a server error; it never stops the server.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use lowlat::{OutBuf, ProcError, ServerConfig};
use lowlat_codec::ByteOrder;
use lowlat_dynamic::{DynamicHandler, Interface, Selected, Target};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};

use crate::errors::{call_error, dynamic_error};
use crate::values::{PyBuild, PyValue};
use crate::{open_interface, Choice};

/// A procedure registered with `@server.procedure(NAME)`.
struct Registered {
    target: Target,
    function: Py<PyAny>,
    long_running: bool,
}

/// A server of one version of one program of a `.x` interface.
#[pyclass(frozen, module = "lowlat")]
pub struct Server {
    iface: Arc<Interface>,
    version: Selected,
    procedures: Mutex<Vec<Registered>>,
    running: Mutex<Option<lowlat::Server>>,
}

/// Servers that are serving, stopped when the interpreter exits (their threads must not reach
/// for the GIL of an interpreter that is being torn down). A serving server stays alive here
/// even when the program holds no reference to it, as a running thread does.
static SERVING: Mutex<Vec<Py<Server>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data stays consistent even if a holder panicked: each critical section is one step.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops every server still serving (registered with `atexit` by the package).
#[pyfunction]
pub fn _stop_all_servers(py: Python<'_>) {
    let all = std::mem::take(&mut *lock(&SERVING));
    for s in all {
        s.get().shut_down(py);
    }
}

/// Logs a procedure's failure on the `lowlat` logger (with the exception and its traceback, if
/// one was raised); if logging itself fails, on standard error.
fn log_failure(py: Python<'_>, procedure: &str, what: &str, exception: Option<&PyErr>) {
    let logged = (|| -> PyResult<()> {
        let logger = py.import("logging")?.call_method1("getLogger", ("lowlat",))?;
        let kwargs = PyDict::new(py);
        if let Some(e) = exception {
            kwargs.set_item("exc_info", (e.get_type(py), e.value(py), e.traceback(py)))?;
        }
        logger.call_method("error", ("procedure %s: %s", procedure, what), Some(&kwargs))?;
        Ok(())
    })();
    if let Err(e) = logged {
        eprintln!("lowlat: procedure {procedure}: {what} (logging failed: {e})");
    }
}

/// One call of a Python procedure, on the serving thread, holding the GIL.
fn run(
    py: Python<'_>,
    iface: &Interface,
    p: &Registered,
    order: Option<ByteOrder>,
    args: &[u8],
    reply: &mut OutBuf<'_>,
) -> Result<(), ProcError> {
    let name = &p.target.proc.name;
    let values = iface.decode_args_with(&p.target, args, order, &mut PyBuild(py)).map_err(|e| {
        log_failure(py, name, &format!("the arguments could not be decoded: {e}"), None);
        ProcError::GarbageArgs
    })?;
    let failed = |what: String, e: Option<&PyErr>| {
        log_failure(py, name, &what, e);
        ProcError::SystemError
    };
    let values = PyTuple::new(py, values).map_err(|e| failed("building the arguments failed".into(), Some(&e)))?;
    let result = p.function.bind(py).call1(values).map_err(|e| failed("raised".into(), Some(&e)))?;
    let start = reply.len();
    iface.encode_result_into(&p.target, PyValue(result), reply, order).map_err(|e| {
        reply.truncate(start);
        failed(format!("its result does not fit the interface: {e}"), None)
    })
}

impl Server {
    fn register(&self, py: Python<'_>, name: &str, function: Py<PyAny>, long_running: bool) -> PyResult<()> {
        if lock(&self.running).is_some() {
            return Err(PyRuntimeError::new_err("register procedures before serve() (or after stop())"));
        }
        let target = self.version.find(name).map_err(|e| dynamic_error(py, e))?.clone();
        let mut procedures = lock(&self.procedures);
        procedures.retain(|p| p.target.proc.number != target.proc.number);
        procedures.push(Registered { target, function, long_running });
        Ok(())
    }

    /// What the serving thread runs for a call of `p`: take the GIL, then [`run`].
    fn handler(&self, py: Python<'_>, p: &Registered) -> (Target, Arc<DynamicHandler>, bool) {
        let iface = self.iface.clone();
        let p =
            Registered { target: p.target.clone(), function: p.function.clone_ref(py), long_running: p.long_running };
        let (target, long_running) = (p.target.clone(), p.long_running);
        let handler: Arc<DynamicHandler> =
            Arc::new(move |_ctx, order, args, reply| Python::attach(|py| run(py, &iface, &p, order, args, reply)));
        (target, handler, long_running)
    }

    fn shut_down(&self, py: Python<'_>) {
        let server = lock(&self.running).take();
        if let Some(s) = server {
            // The serving threads may be waiting for the GIL to run a procedure.
            py.detach(|| s.shutdown());
        }
    }
}

#[pymethods]
impl Server {
    #[new]
    #[pyo3(signature = (idl, program=None, version=None))]
    fn new(py: Python<'_>, idl: PathBuf, program: Option<Choice>, version: Option<Choice>) -> PyResult<Server> {
        let (iface, version) = open_interface(py, &idl, program, version)?;
        Ok(Server { iface, version, procedures: Mutex::new(Vec::new()), running: Mutex::new(None) })
    }

    /// A decorator registering the function as procedure `name` (case-insensitive): it takes
    /// the procedure's arguments (positionally) and returns its result (`None` for `void`).
    /// `long_running=True`: run it on the server's worker pool rather than on the thread that
    /// received the call.
    #[pyo3(signature = (name, *, long_running=false))]
    fn procedure<'py>(slf: Bound<'py, Self>, name: String, long_running: bool) -> PyResult<Bound<'py, PyCFunction>> {
        let py = slf.py();
        slf.get().version.find(&name).map_err(|e| dynamic_error(py, e))?;
        let server = slf.unbind();
        PyCFunction::new_closure(py, Some(c"register"), None, move |args, _kwargs| -> PyResult<Py<PyAny>> {
            let py = args.py();
            let function = args.get_item(0)?;
            server.get().register(py, &name, function.clone().unbind(), long_running)?;
            Ok(function.unbind())
        })
    }

    /// Serves the registered procedures on every URI (native bodies on lowlat's transports, XDR
    /// on `onc+udp://` and `onc+tcp://`) and returns the URIs served, with real ports where 0 was
    /// asked for. `register`: announce ONC RPC endpoints to this machine's rpcbind, if it runs.
    #[pyo3(signature = (uris, *, register=true))]
    fn serve(slf: Bound<'_, Self>, uris: Vec<String>, register: bool) -> PyResult<Vec<String>> {
        let py = slf.py();
        let this = slf.get();
        let already = || PyRuntimeError::new_err("already serving; stop() first");
        if this.serving() {
            return Err(already());
        }
        let handlers: Vec<(Target, Arc<DynamicHandler>, bool)> =
            lock(&this.procedures).iter().map(|p| this.handler(py, p)).collect();
        let [native, xdr] = this.iface.server_programs(this.version.program, this.version.version, &handlers);
        let config = ServerConfig { onc_register: register, ..ServerConfig::default() };
        // No lock is held while the GIL is released: a thread holding the GIL may be waiting
        // for it.
        let server = py
            .detach(|| lowlat::Server::builder().program(native).program(xdr).config(config).serve(&uris))
            .map_err(|e| call_error(py, e))?;
        let uris = server.local_uris();
        let mut running = lock(&this.running);
        if running.is_some() {
            drop(running);
            py.detach(|| server.shutdown());
            return Err(already());
        }
        *running = Some(server);
        drop(running);
        lock(&SERVING).push(slf.unbind());
        Ok(uris)
    }

    /// Stops serving (waiting for calls in progress); registering and serving again is allowed.
    fn stop(slf: Bound<'_, Self>) {
        let py = slf.py();
        slf.get().shut_down(py);
        lock(&SERVING).retain(|s| !s.is(&slf));
    }

    /// Whether the server is serving.
    #[getter]
    fn serving(&self) -> bool {
        lock(&self.running).is_some()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __exit__(slf: Bound<'_, Self>, _t: Bound<'_, PyAny>, _v: Bound<'_, PyAny>, _tb: Bound<'_, PyAny>) -> bool {
        Server::stop(slf);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.serving() { "serving" } else { "stopped" };
        format!("lowlat.Server({}, {state})", self.version.name)
    }
}
