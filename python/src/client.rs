//! `lowlat.Client`: calls the procedures of a `.x` interface by name with Python values.
//!
//! A call encodes its argument while holding the GIL, releases the GIL for the exchange itself
//! (encoded bytes in, result body copied out: the slot's buffers are touched only there), and
//! takes it back to build the result. Threads share one client: calls proceed in parallel on
//! separate slots, as from Rust. `call_many` does the same for a list of calls at once: every
//! argument encoded, then all the calls in flight together (lowlat's async calls, each sent as
//! it is made, collected by `lowlat::wait_all` on this thread with the GIL released), then every
//! result decoded, in order.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use lowlat::{CallOptions, ClientConfig, SpinPolicy};
use lowlat_dynamic::{Interface, Selected, Target};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::errors::{call_error, dynamic_error};
use crate::values::{PyBuild, PyValue};
use crate::{duration, open_interface, Choice};

/// A binding to one version of one program of a `.x` interface at one endpoint.
#[pyclass(frozen, module = "lowlat")]
pub struct Client {
    iface: Arc<Interface>,
    version: Selected,
    /// Procedures by their exact names (other spellings go through `Selected::find`).
    by_name: HashMap<String, usize>,
    client: lowlat::Client,
}

impl Client {
    fn target(&self, name: &str) -> Result<&Target, lowlat_dynamic::Error> {
        match self.by_name.get(name) {
            Some(&i) => Ok(&self.version.procedures[i]),
            None => self.version.find(name),
        }
    }

    /// The procedure named `proc` and its argument `arg` encoded.
    fn encode<'py>(&self, py: Python<'py>, proc: &str, arg: Option<Bound<'py, PyAny>>) -> PyResult<(&Target, Vec<u8>)> {
        let t = self.target(proc).map_err(|e| dynamic_error(py, e))?;
        let order = lowlat_dynamic::body_order(&self.client);
        let args = match arg {
            None if t.proc.args.is_empty() => Vec::new(),
            arg => {
                let arg = PyValue(arg.unwrap_or_else(|| py.None().into_bound(py)));
                self.iface.encode_args(t, arg, order).map_err(|e| dynamic_error(py, e))?
            }
        };
        Ok((t, args))
    }

    /// The result of a call of `t`: its body decoded, or the call's error.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        t: &Target,
        body: Result<Vec<u8>, lowlat::Error>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body = body.map_err(|e| call_error(py, e))?;
        let order = lowlat_dynamic::body_order(&self.client);
        self.iface.decode_result_with(t, &body, order, &mut PyBuild(py)).map_err(|e| dynamic_error(py, e))
    }
}

/// A call's options: `deadline` seconds, else the client's; `idempotent`, whether a client over
/// several servers may send the call to another after it may have run on one.
fn options(deadline: Option<f64>, idempotent: Option<bool>) -> PyResult<CallOptions> {
    let o = match deadline {
        Some(d) => CallOptions::new().deadline(duration(d, "deadline")?),
        None => CallOptions::new(),
    };
    Ok(match idempotent {
        Some(i) => o.idempotent(i),
        None => o,
    })
}

