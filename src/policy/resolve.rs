//! Resolving the layers (defaults, user config, profile, flags) into one `Policy`: paths
//! made absolute and checked through the `PathResolver`, grants merged, the network,
//! limits and environment decided. Pure: the filesystem is only asked, never changed.

pub use super::domains::parse_domain_rule;
use super::model::{
    Environment, Filesystem, Layer, Limits, PathContext, PathResolver, Policy, PolicyError,
    ResolvedPath, Seed, DEFAULT_DENIED, DEFAULT_PROTECTED, DEFAULT_TIMEOUT_GRACE, DEFAULT_TMP_MIB,
    KEYCHAINS,
};
use crate::policy::config::{
    BackendChoice, Config, FsMode, NetworkConfig, NetworkMode, OpenFiles, OpenFilesMode,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

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
    let private_home =
        resolve_private_home(profile, last(&|c| c.private_home), ctx, fs, &mut filesystem)?;
    filesystem.seed = resolve_seeds(layers, ctx, fs, &filesystem)?;
    let ssh = resolve_ssh(layers, ctx, fs, &mut filesystem)?;
    let (network, injected) = super::inject::network_and_credentials(layers)?;
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
        container: super::container::resolve(
            &layers
                .iter()
                .map(|l| (l.origin.as_str(), l.config.container.as_ref()))
                .collect::<Vec<_>>(),
        )
        .map_err(|(origin, user)| PolicyError::BadContainerUser { origin, user })?,
        filesystem,
        network,
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
        ssh,
        program_args: layers
            .iter()
            .flat_map(|l| l.config.program_args.clone())
            .collect(),
        private_home,
        injected,
    })
}

/// The private home (`policy::home`), its directory among the writable paths: by default
/// where the workspace is writable; read-only means nothing is writable, and unrestricted
/// leaves the host's own files in use.
fn resolve_private_home(
    profile: &str,
    asked: Option<bool>,
    ctx: &PathContext,
    fs: &impl PathResolver,
    filesystem: &mut Filesystem,
) -> Result<Option<crate::policy::home::PrivateHome>, PolicyError> {
    let private_home = asked
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
    Ok(private_home)
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
    let trees: Vec<&Path> = match mode {
        FsMode::Unrestricted => vec![Path::new("/")],
        FsMode::WorkspaceWrite => vec![workspace.real()],
        FsMode::ReadOnly => Vec::new(),
    };
    let trees: Vec<&Path> = trees
        .into_iter()
        .chain(writable.iter().map(ResolvedPath::real))
        .collect();
    deny_ssh_identities(&mut denied, &mut found_denied, &trees, &home, ctx, fs)?;
    denied.extend(collect(&|c| &c.filesystem.deny)?);
    let allowed = collect(&|c| &c.filesystem.allow_denied)?;
    for path in &allowed {
        denied.remove(path);
    }
    let mut protected = builtin(DEFAULT_PROTECTED, "default protected paths")?;
    // sbx-shell's own configuration, profiles and state, wherever XDG puts them: a session
    // that could write them could loosen the next one (the private homes, inside, are
    // writable grants deeper in).
    protected.extend(own_dirs(ctx, fs)?);
    protected.extend(collect(&|c| &c.filesystem.protect)?);
    check_no_grant_of_denied(&denied, &writable, &readable)?;
    check_grants_through_symlinks(&writable, &workspace, mode, &home, ctx, fs)?;
    let sockets = resolve_sockets(layers, ctx, fs)?;
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
        allowed,
        own_sockets: Vec::new(),
        own_dirs: Vec::new(),
        private_tmp_writable: true,
        revealed: Vec::new(),
        views: Vec::new(),
        seed: Vec::new(),
    })
}

