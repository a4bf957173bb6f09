//! The git repositories inside a writable tree, found before the sandbox starts (and again
//! when the session ends, for the report): git runs code that their metadata names
//! (hooks, `core.fsmonitor`, `core.pager` …) and follows the pointers in it (`gitdir:`
//! files, `commondir`, `objects/info/alternates`), so every one of them is protected, not
//! only the workspace's own `.git` (`sandbox::bwrap::mounts`).
//!
//! The walk follows no symlink, does not descend into the directories that hold only
//! what tools made (`SKIPPED`), and stops after `ENTRY_BUDGET` entries (the rest is then
//! said to be unscanned).

use std::path::{Path, PathBuf};

/// Directories not descended into: what package managers and build tools fill.
pub const SKIPPED: &[&str] = &["node_modules", "target", ".cache", "__pycache__", ".venv"];

/// At most this many directory entries are looked at, per tree.
pub const ENTRY_BUDGET: usize = 200_000;

/// One git directory: a repository's `.git`, a worktree's or a submodule's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GitDir {
    /// The git directory itself.
    pub dir: PathBuf,
    /// The `.git` file that points at it (`gitdir: …`), for a linked worktree or a
    /// submodule checked out with its metadata elsewhere.
    pub pointer: Option<PathBuf>,
    /// Its `sensitive` paths that existed when it was found: one missing by the time the
    /// sandbox is planned was moved meanwhile, and the session does not start.
    pub present: Vec<PathBuf>,
    /// Its `sensitive` paths reached through a symlink (the host's own arrangement, such
    /// as `hooks` leading to a directory of the work tree, or `objects` to a shared
    /// store), each with where it leads, even when nothing is there: git follows them, so
    /// the target is what is protected.
    pub links: Vec<(PathBuf, PathBuf)>,
}

impl GitDir {
    fn new(dir: &Path, pointer: Option<PathBuf>) -> GitDir {
        let present: Vec<PathBuf> = sensitive(dir)
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        let links = present
            .iter()
            .filter_map(|p| Some((p.clone(), target_of(p)?)))
            .filter(|(p, target)| p != target)
            .collect();
        GitDir {
            dir: dir.to_path_buf(),
            pointer,
            present,
            links,
        }
    }

    /// What is protected of it: its `sensitive` paths, each symlink among them replaced by
    /// where it leads.
    pub fn protected(&self) -> Vec<PathBuf> {
        sensitive(&self.dir)
            .into_iter()
            .map(|p| match self.links.iter().find(|(link, _)| *link == p) {
                Some((_, target)) => target.clone(),
                None => p,
            })
            .collect()
    }
}

/// What a scan found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repos {
    pub git_dirs: Vec<GitDir>,
    /// `.git` entries that are symlinks, with where each pointed: no mount holds a
    /// symlink in place, so one changed is named at the end where the guard does not
    /// judge names (`planted`).
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The walk stopped at the entry budget: there may be more.
    pub incomplete: bool,
}

/// The paths inside a git directory that make git run code or read another directory's:
/// protected read-only when they exist. `objects/info` holds `alternates`; a missing
/// `commondir` cannot be protected this way (the directory must stay writable for
/// git's lock files) and is watched for by the end-of-session report instead.
pub fn sensitive(git_dir: &Path) -> Vec<PathBuf> {
    [
        "config",
        "hooks",
        "commondir",
        "config.worktree",
        "objects/info",
    ]
    .iter()
    .map(|name| git_dir.join(name))
    .collect()
}

