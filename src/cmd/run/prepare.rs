//! Steps 1 to 4 of a run: the request and the policy resolved (`Plan`), the host
//! measured, the backend chosen, the network started.

use super::messages;
use crate::cli::Cli;
use crate::cmd::inputs;
use crate::host::{self, Host, Probes};
use crate::netproxy;
use crate::netproxy::session::ProxySession;
use crate::policy::launch::{self, Launch, LaunchRequest};
use crate::policy::profiles;
use crate::policy::program;
use crate::policy::shell;
use crate::policy::Policy;
use crate::sandbox::rootas::RootAs;
use crate::sandbox::{select, Backend};
use crate::session::cgroup;
use crate::sys::exit::Failure;
use crate::sys::say::Verbosity;
use anyhow::{anyhow, Context as _};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What the request and the policy resolved to.
pub(super) struct Plan {
    pub(super) home: PathBuf,
    pub(super) launch: Launch,
    pub(super) policy: Policy,
    /// Root's session under bwrap: its program as another host id (`root_files`).
    pub(super) root_as: Option<RootAs>,
    /// Root's session where its program stays host root: its reads judged by the guard
    /// (`root_files`).
    pub(super) root_reads: bool,
}

/// Step 1: the real shell, the launch plan (the program checked before anything else is
/// touched), and the policy from the defaults, the user config, the profile and the flags.
pub(super) fn resolve(cli: &Cli, login_arg0: bool, say: Verbosity) -> Result<Plan, Failure> {
    let home = inputs::home_dir()?;
    let config_dir = inputs::config_dir(&home);
    let user_config = profiles::load_user_config(&config_dir)
        .map_err(|e| messages::config_broken(e, &config_dir.join(profiles::CONFIG_FILE)))?;
    let request = LaunchRequest {
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
    let launch = launch::plan(&request, &shell).map_err(subcommand_after_options)?;
    if shell::fell_back(&candidates, &shell) && launch.program == shell.as_os_str() {
        say.note(&messages::fallback_shell(
            shell::FALLBACK_SHELL,
            &config_dir.join(profiles::CONFIG_FILE),
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
    create_own_dirs(&home)?;
    Ok(Plan {
        home,
        policy: for_launch(policy, &launch),
        launch,
        root_as: None,
        root_reads: false,
    })
}

/// A stray word that is one of sbx-shell's commands (`sbx-shell --profile p explain`): a
/// command comes before the options, which the error says rather than to run a program of
/// that name.
fn subcommand_after_options(e: launch::PlanError) -> anyhow::Error {
    use clap::CommandFactory;
    match e {
        launch::PlanError::StrayArgument(word)
            if crate::cli::Cli::command().find_subcommand(&word).is_some() =>
        {
            messages::command_after_options(&word)
        }
        other => other.into(),
    }
}

impl Plan {
    /// Step 3b, root's session only: what only host root may read kept from its program — by
    /// the kernel where the program can run as another host id (`found`, `os::root_as`), else
    /// by the guard, which opens every file the program opens and hands over only what an
    /// ordinary user could read or the policy grants (`mediator::rootreads`). Neither with no
    /// sandbox, nor where the whole file system is writable (all of it is granted).
    pub(super) fn root_files(
        &mut self,
        found: anyhow::Result<Option<RootAs>>,
        backend: &crate::sandbox::Backend,
        say: Verbosity,
    ) -> Result<(), Failure> {
        use crate::sandbox::Backend;
        if !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        remove_old_walk_record();
        let why = match found {
            Ok(Some(root_as)) => {
                say.detail(&root_as.describe());
                self.root_as = Some(root_as);
                return Ok(());
            }
            Ok(None) => None,
            Err(why) => Some(format!("{why:#}")),
        };
        let unrestricted =
            self.policy.filesystem.mode == crate::policy::config::FsMode::Unrestricted;
        let linux = matches!(
            backend,
            Backend::Landlock | Backend::Bwrap { .. } | Backend::Container(_)
        );
        if !linux || unrestricted {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        if !crate::sys::capabilities::can_switch_ids() {
            return Err(messages::root_cannot_switch_ids().into());
        }
        say.detail(&messages::root_reads_judged(why.as_deref()));
        self.root_reads = true;
        Ok(())
    }
}

/// The record earlier versions kept of their walk of the host for root-only files, and
/// the names a writer killed midway left beside it: nothing reads them now, so root's
/// session removes them, and their directory once it is empty.
fn remove_old_walk_record() {
    let dir = Path::new("/var/cache/sbx-shell");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "root-only.json" || name.starts_with(".root-only.") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// `policy` for what `launch` runs: the server end of a file copy (scp, sftp, rsync over
/// ssh through the login shell) gets no writable private `/tmp`, so that a copy there
/// fails instead of vanishing with the session.
fn for_launch(mut policy: crate::policy::Policy, launch: &Launch) -> crate::policy::Policy {
    if launch.is_file_transfer() {
        policy.filesystem.private_tmp_writable = false;
    }
    policy
}

/// Step 2 (after the policy, which says whether bwrap is wanted at all): the host, with
/// bwrap's probe when the choice may fall on it (`auto`, `bwrap`). A success is remembered
/// (`host::Probes::Cached`): the probe costs about 5 ms.
pub(super) fn measure_host(plan: &Plan) -> Host {
    use crate::policy::config::BackendChoice;
    let cache = host::probe_cache(&plan.home);
    let probes = match plan.policy.backend {
        BackendChoice::Auto | BackendChoice::Bwrap => Probes::Cached(&cache),
        BackendChoice::Landlock
        | BackendChoice::Docker
        | BackendChoice::Podman
        | BackendChoice::Seatbelt
        | BackendChoice::None => Probes::Skip,
    };
    Host::measure(probes)
}

/// Step 3: the backend for the policy's choice on this machine, or why none can run it.
pub(super) fn choose_backend(plan: &Plan, host: &Host, say: Verbosity) -> Result<Backend, Failure> {
    let policy = &plan.policy;
    if policy.limits.processes.is_some() && host.machine.root {
        return Err(messages::processes_limit_for_root().into());
    }
    let machine = host
        .machine
        .with_engine(policy.container.engine.as_deref())
        .map_err(|e| anyhow!(e))?;
    let backend = select::select(policy.backend, &machine)?;
    select::check_required(&policy.require, &backend, &host.machine)?;
    container_fits(plan, &backend)?;
    if backend == Backend::None {
        say_unconfined(&plan.launch.program);
    }
    for (layer, why, fix) in select::missing_layers(policy.backend, &host.machine) {
        say.note(&select::missing_line(layer, &why, &fix, &backend));
    }
    if let Backend::Bwrap { .. } = backend {
        let exists = |p: &std::path::Path| p.symlink_metadata().is_ok();
        if let Some(missing) = crate::sandbox::unjudged(policy, &host.machine.kernel, &exists) {
            say.note(&select::unjudged_line(&host.machine.kernel, &missing));
        }
    }
    say.detail(&format!(
        "sbx-shell: profile {}, backend {} (layers: {})",
        policy.profile,
        backend.name(),
        backend.layers().join(", ")
    ));
    say_sandboxed(plan, &backend, say);
    Ok(backend)
}

/// What a container session cannot give yet, refused with the fix, and an image named
/// for another backend; then the engine asked (`container::ready`).
fn container_fits(plan: &Plan, backend: &Backend) -> Result<(), Failure> {
    let policy = &plan.policy;
    let Backend::Container(container) = backend else {
        return match &policy.container.image {
            Some(image) => Err(messages::image_without_container(image).into()),
            None => Ok(()),
        };
    };
    crate::sandbox::container::vet_run_args(&policy.container.run_args).map_err(|e| anyhow!(e))?;
    super::container::ready(
        container,
        policy.container.image.as_deref(),
        &policy.limits,
        &plan.home,
    )?;
    Ok(())
}

/// One line at the start of a shell the user types into, on a terminal (not for a
/// command, not with `--quiet`): that it is sandboxed, by what, and where refusals show.
fn say_sandboxed(plan: &Plan, backend: &Backend, say: Verbosity) {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::io::stderr().is_terminal();
    if plan.launch.is_shell_session() && terminal && *backend != Backend::None {
        say.note(&messages::sandboxed_shell(
            backend.name(),
            &plan.policy.profile,
        ));
    }
}

pub(super) fn say_unconfined(program: &OsStr) {
    crate::sys::say::warning(&format!(
        "--backend none: {} runs without any sandbox",
        program.to_string_lossy()
    ));
}

/// sbx-shell's own configuration and state directories, made (0700) when missing so that
/// the sandbox can bind them read-only: a missing one could be created from inside.
pub(super) fn create_own_dirs(home: &Path) -> Result<(), Failure> {
    for dir in [
        crate::cmd::inputs::config_dir(home),
        crate::sys::files::state_dir(home),
    ] {
        crate::sys::files::create_private_dir(&dir)
            .with_context(|| messages::own_dir_not_made(&dir))?;
    }
    Ok(())
}

/// Step 5a, where no overlay layers the host's npm cache beneath the private one (every
/// backend but bwrap): the tarballs the project's lockfile names that the host's cache
/// holds, linked into the private one (`policy::npmseed`), so `npm ci --offline` installs
/// what the host downloaded. Costs what the lockfile holds, not what the cache holds.
pub(super) fn seed_npm(policy: &Policy, say: Verbosity) {
    use crate::policy::npmseed;
    let Some(home) = &policy.private_home else {
        return;
    };
    // The private cache is npm's only when npm is pointed at it.
    if policy.environment.set.contains_key("npm_config_cache") {
        return;
    }
    let Some(twin) = home.kept.iter().find(|k| k.path.ends_with(".npm")) else {
        return;
    };
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let workspace = &policy.filesystem.workspace.path;
    let Some(lockfile) = npmseed::lockfile(&cwd, workspace, &|p| p.is_file()) else {
        return;
    };
    // The same path below the host's home and below the private home (`home::plan`).
    let Ok(rel) = twin.twin.strip_prefix(&home.dir) else {
        return;
    };
    let from = &policy.filesystem.home.path;
    if twin.path != from.join(rel) {
        return;
    }
    let Ok(text) = crate::sys::files::read_regular(&lockfile, npmseed::LOCKFILE_LIMIT) else {
        return;
    };
    let rels: Vec<PathBuf> = npmseed::tarballs(&text)
        .iter()
        .map(|t| rel.join(npmseed::CONTENT).join(t))
        .collect();
    match crate::sys::files::link_missing_inside(from, &home.dir, &rels) {
        Ok(linked) if linked.made > 0 => say.detail(&format!(
            "sbx-shell: private home: {} of {}'s tarballs linked from the host's npm cache ({} it lacks)",
            linked.made,
            lockfile.display(),
            linked.absent
        )),
        Ok(_) => {}
        Err(e) => say.detail(&format!(
            "sbx-shell: private home: npm's cache: cannot link the host's tarballs: {e}"
        )),
    }
}

/// Step 5a: the writable state paths in the home that are missing (an agent's first run),
/// created as private directories (`policy::state_to_create`).
pub(super) fn create_state(policy: &Policy, say: Verbosity) -> Result<(), Failure> {
    for dir in crate::policy::state_to_create(&policy.filesystem, &|p| p.exists()) {
        crate::sys::files::create_private_dir(&dir)
            .with_context(|| messages::state_not_made(&dir))?;
        say.detail(&format!("sbx-shell: created {} (0700)", dir.display()));
    }
    for seed in &policy.filesystem.seed {
        copy_seed(policy, seed, say)?;
    }
    if let Some(home) = &policy.private_home {
        crate::sys::files::create_private_dir(&home.dir)
            .with_context(|| messages::private_home_not_made(&home.dir))?;
        let (name, script) = crate::policy::home::PYTHON_STARTUP;
        if let Err(e) = crate::sys::files::write_private(&home.dir.join(name), script.as_bytes()) {
            say.detail(&format!(
                "sbx-shell: private home: cannot write {name}: {e}"
            ));
        }
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
            let dir = kept.kind == crate::policy::home::KeptKind::Dir;
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
pub(super) fn copy_seed(
    policy: &Policy,
    seed: &crate::policy::Seed,
    say: Verbosity,
) -> Result<(), Failure> {
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
    let copied = crate::sys::files::copy_once_inside(seed.from.real(), base, rel)
        .with_context(|| messages::seed_not_copied(&seed.from.path, &seed.path.path))?;
    if copied {
        say.detail(&format!(
            "sbx-shell: copied {} to {} (once: it was missing)",
            seed.from.path.display(),
            seed.path.path.display()
        ));
    }
    Ok(())
}

/// Step 4: the allow-list proxy, when the policy has one.
pub(super) fn start_network(
    plan: &Plan,
    backend: &Backend,
    cli: &Cli,
    sink: crate::policy::refusal::Sink,
    say: Verbosity,
) -> Result<Option<ProxySession>, Failure> {
    let publish = netproxy::forward::parse_publish(&cli.publish).map_err(|e| anyhow::anyhow!(e))?;
    let net = netproxy::session::start(
        &plan.policy,
        backend,
        &cli.resolve,
        &publish,
        &plan.home,
        sink,
    )?;
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

/// The session's own cgroup, when the policy limits the session's processes or memory and
/// this user may make one (`session::cgroup`).
pub(super) fn start_cgroup(
    plan: &Plan,
    backend: &Backend,
    say: Verbosity,
) -> Result<Option<cgroup::SessionCgroup>, Failure> {
    let policy = &plan.policy;
    // A container's limits are the engine's (`sandbox::container`).
    if let Backend::Container(_) = backend {
        return Ok(None);
    }
    let cgroup = cgroup::SessionCgroup::create(
        cgroup::SessionLimits {
            pids: policy.limits.session_processes,
            memory_bytes: policy
                .limits
                .session_memory_mib
                .map(|m| m.saturating_mul(1024 * 1024)),
        },
        &crate::sys::files::state_dir(&plan.home),
    )
    .map_err(anyhow::Error::from)?;
    if let Some(cgroup) = &cgroup {
        say.detail(&format!(
            "sbx-shell: the session's cgroup is {}",
            cgroup.dir().display()
        ));
    }
    Ok(cgroup)
}
