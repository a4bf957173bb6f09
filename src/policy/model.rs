//! The resolved policy as plain data: what every backend reads (`Policy` and its parts),
//! the defaults it starts from, and the errors resolving it can end in. Pure.

use super::container::ContainerSettings;
use crate::policy::config::{BackendChoice, Config, FsMode, OpenFiles};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Credentials and private data: neither readable nor writable unless a layer takes an
/// entry out with `allow_denied`. Relative to the home directory.
pub const DEFAULT_DENIED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".config/gh",
    ".password-store",
    ".vault-token",
    // shell and REPL history
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    // browser profiles
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".var/app/org.mozilla.firefox",
    // macOS
    "Library/Keychains",
    "Library/Cookies",
    "Library/Mail",
    "Library/Messages",
    "Library/Safari",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
];

/// The macOS keychain directory, denied unless `keychain_access` is on.
pub const KEYCHAINS: &str = "~/Library/Keychains";

/// Readable, never writable, renamable or removable. `~/…` is in the home directory, the
/// others inside the workspace.
pub const DEFAULT_PROTECTED: &[&str] = &[
    // code that git runs, and where it is configured
    ".git/hooks",
    ".git/config",
    "~/.gitconfig",
    "~/.config/git",
    // shell startup files: code every later shell runs
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.profile",
    "~/.zshrc",
    "~/.zshenv",
    "~/.zprofile",
    "~/.zlogin",
    "~/.zlogout",
    "~/.config/fish",
    "~/.inputrc",
    // agent and editor configuration that grants permissions or runs commands
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/commands",
    ".mcp.json",
    ".vscode",
    ".idea",
    // sbx-shell's own configuration
    "~/.config/sbx-shell",
];

/// Environment variables never handed to the program: they inject code into whatever runs
/// next (the dynamic loader, shells, language runtimes). `*` ends a prefix pattern.
pub const ALWAYS_DROPPED: &[&str] = &[
    "LD_*",
    "DYLD_*",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "NODE_OPTIONS",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PERL5OPT",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_PARAMETERS",
];

/// Substrings and suffixes of names that look secret: dropped unless allowed by name.
pub const SECRET_SUBSTRINGS: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

pub const SECRET_SUFFIXES: &[&str] = &["_KEY", "_APIKEY", "_PAT"];

/// Seconds between SIGTERM at the timeout and SIGKILL, unless configured.
pub const DEFAULT_TIMEOUT_GRACE: u64 = 5;

/// The private /tmp's and /dev/shm's size when the policy names none: a few GiB, well under
/// what tmpfs takes by default (half the RAM, each).
pub const DEFAULT_TMP_MIB: u64 = 2048;

/// One named layer of configuration.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Where it came from, for messages: "built-in defaults", a path, "profile claude", "flags".
    pub origin: String,
    pub config: Config,
}

/// What the resolver asks of the filesystem.
pub trait PathResolver {
    /// The path with every symlink resolved, if it exists.
    fn real_path(&self, path: &Path) -> Option<PathBuf>;
}

/// Where relative and `~` paths point.
#[derive(Debug, Clone)]
pub struct PathContext {
    pub home: PathBuf,
    pub workspace: PathBuf,
    /// sbx-shell's state directory (`sys::files::state_dir`): the private homes live there.
    pub state: PathBuf,
    /// sbx-shell's configuration directory (`inputs::config_dir`): config and profiles.
    pub config: PathBuf,
    /// The variables a socket grant may begin with (`$SSH_AUTH_SOCK`): sbx-shell's own.
    pub vars: BTreeMap<String, String>,
    /// The user's ssh client files (`host::ssh`): the keys `config` names are denied; with
    /// an ssh policy, `config` and `known_hosts` are revealed.
    pub ssh_client: crate::policy::ssh::ClientFiles,
}

/// A path as written (made absolute) and, when different, as the kernel sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ResolvedPath {
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real: Option<PathBuf>,
}

impl Filesystem {
    /// The trees the program can write: the workspace (workspace-write), the writable
    /// paths, and `/` when unrestricted; each as the kernel spells it, sorted, once.
    pub fn writable_roots(&self) -> Vec<&Path> {
        let mut roots: Vec<&Path> = self.writable.iter().map(ResolvedPath::real).collect();
        match self.mode {
            FsMode::WorkspaceWrite => roots.push(self.workspace.real()),
            FsMode::Unrestricted => roots.push(Path::new("/")),
            FsMode::ReadOnly => {}
        }
        roots.sort();
        roots.dedup();
        roots
    }
}

impl ResolvedPath {
    /// The spelling the kernel sees.
    pub fn real(&self) -> &Path {
        self.real.as_deref().unwrap_or(&self.path)
    }

