//! Everyday use: agents picked by name, `--verbose` and `--quiet`, colors and NO_COLOR, the
//! session log and `sbx-shell log`, completions, the man page, `--version`.

use std::process::Command;

use super::support::Shown;
use super::support::{require, run_captured, Launch, OuterPty, Scratch};

/// A scratch HOME and a PATH dir with a fake `claude` that prints what it was given.
fn agent_home(name: &str) -> (Scratch, String) {
    let dir = Scratch::new(name);
    let (home, fake) = (dir.path("home"), dir.path("bin"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&fake).unwrap();
    let script = fake.join("claude");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"AGENT sandbox=$SBX_SANDBOX shell=$SBX_SHELL proxy=${HTTPS_PROXY:-none}\"\n[ -n \"$HTTP_PROXY\" ] && echo \"NET $(curl -s --max-time 5 http://unlisted.test/ | head -1)\"\nexit 7\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", fake.display());
    (dir, path)
}

fn run_in(dir: &Scratch, path: &str, args: &[&str]) -> (i32, String, String) {
    run_captured(args, |cmd| {
        cmd.env_clear()
            .env("HOME", dir.path("home"))
            .env("PATH", path)
            .env("SHELL", "/bin/sh")
            .env("SECRET_TOKEN", "s3cr3t-value")
            .current_dir(dir.path("home"));
    })
}

#[test]
fn an_agent_gets_its_profile_by_name_and_verbose_says_so() {
    let (dir, path) = agent_home("agent-pick");
    let (code, out, err) = run_in(&dir, &path, &["--verbose", "--", "claude"]);
    assert_eq!(code, 7, "{err}");
    // The claude profile has a network allow-list: the proxy is set for it.
    assert!(out.contains("shell=1 proxy=http://127.0.0.1:"), "{out}");
    assert!(
        out.contains("unlisted.test:80 not on the allow-list"),
        "{out}"
    );
    assert!(!out.contains("sandbox=none"), "{out}");
    assert!(
        err.contains("profile claude, picked for the command claude") && err.contains("(layers: "),
        "{err}"
    );
    // Named explicitly, another profile wins: no network (under bwrap its proxy refuses
    // everything, without one none is set); without --verbose nothing is said of it.
    let (code, out, err) = run_in(&dir, &path, &["--profile", "shell", "--", "claude"]);
    assert_eq!(code, 7, "{err}");
    assert!(
        out.contains("proxy=none") || out.contains("unlisted.test:80 the session has no network"),
        "{out}"
    );
    assert!(!err.contains("profile"), "{err}");
}

