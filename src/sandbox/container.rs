//! The container backends (Linux): the engine client's argv that runs the helper in a
//! container of Docker's or Podman's. Pure: what the host has arrives as plain data.
//!
//! The model: the container is only a launcher, as bwrap is. sbx-shell's own pty stays the
//! program's terminal and nothing of the session travels on the engine's command line:
//! the container's first process (`helper::container`'s entry) connects to a socket of the
//! session's **courier** (sbx-shell's child on the host) and receives over it the
//! descriptors the helper would have inherited under Landlock alone — the terminal or
//! stdio, the spec, the lifeline, the guard's pipes — and the program's environment, then
//! execs the helper, which confines the program inside exactly as under Landlock alone.
//! The container adds its own namespaces, no capabilities, no new privileges, the engine's
//! process and memory limits, and no network unless the policy gives the host's.
//!
//! Without an image the container shows the host's own files: an image made locally that
//! holds nothing but the host's symlinks at `/` (`bin -> usr/bin`…), and each other entry
//! of the host's `/` mounted read-only at its own path (but `/proc`, `/sys`, `/dev`, `/run`
//! and `/tmp`, which the engine makes fresh or leaves out), the writable places read-write
//! over them. The symlinks stay symlinks: a second mount of `/usr/bin` at `/bin` would be
//! a path on which Landlock's rules for `/usr` do not hold. With an image, that image, the writable places mounted in
//! at their paths; sbx-shell's executable is mounted in either way, read-only.
//!
//! Mounts are ordered parents first (the engines sort them by depth too).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::backend::{Container, Engine};
use crate::policy::{Network, Policy};

/// Where sbx-shell's own executable appears in the container.
pub const EXE: &str = "/.sbx-shell/sbx-shell";
/// The courier's socket's name in the session's directory on the host.
pub const SOCKET_NAME: &str = "courier.sock";
/// The file the courier leaves in the session's directory once the engine's client ended
/// by itself: without it, sbx-shell removes the container by name.
pub const ENDED_NAME: &str = "ended";
/// The sandbox's `resolv.conf` (`netproxy::lookups::RESOLV_CONF`) in the session's
/// directory on the host, when its name server is there.
pub const RESOLV_CONF_NAME: &str = "resolv.conf";
/// Where the courier's socket appears in the container.
pub const SOCKET: &str = "/.sbx-shell/courier.sock";
/// The repository of the images the host's files are mounted into, made locally
/// (`host_image`).
pub const HOST_IMAGE: &str = "sbx-shell-host";
/// The label that names the supervisor's pid on each of its containers.
pub const LABEL: &str = "sbx-shell.supervisor";
/// The process limit when the policy sets none (`--pids-limit`).
pub const DEFAULT_PIDS: u64 = 4096;
/// Entries of the host's `/` that are not mounted: the engine makes its own `/proc`,
/// `/sys`, `/dev` and `/tmp`; `/run` holds the host's live sockets and state.
pub const NOT_MOUNTED: &[&str] = &["proc", "sys", "dev", "run", "tmp"];

/// What the engine's argv is built from, beyond the policy.
#[derive(Debug, Clone)]
pub struct EngineInputs<'a> {
    pub container: &'a Container,
    pub policy: &'a Policy,
    /// The container's name, unique to the session.
    pub name: &'a str,
    /// sbx-shell's pid (the label: whose container it is).
    pub supervisor: u32,
    /// The user the program runs as: uid, gid and supplementary groups, the host's own.
    pub user: (u32, u32, &'a [u32]),
    /// The running executable's path on the host (mounted at `EXE`).
    pub exe: &'a Path,
    /// The courier's socket on the host (mounted at `SOCKET`).
    pub socket: &'a Path,
    /// The directory the program starts in.
    pub cwd: &'a Path,
    /// The session's terminal (the inner pty), shown at `/dev/console` as bwrap shows it:
    /// the container's `/dev/pts` is another instance, where its name leads nowhere.
    pub tty: Option<&'a Path>,
    /// The entries of the host's `/` (full paths) but its symlinks, for the host's files.
    pub top: &'a [PathBuf],
    /// The image of the host's symlinks at `/` (`host_image`), for the host's files.
    pub host_image: &'a str,
    /// The session's own writable places besides the policy's (its temp and shm dirs).
    pub session_dirs: &'a [&'a Path],
    /// Root's reads are judged by the guard, which keeps CAP_SETUID and CAP_SETGID.
    pub root_reads: bool,
    /// The sandbox's name server is there (`netproxy::lookups`): its `resolv.conf` on the
    /// host, mounted at `/etc/resolv.conf` (in place of the engine's own).
    pub resolv_conf: Option<&'a Path>,
}

