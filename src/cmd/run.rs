//! What sbx-shell does without a subcommand: run the program in the sandbox. One straight
//! path, each step a short function with plain data in and out, read top to bottom:
//!
//! 1. resolve the request and the policy (`resolve`): the real shell, the launch plan, the
//!    program checked, the profile, the configuration layers;
//! 2. measure the host, once (`host::Host`), with bwrap's probe when the policy may use it
//!    (`measure_host`);
//! 3. choose the backend from the host facts, refuse a missing required layer, and name
//!    each layer `auto` wanted but cannot run (`choose_backend`);
//! 4. prepare the network: the proxy and the name server, for an allow-list or no network
//!    (`start_network`);
//! 5. build the in-process layers, so that a policy a layer refuses fails before the
//!    terminal is touched (`confine`), and the child's environment;
//! 6. open the session (`session::Session::open`: the terminal raw, the inner pty);
//! 7. build the argv once: the helper's, wrapped in the sandbox (`build_argv`);
//! 8. run it until the end (`Session::run`);
//! 9. record it: the network summary and the session log (`record`).
//!
//! Nothing below calls back up into this file.

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, Context as _};

use crate::cli::{Cli, PtyMode};
use crate::cmd::inputs;
use crate::helper::spec::{self as helper_spec, HelperSpec, ProcessLimits, ProxyListen};
use crate::host::{self, Host, Probes};
use crate::netproxy;
use crate::netproxy::session::ProxySession;
use crate::policy::launch::{self, Launch, Request};
use crate::policy::profiles;
use crate::policy::program;
use crate::policy::shell;
use crate::policy::Policy;
use crate::sandbox::{self, select, Backend, InProcess};
use crate::session::cgroup;
use crate::session::log;
use crate::session::pty;
use crate::session::temp::SessionTemp;
use crate::session::{Child, Session, SessionOptions, Timeout};
use crate::sys::exit::Failure;
use crate::sys::process;
use crate::sys::say::Verbosity;

/// What the request and the policy resolved to.
struct Plan {
    home: PathBuf,
    launch: Launch,
    policy: Policy,
}

pub fn main(cli: Cli, login_arg0: bool) -> Result<u8, Failure> {
    let started = SystemTime::now();
    let say = Verbosity {
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    process::install_subreaper();
    pty::install_panic_hook();
    let plan = resolve(&cli, login_arg0, say)?;
    create_own_dirs(&plan.home)?;
    let host = measure_host(&plan);
    let backend = choose_backend(&plan, &host, say)?;
    let net = start_network(&plan, &backend, &cli.resolve, say)?;
    create_state(&plan.policy, say)?;
    let git = crate::protect::repos::scan_writable(&plan.policy);
    let temp = session_temp(&plan, &backend)?;
    let shm = session_shm(&plan, &backend)?;
    let dirs = SessionDirs {
        temp: temp.as_ref().map(SessionTemp::path),
        shm: shm.as_ref().map(SessionTemp::path),
    };
    let inherited: Vec<_> = std::env::vars_os().collect();
    let env = launch::child_env(
        plan.policy.environment.apply(
            inherited.iter().cloned(),
            backend.name(),
            &crate::host::sockets::variable_check(
                &plan.policy,
                host.place.runtime_dir.as_deref(),
                &inherited,
                backend != Backend::None,
            ),
        ),
        net.as_ref().and_then(|n| n.port).map(netproxy::proxy_env),
        [
            private_home_env(&plan),
            temp_env(&plan, temp.as_ref()),
            no_network_env(&plan),
        ]
        .concat(),
        &plan.launch.shell,
    );
    // Only Landlock alone reads an allow-list.
    let tools = if backend == Backend::Landlock {
        program::tool_dirs(
            env.iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_os_str()),
            &plan.launch.program,
        )
    } else {
        Vec::new()
    };
    let layers = confine(&plan, &backend, &host, net.as_ref(), (&git, dirs, &tools))?;
    #[cfg(target_os = "linux")]
    if layers.names.is_some() {
        if let Some(line) = linked_note(&sandbox::linked_protected_files(
            &plan.policy,
            &git.git_dirs,
        )) {
            say.note(&line);
        }
    }
    let cgroup = cgroup::SessionCgroup::create(cgroup::SessionLimits {
        pids: plan.policy.limits.session_processes,
        memory_bytes: plan
            .policy
            .limits
            .session_memory_mib
            .map(|m| m.saturating_mul(1024 * 1024)),
    })
    .map_err(anyhow::Error::from)?;
    if let Some(cgroup) = &cgroup {
        say.detail(&format!(
            "sbx-shell: the session's cgroup is {}",
            cgroup.dir().display()
        ));
    }
    let watch = Watch::start(
        &plan,
        (&backend, layers.names.is_some()),
        &git,
        &env,
        (started, say),
    )?;
    let session = Session::open(wants_pty(
        cli.pty,
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ))?;
    let helper = HelperExe::open()?;
    let lifeline = process::Lifeline::new().context("cannot create the lifeline pipe")?;
    let (argv, _handovers) = build_argv(
        &plan,
        &backend,
        &host,
        &layers,
        net.as_ref(),
        &session,
        Handed {
            helper: &helper,
            lifeline: &lifeline,
            git: &git,
            dirs,
        },
    )?;
    let child = Child {
        argv,
        env,
        options: SessionOptions {
            cgroup: cgroup.as_ref().map(cgroup::SessionCgroup::fds),
            ..session_options(&plan.policy, &layers)
        },
    };
    let code = session.run(&child).map(|ended| {
        if ended.clipboard_refused > 0 {
            say.note(&clipboard_line(
                ended.clipboard_refused,
                plan.policy.clipboard,
            ));
        }
        ended.code
    });
    if let Some(cgroup) = cgroup {
        cgroup.end();
    }
    drop(temp);
    let (planted, ended_by_guard) = watch.finish(&plan.policy);
    record(
        &plan,
        &backend,
        &host,
        started,
        (&code, &planted, ended_by_guard),
        net.as_ref(),
        say,
    );
    code.with_context(|| format!("cannot run {}", plan.launch.program.to_string_lossy()))
        .map_err(Failure::from)
}

