//! The user's ssh client files as they are on this host: `~/.ssh/config` and what it
//! includes, the known_hosts files, the private keys `config` names and their public
//! halves (`policy::ssh::ClientFiles`). Read once, at the start; the parsing is pure
//! (`policy::ssh::directives`).
//!
//! Trust: a file whose real path lies in `~/.ssh` or `/etc/ssh` is the user's or the
//! system's own — no session can write there. A configuration file elsewhere (a dotfiles
//! checkout that a session could have written, included or linked) may only add private
//! keys to deny: what it includes, the known_hosts files and public keys it names are
//! not taken from it, so that nothing a sandboxed program wrote can make sbx-shell show it
//! a file of `~/.ssh` or take a host key from it.

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
    let own: Vec<PathBuf> = [dot_ssh.as_path(), Path::new("/etc/ssh")]
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let trusted = |p: &Path| {
        std::fs::canonicalize(p).is_ok_and(|real| own.iter().any(|d| real.starts_with(d)))
    };
    let mut queue = vec![dot_ssh.join("config")];
    let mut read = 0;
    while let Some(config) = queue.pop() {
        if read >= CONFIGS || files.configs.contains(&config) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&config) else {
            continue;
        };
        read += 1;
        let named = directives(&text);
        let at = |a: &String| where_it_leads(a, home, &user, &dot_ssh);
        // A file of the user's own: what it names is taken. Any other: its keys denied.
        if !trusted(&config) {
            files
                .identities
                .extend(named.identities.iter().map(at).map(|(p, _)| p));
            continue;
        }
        files.configs.push(config);
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
    files.known_hosts.retain(|p| p.is_file() && trusted(p));
    files.known_hosts.dedup();
    files.identities.retain(exists);
    files.public.retain(|p| p.is_file());
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_file_outside_dot_ssh_names_is_not_taken_but_its_keys_are_denied() {
        let dir = std::env::temp_dir().join(format!("sbx-ssh-files-{}", std::process::id()));
        let home = dir.join("home");
        let (dot, work) = (home.join(".ssh"), home.join("work"));
        std::fs::create_dir_all(&dot).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        for name in ["known_hosts", "id_a", "id_a.pub", "id_b"] {
            std::fs::write(dot.join(name), name).unwrap();
        }
        std::fs::write(work.join("kh"), "x").unwrap();
        std::fs::write(
            dot.join("config"),
            "Include ~/work/planted\nIdentityFile ~/.ssh/id_a\n",
        )
        .unwrap();
        // Written by a session (the workspace): it tries to make ~/.ssh/id_b shown.
        std::fs::write(
            work.join("planted"),
            "Include ~/.ssh/id_b\nUserKnownHostsFile ~/.ssh/id_b ~/work/kh\nIdentityFile ~/.ssh/id_b ~/work/key\n",
        )
        .unwrap();
        std::fs::write(work.join("key"), "k").unwrap();
        let files = client_files(&home);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files.configs, [dot.join("config")]);
        assert_eq!(files.known_hosts[0], dot.join("known_hosts"));
        assert!(!files
            .known_hosts
            .iter()
            .any(|p| p.ends_with("id_b") || p.ends_with("kh")));
        assert_eq!(files.public, [dot.join("id_a.pub")]);
        for key in [dot.join("id_a"), dot.join("id_b"), work.join("key")] {
            assert!(files.identities.contains(&key), "{key:?}");
        }
    }
}