/// `ENGINE run … IMAGE EXE __sbx_entry SOCKET -- HELPER-ARGS…`: `command` is the helper's
/// argv, whose first word (its path on the host) becomes `EXE`.
pub fn build_argv(inputs: &EngineInputs<'_>, command: &[OsString]) -> Vec<OsString> {
    let policy = inputs.policy;
    let mut a: Vec<String> = vec!["run".into(), "--rm".into()];
    flag(&mut a, "--name", inputs.name.into());
    flag(&mut a, "--label", format!("{LABEL}={}", inputs.supervisor));
    flag(&mut a, "--log-driver", "none".into());
    flag(
        &mut a,
        "--network",
        match policy.network {
            Network::Full => "host",
            Network::None | Network::Allow(_) => "none",
        }
        .into(),
    );
    if policy.network != Network::Full {
        // The helper opens the name server's port 53 in the container's network, without
        // CAP_NET_BIND_SERVICE (nothing else listens there: it is the session's own).
        flag(
            &mut a,
            "--sysctl",
            "net.ipv4.ip_unprivileged_port_start=53".into(),
        );
    }
    push_privileges(&mut a, inputs);
    let limits = &policy.limits;
    flag(
        &mut a,
        "--pids-limit",
        limits.session_processes.unwrap_or(DEFAULT_PIDS).to_string(),
    );
    if let Some(mib) = limits.session_memory_mib {
        flag(&mut a, "--memory", format!("{mib}m"));
        flag(&mut a, "--memory-swap", format!("{mib}m"));
    }
    let (uid, gid, groups) = inputs.user;
    flag(&mut a, "--user", format!("{uid}:{gid}"));
    for group in groups.iter().filter(|g| **g != gid) {
        flag(&mut a, "--group-add", group.to_string());
    }
    flag(
        &mut a,
        "--tmpfs",
        format!("/tmp:rw,nosuid,nodev,size={}m", limits.tmp_mib),
    );
    if inputs.container.engine == Engine::Podman {
        // Podman would put tmpfs over /run, /tmp and /var/tmp of a read-only root, and
        // its own /etc/passwd and /etc/group over the host's.
        a.push("--read-only-tmpfs=false".into());
        a.push("--passwd=false".into());
    }
    let settings = &policy.container;
    if settings.image.is_none() || settings.read_only_root {
        a.push("--read-only".into());
    }
    let image = match &settings.image {
        Some(image) => image.clone(),
        None => inputs.host_image.into(),
    };
    push_mounts(&mut a, inputs);
    flag(&mut a, "--workdir", inputs.cwd.display().to_string());
    a.extend(settings.run_args.iter().cloned());
    a.push(image);
    let mut argv: Vec<OsString> = vec![inputs.container.cli.as_os_str().to_owned()];
    argv.extend(a.into_iter().map(OsString::from));
    argv.extend([EXE.into(), ENTRY_ARG.into(), SOCKET.into(), "--".into()]);
    if let Some((_, rest)) = command.split_first() {
        argv.push(EXE.into());
        argv.extend(rest.iter().cloned());
    }
    argv
}

