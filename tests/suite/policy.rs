//! The policy inputs end to end: config files and profiles through the real binary,
//! `explain`, `schema`, and the refusal to run a policy that the backend cannot enforce.

use std::path::Path;

use super::support::Scratch;

/// Run sbx-shell with a private HOME (so the user's real config never leaks in).
fn run(home: &Path, cwd: &Path, args: &[&str]) -> (i32, String, String) {
    super::support::run_captured(args, |cmd| {
        cmd.env("HOME", home)
            .env_remove("XDG_CONFIG_HOME")
            .env("SHELL", "/bin/sh")
            .current_dir(cwd);
    })
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/config/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn each_invalid_config_fails_with_its_own_message() {
    let dir = Scratch::new("fixtures");
    let cases = [
        ("unknown-field.json", ":4:10: unknown field `writ`"),
        ("duplicate-key.json", ":4:11: duplicate field `network`"),
        ("js-comment.json", ":2:3: key must be a string"),
        ("trailing-comma.json", ":3:1: trailing comma"),
        ("bad-domain.json", "\"not a domain\" is not a domain"),
        ("parent-path.json", "contains `..`"),
        (
            "bad-open-files.json",
            ":2:33: invalid value: string \"lots\"",
        ),
        ("entry-typo.json", ":2:56: unknown field `coment`"),
    ];
    for (file, message) in cases {
        let (code, out, err) = run(&dir.0, &dir.0, &["explain", "--profile", &fixture(file)]);
        assert_eq!(code, 1, "{file}: {err}");
        assert!(out.is_empty(), "{file}: {out}");
        assert!(
            err.contains(file),
            "{file}: the error names the file: {err}"
        );
        assert!(err.contains(message), "{file}: {err}");
        assert!(err.contains("\nHint: "), "{file}: {err}");
    }
}

#[test]
fn a_valid_profile_file_resolves_as_written() {
    let dir = Scratch::new("valid");
    let (code, out, err) = run(
        &dir.0,
        &dir.0,
        &["explain", "--json", "--profile", &fixture("valid.json")],
    );
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let policy = &report["policy"];
    assert_eq!(policy["filesystem"]["mode"], "read-only");
    let home = dir.0.display().to_string();
    assert_eq!(
        policy["filesystem"]["writable"][0]["path"],
        format!("{home}/out")
    );
    assert!(policy["filesystem"]["denied"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["path"] == format!("{home}/private")));
    assert_eq!(
        policy["network"],
        serde_json::json!({"mode": "allow", "allow": [{"host": "api.example.com", "wildcard": false, "port": 443}]})
    );
    assert_eq!(policy["environment"]["set"]["LANG"], "C.UTF-8");
}

#[test]
fn every_shipped_profile_resolves() {
    let dir = Scratch::new("shipped");
    let home = dir.0.display().to_string();
    let own_state = [
        ("shell", None),
        ("read-only", None),
        ("claude", Some("/.claude")),
        ("gemini", Some("/.gemini")),
        ("codex", Some("/.codex")),
        ("opencode", Some("/.local/share/opencode")),
    ];
    for (name, state) in own_state {
        let (code, out, err) = run(&dir.0, &dir.0, &["explain", "--json", "--profile", name]);
        assert_eq!(code, 0, "{name}: {err}");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        let policy = &report["policy"];
        assert_eq!(policy["profile"], name);
        let writable: Vec<&str> = policy["filesystem"]["writable"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["path"].as_str().unwrap())
            .collect();
        match state {
            Some(state) => {
                assert!(
                    writable.contains(&format!("{home}{state}").as_str()),
                    "{name}: {writable:?}"
                );
                assert_eq!(
                    policy["network"]["mode"], "allow",
                    "{name}: agents reach their own API and login hosts only"
                );
                assert!(
                    !policy["environment"]["allow"]
                        .as_array()
                        .unwrap()
                        .is_empty(),
                    "{name} allows its auth variables"
                );
            }
            None => {
                // Only the profile's private home, where it has one (not read-only).
                let private = format!("/.local/state/sbx-shell/home/{name}");
                assert!(
                    writable.iter().all(|w| w.ends_with(&private)),
                    "{name}: {writable:?}"
                );
                assert_eq!(policy["network"]["mode"], "none");
            }
        }
        let denied = policy["filesystem"]["denied"].to_string();
        assert!(
            denied.contains(&format!("{home}/.ssh")),
            "{name} keeps ~/.ssh denied"
        );
    }
}

#[test]
fn flags_override_the_profile() {
    let dir = Scratch::new("flags");
    let (code, out, err) = run(
        &dir.0,
        &dir.0,
        &[
            "explain",
            "--profile",
            "read-only",
            "--net",
            "full",
            "--write",
            "~/x",
            "--no-nested-pty",
            "--timeout",
            "2m",
        ],
    );
    assert_eq!(code, 0, "{err}");
    for line in [
        "network       full",
        "nested pty    no",
        "timeout 120 s, then SIGKILL after 5 s",
        "/x",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
}

#[test]
fn the_schema_command_prints_the_committed_schema() {
    let dir = Scratch::new("schema");
    let (code, out, _) = run(&dir.0, &dir.0, &["schema"]);
    assert_eq!(code, 0);
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/config.schema.json"
    ))
    .unwrap();
    assert_eq!(out, committed);
}

