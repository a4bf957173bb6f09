//! The answers of `sbx-shell why`, pure: what the resolved policy does with a path, a host,
//! a variable or a host socket, the rule that decides it, the layer that made the rule (a
//! config file or profile and its line, the flags, the built-in defaults) and the option
//! that changes it. Each is the same judgement a run makes: the path by `verdict::of_path`
//! (denied first, then protected, the private home, the writable places), the host by the
//! proxy's own check (`netproxy::request::check`), the variable by
//! `Environment::verdict`, the socket by the granted ones.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::netproxy::request::{self, Target};
use crate::policy::config::{Config, FsMode, NetworkConfig, NetworkMode, PathEntry};
use crate::policy::refusal::{shell_word, tilde};
use crate::policy::verdict::{self, under, PathVerdict};
use crate::policy::{Layer, Network, Policy, ResolvedPath};

/// Where a rule came from: a layer's origin (a file, `profile NAME`, `command line`,
/// `built-in defaults`) and, once looked up, the line in its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    pub origin: String,
    /// The entry as the layer wrote it.
    pub entry: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WhyAnswer {
    pub subject: String,
    /// path, host, variable or socket.
    pub what: &'static str,
    pub allowed: bool,
    /// For a path: whether it can be read and written inside.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    /// What the rule is, in words.
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// The option or config key that changes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl WhyAnswer {
    /// An answer about `subject` (a `what`), by `rule` from `source`, changed by `fix`;
    /// without read and write (a path's sets them).
    fn of(
        what: &'static str,
        subject: String,
        allowed: bool,
        rule: String,
        source: Option<Source>,
        fix: Option<String>,
    ) -> WhyAnswer {
        WhyAnswer {
            subject,
            what,
            allowed,
            read: None,
            write: None,
            rule,
            source,
            fix,
        }
    }
}

/// The layer (highest precedence first) whose list `pick` has an entry `matches` accepts.
fn find_source(
    layers: &[Layer],
    pick: &dyn Fn(&Config) -> Vec<String>,
    matches: &dyn Fn(&Layer, &str) -> bool,
) -> Option<Source> {
    layers.iter().rev().find_map(|layer| {
        pick(&layer.config)
            .into_iter()
            .find(|entry| matches(layer, entry))
            .map(|entry| Source {
                origin: layer.origin.clone(),
                entry,
                line: None,
            })
    })
}

/// The layer whose path list `pick` names `target` (each entry resolved as the policy
/// resolved it).
fn path_source(
    layers: &[Layer],
    resolve: ResolveEntry<'_>,
    pick: fn(&Config) -> &Vec<PathEntry>,
    target: &ResolvedPath,
) -> Option<Source> {
    find_source(
        layers,
        &|c| pick(c).iter().map(|e| e.value().to_string()).collect(),
        &|layer, entry| resolve(entry, &layer.origin).is_some_and(|r| r == *target),
    )
}

/// The layer that set the filesystem mode, as `mode`.
fn mode_source(layers: &[Layer], mode: &str) -> Option<Source> {
    find_source(
        layers,
        &|c| {
            c.filesystem
                .mode
                .map(|_| vec![mode.to_string()])
                .unwrap_or_default()
        },
        &|_, _| true,
    )
}

fn builtin(entry: &str) -> Option<Source> {
    Some(Source {
        origin: "built-in defaults".into(),
        entry: entry.into(),
        line: None,
    })
}

/// How a path entry of a layer resolves (`policy::resolve_path`), for matching it.
pub type ResolveEntry<'a> = &'a dyn Fn(&str, &str) -> Option<ResolvedPath>;