/// No capabilities, no new privileges — but what the helper needs for root's reads and
/// for the container's user — and the engine's seccomp profile where it allows that user.
fn push_privileges(a: &mut Vec<String>, inputs: &EngineInputs<'_>) {
    let policy = inputs.policy;
    flag(a, "--cap-drop", "ALL".into());
    if inputs.root_reads {
        for cap in ["SETUID", "SETGID", "SETPCAP"] {
            flag(a, "--cap-add", cap.into());
        }
    }
    if policy.container.user.is_some() && inputs.user.0 == 0 {
        // The kernel maps root's own id into a user namespace only for a holder of
        // CAP_SETFCAP (`ContainerSettings::user`); the program's side drops it with the
        // rest before it runs anything.
        flag(a, "--cap-add", "SETFCAP".into());
    }
    flag(a, "--security-opt", "no-new-privileges".into());
    if policy.container.user.is_some() && inputs.container.engine == Engine::Docker {
        // Docker's own seccomp profile refuses user namespaces, in which the program is
        // the container's user (`ContainerSettings::user`): sbx-shell's filter, which the
        // helper applies in any case, is then the only one (as under Landlock alone).
        flag(a, "--security-opt", "seccomp=unconfined".into());
    }
}

/// Each bind mount, in order (`mounts`), then sbx-shell's executable, the courier's
/// socket and the session's terminal.
fn push_mounts(a: &mut Vec<String>, inputs: &EngineInputs<'_>) {
    for (path, writable) in mounts(inputs) {
        let path = path.display();
        let ro = if writable { "" } else { ",readonly" };
        a.push("--mount".into());
        a.push(format!("type=bind,src={path},dst={path}{ro}"));
    }
    let exe = inputs.exe.display();
    a.push("--mount".into());
    a.push(format!("type=bind,src={exe},dst={EXE},readonly"));
    let socket = inputs.socket.display();
    a.push("--mount".into());
    a.push(format!("type=bind,src={socket},dst={SOCKET}"));
    if let Some(tty) = inputs.tty {
        a.push("--mount".into());
        a.push(format!("type=bind,src={},dst=/dev/console", tty.display()));
    }
    if let Some(resolv_conf) = inputs.resolv_conf {
        a.push("--mount".into());
        a.push(format!(
            "type=bind,src={},dst=/etc/resolv.conf,readonly",
            resolv_conf.display()
        ));
    }
}

/// The `run` options a policy may add (`ContainerSettings::run_args`), by name: each
/// leaves the isolation as it is — shares and ceilings of CPU and memory, ulimits, labels
/// and annotations, the host name, /dev/shm's size, which image variant and when to pull
/// it, extra host names, the stop timeout.
pub const RUN_ARGS_ALLOWED: &[&str] = &[
    "--cpus",
    "--cpu-shares",
    "--cpu-period",
    "--cpu-quota",
    "--cpuset-cpus",
    "--cpuset-mems",
    "--memory-reservation",
    "--blkio-weight",
    "--ulimit",
    "--label",
    "--annotation",
    "--hostname",
    "--shm-size",
    "--platform",
    "--pull",
    "--add-host",
    "--stop-timeout",
];

/// Why `run_args` cannot be passed, if one cannot: each must be one whole `--NAME=VALUE`
/// argument (a value of its own could be read as an option, or as the image), with a
/// name of `RUN_ARGS_ALLOWED` — any other could undo what the session promises
/// (`--privileged`, `--cap-add`, `--network`, `--volume`, `--env`, `--user`, `--pid`,
/// `--security-opt` …).
pub fn vet_run_args(run_args: &[String]) -> Result<(), String> {
    for arg in run_args {
        let name = arg.split('=').next().unwrap_or("");
        let whole = arg.contains('=') && !arg[name.len() + 1..].is_empty();
        if !RUN_ARGS_ALLOWED.contains(&name) || !whole {
            return Err(super::messages::run_arg_not_allowed(arg, RUN_ARGS_ALLOWED));
        }
    }
    Ok(())
}

/// The first path that `--mount` cannot carry as it is: its options are separated by
/// commas, so a path holding one would end `src=` early and begin an option of its own
/// choosing (`readonly=false`, another `dst=`); quotes and line ends are syntax to one
/// engine or another. Such a path is refused, never passed.
pub fn unmountable(inputs: &EngineInputs<'_>) -> Option<PathBuf> {
    let fixed = [
        Some(inputs.exe),
        Some(inputs.socket),
        inputs.tty,
        inputs.resolv_conf,
    ];
    mounts(inputs)
        .into_iter()
        .map(|(path, _)| path)
        .chain(fixed.into_iter().flatten().map(Path::to_path_buf))
        .find(|path| {
            path.as_os_str()
                .as_encoded_bytes()
                .iter()
                .any(|b| matches!(b, b',' | b'"' | b'\'' | b'\n' | b'\r'))
        })
}

