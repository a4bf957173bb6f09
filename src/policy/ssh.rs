//! ssh inside the sandbox: the `"ssh"` section (`--ssh-key`, `--ssh-sign-commits`,
//! `--ssh-confirm`) resolved into the keys the session's filtered agent passes and where
//! each may log in; and what of the user's ssh client configuration the program may read —
//! `known_hosts` and `config` (with what it includes), never a private key, wherever
//! `config`'s `IdentityFile` puts one. Pure: file contents come in as text.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::entry::NameEntry;

/// `"ssh"` in a config file or profile.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Keys the program's ssh and git may use through sbx-shell's filtered agent: a public
    /// key file ("~/.ssh/id_ed25519.pub") or a fingerprint ("SHA256:…"), optionally
    /// followed by "@HOST,HOST:PORT" (the hosts it may log in to). Your agent must hold them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<NameEntry>,
    /// The hosts a key without hosts of its own may log in to (HOST or HOST:PORT, as in
    /// known_hosts); none: any host the network allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<NameEntry>,
    /// Let the keys sign git commits and tags (`ssh-keygen -Y sign -n git`); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sign_commits: Option<bool>,
    /// Ask on your terminal before each signature; default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<bool>,
}

impl SshConfig {
    pub fn is_empty(&self) -> bool {
        *self == SshConfig::default()
    }
}

/// The user's ssh client files as found on this host (`host::ssh`): what the policy
/// reveals of them and denies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// `~/.ssh/config` and what it includes, those that exist.
    pub configs: Vec<PathBuf>,
    /// The known_hosts files (the user's and the system's), those that exist.
    pub known_hosts: Vec<PathBuf>,
    /// The private keys `config` names (`IdentityFile`), those that exist; where a name is
    /// filled in per host, the directory every such key lies in.
    pub identities: Vec<PathBuf>,
    /// The public halves beside the named keys, those that exist.
    pub public: Vec<PathBuf>,
}

/// The resolved ssh policy: present when a key is named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ssh {
    pub keys: Vec<SshKey>,
    /// Where the hosts' keys are read from.
    pub known_hosts: Vec<PathBuf>,
    pub sign_commits: bool,
    pub confirm: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SshKey {
    pub key: KeyRef,
    /// Where it may log in; empty: any host.
    pub hosts: Vec<SshHost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyRef {
    /// A public key file (its private key need not exist, and is never read).
    File(PathBuf),
    /// `SHA256:…`.
    Fingerprint(String),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SshHost {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl std::fmt::Display for SshHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl std::fmt::Display for KeyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRef::File(path) => write!(f, "{}", path.display()),
            KeyRef::Fingerprint(fp) => f.write_str(fp),
        }
    }
}

