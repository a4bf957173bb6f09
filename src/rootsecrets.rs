//! Root-only credentials: what a session started by root cannot read unless its policy
//! allows it.
//!
//! Inside the sandbox root keeps uid 0 but no capabilities, so it reads what uid 0 reads by
//! the permission bits alone: whatever root owns and does not let others read —
//! `/etc/shadow`, the SSH host keys, TLS private keys, Wi-Fi and VPN secrets, backups of
//! the shadow files. Those are found by that very rule in the places credentials live
//! (`TREES`): every file or directory there that others cannot read (a directory: enter)
//! but uid 0 can through its owner or group bits is denied, a directory as a whole (an
//! empty file holds nothing: locks are left alone). The
//! places, not the whole of `/etc`: a stat per entry costs about 2 µs here, and all of
//! `/etc` and `/var/lib` took 3 ms at every start. The policy's `allow_denied` takes a
//! path out.
//!
//! Root's own home secrets are the default denied paths of the home directory; when
//! `$HOME` is not root's home (`sudo -E`), those of root's home are denied too.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The trees walked, and how deep (1: the directory's own entries).
pub const TREES: &[(&str, usize)] = &[
    ("/etc", 1),
    ("/etc/ssh", 2),
    ("/etc/ssl", 2),
    ("/etc/pki", 3),
    ("/etc/NetworkManager", 3),
    ("/etc/wireguard", 2),
    ("/etc/letsencrypt", 3),
    ("/etc/ipsec.d", 2),
    ("/etc/openvpn", 3),
    ("/etc/ppp", 1),
    ("/etc/security", 1),
    ("/etc/sudoers.d", 1),
    ("/etc/libvirt", 2),
    ("/etc/docker", 1),
    ("/etc/cups", 2),
    ("/var/backups", 1),
    ("/var/lib", 2),
    ("/boot", 1),
];
/// The walk's bound on entries in all (a pathological tree costs no more).
const BUDGET: usize = 20_000;

/// Pure: whether a file of this owner, group and mode is root's only: uid 0 can read it
/// (a directory: enter it) through the owner or group bits, and others cannot.
pub fn root_only(uid: u32, gid: u32, mode: u32, dir: bool) -> bool {
    let (owner, group, others) = if dir {
        (0o100, 0o010, 0o001)
    } else {
        (0o400, 0o040, 0o004)
    };
    mode & others == 0 && (uid == 0 && mode & owner != 0 || gid == 0 && mode & group != 0)
}

/// The root-only files and directories of `TREES` on this host, and the default denied
/// paths of root's own home when `home` is not it (`denied_in_home` of each).
pub fn found(home: &Path, denied_in_home: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut budget = BUDGET;
    for (tree, depth) in TREES {
        // Inside a directory found already (denied whole): nothing more to find.
        if !out
            .iter()
            .any(|found: &PathBuf| Path::new(tree).starts_with(found))
        {
            let mut found = Vec::new();
            crate::files::walk_bounded(Path::new(tree), *depth, &mut budget, &mut |entry| {
                visit(entry, &mut found)
            });
            out.extend(found);
        }
    }
    out.sort();
    out.dedup();
    if let Some(root_home) = root_home().filter(|h| h != home) {
        out.extend(
            denied_in_home
                .iter()
                .map(|p| root_home.join(p))
                .filter(|p| p.symlink_metadata().is_ok()),
        );
    }
    out
}

/// uid 0's home directory, from the passwd database.
fn root_home() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(0))
        .ok()
        .flatten()
        .map(|u| u.dir)
}

/// Whether `entry` is root's only (`root_only`); symlinks are not.
fn visit(entry: &std::fs::DirEntry, out: &mut Vec<PathBuf>) -> bool {
    // A symlink (most of /etc/ssl) is known from the directory entry: no stat.
    if entry.file_type().map_or(true, |t| t.is_symlink()) {
        return false;
    }
    let Ok(meta) = entry.metadata() else {
        return false;
    };
    let dir = meta.is_dir();
    // An empty file holds no secret (dpkg's and apt's locks, `.pwd.lock`).
    let empty = !dir && meta.len() == 0;
    if !empty && root_only(meta.uid(), meta.gid(), meta.mode(), dir) {
        out.push(entry.path());
        return false;
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_only_is_what_uid_0_reads_and_others_do_not() {
        // /etc/shadow (root:shadow 0640), a host key (0600), a private-key dir (0710).
        assert!(root_only(0, 42, 0o100640, false));
        assert!(root_only(0, 0, 0o100600, false));
        assert!(root_only(0, 108, 0o040710, true));
        // Others read it: not a secret. Root cannot read it without capabilities: nothing
        // to deny (the sandbox cannot read it either).
        assert!(!root_only(0, 0, 0o100644, false));
        assert!(!root_only(0, 0, 0o040755, true));
        assert!(!root_only(0, 0, 0o040711, true));
        assert!(!root_only(999, 999, 0o100600, false));
        assert!(!root_only(0, 0, 0o100000, false));
        // Group root, group-readable.
        assert!(root_only(999, 0, 0o100640, false));
    }

    #[test]
    fn the_walk_finds_this_hosts_shadow() {
        let started = std::time::Instant::now();
        let found = found(Path::new("/root"), &[]);
        eprintln!("{} root-only paths in {:?}", found.len(), started.elapsed());
        assert!(found.contains(&PathBuf::from("/etc/shadow")), "{found:?}");
        assert!(!found.contains(&PathBuf::from("/etc/passwd")));
    }
}
