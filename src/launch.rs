//! The launch plan: what the child runs, resolved from the command line into plain data.
//!
//! Everything here is pure. The plan is turned into the argv of sbx-shell's helper mode
//! (`build_helper_argv`), which prepares the process and execs the program; a sandbox backend
//! rewrites that argv (prefixing its launcher) without knowing what the program is.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The first argument that switches the binary into its helper mode.
pub const HELPER_ARG: &str = "__sbx_helper";

/// What the command line asked for, before the shell is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// argv[0] began with '-' or `-l` was given.
    pub login: bool,
    /// `-i` was given.
    pub interactive: bool,
    /// `-c COMMAND_STRING`.
    pub command_string: Option<OsString>,
    /// Arguments before `--` (only valid after a command string: its $0, $1 …).
    pub shell_args: Vec<OsString>,
    /// The command after `--`; empty means "the shell". After a command string, more of the
    /// shell's $0, $1 ….
    pub command: Vec<OsString>,
}

/// The resolved plan: exactly what the helper will exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Looked up in `PATH` by the helper's `execvp` when it has no '/'.
    pub program: OsString,
    /// The argv[0] the program sees: "-bash" for a login bash.
    pub arg0: OsString,
    /// argv[1..].
    pub args: Vec<OsString>,
    /// The real shell; the child's `SHELL`, so that tmux, vim's `:sh` and others never
    /// recurse into sbx-shell.
    pub shell: PathBuf,
}

/// How the helper prepares the process before exec. Serialized as one JSON argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSpec {
    /// Start a new session and take fd 0 (the inner pty's slave) as the controlling terminal.
    pub new_session: bool,
    /// Resource limits set on the program (inherited by everything it starts).
    pub limits: ProcessLimits,
    /// Linux: drop every capability and set no_new_privs (before Landlock and seccomp).
    #[serde(default)]
    pub drop_privileges: bool,
    /// Linux: the Landlock ruleset to apply just before exec.
    #[serde(default)]
    pub landlock: Option<crate::sandbox::landlock::Ruleset>,
    /// Linux: the seccomp filter to install last before exec.
    #[serde(default)]
    pub seccomp: Option<crate::sandbox::seccomp::Filter>,
    /// Linux: stay behind as a guard of the program's process tree and exec the program in a
    /// child. The guard ends the whole tree when sbx-shell dies (even by SIGKILL), and
    /// reports the program's stops (see `stop_notify_fd`).
    #[serde(default)]
    pub guard: bool,
    /// The guard writes a byte to this inherited fd when the program stops itself; without
    /// one, it stops itself so that its parent sees the stop.
    #[serde(default)]
    pub stop_notify_fd: Option<i32>,
    /// Network allow-list inside bwrap: listen on this loopback port of the sandbox's network
    /// namespace and hand the listening socket to sbx-shell's proxy over this inherited
    /// unix socket, before anything else.
    #[serde(default)]
    pub proxy_listen: Option<ProxyListen>,
}

/// Where the helper opens the proxy's port, and how it hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyListen {
    pub port: u16,
    pub channel_fd: i32,
}

/// The rlimits the helper sets. `None` leaves a limit as inherited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessLimits {
    /// Raise the soft open-file limit to the hard one.
    pub raise_nofile: bool,
    /// Set the soft open-file limit to this (capped by the hard limit).
    pub open_files: Option<u64>,
    /// RLIMIT_CPU, seconds (soft and hard).
    pub cpu_seconds: Option<u64>,
    /// RLIMIT_DATA, bytes (soft and hard).
    pub data_bytes: Option<u64>,
    /// RLIMIT_NPROC (soft and hard).
    pub processes: Option<u64>,
    /// RLIMIT_CORE set to 0 unless core dumps are allowed.
    pub no_core_dumps: bool,
}

impl ProcessLimits {
    /// The limits a policy asks for.
    pub fn from_policy(limits: &crate::policy::Limits) -> ProcessLimits {
        use crate::config::{OpenFiles, OpenFilesMode};
        ProcessLimits {
            raise_nofile: limits.open_files == OpenFiles::Mode(OpenFilesMode::Raise),
            open_files: match limits.open_files {
                OpenFiles::Count(n) => Some(n),
                OpenFiles::Mode(_) => None,
            },
            cpu_seconds: limits.cpu_seconds,
            data_bytes: limits.memory_mib.map(|m| m.saturating_mul(1024 * 1024)),
            processes: limits.processes,
            no_core_dumps: !limits.core_dumps,
        }
    }
}

