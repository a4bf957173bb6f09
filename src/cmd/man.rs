//! `sbx-shell man`: the man page, from the command line's definition.

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::sys::exit::Failure;

pub fn main() -> Result<u8, Failure> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .context("cannot render the man page")?;
    crate::sys::say::write_stdout(&page)
}
