//! `sbx-shell explain`: the resolved policy, as text for people and JSON for tools.
//!
//! Pure rendering of the policy and of what each backend would run for it (the SBPL profile
//! and its parameters, the bwrap argv, the Landlock rulesets and the seccomp table), on any
//! OS, marked with whether this build enforces it here.

use std::ffi::OsString;
use std::fmt::Write;

use serde::Serialize;

use crate::cli::ExplainBackend;
use crate::config::{FsMode, OpenFiles, OpenFilesMode};
use crate::policy::{Network, Policy, ResolvedPath, ALWAYS_DROPPED};
use crate::sandbox::{self, bwrap, landlock, seatbelt, seccomp};
use std::path::Path;

/// What `explain --json` prints.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub policy: &'a Policy,
    pub command: Vec<String>,
    /// The backend this policy runs with on this machine and its layers, or why none can.
    pub selected: Selected,
    /// Per backend: what it would enforce, or why it does not exist yet.
    pub backends: Vec<BackendReport>,
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
    },
    /// In-process rules the helper applies: Landlock (layered under bwrap, and alone) and seccomp.
    Applies {
        landlock_under_bwrap: RulesOrRefusal,
        landlock_alone: RulesOrRefusal,
        seccomp: seccomp::Filter,
    },
    /// The backend would refuse this policy.
    Refuses { reason: String },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RulesOrRefusal {
    Rules(landlock::Ruleset),
    Refuses(String),
}

use crate::host::{Host, PathKind};

const HELPER: &str = "sbx-shell __sbx_helper …";