fn flag(a: &mut Vec<String>, name: &str, value: String) {
    a.push(name.into());
    a.push(value);
}

/// The argument that makes sbx-shell the container's entry (`helper::container`).
pub const ENTRY_ARG: &str = "__sbx_entry";
/// The argument that makes sbx-shell the session's courier (`helper::container`).
pub const COURIER_ARG: &str = "__sbx_courier";

/// What is bind-mounted, in order, and whether read-write (`bind_mounts`).
fn mounts(inputs: &EngineInputs<'_>) -> Vec<(PathBuf, bool)> {
    bind_mounts(inputs.policy, inputs.top, inputs.session_dirs)
}

/// What is bind-mounted, in order, and whether read-write: the host's `/` entries `top`
/// (no image), then the writable places — the policy's and the session's own
/// directories — each under what is already mounted (a writable place inside another is
/// writable through it), and what the engine would not show of them.
///
/// The engine resolves each source path when it mounts, after sbx-shell looked: the
/// helper checks inside that each writable path is the directory sbx-shell saw
/// (`HelperSpec::mounted`), so a path switched for a symlink in between ends the session
/// before anything runs.
pub fn bind_mounts(
    policy: &Policy,
    top: &[PathBuf],
    session_dirs: &[&Path],
) -> Vec<(PathBuf, bool)> {
    let fs = &policy.filesystem;
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    let all_writable = fs.mode == crate::policy::config::FsMode::Unrestricted;
    if policy.container.image.is_none() {
        for entry in top {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !NOT_MOUNTED.contains(&name) {
                out.push((entry.clone(), all_writable));
            }
        }
    }
    // A temporary workspace is the container's own (its private /tmp), as is what the
    // policy grants in the host's /tmp, which the container does not show; the session's
    // own directories (its TMPDIR is one, under /tmp) are mounted wherever they are.
    let mut writable: Vec<&Path> = fs
        .writable_roots()
        .into_iter()
        .filter(|path| !path.starts_with("/tmp"))
        .collect();
    writable.extend(session_dirs.iter().copied());
    writable.sort();
    writable.dedup();
    for path in writable {
        let covered = out.iter().any(|(m, rw)| *rw && path.starts_with(m));
        if !covered && path != Path::new("/") {
            out.push((path.to_path_buf(), true));
        }
    }
    // The directories of the session's own sockets (its ssh agent's, with its ssh
    // wrapper), read-only: a socket is reached on a read-only mount too; and those it
    // made for the program to read.
    let mut own: Vec<&Path> = fs.own_sockets.iter().filter_map(|s| s.parent()).collect();
    own.extend(fs.own_dirs.iter().map(PathBuf::as_path));
    own.sort();
    own.dedup();
    for dir in own {
        if !out.iter().any(|(m, _)| dir.starts_with(m)) {
            out.push((dir.to_path_buf(), false));
        }
    }
    out
}