/// A request that cannot be planned.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("-l/--login and -i apply to the shell, not to a COMMAND after `--`\nHint: drop -l/-i, or run the shell: sbx-shell -l")]
    ShellFlagsWithCommand,
    #[error("unexpected argument '{0}'\nHint: put the command after `--`: sbx-shell -- {0}")]
    StrayArgument(String),
}

/// Turn the request into a plan, given the resolved real shell.
pub fn plan(request: &Request, shell: &Path) -> Result<Launch, PlanError> {
    if let Some(stray) = request.shell_args.first() {
        if request.command_string.is_none() {
            return Err(PlanError::StrayArgument(
                stray.to_string_lossy().into_owned(),
            ));
        }
    }
    if !request.command.is_empty() && request.command_string.is_none() {
        if request.login || request.interactive {
            return Err(PlanError::ShellFlagsWithCommand);
        }
        return Ok(Launch {
            program: request.command[0].clone(),
            arg0: request.command[0].clone(),
            args: request.command[1..].to_vec(),
            shell: shell.to_path_buf(),
        });
    }
    let mut args = Vec::new();
    if request.interactive {
        args.push(OsString::from("-i"));
    }
    if let Some(command_string) = &request.command_string {
        args.push(OsString::from("-c"));
        args.push(command_string.clone());
        // `-c CMD [ARGS] [-- ARGS]`: everything else is the shell's $0, $1 …
        args.extend(request.shell_args.iter().cloned());
        args.extend(request.command.iter().cloned());
    }
    let arg0 = if request.login {
        login_arg0(shell)
    } else {
        shell.as_os_str().to_owned()
    };
    Ok(Launch {
        program: shell.as_os_str().to_owned(),
        arg0,
        args,
        shell: shell.to_path_buf(),
    })
}

/// "-bash" for "/bin/bash": how login, sshd and su tell a shell it is a login shell.
pub fn login_arg0(shell: &Path) -> OsString {
    let name = shell.file_name().unwrap_or(shell.as_os_str());
    let mut arg0 = b"-".to_vec();
    arg0.extend_from_slice(name.as_bytes());
    OsString::from_vec(arg0)
}

/// Whether argv[0] marks a login shell (begins with '-').
pub fn is_login_arg0(arg0: &OsStr) -> bool {
    arg0.as_bytes().first() == Some(&b'-')
}

/// `EXE __sbx_helper SPEC PROGRAM ARG0 ARGS...`: the argv that runs the plan through the
/// helper mode of this same binary.
pub fn build_helper_argv(
    exe: &Path,
    spec: &HelperSpec,
    launch: &Launch,
) -> serde_json::Result<Vec<OsString>> {
    let spec = serde_json::to_string(spec)?;
    let mut argv = vec![exe.as_os_str().to_owned(), HELPER_ARG.into(), spec.into()];
    argv.push(launch.program.clone());
    argv.push(launch.arg0.clone());
    argv.extend(launch.args.iter().cloned());
    Ok(argv)
}

/// The first `dir/program` in a `PATH`-style list that `exists` says is there; empty entries
/// mean the current directory, as execvp treats them.
pub fn find_in_path(
    program: &Path,
    path_var: Option<&OsStr>,
    exists: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let path_var = path_var.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    path_var
        .as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(OsStr::from_bytes(dir))
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| exists(candidate))
}

/// How to install the agents people run under sbx-shell, for a "not found" error.
pub fn install_hint(program: &str) -> Option<&'static str> {
    match program {
        "claude" => Some("install Claude Code: npm install -g @anthropic-ai/claude-code"),
        "gemini" => Some("install Gemini CLI: npm install -g @google/gemini-cli"),
        "codex" => Some("install Codex CLI: npm install -g @openai/codex"),
        "opencode" => Some("install opencode: npm install -g opencode-ai"),
        _ => None,
    }
}

/// The helper's arguments (after `__sbx_helper`), parsed back.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    pub spec: HelperSpec,
    pub program: OsString,
    /// argv of the program, argv[0] first.
    pub argv: Vec<OsString>,
}

