//! `sbx-shell doctor`: which sandbox layers can run on this machine, and why not.
//!
//! The facts are `host::Machine`'s, measured with probe runs; `evaluate` turns them into
//! checks, each with what was measured, what was expected and the remedy — pure, so every
//! branch is unit-tested. The verdict is `select::select`'s for `auto`, the same decision a
//! run takes. The exit code is non-zero when the default backend cannot run.

use serde::Serialize;

use crate::host::{Machine, BWRAP_PATHS};
use crate::policy::config::BackendChoice;
use crate::sandbox::landlock::MIN_ABI;
use crate::sandbox::select;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: CheckStatus,
    pub measured: String,
    pub expected: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

/// The report: every check, and whether the default backend can run.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    pub os: &'static str,
    pub checks: Vec<Check>,
    /// What `--backend auto` runs here, with its layers, or why it refuses.
    pub default_backend: String,
    pub default_backend_can_run: bool,
    /// When `auto` falls back to Landlock alone: bwrap's protections missing here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_without_bwrap: Vec<&'static str>,
    /// …and what would let bwrap run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_bwrap: Option<String>,
}

fn check(
    name: &'static str,
    status: CheckStatus,
    measured: impl Into<String>,
    expected: &str,
    remedy: Option<&str>,
) -> Check {
    Check {
        name,
        status,
        measured: measured.into(),
        expected: expected.into(),
        remedy: remedy.map(str::to_string),
    }
}

/// Turn the facts into checks and the verdict.
pub fn evaluate(m: &Machine) -> DoctorReport {
    let mut checks = Vec::new();
    match m.os {
        "linux" => checks.extend(linux_checks(m)),
        "macos" => checks.push(sandbox_exec_check(m)),
        _ => checks.push(check(
            "platform",
            CheckStatus::Fail,
            m.os,
            "linux or macos",
            Some("sbx-shell sandboxes on Linux and macOS only"),
        )),
    }
    if let Some((soft, hard)) = m.nofile {
        let status = if hard >= 4096 {
            CheckStatus::Ok
        } else {
            CheckStatus::Warn
        };
        checks.push(check(
            "open-file limit",
            status,
            format!("soft {soft}, hard {hard}; the child gets the hard limit"),
            "hard limit ≥ 4096 (node, language servers and builds open many files)",
            (status != CheckStatus::Ok).then_some("raise the hard nofile limit (/etc/security/limits.conf, or LimitNOFILE= for a service)"),
        ));
    }
    let fallback = select::select(BackendChoice::Auto, m) == Ok(crate::sandbox::Backend::Landlock);
    let (default_backend, can_run) = match select::select(BackendChoice::Auto, m) {
        Ok(backend) => (
            format!(
                "{} (layers: {})",
                backend.name(),
                backend.layers().join(", ")
            ),
            true,
        ),
        Err(e) => (format!("none: {}", e.to_string().replace('\n', " ")), false),
    };
    // Every Linux backend's guard reads what the program's calls name: where it cannot,
    // a run stops before the program starts (the helper's check).
    let (default_backend, can_run) = match m.guard.as_ref().map(|g| &g.memory) {
        Some(Err(why)) if can_run => (
            format!("none: the guard cannot read the program's memory ({why})"),
            false,
        ),
        _ => (default_backend, can_run),
    };
    DoctorReport {
        os: m.os,
        checks,
        default_backend,
        default_backend_can_run: can_run,
        missing_without_bwrap: if fallback {
            crate::sandbox::landlock::WITHOUT_BWRAP.to_vec()
        } else {
            Vec::new()
        },
        enable_bwrap: fallback
            .then(|| m.bwrap_runs().err().map(|no| no.fix))
            .flatten(),
    }
}

