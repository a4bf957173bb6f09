//! `sbx-shell explain`: the resolved policy, as text for people and JSON for tools.
//!
//! Pure rendering of the policy and of what each backend would run for it (the SBPL profile
//! and its parameters, the bwrap argv, the Landlock rulesets and the seccomp table), on any
//! OS, marked with whether this build enforces it here.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::host::{Host, PathKind};
use crate::policy::Policy;
use crate::sandbox::{self, landlock, seatbelt, seccomp};

/// What `explain --json` prints.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub policy: &'a Policy,
    pub command: Vec<String>,
    /// Writable paths in the home that are missing now: created (0700) when a run starts.
    pub created_at_start: Vec<std::path::PathBuf>,
    /// The private home's kept paths the host has now (bwrap binds their twins over them).
    pub kept_on_host: Vec<std::path::PathBuf>,
    /// The backend this policy runs with on this machine and its layers, or why none can.
    pub selected: Selected,
    /// Per backend: what it would enforce, or why it does not exist yet.
    pub backends: Vec<BackendReport>,
    /// The host's sockets and runtime directories this policy hides, and the granted ones.
    pub sockets: crate::host::sockets::Hidden,
    /// The variables of this environment the program would not get, and why (names only).
    pub dropped_variables: Vec<(String, String)>,
}