/// Every layer's `"ssh"`: keys and hosts gathered, each once; the switches from the last
/// layer that sets them. `None` when no key is named. `home` and `base` make key paths
/// absolute (`~/…`, and relative ones).
pub fn resolve<'a>(
    layers: impl Iterator<Item = (&'a str, &'a SshConfig)> + Clone,
    home: &Path,
    base: &Path,
) -> Result<Option<Ssh>, (String, String, String)> {
    let mut hosts: Vec<SshHost> = Vec::new();
    for (origin, c) in layers.clone() {
        for h in &c.hosts {
            let host = parse_host(h.value())
                .map_err(|why| (origin.to_string(), h.value().to_string(), why))?;
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
    }
    let mut keys: Vec<SshKey> = Vec::new();
    let (mut sign_commits, mut confirm) = (false, false);
    for (origin, c) in layers {
        for k in &c.keys {
            let mut key = parse_key(k.value(), home, base)
                .map_err(|why| (origin.to_string(), k.value().to_string(), why))?;
            if key.hosts.is_empty() {
                key.hosts = hosts.clone();
            }
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        sign_commits = c.sign_commits.unwrap_or(sign_commits);
        confirm = c.confirm.unwrap_or(confirm);
    }
    Ok((!keys.is_empty()).then_some(Ssh {
        keys,
        known_hosts: Vec::new(),
        sign_commits,
        confirm,
    }))
}

/// `PUBKEY_OR_FINGERPRINT[@HOST,…]`: what follows the last `@` is the host list when it
/// holds no `/` (a key file's name may hold an `@`: give such a file with its hosts).
pub fn parse_key(spec: &str, home: &Path, base: &Path) -> Result<SshKey, String> {
    let (key, hosts) = match spec.rsplit_once('@') {
        Some((key, hosts)) if !hosts.contains('/') => (key, Some(hosts)),
        _ => (spec, None),
    };
    let hosts = match hosts {
        Some(list) => list
            .split(',')
            .map(parse_host)
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let key = if let Some(b64) = key.strip_prefix("SHA256:") {
        let valid = b64.len() == 43
            && b64
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/');
        if !valid {
            return Err("not a SHA256 fingerprint (43 characters of base64 after SHA256:, as ssh-add -l shows)".into());
        }
        KeyRef::Fingerprint(key.to_string())
    } else if key.is_empty() {
        return Err("no key".into());
    } else {
        KeyRef::File(expand_home(key, home, base))
    };
    Ok(SshKey { key, hosts })
}

/// `HOST` or `HOST:PORT`: a name or address as ssh is given it.
pub fn parse_host(text: &str) -> Result<SshHost, String> {
    let (name, port) = match text.rsplit_once(':') {
        Some((name, port)) => (
            name,
            Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{port:?} is not a port"))?,
            ),
        ),
        None => (text, None),
    };
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
    if !valid {
        return Err(format!("{name:?} is not a host name (HOST or HOST:PORT)"));
    }
    Ok(SshHost {
        name: name.to_ascii_lowercase(),
        port,
    })
}

fn expand_home(path: &str, home: &Path, base: &Path) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if path == "~" => home.to_path_buf(),
        None => base.join(path),
    }
}

/// What one ssh_config text names that matters to the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    /// `IdentityFile`s: private keys, denied.
    pub identities: Vec<String>,
    /// `Include`d files (relative ones are in `~/.ssh`).
    pub includes: Vec<String>,
    /// `UserKnownHostsFile`s.
    pub known_hosts: Vec<String>,
}

/// The `IdentityFile`, `Include` and `UserKnownHostsFile` arguments of an ssh_config
/// text, in every `SshHost` and `Match` block (keywords in any case, `=` or blanks, quotes).
pub fn directives(text: &str) -> Directives {
    let mut out = Directives::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let split = line
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(line.len());
        let (keyword, rest) = line.split_at(split);
        let rest = rest.trim_start().strip_prefix('=').unwrap_or(rest).trim();
        let list = match keyword.to_ascii_lowercase().as_str() {
            "identityfile" => &mut out.identities,
            "include" => &mut out.includes,
            "userknownhostsfile" => &mut out.known_hosts,
            _ => continue,
        };
        list.extend(words(rest).into_iter().filter(|w| w != "none"));
    }
    out
}