/// The trees `policy` lets the program write, as scanned: each writable root (not `/` when
/// unrestricted, not one inside another unless that one skips it, not the private home,
/// whose repositories are tools' caches), with whether the dot-directories at its top are
/// skipped (a sealed home's: read-only, but a `write` grant such as `~/.claude` is a tree
/// of its own).
pub fn trees(policy: &crate::policy::Policy) -> Vec<(PathBuf, bool)> {
    let fs = &policy.filesystem;
    let private = policy.private_home.as_ref().map(|h| h.dir.as_path());
    let roots = fs.writable_roots();
    roots
        .iter()
        .filter(|root| {
            // Inside another tree, it is walked with it — unless that tree is a sealed
            // home and this is under one of its dot entries, which that walk skips.
            let inside_another = roots.iter().any(|r| {
                r != *root
                    && root.starts_with(r)
                    && !(*r == fs.home.real()
                        && root
                            .strip_prefix(r)
                            .ok()
                            .and_then(|rest| rest.components().next())
                            .is_some_and(|c| c.as_os_str().as_encoded_bytes().starts_with(b".")))
            });
            **root != Path::new("/") && !inside_another && Some(**root) != private
        })
        .map(|root| (root.to_path_buf(), *root == fs.home.real()))
        .collect()
}

/// The git directories in the trees `policy` lets the program write (`trees`).
pub fn scan_writable(policy: &crate::policy::Policy) -> Repos {
    let mut all = Repos::default();
    for (root, skip_dots) in trees(policy) {
        let found = scan(&root, skip_dots);
        all.git_dirs.extend(found.git_dirs);
        all.links.extend(found.links);
        all.incomplete |= found.incomplete;
    }
    all.git_dirs.sort();
    all.git_dirs.dedup();
    all
}

/// The git directories under `root` (itself included), in path order; with `skip_dots`,
/// the dot-directories at its top are not descended into (a sealed home's: read-only).
pub fn scan(root: &Path, skip_dots: bool) -> Repos {
    let mut found = Repos::default();
    let mut budget = ENTRY_BUDGET;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                found.incomplete = true;
                found.git_dirs.sort();
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let path = entry.path();
            if name == ".git" {
                if kind.is_dir() {
                    add_git_dir(&mut found, &path, None);
                } else if kind.is_file() {
                    if let Some(target) = read_pointer(&path) {
                        add_git_dir(&mut found, &target, Some(path));
                    }
                } else if kind.is_symlink() {
                    if let Ok(target) = std::fs::read_link(&path) {
                        found.links.push((path, target));
                    }
                }
                continue;
            }
            let dot_at_top = skip_dots && dir == root && name.as_encoded_bytes().starts_with(b".");
            if kind.is_dir() && !dot_at_top && !SKIPPED.iter().any(|s| name == *s) {
                // A git directory by what it holds, whatever its name: a bare repository,
                // or a `.git` renamed to anything.
                if is_git_dir(&path) {
                    add_git_dir(&mut found, &path, None);
                } else {
                    stack.push(path);
                }
            }
        }
    }
    found.git_dirs.sort();
    found.git_dirs.dedup();
    found
}

/// A git directory, and the ones git keeps inside it: linked worktrees' and submodules'.
fn add_git_dir(found: &mut Repos, dir: &Path, pointer: Option<PathBuf>) {
    found.git_dirs.push(GitDir::new(dir, pointer));
    for inner in ["worktrees", "modules"] {
        let mut stack = vec![dir.join(inner)];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let path = entry.path();
                if path.join("HEAD").is_file() {
                    found.git_dirs.push(GitDir::new(&path, None));
                    // A submodule's own submodules live in its modules/.
                    stack.push(path.join("modules"));
                } else if inner == "modules" {
                    // Submodule names may contain slashes: nested directories.
                    stack.push(path);
                }
            }
        }
    }
}

/// Whether `dir` is a git directory (`gitdir::is_git_dir`).
fn is_git_dir(dir: &Path) -> bool {
    crate::protect::gitdir::is_git_dir(dir.file_name(), |n| dir.join(n).symlink_metadata().is_ok())
}

/// Where the symlink `link` leads, as the kernel follows it: its real path, or, when
/// nothing is there, the real path of the deepest directory that exists with the rest of
/// the way appended (`None`: a loop, or `..` in the missing part).
fn target_of(link: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(link) {
        return Some(real);
    }
    let mut at = link.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&at) {
            Ok(next) => at = at.parent()?.join(next),
            Err(_) => break,
        }
    }
    let mut rest = Vec::new();
    let mut base = at.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(base) {
            return Some(rest.iter().rev().fold(real, |p, r| p.join(r)));
        }
        rest.push(base.file_name()?.to_owned());
        base = base.parent()?;
    }
}

