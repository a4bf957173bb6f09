//! The subcommands, one module each. `run` is what sbx-shell does without one: run the
//! program in the sandbox.

pub mod completions;
pub mod doctor;
pub mod explain;
pub mod home;
pub mod inputs;
pub mod log;
pub mod loginshell;
pub mod man;
mod messages;
pub mod run;
pub mod schema;
pub mod setup;
pub mod why;
