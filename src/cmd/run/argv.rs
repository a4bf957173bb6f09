//! Steps 5 and 7 of a run: the in-process layers built (a policy a layer refuses fails
//! here, before the terminal is touched), and the helper's argv built once, wrapped in
//! the launcher, with the pipes that carry its spec and bwrap's options.

use super::container::ContainerPlace;
use super::context::Run;
use super::environment::{Places, SessionDirs};
use super::prepare::Plan;
use crate::helper::spec::{self as helper_spec, HelperSpec, ProcessLimits, ProxyListen};
use crate::netproxy;
use crate::netproxy::session::ProxySession;
use crate::policy::program;
use crate::policy::report::Cause;
use crate::policy::Policy;
use crate::sandbox::{self, Backend, InProcess};
use crate::session::{Session, SessionOptions, Timeout};
use crate::sys::exit::Failure;
use crate::sys::process;
use anyhow::Context as _;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

/// Step 5: what the helper applies to itself before exec; a layer that refuses the policy
/// fails here, before the terminal is touched. Landlock alone reads the allow-list of
/// tools from the program's `PATH`.
pub(super) fn confine(
    run: &Run,
    places: &Places,
    env: &[(OsString, OsString)],
) -> Result<InProcess, Failure> {
    let (plan, backend) = (&run.plan, &run.backend);
    let tools = match backend {
        Backend::Landlock | Backend::Container(_) => {
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_os_str());
            program::tool_dirs(path, &plan.launch.program)
        }
        _ => Vec::new(),
    };
    let dirs = places.dirs();
    let ctx = sandbox::Context {
        place: &run.host.place,
        tty: None,
        proxy_port: run.net().and_then(|n| n.port),
        helper_fd: None,
        git_dirs: &places.git.git_dirs,
        temp_dir: dirs.temp,
        shm_dir: dirs.shm,
        name_server: None,
        tools: &tools,
        root_reads: plan.root_reads,
        container: None,
    };
    Ok(sandbox::in_process(backend, &plan.policy, &ctx)?)
}

/// Landlock alone: the rules by which the guard answers the calls Landlock cannot judge
/// (`mediator`).
fn mediated_rules(
    run: &Run,
    layers: &InProcess,
    shm: Option<&Path>,
) -> Option<crate::helper::mediator::Scope> {
    let plan = &run.plan;
    let (true, Some(ruleset)) = (layers.mediate, &layers.landlock) else {
        return None;
    };
    let protected = plan
        .policy
        .filesystem
        .protected
        .iter()
        .map(|p| p.real().to_path_buf())
        .collect();
    let scope = crate::helper::mediator::Scope::from_ruleset(
        ruleset,
        protected,
        shm.map(Path::to_path_buf),
        run.net().and_then(|n| n.name_service.clone()),
        plan.policy.filesystem.own_sockets.clone(),
    );
    Some(crate::helper::mediator::Scope {
        services: plan.policy.network.loopback_ports(),
        ..scope
    })
}

/// What runs the helper: its argv, wrapped in the backend's launcher, and what must stay
/// open while the session runs — the executable's descriptor, the lifeline, and the pipes
/// the launcher and the helper read the rest from (the spec; bwrap's options): nothing of
/// the policy is in an argv.
pub(super) struct Launcher {
    pub(super) argv: Vec<OsString>,
    _helper: HelperExe,
    _lifeline: process::Lifeline,
    _handovers: Vec<process::Handover>,
    /// The write end of the pipe the guard reports its refusals on (inherited by it).
    _reports: Option<std::os::fd::OwnedFd>,
    /// A container session's place (its courier's directory goes with it).
    _container: Option<ContainerPlace>,
}

