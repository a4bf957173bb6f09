//! The command line: clap types only. No I/O and no decisions here; `lib.rs` resolves these
//! raw arguments into a launch plan.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
/// `--version`: the version and the sandbox backends built into this binary.
pub const VERSION: &str = if cfg!(target_os = "linux") {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (backends: bwrap with landlock and seccomp, landlock with seccomp, docker or podman with landlock and seccomp inside, none)"
    )
} else if cfg!(target_os = "macos") {
    concat!(env!("CARGO_PKG_VERSION"), " (backends: seatbelt, none)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (backends: none)")
};

#[derive(Debug, Parser)]
#[command(
    name = "sbx-shell",
    version = VERSION,
    about = "Run a shell or an agent TUI on a pseudo-terminal of its own, supervised",
    after_help = include_str!("help_examples.txt"),
    override_usage = "sbx-shell [OPTIONS] [-- COMMAND [ARGS...]]\n       sbx-shell [OPTIONS] -c COMMAND_STRING [-- ARG0 [ARGS...]]\n       sbx-shell explain|why|doctor|setup|login-shell|schema|log|home|completions|man [OPTIONS]",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub action: Option<Action>,

    #[command(flatten)]
    pub policy: PolicyArgs,

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

    /// With a network allow-list: the proxy connects HOST to ADDR instead of resolving it,
    /// like curl's --resolve (repeatable; for private setups and tests).
    #[arg(long = "resolve", value_name = "HOST:ADDR")]
    pub resolve: Vec<String>,

    /// Make the program's server on PORT reachable at this machine's localhost:HOSTPORT
    /// (same port when HOSTPORT is left out; repeatable). Loopback only.
    #[arg(long = "publish", short = 'p', value_name = "[HOSTPORT:]PORT")]
    pub publish: Vec<String>,

    /// Say nothing but errors and warnings (no network summary at the end).
    #[arg(short = 'q', long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Say which profile, backend and layers run, and where the proxy and the logs are.
    #[arg(short = 'v', long)]
    pub verbose: bool,

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

impl Cli {
    /// How much the run says (`-q`, `-v`).
    pub fn verbosity(&self) -> crate::sys::say::Verbosity {
        crate::sys::say::Verbosity {
            quiet: self.quiet,
            verbose: self.verbose,
        }
    }
}

/// Commands other than running a program.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Show the policy that the options, the user config and the profile resolve to.
    Explain(Box<ExplainArgs>),
    /// Print the JSON Schema of config files and profiles.
    Schema,
    /// Check which sandbox backends can run on this machine, and why not.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Install what this machine lacks for the strongest sandbox (bubblewrap; on Ubuntu,
    /// an AppArmor profile for it), with your consent and sudo; then run doctor again.
    Setup {
        /// Only report what is missing and what setup would do (exit 1 when anything is).
        #[arg(long)]
        check: bool,
        /// Do not ask before installing.
        #[arg(long)]
        yes: bool,
    },
    /// Make sbx-shell the login shell: record the real shell in the user config, make
    /// sure /etc/shells lists sbx-shell, and run chsh (each step shown, with your consent).
    LoginShell {
        /// The real shell sbx-shell runs (default: $SHELL, else the passwd entry's, unless
        /// either is sbx-shell already).
        #[arg(long, value_name = "PATH")]
        shell: Option<PathBuf>,
        /// Set it up for this account instead of your own (root only).
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
        /// Do not ask before changing anything.
        #[arg(long)]
        yes: bool,
        /// Only print the steps.
        #[arg(long, conflicts_with = "yes")]
        print: bool,
    },
    /// Say whether the sandbox allows a path, host, variable or host socket, the rule that
    /// decides it, where the rule comes from, and the option that changes it (exit 1 when
    /// refused).
    Why(Box<WhyArgs>),
    /// Show the recent sessions from the session log.
    Log {
        /// How many sessions, newest last.
        #[arg(short = 'n', long, default_value_t = 20, value_name = "N")]
        count: usize,
        /// Print the log's JSON lines as they are.
        #[arg(long)]
        json: bool,
        /// Show what the sandbox refuses in the running sessions, as it happens, until
        /// interrupted (each refused path, host or variable once, with the option that
        /// allows it).
        #[arg(short = 'f', long, conflicts_with = "count")]
        follow: bool,
    },
    /// List the private homes (history, viminfo, caches kept between sessions, one per
    /// profile), or empty one with --clear.
    Home {
        /// Empty this profile's private home (a name, as --profile takes it).
        #[arg(long, value_name = "PROFILE", conflicts_with = "clear_all")]
        clear: Option<String>,
        /// Empty every profile's private home.
        #[arg(long = "clear-all")]
        clear_all: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), made from this command line's definition.
    Man,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,

    /// Print JSON instead of text (with every backend in full).
    #[arg(long)]
    pub json: bool,

    /// Show in full what this backend would run, whatever the platform.
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub show: Option<ExplainBackend>,

    /// The command it would run (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct WhyArgs {
    /// A path (~/.ssh/id_ed25519, ./build), a host (registry.npmjs.org, example.com:8443),
    /// a variable (GH_TOKEN) or a host socket ("$SSH_AUTH_SOCK").
    #[arg(value_name = "PATH|HOST|VARIABLE|SOCKET")]
    pub subject: String,

    #[command(flatten)]
    pub policy: PolicyArgs,

    /// What SUBJECT is, when its spelling does not say.
    #[arg(long = "as", value_enum, value_name = "WHAT")]
    pub what: Option<WhyKind>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// The command a run would start (after `--`): its agent profile applies.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// What `why` is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WhyKind {
    Path,
    Host,
    Variable,
    Socket,
}