/// The directory a `.git` file points at (`gitdir: PATH`, relative to the file's
/// directory), when it reads as one.
fn read_pointer(file: &Path) -> Option<PathBuf> {
    // A regular file only: the sandbox may have left a FIFO there, whose open would wait.
    let text = crate::sys::files::read_regular(file, 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir: ")?.trim_end();
    let target = file.parent()?.join(target);
    std::fs::canonicalize(target).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_repositories_worktrees_submodules_and_pointer_files() {
        let root = std::env::temp_dir().join(format!("sbx-repos-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in [
            ".git/hooks",
            ".git/worktrees/wt",
            ".git/modules/lib/a/modules/inner",
            "sub/deep/.git",
            "node_modules/pkg/.git",
            "wt",
            "renamed/objects",
            "renamed/refs",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for head in [
            ".git/worktrees/wt/HEAD",
            ".git/modules/lib/a/HEAD",
            ".git/modules/lib/a/modules/inner/HEAD",
            "renamed/HEAD",
        ] {
            std::fs::write(root.join(head), "ref: refs/heads/main\n").unwrap();
        }
        std::fs::write(root.join("wt/.git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let found = scan(&root, false);
        let dirs: Vec<PathBuf> = found.git_dirs.iter().map(|g| g.dir.clone()).collect();
        for want in [
            ".git",
            ".git/worktrees/wt",
            ".git/modules/lib/a",
            ".git/modules/lib/a/modules/inner",
            "sub/deep/.git",
            "renamed",
        ] {
            assert!(dirs.contains(&root.join(want)), "{want}: {dirs:?}");
        }
        assert!(!dirs
            .iter()
            .any(|d| d.to_string_lossy().contains("node_modules")));
        assert!(found
            .git_dirs
            .iter()
            .any(|g| g.pointer.as_deref() == Some(&root.join("wt/.git"))
                && g.dir == root.join(".git/worktrees/wt")));
        assert!(!found.incomplete);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// `hooks` leading to a directory of the work tree (there or not yet), `objects` to a
    /// shared store: what is protected is where git goes.
    #[test]
    fn what_a_symlink_in_a_git_directory_leads_to_is_what_is_protected() {
        let root = std::env::temp_dir().join(format!("sbx-repos-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["a/.git/refs", "hk", "store/info", "b/.git/refs"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        let link =
            |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        link("../../hk", "a/.git/hooks");
        link("../../store", "a/.git/objects");
        link("../../missing/hooks", "b/.git/hooks");
        std::fs::create_dir(root.join("b/.git/objects")).unwrap();
        for head in ["a/.git/HEAD", "b/.git/HEAD"] {
            std::fs::write(root.join(head), "ref: refs/heads/main\n").unwrap();
        }
        let root = std::fs::canonicalize(&root).unwrap();
        let found = scan(&root, false);
        let git = |d: &str| {
            found
                .git_dirs
                .iter()
                .find(|g| g.dir == root.join(d))
                .unwrap_or_else(|| panic!("{d}: {found:?}"))
        };
        let (a, b) = (git("a/.git"), git("b/.git"));
        assert_eq!(
            a.links,
            [
                (root.join("a/.git/hooks"), root.join("hk")),
                (root.join("a/.git/objects/info"), root.join("store/info")),
            ]
        );
        assert!(a.protected().contains(&root.join("hk")));
        assert!(!a.protected().contains(&root.join("a/.git/hooks")));
        assert_eq!(
            b.links,
            [(root.join("b/.git/hooks"), root.join("missing/hooks"))]
        );
        assert!(a.protected().contains(&root.join("a/.git/config")));
        let _ = std::fs::remove_dir_all(&root);
    }
}
