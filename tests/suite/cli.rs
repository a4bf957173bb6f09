//! The command line: shell choice, login-shell invocations, errors with hints.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::support::Shown;
use super::support::{bin, Scratch};

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    super::support::run_captured(args, |cmd| {
        cmd.envs(env.iter().copied());
    })
}

#[test]
fn version_and_help_with_examples() {
    let (code, out, _) = run(&["--version"], &[]);
    assert_eq!(code, 0);
    assert!(out.starts_with("sbx-shell "), "{out}");
    let (code, out, _) = run(&["--help"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Examples:") && out.contains("sbx-shell -- claude"),
        "{out}"
    );
    // The usage names every command.
    let usage = out
        .lines()
        .find(|l| l.contains("explain|"))
        .unwrap_or_default();
    for command in [
        "explain",
        "why",
        "doctor",
        "setup",
        "login-shell",
        "log",
        "home",
        "man",
    ] {
        assert!(usage.contains(command), "{command} not in: {usage}");
    }
}

#[test]
fn bad_input_gets_an_error_and_a_hint() {
    let cases: [(&[&str], i32, &str); 6] = [
        (&["--frobnicate"], 2, "--frobnicate"),
        (&["--pty", "sometimes"], 2, "sometimes"),
        (&["vim"], 1, "sbx-shell -- vim"),
        // A command of sbx-shell after the options: put first, not run as a program.
        (
            &["--profile", "gemini", "explain"],
            1,
            "Hint: sbx-shell explain [OPTIONS]",
        ),
        (
            &["--", "no-such-command-xyz"],
            127,
            "command not found: no-such-command-xyz",
        ),
        (
            &["--shell", "/nonexistent/zsh"],
            1,
            "--shell /nonexistent/zsh",
        ),
    ];
    for (args, code, needle) in cases {
        let (got, out, err) = run(args, &[]);
        assert_eq!(got, code, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing on stdout: {out}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.contains("Hint: "), "{args:?}: {err}");
    }
}

#[test]
fn a_file_that_cannot_run_is_126() {
    let dir = Scratch::new("noexec");
    let file = dir.path("script");
    std::fs::write(&file, "#!/bin/sh\necho hi\n").unwrap();
    let (code, _, err) = run(&["--", file.to_str().unwrap()], &[]);
    assert_eq!(code, 126, "{err}");
    assert!(err.contains("Hint: "), "{err}");
}

/// sshd runs `SHELL -c CMD` for remote commands; the real shell runs it, with SHELL set to
/// the real shell.
#[test]
fn dash_c_runs_the_command_string_with_the_real_shell() {
    let (code, out, _) = run(
        &["-c", "echo \"$0|$SHELL|$1\"", "--", "zero", "one"],
        &[("SHELL", "/bin/bash")],
    );
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "zero|/bin/bash|one");
}

/// As someone's login shell, $SHELL is sbx-shell itself: it must be skipped, never recursed.
#[test]
fn sbx_shell_as_shell_is_skipped_not_recursed_into() {
    let (code, out, _) = run(&["-c", "echo \"$SHELL\""], &[("SHELL", bin())]);
    assert_eq!(code, 0);
    let shell = out.trim();
    assert!(
        !shell.contains("sbx-shell") && shell.starts_with('/'),
        "{shell}"
    );
}

/// login, sshd and su start a login shell with argv[0] beginning with '-'; the real shell
/// then starts as a login shell (its own argv[0] begins with '-').
#[test]
fn a_dash_argv0_or_dash_l_makes_the_real_shell_a_login_shell() {
    let probe = "shopt -q login_shell && echo LOGIN || echo NOT-LOGIN; echo \"arg0=$0\"";
    for (arg0, args) in [
        ("-sbx-shell", vec!["-c", probe]),
        ("sbx-shell", vec!["-l", "-c", probe]),
        ("sbx-shell", vec!["-lc", probe]),
    ] {
        let out = Command::new(bin())
            .arg0(arg0)
            .args(&args)
            .env("SHELL", "/bin/bash")
            .env("HOME", "/nonexistent")
            .stdin(Stdio::null())
            .shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("LOGIN\narg0=-bash"),
            "{arg0} {args:?}: {text}"
        );
    }
    let (_, out, _) = run(&["-c", probe], &[("SHELL", "/bin/bash")]);
    assert!(out.contains("NOT-LOGIN"), "{out}");
}

