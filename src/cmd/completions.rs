//! `sbx-shell completions SHELL`: a completion script, from the command line's definition.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::sys::exit::Failure;

pub fn main(shell: clap_complete::Shell) -> Result<u8, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sbx-shell", &mut script);
    crate::sys::say::write_stdout(&script)
}
