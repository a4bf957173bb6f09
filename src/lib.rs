//! sbx-shell: a PTY-wrapping terminal supervisor.
//!
//! This file is the one wiring point: command line → launch plan → helper argv → a pty
//! session (or, without a terminal, a direct run). Between the plan and the spawn,
//! `sandbox::wrap` prefixes the helper argv with this platform's sandbox launcher.

pub mod cli;
pub mod config;
mod direct;
pub mod doctor;
pub mod exit;
pub mod explain;
mod helper;
pub mod inputs;
pub mod launch;
pub mod netproxy;
pub mod policy;
pub mod process;
pub mod profiles;
pub mod pty;
pub mod sandbox;
pub mod say;
pub mod sessionlog;
pub mod shell;
mod signals;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use clap::Parser;

use cli::{Action, Cli, ExplainArgs, PtyMode};
use launch::{HelperSpec, Request};

/// Exit code for errors before the child starts (bad configuration, failed setup).
const EXIT_FAILURE: u8 = 1;

/// An error that ends sbx-shell, with the exit code it ends with.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            code: EXIT_FAILURE,
            error: error.into(),
        }
    }
}

/// The binary's entry point: helper mode, or parse and run; errors printed once, here.
pub fn main_entry() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == launch::HELPER_ARG) {
        return helper::run(&args[2..]);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return clap_error(&e),
    };
    let login_arg0 = args.first().is_some_and(|a| launch::is_login_arg0(a));
    let outcome = match cli.action {
        Some(Action::Schema) => print_schema(),
        Some(Action::Doctor { json }) => run_doctor(json),
        Some(Action::Explain(ref explain)) => run_explain(explain),
        Some(Action::Log { count, json }) => print_log(count, json),
        Some(Action::Completions { shell }) => print_completions(shell),
        Some(Action::Man) => print_man(),
        None => run(cli, login_arg0),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            say::error(&format!("{:#}", failure.error));
            ExitCode::from(failure.code)
        }
    }
}

fn clap_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = e.print();
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        eprintln!("Hint: run `sbx-shell --help` for the options and examples");
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// `sbx-shell log`: the last `count` sessions.
fn print_log(count: usize, json: bool) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let path = sessionlog::path(&home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(anyhow!("cannot read the session log {}: {e}", path.display()).into())
        }
    };
    let records = sessionlog::last(&text, count);
    let out = if json {
        records
            .iter()
            .map(|r| serde_json::to_string(r).map(|line| line + "\n"))
            .collect::<Result<String, _>>()?
    } else if records.is_empty() {
        format!("no sessions logged yet in {}\n", path.display())
    } else {
        sessionlog::render(&records)
    };
    write_stdout(out.as_bytes())
}

/// `sbx-shell completions SHELL`.
fn print_completions(shell: clap_complete::Shell) -> Result<u8, Failure> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sbx-shell", &mut script);
    write_stdout(&script)
}

/// `sbx-shell man`: the man page, from the command line's definition.
fn print_man() -> Result<u8, Failure> {
    use clap::CommandFactory;
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .context("cannot render the man page")?;
    write_stdout(&page)
}

/// Write `bytes` to stdout; a reader that went away early (`| head`) is not an error.
fn write_stdout(bytes: &[u8]) -> Result<u8, Failure> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("cannot write to stdout: {e}").into())
        }
        _ => Ok(0),
    }
}

/// The command line's policy options, with the agent profile for `program` when no profile
/// is named (`sbx-shell -- claude` runs with the claude profile).
fn with_agent_profile(
    args: &cli::PolicyArgs,
    program: Option<&std::ffi::OsStr>,
) -> (cli::PolicyArgs, Option<&'static str>) {
    let mut args = args.clone();
    let picked = match (&args.profile, program.and_then(profiles::for_program)) {
        (None, Some(agent)) => {
            args.profile = Some(agent.to_string());
            Some(agent)
        }
        _ => None,
    };
    (args, picked)
}

/// `sbx-shell schema`.
fn print_schema() -> Result<u8, Failure> {
    write_stdout(format!("{}\n", serde_json::to_string_pretty(&config::schema())?).as_bytes())
}

/// `sbx-shell doctor`: exits 1 when the default backend cannot run here.
fn run_doctor(json: bool) -> Result<u8, Failure> {
    let report = doctor::evaluate(&doctor::measure());
    let text = if json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        doctor::render_text(&report)
    };
    write_stdout(text.as_bytes())?;
    Ok(if report.default_backend_can_run { 0 } else { 1 })
}