#[test]
fn dash_i_makes_the_shell_interactive() {
    let (code, out, _) = run(
        &["-i", "-c", "case $- in *i*) echo INTERACTIVE;; esac"],
        &[("SHELL", "/bin/bash")],
    );
    assert_eq!(code, 0);
    assert!(out.contains("INTERACTIVE"), "{out}");
}

/// The environment rules apply on every run: injectors and secret-looking variables are
/// dropped, and the child can see it runs under sbx-shell.
#[test]
fn the_child_gets_the_policy_environment() {
    let script = "echo \"$SBX_SHELL $SBX_SANDBOX ${GITHUB_TOKEN:-no-token} ${BASH_ENV:-no-bash-env} ${DYLD_INSERT_LIBRARIES:-no-dyld} $KEEP_ME\"";
    for backend in ["bwrap", "none"] {
        let (code, out, err) = run(
            &["--backend", backend, "-c", script],
            &[
                ("GITHUB_TOKEN", "t"),
                ("BASH_ENV", "/tmp/evil"),
                ("DYLD_INSERT_LIBRARIES", "x"),
                ("KEEP_ME", "kept"),
            ],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out.trim(),
            format!("1 {backend} no-token no-bash-env no-dyld kept")
        );
    }
}

/// `explain --show seatbelt` shows a Linux user the macOS profile.
#[test]
fn explain_shows_the_seatbelt_profile_on_any_os() {
    let (code, out, err) = run(&["explain", "--show", "seatbelt"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("/usr/bin/sandbox-exec -p PROFILE -D … sbx-shell __sbx_helper …\n"),
        "{out}"
    );
    assert!(
        out.contains("(deny default)") && out.contains("-D DENIED_0="),
        "{out}"
    );
    let (code, out, _) = run(
        &[
            "explain",
            "--show",
            "seatbelt",
            "--net",
            "allow=api.example.com",
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("(allow network-outbound (remote tcp \"localhost:3128\"))")
            && !out.contains("(allow network-outbound)\n"),
        "{out}"
    );
}

/// A missing agent gets its install hint; any other missing command a plain "not found".
#[test]
fn a_missing_agent_gets_its_install_hint() {
    let cases = [
        ("claude", "npm install -g @anthropic-ai/claude-code"),
        ("gemini", "npm install -g @google/gemini-cli"),
        ("codex", "npm install -g @openai/codex"),
        ("opencode", "npm install -g opencode-ai"),
        ("no-such-tool", "check the spelling"),
    ];
    let empty = Scratch::new("empty-path");
    for (agent, hint) in cases {
        let (code, _, err) = run(&["--", agent], &[("PATH", empty.0.to_str().unwrap())]);
        assert_eq!(code, 127, "{agent}: {err}");
        assert!(
            err.contains(&format!("command not found: {agent}\nHint: ")) && err.contains(hint),
            "{agent}: {err}"
        );
    }
}

/// `doctor` reports what it measured on this very machine, and exits non-zero while the
/// default backend cannot run (this build has no Linux backend yet).
#[test]
fn doctor_reports_this_machine() {
    if !super::support::require("bwrap", "doctor's bubblewrap probe") {
        return;
    }
    let (code, out, err) = run(&["doctor", "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["default_backend_can_run"], true);
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    let landlock = check("landlock");
    let measured = landlock["measured"].as_str().unwrap();
    match std::fs::read_to_string("/sys/kernel/security/lsm") {
        // securityfs mounted: it says independently whether Landlock is on.
        Ok(lsms) if lsms.contains("landlock") => {
            assert!(measured.starts_with("ABI "), "{landlock}")
        }
        Ok(_) => assert_eq!(landlock["status"], "fail", "{landlock}"),
        // Not mounted: the answer must still be one of the two well-formed ones.
        Err(_) => assert!(
            (measured.starts_with("ABI ") && landlock["status"] != "fail")
                || (landlock["status"] == "fail" && measured.contains('(')),
            "{landlock}"
        ),
    }
    assert_eq!(
        check("bwrap")["status"],
        "ok",
        "bwrap is installed: its probe must run: {}",
        check("bwrap")
    );
    let tiocsti = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_default();
    assert!(check("legacy TIOCSTI")["measured"]
        .as_str()
        .unwrap()
        .ends_with(tiocsti.trim()));
    // bwrap's probe ran, so auto picks it, with Landlock inside when the kernel has it.
    let layers = if landlock["status"] == "ok" {
        "bwrap, landlock, seccomp"
    } else {
        "bwrap, seccomp"
    };
    let (code, text, _) = run(&["doctor"], &[]);
    assert_eq!(code, 0);
    assert!(
        text.contains(&format!(
            "default backend bwrap (layers: {layers}): can run"
        )),
        "{text}"
    );
}

/// `explain` shows the Linux layers too: the bwrap argv, Landlock rules and seccomp table.
#[test]
fn explain_shows_the_linux_layers() {
    let dir = Scratch::new("explain-linux");
    let (code, out, err) = run(
        &[
            "explain",
            "--show",
            "bwrap",
            "--workspace",
            dir.0.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let ws = dir.0.display().to_string();
    assert!(
        out.starts_with("/usr/bin/bwrap --die-with-parent --new-session --unshare-pid"),
        "{out}"
    );
    assert!(
        out.contains(&format!("--bind {ws} {ws}")) && out.contains("--unshare-net"),
        "{out}"
    );
    let (code, out, _) = run(&["explain", "--show", "landlock", "--net", "full"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Landlock, layered under bwrap:\n  read               /\n"),
        "{out}"
    );
    assert!(
        out.contains("TCP not restricted")
            && out.contains("ioctl when request is 0x5412 or 0x541c"),
        "{out}"
    );
    // With network full only Landlock alone's unix datagram rule names sockets.
    assert!(
        !out.contains("socket socketpair unless"),
        "sockets are free with network full: {out}"
    );
    assert!(
        out.contains(
            "socket socketpair when the family is 1 and the type one of [2]: Landlock alone"
        ),
        "{out}"
    );
    let (_, json, _) = run(&["explain", "--json"], &[]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = report["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seatbelt", "bwrap", "landlock", "docker", "podman"]);
    let (code, out, _) = run(&["explain", "--show", "docker"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains(" run --rm --name NAME ")
            && out.contains(
                "--network none --sysctl net.ipv4.ip_unprivileged_port_start=53 --cap-drop ALL"
            )
            && out.contains("dst=/etc/resolv.conf,readonly")
            && out.contains(
                "__sbx_entry /.sbx-shell/courier.sock -- /.sbx-shell/sbx-shell __sbx_helper"
            ),
        "{out}"
    );
    assert!(report["backends"][2]["applies"]["seccomp"]["reject_x32"]
        .as_bool()
        .unwrap());
}

/// Until a Linux backend exists, no run is silently unconfined: each one says so.
#[test]
fn an_unconfined_run_says_so() {
    let (code, out, err) = run(&["--backend", "none", "-c", "echo ran"], &[]);
    assert_eq!(code, 0);
    assert_eq!(out, "ran\n");
    assert!(
        err.starts_with("sbx-shell: warning: --backend none:")
            && err.contains("runs without any sandbox"),
        "{err}"
    );
    let (code, out, err) = run(&["-c", "echo ran"], &[]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "ran\n", ""));
}
