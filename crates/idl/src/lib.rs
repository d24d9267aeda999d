//! The ONC RPC language (RFC 5531 §12, RFC 4506 §6): parser, checker and code generators.
//!
//! Pure: reads text, returns text. Never depends on the runtime or on any I/O beyond reading files.
