use std::path::{Path, PathBuf};

use super::*;
use crate::policy::{self, Layer, PathContext, PathResolver};
use crate::profiles;

/// macOS-like: /tmp and /var are symlinks into /private.
struct MacFs;

impl PathResolver for MacFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        let s = path.to_str()?;
        for link in ["/tmp", "/var", "/etc"] {
            if s == link || s.starts_with(&format!("{link}/")) {
                return Some(PathBuf::from(format!("/private{s}")));
            }
        }
        Some(path.to_path_buf())
    }
}

fn policy_for(profile: &str, extra: &str) -> Policy {
    let (name, layer) = profiles::load(profile, Path::new("/nonexistent")).unwrap();
    let extra = Layer {
        origin: "test".into(),
        config: crate::config::from_str(extra, "test").unwrap(),
    };
    let ctx = PathContext {
        home: "/Users/u".into(),
        workspace: "/Users/u/proj".into(),
        state: "/Users/u/.local/state/sbx-shell".into(),
        config: "/Users/u/.config/sbx-shell".into(),
        vars: Default::default(),
        root_secrets: Vec::new(),
    };
    policy::resolve(
        &name,
        &[policy::defaults_layer(), layer, extra],
        &ctx,
        &MacFs,
    )
    .unwrap()
}

fn build(policy: &Policy) -> Profile {
    let inputs = Inputs {
        policy,
        temp_dir: Some(Path::new("/private/var/folders/ab/xyz/T")),
        tty: Some(Path::new("/dev/ttys003")),
        proxy_port: Some(43128),
    };
    build_profile(&inputs).unwrap()
}

/// The lines that differ, numbered: `-N old` and `+N new`, at most 40 of them.
fn line_diff(old: &str, new: &str) -> String {
    let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut out = Vec::new();
    for i in 0..old.len().max(new.len()) {
        let (a, b) = (old.get(i), new.get(i));
        if a != b {
            if let Some(a) = a {
                out.push(format!("-{:<4} {a}", i + 1));
            }
            if let Some(b) = b {
                out.push(format!("+{:<4} {b}", i + 1));
            }
        }
    }
    out.truncate(40);
    out.join("\n")
}

#[test]
fn a_golden_mismatch_shows_the_lines_that_differ() {
    let diff = line_diff(
        "(version 1)\n(allow a)\n(deny b)\n",
        "(version 1)\n(allow A)\n(deny b)\n(x)\n",
    );
    assert_eq!(diff, "-2    (allow a)\n+2    (allow A)\n+4    (x)");
}

/// `UPDATE_GOLDEN=1 cargo test` rewrites the golden files on purpose.
#[test]
fn every_shipped_profile_matches_its_golden_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seatbelt");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    for (name, _) in profiles::SHIPPED {
        let profile = build(&policy_for(name, "{}"));
        let params: String = profile
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}\n", v.display()))
            .collect();
        for (file, generated) in [
            (format!("{name}.sbpl"), &profile.text),
            (format!("{name}.params"), &params),
        ] {
            let path = dir.join(&file);
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, generated).unwrap();
            }
            let golden = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                golden == *generated,
                "{file} differs from its golden file (- golden, + generated):\n{}\nrun UPDATE_GOLDEN=1 cargo test if on purpose",
                line_diff(&golden, generated)
            );
        }
    }
}

/// The last matching rule wins: every allow must come before the first deny that follows
/// the default.
#[test]
fn allows_come_first_and_denies_last() {
    for (name, _) in profiles::SHIPPED {
        for extra in [
            "{}",
            r#"{"gui": true, "keychain_access": true, "network": "full"}"#,
            r#"{"filesystem": {"mode": "unrestricted"}}"#,
        ] {
            let text = build(&policy_for(name, extra)).text;
            let rules: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("(allow") || l.starts_with("(deny"))
                .collect();
            let first_deny = rules
                .iter()
                .position(|l| l.starts_with("(deny") && *l != "(deny default)")
                .unwrap();
            assert!(
                rules[first_deny..].iter().all(|l| l.starts_with("(deny")),
                "{name} {extra}: an allow after a deny:\n{text}"
            );
            assert_eq!(rules[0], "(deny default)", "{name}: deny by default first");
        }
    }
}

#[test]
fn every_generated_profile_is_well_formed_and_holds_no_path_text() {
    for (name, _) in profiles::SHIPPED {
        let profile = build(&policy_for(
            name,
            r#"{"filesystem": {"write": ["/tmp/x"], "deny": ["~/a \"quoted\" (dir)"]}}"#,
        ));
        check_structure(&profile.text).unwrap();
        assert!(
            !profile.text.contains("/Users/u"),
            "{name}: a path was pasted into the profile"
        );
        assert!(!profile.text.contains("quoted"), "{name}");
        assert!(profile
            .params
            .iter()
            .any(|(_, v)| v == Path::new("/Users/u/a \"quoted\" (dir)")));
    }
}

#[test]
fn both_spellings_of_a_symlinked_path_are_parameters() {
    let profile = build(&policy_for(
        "shell",
        r#"{"filesystem": {"write": ["/tmp/out"]}}"#,
    ));
    let values: Vec<&Path> = profile.params.iter().map(|(_, v)| v.as_path()).collect();
    assert!(
        values.contains(&Path::new("/tmp/out")) && values.contains(&Path::new("/private/tmp/out"))
    );
}

