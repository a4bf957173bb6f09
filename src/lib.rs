//! sbx-shell: a PTY-wrapping terminal supervisor that runs shells and agent TUIs inside an
//! OS sandbox.
//!
//! This file is only the dispatch: the helper mode (the same binary re-executed inside the
//! sandbox, `helper`), or the command line parsed once and handed to its subcommand
//! (`cmd::*`; without one, `cmd::run`). Errors are printed here, once.

// Elsewhere than Linux the Linux layers' pure parts still compile (so that a Mac reviews
// and tests the same policy), but nothing calls them: dead code is judged on Linux, where
// everything runs.
#![cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]

mod cli;
pub mod cmd;
mod helper;
mod host;
mod netproxy;
mod policy;
mod protect;
mod sandbox;
mod session;
mod sys;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use cli::{Action, Cli};

/// The binary's entry point: helper mode, or parse and run; errors printed once, here.
pub fn main_entry() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == helper::spec::HELPER_ARG) {
        return helper::run(&args[2..]);
    }
    #[cfg(target_os = "linux")]
    if args
        .get(1)
        .is_some_and(|a| a == sandbox::container::COURIER_ARG)
    {
        return helper::container::courier(&args[2..]);
    }
    #[cfg(target_os = "linux")]
    if args
        .get(1)
        .is_some_and(|a| a == sandbox::container::ENTRY_ARG)
    {
        return helper::container::entry(&args[2..]);
    }
    if args
        .get(1)
        .is_some_and(|a| a == netproxy::connect::CONNECT_ARG)
    {
        return netproxy::connect::run(&args[2..]);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return clap_error(&e),
    };
    let login_arg0 = args
        .first()
        .is_some_and(|a| policy::launch::is_login_arg0(a));
    let outcome = match cli.action {
        Some(Action::Schema) => cmd::schema::main(),
        Some(Action::Doctor { json }) => cmd::doctor::main(json),
        Some(Action::Setup { check, yes }) => cmd::setup::main(check, yes),
        Some(Action::Explain(ref explain)) => cmd::explain::main(explain),
        Some(Action::Why(ref why)) => cmd::why::main(why),
        Some(Action::Log {
            count,
            json,
            follow,
        }) => match follow {
            true => cmd::log::follow(json),
            false => cmd::log::main(count, json),
        },
        Some(Action::LoginShell {
            ref shell,
            ref user,
            yes,
            print,
        }) => cmd::loginshell::main(shell.as_deref(), user.as_deref(), yes, print),
        Some(Action::Home {
            ref clear,
            clear_all,
        }) => cmd::home::main(clear.as_deref(), clear_all),
        Some(Action::Completions { shell }) => cmd::completions::main(shell),
        Some(Action::Man) => cmd::man::main(),
        None => cmd::run::main(cli, login_arg0),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            sys::say::error(&format!("{:#}", failure.error));
            ExitCode::from(failure.code)
        }
    }
}

/// clap's own message, a hint for what is not help or the version, and clap's exit code.
fn clap_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = e.print();
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let hint = "run `sbx-shell --help` for the options and examples";
        eprintln!("{}", crate::sys::say::hint_line(hint));
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}