/// What the sandbox builders need to know about this machine and session, owned.
struct HostFacts {
    temp_dir: Option<PathBuf>,
    cwd: PathBuf,
    runtime_dir: Option<PathBuf>,
    host_sockets: Vec<PathBuf>,
    kind_of: Box<dyn Fn(&Path) -> sandbox::bwrap::PathKind>,
}

impl HostFacts {
    fn gather() -> Result<HostFacts, Failure> {
        Ok(HostFacts {
            temp_dir: std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok()),
            cwd: std::env::current_dir().context("cannot read the current directory")?,
            runtime_dir: std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            host_sockets: inputs::host_sockets(),
            kind_of: {
                let kinds = inputs::PathKinds::default();
                Box::new(move |path| kinds.kind(path))
            },
        })
    }

    /// The builders' view, before the child's terminal is known.
    fn host(&self) -> sandbox::Host<'_> {
        sandbox::Host {
            temp_dir: self.temp_dir.as_deref(),
            tty: None,
            cwd: &self.cwd,
            runtime_dir: self.runtime_dir.as_deref(),
            host_sockets: &self.host_sockets,
            kind_of: &*self.kind_of,
            proxy_port: None,
        }
    }
}

/// `sbx-shell explain`.
fn run_explain(args: &ExplainArgs) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let user_config = profiles::load_user_config(&inputs::config_dir(&home))?;
    let (policy_args, _) =
        with_agent_profile(&args.policy, args.command.first().map(|c| c.as_os_str()));
    let policy = inputs::resolve(&policy_args, &home, user_config)?;
    let facts = HostFacts::gather()?;
    // The proxy's port as inside bwrap; elsewhere it is picked when the session starts.
    let host = sandbox::Host {
        proxy_port: Some(netproxy::SANDBOX_PORT),
        ..facts.host()
    };
    let selected = sandbox::select::select(policy.backend, &sandbox::select::Machine::measure())
        .map_err(|e| e.to_string());
    let report = explain::report(
        &policy,
        &args.command,
        &host,
        explain::Selected::of(selected.as_ref().map_err(Clone::clone)),
    );
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else if let Some(backend) = args.show {
        explain::render_backend(&report, backend)
    } else {
        explain::render_text(&report)
    };
    write_stdout(text.as_bytes())
}