fn linux_checks(m: &Machine) -> Vec<Check> {
    let landlock = match &m.landlock_abi {
        Ok(abi) if *abi >= i64::from(MIN_ABI) => check(
            "landlock",
            CheckStatus::Ok,
            format!("ABI {abi}"),
            &format!("ABI ≥ {MIN_ABI} (TCP rules, signal and socket scoping)"),
            None,
        ),
        Ok(abi) => check(
            "landlock",
            CheckStatus::Warn,
            format!("ABI {abi}"),
            &format!("ABI ≥ {MIN_ABI} for TCP rules and scoping"),
            Some(LANDLOCK_OLD),
        ),
        Err(why) => check(
            "landlock",
            CheckStatus::Fail,
            why.clone(),
            "Landlock enabled",
            Some(LANDLOCK_OFF),
        ),
    };
    let seccomp = seccomp_check(m);
    let userns = userns_check(m);
    let bwrap = bwrap_check(m);
    let tiocsti = match m.legacy_tiocsti.as_deref().map(str::trim) {
        Some("0") => check(
            "legacy TIOCSTI",
            CheckStatus::Ok,
            "dev.tty.legacy_tiocsti=0",
            "0: no typing into other terminals",
            None,
        ),
        Some(value) => check(
            "legacy TIOCSTI",
            CheckStatus::Warn,
            format!("dev.tty.legacy_tiocsti={value}"),
            "0: no typing into other terminals",
            Some(TIOCSTI_ON),
        ),
        None => check(
            "legacy TIOCSTI",
            CheckStatus::Ok,
            "sysctl absent (kernel before 6.2: TIOCSTI allowed)",
            "TIOCSTI denied inside the sandbox by seccomp",
            None,
        ),
    };
    let mut checks = vec![
        landlock,
        seccomp,
        userns,
        bwrap,
        tiocsti,
        names_check(&m.kernel),
    ];
    checks.extend(m.guard.as_ref().map(guard_check));
    for (name, answer) in &m.engines {
        checks.push(engine_check(name, answer));
    }
    checks
}

/// A container engine whose client is installed: whether it answers (`--backend NAME`).
fn engine_check(name: &str, answer: &Result<String, String>) -> Check {
    let check_name = match name {
        "podman" => "podman backend",
        _ => "docker backend",
    };
    let expected = "the engine answers its client (only for --backend docker or podman)";
    match answer {
        Ok(version) => check(
            check_name,
            CheckStatus::Ok,
            format!("engine {version}"),
            expected,
            None,
        ),
        Err(why) => check(
            check_name,
            CheckStatus::Warn,
            why.clone(),
            expected,
            Some(ENGINE_SILENT),
        ),
    }
}

/// Whether the guard judges every name the program makes in its writable trees
/// (`host::judges_names`), or what read-only mounts leave open before Linux 5.14.
fn names_check(kernel: &str) -> Check {
    if crate::host::judges_names(kernel) {
        return check(
            "names",
            CheckStatus::Ok,
            format!("Linux {kernel}"),
            NAMES_EXPECTED,
            None,
        );
    }
    check(
        "names",
        CheckStatus::Warn,
        format!("Linux {kernel}: the guard cannot judge names (no SECCOMP_ADDFD_FLAG_SEND)"),
        NAMES_EXPECTED,
        Some(NAMES_UNJUDGED),
    )
}

/// What the guard — which makes every name the program makes — can do here.
fn guard_check(g: &crate::host::guardreach::GuardReach) -> Check {
    let means = if g.copy_fds {
        "descriptors copied"
    } else {
        FDS_REOPENED
    };
    match (&g.memory, g.killable) {
        (Err(why), _) => check(
            "guard",
            CheckStatus::Fail,
            format!("a parent cannot read its child's memory: {why}"),
            GUARD_EXPECTED,
            Some(GUARD_CANNOT_READ),
        ),
        (Ok(()), false) => check(
            "guard",
            CheckStatus::Warn,
            format!("reads its child's memory; {means}; no SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"),
            GUARD_EXPECTED,
            Some(WAIT_NOT_KILLABLE),
        ),
        (Ok(()), true) => check(
            "guard",
            CheckStatus::Ok,
            format!("reads its child's memory; {means}; calls received stay received"),
            GUARD_EXPECTED,
            None,
        ),
    }
}

/// seccomp, with a listener for the guard (none inside another sbx-shell session).
fn seccomp_check(m: &Machine) -> Check {
    match &m.seccomp_mode {
        Some(mode) if m.seccomp_listener.is_err() => check(
            "seccomp",
            CheckStatus::Fail,
            format!(
                "mode {mode}: {}",
                m.seccomp_listener.as_ref().err().map_or("", String::as_str)
            ),
            "seccomp filters supported, with a listener for sbx-shell's guard",
            Some(if m.inside_sbx_shell.is_some() {
                INSIDE_SBX_SHELL
            } else {
                "start sbx-shell outside the sandbox that runs it"
            }),
        ),
        Some(mode) => check(
            "seccomp",
            CheckStatus::Ok,
            format!("supported (this process: mode {mode})"),
            "seccomp filters supported",
            None,
        ),
        None => check(
            "seccomp",
            CheckStatus::Fail,
            "no Seccomp line in /proc/self/status",
            "seccomp filters supported",
            Some("use a kernel built with CONFIG_SECCOMP_FILTER"),
        ),
    }
}

