//! Errors that point at the offending character: `file:line:column`, the line, and a caret.

use std::fmt;

/// A place in a source file (1-based line and column, columns counted in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub column: u32,
}

/// One problem in an interface definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name as given to the parser.
    pub file: String,
    /// Where the problem is.
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
    /// The text of the offending line (without its line break).
    pub line_text: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:{}:{}: error: {}", self.file, self.pos.line, self.pos.column, self.message)?;
        let gutter = self.pos.line.to_string();
        writeln!(f, "{gutter} | {}", self.line_text)?;
        // Tabs stay tabs so the caret lines up whatever the tab width.
        let lead: String = self
            .line_text
            .chars()
            .take(self.pos.column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{} | {lead}^", " ".repeat(gutter.len()))
    }
}

/// Why an interface definition could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum IdlError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path given.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The definition is malformed or inconsistent; each diagnostic names its position.
    #[error("{}", join(.0))]
    Invalid(Vec<Diagnostic>),
    /// The requested output language has no generator.
    #[error("no generator for language '{0}' (available: rust, c, wireshark)")]
    UnsupportedLanguage(String),
}

impl IdlError {
    /// The diagnostics, if the definition itself was at fault.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            IdlError::Invalid(d) => d,
            _ => &[],
        }
    }
}

fn join(d: &[Diagnostic]) -> String {
    d.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

/// The text being compiled, kept to quote lines in diagnostics.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name used in messages.
    pub name: String,
    /// The whole text.
    pub text: String,
}

impl Source {
    /// Wraps a text under a file name.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Source { name: name.into(), text: text.into() }
    }

    /// A diagnostic at `pos`.
    pub fn diag(&self, pos: Pos, message: impl Into<String>) -> Diagnostic {
        let line_text =
            self.text.lines().nth(pos.line.saturating_sub(1) as usize).unwrap_or("").trim_end_matches('\r').to_string();
        Diagnostic { file: self.name.clone(), pos, message: message.into(), line_text }
    }
}