/// Step 1: the real shell, the launch plan (the program checked before anything else is
/// touched), and the policy from the defaults, the user config, the profile and the flags.
fn resolve(cli: &Cli, login_arg0: bool, say: Verbosity) -> Result<Plan, Failure> {
    let home = inputs::home_dir()?;
    let config_dir = inputs::config_dir(&home);
    let user_config = profiles::load_user_config(&config_dir).map_err(|e| {
        // sbx-shell may be this account's login shell: say how to get back in.
        anyhow!(
            "{e}\nHint: until it is fixed, sbx-shell refuses to start, logins through it too; from another session, account or a root console, fix or move aside {} (sbx-shell runs with its defaults without it), or give the account another shell: chsh -s /bin/bash",
            config_dir.join(profiles::CONFIG_FILE).display()
        )
    })?;
    let request = Request {
        login: cli.login || login_arg0,
        interactive: cli.interactive,
        command_string: cli.command_string.clone(),
        shell_args: cli.stray.clone(),
        command: cli.command.clone(),
    };
    let system = program::System::default();
    let candidates = shell::Candidates {
        explicit: cli.shell.clone(),
        configured: user_config
            .as_ref()
            .and_then(|layer| layer.config.shell.clone()),
        env: std::env::var_os("SHELL"),
        passwd: program::passwd_shell(),
    };
    let shell = shell::resolve(&candidates, &system)?;
    let launch = launch::plan(&request, &shell)?;
    if shell::fell_back(&candidates, &shell) && launch.program == shell.as_os_str() {
        say.note(&format!(
            "sbx-shell: no real shell is known ($SHELL and the passwd entry name sbx-shell or nothing usable, and no \"shell\" is configured): running {}. Fix: sbx-shell login-shell --shell /bin/bash (records \"shell\" in {}), or run with --shell",
            shell::FALLBACK_SHELL,
            inputs::config_dir(&home).join(profiles::CONFIG_FILE).display()
        ));
    }
    program::check(&launch.program, &system)?;
    let (policy_args, picked) = inputs::with_agent_profile(&cli.policy, Some(&launch.program));
    if let Some(agent) = picked {
        say.detail(&format!(
            "sbx-shell: profile {agent}, picked for the command {agent} (--profile chooses another)"
        ));
    }
    let policy = inputs::resolve(&policy_args, &home, user_config)?;
    let launch = launch.with_program_args(&policy.program_args);
    Ok(Plan {
        home,
        launch,
        policy,
    })
}

/// Step 2 (after the policy, which says whether bwrap is wanted at all): the host, with
/// bwrap's probe when the choice may fall on it (`auto`, `bwrap`). A success is remembered
/// (`host::Probes::Cached`): the probe costs about 5 ms.
fn measure_host(plan: &Plan) -> Host {
    use crate::policy::config::BackendChoice;
    let cache = host::probe_cache(&plan.home);
    let probes = match plan.policy.backend {
        BackendChoice::Auto | BackendChoice::Bwrap => Probes::Cached(&cache),
        BackendChoice::Landlock | BackendChoice::Seatbelt | BackendChoice::None => Probes::Skip,
    };
    Host::measure(probes)
}

