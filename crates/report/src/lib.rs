//! lowlat-report: the data model of `results.json` (with its JSON Schema) and `report.html`, the
//! self-contained page that presents it.
//!
//! `lowlat lab` (in `lowlat-lab`) fills a [`Results`], writes it with [`Results::to_json`], and
//! renders the page with [`render_html`]; the Python package reads results files with
//! [`Results::from_json`]; the command line's tests check a lab run's files against the
//! [`schema`] and look at the page through [`browser`]. This crate does no measuring and no I/O
//! beyond what callers ask of it; it must never depend on lowlat's runtime, transports or
//! laboratory (which depend on it), so the report can be rendered from a results file on any
//! machine.

#![warn(missing_docs)]

pub mod browser;
pub mod html;
pub mod machine;
pub mod model;
pub mod peers;
pub mod sample;
pub mod schema;
pub mod svg;

pub use html::render_html;
pub use model::*;

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// Not JSON, or not of the shape of [`Results`].
    #[error("results.json is not valid: {0}")]
    Json(#[from] serde_json::Error),
    /// Written by an incompatible version of lowlat.
    #[error("results.json has format version {found}; this build reads version {expected}")]
    Version {
        /// The file's version.
        found: u32,
        /// The version this build writes and reads.
        expected: u32,
    },
}

impl Results {
    /// The results as pretty-printed JSON, ending in a newline. A non-finite figure (NaN,
    /// infinity) becomes `null`, which the schema rejects for required figures: leave a figure
    /// out (`None`) rather than writing one that is not a number.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("results always serialize");
        s.push('\n');
        s
    }

    /// Reads results written by [`Results::to_json`].
    pub fn from_json(text: &str) -> Result<Results, ResultsError> {
        let r: Results = serde_json::from_str(text)?;
        if r.format_version != FORMAT_VERSION {
            return Err(ResultsError::Version { found: r.format_version, expected: FORMAT_VERSION });
        }
        Ok(r)
    }
}