/// A path (`is_dir`: a directory now, which `--write` would name itself): denied,
/// protected, in the private home, writable, or read-only — as `verdict::of_path` judges
/// it for the run's refusals, with the rule's source and what changes it.
pub fn path(
    policy: &Policy,
    layers: &[Layer],
    resolve: ResolveEntry<'_>,
    at: &Path,
    is_dir: bool,
) -> WhyAnswer {
    let fs = &policy.filesystem;
    let home = fs.home.path.as_path();
    // Whether it can be read and written inside.
    let (hidden, readable, writable) = ((false, false), (true, false), (true, true));
    let (allowed, (read, write), rule, source, fix) =
        match verdict::of_path(policy, at, &git_place_of) {
            PathVerdict::Denied(d) => {
                let (rule, source, fix) = denied(policy, layers, resolve, d);
                (false, hidden, rule, source, Some(fix))
            }
            PathVerdict::Protected(p) => {
                let source = path_source(layers, resolve, |c| &c.filesystem.protect, p)
                    .or_else(|| builtin("protected paths"));
                let rule = format!(
                    "protected: {} would run code outside the sandbox",
                    tilde(&p.path, home)
                );
                (false, readable, rule, source, Some(protected_fix(&p.path)))
            }
            PathVerdict::GitPlace(place) => {
                let rule = format!(
                    "protected: {} of a repository would run code outside the sandbox",
                    tilde(&place, home)
                );
                let source = builtin(
                "git's own places in every repository: hooks, config, config.worktree, commondir",
            );
                (false, readable, rule, source, Some(protected_fix(&place)))
            }
            PathVerdict::Kept(kept) => {
                let rule = format!(
                    "private: {} is the profile's own copy, kept in {} (your own is never written)",
                    tilde(&kept.path, home),
                    tilde(&kept.twin, home)
                );
                let fix = "--no-private-home (then it is read-only, as the rest of ~)".to_string();
                (true, writable, rule, builtin("the private home"), Some(fix))
            }
            PathVerdict::Writable(w) => {
                let source = path_source(layers, resolve, |c| &c.filesystem.write, w);
                let rule = format!("writable: {} is a writable place", tilde(&w.path, home));
                (true, writable, rule, source, None)
            }
            PathVerdict::Workspace => {
                let rule = format!(
                    "writable: inside the workspace {}",
                    tilde(&fs.workspace.path, home)
                );
                let source = builtin("the workspace: the current directory, or --workspace");
                (true, writable, rule, source, None)
            }
            PathVerdict::Unrestricted => {
                let rule = "writable: filesystem mode unrestricted".to_string();
                (
                    true,
                    writable,
                    rule,
                    mode_source(layers, "unrestricted"),
                    None,
                )
            }
            PathVerdict::ReadOnly => {
                let (rule, source, fix) = read_only(policy, layers, at, is_dir);
                (false, readable, rule, source, Some(fix))
            }
        };
    WhyAnswer {
        read: Some(read),
        write: Some(write),
        ..WhyAnswer::of("path", tilde(at, home), allowed, rule, source, fix)
    }
}

/// What changes a protected path: the one key of a config, or nothing.
fn protected_fix(p: &Path) -> String {
    match p.file_name().is_some_and(crate::protect::names::is_config) {
        true => "--allow-git-config KEY lets the program write that one key".to_string(),
        false => "none: it would run outside the sandbox, so only you change it, outside".into(),
    }
}

/// The rule of a path outside every writable place (`is_dir`: a directory now, which
/// `--write` names itself), its source (the filesystem mode's layer) and the grant.
fn read_only(
    policy: &Policy,
    layers: &[Layer],
    at: &Path,
    is_dir: bool,
) -> (String, Option<Source>, String) {
    let fs = &policy.filesystem;
    let dir = if is_dir {
        at
    } else {
        at.parent().unwrap_or(at)
    };
    let mode = match fs.mode {
        FsMode::ReadOnly => "read-only",
        FsMode::WorkspaceWrite => "workspace-write",
        FsMode::Unrestricted => "unrestricted",
    };
    let rule = format!("read-only: outside the writable places (filesystem mode {mode})");
    let fix = format!("--write {}", shell_word(&tilde(dir, &fs.home.path)));
    (rule, mode_source(layers, mode), fix)
}

