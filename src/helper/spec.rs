//! The helper's wire format: how the supervisor tells the helper mode what to do before it
//! execs the program (`HelperSpec`), as the argv `EXE __sbx_helper SPEC PROGRAM ARG0 ARGS…`,
//! and how the helper reads it back. Pure; both sides share it.

use std::ffi::OsString;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::launch::Launch;

/// The first argument that switches the binary into its helper mode.
pub const HELPER_ARG: &str = "__sbx_helper";

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
    /// The read end of a pipe whose only write end sbx-shell holds: it reads as end-of-file
    /// once sbx-shell is gone, however it died and whenever (`run::Lifeline`). The guard
    /// checks it before anything runs and watches it until the end.
    #[serde(default)]
    pub lifeline_fd: Option<i32>,
    /// Linux, inside bwrap: what to mount (or check) first, before anything else, in order
    /// (with CAP_SYS_ADMIN, which bwrap kept for this and which is then dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<crate::sandbox::bwrap::Mount>,
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
    /// The limits a policy asks for. `inherited_nofile` is the soft open-file limit
    /// sbx-shell started with: "keep" sets it back (the guard raises sbx-shell's own).
    pub fn from_policy(
        limits: &crate::policy::Limits,
        inherited_nofile: Option<u64>,
    ) -> ProcessLimits {
        use crate::config::{OpenFiles, OpenFilesMode};
        ProcessLimits {
            raise_nofile: limits.open_files == OpenFiles::Mode(OpenFilesMode::Raise),
            open_files: match limits.open_files {
                OpenFiles::Count(n) => Some(n),
                OpenFiles::Mode(OpenFilesMode::Keep) => inherited_nofile,
                OpenFiles::Mode(_) => None,
            },
            cpu_seconds: limits.cpu_seconds,
            data_bytes: limits.memory_mib.map(|m| m.saturating_mul(1024 * 1024)),
            processes: limits.processes,
            no_core_dumps: !limits.core_dumps,
        }
    }
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

/// The helper's arguments (after `__sbx_helper`), parsed back.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    pub spec: HelperSpec,
    pub program: OsString,
    /// argv of the program, argv[0] first.
    pub argv: Vec<OsString>,
}

/// A helper call that is not what sbx-shell writes.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("expected SPEC PROGRAM ARG0 [ARGS...]")]
    Shape,
    #[error("the spec is not UTF-8")]
    NotUtf8,
    #[error("bad spec: {0}")]
    Json(#[source] serde_json::Error),
}

/// Parse what follows `__sbx_helper`; the error says what is wrong.
pub fn parse_helper_args(args: &[OsString]) -> Result<HelperArgs, SpecError> {
    let [spec, program, arg0, rest @ ..] = args else {
        return Err(SpecError::Shape);
    };
    let spec = spec.to_str().ok_or(SpecError::NotUtf8)?;
    let spec: HelperSpec = serde_json::from_str(spec).map_err(SpecError::Json)?;
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

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
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
            lifeline_fd: None,
            mounts: Vec::new(),
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
    fn a_malformed_helper_call_is_an_error() {
        assert!(parse_helper_args(&os(&["{}"])).is_err());
        assert!(parse_helper_args(&os(&["{\"x\":1}", "a", "a"])).is_err());
    }
}
