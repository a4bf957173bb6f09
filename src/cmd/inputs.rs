//! Gathering the policy's inputs: built-in defaults, the user config, the profile, and the
//! command-line flags (turned into one more configuration layer). The one place that
//! reads configuration files; `policy::resolve` then merges without touching the disk
//! except through `host::RealFs` for symlinks.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::PolicyArgs;
use crate::host::RealFs;
use crate::policy::config::{
    AllowList, Config, ContainerConfig, Entry, LimitsConfig, NetworkConfig, NetworkMode,
};
use crate::policy::profiles;
use crate::policy::{self, Layer, PathContext, Policy};

/// The home directory: `$HOME`, else the passwd entry.
pub fn home_dir() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute()) {
        return Ok(PathBuf::from(home));
    }
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
        .ok_or_else(super::messages::no_home)
}

/// sbx-shell's configuration directory for this user.
pub fn config_dir(home: &Path) -> PathBuf {
    profiles::config_dir(
        std::env::var_os("XDG_CONFIG_HOME")
            .as_deref()
            .map(Path::new),
        home,
    )
}

/// The command line's policy options, with the agent profile for `program` when no profile
/// is named (`sbx-shell -- claude` runs with the claude profile); returns that agent's name
/// when it was picked so.
pub fn with_agent_profile(
    args: &PolicyArgs,
    program: Option<&std::ffi::OsStr>,
) -> (PolicyArgs, Option<&'static str>) {
    let mut args = args.clone();
    let picked = match (&args.profile, program.and_then(profiles::for_program)) {
        (None, Some(agent)) => {
            args.profile = Some(agent.to_string());
            Some(agent)
        }
        _ => None,
    };
    (args, picked)
}

/// Every layer, lowest precedence first, and the profile's name. `user_config` is the
/// user's config file, already read (`profiles::load_user_config`).
pub fn gather(
    args: &PolicyArgs,
    home: &Path,
    user_config: Option<Layer>,
) -> anyhow::Result<(String, Vec<Layer>)> {
    let dir = config_dir(home);
    let mut layers = vec![policy::defaults_layer()];
    layers.extend(user_config);
    let (name, profile) = profiles::load(
        args.profile.as_deref().unwrap_or(profiles::DEFAULT_PROFILE),
        &dir,
    )?;
    layers.push(profile);
    layers.push(flags_layer(args)?);
    Ok((name, layers))
}

/// Resolve the policy the flags, the user config and the profile ask for.
pub fn resolve(
    args: &PolicyArgs,
    home: &Path,
    user_config: Option<Layer>,
) -> anyhow::Result<Policy> {
    resolve_with_layers(args, home, user_config).map(|(policy, _, _)| policy)
}

