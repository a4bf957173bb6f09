//! The JSON configuration: the user's config file and every profile share this one format.
//!
//! Strict on purpose, since a typo in a sandbox policy must not silently widen it: unknown
//! fields and duplicate keys are errors, with the file, line and column and a `Hint:`.
//! Every object accepts a `"comment"` field so data files can explain themselves, and list
//! entries may be a plain string or `{"path"/"name": …, "comment": …}`.
//!
//! This module only reads text into types (`from_str`); finding and reading files is
//! `load`, and turning layers of configuration into a policy is `policy::resolve`.

pub use super::entry::{Entry, EntryValue, NameEntry, PathEntry};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A configuration layer: the user config file or a profile.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "sbx-shell configuration or profile")]
pub struct Config {
    /// Free text for the reader; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// One line saying what this profile is for (shown by `explain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The shell to run when no command is given (user config only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<PathBuf>,
    /// Which sandbox confines the program: "auto" (the default), "bwrap", "landlock",
    /// "docker", "podman", "seatbelt", or "none" (unconfined, with a warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendChoice>,
    /// The container backends ("docker", "podman"): what the container runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerConfig>,
    /// Layers that must run, or sbx-shell refuses to start ("bwrap", "landlock", "seccomp",
    /// "seatbelt"): without it, `auto` uses the strongest set this machine can run and
    /// names what is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require: Option<Vec<SandboxLayer>>,
    #[serde(default, skip_serializing_if = "FilesystemConfig::is_empty")]
    pub filesystem: FilesystemConfig,
    /// "none", "full", or {"allow": [domains]}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkConfig>,
    /// Let the sandboxed program open pseudo-terminals of its own (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_pty: Option<bool>,
    /// macOS: let the program use the login keychain (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keychain_access: Option<bool>,
    /// macOS: let the program reach the window server, pasteboard and HID events (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui: Option<bool>,
    /// What the program may do with the terminal's clipboard (OSC 52): "none" (the
    /// default), "write", or "read-write".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clipboard: Option<Clipboard>,
    /// Arguments put right after a program's name when that program runs directly (keyed
    /// by its file name): an agent's own switch that hands confinement to sbx-shell.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_map"
    )]
    pub program_args: BTreeMap<String, Vec<String>>,
    /// Keep shell and REPL history, viminfo and tool caches between sessions in a private
    /// home of this profile's, in sbx-shell's state directory (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_home: Option<bool>,
    #[serde(default, skip_serializing_if = "LimitsConfig::is_empty")]
    pub limits: LimitsConfig,
    #[serde(default, skip_serializing_if = "EnvironmentConfig::is_empty")]
    pub environment: EnvironmentConfig,
    #[serde(default, skip_serializing_if = "GitConfig::is_empty")]
    pub git: GitConfig,
    /// Credentials the proxy adds on the way out (`--credential`): each variable's name,
    /// with the hosts (HOST, *.DOMAIN, HOST:PORT) whose HTTPS requests get its real value
    /// in place of the placeholder the program sees. The hosts join the network allow-list.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_map"
    )]
    pub credentials: BTreeMap<String, Vec<String>>,
    /// ssh and git over ssh inside, through sbx-shell's filtered agent (`--ssh-key`).
    #[serde(
        default,
        skip_serializing_if = "crate::policy::ssh::SshConfig::is_empty"
    )]
    pub ssh: crate::policy::ssh::SshConfig,
}

/// What the program may write into the config of a git repository in a writable tree.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Keys the program may set besides those ordinary git work writes (`gitconfig::ALLOWED`):
    /// `section.name` or `section.subsection.name`, `*` for any subsection or name
    /// (`filter.lfs.*`, `core.pager`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_config: Vec<NameEntry>,
}

impl GitConfig {
    fn is_empty(&self) -> bool {
        *self == GitConfig::default()
    }
}

/// The terminal clipboard (OSC 52) as the relay lets it through.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Clipboard {
    /// Neither set nor read: both requests are dropped.
    #[default]
    None,
    /// Set, not read.
    Write,
    /// Set and read.
    ReadWrite,
}

impl Clipboard {
    /// As written in the configuration and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Clipboard::None => "none",
            Clipboard::Write => "write",
            Clipboard::ReadWrite => "read-write",
        }
    }
}

