//! The JSON mapping of `.x` types (docs/json-mapping.md): 64-bit integers as decimal strings
//! (numbers accepted), opaque data as standard padded base64, non-finite floats as `null`.

use std::borrow::Cow;

use base64::Engine;
use serde_json::{Map, Number, Value as Json};

use crate::value::{Build, Entries, Given};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

impl Given for &Json {
    const BYTES: &'static str = "base64 text";
    const LIST: &'static str = "an array";
    const RECORD: &'static str = "an object";

    fn kind(&self) -> String {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
        .into()
    }

    fn is_null(&self) -> bool {
        Json::is_null(self)
    }

    fn boolean(&self) -> Option<bool> {
        self.as_bool()
    }

    fn integer(&self, what: &str, wide: bool) -> Option<Result<i128, String>> {
        match self {
            Json::Number(n) => Some(if let Some(i) = n.as_i64() {
                Ok(i as i128)
            } else if let Some(u) = n.as_u64() {
                Ok(u as i128)
            } else {
                Err(format!("{n} is not an integer ({what})"))
            }),
            Json::String(s) if wide => {
                Some(s.trim().parse::<i128>().map_err(|_| format!("{s:?} is not a decimal integer ({what})")))
            }
            _ => None,
        }
    }

    fn float(&self) -> Option<f64> {
        self.as_f64()
    }

    fn text(&self) -> Option<Result<Cow<'_, str>, String>> {
        self.as_str().map(|s| Ok(Cow::Borrowed(s)))
    }

    fn bytes(&self) -> Option<Result<Cow<'_, [u8]>, String>> {
        let s = self.as_str()?;
        Some(B64.decode(s).map(Cow::Owned).map_err(|e| format!("not standard padded base64: {e}")))
    }

    fn elements(&self) -> Option<Result<Vec<Self>, String>> {
        self.as_array().map(|a| Ok(a.iter().collect()))
    }

    fn entries(&self) -> Option<Result<Entries<'_, Self>, String>> {
        self.as_object().map(|o| Ok(o.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), v)).collect()))
    }
}

/// Builds JSON values.
pub struct JsonBuild;

impl Build for JsonBuild {
    type Value = Json;

    fn null(&mut self) -> Json {
        Json::Null
    }
    fn boolean(&mut self, v: bool) -> Json {
        Json::Bool(v)
    }
    fn int(&mut self, v: i64) -> Json {
        Json::from(v)
    }
    fn hyper(&mut self, v: i64) -> Json {
        Json::String(v.to_string())
    }
    fn uhyper(&mut self, v: u64) -> Json {
        Json::String(v.to_string())
    }
    fn float(&mut self, v: f64) -> Json {
        Number::from_f64(v).map_or(Json::Null, Json::Number)
    }
    fn name(&mut self, v: &str) -> Json {
        Json::String(v.to_string())
    }
    fn text(&mut self, v: &str) -> Result<Json, String> {
        Ok(Json::String(v.to_string()))
    }
    fn bytes(&mut self, v: &[u8]) -> Result<Json, String> {
        Ok(Json::String(B64.encode(v)))
    }
    fn list(&mut self, items: Vec<Json>) -> Result<Json, String> {
        Ok(Json::Array(items))
    }
    fn record(&mut self, entries: Vec<(&str, Json)>) -> Result<Json, String> {
        Ok(Json::Object(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>()))
    }
}
