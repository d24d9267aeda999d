//! The JSON Schema of `results.json` and a small validator for it.
//!
//! `docs/results.schema.json` is generated from the types in [`crate::model`] (their doc comments
//! become the descriptions) and checked in so that people and other tools can read it; a test
//! regenerates it and fails if the file is stale (`LOWLAT_BLESS=1` rewrites it).
//!
//! The validator implements the subset of JSON Schema 2020-12 that the generated schema uses and
//! refuses any other keyword, so a schema it accepts is checked completely rather than partly.

use serde_json::{Map, Value};

use crate::model::Results;

/// The checked-in schema, as people read it.
pub const SCHEMA_FILE: &str = include_str!("../../../docs/results.schema.json");

/// The schema generated from the current types, pretty-printed with a trailing newline.
pub fn generated_schema() -> String {
    let schema = schemars::schema_for!(Results);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema always serializes");
    text.push('\n');
    text
}

/// Why a document does not match the schema (or the schema cannot be used).
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema itself is not valid JSON.
    #[error("the schema is not valid JSON: {0}")]
    BadSchemaJson(#[from] serde_json::Error),
    /// The schema uses something this validator does not implement.
    #[error("schema at {at}: {what}")]
    Unsupported {
        /// JSON pointer into the schema.
        at: String,
        /// What was not understood.
        what: String,
    },
    /// The document breaks the schema; every violation found, one per line.
    #[error("results do not match the schema:\n{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

/// Checks a document against the checked-in schema.
pub fn validate(doc: &Value) -> Result<(), SchemaError> {
    let schema: Value = serde_json::from_str(SCHEMA_FILE)?;
    validate_against(&schema, doc)
}

/// Checks a document against a given schema (same supported subset).
pub fn validate_against(schema: &Value, doc: &Value) -> Result<(), SchemaError> {
    let mut v = Validator { root: schema, errors: Vec::new() };
    v.check(schema, "#", doc, "$", 0)?;
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(SchemaError::Invalid(v.errors))
    }
}

/// Keywords that only annotate: they never make a document invalid.
const ANNOTATIONS: &[&str] = &["$schema", "$id", "$defs", "title", "description", "default", "examples", "format"];

/// Deep enough for any document of this schema; deeper means a reference cycle.
const MAX_DEPTH: usize = 64;

struct Validator<'s> {
    root: &'s Value,
    errors: Vec<String>,
}

fn unsupported(at: &str, what: impl Into<String>) -> SchemaError {
    SchemaError::Unsupported { at: at.to_owned(), what: what.into() }
}

fn type_matches(name: &str, v: &Value) -> Option<bool> {
    Some(match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => return None,
    })
}

