//! The Python mapping of `.x` types: the JSON mapping of docs/json-mapping.md with Python's own
//! values where JSON has none. Integers of every width are `int` (never strings), opaque data is
//! `bytes` (`bytearray` accepted), floats keep NaN and infinities, arrays are lists (tuples
//! accepted), structs and unions are dicts, `void` and absent optional data are `None`, enum
//! members are their names (`str`; their numbers, as `int`, are accepted).
//!
//! `bool` is a subclass of `int` in Python; lowlat keeps them apart as JSON does: `True` is no
//! `int` and `1` no `bool`.

use std::borrow::Cow;

use lowlat_dynamic::value::{Build, Entries, Given};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// A Python value given for a `.x` type.
pub struct PyValue<'py>(pub Bound<'py, PyAny>);

impl Given for PyValue<'_> {
    const BYTES: &'static str = "bytes";
    const LIST: &'static str = "a list";
    const RECORD: &'static str = "a dict";

    fn kind(&self) -> String {
        if self.0.is_none() {
            return "None".into();
        }
        match self.0.get_type().name() {
            Ok(n) => n.to_string(),
            Err(_) => "an object of unknown type".into(),
        }
    }

    fn is_null(&self) -> bool {
        self.0.is_none()
    }

    fn boolean(&self) -> Option<bool> {
        self.0.cast::<PyBool>().ok().map(|b| b.is_true())
    }

    fn integer(&self, what: &str, _wide: bool) -> Option<Result<i128, String>> {
        if self.0.is_instance_of::<PyBool>() {
            return None;
        }
        match self.0.extract::<i128>() {
            Ok(n) => Some(Ok(n)),
            // An int too large for 128 bits; anything else is not an integer at all.
            Err(_) if self.0.is_instance_of::<PyInt>() => Some(Err(format!("{} is out of range for {what}", self.0))),
            Err(_) => None,
        }
    }

    fn float(&self) -> Option<f64> {
        if self.0.is_instance_of::<PyBool>()
            || !(self.0.is_instance_of::<PyFloat>() || self.0.is_instance_of::<PyInt>())
        {
            return None;
        }
        self.0.extract::<f64>().ok()
    }

    fn text(&self) -> Option<Result<Cow<'_, str>, String>> {
        let s = self.0.cast::<PyString>().ok()?;
        Some(s.to_str().map(Cow::Borrowed).map_err(|e| format!("not valid Unicode: {e}")))
    }

    fn bytes(&self) -> Option<Result<Cow<'_, [u8]>, String>> {
        if let Ok(b) = self.0.cast::<PyBytes>() {
            return Some(Ok(Cow::Borrowed(b.as_bytes())));
        }
        let b = self.0.cast::<PyByteArray>().ok()?;
        Some(Ok(Cow::Owned(b.to_vec())))
    }

    fn elements(&self) -> Option<Result<Vec<Self>, String>> {
        if let Ok(l) = self.0.cast::<PyList>() {
            return Some(Ok(l.iter().map(PyValue).collect()));
        }
        let t = self.0.cast::<PyTuple>().ok()?;
        Some(Ok(t.iter().map(PyValue).collect()))
    }

    fn entries(&self) -> Option<Result<Entries<'_, Self>, String>> {
        let d = self.0.cast::<PyDict>().ok()?;
        Some(
            d.iter()
                .map(|(k, v)| match k.cast::<PyString>() {
                    Ok(s) => s.to_str().map(|s| (Cow::Owned(s.to_string()), PyValue(v))).map_err(|e| e.to_string()),
                    Err(_) => Err(format!("keys must be field names (str), got {}", PyValue(k).kind())),
                })
                .collect(),
        )
    }
}

/// Builds Python values.
pub struct PyBuild<'py>(pub Python<'py>);

fn host(e: PyErr) -> String {
    e.to_string()
}

impl<'py> Build for PyBuild<'py> {
    type Value = Bound<'py, PyAny>;

    fn null(&mut self) -> Self::Value {
        self.0.None().into_bound(self.0)
    }
    fn boolean(&mut self, v: bool) -> Self::Value {
        PyBool::new(self.0, v).to_owned().into_any()
    }
    fn int(&mut self, v: i64) -> Self::Value {
        PyInt::new(self.0, v).into_any()
    }
    fn hyper(&mut self, v: i64) -> Self::Value {
        PyInt::new(self.0, v).into_any()
    }
    fn uhyper(&mut self, v: u64) -> Self::Value {
        PyInt::new(self.0, v).into_any()
    }
    fn float(&mut self, v: f64) -> Self::Value {
        PyFloat::new(self.0, v).into_any()
    }
    fn name(&mut self, v: &str) -> Self::Value {
        PyString::intern(self.0, v).into_any()
    }
    fn text(&mut self, v: &str) -> Result<Self::Value, String> {
        Ok(PyString::new(self.0, v).into_any())
    }
    fn bytes(&mut self, v: &[u8]) -> Result<Self::Value, String> {
        Ok(PyBytes::new(self.0, v).into_any())
    }
    fn list(&mut self, items: Vec<Self::Value>) -> Result<Self::Value, String> {
        PyList::new(self.0, items).map(Bound::into_any).map_err(host)
    }
    fn record(&mut self, entries: Vec<(&str, Self::Value)>) -> Result<Self::Value, String> {
        let d = PyDict::new(self.0);
        for (k, v) in entries {
            d.set_item(PyString::intern(self.0, k), v).map_err(host)?;
        }
        Ok(d.into_any())
    }
}
