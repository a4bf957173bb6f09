//! `explain`'s report as text: the policy, section by section, and one backend in full.

use std::fmt::Write;

use super::report::{BackendOutput, BackendReport, Report, RulesOrRefusal, Selected};
use crate::cli::ExplainBackend;
use crate::policy::config::{BackendChoice, FsMode, OpenFiles, OpenFilesMode};
use crate::policy::{Limits, Network, ResolvedPath, ALWAYS_DROPPED};
use crate::sandbox::{landlock, seccomp};

/// One backend in full, as text.
pub fn render_backend(report: &Report<'_>, which: ExplainBackend) -> String {
    let name = match which {
        ExplainBackend::Seatbelt => "seatbelt",
        ExplainBackend::Bwrap => "bwrap",
        ExplainBackend::Landlock => "landlock",
        ExplainBackend::Docker => "docker",
        ExplainBackend::Podman => "podman",
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
            mounts,
        } => write_runs(&mut out, argv, mounts, params, profile.as_deref()),
        BackendOutput::Applies {
            landlock_under_bwrap,
            landlock_alone,
            seccomp,
            seccomp_alone,
            unjudged,
        } => {
            write_landlock(
                &mut out,
                "Landlock, layered under bwrap",
                landlock_under_bwrap,
            );
            write_landlock(&mut out, "Landlock alone (no bwrap)", landlock_alone);
            write_seccomp(&mut out, "seccomp, under bwrap", seccomp);
            write_seccomp(&mut out, "seccomp, Landlock alone", seccomp_alone);
            write_mediated(&mut out, unjudged.as_deref());
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

/// A launcher's argv, then (bwrap) what the helper mounts, and (Seatbelt) the profile.
fn write_runs(
    out: &mut String,
    argv: &[String],
    mounts: &[crate::sandbox::bwrap::Mount],
    params: &[(String, String)],
    profile: Option<&str>,
) {
    let _ = writeln!(out, "{}", argv.join(" "));
    if !mounts.is_empty() {
        let _ = writeln!(
            out,
            "then the helper, first, in order (each path opened without following a symlink; one \
                that is not what sbx-shell saw ends the session, a vanished socket is skipped):"
        );
    }
    for m in mounts {
        let _ = writeln!(out, "  {} -> {}", m.path.display(), describe_mount(&m.how));
    }
    for (key, value) in params {
        let _ = writeln!(out, "  -D {key}={value}");
    }
    if let Some(profile) = profile {
        let _ = writeln!(out, "\nPROFILE:\n{profile}");
    }
}

/// What the helper does at one path of the mount plan, in words.
fn describe_mount(how: &crate::sandbox::bwrap::How) -> String {
    use crate::sandbox::bwrap::How;
    // ", bin, …": the names besides dot entries a seal keeps read-only.
    let besides = |names: &[String]| -> String { names.iter().map(|r| format!(", {r}")).collect() };
    match how {
        How::Writable => "checked: bwrap's read-write bind".to_string(),
        How::InnerWritable => {
            "read-write, bound on itself (inside another writable path)".to_string()
        }
        How::Seal { readonly } => format!(
            "sealed: read-only, nothing can be created at its top; its entries stay writable except dot entries{}",
            besides(readonly)
        ),
        How::SealDots { readonly } => format!(
            "its dot entries{} read-only; new names at its top judged by the guard (no dot names)",
            besides(readonly)
        ),
        How::Pin => "pinned: cannot be renamed or removed".to_string(),
        How::ReadOnly => "read-only".to_string(),
        How::Resolves => "checked: still leads to what the policy resolved".to_string(),
        How::Twin {
            twin,
            layers: None,
            ..
        } => format!("its twin {} (read-write)", twin.display()),
        How::Twin {
            layers: Some((upper, _)), ..
        } => format!(
            "itself read-only beneath {} (read-write; an overlay)",
            upper.display()
        ),
        How::Layered { lower, .. } => format!(
            "{} read-only beneath it (an overlay)",
            lower.display()
        ),
        How::Hide { dir: true } => "an empty read-only directory".to_string(),
        How::View { copy } => format!(
            "a read-only copy of what of it is revealed ({})",
            copy.display()
        ),
        How::Hide { dir: false } => "/dev/null".to_string(),
    }
}

/// Landlock alone: the calls the guard answers; and whether it judges the names the
/// program makes, or (before Linux 5.14) what can be made.
fn write_mediated(out: &mut String, unjudged: Option<&[std::path::PathBuf]>) {
    let mediated: Vec<&str> = crate::sandbox::mediated::table()
        .iter()
        .map(|m| m.syscall)
        .collect();
    let _ = writeln!(
        out,
        "mediated by sbx-shell, Landlock alone (see docs/config.md, The mediator): {}",
        mediated.join(" ")
    );
    let names = match unjudged {
        None => "judged by the guard when they are made (what would run code outside is refused)".to_string(),
        Some(missing) => format!(
            "not judged on this kernel (before Linux 5.14): what exists of the protected paths is \
                mounted read-only (bwrap; Landlock alone refuses to run), and these can be made: {}",
            if missing.is_empty() {
                "none of the policy's (a new repository's hooks and config can)".to_string()
            } else {
                missing.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
            }
        ),
    };
    let _ = writeln!(
        out,
        "names the program makes in its writable trees: {names}"
    );
}

fn write_landlock(out: &mut String, title: &str, rules: &RulesOrRefusal) {
    let _ = writeln!(out, "{title}:");
    let r: &landlock::Ruleset = match rules {
        RulesOrRefusal::Rules(r) => r,
        RulesOrRefusal::Refuses(reason) => {
            let _ = writeln!(out, "  refuses: {}", reason.replace('\n', " "));
            return;
        }
    };
    for rule in &r.rules {
        let _ = writeln!(out, "  {:<18} {}", rule.access.label(), rule.path.display());
    }
    let tcp = match (r.deny_tcp, r.connect_port) {
        (true, Some(port)) => format!("TCP bind denied, connect only to port {port} (the proxy)"),
        (true, None) => "TCP bind and connect denied".to_string(),
        (false, _) => "TCP not restricted".to_string(),
    };
    let _ = writeln!(
        out,
        "  {tcp}; abstract unix sockets and signals scoped; needs ABI {}",
        r.min_abi
    );
}

fn write_seccomp(out: &mut String, title: &str, filter: &seccomp::Filter) {
    let _ = writeln!(
        out,
        "{title} (denied with EPERM; x32 ABI rejected: {}):",
        filter.reject_x32
    );
    for rule in &filter.rules {
        let when = match &rule.condition {
            seccomp::Condition::Always => String::new(),
            seccomp::Condition::IoctlRequest { requests } => {
                let requests: Vec<String> = requests.iter().map(|r| format!("{r:#x}")).collect();
                format!(" when request is {}", requests.join(" or "))
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
            seccomp::Condition::SocketIs {
                family,
                types: None,
            } => format!(" when the family is {family}"),
            seccomp::Condition::SocketIs {
                family,
                types: Some(types),
            } => format!(" when the family is {family} and the type one of {types:?}"),
            seccomp::Condition::SetsSetId {
                arg,
                creating: None,
            } => format!(" when the mode (argument {arg}) sets S_ISUID or S_ISGID"),
            seccomp::Condition::SetsSetId {
                arg,
                creating: Some((flags_arg, flags)),
            } => {
                let flags: Vec<String> = flags.iter().map(|f| format!("{f:#o}")).collect();
                format!(
                    " when the mode (argument {arg}) sets S_ISUID or S_ISGID and the flags (argument {flags_arg}) one of {}",
                    flags.join(" ")
                )
            }
        };
        let _ = writeln!(out, "  {}{when}: {}", rule.syscalls.join(" "), rule.why);
    }
}

/// The report as text.
pub fn render_text(report: &Report<'_>) -> String {
    let p = report.policy;
    let mut out = String::new();
    let out = &mut out;
    line(out, "profile", &p.profile);
    if !report.command.is_empty() {
        line(out, "command", &report.command.join(" "));
    }
    write_filesystem(out, report);
    write_private_home(out, report);
    write_sockets(out, report);
    line(out, "network", &describe_network(&p.network));
    for c in &p.injected {
        line(out, "credential", &crate::policy::inject::describe(c));
    }
    write_ssh(out, report);
    line(out, "nested pty", yes_no(p.nested_pty));
    line(out, "keychain", yes_no(p.keychain_access));
    line(out, "gui", yes_no(p.gui));
    line(
        out,
        "clipboard",
        match p.clipboard {
            crate::policy::config::Clipboard::None => {
                "none: the program can neither set nor read it (OSC 52)"
            }
            crate::policy::config::Clipboard::Write => {
                "write: the program can set it, not read it (OSC 52)"
            }
            crate::policy::config::Clipboard::ReadWrite => {
                "read-write: the program can set and read it (OSC 52)"
            }
        },
    );
    line(out, "limits", &describe_limits(&p.limits));
    if matches!(p.backend, BackendChoice::Docker | BackendChoice::Podman) {
        line(out, "container", &p.container.describe());
    }
    write_environment(out, report);
    line(out, "runs with", &describe_selected(&report.selected));
    for backend in &report.backends {
        line(out, "backend", &describe_backend(backend));
    }
    std::mem::take(out)
}

/// One line of the report: the key in a column, then the value.
fn line(out: &mut String, key: &str, value: &str) {
    let _ = writeln!(out, "{key:<13} {value}");
}

/// The filesystem section: the mode, the workspace and each kind of path.
fn write_filesystem(out: &mut String, report: &Report<'_>) {
    let fs = &report.policy.filesystem;
    line(
        out,
        "filesystem",
        match fs.mode {
            FsMode::ReadOnly => "read-only",
            FsMode::WorkspaceWrite => "workspace-write",
            FsMode::Unrestricted => "unrestricted",
        },
    );
    line(out, "  workspace", &show(&fs.workspace));
    line(out, "  writable", &list(&fs.writable));
    if !report.created_at_start.is_empty() {
        let created: Vec<String> = report
            .created_at_start
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        line(
            out,
            "  created",
            &format!(
                "{} (missing now: made at start, 0700)",
                created.join("\n              ")
            ),
        );
    }
    for seed in &fs.seed {
        line(
            out,
            "  seeded",
            &format!(
                "{} (copied once from {} when missing)",
                seed.path.path.display(),
                seed.from.path.display()
            ),
        );
    }
    line(out, "  readable", &list(&fs.readable));
    line(out, "  denied", &list(&fs.denied));
    if !fs.revealed.is_empty() {
        line(out, "  revealed", &list(&fs.revealed));
    }
    line(out, "  protected", &list(&fs.protected));
}

/// The ssh section: the keys the session's agent passes, where each may log in, what it
/// signs, and how ssh reaches hosts.
fn write_ssh(out: &mut String, report: &Report<'_>) {
    let Some(ssh) = &report.policy.ssh else {
        line(
            out,
            "ssh",
            "no agent: ssh inside has no key (--ssh-key KEY@HOST passes one)",
        );
        return;
    };
    line(
        out,
        "ssh",
        "a filtered agent of sbx-shell's (SSH_AUTH_SOCK inside); your agent stays out of reach",
    );
    for key in &ssh.keys {
        let hosts = match key.hosts.is_empty() {
            true => "any host the network allows".to_string(),
            false => words(key.hosts.iter()),
        };
        line(out, "  key", &format!("{} → logins to {hosts}", key.key));
    }
    line(
        out,
        "  signs",
        match ssh.sign_commits {
            true => "ssh logins (bound to the host's key in known_hosts) and git commits and tags",
            false => "ssh logins only (bound to the host's key in known_hosts); git signing off",
        },
    );
    line(
        out,
        "  confirm",
        match ssh.confirm {
            true => "each signature, on your terminal",
            false => "no",
        },
    );
    let known: Vec<String> = ssh
        .known_hosts
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    line(out, "  known_hosts", &known.join("\n              "));
    line(
        out,
        "  connects",
        "ssh and git through the proxy (a wrapper first on PATH and in GIT_SSH), to hosts --net allow=HOST:22 lists",
    );
}

/// What the private home keeps, and how each kept path meets the host's.
fn write_private_home(out: &mut String, report: &Report<'_>) {
    match &report.policy.private_home {
        None => line(
            out,
            "private home",
            "none: nothing is kept between sessions",
        ),
        Some(home) => {
            line(out,
                "private home",
                &format!(
                    "{} (this profile's; kept between sessions, never the host's files; `sbx-shell home --clear` empties it)",
                    home.dir.display()
                ),
            );
            for kept in &home.kept {
                let host = match (kept.mount, report.host_has(&kept.path)) {
                    (true, true) => "the host has it: bwrap binds the twin over it",
                    (true, false) => "not on the host",
                    (false, true) => "the host's stays read-only",
                    (false, false) => "not on the host",
                };
                let variable = kept
                    .variable
                    .map(|v| format!("; {v} points at the twin"))
                    .unwrap_or_default();
                line(
                    out,
                    "",
                    &format!("{}: {} ({host}{variable})", kept.path.display(), kept.what),
                );
            }
        }
    }
}

/// The host's unix sockets: hidden, granted, reachable.
fn write_sockets(out: &mut String, report: &Report<'_>) {
    let sockets = &report.sockets;
    let paths = |v: &[std::path::PathBuf]| words(v.iter().map(|p| p.display().to_string()));
    line(
        out,
        "host sockets",
        "hidden unless granted: found from the kernel's list and the runtime directories",
    );
    line(out, "  hidden dirs", &paths(&sockets.dirs));
    line(out, "  hidden", &paths(&sockets.sockets));
    line(
        out,
        "  granted",
        &words(
            report
                .policy
                .filesystem
                .sockets
                .iter()
                .map(|g| g.path.display().to_string()),
        ),
    );
    line(out, "  reachable", &paths(&sockets.granted));
}

/// The environment section: what is dropped, allowed, set, and dropped here.
fn write_environment(out: &mut String, report: &Report<'_>) {
    let e = &report.policy.environment;
    line(
        out,
        "environment",
        &format!("always dropped: {}", ALWAYS_DROPPED.join(" ")),
    );
    line(
        out,
        "",
        "dropped when the name looks secret (*TOKEN* *SECRET* *PASSWORD* *_KEY *_PAT …), the \
        value carries a credential (a URL with a password, a token), or it points at a hidden \
        host socket; unless allowed",
    );
    line(out, "  allowed", &words(e.allow.iter()));
    line(out, "  dropped", &words(e.drop.iter()));
    line(
        out,
        "  set",
        &words(e.set.iter().map(|(k, v)| format!("{k}={v}"))),
    );
    line(out, "", "and SBX_SHELL=1, SBX_SANDBOX=<backend>");
    for (name, why) in &report.dropped_variables {
        line(out, "  drops here", &format!("{name}: {why}"));
    }
    for (program, args) in &report.policy.program_args {
        line(
            out,
            "program args",
            &format!("{program} runs as: {program} {}", args.join(" ")),
        );
    }
}

fn describe_network(network: &Network) -> String {
    let rules = match network {
        Network::None => return "none".to_string(),
        Network::Full => return "full".to_string(),
        Network::Allow(rules) => rules,
    };
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

fn describe_limits(l: &Limits) -> String {
    let open_files = match l.open_files {
        OpenFiles::Mode(OpenFilesMode::Raise) => "raised to the hard limit".to_string(),
        OpenFiles::Mode(OpenFilesMode::Keep) => "as inherited".to_string(),
        OpenFiles::Count(n) => n.to_string(),
    };
    let or_none =
        |v: Option<u64>, unit: &str| v.map_or("unlimited".to_string(), |v| format!("{v}{unit}"));
    format!(
        "open files {open_files}; cpu {}; memory {}; private /tmp and /dev/shm {} MiB each \
            (bwrap); session processes {}; session memory {}; processes {}; core dumps {}; timeout \
            {}",
        or_none(l.cpu_seconds, " s"),
        or_none(l.memory_mib, " MiB"),
        l.tmp_mib,
        or_none(l.session_processes, ""),
        or_none(l.session_memory_mib, " MiB"),
        or_none(l.processes, ""),
        if l.core_dumps { "on" } else { "off" },
        l.timeout_seconds.map_or("none".to_string(), |t| format!(
            "{t} s, then SIGKILL after {} s",
            l.timeout_grace_seconds
        )),
    )
}

fn describe_selected(selected: &Selected) -> String {
    match selected {
        Selected::Runs { backend, layers } if layers.is_empty() => {
            format!("{backend}: NO SANDBOX (asked for by name)")
        }
        Selected::Runs { backend, layers } => format!("{backend} (layers: {})", layers.join(", ")),
        Selected::Refuses { reason } => {
            format!("nothing, it refuses: {}", reason.replace('\n', " "))
        }
    }
}

fn describe_backend(backend: &BackendReport) -> String {
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
    format!("{} ({}{here}): {status}", backend.name, backend.platform)
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