impl Launcher {
    /// Step 7, once the session has its terminal.
    pub(super) fn build(
        run: &Run,
        layers: &InProcess,
        places: &Places,
        session: &Session,
        helper: HelperExe,
    ) -> Result<Launcher, Failure> {
        let (plan, backend, host, net) = (&run.plan, &run.backend, &run.host, run.net());
        let lifeline = process::Lifeline::new().context("cannot create the lifeline pipe")?;
        let reports = match layers.guard {
            true => Some(reports_pipe(run)?),
            false => None,
        };
        let dirs = places.dirs();
        let container = container_place(run)?;
        let mut spec = helper_spec(run, layers, session, &lifeline, dirs);
        spec.refusals_fd = reports.as_ref().map(AsRawFd::as_raw_fd);
        if let Some(place) = &container {
            spec.mounted = place.mounted(&plan.policy, &[dirs.temp, dirs.shm])?;
            spec.shown_as = plan.policy.container.user.clone();
        }
        if let Some(root_as) = &plan.root_as {
            let fs = &plan.policy.filesystem;
            let cwd = host.place.cwd.as_deref().unwrap_or(fs.workspace.real());
            hand_over_root_as(root_as, fs, cwd, session.tty(), &mut spec)?;
        }
        let spec = handover(helper_spec::spec_bytes(&spec)?)?;
        let helper_argv =
            helper_spec::build_helper_argv(&helper.path, spec.child_fd(), &plan.launch);
        let resolv_conf = bwrap_resolv_conf(backend, net)?;
        let launch = container.as_ref().map(ContainerPlace::launch);
        let ctx = sandbox::Context {
            place: &host.place,
            tty: session.tty(),
            proxy_port: net.and_then(|n| n.port),
            helper_fd: helper.fd.as_ref().map(|(fd, copy)| match copy {
                true => sandbox::bwrap::HelperFd::Copy(fd.as_raw_fd()),
                false => sandbox::bwrap::HelperFd::Bind(fd.as_raw_fd()),
            }),
            git_dirs: &places.git.git_dirs,
            temp_dir: dirs.temp,
            shm_dir: dirs.shm,
            name_server: net
                .and_then(|n| n.lookups.as_ref())
                .map(|_| sandbox::bwrap::NameServer {
                    resolv_conf: resolv_conf
                        .as_ref()
                        .map(|(data, real)| (data.child_fd(), real.as_path())),
                }),
            tools: &[],
            root_reads: plan.root_reads,
            container: launch.as_ref(),
        };
        let argv = sandbox::wrap(backend, &plan.policy, &ctx, &helper_argv)?;
        let mut handovers = vec![spec];
        let argv = match backend {
            Backend::Bwrap { .. } => {
                let (options, rest) = sandbox::bwrap::split_options(argv);
                let options = handover(options)?;
                let argv = sandbox::bwrap::with_options_from(rest, options.child_fd());
                handovers.push(options);
                handovers.extend(resolv_conf.map(|(data, _)| data));
                argv
            }
            _ => match &container {
                Some(place) => courier(place, &helper.path, &lifeline, argv, &mut handovers)?,
                None => argv,
            },
        };
        Ok(Launcher {
            argv,
            _helper: helper,
            _lifeline: lifeline,
            _handovers: handovers,
            _reports: reports,
            _container: container,
        })
    }
}

/// Under bwrap with the sandbox's name server: its `resolv.conf`, handed over to be put
/// over the host's file's real path (a container's is a file of its place's).
fn bwrap_resolv_conf(
    backend: &Backend,
    net: Option<&ProxySession>,
) -> Result<Option<(process::Handover, PathBuf)>, Failure> {
    let name_server = net.is_some_and(|n| n.lookups.is_some());
    if !name_server || !matches!(backend, Backend::Bwrap { .. }) {
        return Ok(None);
    }
    resolv_conf_over_host()
        .map(|real| Ok((handover(netproxy::lookups::RESOLV_CONF.into())?, real)))
        .transpose()
}

/// The engine's argv wrapped in the courier's, the client's variables handed over.
fn courier(
    place: &ContainerPlace,
    exe: &Path,
    lifeline: &process::Lifeline,
    engine: Vec<OsString>,
    handovers: &mut Vec<process::Handover>,
) -> Result<Vec<OsString>, Failure> {
    let client_env = handover(super::container::client_env_bytes())?;
    let argv = place.courier_argv(exe, client_env.child_fd(), lifeline.child_fd(), engine);
    handovers.push(client_env);
    Ok(argv)
}

