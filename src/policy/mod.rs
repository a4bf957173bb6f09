//! The resolved, canonical policy that every backend reads. Pure: no I/O (the filesystem is
//! asked through the `PathResolver` trait) and no `cfg(target_os)` — a Linux machine can
//! resolve and review a macOS policy and the reverse.
//!
//! Layers merge in precedence order: built-in defaults < user config < profile < flags
//! (flags arrive as one more `Config` layer). Scalars: the last layer that sets one wins.
//! Lists: every layer adds. Paths are resolved once, here: `~` expanded, relative paths
//! taken inside the workspace, `..` and control characters rejected, symlinks resolved with
//! both spellings kept when they differ (macOS's `/tmp` is `/private/tmp`).

pub mod config;
pub mod credentials;
pub mod gitconfig;
pub mod home;
pub mod launch;
pub mod profiles;
pub mod program;
pub mod shell;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::policy::config::{
    BackendChoice, Config, FsMode, NetworkConfig, NetworkMode, OpenFiles, OpenFilesMode,
};

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
    ".gitmodules",
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
    /// Root-only credentials on this host (`rootsecrets::found`), denied by default when
    /// sbx-shell runs as root; empty otherwise.
    pub root_secrets: Vec<PathBuf>,
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
    pub require: Vec<crate::policy::config::Layer>,
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
    /// The denied paths found on this host rather than named (root's credentials,
    /// `rootsecrets`): one that is gone, or replaced, by the time the sandbox starts (a
    /// lock file, a backup being rewritten) is no reason to stop; the rest of `denied` is
    /// checked against what sbx-shell saw.
    pub found_denied: Vec<PathBuf>,
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
    #[error("write {path}: it leads through the symlink {link}, inside a writable tree, where a sandboxed program could have planted it\nHint: grant the directory it leads to by its own path (--write {real}) if that is what you mean, or replace the symlink")]
    GrantThroughSymlink {
        path: String,
        link: String,
        real: String,
    },
    #[error("{origin}: {key:?} is not a git config key\nHint: give section.name or section.subsection.name, with * for any subsection or name: core.pager, filter.lfs.*")]
    BadGitKey { origin: String, key: String },
    #[error("{how} {path}: {denied} is denied, and a denial wins over a grant\nHint: to let the program at it, lift the denial: add \"{denied}\" to \"allow_denied\" in the config (see docs/config.md), then {how} it")]
    GrantOfDenied {
        how: &'static str,
        path: String,
        denied: String,
    },
    #[error("{origin}: seed {path} is not inside a writable path\nHint: add its directory to \"write\", or drop the seed")]
    SeedOutsideWritable { origin: String, path: String },
    #[error("{origin}: path {path:?} contains a control character\nHint: write the path without control characters")]
    ControlCharacter { origin: String, path: String },
    #[error("{origin}: path {path:?} contains `..`\nHint: write the path without `..` (sbx-shell resolves paths once, and `..` could point anywhere after a rename)")]
    ParentComponent { origin: String, path: String },
    #[error("{origin}: empty path\nHint: remove the empty entry")]
    EmptyPath { origin: String },
    #[error("{origin}: {entry:?} is not a domain, `*.domain` or IP address (with an optional `:port`)\nHint: write e.g. api.example.com, *.example.com or api.example.com:443")]
    BadDomain { origin: String, entry: String },
    #[error("{origin}: {name:?} is not a valid environment variable name\nHint: use letters, digits and `_`, not starting with a digit")]
    BadVariable { origin: String, name: String },
}

/// The built-in defaults, the lowest layer.
pub fn defaults_layer() -> Layer {
    let mut config = Config::default();
    config.filesystem.mode = Some(FsMode::WorkspaceWrite);
    config.network = Some(NetworkConfig::Mode(NetworkMode::None));
    config.nested_pty = Some(true);
    config.keychain_access = Some(false);
    config.gui = Some(false);
    config.limits.open_files = Some(OpenFiles::Mode(OpenFilesMode::Raise));
    config.limits.core_dumps = Some(false);
    Layer {
        origin: "built-in defaults".into(),
        config,
    }
}