/// The rule of the denied path `d`, its source and what lifts it: a layer's `deny`, a key
/// the user's ssh config names, or a built-in default.
fn denied(
    policy: &Policy,
    layers: &[Layer],
    resolve: ResolveEntry<'_>,
    d: &ResolvedPath,
) -> (String, Option<Source>, String) {
    let fs = &policy.filesystem;
    let home = fs.home.path.as_path();
    let named = path_source(layers, resolve, |c| &c.filesystem.deny, d);
    let found = fs.found_denied.iter().any(|f| f == d.real());
    let (source, fix) = match (named, found) {
        (Some(s), _) => {
            let fix = format!("remove \"{}\" from \"deny\" in {}", s.entry, s.origin);
            (Some(s), fix)
        }
        (None, found) => (
            builtin(&match found {
                true => "a private key your ssh config names (IdentityFile)".to_string(),
                false => format!("denied: {}", tilde(&d.path, home)),
            }),
            format!(
                "\"filesystem\": {{\"allow_denied\": [\"{}\"]}} in a config file",
                tilde(&d.path, home)
            ),
        ),
    };
    let rule = format!("hidden: {} is a denied path", tilde(&d.path, home));
    (rule, source, fix)
}

/// The place of the innermost git directory holding `at` (`gitdir::is_git_dir`, by what
/// it holds now) that makes git run code or read another directory, when `at` is or lies
/// in one: its `hooks`, `config`, `config.worktree` or `commondir`.
fn git_place_of(at: &Path) -> Option<PathBuf> {
    at.ancestors().skip(1).find_map(|dir| {
        let first = at.strip_prefix(dir).ok()?.iter().next()?;
        let own = ["hooks", "config", "config.worktree", "commondir"]
            .iter()
            .any(|n| first == *n);
        let git = || {
            crate::protect::gitdir::is_git_dir(dir.file_name(), |n| {
                dir.join(n).symlink_metadata().is_ok()
            })
        };
        (own && git()).then(|| dir.join(first))
    })
}

/// A host (`name` or `name:port`; port 443 when none), as the proxy judges it.
pub fn host(policy: &Policy, layers: &[Layer], subject: &str) -> WhyAnswer {
    let target = request::parse_authority(subject, Some(443)).unwrap_or(Target {
        host: subject.to_ascii_lowercase(),
        port: 443,
    });
    let source_of_mode = find_source(
        layers,
        &|c| match &c.network {
            Some(NetworkConfig::Mode(NetworkMode::None)) => vec!["none".into()],
            Some(NetworkConfig::Mode(NetworkMode::Full)) => vec!["full".into()],
            Some(NetworkConfig::Allow(_)) => vec!["allow".into()],
            None => Vec::new(),
        },
        &|_, _| true,
    );
    let answer = |allowed, rule: String, source, fix| {
        WhyAnswer::of("host", target.to_string(), allowed, rule, source, fix)
    };
    match &policy.network {
        Network::Full => answer(true, "network: full".into(), source_of_mode, None),
        Network::None => answer(
            false,
            "network: none (no connection, no name lookup)".into(),
            source_of_mode.or_else(|| builtin("network: none")),
            Some(format!("--net allow={}", target.host)),
        ),
        Network::Allow(rules) => match request::check(rules, &target) {
            Ok(()) => {
                let source = find_source(
                    layers,
                    &|c| match &c.network {
                        Some(NetworkConfig::Allow(list)) => {
                            list.allow.iter().map(|e| e.value().to_string()).collect()
                        }
                        _ => Vec::new(),
                    },
                    &|_, entry| {
                        crate::policy::parse_domain_rule(entry, "")
                            .is_ok_and(|r| request::check(&[r], &target).is_ok())
                    },
                );
                let rule = format!(
                    "allowed through the proxy: on the allow-list ({})",
                    source.as_ref().map_or("", |s| s.entry.as_str())
                );
                answer(true, rule, source, None)
            }
            Err(refusal) => answer(
                false,
                format!("refused by the proxy: {}", refusal.reason()),
                source_of_mode,
                refusal.fix(&target),
            ),
        },
    }
}