/// The same, with the layers and the paths' context it was resolved from (`why`).
pub fn resolve_with_layers(
    args: &PolicyArgs,
    home: &Path,
    user_config: Option<Layer>,
) -> anyhow::Result<(Policy, Vec<Layer>, PathContext)> {
    let workspace = match &args.workspace {
        Some(dir) => {
            std::path::absolute(dir).with_context(|| format!("--workspace {}", dir.display()))?
        }
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let (name, layers) = gather(args, home, user_config)?;
    let ctx = PathContext {
        home: home.to_path_buf(),
        workspace,
        state: crate::sys::files::state_dir(home),
        config: config_dir(home),
        vars: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
        ssh_client: crate::host::ssh::client_files(home),
    };
    let policy = policy::resolve(&name, &layers, &ctx, &RealFs::default())?;
    Ok((policy, layers, ctx))
}

/// The command-line flags as a configuration layer (the highest).
pub fn flags_layer(args: &PolicyArgs) -> anyhow::Result<Layer> {
    let mut config = Config::default();
    config.filesystem.write = args.write.iter().map(|p| Entry::from(p.as_str())).collect();
    config.filesystem.read = args.read.iter().map(|p| Entry::from(p.as_str())).collect();
    config.filesystem.deny = args.deny.iter().map(|p| Entry::from(p.as_str())).collect();
    config.filesystem.sockets = args
        .allow_socket
        .iter()
        .map(|p| Entry::from(p.as_str()))
        .collect();
    config.clipboard = args.clipboard;
    config.network = net_flags(&args.net)?;
    config.environment.allow = args
        .allow_env
        .iter()
        .map(|n| Entry::from(n.as_str()))
        .collect();
    for spec in &args.credential {
        let (name, hosts) = crate::policy::inject::split_flag(spec)
            .ok_or_else(|| super::messages::credential_spelling(spec))?;
        let known = config.credentials.entry(name.to_string()).or_default();
        known.extend(hosts.into_iter().map(str::to_string));
    }
    config.git.allow_config = args
        .allow_git_config
        .iter()
        .map(|k| Entry::from(k.as_str()))
        .collect();
    config.ssh.keys = args
        .ssh_key
        .iter()
        .map(|k| Entry::from(k.as_str()))
        .collect();
    config.ssh.sign_commits = args.ssh_sign_commits.then_some(true);
    config.ssh.confirm = args.ssh_confirm.then_some(true);
    config.backend = args.backend;
    config.container = args.image.as_ref().map(|image| ContainerConfig {
        image: Some(image.clone()),
        ..ContainerConfig::default()
    });
    config.require = (!args.require.is_empty()).then(|| args.require.clone());
    config.nested_pty = args.no_nested_pty.then_some(false);
    config.keychain_access = args.keychain.then_some(true);
    config.private_home = args.no_private_home.then_some(false);
    config.limits = LimitsConfig {
        cpu_seconds: args.cpu_seconds,
        memory_mib: args.memory_mib,
        tmp_mib: args.tmp_mib,
        session_processes: args.session_processes,
        session_memory_mib: args.session_memory_mib,
        processes: args.processes,
        timeout_seconds: args.timeout.as_deref().map(parse_duration).transpose()?,
        ..LimitsConfig::default()
    };
    Ok(Layer {
        origin: "command line".into(),
        config,
    })
}

/// `none`, `full` or `allow=DOMAIN,DOMAIN…`.
pub fn parse_net(value: &str) -> anyhow::Result<NetworkConfig> {
    match value {
        "none" => Ok(NetworkConfig::Mode(NetworkMode::None)),
        "full" => Ok(NetworkConfig::Mode(NetworkMode::Full)),
        _ => {
            let domains = value
                .strip_prefix("allow=")
                .filter(|d| !d.is_empty())
                .ok_or_else(|| super::messages::net_spelling(value))?;
            let allow = domains.split(',').map(Entry::from).collect();
            Ok(NetworkConfig::Allow(AllowList {
                comment: None,
                allow,
            }))
        }
    }
}

/// Every `--net`, in order, as one layer's network: allow-lists add up, `none` and `full`
/// replace what came before (as layers do, `policy::domains`).
fn net_flags(values: &[String]) -> anyhow::Result<Option<NetworkConfig>> {
    let mut network = None;
    for value in values {
        network = Some(match (parse_net(value)?, network) {
            (NetworkConfig::Allow(more), Some(NetworkConfig::Allow(mut list))) => {
                list.allow.extend(more.allow);
                NetworkConfig::Allow(list)
            }
            (this, _) => this,
        });
    }
    Ok(network)
}

/// Seconds from `90`, `90s`, `30m` or `2h`.
pub fn parse_duration(value: &str) -> anyhow::Result<u64> {
    let (number, unit) = match value.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => value.split_at(at),
        None => (value, "s"),
    };
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => 0,
    };
    number
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0 && factor > 0)
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| super::messages::timeout_spelling(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_flags_add_up_in_order() {
        let hosts = |values: &[&str]| {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            match net_flags(&values).unwrap() {
                Some(NetworkConfig::Allow(list)) => list
                    .allow
                    .iter()
                    .map(|e| e.value().to_string())
                    .collect::<Vec<_>>(),
                other => vec![format!("{other:?}")],
            }
        };
        assert_eq!(
            hosts(&["allow=a.example.com", "allow=b.example.com,c.example.com"]),
            ["a.example.com", "b.example.com", "c.example.com"]
        );
        assert_eq!(
            hosts(&["allow=a.example.com", "none"]),
            ["Some(Mode(None))"]
        );
        assert_eq!(hosts(&["full", "allow=a.example.com"]), ["a.example.com"]);
        assert_eq!(hosts(&[]), ["None"]);
    }

    #[test]
    fn durations_take_a_unit() {
        assert_eq!(parse_duration("90").unwrap(), 90);
        assert_eq!(parse_duration("90s").unwrap(), 90);
        assert_eq!(parse_duration("30m").unwrap(), 1800);
        assert_eq!(parse_duration("2h").unwrap(), 7200);
        for bad in ["", "0", "1d", "m", "-5", "1.5h"] {
            assert!(
                parse_duration(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("Hint: "),
                "{bad}"
            );
        }
    }

    #[test]
    fn net_flags_become_network_config() {
        assert_eq!(
            parse_net("none").unwrap(),
            NetworkConfig::Mode(NetworkMode::None)
        );
        let NetworkConfig::Allow(list) = parse_net("allow=a.com,*.b.org").unwrap() else {
            panic!()
        };
        assert_eq!(
            list.allow.iter().map(|e| e.value()).collect::<Vec<_>>(),
            ["a.com", "*.b.org"]
        );
        assert!(parse_net("allow=").is_err());
        assert!(parse_net("some")
            .unwrap_err()
            .to_string()
            .contains("Hint: "));
    }

    #[test]
    fn flags_are_the_top_layer() {
        let args = PolicyArgs {
            write: vec!["/x".into()],
            no_nested_pty: true,
            keychain: true,
            timeout: Some("5m".into()),
            ..PolicyArgs::default()
        };
        let layer = flags_layer(&args).unwrap();
        assert_eq!(layer.config.nested_pty, Some(false));
        assert_eq!(layer.config.keychain_access, Some(true));
        assert_eq!(layer.config.limits.timeout_seconds, Some(300));
        assert_eq!(layer.config.filesystem.write[0].value(), "/x");
        // Flags not given leave lower layers alone.
        assert_eq!(
            flags_layer(&PolicyArgs::default()).unwrap().config,
            Config::default()
        );
    }
}