/// Every backend, with what it would run for `policy`.
pub fn backends(
    policy: &Policy,
    host: &Host,
    proxy_port: Option<u16>,
    selected: &Selected,
) -> Vec<BackendReport> {
    let place = &host.place;
    let strings = |argv: Vec<std::ffi::OsString>| {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    let seatbelt = match seatbelt::build_profile(&seatbelt::Inputs {
        policy,
        temp_dir: place.temp_dir.as_deref(),
        tty: None,
        proxy_port,
    }) {
        Ok(profile) => BackendOutput::Runs {
            argv: vec![
                seatbelt::SANDBOX_EXEC.into(),
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
    };
    let bwrap_path = host
        .machine
        .bwrap
        .as_deref()
        .unwrap_or(Path::new("/usr/bin/bwrap"));
    let kind_of = |p: &Path| place.kind(p);
    let cwd = place.cwd.as_deref().unwrap_or(Path::new("."));
    let inputs = bwrap::Inputs {
        policy,
        bwrap: bwrap_path,
        cwd,
        runtime_dir: place.runtime_dir.as_deref(),
        host_sockets: &place.sockets,
        kind_of: &kind_of,
    };
    let bwrap = BackendOutput::Runs {
        argv: strings(bwrap::build_argv(&inputs, &[HELPER.into()])),
        profile: None,
        params: Vec::new(),
    };
    let exists = |p: &Path| place.kind(p) != PathKind::Missing;
    let ruleset = |layering| match landlock::build_ruleset(policy, layering, &exists, proxy_port) {
        Ok(rules) => RulesOrRefusal::Rules(rules),
        Err(e) => RulesOrRefusal::Refuses(e.to_string()),
    };
    let landlock = match ruleset(landlock::Layering::UnderBwrap) {
        RulesOrRefusal::Refuses(reason) => BackendOutput::Refuses { reason },
        under_bwrap => BackendOutput::Applies {
            landlock_under_bwrap: under_bwrap,
            landlock_alone: ruleset(landlock::Layering::Alone),
            seccomp: seccomp::build_filter(policy),
        },
    };
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
    ]
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
        command: command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        backends: backends(policy, host, proxy_port, &selected),
        selected,
    }
}

/// One backend in full, as text.
pub fn render_backend(report: &Report<'_>, which: ExplainBackend) -> String {
    let name = match which {
        ExplainBackend::Seatbelt => "seatbelt",
        ExplainBackend::Bwrap => "bwrap",
        ExplainBackend::Landlock => "landlock",
    };
    let Some(backend) = report.backends.iter().find(|b| b.name == name) else {
        return String::new();
    };
    let mut out = String::new();
    match &backend.output {
        BackendOutput::Runs {
            argv,
            profile,
            params,
        } => {
            let _ = writeln!(out, "{}", argv.join(" "));
            for (key, value) in params {
                let _ = writeln!(out, "  -D {key}={value}");
            }
            if let Some(profile) = profile {
                let _ = writeln!(out, "\nPROFILE:\n{profile}");
            }
        }
        BackendOutput::Applies {
            landlock_under_bwrap,
            landlock_alone,
            seccomp,
        } => {
            for (title, rules) in [
                ("Landlock, layered under bwrap", landlock_under_bwrap),
                ("Landlock alone (no bwrap)", landlock_alone),
            ] {
                let _ = writeln!(out, "{title}:");
                match rules {
                    RulesOrRefusal::Rules(r) => {
                        for rule in &r.rules {
                            let _ = writeln!(
                                out,
                                "  {:<18} {}",
                                rule.access.label(),
                                rule.path.display()
                            );
                        }
                        let tcp = match (r.deny_tcp, r.connect_port) {
                            (true, Some(port)) => {
                                format!("TCP bind denied, connect only to port {port} (the proxy)")
                            }
                            (true, None) => "TCP bind and connect denied".to_string(),
                            (false, _) => "TCP not restricted".to_string(),
                        };
                        let _ = writeln!(
                            out,
                            "  {tcp}; abstract unix sockets and signals scoped; needs ABI {}",
                            r.min_abi
                        );
                    }
                    RulesOrRefusal::Refuses(reason) => {
                        let _ = writeln!(out, "  refuses: {}", reason.replace('\n', " "));
                    }
                }
            }
            let _ = writeln!(
                out,
                "seccomp (denied with EPERM; x32 ABI rejected: {}):",
                seccomp.reject_x32
            );
            for rule in &seccomp.rules {
                let when = match &rule.condition {
                    seccomp::Condition::Always => String::new(),
                    seccomp::Condition::IoctlRequest { requests } => {
                        format!(
                            " when request is {}",
                            requests
                                .iter()
                                .map(|r| format!("{r:#x}"))
                                .collect::<Vec<_>>()
                                .join(" or ")
                        )
                    }
                    seccomp::Condition::SocketNotIn {
                        allowed,
                        stream_only,
                    } if stream_only.is_empty() => {
                        format!(" unless (family, protocol) is one of {allowed:?}")
                    }
                    seccomp::Condition::SocketNotIn {
                        allowed,
                        stream_only,
                    } => format!(
                        " unless (family, protocol) is one of {allowed:?}, families {stream_only:?} as stream sockets only"
                    ),
                };
                let _ = writeln!(out, "  {}{when}: {}", rule.syscalls.join(" "), rule.why);
            }
        }
        BackendOutput::Refuses { reason } => {
            let _ = writeln!(out, "{name} refuses this policy: {reason}");
        }
    }
    if !backend.enforced_here {
        let _ = writeln!(
            out,
            "\n(not used on this machine with this policy: shown for review)"
        );
    }
    out
}

/// The report as text.
pub fn render_text(report: &Report<'_>) -> String {
    let p = report.policy;
    let fs = &p.filesystem;
    let mut out = String::new();
    let mut line = |key: &str, value: &str| {
        let _ = writeln!(out, "{key:<13} {value}");
    };
    line("profile", &p.profile);
    if !report.command.is_empty() {
        line("command", &report.command.join(" "));
    }
    line(
        "filesystem",
        match fs.mode {
            FsMode::ReadOnly => "read-only",
            FsMode::WorkspaceWrite => "workspace-write",
            FsMode::Unrestricted => "unrestricted",
        },
    );
    line("  workspace", &show(&fs.workspace));
    line("  writable", &list(&fs.writable));
    line("  readable", &list(&fs.readable));
    line("  denied", &list(&fs.denied));
    line("  protected", &list(&fs.protected));
    let network = match &p.network {
        Network::None => "none".to_string(),
        Network::Full => "full".to_string(),
        Network::Allow(rules) => {
            let shown: Vec<String> = rules
                .iter()
                .map(|r| {
                    let host = if r.wildcard {
                        format!("*.{}", r.host)
                    } else {
                        r.host.clone()
                    };
                    r.port.map_or(host.clone(), |port| format!("{host}:{port}"))
                })
                .collect();
            format!(
                "only {} (ports 80 and 443 unless a port is given), through sbx-shell's proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY)",
                shown.join(", ")
            )
        }
    };
    line("network", &network);
    line("nested pty", yes_no(p.nested_pty));
    line("keychain", yes_no(p.keychain_access));
    line("gui", yes_no(p.gui));
    let l = &p.limits;
    let open_files = match l.open_files {
        OpenFiles::Mode(OpenFilesMode::Raise) => "raised to the hard limit".to_string(),
        OpenFiles::Mode(OpenFilesMode::Keep) => "as inherited".to_string(),
        OpenFiles::Count(n) => n.to_string(),
    };
    let or_none =
        |v: Option<u64>, unit: &str| v.map_or("unlimited".to_string(), |v| format!("{v}{unit}"));
    line(
        "limits",
        &format!(
            "open files {open_files}; cpu {}; memory {}; processes {}; core dumps {}; timeout {}",
            or_none(l.cpu_seconds, " s"),
            or_none(l.memory_mib, " MiB"),
            or_none(l.processes, ""),
            if l.core_dumps { "on" } else { "off" },
            l.timeout_seconds.map_or("none".to_string(), |t| format!(
                "{t} s, then SIGKILL after {} s",
                l.timeout_grace_seconds
            )),
        ),
    );
    let e = &p.environment;
    line(
        "environment",
        &format!("always dropped: {}", ALWAYS_DROPPED.join(" ")),
    );
    line("", "dropped when the name looks secret (*TOKEN* *SECRET* *PASSWORD* *_API_KEY …), unless allowed");
    line("  allowed", &words(e.allow.iter()));
    line("  dropped", &words(e.drop.iter()));
    line(
        "  set",
        &words(e.set.iter().map(|(k, v)| format!("{k}={v}"))),
    );
    line("", "and SBX_SHELL=1, SBX_SANDBOX=<backend>");
    match &report.selected {
        Selected::Runs { backend, layers } if layers.is_empty() => line(
            "runs with",
            &format!("{backend}: NO SANDBOX (asked for by name)"),
        ),
        Selected::Runs { backend, layers } => line(
            "runs with",
            &format!("{backend} (layers: {})", layers.join(", ")),
        ),
        Selected::Refuses { reason } => line(
            "runs with",
            &format!("nothing, it refuses: {}", reason.replace('\n', " ")),
        ),
    }
    for backend in &report.backends {
        let status = match &backend.output {
            BackendOutput::Runs { .. } | BackendOutput::Applies { .. } => {
                "builds for this policy (see --show)".to_string()
            }
            BackendOutput::Refuses { reason } => format!("refuses: {}", reason.replace('\n', " ")),
        };
        let here = if backend.enforced_here {
            ", used here"
        } else {
            ", not used here"
        };
        line(
            "backend",
            &format!("{} ({}{here}): {status}", backend.name, backend.platform),
        );
    }
    out
}

fn show(path: &ResolvedPath) -> String {
    match &path.real {
        Some(real) => format!("{} (= {})", path.path.display(), real.display()),
        None => path.path.display().to_string(),
    }
}

fn list(paths: &[ResolvedPath]) -> String {
    if paths.is_empty() {
        return "—".into();
    }
    paths
        .iter()
        .map(show)
        .collect::<Vec<_>>()
        .join("\n              ")
}

fn words<T: std::fmt::Display>(items: impl Iterator<Item = T>) -> String {
    let all: Vec<String> = items.map(|i| i.to_string()).collect();
    if all.is_empty() {
        "—".into()
    } else {
        all.join(" ")
    }
}

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}
