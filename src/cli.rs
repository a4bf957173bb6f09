//! The command line: clap types only. No I/O and no decisions here; `lib.rs` resolves these
//! raw arguments into a launch plan.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Whether the child gets a pseudo-terminal of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PtyMode {
    /// A pty only when stdin and stdout are both terminals.
    Auto,
    /// Always open a pty, even when stdin or stdout is a pipe or a file.
    Always,
    /// Never open a pty: the child runs on the inherited stdin, stdout and stderr.
    Never,
}

/// Run a shell or an agent TUI inside a sandbox, on a pseudo-terminal of its own.
#[derive(Debug, Parser)]
#[command(
    name = "sbx-shell",
    version,
    about = "Run a shell or an agent TUI on a pseudo-terminal of its own, supervised",
    after_help = include_str!("help_examples.txt"),
    override_usage = "sbx-shell [OPTIONS] [-- COMMAND [ARGS...]]\n       sbx-shell [OPTIONS] -c COMMAND_STRING [-- ARG0 [ARGS...]]"
)]
pub struct Cli {
    /// Run COMMAND_STRING with the shell, as `sh -c` does (sshd, su and tmux use this).
    #[arg(short = 'c', value_name = "COMMAND_STRING")]
    pub command_string: Option<OsString>,

    /// Start the shell as a login shell (also implied when argv[0] begins with '-').
    #[arg(short = 'l', long = "login")]
    pub login: bool,

    /// Start the shell as an interactive shell (passes -i to it).
    #[arg(short = 'i')]
    pub interactive: bool,

    /// The shell to run when no COMMAND is given [default: $SHELL, else the passwd entry,
    /// else /bin/sh, skipping sbx-shell itself].
    #[arg(long, value_name = "PATH")]
    pub shell: Option<PathBuf>,

    /// When to give the child a pseudo-terminal.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PtyMode::Auto)]
    pub pty: PtyMode,

    /// Arguments before `--`: accepted only as the shell's $0, $1 … after -c.
    #[arg(value_name = "ARG", hide = true)]
    pub stray: Vec<OsString>,

    /// The command to run, after `--` [default: the shell].
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn login_shell_flags_cluster_as_shells_accept_them() {
        let cli = Cli::try_parse_from(["sbx-shell", "-lc", "echo hi"]).unwrap();
        assert!(cli.login);
        assert_eq!(cli.command_string, Some("echo hi".into()));
    }

    #[test]
    fn the_command_follows_the_double_dash() {
        let cli =
            Cli::try_parse_from(["sbx-shell", "--pty", "never", "--", "vim", "-u", "x"]).unwrap();
        assert_eq!(cli.pty, PtyMode::Never);
        assert_eq!(cli.command, ["vim", "-u", "x"]);
        assert!(cli.stray.is_empty());
    }
}
