//! The host values the codec reads and builds: what a language's values must answer for the
//! codec to encode them ([`Given`]) and how it builds them from decoded data ([`Build`]).
//!
//! The walker over the model (`crate::codec`) is written once against these two traits; each
//! host has its own mapping of `.x` types: JSON (`crate::json`, docs/json-mapping.md) and Python
//! (the `lowlat` Python package). The hosts differ only where their values do: JSON writes
//! 64-bit integers as decimal strings and opaque data as base64, Python has big integers and
//! `bytes`.

use std::borrow::Cow;

/// A struct or union value's entries: (name, value).
pub type Entries<'v, V> = Vec<(Cow<'v, str>, V)>;

/// A host value given for a `.x` type. Each accessor answers `None` when the value is not of
/// that kind; the codec then reports "expected ..., got [`kind`](Given::kind)" with the path.
pub trait Given: Sized {
    /// What opaque data is in this host, for "expected ..." messages ("base64 text").
    const BYTES: &'static str;
    /// What arrays are in this host ("an array").
    const LIST: &'static str;
    /// What struct and union values are in this host ("an object").
    const RECORD: &'static str;

    /// The value's kind for error messages: "a string", "an object", "a float".
    fn kind(&self) -> String;

    /// Whether it is the host's null (`void`, absent optional data).
    fn is_null(&self) -> bool;

    /// `bool`.
    fn boolean(&self) -> Option<bool>;

    /// An integer for a type described by `what` ("an int"); `wide`: a 64-bit type (JSON also
    /// takes decimal strings for those). `Some(Err(reason))`: of an integer kind but unusable
    /// ("1.5 is not an integer (an int)").
    fn integer(&self, what: &str, wide: bool) -> Option<Result<i128, String>>;

    /// `float` and `double` (integers are accepted).
    fn float(&self) -> Option<f64>;

    /// `string` data and enumeration names. `Some(Err(reason))`: text that is not valid
    /// Unicode.
    fn text(&self) -> Option<Result<Cow<'_, str>, String>>;

    /// `opaque` data. `Some(Err(reason))`: of the right kind but unusable (bad base64).
    fn bytes(&self) -> Option<Result<Cow<'_, [u8]>, String>>;

    /// The elements of an array.
    fn elements(&self) -> Option<Result<Vec<Self>, String>>;

    /// The entries of a struct or union value, by name.
    fn entries(&self) -> Option<Result<Entries<'_, Self>, String>>;
}

/// Builds host values from decoded data. `Err` only when the host itself fails (it could not
/// allocate an object, say).
pub trait Build {
    /// The host's value.
    type Value;

    /// `void` and absent optional data.
    fn null(&mut self) -> Self::Value;
    /// `bool`.
    fn boolean(&mut self, v: bool) -> Self::Value;
    /// `int`, `unsigned int` and integer union discriminants.
    fn int(&mut self, v: i64) -> Self::Value;
    /// `hyper`.
    fn hyper(&mut self, v: i64) -> Self::Value;
    /// `unsigned hyper`.
    fn uhyper(&mut self, v: u64) -> Self::Value;
    /// `float` (widened) and `double`.
    fn float(&mut self, v: f64) -> Self::Value;
    /// An enumeration member, by name.
    fn name(&mut self, v: &str) -> Self::Value;
    /// `string`.
    fn text(&mut self, v: &str) -> Result<Self::Value, String>;
    /// `opaque`.
    fn bytes(&mut self, v: &[u8]) -> Result<Self::Value, String>;
    /// An array.
    fn list(&mut self, items: Vec<Self::Value>) -> Result<Self::Value, String>;
    /// A struct or union value: entries in declaration order.
    fn record(&mut self, entries: Vec<(&str, Self::Value)>) -> Result<Self::Value, String>;
}
