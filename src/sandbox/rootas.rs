//! Root's program as another host id under bwrap: what is mounted id-mapped for it and how
//! it reaches what it was granted. Pure; `cmd::run` looks at the host and makes the user
//! namespace (`sys::userns`), the helper applies.
//!
//! The model: a root user's program runs as root of a user namespace whose root is one
//! host id that owns nothing, so every file only host root may read is refused by the
//! kernel's own permission check, however and whenever it became root-only. What the
//! policy grants the program — its writable trees, the home, the workspace, read grants,
//! what `allow_denied` lets it at, sockets — is mounted id-mapped through that namespace, where host root's files are the
//! program's own and what it makes belongs to host root. A grant behind a directory that
//! such an id may not search (a grant in `/root`, 0700) is reached through a scaffold: that
//! directory covered by a read-only tmpfs that holds only the ways to the grants in it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::config::FsMode;
use crate::policy::Filesystem;

/// Root's program as another host id, as sbx-shell made it ready (`cmd::run`): the user
/// namespace whose root is `id`. What is mounted for it follows from the policy as it is
/// when the helper is started (`mounts`): the session adds its own sockets late.
pub struct RootAs {
    pub userns: std::os::fd::OwnedFd,
    pub id: u32,
}

impl RootAs {
    /// For `-v`.
    pub fn describe(&self) -> String {
        format!(
            "sbx-shell: root's program runs as root of its own user namespace (host id {}): what only host root may read is refused by the kernel",
            self.id
        )
    }
}

/// The paths the helper mounts id-mapped (what `fs` grants that exists, bwrap's `/tmp` and
/// `/dev/shm`) and the scaffolds on the way to them and to `cwd`; `searchable` says
/// whether the program's id may search a directory of the host.
pub fn mounts(
    fs: &Filesystem,
    cwd: &Path,
    searchable: &dyn Fn(&Path) -> bool,
) -> (Vec<PathBuf>, Vec<Scaffold>) {
    let mut tops = granted(fs);
    tops.retain(|t| t.exists());
    let mut reach = tops.clone();
    reach.push(cwd.to_path_buf());
    let scaffolds = scaffolds(&reach, searchable);
    // bwrap's own: made by host root, written by every program.
    tops.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
    (tops, scaffolds)
}

/// A directory the program's id may not search, covered by an empty read-only tmpfs with
/// each of `keep` (copies of the host's trees, mounts below them included) at its path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scaffold {
    pub dir: PathBuf,
    pub keep: Vec<PathBuf>,
}

/// The host id a root user's program runs as: the first id from `FIRST` down that no
/// account or group names (`/etc/passwd`, `/etc/group`: their third field) and no range of
/// `/etc/subuid` or `/etc/subgid` (`name:start:count`) holds. The same on every start while
/// those files do not change, so that what one session left (a cache's layer) is the next
/// one's.
pub fn unused_id(passwd: &str, group: &str, subuid: &str, subgid: &str) -> u32 {
    const FIRST: u32 = 2_147_000_000;
    let named: Vec<u32> = [passwd, group]
        .iter()
        .flat_map(|f| f.lines())
        .filter_map(|l| l.split(':').nth(2)?.trim().parse().ok())
        .collect();
    let ranges: Vec<(u64, u64)> = [subuid, subgid]
        .iter()
        .flat_map(|f| f.lines())
        .filter_map(|l| {
            let mut f = l.split(':').skip(1);
            let start: u64 = f.next()?.trim().parse().ok()?;
            let count: u64 = f.next()?.trim().parse().ok()?;
            Some((start, start + count))
        })
        .collect();
    let taken = |id: u32| {
        named.contains(&id)
            || ranges
                .iter()
                .any(|(s, e)| (*s..*e).contains(&u64::from(id)))
    };
    (1..=FIRST).rev().find(|id| !taken(*id)).unwrap_or(FIRST)
}

/// What the policy grants the program, each path once, outermost only (one inside another
/// comes with it): the writable roots, the home, the workspace, read grants, what
/// `allow_denied` lets it at, and sockets.
pub fn granted(fs: &Filesystem) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs
        .writable_roots()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    paths.push(fs.home.real().to_path_buf());
    if fs.mode == FsMode::ReadOnly {
        paths.push(fs.workspace.real().to_path_buf());
    }
    paths.extend(fs.readable.iter().map(|p| p.real().to_path_buf()));
    paths.extend(fs.allowed.iter().map(|p| p.real().to_path_buf()));
    paths.extend(fs.sockets.iter().map(|p| p.real().to_path_buf()));
    paths.extend(fs.own_sockets.iter().cloned());
    outermost(paths)
}