#[test]
fn the_switches_add_exactly_their_rules() {
    let base = build(&policy_for("shell", "{}"));
    assert!(base.text.contains("(allow pseudo-tty)"));
    assert!(!base.text.contains("(allow network-outbound)"));
    assert!(!base.text.contains("com.apple.SecurityServer"));
    assert!(base
        .text
        .contains("(deny iokit-open (iokit-user-client-class \"IOHIDParamUserClient\"))"));
    assert!(base
        .params
        .iter()
        .any(|(k, v)| k.starts_with("WRITABLE") && v == Path::new("/Users/u/proj")));

    let no_pty = build(&policy_for("shell", r#"{"nested_pty": false}"#));
    assert!(!no_pty.text.contains("pseudo-tty") && !no_pty.text.contains("/dev/ptmx"));

    let all = build(&policy_for(
        "shell",
        r#"{"gui": true, "keychain_access": true, "network": "full"}"#,
    ));
    assert!(all.text.contains("(allow network-outbound)"));
    assert!(
        all.text.contains("com.apple.SecurityServer") && all.text.contains("(param \"KEYCHAINS\")")
    );
    assert!(all.params.contains(&(
        "KEYCHAINS".to_string(),
        PathBuf::from("/Users/u/Library/Keychains")
    )));
    assert!(!all
        .params
        .iter()
        .any(|(k, v)| k.starts_with("DENIED") && v.ends_with("Library/Keychains")));
    assert!(
        all.text.contains("com.apple.windowserver.active")
            && !all.text.contains("IOHIDParamUserClient")
    );

    let read_only = build(&policy_for("read-only", "{}"));
    assert!(!read_only
        .params
        .iter()
        .any(|(k, _)| k.starts_with("WRITABLE")));
    let unrestricted = build(&policy_for(
        "shell",
        r#"{"filesystem": {"mode": "unrestricted"}}"#,
    ));
    assert!(unrestricted.text.contains("\n(allow file-write*)\n"));
}

#[test]
fn protected_paths_and_their_parents_cannot_be_moved_away() {
    let profile = build(&policy_for("shell", "{}"));
    let value = |name: &str| {
        profile
            .params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let parents: Vec<PathBuf> = profile
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("PROTECTED_PARENT"))
        .map(|(_, v)| v.clone())
        .collect();
    assert!(
        parents.contains(&PathBuf::from("/Users/u/proj/.git")),
        "{parents:?}"
    );
    assert!(parents.contains(&PathBuf::from("/Users/u/proj")));
    assert!(!parents.contains(&PathBuf::from("/")));
    assert!(value("PROTECTED_0").is_some());
    assert!(profile
        .text
        .contains("(deny file-write-unlink\n  (literal (param \"PROTECTED_PARENT_0\"))"));
}

#[test]
fn a_network_allow_list_reaches_only_the_proxy_port() {
    let policy = policy_for("shell", r#"{"network": {"allow": ["api.example.com"]}}"#);
    let profile = build(&policy);
    assert!(profile
        .text
        .contains("(allow network-outbound (remote tcp \"localhost:43128\"))"));
    assert!(!profile.text.contains("(allow network-outbound)"));
    assert!(!profile.text.contains("mDNSResponder"));
    let without_port = build_profile(&Inputs {
        policy: &policy,
        temp_dir: None,
        tty: None,
        proxy_port: None,
    });
    assert_eq!(without_port, Err(SeatbeltError::NoProxy));
}

#[test]
fn the_argv_runs_only_the_system_sandbox_exec() {
    let profile = Profile {
        text: "(version 1)".into(),
        params: vec![("WRITABLE_0".into(), "/a=b".into())],
    };
    let argv = build_argv(&profile, &["/x/sbx-shell".into(), "__sbx_helper".into()]);
    let expected: Vec<OsString> = [
        "/usr/bin/sandbox-exec",
        "-p",
        "(version 1)",
        "-D",
        "WRITABLE_0=/a=b",
        "/x/sbx-shell",
        "__sbx_helper",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    assert_eq!(argv, expected);
}

#[test]
fn the_structure_check_catches_what_it_promises() {
    assert!(check_structure("(version 1)\n(allow file-read* (literal \"/a\"))").is_ok());
    let bad = [
        ("(allow file-read*", "unclosed"),
        ("(allow file-read*))", "unbalanced"),
        ("(allow file-raed*)", "unknown operation"),
        ("(allow file-read* (literal \"a\\nb\"))", "bad escape"),
        ("(allow file-read* (literal \"a", "unterminated"),
    ];
    for (text, needle) in bad {
        let err = check_structure(text).unwrap_err();
        assert!(err.contains(needle), "{text}: {err}");
    }
    let long = format!(
        "(allow file-read* (literal \"{}\"))",
        "a".repeat(MAX_LITERAL + 1)
    );
    assert!(check_structure(&long).unwrap_err().contains("over 1024"));
}

#[test]
fn a_granted_socket_is_the_one_unix_socket_to_connect_to() {
    let profile = build(&policy_for(
        "shell",
        r#"{"filesystem": {"sockets": ["/tmp/agent.sock"]}}"#,
    ));
    check_structure(&profile.text).unwrap();
    assert!(
        profile.text.contains(
            "(allow network-outbound\n  (remote unix-socket (path-literal (param \"SOCKET_0\")))\n  (remote unix-socket (path-literal (param \"SOCKET_1\"))))"
        ),
        "{}",
        profile.text
    );
    let values: Vec<&Path> = profile
        .params
        .iter()
        .filter(|(k, _)| k.starts_with("SOCKET_"))
        .map(|(_, v)| v.as_path())
        .collect();
    assert_eq!(
        values,
        [
            Path::new("/tmp/agent.sock"),
            Path::new("/private/tmp/agent.sock")
        ]
    );
    // Without a grant, no such rule: connecting is network-outbound, denied by default.
    let none = build(&policy_for("shell", "{}"));
    assert!(!none.text.contains("unix-socket"));
}