/// ssh_config's arguments: blank-separated, `"…"` quoting.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut word = String::new();
        if chars.next_if_eq(&'"').is_some() {
            word.extend(chars.by_ref().take_while(|&c| c != '"'));
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

/// Where an ssh_config path argument leads: a path, or — when it holds a token ssh fills
/// in per host (`%h`, `${VAR}`) or a glob — the deepest directory every file it can name
/// lies in. `%d` and `~` are the home, `%u` the user; relative paths are in `dir`.
pub fn where_it_leads(arg: &str, home: &Path, user: &str, dir: &Path) -> (PathBuf, bool) {
    let text = arg
        .replace("%%", "\u{0}")
        .replace("%d", &home.display().to_string())
        .replace("%u", user);
    let text = match text.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("{}{rest}", home.display())
        }
        _ => text,
    };
    let path = if text.starts_with('/') {
        PathBuf::from(&text)
    } else {
        dir.join(&text)
    };
    let mut fixed = PathBuf::new();
    for part in path.components() {
        let s = part.as_os_str().to_string_lossy();
        if s.contains(['%', '$', '*', '?', '[']) {
            return (fixed, true);
        }
        fixed.push(part);
    }
    let fixed = PathBuf::from(fixed.to_string_lossy().replace('\u{0}', "%"));
    (fixed, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<NameEntry> {
        list.iter().map(|s| NameEntry::from(*s)).collect()
    }

    #[test]
    fn key_specs() {
        let (home, base) = (Path::new("/h"), Path::new("/w"));
        let fp = "SHA256:abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
        let k = parse_key(&format!("{fp}@github.com,git.test:2222"), home, base).unwrap();
        assert_eq!(k.key, KeyRef::Fingerprint(fp.into()));
        assert_eq!(
            k.hosts.iter().map(SshHost::to_string).collect::<Vec<_>>(),
            ["github.com", "git.test:2222"]
        );
        let k = parse_key("~/.ssh/id_ed25519.pub", home, base).unwrap();
        assert_eq!(k.key, KeyRef::File("/h/.ssh/id_ed25519.pub".into()));
        assert!(k.hosts.is_empty());
        let k = parse_key("keys/me@work.pub/x.pub", home, base).unwrap();
        assert_eq!(k.key, KeyRef::File("/w/keys/me@work.pub/x.pub".into()));
        assert!(parse_key("SHA256:short", home, base).is_err());
        assert!(parse_key("k.pub@bad host", home, base).is_err());
        assert!(parse_key("k.pub@h:99999", home, base).is_err());
        assert!(parse_key("@h", home, base).is_err());
    }

    #[test]
    fn layers_gather_keys_and_hosts_and_the_last_switch_wins() {
        let a = SshConfig {
            keys: entries(&["~/a.pub", "~/b.pub@x.test"]),
            hosts: entries(&["github.com"]),
            sign_commits: Some(true),
            ..SshConfig::default()
        };
        let b = SshConfig {
            keys: entries(&["~/a.pub"]),
            sign_commits: Some(false),
            confirm: Some(true),
            ..SshConfig::default()
        };
        let layers = [("one", &a), ("two", &b)];
        let ssh = resolve(layers.iter().copied(), Path::new("/h"), Path::new("/w"))
            .unwrap()
            .unwrap();
        assert_eq!(ssh.keys.len(), 2);
        assert_eq!(ssh.keys[0].hosts[0].name, "github.com");
        assert_eq!(ssh.keys[1].hosts[0].name, "x.test");
        assert!(!ssh.sign_commits && ssh.confirm);
        let none = SshConfig::default();
        assert_eq!(
            resolve([("x", &none)].into_iter(), Path::new("/h"), Path::new("/w")).unwrap(),
            None
        );
        let bad = SshConfig {
            keys: entries(&["SHA256:x"]),
            ..SshConfig::default()
        };
        let err = resolve(
            [("file", &bad)].into_iter(),
            Path::new("/h"),
            Path::new("/w"),
        )
        .unwrap_err();
        assert_eq!(err.0, "file");
    }

    #[test]
    fn client_configuration_names_its_files() {
        let text = "Include config.d/*\n# IdentityFile /commented\nHost a\n  IdentityFile ~/keys/a\n  identityfile=\"/with space/k\" /two\nMatch all\n UserKnownHostsFile ~/.ssh/kh none\n IdentityFile none\n";
        let f = directives(text);
        assert_eq!(f.identities, ["~/keys/a", "/with space/k", "/two"]);
        assert_eq!(f.includes, ["config.d/*"]);
        assert_eq!(f.known_hosts, ["~/.ssh/kh"]);
    }

    #[test]
    fn tokens_and_globs_lead_to_their_directory() {
        let (home, dir) = (Path::new("/h"), Path::new("/h/.ssh"));
        let at = |a| where_it_leads(a, home, "me", dir);
        assert_eq!(at("~/keys/a"), (PathBuf::from("/h/keys/a"), false));
        assert_eq!(at("%d/k_%u"), (PathBuf::from("/h/k_me"), false));
        assert_eq!(at("/keys/%h/id"), (PathBuf::from("/keys"), true));
        assert_eq!(at("config.d/*"), (PathBuf::from("/h/.ssh/config.d"), true));
        assert_eq!(at("/k/100%%"), (PathBuf::from("/k/100%"), false));
        assert_eq!(at("${KEYS}/a"), (PathBuf::from("/h/.ssh"), true));
    }
}