    /// Both spellings when they differ, the written one first.
    pub fn spellings(&self) -> Vec<&Path> {
        let mut all = vec![self.path.as_path()];
        all.extend(self.real.as_deref());
        all
    }
}

/// The writable paths inside the home directory that do not exist yet: an agent's state
/// directory on its first run (`~/.gemini`, `~/.codex` …). sbx-shell creates them, 0700, before
/// the sandbox starts — a sandbox can only bind what exists, and a program that cannot create
/// its state directory crashes. Paths outside the home are left alone.
pub fn state_to_create(fs: &Filesystem, exists: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    fs.writable
        .iter()
        .map(ResolvedPath::real)
        .filter(|p| p.starts_with(fs.home.real()) && *p != fs.home.real() && !exists(p))
        .map(Path::to_path_buf)
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The profile the policy was resolved with.
    pub profile: String,
    /// The backend asked for (`select` turns it into the one that runs).
    pub backend: BackendChoice,
    /// Layers that must run, or the run is refused.
    pub require: Vec<crate::policy::config::SandboxLayer>,
    /// What a container backend runs, and how (`sandbox::container`).
    pub container: ContainerSettings,
    pub filesystem: Filesystem,
    pub network: Network,
    pub nested_pty: bool,
    pub keychain_access: bool,
    pub gui: bool,
    /// What the relay lets through of the terminal's clipboard requests (OSC 52).
    pub clipboard: crate::policy::config::Clipboard,
    pub limits: Limits,
    pub environment: Environment,
    /// git config keys the program may write besides those ordinary git work writes
    /// (`gitconfig::ALLOWED`), as patterns (`gitconfig::matches`).
    pub git_config_allow: BTreeSet<String>,
    /// Arguments put after a directly run program's name, by its file name (the last layer
    /// that names a program wins).
    pub program_args: BTreeMap<String, Vec<String>>,
    /// What a session keeps, in sbx-shell's state directory (`privatehome`); its directory
    /// is among the writable paths. `None` when turned off.
    pub private_home: Option<crate::policy::home::PrivateHome>,
    /// The keys the session's ssh agent passes, when any is named (`policy::ssh`).
    pub ssh: Option<crate::policy::ssh::Ssh>,
    /// The credentials the proxy adds to requests to their hosts (`policy::inject`).
    pub injected: Vec<Injected>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filesystem {
    pub mode: FsMode,
    pub home: ResolvedPath,
    pub workspace: ResolvedPath,
    pub writable: Vec<ResolvedPath>,
    pub readable: Vec<ResolvedPath>,
    pub denied: Vec<ResolvedPath>,
    pub protected: Vec<ResolvedPath>,
    /// Host unix sockets the program may connect to (each, or every one in a directory).
    pub sockets: Vec<ResolvedPath>,
    /// The denied paths found on this host rather than named (the keys the user's ssh
    /// config names): one that is gone, or replaced, by the time the sandbox starts (a
    /// lock file, a backup being rewritten) is no reason to stop; the rest of `denied` is
    /// checked against what sbx-shell saw.
    pub found_denied: Vec<PathBuf>,
    /// What `allow_denied` let the program at: for root's program as another id
    /// (`sandbox::rootas`), granted like a read grant, so that a root-only file is read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<ResolvedPath>,
    /// The session's own sockets the program may connect to (its ssh agent): set for the
    /// session by sbx-shell, not by a layer; reachable under every backend (with Landlock
    /// alone, the guard connects them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub own_sockets: Vec<PathBuf>,
    /// Directories the session made for the program to read (its credentials' certificates,
    /// `netproxy::inject`): set by sbx-shell, not by a layer; among the readable paths, and
    /// mounted read-only in a container.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub own_dirs: Vec<PathBuf>,
    /// Whether the session's private `/tmp` (bwrap's; alone its temporary directory) may
    /// be written: not for the server end of a file copy (`Launch::is_file_transfer`),
    /// whose writes there would vanish with the session — they fail instead.
    pub private_tmp_writable: bool,
    /// Paths inside denied ones that stay readable (the ssh client's `known_hosts` and
    /// `config`, `policy::ssh`): set for the session by sbx-shell, not by a layer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revealed: Vec<ResolvedPath>,
    /// Under bwrap: paths shown as sbx-shell's copy, read-only (`How::View`): a denied
    /// directory as the copy of its revealed files; the system's bundle of trusted roots
    /// (a file) as the copy with the session's authority added (`netproxy::inject`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<(PathBuf, PathBuf)>,
    /// Files copied once when missing (`config::SeedEntry`), each inside a writable path.
    pub seed: Vec<Seed>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Seed {
    pub path: ResolvedPath,
    pub from: ResolvedPath,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode", content = "allow")]
pub enum Network {
    None,
    Full,
    Allow(Vec<DomainRule>),
}

/// One allowed destination: a host name (or `*.` wildcard) or an IP literal, with an
/// optional port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DomainRule {
    pub host: String,
    pub wildcard: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl DomainRule {
    /// The port of a service on this machine's loopback that the rule names
    /// (`localhost:5432`, `127.0.0.1:5432`, `[::1]:5432`): the program reaches it at that
    /// address as bare, that port only.
    pub fn loopback_port(&self) -> Option<u16> {
        let loopback = self.host == "localhost"
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        self.port.filter(|_| loopback && !self.wildcard)
    }
}

impl Network {
    /// The host's loopback services the allow-list names (`DomainRule::loopback_port`).
    pub fn loopback_ports(&self) -> Vec<u16> {
        let Network::Allow(rules) = self else {
            return Vec::new();
        };
        let ports: std::collections::BTreeSet<u16> =
            rules.iter().filter_map(DomainRule::loopback_port).collect();
        ports.into_iter().collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub open_files: OpenFiles,
    pub cpu_seconds: Option<u64>,
    pub memory_mib: Option<u64>,
    /// The private /tmp's and /dev/shm's size (bwrap), MiB.
    pub tmp_mib: u64,
    /// The session cgroup's pids.max and memory.max (MiB).
    pub session_processes: Option<u64>,
    pub session_memory_mib: Option<u64>,
    pub processes: Option<u64>,
    pub core_dumps: bool,
    pub timeout_seconds: Option<u64>,
    pub timeout_grace_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Environment {
    /// Secret-looking names passed on anyway.
    pub allow: BTreeSet<String>,
    /// Names or `PREFIX*` patterns dropped, beyond the always-dropped ones.
    pub drop: BTreeSet<String>,
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error(
        "write {path}: it leads through the symlink {link}, inside a writable tree, where a \
        sandboxed program could have planted it\nHint: grant the directory it leads to by its \
        own path (--write {real}) if that is what you mean, or replace the symlink"
    )]
    GrantThroughSymlink {
        path: String,
        link: String,
        real: String,
    },
    #[error(
        "{origin}: ssh key {spec:?}: {why}\nHint: give a public key file or a SHA256 \
        fingerprint, then the hosts it may log in to: --ssh-key \
        ~/.ssh/id_ed25519.pub@github.com"
    )]
    BadSshKey {
        origin: String,
        spec: String,
        why: String,
    },
    #[error(
        "{origin}: {key:?} is not a git config key\nHint: give section.name or \
        section.subsection.name, with * for any subsection or name: core.pager, filter.lfs.*"
    )]
    BadGitKey { origin: String, key: String },
    #[error(
        "{how} {path}: {denied} is denied, and a denial wins over a grant\nHint: to let the \
        program at it, lift the denial: add \"{denied}\" to \"allow_denied\" in the config (see \
        docs/config.md), then {how} it"
    )]
    GrantOfDenied {
        how: &'static str,
        path: String,
        denied: String,
    },
    #[error("{origin}: seed {path} is not inside a writable path\nHint: add its directory to \"write\", or drop the seed")]
    SeedOutsideWritable { origin: String, path: String },
    #[error("{origin}: path {path:?} contains a control character\nHint: write the path without control characters")]
    ControlCharacter { origin: String, path: String },
    #[error(
        "{origin}: path {path:?} contains `..`\nHint: write the path without `..` (sbx-shell \
        resolves paths once, and `..` could point anywhere after a rename)"
    )]
    ParentComponent { origin: String, path: String },
    #[error("{origin}: empty path\nHint: remove the empty entry")]
    EmptyPath { origin: String },
    #[error(
        "{origin}: {entry:?} is not a domain, `*.domain` or IP address (with an optional \
        `:port`)\nHint: write e.g. api.example.com, *.example.com or api.example.com:443"
    )]
    BadDomain { origin: String, entry: String },
    #[error(
        "{origin}: {entry:?} names this machine's loopback without a port\nHint: name the \
        service's port, e.g. localhost:5432 (only that port of the host's loopback is reached)"
    )]
    LoopbackWithoutPort { origin: String, entry: String },
    #[error(
        "{origin}: container user {user:?} is not a user or user:group\nHint: give a number or a \
        name for each, as `docker run --user` takes them: \"root\", \"1000\", \"node\", \
        \"1000:1000\""
    )]
    BadContainerUser { origin: String, user: String },
    #[error("{origin}: {name:?} is not a valid environment variable name\nHint: use letters, digits and `_`, not starting with a digit")]
    BadVariable { origin: String, name: String },
    #[error(
        "{origin}: --credential {name}: {why}\nHint: name the variable, then the hosts it goes \
        to: --credential GH_TOKEN@api.github.com,github.com"
    )]
    BadCredential {
        origin: String,
        name: String,
        why: String,
    },
    #[error(
        "--credential {name}@{hosts}: the network is full, so requests do not pass the proxy \
        that adds it\nHint: use an allow-list instead of --net full: --net allow={hosts} (the \
        credential's hosts are added to it)"
    )]
    CredentialWithFullNetwork { name: String, hosts: String },
}