/// What the sandboxed program may read and write.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesystemConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FsMode>,
    /// Writable besides the workspace. `~` is the home directory; relative paths are inside
    /// the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<PathEntry>,
    /// Readable besides the system, the workspace and the writable roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<PathEntry>,
    /// Neither readable nor writable, added to the default set of credentials and private data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<PathEntry>,
    /// Readable but never writable, renamable or removable, added to the default set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<PathEntry>,
    /// Take these out of the default denied set (e.g. an agent's own credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_denied: Vec<PathEntry>,
    /// Host unix sockets the program may connect to (a directory: every socket in it);
    /// every other one is hidden. A path may begin with `$NAME` (`$SSH_AUTH_SOCK`,
    /// `$XDG_RUNTIME_DIR/bus`), taken from sbx-shell's environment; unset, the entry grants
    /// nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<PathEntry>,
    /// Files copied once, before the sandbox starts, when `path` (inside a writable path)
    /// is missing and `from` is a regular file: an agent pointed at a state file of its own
    /// starts with what it saved outside.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seed: Vec<SeedEntry>,
}

/// `{"path": "~/.claude/.claude.json", "from": "~/.claude.json"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeedEntry {
    pub path: String,
    pub from: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl FilesystemConfig {
    fn is_empty(&self) -> bool {
        *self == FilesystemConfig::default()
    }
}

/// One layer of the sandbox, as `--require` and `require` name it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Layer")]
pub enum SandboxLayer {
    /// Linux: bubblewrap's namespaces and mounts.
    Bwrap,
    /// Linux: Landlock filesystem and network rules.
    Landlock,
    /// Linux: the seccomp filter.
    Seccomp,
    /// macOS: the Seatbelt profile.
    Seatbelt,
    /// The judgement of every name the program makes in its writable trees: Seatbelt's
    /// rules on macOS; on Linux the guard's, from Linux 5.14 (before it, a protected path
    /// that does not exist at the start can be made).
    Names,
}

impl SandboxLayer {
    pub fn name(self) -> &'static str {
        match self {
            SandboxLayer::Bwrap => "bwrap",
            SandboxLayer::Landlock => "landlock",
            SandboxLayer::Seccomp => "seccomp",
            SandboxLayer::Seatbelt => "seatbelt",
            SandboxLayer::Names => "names",
        }
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// Linux: bwrap with Landlock and seccomp inside, else Landlock and seccomp alone, else
    /// refuse. macOS: Seatbelt.
    Auto,
    /// Linux: bubblewrap namespaces (with seccomp, and Landlock where the kernel has it).
    Bwrap,
    /// Linux: Landlock and seccomp alone.
    Landlock,
    /// macOS: Seatbelt.
    Seatbelt,
    /// Linux: a Docker container, with Landlock and seccomp inside.
    Docker,
    /// Linux: a Podman container, with Landlock and seccomp inside.
    Podman,
    /// No sandbox at all (a warning says so on every start).
    None,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Bwrap => "bwrap",
            BackendChoice::Landlock => "landlock",
            BackendChoice::Seatbelt => "seatbelt",
            BackendChoice::Docker => "docker",
            BackendChoice::Podman => "podman",
            BackendChoice::None => "none",
        }
    }
}

/// What a container backend runs.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerConfig {
    /// Free text for the reader; ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The image the program runs in, with sbx-shell's own executable mounted in for its
    /// helper. Without it, the host's own files, read-only, as the bwrap backend shows
    /// them (an empty image made locally, the host's directories mounted in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The engine's client to run, by name or path (default: `docker` or `podman`, as the
    /// backend says, found on `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<PathBuf>,
    /// The image's own files read-only (`--read-only`). Without an image they always are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_root: Option<bool>,
    /// More `run` options for the engine, each a whole argument (`"--cpus=2"`). Only those
    /// that leave the isolation as it is: CPU and memory shares, ulimits, labels and
    /// annotations, the host name, /dev/shm's size, the platform and the pull policy, extra
    /// hosts, the stop timeout. Every layer adds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_args: Vec<String>,
    /// Who the program is inside the container, as `docker run --user` takes it: `"root"`,
    /// `"1000"`, `"node"`, `"1000:1000"` (names from the container's own `/etc/passwd` and
    /// `/etc/group`). It is that user in a user namespace of its own, where that user
    /// stands for you: what it makes is still yours, and it can do nothing you cannot.
    /// Default: you, by your own ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// How much of the filesystem is writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FsMode {
    /// Nothing is writable but the writable roots given explicitly.
    ReadOnly,
    /// The workspace and the writable roots are writable.
    WorkspaceWrite,
    /// No filesystem restriction (denied and protected paths still apply).
    Unrestricted,
}

/// Network access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum NetworkConfig {
    /// "none" or "full".
    Mode(NetworkMode),
    /// Only these domains ("example.com", "*.example.com", optionally ":port").
    Allow(AllowList),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    None,
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub allow: Vec<NameEntry>,
}

