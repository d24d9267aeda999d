//! `lowlat.Client`: calls the procedures of a `.x` interface by name with Python values.
//!
//! A call encodes its argument while holding the GIL, releases the GIL for the exchange itself
//! (encoded bytes in, result body copied out: the slot's buffers are touched only there), and
//! takes it back to build the result. Threads share one client: calls proceed in parallel on
//! separate slots, as from Rust.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use lowlat::{CallOptions, ClientConfig, SpinPolicy};
use lowlat_dynamic::{Interface, Selected, Target};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (uri, idl, program=None, version=None, deadline=None, spin=None, psk_file=None, encrypt=false))]
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
        let (program, number) = (version.program, version.version);
        let client =
            py.detach(|| lowlat::Client::connect_with(uri, program, number, cfg)).map_err(|e| call_error(py, e))?;
        let by_name = version.procedures.iter().enumerate().map(|(i, t)| (t.proc.name.clone(), i)).collect();
        Ok(Client { iface, version, by_name, client })
    }

    /// Calls procedure `proc` (its name, case-insensitive) with `arg`: nothing for a procedure
    /// without arguments, the value for one argument, a list in order or a dict by name for
    /// several. Returns the result (`None` for `void`). `deadline` (seconds) overrides the
    /// client's for this call.
    #[pyo3(signature = (proc, arg=None, *, deadline=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        proc: &str,
        arg: Option<Bound<'py, PyAny>>,
        deadline: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = self.target(proc).map_err(|e| dynamic_error(py, e))?;
        let order = lowlat_dynamic::body_order(&self.client);
        let args = match arg {
            None if t.proc.args.is_empty() => Vec::new(),
            arg => {
                let arg = PyValue(arg.unwrap_or_else(|| py.None().into_bound(py)));
                self.iface.encode_args(t, arg, order).map_err(|e| dynamic_error(py, e))?
            }
        };
        let options = match deadline {
            Some(d) => CallOptions::new().deadline(duration(d, "deadline")?),
            None => CallOptions::new(),
        };
        let mut result = Vec::new();
        py.detach(|| {
            self.client.call_with(
                t.proc.number,
                &options,
                |b| {
                    b.extend_from_slice(&args);
                    Ok::<_, Infallible>(())
                },
                |body| {
                    result.extend_from_slice(body);
                    Ok(())
                },
            )
        })
        .map_err(|e| call_error(py, e))?;
        self.iface.decode_result_with(t, &result, order, &mut PyBuild(py)).map_err(|e| dynamic_error(py, e))
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
