//! One module per subcommand, each with its arguments (their doc comments are its help text) and
//! its `run`, which returns what to print on failure.

pub(crate) mod account;
pub(crate) mod agent;
pub(crate) mod bench;
pub(crate) mod call;
pub(crate) mod gen;
pub(crate) mod instructions;
pub(crate) mod lab;
pub(crate) mod pingpong;
pub(crate) mod relay;
pub(crate) mod serve;
pub(crate) mod stat;
pub(crate) mod workload;
