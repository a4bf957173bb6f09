use std::path::{Path, PathBuf};

use super::*;
use crate::policy::profiles;
use crate::policy::{self, Layer, PathContext, PathResolver};

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

/// A Mac user's home, workspace and sbx-shell directories.
fn mac_context() -> PathContext {
    PathContext {
        home: "/Users/u".into(),
        workspace: "/Users/u/proj".into(),
        state: "/Users/u/.local/state/sbx-shell".into(),
        config: "/Users/u/.config/sbx-shell".into(),
        vars: Default::default(),
        ssh_client: Default::default(),
    }
}

fn policy_for(profile: &str, extra: &str) -> Policy {
    let (name, layer) = profiles::load(profile, Path::new("/nonexistent")).unwrap();
    let extra = Layer {
        origin: "test".into(),
        config: crate::policy::config::from_str(extra, "test").unwrap(),
    };
    let ctx = mac_context();
    policy::resolve(
        &name,
        &[policy::defaults_layer(), layer, extra],
        &ctx,
        &MacFs,
    )
    .unwrap()
}

fn build(policy: &Policy) -> Profile {
    let inputs = SeatbeltInputs {
        policy,
        temp_dir: Some(Path::new("/private/var/folders/ab/xyz/T")),
        tty: Some(Path::new("/dev/ttys003")),
        terminals: &[
            PathBuf::from("/dev/ttys000"),
            PathBuf::from("/dev/ttys001"),
            PathBuf::from("/dev/ttys003"),
        ],
        user_dirs: &[
            PathBuf::from("/private/var/folders/ab/xyz/0"),
            PathBuf::from("/private/var/folders/ab/xyz/T"),
            PathBuf::from("/private/var/folders/ab/xyz/C"),
        ],
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
    let switches: &[(&str, &str, &str)] = &[
        ("shell+keychain", "shell", r#"{"keychain_access": true}"#),
        ("shell+gui", "shell", r#"{"gui": true}"#),
        ("shell+net-full", "shell", r#"{"network": "full"}"#),
        (
            "shell+net-allow",
            "shell",
            r#"{"network": {"allow": ["api.example.com", "localhost:5432"]}}"#,
        ),
        ("shell+no-nested-pty", "shell", r#"{"nested_pty": false}"#),
        (
            "shell+unrestricted",
            "shell",
            r#"{"filesystem": {"mode": "unrestricted"}}"#,
        ),
        (
            "shell+deny-in-workspace",
            "shell",
            r#"{"filesystem": {"deny": ["./a/b/secret.txt"]}}"#,
        ),
    ];
    let shipped = profiles::SHIPPED
        .iter()
        .map(|(name, _)| (*name, *name, "{}"));
    for (name, profile, extra) in shipped.chain(switches.iter().copied()) {
        check_golden(&dir, name, &build(&policy_for(profile, extra)), update);
    }
}

/// ssh inside: the session's agent socket connectable, `~/.ssh`'s config and known_hosts
/// readable (after the denial, on purpose: the last matching rule wins), the key config
/// names denied outside `~/.ssh`.
#[test]
fn the_ssh_profile_matches_its_golden_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seatbelt");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let (name, layer) = profiles::load("shell", Path::new("/nonexistent")).unwrap();
    let extra = Layer {
        origin: "test".into(),
        config: crate::policy::config::from_str(
            r#"{"ssh": {"keys": ["SHA256:abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ@github.com"]}, "network": {"allow": ["github.com:22"]}}"#,
            "test",
        )
        .unwrap(),
    };
    let ctx = PathContext {
        ssh_client: crate::policy::ssh::ClientFiles {
            configs: vec!["/Users/u/.ssh/config".into()],
            known_hosts: vec!["/Users/u/.ssh/known_hosts".into()],
            identities: vec!["/Users/u/keys/work".into()],
            public: vec!["/Users/u/keys/work.pub".into()],
        },
        ..mac_context()
    };
    let mut policy = policy::resolve(
        &name,
        &[policy::defaults_layer(), layer, extra],
        &ctx,
        &MacFs,
    )
    .unwrap();
    policy
        .filesystem
        .own_sockets
        .push("/Users/u/.local/state/sbx-shell/ssh/42/agent.sock".into());
    let profile = build(&policy);
    assert!(profile
        .text
        .contains("(remote unix-socket (path-literal (param \"SOCKET_0\")))"));
    check_golden(&dir, "shell+ssh", &profile, update);
}

/// `profile` against `dir/NAME.sbpl` and `NAME.params` (rewritten with `update`).
fn check_golden(dir: &Path, name: &str, profile: &Profile, update: bool) {
    {
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
                std::fs::create_dir_all(dir).unwrap();
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

/// The values of the parameters named PREFIX_<n>.
fn values(profile: &Profile, prefix: &str) -> Vec<PathBuf> {
    profile
        .params
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix(prefix)
                .and_then(|n| n.strip_prefix('_'))
                .is_some_and(|n| n.parse::<usize>().is_ok())
        })
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn protected_and_denied_paths_and_their_parents_cannot_be_moved_away() {
    let profile = build(&policy_for(
        "shell",
        r#"{"filesystem": {"deny": ["./a/b/secret.txt"]}}"#,
    ));
    let parents = values(&profile, "PARENT");
    for parent in [
        "/Users/u/proj/.git",
        "/Users/u/proj",
        "/Users/u/proj/a/b",
        "/Users/u/proj/a",
    ] {
        assert!(
            parents.contains(&PathBuf::from(parent)),
            "{parent}: {parents:?}"
        );
    }
    assert!(!parents.contains(&PathBuf::from("/")));
    assert!(values(&profile, "DENIED").contains(&PathBuf::from("/Users/u/proj/a/b/secret.txt")));
    assert!(!values(&profile, "PROTECTED").is_empty());
    let unlink = profile
        .text
        .find("(deny file-write-unlink\n  (literal (param \"PARENT_0\"))")
        .unwrap();
    // After the allow of the workspace, which it has to beat.
    assert!(unlink > profile.text.find("(param \"WRITABLE_0\")").unwrap());
    assert!(profile
        .text
        .contains("(deny file-write-unlink\n  (regex (param \"PARENT_ANY_0\"))"));
}

/// Nested ptys: /dev/ptmx and the terminals the program made (the kernel's
/// com.apple.sandbox.pty extension), its own terminal; every terminal that existed at the
/// start but its own, the outer one among them, denied by name after every allow.
#[test]
fn a_nested_pty_reaches_only_the_programs_own_terminals() {
    let profile = build(&policy_for("shell", "{}"));
    let text = &profile.text;
    let nested = "(allow file-read* file-write* file-ioctl\n  (require-all\n    (regex #\"^/dev/ttys[0-9]+$\")\n    (extension \"com.apple.sandbox.pty\")))";
    assert!(text.contains(nested), "{text}");
    // No other rule names the terminals by pattern.
    assert_eq!(text.matches("/dev/ttys").count(), 1, "{text}");
    assert_eq!(
        values(&profile, "TERMINAL"),
        [PathBuf::from("/dev/ttys000"), PathBuf::from("/dev/ttys001")],
        "the session's own terminal (ttys003) is not denied"
    );
    assert_eq!(values(&profile, "TTY"), [PathBuf::from("/dev/ttys003")]);
    let deny = "(deny file-read* file-write* file-ioctl\n  (require-all\n    (require-any\n      (literal (param \"TERMINAL_0\"))\n      (literal (param \"TERMINAL_1\")))\n    (require-not (extension \"com.apple.sandbox.pty\"))))";
    let at = text.find(deny).unwrap_or_else(|| panic!("{text}"));
    assert!(at > text.find(nested).unwrap() && at > text.find("(param \"TTY_0\")").unwrap());
    assert!(
        !text[at..].contains("(allow"),
        "an allow after the terminals' deny"
    );
    // Without nested ptys nothing opens a terminal by pattern; the deny stays.
    let off = build(&policy_for("shell", r#"{"nested_pty": false}"#));
    assert!(!off.text.contains("/dev/ttys") && off.text.contains(deny));
}

#[test]
fn keychain_access_grants_the_users_own_directories_only() {
    let profile = build(&policy_for("shell", r#"{"keychain_access": true}"#));
    assert!(
        !profile.text.contains("/private/var/folders"),
        "{}",
        profile.text
    );
    assert_eq!(
        values(&profile, "USER_DIR"),
        [
            PathBuf::from("/private/var/folders/ab/xyz/0"),
            PathBuf::from("/private/var/folders/ab/xyz/T"),
            PathBuf::from("/private/var/folders/ab/xyz/C"),
        ]
    );
    let rule = "(allow file-read* file-write*\n  (subpath (param \"USER_DIR_0\"))\n  (subpath (param \"USER_DIR_1\"))\n  (subpath (param \"USER_DIR_2\")))";
    let at = profile.text.find(rule).unwrap();
    // Denied paths still win inside them.
    assert!(at < profile.text.find("(param \"DENIED_0\")").unwrap());
    let without = build(&policy_for("shell", "{}"));
    assert!(values(&without, "USER_DIR").is_empty() && !without.text.contains("KEYCHAINS"));
}

/// A matcher for what `any_spelling` writes: `^`, `(…)?` holding no group, `[…]`, `[^/]*`,
/// `.`, literal characters, and `(/|$)` or `$` at the end.
fn spelled(regex: &str, path: &str) -> bool {
    fn class(at: &[u8]) -> (bool, Vec<u8>, usize) {
        let negated = at.get(1) == Some(&b'^');
        let start = if negated { 2 } else { 1 };
        let end = start + at[start..].iter().position(|b| *b == b']').unwrap();
        (negated, at[start..end].to_vec(), end + 1)
    }
    fn go(re: &[u8], s: &[u8]) -> bool {
        match re {
            [] => s.is_empty(),
            [b'$'] => s.is_empty(),
            [b'(', b'/', b'|', b'$', b')'] => s.is_empty() || s[0] == b'/',
            [b'(', ..] => {
                let close = re.iter().position(|b| *b == b')').unwrap();
                let (group, rest) = (&re[1..close], &re[close + 2..]);
                let with: Vec<u8> = [group, rest].concat();
                go(&with, s) || go(rest, s)
            }
            [b'[', ..] => {
                let (negated, set, len) = class(re);
                let ok = |c: u8| set.contains(&c) != negated;
                if let Some(q @ (b'+' | b'*')) = re.get(len) {
                    let least = usize::from(*q == b'+');
                    let n = s.iter().take_while(|c| ok(**c)).count();
                    (least..=n).rev().any(|k| go(&re[len + 1..], &s[k..]))
                } else {
                    !s.is_empty() && ok(s[0]) && go(&re[len..], &s[1..])
                }
            }
            [b'.', rest @ ..] => !s.is_empty() && go(rest, &s[1..]),
            [c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(regex.strip_prefix('^').unwrap().as_bytes(), path.as_bytes())
}

#[test]
fn any_spelling_matches_every_case_and_the_firmlink() {
    let re = any_spelling(Path::new("/Users/u/.ssh"), SUBPATH);
    for yes in [
        "/Users/u/.ssh",
        "/Users/u/.ssh/id_ed25519",
        "/users/U/.SSH",
        "/System/Volumes/Data/Users/u/.ssh/x",
        "/system/volumes/data/USERS/u/.Ssh",
    ] {
        assert!(spelled(&re, yes), "{re} does not match {yes}");
    }
    for no in [
        "/Users/u/.sshx",
        "/Users/u/xssh",
        "/Users/u",
        "/Other/Users/u/.ssh",
    ] {
        assert!(!spelled(&re, no), "{re} matches {no}");
    }
    let exact = any_spelling(Path::new("/Users/u/proj"), LITERAL);
    assert!(spelled(&exact, "/USERS/u/PROJ") && !spelled(&exact, "/Users/u/proj/x"));
    // Given in the firmlink's spelling, the short one is covered too.
    let data = any_spelling(Path::new("/System/Volumes/Data/Users/u/.aws"), SUBPATH);
    assert!(spelled(&data, "/Users/U/.AWS/credentials"));
    // A non-ASCII letter (its case and normalization vary too) matches any run there.
    let accented = any_spelling(Path::new("/Users/jos\u{e9}/.ssh"), SUBPATH);
    assert!(spelled(&accented, "/Users/Jose\u{301}/.ssh/k"));
    assert!(spelled(&accented, "/Users/JOS\u{c9}/.ssh"));
    assert!(!spelled(&accented, "/Users/other/.ssh"));
    // Regex punctuation is never taken as regex.
    let odd = any_spelling(Path::new("/Users/u/a+b (1)/x"), LITERAL);
    assert!(spelled(&odd, "/users/U/A+B (1)/X"), "{odd}");
    assert!(!odd.contains('+') && odd.matches('(').count() == 1, "{odd}");
    // The system volume has no firmlinked twin; devices neither.
    assert!(!any_spelling(Path::new("/System/Library/x"), SUBPATH).contains("Volumes"));
}

#[test]
fn every_denied_and_protected_path_and_parent_is_denied_in_every_spelling() {
    for (name, _) in profiles::SHIPPED {
        let profile = build(&policy_for(name, "{}"));
        for (prefix, end) in [
            ("DENIED", SUBPATH),
            ("PROTECTED", SUBPATH),
            ("PARENT", LITERAL),
        ] {
            let regexes = values(&profile, &format!("{prefix}_ANY"));
            let plain = values(&profile, prefix);
            assert!(!plain.is_empty(), "{name}: no {prefix}");
            for path in plain {
                let p = path.to_str().unwrap();
                let upper = p.to_uppercase();
                assert!(
                    regexes.iter().any(|r| {
                        let r = r.to_str().unwrap();
                        r.ends_with(end)
                            && spelled(r, p)
                            && spelled(r, &upper)
                            && (p.starts_with("/System/")
                                || spelled(r, &format!("/System/Volumes/Data{p}")))
                    }),
                    "{name}: {p} has no rule for its other spellings"
                );
            }
            let filter = format!("\n  (regex (param \"{prefix}_ANY_0\"))");
            assert!(
                profile.text.contains(&filter),
                "{name}: {prefix}_ANY unused"
            );
        }
    }
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
    let without_port = build_profile(&SeatbeltInputs {
        policy: &policy,
        temp_dir: None,
        tty: None,
        terminals: &[],
        user_dirs: &[],
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