/// Parse what follows `__sbx_helper`; the error says what is wrong.
pub fn parse_helper_args(args: &[OsString]) -> Result<HelperArgs, String> {
    let [spec, program, arg0, rest @ ..] = args else {
        return Err("expected SPEC PROGRAM ARG0 [ARGS...]".into());
    };
    let spec = spec.to_str().ok_or("the spec is not UTF-8")?;
    let spec: HelperSpec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    let mut argv = vec![arg0.clone()];
    argv.extend(rest.iter().cloned());
    Ok(HelperArgs {
        spec,
        program: program.clone(),
        argv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            login: false,
            interactive: false,
            command_string: None,
            shell_args: vec![],
            command: vec![],
        }
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn no_command_runs_the_shell_plainly() {
        let launch = plan(&request(), Path::new("/bin/bash")).unwrap();
        assert_eq!(launch.program, "/bin/bash");
        assert_eq!(launch.arg0, "/bin/bash");
        assert!(launch.args.is_empty());
        assert_eq!(launch.shell, Path::new("/bin/bash"));
    }

    #[test]
    fn a_login_shell_gets_a_dash_prefixed_arg0() {
        let launch = plan(
            &Request {
                login: true,
                ..request()
            },
            Path::new("/usr/bin/zsh"),
        )
        .unwrap();
        assert_eq!(launch.program, "/usr/bin/zsh");
        assert_eq!(launch.arg0, "-zsh");
        assert!(is_login_arg0(&launch.arg0));
        assert!(!is_login_arg0(OsStr::new("sbx-shell")));
    }

    #[test]
    fn a_command_string_goes_to_the_shell_with_its_arguments() {
        let req = Request {
            command_string: Some("echo $0 $1".into()),
            shell_args: os(&["zero"]),
            command: os(&["one"]),
            interactive: true,
            ..request()
        };
        let launch = plan(&req, Path::new("/bin/sh")).unwrap();
        assert_eq!(launch.args, os(&["-i", "-c", "echo $0 $1", "zero", "one"]));
    }

    #[test]
    fn a_command_after_double_dash_runs_as_given_with_shell_set() {
        let req = Request {
            command: os(&["vim", "a.txt"]),
            ..request()
        };
        let launch = plan(&req, Path::new("/bin/zsh")).unwrap();
        assert_eq!(launch.program, "vim");
        assert_eq!(launch.arg0, "vim");
        assert_eq!(launch.args, os(&["a.txt"]));
        assert_eq!(launch.shell, Path::new("/bin/zsh"));
    }

    #[test]
    fn conflicting_requests_are_refused_with_a_hint() {
        let cases = [
            (
                Request {
                    command: os(&["vim"]),
                    login: true,
                    ..request()
                },
                "-l/--login",
            ),
            (
                Request {
                    shell_args: os(&["vim"]),
                    ..request()
                },
                "sbx-shell -- vim",
            ),
        ];
        for (req, needle) in cases {
            let err = plan(&req, Path::new("/bin/sh")).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(err.contains("Hint: "), "{err}");
        }
    }

    #[test]
    fn the_helper_argv_round_trips() {
        let spec = HelperSpec {
            new_session: true,
            limits: ProcessLimits {
                raise_nofile: true,
                ..ProcessLimits::default()
            },
            drop_privileges: false,
            landlock: None,
            seccomp: None,
            guard: false,
            stop_notify_fd: None,
            proxy_listen: Some(ProxyListen {
                port: 3128,
                channel_fd: 7,
            }),
        };
        let launch = Launch {
            program: "/bin/bash".into(),
            arg0: "-bash".into(),
            args: os(&["-c", "echo hi"]),
            shell: "/bin/bash".into(),
        };
        let argv = build_helper_argv(Path::new("/x/sbx-shell"), &spec, &launch).unwrap();
        assert_eq!(argv[..2], os(&["/x/sbx-shell", HELPER_ARG]));
        assert_eq!(argv[3..], os(&["/bin/bash", "-bash", "-c", "echo hi"]));
        let parsed = parse_helper_args(&argv[2..]).unwrap();
        assert_eq!(parsed.spec, spec);
        assert_eq!(parsed.program, "/bin/bash");
        assert_eq!(parsed.argv, os(&["-bash", "-c", "echo hi"]));
    }

    #[test]
    fn path_lookup_takes_the_first_match_and_treats_empty_as_cwd() {
        let there = |p: &Path| p == Path::new("/b/vim") || p == Path::new("./vim");
        let found = find_in_path(Path::new("vim"), Some(OsStr::new("/a:/b:/c")), there);
        assert_eq!(found, Some(PathBuf::from("/b/vim")));
        let found = find_in_path(Path::new("vim"), Some(OsStr::new("/a::/c")), there);
        assert_eq!(found, Some(PathBuf::from("./vim")));
        assert_eq!(
            find_in_path(Path::new("nvim"), Some(OsStr::new("/a:/b")), there),
            None
        );
    }

    #[test]
    fn a_malformed_helper_call_is_an_error() {
        assert!(parse_helper_args(&os(&["{}"])).is_err());
        assert!(parse_helper_args(&os(&["{\"x\":1}", "a", "a"])).is_err());
    }
}
