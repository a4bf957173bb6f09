use super::*;
use crate::policy::config;
use crate::policy::model::Dropped;
use crate::policy::{DomainRule, Network};
use std::ffi::{OsStr, OsString};

/// A filesystem where /tmp is a symlink to /private/tmp (as on macOS) and /home/u exists.
struct FakeFs;

impl PathResolver for FakeFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        let s = path.to_str()?;
        if s == "/tmp" || s.starts_with("/tmp/") {
            return Some(PathBuf::from(format!("/private{s}")));
        }
        [
            "/",
            "/home",
            "/home/u",
            "/home/u/proj",
            "/private",
            "/private/tmp",
        ]
        .contains(&s)
        .then(|| path.to_path_buf())
    }
}

fn ctx() -> PathContext {
    PathContext {
        home: "/home/u".into(),
        workspace: "/home/u/proj".into(),
        state: "/home/u/.local/state/sbx-shell".into(),
        config: "/home/u/.config/sbx-shell".into(),
        vars: Default::default(),
        ssh_client: Default::default(),
    }
}

fn layer(origin: &str, json: &str) -> Layer {
    Layer {
        origin: origin.into(),
        config: config::from_str(json, origin).unwrap(),
    }
}

fn policy(layers: &[Layer]) -> Policy {
    let mut all = vec![defaults_layer()];
    all.extend_from_slice(layers);
    resolve("test", &all, &ctx(), &FakeFs).unwrap()
}

fn paths(list: &[ResolvedPath]) -> Vec<String> {
    list.iter().map(|p| p.path.display().to_string()).collect()
}

#[test]
fn the_defaults_are_the_safe_ones() {
    let p = policy(&[]);
    assert_eq!(p.filesystem.mode, FsMode::WorkspaceWrite);
    assert_eq!(p.filesystem.workspace.path, Path::new("/home/u/proj"));
    assert_eq!(p.network, Network::None);
    assert!(p.nested_pty && !p.keychain_access && !p.gui);
    assert_eq!(p.limits.open_files, OpenFiles::Mode(OpenFilesMode::Raise));
    assert!(!p.limits.core_dumps);
    assert_eq!(p.limits.timeout_grace_seconds, DEFAULT_TIMEOUT_GRACE);
    let denied = paths(&p.filesystem.denied);
    for secret in [
        "/home/u/.ssh",
        "/home/u/.aws",
        "/home/u/.config/gcloud",
        "/home/u/.bash_history",
        "/home/u/Library/Keychains",
    ] {
        assert!(
            denied.contains(&secret.to_string()),
            "{secret} not denied: {denied:?}"
        );
    }
    let protected = paths(&p.filesystem.protected);
    for file in [
        "/home/u/proj/.git/hooks",
        "/home/u/proj/.git/config",
        "/home/u/.bashrc",
        "/home/u/proj/.mcp.json",
        "/home/u/.config/sbx-shell",
    ] {
        assert!(
            protected.contains(&file.to_string()),
            "{file} not protected: {protected:?}"
        );
    }
}