/// Run what the command line asks for; returns the exit code.
pub fn run(cli: Cli, login_arg0: bool) -> Result<u8, Failure> {
    let started = std::time::SystemTime::now();
    let verbosity = say::Verbosity {
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    process::install_subreaper();
    pty::install_panic_hook();
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
        command_string: cli.command_string,
        shell_args: cli.stray,
        command: cli.command,
    };
    let probe = SystemProbe {
        me: std::env::current_exe().ok(),
    };
    let candidates = shell::Candidates {
        explicit: cli.shell,
        configured: user_config
            .as_ref()
            .and_then(|layer| layer.config.shell.clone()),
        env: std::env::var_os("SHELL"),
        passwd: passwd_shell(),
    };
    let shell = shell::resolve(&candidates, &probe)?;
    let launch = launch::plan(&request, &shell)?;
    check_program(&launch.program, &probe)?;

    let (policy_args, picked) = with_agent_profile(&cli.policy, Some(launch.program.as_os_str()));
    if let Some(agent) = picked {
        verbosity.detail(&format!(
            "sbx-shell: profile {agent}, picked for the command {agent} (--profile chooses another)"
        ));
    }
    let policy = inputs::resolve(&policy_args, &home, user_config)?;
    if policy.limits.processes.is_some() && nix::unistd::getuid().is_root() {
        return Err(anyhow!(
            "the processes limit cannot be enforced for root: the kernel exempts uid 0 from RLIMIT_NPROC\nHint: run sbx-shell as a normal user, or leave out --processes / limits.processes"
        )
        .into());
    }
    let backend = sandbox::select::select(policy.backend, &sandbox::select::Machine::measure())?;
    if backend == sandbox::Backend::None {
        say::warning(&format!(
            "--backend none: {} runs without any sandbox",
            launch.program.to_string_lossy()
        ));
    }
    verbosity.detail(&format!(
        "sbx-shell: profile {}, backend {} (layers: {})",
        policy.profile,
        backend.name(),
        backend.layers().join(", ")
    ));
    let proxy = start_proxy(&policy, &backend, &cli.resolve, &home)?;
    if let Some(proxy) = &proxy {
        verbosity.detail(&format!(
            "sbx-shell: network allow-list: the proxy is at 127.0.0.1:{} {}; refusals go to {}",
            proxy.port,
            if proxy.channel.is_some() {
                "inside the sandbox"
            } else {
                "on this host"
            },
            network_log(&home).map_or("nowhere (no state directory)".into(), |p| p
                .display()
                .to_string())
        ));
    }
    let facts = HostFacts::gather()?;
    let host = sandbox::Host {
        proxy_port: proxy.as_ref().map(|p| p.port),
        ..facts.host()
    };
    // Build before the terminal is touched, so a policy the backend refuses fails here.
    let layers = sandbox::in_process(&backend, &policy, &host)?;
    sandbox::wrap(&backend, &policy, &host, &[])?;

    let use_pty = wants_pty(
        cli.pty,
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    );
    let spec = HelperSpec {
        new_session: use_pty,
        limits: launch::ProcessLimits::from_policy(&policy.limits),
        drop_privileges: layers.drop_privileges,
        landlock: layers.landlock,
        seccomp: layers.seccomp,
        guard: layers.guard,
        stop_notify_fd: None,
        proxy_listen: proxy.as_ref().and_then(|p| {
            p.channel.as_ref().map(|fd| launch::ProxyListen {
                port: p.port,
                channel_fd: fd.as_raw_fd(),
            })
        }),
    };
    let exe = std::env::current_exe().context("cannot locate the sbx-shell executable")?;
    let mut env = policy
        .environment
        .apply(std::env::vars_os(), backend.name());
    env.retain(|(name, _)| name != "SHELL");
    if let Some(proxy) = &proxy {
        let set = netproxy::proxy_env(proxy.port);
        env.retain(|(name, _)| {
            !netproxy::BYPASS_ENV.iter().any(|n| name == n)
                && !set.iter().any(|(n, _)| name == n.as_str())
        });
        env.extend(
            set.into_iter()
                .map(|(n, v)| (OsString::from(n), OsString::from(v))),
        );
    }
    env.push((
        OsString::from("SHELL"),
        launch.shell.clone().into_os_string(),
    ));
    let argv_for = |setup: &pty::ChildSetup<'_>| {
        let mut spec = spec.clone();
        if layers.launcher_depth > 0 {
            spec.stop_notify_fd = setup.stop_notify_fd;
        }
        let helper_argv =
            launch::build_helper_argv(&exe, &spec, &launch).map_err(std::io::Error::other)?;
        let session = sandbox::Host {
            tty: setup.tty,
            ..host
        };
        sandbox::wrap(&backend, &policy, &session, &helper_argv).map_err(std::io::Error::other)
    };
    let options = process::SessionOptions {
        timeout: policy.limits.timeout_seconds.map(|after| process::Timeout {
            after: std::time::Duration::from_secs(after),
            grace: std::time::Duration::from_secs(policy.limits.timeout_grace_seconds),
        }),
        launcher_depth: layers.launcher_depth,
    };
    let code = if use_pty {
        pty::run(&argv_for, &env, options)
    } else {
        direct::run(&argv_for, &env, options)
    };
    if let Some(line) = proxy.as_ref().and_then(|p| p.proxy.summary()) {
        verbosity.note(&line);
    }
    if let Ok(code) = &code {
        let record = sessionlog::Record {
            start: sessionlog::rfc3339(started),
            end: sessionlog::rfc3339(std::time::SystemTime::now()),
            duration_ms: started
                .elapsed()
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            command: std::iter::once(&launch.program)
                .chain(&launch.args)
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: facts.cwd.display().to_string(),
            profile: policy.profile.clone(),
            backend: backend.name().to_string(),
            layers: backend.layers().iter().map(|l| l.to_string()).collect(),
            policy_digest: sessionlog::digest(&serde_json::to_string(&policy).unwrap_or_default()),
            exit_status: *code,
            network_refused: proxy.as_ref().map_or(0, |p| p.proxy.refused()),
        };
        if let Err(e) = sessionlog::append(&home, &record) {
            verbosity.detail(&format!("sbx-shell: cannot write the session log: {e}"));
        }
    }
    code.with_context(|| format!("cannot run {}", launch.program.to_string_lossy()))
        .map_err(Failure::from)
}

