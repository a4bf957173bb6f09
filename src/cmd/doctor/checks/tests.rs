use super::*;
use crate::host::test_support::capable_linux;

fn good_linux() -> Machine {
    capable_linux()
}

fn status(report: &DoctorReport, name: &str) -> CheckStatus {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} check"))
        .status
}

#[test]
fn a_capable_linux_machine_passes_everything() {
    let report = evaluate(&good_linux());
    assert!(
        report.checks.iter().all(|c| c.status == CheckStatus::Ok),
        "{:#?}",
        report.checks
    );
    assert!(report.default_backend_can_run);
}

#[test]
fn landlock_alone_still_runs_the_default_backend() {
    let m = Machine {
        bwrap: None,
        bwrap_probe: None,
        bwrap_version: Some("bubblewrap 0.8.0".into()),
        ..good_linux()
    };
    let report = evaluate(&m);
    assert_eq!(status(&report, "bwrap"), CheckStatus::Fail);
    assert!(report
        .checks
        .iter()
        .find(|c| c.name == "bwrap")
        .unwrap()
        .remedy
        .as_deref()
        .unwrap()
        .contains("bubblewrap"));
    assert!(report.default_backend_can_run);
    // The fallback is honest: what bwrap would add, and the one command that enables it.
    assert_eq!(
        report.missing_without_bwrap,
        crate::sandbox::landlock::WITHOUT_BWRAP
    );
    let text = render_text(&report);
    assert!(text.contains("without bwrap, these protections are missing here:"));
    assert!(text.contains("    - no pid namespace"), "{text}");
    assert!(
        text.contains("to enable bwrap: `sbx-shell setup` installs it"),
        "{text}"
    );
    // Where bwrap runs, nothing is said to be missing.
    let good = evaluate(&good_linux());
    assert!(good.missing_without_bwrap.is_empty() && good.enable_bwrap.is_none());
    assert!(!render_text(&good).contains("missing here"));
}

#[test]
fn without_landlock_and_bwrap_nothing_runs() {
    let m = Machine {
        landlock_abi: Err("disabled at boot (EOPNOTSUPP)".into()),
        bwrap_probe: Some(Err(
            "exit status: 1: No permissions to create new namespace".into(),
        )),
        userns: crate::host::machine::UserNamespaces {
            unprivileged_clone: Some("0".into()),
            ..Default::default()
        },
        ..good_linux()
    };
    let report = evaluate(&m);
    assert_eq!(status(&report, "landlock"), CheckStatus::Fail);
    assert_eq!(status(&report, "bwrap"), CheckStatus::Fail);
    assert_eq!(status(&report, "user namespaces"), CheckStatus::Warn);
    assert!(!report.default_backend_can_run);
    assert!(render_text(&report).contains("CANNOT run"));
}

#[test]
fn weak_spots_are_warnings_with_remedies() {
    let m = Machine {
        landlock_abi: Ok(3),
        legacy_tiocsti: Some("1".into()),
        nofile: Some((256, 1024)),
        kernel: "5.10.0-28-amd64".into(),
        ..good_linux()
    };
    let report = evaluate(&m);
    for name in ["landlock", "legacy TIOCSTI", "open-file limit", "names"] {
        let c = report.checks.iter().find(|c| c.name == name).unwrap();
        assert_eq!(c.status, CheckStatus::Warn, "{name}");
        assert!(c.remedy.is_some(), "{name} has a remedy");
    }
    assert!(report.default_backend_can_run);
    let names = report.checks.iter().find(|c| c.name == "names").unwrap();
    assert!(names.measured.contains("5.10.0-28-amd64"), "{names:?}");
    assert!(
        names
            .remedy
            .as_deref()
            .is_some_and(|r| r.contains("--require names")),
        "{names:?}"
    );
}

#[test]
fn the_default_backend_names_its_layers() {
    let report = evaluate(&good_linux());
    assert_eq!(
        report.default_backend,
        "bwrap (layers: bwrap, landlock, seccomp)"
    );
    let no_bwrap = evaluate(&Machine {
        bwrap_probe: Some(Err("exit status: 1".into())),
        ..good_linux()
    });
    assert_eq!(
        no_bwrap.default_backend,
        "landlock (layers: landlock, seccomp)"
    );
    let nothing = evaluate(&Machine {
        bwrap: None,
        landlock_abi: Ok(4),
        ..good_linux()
    });
    assert!(
        nothing.default_backend.starts_with("none: "),
        "{}",
        nothing.default_backend
    );
    assert!(!nothing.default_backend_can_run);
}

#[test]
fn macos_depends_on_sandbox_exec() {
    let mac = Machine {
        os: "macos",
        sandbox_exec_probe: Some(Ok(())),
        nofile: Some((256, 10240)),
        ..capable_linux()
    };
    assert!(evaluate(&mac).default_backend_can_run);
    let broken = Machine {
        sandbox_exec_probe: Some(Err("No such file or directory".into())),
        ..mac
    };
    let report = evaluate(&broken);
    assert_eq!(status(&report, "sandbox-exec"), CheckStatus::Fail);
    assert!(!report.default_backend_can_run);
}

#[test]
fn doctor_names_the_bwrap_version_and_its_mount_point_fix() {
    use crate::host::parse_bwrap_version;
    assert_eq!(parse_bwrap_version("bubblewrap 0.8.0"), Some((0, 8, 0)));
    assert_eq!(parse_bwrap_version("bubblewrap 0.12"), Some((0, 12, 0)));
    assert_eq!(parse_bwrap_version("nonsense"), None);
    assert!(super::mount_point_note(Some("bubblewrap 0.8.0")).contains("never asks it"));
    assert!(super::mount_point_note(Some("bubblewrap 0.12.1")).contains("has the fix"));
    assert_eq!(super::mount_point_note(None), "");
}

#[test]
fn the_guard_check_fails_where_a_parent_cannot_read_its_child_and_warns_before_5_19() {
    use crate::host::guardreach::GuardReach;
    let with = |memory: Result<(), String>, killable, copy_fds| Machine {
        guard: Some(GuardReach {
            memory,
            killable,
            copy_fds,
        }),
        ..capable_linux()
    };
    let report = evaluate(&with(Ok(()), true, true));
    assert_eq!(status(&report, "guard"), CheckStatus::Ok);
    let container = evaluate(&with(Ok(()), true, false));
    assert_eq!(status(&container, "guard"), CheckStatus::Ok);
    assert!(render_text(&container).contains("reopened through /proc"));
    assert_eq!(
        status(&evaluate(&with(Ok(()), false, true)), "guard"),
        CheckStatus::Warn
    );
    let blind = evaluate(&with(
        Err("/proc/9/mem: Permission denied".into()),
        true,
        true,
    ));
    assert_eq!(status(&blind, "guard"), CheckStatus::Fail);
    assert!(
        !blind.default_backend_can_run,
        "a run would stop at its start"
    );
    assert!(render_text(&blind).contains("ptrace_scope"));
    assert!(
        evaluate(&capable_linux())
            .checks
            .iter()
            .all(|c| c.name != "guard"),
        "not measured: not shown"
    );
}
