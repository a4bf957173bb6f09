//! What the sandbox refused, as one kind of record from every place that refuses: the
//! guard's mediator (names made and writing opens, unix sockets with Landlock alone), the
//! proxy and the name lookups, the clipboard filter and the environment filter. Each
//! refusal names its kind, its subject (a path, a host, a variable), why, and the option
//! that would allow it. The tally of a session gives the end-of-session summary and the
//! session log's complete list. Pure: the records arrive through a `Sink`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::report::Cause;
use super::verdict::PathVerdict;

/// What kind of thing was refused; the order is the summary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A name made or a file opened for writing outside the writable places.
    Write,
    /// A name or write inside a writable place that would run code outside (hooks, git
    /// config's command keys, rc files).
    Protected,
    /// A denied (hidden) path written, or read where Landlock's audit records show it.
    Hidden,
    /// A read outside the readable places (Landlock's audit records).
    Read,
    /// A host unix socket not granted (Landlock alone, where the guard answers connects).
    Socket,
    /// A connection through the proxy.
    Host,
    /// A name looked up inside the sandbox (it has no network of its own).
    Lookup,
    /// An inherited variable kept from the program.
    Variable,
    /// The terminal's clipboard (OSC 52).
    Clipboard,
    /// A request to the session's ssh agent: a key, a host or a signature not allowed.
    Agent,
    /// A credential's placeholder sent where the credential does not go (`policy::inject`).
    Credential,
}

impl Kind {
    /// The kind's name in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Write => "write",
            Kind::Protected => "protected",
            Kind::Hidden => "hidden",
            Kind::Read => "read",
            Kind::Socket => "socket",
            Kind::Host => "host",
            Kind::Lookup => "lookup",
            Kind::Variable => "variable",
            Kind::Clipboard => "clipboard",
            Kind::Agent => "agent",
            Kind::Credential => "credential",
        }
    }

    /// The summary's heading for the kind.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Write => "writes outside the writable places",
            Kind::Protected => "protected places written",
            Kind::Hidden => "hidden paths",
            Kind::Read => "reads outside the readable places",
            Kind::Socket => "host sockets",
            Kind::Host => "connections",
            Kind::Lookup => "names looked up",
            Kind::Variable => "variables kept out",
            Kind::Clipboard => "clipboard requests",
            Kind::Agent => "ssh agent requests",
            Kind::Credential => "credentials not added",
        }
    }
}

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub kind: Kind,
    /// The path, `host:port`, name or variable refused.
    pub subject: String,
    /// Why, in a few words.
    pub why: String,
    /// The option or config key that would allow it, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Where refusals go as they happen (the session's journal, `session::journal`).
#[derive(Clone)]
pub struct Sink(Arc<dyn Fn(Refusal) + Send + Sync>);

impl Sink {
    pub fn new(record: impl Fn(Refusal) + Send + Sync + 'static) -> Sink {
        Sink(Arc::new(record))
    }