/// A container session's place (`cmd::run::container`), for a container backend; with
/// the sandbox's name server's `resolv.conf` when `net` has one.
fn container_place(run: &Run) -> Result<Option<ContainerPlace>, Failure> {
    let Backend::Container(container) = &run.backend else {
        return Ok(None);
    };
    let fs = &run.plan.policy.filesystem;
    let cwd = run.host.place.cwd.as_deref().unwrap_or(fs.workspace.real());
    Ok(Some(ContainerPlace::make(
        container,
        &run.plan.home,
        cwd,
        run.net().is_some_and(|n| n.lookups.is_some()),
    )?))
}

/// The pipe the guard reports its refusals on: its read end to the journal (each report
/// judged by the policy, `refusal::of_write`); its write end returned, non-blocking, for
/// the guard to inherit.
fn reports_pipe(run: &Run) -> Result<std::os::fd::OwnedFd, Failure> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
    let pipe = || -> nix::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
        let (read, write) = nix::unistd::pipe()?;
        fcntl(read.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(write.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok((read, write))
    };
    let (read, write) = pipe().context("cannot create the pipe for the guard's refusals")?;
    let grounds = run.grounds();
    run.journal
        .listen(read, move |cause, path, about| {
            let judged = grounds.of_write(cause, path, about);
            (cause != Cause::Connect || refused_connect(about)).then_some(judged)
        })
        .context("cannot start reading the guard's refusals")?;
    Ok(write)
}

/// Whether a connection the guard reported was the sandbox's refusal: one to a loopback
/// port only when a service of the host's listens there (the guard under bwrap reports
/// every loopback port closed in the sandbox's network; where the host has nothing there
/// either, the bare run is refused the same).
fn refused_connect(about: &str) -> bool {
    match about.parse::<std::net::SocketAddr>() {
        Ok(to) if to.ip().is_loopback() => crate::host::sockets::tcp_listens(to.port()),
        _ => true,
    }
}

/// A pipe that hands `bytes` to the helper or the launcher (`process::Handover`).
fn handover(bytes: Vec<u8>) -> Result<process::Handover, Failure> {
    Ok(process::Handover::new(bytes).context("cannot create a pipe to the sandbox's helper")?)
}

/// The helper's instructions (`helper::spec`), built from the plan and the layers.
fn helper_spec(
    run: &Run,
    layers: &InProcess,
    session: &Session,
    lifeline: &process::Lifeline,
    dirs: SessionDirs<'_>,
) -> HelperSpec {
    let plan = &run.plan;
    HelperSpec {
        new_session: session.is_pty(),
        limits: ProcessLimits::from_policy(
            &plan.policy.limits,
            run.host.machine.nofile.map(|(soft, _)| soft),
        ),
        drop_privileges: layers.drop_privileges,
        landlock: layers.landlock.clone(),
        seccomp: layers.seccomp.clone(),
        guard: layers.guard,
        stop_notify_fd: session.stop_notify_fd().filter(|_| layers.guard),
        lifeline_fd: layers.guard.then(|| lifeline.child_fd()),
        mounts: layers.mounts.clone(),
        mounted: Vec::new(),
        shown_as: None,
        proxy_listen: run.net().and_then(|n| {
            n.channel.as_ref().map(|fd| ProxyListen {
                port: n.port.unwrap_or(netproxy::SANDBOX_PORT),
                channel_fd: fd.as_raw_fd(),
                unshare: n.unshare,
                lookups_fd: n.lookups.as_ref().map(AsRawFd::as_raw_fd),
                services: plan.policy.network.loopback_ports(),
                services_fd: n.services.as_ref().map(AsRawFd::as_raw_fd),
                sockets_fd: n.sockets.as_ref().map(AsRawFd::as_raw_fd),
            })
        }),
        mediated: mediated_rules(run, layers, dirs.shm),
        names: layers.names.clone(),
        refusals_fd: None,
        root_as: None,
        root_reads: plan.root_reads.then(|| root_reads(plan, dirs)),
    }
}