/// Step 3: the backend for the policy's choice on this machine, or why none can run it.
fn choose_backend(plan: &Plan, host: &Host, say: Verbosity) -> Result<Backend, Failure> {
    let policy = &plan.policy;
    if policy.limits.processes.is_some() && host.machine.root {
        return Err(anyhow!(
            "the processes limit cannot be enforced for root: the kernel exempts uid 0 from RLIMIT_NPROC\nHint: run sbx-shell as a normal user, or leave out --processes / limits.processes"
        )
        .into());
    }
    let backend = select::select(policy.backend, &host.machine)?;
    select::check_required(&policy.require, &backend, &host.machine)?;
    if backend == Backend::None {
        say_unconfined(&plan.launch.program);
    }
    for (layer, why, fix) in select::missing_layers(policy.backend, &host.machine) {
        say.note(&select::missing_line(layer, &why, &fix, &backend));
    }
    say.detail(&format!(
        "sbx-shell: profile {}, backend {} (layers: {})",
        policy.profile,
        backend.name(),
        backend.layers().join(", ")
    ));
    Ok(backend)
}

/// The end line for clipboard requests the relay refused.
fn clipboard_line(refused: u64, policy: crate::policy::config::Clipboard) -> String {
    let times = if refused == 1 {
        "once".to_string()
    } else {
        format!("{refused} times")
    };
    let fix = match policy {
        crate::policy::config::Clipboard::None => "--clipboard write lets it set the clipboard",
        _ => "--clipboard read-write lets it read the clipboard too",
    };
    format!(
        "sbx-shell: the program asked for the terminal's clipboard {times}: refused (clipboard: {}). {fix}",
        policy.name()
    )
}

fn say_unconfined(program: &OsStr) {
    crate::sys::say::warning(&format!(
        "--backend none: {} runs without any sandbox",
        program.to_string_lossy()
    ));
}

/// Step 4: the allow-list proxy, when the policy has one.
fn start_network(
    plan: &Plan,
    backend: &Backend,
    resolve: &[String],
    say: Verbosity,
) -> Result<Option<ProxySession>, Failure> {
    let net = netproxy::session::start(&plan.policy, backend, resolve, &plan.home)?;
    if let Some(net) = &net {
        let proxy = match (net.port, net.channel.is_some()) {
            (Some(port), true) => format!("the proxy is at 127.0.0.1:{port} inside the sandbox"),
            (Some(port), false) => format!("the proxy is at 127.0.0.1:{port} on this host"),
            (None, _) => "no proxy (no network)".to_string(),
        };
        say.detail(&format!(
            "sbx-shell: network: {proxy}; refusals go to {}",
            net.log
                .as_ref()
                .map_or("nowhere (no state directory)".into(), |p| p
                    .display()
                    .to_string())
        ));
    }
    Ok(net)
}

