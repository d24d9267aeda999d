//! `lowlat call --idl FILE.x ...`: the command-line face of the dynamic client.

use std::path::Path;

use lowlat::{Client, ClientConfig};
use serde_json::Value as Json;

use crate::Interface;

/// Lists the interface (no `uri`), or calls `proc` at `uri` with `json` (empty: `null`).
/// Returns what to print: the listing, or the result as pretty JSON and a newline.
pub fn run(idl: &Path, uri: Option<&str>, proc: Option<&str>, json: &str, cfg: ClientConfig) -> Result<String, String> {
    let i = Interface::load(idl).map_err(|e| e.to_string())?;
    let Some(uri) = uri else {
        return Ok(i.listing());
    };
    let proc = proc.ok_or("which procedure? (see --list)")?;
    let t = i.find(proc).map_err(|e| e.to_string())?;
    let arg: Json = if json.trim().is_empty() {
        Json::Null
    } else {
        serde_json::from_str(json).map_err(|e| format!("the argument is not JSON: {e}"))?
    };
    let c = Client::connect_with(uri, t.program, t.version, cfg).map_err(|e| e.to_string())?;
    // Its errors name the procedure as the interface does.
    let c = c.name_procedures(&[(t.proc.number, t.proc.name.as_str())]);
    let r = i.call(&c, &t, &arg).map_err(|e| e.to_string())?;
    Ok(format!("{}\n", serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?))
}
