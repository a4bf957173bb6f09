//! `sbx-shell doctor`: which sandbox layers can run on this machine, and why not.
//!
//! `measure` takes the facts (small probes, platform-gated); `evaluate` turns them into
//! checks, each with what was measured, what was expected and the remedy — pure, so every
//! branch is unit-tested. The exit code is non-zero when the default backend cannot run.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::BackendChoice;
use crate::sandbox::select::{self, Machine, BWRAP_PATHS};

/// Facts about this machine.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    pub os: &'static str,
    pub root: bool,
    /// Landlock ABI version, or why there is none.
    pub landlock_abi: Option<Result<i64, String>>,
    /// kernel.unprivileged_userns_clone and user.max_user_namespaces, when the files exist.
    pub userns_clone: Option<String>,
    pub max_user_namespaces: Option<String>,
    /// kernel.apparmor_restrict_unprivileged_userns (Ubuntu), when the file exists.
    pub apparmor_restrict: Option<String>,
    /// The bwrap found at a fixed path, and how its probe run ended.
    pub bwrap: Option<PathBuf>,
    pub bwrap_probe: Option<Result<(), String>>,
    /// "Seccomp:" in /proc/self/status (the kernel supports it) and our current mode.
    pub seccomp_mode: Option<String>,
    pub legacy_tiocsti: Option<String>,
    pub nofile: Option<(u64, u64)>,
    /// macOS: /usr/bin/sandbox-exec and its probe run.
    pub sandbox_exec_probe: Option<Result<(), String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub measured: String,
    pub expected: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

/// The report: every check, and whether the default backend can run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub os: &'static str,
    pub checks: Vec<Check>,
    /// What `--backend auto` runs here, with its layers, or why it refuses.
    pub default_backend: String,
    pub default_backend_can_run: bool,
}