/// A backend whose output `explain` can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainBackend {
    /// macOS: the SBPL profile and its parameters.
    Seatbelt,
    /// Linux: the bubblewrap argv.
    Bwrap,
    /// Linux: the Landlock and seccomp rules.
    Landlock,
    /// Linux: the Docker client's argv (the rules inside are Landlock alone's).
    Docker,
    /// Linux: the Podman client's argv (the rules inside are Landlock alone's).
    Podman,
}

/// The sandbox policy, on top of the user config and the profile.
#[derive(Debug, Default, Clone, Args)]
pub struct PolicyArgs {
    /// A shipped profile (shell, read-only, claude, gemini, codex, opencode), one of yours in
    /// ~/.config/sbx-shell/profiles, or a path to a JSON file [default: shell].
    #[arg(long, value_name = "NAME|PATH")]
    pub profile: Option<String>,

    /// The workspace [default: the current directory].
    #[arg(long, value_name = "PATH")]
    pub workspace: Option<PathBuf>,

    /// Make PATH writable too (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<String>,

    /// Make PATH readable too (repeatable).
    #[arg(long = "read", value_name = "PATH")]
    pub read: Vec<String>,

    /// Make PATH neither readable nor writable (repeatable).
    #[arg(long = "deny", value_name = "PATH")]
    pub deny: Vec<String>,

    /// Network: none, full, or allow=DOMAIN,DOMAIN… (e.g. allow=api.example.com,*.example.org);
    /// repeatable: allow-lists add up, to the profile's too; none or full replaces.
    #[arg(long, value_name = "none|full|allow=DOMAINS")]
    pub net: Vec<String>,

    /// Pass on the environment variable NAME although it looks secret or names a hidden
    /// socket (repeatable).
    #[arg(long = "allow-env", value_name = "NAME")]
    pub allow_env: Vec<String>,

    /// Give requests to HOST the credential in the variable VAR, added by sbx-shell's proxy:
    /// the program sees a placeholder in VAR, and HTTPS requests to those hosts only carry
    /// the real value in its place in their headers (repeatable; the hosts join the
    /// allow-list).
    #[arg(long = "credential", value_name = "VAR@HOST[,HOST…]")]
    pub credential: Vec<String>,

    /// Let the program write KEY into the config of a git repository in a writable tree,
    /// besides the keys ordinary git work writes (repeatable): section.name or
    /// section.subsection.name, * for any subsection or name (filter.lfs.*, core.pager).
    #[arg(long = "allow-git-config", value_name = "KEY")]
    pub allow_git_config: Vec<String>,