impl<'de> Deserialize<'de> for NetworkConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NetworkVisitor;
        impl<'de> Visitor<'de> for NetworkVisitor {
            type Value = NetworkConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#""none", "full" or {"allow": [domains]}"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NetworkConfig, E> {
                match v {
                    "none" => Ok(NetworkConfig::Mode(NetworkMode::None)),
                    "full" => Ok(NetworkConfig::Mode(NetworkMode::Full)),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<NetworkConfig, M::Error> {
                AllowList::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(NetworkConfig::Allow)
            }
        }
        deserializer.deserialize_any(NetworkVisitor)
    }
}

/// Resource limits. Absent means: the default (open files raised, core dumps off, the
/// others unlimited).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// "raise" (to the hard limit, the default), "keep", or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<OpenFiles>,
    /// CPU seconds (RLIMIT_CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    /// Memory per process in MiB (RLIMIT_DATA: heap and private mappings; an address-space
    /// limit would break runtimes that reserve large virtual ranges, such as V8, Go, the JVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// Size of the sandbox's private /tmp and of its /dev/shm, each, in MiB (bwrap; default
    /// 2048). Writing past it fails with ENOSPC inside; nothing reaches the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tmp_mib: Option<u64>,
    /// Processes and threads of the whole session (the session cgroup's pids.max; needs a
    /// writable cgroup v2 hierarchy, else sbx-shell refuses to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_processes: Option<u64>,
    /// Memory of the whole session in MiB (the session cgroup's memory.max; needs a writable
    /// cgroup v2 hierarchy, else sbx-shell refuses to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_memory_mib: Option<u64>,
    /// Processes of this user (RLIMIT_NPROC: the kernel counts all of the user's processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// Allow core dumps (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_dumps: Option<bool>,
    /// Wall-clock limit of the whole session, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// Seconds between SIGTERM at the timeout and SIGKILL (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_grace_seconds: Option<u64>,
}

impl LimitsConfig {
    fn is_empty(&self) -> bool {
        *self == LimitsConfig::default()
    }
}

/// The soft open-file limit the program gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OpenFiles {
    /// "raise" or "keep".
    Mode(OpenFilesMode),
    /// Exactly this many (capped by the hard limit).
    Count(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OpenFilesMode {
    Raise,
    Keep,
}

impl<'de> Deserialize<'de> for OpenFiles {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OpenFilesVisitor;
        impl Visitor<'_> for OpenFilesVisitor {
            type Value = OpenFiles;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#""raise", "keep" or a number"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OpenFiles, E> {
                match v {
                    "raise" => Ok(OpenFiles::Mode(OpenFilesMode::Raise)),
                    "keep" => Ok(OpenFiles::Mode(OpenFilesMode::Keep)),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<OpenFiles, E> {
                Ok(OpenFiles::Count(v))
            }
        }
        deserializer.deserialize_any(OpenFilesVisitor)
    }
}

/// The environment handed to the program.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Variables passed on although their names look secret (`*TOKEN*`, `*_API_KEY` …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<NameEntry>,
    /// Variables to drop besides the always-dropped ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<NameEntry>,
    /// Variables to set; a value that begins with `~/` is in the home directory.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "unique_map"
    )]
    pub set: BTreeMap<String, String>,
}

impl EnvironmentConfig {
    fn is_empty(&self) -> bool {
        *self == EnvironmentConfig::default()
    }
}

/// A string map whose keys must be unique (serde_json would keep the last silently).
fn unique_map<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, V>, D::Error> {
    struct UniqueVisitor<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> Visitor<'de> for UniqueVisitor<V> {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let mut out = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, V>()? {
                if out.contains_key(&key) {
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(UniqueVisitor(std::marker::PhantomData))
}

/// A configuration file that could not be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{origin}:{line}:{column}: {message}\nHint: {hint}")]
    Invalid {
        origin: String,
        line: usize,
        column: usize,
        message: String,
        hint: String,
    },
    #[error("cannot read {path}: {reason}\nHint: check that the file exists and is readable")]
    Unreadable { path: PathBuf, reason: String },
}

/// Parse one configuration layer; `origin` names it in errors (a path or "profile NAME").
pub fn from_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
    serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_string();
        ConfigError::Invalid {
            origin: origin.to_string(),
            line: e.line(),
            column: e.column(),
            hint: hint_for(&e, &message),
            message,
        }
    })
}

fn hint_for(e: &serde_json::Error, message: &str) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => {
            "the file must be plain JSON: no comments and no trailing commas (use a \"comment\" field to explain)".into()
        }
        Category::Data if message.starts_with("unknown field") => {
            "check the spelling; `sbx-shell schema` prints every field".into()
        }
        Category::Data if message.starts_with("duplicate field") => {
            "each key may appear once in an object: remove or merge the other one".into()
        }
        Category::Data | Category::Io => "see `sbx-shell schema` for what each field takes".into(),
    }
}