/// User namespaces, as the sysctls say (or a bwrap probe that ran).
fn userns_check(m: &Machine) -> Check {
    let userns_measured = format!(
        "kernel.unprivileged_userns_clone={}, user.max_user_namespaces={}, kernel.apparmor_restrict_unprivileged_userns={}, {}",
        m.userns.unprivileged_clone.as_deref().unwrap_or("(absent)"),
        m.userns.max.as_deref().unwrap_or("(absent)"),
        m.userns.apparmor_restrict.as_deref().unwrap_or("(absent)"),
        if m.root {
            "running as root"
        } else {
            "unprivileged"
        },
    );
    if m.userns.open(m.root) || m.bwrap_probe == Some(Ok(())) {
        check(
            "user namespaces",
            CheckStatus::Ok,
            userns_measured,
            "available (bwrap needs them unless it is setuid)",
            None,
        )
    } else {
        check(
            "user namespaces",
            CheckStatus::Warn,
            userns_measured,
            "available (bwrap needs them unless it is setuid)",
            Some(USERNS_CLOSED),
        )
    }
}

/// bwrap: found, and able to run its sandbox.
fn bwrap_check(m: &Machine) -> Check {
    let expected = format!(
        "bubblewrap at {}, able to run its sandbox (a probe runs it)",
        BWRAP_PATHS.join(" or ")
    );
    match (m.bwrap_runs(), &m.bwrap_probe) {
        (Ok(path), Some(Ok(()))) => check(
            "bwrap",
            CheckStatus::Ok,
            format!(
                "{}{} ran a probe sandbox{}",
                path.display(),
                m.bwrap_version
                    .as_deref()
                    .map(|v| format!(" ({v})"))
                    .unwrap_or_default(),
                mount_point_note(m.bwrap_version.as_deref())
            ),
            &expected,
            None,
        ),
        (Ok(path), _) => check(
            "bwrap",
            CheckStatus::Warn,
            format!("{} (not probed)", path.display()),
            &expected,
            None,
        ),
        (Err(no), _) => check(
            "bwrap",
            CheckStatus::Fail,
            no.cause,
            &expected,
            Some(&no.fix),
        ),
    }
}

/// What the installed bubblewrap does with a symlink where it makes a mount point, and why
/// it does not matter here.
fn mount_point_note(version: Option<&str>) -> String {
    use crate::host::{parse_bwrap_version, BWRAP_MOUNT_POINT_FIX};
    match version.and_then(parse_bwrap_version) {
        Some(v) if v >= BWRAP_MOUNT_POINT_FIX => {
            "; it has the fix for mount points made through a symlink (0.12.0)".into()
        }
        Some(_) => BWRAP_BEFORE_0_12.into(),
        None => String::new(),
    }
}

fn sandbox_exec_check(m: &Machine) -> Check {
    match &m.sandbox_exec_probe {
        Some(Ok(())) => check(
            "sandbox-exec",
            CheckStatus::Ok,
            "/usr/bin/sandbox-exec ran a probe profile",
            "/usr/bin/sandbox-exec able to run",
            None,
        ),
        Some(Err(why)) => check(
            "sandbox-exec",
            CheckStatus::Fail,
            format!("/usr/bin/sandbox-exec: {why}"),
            "/usr/bin/sandbox-exec able to run",
            Some(SANDBOX_EXEC_FAILS),
        ),
        None => check(
            "sandbox-exec",
            CheckStatus::Warn,
            "not probed",
            "/usr/bin/sandbox-exec able to run",
            None,
        ),
    }
}

