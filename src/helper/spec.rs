//! The helper's wire format: how the supervisor tells the helper mode what to do before it
//! execs the program (`HelperSpec`), and how the helper reads it back. The argv is
//! `EXE __sbx_helper FD PROGRAM ARG0 ARGS…`; the spec itself, JSON, comes through the
//! inherited fd FD (`process::Handover`), not the argv, which every local user can read
//! (`ps`, /proc/PID/cmdline): it names the policy's paths. Pure but for `read_spec`; both
//! sides share it.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::policy::launch::Launch;

/// The first argument that switches the binary into its helper mode.
pub const HELPER_ARG: &str = "__sbx_helper";

/// How the helper prepares the process before exec. Serialized as JSON, handed over
/// through an inherited fd.
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
    /// Inside a container: each writable path the engine mounted, and the directory
    /// sbx-shell saw there (`container::bind_mounts`), checked before anything runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounted: Vec<(std::path::PathBuf, crate::sys::files::Identity)>,
    /// No network or an allow-list, inside bwrap: listen on this loopback port of the
    /// sandbox's network namespace and hand the listening socket to sbx-shell's proxy over
    /// this inherited unix socket, and the name server's on port 53 over the other one,
    /// before anything else (`netproxy::lookups`).
    #[serde(default)]
    pub proxy_listen: Option<ProxyListen>,
    /// Landlock alone: the calls Landlock cannot judge (`sandbox::mediated::table`) are
    /// answered by the guard (`mediator`), by these rules.
    #[serde(default)]
    pub mediated: Option<crate::helper::mediator::Scope>,
    /// Guard mode: the guard makes every name the program asks for, refusing these
    /// (`mediator::create`); the program's side installs the filter after Landlock.
    #[serde(default)]
    pub names: Option<crate::protect::names::Names>,
    /// The write end of a non-blocking pipe on which the guard reports each refusal of
    /// its mediator (`mediator::report`, read by sbx-shell's `session::journal`).
    #[serde(default)]
    pub refusals_fd: Option<i32>,
    /// Inside a container: who the program is there (`ContainerSettings::user`), in a user
    /// namespace of its own that the program's side makes before it confines itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown_as: Option<crate::policy::ContainerUser>,
    /// Linux, root's session inside bwrap: the program runs as root of this user namespace
    /// (another host id), with these paths id-mapped so that their files are root's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_as: Option<RootAsSpec>,
    /// Linux, root's session where its program stays host root: the guard opens every
    /// file it opens and hands over only what an ordinary user could read, or what the
    /// policy grants (`mediator::rootreads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_reads: Option<crate::helper::mediator::RootReads>,
}

/// How root's program becomes another host id (`sys::userns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootAsSpec {
    /// The inherited descriptor of the user namespace (`userns::mapped_root`).
    pub userns_fd: i32,
    /// The host id uid and gid 0 are in it (`sandbox::rootas::unused_id`).
    pub id: u32,
    /// The paths mounted id-mapped for the program: what the policy grants it.
    pub idmapped: Vec<std::path::PathBuf>,
    /// Directories it may not search on the way to them (`sandbox::rootas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaffolds: Vec<crate::sandbox::rootas::Scaffold>,
}

/// Where the helper opens the proxy's port, and how it hands it over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyListen {
    pub port: u16,
    pub channel_fd: i32,
    /// Make a network namespace of the helper's own first (`ProxySession::unshare`).
    #[serde(default)]
    pub unshare: bool,
    /// Where the name server's socket goes (binding port 53 takes CAP_NET_BIND_SERVICE,
    /// which bwrap kept for it and which is then dropped).
    #[serde(default)]
    pub lookups_fd: Option<i32>,
    /// The host's loopback services the allow-list names: listened for on the sandbox's
    /// loopback, each listener sent over `services_fd` (`netproxy::forward`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<u16>,
    #[serde(default)]
    pub services_fd: Option<i32>,
    /// Where the guard answers the supervisor's asks for sockets of the sandbox's network
    /// (a published port's connections: `helper::netsockets`).
    #[serde(default)]
    pub sockets_fd: Option<i32>,
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
        use crate::policy::config::{OpenFiles, OpenFilesMode};
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

/// The spec as the helper reads it from its fd.
pub fn spec_bytes(spec: &HelperSpec) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(spec)
}

/// `EXE __sbx_helper FD PROGRAM ARG0 ARGS...`: the argv that runs the plan through the
/// helper mode of this same binary, its spec read from the inherited `spec_fd`.
pub fn build_helper_argv(exe: &Path, spec_fd: RawFd, launch: &Launch) -> Vec<OsString> {
    let mut argv = vec![
        exe.as_os_str().to_owned(),
        HELPER_ARG.into(),
        spec_fd.to_string().into(),
    ];
    argv.push(launch.program.clone());
    argv.push(launch.arg0.clone());
    argv.extend(launch.args.iter().cloned());
    argv
}

