//! The subcommands, one module each. `run` is what sbx-shell does without one: run the
//! program in the sandbox.

pub mod completions;
pub mod doctor;
pub mod explain;
pub mod home;
pub mod log;
pub mod loginshell;
pub mod man;
pub mod run;
pub mod schema;
pub mod setup;

use anyhow::anyhow;

use crate::cli::exit::Failure;

/// Write `bytes` to stdout; a reader that went away early (`| head`) is not an error.
fn write_stdout(bytes: &[u8]) -> Result<u8, Failure> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("cannot write to stdout: {e}").into())
        }
        _ => Ok(0),
    }
}