/// An inherited variable (`value`: its value here, if set), as the environment filter
/// judges it; `hidden_socket` as a run checks it.
pub fn variable(
    policy: &Policy,
    layers: &[Layer],
    name: &str,
    value: Option<&std::ffi::OsStr>,
    hidden_socket: &dyn Fn(&str, &std::ffi::OsStr) -> bool,
) -> WhyAnswer {
    use crate::policy::model::Dropped;
    let env = &policy.environment;
    let answer = |allowed, rule: String, source, fix| {
        WhyAnswer::of("variable", name.to_string(), allowed, rule, source, fix)
    };
    let names = |pick: fn(&Config) -> Vec<String>| {
        find_source(layers, &pick, &|_, entry| match entry.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => entry == name,
        })
    };
    if let Some(c) = policy.injected.iter().find(|c| c.name == name) {
        let source = names(|c| c.credentials.keys().cloned().collect());
        return answer(true, crate::policy::inject::describe(c), source, None);
    }
    if let Some(set) = env.set.get(name) {
        let source = names(|c| c.environment.set.keys().cloned().collect());
        let rule = format!("set by the policy to {set:?} (the host's value is not passed)");
        return answer(true, rule, source, None);
    }
    let value = value.unwrap_or_default();
    match env.verdict(name, value, hidden_socket) {
        None => {
            let source = names(|c| {
                c.environment
                    .allow
                    .iter()
                    .map(|e| e.value().into())
                    .collect()
            });
            let rule = match (&source, value.is_empty()) {
                (Some(_), _) => "passed on: allowed by name".to_string(),
                (None, false) => "passed on: inherited variables are, unless dropped".into(),
                (None, true) => "passed on if set (it is not set here)".into(),
            };
            answer(true, rule, source, None)
        }
        Some(dropped) => {
            let source = match dropped {
                Dropped::Always => {
                    builtin("always dropped (they would run code or bypass the sandbox)")
                }
                Dropped::Configured => names(|c| {
                    c.environment
                        .drop
                        .iter()
                        .map(|e| e.value().into())
                        .collect()
                }),
                Dropped::SecretName => {
                    builtin("names that look secret: *TOKEN*, *SECRET*, *PASSWORD*, *_API_KEY …")
                }
                Dropped::SecretValue(_) => builtin("values that carry a credential"),
                Dropped::Socket => builtin("host sockets are hidden unless granted"),
            };
            let r = crate::policy::refusal::of_variable(name, dropped);
            answer(false, format!("dropped: {}", dropped.why()), source, r.fix)
        }
    }
}

/// A host unix socket: granted (itself or its directory) or hidden.
pub fn socket(
    policy: &Policy,
    layers: &[Layer],
    resolve: ResolveEntry<'_>,
    at: &Path,
) -> WhyAnswer {
    let home = policy.filesystem.home.path.as_path();
    let granted = policy.filesystem.sockets.iter().find(|s| under(at, s));
    let (allowed, rule, source, fix) = match granted {
        Some(g) => (
            true,
            format!("granted: {}", tilde(&g.path, home)),
            path_source(layers, resolve, |c| &c.filesystem.sockets, g),
            None,
        ),
        None => (
            false,
            "hidden: host sockets are closed unless granted".to_string(),
            builtin("host sockets"),
            Some(format!("--allow-socket {}", shell_word(&tilde(at, home)))),
        ),
    };
    WhyAnswer::of("socket", tilde(at, home), allowed, rule, source, fix)
}