/// A policy the chosen backend cannot enforce is refused before anything runs, never
/// weakened: a host socket granted under Landlock alone (it has no socket right), a backend
/// that does not exist here, and a backend name from the config file.
#[test]
fn a_policy_the_backend_cannot_enforce_is_refused() {
    let dir = Scratch::new("refuse");
    let (home, ws) = (dir.path("home"), dir.path("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let socket = ws.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let socket = socket.to_str().unwrap();
    let marker = ws.join("ran");
    let touch = format!("touch {}", marker.display());
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "--backend",
                "landlock",
                "--allow-socket",
                socket,
                "-c",
                &touch,
            ],
            "cannot grant the host socket",
        ),
        (&["--backend", "seatbelt", "-c", &touch], "macOS backend"),
    ];
    for (args, needle) in cases {
        let (code, _, err) = run(&home, &ws, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(needle) && err.contains("Hint: "),
            "{args:?}: {err}"
        );
        assert!(!marker.exists(), "{args:?} ran");
    }
    let config_dir = home.join(".config/sbx-shell");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.json"),
        format!(r#"{{"backend": "landlock", "filesystem": {{"sockets": ["{socket}"]}}}}"#),
    )
    .unwrap();
    let (code, _, err) = run(&home, &ws, &["-c", &touch]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot grant the host socket"), "{err}");
    assert!(!marker.exists());
}

#[test]
fn the_user_config_names_the_shell() {
    let dir = Scratch::new("config-shell");
    let config_dir = dir.path(".config/sbx-shell");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.json"),
        r#"{"comment": "mine", "shell": "/bin/bash"}"#,
    )
    .unwrap();
    let (code, out, err) = run(&dir.0, &dir.0, &["-c", "echo $SHELL"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "/bin/bash");
    std::fs::write(
        config_dir.join("config.json"),
        "{\"shell\": \"/bin/bash\",}",
    )
    .unwrap();
    let (code, _, err) = run(&dir.0, &dir.0, &["-c", "true"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("config.json:1:") && err.contains("Hint: "),
        "a broken config is a clear error: {err}"
    );
}

/// A config file inside the workspace is never read: an agent could have written it.
#[test]
fn config_files_in_the_workspace_are_never_read() {
    let dir = Scratch::new("workspace-config");
    let home = dir.path("home");
    let workspace = dir.path("ws");
    for sub in ["", ".sbx-shell", ".config/sbx-shell"] {
        std::fs::create_dir_all(workspace.join(sub)).unwrap();
        std::fs::write(
            workspace.join(sub).join("config.json"),
            r#"{"network": "full"}"#,
        )
        .unwrap();
    }
    std::fs::write(workspace.join("sbx-shell.json"), r#"{"network": "full"}"#).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let (code, out, err) = run(&home, &workspace, &["explain"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("network       none"), "{out}");
}

/// `--read` of a denied path does not quietly leave it denied: the run is refused with the
/// way to lift the denial; lifted in the config first, the same flag works.
#[test]
fn reading_a_denied_path_is_refused_with_the_way_to_lift_it() {
    let dir = Scratch::new("read-denied");
    let (home, ws) = (dir.path("home"), dir.path("ws"));
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/config"), "[default]\n").unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let read = ["--read", "~/.aws", "-c", "cat ~/.aws/config"];
    let (code, out, err) = run(&home, &ws, &read);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("is denied") && err.contains("allow_denied") && err.contains("Hint: "),
        "{err}"
    );
    let config_dir = home.join(".config/sbx-shell");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.json"),
        r#"{"filesystem": {"allow_denied": ["~/.aws"]}}"#,
    )
    .unwrap();
    let (code, out, err) = run(&home, &ws, &read);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[default]"), "{out}");
}
