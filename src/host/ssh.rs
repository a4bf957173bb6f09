//! The user's ssh client files as they are on this host: `~/.ssh/config` and what it
//! includes, the known_hosts files, the private keys `config` names and their public
//! halves (`policy::ssh::ClientFiles`). Read once, at the start; the parsing is pure
//! (`policy::ssh::directives`).

use std::path::{Path, PathBuf};

use crate::policy::ssh::{directives, where_it_leads, ClientFiles};

/// At most this many configuration files are read (`Include` can fan out).
const CONFIGS: usize = 32;

/// The files under `home` (the home sbx-shell runs with, as the policy's `~`).
pub fn client_files(home: &Path) -> ClientFiles {
    let dot_ssh = home.join(".ssh");
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_default();
    let mut files = ClientFiles {
        known_hosts: ["known_hosts", "known_hosts2"]
            .iter()
            .map(|n| dot_ssh.join(n))
            .chain(["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"].map(PathBuf::from))
            .collect(),
        ..ClientFiles::default()
    };
    let mut queue = vec![dot_ssh.join("config")];
    while let Some(config) = queue.pop() {
        if files.configs.len() >= CONFIGS || files.configs.contains(&config) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&config) else {
            continue;
        };
        files.configs.push(config);
        let named = directives(&text);
        let at = |a: &String| where_it_leads(a, home, &user, &dot_ssh);
        for (path, pattern) in named.includes.iter().map(at) {
            match pattern {
                false => queue.push(path),
                true => queue.extend(
                    std::fs::read_dir(&path)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                ),
            }
        }
        files.known_hosts.extend(
            named
                .known_hosts
                .iter()
                .map(at)
                .filter(|(_, p)| !p)
                .map(|(p, _)| p),
        );
        for (path, pattern) in named.identities.iter().map(at) {
            if !pattern {
                let mut public = path.clone().into_os_string();
                public.push(".pub");
                files.public.push(public.into());
            }
            files.identities.push(path);
        }
    }
    let exists = |p: &PathBuf| p.exists();
    files.known_hosts.retain(|p| p.is_file());
    files.known_hosts.dedup();
    files.identities.retain(exists);
    files.public.retain(|p| p.is_file());
    files
}