    /// Let the program's ssh and git use the key (a public key file or SHA256:…
    /// fingerprint) from your ssh agent, through a filtered agent of sbx-shell's; @HOST,…
    /// limits the hosts it may log in to (repeatable). Your agent stays out of reach.
    #[arg(long = "ssh-key", value_name = "PUBKEY_OR_FINGERPRINT[@HOST,…]")]
    pub ssh_key: Vec<String>,

    /// Let the --ssh-key keys sign git commits and tags (ssh-keygen -Y sign -n git).
    #[arg(long)]
    pub ssh_sign_commits: bool,

    /// Ask on your terminal before each signature the program asks of the --ssh-key keys.
    #[arg(long)]
    pub ssh_confirm: bool,

    /// Let the program connect to the host's unix socket at PATH, or to those in the
    /// directory PATH (repeatable); every other host socket is hidden.
    #[arg(long = "allow-socket", value_name = "PATH")]
    pub allow_socket: Vec<String>,

    /// The terminal clipboard (OSC 52): none (the default), write, or read-write.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub clipboard: Option<crate::policy::config::Clipboard>,

    /// Do not let the program open pseudo-terminals of its own.
    #[arg(long)]
    pub no_nested_pty: bool,

    /// macOS: let the program use the login keychain.
    #[arg(long)]
    pub keychain: bool,

    /// Keep no history or caches between sessions (no private home).
    #[arg(long)]
    pub no_private_home: bool,

    /// End the session after this long: seconds, or with a unit (90s, 30m, 2h).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,

    /// Limit CPU time (RLIMIT_CPU), in seconds.
    #[arg(long, value_name = "SECONDS")]
    pub cpu_seconds: Option<u64>,

    /// Limit each process's memory (RLIMIT_DATA), in MiB.
    #[arg(long, value_name = "MIB")]
    pub memory_mib: Option<u64>,

    /// Size of the sandbox's private /tmp and of its /dev/shm, each, in MiB (bwrap;
    /// default 2048).
    #[arg(long, value_name = "MIB")]
    pub tmp_mib: Option<u64>,

    /// Limit the whole session's processes and threads (its cgroup's pids.max).
    #[arg(long, value_name = "N")]
    pub session_processes: Option<u64>,

    /// Limit the whole session's memory (its cgroup's memory.max), in MiB.
    #[arg(long, value_name = "MIB")]
    pub session_memory_mib: Option<u64>,

    /// Limit the number of processes (RLIMIT_NPROC).
    #[arg(long, value_name = "N")]
    pub processes: Option<u64>,

    /// The sandbox: auto (default), bwrap, landlock, docker, podman, seatbelt, or none
    /// (unconfined).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<crate::policy::config::BackendChoice>,

    /// The image a container backend (docker, podman) runs the program in; without it,
    /// the host's own files, read-only, as under bwrap.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Refuse to start unless these layers run: bwrap, landlock, seccomp, seatbelt, names
    /// (every name the program makes judged: Linux 5.14 or later; comma-separated).
    /// Without it, `auto` runs the strongest set this machine can and names what is missing.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYER,…")]
    pub require: Vec<crate::policy::config::SandboxLayer>,
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
    fn subcommands_and_commands_do_not_mix_up() {
        let cli =
            Cli::try_parse_from(["sbx-shell", "explain", "--profile", "claude", "--json"]).unwrap();
        let Some(Action::Explain(args)) = cli.action else {
            panic!("explain expected")
        };
        assert_eq!(args.policy.profile.as_deref(), Some("claude"));
        assert!(args.json);
        let cli = Cli::try_parse_from(["sbx-shell", "--", "explain"]).unwrap();
        assert!(cli.action.is_none());
        assert_eq!(cli.command, ["explain"]);
        let cli = Cli::try_parse_from(["sbx-shell", "vim"]).unwrap();
        assert!(cli.action.is_none());
        assert_eq!(cli.stray, ["vim"]);
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