impl<'s> Validator<'s> {
    fn resolve(&self, reference: &str, at: &str) -> Result<&'s Value, SchemaError> {
        let pointer =
            reference.strip_prefix('#').ok_or_else(|| unsupported(at, format!("non-local $ref {reference}")))?;
        self.root.pointer(pointer).ok_or_else(|| unsupported(at, format!("$ref {reference} points nowhere")))
    }

    /// Checks `doc` (at JSON path `path`) against `schema` (at pointer `at`); violations go to
    /// `self.errors`, problems with the schema itself are returned.
    fn check(&mut self, schema: &'s Value, at: &str, doc: &Value, path: &str, depth: usize) -> Result<(), SchemaError> {
        if depth > MAX_DEPTH {
            return Err(unsupported(at, "references nest too deeply (a cycle?)"));
        }
        let obj: &'s Map<String, Value> = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                self.errors.push(format!("{path}: no value is allowed here"));
                return Ok(());
            }
            Value::Object(o) => o,
            _ => return Err(unsupported(at, "a schema must be an object or a boolean")),
        };
        for (key, value) in obj {
            let here = format!("{at}/{key}");
            match key.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$ref" => {
                    let r = value.as_str().ok_or_else(|| unsupported(&here, "$ref not a string"))?;
                    let target = self.resolve(r, &here)?;
                    self.check(target, r, doc, path, depth + 1)?;
                }
                "type" => self.check_type(value, &here, doc, path)?,
                "enum" => {
                    let options = value.as_array().ok_or_else(|| unsupported(&here, "enum not an array"))?;
                    if !options.contains(doc) {
                        self.errors.push(format!("{path}: {doc} is not one of {value}"));
                    }
                }
                "const" => {
                    if value != doc {
                        self.errors.push(format!("{path}: {doc} is not {value}"));
                    }
                }
                "minimum" | "maximum" => {
                    let bound = value.as_f64().ok_or_else(|| unsupported(&here, "bound not a number"))?;
                    if let Some(n) = doc.as_f64() {
                        let ok = if key == "minimum" { n >= bound } else { n <= bound };
                        if !ok {
                            self.errors.push(format!("{path}: {n} is out of range ({key} {bound})"));
                        }
                    }
                }
                "properties" | "required" | "additionalProperties" => {}
                "items" => {
                    if let Value::Array(items) = doc {
                        for (i, item) in items.iter().enumerate() {
                            self.check(value, &here, item, &format!("{path}[{i}]"), depth + 1)?;
                        }
                    }
                }
                "anyOf" | "oneOf" | "allOf" => self.check_combinator(key, value, &here, doc, path, depth)?,
                other => return Err(unsupported(&here, format!("keyword {other:?}"))),
            }
        }
        if let Value::Object(fields) = doc {
            self.check_object(obj, at, fields, path, depth)?;
        }
        Ok(())
    }

    fn check_type(&mut self, value: &Value, at: &str, doc: &Value, path: &str) -> Result<(), SchemaError> {
        let names: Vec<&str> = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a
                .iter()
                .map(|t| t.as_str().ok_or_else(|| unsupported(at, "type list holds a non-string")))
                .collect::<Result<_, _>>()?,
            _ => return Err(unsupported(at, "type must be a string or a list")),
        };
        let mut any = false;
        for name in &names {
            any |= type_matches(name, doc).ok_or_else(|| unsupported(at, format!("type {name}")))?;
        }
        if !any {
            self.errors.push(format!("{path}: {doc} is not of type {}", names.join(" or ")));
        }
        Ok(())
    }

    fn check_combinator(
        &mut self,
        key: &str,
        value: &'s Value,
        at: &str,
        doc: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let branches = value.as_array().ok_or_else(|| unsupported(at, "not a list of schemas"))?;
        let mut passed = 0;
        let mut reasons = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let mut sub = Validator { root: self.root, errors: Vec::new() };
            sub.check(branch, &format!("{at}/{i}"), doc, path, depth + 1)?;
            if sub.errors.is_empty() {
                passed += 1;
            } else {
                reasons.extend(sub.errors);
            }
        }
        let ok = match key {
            "anyOf" => passed > 0,
            "oneOf" => passed == 1,
            _ => passed == branches.len(),
        };
        if !ok {
            self.errors.push(format!(
                "{path}: {key} fails ({passed} of {} branches match): {}",
                branches.len(),
                reasons.join("; ")
            ));
        }
        Ok(())
    }

    fn check_object(
        &mut self,
        schema: &'s Map<String, Value>,
        at: &str,
        fields: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let props: Option<&'s Map<String, Value>> = match schema.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return Err(unsupported(at, "properties must be an object")),
        };
        if let Some(required) = schema.get("required") {
            let names = required.as_array().ok_or_else(|| unsupported(at, "required must be a list"))?;
            for name in names {
                let name = name.as_str().ok_or_else(|| unsupported(at, "required holds a non-string"))?;
                if !fields.contains_key(name) {
                    self.errors.push(format!("{path}: missing required field {name:?}"));
                }
            }
        }
        for (name, value) in fields {
            let child = format!("{path}.{name}");
            if let Some(sub) = props.and_then(|p| p.get(name)) {
                self.check(sub, &format!("{at}/properties/{name}"), value, &child, depth + 1)?;
            } else {
                match schema.get("additionalProperties") {
                    None | Some(Value::Bool(true)) => {}
                    Some(Value::Bool(false)) => {
                        self.errors.push(format!("{path}: unexpected field {name:?}"));
                    }
                    Some(extra) => {
                        self.check(extra, &format!("{at}/additionalProperties"), value, &child, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }
}