impl Report<'_> {
    /// Whether the host has this kept path now.
    pub fn host_has(&self, path: &std::path::Path) -> bool {
        self.kept_on_host.iter().any(|p| p == path)
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Selected {
    Runs {
        backend: &'static str,
        layers: Vec<&'static str>,
    },
    Refuses {
        reason: String,
    },
}

impl Selected {
    pub fn of(selected: Result<&sandbox::Backend, String>) -> Selected {
        match selected {
            Ok(backend) => Selected::Runs {
                backend: backend.name(),
                layers: backend.layers(),
            },
            Err(reason) => Selected::Refuses { reason },
        }
    }

    fn uses(&self, layer: &str) -> bool {
        matches!(self, Selected::Runs { layers, .. } if layers.contains(&layer))
    }
}

#[derive(Debug, Serialize)]
pub struct BackendReport {
    pub name: &'static str,
    pub platform: &'static str,
    /// Whether this run would use it on this machine.
    pub enforced_here: bool,
    /// What it would run, or why it would refuse.
    #[serde(flatten)]
    pub output: BackendOutput,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendOutput {
    /// The argv (the helper's own argv elided) and, for Seatbelt, the profile and parameters.
    Runs {
        argv: Vec<String>,
        profile: Option<String>,
        params: Vec<(String, String)>,
        /// bwrap: what the helper then mounts inside, first, in order.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        mounts: Vec<crate::sandbox::bwrap::Mount>,
    },
    /// In-process rules the helper applies: Landlock (layered under bwrap, and alone) and seccomp.
    Applies {
        landlock_under_bwrap: RulesOrRefusal,
        landlock_alone: RulesOrRefusal,
        seccomp: seccomp::Filter,
        seccomp_alone: seccomp::Filter,
        /// On Linux before 5.14, with writable trees: the protected paths in them that do
        /// not exist, which the program can make (`sandbox::unjudged`); `None` where the
        /// guard judges every name made.
        unjudged: Option<Vec<PathBuf>>,
    },
    /// The backend would refuse this policy.
    Refuses { reason: String },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RulesOrRefusal {
    Rules(Box<landlock::Ruleset>),
    Refuses(String),
}

const HELPER: &str = "sbx-shell __sbx_helper …";

/// Every backend, with what it would run for `policy`.
pub fn backends(
    policy: &Policy,
    command: &[OsString],
    host: &Host,
    proxy_port: Option<u16>,
    selected: &Selected,
) -> Vec<BackendReport> {
    let git = crate::protect::repos::scan_writable(policy);
    // The tools as this process's PATH finds them (the child's may differ by
    // `environment.set`), and the command's own directory.
    let program = command.first().map_or(OsStr::new(""), OsString::as_os_str);
    let tools = crate::policy::program::tool_dirs(std::env::var_os("PATH").as_deref(), program);
    let ctx = sandbox::Context {
        place: &host.place,
        tty: None,
        proxy_port,
        helper_fd: None,
        git_dirs: &git.git_dirs,
        temp_dir: Some(Path::new(crate::session::temp::EXAMPLE)),
        shm_dir: Some(Path::new(crate::session::temp::SHM_EXAMPLE)),
        name_server: None,
        tools: &tools,
        root_reads: false,
        container: None,
    };
    let seatbelt = seatbelt_output(policy, &ctx);
    let bwrap = bwrap_output(policy, host, &ctx);
    let landlock = landlock_output(policy, &ctx);
    vec![
        BackendReport {
            name: "seatbelt",
            platform: "macos",
            enforced_here: selected.uses("seatbelt"),
            output: seatbelt,
        },
        BackendReport {
            name: "bwrap",
            platform: "linux",
            enforced_here: selected.uses("bwrap"),
            output: bwrap,
        },
        BackendReport {
            name: "landlock",
            platform: "linux",
            enforced_here: selected.uses("seccomp"),
            output: landlock,
        },
        BackendReport {
            name: "docker",
            platform: "linux",
            enforced_here: selected.uses("docker"),
            output: container_output(policy, host, &ctx, sandbox::Engine::Docker),
        },
        BackendReport {
            name: "podman",
            platform: "linux",
            enforced_here: selected.uses("podman"),
            output: container_output(policy, host, &ctx, sandbox::Engine::Podman),
        },
    ]
}

fn strings(argv: Vec<OsString>) -> Vec<String> {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The Seatbelt profile and its parameters (argv abbreviated: the profile is shown apart).
fn seatbelt_output(policy: &Policy, ctx: &sandbox::Context<'_>) -> BackendOutput {
    let inputs = seatbelt::SeatbeltInputs {
        policy,
        temp_dir: ctx.place.temp_dir.as_deref(),
        tty: None,
        terminals: &ctx.place.terminals,
        user_dirs: &ctx.place.user_dirs,
        proxy_port: ctx.proxy_port,
    };
    match seatbelt::build_profile(&inputs) {
        Ok(profile) => BackendOutput::Runs {
            mounts: Vec::new(),
            argv: vec![
                crate::host::SANDBOX_EXEC.into(),
                "-p".into(),
                "PROFILE".into(),
                "-D …".into(),
                HELPER.into(),
            ],
            params: profile
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.display().to_string()))
                .collect(),
            profile: Some(profile.text),
        },
        Err(e) => BackendOutput::Refuses {
            reason: e.to_string(),
        },
    }
}

/// The bwrap argv, as the run builds it (with bwrap's usual path where there is none).
fn bwrap_output(policy: &Policy, host: &Host, ctx: &sandbox::Context<'_>) -> BackendOutput {
    let backend = sandbox::Backend::Bwrap {
        path: host
            .machine
            .bwrap
            .clone()
            .unwrap_or_else(|| "/usr/bin/bwrap".into()),
        landlock: true,
    };
    let built = sandbox::wrap(&backend, policy, ctx, &[HELPER.into()])
        .and_then(|argv| Ok((argv, sandbox::in_process(&backend, policy, ctx)?.mounts)));
    match built {
        Ok((argv, mounts)) => BackendOutput::Runs {
            argv: strings(argv),
            profile: None,
            params: Vec::new(),
            mounts,
        },
        Err(e) => BackendOutput::Refuses {
            reason: e.to_string(),
        },
    }
}

/// The engine's argv, as the run builds it, with the session's own values named
/// (`NAME`, `STATE`): the helper inside applies Landlock alone's rules.
fn container_output(
    policy: &Policy,
    host: &Host,
    ctx: &sandbox::Context<'_>,
    engine: sandbox::Engine,
) -> BackendOutput {
    let cli = match engine {
        sandbox::Engine::Docker => host.machine.docker.clone(),
        sandbox::Engine::Podman => host.machine.podman.clone(),
    };
    let container = sandbox::Container {
        engine,
        cli: cli.unwrap_or_else(|| PathBuf::from(engine.name())),
    };
    let (top, links) = crate::host::root::entries().unwrap_or_default();
    let (uid, gid, groups) = crate::host::root::ids();
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("sbx-shell"));
    let dir = PathBuf::from("STATE/containers/NAME");
    let socket = dir.join(sandbox::container::SOCKET_NAME);
    let resolv_conf = dir.join(sandbox::container::RESOLV_CONF_NAME);
    let cwd = ctx
        .place
        .cwd
        .clone()
        .unwrap_or_else(|_| policy.filesystem.workspace.real().to_path_buf());
    let host_image = sandbox::container::host_image(&links);
    let launch = sandbox::ContainerLaunch {
        name: "NAME",
        user: (uid, gid, &groups),
        exe: &exe,
        socket: &socket,
        cwd: &cwd,
        top: &top,
        host_image: &host_image,
        resolv_conf: (policy.network != crate::policy::Network::Full).then_some(&resolv_conf),
    };
    let ctx = sandbox::Context {
        container: Some(&launch),
        ..*ctx
    };
    let command = ["sbx-shell".into(), "__sbx_helper".into(), "…".into()];
    match sandbox::wrap(
        &sandbox::Backend::Container(container),
        policy,
        &ctx,
        &command,
    ) {
        Ok(argv) => BackendOutput::Runs {
            argv: strings(argv),
            profile: None,
            params: Vec::new(),
            mounts: Vec::new(),
        },
        Err(e) => BackendOutput::Refuses {
            reason: e.to_string(),
        },
    }
}

/// The Landlock rulesets (under bwrap, and alone) and the seccomp table.
fn landlock_output(policy: &Policy, ctx: &sandbox::Context<'_>) -> BackendOutput {
    let exists = |p: &Path| ctx.place.kind(p) != PathKind::Missing;
    let ruleset = |layering| match landlock::build_ruleset(
        policy,
        layering,
        &exists,
        &crate::host::children,
        landlock::SessionParts {
            names_judged: sandbox::names_judged(policy),
            ..ctx.session_parts()
        },
    ) {
        Ok(rules) => RulesOrRefusal::Rules(Box::new(rules)),
        Err(e) => RulesOrRefusal::Refuses(e.to_string()),
    };
    match ruleset(landlock::Layering::UnderBwrap) {
        RulesOrRefusal::Refuses(reason) => BackendOutput::Refuses { reason },
        under_bwrap => BackendOutput::Applies {
            landlock_under_bwrap: under_bwrap,
            landlock_alone: ruleset(landlock::Layering::Alone),
            seccomp: seccomp::build_filter(policy, false, true),
            seccomp_alone: seccomp::build_filter(policy, true, false),
            unjudged: sandbox::unjudged(policy, &crate::host::kernel_release(), &exists),
        },
    }
}

pub fn report<'a>(
    policy: &'a Policy,
    command: &[OsString],
    host: &Host,
    proxy_port: Option<u16>,
    selected: Selected,
) -> Report<'a> {
    Report {
        policy,
        created_at_start: crate::policy::state_to_create(&policy.filesystem, &|p| p.exists()),
        kept_on_host: policy
            .private_home
            .iter()
            .flat_map(|h| &h.kept)
            .filter(|k| k.path.symlink_metadata().is_ok())
            .map(|k| k.path.clone())
            .collect(),
        command: command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        backends: backends(policy, command, host, proxy_port, &selected),
        sockets: crate::host::sockets::for_policy(&host.place.sockets, &policy.filesystem),
        dropped_variables: dropped_variables(policy, host, &selected),
        selected,
    }
}

/// The variables of sbx-shell's environment the program would not get, and why.
fn dropped_variables(policy: &Policy, host: &Host, selected: &Selected) -> Vec<(String, String)> {
    let inherited: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let confined = matches!(selected, Selected::Runs { backend, .. } if *backend != "none");
    let check = crate::host::sockets::variable_check(
        policy,
        host.place.runtime_dir.as_deref(),
        &inherited,
        confined,
    );
    inherited
        .iter()
        .filter_map(|(name, value)| {
            let name = name.to_str()?;
            let why = policy.environment.verdict(name, value, &check)?;
            Some((name.to_string(), why.why()))
        })
        .collect()
}