/// The private keys the user's ssh config names (`IdentityFile`, `policy::ssh`), denied
/// wherever they are, found on this host — except where the denial
/// cannot hold: inside a writable tree (the program could make it again; Landlock alone
/// refuses such a policy) or over the home itself.
fn deny_ssh_identities(
    denied: &mut BTreeSet<ResolvedPath>,
    found_denied: &mut Vec<PathBuf>,
    trees: &[&Path],
    home: &ResolvedPath,
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<(), PolicyError> {
    for key in &ctx.ssh_client.identities {
        let key = resolve_path(
            &key.display().to_string(),
            "ssh config's IdentityFile",
            ctx,
            fs,
        )?;
        let covered = denied.iter().any(|d| key.real().starts_with(d.real()));
        let cannot =
            trees.iter().any(|t| key.real().starts_with(t)) || home.real().starts_with(key.real());
        if !covered && !cannot {
            found_denied.push(key.real().to_path_buf());
            denied.insert(key);
        }
    }
    Ok(())
}

/// The `"ssh"` layers resolved (`policy::ssh::resolve`); with a key named, the user's ssh
/// `config` (and what it includes), the known_hosts files and the named keys' public
/// halves revealed where a denied path holds them, so that ssh inside finds its hosts.
fn resolve_ssh(
    layers: &[Layer],
    ctx: &PathContext,
    fs: &impl PathResolver,
    filesystem: &mut Filesystem,
) -> Result<Option<crate::policy::ssh::Ssh>, PolicyError> {
    let ssh = crate::policy::ssh::resolve(
        layers.iter().map(|l| (l.origin.as_str(), &l.config.ssh)),
        &ctx.home,
        &ctx.workspace,
    )
    .map_err(|(origin, spec, why)| PolicyError::BadSshKey { origin, spec, why })?;
    let Some(mut ssh) = ssh else {
        return Ok(None);
    };
    let client = &ctx.ssh_client;
    ssh.known_hosts = client.known_hosts.clone();
    for path in client
        .configs
        .iter()
        .chain(&client.known_hosts)
        .chain(&client.public)
    {
        let path = resolve_path(&path.display().to_string(), "ssh client files", ctx, fs)?;
        // Shown where a denied directory holds it, unless it leads (a symlink) into
        // another denied path.
        let Some(holder) = filesystem.denied.iter().find(|d| {
            path.path.starts_with(&d.path) && path.path != d.path
                || path.real().starts_with(d.real()) && path.real() != d.real()
        }) else {
            continue;
        };
        let elsewhere = filesystem
            .denied
            .iter()
            .any(|d| path.real().starts_with(d.real()) && !d.real().starts_with(holder.real()));
        if !elsewhere && !filesystem.revealed.contains(&path) {
            filesystem.revealed.push(path);
        }
    }
    Ok(Some(ssh))
}

/// A denial wins over a grant; granting a denied path would do nothing, so it is an error,
/// never a silent no-op.
fn check_no_grant_of_denied(
    denied: &BTreeSet<ResolvedPath>,
    writable: &[ResolvedPath],
    readable: &[ResolvedPath],
) -> Result<(), PolicyError> {
    let grants = writable
        .iter()
        .map(|p| (p, "write"))
        .chain(readable.iter().map(|p| (p, "read")));
    for (granted, how) in grants {
        if let Some(denial) = denied.iter().find(|d| granted.path.starts_with(&d.path)) {
            return Err(PolicyError::GrantOfDenied {
                how,
                path: granted.path.display().to_string(),
                denied: denial.path.display().to_string(),
            });
        }
    }
    Ok(())
}

/// The sockets the layers grant, each variable expanded (one naming an unset variable is
/// no grant).
fn resolve_sockets(
    layers: &[Layer],
    ctx: &PathContext,
    fs: &impl PathResolver,
) -> Result<BTreeSet<ResolvedPath>, PolicyError> {
    let mut sockets = BTreeSet::new();
    for layer in layers {
        for entry in &layer.config.filesystem.sockets {
            if let Some(raw) = expand_variable(entry.value(), &ctx.vars) {
                sockets.insert(resolve_path(&raw, &layer.origin, ctx, fs)?);
            }
        }
    }
    Ok(sockets)
}

/// Refuse a writable grant that leads through a symlink inside another writable tree: a
/// program of an earlier session could have planted it there to move the grant elsewhere
/// (and bwrap would be asked to make its mount point through it). sbx-shell's own private
/// home (in its state directory, which no session can write) and a dot entry at the top of
/// a home workspace (which no session can make) are the host's own arrangement.
fn check_grants_through_symlinks(
    writable: &[ResolvedPath],
    workspace: &ResolvedPath,
    mode: FsMode,
    home: &ResolvedPath,
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
            if super::model::is_variable_name(bare) {
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

#[cfg(test)]
mod tests;