/// One item of `call_many`'s list: `(proc, arg)`, `(proc,)` or `proc`.
fn call_item<'py>(item: &Bound<'py, PyAny>) -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
    if let Ok(name) = item.cast::<PyString>() {
        return Ok((name.to_str()?.to_string(), None));
    }
    if let Ok((name,)) = item.extract::<(String,)>() {
        return Ok((name, None));
    }
    let (name, arg) = item.extract::<(String, Bound<'py, PyAny>)>().map_err(|_| {
        PyTypeError::new_err(format!("call_many: each call is (proc, arg), (proc,) or proc, not {item}"))
    })?;
    Ok((name, Some(arg)))
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (uri, idl, program=None, version=None, deadline=None, spin=None, psk_file=None, encrypt=false, slots=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        uri: &str,
        idl: PathBuf,
        program: Option<Choice>,
        version: Option<Choice>,
        deadline: Option<f64>,
        spin: Option<Choice>,
        psk_file: Option<PathBuf>,
        encrypt: bool,
        slots: Option<u16>,
    ) -> PyResult<Client> {
        let (iface, version) = open_interface(py, &idl, program, version)?;
        let mut cfg = ClientConfig::default();
        if let Some(d) = deadline {
            cfg.deadline = duration(d, "deadline")?;
        }
        if let Some(s) = spin {
            cfg.spin = s.to_string().parse::<SpinPolicy>().map_err(|e| PyValueError::new_err(format!("spin: {e}")))?;
        }
        if let Some(path) = psk_file {
            cfg.psk = Some(lowlat::read_psk_file(path).map_err(|e| call_error(py, e))?);
        }
        cfg.encrypt = encrypt;
        if let Some(n) = slots {
            if n == 0 {
                return Err(PyValueError::new_err("slots: at least 1"));
            }
            cfg.slots = n;
        }
        let (program, number) = (version.program, version.version);
        let client =
            py.detach(|| lowlat::Client::connect_with(uri, program, number, cfg)).map_err(|e| call_error(py, e))?;
        let by_name = version.procedures.iter().enumerate().map(|(i, t)| (t.proc.name.clone(), i)).collect();
        Ok(Client { iface, version, by_name, client })
    }

    /// Calls procedure `proc` (its name, case-insensitive) with `arg`: nothing for a procedure
    /// without arguments, the value for one argument, a list in order or a dict by name for
    /// several. Returns the result (`None` for `void`). `deadline` (seconds) overrides the
    /// client's for this call. `idempotent=True`: a client over several servers (a URI listing
    /// them) may send the call to another server after it may have run on one (a call that
    /// certainly did not run goes to the next server in any case).
    #[pyo3(signature = (proc, arg=None, *, deadline=None, idempotent=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        proc: &str,
        arg: Option<Bound<'py, PyAny>>,
        deadline: Option<f64>,
        idempotent: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (t, args) = self.encode(py, proc, arg)?;
        let options = options(deadline, idempotent)?;
        let result = py.detach(|| {
            self.client.call_with(
                t.proc.number,
                &options,
                |b| {
                    b.extend_from_slice(&args);
                    Ok::<_, Infallible>(())
                },
                |body| Ok(body.to_vec()),
            )
        });
        self.decode(py, t, result)
    }

    /// Makes every call of `calls` at once and returns their results in order: each call is
    /// `(proc, arg)` (as `call` takes them), `(proc,)` or `proc` for a procedure without
    /// arguments. All are in flight together, up to the client's `slots` (the rest are sent as
    /// slots free), and the GIL is released while they run. A call that fails has its exception
    /// (a `lowlat.Error`) in its place in the list, not raised: the other calls' results stand.
    /// An item of another shape raises `TypeError` before any call is sent. `deadline`
    /// (seconds) overrides the client's for each call.
    #[pyo3(signature = (calls, *, deadline=None))]
    fn call_many<'py>(
        &self,
        py: Python<'py>,
        calls: Vec<Bound<'py, PyAny>>,
        deadline: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let options = options(deadline, None)?;
        // A malformed item is the program's mistake: raised before anything is sent.
        let items = calls.iter().map(call_item).collect::<PyResult<Vec<_>>>()?;
        // Encoded with the GIL held; a call that cannot be made keeps its error for its place.
        let prepared: Vec<Result<(&Target, Vec<u8>), PyErr>> =
            items.into_iter().map(|(proc, arg)| self.encode(py, &proc, arg)).collect();
        let sendable = || prepared.iter().filter_map(|p| p.as_ref().ok());
        let mut replies = py
            .detach(|| {
                lowlat::wait_all(sendable().map(|(t, args)| {
                    self.client.call_with_async(
                        t.proc.number,
                        &options,
                        move |b| {
                            b.extend_from_slice(args);
                            Ok::<_, Infallible>(())
                        },
                        |body| Ok(body.to_vec()),
                    )
                }))
            })
            .into_iter();
        let results = PyList::empty(py);
        for p in prepared {
            let made = p.and_then(|(t, _)| {
                let reply = replies.next().expect("a reply per call sent");
                self.decode(py, t, reply)
            });
            match made {
                Ok(v) => results.append(v)?,
                Err(e) => results.append(e.into_value(py))?,
            }
        }
        Ok(results)
    }

    /// The endpoint this client is bound to.
    #[getter]
    fn uri(&self) -> &str {
        self.client.uri()
    }

    /// The names of the procedures this client can call.
    #[getter]
    fn procedures(&self) -> Vec<String> {
        self.version.procedures.iter().map(|t| t.proc.name.clone()).collect()
    }

    fn __repr__(&self) -> String {
        format!("lowlat.Client({:?}, {})", self.client.uri(), self.version.name)
    }
}
