//! `sbx-shell completions SHELL`: a completion script, from the command line's definition.

use clap::CommandFactory;

use crate::cli::exit::Failure;
use crate::cli::Cli;

pub fn main(shell: clap_complete::Shell) -> Result<u8, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sbx-shell", &mut script);
    super::write_stdout(&script)
}