/// The line of `text` where `entry` first appears as a JSON string.
pub fn line_of(text: &str, entry: &str) -> Option<usize> {
    let quoted = serde_json::to_string(entry).ok()?;
    text.lines()
        .position(|l| l.contains(&quoted))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{layers_with, SameFs};

    fn ask(extra: &str, at: &str) -> WhyAnswer {
        let (policy, layers, ctx) = layers_with("/w", extra);
        let resolve =
            |raw: &str, origin: &str| crate::policy::resolve_path(raw, origin, &ctx, &SameFs).ok();
        path(&policy, &layers, &resolve, Path::new(at), false)
    }

    #[test]
    fn a_path_is_judged_denied_first_then_protected_then_writable() {
        let a = ask("{}", "/home/u/.ssh/id_ed25519");
        assert_eq!((a.read, a.write), (Some(false), Some(false)));
        assert!(a.fix.unwrap().contains("allow_denied"));
        let a = ask(
            r#"{"filesystem": {"deny": ["~/private"]}}"#,
            "/home/u/private/a",
        );
        assert_eq!(a.source.as_ref().unwrap().origin, "test");
        assert_eq!(a.fix.unwrap(), r#"remove "~/private" from "deny" in test"#);
        let a = ask("{}", "/w/.git/hooks/pre-commit");
        assert_eq!((a.allowed, a.write), (false, Some(false)));
        assert!(a.rule.starts_with("protected"));
        let a = ask("{}", "/w/src/main.rs");
        assert_eq!((a.allowed, a.write), (true, Some(true)));
        // git's own places in any git directory, as `gitdir` tells one.
        let a = ask("{}", "/w/sub/.git/config");
        assert_eq!(
            (
                a.allowed,
                a.fix.as_deref().map(|f| f.contains("--allow-git-config"))
            ),
            (false, Some(true))
        );
        let a = ask(
            r#"{"filesystem": {"write": ["~/notes"]}}"#,
            "/home/u/notes/a",
        );
        let source = a.source.unwrap();
        assert_eq!(
            (source.origin.as_str(), source.entry.as_str()),
            ("test", "~/notes")
        );
        let a = ask("{}", "/etc/hosts");
        assert_eq!((a.read, a.write), (Some(true), Some(false)));
        assert_eq!(a.fix.as_deref(), Some("--write /etc"));
    }

    /// A bare repository, a submodule's git directory: git's own places there too, by what
    /// the directory holds; not in an ordinary directory that only looks alike.
    #[test]
    fn git_places_are_found_in_every_git_directory() {
        let root = std::env::temp_dir().join(format!("sbx-why-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in [
            "bare.git/objects",
            "bare.git/refs",
            "w/.git/modules/sm/refs",
            "plain/hooks",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::create_dir_all(root.join("w/.git/modules/sm/objects")).unwrap();
        for head in ["bare.git/HEAD", "w/.git/modules/sm/HEAD"] {
            std::fs::write(root.join(head), "ref: refs/heads/main\n").unwrap();
        }
        for (path, want) in [
            ("bare.git/hooks/pre-commit", Some("bare.git/hooks")),
            ("bare.git/config", Some("bare.git/config")),
            (
                "w/.git/modules/sm/hooks/post-checkout",
                Some("w/.git/modules/sm/hooks"),
            ),
            (
                "w/.git/modules/sm/commondir",
                Some("w/.git/modules/sm/commondir"),
            ),
            ("plain/hooks/pre-commit", None),
            ("bare.git/objects/info/alternates", None),
        ] {
            assert_eq!(
                git_place_of(&root.join(path)),
                want.map(|w| root.join(w)),
                "{path}"
            );
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_host_is_judged_as_the_proxy_judges_it() {
        let (policy, layers, _) = layers_with("/w", r#"{"network": {"allow": ["*.example.org"]}}"#);
        let a = host(&policy, &layers, "api.example.org");
        assert!(a.allowed);
        assert_eq!(a.source.unwrap().entry, "*.example.org");
        let a = host(&policy, &layers, "example.org");
        assert_eq!(
            (a.allowed, a.fix.as_deref()),
            (false, Some("--net allow=example.org"))
        );
        let (policy, layers, _) = layers_with("/w", "{}");
        let a = host(&policy, &layers, "registry.npmjs.org");
        assert_eq!(
            (a.allowed, a.fix.as_deref()),
            (false, Some("--net allow=registry.npmjs.org"))
        );
    }

    #[test]
    fn a_variable_names_the_rule_that_drops_it() {
        let (policy, layers, _) = layers_with("/w", r#"{"environment": {"drop": ["MY_*"]}}"#);
        let none = |_: &str, _: &std::ffi::OsStr| false;
        let v = |name: &str| variable(&policy, &layers, name, Some("x".as_ref()), &none);
        assert_eq!(v("GH_TOKEN").fix.as_deref(), Some("--allow-env GH_TOKEN"));
        assert_eq!(v("MY_VAR").source.unwrap().entry, "MY_*");
        assert!(!v("LD_PRELOAD").allowed);
        assert!(v("HOME").allowed);
    }

    #[test]
    fn the_line_of_an_entry_is_where_it_is_written() {
        let text = "{\n  \"network\": {\n    \"allow\": [\"a.example\", \"b.example\"]\n  }\n}\n";
        assert_eq!(line_of(text, "b.example"), Some(3));
        assert_eq!(line_of(text, "c.example"), None);
    }
}