/// Root's reads judged by the guard (`Plan::root_reads`): as the id that stands for an
/// ordinary user, around what the policy grants, the session's own places and `/dev`
/// (whose devices the program's rules pick).
fn root_reads(plan: &Plan, dirs: SessionDirs<'_>) -> crate::helper::mediator::RootReads {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let mut grants = crate::sandbox::rootas::granted(&plan.policy.filesystem);
    grants.extend(
        [dirs.temp, dirs.shm]
            .into_iter()
            .flatten()
            .map(Path::to_path_buf),
    );
    grants.push(PathBuf::from("/dev"));
    crate::helper::mediator::RootReads {
        id: crate::sandbox::rootas::unused_id(
            &read("/etc/passwd"),
            &read("/etc/group"),
            &read("/etc/subuid"),
            &read("/etc/subgid"),
        ),
        grants: crate::sandbox::rootas::outermost(grants),
    }
}

/// The real path of the host's `/etc/resolv.conf` when it is a file (a symlink on many
/// hosts: the sandbox's is put over its target), for the sandbox's name server.
fn resolv_conf_over_host() -> Option<PathBuf> {
    let real = std::fs::canonicalize("/etc/resolv.conf").ok()?;
    real.metadata().ok()?.is_file().then_some(real)
}

/// The executable the helper runs from: the very file this process runs (an upgrade may
/// have replaced or deleted its path since), reachable wherever the launcher puts the
/// sandbox's view of the host — `/tmp` is private in bwrap, and the path may be denied.
pub(super) struct HelperExe {
    /// The path the launcher execs (bwrap is given `fd` and execs its own copy's path).
    pub(super) path: PathBuf,
    /// Linux: an fd of the running executable, inherited by the launcher, and whether its
    /// path was deleted (then the launcher must copy it: there is no path left to bind).
    pub(super) fd: Option<(std::os::fd::OwnedFd, bool)>,
}

pub(super) fn session_options(policy: &Policy, layers: &InProcess) -> SessionOptions {
    SessionOptions {
        timeout: policy.limits.timeout_seconds.map(|after| Timeout {
            after: std::time::Duration::from_secs(after),
            grace: std::time::Duration::from_secs(policy.limits.timeout_grace_seconds),
        }),
        launcher_depth: layers.launcher_depth,
        cgroup: None,
        clipboard: policy.clipboard,
    }
}

/// `root_as` handed to the helper: the namespace's descriptor inherited, named in `spec`
/// with what is mounted for the program (`rootas::mounts`, from `fs` as it now is); the
/// session's own terminal (`tty`, the inner pty) given to the program's id, as a login
/// gives the user's terminal to the user: its name opens it (`/dev/console` under bwrap).
fn hand_over_root_as(
    root_as: &crate::sandbox::rootas::RootAs,
    fs: &crate::policy::Filesystem,
    cwd: &Path,
    tty: Option<&Path>,
    spec: &mut HelperSpec,
) -> Result<(), Failure> {
    use anyhow::Context as _;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    nix::fcntl::fcntl(
        &root_as.userns,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .context("cannot hand the user namespace over")?;
    let id = root_as.id;
    if let Some(tty) = tty {
        std::os::unix::fs::chown(tty, Some(id), Some(id))
            .with_context(|| format!("cannot give {} to the program", tty.display()))?;
    }
    let searchable = |dir: &std::path::Path| {
        std::fs::metadata(dir)
            .map(|m| m.mode() & 0o001 != 0 || m.uid() == id || m.gid() == id)
            .unwrap_or(true)
    };
    let (idmapped, scaffolds) = crate::sandbox::rootas::mounts(fs, cwd, &searchable);
    spec.root_as = Some(crate::helper::spec::RootAsSpec {
        userns_fd: root_as.userns.as_raw_fd(),
        id,
        idmapped,
        scaffolds,
    });
    Ok(())
}