/// Merge `layers` (lowest precedence first) into the policy for `profile`.
pub fn resolve(
    profile: &str,
    layers: &[Layer],
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<Policy, PolicyError> {
    let last =
        |pick: &dyn Fn(&Config) -> Option<bool>| layers.iter().rev().find_map(|l| pick(&l.config));
    let keychain_access = last(&|c| c.keychain_access).unwrap_or(false);
    let mut filesystem = resolve_filesystem(layers, ctx, fs)?;
    if keychain_access {
        // Granting the keychain means its files stop being denied (a deny would win).
        let keychains = resolve_path(KEYCHAINS, "keychain_access", ctx, fs)?;
        filesystem.denied.retain(|p| *p != keychains);
    }
    // By default where the workspace is writable; read-only means nothing is writable,
    // and unrestricted leaves the host's own files in use.
    let private_home = last(&|c| c.private_home)
        .unwrap_or(filesystem.mode == FsMode::WorkspaceWrite)
        .then(|| crate::policy::home::plan(&ctx.state, profile, filesystem.home.real()));
    if let Some(home) = &private_home {
        let dir = resolve_path(&home.dir.display().to_string(), "private home", ctx, fs)?;
        if let Some(denial) = filesystem
            .denied
            .iter()
            .find(|d| dir.path.starts_with(&d.path))
        {
            return Err(PolicyError::GrantOfDenied {
                how: "keep the private home in",
                path: dir.path.display().to_string(),
                denied: denial.path.display().to_string(),
            });
        }
        if !filesystem.writable.contains(&dir) {
            filesystem.writable.push(dir);
            filesystem.writable.sort();
        }
    }
    filesystem.seed = resolve_seeds(layers, ctx, fs, &filesystem)?;
    Ok(Policy {
        profile: profile.to_string(),
        backend: layers
            .iter()
            .rev()
            .find_map(|l| l.config.backend)
            .unwrap_or(BackendChoice::Auto),
        require: layers
            .iter()
            .rev()
            .find_map(|l| l.config.require.clone())
            .unwrap_or_default(),
        filesystem,
        network: resolve_network(layers)?,
        nested_pty: last(&|c| c.nested_pty).unwrap_or(true),
        keychain_access,
        gui: last(&|c| c.gui).unwrap_or(false),
        clipboard: layers
            .iter()
            .rev()
            .find_map(|l| l.config.clipboard)
            .unwrap_or(crate::policy::config::Clipboard::None),
        limits: resolve_limits(layers),
        environment: resolve_environment(layers, &ctx.home)?,
        git_config_allow: resolve_git_config_allow(layers)?,
        program_args: layers
            .iter()
            .flat_map(|l| l.config.program_args.clone())
            .collect(),
        private_home,
    })
}

fn resolve_filesystem(
    layers: &[Layer],
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<Filesystem, PolicyError> {
    let workspace = resolve_path(&ctx.workspace.display().to_string(), "workspace", ctx, fs)?;
    let home = resolve_path(&ctx.home.display().to_string(), "home", ctx, fs)?;
    let mode = layers
        .iter()
        .rev()
        .find_map(|l| l.config.filesystem.mode)
        .unwrap_or(FsMode::WorkspaceWrite);
    let collect = |pick: &dyn Fn(&Config) -> &Vec<crate::policy::config::PathEntry>| -> Result<Vec<ResolvedPath>, PolicyError> {
        let mut out = BTreeSet::new();
        for layer in layers {
            for entry in pick(&layer.config) {
                out.insert(resolve_path(entry.value(), &layer.origin, ctx, fs)?);
            }
        }
        Ok(out.into_iter().collect())
    };
    let builtin = |list: &[&str], origin: &str| -> Result<BTreeSet<ResolvedPath>, PolicyError> {
        list.iter()
            .map(|p| resolve_path(p, origin, ctx, fs))
            .collect()
    };
    let home_relative: Vec<String> = DEFAULT_DENIED.iter().map(|p| format!("~/{p}")).collect();
    let home_relative: Vec<&str> = home_relative.iter().map(String::as_str).collect();
    let mut denied = builtin(&home_relative, "default denied paths")?;
    let writable = collect(&|c| &c.filesystem.write)?;
    let readable = collect(&|c| &c.filesystem.read)?;
    let mut found_denied = Vec::new();
    for secret in &ctx.root_secrets {
        let secret = resolve_path(&secret.display().to_string(), "root-only files", ctx, fs)?;
        // Granted (or holding a grant): the grant says the program may have it.
        let granted = writable.iter().chain(&readable).any(|g| {
            let (g, s) = (g.real(), secret.real());
            s.starts_with(g) || g.starts_with(s)
        });
        if !granted {
            found_denied.push(secret.real().to_path_buf());
            denied.insert(secret);
        }
    }
    denied.extend(collect(&|c| &c.filesystem.deny)?);
    for allowed in collect(&|c| &c.filesystem.allow_denied)? {
        denied.remove(&allowed);
    }
    let mut protected = builtin(DEFAULT_PROTECTED, "default protected paths")?;
    // sbx-shell's own configuration, profiles and state, wherever XDG puts them: a session
    // that could write them could loosen the next one (the private homes, inside, are
    // writable grants deeper in).
    protected.extend(own_dirs(ctx, fs)?);
    protected.extend(collect(&|c| &c.filesystem.protect)?);
    // A denial wins over a grant; granting a denied path would do nothing, so it is an
    // error, never a silent no-op.
    for (granted, how) in writable
        .iter()
        .map(|p| (p, "write"))
        .chain(readable.iter().map(|p| (p, "read")))
    {
        if let Some(denial) = denied.iter().find(|d| granted.path.starts_with(&d.path)) {
            return Err(PolicyError::GrantOfDenied {
                how,
                path: granted.path.display().to_string(),
                denied: denial.path.display().to_string(),
            });
        }
    }
    check_grants_through_symlinks(&writable, (&workspace, mode, &home), ctx, fs)?;
    let mut sockets = BTreeSet::new();
    for layer in layers {
        for entry in &layer.config.filesystem.sockets {
            if let Some(raw) = expand_variable(entry.value(), &ctx.vars) {
                sockets.insert(resolve_path(&raw, &layer.origin, ctx, fs)?);
            }
        }
    }
    Ok(Filesystem {
        mode,
        home,
        workspace,
        writable,
        readable,
        denied: denied.into_iter().collect(),
        protected: protected.into_iter().collect(),
        sockets: sockets.into_iter().collect(),
        found_denied,
        seed: Vec::new(),
    })
}

/// Refuse a writable grant that leads through a symlink inside another writable tree: a
/// program of an earlier session could have planted it there to move the grant elsewhere
/// (and bwrap would be asked to make its mount point through it). sbx-shell's own private
/// home (in its state directory, which no session can write) and a dot entry at the top of
/// a home workspace (which no session can make) are the host's own arrangement.
fn check_grants_through_symlinks(
    writable: &[ResolvedPath],
    (workspace, mode, home): (&ResolvedPath, FsMode, &ResolvedPath),
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<(), PolicyError> {
    let trees: Vec<&Path> = writable
        .iter()
        .map(|w| w.path.as_path())
        .chain((mode == FsMode::WorkspaceWrite).then_some(workspace.path.as_path()))
        .collect();
    for w in writable.iter().filter(|w| !w.path.starts_with(&ctx.state)) {
        for tree in trees
            .iter()
            .filter(|t| **t != w.path && w.path.starts_with(t))
        {
            let Some(link) = symlink_below(&w.path, tree, fs) else {
                continue;
            };
            let dot_at_home_top = link.parent() == Some(home.path.as_path())
                && link
                    .file_name()
                    .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
            if !dot_at_home_top {
                return Err(PolicyError::GrantThroughSymlink {
                    path: w.path.display().to_string(),
                    link: link.display().to_string(),
                    real: w.real().display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The first symlink on `path` below `tree` (`path` inside `tree`), as `fs` resolves
/// them; `None` when there is none, or the rest is missing.
fn symlink_below(path: &Path, tree: &Path, fs: &impl PathResolver) -> Option<PathBuf> {
    let rest = path.strip_prefix(tree).ok()?;
    let mut at = tree.to_path_buf();
    let mut real = fs.real_path(tree)?;
    for part in rest.components() {
        at.push(part);
        let next = fs.real_path(&at)?;
        if next != real.join(part) {
            return Some(at);
        }
        real = next;
    }
    None
}

/// `raw` with a leading `$NAME` or `${NAME}` replaced by its value in `vars`; `None` when
/// that variable is unset or empty (the entry then names nothing).
fn expand_variable(raw: &str, vars: &BTreeMap<String, String>) -> Option<String> {
    let Some(rest) = raw.strip_prefix('$') else {
        return Some(raw.to_string());
    };
    let (name, after) = match rest.strip_prefix('{') {
        Some(braced) => braced.split_once('}')?,
        None => {
            let end = rest
                .find(|c: char| c != '_' && !c.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            rest.split_at(end)
        }
    };
    let value = vars.get(name).filter(|v| !v.is_empty())?;
    Some(format!("{value}{after}"))
}

/// sbx-shell's own directories: configuration (with the profiles) and state.
pub fn own_dirs(
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<Vec<ResolvedPath>, PolicyError> {
    [&ctx.config, &ctx.state]
        .into_iter()
        .map(|dir| resolve_path(&dir.display().to_string(), "sbx-shell's own files", ctx, fs))
        .collect()
}

/// Every layer's seeds; each must land inside a writable path (it is made before the
/// sandbox starts, by sbx-shell, and must not widen what the program can write) and come
/// from outside the denied paths (a copy would hand the program what it may not read).
fn resolve_seeds(
    layers: &[Layer],
    ctx: &PathContext,
    fs: &impl PathResolver,
    filesystem: &Filesystem,
) -> Result<Vec<Seed>, PolicyError> {
    let writable = &filesystem.writable;
    let mut out = BTreeSet::new();
    for layer in layers {
        for entry in &layer.config.filesystem.seed {
            let path = resolve_path(&entry.path, &layer.origin, ctx, fs)?;
            let from = resolve_path(&entry.from, &layer.origin, ctx, fs)?;
            if !writable
                .iter()
                .any(|w| path.path.starts_with(&w.path) && path.path != w.path)
            {
                return Err(PolicyError::SeedOutsideWritable {
                    origin: layer.origin.clone(),
                    path: path.path.display().to_string(),
                });
            }
            if let Some(denial) = filesystem.denied.iter().find(|d| {
                from.spellings()
                    .iter()
                    .any(|f| d.spellings().iter().any(|d| f.starts_with(d)))
            }) {
                return Err(PolicyError::GrantOfDenied {
                    how: "seed from",
                    path: from.path.display().to_string(),
                    denied: denial.path.display().to_string(),
                });
            }
            out.insert(Seed { path, from });
        }
    }
    Ok(out.into_iter().collect())
}

fn resolve_network(layers: &[Layer]) -> Result<Network, PolicyError> {
    let Some((origin, network)) = layers
        .iter()
        .rev()
        .find_map(|l| l.config.network.as_ref().map(|n| (&l.origin, n)))
    else {
        return Ok(Network::None);
    };
    match network {
        NetworkConfig::Mode(NetworkMode::None) => Ok(Network::None),
        NetworkConfig::Mode(NetworkMode::Full) => Ok(Network::Full),
        NetworkConfig::Allow(list) => {
            let rules: BTreeSet<DomainRule> = list
                .allow
                .iter()
                .map(|e| parse_domain_rule(e.value(), origin))
                .collect::<Result<_, _>>()?;
            Ok(Network::Allow(rules.into_iter().collect()))
        }
    }
}

fn resolve_limits(layers: &[Layer]) -> Limits {
    fn last<T>(layers: &[Layer], pick: impl Fn(&Config) -> Option<T>) -> Option<T> {
        layers.iter().rev().find_map(|l| pick(&l.config))
    }
    Limits {
        open_files: last(layers, |c| c.limits.open_files)
            .unwrap_or(OpenFiles::Mode(OpenFilesMode::Raise)),
        cpu_seconds: last(layers, |c| c.limits.cpu_seconds),
        memory_mib: last(layers, |c| c.limits.memory_mib),
        session_processes: last(layers, |c| c.limits.session_processes),
        session_memory_mib: last(layers, |c| c.limits.session_memory_mib),
        tmp_mib: last(layers, |c| c.limits.tmp_mib)
            .unwrap_or(DEFAULT_TMP_MIB)
            .max(1),
        processes: last(layers, |c| c.limits.processes),
        core_dumps: last(layers, |c| c.limits.core_dumps).unwrap_or(false),
        timeout_seconds: last(layers, |c| c.limits.timeout_seconds),
        timeout_grace_seconds: last(layers, |c| c.limits.timeout_grace_seconds)
            .unwrap_or(DEFAULT_TIMEOUT_GRACE),
    }
}

/// Every layer's `git.allow_config`, each pattern checked.
fn resolve_git_config_allow(layers: &[Layer]) -> Result<BTreeSet<String>, PolicyError> {
    let mut all = BTreeSet::new();
    for layer in layers {
        for entry in &layer.config.git.allow_config {
            let pattern = entry.value();
            if !crate::policy::gitconfig::valid_pattern(pattern) {
                return Err(PolicyError::BadGitKey {
                    origin: layer.origin.clone(),
                    key: pattern.to_string(),
                });
            }
            all.insert(pattern.to_string());
        }
    }
    Ok(all)
}

fn resolve_environment(layers: &[Layer], home: &Path) -> Result<Environment, PolicyError> {
    let mut env = Environment {
        allow: BTreeSet::new(),
        drop: BTreeSet::new(),
        set: BTreeMap::new(),
    };
    for layer in layers {
        let c = &layer.config.environment;
        let check = |name: &str, pattern_ok: bool| {
            let bare = if pattern_ok {
                name.strip_suffix('*').unwrap_or(name)
            } else {
                name
            };
            if is_variable_name(bare) {
                Ok(name.to_string())
            } else {
                Err(PolicyError::BadVariable {
                    origin: layer.origin.clone(),
                    name: name.to_string(),
                })
            }
        };
        for entry in &c.allow {
            env.allow.insert(check(entry.value(), false)?);
        }
        for entry in &c.drop {
            env.drop.insert(check(entry.value(), true)?);
        }
        for (name, value) in &c.set {
            let value = match value.strip_prefix("~/") {
                Some(rest) => home.join(rest).display().to_string(),
                None => value.clone(),
            };
            env.set.insert(check(name, false)?, value);
        }
    }
    Ok(env)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Resolve one path as written in `origin`.
pub fn resolve_path(
    raw: &str,
    origin: &str,
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<ResolvedPath, PolicyError> {
    let err_path = || raw.to_string();
    if raw.is_empty() {
        return Err(PolicyError::EmptyPath {
            origin: origin.into(),
        });
    }
    if raw.chars().any(char::is_control) {
        return Err(PolicyError::ControlCharacter {
            origin: origin.into(),
            path: err_path(),
        });
    }
    let absolute = if raw == "~" {
        ctx.home.clone()
    } else if let Some(rest) = raw.strip_prefix("~/") {
        ctx.home.join(rest)
    } else {
        ctx.workspace.join(raw) // join keeps an absolute `raw` as it is
    };
    let mut path = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                return Err(PolicyError::ParentComponent {
                    origin: origin.into(),
                    path: err_path(),
                })
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    let real = real_path_of(&path, fs).filter(|real| *real != path);
    Ok(ResolvedPath { path, real })
}

/// The real path of `path`, even when it does not exist yet: its deepest existing ancestor
/// resolved, and the rest appended.
fn real_path_of(path: &Path, fs: &impl PathResolver) -> Option<PathBuf> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Some(real) = fs.real_path(existing) {
            return Some(
                rest.iter()
                    .rev()
                    .fold(real, |acc: PathBuf, part| acc.join(part)),
            );
        }
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

/// "example.com", "*.example.com", "1.2.3.4", "[::1]", each with an optional ":port".
pub fn parse_domain_rule(entry: &str, origin: &str) -> Result<DomainRule, PolicyError> {
    let bad = || PolicyError::BadDomain {
        origin: origin.to_string(),
        entry: entry.to_string(),
    };
    let (host, port) = split_port(entry).ok_or_else(bad)?;
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(name) => (true, name),
        None => (false, host),
    };
    let name = name.to_ascii_lowercase();
    let is_ip = name.parse::<std::net::IpAddr>().is_ok();
    let is_domain = name.len() <= 253
        && name.contains('.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if (is_ip && wildcard) || !(is_ip || is_domain) {
        return Err(bad());
    }
    Ok(DomainRule {
        host: name,
        wildcard,
        port,
    })
}

fn split_port(entry: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok().filter(|p| *p > 0)?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            Some((host, Some(port.parse().ok().filter(|p| *p > 0)?)))
        }
        _ => Some((entry, None)),
    }
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

/// `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*_API_KEY` and the like, in any case.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_SUBSTRINGS.iter().any(|s| upper.contains(s))
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
}

#[cfg(test)]
pub mod test_support;
#[cfg(test)]
mod tests;