/// Why an inherited variable is not handed to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Always dropped (`ALWAYS_DROPPED`: it would run code or bypass the sandbox).
    Always,
    /// Dropped by the policy (`environment.drop`).
    Configured,
    /// Its name looks secret.
    SecretName,
    /// Its value carries a credential (`credentials::in_value`).
    SecretValue(&'static str),
    /// It points at a host socket the sandbox hides (`sockets::variable_target`).
    Socket,
}

impl Dropped {
    /// Why, in a few words (`explain`).
    pub fn why(self) -> String {
        match self {
            Dropped::Always => "always dropped".into(),
            Dropped::Configured => "dropped by the policy".into(),
            Dropped::SecretName => "its name looks secret".into(),
            Dropped::SecretValue(what) => format!("its value is {what}"),
            Dropped::Socket => "it points at a host socket the sandbox hides".into(),
        }
    }
}

impl Environment {
    /// The environment the program gets: `inherited` minus what `verdict` drops, plus the
    /// configured variables, plus `SBX_SHELL=1` and `SBX_SANDBOX=<backend>`.
    /// `hidden_socket`: whether a variable points at a host socket the sandbox hides.
    pub fn apply(
        &self,
        inherited: impl IntoIterator<Item = (OsString, OsString)>,
        backend: &str,
        hidden_socket: &dyn Fn(&str, &OsStr) -> bool,
    ) -> Vec<(OsString, OsString)> {
        let mut out: BTreeMap<OsString, OsString> = inherited
            .into_iter()
            .filter(|(name, value)| {
                name.to_str()
                    .is_some_and(|name| self.verdict(name, value, hidden_socket).is_none())
            })
            .collect();
        for (name, value) in &self.set {
            out.insert(name.into(), value.into());
        }
        out.insert("SBX_SHELL".into(), "1".into());
        out.insert("SBX_SANDBOX".into(), backend.into());
        out.into_iter().collect()
    }