    pub fn record(&self, r: Refusal) {
        (self.0)(r);
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

/// `path` with the home directory spelled `~`, as the user types it.
pub fn tilde(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// Quote a value for a shell command line, only when it needs it.
pub fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-~=,:@+*".contains(&b));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// What a session's refusals are judged against: its policy, the user's home (paths are
/// named from it, `~/…`), and the directories programs run from (the `PATH`), which no
/// suggested grant may open. Owned: the journal's readers take it to their threads.
pub struct Grounds {
    pub policy: super::Policy,
    pub home: PathBuf,
    pub runs_from: Vec<PathBuf>,
}

impl Grounds {
    /// What the guard reported (`cause`, `path`, `about`), judged by where it points
    /// (`verdict::of_path`, as `why` judges it): a denied path is hidden, a protected
    /// refusal is protected, anything else is a write outside the writable places, allowed
    /// by `--write` of its directory — unless that would open the home or a directory
    /// programs run from: then why none is suggested.
    pub fn of_write(&self, cause: Cause, path: &Path, about: &str) -> Refusal {
        let (policy, home) = (&self.policy, self.home.as_path());
        match cause {
            Cause::Server => return of_server(about),
            Cause::Connect => return of_connect(about, &policy.network),
            Cause::Socket => return of_socket(path, home),
            Cause::RootOnly => return of_root_only(path, home),
            Cause::Unreadable => return self.of_read(path),
            Cause::Outside | Cause::Protected | Cause::ReadOnly | Cause::Held => {}
        }
        // The guard judged git's own places itself (`Cause::Protected`).
        let verdict = super::verdict::of_path(policy, path, &|_| None);
        if let PathVerdict::Denied(denied) = &verdict {
            return of_denied(path, &tilde(&denied.path, home));
        }
        if cause == Cause::Held {
            return of_held(path);
        }
        if cause == Cause::Protected || matches!(verdict, PathVerdict::Protected(_)) {
            return of_protected(path, about);
        }
        if ["/proc", "/sys"].iter().any(|k| path.starts_with(k)) {
            return of_kernel_file(path);
        }
        self.of_outside(path)
    }

    /// A write outside the writable places: allowed by `--write` of its directory, unless
    /// that would open the home or a directory programs run from.
    fn of_outside(&self, path: &Path) -> Refusal {
        let home = self.home.as_path();
        let dir = path.parent().unwrap_or(path);
        let grant = format!("--write {}", shell_word(&tilde(dir, home)));
        let opens = if home.starts_with(dir) {
            Some("the whole home, with what runs at your next login".to_string())
        } else {
            self.runs_from
                .iter()
                .find(|p| p.is_absolute() && p.starts_with(dir))
                .map(|p| format!("{}, which programs run from (PATH)", tilde(p, home)))
        };
        Refusal {
            kind: Kind::Write,
            subject: path.display().to_string(),
            why: "outside the writable places".into(),
            fix: Some(match opens {
                Some(opens) => format!(
                    "none suggested: {grant} would open {opens}; grant a directory deeper inside"
                ),
                None => grant,
            }),
        }
    }

    /// What Landlock refused (`blockers`, from its audit records) at `path`: a denied path
    /// is hidden; a read elsewhere is outside the readable places (`--read`); a write is
    /// judged as the guard's are. `None` for what is not about files.
    pub fn of_landlock(&self, reads: bool, blockers: &[String], path: &Path) -> Option<Refusal> {
        if !blockers.iter().all(|b| b.starts_with("fs.")) {
            return None;
        }
        Some(match reads {
            true => self.of_read(path),
            false => self.of_write(Cause::Outside, path, ""),
        })
    }

    /// A read the program's rules refuse at `path` (Landlock's audit, or the guard for
    /// root's program): a denied path is hidden; elsewhere it is outside the readable
    /// places.
    fn of_read(&self, path: &Path) -> Refusal {
        let hidden = self.of_write(Cause::Outside, path, "");
        if hidden.kind == Kind::Hidden {
            return hidden;
        }
        let dir = path.parent().unwrap_or(path);
        Refusal {
            kind: Kind::Read,
            subject: path.display().to_string(),
            why: "outside the readable places (Landlock)".into(),
            fix: Some(format!("--read {}", shell_word(&tilde(dir, &self.home)))),
        }
    }
}

/// A denied path (`denied`, as the user names it), written or read: hidden.
fn of_denied(path: &Path, denied: &str) -> Refusal {
    Refusal {
        kind: Kind::Hidden,
        subject: path.display().to_string(),
        why: "a denied path".into(),
        fix: Some(format!(
            "\"filesystem\": {{\"allow_denied\": [\"{denied}\"]}} in a config file"
        )),
    }
}

/// A protected path written: a git config with the keys the guard reported (`about`) names
/// each with its option; anything else only the user changes.
fn of_protected(path: &Path, about: &str) -> Refusal {
    let git_config = path.file_name().is_some_and(|n| n == "config")
        && path
            .parent()
            .is_some_and(|p| p.file_name().is_some_and(|n| n == ".git"));
    if git_config && !about.is_empty() {
        return of_git_config(path, about);
    }
    Refusal {
        kind: Kind::Protected,
        subject: path.display().to_string(),
        why: "protected: it would run code outside the sandbox, or loosen it".into(),
        fix: Some(match git_config {
            true => "--allow-git-config KEY (the key refused, as said when it was)".into(),
            false => "none: only you change it, outside the sandbox".into(),
        }),
    }
}

/// A host unix socket at `path`, not granted (Landlock alone, `mediator::answer`).
fn of_socket(path: &Path, home: &Path) -> Refusal {
    Refusal {
        kind: Kind::Socket,
        subject: path.display().to_string(),
        why: "host sockets are closed unless granted (Landlock alone grants none)".into(),
        fix: Some(format!(
            "--backend bwrap --allow-socket {}",
            shell_word(&tilde(path, home))
        )),
    }
}

/// A file only host root may read, opened by root's program where it stays host root
/// (`mediator::rootreads`): a read grant is consent; another process's is never the
/// program's.
fn of_root_only(path: &Path, home: &Path) -> Refusal {
    let fix = match path.starts_with("/proc") {
        true => "none: another process's, not the session's".into(),
        false => format!("--read {}", shell_word(&tilde(path, home))),
    };
    Refusal {
        kind: Kind::Hidden,
        subject: path.display().to_string(),
        why: "only root may read it: root's program reads what any user may, and what the policy grants".into(),
        fix: Some(fix),
    }
}

/// A directory the sandbox holds in place (bwrap's mounts), removed or renamed: no grant
/// inside the sandbox moves it; outside, it is the user's to remove.
fn of_held(path: &Path) -> Refusal {
    Refusal {
        kind: Kind::Protected,
        subject: path.display().to_string(),
        why: "held in place for the session: it is, or leads to, what the sandbox protects (a \
            repository's hooks and config, rc files) or hides"
            .into(),
        fix: Some("none: only you change it, outside the sandbox".into()),
    }
}

/// A TCP server on `address`, not loopback (Landlock alone, `mediator::answer`).
fn of_server(address: &str) -> Refusal {
    Refusal {
        kind: Kind::Socket,
        subject: format!("a TCP server on {address}"),
        why: "Landlock alone: the program's servers listen on the host's loopback only".into(),
        fix: Some("bind 127.0.0.1 or 0.0.0.0 (which listens there), or --backend bwrap (a network of the sandbox's own)".into()),
    }
}

/// A connection to `address` the program made itself, not through the proxy (refused by
/// its TCP rules with Landlock alone, `mediator::connecting`; by bwrap's network, which has
/// no route out, `mediator::create`): to the host's loopback, the service there is allowed
/// by name and port; elsewhere only the proxy leads out.
fn of_connect(address: &str, network: &super::Network) -> Refusal {
    let fix = match address.parse::<std::net::SocketAddr>() {
        Ok(to) if to.ip().is_loopback() => format!("--net allow=localhost:{}", to.port()),
        Ok(to) if to.port() == 22 => {
            "--ssh-key KEY@HOST and --net allow=HOST:22 (ssh through sbx-shell's proxy)".into()
        }
        _ => "--net allow=HOST:PORT for a client that uses HTTPS_PROXY; --net full lets every connection through".into(),
    };
    let why = match network {
        super::Network::Allow(_) => {
            "connections go through sbx-shell's proxy (HTTPS_PROXY), not straight to an address"
        }
        _ => "the session has no network",
    };
    Refusal {
        kind: Kind::Host,
        subject: address.to_string(),
        why: why.into(),
        fix: Some(fix),
    }
}

/// A write to the kernel's own files: a user namespace's maps (`unshare -U`), a process's
/// or the kernel's settings. No grant reaches them, and none would help.
fn of_kernel_file(path: &Path) -> Refusal {
    Refusal {
        kind: Kind::Write,
        subject: path.display().to_string(),
        why: "the kernel's own files (/proc, /sys) cannot be written in the sandbox".into(),
        fix: Some("none: run it outside sbx-shell".into()),
    }
}

/// A git config refused for `keys` (`protect::names::Names::config_rename`): each named,
/// with the option that allows it (a key that names no setting, none).
fn of_git_config(path: &Path, keys: &str) -> Refusal {
    let allow: Vec<String> = keys
        .split(", ")
        .filter(|k| !k.is_empty() && !k.contains(' '))
        .map(|k| format!("--allow-git-config {}", shell_word(k)))
        .collect();
    Refusal {
        kind: Kind::Protected,
        subject: format!("{} ({keys})", path.display()),
        why: "a git config with keys that ordinary git work does not write: they can make the host's git run code".into(),
        fix: Some(match allow.is_empty() {
            true => "none: only you change it, outside the sandbox".into(),
            false => allow.join(" "),
        }),
    }
}

/// An inherited variable the environment filter dropped, and why — by its name only: the
/// program reads its refusals, and a value is never handed to it (a socket's path is
/// named as `"$NAME"`, as the user types it).
pub fn of_variable(name: &str, dropped: super::model::Dropped) -> Refusal {
    use super::model::Dropped;
    let fix = match dropped {
        Dropped::Always => None,
        Dropped::Configured => Some(format!("remove {name} from \"environment\": {{\"drop\"}}")),
        Dropped::SecretName | Dropped::SecretValue(_) => Some(format!("--allow-env {name}")),
        Dropped::Socket => Some(format!("--allow-socket \"${name}\"")),
    };
    Refusal {
        kind: Kind::Variable,
        subject: name.to_string(),
        why: dropped.why(),
        fix,
    }
}

/// Clipboard requests the relay refused under the policy's `clipboard`.
pub fn of_clipboard(policy: super::config::Clipboard) -> Refusal {
    let (subject, fix) = match policy {
        super::config::Clipboard::None => ("set or read", "--clipboard write"),
        _ => ("read", "--clipboard read-write"),
    };
    Refusal {
        kind: Kind::Clipboard,
        subject: subject.into(),
        why: format!("clipboard: {}", policy.name()),
        fix: Some(fix.into()),
    }
}

/// How many distinct subjects a kind keeps, and how many the summary shows.
const KEPT: usize = 1000;
const SHOWN: usize = 3;

/// One kind's refusals in a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindTally {
    pub count: u64,
    /// Each subject and how often (at most `KEPT` subjects).
    pub subjects: BTreeMap<String, u64>,
    /// The options that would allow them, each once, in the order first seen.
    pub fixes: Vec<String>,
}

/// A session's refusals by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally(pub BTreeMap<Kind, KindTally>);

impl Tally {
    /// Count `times` refusals like `r`; whether its subject is new for its kind.
    pub fn add(&mut self, r: &Refusal, times: u64) -> bool {
        let k = self.0.entry(r.kind).or_default();
        k.count += times;
        let new = !k.subjects.contains_key(&r.subject);
        if new && k.subjects.len() >= KEPT {
            return false;
        }
        *k.subjects.entry(r.subject.clone()).or_default() += times;
        if let Some(fix) = &r.fix {
            if !k.fixes.contains(fix) {
                k.fixes.push(fix.clone());
            }
        }
        new
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many requests of the program were refused (the variables kept from it aside).
    pub fn refused(&self) -> u64 {
        self.asked().map(|(_, k)| k.count).sum()
    }

    /// The kinds the program asked for and was refused: all but the variables kept from
    /// it, which it never asked for (they are in the journal and the session log).
    fn asked(&self) -> impl Iterator<Item = (&Kind, &KindTally)> {
        self.0.iter().filter(|(kind, _)| **kind != Kind::Variable)
    }

    /// The end-of-session summary of what the program asked for and was refused: a
    /// heading line and one line per kind, each with its count, its most frequent subjects
    /// and the options that allow them; nothing when nothing was refused.
    pub fn summary(&self, home: &Path) -> Vec<String> {
        let total = self.refused();
        if total == 0 {
            return Vec::new();
        }
        let mut lines = vec![format!(
            "sbx-shell: the sandbox refused {} (the option after → allows it; sbx-shell log -n 1 lists every one):",
            plural(total, "request")
        )];
        for (kind, k) in self.asked() {
            let top = by_count(k);
            let shown: Vec<String> = top
                .iter()
                .take(SHOWN)
                .map(|(s, n)| counted(shown_subject(*kind, s, home), *n))
                .collect();
            let more = if top.len() > SHOWN { ", …" } else { "" };
            let fixes: Vec<String> = k.fixes.iter().take(SHOWN).map(|f| printable(f)).collect();
            let fix = if fixes.is_empty() {
                String::new()
            } else {
                format!(" → {}", fixes.join("; "))
            };
            lines.push(format!(
                "  {}: {} ({}{more}){fix}",
                kind.title(),
                k.count,
                shown.join(", ")
            ));
        }
        lines
    }

    /// Every refusal kept, a line per kind: all its subjects, most frequent first, and the
    /// options that allow them (`sbx-shell log`).
    pub fn detail(&self, home: &Path) -> Vec<String> {
        self.0
            .iter()
            .map(|(kind, k)| {
                let subjects: Vec<String> = by_count(k)
                    .into_iter()
                    .map(|(s, n)| counted(shown_subject(*kind, s, home), n))
                    .collect();
                let fix = match k.fixes.is_empty() {
                    true => String::new(),
                    false => format!(" → {}", printable(&k.fixes.join("; "))),
                };
                format!(
                    "  {}: {} ({}){fix}",
                    kind.title(),
                    k.count,
                    subjects.join(", ")
                )
            })
            .collect()
    }

    /// The summary in one line (`--quiet`).
    pub fn one_line(&self) -> Option<String> {
        let total = self.refused();
        if total == 0 {
            return None;
        }
        let kinds: Vec<String> = self
            .asked()
            .map(|(kind, k)| format!("{} {}", kind.name(), k.count))
            .collect();
        Some(format!(
            "sbx-shell: the sandbox refused {} ({}); sbx-shell log -n 1 names each with its option",
            plural(total, "request"),
            kinds.join(", ")
        ))
    }
}

/// A kind's subjects, most frequent first.
fn by_count(k: &KindTally) -> Vec<(&str, u64)> {
    let mut top: Vec<(&str, u64)> = k.subjects.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    top
}

fn counted(subject: String, n: u64) -> String {
    match n {
        1 => subject,
        n => format!("{subject} ×{n}"),
    }
}

/// A subject as the user reads it: a path under the home spelled `~`, and every control
/// character escaped — the program chose the name, and it is shown on the user's own
/// terminal, outside the sandbox.
pub fn shown_subject(kind: Kind, subject: &str, home: &Path) -> String {
    let shown = match kind {
        Kind::Write | Kind::Protected | Kind::Hidden | Kind::Read | Kind::Socket => {
            tilde(Path::new(subject), home)
        }
        _ => subject.to_string(),
    };
    printable(&shown)
}

/// `text` with each control character as its escape (`\u{1b}`, `\n`).
pub fn printable(text: &str) -> String {
    match text.chars().any(char::is_control) {
        false => text.to_string(),
        true => text
            .chars()
            .map(|c| match c.is_control() {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            })
            .collect(),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;
    use std::path::PathBuf;

    fn home() -> &'static Path {
        Path::new("/home/u")
    }

    fn grounds(policy: &crate::policy::Policy, runs_from: &[PathBuf]) -> Grounds {
        Grounds {
            policy: policy.clone(),
            home: home().to_path_buf(),
            runs_from: runs_from.to_vec(),
        }
    }

    #[test]
    fn no_grant_is_suggested_that_opens_the_home_or_where_programs_run_from() {
        let policy = policy_with("/w", "{}");
        let runs_from = [
            PathBuf::from("/home/u/.cargo/bin"),
            PathBuf::from("/usr/local/bin"),
            PathBuf::from("relative"),
        ];
        let fix = |p: &str| {
            grounds(&policy, &runs_from)
                .of_write(Cause::ReadOnly, Path::new(p), "")
                .fix
                .unwrap()
        };
        // A build's cache: its own directory, which holds no programs.
        assert_eq!(
            fix("/home/u/.cargo/registry/index/x"),
            "--write ~/.cargo/registry/index"
        );
        assert_eq!(fix("/home/u/.cache/pip/y"), "--write ~/.cache/pip");
        for (path, opens) in [
            (
                "/home/u/.cargo/.package-cache",
                "~/.cargo/bin, which programs run from",
            ),
            ("/home/u/.notes-at-the-top", "the whole home"),
            ("/home/x", "the whole home"),
            ("/usr/local/lib", "/usr/local/bin"),
            ("/usr/local/bin/tool", "/usr/local/bin"),
        ] {
            let fix = fix(path);
            assert!(fix.starts_with("none suggested: --write "), "{path}: {fix}");
            assert!(fix.contains(opens), "{path}: {fix}");
        }
    }

    #[test]
    fn a_write_is_judged_by_where_it_points() {
        let policy = policy_with("/w", "{}");
        let w = grounds(&policy, &[]).of_write(Cause::ReadOnly, Path::new("/home/u/notes/a"), "");
        assert_eq!(w.kind, Kind::Write);
        assert_eq!(w.fix.as_deref(), Some("--write ~/notes"));
        let h = grounds(&policy, &[]).of_write(Cause::ReadOnly, Path::new("/home/u/.ssh/x"), "");
        assert_eq!(h.kind, Kind::Hidden);
        assert!(h.fix.unwrap().contains("\"allow_denied\": [\"~/.ssh\"]"));
        let p = grounds(&policy, &[]).of_write(
            Cause::Protected,
            Path::new("/w/.git/hooks/pre-commit"),
            "",
        );
        assert_eq!(p.kind, Kind::Protected);
        assert!(p.fix.unwrap().starts_with("none: "));
        let c = grounds(&policy, &[]).of_write(Cause::Protected, Path::new("/w/.git/config"), "");
        assert!(c.fix.unwrap().starts_with("--allow-git-config"));
        // With the keys the guard reported: each named, with its option.
        let keys = grounds(&policy, &[]).of_write(
            Cause::Protected,
            Path::new("/w/.git/config"),
            "core.fsmonitor, alias.x",
        );
        assert_eq!(keys.subject, "/w/.git/config (core.fsmonitor, alias.x)");
        assert_eq!(
            keys.fix.as_deref(),
            Some("--allow-git-config core.fsmonitor --allow-git-config alias.x")
        );
        let uid_map =
            grounds(&policy, &[]).of_write(Cause::Outside, Path::new("/proc/42/uid_map"), "");
        assert_eq!(
            uid_map.fix.as_deref(),
            Some("none: run it outside sbx-shell")
        );
        let s = grounds(&policy, &[]).of_write(Cause::Socket, Path::new("/run/user/0/bus"), "");
        assert_eq!(
            (s.kind, s.fix.as_deref()),
            (
                Kind::Socket,
                Some("--backend bwrap --allow-socket /run/user/0/bus")
            )
        );
        let connect = |to: &str| {
            let r = grounds(&policy, &[]).of_write(Cause::Connect, Path::new("/"), to);
            (r.kind, r.subject, r.fix.unwrap_or_default())
        };
        let (kind, subject, fix) = connect("127.0.0.1:5432");
        assert_eq!((kind, &subject[..]), (Kind::Host, "127.0.0.1:5432"));
        assert_eq!(fix, "--net allow=localhost:5432");
        assert_eq!(connect("[::1]:6379").2, "--net allow=localhost:6379");
        assert!(connect("10.0.0.5:22").2.starts_with("--ssh-key KEY@HOST"));
        assert!(connect("10.0.0.5:5432").2.contains("--net full"));
    }

    #[test]
    fn a_dropped_variable_names_the_option_that_passes_it() {
        use crate::policy::model::Dropped;
        let r = of_variable("GH_TOKEN", Dropped::SecretName);
        assert_eq!(r.fix.as_deref(), Some("--allow-env GH_TOKEN"));
        assert_eq!(of_variable("LD_PRELOAD", Dropped::Always).fix, None);
        let s = of_variable("SSH_AUTH_SOCK", Dropped::Socket);
        assert_eq!(s.fix.as_deref(), Some("--allow-socket \"$SSH_AUTH_SOCK\""));
    }

    #[test]
    fn words_are_quoted_only_when_a_shell_would_change_them() {
        assert_eq!(shell_word("~/notes"), "~/notes");
        assert_eq!(shell_word("/a b"), "'/a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("*.example.org"), "*.example.org");
    }

    fn refusal(kind: Kind, subject: &str, fix: Option<&str>) -> Refusal {
        Refusal {
            kind,
            subject: subject.into(),
            why: String::new(),
            fix: fix.map(Into::into),
        }
    }

    #[test]
    fn the_summary_counts_each_kind_with_its_top_subjects_and_options() {
        let mut t = Tally::default();
        assert!(t.summary(home()).is_empty());
        assert_eq!(t.one_line(), None);
        for _ in 0..3 {
            t.add(&refusal(Kind::Write, "/home/u/f", Some("--write ~")), 1);
        }
        assert!(!t.add(&refusal(Kind::Write, "/home/u/f", Some("--write ~")), 1));
        assert!(t.add(&refusal(Kind::Write, "/etc/x", Some("--write /etc")), 1));
        t.add(
            &refusal(
                Kind::Host,
                "example.com:443",
                Some("--net allow=example.com"),
            ),
            1,
        );
        let lines = t.summary(home());
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("refused 6 requests"));
        assert_eq!(
            lines[1],
            "  writes outside the writable places: 5 (~/f ×4, /etc/x) → --write ~; --write /etc"
        );
        assert_eq!(
            lines[2],
            "  connections: 1 (example.com:443) → --net allow=example.com"
        );
        assert_eq!(
            t.one_line().unwrap(),
            "sbx-shell: the sandbox refused 6 requests (write 5, host 1); sbx-shell log -n 1 names each with its option"
        );
    }

    #[test]
    fn a_subject_the_program_named_cannot_drive_the_terminal() {
        let mut t = Tally::default();
        let name = "/etc/\u{1b}]0;owned\u{7}x";
        t.add(
            &refusal(Kind::Write, name, Some(&format!("--write {name}"))),
            1,
        );
        let text = t.summary(home()).join("\n") + &t.detail(home()).join("\n");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains(r"/etc/\u{1b}]0;owned\u{7}x"), "{text}");
    }

    #[test]
    fn what_landlock_refused_is_judged_by_where_it_points() {
        let policy = policy_with("/w", "{}");
        let read = vec!["fs.read_file".to_string()];
        let at = |p: &str, reads| grounds(&policy, &[]).of_landlock(reads, &read, Path::new(p));
        assert_eq!(
            at("/home/u/.aws/credentials", true).unwrap().kind,
            Kind::Hidden
        );
        let r = at("/srv/data/x", true).unwrap();
        assert_eq!(
            (r.kind, r.fix.as_deref()),
            (Kind::Read, Some("--read /srv/data"))
        );
        assert_eq!(at("/srv/data/x", false).unwrap().kind, Kind::Write);
        let net = vec!["net.connect_tcp".to_string()];
        assert_eq!(
            grounds(&policy, &[]).of_landlock(false, &net, Path::new("/x")),
            None
        );
    }

    #[test]
    fn variables_kept_out_are_not_in_the_summary_of_what_was_asked() {
        let mut t = Tally::default();
        t.add(
            &refusal(Kind::Variable, "GH_TOKEN", Some("--allow-env GH_TOKEN")),
            1,
        );
        assert!(t.summary(home()).is_empty());
        assert_eq!(t.one_line(), None);
        assert_eq!(
            t.detail(home()),
            ["  variables kept out: 1 (GH_TOKEN) → --allow-env GH_TOKEN"]
        );
    }

    #[test]
    fn a_kind_keeps_a_bounded_number_of_subjects_and_counts_them_all() {
        let mut t = Tally::default();
        for i in 0..(KEPT + 10) {
            t.add(&refusal(Kind::Lookup, &format!("h{i}"), None), 1);
        }
        let k = &t.0[&Kind::Lookup];
        assert_eq!((k.count, k.subjects.len()), ((KEPT + 10) as u64, KEPT));
    }
}