#[test]
fn allow_lists_add_up_and_none_or_full_replaces() {
    let hosts = |network: &[&str]| {
        let layers: Vec<Layer> = network
            .iter()
            .enumerate()
            .map(|(i, n)| layer(&format!("layer{i}"), &format!(r#"{{"network": {n}}}"#)))
            .collect();
        match policy(&layers).network {
            Network::Allow(rules) => rules.into_iter().map(|r| r.host).collect(),
            other => vec![format!("{other:?}")],
        }
    };
    let a = r#"{"allow": ["a.example.com"]}"#;
    let b = r#"{"allow": ["b.example.com", "a.example.com"]}"#;
    // A profile's hosts kept when the user allows one more.
    assert_eq!(hosts(&[a, b]), ["a.example.com", "b.example.com"]);
    assert_eq!(hosts(&[a, r#""none""#]), ["None"]);
    assert_eq!(hosts(&[a, r#""full""#]), ["Full"]);
    // After none or full, an allow-list is the whole list.
    assert_eq!(hosts(&[r#""full""#, b]), ["a.example.com", "b.example.com"]);
    assert_eq!(
        hosts(&[a, r#""none""#, r#"{"allow": ["c.example.com"]}"#]),
        ["c.example.com"]
    );
}

#[test]
fn later_layers_win_for_scalars_and_add_to_lists() {
    let user = layer(
        "user",
        r#"{"network": "full", "gui": true, "filesystem": {"write": ["~/.cache"]}}"#,
    );
    let profile = layer(
        "profile",
        r#"{"network": {"allow": ["api.example.com"]}, "filesystem": {"write": ["/opt/out"]}}"#,
    );
    let flags = layer(
        "flags",
        r#"{"gui": false, "filesystem": {"write": ["~/.cache"]}}"#,
    );
    let p = policy(&[user, profile, flags]);
    assert_eq!(
        p.network,
        Network::Allow(vec![DomainRule {
            host: "api.example.com".into(),
            wildcard: false,
            port: None
        }])
    );
    assert!(!p.gui);
    assert_eq!(
        paths(&p.filesystem.writable),
        [
            "/home/u/.cache",
            "/home/u/.local/state/sbx-shell/home/test",
            "/opt/out"
        ]
    );
}

#[test]
fn keychain_access_undenies_the_keychains() {
    let keychains = "/home/u/Library/Keychains".to_string();
    assert!(paths(&policy(&[]).filesystem.denied).contains(&keychains));
    let p = policy(&[layer("profile", r#"{"keychain_access": true}"#)]);
    assert!(!paths(&p.filesystem.denied).contains(&keychains));
    assert_eq!(p.filesystem.home.path, Path::new("/home/u"));
}

#[test]
fn allow_denied_takes_an_entry_out_of_the_default_set() {
    let p = policy(&[layer(
        "profile",
        r#"{"filesystem": {"allow_denied": ["~/.config/gcloud"]}}"#,
    )]);
    assert!(!paths(&p.filesystem.denied).contains(&"/home/u/.config/gcloud".to_string()));
    assert!(paths(&p.filesystem.denied).contains(&"/home/u/.ssh".to_string()));
}

#[test]
fn paths_are_resolved_once_with_both_spellings_kept() {
    let resolve = |raw: &str| resolve_path(raw, "t", &ctx(), &FakeFs);
    assert_eq!(resolve("~/.x").unwrap().path, Path::new("/home/u/.x"));
    assert_eq!(resolve("~").unwrap().path, Path::new("/home/u"));
    assert_eq!(
        resolve("src/./gen").unwrap().path,
        Path::new("/home/u/proj/src/gen")
    );
    let tmp = resolve("/tmp/build").unwrap();
    assert_eq!(tmp.path, Path::new("/tmp/build"));
    assert_eq!(tmp.real.as_deref(), Some(Path::new("/private/tmp/build")));
    assert_eq!(
        tmp.spellings(),
        [Path::new("/tmp/build"), Path::new("/private/tmp/build")]
    );
    assert_eq!(
        resolve("/home/u/proj").unwrap().real,
        None,
        "same spelling is kept once"
    );
}

#[test]
fn dangerous_paths_are_rejected_with_a_hint() {
    for (raw, needle) in [
        ("../up", "`..`"),
        ("~/a/../../etc", "`..`"),
        ("a\nb", "control character"),
        ("", "empty path"),
    ] {
        let err = resolve_path(raw, "profile x", &ctx(), &FakeFs)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(needle) && err.contains("Hint: ") && err.starts_with("profile x"),
            "{raw:?}: {err}"
        );
    }
}

#[test]
fn domain_rules_are_parsed_strictly() {
    let ok = |e: &str| parse_domain_rule(e, "t").unwrap();
    assert_eq!(
        ok("API.Example.com"),
        DomainRule {
            host: "api.example.com".into(),
            wildcard: false,
            port: None
        }
    );
    assert_eq!(
        ok("*.googleapis.com:443"),
        DomainRule {
            host: "googleapis.com".into(),
            wildcard: true,
            port: Some(443)
        }
    );
    assert_eq!(ok("10.0.0.1:8080").port, Some(8080));
    assert_eq!(ok("[::1]:443").host, "::1");
    assert_eq!(ok("[::1]:443").loopback_port(), Some(443));
    assert_eq!(ok("LocalHost:5432").host, "localhost");
    assert_eq!(ok("localhost:5432").loopback_port(), Some(5432));
    assert_eq!(ok("127.0.0.2:8000").loopback_port(), Some(8000));
    assert_eq!(ok("10.0.0.1:8080").loopback_port(), None);
    assert_eq!(ok("localhost.example.com:80").loopback_port(), None);
    for bad in ["localhost", "127.0.0.1", "[::1]"] {
        let err = parse_domain_rule(bad, "t").unwrap_err().to_string();
        assert!(
            err.contains("Hint: name the service's port"),
            "{bad}: {err}"
        );
    }
    for bad in [
        "*.1.2.3.4",
        "exa mple.com",
        "a..b",
        "-a.com",
        "a.com:0",
        "a.com:99999",
        "*",
        "a.com:x",
        "http://a.com",
    ] {
        let err = parse_domain_rule(bad, "t").unwrap_err().to_string();
        assert!(err.contains("Hint: "), "{bad}: {err}");
    }
}

#[test]
fn the_environment_drops_injectors_and_secrets_unless_allowed() {
    let p = policy(&[layer(
        "profile",
        r#"{"environment": {"allow": ["ANTHROPIC_API_KEY"], "drop": ["AWS_*"], "set": {"EDITOR": "vi"}}}"#,
    )]);
    let inherited = [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("TERM", "xterm"),
        ("LD_PRELOAD", "x.so"),
        ("DYLD_INSERT_LIBRARIES", "x"),
        ("BASH_ENV", "x"),
        ("NODE_OPTIONS", "--require x"),
        ("GITHUB_TOKEN", "t"),
        ("MY_SECRET", "s"),
        ("DB_PASSWORD", "p"),
        ("OPENAI_API_KEY", "k"),
        ("ANTHROPIC_API_KEY", "k"),
        ("AWS_REGION", "eu"),
        ("EDITOR", "nano"),
        ("KEYMAP", "us"),
        ("GH_PAT", "p"),
        ("OPENAI_KEY", "k"),
        ("DATABASE_URL", "postgres://app:pw@db/app"),
        ("NOTES", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
        ("REPO_URL", "https://github.com/org/repo.git"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-X/agent.1"),
    ]
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let env: BTreeMap<String, String> = p
        .environment
        .apply(inherited, "bwrap", &|name, _| name == "SSH_AUTH_SOCK")
        .into_iter()
        .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
        .collect();
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "ANTHROPIC_API_KEY",
            "EDITOR",
            "HOME",
            "KEYMAP",
            "PATH",
            "REPO_URL",
            "SBX_SANDBOX",
            "SBX_SHELL",
            "TERM"
        ]
    );
    assert_eq!(env["EDITOR"], "vi");
    // Allowed by name: passed whatever its value, or where it points.
    let allowed = policy(&[layer(
        "flags",
        r#"{"environment": {"allow": ["DATABASE_URL", "SSH_AUTH_SOCK", "NOTES"]}}"#,
    )]);
    let why = |name: &str, value: &str| {
        allowed
            .environment
            .verdict(name, OsStr::new(value), &|n, _| n == "SSH_AUTH_SOCK")
    };
    assert_eq!(why("DATABASE_URL", "postgres://app:pw@db/app"), None);
    assert_eq!(why("SSH_AUTH_SOCK", "/tmp/ssh-X/agent.1"), None);
    assert_eq!(
        why("OTHER_URL", "postgres://app:pw@db/app"),
        Some(Dropped::SecretValue("a URL with a password"))
    );
    assert_eq!(why("LD_PRELOAD", "x.so"), Some(Dropped::Always));
    assert_eq!(env["SBX_SHELL"], "1");
    assert_eq!(env["SBX_SANDBOX"], "bwrap");
}

#[test]
fn bad_variable_names_are_rejected() {
    let layers = [
        defaults_layer(),
        layer("profile p", r#"{"environment": {"set": {"1X": "y"}}}"#),
    ];
    let err = resolve("p", &layers, &ctx(), &FakeFs)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("profile p: \"1X\"") && err.contains("Hint: "),
        "{err}"
    );
}

#[test]
fn required_layers_and_the_tmp_size_come_from_the_last_layer_that_names_them() {
    let p = policy(&[]);
    assert!(p.require.is_empty());
    assert_eq!(p.limits.tmp_mib, super::DEFAULT_TMP_MIB);
    let p = policy(&[
        layer(
            "config",
            r#"{"require": ["bwrap", "landlock"], "limits": {"tmp_mib": 64}}"#,
        ),
        layer("profile", r#"{"require": ["seccomp"]}"#),
    ]);
    assert_eq!(p.require, vec![config::SandboxLayer::Seccomp]);
    assert_eq!(p.limits.tmp_mib, 64);
    let err = config::from_str(r#"{"require": ["apparmor"]}"#, "config").unwrap_err();
    assert!(err.to_string().contains("apparmor"), "{err}");
}

#[test]
fn granting_a_denied_path_is_an_error_never_a_silent_no_op() {
    let mut all = vec![defaults_layer()];
    all.push(layer(
        "command line",
        r#"{"filesystem": {"read": ["~/.ssh"]}}"#,
    ));
    let err = resolve("test", &all, &ctx(), &FakeFs)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("read /home/u/.ssh: /home/u/.ssh is denied") && err.contains("allow_denied"),
        "{err}"
    );
    let mut all = vec![defaults_layer()];
    all.push(layer(
        "command line",
        r#"{"filesystem": {"write": ["~/.aws/x"]}}"#,
    ));
    assert!(resolve("test", &all, &ctx(), &FakeFs).is_err());
    // Lifted first, granted then: fine.
    let p = policy(&[layer(
        "config",
        r#"{"filesystem": {"allow_denied": ["~/.ssh"], "read": ["~/.ssh"]}}"#,
    )]);
    assert!(paths(&p.filesystem.readable).contains(&"/home/u/.ssh".to_string()));
    // A grant that contains a denied path keeps the denial inside it.
    let p = policy(&[layer("config", r#"{"filesystem": {"read": ["~"]}}"#)]);
    assert!(paths(&p.filesystem.denied).contains(&"/home/u/.ssh".to_string()));
}

#[test]
fn seeds_land_in_writable_paths_and_never_copy_a_denied_one() {
    let ok = policy(&[layer(
        "profile",
        r#"{"filesystem": {"write": ["~/.tool"], "seed": [{"path": "~/.tool/s.json", "from": "~/.tool.json"}]}}"#,
    )]);
    assert_eq!(ok.filesystem.seed.len(), 1);
    assert_eq!(
        ok.filesystem.seed[0].path.path,
        Path::new("/home/u/.tool/s.json")
    );
    let all = vec![defaults_layer()];
    let outside = layer(
        "profile",
        r#"{"filesystem": {"seed": [{"path": "~/.bashrc", "from": "~/.tool.json"}]}}"#,
    );
    let err = resolve("t", &[all.clone(), vec![outside]].concat(), &ctx(), &FakeFs).unwrap_err();
    assert!(
        matches!(err, PolicyError::SeedOutsideWritable { .. }),
        "{err}"
    );
    let secret = layer(
        "profile",
        r#"{"filesystem": {"write": ["~/.tool"], "seed": [{"path": "~/.tool/k", "from": "~/.ssh/id_ed25519"}]}}"#,
    );
    let err = resolve("t", &[all, vec![secret]].concat(), &ctx(), &FakeFs).unwrap_err();
    assert!(
        err.to_string()
            .contains("seed from /home/u/.ssh/id_ed25519"),
        "{err}"
    );
    assert!(err.to_string().contains("Hint: "), "{err}");
}

#[test]
fn a_socket_grant_may_begin_with_a_variable_and_names_nothing_when_it_is_unset() {
    let mut c = ctx();
    c.vars
        .insert("SSH_AUTH_SOCK".into(), "/tmp/ssh-X/agent.1".into());
    c.vars
        .insert("XDG_RUNTIME_DIR".into(), "/run/user/1000".into());
    c.vars.insert("EMPTY".into(), String::new());
    let l = layer(
        "profile",
        r#"{"filesystem": {"sockets": ["$SSH_AUTH_SOCK", "${XDG_RUNTIME_DIR}/bus", "$XDG_RUNTIME_DIR/gnupg", "$UNSET/x", "$EMPTY", "/run/docker.sock"]}}"#,
    );
    let p = resolve("test", &[defaults_layer(), l], &c, &FakeFs).unwrap();
    let granted: Vec<&str> = p
        .filesystem
        .sockets
        .iter()
        .map(|s| s.path.to_str().unwrap())
        .collect();
    assert_eq!(
        granted,
        [
            "/run/docker.sock",
            "/run/user/1000/bus",
            "/run/user/1000/gnupg",
            "/tmp/ssh-X/agent.1"
        ]
    );
}

/// `/home/u/proj/a` is a symlink to `/srv/elsewhere` (planted by an earlier session, say);
/// `/home/u/.dots` one the user made at the top of a home workspace.
struct LinkedFs;

impl PathResolver for LinkedFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        let s = path.to_str()?;
        if let Some(rest) = s.strip_prefix("/home/u/proj/a") {
            return Some(PathBuf::from(format!("/srv/elsewhere{rest}")));
        }
        if let Some(rest) = s.strip_prefix("/home/u/.dots") {
            return Some(PathBuf::from(format!("/data/dots{rest}")));
        }
        Some(path.to_path_buf())
    }
}

#[test]
fn a_grant_through_a_symlink_inside_a_writable_tree_is_refused() {
    let with = |ctx: &PathContext, json: &str| {
        let all = vec![defaults_layer(), layer("test", json)];
        resolve("test", &all, ctx, &LinkedFs)
    };
    let err = with(&ctx(), r#"{"filesystem": {"write": ["./a/b"]}}"#).unwrap_err();
    assert!(
        matches!(&err, PolicyError::GrantThroughSymlink { link, real, .. }
            if link == "/home/u/proj/a" && real == "/srv/elsewhere/b"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("Hint: grant the directory"),
        "{err}"
    );
    // Not inside another writable tree, or no symlink on the way: as before.
    assert!(with(&ctx(), r#"{"filesystem": {"write": ["./c/d", "/srv/x"]}}"#).is_ok());
    // A dot entry at the top of a home workspace is the host's (no session makes one).
    let home_ws = PathContext {
        workspace: "/home/u".into(),
        ..ctx()
    };
    assert!(with(&home_ws, r#"{"filesystem": {"write": ["~/.dots/x"]}}"#).is_ok());
    assert!(with(&home_ws, r#"{"filesystem": {"write": ["~/proj/a/b"]}}"#).is_err());
}

#[test]
fn the_container_user_is_the_last_layers_and_a_bad_one_names_its_layer() {
    let p = policy(&[
        layer("config", r#"{"container": {"user": "node"}}"#),
        layer("profile", r#"{"container": {"image": "x"}}"#),
    ]);
    assert_eq!(p.container.user.map(|u| u.to_string()), Some("node".into()));
    let p = policy(&[
        layer("config", r#"{"container": {"user": "node"}}"#),
        layer("profile", r#"{"container": {"user": "0:0"}}"#),
    ]);
    assert_eq!(p.container.user.map(|u| u.to_string()), Some("0:0".into()));
    assert_eq!(policy(&[]).container.user, None);
    let layers = [
        defaults_layer(),
        layer("profile p", r#"{"container": {"user": "a b"}}"#),
    ];
    let err = resolve("p", &layers, &ctx(), &FakeFs)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("profile p: container user \"a b\"") && err.contains("Hint: "),
        "{err}"
    );
}