    /// Whether an inherited variable of this name is passed on, by its name alone.
    pub fn keeps(&self, name: &str) -> bool {
        self.by_name(name).is_none()
    }

    /// Why an inherited variable is dropped, or `None` when it is passed on. Allowing it by
    /// name (`--allow-env`) passes a secret name, a secret value and a socket variable, not
    /// an always-dropped or a configured drop.
    pub fn verdict(
        &self,
        name: &str,
        value: &OsStr,
        hidden_socket: &dyn Fn(&str, &OsStr) -> bool,
    ) -> Option<Dropped> {
        if let Some(dropped) = self.by_name(name) {
            return Some(dropped);
        }
        if self.allow.contains(name) {
            return None;
        }
        if let Some(what) = value
            .to_str()
            .and_then(crate::policy::credentials::in_value)
        {
            return Some(Dropped::SecretValue(what));
        }
        hidden_socket(name, value).then_some(Dropped::Socket)
    }

    fn by_name(&self, name: &str) -> Option<Dropped> {
        let matches = |pattern: &str| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        };
        if ALWAYS_DROPPED.iter().any(|p| matches(p)) {
            return Some(Dropped::Always);
        }
        if self.drop.iter().any(|p| matches(p)) {
            return Some(Dropped::Configured);
        }
        (looks_secret(name) && !self.allow.contains(name)).then_some(Dropped::SecretName)
    }
}

/// One credential the proxy adds (`policy::inject`): the variable that holds it on the host, and the hosts it goes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Injected {
    pub name: String,
    pub hosts: Vec<DomainRule>,
}

impl Injected {
    /// Whether a request to `host`:`port` gets this credential (an entry without a port:
    /// 443).
    pub fn goes_to(&self, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|rule| {
            let name = match rule.wildcard {
                true => host
                    .strip_suffix(rule.host.as_str())
                    .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.')),
                false => rule.host == host,
            };
            name && rule.port.unwrap_or(443) == port
        })
    }

    /// The hosts as written (`HOST`, `*.DOMAIN`, `HOST:PORT`), comma-separated.
    pub fn hosts_text(&self) -> String {
        let one = |r: &DomainRule| {
            let star = if r.wildcard { "*." } else { "" };
            match r.port {
                Some(port) => format!("{star}{}:{port}", r.host),
                None => format!("{star}{}", r.host),
            }
        };
        self.hosts.iter().map(one).collect::<Vec<_>>().join(",")
    }
}

/// Letters, digits and `_`, not starting with a digit: an environment variable's name.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*_API_KEY` and the like, in any case.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_SUBSTRINGS.iter().any(|s| upper.contains(s))
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
}