/// sbx-shell's own configuration and state directories, made (0700) when missing so that
/// the sandbox can bind them read-only: a missing one could be created from inside.
fn create_own_dirs(home: &Path) -> Result<(), Failure> {
    for dir in [
        crate::cmd::inputs::config_dir(home),
        crate::sys::files::state_dir(home),
    ] {
        crate::sys::files::create_private_dir(&dir).with_context(|| {
            format!(
                "cannot create {}, sbx-shell's own directory (the sandbox keeps it read-only)\nHint: check that its parent is writable",
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// Step 5a: the writable state paths in the home that are missing (an agent's first run),
/// created as private directories (`policy::state_to_create`).
fn create_state(policy: &Policy, say: Verbosity) -> Result<(), Failure> {
    for dir in crate::policy::state_to_create(&policy.filesystem, &|p| p.exists()) {
        crate::sys::files::create_private_dir(&dir).with_context(|| {
            format!(
                "cannot create {}, which the policy makes writable\nHint: create it yourself, or drop it from the policy",
                dir.display()
            )
        })?;
        say.detail(&format!("sbx-shell: created {} (0700)", dir.display()));
    }
    for seed in &policy.filesystem.seed {
        copy_seed(policy, seed, say)?;
    }
    if let Some(home) = &policy.private_home {
        crate::sys::files::create_private_dir(&home.dir).with_context(|| {
            format!(
                "cannot create the private home {}\nHint: make its parent writable, or run with --no-private-home (\"private_home\": false)",
                home.dir.display()
            )
        })?;
        for dir in crate::policy::home::VIM_DIRS {
            if let Err(e) = crate::sys::files::create_inside(&home.dir, Path::new(dir), true) {
                say.detail(&format!(
                    "sbx-shell: private home: cannot create {dir}: {e}"
                ));
            }
        }
        // Twins that cannot be made (a symlink the program left there) are covered by the
        // helper, which then hides the host's path instead.
        for kept in &home.kept {
            // A layered cache's upper and work directories (bwrap only; made everywhere,
            // as the private home is the same for every backend).
            for layer in kept.layers.iter().flat_map(|(u, w)| [u, w]) {
                let made = layer
                    .strip_prefix(&home.dir)
                    .map_err(|_| std::io::ErrorKind::InvalidInput.into())
                    .and_then(|rel| crate::sys::files::create_inside(&home.dir, rel, true));
                if let Err(e) = made {
                    say.detail(&format!(
                        "sbx-shell: private home: cannot create {}: {e}",
                        layer.display()
                    ));
                }
            }
            let Ok(rel) = kept.twin.strip_prefix(&home.dir) else {
                continue;
            };
            let dir = kept.kind == crate::policy::home::Kind::Dir;
            // Made once: later starts only look (a look follows nothing it acts on).
            if kept
                .twin
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir() == dir)
            {
                continue;
            }
            if let Err(e) = crate::sys::files::create_inside(&home.dir, rel, dir) {
                say.detail(&format!(
                    "sbx-shell: private home: cannot create {}: {e}",
                    kept.twin.display()
                ));
            }
        }
    }
    Ok(())
}

/// Copy a seed (`policy::Seed`) when its path is missing, inside the writable path that
/// holds it, following no symlink there.
fn copy_seed(policy: &Policy, seed: &crate::policy::Seed, say: Verbosity) -> Result<(), Failure> {
    let target = seed.path.real();
    let Some((base, rel)) = policy
        .filesystem
        .writable
        .iter()
        .map(|w| w.real())
        .find_map(|w| target.strip_prefix(w).ok().map(|rel| (w, rel)))
    else {
        return Ok(());
    };
    let copied =
        crate::sys::files::copy_once_inside(seed.from.real(), base, rel).with_context(|| {
            format!(
                "cannot copy {} to {}\nHint: copy it yourself, or drop the seed from the profile",
                seed.from.path.display(),
                seed.path.path.display()
            )
        })?;
    if copied {
        say.detail(&format!(
            "sbx-shell: copied {} to {} (once: it was missing)",
            seed.from.path.display(),
            seed.path.path.display()
        ));
    }
    Ok(())
}

/// The private home's variables (`privatehome::variables`), except those the policy's
/// `environment.set` names: an explicit setting wins.
fn private_home_env(plan: &Plan) -> Vec<(String, std::ffi::OsString)> {
    let Some(home) = &plan.policy.private_home else {
        return Vec::new();
    };
    let mut vars = crate::policy::home::variables(home, &plan.launch.shell, &|name| {
        std::env::var_os(name).is_some()
    });
    vars.retain(|(name, _)| !plan.policy.environment.set.contains_key(name));
    vars
}

/// With no network, the package managers' retries turned off (`netproxy::NO_NETWORK_ENV`),
/// unless the host's environment or the policy's `environment.set` names them.
fn no_network_env(plan: &Plan) -> Vec<(String, std::ffi::OsString)> {
    if plan.policy.network != crate::policy::Network::None {
        return Vec::new();
    }
    netproxy::NO_NETWORK_ENV
        .iter()
        .filter(|(name, _)| {
            std::env::var_os(name).is_none() && !plan.policy.environment.set.contains_key(*name)
        })
        .map(|(name, value)| (name.to_string(), value.into()))
        .collect()
}

/// Landlock alone in workspace-write: the session's private temporary directory, in place
/// of the private `/tmp` bwrap gives (`sessiontemp`).
fn session_temp(plan: &Plan, backend: &Backend) -> Result<Option<SessionTemp>, Failure> {
    if *backend != Backend::Landlock
        || plan.policy.filesystem.mode != crate::policy::config::FsMode::WorkspaceWrite
    {
        return Ok(None);
    }
    let temp = SessionTemp::create().context(
        "cannot create the session's private temporary directory under /tmp\nHint: remove what is in the way (`sbx-shell explain` shows the path), or use the bwrap backend",
    )?;
    Ok(Some(temp))
}

/// Landlock alone: the session's own directory standing for `/dev/shm` (`sessiontemp`),
/// unless the policy makes the host's writable.
fn session_shm(plan: &Plan, backend: &Backend) -> Result<Option<SessionTemp>, Failure> {
    if *backend != Backend::Landlock
        || sandbox::landlock::host_shm_writable(&plan.policy.filesystem)
    {
        return Ok(None);
    }
    let shm = SessionTemp::create_shm().context(
        "cannot create the session's shared memory directory under /dev/shm\nHint: remove what is in the way (`sbx-shell explain` shows the path), or use the bwrap backend",
    )?;
    Ok(Some(shm))
}

/// The session's private directories, Landlock alone: its temporary directory (in
/// workspace-write) and the one standing for `/dev/shm`.
#[derive(Clone, Copy)]
struct SessionDirs<'a> {
    temp: Option<&'a Path>,
    shm: Option<&'a Path>,
}

/// The temporary-directory variables naming the session's directory, except those the
/// policy's `environment.set` names.
fn temp_env(plan: &Plan, temp: Option<&SessionTemp>) -> Vec<(String, std::ffi::OsString)> {
    let mut vars = temp.map(SessionTemp::env).unwrap_or_default();
    vars.retain(|(name, _)| !plan.policy.environment.set.contains_key(name));
    vars
}

/// Step 5: what the helper applies to itself before exec; a layer that refuses the policy
/// fails here, before the terminal is touched.
fn confine(
    plan: &Plan,
    backend: &Backend,
    host: &Host,
    net: Option<&ProxySession>,
    (git, dirs, tools): (&crate::protect::repos::Found, SessionDirs<'_>, &[PathBuf]),
) -> Result<InProcess, Failure> {
    let ctx = sandbox::Context {
        place: &host.place,
        tty: None,
        proxy_port: net.and_then(|n| n.port),
        helper_fd: None,
        git_dirs: &git.git_dirs,
        temp_dir: dirs.temp,
        shm_dir: dirs.shm,
        name_server: None,
        tools,
    };
    Ok(sandbox::in_process(backend, &plan.policy, &ctx)?)
}

/// Landlock alone: the rules by which the guard answers the calls Landlock cannot judge
/// (`mediator`).
fn mediated_rules(
    plan: &Plan,
    layers: &InProcess,
    (shm, net): (Option<&Path>, Option<&ProxySession>),
) -> Option<crate::helper::mediator::Scope> {
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
    Some(crate::helper::mediator::Scope::from_ruleset(
        ruleset,
        protected,
        (
            shm.map(Path::to_path_buf),
            net.and_then(|n| n.name_service.clone()),
        ),
    ))
}

/// What the helper's argv and spec take besides the plan, the layers and the session.
struct Handed<'a> {
    helper: &'a HelperExe,
    lifeline: &'a process::Lifeline,
    git: &'a crate::protect::repos::Found,
    dirs: SessionDirs<'a>,
}

/// Step 7: the helper's argv, wrapped in the backend's launcher, built once the session
/// has its terminal; with the pipes the launcher and the helper read the rest from (the
/// spec; bwrap's options): nothing of the policy is in an argv.
fn build_argv(
    plan: &Plan,
    backend: &Backend,
    host: &Host,
    layers: &InProcess,
    net: Option<&ProxySession>,
    session: &Session,
    Handed {
        helper,
        lifeline,
        git,
        dirs,
    }: Handed<'_>,
) -> Result<(Vec<std::ffi::OsString>, Vec<process::Handover>), Failure> {
    let spec = HelperSpec {
        new_session: session.is_pty(),
        limits: ProcessLimits::from_policy(
            &plan.policy.limits,
            host.machine.nofile.map(|(soft, _)| soft),
        ),
        drop_privileges: layers.drop_privileges,
        landlock: layers.landlock.clone(),
        seccomp: layers.seccomp.clone(),
        guard: layers.guard,
        stop_notify_fd: session
            .stop_notify_fd()
            .filter(|_| layers.launcher_depth > 0),
        lifeline_fd: layers.guard.then(|| lifeline.child_fd()),
        mounts: layers.mounts.clone(),
        proxy_listen: net.and_then(|n| {
            n.channel.as_ref().map(|fd| ProxyListen {
                port: n.port.unwrap_or(netproxy::SANDBOX_PORT),
                channel_fd: fd.as_raw_fd(),
                lookups_fd: n.lookups.as_ref().map(AsRawFd::as_raw_fd),
            })
        }),
        mediated: mediated_rules(plan, layers, (dirs.shm, net)),
        names: layers.names.clone(),
    };
    let handover = |bytes: Vec<u8>| {
        process::Handover::new(bytes).context("cannot create a pipe to the sandbox's helper")
    };
    let spec = handover(helper_spec::spec_bytes(&spec)?)?;
    let helper_argv = helper_spec::build_helper_argv(&helper.path, spec.child_fd(), &plan.launch);
    let resolv_conf = match net.and_then(|n| n.lookups.as_ref()) {
        Some(_) => resolv_conf_over_host()
            .map(|real| Ok::<_, Failure>((handover(netproxy::lookups::RESOLV_CONF.into())?, real)))
            .transpose()?,
        None => None,
    };
    let ctx = sandbox::Context {
        place: &host.place,
        tty: session.tty(),
        proxy_port: net.and_then(|n| n.port),
        helper_fd: helper.fd.as_ref().map(|(fd, copy)| {
            if *copy {
                sandbox::bwrap::HelperFd::Copy(fd.as_raw_fd())
            } else {
                sandbox::bwrap::HelperFd::Bind(fd.as_raw_fd())
            }
        }),
        git_dirs: &git.git_dirs,
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
    };
    let argv = sandbox::wrap(backend, &plan.policy, &ctx, &helper_argv)?;
    if !matches!(backend, Backend::Bwrap { .. }) {
        return Ok((argv, vec![spec]));
    }
    let (options, rest) = sandbox::bwrap::split_options(argv);
    let options = handover(options)?;
    let argv = sandbox::bwrap::with_options_from(rest, options.child_fd());
    let mut handovers = vec![spec, options];
    handovers.extend(resolv_conf.map(|(data, _)| data));
    Ok((argv, handovers))
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
struct HelperExe {
    /// The path the launcher execs (bwrap is given `fd` and execs its own copy's path).
    path: PathBuf,
    /// Linux: an fd of the running executable, inherited by the launcher, and whether its
    /// path was deleted (then the launcher must copy it: there is no path left to bind).
    fd: Option<(std::os::fd::OwnedFd, bool)>,
}

impl HelperExe {
    #[cfg(target_os = "linux")]
    fn open() -> Result<HelperExe, Failure> {
        use std::os::unix::ffi::OsStrExt;
        const EXE: &str = "/proc/self/exe";
        // /proc/self/exe is the running file even when its path was deleted or now names
        // another file; the kernel then marks the link's text.
        let deleted = std::fs::read_link(EXE)
            .map(|p| p.as_os_str().as_bytes().ends_with(b" (deleted)"))
            .unwrap_or(true);
        let how = if deleted {
            nix::fcntl::OFlag::O_RDONLY
        } else {
            nix::fcntl::OFlag::O_PATH
        };
        // Not close-on-exec: the launcher inherits it.
        let fd = nix::fcntl::open(EXE, how, nix::sys::stat::Mode::empty())
            .context("cannot open the sbx-shell executable (/proc/self/exe)")?;
        Ok(HelperExe {
            path: PathBuf::from(EXE),
            fd: Some((fd, deleted)),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open() -> Result<HelperExe, Failure> {
        Ok(HelperExe {
            path: std::env::current_exe().context("cannot locate the sbx-shell executable")?,
            fd: None,
        })
    }
}

fn session_options(policy: &Policy, layers: &InProcess) -> SessionOptions {
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

/// Step 9: the network summary on stderr and the session's line in the session log.
fn record(
    plan: &Plan,
    backend: &Backend,
    host: &Host,
    started: SystemTime,
    (code, planted, ended_by_guard): (
        &std::io::Result<u8>,
        &[crate::protect::planted::Planted],
        bool,
    ),
    net: Option<&ProxySession>,
    say: Verbosity,
) {
    if let Some(line) = net.and_then(|n| n.proxy.summary()) {
        say.note(&line);
    }
    let Ok(code) = code else { return };
    let launch = &plan.launch;
    let record = log::Record::new(
        started,
        std::iter::once(&launch.program).chain(&launch.args),
        host.place.cwd.as_deref().ok(),
        &plan.policy,
        backend,
        *code,
        net.map_or(0, |n| n.proxy.refused()),
    )
    .with_planted(planted, ended_by_guard);
    if let Err(e) = log::append(&plan.home, &record) {
        say.detail(&format!("sbx-shell: cannot write the session log: {e}"));
    }
}

/// The places in the writable trees that would run code outside (`planted`), recorded
/// before the session and compared after it; and, on Linux, the guard that moves aside
/// what no mount could refuse while the session runs.
struct Watch {
    before: crate::protect::planted::Snapshot,
    path_dirs: Vec<std::path::PathBuf>,
    /// `.git` symlinks and their targets at the start.
    links: Vec<(std::path::PathBuf, std::path::PathBuf)>,
    /// Landlock alone: the paths the watch puts back as recorded (`watch::record`).
    recorded: Vec<std::path::PathBuf>,
    /// The helper's guard judges every name made and every writing open
    /// (`mediator::names`): what it refuses cannot be planted, so the report covers only
    /// what it does not judge (executables in `$PATH`), and under bwrap nothing is watched.
    mediated: bool,
    #[cfg(target_os = "linux")]
    guard: Option<crate::protect::watch::Watch>,
}

impl Watch {
    fn start(
        plan: &Plan,
        (backend, mediated): (&Backend, bool),
        git: &crate::protect::repos::Found,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
        (started, say): (SystemTime, Verbosity),
    ) -> Result<Watch, Failure> {
        let policy = &plan.policy;
        let path_dirs: Vec<std::path::PathBuf> = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::env::split_paths(v).collect())
            .unwrap_or_default();
        // What a session killed while its seals held left behind, put back first.
        #[cfg(target_os = "linux")]
        undo_left_seals(&plan.home, say);
        let before = Self::snapshot(policy, git, &path_dirs, mediated);
        #[cfg(target_os = "linux")]
        let (guard, recorded) = if mediated {
            // What the program makes or writes is judged when it does it; what the host
            // does meanwhile is the host's.
            (None, Vec::new())
        } else {
            let whole = Self::snapshot(policy, git, &path_dirs, false);
            Self::guard(plan, backend, git, &whole, (started, say))?
        };
        #[cfg(not(target_os = "linux"))]
        let (recorded, _) = (Vec::new(), (backend, started, say));
        Ok(Watch {
            before,
            path_dirs,
            links: git.links.clone(),
            recorded,
            mediated,
            #[cfg(target_os = "linux")]
            guard,
        })
    }

    /// Landlock alone: the protected paths inside the writable trees, and every
    /// repository's sensitive paths there (`repos::sensitive`), recorded for the guard to
    /// put back — Landlock cannot refuse a change inside a writable tree.
    #[cfg(target_os = "linux")]
    fn record(
        plan: &Plan,
        backend: &Backend,
        git: &crate::protect::repos::Found,
    ) -> Result<Vec<crate::protect::watch::record::Recorded>, Failure> {
        if *backend != Backend::Landlock {
            return Ok(Vec::new());
        }
        let paths = sandbox::landlock::restored_paths(
            &plan.policy.filesystem,
            &git.git_dirs,
            sandbox::names_judged(&plan.policy),
        );
        crate::protect::watch::record::record(&paths).map_err(|e| {
            Failure::from(anyhow!(
                "{e}\nHint: use the bwrap backend, which mounts them read-only (`sbx-shell setup` enables it), or run read-only: --profile read-only"
            ))
        })
    }

    /// The guard, for a sandboxed session with writable trees.
    #[cfg(target_os = "linux")]
    fn guard(
        plan: &Plan,
        backend: &Backend,
        git: &crate::protect::repos::Found,
        before: &crate::protect::planted::Snapshot,
        (started, say): (SystemTime, Verbosity),
    ) -> Result<(Option<crate::protect::watch::Watch>, Vec<PathBuf>), Failure> {
        let roots = crate::protect::repos::trees(&plan.policy);
        if matches!(backend, Backend::None) || roots.is_empty() {
            return Ok((None, Vec::new()));
        }
        let recorded = Self::record(plan, backend, git)?;
        let recorded_paths: Vec<PathBuf> = recorded.iter().map(|r| r.path.clone()).collect();
        let named = plan.policy.backend != crate::policy::config::BackendChoice::Auto;
        if let Some(line) = restored_note(&recorded_paths, named) {
            say.note(&line);
        }
        let protected: Vec<&std::path::Path> = plan
            .policy
            .filesystem
            .protected
            .iter()
            .map(crate::policy::ResolvedPath::real)
            .collect();
        let rules = crate::protect::watch::Rules {
            missing: crate::protect::watch::missing(&protected, &roots, &|p| {
                p.symlink_metadata().is_ok()
            }),
            roots,
            before: before.clone(),
            links: git.links.clone(),
            keep: crate::sys::files::state_dir(&plan.home)
                .join("moved-aside")
                .join(format!(
                    "{}-{}",
                    crate::sys::files::rfc3339(started),
                    std::process::id()
                )),
            recorded: recorded.into(),
            ends_session: true,
            git_config_allow: plan.policy.git_config_allow.iter().cloned().collect(),
            seal_journals: Some(crate::protect::watch::seal_journals(&plan.home)),
        };
        match crate::protect::watch::Watch::start(rules) {
            Ok(guard) => Ok((Some(guard), recorded_paths)),
            Err(e) if !recorded_paths.is_empty() => Err(anyhow!(
                "cannot watch the writable trees ({e}), which Landlock alone needs to restore the protected paths in them\nHint: use the bwrap backend (`sbx-shell setup` enables it), or run read-only: --profile read-only"
            )
            .into()),
            Err(e) => {
                crate::sys::say::warning(&format!(
                    "cannot watch the writable trees ({e}): what the session plants is only reported at the end"
                ));
                Ok((None, Vec::new()))
            }
        }
    }

    /// The places to compare at the end; `mediated`: only the executables in `$PATH`
    /// (the rest is judged when it is made).
    fn snapshot(
        policy: &Policy,
        git: &crate::protect::repos::Found,
        path_dirs: &[std::path::PathBuf],
        mediated: bool,
    ) -> crate::protect::planted::Snapshot {
        let fs = &policy.filesystem;
        let roots: Vec<&std::path::Path> = fs
            .writable_roots()
            .into_iter()
            .filter(|r| *r != std::path::Path::new("/"))
            .collect();
        let workspace = Some(fs.workspace.real())
            .filter(|w| !mediated && roots.iter().any(|r| w.starts_with(r)));
        let none = crate::protect::repos::Found::default();
        let git = if mediated { &none } else { git };
        crate::protect::planted::snapshot(git, workspace, path_dirs, &roots)
    }

    /// What the guard moved aside, then what is new or changed since `start` (the writable
    /// trees scanned again, so that repositories made during the session count); each
    /// list said on one line. Also whether the watch ended the session (`watch::END_AFTER`).
    fn finish(self, policy: &Policy) -> (Vec<crate::protect::planted::Planted>, bool) {
        #[cfg(target_os = "linux")]
        let (mut all, ended_by_guard) = match self.guard.map(crate::protect::watch::Watch::finish) {
            Some(outcome) => {
                if outcome.incomplete {
                    crate::sys::say::warning(&format!(
                        "the guard could not watch every directory of the writable trees (more than {}, or the kernel's inotify limit): what it did not see is only reported\nHint: raise fs.inotify.max_user_watches, or start in a smaller workspace",
                        crate::protect::watch::WATCH_BUDGET
                    ));
                }
                match &outcome.ended {
                    Some(path) if outcome.ended_at_once => crate::sys::say::error(&format!(
                        "this session was ended: its program planted {}, which no git command writes: it points the host's git at another directory's config and hooks\nHint: the places are named below; a program that does this is attacking the host",
                        path.display()
                    )),
                    Some(path) => crate::sys::say::error(&format!(
                        "this session was ended: its program kept changing what the guard protects ({} answers, the last at {}), racing the guard to keep code planted outside the sandbox\nHint: the places are named below; a program that does this is attacking the host",
                        crate::protect::watch::END_AFTER,
                        path.display()
                    )),
                    None => {}
                }
                if let Some(line) =
                    crate::protect::planted::moved_line(&outcome.moved, &outcome.keep)
                {
                    crate::sys::say::warning(&line);
                }
                if let Some(line) =
                    crate::protect::planted::restored_line(&outcome.restored, &outcome.keep)
                {
                    crate::sys::say::warning(&line);
                }
                (
                    [outcome.moved, outcome.restored].concat(),
                    outcome.ended.is_some(),
                )
            }
            None => (Vec::new(), false),
        };
        #[cfg(not(target_os = "linux"))]
        let (mut all, ended_by_guard) = (Vec::new(), false);
        let git = if self.mediated {
            crate::protect::repos::Found::default()
        } else {
            crate::protect::repos::scan_writable(policy)
        };
        let after = Self::snapshot(policy, &git, &self.path_dirs, self.mediated);
        let allow: Vec<String> = policy.git_config_allow.iter().cloned().collect();
        let mut left = crate::protect::planted::compare(
            &self.before,
            &after,
            &|p| std::fs::read(p).unwrap_or_default(),
            &allow,
        );
        // A `.git` symlink put back by the guard is new, but says what it said; a recorded
        // path is as recorded (the guard's last pass), only its inode or time is new.
        left.retain(|p| {
            !self.links.iter().any(|(link, target)| {
                *link == p.path && std::fs::read_link(link).is_ok_and(|t| t == *target)
            }) && !self.recorded.iter().any(|r| p.path.starts_with(r))
        });
        if let Some(line) = crate::protect::planted::line(&left) {
            crate::sys::say::warning(&line);
        }
        all.extend(left);
        (all, ended_by_guard)
    }
}

/// Give back their modes to the files a session killed while sealed left behind, and say so.
#[cfg(target_os = "linux")]
fn undo_left_seals(home: &std::path::Path, say: Verbosity) {
    if let Some(line) = crate::protect::watch::undo_left_seals(home) {
        say.note(&line);
    }
}

/// The start line for protected files that have other names (hard links): each name is
/// refused a write as the file's own is.
#[cfg(target_os = "linux")]
fn linked_note(linked: &[PathBuf]) -> Option<String> {
    let named = crate::sys::say::first_and_more(linked)?;
    let has = match linked.len() {
        1 => "has another name",
        _ => "have other names",
    };
    Some(format!(
        "sbx-shell: {named} {has} (hard links): a write through any name is refused, as through the file's own"
    ))
}

/// The start line for Landlock alone when it records protected paths (kernels before
/// 5.14): what it cannot prevent, in one line; `setup` only when the user did not name
/// the backend.
#[cfg(target_os = "linux")]
fn restored_note(recorded: &[PathBuf], backend_named: bool) -> Option<String> {
    let named = crate::sys::say::first_and_more(recorded)?;
    let fix = if backend_named {
        ""
    } else {
        " (bwrap prevents them: `sbx-shell setup`)"
    };
    Some(format!(
        "sbx-shell: on this kernel Landlock alone restores the protected paths in writable trees ({named}) after a change, rather than preventing it{fix}"
    ))
}

/// `--pty auto` means a pty only when both stdin and stdout are terminals.
pub fn wants_pty(mode: PtyMode, stdin_tty: bool, stdout_tty: bool) -> bool {
    match mode {
        PtyMode::Auto => stdin_tty && stdout_tty,
        PtyMode::Always => true,
        PtyMode::Never => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_wants_a_pty_only_between_two_terminals() {
        assert!(wants_pty(PtyMode::Auto, true, true));
        assert!(!wants_pty(PtyMode::Auto, false, true));
        assert!(!wants_pty(PtyMode::Auto, true, false));
        assert!(wants_pty(PtyMode::Always, false, false));
        assert!(!wants_pty(PtyMode::Never, true, true));
    }
}