/// `paths` sorted, each once, without those inside another.
pub fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let all = paths.clone();
    paths.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    paths
}

/// The scaffolds that make each of `reach` reachable: for each path, the outermost of its
/// ancestors (itself not included) that `searchable` says the program's id may not search;
/// the paths behind one directory kept together, outermost only. Ancestors are asked
/// outermost first, so a directory inside a scaffold is never asked about.
pub fn scaffolds(reach: &[PathBuf], searchable: &dyn Fn(&Path) -> bool) -> Vec<Scaffold> {
    let mut out: Vec<Scaffold> = Vec::new();
    for path in outermost(reach.to_vec()) {
        let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
        ancestors.reverse();
        let Some(dir) = ancestors.into_iter().find(|a| !searchable(a)) else {
            continue;
        };
        match out.iter_mut().find(|s| s.dir == dir) {
            Some(s) => s.keep.push(path.clone()),
            None => out.push(Scaffold {
                dir: dir.to_path_buf(),
                keep: vec![path.clone()],
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn what_the_policy_grants_is_mapped_outermost_only() {
        let policy = crate::policy::test_support::policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"read": ["/srv/data", "/srv/data/deep"], "write": ["/out"],
                "allow_denied": ["/etc/app.key"]}}"#,
        );
        let got = granted(&policy.filesystem);
        for want in ["/home/u", "/srv/data", "/out", "/etc/app.key"] {
            assert!(got.contains(&p(want)), "{want} in {got:?}");
        }
        // Inside the home, or inside another grant: mounted with it.
        assert!(!got.contains(&p("/home/u/proj")), "{got:?}");
        assert!(!got.contains(&p("/srv/data/deep")), "{got:?}");
    }

    #[test]
    fn paths_inside_another_go_with_it() {
        let got = outermost(vec![p("/w/a"), p("/w"), p("/x"), p("/w"), p("/wx")]);
        assert_eq!(got, vec![p("/w"), p("/wx"), p("/x")]);
    }

    #[test]
    fn a_grant_behind_a_closed_directory_is_kept_in_its_scaffold() {
        let closed = |d: &Path| d != Path::new("/root") && d != Path::new("/root/.cache/in");
        let reach = [
            p("/root/.cargo"),
            p("/root/.cache/in/agents"),
            p("/srv/open"),
            p("/root"),
        ];
        // `/root` itself granted: nothing inside it needs a way in.
        assert!(scaffolds(&reach, &closed).is_empty());
        let got = scaffolds(&reach[..3], &closed);
        assert_eq!(
            got,
            vec![Scaffold {
                dir: p("/root"),
                keep: vec![p("/root/.cache/in/agents"), p("/root/.cargo")],
            }]
        );
    }

    #[test]
    fn separate_closed_directories_get_a_scaffold_each() {
        let closed = |d: &Path| !d.ends_with("private");
        let reach = [p("/a/private/x"), p("/b/private/y/z"), p("/c/open")];
        let got = scaffolds(&reach, &closed);
        assert_eq!(
            got.iter().map(|s| s.dir.clone()).collect::<Vec<_>>(),
            vec![p("/a/private"), p("/b/private")]
        );
        assert_eq!(got[1].keep, vec![p("/b/private/y/z")]);
    }

    #[test]
    fn the_id_is_one_no_account_group_or_range_holds() {
        assert_eq!(unused_id("", "", "", ""), 2_147_000_000);
        let passwd = "root:x:0:0::/root:/bin/sh\nodd:x:2147000000:1::/:/bin/sh\n";
        assert_eq!(unused_id(passwd, "", "", ""), 2_146_999_999);
        let group = "g:x:2146999999:\n";
        assert_eq!(unused_id(passwd, group, "", ""), 2_146_999_998);
        // A range ending at the id (exclusive) leaves it free; one holding it does not.
        let subuid = "u:2146000000:999998\n";
        assert_eq!(unused_id(passwd, group, subuid, ""), 2_146_999_998);
        // Below the one range, the other: the first free id is under both.
        let subgid = "u:2146999000:1000\n";
        assert_eq!(unused_id(passwd, group, subuid, subgid), 2_145_999_999);
        // Lines that are not entries are passed over.
        assert_eq!(unused_id("#x\n::\n", "junk", "a:b:c", ":"), 2_147_000_000);
    }
}
