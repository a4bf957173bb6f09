//! The launch plan: what the child runs, resolved from the command line into plain data, and
//! the environment it runs with.
//!
//! Everything here is pure. The plan is turned into the argv of sbx-shell's helper mode
//! (`helper::spec`), which prepares the process and execs the program; a sandbox backend
//! rewrites that argv (prefixing its launcher) without knowing what the program is.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// What the command line asked for, before the shell is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRequest {
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

impl Launch {
    /// Whether this runs the shell for the user to type into (no command, no `-c`).
    pub fn is_shell_session(&self) -> bool {
        self.program == self.shell.as_os_str() && !self.args.iter().any(|a| a == "-c")
    }

    /// Whether this is a shell's `-c` running the server end of a file copy, as sshd
    /// starts one through the login shell: `scp -t`/`scp -f` (legacy scp), `sftp-server`
    /// (sftp, and scp since OpenSSH 9), `rsync --server`. What it writes must reach the
    /// host's files, never a private place that ends with the session.
    pub fn is_file_transfer(&self) -> bool {
        let Some(at) = self.args.iter().position(|a| a == "-c") else {
            return false;
        };
        let Some(command) = self.args.get(at + 1).and_then(|c| c.to_str()) else {
            return false;
        };
        file_transfer(command)
    }

    /// With `extra` put right after the program's name when its file name has an entry
    /// (`policy.program_args`); a shell or an unlisted program is left as it is.
    pub fn with_program_args(
        mut self,
        extra: &std::collections::BTreeMap<String, Vec<String>>,
    ) -> Launch {
        let name = Path::new(&self.program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(args) = extra.get(name) {
            let mut all: Vec<OsString> = args.iter().map(OsString::from).collect();
            all.append(&mut self.args);
            self.args = all;
        }
        self
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
pub fn plan(request: &LaunchRequest, shell: &Path) -> Result<Launch, PlanError> {
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

/// The child's environment: `kept`, what the policy keeps of sbx-shell's own (with
/// `SBX_SHELL` and `SBX_SANDBOX`); with a proxy, its variables (`proxy`), and nothing that
/// would make clients bypass it; and `SHELL`, the real shell, last.
pub fn child_env(
    mut kept: Vec<(OsString, OsString)>,
    proxy: Option<Vec<(String, String)>>,
    private_home: Vec<(String, OsString)>,
    shell: &Path,
) -> Vec<(OsString, OsString)> {
    kept.retain(|(name, _)| name != "SHELL");
    kept.retain(|(name, _)| !private_home.iter().any(|(n, _)| name == n.as_str()));
    kept.extend(
        private_home
            .into_iter()
            .map(|(n, v)| (OsString::from(n), v)),
    );
    if let Some(set) = proxy {
        kept.retain(|(name, _)| {
            !BYPASS_ENV.iter().any(|n| name == n) && !set.iter().any(|(n, _)| name == n.as_str())
        });
        kept.extend(
            set.into_iter()
                .map(|(n, v)| (OsString::from(n), OsString::from(v))),
        );
    }
    kept.push((OsString::from("SHELL"), shell.as_os_str().to_owned()));
    kept
}

/// Names that would make clients skip the proxy: removed from the program's environment.
pub const BYPASS_ENV: [&str; 2] = ["NO_PROXY", "no_proxy"];

/// Whether the shell command `command` runs the server end of a file copy
/// (`Launch::is_file_transfer`).
pub fn file_transfer(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let name = words
        .first()
        .map_or("", |w| w.rsplit('/').next().unwrap_or(w));
    let flag = |letter: char| {
        words[1..].iter().any(|w| {
            w.starts_with('-')
                && !w.starts_with("--")
                && w[1..].chars().all(|c| c.is_ascii_alphanumeric())
                && w.contains(letter)
        })
    };
    match name {
        "scp" => flag('t') || flag('f'),
        "sftp-server" => true,
        "rsync" => words.contains(&"--server"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> LaunchRequest {
        LaunchRequest {
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
    fn program_args_go_right_after_the_named_program_only() {
        let extra = [(
            "codex".to_string(),
            vec!["-c".to_string(), "x=1".to_string()],
        )]
        .into_iter()
        .collect();
        let req = LaunchRequest {
            command: os(&["/opt/bin/codex", "exec", "hi"]),
            ..request()
        };
        let codex = plan(&req, Path::new("/bin/bash"))
            .unwrap()
            .with_program_args(&extra);
        assert_eq!(codex.args, os(&["-c", "x=1", "exec", "hi"]));
        let shell = plan(&request(), Path::new("/bin/bash"))
            .unwrap()
            .with_program_args(&extra);
        assert!(shell.args.is_empty());
    }

    #[test]
    fn no_command_runs_the_shell_plainly() {
        let launch = plan(&request(), Path::new("/bin/bash")).unwrap();
        assert_eq!(launch.program, "/bin/bash");
        assert_eq!(launch.arg0, "/bin/bash");
        assert!(launch.args.is_empty());
        assert_eq!(launch.shell, Path::new("/bin/bash"));
        assert!(launch.is_shell_session());
        let string = LaunchRequest {
            command_string: Some("true".into()),
            ..request()
        };
        let command = LaunchRequest {
            command: vec!["vim".into()],
            ..request()
        };
        for r in [string, command] {
            assert!(!plan(&r, Path::new("/bin/bash")).unwrap().is_shell_session());
        }
    }

    #[test]
    fn a_login_shell_gets_a_dash_prefixed_arg0() {
        let launch = plan(
            &LaunchRequest {
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
        let req = LaunchRequest {
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
        let req = LaunchRequest {
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
    fn the_server_ends_of_file_copies_are_told_apart() {
        for yes in [
            "scp -t /tmp/f",
            "scp -v -p -t -- .",
            "scp -f files/x",
            "/usr/lib/openssh/sftp-server",
            "/usr/lib/sftp-server -l INFO",
            "rsync --server -vlogDtpre.iLsfxCIvu . .",
        ] {
            assert!(file_transfer(yes), "{yes}");
        }
        for no in [
            "scp f host:x",
            "ls -t",
            "rsync -av a b",
            "make -f Makefile",
            "",
            "echo scp -t",
        ] {
            assert!(!file_transfer(no), "{no}");
        }
    }

    #[test]
    fn conflicting_requests_are_refused_with_a_hint() {
        let cases = [
            (
                LaunchRequest {
                    command: os(&["vim"]),
                    login: true,
                    ..request()
                },
                "-l/--login",
            ),
            (
                LaunchRequest {
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
    fn the_child_env_sets_shell_and_the_proxy_and_drops_bypasses() {
        let kept = vec![
            ("SHELL".into(), "/usr/local/bin/sbx-shell".into()),
            ("NO_PROXY".into(), "api.example.com".into()),
            ("http_proxy".into(), "http://elsewhere".into()),
            ("TERM".into(), "xterm".into()),
        ];
        let proxy = vec![(
            "http_proxy".to_string(),
            "http://127.0.0.1:3128".to_string(),
        )];
        let env = child_env(kept.clone(), Some(proxy), Vec::new(), Path::new("/bin/zsh"));
        assert_eq!(
            env,
            [
                ("TERM".into(), "xterm".into()),
                ("http_proxy".into(), "http://127.0.0.1:3128".into()),
                ("SHELL".into(), "/bin/zsh".into()),
            ]
        );
        let env = child_env(kept, None, Vec::new(), Path::new("/bin/zsh"));
        assert_eq!(env.len(), 4);
        assert_eq!(env[0].0, "NO_PROXY");
    }
}