/// The image that holds the host's symlinks at `/` (`links`: name and target), named by
/// what it holds, so that a host whose links change gets another.
pub fn host_image(links: &[(String, PathBuf)]) -> String {
    // FNV-1a: a name, not a secret.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, target) in links {
        for byte in name
            .bytes()
            .chain([0])
            .chain(target.as_os_str().as_encoded_bytes().iter().copied())
            .chain([0])
        {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{HOST_IMAGE}:{hash:016x}")
}

/// The client's argv that asks whether `image` is there (exit 0) — which also tells
/// whether the engine answers at all.
pub fn inspect_argv(container: &Container, image: &str) -> Vec<OsString> {
    vec![
        container.cli.as_os_str().to_owned(),
        "image".into(),
        "inspect".into(),
        "--format".into(),
        "{{.Id}}".into(),
        image.into(),
    ]
}

/// The client's argv that makes `image` from a tar archive on its stdin.
pub fn import_argv(container: &Container, image: &str) -> Vec<OsString> {
    vec![
        container.cli.as_os_str().to_owned(),
        "import".into(),
        "-".into(),
        image.into(),
    ]
}

/// The client's argv that removes the container `name`, whatever its state.
pub fn remove_argv(container: &Container, name: &str) -> Vec<OsString> {
    vec![
        container.cli.as_os_str().to_owned(),
        "rm".into(),
        "--force".into(),
        name.into(),
    ]
}

/// Docker's client argv that prints where its engine is, as the client finds it
/// (`DOCKER_HOST`, `DOCKER_CONTEXT`, the current context); Podman's says it in
/// `CONTAINER_HOST` or by its name (`podman-remote`).
pub fn endpoint_argv(container: &Container) -> Option<Vec<OsString>> {
    (container.engine == Engine::Docker).then(|| {
        vec![
            container.cli.as_os_str().to_owned(),
            "context".into(),
            "inspect".into(),
            "--format".into(),
            "{{.Endpoints.docker.Host}}".into(),
        ]
    })
}

/// Why the engine at `endpoint` cannot run the session, if it cannot: an engine on another
/// machine (`tcp://`, `ssh://`) would mount that machine's paths, never this one's
/// workspace — and the courier's socket, which only this machine has.
pub fn remote(engine: Engine, endpoint: &str) -> Option<String> {
    let endpoint = endpoint.trim();
    let local = endpoint.is_empty() || endpoint.starts_with("unix://");
    let name = engine.name();
    let unset = match engine {
        Engine::Docker => "unset DOCKER_HOST or `docker context use default`",
        Engine::Podman => "unset CONTAINER_HOST and run the local `podman`",
    };
    (!local).then(|| super::messages::engine_elsewhere(name, endpoint, unset))
}

/// The client's argv that says which limits its engine can enforce (`unenforced` reads
/// what it prints).
pub fn info_argv(container: &Container) -> Vec<OsString> {
    let format = match container.engine {
        Engine::Docker => "{{.MemoryLimit}} {{.PidsLimit}}",
        Engine::Podman => "{{.Host.CgroupControllers}}",
    };
    vec![
        container.cli.as_os_str().to_owned(),
        "info".into(),
        "--format".into(),
        format.into(),
    ]
}

/// The session limit asked for (`memory`, `pids`) that the engine cannot enforce, by what
/// `info_argv` printed, as an error with its fix: an engine without the cgroup controller
/// starts the container without the limit, with only a warning.
pub fn unenforced(engine: Engine, info: &str, memory: bool, pids: bool) -> Option<String> {
    let (has_memory, has_pids) = match engine {
        Engine::Docker => {
            let mut words = info.split_whitespace();
            (words.next() == Some("true"), words.next() == Some("true"))
        }
        Engine::Podman => {
            let controllers: Vec<&str> = info
                .trim_matches(|c: char| c == '[' || c == ']' || c.is_whitespace())
                .split_whitespace()
                .collect();
            (
                controllers.contains(&"memory"),
                controllers.contains(&"pids"),
            )
        }
    };
    let (option, controller) = match () {
        () if memory && !has_memory => ("--session-memory-mib", "memory"),
        () if pids && !has_pids => ("--session-processes", "pids"),
        () => return None,
    };
    Some(super::messages::limit_unenforced(
        engine.name(),
        option,
        controller,
    ))
}

/// What the engine's client said when it could not do what was asked, as an error with
/// its fix: the daemon not running, no access to its socket, a missing image.
pub fn client_error(engine: Engine, image: &str, said: &str) -> String {
    let said = said.trim();
    super::messages::engine_unusable(engine.name(), said, client_fix(engine, image, said))
}

/// The fix for what the engine's client said (`client_error`).
fn client_fix(engine: Engine, image: &str, said: &str) -> String {
    let name = engine.name();
    let lower = said.to_lowercase();
    if lower.contains("permission denied") {
        match engine {
            Engine::Docker => "this user may not use the Docker engine's socket: add it to the `docker` group (then \
                log in again), or use --backend bwrap".to_string(),
            Engine::Podman => "this user may not reach Podman's socket or storage: check `podman info` as this user, \
                or use --backend bwrap".to_string(),
        }
    } else if lower.contains("cannot connect")
        || lower.contains("is the docker daemon running")
        || lower.contains("connection refused")
    {
        format!(
            "start the engine (e.g. `systemctl start {name}`), or point {} at it",
            match engine {
                Engine::Docker => "DOCKER_HOST or a docker context",
                Engine::Podman => "CONTAINER_HOST",
            }
        )
    } else if lower.contains("no such image")
        || lower.contains("image not known")
        || lower.contains("no such object")
    {
        format!("pull or build it first (`{name} pull {image}`), or leave out --image to run the host's own files")
    } else {
        format!("`{name} info` shows what the engine says about itself; or use --backend bwrap")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;

    fn container() -> Container {
        Container {
            engine: Engine::Docker,
            cli: "/usr/bin/docker".into(),
        }
    }

    fn argv(policy: &Policy, root_reads: bool) -> Vec<String> {
        argv_of(policy, root_reads, (Engine::Docker, 1000))
    }

    fn argv_of(policy: &Policy, root_reads: bool, (engine, uid): (Engine, u32)) -> Vec<String> {
        let c = Container {
            engine,
            ..container()
        };
        let top: Vec<PathBuf> = ["/etc", "/home", "/proc", "/run", "/tmp", "/usr", "/var"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let groups = [1000, 27];
        let inputs = EngineInputs {
            container: &c,
            policy,
            name: "sbx-shell-42-1",
            supervisor: 42,
            user: (uid, uid, &groups),
            exe: Path::new("/usr/local/bin/sbx-shell"),
            socket: Path::new("/home/u/.local/state/sbx-shell/c/courier.sock"),
            cwd: Path::new("/home/u/ws"),
            tty: None,
            top: &top,
            host_image: "sbx-shell-host:0123456789abcdef",
            session_dirs: &[Path::new("/tmp/sbx-shell-1000/session-1")],
            root_reads,
            resolv_conf: (policy.network != Network::Full)
                .then(|| Path::new("/home/u/.local/state/sbx-shell/c/resolv.conf")),
        };
        let command: Vec<OsString> = ["/proc/self/exe", "__sbx_helper", "5", "sh", "sh"]
            .map(OsString::from)
            .to_vec();
        build_argv(&inputs, &command)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn the_host_files_run_in_the_empty_image_with_nothing_but_the_helper_on_the_command_line() {
        let policy = policy_with("/home/u/ws", "{}");
        let got = argv(&policy, false);
        let want = [
            "/usr/bin/docker", "run", "--rm", "--name", "sbx-shell-42-1",
            "--label", "sbx-shell.supervisor=42", "--log-driver", "none",
            "--network", "none", "--sysctl", "net.ipv4.ip_unprivileged_port_start=53",
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--pids-limit", "4096",
            "--user", "1000:1000", "--group-add", "27",
            "--tmpfs", &format!("/tmp:rw,nosuid,nodev,size={}m", policy.limits.tmp_mib),
            "--read-only",
            "--mount", "type=bind,src=/etc,dst=/etc,readonly",
            "--mount", "type=bind,src=/home,dst=/home,readonly",
            "--mount", "type=bind,src=/usr,dst=/usr,readonly",
            "--mount", "type=bind,src=/var,dst=/var,readonly",
            "--mount", "type=bind,src=/home/u/.local/state/sbx-shell/home/test,dst=/home/u/.local/state/sbx-shell/home/test",
            "--mount", "type=bind,src=/home/u/ws,dst=/home/u/ws",
            "--mount", "type=bind,src=/tmp/sbx-shell-1000/session-1,dst=/tmp/sbx-shell-1000/session-1",
            "--mount", "type=bind,src=/usr/local/bin/sbx-shell,dst=/.sbx-shell/sbx-shell,readonly",
            "--mount", "type=bind,src=/home/u/.local/state/sbx-shell/c/courier.sock,dst=/.sbx-shell/courier.sock",
            "--mount", "type=bind,src=/home/u/.local/state/sbx-shell/c/resolv.conf,dst=/etc/resolv.conf,readonly",
            "--workdir", "/home/u/ws", "sbx-shell-host:0123456789abcdef",
            "/.sbx-shell/sbx-shell", "__sbx_entry", "/.sbx-shell/courier.sock", "--",
            "/.sbx-shell/sbx-shell", "__sbx_helper", "5", "sh", "sh",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_image_root_and_limits_change_only_their_own_flags() {
        let mut policy = policy_with("/home/u/ws", "{}");
        policy.container.image = Some("debian:bookworm".into());
        policy.limits.session_processes = Some(64);
        policy.limits.session_memory_mib = Some(512);
        let got = argv(&policy, true);
        let has = |w: &[&str]| got.windows(w.len()).any(|x| x == w);
        assert!(
            !got.iter().any(|a| a.contains("/dev/console")),
            "no pty: {got:?}"
        );
        assert!(has(&["--pids-limit", "64"]));
        assert!(has(&["--memory", "512m", "--memory-swap", "512m"]));
        assert!(has(&[
            "--cap-drop",
            "ALL",
            "--cap-add",
            "SETUID",
            "--cap-add",
            "SETGID"
        ]));
        assert!(!got.contains(&"--read-only".to_string()));
        assert!(!got.iter().any(|a| a.contains("src=/usr,")), "{got:?}");
        assert!(has(&["--workdir", "/home/u/ws", "debian:bookworm", EXE]));
        assert!(has(&["--mount", "type=bind,src=/home/u/ws,dst=/home/u/ws"]));
    }

    #[test]
    fn a_temporary_workspace_is_not_mounted_and_full_network_is_the_hosts() {
        let mut policy = policy_with("/tmp/ws", "{}");
        policy.network = Network::Full;
        let got = argv(&policy, false);
        assert!(!got.iter().any(|a| a.contains("/tmp/ws")), "{got:?}");
        let mounts_session_tmp = got.iter().any(|a| {
            a == "type=bind,src=/tmp/sbx-shell-1000/session-1,dst=/tmp/sbx-shell-1000/session-1"
        });
        assert!(
            mounts_session_tmp,
            "the session's own directories are mounted: {got:?}"
        );
        assert!(got.windows(2).any(|w| w == ["--network", "host"]));
        // The host's names, as bare: no name server of the session's.
        assert!(!got
            .iter()
            .any(|a| a.contains("resolv.conf") || a.contains("--sysctl")));
    }

    #[test]
    fn a_container_user_gives_docker_sbx_shells_filter_alone_and_root_the_map_of_its_own_id() {
        let mut policy = policy_with("/home/u/ws", "{}");
        let plain = argv_of(&policy, true, (Engine::Docker, 0));
        policy.container.user = crate::policy::ContainerUser::parse("node");
        let has = |got: &[String], w: &[&str]| got.windows(w.len()).any(|x| x == w);
        let unconfined = ["--security-opt", "seccomp=unconfined"];
        let setfcap = ["--cap-add", "SETFCAP"];
        // Without a user: the engine's own profile, no CAP_SETFCAP.
        assert!(
            !has(&plain, &unconfined) && !has(&plain, &setfcap),
            "{plain:?}"
        );
        let docker_root = argv_of(&policy, true, (Engine::Docker, 0));
        assert!(has(&docker_root, &unconfined) && has(&docker_root, &setfcap));
        let docker_user = argv_of(&policy, false, (Engine::Docker, 1000));
        assert!(has(&docker_user, &unconfined) && !has(&docker_user, &setfcap));
        // Podman's own profile allows user namespaces: it stays.
        let podman_root = argv_of(&policy, true, (Engine::Podman, 0));
        assert!(!has(&podman_root, &unconfined) && has(&podman_root, &setfcap));
        // The engine still starts the container as the invoking user.
        assert!(
            has(&docker_user, &["--user", "1000:1000"]),
            "{docker_user:?}"
        );
    }

    #[test]
    fn run_args_that_keep_the_isolation_pass_and_the_rest_are_refused() {
        assert_eq!(
            vet_run_args(&["--cpus=1.5".into(), "--label=team=a".into()]),
            Ok(())
        );
        for bad in [
            "--privileged",
            "--cap-add=SYS_ADMIN",
            "--network=host",
            "--volume=/:/host",
            "--env=TOKEN=x",
            "--user=0",
            "--cpus",
            "--cpus=",
            "-v=/:/h",
            "debian",
        ] {
            let e = vet_run_args(&[bad.to_string()]).unwrap_err();
            assert!(e.contains("Hint:") && e.contains("--cpus"), "{bad}: {e}");
        }
        let mut policy = policy_with("/home/u/ws", "{}");
        policy.container.image = Some("debian:bookworm".into());
        policy.container.read_only_root = true;
        policy.container.run_args = vec!["--cpus=2".into()];
        let got = argv(&policy, false);
        let image = got.iter().position(|a| a == "debian:bookworm").unwrap();
        assert_eq!(got[image - 1], "--cpus=2", "just before the image: {got:?}");
        assert!(got.contains(&"--read-only".to_string()), "{got:?}");
    }

    #[test]
    fn an_engine_on_another_machine_is_refused() {
        assert_eq!(
            remote(Engine::Docker, "unix:///var/run/docker.sock\n"),
            None
        );
        assert_eq!(remote(Engine::Podman, ""), None);
        for far in ["tcp://10.0.0.2:2376", "ssh://me@build-host"] {
            let e = remote(Engine::Docker, far).unwrap();
            assert!(
                e.contains(far) && e.contains("Hint: use an engine on this machine"),
                "{e}"
            );
        }
        assert!(remote(Engine::Podman, "remote")
            .unwrap()
            .contains("CONTAINER_HOST"));
    }

    #[test]
    fn a_path_with_a_comma_is_refused_not_passed() {
        let c = container();
        let policy = policy_with("/home/u/ws,readonly=false", "{}");
        let inputs = EngineInputs {
            container: &c,
            policy: &policy,
            name: "n",
            supervisor: 1,
            user: (1000, 1000, &[]),
            exe: Path::new("/usr/bin/sbx-shell"),
            socket: Path::new("/s/courier.sock"),
            cwd: Path::new("/"),
            tty: None,
            top: &[],
            host_image: "i",
            session_dirs: &[],
            root_reads: false,
            resolv_conf: None,
        };
        assert_eq!(
            unmountable(&inputs),
            Some(PathBuf::from("/home/u/ws,readonly=false"))
        );
        let policy = policy_with("/home/u/ws", "{}");
        let inputs = EngineInputs {
            policy: &policy,
            ..inputs
        };
        assert_eq!(unmountable(&inputs), None);
    }

    #[test]
    fn the_host_image_is_named_by_its_links() {
        let links = |t: &str| vec![("bin".to_string(), PathBuf::from(t))];
        assert_eq!(host_image(&links("usr/bin")), host_image(&links("usr/bin")));
        assert_ne!(
            host_image(&links("usr/bin")),
            host_image(&links("usr/sbin"))
        );
        assert!(host_image(&[]).starts_with("sbx-shell-host:"));
    }

    #[test]
    fn a_limit_the_engine_cannot_enforce_is_named() {
        assert_eq!(unenforced(Engine::Docker, "true true\n", true, true), None);
        let e = unenforced(Engine::Docker, "false true\n", true, false).unwrap();
        assert!(
            e.contains("--session-memory-mib") && e.contains("Hint:"),
            "{e}"
        );
        assert_eq!(
            unenforced(Engine::Docker, "false false", false, false),
            None
        );
        let controllers = "[cpuset cpu io memory hugetlb pids rdma misc]";
        assert_eq!(unenforced(Engine::Podman, controllers, true, true), None);
        let e = unenforced(Engine::Podman, "[cpu io memory]", false, true).unwrap();
        assert!(
            e.contains("--session-processes") && e.contains("pids"),
            "{e}"
        );
    }

    #[test]
    fn the_clients_complaints_get_their_fix() {
        let said = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?";
        let e = client_error(Engine::Docker, "x", said);
        assert!(e.contains("Hint: start the engine"), "{e}");
        let e = client_error(
            Engine::Docker,
            "x",
            "permission denied while trying to connect",
        );
        assert!(e.contains("`docker` group"), "{e}");
        let e = client_error(Engine::Podman, "nope:1", "Error: nope:1: image not known");
        assert!(e.contains("podman pull nope:1"), "{e}");
    }
}