/// The allow-list proxy of a session, and how the sandbox reaches it.
struct ProxySession {
    proxy: netproxy::Proxy,
    /// The loopback port the sandbox connects to.
    port: u16,
    /// Inside bwrap: the helper's end of the unix socket over which it sends the listening
    /// socket (inherited by the helper; kept open here until the session ends).
    channel: Option<std::os::fd::OwnedFd>,
}

/// Start the proxy when the policy has a network allow-list.
fn start_proxy(
    policy: &policy::Policy,
    backend: &sandbox::Backend,
    resolve: &[String],
    home: &Path,
) -> Result<Option<ProxySession>, Failure> {
    let policy::Network::Allow(rules) = &policy.network else {
        if !resolve.is_empty() {
            return Err(anyhow!("--resolve applies to a network allow-list only\nHint: add --net allow=HOST,… or leave out --resolve").into());
        }
        return Ok(None);
    };
    let overrides = netproxy::request::parse_resolve(resolve).map_err(|e| anyhow!(e))?;
    let proxy = netproxy::Proxy::new(rules.clone(), overrides, network_log(home));
    if let sandbox::Backend::Bwrap { .. } = backend {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::empty(),
        )
        .context("cannot create the network proxy's channel")?;
        nix::fcntl::fcntl(
            &ours,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .context("cannot create the network proxy's channel")?;
        proxy
            .serve_from_sandbox(ours)
            .context("cannot start the network proxy")?;
        return Ok(Some(ProxySession {
            proxy,
            port: netproxy::SANDBOX_PORT,
            channel: Some(theirs),
        }));
    }
    let port = proxy
        .listen_on_host()
        .context("cannot start the network proxy")?;
    Ok(Some(ProxySession {
        proxy,
        port,
        channel: None,
    }))
}

/// `$XDG_STATE_HOME/sbx-shell/network.log` (else under ~/.local/state), its directory
/// created private; `None` when it cannot be.
fn network_log(home: &Path) -> Option<PathBuf> {
    let dir = sessionlog::state_dir(home);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .ok()?;
    Some(dir.join("network.log"))
}

/// `--pty auto` means a pty only when both stdin and stdout are terminals.
pub fn wants_pty(mode: PtyMode, stdin_tty: bool, stdout_tty: bool) -> bool {
    match mode {
        PtyMode::Auto => stdin_tty && stdout_tty,
        PtyMode::Always => true,
        PtyMode::Never => false,
    }
}

/// Fail early, before the terminal is touched, when the program cannot be found or run.
fn check_program(program: &OsString, probe: &SystemProbe) -> Result<(), Failure> {
    let path = Path::new(program);
    let found = if path.components().count() > 1 || program.to_string_lossy().contains('/') {
        path.exists().then(|| path.to_path_buf())
    } else {
        launch::find_in_path(path, std::env::var_os("PATH").as_deref(), |p| {
            probe.is_file(p)
        })
    };
    let shown = program.to_string_lossy();
    match found {
        None => {
            let hint = launch::install_hint(&shown).map_or_else(
                || "check the spelling, install it, or give its full path".to_string(),
                |install| format!("{install}, then check that it is on PATH"),
            );
            Err(Failure { code: helper::EXIT_NOT_FOUND, error: anyhow!("command not found: {shown}\nHint: {hint}") })
        }
        Some(p) if !shell::ShellProbe::is_executable(probe, &p) => Err(Failure {
            code: helper::EXIT_NOT_RUNNABLE,
            error: anyhow!("not an executable file: {}\nHint: check its permissions (chmod +x) or run it through an interpreter", p.display()),
        }),
        Some(_) => Ok(()),
    }
}

/// The login shell in the passwd entry of the real user.
fn passwd_shell() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.shell)
}

/// The real machine behind `shell::ShellProbe`.
struct SystemProbe {
    me: Option<PathBuf>,
}

impl SystemProbe {
    fn is_file(&self, path: &Path) -> bool {
        path.metadata().is_ok_and(|m| m.is_file())
    }
}

impl shell::ShellProbe for SystemProbe {
    fn is_self(&self, path: &Path) -> bool {
        if path.file_name().is_some_and(|n| n == "sbx-shell") {
            return true;
        }
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        match (&self.me, canonical(path)) {
            (Some(me), Some(candidate)) => canonical(me).is_some_and(|me| me == candidate),
            _ => false,
        }
    }

    fn is_executable(&self, path: &Path) -> bool {
        self.is_file(path) && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
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