/// The report as text.
pub fn render_text(report: &DoctorReport) -> String {
    let mut out = String::new();
    for c in &report.checks {
        let mark = match c.status {
            CheckStatus::Ok => "ok  ",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "FAIL",
        };
        out.push_str(&format!(
            "{mark}  {:<16} {}\n      {:<16} expected: {}\n",
            c.name, c.measured, "", c.expected
        ));
        if let Some(remedy) = &c.remedy {
            out.push_str(&format!("      {:<16} remedy:   {remedy}\n", ""));
        }
    }
    let verdict = if report.default_backend_can_run {
        "can run"
    } else {
        "CANNOT run"
    };
    out.push_str(&format!(
        "\ndefault backend {}: {verdict}\n",
        report.default_backend
    ));
    if !report.missing_without_bwrap.is_empty() {
        out.push_str("  without bwrap, these protections are missing here:\n");
        for missing in &report.missing_without_bwrap {
            out.push_str(&format!("    - {missing}\n"));
        }
    }
    if let Some(fix) = &report.enable_bwrap {
        out.push_str(&format!("  to enable bwrap: {fix}\n"));
    }
    out
}

// The remedies and expectations `doctor` says, each for one finding.

/// Landlock older than the ABI sbx-shell uses whole.
const LANDLOCK_OLD: &str =
    "a newer kernel (6.12 or later) enforces more; older ABIs are used for what they \
    cover, and a policy needing more is refused";

/// No Landlock.
const LANDLOCK_OFF: &str =
    "boot with Landlock in the LSM list (lsm=landlock,… on the kernel command line) on a \
    kernel ≥ 5.13";

/// The kernel lets a program type into a terminal.
const TIOCSTI_ON: &str =
    "sysctl -w dev.tty.legacy_tiocsti=0 (otherwise a program that can open a terminal can \
    type into it)";

/// A container engine's client that gets no answer.
const ENGINE_SILENT: &str =
    "start the engine, or point its client at it (DOCKER_HOST, a docker context, \
    CONTAINER_HOST); this machine's other backends do not need it";

/// Before Linux 5.14: what the guard cannot judge.
const NAMES_UNJUDGED: &str =
    "what would run code outside is held by read-only mounts where it exists at the \
    start; a protected path that does not exist yet (a missing .mcp.json, the hooks of a \
    repository made in the session) can be made, and the end of the session names it. \
    Linux 5.14 or later; --require names refuses to run without it";

/// How the guard hands descriptors over without `pidfd_getfd`.
const FDS_REOPENED: &str =
    "descriptors reopened through /proc (this machine refuses pidfd_getfd, as container \
    profiles do): a unix socket the program connects is replaced by one the guard \
    connected, without the options set on it before";

/// The guard cannot read its child's memory.
const GUARD_CANNOT_READ: &str =
    "the guard reads what each call names from the program's memory, as a parent may: \
    kernel.yama.ptrace_scope 0 or 1 allows it, a security module's ptrace rule or /proc \
    mounted without the processes' entries forbids it; every backend that judges names \
    needs it";

/// Before Linux 5.19: a signal may end the program's wait.
const WAIT_NOT_KILLABLE: &str =
    "a kernel before 5.19: a signal after the guard acted ends the program's wait; a \
    restarted call gets the guard's answer again, but a handler without SA_RESTART may \
    see EINTR from a call that was done. Linux 5.19 or later";

/// seccomp has no listener for sbx-shell's guard inside a session.
const INSIDE_SBX_SHELL: &str =
    "this already runs inside an sbx-shell session, sandboxed: run the program directly \
    here, or start sbx-shell outside that session";

/// Unprivileged user namespaces closed.
const USERNS_CLOSED: &str =
    "sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and \
    kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)";

/// A bwrap without the fix for mount points made through a symlink.
const BWRAP_BEFORE_0_12: &str =
    "; before 0.12.0 it follows a parent symlink while it makes a mount point \
    (GHSA-pxhw-h44j-8pfx): sbx-shell never asks it to make one below a path a sandboxed \
    program could write";

/// Seatbelt's `sandbox-exec` does not run.
const SANDBOX_EXEC_FAILS: &str =
    "sandbox-exec ships with macOS; check that /usr/bin/sandbox-exec exists and is not \
    blocked by a management profile";

/// What the names check expects.
const NAMES_EXPECTED: &str =
    "Linux 5.14 or later: every name the program makes in its writable trees is judged \
    when it is made";

/// What the guard check expects.
const GUARD_EXPECTED: &str =
    "a parent reads its child's memory; the child's wait ends by a fatal signal only once \
    its call is received (Linux 5.19)";

#[cfg(test)]
mod tests;