#[test]
fn the_session_log_records_each_session_without_environment_values() {
    let (dir, path) = agent_home("session-log");
    let (code, _, err) = run_in(&dir, &path, &["--", "claude", "--flag"]);
    assert_eq!(code, 7, "{err}");
    let (code, _, err) = run_in(&dir, &path, &["-c", "exit 3"]);
    assert_eq!(code, 3, "{err}");
    let raw = std::fs::read_to_string(
        dir.path("home")
            .join(".local/state/sbx-shell/sessions.jsonl"),
    )
    .unwrap();
    assert!(!raw.contains("s3cr3t-value"), "{raw}");
    let (code, out, _) = run_in(&dir, &path, &["log", "--json"]);
    assert_eq!(code, 0);
    let records: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{out}");
    let first = &records[0];
    // As it ran: with the profile's switch that keeps Claude Code's own sandbox off.
    assert_eq!(
        first["command"],
        serde_json::json!([
            "claude",
            "--settings",
            "{\"sandbox\":{\"enabled\":false}}",
            "--flag"
        ])
    );
    assert_eq!(first["profile"], "claude");
    assert_eq!(first["exit_status"], 7);
    // The fake agent asked the proxy for one host the claude profile does not list.
    assert_eq!(first["network_refused"], 1);
    assert!(first["policy_digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(first["start"].as_str().unwrap().ends_with('Z'));
    assert_eq!(first["cwd"], dir.path("home").display().to_string());
    assert_eq!(records[1]["exit_status"], 3);
    assert_eq!(records[1]["profile"], "shell");
    assert_ne!(first["policy_digest"], records[1]["policy_digest"]);
    assert!(!first["layers"].as_array().unwrap().is_empty());
    let (_, table, _) = run_in(&dir, &path, &["log", "-n", "1"]);
    // The session, and the variable kept from it, by name only.
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        table.contains("\n  variables kept out: 1 (SECRET_TOKEN) → --allow-env SECRET_TOKEN\n"),
        "{table}"
    );
    assert!(
        table.contains("exit 3") && table.contains("shell"),
        "{table}"
    );
}

#[test]
fn quiet_keeps_the_summary_to_one_line() {
    let (dir, path) = agent_home("quiet");
    let args = |quiet: bool| {
        let mut a = vec!["--net", "allow=allowed.example.com"];
        if quiet {
            a.push("--quiet");
        }
        a.extend([
            "-c",
            "curl -s -o /dev/null http://refused.example.com/ || true",
        ]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    if !require("curl", "a client for the proxy") {
        return;
    }
    let loud: Vec<String> = args(false);
    let (_, _, err) = run_in(
        &dir,
        &path,
        &loud.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        err.contains("  connections: 1 (refused.example.com:80) → --net allow=refused.example.com"),
        "{err}"
    );
    let quiet: Vec<String> = args(true);
    let (_, _, err) = run_in(
        &dir,
        &path,
        &quiet.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(
        err,
        "sbx-shell: the sandbox refused 1 request (host 1); sbx-shell log -n 1 names each with its option\n"
    );
}

#[test]
fn errors_are_colored_on_a_terminal_unless_no_color() {
    let bad = ["--shell", "/nonexistent/zsh"];
    let mut plain = Launch::new(&bad);
    plain.env.push(("NO_COLOR".into(), "1".into()));
    plain.env.push(("TERM".into(), "xterm".into()));
    let mut pty = OuterPty::launch(plain);
    pty.wait();
    let text = pty.output_text();
    assert!(
        text.contains("sbx-shell: error: ") && !text.contains("\x1b["),
        "{text:?}"
    );

    let mut colored = Launch::new(&bad);
    colored.env.push(("TERM".into(), "xterm".into()));
    // Empty means unset (no-color.org), whatever the test's own environment holds.
    colored.env.push(("NO_COLOR".into(), String::new()));
    let mut pty = OuterPty::launch(colored);
    pty.wait();
    let text = pty.output_text();
    assert!(
        text.contains("\x1b[1;31msbx-shell: error:\x1b[0m"),
        "{text:?}"
    );
    assert!(text.contains("\x1b[1mHint:\x1b[0m"), "{text:?}");

    // Not a terminal: never colored.
    let (_, _, err) = run_captured(&bad, |c| {
        c.env("TERM", "xterm").env_remove("NO_COLOR");
    });
    assert!(err.starts_with("sbx-shell: error: "), "{err:?}");
}

#[test]
fn version_names_the_backends_built_in() {
    let (code, out, _) = run_captured(&["--version"], |_| {});
    assert_eq!(code, 0);
    assert!(
        out.starts_with(&format!(
            "sbx-shell {} (backends: ",
            env!("CARGO_PKG_VERSION")
        )),
        "{out}"
    );
    assert!(
        out.contains("bwrap") && out.contains("landlock") && out.contains("none"),
        "{out}"
    );
}

#[test]
fn completions_load_in_their_shells_and_the_man_page_is_roff() {
    let (code, bash, _) = run_captured(&["completions", "bash"], |_| {});
    assert_eq!(code, 0);
    let script = Scratch::new("completions");
    let file = script.path("sbx-shell.bash");
    std::fs::write(&file, &bash).unwrap();
    // bash really loads it and registers the completion for sbx-shell.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p sbx-shell",
            file.display()
        ))
        .shown();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sbx-shell"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(bash.contains("--backend") && bash.contains("--net"));
    let (_, zsh, _) = run_captured(&["completions", "zsh"], |_| {});
    assert!(zsh.starts_with("#compdef sbx-shell"), "{zsh}");
    let (_, fish, _) = run_captured(&["completions", "fish"], |_| {});
    assert!(
        fish.contains("complete -c sbx-shell") && fish.contains("-l resolve"),
        "{fish}"
    );
    let (code, _, err) = run_captured(&["completions", "tcsh"], |_| {});
    assert_eq!(code, 2, "{err}");

    let (code, man, _) = run_captured(&["man"], |_| {});
    assert_eq!(code, 0);
    assert!(
        man.contains(".TH sbx-shell 1") && man.contains(".SH NAME"),
        "{man}"
    );
    for option in [
        "\\-\\-net",
        "\\-\\-backend",
        "\\-\\-resolve",
        "\\-\\-verbose",
    ] {
        assert!(man.contains(option), "{option} not in the man page");
    }
}

#[test]
fn output_into_a_closed_pipe_is_not_a_crash() {
    // `sbx-shell explain | head -1`: the reader may be gone before sbx-shell writes.
    for args in [
        &["explain"][..],
        &["schema"],
        &["doctor"],
        &["log"],
        &["man"],
        &["completions", "bash"],
    ] {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = Command::new(super::support::bin())
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::from(write))
            .shown();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// An agent's first run: its state directory does not exist yet. sbx-shell creates it
/// (0700) so the agent can, and `explain` says so beforehand; nothing else of the home
/// becomes writable.
#[test]
fn an_agents_missing_state_directory_is_created_on_its_first_run() {
    use super::sandbox::{assert_lines, tools_present, Lab, User};
    use std::os::unix::fs::PermissionsExt;
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        for backend in ["bwrap", "landlock"] {
            let lab = Lab::new("firstrun", user, false);
            let what = lab.what(backend);
            let state = lab.home.join(".gemini");
            assert!(!state.exists());
            let out = std::process::Command::new(super::support::bin())
                .args(["explain", "--profile", "gemini"])
                .env("HOME", &lab.home)
                .current_dir(&lab.ws)
                .shown();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(&format!(
                    "{} (missing now: made at start, 0700)",
                    state.display()
                )),
                "{what}: {text}"
            );
            let out = lab
                .command(
                    backend,
                    &[
                        "--profile",
                        "gemini",
                        "-c",
                        "mkdir ~/.gemini/tmp && echo STATE-OK; touch ~/other 2>/dev/null || echo HOME-DENIED",
                    ],
                )
                .shown();
            let text = String::from_utf8_lossy(&out.stdout);
            assert_lines(&text, &["STATE-OK", "HOME-DENIED"], &what);
            let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{what}");
            assert!(state.join("tmp").is_dir(), "{what}");
        }
    }
}