/// Read and parse a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Unreadable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    from_str(&text, &path.display().to_string())
}

/// The JSON Schema of configuration files and profiles (committed as
/// `schema/config.schema.json`; a test keeps the two in step).
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(Config).to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        from_str(text, "test.json").unwrap_err().to_string()
    }

    #[test]
    fn a_clipboard_policy_is_named_as_it_is_written() {
        for policy in [Clipboard::None, Clipboard::Write, Clipboard::ReadWrite] {
            let json = serde_json::to_string(&policy).unwrap();
            assert_eq!(json, format!("\"{}\"", policy.name()));
            let flag = <Clipboard as clap::ValueEnum>::to_possible_value(&policy).unwrap();
            assert_eq!(flag.get_name(), policy.name());
        }
    }

    #[test]
    fn a_full_configuration_parses() {
        let text = r#"{
            "comment": "every field once",
            "description": "example",
            "filesystem": {
                "comment": "fs",
                "mode": "workspace-write",
                "write": ["~/.cache/x", {"path": "~/.x", "comment": "why"}],
                "read": ["/opt/data"], "deny": ["~/.secret"], "protect": [".env"],
                "allow_denied": ["~/.aws"]
            },
            "network": {"comment": "api only", "allow": ["api.example.com", {"name": "*.example.org:443", "comment": "cdn"}]},
            "nested_pty": false, "keychain_access": true, "gui": false,
            "limits": {"open_files": 4096, "cpu_seconds": 60, "memory_mib": 2048, "processes": 256,
                       "core_dumps": false, "timeout_seconds": 3600, "timeout_grace_seconds": 3},
            "environment": {"allow": ["GITHUB_TOKEN"], "drop": ["FOO"], "set": {"A": "1"}}
        }"#;
        let config = from_str(text, "x").unwrap();
        assert_eq!(config.filesystem.mode, Some(FsMode::WorkspaceWrite));
        assert_eq!(config.filesystem.write[1].value(), "~/.x");
        let Some(NetworkConfig::Allow(list)) = &config.network else {
            panic!("{config:?}")
        };
        assert_eq!(list.allow[1].value(), "*.example.org:443");
        assert_eq!(config.limits.open_files, Some(OpenFiles::Count(4096)));
        assert_eq!(config.environment.set["A"], "1");
        // What it serializes to parses back to the same thing.
        let again = from_str(&serde_json::to_string(&config).unwrap(), "again").unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn mistakes_are_errors_with_file_line_column_and_hint() {
        let cases = [
            (
                "{\n  \"netwrk\": \"none\"\n}",
                "test.json:2:10: unknown field `netwrk`",
                "check the spelling",
            ),
            (
                "{\"gui\": true,\n \"gui\": false}",
                "test.json:2:6: duplicate field `gui`",
                "appear once",
            ),
            (
                "{\"environment\": {\"set\": {\"A\": \"1\", \"A\": \"2\"}}}",
                "duplicate field `A`",
                "appear once",
            ),
            (
                "{\"network\": \"some\"}",
                "invalid value: string \"some\"",
                "sbx-shell schema",
            ),
            (
                "{\"filesystem\": {\"write\": [{\"path\": \"x\", \"coment\": \"y\"}]}}",
                "unknown field `coment`",
                "spelling",
            ),
            (
                "{\"filesystem\": {\"mode\": \"rw\"}}",
                "unknown variant `rw`",
                "sbx-shell schema",
            ),
            ("{\"gui\": true,}", "trailing comma", "no trailing commas"),
            ("// hi\n{}", "expected value", "no comments"),
        ];
        for (text, message, hint) in cases {
            let got = err(text);
            assert!(got.contains(message), "{text}: {got}");
            assert!(
                got.contains("Hint: ") && got.contains(hint),
                "{text}: {got}"
            );
        }
    }

    /// `UPDATE_GOLDEN=1 cargo test` rewrites the committed schema on purpose.
    #[test]
    fn the_committed_schema_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/config.schema.json");
        let generated = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
        if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap();
        assert!(
            committed == generated,
            "schema/config.schema.json is stale: run UPDATE_GOLDEN=1 cargo test"
        );
    }

    #[test]
    fn the_schema_forbids_unknown_fields_and_allows_comments() {
        let schema = schema();
        assert_eq!(schema["additionalProperties"], false);
        assert!(schema["properties"]["comment"].is_object());
        assert!(schema["$defs"]["FilesystemConfig"]["properties"]["comment"].is_object());
    }
}