/// The helper's arguments (after `__sbx_helper`), parsed back.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    /// The inherited fd the spec is read from (`read_spec`).
    pub spec_fd: RawFd,
    pub program: OsString,
    /// argv of the program, argv[0] first.
    pub argv: Vec<OsString>,
}

/// A helper call that is not what sbx-shell writes.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("expected FD PROGRAM ARG0 [ARGS...]")]
    Shape,
    #[error("the spec's fd is not a number")]
    Fd,
    #[error("cannot read the spec: {0}")]
    Read(#[source] std::io::Error),
    #[error("bad spec: {0}")]
    Json(#[source] serde_json::Error),
}

/// Parse what follows `__sbx_helper`; the error says what is wrong.
pub fn parse_helper_args(args: &[OsString]) -> Result<HelperArgs, SpecError> {
    let [fd, program, arg0, rest @ ..] = args else {
        return Err(SpecError::Shape);
    };
    let spec_fd = fd
        .to_str()
        .and_then(|fd| fd.parse::<RawFd>().ok())
        .filter(|fd| *fd > 2)
        .ok_or(SpecError::Fd)?;
    let mut argv = vec![arg0.clone()];
    argv.extend(rest.iter().cloned());
    Ok(HelperArgs {
        spec_fd,
        program: program.clone(),
        argv,
    })
}

/// The spec from `bytes`, as `spec_bytes` wrote it.
pub fn parse_spec(bytes: &[u8]) -> Result<HelperSpec, SpecError> {
    serde_json::from_slice(bytes).map_err(SpecError::Json)
}

/// Read the spec from the inherited `fd` to its end, and close it: the program never
/// inherits it.
pub fn read_spec(fd: RawFd) -> Result<HelperSpec, SpecError> {
    use std::io::Read;
    // Only an fd that is open is taken over (a wrong number fails here, not later); it was
    // inherited for this one reader.
    let mut file =
        std::fs::File::from(crate::sys::files::take_inherited(fd).map_err(SpecError::Read)?);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(SpecError::Read)?;
    parse_spec(&bytes)
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
            refusals_fd: None,
            root_as: None,
            root_reads: None,
            shown_as: None,
            mounts: Vec::new(),
            mounted: Vec::new(),
            proxy_listen: Some(ProxyListen {
                port: 3128,
                channel_fd: 7,
                unshare: true,
                lookups_fd: Some(8),
                services: vec![5432],
                services_fd: Some(9),
                sockets_fd: Some(10),
            }),
            mediated: Some(crate::helper::mediator::Scope {
                writable: vec!["/w".into()],
                protected: vec!["/w/.git/hooks".into()],
                shm: Some("/dev/shm/sbx-shell-0/session-9".into()),
                lookups: Some("sbx-shell-names-9-00".into()),
                sockets: vec!["/s/ssh/9/agent.sock".into()],
                carved: Vec::new(),
                pools: Vec::new(),
                services: vec![5432],
            }),
            names: Some(crate::protect::names::Names {
                protected: vec!["/w/.mcp.json".into()],
                git_config_allow: vec!["filter.lfs.*".into()],
                objects: vec![(1, 2)],
                pinned: vec!["/w/.git".into()],
                home: None,
                writable: vec!["/w".into()],
            }),
        };
        let launch = Launch {
            program: "/bin/bash".into(),
            arg0: "-bash".into(),
            args: os(&["-c", "echo hi"]),
            shell: "/bin/bash".into(),
        };
        let argv = build_helper_argv(Path::new("/x/sbx-shell"), 9, &launch);
        assert_eq!(
            argv,
            os(&[
                "/x/sbx-shell",
                HELPER_ARG,
                "9",
                "/bin/bash",
                "-bash",
                "-c",
                "echo hi"
            ])
        );
        let text = String::from_utf8(spec_bytes(&spec).unwrap()).unwrap();
        assert!(!argv.iter().any(|a| a.to_string_lossy().contains("3128")));
        assert!(text.contains("3128"));
        assert_eq!(parse_spec(text.as_bytes()).unwrap(), spec);
        let parsed = parse_helper_args(&argv[2..]).unwrap();
        assert_eq!(parsed.spec_fd, 9);
        assert_eq!(parsed.program, "/bin/bash");
        assert_eq!(parsed.argv, os(&["-bash", "-c", "echo hi"]));
    }

    #[test]
    fn a_malformed_helper_call_is_an_error() {
        assert!(parse_helper_args(&os(&["9"])).is_err());
        assert!(parse_helper_args(&os(&["{}", "a", "a"])).is_err());
        assert!(parse_helper_args(&os(&["1", "a", "a"])).is_err());
        assert!(parse_spec(b"{\"x\":1}").is_err());
    }
}