fn check(
    name: &'static str,
    status: Status,
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
pub fn evaluate(m: &Measurements) -> Report {
    let mut checks = Vec::new();
    let can_run = match m.os {
        "linux" => evaluate_linux(m, &mut checks),
        "macos" => evaluate_macos(m, &mut checks),
        _ => {
            checks.push(check(
                "platform",
                Status::Fail,
                m.os,
                "linux or macos",
                Some("sbx-shell sandboxes on Linux and macOS only"),
            ));
            false
        }
    };
    if let Some((soft, hard)) = m.nofile {
        let status = if hard >= 4096 {
            Status::Ok
        } else {
            Status::Warn
        };
        checks.push(check(
            "open-file limit",
            status,
            format!("soft {soft}, hard {hard}; the child gets the hard limit"),
            "hard limit ≥ 4096 (node, language servers and builds open many files)",
            (status != Status::Ok).then_some("raise the hard nofile limit (/etc/security/limits.conf, or LimitNOFILE= for a service)"),
        ));
    }
    let machine = Machine {
        os: m.os,
        // Only a bwrap that passed its probe counts (the run path checks only the sysctls).
        bwrap: m
            .bwrap
            .clone()
            .filter(|_| matches!(m.bwrap_probe, Some(Ok(())))),
        namespaces_open: select::namespaces_open(
            m.root,
            m.userns_clone.as_deref(),
            m.max_user_namespaces.as_deref(),
            m.apparmor_restrict.as_deref(),
        ),
        landlock_abi: m
            .landlock_abi
            .clone()
            .unwrap_or_else(|| Err("not measured".into())),
    };
    let (default_backend, selected_ok) = match select::select(BackendChoice::Auto, &machine) {
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
    Report {
        os: m.os,
        checks,
        default_backend,
        default_backend_can_run: can_run && selected_ok,
    }
}

fn evaluate_linux(m: &Measurements, checks: &mut Vec<Check>) -> bool {
    let landlock = match &m.landlock_abi {
        Some(Ok(abi)) if *abi >= 6 => check("landlock", Status::Ok, format!("ABI {abi}"), "ABI ≥ 1; ≥ 4 for TCP rules, ≥ 6 for signal and socket scoping", None),
        Some(Ok(abi)) => check("landlock", Status::Warn, format!("ABI {abi}"), "ABI ≥ 6 for TCP rules and scoping", Some("a newer kernel (6.12 or later) enforces more; older ABIs are used for what they cover, and a policy needing more is refused")),
        Some(Err(why)) => check("landlock", Status::Fail, why.clone(), "Landlock enabled", Some("boot with Landlock in the LSM list (lsm=landlock,… on the kernel command line) on a kernel ≥ 5.13")),
        None => check("landlock", Status::Fail, "not measured", "Landlock enabled", None),
    };
    let seccomp = match &m.seccomp_mode {
        Some(mode) => check(
            "seccomp",
            Status::Ok,
            format!("supported (this process: mode {mode})"),
            "seccomp filters supported",
            None,
        ),
        None => check(
            "seccomp",
            Status::Fail,
            "no Seccomp line in /proc/self/status",
            "seccomp filters supported",
            Some("use a kernel built with CONFIG_SECCOMP_FILTER"),
        ),
    };
    let userns_measured = format!(
        "kernel.unprivileged_userns_clone={}, user.max_user_namespaces={}, kernel.apparmor_restrict_unprivileged_userns={}, {}",
        m.userns_clone.as_deref().unwrap_or("(absent)"),
        m.max_user_namespaces.as_deref().unwrap_or("(absent)"),
        m.apparmor_restrict.as_deref().unwrap_or("(absent)"),
        if m.root {
            "running as root"
        } else {
            "unprivileged"
        },
    );
    let userns_open = select::namespaces_open(
        m.root,
        m.userns_clone.as_deref(),
        m.max_user_namespaces.as_deref(),
        m.apparmor_restrict.as_deref(),
    );
    let userns = if userns_open {
        check(
            "user namespaces",
            Status::Ok,
            userns_measured,
            "available (bwrap needs them unless it is setuid)",
            None,
        )
    } else {
        check(
            "user namespaces",
            Status::Warn,
            userns_measured,
            "available (bwrap needs them unless it is setuid)",
            Some("sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)"),
        )
    };
    let bwrap = match (&m.bwrap, &m.bwrap_probe) {
        (Some(path), Some(Ok(()))) => check("bwrap", Status::Ok, format!("{} ran a probe sandbox", path.display()), "bubblewrap at a fixed system path, able to run", None),
        (Some(path), Some(Err(why))) => check("bwrap", Status::Fail, format!("{}: probe failed: {why}", path.display()), "bubblewrap able to run", Some("enable unprivileged user namespaces (see above), or run the Landlock backend: --backend landlock")),
        (Some(path), None) => check("bwrap", Status::Warn, format!("{} (not probed)", path.display()), "bubblewrap able to run", None),
        (None, _) => check("bwrap", Status::Fail, format!("not found at {}", BWRAP_PATHS.join(" or ")), "bubblewrap installed", Some("apt-get install bubblewrap (or your distribution's package)")),
    };
    let tiocsti = match m.legacy_tiocsti.as_deref().map(str::trim) {
        Some("0") => check("legacy TIOCSTI", Status::Ok, "dev.tty.legacy_tiocsti=0", "0: no typing into other terminals", None),
        Some(value) => check("legacy TIOCSTI", Status::Warn, format!("dev.tty.legacy_tiocsti={value}"), "0: no typing into other terminals", Some("sysctl -w dev.tty.legacy_tiocsti=0 (otherwise a program that can open a terminal can type into it)")),
        None => check("legacy TIOCSTI", Status::Ok, "sysctl absent (kernel before 6.2: TIOCSTI allowed)", "TIOCSTI denied inside the sandbox by seccomp", None),
    };
    let layered = bwrap.status == Status::Ok
        && landlock.status != Status::Fail
        && seccomp.status == Status::Ok;
    let landlock_alone = landlock.status != Status::Fail && seccomp.status == Status::Ok;
    let can_run = layered || landlock_alone;
    checks.extend([landlock, seccomp, userns, bwrap, tiocsti]);
    can_run
}

fn evaluate_macos(m: &Measurements, checks: &mut Vec<Check>) -> bool {
    let probe = match &m.sandbox_exec_probe {
        Some(Ok(())) => check("sandbox-exec", Status::Ok, "/usr/bin/sandbox-exec ran a probe profile", "/usr/bin/sandbox-exec able to run", None),
        Some(Err(why)) => check("sandbox-exec", Status::Fail, format!("/usr/bin/sandbox-exec: {why}"), "/usr/bin/sandbox-exec able to run", Some("sandbox-exec ships with macOS; check that /usr/bin/sandbox-exec exists and is not blocked by a management profile")),
        None => check("sandbox-exec", Status::Fail, "not measured", "/usr/bin/sandbox-exec able to run", None),
    };
    let ok = probe.status == Status::Ok;
    checks.push(probe);
    ok
}

/// The report as text.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for c in &report.checks {
        let mark = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
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
    out
}

/// Take the measurements of this machine.
pub fn measure() -> Measurements {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok();
    let mut m = Measurements {
        os: std::env::consts::OS,
        root: nix::unistd::geteuid().is_root(),
        nofile,
        ..Measurements::default()
    };
    if m.os == "linux" {
        m.landlock_abi = Some(select::landlock_abi());
        m.userns_clone = read("/proc/sys/kernel/unprivileged_userns_clone");
        m.max_user_namespaces = read("/proc/sys/user/max_user_namespaces");
        m.apparmor_restrict = read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
        m.seccomp_mode = read("/proc/self/status").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        });
        m.legacy_tiocsti = read("/proc/sys/dev/tty/legacy_tiocsti");
        m.bwrap = select::find_bwrap();
        m.bwrap_probe = m.bwrap.as_deref().map(probe_bwrap);
    }
    if m.os == "macos" {
        m.sandbox_exec_probe = Some(probe(
            crate::sandbox::seatbelt::SANDBOX_EXEC,
            &["-p", "(version 1)(allow default)", "/usr/bin/true"],
        ));
    }
    m
}

/// Run bwrap around `true` with the namespaces and base mounts the bwrap backend uses.
fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
    let mut args = crate::sandbox::bwrap::NAMESPACES.to_vec();
    args.extend([
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        "/bin/true",
    ]);
    probe(&bwrap.display().to_string(), &args)
}

fn probe(program: &str, args: &[&str]) -> Result<(), String> {
    match std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .next()
                .unwrap_or("")
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
